"""User impersonation (`kubectl --as`, `--as-group`, `--as-uid`), as
kube-apiserver's impersonation filter does it.

The `Impersonate-User`, `Impersonate-Group`, `Impersonate-Uid` and
`Impersonate-Extra-<key>` headers each name something the requester must be
allowed to `impersonate`: users (or serviceaccounts, for a
`system:serviceaccount:<ns>:<name>` user, whose groups follow from the
name when none are given), groups, uids and userextras/<key> of
authentication.k8s.io. The request then runs as that user;
`system:authenticated` is added unless the groups already say
authenticated or unauthenticated.
"""

from __future__ import annotations

from urllib.parse import unquote

from ...machinery import errors
from ...machinery.user import User
from ...machinery.validation import dns1123_label, dns1123_subdomain
from .authorizer import Attributes, forbidden

USER, GROUP, UID, EXTRA = "Impersonate-User", "Impersonate-Group", "Impersonate-Uid", "Impersonate-Extra-"
SA_PREFIX = "system:serviceaccount:"


def _requests(headers) -> list[tuple[str, str, str, str]]:
    """(kind, namespace, name, extra key) of each impersonation the headers ask for."""
    out = []
    user = headers.get(USER, "")
    if user:
        ns, name = _service_account(user)
        out.append(("ServiceAccount", ns, name, "") if ns else ("User", "", user, ""))
    out += [("Group", "", g, "") for g in headers.getall(GROUP, [])]
    for header in headers:
        if header.lower().startswith(EXTRA.lower()):
            key = unquote(header[len(EXTRA):].lower())
            out += [("UserExtra", "", v, key) for v in headers.getall(header)]
    if headers.get(UID, ""):
        out.append(("UID", "", headers[UID], ""))
    if out and not user:
        # Upstream's filter answers this as an InternalError; it is the client's doing, so a 400 with its words.
        raise errors.bad_request(f"requested [{' '.join(_go_reference(r) for r in out)}] without impersonating a user")
    return out


def _service_account(user: str) -> tuple[str, str]:
    """(namespace, name) of a ServiceAccount's username, ("", "") for any other user (serviceaccount.SplitUsername):
    `system:serviceaccount:a:b:c` or one naming an invalid namespace is a plain user, with no ServiceAccount groups."""
    parts = user[len(SA_PREFIX):].split(":") if user.startswith(SA_PREFIX) else ()
    if len(parts) != 2 or dns1123_label(parts[0]) or dns1123_subdomain(parts[1]):
        return "", ""
    return parts[0], parts[1]


def _go_reference(request: tuple[str, str, str, str]) -> str:
    """One request as Go's %v prints the ObjectReference upstream builds for it (fields Kind,
    Namespace, Name, UID, APIVersion, ResourceVersion, FieldPath; extras and uids carry
    authentication.k8s.io/v1, an extra its key as the FieldPath)."""
    kind, ns, name, key = request
    api = "authentication.k8s.io/v1" if kind in ("UserExtra", "UID") else ""
    return "{" + " ".join((kind, ns, name, "", api, "", key)) + "}"


def asks(headers) -> bool:
    """Does any header ask for impersonation? (One scan of the names, as text: most requests carry none.)"""
    return "impersonate-" in "\n".join(headers.keys()).lower()


async def impersonate(headers, requester: User, authorize) -> User:
    """The user a request runs as; `await authorize(user, attributes) -> Decision`."""
    requests = _requests(headers)
    if not requests:
        return requester
    name, groups, extra, uid = "", [], {}, ""
    groups_given = bool(headers.getall(GROUP, []))
    for kind, ns, value, key in requests:
        if kind == "ServiceAccount":
            a = Attributes("impersonate", "", True, "", "v1", "serviceaccounts", "", ns, value)
            name = f"{SA_PREFIX}{ns}:{value}"
            if not groups_given:
                groups = ["system:serviceaccounts", f"system:serviceaccounts:{ns}"]
        elif kind == "User":
            a = Attributes("impersonate", "", True, "", "v1", "users", "", "", value)
            name = value
        elif kind == "Group":
            a = Attributes("impersonate", "", True, "", "v1", "groups", "", "", value)
            groups.append(value)
        elif kind == "UserExtra":
            a = Attributes("impersonate", "", True, "authentication.k8s.io", "v1", "userextras", key, "", value)
            extra.setdefault(key, []).append(value)
        else:
            a = Attributes("impersonate", "", True, "authentication.k8s.io", "v1", "uids", "", "", value)
            uid = value
        decision = await authorize(requester, a)
        if not decision.allowed:  # (checkAuthorization: an error leads the reason)
            raise forbidden(requester.name, a, ": ".join(filter(None, (decision.error, decision.reason))))
    if name != "system:anonymous":
        if not any(g in ("system:authenticated", "system:unauthenticated") for g in groups):
            groups.append("system:authenticated")
    elif "system:unauthenticated" not in groups:
        groups.append("system:unauthenticated")
    return User(name, tuple(groups), uid, extra)
