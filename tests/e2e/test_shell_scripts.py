"""The shell pieces entrypoint scripts are made of, run by a container's `sh -c` on each runtime
with the same log: on the simulated runtime by its interpreter (simulated_command), on the
process runtime by the node's real shell. The process runtime's case is skipped (loudly) only
without root, `ip` or `nft`."""

from __future__ import annotations

import json

import pytest

from tests.e2e.conftest import PROCESS_RUNTIME, process_cluster, running_cluster, wait_for

SCRIPT = r"""
trap 'echo "exiting with $?"' EXIT
path=/models/llama-7b.tar.gz
echo "${path##*/} ${path%.tar.gz} ${path%%.*} ${path#/models/} ${#path} ${path%'.*'}"
tag=v1.2.3; echo "major ${tag%%.*} minor-patch ${tag#*.} file ${path##*/[a-z]}"
greet() {
  local who=$1
  echo "hello $who ($# args)"
  return 3
}
who=outer
greet world extra; echo "greet returned $? who=$who"
retry() { n=0; until [ $n -ge 3 ]; do n=$((n+1)); echo "attempt $n"; done; }
retry; echo "after $n attempts"
printf 'root:x:0\nbin:x:1\n' | cut -d: -f1,3; echo abcdef | cut -c2-4
printf 'a b\nc\n' | xargs -n 2 echo got; printf 'x\ny\n' | xargs -I{} echo "item {}"
"""
LOG = """llama-7b.tar.gz /models/llama-7b /models/llama-7b llama-7b.tar.gz 23 /models/llama-7b.tar.gz
major v1 minor-patch 2.3 file lama-7b.tar.gz
hello world (2 args)
greet returned 3 who=outer
attempt 1
attempt 2
attempt 3
after 3 attempts
root:0
bin:1
bcd
got a b
got c
item x
item y
exiting with 0
"""


def _job_pod(name: str, script: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "main", "image": "busybox", "command": ["sh", "-c", script]}]}}


@pytest.fixture(scope="module", params=["simulated", pytest.param("process", marks=PROCESS_RUNTIME)])
def runtime(request, store_url):
    """A cluster of each runtime, and which it is."""
    with (running_cluster("shell") if request.param == "simulated" else process_cluster(store_url, "shell")) as c:
        yield c, request.param


def _run(cluster, name: str, script: str) -> str:
    cluster.kubectl("apply", "-f", "-", input=json.dumps(_job_pod(name, script)))
    wait_for(lambda: cluster.kubectl_json("get", "pod", name)["status"].get("phase") in ("Succeeded", "Failed"), 90,
             f"{name} finished")
    assert cluster.kubectl_json("get", "pod", name)["status"]["phase"] == "Succeeded"
    return cluster.kubectl("logs", name).stdout


def test_parameter_trimming_functions_cut_and_xargs_log_as_a_real_shell_does(runtime):
    """`${x%y}`, `${x%%y}`, `${x#y}`, `${x##y}` (their patterns globs, quoted text literal), `${#x}`,
    functions with arguments, `local` and `return`, `cut`, `xargs` and an EXIT trap (before: not
    interpreted, the container ran on as a stub and its pod never ended)."""
    cluster, _ = runtime
    assert _run(cluster, "trims", SCRIPT) == LOG


def test_a_trapped_sigterm_runs_its_action_before_the_container_ends(runtime):
    """Deleting the pod sends its container SIGTERM: the shell runs its TERM trap once the command
    it waits on ends, as a real one does, and the container ends with the trap's `exit 0` well
    within the grace period (before, the simulated container ended at once with 143, its trap
    never run)."""
    cluster, _ = runtime
    pod = _job_pod("draining", "trap 'echo draining; sleep 1; echo bye; exit 0' TERM; echo up; "
                               "while true; do sleep 1; done")
    pod["metadata"]["finalizers"] = ["test.nanokube.io/keep"]  # the pod stays to be looked at
    pod["spec"]["terminationGracePeriodSeconds"] = 30
    cluster.kubectl("apply", "-f", "-", input=json.dumps(pod))
    wait_for(lambda: cluster.kubectl("logs", "draining", check=False).stdout == "up\n", 60, "draining up")
    cluster.kubectl("delete", "pod", "draining", "--wait=false")
    try:
        term = wait_for(lambda: (cluster.kubectl_json("get", "pod", "draining")["status"]
                                 .get("containerStatuses") or [{}])[0].get("state", {}).get("terminated"), 30,
                        "draining terminated")
        assert term["exitCode"] == 0, term
        # SIGTERM goes to the container's first process only: the shell's `sleep` ends as it would
        assert cluster.kubectl("logs", "draining").stdout == "up\ndraining\nbye\n"
    finally:
        cluster.kubectl("patch", "pod", "draining", "--type=merge", "-p", '{"metadata":{"finalizers":null}}')


def test_an_init_container_waits_for_a_file_its_sidecar_writes(runtime):
    """A sidecar (restartPolicy Always) runs beside the init containers after it (KEP-753): the next
    one, waiting for the file the sidecar writes on their shared emptyDir, is released by it."""
    cluster, _ = runtime
    mount = [{"name": "work", "mountPath": "/work"}]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "side-writer", "namespace": "default"}, "spec": {
        "terminationGracePeriodSeconds": 1, "volumes": [{"name": "work", "emptyDir": {}}],
        "initContainers": [
            {"name": "side", "image": "busybox", "restartPolicy": "Always", "volumeMounts": mount,
             "command": ["sh", "-c", "sleep 2; echo ok > /work/ready; echo wrote; sleep 3600"]},
            {"name": "wait", "image": "busybox", "volumeMounts": mount,
             "command": ["sh", "-c", "until [ -f /work/ready ]; do sleep 1; done; echo released $(cat /work/ready)"]}],
        "containers": [{"name": "app", "image": "busybox", "command": ["sleep", "3600"]}]}}
    cluster.kubectl("apply", "-f", "-", input=json.dumps(pod))
    wait_for(lambda: cluster.kubectl_json("get", "pod", "side-writer")["status"].get("phase") == "Running", 90,
             "side-writer Running")
    assert cluster.kubectl("logs", "side-writer", "-c", "wait").stdout == "released ok\n"
    assert cluster.kubectl("logs", "side-writer", "-c", "side").stdout == "wrote\n"


def test_a_chain_that_makes_a_directory_then_sleeps_goes_on_to_its_writes(runtime):
    """`mkdir D && sleep && echo > F && sleep`, `if mkdir D; then ...; fi` and `mkdir D || exit 3;
    ...`: each container runs on and writes its file after the sleep (before, on the simulated
    runtime, the kubelet worked the command out again once its `mkdir` was made, saw it fail, and
    ended the container at once: /cache/b was never written)."""
    cluster, _ = runtime
    mount = [{"name": "cache", "mountPath": "/cache"}]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "shards", "namespace": "default"}, "spec": {
        "restartPolicy": "Never", "terminationGracePeriodSeconds": 1, "volumes": [{"name": "cache", "emptyDir": {}}],
        "containers": [
            {"name": "chain", "image": "busybox", "volumeMounts": mount, "command": [
                "sh", "-c", "mkdir /cache/shards && sleep 1 && echo b > /cache/b && echo wrote b && sleep 3600"]},
            {"name": "cond", "image": "busybox", "volumeMounts": mount, "command": [
                "sh", "-c", "if mkdir /cache/lock; then sleep 1; echo c > /cache/c; echo wrote c; sleep 3600; fi"]},
            {"name": "or", "image": "busybox", "volumeMounts": mount, "command": [
                "sh", "-c", "mkdir /cache/d || exit 3; sleep 1; echo d > /cache/d/d; echo wrote d; sleep 3600"]}]}}
    cluster.kubectl("apply", "-f", "-", input=json.dumps(pod))
    for container, name in (("chain", "b"), ("cond", "c"), ("or", "d")):
        wait_for(lambda: cluster.kubectl("logs", "shards", "-c", container, check=False).stdout == f"wrote {name}\n",
                 60, f"{container} wrote {name}")
    assert cluster.kubectl("exec", "shards", "-c", "chain", "--", "cat", "/cache/b", "/cache/c", "/cache/d/d").stdout == "b\nc\nd\n"
    statuses = cluster.kubectl_json("get", "pod", "shards")["status"]["containerStatuses"]
    assert [(s["name"], list(s["state"]), s["restartCount"]) for s in statuses] == [
        ("chain", ["running"], 0), ("cond", ["running"], 0), ("or", ["running"], 0)]
