"""An HTTP request as authorization attributes, and upstream's Forbidden.

The mapping follows kube-apiserver's RequestInfo: `/api` and `/apis` paths
are resource requests (verb from method, name and `watch`), anything else is a
non-resource request on its path with the lowercased method as verb.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from aiohttp import web

from ...machinery import errors
from ...machinery.meta import without_zero_creation
from ...machinery.selectors import field_requirements
from ...machinery.user import User
from ...machinery.validation import path_segment_name

_NAMESPACE_SUBRESOURCES = ("status", "finalize")
_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "HEAD": "get"}


class Attributes(NamedTuple):
    """What a request asks to do (a tuple: every request makes one, and a frozen dataclass's
    `__init__` costs four times as much)."""

    verb: str
    path: str = ""
    resource_request: bool = False
    group: str = ""
    version: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    #: the request's fieldSelector (a list's, watch's or deletecollection's), which the node authorizer
    #: requires on a node's lists
    field_selector: str = ""
    #: the request's labelSelector (of the same verbs), which a webhook is told of
    label_selector: str = ""


@dataclass(frozen=True, slots=True)
class Decision:
    """An authorizer chain's answer, as upstream's union gives it: `denied` where an authorizer refused
    outright (DecisionDeny: only a webhook's does) rather than none allowing, `error` what failed on
    the way (a webhook that could not be asked), which makes a refused request a 500."""

    allowed: bool
    reason: str = ""
    denied: bool = False
    error: str = ""


async def decide(authorizer, user: User, a: Attributes) -> Decision:
    """`authorizer`'s decision on `user` doing `a`, awaited through its `authorize_async` where it has
    one (an authorization config's, whose webhooks' round trips must not hold the event loop)."""
    asking = getattr(authorizer, "authorize_async", None)
    return authorizer.authorize(user.name, user.groups, a) if asking is None else await asking(user, a)


def _truthy(v: str | None) -> bool:
    return v in ("true", "1", "True")


def attributes_for(method: str, path: str, query) -> Attributes:
    """Attributes of a request; `query` is a mapping of its query parameters."""
    parts = [p for p in path.split("/") if p]
    if not parts or parts[0] not in ("api", "apis"):
        return Attributes(method.lower(), path)
    if parts[0] == "api":
        group, rest = "", parts[1:]
    else:
        group, rest = (parts[1], parts[2:]) if len(parts) > 1 else ("", [])
    if not rest or (parts[0] == "apis" and len(parts) < 3):
        return Attributes(method.lower(), path)
    version, rest = rest[0], rest[1:]
    if not rest:
        return Attributes(method.lower(), path)
    watch, legacy = _truthy(query.get("watch")), rest[0] == "watch"
    if legacy:
        watch, rest = True, rest[1:]
    namespace = ""
    if len(rest) >= 2 and rest[0] == "namespaces":
        namespace = rest[1]
        if len(rest) >= 3 and rest[2] not in _NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    if not rest:
        return Attributes(method.lower(), path)
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    if method == "GET":  # ?watch makes a watch of a collection only; /watch/ paths always watch
        verb = "watch" if watch and (legacy or not name) else ("get" if name else "list")
    elif method == "DELETE":
        verb = "delete" if name else "deletecollection"
    else:
        verb = _VERBS.get(method, "")  # OPTIONS and the like: no verb, which only "*" grants
    # (a deletecollection's selector is judged too: the Node authorizer's of ResourceSlices)
    fields = labels = ""
    if verb in ("list", "watch", "deletecollection"):
        fields, labels = query.get("fieldSelector", ""), query.get("labelSelector", "")
    if fields and not name and verb != "deletecollection":
        name = _selected_name(fields)
    return Attributes(verb, path, True, group, version, resource, subresource, namespace, name, fields, labels)


def _selected_name(field_selector: str) -> str:
    """The name a list or watch's fieldSelector pins (a `metadata.name=` term), else "". Upstream's
    RequestInfo takes it as the request's name, so RBAC's resourceNames and the Node authorizer may
    allow a list or watch of that one object (how a kubelet watches its pods' Secrets), and audit
    names it."""
    try:
        terms = field_requirements(field_selector)
    except errors.APIError:
        return ""
    for field, equal, value in terms:
        if field == "metadata.name" and equal:
            return "" if path_segment_name(value) else value
    return ""


_ATTRIBUTES = web.RequestKey("nanokube.attributes", Attributes)
#: the authenticated user, which authentication leaves on the request for authorization's readers after it
USER = web.RequestKey("nanokube.user", User)


def request_attributes(request: web.Request) -> Attributes:
    """attributes_for an HTTP request, worked out once: audit, authentication and APF each ask."""
    try:
        return request[_ATTRIBUTES]
    except KeyError:
        a = request[_ATTRIBUTES] = attributes_for(request.method, request.path, request.query)
        return a


def forbidden(user_name: str, a: Attributes, reason: str = "") -> errors.APIError:
    """The 403 kube-apiserver answers, word for word."""
    suffix = f": {reason}" if reason else ""
    if not a.resource_request:
        return errors.APIError(403, "Forbidden", f'forbidden: User "{user_name}" cannot {a.verb} path "{a.path}"{suffix}', {})
    resource = f"{a.resource}/{a.subresource}" if a.subresource else a.resource
    gr = f"{a.resource}.{a.group}" if a.group else a.resource
    scope = f'in the namespace "{a.namespace}"' if a.namespace else "at the cluster scope"
    subject = f'{gr} "{a.name}"' if a.name else gr
    msg = f'{subject} is forbidden: User "{user_name}" cannot {a.verb} resource "{resource}" in API group "{a.group}" {scope}{suffix}'
    details = {"group": a.group, "kind": a.resource}
    if a.name:
        details["name"] = a.name
    return errors.APIError(403, "Forbidden", msg, details)


def review_attributes(body: dict) -> Attributes:
    """The attributes an access review's spec names."""
    spec = body.get("spec") or {}
    ra, nra = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    if ra is not None:
        return Attributes(ra.get("verb", ""), "", True, ra.get("group", ""), ra.get("version", ""), ra.get("resource", ""),
                          ra.get("subresource", ""), ra.get("namespace", ""), ra.get("name", ""),
                          _review_fields(ra.get("fieldSelector") or {}), _review_labels(ra.get("labelSelector") or {}))
    return Attributes((nra or {}).get("verb", ""), (nra or {}).get("path", ""))


def _review_fields(selector: dict) -> str:
    """A review's fieldSelector as a request's: its rawSelector, or its requirements (each In or NotIn
    of one value, as = and !=; any other makes none, as upstream's conversion error leaves none)."""
    if selector.get("rawSelector"):
        return selector["rawSelector"]
    terms = []
    for r in selector.get("requirements") or []:
        op, values = {"In": "=", "NotIn": "!="}.get(r.get("operator", "")), r.get("values") or []
        if op is None or len(values) != 1:
            return ""
        escaped = values[0].replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")
        terms.append(f"{r.get('key', '')}{op}{escaped}")
    return ",".join(terms)


def _review_labels(selector: dict) -> str:
    """A review's labelSelector as a request's: its rawSelector, or its requirements written out."""
    if selector.get("rawSelector"):
        return selector["rawSelector"]
    terms = []
    for r in selector.get("requirements") or []:
        key, op, values = r.get("key", ""), r.get("operator", ""), ",".join(r.get("values") or [])
        terms.append({"In": f"{key} in ({values})", "NotIn": f"{key} notin ({values})", "Exists": key,
                      "DoesNotExist": f"!{key}"}.get(op, ""))
    return ",".join(t for t in terms if t)


def access_review(d: Decision, body: dict) -> dict:
    """A SelfSubjectAccessReview's answer: the requesting user's decision `d` on the attributes
    the review names (`review_attributes`)."""
    return {"kind": "SelfSubjectAccessReview", "apiVersion": "authorization.k8s.io/v1",
            "metadata": without_zero_creation(body.get("metadata")), "spec": body.get("spec") or {},
            "status": review_status(d)}


def review_status(d: Decision) -> dict:
    """An access review's status from the decision, as upstream's REST handlers fill it: `denied`
    only where an authorizer denied, `evaluationError` where one failed."""
    status: dict = {"allowed": d.allowed}
    if d.denied:
        status["denied"] = True
    if d.reason:
        status["reason"] = d.reason
    if d.error:
        status["evaluationError"] = d.error
    return status
