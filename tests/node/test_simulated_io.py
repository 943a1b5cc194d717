"""Simulated containers' logs, exec, attach and port-forward, as their pod's annotations declare them."""

import asyncio
import ssl
from types import SimpleNamespace

import pytest

from nanokube.clock import Clock
from nanokube.machinery.errors import APIError
from nanokube.machinery.streaming import LogOptions, StreamFailed, StreamSession, sandbox_id
from nanokube.node.devicemanager.manager import DeviceManager
from nanokube.node.dra.cdi import ContainerEdits
from nanokube.node.simulated_command import interpret
from nanokube.node.simulated_io import SimulatedIO
from tests.node import ManualClock


class _NoServices:
    """An API client whose namespaces hold no Services (the environment's service variables)."""

    def resource(self, *_):
        return self

    async def list(self, *_):
        return [], "1"


def worker(annotations=None, ports=(), **main):
    pod = {"metadata": {"name": "p", "namespace": "ns", "uid": "u1", "annotations": annotations or {}},
           "spec": {"containers": [{"name": "main", "ports": [{"containerPort": p} for p in ports], **main}]}}
    agent = SimpleNamespace(name="node-1", host_ip="10.0.0.1", client=_NoServices(), volumes=None,
                            devices=DeviceManager(),
                            claims=SimpleNamespace(cdi_environment=lambda pod, container: {},
                                                   cdi_edits=lambda pod, container: ContainerEdits()))
    return SimpleNamespace(pod=pod, clock=Clock(), uid="u1", name="p", namespace="ns", changed=asyncio.Event(),
                           agent=agent, ip="10.244.0.5")


async def settle():
    """Let the attach's stdin reader take what was queued."""
    for _ in range(10):
        await asyncio.sleep(0)


def session(out: list, stdin=False, tty=False):
    async def write(data):
        out.append(data)
    return StreamSession(stdin, True, True, tty, write, write)

async def typed(io: SimulatedIO, lines: bytes) -> asyncio.Future:
    """A client attached to container main's stdin that sent `lines`, once they were taken: the attach."""
    s = session([], stdin=True)
    attached = asyncio.ensure_future(io.attach("main", s))
    s.stdin_data.put_nowait(lines)
    await settle()
    return attached


def stdin_script(script: str, out: list):
    """A busybox container running `sh -c script` with its stdin (stdinOnce) attached by a client
    writing to `out`, on a manual clock: (the clock, its SimulatedIO, the session, the attach)."""
    w = worker(stdin=True, stdinOnce=True, command=["sh", "-c", script])
    w.clock = clock = ManualClock()
    io = SimulatedIO(w)
    io.started({"main": "busybox"})
    s = session(out, stdin=True)
    return clock, io, s, asyncio.ensure_future(io.attach("main", s))



async def test_log_lines_of_init_and_app_containers_and_the_previous_instance():
    io = SimulatedIO(worker({"sim.nanokube.io/log": "hello"}))
    io.started({"main": "img:1"}, {"setup": "img:0"})
    assert io.serve_log("setup", LogOptions()) == (b"nanokube: init container setup started (image img:0)\n"
                                                   b"nanokube: init container setup exited with code 0\n")
    io.exited(2)
    io.started({"main": "img:1"})
    assert io.serve_log("main", LogOptions(previous=True)).endswith(b"hello\nnanokube: container main exited with code 2\n")
    assert io.serve_log("main", LogOptions(tail_lines=1)) == b"hello\n"
    with pytest.raises(APIError, match="is waiting to start"):
        io.serve_log("other", LogOptions())


async def test_a_crashed_container_waiting_out_its_back_off_serves_that_instance_as_previous():
    """CrashLoopBackOff: the kubelet reads `previous` from lastState.terminated, the instance that just
    crashed (the current logs show it too); before any restart there is no previous one."""
    w = worker({"sim.nanokube.io/log": "step 1"})
    io = SimulatedIO(w)
    io.started({"main": "img:1"})
    io.exited(2)
    w.pod["status"] = {"containerStatuses": [{"name": "main", "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                                              "lastState": {"terminated": {"exitCode": 2}}}]}
    crashed = b"step 1\nnanokube: container main exited with code 2\n"
    assert io.serve_log("main", LogOptions(previous=True)).endswith(crashed)
    assert io.serve_log("main", LogOptions()).endswith(crashed)
    w.pod["status"] = {"containerStatuses": [{"name": "main", "state": {"terminated": {"exitCode": 2}}}]}
    with pytest.raises(APIError, match='previous terminated container "main" in pod "p" not found'):
        io.serve_log("main", LogOptions(previous=True))


async def test_a_container_restarted_alone_keeps_its_previous_instance_and_the_others_run_on():
    io = SimulatedIO(worker())
    io.started({"main": "img:1", "side": "img:2"})
    io.restarted("main", "img:1", 0, "received SIGTERM", lambda: None)  # a command not interpreted
    assert io.serve_log("main", LogOptions(previous=True)).endswith(
        b"container main received SIGTERM\nnanokube: container main exited with code 0\n")
    assert io.serve_log("main", LogOptions()) == (b"nanokube: container main started (image img:1)\n"
                                                  b"nanokube: container main is ready\n")
    assert b"exited" not in io.serve_log("side", LogOptions())


async def test_exec_is_scripted_or_not_found():
    io = SimulatedIO(worker({"sim.nanokube.io/exec.hostname": "p\n",
                             "sim.nanokube.io/exec.fail": '{"stderr": "bad\\n", "exitCode": 4}'}))
    io.started({"main": "img"})
    out = []
    assert await io.exec("main", ["/bin/hostname"], session(out)) == 0 and out == [b"p\n"]
    assert await io.exec("main", ["fail", "now"], session(out)) == 4 and out[-1] == b"bad\n"
    with pytest.raises(StreamFailed, match='exec: "python3": executable file not found in \\$PATH'):
        await io.exec("main", ["python3"], session(out))
    io.exited(0)
    with pytest.raises(StreamFailed, match="not running"):
        await io.exec("main", ["hostname"], session(out))


async def test_an_execs_shell_script_says_which_command_it_does_not_know_and_goes_on():
    """`kubectl exec pod -- sh -c 'ip addr; echo after'` failed with `exec: "sh": executable file not
    found`, as if the image had no shell; a shell says `sh: ip: not found` and runs the rest, as the
    interactive one does. A container's own such script still runs on (`python train.py`)."""
    io = SimulatedIO(worker())
    io.started({"main": "busybox"})
    out = []
    assert await io.exec("main", ["sh", "-c", "ip addr; echo after; df -h"], session(out)) == 127
    assert b"".join(out) == b"sh: ip: not found\nafter\nsh: df: not found\n"
    assert interpret(["sh", "-c", "python train.py"], 0.0, io.draft("main")) is None
    io.stop()


async def test_attach_streams_new_lines_until_exit():
    io = SimulatedIO(worker())
    io.started({"main": "img"})
    out = []
    attached = asyncio.ensure_future(io.attach("main", session(out)))
    await asyncio.sleep(0)
    io._write("working")
    io.exited(7)
    assert await asyncio.wait_for(attached, 5) == 7
    assert out == [b"working\n", b"nanokube: container main exited with code 7\n"]


async def test_port_forward_reaches_only_the_ports_a_known_program_listens_on():
    """A container whose program is known listens where it does: `python3 -m http.server 8080` on
    8080 alone (its declared 8000 is refused), `sleep infinity` on its declared ports alone."""
    for command, open_, closed in ((["sh", "-c", "cd /srv && exec python3 -m http.server 8080"], 8080, 8000),
                                   (["sleep", "infinity"], 8000, 8080)):
        io = SimulatedIO(worker(ports=(8000,), command=command))
        io.started({"main": "python:3.12"})
        reader, writer = await io.port_forward(open_)
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert (await reader.read()).endswith(f"port {open_}\n".encode())
        with pytest.raises(StreamFailed, match=f"dial tcp4 127.0.0.1:{closed}: connect: connection refused"):
            await io.port_forward(closed)
        io.stop()


async def test_port_forward_reaches_only_a_well_known_server_images_own_port_and_the_declared_ones():
    """nginx's own program listens on 80 (declared or not) and on a port the pod declares (a
    server configured to); another port is refused. Given a command, it is that command's."""
    for ports, open_, closed in (((), (80,), (8080, 9000)), ((8080,), (80, 8080), (9000,))):
        io = SimulatedIO(worker(ports=ports, image="nginx:1.27"))
        io.started({"main": "nginx:1.27"})
        for port in open_:
            reader, writer = await io.port_forward(port)
            writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            assert (await reader.read()).endswith(f"port {port}\n".encode())
        for port in closed:
            with pytest.raises(StreamFailed, match=f"dial tcp4 127.0.0.1:{port}: connect: connection refused"):
                await io.port_forward(port)
        io.stop()
    io = SimulatedIO(worker(image="nginx", command=["python3", "-m", "http.server", "9000"]))
    io.started({"main": "nginx"})
    assert (io.listens(9000), io.listens(80)) == (True, False)
    io.stop()


async def test_port_forward_reaches_any_port_but_one_only_stopped_containers_declare():
    """What listens in a container running an image's own program is not known: a declared port
    and an undeclared one answer alike, as httpGet hooks find them; a finished init container's port is closed, and every port
    once no container runs. The refusal is containerd's, which the kubelet reports."""
    w = worker(ports=(8000,))
    w.pod["spec"]["initContainers"] = [{"name": "setup", "ports": [{"containerPort": 7000}]}]
    io = SimulatedIO(w)
    io.started({"main": "img"}, {"setup": "img"})
    for port in (8000, 9000):
        reader, writer = await io.port_forward(port)
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert (await reader.read()).endswith(f"\r\n\r\nnanokube simulated pod ns/p port {port}\n".encode())
    reader, writer = await io.port_forward(9000)
    writer.write(b"echo me")
    assert await reader.read(7) == b"echo me"
    writer.close()
    for port in (7000, 8000):
        if port == 8000:
            io.exited(0)
        with pytest.raises(StreamFailed) as e:
            await io.port_forward(port)
        assert str(e.value) == (  # containerd's words, the namespace named by the sandbox's ID
            f'failed to execute portforward in network namespace "/var/run/netns/cni-u1": failed to connect to '
            f'localhost:{port} inside namespace "{sandbox_id("u1")}", IPv4: dial tcp4 127.0.0.1:{port}: connect: '
            f"connection refused IPv6 dial tcp6: address localhost: no suitable address found ")


async def test_port_forward_answers_a_tls_hello_as_a_plain_http_server_does():
    """The simulated servers speak plain HTTP (an HTTPS hook falls back to it): a TLS ClientHello
    gets the 400 Go's net/http sends for what is no HTTP request, then the connection closes, so
    a TLS client fails its handshake instead of reading its own hello back."""
    io = SimulatedIO(worker())
    io.started({"main": "img"})
    reader, writer = await io.port_forward(8443)
    tls = ssl.create_default_context().wrap_bio(incoming := ssl.MemoryBIO(), outgoing := ssl.MemoryBIO(),
                                                server_hostname="p")
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    writer.write(outgoing.read())
    answer = await reader.read()
    assert answer == (b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\n"
                      b"Connection: close\r\n\r\n400 Bad Request")
    incoming.write(answer)
    with pytest.raises(ssl.SSLError, match="WRONG_VERSION_NUMBER|record layer failure|packet length too long"):
        tls.do_handshake()


@pytest.mark.parametrize("once", [True, False])
async def test_a_stdin_container_reads_to_eof_when_the_client_closes_stdin_with_stdin_once(once):
    """`kubectl run -i` sets stdinOnce: the client closing stdin closes the container's, and a
    process reading it to EOF exits; without stdinOnce the container's stdin stays open."""
    w = worker(stdin=True, stdinOnce=once)
    io = SimulatedIO(w)
    io.started({"main": "busybox"})
    s = session([], stdin=True)
    attached = asyncio.ensure_future(io.attach("main", s))
    s.stdin_data.put_nowait(b"echo hi\n")
    s.stdin_data.put_nowait(None)
    await settle()
    assert io.stdin_closed == ({"main"} if once else set()) and w.changed.is_set() is once
    attached.cancel()


async def test_a_terminal_echoes_what_is_typed_its_shell_runs_it_and_ctrl_d_is_eof():
    w = worker(stdin=True, tty=True)
    io = SimulatedIO(w)
    io.started({"main": "busybox"})
    out = []
    s = session(out, stdin=True, tty=True)
    attached = asyncio.ensure_future(io.attach("main", s))
    s.stdin_data.put_nowait(b"python3\r")
    await settle()  # the next prompt shows before its line ends, as on a real terminal
    assert out == [b"python3\r\n", b"sh: python3: not found\r\n", b"/ # "] and not io.stdin_closed
    assert io.serve_log("main", LogOptions()).endswith(b"/ # python3\r\nsh: python3: not found\r\n")
    s.stdin_data.put_nowait(b"\x04")
    await settle()
    assert io.stdin_closed == {"main"} and w.changed.is_set()
    io.exited(0)
    assert await asyncio.wait_for(attached, 5) == 0


async def test_stdin_of_a_container_without_stdin_is_ignored():
    w = worker(stdinOnce=True)
    io = SimulatedIO(w)
    io.started({"main": "busybox"})
    s = session([], stdin=True)
    attached = asyncio.ensure_future(io.attach("main", s))
    s.stdin_data.put_nowait(None)
    await settle()
    assert not io.stdin_closed
    attached.cancel()


async def test_an_interpreted_command_does_not_read_its_stdin():
    """`kubectl run -i ... -- sleep 5`: sleep ignores its stdin, so the client closing it does not
    end the container; its command's end does."""
    w = worker(stdin=True, stdinOnce=True, command=["sleep", "5"])
    io = SimulatedIO(w)
    io.started({"main": "busybox"}, programs={"main": interpret(["sleep", "5"])})
    s = session([], stdin=True)
    attached = asyncio.ensure_future(io.attach("main", s))
    s.stdin_data.put_nowait(None)
    await settle()
    assert io.stdin_closed == set() and not w.changed.is_set()
    attached.cancel()


async def test_a_shell_on_stdin_runs_each_line_and_exit_sets_its_exit_status():
    """`kubectl run -i ... -- sh` piped `echo hi` then `exit 3`: the log has `hi`, the container exits 3."""
    w = worker(stdin=True, stdinOnce=True, command=["sh"])
    io = SimulatedIO(w)
    io.started({"main": "busybox"})
    s = session([], stdin=True)
    attached = asyncio.ensure_future(io.attach("main", s))
    s.stdin_data.put_nowait(b"echo hi\nexit 3\necho never\n")
    await settle()
    assert io.stdin_closed == {"main"} and io.stdin_status == {"main": 3} and w.changed.is_set()
    assert io.serve_log("main", LogOptions()).endswith(b"hi\n")
    attached.cancel()


async def test_file_changes_happen_when_the_command_makes_them_on_the_nodes_clock(tmp_path):
    """exec's `sleep 5; echo x > /tmp/f` makes the file 5 s later; a container's own command's
    changes come on its clock too, from its start."""
    from nanokube.node.simulated_fs import Dir
    clock = ManualClock()
    w = worker()
    w.clock = clock
    w.agent.volumes = SimpleNamespace(volume_dir=lambda uid, name: str(tmp_path / name))
    io = SimulatedIO(w)
    program = interpret(["sh", "-c", "mkdir /tmp/a; sleep 3; mkdir /tmp/b; sleep inf"], clock.now(), io.draft("main"))
    io.started({"main": "busybox"}, programs={"main": program})
    assert isinstance(io.files("main").lookup("/tmp/a"), Dir) and io.files("main").lookup("/tmp/b") is None
    out = []
    ran = asyncio.ensure_future(io.exec("main", ["sh", "-c", "sleep 5; echo x > /tmp/f; cat /tmp/f"], session(out)))
    await settle()
    assert io.files("main").lookup("/tmp/f") is None
    await clock.advance(3)
    await settle()
    assert isinstance(io.files("main").lookup("/tmp/b"), Dir) and io.files("main").lookup("/tmp/f") is None
    await clock.advance(2)
    assert await asyncio.wait_for(ran, 5) == 0 and out == [b"x\n"]
    assert io.files("main").read("/tmp/f") == b"x\n"
    io.stop()


async def test_an_endless_loop_logs_each_pass_on_the_nodes_clock_until_the_container_stops():
    """`while true; do echo step; sleep 5; done`: a line each 5 s of the node's clock, written as
    it comes due, and none after the container is stopped (the pod deleted)."""
    clock = ManualClock()
    w = worker()
    w.clock = clock
    io = SimulatedIO(w)
    program = interpret(["sh", "-c", "while true; do echo step $HOSTNAME; sleep 5; done"], clock.now(),
                        io.draft("main"), env={"HOSTNAME": "p"})
    io.started({"main": "busybox"}, programs={"main": program})
    assert io.serve_log("main", LogOptions()) == b"step p\n"
    await clock.advance(12)
    await settle()
    assert io.serve_log("main", LogOptions()) == b"step p\n" * 3
    io.exit("main", 143)
    await clock.advance(60)
    await settle()
    assert io.serve_log("main", LogOptions()) == b"step p\n" * 3
    io.stop()


async def test_exec_of_a_filter_answers_each_line_as_it_is_sent():
    """`kubectl exec -i pod -- grep -v debug`: each line that came is answered before the next is
    sent (before, nothing was written until the client's EOF); `head -n 2` ends after its lines."""
    io = SimulatedIO(worker())
    io.started({"main": "busybox"})
    out = []
    s = session(out, stdin=True)
    ran = asyncio.ensure_future(io.exec("main", ["grep", "-v", "debug"], s))
    s.stdin_data.put_nowait(b"step 1\ndebug x\nst")
    await settle()
    assert out == [b"step 1\n"] and not ran.done()
    s.stdin_data.put_nowait(b"ep 2\n")
    await settle()
    assert out == [b"step 1\n", b"step 2\n"]
    s.stdin_data.put_nowait(None)
    assert await asyncio.wait_for(ran, 5) == 0
    out.clear()
    s = session(out, stdin=True)
    ran = asyncio.ensure_future(io.exec("main", ["head", "-n", "2"], s))
    s.stdin_data.put_nowait(b"a\nb\nc\n")
    assert await asyncio.wait_for(ran, 5) == 0 and out == [b"a\nb\n"]
    io.stop()


async def test_an_attached_cat_container_writes_each_piece_of_its_stdin_as_it_comes():
    """`kubectl run -i --image=busybox echo -- cat`: what the client sends is in the container's
    log (and the attached client's output) as it comes; at EOF the container exits with cat's 0,
    or, for `grep x`, with 1 when no line matched."""
    w = worker(stdin=True, stdinOnce=True, command=["cat"])
    io = SimulatedIO(w)
    io.started({"main": "busybox"})
    out = []
    s = session(out, stdin=True)
    attached = asyncio.ensure_future(io.attach("main", s))
    s.stdin_data.put_nowait(b"hello\n")
    await settle()
    assert out == [b"hello\n"] and io.serve_log("main", LogOptions()) == b"hello\n" and not io.stdin_closed
    s.stdin_data.put_nowait(None)
    await settle()
    assert io.stdin_closed == {"main"} and io.stdin_status == {"main": 0}
    attached.cancel()
    w = worker(stdin=True, stdinOnce=True, command=["grep", "x"])
    io = SimulatedIO(w)
    io.started({"main": "busybox"})
    s = session([], stdin=True)
    attached = asyncio.ensure_future(io.attach("main", s))
    s.stdin_data.put_nowait(b"abc\n")
    s.stdin_data.put_nowait(None)
    await settle()
    assert io.stdin_status == {"main": 1} and io.serve_log("main", LogOptions()) == b""
    attached.cancel()


async def test_exec_of_a_pipeline_of_filters_streams_through_each():
    """`kubectl exec -i pod -- sh -c 'grep -v debug | tr a-z A-Z'`: each line through both as it
    comes; `head -n 2 | wc -l` ends when head has its lines."""
    io = SimulatedIO(worker())
    io.started({"main": "busybox"})
    out = []
    s = session(out, stdin=True)
    ran = asyncio.ensure_future(io.exec("main", ["sh", "-c", "grep -v debug | tr a-z A-Z"], s))
    s.stdin_data.put_nowait(b"step 1\ndebug\n")
    await settle()
    assert out == [b"STEP 1\n"] and not ran.done()
    s.stdin_data.put_nowait(None)
    assert await asyncio.wait_for(ran, 5) == 0
    out.clear()
    s = session(out, stdin=True)
    ran = asyncio.ensure_future(io.exec("main", ["sh", "-c", "head -n 2 | wc -l"], s))
    s.stdin_data.put_nowait(b"a\nb\nc\n")
    assert await asyncio.wait_for(ran, 5) == 0 and out == [b"2\n"]
    io.stop()


async def test_a_host_network_pods_hostname_is_its_nodes_in_its_files_and_environment():
    """A hostNetwork pod shares its node's UTS namespace: `hostname` (/etc/hostname) and $HOSTNAME
    both name the node (before, /etc/hostname named the pod)."""
    w = worker()
    w.pod["spec"]["hostNetwork"] = True
    io = SimulatedIO(w)
    io.started({"main": "busybox"})
    out = []
    assert await io.exec("main", ["sh", "-c", "hostname; echo $HOSTNAME"], session(out)) == 0
    assert b"".join(out) == b"node-1\nnode-1\n"
    io.stop()


async def test_an_exec_waiting_for_a_file_goes_on_once_another_exec_makes_it(tmp_path):
    """exec's `until [ -f /tmp/go ]; do sleep 1; done && echo went` reads the container's files again
    at each pass (not the copy it was worked out on): it answers once another exec made the file."""
    clock = ManualClock()
    w = worker()
    w.clock = clock
    w.agent.volumes = SimpleNamespace(volume_dir=lambda uid, name: str(tmp_path / name))
    io = SimulatedIO(w)
    io.started({"main": "busybox"})
    out: list = []
    ran = asyncio.ensure_future(io.exec("main", ["sh", "-c", "until [ -f /tmp/go ]; do sleep 1; done && echo went"],
                                        session(out)))
    await clock.advance(3)
    await settle()
    assert not ran.done() and out == []
    assert await io.exec("main", ["touch", "/tmp/go"], session([])) == 0
    await clock.advance(1)
    assert await asyncio.wait_for(ran, 5) == 0 and out == [b"went\n"]
    io.stop()


async def test_an_ephemeral_container_waiting_for_a_file_ends_once_an_exec_makes_it(tmp_path):
    """An ephemeral container (`kubectl debug`) whose command waits in a loop for a file ends, with
    what follows the loop's code, a pass after an exec into it made the file."""
    clock = ManualClock()
    w = worker()
    w.clock = clock
    w.agent.volumes = SimpleNamespace(volume_dir=lambda uid, name: str(tmp_path / name))
    w.pod["spec"]["ephemeralContainers"] = [{"name": "debug", "image": "busybox"}]
    io = SimulatedIO(w)
    io.started({"main": "busybox"})
    script = "until [ -f /tmp/go ]; do echo waiting; sleep 1; done; echo went; exit 3"
    io.start_ephemeral("debug", "busybox", interpret(["sh", "-c", script], clock.now(), io.draft("debug")))
    await clock.advance(2)
    await settle()
    assert io.ephemeral_ended == {}
    assert await io.exec("debug", ["touch", "/tmp/go"], session([])) == 0
    await clock.advance(1)
    await settle()
    assert io.ephemeral_ended == {"debug": 3}
    assert io.serve_log("debug", LogOptions()) == b"waiting\n" * 3 + b"went\n"
    io.stop()


async def test_a_script_reading_its_stdin_answers_each_line_as_it_comes_and_ends_at_eof():
    """`kubectl run -i -- sh -c 'while read l; do echo got:$l; done'`: each line answered as it
    comes, on the node's clock; at the EOF of stdinOnce the loop ends, so does the container
    (0), its log only what the script wrote."""
    out = []
    clock, io, s, attached = stdin_script("while read l; do echo got:$l; done", out)
    s.stdin_data.put_nowait(b"a\nb")
    await settle()
    assert out == [b"got:a\n"] and not io.ended
    await clock.advance(5)
    s.stdin_data.put_nowait(b"\n")
    await settle()
    assert out == [b"got:a\n", b"got:b\n"] and not io.ended
    s.stdin_data.put_nowait(None)
    await settle()
    assert io.ended == {"main": 0} and io.worker.changed.is_set() and not io.stdin_closed
    io.exit("main", 0)
    assert io.serve_log("main", LogOptions()) == b"got:a\ngot:b\n"
    assert await asyncio.wait_for(attached, 5) == 0


@pytest.mark.parametrize("script, code, log", [
    ("sleep 1; cat", 0, b"a\nb\n"),
    ("echo start; wc -l; exit 4", 4, b"start\n2\n"),
    ("grep a | tr a-z A-Z; echo done", 0, b"A\ndone\n"),
])
async def test_a_script_reading_stdin_after_other_commands_gets_it_to_its_eof(script, code, log):
    """`sh -c 'sleep 1; cat'` and the like: the command after the others reads the container's
    stdin, all of it at EOF (stdinOnce); the container ends with the script's status."""
    clock, io, s, attached = stdin_script(script, [])
    s.stdin_data.put_nowait(b"a\n")
    await clock.advance(3)
    assert not io.ended
    s.stdin_data.put_nowait(b"b\n")
    s.stdin_data.put_nowait(None)
    await settle()
    assert io.ended == {"main": code}
    assert io.serve_log("main", LogOptions()) == log
    attached.cancel()


async def test_a_script_that_reads_what_it_needs_ends_without_waiting_for_eof():
    """`sleep 2; echo s; read l; echo $l; sleep 3; echo end`: with its line sent it goes on as
    its clock says, written when due, and ends at 5 s, its stdin still open."""
    out = []
    clock, io, s, attached = stdin_script("sleep 2; echo s; read l; echo $l; sleep 3; echo end", out)
    await clock.advance(1)
    assert out == []
    await clock.advance(1)
    assert out == [b"s\n"]
    s.stdin_data.put_nowait(b"a\n")
    await settle()
    assert out == [b"s\n", b"a\n"] and not io.ended
    await clock.advance(3)
    assert out == [b"s\n", b"a\n", b"end\n"] and io.ended == {"main": 0}
    attached.cancel()


async def test_a_script_waiting_for_its_stdin_keeps_it_open_without_stdin_once():
    """Without stdinOnce (`--leave-stdin-open`) the client leaving is no EOF: the script waits on,
    a later client's lines reach it; its log holds no nanokube line, even once it is killed."""
    w = worker(stdin=True, command=["sh", "-c", "while read l; do echo got:$l; done"])
    io = SimulatedIO(w)
    io.started({"main": "busybox"})
    s = session([], stdin=True)
    attached = asyncio.ensure_future(io.attach("main", s))
    s.stdin_data.put_nowait(b"a\n")
    s.stdin_data.put_nowait(None)
    await settle()
    assert not io.ended and not io.stdin_closed
    attached.cancel()
    s = session([], stdin=True)
    attached = asyncio.ensure_future(io.attach("main", s))
    s.stdin_data.put_nowait(b"b\n")
    await settle()
    assert io.serve_log("main", LogOptions()) == b"got:a\ngot:b\n" and not io.ended
    io.exit("main", 137)
    assert io.serve_log("main", LogOptions()) == b"got:a\ngot:b\n"
    attached.cancel()


async def test_an_ephemeral_containers_script_reads_what_kubectl_debug_i_sends():
    """`kubectl debug -i --image=busybox p -- sh -c 'sleep 1; wc -l; exit 2'`: the ephemeral
    container's script reads its stdin to the EOF and ends with its status, after its sleep."""
    w = worker()
    w.clock = clock = ManualClock()
    w.pod["spec"]["ephemeralContainers"] = [{"name": "debug", "image": "busybox", "stdin": True, "stdinOnce": True,
                                             "command": ["sh", "-c", "sleep 1; wc -l; exit 2"]}]
    io = SimulatedIO(w)
    io.started({"main": "busybox"})
    io.start_ephemeral("debug", "busybox")
    s = session([], stdin=True)
    attached = asyncio.ensure_future(io.attach("debug", s))
    s.stdin_data.put_nowait(b"a\nb\nc\n")
    s.stdin_data.put_nowait(None)
    await settle()
    assert io.ephemeral_ended == {}
    await clock.advance(1)
    assert io.ephemeral_ended == {"debug": 2} and io.serve_log("debug", LogOptions()) == b"3\n"
    assert await asyncio.wait_for(attached, 5) == 2


async def test_exec_of_a_shell_with_options_reads_the_stdin_its_script_reads():
    """`kubectl exec -i pod -- sh -ec 'cat > /tmp/f; ...'` (options before -c, as `bash -ec`): the
    script gets what the client sends, as `sh -c` does; `sh -xc 'grep x'` traces, so it is a script
    worked out at the EOF, not a bare filter."""
    io = SimulatedIO(worker())
    io.started({"main": "busybox"})
    for argv, want in ((["sh", "-ec", "cat > /tmp/f; wc -c < /tmp/f"], b"6\n"),
                       (["sh", "-xc", "grep x"], b"+ grep x\nx 1\n")):
        out = []
        s = session(out, stdin=True)
        ran = asyncio.ensure_future(io.exec("main", argv, s))
        s.stdin_data.put_nowait(b"x 1\ny\n")
        s.stdin_data.put_nowait(None)
        assert await asyncio.wait_for(ran, 5) == 0 and b"".join(out) == want, argv
    io.stop()
