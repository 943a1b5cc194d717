"""The commands people type first, on the default simulated runtime: `kubectl
run -i --rm` of a shell returns once its stdin closes (the container reads it
to EOF and exits 0, as `sh` does), and the pod is deleted; a container whose
stdin is left open (no stdinOnce) keeps running after the client leaves."""

from __future__ import annotations

import os
import subprocess
import time

from tests.e2e.conftest import KUBECTL, wait_for


def test_run_interactive_shell_returns_when_stdin_closes_and_the_pod_is_removed(cluster):
    r = cluster.kubectl("run", "-i", "--rm", "--restart=Never", "x", "--image=busybox", "--", "sh",
                        input="", check=False, timeout=60)
    assert r.returncode == 0, r.stderr
    assert cluster.kubectl("get", "pod", "x", "--ignore-not-found", "-o", "name").stdout == ""


def test_a_piped_command_completes_the_pod_with_exit_code_zero(cluster):
    r = cluster.kubectl("run", "-i", "--restart=Never", "piped", "--image=busybox", "--", "sh",
                        input="echo hi\n", check=False, timeout=60)
    assert r.returncode == 0, r.stderr
    wait_for(lambda: cluster.kubectl_json("get", "pod", "piped")["status"].get("phase") == "Succeeded",
             30, "piped Succeeded")
    term = cluster.kubectl_json("get", "pod", "piped")["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (term["exitCode"], term["reason"]) == (0, "Completed")


def test_without_stdin_once_the_container_keeps_running_after_the_client_leaves(cluster):
    env = {**os.environ, "KUBECONFIG": cluster.kubeconfig, "KUBECACHEDIR": str(cluster.data_dir / "kubecache")}
    p = subprocess.Popen([KUBECTL, "run", "-i", "--leave-stdin-open", "--restart=Never", "open", "--image=busybox",
                          "--", "sh"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, env=env)
    try:
        wait_for(lambda: cluster.kubectl("get", "pod", "open", "--ignore-not-found",
                                         "-o", "jsonpath={.status.phase}").stdout == "Running", 30, "open Running")
        time.sleep(2)  # the client has sent the end of its stdin and stays attached
        assert p.poll() is None
    finally:
        p.kill()
        p.wait()
    time.sleep(2)
    pod = cluster.kubectl_json("get", "pod", "open")
    assert pod["spec"]["containers"][0].get("stdinOnce") is None
    assert pod["status"]["phase"] == "Running"
    assert "running" in pod["status"]["containerStatuses"][0]["state"]
