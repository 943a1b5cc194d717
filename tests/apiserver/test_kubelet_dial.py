"""The API server's dial of a kubelet no agent here runs (pods/log of a joined node's pod), as
kube-apiserver's flags configure it: TLS with the API server's kubelet client certificate, the
kubelet's serving certificate taken unverified without --kubelet-certificate-authority (a kubelet's
self-signed one) and verified with it (the chain, then the address dialled; insecureSkipTLSVerifyBackend
skips it), the address the first of --kubelet-preferred-address-types' a Node has, and a rewritten
--kubelet-client-certificate presented once the files are next looked at (a second apart at most),
the connections of the old one closed (upstream's TestPodLogsKubeletClientCertReload). The kubelets are the tests' own: real TLS servers
on 127.0.0.1 that ask for a client certificate of the cluster CA; the log's text names whose they saw."""

from __future__ import annotations

import argparse
import asyncio
import json
import ssl

from aiohttp import web
from cryptography import x509
from kubernetes import client
from kubernetes.client.rest import ApiException

from nanokube.apiserver import kubelet_options
from nanokube.cli import main
from nanokube.pki.ca import KeyPair, issue, new_ca
from tests.controllers import tries
from tests.served import sent, served


async def test_pods_log_dials_the_kubelet_with_the_client_certificate(tmp_path):
    own_ca = new_ca("kubelet-self-signed")  # not the cluster's: the API server must not verify it
    serving = issue(own_ca, "node-a", ips=("127.0.0.1",), server=True)
    (tmp_path / "k.crt").write_bytes(serving.cert_pem)
    (tmp_path / "k.key").write_bytes(serving.key_pem)
    async with served(tmp_path) as (server, api):
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(tmp_path / "k.crt", tmp_path / "k.key")
        tls.verify_mode = ssl.CERT_REQUIRED  # the kubelet's --client-ca-file: the cluster's CA
        tls.load_verify_locations(cadata=server.pki.ca.cert_pem.decode())
        seen: list[tuple[str, dict]] = []

        async def kubelet(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            head = await reader.readuntil(b"\r\n\r\n")
            seen.append((head.split(b" ")[1].decode(), writer.get_extra_info("peercert")))
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\nConnection: close\r\n\r\nhello\n")
            await writer.drain()
            writer.close()

        kubelet_server = await asyncio.start_server(kubelet, "127.0.0.1", 0, ssl=tls)
        try:
            port = kubelet_server.sockets[0].getsockname()[1]
            node = {"metadata": {"name": "node-a"},
                    "status": {"addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
                               "daemonEndpoints": {"kubeletEndpoint": {"Port": port}}}}
            assert (await sent(api, "POST", "/api/v1/nodes", node))[0] == 201
            pod = {"metadata": {"name": "p"}, "spec": {"nodeName": "node-a", "containers": [{"name": "c", "image": "i"}]}}
            assert (await sent(api, "POST", "/api/v1/namespaces/default/pods", pod))[0] == 201

            def log() -> tuple[int, bytes]:
                r = api.rest_client.pool_manager.request(
                    "GET", api.configuration.host + "/api/v1/namespaces/default/pods/p/log?tailLines=3")
                return r.status, r.data
            assert await asyncio.to_thread(log) == (200, b"hello\n")
        finally:
            kubelet_server.close()
            await kubelet_server.wait_closed()
    (path, cert), = seen
    assert path == "/containerLogs/default/p/c?tailLines=3"
    assert dict(x[0] for x in cert["subject"])["commonName"] == "kube-apiserver-kubelet-client"


async def _kubelet(tmp_path, pair: KeyPair, client_ca: bytes):
    """(runner, port, the client CNs seen): /containerLogs/... answers `log for <CN>`, a following
    one then holds its stream open."""
    seen: list[str] = []

    async def logs(request: web.Request) -> web.StreamResponse:
        peer = request.transport.get_extra_info("peercert") or {}
        cn = next((v for rdn in peer.get("subject", ()) for k, v in rdn if k == "commonName"), "anonymous")
        seen.append(cn)
        if request.query.get("follow") != "true":
            return web.Response(text=f"log for {cn}\n")
        resp = web.StreamResponse()
        await resp.prepare(request)
        await resp.write(f"log for {cn}\n".encode())
        while not request.transport.is_closing():  # (until the API server hangs up)
            await asyncio.sleep(0.05)
        return resp

    app = web.Application()
    app.router.add_get("/containerLogs/{ns}/{pod}/{container}", logs)
    (tmp_path / "kubelet.crt").write_bytes(pair.cert_pem)
    (tmp_path / "kubelet.key").write_bytes(pair.key_pem)
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(tmp_path / "kubelet.crt", tmp_path / "kubelet.key")
    tls.load_verify_locations(cadata=client_ca.decode())
    tls.verify_mode = ssl.CERT_OPTIONAL
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=tls)
    await site.start()
    return runner, site._server.sockets[0].getsockname()[1], seen


def _flags(*argv: str) -> kubelet_options.KubeletClientOptions:
    p = argparse.ArgumentParser()
    kubelet_options.add_flags(p)
    return kubelet_options.load(p.parse_args(argv))


async def _pod_on(core: client.CoreV1Api, node: str, addresses: list[dict], port: int) -> None:
    await asyncio.to_thread(core.create_node, {"metadata": {"name": node}, "status": {
        "addresses": addresses, "daemonEndpoints": {"kubeletEndpoint": {"Port": port}}}})
    await asyncio.to_thread(core.create_namespaced_pod, "default", {
        "metadata": {"name": f"on-{node}"},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]}})


async def _log(core: client.CoreV1Api, node: str, **kw) -> str | tuple[int, str, str]:
    """The pod's log, or the error's (code, reason, message)."""
    try:
        return await asyncio.to_thread(core.read_namespaced_pod_log, f"on-{node}", "default", **kw)
    except ApiException as e:
        body = json.loads(e.body)
        return e.status, body.get("reason", ""), body["message"]


async def test_the_serving_certificate_is_verified_only_with_a_ca(tmp_path):
    """No CA: a self-signed kubelet is reached. With the cluster CA: it is refused in Go's words
    unless insecureSkipTLSVerifyBackend, and one the CA signed is reached only at an address it
    names."""
    outsider = new_ca("outsider")
    async with served(tmp_path) as (server, api):
        core, ca = client.CoreV1Api(api), server.pki.ca
        self_signed, port, seen = await _kubelet(tmp_path, issue(outsider, "kubelet", ips=("127.0.0.1",), server=True),
                                                 ca.cert_pem)
        signed, signed_port, _ = await _kubelet(tmp_path, issue(ca, "system:node:n2", ("system:nodes",),
                                                                ips=("127.0.0.1",), server=True), ca.cert_pem)
        elsewhere, elsewhere_port, _ = await _kubelet(tmp_path, issue(ca, "system:node:n3", ("system:nodes",),
                                                                      ips=("10.0.0.9",), server=True), ca.cert_pem)
        try:
            await _pod_on(core, "n1", [{"type": "InternalIP", "address": "127.0.0.1"}], port)
            await _pod_on(core, "n2", [{"type": "InternalIP", "address": "127.0.0.1"}], signed_port)
            await _pod_on(core, "n3", [{"type": "InternalIP", "address": "127.0.0.1"}], elsewhere_port)
            assert await _log(core, "n1") == "log for kube-apiserver-kubelet-client\n"

            kubelet_options.apply(server, _flags("--kubelet-certificate-authority", server.pki.ca_path))
            where = f"https://127.0.0.1:{port}/containerLogs/default/on-n1/c"
            assert await _log(core, "n1") == (500, "", f'Get "{where}": tls: failed to verify certificate: x509: '
                                                       "certificate signed by unknown authority")
            assert await _log(core, "n1", insecure_skip_tls_verify_backend=True) == \
                "log for kube-apiserver-kubelet-client\n"
            assert await _log(core, "n2", tail_lines=3) == "log for kube-apiserver-kubelet-client\n"
            where = f"https://127.0.0.1:{elsewhere_port}/containerLogs/default/on-n3/c"
            assert await _log(core, "n3") == (500, "", f'Get "{where}": tls: failed to verify certificate: x509: '
                                                       "certificate is valid for 10.0.0.9, not 127.0.0.1")
            assert seen == ["kube-apiserver-kubelet-client"] * 2  # (the refused dial sent no request)
        finally:
            for runner in (self_signed, signed, elsewhere):
                await runner.cleanup()


async def test_the_preferred_address_types_pick_the_address(tmp_path):
    async with served(tmp_path) as (server, api):
        core = client.CoreV1Api(api)
        runner, port, _ = await _kubelet(tmp_path, issue(server.pki.ca, "kubelet", ips=("127.0.0.1",), server=True),
                                         server.pki.ca.cert_pem)
        try:
            # the default order: Hostname first (here an address nothing listens on), ExternalIP last
            await _pod_on(core, "ext", [{"type": "ExternalIP", "address": "127.0.0.1"}], port)
            await _pod_on(core, "named", [{"type": "ExternalIP", "address": "127.0.0.1"},
                                          {"type": "Hostname", "address": "127.0.0.2"}], port)
            await _pod_on(core, "bare", [], port)
            assert await _log(core, "ext") == "log for kube-apiserver-kubelet-client\n"
            code, reason, message = await _log(core, "named")
            assert (code, reason) == (500, "") and f"dial tcp 127.0.0.2:{port}: connect: connection refused" in message
            assert await _log(core, "bare") == (500, "", "no preferred addresses found; known addresses: []")

            kubelet_options.apply(server, _flags("--kubelet-preferred-address-types", "ExternalIP,Hostname"))
            assert await _log(core, "named") == "log for kube-apiserver-kubelet-client\n"
            kubelet_options.apply(server, _flags("--kubelet-preferred-address-types", "InternalIP,Bogus"))
            assert await _log(core, "named") == (
                500, "", "no preferred addresses found; known addresses: [{ExternalIP 127.0.0.1} {Hostname 127.0.0.2}]")
        finally:
            await runner.cleanup()


async def test_a_rewritten_client_certificate_is_presented_and_the_old_connections_closed(tmp_path):
    async with served(tmp_path) as (server, api):
        core, ca = client.CoreV1Api(api), server.pki.ca
        runner, port, seen = await _kubelet(tmp_path, issue(ca, "kubelet", ips=("127.0.0.1",), server=True),
                                            ca.cert_pem)
        cert, key = tmp_path / "client.crt", tmp_path / "client.key"
        first = issue(ca, "first-client", ("kubeadm:cluster-admins",), client=True)
        cert.write_bytes(first.cert_pem)
        key.write_bytes(first.key_pem)
        kubelet_options.apply(server, _flags("--kubelet-client-certificate", str(cert), "--kubelet-client-key", str(key)))
        try:
            await _pod_on(core, "n1", [{"type": "Hostname", "address": "127.0.0.1"}], port)
            following = await asyncio.to_thread(core.read_namespaced_pod_log, "on-n1", "default", follow=True,
                                                _preload_content=False)
            assert await asyncio.to_thread(following.read, 21) == b"log for first-client\n"
            second = issue(ca, "second-client", client=True)
            cert.write_bytes(second.cert_pem)
            key.write_bytes(second.key_pem)
            for _ in tries():  # the files are looked at a second apart at most
                if await _log(core, "n1") == "log for second-client\n":
                    break
            assert await asyncio.to_thread(following.read) == b""  # the stream of the old certificate ended
            assert seen[-1] == "second-client" and set(seen) == {"first-client", "second-client"}
            assert seen.index("second-client") == len(seen) - 1  # no dial after it presented the old one
        finally:
            await runner.cleanup()


def test_flags_are_refused_as_kube_apiserver_refuses_them(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "garbage.pem").write_text("not PEM\n")
    pair = issue(new_ca(), "x", client=True)
    (tmp_path / "x.crt").write_bytes(pair.cert_pem)
    (tmp_path / "other.key").write_bytes(issue(new_ca(), "y", client=True).key_pem)
    for argv, line in (
            (["--kubelet-timeout", "5x"], 'invalid argument "5x" for "--kubelet-timeout" flag: time: unknown unit "x" '
                                          'in duration "5x"'),
            (["--kubelet-client-certificate", "x.crt"], "--kubelet-client-certificate and --kubelet-client-key go "
                                                        "together"),
            (["--kubelet-certificate-authority", "missing.crt"],
             "--kubelet-certificate-authority: open missing.crt: no such file or directory"),
            (["--kubelet-certificate-authority", "garbage.pem"],
             "--kubelet-certificate-authority: unable to load root certificates: unable to parse bytes as PEM block"),
            (["--kubelet-client-certificate", "garbage.pem", "--kubelet-client-key", "other.key"],
             "--kubelet-client-certificate: tls: failed to find any PEM data in certificate input"),
            (["--kubelet-client-certificate", "x.crt", "--kubelet-client-key", "garbage.pem"],
             "--kubelet-client-certificate: tls: failed to find any PEM data in key input"),
            (["--kubelet-client-certificate", "x.crt", "--kubelet-client-key", "other.key"],
             "--kubelet-client-certificate: tls: private key does not match public key")):
        assert main(["up", "--data-dir", str(tmp_path / "never"), *argv]) == 2, argv
        assert capsys.readouterr().err.splitlines() == [f"nanokube: {line}"], argv
    assert not (tmp_path / "never").exists()


async def test_the_default_client_certificate_is_kubeadms_in_its_admin_group(tmp_path):
    async with served(tmp_path) as (server, _):
        with open(f"{server.pki.dir}/apiserver-kubelet-client.crt", "rb") as f:
            subject = x509.load_pem_x509_certificate(f.read()).subject.rfc4514_string()
    assert subject == "CN=kube-apiserver-kubelet-client,O=kubeadm:cluster-admins"
