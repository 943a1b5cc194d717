"""The API server's dial of a kubelet no agent here runs (pods/log of a joined node's pod): TLS with
the API server's kubelet client certificate, the kubelet's serving certificate taken unverified as
kube-apiserver takes it without --kubelet-certificate-authority (a kubelet's self-signed one)."""

from __future__ import annotations

import asyncio
import ssl

from nanokube.pki.ca import issue, new_ca

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
