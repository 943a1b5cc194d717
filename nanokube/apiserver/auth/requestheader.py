"""Request-header authentication (kube-apiserver's --requestheader-* flags):
a client certificate signed by the front-proxy CA and named
`front-proxy-client` vouches for the user in `X-Remote-User`, with the groups
in `X-Remote-Group`, extras in `X-Remote-Extra-<key>` (lower-cased,
%-unescaped) and the uid in `X-Remote-Uid` — how an aggregating API server
or an authenticating proxy in front of this one passes on who is asking. A
front-proxy certificate is never a user of its own."""

from __future__ import annotations

from urllib.parse import unquote

from ...machinery.user import User

FRONT_PROXY_CA = "front-proxy-ca"
ALLOWED_NAMES = ("front-proxy-client",)
USER, GROUP, EXTRA, UID = "X-Remote-User", "X-Remote-Group", "X-Remote-Extra-", "X-Remote-Uid"


def _common_name(name: tuple) -> str:
    return next((v for rdn in name for k, v in rdn if k == "commonName"), "")


def is_front_proxy(cert: dict | None) -> bool:
    """Was the (verified) client certificate issued by the front-proxy CA?"""
    return bool(cert) and _common_name(cert.get("issuer", ())) == FRONT_PROXY_CA


def user_from_headers(cert: dict, headers) -> User | None:
    """The user the front proxy names, or None (no name given, or a certificate
    whose name is not allowed to vouch)."""
    if _common_name(cert.get("subject", ())) not in ALLOWED_NAMES:
        return None
    name = headers.get(USER, "")
    if not name:
        return None
    groups = tuple(headers.getall(GROUP, []))
    extra: dict[str, list[str]] = {}
    for header in {h.lower() for h in headers if h.lower().startswith(EXTRA.lower())}:
        extra[unquote(header[len(EXTRA):])] = headers.getall(header)
    if "system:authenticated" not in groups:
        groups += ("system:authenticated",)
    return User(name, groups, headers.get(UID, ""), extra)
