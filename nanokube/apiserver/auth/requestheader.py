"""Request-header authentication (kube-apiserver's --requestheader-* flags):
a client certificate signed by the request-header CA and of an allowed name
(`front-proxy-client` as kubeadm runs it; any name when none is given) vouches
for the user in the first username header that has one (`X-Remote-User`), with
the groups in the group headers (`X-Remote-Group`), extras in the headers of
an extra prefix (`X-Remote-Extra-<key>`, the key lower-cased and %-unescaped)
and the uid in a uid header (`X-Remote-Uid`) — how an aggregating API server or
an authenticating proxy in front of this one passes on who is asking. Without
a user named, the certificate is only what the client CA makes of it (a
front-proxy CA's certificate is no user at all unless that CA is a client CA too)."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote

from ...machinery.user import User


def common_name(cert: dict) -> str:
    """The common name of a certificate in ssl's getpeercert() form."""
    return next((v for rdn in cert.get("subject", ()) for k, v in rdn if k == "commonName"), "")


@dataclass(frozen=True)
class RequestHeader:
    """The flags' values; the defaults are kubeadm's."""
    allowed_names: tuple[str, ...] = ("front-proxy-client",)
    username_headers: tuple[str, ...] = ("X-Remote-User",)
    group_headers: tuple[str, ...] = ("X-Remote-Group",)
    extra_prefixes: tuple[str, ...] = ("X-Remote-Extra-",)
    uid_headers: tuple[str, ...] = ("X-Remote-Uid",)

    def allows(self, cert: dict) -> bool:
        """May this (request-header CA's) certificate vouch for users?"""
        return not self.allowed_names or common_name(cert) in self.allowed_names

    def user(self, headers) -> User | None:
        """The user the headers name, or None where none does."""
        name = next((v for h in self.username_headers for v in headers.getall(h, []) if v), "")
        if not name:
            return None
        groups = tuple(v for h in self.group_headers for v in headers.getall(h, []))
        extra: dict[str, list[str]] = {}
        for prefix in (p.lower() for p in self.extra_prefixes):
            for header in dict.fromkeys(h.lower() for h in headers if h.lower().startswith(prefix)):
                extra.setdefault(unquote(header[len(prefix):]), []).extend(headers.getall(header))
        uid = next((v for h in self.uid_headers for v in headers.getall(h, []) if v), "")
        if "system:authenticated" not in groups:
            groups += ("system:authenticated",)
        return User(name, groups, uid, extra)
