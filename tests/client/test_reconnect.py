"""A client whose certificate file was rewritten (the kubelet's rotation, node/bootstrap.py): the
new certificate loaded into its TLS context is presented only by the connections opened after,
so `reconnect()` closes the kept-alive and watching ones, as the kubelet's certificate transport
closes all its connections, and the next request presents the new certificate."""

from __future__ import annotations

import aiohttp
import pytest

from nanokube.apiserver.app import APIServer
from nanokube.client import kubeconfig
from nanokube.client.http import HTTPClient
from nanokube.node.bootstrap import write_kubeconfig, write_pem
from nanokube.pki.ca import ensure_pki, issue
from nanokube.store.memory import MemoryStore

REVIEW = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}


async def test_reconnect_presents_the_reloaded_certificate_and_ends_watches(tmp_path):
    pki = ensure_pki(str(tmp_path))
    server = APIServer(MemoryStore(), pki, port=0)
    await server.start()
    first, second = (issue(pki.ca, name, ("system:masters",), client=True) for name in ("alice", "bob"))
    pem = write_pem(str(tmp_path / "certs"), first.cert_pem + first.key_pem)
    write_kubeconfig(str(tmp_path / "kubeconfig"), server.url, pki.ca.cert_pem, pem)
    client = HTTPClient(kubeconfig.load(str(tmp_path / "kubeconfig"), env={}))
    await client.start()
    try:
        async def whoami() -> str:
            review = await client.request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", REVIEW)
            return review["status"]["userInfo"]["username"]

        assert await whoami() == "alice"
        watch = await client.resource("", "v1", "configmaps").watch("default")
        write_pem(str(tmp_path / "certs"), second.cert_pem + second.key_pem)
        client.creds.ssl.load_cert_chain(pem)
        assert await whoami() == "alice"  # the kept-alive connection presented the old one
        client.reconnect()
        assert await whoami() == "bob"
        with pytest.raises(aiohttp.ClientPayloadError):
            async for _ in watch:
                pass
    finally:
        await client.close()
        await server.stop()
