"""The commands people type first, on the default simulated runtime: `kubectl
run -i --rm` of a shell returns once its stdin closes (the container reads it
to EOF and exits 0, as `sh` does), and the pod is deleted; a container whose
stdin is left open (no stdinOnce) keeps running after the client leaves;
`kubectl run -it` on a terminal echoes what is typed and ends at ^D; `tty` and
`stty size` tell a terminal (sized as the client's, resized with it) from none;
`kubectl debug node/N` sees the simulated node's own root at /host."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pty
import select
import struct
import subprocess
import termios
import time

import pytest

from tests.e2e.conftest import KUBECTL, wait_for


@pytest.fixture(scope="module")
def cluster(session_cluster):
    """The session's cluster (conftest.session_cluster): this module's pods have names of its own
    (a few left running, without requests); `kubectl debug node/gpu-0` writes /tmp/note on that node's
    simulated root, which nothing else reads."""
    return session_cluster


def test_run_interactive_shell_returns_when_stdin_closes_and_the_pod_is_removed(cluster):
    r = cluster.kubectl("run", "-i", "--rm", "--restart=Never", "x", "--image=busybox", "--", "sh",
                        input="", check=False, timeout=60)
    assert r.returncode == 0, r.stderr
    # --rm's delete is graceful: the pod goes once the kubelet has finished it, maybe after kubectl returned
    wait_for(lambda: cluster.kubectl("get", "pod", "x", "--ignore-not-found", "-o", "name").stdout == "", 30,
             "x deleted")


def test_a_piped_command_completes_the_pod_with_exit_code_zero(cluster):
    r = cluster.kubectl("run", "-i", "--restart=Never", "piped", "--image=busybox", "--", "sh",
                        input="echo hi\n", check=False, timeout=60)
    assert r.returncode == 0, r.stderr
    wait_for(lambda: cluster.kubectl_json("get", "pod", "piped")["status"].get("phase") == "Succeeded",
             30, "piped Succeeded")
    term = cluster.kubectl_json("get", "pod", "piped")["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (term["exitCode"], term["reason"]) == (0, "Completed")


def test_without_stdin_once_the_container_keeps_running_after_the_client_leaves(cluster):
    """The first client sends a line and the end of its stdin and stays attached: a second client's
    line reaches the same shell, and both see its answer; once both have left, a third's commands
    still run there (the same container, never restarted)."""
    env = {**os.environ, "KUBECONFIG": cluster.kubeconfig, "KUBECACHEDIR": str(cluster.data_dir / "kubecache")}
    run = [KUBECTL, "run", "-i", "--leave-stdin-open", "--restart=Never", "open", "--image=busybox", "--", "sh"]
    attach = [KUBECTL, "attach", "-i", "open"]
    first = subprocess.Popen(run, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    second = None
    try:
        first.stdin.write(b"echo first\n")
        first.stdin.close()
        assert first.stdout.readline() == b"first\n"
        second = subprocess.Popen(attach, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                  env=env)
        second.stdin.write(b"echo second\n")
        second.stdin.close()
        assert second.stdout.readline() == b"second\n"
        assert first.stdout.readline() == b"second\n", "the first client stays attached after its stdin's end"
        assert first.poll() is None
    finally:
        for client in (first, second):
            if client is not None:
                client.kill()
                client.wait()
    pod = cluster.kubectl_json("get", "pod", "open")
    assert pod["spec"]["containers"][0].get("stdinOnce") is None
    r = cluster.kubectl(*attach[1:], input="echo third\nexit 3\n", timeout=30)
    assert r.stdout == "third\n"
    wait_for(lambda: cluster.kubectl_json("get", "pod", "open")["status"].get("phase") == "Failed", 30, "open Failed")
    status = cluster.kubectl_json("get", "pod", "open")["status"]["containerStatuses"][0]
    assert (status["state"]["terminated"]["exitCode"], status["restartCount"]) == (3, 0)


def _read_until(fd: int, want: bytes, timeout: float = 30) -> bytes:
    """What the terminal shows until `want` appears (or the client exits)."""
    out, end = b"", time.monotonic() + timeout
    while want not in out and time.monotonic() < end:
        if select.select([fd], [], [], 0.2)[0]:
            try:
                out += os.read(fd, 4096)
            except OSError:  # the client exited and closed the terminal
                break
    return out


def _window(fd: int, rows: int, columns: int) -> None:
    """Size the terminal; done on its master side, the kernel signals SIGWINCH to the client on it."""
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))


@contextlib.contextmanager
def _on_a_terminal(cluster, *args: str, size: tuple[int, int] = (24, 80)):
    """kubectl `args` on a pseudo-terminal of `size` (rows, columns): yields the terminal's fd and
    `exited()`, which waits for kubectl to exit and gives its exit code; kubectl is killed if the
    test leaves before."""
    env = {**os.environ, "KUBECONFIG": cluster.kubeconfig, "KUBECACHEDIR": str(cluster.data_dir / "kubecache")}
    pid, fd = pty.fork()
    if pid == 0:
        _window(0, *size)
        os.execve(KUBECTL, [KUBECTL, *args], env)
    reaped = []

    def exited() -> int:
        wait_for(lambda: reaped.append(os.waitpid(pid, os.WNOHANG)) or reaped[-1][0] == pid, 30, "kubectl exited")
        return os.waitstatus_to_exitcode(reaped[-1][1])
    try:
        yield fd, exited
    finally:
        if not reaped or reaped[-1][0] != pid:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        os.close(fd)


def test_run_on_a_terminal_echoes_input_and_ctrl_d_ends_the_shell(cluster):
    with _on_a_terminal(cluster, "run", "-it", "--rm", "--restart=Never", "tty", "--image=busybox", "--",
                        "sh") as (fd, exited):
        assert b"try pressing enter" in _read_until(fd, b"try pressing enter")
        os.write(fd, b"echo typed\r")  # the next prompt shows though no new line follows it
        assert b"echo typed\r\ntyped\r\n/ # " in _read_until(fd, b"typed\r\n/ # ")
        os.write(fd, b"\x04")
        assert b'pod "tty" deleted' in _read_until(fd, b'pod "tty" deleted')
        assert exited() == 0


def test_attach_on_a_terminal_shows_the_shells_prompt_at_once(cluster):
    """`kubectl attach -it` to a shell started with a terminal: Enter gets a new prompt, shown
    as the shell writes it, before any new line (attach streams what is written, not log lines)."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "prompt"}, "spec": {"containers": [
        {"name": "sh", "image": "busybox", "command": ["sh"], "stdin": True, "tty": True}]}}
    cluster.kubectl("apply", "-f", "-", input=json.dumps(pod))
    wait_for(lambda: cluster.kubectl_json("get", "pod", "prompt")["status"].get("phase") == "Running", 60,
             "prompt Running")
    with _on_a_terminal(cluster, "attach", "-it", "prompt") as (fd, exited):
        assert b"try pressing enter" in _read_until(fd, b"try pressing enter")
        os.write(fd, b"\r")
        assert b"\r\n/ # " in _read_until(fd, b"\r\n/ # ")
        os.write(fd, b"echo hi > /tmp/f; cat /tmp/f\r")
        assert b"\r\nhi\r\n/ # " in _read_until(fd, b"\r\nhi\r\n/ # ")
        os.write(fd, b"cd /tmp\r")  # busybox's prompt names the working directory
        assert b"cd /tmp\r\n/tmp # " in _read_until(fd, b"/tmp # ")
        os.write(fd, b"exit 6\r")
        exited()
    term = cluster.kubectl_json("get", "pod", "prompt")["status"]["containerStatuses"][0]
    assert (term.get("lastState") or term["state"])["terminated"]["exitCode"] == 6


def _running_pod(cluster, name: str) -> None:
    cluster.kubectl("run", name, "--image=busybox", "--", "sleep", "infinity")
    wait_for(lambda: cluster.kubectl_json("get", "pod", name)["status"].get("phase") == "Running", 60,
             f"{name} Running")


def test_exec_of_a_shell_with_piped_stdin_runs_each_line_until_exit(cluster):
    """`kubectl exec -i pod -- sh` runs the lines it is sent; `exit 3` ends it (kubectl exits 3), and a
    command not interpreted is not found, as busybox's sh says."""
    _running_pod(cluster, "piped-shell")
    r = cluster.kubectl("exec", "-i", "piped-shell", "--", "sh", input="echo hi\npython3\nexit 3\necho never\n",
                        check=False)
    assert (r.returncode, r.stdout) == (3, "hi\n"), r.stderr
    assert "sh: python3: not found\n" in r.stderr
    r = cluster.kubectl("exec", "-i", "piped-shell", "--", "/bin/bash", input="false\n", check=False)
    assert r.returncode == 1, r.stderr  # EOF: the shell exits with the last command's status
    r = cluster.kubectl("exec", "-i", "piped-shell", "--", "sh", input="trap 'echo bye $?' EXIT\necho hi; false\n",
                        check=False)
    assert (r.returncode, r.stdout) == (1, "hi\nbye 1\n"), r.stderr  # its EXIT trap runs at EOF too


def test_exec_it_of_a_shell_prompts_echoes_and_exits_with_its_code(cluster):
    _running_pod(cluster, "tty-shell")
    with _on_a_terminal(cluster, "exec", "-it", "tty-shell", "--", "sh") as (fd, exited):
        assert b"/ # " in _read_until(fd, b"/ # ")
        os.write(fd, b"echo typed\r")
        assert b"echo typed\r\ntyped\r\n/ # " in _read_until(fd, b"typed\r\n/ # ")
        os.write(fd, b"nope\r")
        assert b"sh: nope: not found\r\n/ # " in _read_until(fd, b"found\r\n/ # ")
        os.write(fd, b"exit 4\r")
        _read_until(fd, b"exit code 4")
        assert exited() == 4


def _ephemeral(cluster, pod: str, name: str) -> dict:
    statuses = cluster.kubectl_json("get", "pod", pod)["status"].get("ephemeralContainerStatuses") or []
    return next((s for s in statuses if s["name"] == name), {})


def test_an_ephemeral_container_runs_its_command_and_ends_with_it(cluster):
    _running_pod(cluster, "debugged")
    cluster.kubectl("debug", "debugged", "--image=busybox", "--container=sleeper", "--", "sleep", "1")
    wait_for(lambda: "terminated" in _ephemeral(cluster, "debugged", "sleeper").get("state", {}), 30,
             "sleeper terminated")
    term = _ephemeral(cluster, "debugged", "sleeper")["state"]["terminated"]
    assert (term["exitCode"], term["reason"]) == (0, "Completed")
    assert cluster.kubectl_json("get", "pod", "debugged")["status"]["phase"] == "Running"
    cluster.kubectl("debug", "debugged", "--image=busybox", "--container=failing", "--", "sh", "-c",
                    "echo bye; exit 2")
    wait_for(lambda: "terminated" in _ephemeral(cluster, "debugged", "failing").get("state", {}), 30,
             "failing terminated")
    assert _ephemeral(cluster, "debugged", "failing")["state"]["terminated"]["exitCode"] == 2
    assert cluster.kubectl("logs", "debugged", "-c", "failing").stdout == "bye\n"


def test_debug_i_pipes_commands_to_the_ephemeral_shell_until_exit(cluster):
    _running_pod(cluster, "piped-debug")
    r = cluster.kubectl("debug", "-i", "piped-debug", "--image=busybox", "--target=piped-debug",
                        "--container=dbg", input="echo hi; exit\n", check=False, timeout=60)
    assert "hi\n" in r.stdout, (r.stdout, r.stderr)
    wait_for(lambda: "terminated" in _ephemeral(cluster, "piped-debug", "dbg").get("state", {}), 30,
             "dbg terminated")
    assert _ephemeral(cluster, "piped-debug", "dbg")["state"]["terminated"]["exitCode"] == 0


def test_debug_with_a_target_sees_its_process_and_exec_answers_id_and_uname(cluster):
    """`kubectl debug -it pod --target=... -- sh -c 'ps'`, the debug docs' first step, hung: `ps` was
    not simulated, so neither was the script, and the container ran on. Now it lists the target's
    process, the debugger's and itself, and ends; `id` and `uname` answer in an exec too."""
    _running_pod(cluster, "ps-target")
    r = cluster.kubectl("debug", "-i", "ps-target", "--image=busybox", "--target=ps-target", "--container=ps",
                        "--", "sh", "-c", "ps; id", input="", check=False, timeout=60)
    assert ("    1 root      0:00 sleep infinity\n    7 root      0:00 sh -c ps; id\n   13 root      0:00 ps\n"
            in r.stdout), r.stderr
    assert "uid=0(root) gid=0(root) groups=0(root)\n" in r.stdout
    wait_for(lambda: "terminated" in _ephemeral(cluster, "ps-target", "ps").get("state", {}), 30, "ps terminated")
    assert cluster.kubectl("exec", "ps-target", "--", "uname", "-sr").stdout == "Linux 6.8.0-nanokube\n"


def test_debug_it_runs_what_is_typed_in_the_ephemeral_shell(cluster):
    _running_pod(cluster, "tty-debug")
    with _on_a_terminal(cluster, "debug", "-it", "tty-debug", "--image=busybox", "--target=tty-debug",
                        "--container=dbg") as (fd, exited):
        assert b"try pressing enter" in _read_until(fd, b"try pressing enter")
        os.write(fd, b"echo typed\r")
        assert b"echo typed\r\ntyped\r\n" in _read_until(fd, b"typed\r\ntyped\r\n")
        os.write(fd, b"exit 5\r")
        exited()
    term = _ephemeral(cluster, "tty-debug", "dbg")["state"]["terminated"]
    assert (term["exitCode"], term["reason"]) == (5, "Error")


def test_run_i_of_a_shell_runs_what_is_piped_and_exits_with_its_exit_code(cluster):
    r = cluster.kubectl("run", "-i", "--restart=Never", "exits", "--image=busybox", "--", "sh",
                        input="echo hi\nexit 3\n", check=False, timeout=60)
    assert "hi\n" in r.stdout, (r.stdout, r.stderr)
    wait_for(lambda: cluster.kubectl_json("get", "pod", "exits")["status"].get("phase") == "Failed", 30,
             "exits Failed")
    term = cluster.kubectl_json("get", "pod", "exits")["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (term["exitCode"], term["reason"]) == (3, "Error")


def test_run_i_of_a_script_reading_its_stdin_prints_what_it_writes_and_the_pod_is_removed(cluster):
    """`kubectl run -i --rm -- sh -c 'while read l; do echo got:$l; done'`: the loop reads what is
    piped to its EOF; kubectl prints what it wrote (none of nanokube's lines) and returns 0."""
    r = cluster.kubectl("run", "-i", "--rm", "--restart=Never", "reads", "--image=busybox", "--", "sh", "-c",
                        "while read l; do echo got:$l; done", input="a\nb\n", check=False, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("got:a\ngot:b\n") and "nanokube" not in r.stdout + r.stderr, (r.stdout, r.stderr)
    wait_for(lambda: cluster.kubectl("get", "pod", "reads", "--ignore-not-found", "-o", "name").stdout == "", 30,
             "reads deleted")


def test_a_shells_loop_waiting_for_a_file_goes_on_once_an_exec_makes_it(cluster):
    """A loop typed at `kubectl exec -i pod -- sh` that waits for a file reads the container's files
    again at each pass, as a container's command does: once another exec makes the file, what
    follows runs and the session goes on to its next line (before, it waited for ever)."""
    _running_pod(cluster, "waiting-shell")
    env = {**os.environ, "KUBECONFIG": cluster.kubeconfig, "KUBECACHEDIR": str(cluster.data_dir / "kubecache")}
    p = subprocess.Popen([KUBECTL, "exec", "-i", "waiting-shell", "--", "sh"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        p.stdin.write(b"until [ -f /tmp/go ]; do echo waiting; sleep 1; done; echo released\nexit 5\n")
        p.stdin.flush()
        # the loop reads the container's files again at each pass: with no file, it goes round again
        assert p.stdout.readline() == b"waiting\n"
        assert p.stdout.readline() == b"waiting\n"
        assert p.poll() is None
        cluster.kubectl("exec", "waiting-shell", "--", "touch", "/tmp/go")
        out, err = p.communicate(timeout=30)
    finally:
        p.kill()
        p.wait()
    assert p.returncode == 5, err
    lines = out.decode().split("\n")
    assert set(lines[:-2]) <= {"waiting"} and lines[-2:] == ["released", ""]


def test_tty_and_stty_size_tell_a_terminal_from_none(cluster):
    """Without -t a command has no terminal: busybox's `tty` prints `not a tty` (status 1) and
    `stty size` fails its ioctl; with -t it is on /dev/pts/0, sized as kubectl's terminal is (sent
    on the resize channel) and resized as that is, its output's new lines CR LF, as a pty's are;
    there busybox's ls colours its names."""
    _running_pod(cluster, "terminal")
    r = cluster.kubectl("exec", "terminal", "--", "tty", check=False)
    assert (r.returncode, r.stdout) == (1, "not a tty\n"), r.stderr
    r = cluster.kubectl("exec", "terminal", "--", "sh", "-c", "stty size || echo failed $?", check=False)
    assert (r.stdout, r.stderr) == ("failed 1\n", "stty: standard input: Inappropriate ioctl for device\n")
    with _on_a_terminal(cluster, "exec", "-it", "terminal", "--", "stty", "size", size=(33, 111)) as (fd, exited):
        assert _read_until(fd, b"33 111\r\n").endswith(b"33 111\r\n")
        assert exited() == 0
    with _on_a_terminal(cluster, "exec", "-it", "terminal", "--", "sh", size=(33, 111)) as (fd, exited):
        assert b"/ # " in _read_until(fd, b"/ # ")
        # kubectl sends its first size from a goroutine of its own, so a line typed at the first prompt
        # can beat it (a pty is 0 0 until then, on any cluster)
        wait_for(lambda: os.write(fd, b"stty size; tty -s && tty\r") and
                 b"\r\n33 111\r\n/dev/pts/0\r\n/ # " in _read_until(fd, b"/dev/pts/0\r\n/ # ", 5), 30, "the first size")
        os.write(fd, b"ls -1 /; ls / | head -1\r")  # on the terminal in colour; through a pipe plain
        assert b"\r\n\x1b[1;34mbin\x1b[m\r\n\x1b[1;34mdev\x1b[m\r\n" in _read_until(fd, b"\r\nbin\r\n/ # ")
        _window(fd, 50, 150)
        # the new size reaches the shell on the resize channel, after kubectl's SIGWINCH
        wait_for(lambda: os.write(fd, b"stty size\r") and b"\r\n50 150\r\n" in _read_until(fd, b"\r\n/ # ", 5),
                 30, "the resize")
        os.write(fd, b"exit\r")
        assert exited() == 0


def test_debug_node_sees_the_simulated_nodes_root_at_host(cluster):
    """`kubectl debug node/N` mounts the node's / at /host (hostPath): a simulated node's root is its
    own directory, with the /etc/os-release of the OS image it reports; what is written there a pod
    on that node sees through its own hostPath volume, one on another node does not; a hostPath of
    a file is mounted as that file; one whose type check fails is FailedMount, named as the pod gave it."""
    os_image = cluster.kubectl("get", "node", "gpu-0", "-o", "jsonpath={.status.nodeInfo.osImage}").stdout
    r = cluster.kubectl("debug", "-i", "node/gpu-0", "--image=busybox", "--", "sh", "-c",
                        "ls /host; ls /host/var/log; cat /host/etc/os-release; echo from-debug > /host/tmp/note",
                        input="", check=False, timeout=60)
    listing = r.stdout.split("PRETTY_NAME=")[0].splitlines()
    assert {"etc", "proc", "root", "tmp", "usr", "var", "containers", "pods"} <= set(listing), r.stdout + r.stderr
    assert f'PRETTY_NAME="{os_image}"\n' in r.stdout and os_image
    pods = [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"reads-{node}"}, "spec": {
        "nodeName": node, "restartPolicy": "Never",
        "volumes": [{"name": "node-tmp", "hostPath": {"path": "/tmp", "type": "Directory"}},
                    {"name": "release", "hostPath": {"path": "/etc/os-release", "type": "File"}}],
        "containers": [{"name": "main", "image": "busybox", "command": ["cat", "/node-tmp/note", "/etc/os-release"],
                        "volumeMounts": [{"name": "node-tmp", "mountPath": "/node-tmp"},
                                         {"name": "release", "mountPath": "/etc/os-release", "readOnly": True}]}]}}
            for node in ("gpu-0", "gpu-1")]
    pods.append({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "wants-a-file"}, "spec": {
        "nodeName": "gpu-0", "volumes": [{"name": "conf", "hostPath": {"path": "/etc/missing.conf", "type": "File"}}],
        "containers": [{"name": "main", "image": "busybox",
                        "volumeMounts": [{"name": "conf", "mountPath": "/conf"}]}]}})
    cluster.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": pods}))
    phases = {"reads-gpu-0": "Succeeded", "reads-gpu-1": "Failed"}
    wait_for(lambda: all(cluster.kubectl_json("get", "pod", name)["status"].get("phase") == phase
                         for name, phase in phases.items()), 60, "the readers ran")
    release = r.stdout[r.stdout.index("PRETTY_NAME="):]
    assert cluster.kubectl("logs", "reads-gpu-0").stdout == "from-debug\n" + release
    assert cluster.kubectl("logs", "reads-gpu-1").stdout == \
        "cat: can't open '/node-tmp/note': No such file or directory\n" + release
    message = ('MountVolume.SetUp failed for volume "conf" : hostPath type check failed: /etc/missing.conf '
               'is not a file')
    wait_for(lambda: message in cluster.kubectl("events", "--for", "pod/wants-a-file").stdout, 60, "FailedMount")
    debugger = next(p["metadata"]["name"] for p in cluster.kubectl_json("get", "pods")["items"]
                    if p["metadata"]["name"].startswith("node-debugger-gpu-0-"))
    cluster.kubectl("delete", "pod", debugger, "reads-gpu-0", "reads-gpu-1", "wants-a-file", "--wait=false")


def test_a_tty_containers_command_runs_on_its_terminal(cluster):
    """A container with `tty: true` runs on a terminal the runtime made (no client has sized it
    yet: 0 0); its log is that terminal's output, new lines CR LF. Without `tty`, its command
    has none."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "on-a-tty"}, "spec": {
        "restartPolicy": "Never", "containers": [
            {"name": "term", "image": "busybox", "tty": True,
             "command": ["sh", "-c", "tty; stty size; ls /nope; sleep 600"]},
            {"name": "plain", "image": "busybox", "command": ["sh", "-c", "tty; ls /nope; sleep 600"]}]}}
    cluster.kubectl("apply", "-f", "-", input=json.dumps(pod))
    wait_for(lambda: cluster.kubectl("logs", "on-a-tty", "-c", "plain", check=False).stdout.count("\n") == 2, 60,
             "both lines logged")
    env = {**os.environ, "KUBECONFIG": cluster.kubeconfig, "KUBECACHEDIR": str(cluster.data_dir / "kubecache")}
    logs = subprocess.run([KUBECTL, "logs", "on-a-tty", "-c", "term"], capture_output=True, env=env, check=True)
    assert logs.stdout == b"/dev/pts/0\r\n0 0\r\nls: /nope: No such file or directory\r\n"  # bytes: CR LF kept
    assert cluster.kubectl("logs", "on-a-tty", "-c", "plain").stdout == \
        "not a tty\nls: /nope: No such file or directory\n"
    cluster.kubectl("delete", "pod", "on-a-tty", "--wait=false")
