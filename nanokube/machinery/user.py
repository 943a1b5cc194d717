"""Who makes a request: the authenticated user the API server authorizes and audits, and the
identity each in-process component connects as (upstream's user.Info)."""

from __future__ import annotations

from dataclasses import dataclass, field


def bearer_token(header: str) -> str | None:
    """The token of an Authorization header of the Bearer scheme, named in any case (the official
    Python client sends `bearer`), as the bearertoken authenticator of kube-apiserver and of every
    component's delegated authentication reads it; None for another scheme, and for an empty token:
    `Bearer  x` (a space before the token) authenticates nobody, as upstream's ignores it."""
    parts = header.strip().split(" ", 2)
    return parts[1] or None if len(parts) >= 2 and parts[0].lower() == "bearer" else None


#: upstream's bearertoken Warning for `Bearer  <token>`, whose empty token it ignores
SPACED_BEARER_WARNING = "the provided Authorization header contains extra space before the bearer token, and is ignored"


def spaced_bearer(header: str) -> bool:
    """Is the header `Bearer  <token>`: the Bearer scheme, an empty token, more after it?"""
    parts = header.strip().split(" ", 2)
    return len(parts) == 3 and parts[0].lower() == "bearer" and not parts[1]


@dataclass
class User:
    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: dict = field(default_factory=dict)


#: the identity kube-controller-manager acts as (upstream's user.KubeControllerManager)
CONTROLLER_USER = User("system:kube-controller-manager", ("system:authenticated",))
#: the identity kube-scheduler acts as (upstream's user.KubeScheduler)
SCHEDULER_USER = User("system:kube-scheduler", ("system:authenticated",))


def user_from_cert(cert: dict | None) -> User | None:
    """The user a verified client certificate (ssl's getpeercert() form) names: its common name, in
    its organizations' groups and system:authenticated (the x509 authenticator's CommonNameUserConversion)."""
    if not cert:
        return None
    cn, orgs = "", []
    for rdn in cert.get("subject", ()):
        for k, v in rdn:
            if k == "commonName":
                cn = v
            elif k == "organizationName":
                orgs.append(v)
    return User(cn, tuple(orgs) + ("system:authenticated",)) if cn else None
