"""`nanokube kubelet` as upstream's kubelet behaves by default and with its node-side features: on
flags alone it lets anonymous requests in and authorizes everything (its command line's legacy
defaults), says each configuration flag given is deprecated, registers with --register-with-taints,
and runs the static pods of --pod-manifest-path as mirror pods kubectl sees (recreated when deleted,
replaced when their file changes, gone with their file); with a file's registerNode false it waits
for an admin to create its Node, and its evictionHard reaches the node's eviction manager. Everything
it makes is removed after it (the session's cluster)."""

from __future__ import annotations

import json
import signal
import socket
import ssl
import subprocess
import sys
import urllib.request

import pytest
import yaml

from tests.e2e.conftest import wait_for


@pytest.fixture(scope="module")
def cluster(session_cluster):
    return session_cluster


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _manifest(command: str) -> str:
    return yaml.safe_dump({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "labels": {"app": "web"}},
                           "spec": {"containers": [{"name": "c", "image": "busybox", "command": ["sh", "-c", command]}],
                                    "terminationGracePeriodSeconds": 1}})


def test_a_kubelet_on_flags_runs_static_pods_as_mirror_pods(cluster, tmp_path):
    node, mirror = "static-63", "web-static-63"
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "web.yaml").write_text(_manifest("echo first; sleep 3600"))
    (manifests / ".web.yaml.swp").write_text("not a manifest")  # hidden: skipped
    (manifests / "notes.txt").write_text("kind: ConfigMap\napiVersion: v1\n")  # no Pod: logged
    secure, read_only = _free_port(), _free_port()
    log_path = tmp_path / "kubelet.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "nanokube.cli", "kubelet", "--kubeconfig", cluster.kubeconfig,
                                 "--node-name", node, "--bind-address", "127.0.0.1", "--secure-port", str(secure),
                                 "--hostname-override", "127.0.0.1", "--read-only-port", str(read_only),
                                 "--healthz-port", "0", "--pod-manifest-path", str(manifests),
                                 "--register-with-taints", "dedicated=static:NoSchedule"],
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def pod():
        got = cluster.kubectl("get", "pod", mirror, "-o", "json", "--ignore-not-found").stdout
        return json.loads(got) if got else None

    def running(old_uid: str = ""):
        p = pod()
        return p if p and p["metadata"]["uid"] != old_uid and p["status"].get("phase") == "Running" and \
            not p["metadata"].get("deletionTimestamp") else None

    try:
        first = wait_for(running, what="the static pod's mirror pod Running")
        md = first["metadata"]
        assert md["annotations"]["kubernetes.io/config.mirror"] == md["annotations"]["kubernetes.io/config.hash"]
        assert md["annotations"]["kubernetes.io/config.source"] == "file"
        assert "kubernetes.io/config.seen" in md["annotations"]
        assert (md["namespace"], md["labels"], first["spec"]["nodeName"]) == ("default", {"app": "web"}, node)
        registered = cluster.kubectl_json("get", "node", node)
        assert [(o["kind"], o["name"], o["uid"], o.get("controller")) for o in md["ownerReferences"]] == [
            ("Node", node, registered["metadata"]["uid"], True)]
        assert {"operator": "Exists", "effect": "NoExecute"} in first["spec"]["tolerations"]
        assert {"key": "dedicated", "value": "static", "effect": "NoSchedule"} in registered["spec"]["taints"]
        assert cluster.kubectl("get", "pods", "-A", "-o", "name").stdout.count("pod/web-") == 1

        # on flags alone: anonymous requests are let in, and everything is allowed
        with urllib.request.urlopen(f"https://127.0.0.1:{secure}/pods", context=ssl._create_unverified_context(),
                                    timeout=10) as r:
            assert [p["metadata"]["name"] for p in json.loads(r.read())["items"]] == [mirror]
        got = json.loads(cluster.kubectl("get", "--raw", f"/api/v1/nodes/{node}/proxy/configz").stdout)["kubeletconfig"]
        assert (got["authentication"]["anonymous"], got["authentication"]["webhook"]["enabled"],
                got["authorization"]["mode"], got["readOnlyPort"], got["staticPodPath"]) == (
            {"enabled": True}, False, "AlwaysAllow", read_only, str(manifests))

        # deleted by an admin: made again at once
        cluster.kubectl("delete", "pod", mirror, "--wait=false")
        second = wait_for(lambda: running(md["uid"]), what="the mirror pod made again")
        assert second["metadata"]["annotations"]["kubernetes.io/config.hash"] == md["annotations"]["kubernetes.io/config.hash"]

        # a changed file: another hash, the old pod replaced
        (manifests / "web.yaml").write_text(_manifest("echo second; sleep 3600"))
        third = wait_for(lambda: (p := running(second["metadata"]["uid"])) and p, what="the changed static pod")
        assert third["metadata"]["annotations"]["kubernetes.io/config.hash"] != md["annotations"]["kubernetes.io/config.hash"]
        assert third["spec"]["containers"][0]["command"][-1] == "echo second; sleep 3600"

        # the file removed: the pod goes
        (manifests / "web.yaml").unlink()
        wait_for(lambda: pod() is None, what="the mirror pod gone with its file")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        text = log_path.read_text()
        for flag in ("read-only-port", "healthz-port", "pod-manifest-path", "register-with-taints"):
            assert (f"Flag --{flag} has been deprecated, This parameter should be set via the config file specified "
                    "by the Kubelet's --config flag.") in text
        assert "Flag --hostname-override has been deprecated" not in text  # (not a configuration field)
        assert f"Could not process manifest file {manifests}/notes.txt" in text
        assert ".web.yaml.swp" not in text
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        cluster.kubectl("delete", "pod", mirror, "--ignore-not-found", "--grace-period=0", "--force")
        cluster.kubectl("delete", "node", node, "--ignore-not-found")


def test_a_kubelet_that_does_not_register_waits_for_its_node(cluster, tmp_path):
    """registerNode false: no Node is created (its status updates fail, logged); once an admin
    creates it the kubelet reports its status there. Its evictionHard (memory.available below
    more than the node has) reaches the eviction manager: the node reports MemoryPressure."""
    node = "unregistered-63"
    (tmp_path / "kubelet.yaml").write_text(yaml.safe_dump({
        "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration", "address": "127.0.0.1",
        "port": _free_port(), "healthzPort": 0, "registerNode": False,
        "registerWithTaints": [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}],
        "evictionHard": {"memory.available": "100Ti"}}))
    log_path = tmp_path / "kubelet.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "nanokube.cli", "kubelet", "--kubeconfig", cluster.kubeconfig,
                                 "--config", str(tmp_path / "kubelet.yaml"), "--node-name", node,
                                 "--hostname-override", "127.0.0.1"],
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        wait_for(lambda: f'error getting node "{node}"' in log_path.read_text(), what="the kubelet finding no Node")
        assert not cluster.kubectl("get", "node", node, "--ignore-not-found").stdout
        cluster.kubectl("create", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "Node",
                                                                "metadata": {"name": node}}))

        def pressure():
            got = cluster.kubectl_json("get", "node", node)
            conditions = {c["type"]: c["status"] for c in (got.get("status") or {}).get("conditions") or ()}
            return got if conditions.get("Ready") == "True" and conditions.get("MemoryPressure") == "True" else None

        got = wait_for(pressure, what="the admin's Node Ready, under memory pressure")
        # registerWithTaints is the registering kubelet's: an admin's Node has only what the
        # admission plugin and the node lifecycle controller put there
        assert all(t["key"] != "dedicated" for t in got["spec"].get("taints") or ())
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        assert "Flag --" not in log_path.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        cluster.kubectl("delete", "node", node, "--ignore-not-found")
