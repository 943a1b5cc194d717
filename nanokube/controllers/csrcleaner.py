"""kube-controller-manager's csrcleaner: CertificateSigningRequests pile up where nodes request and
renew certificates on their own, so every hour (and at start) each one is checked and deleted when

- it was issued (approved, a certificate) and approved over an hour ago (the Approved condition's
  lastUpdateTime),
- it was denied or failed over an hour ago (that condition's lastUpdateTime),
- it is still pending (no condition at all) a day after its creation,
- or it was issued and its certificate (the first PEM block) has expired.

A condition without lastUpdateTime never ages (the API server sets it on every write through
/approval and /status). Times are the manager's clock, so tests move them on.
"""

from __future__ import annotations

import asyncio
import base64
import logging

from ..clock import REAL, Clock, parse_time
from ..machinery.errors import APIError
from .base import Controller

log = logging.getLogger(__name__)

POLLING_INTERVAL = 3600.0
APPROVED_EXPIRATION = 3600.0
DENIED_EXPIRATION = 3600.0
PENDING_EXPIRATION = 24 * 3600.0


def _older_than(stamp: str | None, age: float, now: float) -> bool:
    """A set time more than `age` seconds before `now` (an unset one is never old)."""
    return bool(stamp) and now - parse_time(stamp) > age


def _expired(certificate: str, now: float) -> bool:
    """Whether the first certificate of status.certificate is past its notAfter; False when it does
    not read as one, as upstream's check."""
    from cryptography import x509
    try:
        return x509.load_pem_x509_certificate(base64.b64decode(certificate)).not_valid_after_utc.timestamp() < now
    except ValueError:
        return False


def why_clean(obj: dict, now: float) -> str | None:
    """Why the cleaner deletes the request at `now` (its log line's words), or None to keep it."""
    status = obj.get("status") or {}
    conditions = status.get("conditions") or []
    issued = bool(status.get("certificate"))
    for c in conditions:
        if c.get("type") == "Approved" and issued and _older_than(c.get("lastUpdateTime"), APPROVED_EXPIRATION, now):
            return "it is more than approvedExpiration duration old and approved"
    for kind, words in (("Denied", "denied"), ("Failed", "failed")):
        if any(c.get("type") == kind and _older_than(c.get("lastUpdateTime"), DENIED_EXPIRATION, now) for c in conditions):
            return f"it is more than deniedExpiration duration old and {words}"
    if not conditions and _older_than(obj["metadata"].get("creationTimestamp"), PENDING_EXPIRATION, now):
        return "it is more than pendingExpiration duration old and unhandled"
    if issued and any(c.get("type") == "Approved" for c in conditions) and _expired(status["certificate"], now):
        return "the associated certificate is expired"
    return None


class CSRCleanerController(Controller):
    name = "certificatesigningrequest-cleaner-controller"
    aliases = ("csrcleaner",)

    def __init__(self, client, clock: Clock = REAL, informers=None):
        super().__init__(client, clock, informers)
        self.csrs = client.resource("certificates.k8s.io", "v1", "certificatesigningrequests")
        self.inf = self.informer_factory.informer(self.csrs)

    def informers(self):
        return [self.inf]

    async def start(self) -> None:
        await super().start()
        self._tasks.append(asyncio.create_task(self._poll()))

    async def _poll(self) -> None:
        while True:
            await self.clean()
            await self.clock.sleep(POLLING_INTERVAL)

    async def clean(self) -> None:
        """One pass over every request; a failed delete is logged and tried again next pass."""
        now = self.clock.now()
        for obj in self.inf.list():
            why = why_clean(obj, now)
            if why is None:
                continue
            name = obj["metadata"]["name"]
            log.info("Cleaning CSR %s as %s", name, why)
            try:
                await self.csrs.delete(name)
            except APIError as e:
                if e.code != 404:
                    log.error("Error while attempting to clean CSR %s: unable to delete CSR %r: %s", name, name, e)
