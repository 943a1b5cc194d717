"""Resource limits under `nanokube up --runtime process`, seen as upstream shows them: a container
over its memory limit is OOM-killed and restarted (`kubectl describe` says OOMKilled, exit code
137, its restart count), and a resize's new cpu limit is the container cgroup's CFS quota at once.

Skipped (loudly) only without root, `ip` or `nft`, as the other process-runtime tests, or where
this host gives the runtime no memory or cpu cgroup controller."""

from __future__ import annotations

import json
import os

import pytest

from nanokube.node.runtime.cgroup import own_cgroup_dir
from nanokube.node.runtime.limits import v2_controllers
from nanokube.node.runtime.netns import cluster_tag
from tests.e2e.conftest import PROCESS_RUNTIME, process_cluster, wait_for

pytestmark = PROCESS_RUNTIME

LIMITED = {"cpu": "200m", "memory": "48Mi"}
POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "hog", "namespace": "default"},
       "spec": {"terminationGracePeriodSeconds": 1, "containers": [{
           "name": "hog", "image": "python", "resources": {"requests": LIMITED, "limits": LIMITED},
           "command": ["python3", "-c", "import sys, time; print('start', flush=True); "
                       "b = b'x' * (200 << 20) if len(sys.argv) < 2 else b''; time.sleep(600)"]}]}}


def controller_dir(c, name: str) -> tuple[str, int]:
    """The runtime's tree in the hierarchy with controller `name`, and its version (`up` inherits
    this process's cgroups)."""
    tag = f"nanokube-{cluster_tag(str(c.data_dir))}"
    base = own_cgroup_dir()
    if base and name in v2_controllers(os.path.join(base, tag)):
        return os.path.join(base, tag), 2
    if (v1 := own_cgroup_dir(name)) and os.path.isdir(os.path.join(v1, tag)):
        return os.path.join(v1, tag), 1
    pytest.skip(f"SKIPPED LOUDLY: no {name} cgroup controller for the runtime here")


@pytest.fixture(scope="module")
def c(store_url):
    with process_cluster(store_url, "limits") as cluster:
        yield cluster


def test_kubectl_describe_shows_an_oom_killed_container_restarted(c):
    controller_dir(c, "memory")
    c.kubectl("apply", "-f", "-", input=json.dumps(POD))

    def restarted():
        [s] = c.kubectl_json("get", "pod", "hog")["status"].get("containerStatuses") or [{}]
        return s if s.get("restartCount", 0) >= 1 and "terminated" in (s.get("lastState") or {}) else None
    s = wait_for(restarted, 90, "hog OOM-killed and restarted")
    assert (s["lastState"]["terminated"]["reason"], s["lastState"]["terminated"]["exitCode"]) == ("OOMKilled", 137)
    out = c.kubectl("describe", "pod", "hog").stdout
    last = out[out.index("Last State:"):]
    assert "Reason:       OOMKilled" in last and "Exit Code:    137" in last
    assert "QoS Class:                   Guaranteed" in out
    assert c.kubectl("logs", "hog", "--previous").stdout.strip() == "start"


def test_a_resized_cpu_limit_is_the_containers_quota(c):
    root, version = controller_dir(c, "cpu")
    pod = json.loads(json.dumps(POD).replace('"hog"', '"calm"'))
    pod["spec"]["containers"][0]["command"].append("calm")  # no hogging
    pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "100m"}, "limits": {"cpu": "200m"}}
    c.kubectl("apply", "-f", "-", input=json.dumps(pod))
    uid = wait_for(lambda: (p := c.kubectl_json("get", "pod", "calm"))["status"].get("phase") == "Running"
                   and p["metadata"]["uid"], 90, "calm running")
    quota = os.path.join(root, f"kubepods/burstable/pod{uid}/calm", "cpu.max" if version == 2 else "cpu.cfs_quota_us")

    def read() -> str:
        with open(quota) as f:
            return f.read().split()[0]
    assert read() == "20000"
    patch = {"spec": {"containers": [{"name": "calm", "resources": {"requests": {"cpu": "150m"},
                                                                    "limits": {"cpu": "300m"}}}]}}
    c.kubectl("patch", "pod", "calm", "--subresource", "resize", "-p", json.dumps(patch))
    wait_for(lambda: read() == "30000", 60, "the new quota")
    [s] = c.kubectl_json("get", "pod", "calm")["status"]["containerStatuses"]
    assert s["restartCount"] == 0
