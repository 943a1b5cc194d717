"""`kubectl debug` and `kubectl patch --subresource resize` against `nanokube up --runtime
process`: the ephemeral container runs as a process of the pod (its output through `kubectl
logs -c`, its stdin through `kubectl debug -i`, busybox's shell when no command is given), and a
resize is allocated and reported by the node.

Skipped (loudly) only without root, `ip` or `nft`, like test_streaming."""

from __future__ import annotations

import json

import pytest

from nanokube.node.runtime.netns import list_netns
from tests.e2e.conftest import PROCESS_RUNTIME, process_cluster, wait_for

pytestmark = PROCESS_RUNTIME

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "app", "namespace": "default"},
       "spec": {"terminationGracePeriodSeconds": 1, "containers": [{
           "name": "app", "image": "busybox", "command": ["sleep", "600"],
           "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "200m", "memory": "128Mi"}}}]}}


@pytest.fixture(scope="module")
def c(store_url):
    with process_cluster(store_url, "debug", ("--cluster", "examples/clusters/process-3cpu.yaml")) as cluster:
        cluster.kubectl("apply", "-f", "-", input=json.dumps(POD))
        wait_for(lambda: cluster.kubectl_json("get", "pod", "app")["status"].get("phase") == "Running", 90,
                 "app running")
        yield cluster


def test_kubectl_debug_runs_a_process_in_the_pod(c):
    c.kubectl("debug", "app", "--image=busybox", "--container=probe", "--target=app", "--",
              "sh", "-c", "echo debugging $HOSTNAME")

    def done():
        st = c.kubectl_json("get", "pod", "app")["status"]
        return any((s.get("state") or {}).get("terminated", {}).get("exitCode") == 0
                   for s in st.get("ephemeralContainerStatuses") or ())
    wait_for(done, 60, "the debug container ran")
    assert c.kubectl("logs", "app", "-c", "probe").stdout == "debugging app\n"
    out = c.kubectl("debug", "-i", "app", "--image=busybox", "--container=talk", "--",
                    "sh", "-c", "read line; echo got $line", input="hello\n", timeout=90).stdout
    assert "got hello" in out
    # no command: busybox's default, a shell, reads what the user types (it was the entrypoint's
    # stand-in, which read nothing: kubectl waited for ever)
    out = c.kubectl("debug", "-i", "app", "--image=busybox", "--container=shell",
                    input="echo shell in $HOSTNAME; exit\n", timeout=90).stdout
    assert "shell in app" in out


def test_kubectl_patch_resize_is_actuated_by_the_process_node(c):
    patch = {"spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "150m"},
                                                                   "limits": {"cpu": "300m"}}}]}}
    c.kubectl("patch", "pod", "app", "--subresource", "resize", "-p", json.dumps(patch))

    def resized():
        st = c.kubectl_json("get", "pod", "app")["status"]
        [s] = st["containerStatuses"]
        return s if (s.get("resources") or {}).get("limits", {}).get("cpu") == "300m" else None
    s = wait_for(resized, 60, "the resize actuated")
    assert s["allocatedResources"] == {"cpu": "150m", "memory": "64Mi"} and s["restartCount"] == 0


def test_kubectl_debug_node_runs_in_the_nodes_network(c):
    """`kubectl debug node/N` makes a hostNetwork pod: the kubelet gives it the node's IP (podIP is
    the hostIP) and runs it in the node's network and UTS namespaces, so it sees the node's address
    and hostname, and reaches the node's own listeners (kube-proxy's /healthz on :10256); its
    hostPath volume of / at /host is the host's root, so the node's files are there, and the node
    reports the host's OS image (its /etc/os-release PRETTY_NAME) and kernel, as a kubelet does."""
    node = c.kubectl_json("get", "pod", "app")["spec"]["nodeName"]
    marker = c.data_dir / "host-marker"
    marker.write_text("from the host\n")
    out = c.kubectl("debug", "-i", f"node/{node}", "--image=busybox", "--",
                    "sh", "-c", "grep ^PRETTY_NAME= /host/etc/os-release; uname -r; "
                    "hostname; echo HOSTNAME=$HOSTNAME; ip -4 -o addr show dev eth0; "
                    f"wget -q -O- http://127.0.0.1:10256/healthz; echo; cat /host{marker}",
                    input="", timeout=90).stdout
    assert out.endswith("\nfrom the host\n"), out
    node_ip = next(a["address"] for a in c.kubectl_json("get", "node", node)["status"]["addresses"]
                   if a["type"] == "InternalIP")
    pod = next(p for p in c.kubectl_json("get", "pods")["items"] if p["metadata"]["name"].startswith("node-debugger-"))
    # all it wrote (attach shows only what is written once kubectl has attached)
    out = c.kubectl("logs", pod["metadata"]["name"]).stdout
    assert f"{node}\nHOSTNAME={node}\n" in out and f" inet {node_ip}/" in out and '"nodeEligible":true' in out, out
    info = c.kubectl_json("get", "node", node)["status"]["nodeInfo"]
    assert out.startswith("PRETTY_NAME=") and out.splitlines()[0].split("=", 1)[1].strip('"') == info["osImage"], out
    assert out.splitlines()[1] == info["kernelVersion"] and info["osImage"] != "nanokube simulated node"
    st = pod["status"]
    assert (st["podIP"], st["podIPs"], st["hostIP"]) == (node_ip, [{"ip": node_ip}], node_ip)
    c.kubectl("delete", "pod", pod["metadata"]["name"], "--timeout=60s")
    assert {f"{c.prefix}n{i}" for i in range(3)} <= set(list_netns()), "the nodes' namespaces outlive the pod"


def test_a_host_path_volume_is_checked_by_its_type(c, tmp_path):
    """hostPath types as the kubelet checks them: DirectoryOrCreate makes the directory, which the
    container then sees; Directory on a path that is no directory fails the mount (FailedMount)."""
    made, missing = tmp_path / "made", tmp_path / "missing"
    pods = [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": {
        "restartPolicy": "Never", "volumes": [{"name": "data", "hostPath": {"path": str(path), "type": kind}}],
        "containers": [{"name": "main", "image": "busybox", "command": ["sh", "-c", "ls -ld /data | cut -c1"],
                        "volumeMounts": [{"name": "data", "mountPath": "/data"}]}]}}
            for name, path, kind in (("made", made, "DirectoryOrCreate"), ("missing", missing, "Directory"))]
    c.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": pods}))
    wait_for(lambda: c.kubectl_json("get", "pod", "made")["status"].get("phase") == "Succeeded", 60, "made ran")
    assert made.is_dir() and c.kubectl("logs", "made").stdout == "d\n"
    message = f'MountVolume.SetUp failed for volume "data" : hostPath type check failed: {missing} is not a directory'
    wait_for(lambda: message in c.kubectl("events", "--for", "pod/missing").stdout, 60, "FailedMount")
    assert not missing.exists()
    c.kubectl("delete", "pod", "made", "missing", "--wait=false")


def test_the_process_node_reports_the_volume_mounts(c):
    """A process container's status lists its mounts as the kubelet's does (VolumeMountStatus)."""
    [cs] = c.kubectl_json("get", "pod", "app")["status"]["containerStatuses"]
    [token] = cs["volumeMounts"]
    assert token["name"].startswith("kube-api-access-")
    assert token | {"name": ""} == {"name": "", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                                    "readOnly": True, "recursiveReadOnly": "Disabled"}
