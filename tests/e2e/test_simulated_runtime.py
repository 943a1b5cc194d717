"""The default simulated runtime as a first-day user meets it, through kubectl:
each container of a pod lives its own life (its own exit, exit code and
restart count; a sidecar independent of the app containers), and the
commands people type first (`kubectl create job hello --image=busybox --
echo hi`) end as they would on a real node."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest

from tests.e2e.conftest import running_cluster, wait_for

PAIR = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "pair", "namespace": "default"}, "spec": {
    "initContainers": [{"name": "proxy", "image": "busybox", "command": ["sleep", "infinity"],
                        "restartPolicy": "Always"}],
    "containers": [{"name": "shell", "image": "busybox", "stdin": True, "stdinOnce": True},
                   {"name": "web", "image": "nginx"}]}}


@pytest.fixture(scope="module")
def cluster():
    """The module's cluster: its kubelets' crash-loop back-off at most 5 s
    (crashLoopBackOff.maxContainerRestartPeriod; 5 min, from 10 s, by default)."""
    with running_cluster("simulated-runtime", env={"NANOKUBE_MAX_CONTAINER_RESTART_PERIOD": "5"}) as c:
        yield c


def _statuses(cluster, pod: str) -> dict:
    st = cluster.kubectl_json("get", "pod", pod)["status"]
    return {s["name"]: s for key in ("initContainerStatuses", "containerStatuses") for s in st.get(key) or ()}


def test_a_container_that_exits_restarts_alone_while_the_others_run_on(cluster):
    """Closing one container's stdin ends that container only: it exits 0 and, under
    restartPolicy Always, waits to restart with a restartCount of its own, while the other app
    container and the sidecar keep running (before, the pod's containers shared one lifetime)."""
    cluster.kubectl("apply", "-f", "-", input=json.dumps(PAIR))
    wait_for(lambda: "running" in (_statuses(cluster, "pair").get("shell") or {}).get("state", {}), 60,
             "shell running")
    cluster.kubectl("attach", "-i", "pair", "-c", "shell", input="", check=False, timeout=60)
    shell = wait_for(lambda: (s := _statuses(cluster, "pair")["shell"])["restartCount"] == 1 and s, 30,
                     "shell restarted")
    assert shell["lastState"]["terminated"]["exitCode"] == 0
    assert shell["lastState"]["terminated"]["reason"] == "Completed"
    statuses = _statuses(cluster, "pair")
    for name in ("web", "proxy"):
        assert "running" in statuses[name]["state"], statuses[name]
        assert statuses[name]["restartCount"] == 0 and statuses[name]["lastState"] == {}
    assert cluster.kubectl_json("get", "pod", "pair")["status"]["phase"] == "Running"
    assert "exited" not in cluster.kubectl("logs", "pair", "-c", "web").stdout


def _pod_of(cluster, job: str) -> dict:
    items = cluster.kubectl_json("get", "pods", "-l", f"job-name={job}")["items"]
    return items[0] if items else {}


def _terminated(pod: dict) -> dict:
    return (((pod.get("status") or {}).get("containerStatuses") or [{}])[0].get("state") or {}).get("terminated") or {}


#: how late past its command's end a container's finishedAt may be stamped: the kubelet stamps it when
#: its loop gets to the exit, which a loaded machine (CI's two workers on two cores) delays
LATE = 10


def _took(term: dict) -> float:
    """Seconds from a terminated state's startedAt to its finishedAt. Both are whole seconds, the start
    stamped before the command's time starts: a command of N seconds took N at least."""
    return (datetime.fromisoformat(term["finishedAt"]) - datetime.fromisoformat(term["startedAt"])).total_seconds()


def _conditions(cluster, job: str) -> dict:
    return {c["type"]: c for c in cluster.kubectl_json("get", "job", job)["status"].get("conditions") or ()
            if c["status"] == "True"}


@pytest.mark.parametrize("job, command, log", [
    ("hello-true", ["true"], ""),
    ("hello", ["echo", "hi"], "hi\n"),
])
def test_a_job_of_a_command_that_ends_completes(cluster, job, command, log):
    """`kubectl create job hello --image=busybox -- echo hi` completes as on a real node, and its
    log is what the command wrote (before, the container ran until deleted)."""
    cluster.kubectl("create", "job", job, "--image=busybox", "--", *command)
    conditions = wait_for(lambda: (c := _conditions(cluster, job)) and "Complete" in c and c, 30, f"{job} Complete")
    assert "Failed" not in conditions
    pod = _pod_of(cluster, job)
    assert pod["status"]["phase"] == "Succeeded"
    assert (_terminated(pod)["exitCode"], _terminated(pod)["reason"]) == (0, "Completed")
    assert cluster.kubectl("logs", f"job/{job}").stdout == log


@pytest.mark.parametrize("job, command, code", [
    ("fails", ["false"], 1),
    ("exits", ["sh", "-c", "exit 3"], 3),
])
def test_a_job_of_a_command_that_fails_has_failed_pods_with_its_exit_code(cluster, job, command, code):
    cluster.kubectl("create", "job", job, "--image=busybox", "--", *command)
    pod = wait_for(lambda: (p := _pod_of(cluster, job)) and (p.get("status") or {}).get("phase") == "Failed" and p,
                   30, f"a {job} pod Failed")
    assert (_terminated(pod)["exitCode"], _terminated(pod)["reason"]) == (code, "Error")
    wait_for(lambda: cluster.kubectl_json("get", "job", job)["status"].get("failed", 0) >= 1, 30, f"{job} failed 1")
    assert "Complete" not in _conditions(cluster, job)


def test_a_job_without_retries_fails_with_its_command(cluster):
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "once", "namespace": "default"},
           "spec": {"backoffLimit": 0, "template": {"spec": {"restartPolicy": "Never", "containers": [
               {"name": "once", "image": "busybox", "command": ["sh", "-c", "echo trying; exit 3"]}]}}}}
    cluster.kubectl("apply", "-f", "-", input=json.dumps(job))
    failed = wait_for(lambda: _conditions(cluster, "once").get("Failed"), 30, "once Failed")
    assert failed["reason"] == "BackoffLimitExceeded"
    assert _terminated(_pod_of(cluster, "once"))["exitCode"] == 3
    assert cluster.kubectl("logs", "job/once").stdout == "trying\n"


def test_a_job_that_sleeps_completes_after_its_sleep(cluster):
    cluster.kubectl("create", "job", "nap", "--image=busybox", "--", "sleep", "2")
    wait_for(lambda: "Complete" in _conditions(cluster, "nap"), 30, "nap Complete")
    term = _terminated(_pod_of(cluster, "nap"))
    assert term["exitCode"] == 0 and 2 <= _took(term) < 2 + LATE


def test_run_rm_interactive_of_a_command_prints_its_output_and_exits_with_its_code(cluster):
    """`kubectl run --rm -i` of a command that ends shows what it wrote, exits with its exit code
    (kubectl's run returns the container's) and deletes the pod."""
    r = cluster.kubectl("run", "--rm", "-i", "--restart=Never", "t", "--image=busybox", "--", "echo", "hi",
                        input="", check=False, timeout=60)
    assert (r.returncode, r.stdout.splitlines()[0] if r.stdout else "") == (0, "hi"), r.stderr
    # --rm's delete is graceful: the pod goes once the kubelet has finished it, maybe after kubectl returned
    wait_for(lambda: cluster.kubectl("get", "pod", "t", "--ignore-not-found", "-o", "name").stdout == "", 30,
             "t deleted")
    r = cluster.kubectl("run", "--rm", "-i", "--restart=Never", "t3", "--image=busybox", "--", "sh", "-c",
                        "echo bye; exit 3", input="", check=False, timeout=60)
    assert (r.returncode, r.stdout.splitlines()[0] if r.stdout else "") == (3, "bye"), r.stderr
    assert "pod default/t3 terminated (Error)" in r.stderr


def test_exec_of_an_interpreted_command_runs_it(cluster):
    """`kubectl exec` of a command the simulated runtime interprets prints its output and exits with
    its code (kubectl: 'command terminated with exit code 3'); other commands are still not in the
    image."""
    cluster.kubectl("run", "shell", "--image=busybox", "--", "sleep", "infinity")
    wait_for(lambda: cluster.kubectl_json("get", "pod", "shell")["status"].get("phase") == "Running", 60,
             "shell Running")
    assert cluster.kubectl("exec", "shell", "--", "echo", "hi").stdout == "hi\n"
    r = cluster.kubectl("exec", "shell", "--", "sh", "-c", "echo one; sleep 1; echo two; exit 3", check=False)
    assert (r.returncode, r.stdout) == (3, "one\ntwo\n")
    assert "command terminated with exit code 3" in r.stderr
    assert cluster.kubectl("exec", "shell", "--", "true").returncode == 0
    r = cluster.kubectl("exec", "shell", "--", "no-such-binary", check=False)
    assert r.returncode != 0 and 'exec: "no-such-binary": executable file not found in $PATH' in r.stderr


def _pod(name: str, restart: str, init_command: list[str]) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": {
        "restartPolicy": restart,
        "initContainers": [{"name": "init", "image": "busybox", "command": init_command}],
        "containers": [{"name": "app", "image": "busybox", "command": ["sleep", "600"]}]}}


def _columns(cluster, pod: str) -> list[str]:
    return cluster.kubectl("get", "pod", pod, "--no-headers").stdout.split()


def test_an_init_container_runs_its_command_before_the_app_starts(cluster):
    cluster.kubectl("apply", "-f", "-", input=json.dumps(
        _pod("prepared", "Always", ["sh", "-c", "echo preparing; sleep 5; echo prepared"])))
    wait_for(lambda: _columns(cluster, "prepared")[2] == "Init:0/1", 30, "prepared Init:0/1")
    pod = cluster.kubectl_json("get", "pod", "prepared")
    assert "running" in pod["status"]["initContainerStatuses"][0]["state"] and pod["status"]["phase"] == "Pending"
    wait_for(lambda: _columns(cluster, "prepared")[2] == "Running", 30, "prepared Running")
    term = _statuses(cluster, "prepared")["init"]["state"]["terminated"]
    assert (term["exitCode"], term["reason"]) == (0, "Completed") and 5 <= _took(term) < 5 + LATE
    assert cluster.kubectl("logs", "prepared", "-c", "init").stdout == "preparing\nprepared\n"


def test_an_init_container_that_fails_fails_a_never_pod_and_crash_loops_otherwise(cluster):
    cluster.kubectl("apply", "-f", "-", input=json.dumps(_pod("init-never", "Never", ["sh", "-c", "exit 7"])))
    cluster.kubectl("apply", "-f", "-", input=json.dumps(_pod("init-always", "Always", ["false"])))
    wait_for(lambda: _columns(cluster, "init-never")[2] == "Init:Error", 30, "init-never Init:Error")
    pod = cluster.kubectl_json("get", "pod", "init-never")
    assert pod["status"]["phase"] == "Failed"
    assert pod["status"]["initContainerStatuses"][0]["state"]["terminated"]["exitCode"] == 7
    assert pod["status"]["containerStatuses"][0]["state"] == {"waiting": {"reason": "PodInitializing"}}
    wait_for(lambda: _columns(cluster, "init-always")[2] == "Init:CrashLoopBackOff", 30,
             "init-always Init:CrashLoopBackOff")
    init = _statuses(cluster, "init-always")["init"]  # the first exit restarted at once, the second backs off
    assert init["restartCount"] == 1 and init["lastState"]["terminated"]["exitCode"] == 1
    assert cluster.kubectl_json("get", "pod", "init-always")["status"]["phase"] == "Pending"


def test_the_cron_job_docs_command_prints_the_date_and_its_greeting(cluster):
    """The CronJob walkthrough's command (`date; echo Hello from the Kubernetes cluster`), run by a
    Job made from a CronJob as `kubectl create job --from=cronjob/` makes it."""
    cluster.kubectl("create", "cronjob", "hello", "--image=busybox", "--schedule=0 0 1 1 *", "--",
                    "/bin/sh", "-c", "date; echo Hello from the Kubernetes cluster")
    cluster.kubectl("create", "job", "hello-now", "--from=cronjob/hello")
    wait_for(lambda: "Complete" in _conditions(cluster, "hello-now"), 30, "hello-now Complete")
    started = datetime.fromisoformat(_terminated(_pod_of(cluster, "hello-now"))["startedAt"])
    # as busybox's date prints the clock when it ran: the second the container started (or the next)
    dates = [f"{when:%a %b} {when.day:2d} {when:%H:%M:%S} UTC {when.year}"
             for when in (started, started + timedelta(seconds=1))]
    date, greeting = cluster.kubectl("logs", "job/hello-now").stdout.splitlines(keepends=True)
    assert date.rstrip("\n") in dates and greeting == "Hello from the Kubernetes cluster\n"


def test_a_container_that_sleeps_forever_runs_with_an_empty_log(cluster):
    """`sleep infinity` (and `tail -f /dev/null`), the keep-alive commands of many examples, run
    until the pod is deleted and, as they write nothing, log nothing."""
    cluster.kubectl("run", "keep", "--image=busybox", "--", "sleep", "infinity")
    wait_for(lambda: "running" in (_statuses(cluster, "keep").get("keep") or {}).get("state", {}), 60,
             "keep running")
    assert cluster.kubectl("logs", "keep").stdout == ""
    assert cluster.kubectl_json("get", "pod", "keep")["status"]["phase"] == "Running"


def _with_sidecar(name: str, sidecar: list[str], app: list[str]) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": {
        "restartPolicy": "Never",
        "initContainers": [{"name": "side", "image": "busybox", "restartPolicy": "Always", "command": sidecar}],
        "containers": [{"name": "app", "image": "busybox", "command": app}]}}


def test_a_sidecar_that_exits_restarts_after_its_back_off_whatever_the_pods_policy(cluster):
    cluster.kubectl("apply", "-f", "-", input=json.dumps(
        _with_sidecar("flaky-side", ["sh", "-c", "echo tick; sleep 1; exit 1"], ["sleep", "600"])))
    wait_for(lambda: "waiting" in _statuses(cluster, "flaky-side")["side"]["state"], 30, "side waiting")
    side = _statuses(cluster, "flaky-side")["side"]
    assert side["state"]["waiting"]["reason"] == "CrashLoopBackOff" and side["ready"] is False
    # the first exit restarted it at once; the second backs off (counted as it starts again)
    assert side["lastState"]["terminated"]["exitCode"] == 1 and side["restartCount"] == 1
    assert cluster.kubectl("logs", "flaky-side", "-c", "side", "--previous").stdout == "tick\n"
    wait_for(lambda: "running" in _statuses(cluster, "flaky-side")["side"]["state"], 30, "side restarted")
    pod = cluster.kubectl_json("get", "pod", "flaky-side")
    assert pod["status"]["phase"] == "Running" and "running" in _statuses(cluster, "flaky-side")["app"]["state"]
    reasons = cluster.kubectl("get", "events", "--field-selector", "involvedObject.name=flaky-side",
                              "-o", "jsonpath={range .items[*]}{.reason} {.involvedObject.fieldPath}{'\\n'}{end}")
    assert "BackOff spec.initContainers{side}" in reasons.stdout


def test_a_pod_ends_with_its_app_containers_however_its_sidecar_runs(cluster):
    cluster.kubectl("apply", "-f", "-", input=json.dumps(
        _with_sidecar("job-like", ["sh", "-c", "sleep 1; exit 1"], ["sh", "-c", "sleep 3; echo done"])))
    wait_for(lambda: cluster.kubectl_json("get", "pod", "job-like")["status"].get("phase") == "Succeeded", 30,
             "job-like Succeeded")
    assert _statuses(cluster, "job-like")["app"]["state"]["terminated"]["exitCode"] == 0


def test_a_training_loop_logs_each_step_on_the_clock_until_its_pod_is_deleted(cluster):
    """`sh -c 'while true; do echo step; sleep 1; done'`, the keep-alive loop of many training and
    serving manifests, logs a line a second as it runs, forever, and its pod is deleted as any (the
    shell, PID 1 with no TERM trap, ignores SIGTERM: it is killed once the 1 s grace asked is up)."""
    cluster.kubectl("run", "loop", "--image=busybox", "--", "sh", "-c",
                    "echo training $HOSTNAME; while true; do echo step; sleep 1; done")
    wait_for(lambda: cluster.kubectl("logs", "loop", check=False).stdout.count("\n") >= 3, 30, "3 lines logged")
    first = cluster.kubectl("logs", "loop").stdout
    assert first.startswith("training loop\nstep\nstep\n") and set(first.splitlines()[1:]) == {"step"}
    wait_for(lambda: len(cluster.kubectl("logs", "loop").stdout) > len(first), 10, "more steps logged")
    assert "running" in _statuses(cluster, "loop")["loop"]["state"]
    cluster.kubectl("delete", "pod", "loop", "--grace-period=1", "--wait", timeout=30)


def test_a_job_of_a_for_loop_with_conditions_completes_with_its_exit_code(cluster):
    """A Job's shell script of a `for` loop over epochs, writing a file, then an `if` on it and `exit`."""
    script = ("for epoch in $(seq 1 3); do echo epoch $epoch >> /tmp/train.log; echo epoch $epoch; sleep 1; done\n"
              'if [ -s /tmp/train.log ]; then echo "trained $epoch epochs"; exit 0; else exit 1; fi')
    cluster.kubectl("create", "job", "epochs", "--image=busybox", "--", "sh", "-c", script)
    wait_for(lambda: "Complete" in _conditions(cluster, "epochs"), 30, "epochs Complete")
    term = _terminated(_pod_of(cluster, "epochs"))
    assert term["exitCode"] == 0 and 3 <= _took(term) < 3 + LATE
    assert cluster.kubectl("logs", "job/epochs").stdout == "epoch 1\nepoch 2\nepoch 3\ntrained 3 epochs\n"


def test_a_job_whose_script_redirects_stderr_completes_with_both_streams_logged(cluster):
    """`2>/dev/null`, `2>&1` and `>&2` in a Job's script (uninterpreted before: the Job ran forever)."""
    script = ("echo starting >&2; ls /data 2>/dev/null || echo 'no data' 1>&2\n"
              "ls /missing > /tmp/out 2>&1; cat /tmp/out; exit 0")
    cluster.kubectl("create", "job", "streams", "--image=busybox", "--", "sh", "-c", script)
    wait_for(lambda: "Complete" in _conditions(cluster, "streams"), 30, "streams Complete")
    assert cluster.kubectl("logs", "job/streams").stdout == (
        "starting\nno data\nls: /missing: No such file or directory\n")


def test_a_job_under_set_ex_traces_its_commands_and_fails_at_the_first_failure(cluster):
    """`set -ex`, the first line of many training scripts: each command is traced on stderr, and
    the first failure that is not a condition ends the script with its status."""
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "strict", "namespace": "default"},
           "spec": {"backoffLimit": 0, "template": {"spec": {"restartPolicy": "Never", "containers": [
               {"name": "train", "image": "busybox", "command": ["sh", "-c"],
                "args": ["set -ex\nif [ -d /data ]; then echo has data; fi\nls /checkpoints\necho never"]}]}}}}
    cluster.kubectl("apply", "-f", "-", input=json.dumps(job))
    wait_for(lambda: _conditions(cluster, "strict").get("Failed"), 30, "strict Failed")
    assert _terminated(_pod_of(cluster, "strict"))["exitCode"] == 1
    assert cluster.kubectl("logs", "job/strict").stdout == (
        "+ [ -d /data ]\n+ ls /checkpoints\nls: /checkpoints: No such file or directory\n")


def test_a_job_printing_with_printf_and_tee_completes_with_its_lines(cluster):
    """printf, tee, echo -e and basename in a Job's script (uninterpreted before: the Job ran forever)."""
    script = ("for i in 1 2; do printf 'epoch %02d loss %.2f\\n' $i 0.5; done | tee /tmp/train.log\n"
              "echo -e \"model:\\t$(basename /models/resnet.pt .pt)\"")
    cluster.kubectl("create", "job", "printed", "--image=busybox", "--", "sh", "-c", script)
    wait_for(lambda: "Complete" in _conditions(cluster, "printed"), 30, "printed Complete")
    assert cluster.kubectl("logs", "job/printed").stdout == "epoch 01 loss 0.50\nepoch 02 loss 0.50\nmodel:\tresnet\n"


def test_an_entrypoint_script_cases_on_its_environment(cluster):
    """A container's entrypoint script choosing what to run by a variable of its environment."""
    script = ('case "$MODE" in\n  train) echo "training for $EPOCHS epochs" ;;\n  serve) sleep infinity ;;\n'
              '  *) echo "unknown mode $MODE" >&2; exit 64 ;;\nesac')
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "entry", "namespace": "default"},
           "spec": {"restartPolicy": "Never", "containers": [
               {"name": "main", "image": "busybox", "command": ["sh", "-c", script],
                "env": [{"name": "MODE", "value": "train"}, {"name": "EPOCHS", "value": "3"}]}]}}
    cluster.kubectl("apply", "-f", "-", input=json.dumps(pod))
    wait_for(lambda: cluster.kubectl_json("get", "pod", "entry")["status"].get("phase") == "Succeeded", 30,
             "entry Succeeded")
    assert cluster.kubectl("logs", "entry").stdout == "training for 3 epochs\n"


def test_a_training_loop_with_a_step_counter_logs_and_writes_each_step_as_it_comes(cluster):
    """`i=0; while true; do ...; i=$((i+1)); sleep 1; done`: no pass repeats another, yet the loop
    runs on, lazily, logging each step and appending it to a file that exec reads, on the clock."""
    cluster.kubectl("run", "counter", "--image=busybox", "--", "sh", "-c",
                    'i=0; while true; do echo "step $i" | tee -a /tmp/steps; i=$((i+1)); sleep 0.05; done')
    wait_for(lambda: cluster.kubectl("logs", "counter", check=False).stdout.count("\n") >= 60, 60, "60 steps")
    logged = cluster.kubectl("logs", "counter").stdout.splitlines()
    assert logged[:60] == [f"step {i}" for i in range(60)]  # past the first 50 passes, worked out ahead
    steps = cluster.kubectl("exec", "counter", "--", "cat", "/tmp/steps").stdout.splitlines()
    assert len(steps) >= 60 and steps == [f"step {i}" for i in range(len(steps))]
    cluster.kubectl("delete", "pod", "counter", "--grace-period=1", "--wait", timeout=30)


def test_an_init_container_copies_files_for_the_app_which_execs_its_server(cluster):
    """An init container's `cp -r` into a shared emptyDir, seen by the app, whose entrypoint ends
    with `exec` (uninterpreted before: the init container did nothing and the app ran as a stub)."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "copied", "namespace": "default"}, "spec": {
        "volumes": [{"name": "work", "emptyDir": {}}],
        "initContainers": [{"name": "fetch", "image": "busybox", "volumeMounts": [{"name": "work", "mountPath": "/work"}],
                            "command": ["sh", "-c", "mkdir -p /tmp/model && echo weights > /tmp/model/w.bin && "
                                                    "cp -r /tmp/model /work/ && mv /work/model /work/ready"]}],
        "containers": [{"name": "serve", "image": "busybox", "volumeMounts": [{"name": "work", "mountPath": "/work"}],
                        "command": ["sh", "-c", "echo serving $(cat /work/ready/w.bin); exec sleep infinity"]}]}}
    cluster.kubectl("apply", "-f", "-", input=json.dumps(pod))
    wait_for(lambda: cluster.kubectl_json("get", "pod", "copied")["status"].get("phase") == "Running", 60,
             "copied Running")
    assert cluster.kubectl("exec", "copied", "-c", "serve", "--", "ls", "/work/ready").stdout == "w.bin\n"
    wait_for(lambda: cluster.kubectl("logs", "copied", "-c", "serve").stdout, 30, "the server's line")
    assert cluster.kubectl("logs", "copied", "-c", "serve").stdout == "serving weights\n"


def _waiter(name: str, waiter: dict, side: dict) -> dict:
    mount = [{"name": "work", "mountPath": "/work"}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": {
        "restartPolicy": "Never", "volumes": [{"name": "work", "emptyDir": {}}],
        "initContainers": [{"image": "busybox", "volumeMounts": mount, **side}],
        "containers": [{"image": "busybox", "volumeMounts": mount, **waiter}]}}


def test_an_init_container_waiting_for_a_file_goes_on_when_an_exec_makes_it(cluster):
    """`until [ -f /work/ready ]; do sleep 1; done` reads the shared volume again at each pass: it
    ends once `kubectl exec ... touch` makes the file, and the pod goes on (before, it waited for
    ever on the copy of the files it was worked out on)."""
    wait = {"name": "wait", "command": ["sh", "-c", "until [ -f /work/ready ]; do sleep 1; done; echo released"]}
    pod = _waiter("gated", {"name": "app", "command": ["sleep", "600"]}, wait)
    cluster.kubectl("apply", "-f", "-", input=json.dumps(pod))
    wait_for(lambda: "running" in (_statuses(cluster, "gated").get("wait") or {}).get("state", {}), 60, "wait running")
    assert _columns(cluster, "gated")[2] == "Init:0/1"
    cluster.kubectl("exec", "gated", "-c", "wait", "--", "touch", "/work/ready")
    wait_for(lambda: _columns(cluster, "gated")[2] == "Running", 30, "gated Running")
    term = _statuses(cluster, "gated")["wait"]["state"]["terminated"]
    assert (term["exitCode"], term["reason"]) == (0, "Completed")
    assert cluster.kubectl("logs", "gated", "-c", "wait").stdout == "released\n"


def test_an_app_waiting_for_a_file_a_sidecar_is_made_to_write_ends_with_its_code(cluster):
    """The app container's waiting loop sees the file an exec into its sidecar writes on their shared
    emptyDir; what follows it runs, and the container ends with its code as it ran (exit 5 fails
    the Never pod), an end the kubelet learns as the command runs. Its sidecar, stopped then, exits
    0 from its TERM trap."""
    app = {"name": "app", "command": ["sh", "-c", "echo waiting; until [ -f /work/ready ]; do sleep 1; done; "
                                                  "echo go $(cat /work/ready); sleep 1; exit 5"]}
    side = {"name": "side", "restartPolicy": "Always",
            "command": ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 0.1; done"]}
    cluster.kubectl("apply", "-f", "-", input=json.dumps(_waiter("gated-app", app, side)))
    wait_for(lambda: cluster.kubectl_json("get", "pod", "gated-app")["status"].get("phase") == "Running", 60,
             "gated-app Running")
    wait_for(lambda: cluster.kubectl("logs", "gated-app", "-c", "app").stdout, 30, "the app's first line")
    assert "running" in _statuses(cluster, "gated-app")["app"]["state"]
    cluster.kubectl("exec", "gated-app", "-c", "side", "--", "sh", "-c", "echo now > /work/ready")
    wait_for(lambda: cluster.kubectl_json("get", "pod", "gated-app")["status"].get("phase") == "Failed", 30,
             "gated-app Failed")
    statuses = _statuses(cluster, "gated-app")
    term = statuses["app"]["state"]["terminated"]
    assert (term["exitCode"], term["reason"]) == (5, "Error")
    assert statuses["side"]["state"]["terminated"]["exitCode"] == 0
    assert cluster.kubectl("logs", "gated-app", "-c", "app").stdout == "waiting\ngo now\n"


def test_a_sidecar_runs_beside_the_init_containers_after_it(cluster):
    """A sidecar starts in its place among the init containers (KEP-753): the next init container
    runs beside it, so one waiting for the file the sidecar writes on their shared emptyDir is
    released by it, and the pod runs (before, the sidecar started only once every init container
    had ended, and the pod stayed Init:1/2 for ever)."""
    mount = [{"name": "work", "mountPath": "/work"}]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "side-first", "namespace": "default"}, "spec": {
        "volumes": [{"name": "work", "emptyDir": {}}],
        "initContainers": [
            {"name": "side", "image": "busybox", "restartPolicy": "Always", "volumeMounts": mount,
             "command": ["sh", "-c", "echo side up; until [ -f /work/go ]; do sleep 1; done; echo ok > /work/ready; "
                                     "sleep infinity"]},
            {"name": "wait", "image": "busybox", "volumeMounts": mount,
             "command": ["sh", "-c", "until [ -f /work/ready ]; do sleep 1; done; echo released $(cat /work/ready)"]}],
        "containers": [{"name": "app", "image": "busybox", "command": ["sleep", "600"]}]}}
    cluster.kubectl("apply", "-f", "-", input=json.dumps(pod))
    wait_for(lambda: "running" in (_statuses(cluster, "side-first").get("wait") or {}).get("state", {}), 60,
             "wait running")
    statuses = _statuses(cluster, "side-first")
    assert "running" in statuses["side"]["state"] and statuses["side"]["started"] is True
    assert _columns(cluster, "side-first")[2] == "Init:1/2"
    wait_for(lambda: cluster.kubectl("logs", "side-first", "-c", "side").stdout, 30, "the sidecar's first line")
    assert cluster.kubectl("logs", "side-first", "-c", "side").stdout == "side up\n"
    cluster.kubectl("exec", "side-first", "-c", "side", "--", "touch", "/work/go")  # the sidecar writes ready now
    wait_for(lambda: _columns(cluster, "side-first")[2] == "Running", 30, "side-first Running")
    statuses = _statuses(cluster, "side-first")
    assert statuses["wait"]["state"]["terminated"]["exitCode"] == 0
    assert (statuses["side"]["restartCount"], statuses["app"]["restartCount"]) == (0, 0)
    assert cluster.kubectl("logs", "side-first", "-c", "wait").stdout == "released ok\n"
    assert cluster.kubectl("logs", "side-first", "-c", "side").stdout == "side up\n"
    assert _columns(cluster, "side-first")[1] == "2/2"


def test_random_gives_a_number_from_0_to_32767_each_time_it_is_read(cluster):
    """`$RANDOM`, as busybox's sh has it (seeded per container on the node's clock: a replayed
    simulation draws the same numbers); before, the script was not interpreted."""
    cluster.kubectl("run", "dice", "--image=busybox", "--restart=Never", "--", "sh", "-c",
                    "echo $RANDOM $RANDOM; r=$RANDOM; echo $((r % 6 + 1))")
    wait_for(lambda: cluster.kubectl_json("get", "pod", "dice")["status"].get("phase") == "Succeeded", 30,
             "dice Succeeded")
    first, second = cluster.kubectl("logs", "dice").stdout.splitlines()
    a, b = (int(n) for n in first.split())
    assert 0 <= a < 32768 and 0 <= b < 32768 and a != b and 1 <= int(second) <= 6


def test_a_sidecar_that_exits_while_the_init_containers_run_restarts_meanwhile(cluster):
    """A sidecar whose command exits while the init container after it still runs is restarted then
    (at once the first time, then after its back-off), as the kubelet restarts a restartable init
    container during initialization (before, it was reported running until the app started)."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "side-flaps", "namespace": "default"}, "spec": {
        "initContainers": [
            {"name": "side", "image": "busybox", "restartPolicy": "Always",
             "command": ["sh", "-c", "echo tick; sleep 1; exit 1"]},
            {"name": "slow", "image": "busybox", "command": ["sleep", "300"]}],
        "containers": [{"name": "app", "image": "busybox", "command": ["sleep", "600"]}]}}
    cluster.kubectl("apply", "-f", "-", input=json.dumps(pod))
    side = wait_for(lambda: (s := _statuses(cluster, "side-flaps").get("side") or {}).get("restartCount", 0) >= 1
                    and "waiting" in s["state"] and s, 120, "side backing off after its second exit")
    assert "running" in _statuses(cluster, "side-flaps")["slow"]["state"]
    assert side["lastState"]["terminated"]["exitCode"] == 1
    assert side["state"]["waiting"]["reason"] == "CrashLoopBackOff" and side["started"] is False
    assert cluster.kubectl("logs", "side-flaps", "-c", "side", "--previous").stdout == "tick\n"
    reasons = cluster.kubectl("get", "events", "--field-selector", "involvedObject.name=side-flaps",
                              "-o", "jsonpath={range .items[*]}{.reason} {.involvedObject.fieldPath}{'\\n'}{end}")
    assert "BackOff spec.initContainers{side}" in reasons.stdout
    cluster.kubectl("delete", "pod", "side-flaps", "--wait=false")


def test_a_container_restarted_for_its_new_image_runs_its_command_anew(cluster):
    """A container the kubelet restarts in place (its image changed: `definition changed`) runs its
    command again on the files as they are then: it counts a second run (before, the new instance
    replayed what the first one wrote: `runs 1` again)."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "counter", "namespace": "default"}, "spec": {
        "terminationGracePeriodSeconds": 1, "volumes": [{"name": "cache", "emptyDir": {}}],
        "containers": [{"name": "app", "image": "busybox", "volumeMounts": [{"name": "cache", "mountPath": "/cache"}],
                        "command": ["sh", "-c", "echo run >> /cache/runs; echo runs $(wc -l < /cache/runs); "
                                                "sleep 3600"]}]}}
    cluster.kubectl("apply", "-f", "-", input=json.dumps(pod))
    wait_for(lambda: cluster.kubectl("logs", "counter", check=False).stdout == "runs 1\n", 60, "first run")
    cluster.kubectl("set", "image", "pod/counter", "app=busybox:1.37")
    wait_for(lambda: _statuses(cluster, "counter")["app"]["restartCount"] == 1, 60, "app restarted")
    wait_for(lambda: cluster.kubectl("logs", "counter", check=False).stdout == "runs 2\n", 30, "second run")
    assert cluster.kubectl("logs", "counter", "--previous").stdout == "runs 1\n"
    assert cluster.kubectl("exec", "counter", "--", "cat", "/cache/runs").stdout == "run\nrun\n"


def test_sigterm_is_ignored_by_a_first_process_without_a_handler_and_ends_one_that_traps_it(cluster):
    """As under runc, the kubelet's SIGTERM goes to each container's first process, and the kernel
    drops it where that process has no handler: `sleep infinity` runs on until the 2 s grace period
    is up and is killed then (137, Error: finishedAt not before the deletionTimestamp, the grace
    period's end), where a script whose TERM trap exits 0 ends then, at its loop's next turn, its
    trap's line logged."""
    def kept(name: str, command: list[str]) -> dict:  # (a finalizer keeps the deleted pod to be read)
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": name, "namespace": "default", "finalizers": ["test.nanokube.io/keep"]}, "spec": {
            "terminationGracePeriodSeconds": 2, "restartPolicy": "Never",
            "containers": [{"name": "app", "image": "busybox", "command": command}]}}
    commands = {"stubborn": ["sleep", "infinity"],
                "trapping": ["sh", "-c", "trap 'echo stopping; exit 0' TERM; while true; do sleep 1; done"]}
    cluster.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        kept(name, command) for name, command in commands.items()]}))

    def all_in(state: str) -> dict | None:  # the pods by name, once each one's container is in `state`
        pods = {p["metadata"]["name"]: p for p in cluster.kubectl_json("get", "pods", *commands)["items"]}
        return pods if all(state in ((p["status"].get("containerStatuses") or [{}])[0].get("state") or {})
                           for p in pods.values()) else None
    wait_for(lambda: all_in("running"), 60, "both running")
    cluster.kubectl("delete", "pod", *commands, "--wait=false")
    pods = wait_for(lambda: all_in("terminated"), 30, "both ended")
    stubborn, trapping = (pods[name]["status"]["containerStatuses"][0]["state"]["terminated"] for name in commands)
    deleted = datetime.fromisoformat(pods["stubborn"]["metadata"]["deletionTimestamp"])
    assert (stubborn["exitCode"], stubborn["reason"]) == (137, "Error")
    assert datetime.fromisoformat(stubborn["finishedAt"]) >= deleted  # it ran on past SIGTERM, to the grace's end
    assert (trapping["exitCode"], trapping["reason"]) == (0, "Completed")
    assert cluster.kubectl("logs", "trapping").stdout == "stopping\n"
    for name in commands:
        cluster.kubectl("patch", "pod", name, "--type=merge", "-p", '{"metadata":{"finalizers":null}}')
