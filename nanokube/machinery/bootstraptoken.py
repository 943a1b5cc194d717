"""Bootstrap tokens (k8s.io/cluster-bootstrap): a `<id>.<secret>` bearer token a joining node holds
before it has credentials of its own, kept in a kube-system Secret `bootstrap-token-<id>` of type
bootstrap.kubernetes.io/token. What the API server's authenticator, the token cleaner and the
bootstrap signer read off such a Secret is here, so that all three judge it alike; and the detached
JWS the signer puts on kube-public/cluster-info, which a joining node checks with its token."""

from __future__ import annotations

import base64
import hashlib
import hmac
import re

from . import gotime

SECRET_TYPE = "bootstrap.kubernetes.io/token"
SECRET_PREFIX = "bootstrap-token-"
NAMESPACE = "kube-system"
ID_KEY, SECRET_KEY, EXPIRATION_KEY = "token-id", "token-secret", "expiration"
USAGE_AUTHENTICATION, USAGE_SIGNING = "usage-bootstrap-authentication", "usage-bootstrap-signing"
EXTRA_GROUPS_KEY = "auth-extra-groups"
USER_PREFIX = "system:bootstrap:"
GROUP = "system:bootstrappers"
#: kubeadm's default token group, the one its RBAC lets bootstrap a node
KUBEADM_GROUP = "system:bootstrappers:kubeadm:default-node-token"
#: the ConfigMap a joining node reads anonymously, and its keys
CLUSTER_INFO_NAMESPACE, CLUSTER_INFO = "kube-public", "cluster-info"
KUBECONFIG_KEY = "kubeconfig"
JWS_PREFIX = "jws-kubeconfig-"

_TOKEN = re.compile(r"^([a-z0-9]{6})\.([a-z0-9]{16})$")
_GROUP = re.compile(r"^system:bootstrappers:[a-z0-9:-]{0,255}[a-z0-9]$")


def parse_token(token: str) -> tuple[str, str] | None:
    """(id, secret) of a bootstrap token, None for anything else (another authenticator's)."""
    m = _TOKEN.fullmatch(token)  # (`$` alone lets a trailing newline through)
    return (m.group(1), m.group(2)) if m else None


def data(secret: dict, key: str) -> str:
    """One of the Secret's values, decoded ("" when absent or not base64)."""
    value = (secret.get("data") or {}).get(key)
    try:
        return base64.b64decode(value).decode() if value else ""
    except ValueError:
        return ""


def expiration(secret: dict) -> float | None:
    """The Secret's expiration (epoch seconds), None without one; one that Go's time.Parse(RFC3339)
    refuses (`2099-01-01`, no zone, `+0100`) reads as already past, as upstream treats it."""
    text = data(secret, EXPIRATION_KEY)
    if not text:
        return None
    try:
        return gotime.parse_rfc3339(text)
    except gotime.TimeParseError:
        return 0.0


def expired(secret: dict, now: float) -> bool:
    at = expiration(secret)
    return at is not None and now > at


def groups(secret: dict) -> list[str]:
    """system:bootstrappers and the auth-extra-groups (comma-separated, each system:bootstrappers:...),
    sorted without repeats; ValueError names the first that is not a bootstrap group."""
    out = {GROUP}
    extra = data(secret, EXTRA_GROUPS_KEY)
    for g in extra.split(",") if extra else ():
        if not _GROUP.fullmatch(g):
            raise ValueError(f"{g!r} is not a valid bootstrap group name (must match {_GROUP.pattern})")
        out.add(g)
    return sorted(out)


def signing_token(secret: dict, now: float) -> tuple[str, str] | None:
    """(id, secret) of a live token the Secret lets sign cluster-info (usage-bootstrap-signing=true,
    its name and token-id agreeing), else None."""
    name = (secret.get("metadata") or {}).get("name", "")
    if secret.get("type") != SECRET_TYPE or not name.startswith(SECRET_PREFIX):
        return None
    token_id, token_secret = data(secret, ID_KEY), data(secret, SECRET_KEY)
    if token_id != name[len(SECRET_PREFIX):] or not token_secret or expired(secret, now):
        return None
    return (token_id, token_secret) if data(secret, USAGE_SIGNING) == "true" else None


def _b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def detached_jws(content: str, token_id: str, token_secret: str) -> str:
    """The compact HS256 JWS of `content` keyed by the token's secret, its header naming the token
    id (kid), with the payload left out: `<header>..<signature>`."""
    header = _b64url(b'{"alg":"HS256","kid":"' + token_id.encode() + b'"}')
    signing_input = f"{header}.{_b64url(content.encode())}".encode()
    return f"{header}..{_b64url(hmac.new(token_secret.encode(), signing_input, hashlib.sha256).digest())}"
