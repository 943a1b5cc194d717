"""The front-proxy identity: the request-header CA and client certificate the
aggregator proxies with, and the ConfigMap `kube-system/extension-apiserver-
authentication` through which extension API servers learn whom to trust
(upstream's ClusterAuthenticationTrustController publishes the same keys, and writes them again
when the ConfigMap is deleted or edited and when the operator's CA files change: AuthenticationTrust)."""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import os

from cryptography.hazmat.primitives import serialization

from ...machinery.errors import APIError
from ...pki.ca import ensure_front_proxy
from ..background import BackgroundLoop
from ..rest import SYSTEM, WriteOptions
from ..serving_tls import certificates

log = logging.getLogger(__name__)

CONFIGMAP = "extension-apiserver-authentication"
#: seconds between looks at the CA files, and between syncs of the ConfigMap whatever they hold
CHECK_PERIOD, RESYNC_PERIOD = 1.0, 60.0
#: seconds past its notAfter a CA is still published (upstream's slack for clocks apart)
EXPIRED_SLACK = 300.0


def front_proxy_files(pki) -> tuple[str, str]:
    """(client certificate file, key file) the aggregator proxies with: the operator's
    (--proxy-client-cert-file's), else `own_front_proxy_files`."""
    return pki.proxy_client if pki.proxy_client is not None else own_front_proxy_files(pki.dir)


def own_front_proxy_files(pki_dir: str) -> tuple[str, str]:
    """(client certificate file, key file) of DIR/pki's `front-proxy-client`, created on first use:
    also what `up`'s workers relay to each other with, whatever the operator's flags."""
    ensure_front_proxy(pki_dir)
    return os.path.join(pki_dir, "front-proxy-client.crt"), os.path.join(pki_dir, "front-proxy-client.key")


def _json(names: list) -> str:
    """A list as Go's json.Marshal writes it (no spaces)."""
    return json.dumps(names, separators=(",", ":"))


def authentication_configmap(server) -> dict:
    """What the server trusts, as of now: its client CA and request-header CA (DIR/pki's, or the
    operator's files) and the request-header flags."""
    tls, rh = server.serving_tls(), server.requestheader
    return {"metadata": {"name": CONFIGMAP, "namespace": "kube-system"}, "data": {
        "client-ca-file": tls.client_ca_pem.decode(),
        "requestheader-client-ca-file": tls.requestheader_ca_pem.decode(),
        "requestheader-allowed-names": _json(list(rh.allowed_names)),
        "requestheader-extra-headers-prefix": _json(list(rh.extra_prefixes)),
        "requestheader-group-headers": _json(list(rh.group_headers)),
        "requestheader-username-headers": _json(list(rh.username_headers)),
        "requestheader-uid-headers": _json(list(rh.uid_headers)),
    }}


def _bundle(pems: tuple[str, ...], now: float) -> str:
    """CA bundles joined as upstream's trust controller joins them: each certificate once, in the
    order met, those expired more than 5 minutes ago left out (a bundle that does not parse adds
    nothing)."""
    seen, out = set(), []
    for pem in pems:
        try:
            certs = certificates(pem.encode()) if pem else []
        except ValueError:
            continue
        for cert in certs:
            der = cert.public_bytes(serialization.Encoding.DER)
            if der not in seen and cert.not_valid_after_utc.timestamp() > now - EXPIRED_SLACK:
                seen.add(der)
                out.append(cert.public_bytes(serialization.Encoding.PEM).decode())
    return "".join(out)


def _names(values: tuple[str, ...]) -> str:
    """JSON lists of strings joined, each string once, in the order met."""
    out: list = []
    for value in values:
        try:
            items = json.loads(value) if value else []
        except ValueError:
            items = []
        out += [i for i in items if isinstance(i, str) and i not in out] if isinstance(items, list) else []
    return _json(out)


def combined(stored: dict, ours: dict, now: float) -> dict:
    """The ConfigMap's data with this server's joined in: several API servers share the one
    ConfigMap, so each adds its CAs and header names to what is there rather than replacing it, and
    a CA leaves only when it expires (a rotation's old CA is trusted by extension servers meanwhile)."""
    def joined(key: str, ours: str) -> str:
        both = (stored.get(key) or "", ours)
        return _bundle(both, now) if key.endswith("-ca-file") else _names(both)
    return {k: joined(k, v) for k, v in ours.items()}


class AuthenticationTrust(BackgroundLoop):
    """Keeps the ConfigMap up with what the server trusts, as upstream's controller does: writes it
    again at once when it is deleted or edited (its watch cache events), when what the operator's CA
    files (--client-ca-file, --requestheader-client-ca-file) hold changed, looked at every `period`
    seconds (serving_tls reloads them), and with those files every `resync` seconds whatever happened
    (upstream's once-a-minute check, for a file change its watch missed; without them what the
    server trusts never changes, and an idle server is not woken)."""

    def __init__(self, server, period: float = CHECK_PERIOD, resync: float = RESYNC_PERIOD) -> None:
        self.server, self.period, self.resync = server, period, resync
        self.opts = WriteOptions(field_manager="kube-apiserver", user=SYSTEM)
        self.key = server.index.get("", "v1", "configmaps").key("kube-system", CONFIGMAP)
        self._stirred = False
        self._wake = asyncio.Event()

    def _observe(self, ev) -> None:
        """A watch cache event: the ConfigMap's (this server's own writes too, which the next sync
        finds in place) wakes the loop."""
        if ev.key == self.key:
            self._stirred = True
            self._wake.set()

    async def start(self) -> None:
        self.server.cache.on_event.append(self._observe)
        await super().start()

    async def stop(self) -> None:
        if self._observe in self.server.cache.on_event:
            self.server.cache.on_event.remove(self._observe)
        await super().stop()

    async def _loop(self) -> None:
        tls, clock = self.server.serving_tls(), self.server.clock
        files = tls.watches_files()  # (without them what the server trusts never changes: events alone wake it)
        published, synced = None, float("-inf")
        while True:
            tls.refresh()
            cas = (tls.client_ca_pem, tls.requestheader_ca_pem)
            if self._stirred or cas != published or clock.monotonic() - synced >= self.resync:
                self._stirred = False
                try:
                    await self.sync()
                    published, synced = cas, clock.monotonic()
                except APIError as e:  # (a conflict with another server's write: tried again next look)
                    log.warning("%s: %s", CONFIGMAP, e.message)
            if not self._stirred:
                self._wake.clear()
                timer = clock.call_later(self.period, self._wake.set) if files else None
                await self._wake.wait()
                if timer is not None:
                    timer.cancel()

    async def sync(self) -> None:
        rest, res = self.server.rest, self.server.index.get("", "v1", "configmaps")
        ours = authentication_configmap(self.server)
        try:
            stored = await rest.get(res, "v1", "kube-system", CONFIGMAP)
        except APIError as e:
            if e.code != 404:
                raise
            await rest.create(res, "v1", "kube-system", ours, self.opts)
            log.info("%s written again: it was not there", CONFIGMAP)
            return
        data = combined(stored.get("data") or {}, ours["data"], self.server.clock.now())
        if data != stored.get("data"):
            body = {**copy.deepcopy(stored), "data": data}  # (the cache's object, which the write may not change)
            await rest.update(res, "v1", "kube-system", CONFIGMAP, body, self.opts)
            log.info("%s republished: what it held differed from what this server trusts", CONFIGMAP)
