"""The kubelet's certificate rotation (node/bootstrap.py) over an in-process API server and the
CSR signer: a stored certificate whose key does not load is treated as none and a new one asked
for, and a failed request is tried again with the certificate manager's backoff."""

from __future__ import annotations

import asyncio
import os

import pytest
from cryptography import x509

from nanokube.client import kubeconfig
from nanokube.clock import Clock
from nanokube.component_server import tls_context
from nanokube.controllers.csrsigning import CSRSigningController
from nanokube.controllers.csrsigning_options import cluster_ca
from nanokube.node import bootstrap
from nanokube.pki.ca import ensure_pki, issue
from tests.controllers import make_stack, tries

ADDRESSES = [{"type": "InternalIP", "address": "10.1.2.3"}]


async def test_a_stored_serving_certificate_whose_key_does_not_load_is_asked_for_anew(tmp_path, caplog):
    """Before, the key's SSLError ended the rotation task (it stopped until the kubelet exited):
    now the store counts as empty, a new certificate is asked for at once and served once issued."""
    pki = ensure_pki(str(tmp_path))
    cert_dir = tmp_path / "kubelet"
    cert_dir.mkdir()
    valid = issue(pki.ca, "system:node:n1", ("system:nodes",), ips=("10.1.2.3",), server=True)
    path = cert_dir / bootstrap.SERVING_CURRENT
    path.write_bytes(valid.cert_pem + b"-----BEGIN EC PRIVATE KEY-----\nAAAA\n-----END EC PRIVATE KEY-----\n")
    s = await make_stack()
    signer = CSRSigningController(s.client, cluster_ca(str(tmp_path)))
    await signer.start()
    ctx = tls_context("", "", self_signed=False)
    served: list[str] = []

    def use(p: str) -> None:
        ctx.load_cert_chain(p)
        served.append(p)

    rotation = asyncio.create_task(bootstrap.rotate_serving(s.client, "n1", lambda: ADDRESSES, str(cert_dir), use))
    csrs = s.client.resource("certificates.k8s.io", "v1", "certificatesigningrequests")
    try:
        for _ in tries():
            asked = [c for c in (await csrs.list())[0] if c["spec"]["signerName"] == bootstrap.SERVING_SIGNER]
            if asked or rotation.done():
                break
            await asyncio.sleep(0.05)
        assert not rotation.done() and len(asked) == 1
        await csrs.update({**asked[0], "status": {"conditions": [
            {"type": "Approved", "status": "True", "reason": "AdminApproved", "message": "test"}]}},
            subresource="approval")
        for _ in tries():
            if served or rotation.done():
                break
            await asyncio.sleep(0.05)
        assert served == [str(path)] and not rotation.done()
        issued = x509.load_pem_x509_certificate(path.read_bytes())
        assert issued.subject.rfc4514_string() == "CN=system:node:n1,O=system:nodes"
        assert issued.serial_number != valid.cert.serial_number
        assert f"the stored serving certificate {path} does not load, asking for a new one" in caplog.text
    finally:
        rotation.cancel()
        await asyncio.gather(rotation, return_exceptions=True)
        await signer.stop()
        await s.close()


class _Recording(Clock):
    """Real time, but a sleep's length is noted and it lasts a moment."""

    def __init__(self) -> None:
        self.slept: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        await asyncio.sleep(0.001)


async def test_a_failed_request_is_tried_again_with_the_certificate_managers_backoff(tmp_path):
    """2 s doubling (jittered by up to 10%) to 32 s, where it stays; before, a flat 30 s."""
    clock, cert_dir, served = _Recording(), tmp_path / "kubelet", []
    rotation = asyncio.create_task(bootstrap.rotate_serving(None, "n1", lambda: [], str(cert_dir), served.append, clock))
    try:
        for _ in tries():
            if len(clock.slept) >= 8 or rotation.done():
                break
            await asyncio.sleep(0.01)
    finally:
        rotation.cancel()
        await asyncio.gather(rotation, return_exceptions=True)
    backoffs = clock.slept[1:8]  # after the first try's sleep until the deadline (0: no certificate)
    assert clock.slept[0] == 0.0 and len(backoffs) == 7
    assert [b for b, base in zip(backoffs, (2, 4, 8, 16, 32, 32, 32)) if not base <= b <= base * 1.1] == []
    assert not os.path.exists(cert_dir / bootstrap.SERVING_CURRENT)
    assert served == []


async def test_rotation_failing_past_a_thousand_tries_keeps_trying_every_32_s(tmp_path):
    clock, served = _Recording(), []
    rotation = asyncio.create_task(bootstrap.rotate_serving(None, "n1", lambda: [], str(tmp_path / "kubelet"),
                                                            served.append, clock))
    try:
        for _ in tries():
            if len(clock.slept) >= 1100 or rotation.done():
                break
            await asyncio.sleep(0.01)
        assert not rotation.done(), rotation.exception()
    finally:
        rotation.cancel()
        await asyncio.gather(rotation, return_exceptions=True)
    assert len(clock.slept) >= 1100 and all(32 <= b <= 32 * 1.1 for b in clock.slept[1000:1100])


async def test_a_kubeconfig_that_does_not_decode_holds_no_valid_certificate(tmp_path):
    """isClientConfigStillValid: a kubeconfig its loader refuses (here `users: 5`, before a TypeError
    out of the kubelet's start) means bootstrapping, which here needs the missing bootstrap kubeconfig."""
    (tmp_path / "kubeconfig").write_text("users: 5\n")
    with pytest.raises(kubeconfig.KubeconfigError, match=f"kubeconfig {tmp_path / 'bootstrap'} does not exist"):
        await bootstrap.bootstrap(str(tmp_path / "kubeconfig"), str(tmp_path / "bootstrap"), str(tmp_path), "n1", None)
