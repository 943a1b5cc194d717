"""The `projected` volume (serviceAccountToken, configMap, secret,
downwardAPI, clusterTrustBundle and podCertificate sources merged into one
directory) and the `downwardAPI` volume.

Each source yields its files and, where its content expires, when it next
needs to run; the volume's refresh time is the earliest of them. Tokens are
renewed at 80% of their lifetime (24 hours at most), trust bundles re-read and config (from the
node's watches, watch_based_manager.py) projected again every `RESYNC` seconds, certificates follow pod_certificate's state machine; the files are rewritten
only when what they hold changed.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
from typing import TYPE_CHECKING

from cryptography.hazmat.primitives import serialization

from ...machinery.errors import APIError
from ...machinery.selectors import matches_labels, selector_from_object
from ...pki.trustbundle import certificates
from ...machinery.quantity import parse_quantity
from . import pod_certificate
from .atomic_writer import DATA, Moded, item, write_atomic
from .sources import DEFAULT_MODE, RESYNC, MountError, config_map_files, fs_group, secret_files, wrapped_dir

if TYPE_CHECKING:
    from .manager import VolumeManager

TOKEN_EXPIRATION = 3600
TOKEN_REFRESH_SHARE = 0.8
#: a token is renewed once this old even when its lifetime is longer (the token manager's maxTTL)
TOKEN_MAX_AGE = 24 * 3600
#: the sources whose files are 0600 whatever the defaultMode where the pod has an fsGroup (which then
#: makes them 0640, the group's to read: projected.go's token, bundle and key files)
PRIVATE = frozenset({"serviceAccountToken", "clusterTrustBundle", "podCertificate"})
_KEYED = re.compile(r"^metadata\.(labels|annotations)\['(.+)'\]$")


async def projected(mgr: VolumeManager, pod: dict, vol: dict, target: str) -> float | None:
    """Set up a projected volume; returns when it wants to be set up again. The files are
    written only when their content changed since the last setup (the digest of what was
    written is kept): a resync that finds the same token, bundle and config touches no file,
    unless the files are gone (no `..data` link), which it writes again."""
    src = vol["projected"]
    out: dict[str, bytes] = {}
    again: list[float] = []
    state = mgr.state.setdefault(pod["metadata"]["uid"], {})
    written = ("written", vol["name"])
    certs = None
    for i, s in enumerate(src.get("sources") or []):
        if "podCertificate" in s and certs is None:
            certs = pod_certificate.PodCertificates(mgr)
        files, when = await _one(mgr, certs, pod, vol["name"], i, s, written not in state)
        if fs_group(mgr, pod) is not None and not PRIVATE.isdisjoint(s):
            files = {path: Moded(data, 0o600) for path, data in files.items()}
        out |= files
        if when is not None:
            again.append(when)
    mode = src.get("defaultMode", DEFAULT_MODE)
    digest = _digest(out, mode)
    wrapped_dir(mgr, pod, vol, target, memory=True)
    if state.get(written) != digest or not os.path.lexists(os.path.join(target, DATA)):
        write_atomic(target, out, mode, fs_group(mgr, pod), mgr.clock)
        state[written] = digest
    return min(again) if again else None


def _digest(files: dict[str, bytes], mode: int) -> bytes:
    h = hashlib.sha256(str(mode).encode())
    for path in sorted(files):
        h.update(b"\0%d\0%s\0" % (len(path), path.encode()))
        h.update(b"%d\0" % len(files[path]))
        h.update(files[path])
    return h.digest()


async def _one(mgr: VolumeManager, certs: pod_certificate.PodCertificates | None, pod: dict, volume: str, index: int,
               s: dict, first: bool) -> tuple[dict[str, bytes], float | None]:
    ns = pod["metadata"]["namespace"]
    now = mgr.clock.now()
    if "serviceAccountToken" in s:
        return await _token(mgr, pod, volume, index, s["serviceAccountToken"])
    if "configMap" in s:
        return await config_map_files(mgr, ns, s["configMap"], volume), now + RESYNC
    if "secret" in s:
        return await secret_files(mgr, ns, s["secret"], volume, name_key="name"), now + RESYNC
    if "downwardAPI" in s:
        return await downward_files(mgr, pod, s["downwardAPI"].get("items") or []), None
    if "clusterTrustBundle" in s:
        return await _trust_bundle(mgr, volume, s["clusterTrustBundle"]), now + RESYNC
    if "podCertificate" in s and certs is not None:
        src = s["podCertificate"]
        creds, when = await certs.credentials(pod, volume, index, src, pod_certificate.FIRST_WAIT if first else 0.0)
        return pod_certificate.files(src, creds), when
    return {}, None


async def _token(mgr: VolumeManager, pod: dict, volume: str, index: int, src: dict
                 ) -> tuple[dict[str, bytes], float]:
    """A token bound to the pod from the TokenRequest API (serviceaccounts/NAME/token, as the
    kubelet asks it), kept until 80% of its lifetime or 24 hours, whichever comes first."""
    md = pod["metadata"]
    cache = mgr.state.setdefault(md["uid"], {})
    key = ("serviceAccountToken", volume, index)
    now = mgr.clock.now()
    held = cache.get(key)
    if held is None or now >= held[1]:
        seconds = src.get("expirationSeconds") or TOKEN_EXPIRATION
        body = {"spec": {"audiences": [src["audience"]] if src.get("audience") else [], "expirationSeconds": seconds,
                         "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": md["name"], "uid": md["uid"]}}}
        sa = (pod.get("spec") or {}).get("serviceAccountName") or "default"
        try:
            tr = await mgr.client.resource("", "v1", "serviceaccounts").create_subresource(sa, "token", body,
                                                                                         md["namespace"])
        except APIError as e:
            raise MountError(volume, f"failed to fetch token: {e.message}") from None
        held = cache[key] = (tr["status"]["token"].encode(), now + min(seconds * TOKEN_REFRESH_SHARE, TOKEN_MAX_AGE))
    return {src["path"]: held[0]}, held[1]


async def _trust_bundle(mgr: VolumeManager, volume: str, src: dict) -> dict[str, bytes]:
    """The certificates of one bundle, or of every bundle of a signer whose
    labels match (a missing selector matches nothing), deduplicated and sorted."""
    rc = mgr.client.resource("certificates.k8s.io", "v1", "clustertrustbundles")
    pems: list[str] = []
    if src.get("name"):
        try:
            pems.append((await rc.get(src["name"]))["spec"]["trustBundle"])
        except APIError as e:
            if e.code != 404:
                raise
            if not src.get("optional"):
                raise MountError(volume, f'clustertrustbundles.certificates.k8s.io "{src["name"]}" not found') from None
    elif src.get("signerName") and src.get("labelSelector") is not None:
        items, _ = await rc.list(field_selector=f"spec.signerName={src['signerName']}")
        sel = selector_from_object(src["labelSelector"])
        pems += [b["spec"]["trustBundle"] for b in items if matches_labels(sel, b["metadata"].get("labels"))]
    blocks = sorted({c.public_bytes(serialization.Encoding.PEM) for p in pems for c in certificates(p)})
    if not blocks:
        if src.get("optional"):
            return {}
        what = src.get("name") or f"signer {src.get('signerName', '')}"
        raise MountError(volume, f"combined trust bundle for {what} holds no certificates")
    return {src["path"]: b"".join(blocks)}


async def downward_api(mgr: VolumeManager, pod: dict, vol: dict, target: str) -> None:
    src = vol["downwardAPI"]
    wrapped_dir(mgr, pod, vol, target, memory=True)
    write_atomic(target, await downward_files(mgr, pod, src.get("items") or []), src.get("defaultMode", DEFAULT_MODE),
                 fs_group(mgr, pod), mgr.clock)


async def downward_files(mgr: VolumeManager, pod: dict, items: list[dict]) -> dict[str, bytes]:
    out = {}
    for it in items:
        if "fieldRef" in it:
            out[it["path"]] = item(_field(pod, it["fieldRef"]["fieldPath"]).encode(), it)
        elif "resourceFieldRef" in it:
            out[it["path"]] = item((await _resource(mgr, pod, it["resourceFieldRef"])).encode(), it)
    return out


def _field(pod: dict, path: str) -> str:
    md, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
    m = _KEYED.match(path)
    if m:
        return (md.get(m.group(1)) or {}).get(m.group(2), "")
    if path in ("metadata.labels", "metadata.annotations"):
        kv = md.get(path.split(".")[1]) or {}
        return "\n".join(f'{k}="{_escape(v)}"' for k, v in sorted(kv.items()))
    simple = {"metadata.name": md.get("name"), "metadata.namespace": md.get("namespace"), "metadata.uid": md.get("uid"),
              "spec.nodeName": spec.get("nodeName"), "spec.serviceAccountName": spec.get("serviceAccountName"),
              "status.podIP": status.get("podIP"), "status.hostIP": status.get("hostIP")}
    return simple.get(path) or ""


def _escape(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


async def _resource(mgr: VolumeManager, pod: dict, ref: dict) -> str:
    """A container's request or limit divided by `divisor` and rounded up; an
    unset limit is the node's allocatable, as the kubelet reports it."""
    containers = (pod.get("spec") or {}).get("containers") or []
    c = next((c for c in containers if c["name"] == ref.get("containerName")), containers[0] if containers else {})
    kind, _, name = ref["resource"].partition(".")
    value = ((c.get("resources") or {}).get(kind) or {}).get(name)
    if value is None and kind == "limits":
        node = await mgr.client.resource("", "v1", "nodes").get(mgr.node_name)
        value = ((node.get("status") or {}).get("allocatable") or {}).get(name)
    divisor = parse_quantity(str(ref.get("divisor") or "0"))  # unset, the zero Quantity: 1
    q = parse_quantity(value or "0") / (divisor or 1)
    return str(math.ceil(q))
