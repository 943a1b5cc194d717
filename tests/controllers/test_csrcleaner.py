"""csrcleaner on a clock the test moves: it looks at every request at start and each hour after, and
deletes the issued, denied and failed ones an hour after their condition's lastUpdateTime, pending
ones a day after creation, and issued ones whose certificate has expired; others stay."""

from __future__ import annotations

import base64
import datetime as dt
import time

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from nanokube.clock import format_time
from nanokube.controllers.csrcleaner import CSRCleanerController, why_clean
from tests.controllers import make_stack
from tests.controllers.test_csrsigning import csr, csr_pem
from tests.node import ManualClock

KEY = ec.generate_private_key(ec.SECP256R1())


def certificate(not_after: float) -> str:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "alice")])
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(KEY.public_key())
            .serial_number(1).not_valid_before(dt.datetime.fromtimestamp(not_after - 86400, dt.UTC))
            .not_valid_after(dt.datetime.fromtimestamp(not_after, dt.UTC)).sign(KEY, hashes.SHA256()))
    return base64.b64encode(cert.public_bytes(serialization.Encoding.PEM)).decode()


@pytest.fixture
async def env():
    s = await make_stack()
    # the manager's clock a few seconds ahead of the API server's (real) one, which stamps the
    # requests: every stamp is then a little before the cleaner's first pass
    clock = ManualClock(start=time.time() + 5)
    ctrl = CSRCleanerController(s.client, clock)
    yield s.client.resource("certificates.k8s.io", "v1", "certificatesigningrequests"), clock, ctrl
    await ctrl.stop()
    await s.close()


async def names(csrs) -> set[str]:
    return {o["metadata"]["name"] for o in (await csrs.list())[0]}


async def add(csrs, name: str, conditions=(), cert: str = "") -> None:
    pem, _ = csr_pem(name, "dev")
    await csrs.create(csr(name, pem, ["client auth"]))
    if conditions:
        cur = await csrs.get(name)
        approval = [c for c in conditions if c["type"] in ("Approved", "Denied")]
        if approval:
            cur = await csrs.update({**cur, "status": {"conditions": approval}}, subresource="approval")
        rest = [c for c in conditions if c["type"] not in ("Approved", "Denied")]
        if rest or cert:
            status = {**cur["status"], "conditions": cur["status"]["conditions"] + rest}
            if cert:
                status["certificate"] = cert
            await csrs.update({**cur, "status": status}, subresource="status")


def cond(kind: str, **times) -> dict:
    return {"type": kind, "status": "True", "reason": "Test", "message": "test", **times}


async def test_requests_go_an_hour_after_being_handled_and_a_day_after_creation(env):
    csrs, clock, ctrl = env
    start = clock.now()
    await add(csrs, "pending")
    await add(csrs, "denied", [cond("Denied")])
    await add(csrs, "failed", [cond("Approved"), cond("Failed")])
    await add(csrs, "issued", [cond("Approved")], certificate(start + 30 * 86400))
    await add(csrs, "approved-unissued", [cond("Approved")])
    # approved "in two hours" (a stamp the approver chose), its certificate expiring in 30 minutes
    await add(csrs, "expiring", [cond("Approved", lastUpdateTime=format_time(start + 7200))], certificate(start + 1800))
    await ctrl.start()
    await clock.advance(0)
    everything = {"pending", "denied", "failed", "issued", "approved-unissued", "expiring"}
    assert await names(csrs) == everything

    await clock.advance(3599)
    assert await names(csrs) == everything  # the next pass is an hour after the first
    await clock.advance(1)
    assert await names(csrs) == {"pending", "approved-unissued"}

    await clock.advance(22 * 3600)
    assert await names(csrs) == {"pending", "approved-unissued"}
    await clock.advance(3600)
    assert await names(csrs) == {"approved-unissued"}


def test_why_each_request_goes():
    now = 1_800_000_000.0
    hour_ago = format_time(now - 3601)
    obj = {"metadata": {"name": "x", "creationTimestamp": format_time(now - 86401)}}
    assert why_clean(obj, now) == "it is more than pendingExpiration duration old and unhandled"
    assert why_clean({**obj, "status": {"conditions": [cond("Failed", lastUpdateTime=hour_ago)]}}, now) == \
        "it is more than deniedExpiration duration old and failed"
    assert why_clean({**obj, "status": {"conditions": [cond("Approved", lastUpdateTime=hour_ago)],
                                        "certificate": certificate(now + 86400)}}, now) == \
        "it is more than approvedExpiration duration old and approved"
    assert why_clean({**obj, "status": {"conditions": [cond("Approved", lastUpdateTime=format_time(now))],
                                        "certificate": certificate(now - 1)}}, now) == "the associated certificate is expired"
    # exactly an hour is not over an hour, an unstamped condition never ages, a certificate that
    # does not read is not expired
    assert why_clean({**obj, "status": {"conditions": [cond("Denied")]}}, now) is None
    assert why_clean({**obj, "status": {"conditions": [cond("Denied", lastUpdateTime=format_time(now - 3600))]}}, now) is None
    assert why_clean({**obj, "status": {"conditions": [cond("Approved", lastUpdateTime=format_time(now))],
                                        "certificate": "bm90IGEgY2VydA=="}}, now) is None
