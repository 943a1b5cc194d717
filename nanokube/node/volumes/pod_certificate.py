"""The kubelet's pod certificate state machine, per (pod, volume, source).

`initial`: make a key and stub CSR and create a PodCertificateRequest
(`generateName: req-`, owned by the pod) -> `wait` until the signer answers.
Issued -> `fresh` (key, cleaned chain, refresh time = beginRefreshAt plus
jitter). At the refresh time a new key and request are made while the old
credentials stay in service (`waitRefresh`). Denied or Failed is permanent:
the volume never sets up again. A request that vanishes for longer than
`ABANDON_AFTER` is taken as deleted and made again. The kubelet's
`kubelet_podcertificate_states` gauge counts the sources by signer and state.
"""

from __future__ import annotations

import asyncio
import base64
import random
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cryptography.hazmat.primitives import serialization

from ...machinery.errors import APIError
from ...machinery.gofmt import quote
from ...clock import parse_time
from ...pki import keys
from ...pki.trustbundle import certificates
from .sources import MountError

if TYPE_CHECKING:
    from .manager import VolumeManager

TERMINAL = ("Issued", "Denied", "Failed")
ABANDON_AFTER = 600.0
ABANDON_JITTER = 60.0
#: beginRefreshAt gets up to this much jitter, and at most this share of the time from notBefore
REFRESH_JITTER = 300.0
REFRESH_JITTER_SHARE = 0.05
OVERDUE_AFTER = 600.0
#: how often a pending request is looked at, and how long a first setup waits for issuance
POLL = 0.5
FIRST_WAIT = 5.0


@dataclass
class Pending:
    name: str
    key_pem: bytes
    abandon_at: float


@dataclass
class Credentials:
    key_pem: bytes
    chain_pem: bytes
    refresh_at: float
    not_after: float
    reported: set[str] = field(default_factory=set)


@dataclass
class State:
    creds: Credentials | None = None
    pending: Pending | None = None
    #: the reason a Denied or Failed request gave; set once, never cleared
    terminal: str = ""
    #: "denied" or "failed" once terminal
    outcome: str = ""
    signer: str = ""


def _clean_chain(pem: str) -> bytes:
    """Only the CERTIFICATE blocks, re-encoded: headers and text between blocks are dropped."""
    return b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certificates(pem))


def _refusal_message(pcr: str, cond: dict) -> str:
    """The message of the kubelet's Denied or Failed Event, the one upstream's kubelet composes.
    (Its Eventf call passes the condition's reason as the format string, so Go prints the reason
    followed by `%!(EXTRA string=...)` around this message: a slip, not a format worth copying.)"""
    outcome = "was denied" if cond["type"] == "Denied" else "failed"
    return (f"PodCertificateRequest {pcr} {outcome}, reason={quote(cond.get('reason') or '')}, "
            f"message={quote(cond.get('message') or '')}")


def _condition(pcr: dict) -> dict | None:
    return next((c for c in (pcr.get("status") or {}).get("conditions") or []
                 if c.get("type") in TERMINAL and c.get("status") == "True"), None)


class PodCertificates:
    """Drives one source's state machine a step at a time; `credentials`
    returns what the volume should hold now."""

    def __init__(self, mgr: VolumeManager, rng: random.Random | None = None):
        self.mgr = mgr
        self.rng = rng or random.Random()
        self.requests = mgr.client.resource("certificates.k8s.io", "v1", "podcertificaterequests")

    def _state(self, pod: dict, volume: str, index: int) -> State:
        per_pod = self.mgr.state.setdefault(pod["metadata"]["uid"], {})
        return per_pod.setdefault(("podCertificate", volume, index), State())

    async def credentials(self, pod: dict, volume: str, index: int, src: dict, wait: float = 0.0
                          ) -> tuple[Credentials, float]:
        """(credentials in service, when to look again). Waits up to `wait`
        seconds for a first issuance; MountError while there is nothing to serve."""
        st = self._state(pod, volume, index)
        st.signer = src["signerName"]
        clock = self.mgr.clock
        deadline = clock.monotonic() + wait
        while True:
            await self._step(pod, volume, st, src)
            if st.creds is not None or clock.monotonic() >= deadline:
                break
            await clock.sleep(POLL)
        if st.creds is None:
            raise MountError(volume, f"PodCertificateRequest {pod['metadata']['namespace']}/"
                                     f"{st.pending.name if st.pending else ''} has not been issued yet")
        await self._report(pod, st.creds)
        now = clock.now()
        if now >= st.creds.not_after and st.pending is None:
            raise MountError(volume, "pod certificate expired and could not be refreshed")
        again = now + POLL if st.pending else st.creds.refresh_at
        return st.creds, again

    async def _step(self, pod: dict, volume: str, st: State, src: dict) -> None:
        if st.terminal:
            raise MountError(volume, st.terminal)
        now = self.mgr.clock.now()
        if st.pending is None and (st.creds is None or now >= st.creds.refresh_at):
            st.pending = await self._request(pod, volume, src)
            return
        if st.pending is None:
            return
        ns = pod["metadata"]["namespace"]
        try:
            pcr = await self.requests.get(st.pending.name, ns)
        except APIError as e:
            if e.code != 404:
                raise
            if now >= st.pending.abandon_at:
                st.pending = None
            return
        cond = _condition(pcr)
        if cond is None:
            return
        if cond["type"] != "Issued":
            st.pending = None
            st.outcome = cond["type"].lower()
            st.terminal = (f"PodCertificateRequest {ns}/{pcr['metadata']['name']} was {cond['type'].lower()} "
                           f"by signer {src['signerName']}: {cond.get('reason', '')}: {cond.get('message', '')}")
            await self.mgr.event(pod, "Warning", cond["type"], _refusal_message(f"{ns}/{pcr['metadata']['name']}", cond))
            raise MountError(volume, st.terminal)
        status = pcr["status"]
        nb, begin = parse_time(status["notBefore"]), parse_time(status["beginRefreshAt"])
        jitter = self.rng.uniform(0, min(REFRESH_JITTER, (begin - nb) * REFRESH_JITTER_SHARE))
        st.creds = Credentials(st.pending.key_pem, _clean_chain(status["certificateChain"]), begin + jitter,
                               parse_time(status["notAfter"]))
        st.pending = None

    async def _request(self, pod: dict, volume: str, src: dict) -> Pending:
        """A fresh key and a PodCertificateRequest for it."""
        md, spec = pod["metadata"], pod.get("spec") or {}
        key_type = src.get("keyType", "")
        try:
            key = await asyncio.to_thread(keys.generate_key, key_type)
        except ValueError as e:
            raise MountError(volume, str(e)) from None
        csr = await asyncio.to_thread(keys.stub_csr, key)
        sa_name = spec.get("serviceAccountName") or "default"
        try:
            sa = await self.mgr.client.resource("", "v1", "serviceaccounts").get(sa_name, md["namespace"])
            node = await self.mgr.client.resource("", "v1", "nodes").get(self.mgr.node_name)
        except APIError as e:
            raise MountError(volume, f"while creating a PodCertificateRequest: {e.message}") from None
        pcr_spec = {
            "signerName": src.get("signerName", ""), "podName": md["name"], "podUID": md["uid"],
            "serviceAccountName": sa_name, "serviceAccountUID": sa["metadata"]["uid"],
            "nodeName": self.mgr.node_name, "nodeUID": node["metadata"]["uid"],
            "stubPKCS10Request": base64.b64encode(csr).decode(),
        }
        if src.get("maxExpirationSeconds") is not None:
            pcr_spec["maxExpirationSeconds"] = src["maxExpirationSeconds"]
        if src.get("userAnnotations"):
            pcr_spec["unverifiedUserAnnotations"] = dict(src["userAnnotations"])
        body = {"apiVersion": "certificates.k8s.io/v1", "kind": "PodCertificateRequest",
                "metadata": {"generateName": "req-", "namespace": md["namespace"],
                             "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": md["name"],
                                                  "uid": md["uid"]}]},
                "spec": pcr_spec}
        try:
            created = await self.requests.create(body, namespace=md["namespace"])
        except APIError as e:
            raise MountError(volume, f"while creating a PodCertificateRequest: {e.message}") from None
        abandon = self.mgr.clock.now() + ABANDON_AFTER + self.rng.uniform(0, ABANDON_JITTER)
        return Pending(created["metadata"]["name"], keys.private_pem(key), abandon)

    async def _report(self, pod: dict, creds: Credentials) -> None:
        """CertificateOverdueForRefresh and CertificateExpired, once each per certificate, in the kubelet's words."""
        now = self.mgr.clock.now()
        if now >= creds.not_after and "expired" not in creds.reported:
            creds.reported.add("expired")
            await self.mgr.event(pod, "Warning", "CertificateExpired", "PodCertificate expired")
        elif now >= creds.refresh_at + OVERDUE_AFTER and "overdue" not in creds.reported:
            creds.reported.add("overdue")
            await self.mgr.event(pod, "Warning", "CertificateOverdueForRefresh", "PodCertificate refresh overdue")


def files(src: dict, creds: Credentials) -> dict[str, bytes]:
    """The paths a podCertificate source asks for: a bundle (key first, then
    the chain) and/or separate key and chain files."""
    out = {}
    if src.get("credentialBundlePath"):
        out[src["credentialBundlePath"]] = creds.key_pem + creds.chain_pem
    if src.get("keyPath"):
        out[src["keyPath"]] = creds.key_pem
    if src.get("certificateChainPath"):
        out[src["certificateChainPath"]] = creds.chain_pem
    return out


STATES = "kubelet_podcertificate_states"


def _metric_state(st: State, now: float) -> str:
    """The kubelet's metricsState: its state machine's state, an issued one by the clock."""
    if st.outcome:
        return st.outcome
    if st.creds is None:
        return "not_yet_issued"
    if now > st.creds.not_after:
        return "expired"
    if now > st.creds.refresh_at + OVERDUE_AFTER:
        return "overdue_for_refresh"
    return "fresh"


def metrics(state: dict[str, dict], now: float) -> list[str]:
    """The kubelet's `kubelet_podcertificate_states{signer_name,state}` lines: the podCertificate
    sources in a VolumeManager's `state`, counted by signer and state (none: no family, as its collector)."""
    counts = Counter((st.signer, _metric_state(st, now)) for sources in state.values()
                     for key, st in sources.items() if key[0] == "podCertificate" and st.signer)
    if not counts:
        return []
    return [f"# HELP {STATES} [ALPHA] Gauge vector reporting the number of pod certificate projected volume "
            "sources, faceted by signer_name and state.", f"# TYPE {STATES} gauge",
            *(f'{STATES}{{signer_name="{signer}",state="{state}"}} {n}' for (signer, state), n in sorted(counts.items()))]
