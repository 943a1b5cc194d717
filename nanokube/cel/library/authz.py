"""Kubernetes' `authz` and `authzSelectors` libraries: authorization checks
from admission CEL (`authorizer.group('').resource('pods').check('list')`).

The API server binds its authorizer once (`Authz(authorize)`); each request's
`authorizer` variable is then `Authz.authorizer(user, request_resource)`.
Values are markers carrying a token for the bound callback, the user, and
the attributes gathered so far; `check()` calls the callback with an
attributes record as upstream's `authorizer.AttributesRecord` holds it.
"""

from __future__ import annotations

import itertools
import weakref
from typing import Any, Callable

from ...machinery.validation import dns1123_label, dns1123_subdomain
from ..errors import CELError
from ..types import BOOL, STRING, Type
from .overload import Overload

AUTHORIZER = Type("kubernetes.authorization.Authorizer", max_size=1)
PATH_CHECK = Type("kubernetes.authorization.PathCheck", max_size=1)
GROUP_CHECK = Type("kubernetes.authorization.GroupCheck", max_size=1)
RESOURCE_CHECK = Type("kubernetes.authorization.ResourceCheck", max_size=1)
DECISION = Type("kubernetes.authorization.Decision", max_size=1)
AUTHZ, PATH, GROUP, RESOURCE, DECIDED = "@authz", "@authzpath", "@authzgroup", "@authzresource", "@authzdecision"

#: attributes -> (decision: "Allow" | "Deny" | "NoOpinion", reason, error or None)
Authorize = Callable[[dict], tuple[str, str, str | None]]
#: token -> its Authz, for as long as its API server holds it: a strong entry kept every server a process
#: ever made (its admission, REST stack and watch cache), ~260 MB a run for `nanokube simulate` on openb
_BOUND: weakref.WeakValueDictionary[int, Authz] = weakref.WeakValueDictionary()
_TOKENS = itertools.count(1)


class Authz:
    """An authorizer bound for CEL; one per API server, which holds it."""

    def __init__(self, authorize: Authorize) -> None:
        self.token = next(_TOKENS)
        self.authorize = authorize
        _BOUND[self.token] = self

    def authorizer(self, user: dict, request_resource: dict | None = None) -> dict:
        """The `authorizer` variable for `user` ({username, uid, groups,
        extra}); `request_resource` ({group, resource, subresource,
        namespace, name}) makes `authorizer.requestResource`."""
        value: dict[str, Any] = {AUTHZ: {"t": self.token, "user": user}}
        if request_resource is not None:
            value["requestResource"] = {RESOURCE: {"t": self.token, "user": user, **_RESOURCE_DEFAULTS,
                                                   **request_resource}}
        return value


_RESOURCE_DEFAULTS = {"group": "", "resource": "", "subresource": "", "namespace": "", "name": "",
                      "fieldSelector": "", "labelSelector": ""}


def _inner(v: dict, key: str) -> dict:
    return dict(v[key])


def _path(a: dict, path: str) -> dict:
    if not path.strip():
        raise CELError("path must not be empty")
    return {PATH: {**_inner(a, AUTHZ), "path": path}}


def _group(a: dict, group: str) -> dict:
    return {GROUP: {**_inner(a, AUTHZ), "group": group}}


def _service_account(a: dict, namespace: str, name: str) -> dict:
    if dns1123_subdomain(name):
        raise CELError("Invalid service account name")
    if dns1123_label(namespace):
        raise CELError("Invalid service account namespace")
    user = {"username": f"system:serviceaccount:{namespace}:{name}", "uid": "",
            "groups": ["system:serviceaccounts", f"system:serviceaccounts:{namespace}"], "extra": {}}
    return {AUTHZ: {**_inner(a, AUTHZ), "user": user}}


def _resource(g: dict, resource: str) -> dict:
    if not resource.strip():
        raise CELError("resource must not be empty")
    return {RESOURCE: {**_RESOURCE_DEFAULTS, **_inner(g, GROUP), "resource": resource}}


def _with(field: str) -> Callable[[dict, str], dict]:
    def set_field(r: dict, value: str) -> dict:
        return {RESOURCE: {**_inner(r, RESOURCE), field: value}}
    return set_field


def _decide(attrs: dict, token: int) -> dict:
    authz = _BOUND.get(token)
    if authz is None:
        raise CELError("no authorizer is bound")
    decision, reason, error = authz.authorize(attrs)
    return {DECIDED: {"decision": decision, "reason": reason or "", "error": error or ""}}


def _check_resource(r: dict, verb: str) -> dict:
    x = _inner(r, RESOURCE)
    attrs = {"user": x["user"], "verb": verb, "resourceRequest": True, "apiGroup": x["group"], "apiVersion": "*",
             "resource": x["resource"], "subresource": x["subresource"], "namespace": x["namespace"],
             "name": x["name"], "fieldSelector": x["fieldSelector"], "labelSelector": x["labelSelector"]}
    return _decide(attrs, x["t"])


def _check_path(p: dict, verb: str) -> dict:
    x = _inner(p, PATH)
    return _decide({"user": x["user"], "verb": verb, "resourceRequest": False, "path": x["path"]}, x["t"])


OVERLOADS = [
    Overload("path", (AUTHORIZER, STRING), PATH_CHECK, member=True, impl=_path),
    Overload("group", (AUTHORIZER, STRING), GROUP_CHECK, member=True, impl=_group),
    Overload("serviceAccount", (AUTHORIZER, STRING, STRING), AUTHORIZER, member=True, impl=_service_account),
    Overload("resource", (GROUP_CHECK, STRING), RESOURCE_CHECK, member=True, impl=_resource),
    *[Overload(f, (RESOURCE_CHECK, STRING), RESOURCE_CHECK, member=True, impl=_with(f))
      for f in ("subresource", "namespace", "name", "fieldSelector", "labelSelector")],
    Overload("check", (RESOURCE_CHECK, STRING), DECISION, member=True, impl=_check_resource),
    Overload("check", (PATH_CHECK, STRING), DECISION, member=True, impl=_check_path),
    Overload("allowed", (DECISION,), BOOL, member=True, impl=lambda d: d[DECIDED]["decision"] == "Allow"),
    Overload("reason", (DECISION,), STRING, member=True, impl=lambda d: d[DECIDED]["reason"]),
    Overload("errored", (DECISION,), BOOL, member=True, impl=lambda d: d[DECIDED]["error"] != ""),
    Overload("error", (DECISION,), STRING, member=True, impl=lambda d: d[DECIDED]["error"]),
]
