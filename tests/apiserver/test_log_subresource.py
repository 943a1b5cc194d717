"""pods/log argument checks with kube-apiserver's messages, and dispatch to
the node agent that serves the pod's logs (init containers included)."""

import pytest

from nanokube.machinery.errors import APIError
from nanokube.apiserver.subresources import Subresources
from tests.controllers import make_stack


@pytest.fixture
async def env():
    s = await make_stack()
    sub = Subresources(s.rest)
    asked = []

    async def reader(namespace, pod, container, query):
        asked.append((namespace, pod, container))
        sub.kubelet_query = query
        return f"log of {container}\n".encode() if pod != "elsewhere" else None
    sub.log_readers.append(reader)
    pods = s.client.resource("", "v1", "pods")
    for name in ("two", "elsewhere"):
        await pods.create({"metadata": {"name": name, "namespace": "default"}, "spec": {
            "nodeName": "n1", "initContainers": [{"name": "setup", "image": "busybox"}],
            "containers": [{"name": "app", "image": "busybox"}, {"name": "side", "image": "busybox"}]}})
    yield sub, asked
    await s.close()


async def test_container_choice_and_messages(env):
    sub, asked = env
    with pytest.raises(APIError) as e:
        await sub.log("default", "two", {})
    assert e.value.code == 400 and e.value.message == (
        "a container name must be specified for pod two, choose one of: [setup app side]")
    with pytest.raises(APIError) as e:
        await sub.log("default", "two", {"container": "nope"})
    assert e.value.message == "container nope is not valid for pod two"
    assert await sub.log("default", "two", {"container": "setup"}) == b"log of setup\n"
    assert await sub.log("default", "two", {"container": "side"}) == b"log of side\n"
    assert asked == [("default", "two", "setup"), ("default", "two", "side")]
    with pytest.raises(APIError) as e:
        await sub.log("default", "elsewhere", {"container": "app"})
    assert 'no node agent serves logs for node "n1"' in e.value.message


async def test_the_node_reads_the_options_as_the_kubelet_is_sent_them(env):
    """LogLocation's query: true bools as "true" (a bool is false only as "0" or "false"),
    numbers as they parsed, sinceTime in RFC 3339 at UTC, the rest left out."""
    sub, _ = env
    await sub.log("default", "two", {"container": "app", "follow": "yes", "previous": "FALSE", "timestamps": "",
                                      "sinceTime": "2026-01-01T01:00:00.5+01:00", "tailLines": "+7", "limitBytes": "10"})
    assert sub.kubelet_query == {"follow": "true", "timestamps": "true", "sinceTime": "2026-01-01T00:00:00Z",
                                 "tailLines": "7", "limitBytes": "10"}
