"""The process runtime's status writes survive a server that fails some of them, as the kubelet's
status manager's do: a pod whose processes ran still ends Succeeded, a running one becomes Ready."""

from tests.controllers import eventually
from tests.node.runtime.test_process import phase, pod, status_of
from tests.node.runtime.test_process import env  # noqa: F401 (the fixture)
from tests.node.test_status_manager import fail_status_writes, server_error, too_many_requests, unavailable


def ready(st: dict) -> bool:
    return st.get("phase") == "Running" and any(c["type"] == "Ready" and c["status"] == "True"
                                                for c in st.get("conditions") or ())


async def test_a_pod_whose_status_writes_fail_at_first_still_succeeds(env):  # noqa: F811 (the fixture)
    client, _, _ = env
    pods = client.resource("", "v1", "pods")
    refused = fail_status_writes(client.rest, "env", [server_error, too_many_requests, unavailable])
    await pods.create(pod("env", ["sh", "-c", "env | grep KUBERNETES_ | sort"]))
    p = await eventually(status_of(pods, "env", phase("Succeeded")))
    assert len(refused) == 3
    term = p["status"]["containerStatuses"][0]["state"]["terminated"]
    assert term["exitCode"] == 0 and term["reason"] == "Completed"


async def test_a_running_pod_becomes_ready_once_its_status_lands(env):  # noqa: F811 (the fixture)
    client, _, _ = env
    pods = client.resource("", "v1", "pods")
    refused = fail_status_writes(client.rest, "web", [server_error, too_many_requests])
    await pods.create(pod("web", ["sleep", "600"], restart="Always", grace=1))
    await eventually(status_of(pods, "web", ready))
    assert len(refused) == 2
