"""The kubelet's own streaming endpoints through nodes/proxy (/exec, /attach, /portForward, /run),
driven over HTTP as a client of a real cluster would: a WebSocket speaking v5.channel.k8s.io, the
kubelet's port-forward channels, and plain requests for its refusals; for the simulated runtime
and, where root and iproute2 allow, the process runtime."""

from __future__ import annotations

import asyncio
import base64
import os
import re
import secrets
import shutil
import socket
import sys

import aiohttp
import orjson
import pytest

from nanokube.apiserver.app import APIServer
from nanokube.apiserver.loopback import LocalClient, connector
from nanokube.machinery.streaming import sandbox_id
from nanokube.node.cluster import default_cluster
from nanokube.node.manager import NodeManager
from nanokube.store.memory import MemoryStore
from tests.controllers import eventually

SCRIPTED = {"sim.nanokube.io/exec.hostname": "web\n",
            "sim.nanokube.io/exec.fail": '{"stderr": "bad\\n", "exitCode": 4}'}


@pytest.fixture(params=["simulated", "process"])
async def cluster(request, tmp_path):
    """An API server on a port and the default cluster's node agents behind its nodes/proxy."""
    runtime = None
    if request.param == "process":
        if os.geteuid() != 0 or not shutil.which("ip"):
            pytest.skip("SKIPPED LOUDLY: the process runtime needs root and iproute2")
        from nanokube.node.runtime.process import ProcessRuntime
        runtime = ProcessRuntime(str(tmp_path / "runtime"), "k" + secrets.token_hex(3), backoff_initial=0.05)
    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    nodes = NodeManager(connector(server.rest), default_cluster(), server.clock, runtime=runtime, pods_dir=str(tmp_path / "pods"))
    server.handlers.streams.node_servers.append(nodes.streaming_for)
    server.handlers.proxies.kubelets.append(nodes.kubelet_for)
    try:
        if runtime is not None:
            runtime.start([(a.name, a.spec.index, a.host_ip, a.pod_cidr) for a in nodes.agents.values()])
        await nodes.start()
        yield server, request.param
    finally:
        await nodes.stop()
        if runtime is not None:
            runtime.close()
            from nanokube.node.runtime.netns import list_netns
            assert [n for n in list_netns() if n.startswith(runtime.net.prefix)] == []
        await server.stop()


async def running_pod(server, kind: str, name: str, ready: bool = False, inits: list[dict] | None = None, **container) -> str:
    """A pod on gpu-0 with container `main` (for the process runtime, by default a shell that
    waits; for the simulated one, busybox's httpd) after the init containers `inits`, once Running
    (and, with `ready`, Ready): its uid."""
    container = {"name": "main", "image": "busybox:1.36", **container}
    if kind == "process":
        container.setdefault("command", ["sh", "-c", "echo started; exec sleep 300"])
    else:  # busybox's httpd, up until stopped (the image's own `sh` would exit at once, with no stdin)
        container["command"] = ["httpd", "-f", "-p", "8080"]
    pod = {"metadata": {"name": name, "namespace": "default", "annotations": SCRIPTED},
           "spec": {"nodeName": "gpu-0", "initContainers": inits or [], "containers": [container]}}
    client = LocalClient(server.rest)
    pods = client.resource("", "v1", "pods")
    await pods.create(pod, "default")

    async def running():
        p = await pods.get(name, "default")
        st = p.get("status") or {}
        up = st.get("phase") == "Running" and (not ready or any(
            c["type"] == "Ready" and c["status"] == "True" for c in st.get("conditions") or ()))
        return p["metadata"]["uid"] if up else None
    return await eventually(running)


def url(server, path: str, ws: bool = False) -> str:
    return f"{'ws' if ws else 'http'}://127.0.0.1:{server.port}/api/v1/nodes/gpu-0/proxy{path}"


def channels(frames: list[bytes]) -> dict[int, bytes]:
    out: dict[int, bytes] = {}
    for f in frames:
        out[f[0]] = out.get(f[0], b"") + f[1:]
    return out


async def ws_frames(server, path: str, send: list[bytes] = (), protocol: str = "v5.channel.k8s.io"):
    """The binary frames of the session (text frames decoded for the base64 protocols)."""
    async with aiohttp.ClientSession() as http:
        async with http.ws_connect(url(server, path, ws=True), protocols=(protocol,) if protocol else ()) as ws:
            assert ws.protocol == (protocol or None)
            for frame in send:
                await ws.send_bytes(frame)
            return [m.data if m.type == aiohttp.WSMsgType.BINARY else
                    bytes([ord(m.data[0]) - ord("0")]) + base64.b64decode(m.data[1:]) async for m in ws
                    if m.type in (aiohttp.WSMsgType.BINARY, aiohttp.WSMsgType.TEXT)]


async def test_exec_through_the_kubelet_over_a_v5_websocket(cluster):
    server, kind = cluster
    uid = await running_pod(server, kind, "web")
    if kind == "process":
        command, want = "command=sh&command=-c&command=tr%20a-z%20A-Z;%20echo%20oops%20%3E%262;%20exit%203", b"HELLO"
        send = [b"\x00hello", bytes([255, 0])]  # stdin, then v5's CLOSE of it
        query = "&stdin=1"
    else:
        command, want, send, query = "command=fail", b"", [], ""
    got = channels(await ws_frames(server, f"/exec/default/web/main?{command}&stdout=1&stderr=1{query}", send))
    assert got.get(1, b"") == want
    assert got[2] == (b"oops\n" if kind == "process" else b"bad\n")
    code = "3" if kind == "process" else "4"
    status = orjson.loads(got[3])
    assert status["reason"] == "NonZeroExitCode" and status["details"]["causes"] == [
        {"reason": "ExitCode", "message": code}], status
    # the pod's uid in the path names the instance; the kubelet finds no container in a stale one
    ok = channels(await ws_frames(server, f"/exec/default/web/{uid}/main?command=hostname&stdout=1"))
    assert ok[3] == orjson.dumps({"metadata": {}, "status": "Success"})
    if kind == "simulated":
        assert ok[1] == b"web\n"
    async with aiohttp.ClientSession() as http:
        async with http.get(url(server, "/exec/default/web/not-the-uid/main?command=hostname&stdout=1")) as r:
            assert (r.status, await r.text()) == (404, 'container not found ("main")')
        async with http.get(url(server, "/portForward/default/web/not-the-uid")) as r:
            assert (r.status, await r.text()) == (404, 'pod not found ("web_default")')


@pytest.mark.parametrize("protocol", ["channel.k8s.io", "base64.channel.k8s.io", ""])
async def test_the_channel_protocols_before_v4_report_a_failure_as_its_message(protocol, cluster):
    """The kubelet's WebSocket server also speaks channel.k8s.io (also when no protocol is asked
    for) and base64.channel.k8s.io: the error channel carries a failed command's message alone,
    and nothing for one that succeeded."""
    server, kind = cluster
    await running_pod(server, kind, "web")
    failing = "command=sh&command=-c&command=exit%204" if kind == "process" else "command=fail"
    got = channels(await ws_frames(server, f"/exec/default/web/main?{failing}&stdout=1", protocol=protocol))
    command = "[sh -c exit 4]" if kind == "process" else "[fail]"
    assert got[3] == f"command terminated with non-zero exit code: error executing command {command}, exit code " \
                     f"4".encode()
    got = channels(await ws_frames(server, "/exec/default/web/main?command=hostname&stdout=1", protocol=protocol))
    assert got.get(3, b"") == b"" and got[1] == b"web\n"


async def test_what_the_kubelet_answers_before_an_upgrade(cluster):
    server, kind = cluster
    await running_pod(server, kind, "web")
    async with aiohttp.ClientSession() as http:
        for path, method, want in (
                ("/exec/default/web/main?command=hostname&stdout=1", "GET", (500, "Upgrade request required\n")),
                ("/attach/default/web/main?stdout=1", "POST", (500, "Upgrade request required\n")),
                ("/portForward/default/web", "GET", (500, "Upgrade request required\n")),
                ("/exec/default/web/main?command=hostname", "GET",
                 (400, "you must specify at least 1 of stdin, stdout, stderr\n")),
                ("/exec/default/gone/main?command=hostname&stdout=1", "GET", (404, "pod does not exist\n")),
                ("/exec/default/web/other?command=hostname&stdout=1", "GET", (404, 'container not found ("other")')),
                ("/exec/default/web/main?command=hostname&stdout=1", "PUT", (405, "405: Method Not Allowed")),
                ("/run/default/web/main?cmd=hostname", "GET", (405, "405: Method Not Allowed"))):
            async with http.request(method, url(server, path)) as r:
                assert (r.status, await r.text()) == want, path


async def test_run_answers_the_commands_output(cluster):
    server, kind = cluster
    await running_pod(server, kind, "web")
    async with aiohttp.ClientSession() as http:
        async with http.post(url(server, "/run/default/web/main?cmd=hostname")) as r:
            assert r.status == 200 and r.content_type == "application/json"
            assert await r.text() == "web\n"
        # the query's cmd split at spaces; a non-zero exit is the runtime's error, stderr in it
        cmd = "ls /not-here" if kind == "process" else "fail"
        async with http.post(url(server, f"/run/default/web/main?cmd={cmd.replace(' ', '%20')}")) as r:
            text = await r.text()
            want = "command 'ls /not-here' exited with 2: ls: " if kind == "process" else \
                "command 'fail' exited with 4: bad\n"
            assert r.status == 500 and text.startswith(want), text
        async with http.post(url(server, "/run/default/web/main?cmd=no-such-binary")) as r:
            assert r.status == 500 and 'exec: "no-such-binary": executable file not found in $PATH' in await r.text()


async def test_attach_through_the_kubelet_streams_the_containers_output(cluster):
    server, kind = cluster
    await running_pod(server, kind, "web")
    async with aiohttp.ClientSession() as http:
        async with http.ws_connect(url(server, "/attach/default/web/main?stdout=1", ws=True),
                                   protocols=("v5.channel.k8s.io",)) as ws:
            assert ws.protocol == "v5.channel.k8s.io"
            first = await asyncio.wait_for(ws.receive(), 10)
            assert first.type == aiohttp.WSMsgType.BINARY and first.data == b"\x01"  # the empty stdout frame


async def attached_stdout(server, path: str, line: bytes) -> bytes:
    """What the container at `path` (/attach/NS/POD/CONTAINER) writes to a client attached over a v5
    WebSocket that sends it `line` and leaves its stdin open, until the container ends."""
    out = b""
    async with aiohttp.ClientSession() as http:
        async with http.ws_connect(url(server, f"{path}?stdin=1&stdout=1", ws=True),
                                   protocols=("v5.channel.k8s.io",)) as ws:
            await ws.send_bytes(b"\x00" + line)
            while (msg := await asyncio.wait_for(ws.receive(), 10)).type == aiohttp.WSMsgType.BINARY:
                out += msg.data[1:] if msg.data[0] == 1 else b""
    return out


async def test_attach_feeds_a_scripts_stdin_and_head_ends_with_its_line(cluster):
    """`kubectl run -i --restart=Never -- sh -c 'head -n 1; echo after'`: the attached client sends a
    line and leaves its stdin open; `head -n 1` ends once its line came, not at the EOF, so the
    script goes on and the container completes while the client is still attached."""
    server, kind = cluster
    pods = LocalClient(server.rest).resource("", "v1", "pods")
    await pods.create({"metadata": {"name": "one", "namespace": "default"}, "spec": {
        "nodeName": "gpu-0", "restartPolicy": "Never", "containers": [{
            "name": "main", "image": "busybox:1.36", "command": ["sh", "-c", "head -n 1; echo after"],
            "stdin": True, "stdinOnce": True}]}}, "default")

    async def phase(want: str):
        return (p := await pods.get("one", "default")).get("status", {}).get("phase") == want and p
    await eventually(lambda: phase("Running"))
    assert await attached_stdout(server, "/attach/default/one/main", b"a\n") == b"a\nafter\n"
    done = await eventually(lambda: phase("Succeeded"))
    assert done["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0


async def test_an_init_containers_script_runs_on_what_attach_sends_it(cluster):
    """An init container with `stdin: true` whose script reads it (`read l; echo got:$l`) runs, the
    pod Pending, until it gets its line from a client attached to it (`kubectl attach -c setup -i`),
    as an app container's does; then it completes and the app container starts."""
    server, kind = cluster
    pods = LocalClient(server.rest).resource("", "v1", "pods")
    await pods.create({"metadata": {"name": "fed", "namespace": "default"}, "spec": {
        "nodeName": "gpu-0", "initContainers": [{
            "name": "setup", "image": "busybox:1.36", "command": ["sh", "-c", "read l; echo got:$l"],
            "stdin": True, "stdinOnce": True}],
        "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sleep", "300"]}]}}, "default")

    async def init_running():
        p = await pods.get("fed", "default")
        statuses = p.get("status", {}).get("initContainerStatuses") or [{}]
        return p if "running" in (statuses[0].get("state") or {}) else None
    p = await eventually(init_running)
    assert p["status"]["phase"] == "Pending"
    assert await attached_stdout(server, "/attach/default/fed/setup", b"x\n") == b"got:x\n"

    async def running():
        return (p := await pods.get("fed", "default")).get("status", {}).get("phase") == "Running" and p
    p = await eventually(running)
    setup = p["status"]["initContainerStatuses"][0]["state"]["terminated"]
    assert (setup["exitCode"], setup["reason"]) == (0, "Completed")


async def test_port_forward_through_the_kubelet_speaks_its_websocket_channels(cluster):
    """Port 9 is closed: only the finished init container declares it (nothing listens there in
    the process runtime, and the simulated one knows it)."""
    server, kind = cluster
    uid = await running_pod(server, kind, "web", inits=[{"name": "setup", "image": "busybox:1.36", "command": ["true"],
                                                         "ports": [{"containerPort": 9}]}])
    async with aiohttp.ClientSession() as http:
        async with http.get(url(server, "/portForward/default/web"), headers={
                "Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
                "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Protocol": "v4.channel.k8s.io"}) as r:
            assert (r.status, await r.text()) == (400, 'query parameter "port" is required\n')
        async with http.ws_connect(url(server, "/portForward/default/web?port=9", ws=True),
                                   protocols=("v4.channel.k8s.io",)) as ws:
            assert ws.protocol == "v4.channel.k8s.io"
            frames = []
            while len(frames) < 3:
                msg = await asyncio.wait_for(ws.receive(), 10)
                if msg.type != aiohttp.WSMsgType.BINARY:
                    break
                frames.append(msg.data)
    # the port on both channels, as two little-endian bytes; then why port 9 refused, in the words of the
    # CRI streaming server, which names the pod by its sandbox's ID and leaves the uid empty
    assert frames[:2] == [b"\x00\x09\x00", b"\x01\x09\x00"]
    assert frames[2].startswith(b"\x01error forwarding port 9 to pod %s, uid : " % sandbox_id(uid).encode()), frames
    if kind == "simulated":  # containerd's own, for a port nothing listens on
        netns = f"/var/run/netns/cni-{uid}"
        assert frames[2].endswith(
            f'failed to execute portforward in network namespace "{netns}": failed to connect to localhost:9 '
            f'inside namespace "{sandbox_id(uid)}", IPv4: dial tcp4 127.0.0.1:9: connect: connection refused '
            f"IPv6 dial tcp6: address localhost: no suitable address found ".encode()), frames
    else:  # the same words from a real dial of localhost in the pod's namespace, IPv4 then IPv6
        assert re.fullmatch(
            rf'.*failed to execute portforward in network namespace "/var/run/netns/[^"]+": failed to connect to '
            rf'localhost:9 inside namespace "{sandbox_id(uid)}", IPv4: dial tcp4 127\.0\.0\.1:9: connect: connection '
            rf"refused IPv6 {re.escape(_localhost6_refusal(9))} ", frames[2].decode()), frames


def _localhost6_refusal(port: int) -> str:
    """Go's error for a refused tcp6 dial of localhost: its IPv6 address as this host resolves it, if any."""
    try:
        addr = socket.getaddrinfo("localhost", port, socket.AF_INET6, socket.SOCK_STREAM)[0][4][0]
    except OSError:
        return "dial tcp6: address localhost: no suitable address found"
    return f"dial tcp6 [{addr}]:{port}: connect: connection refused"


async def test_port_forward_through_the_kubelet_reaches_the_pods_server(cluster):
    """A request on port 8080's data channel reaches the pod's HTTP server (the simulated one
    behind a declared port; a real one in the process runtime) and its answer comes back there."""
    server, kind = cluster
    await running_pod(server, kind, "web", ready=True, ports=[{"containerPort": 8080}],
                      command=[sys.executable, "-m", "http.server", "8080"],
                      readinessProbe={"tcpSocket": {"port": 8080}, "periodSeconds": 1})
    async with aiohttp.ClientSession() as http:
        async with http.ws_connect(url(server, "/portForward/default/web?port=8080", ws=True),
                                   protocols=("v4.channel.k8s.io",)) as ws:
            got = [(await asyncio.wait_for(ws.receive(), 10)).data for _ in range(2)]
            assert got == [b"\x00\x90\x1f", b"\x01\x90\x1f"]  # 8080, little-endian
            await ws.send_bytes(b"\x00GET / HTTP/1.0\r\nHost: web\r\n\r\n")
            answer = b""
            while not answer.startswith(b"HTTP/1."):
                msg = await asyncio.wait_for(ws.receive(), 10)
                assert msg.type == aiohttp.WSMsgType.BINARY and msg.data[0] == 0, msg
                answer += msg.data[1:]
    assert answer.split(b"\r\n", 1)[0].endswith(b"200 OK"), answer
