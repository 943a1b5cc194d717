"""API errors rendered as meta/v1 Status, with upstream's codes, reasons and messages."""

from __future__ import annotations

from typing import Any

import orjson

from .validation import FieldError


class APIError(Exception):
    def __init__(self, code: int, reason: str, message: str, details: dict | None = None, headers: dict | None = None):
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = headers or {}

    def status(self) -> dict[str, Any]:
        """The meta/v1 Status in upstream's field order: clients compare the encoded text."""
        s: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
        }
        if self.reason:  # (omitempty: an error that is not an API status has none)
            s["reason"] = self.reason
        if self.details is not None:
            s["details"] = ordered_details(self.details)
        s["code"] = self.code
        return s


#: v1.NamespaceTerminatingCause: why a create in a namespace being deleted is refused
NAMESPACE_TERMINATING = "NamespaceTerminating"


def has_status_cause(err: BaseException, reason: str) -> bool:
    """apierrors.HasStatusCause: `err` is an API error whose Status details list a cause of type `reason`."""
    if not isinstance(err, APIError) or not err.details:
        return False
    return any(isinstance(c, dict) and c.get("reason") == reason for c in err.details.get("causes") or ())


_DETAILS_ORDER = ("name", "group", "kind", "uid", "causes", "retryAfterSeconds")
_CAUSE_ORDER = ("reason", "message", "field")


def _ordered(d: dict, order: tuple[str, ...]) -> dict:
    """`d` in `order`, its fields of that order that are empty left out (they are all omitempty)."""
    out = {k: d[k] for k in order if k in d and d[k] not in ("", None, 0, [])}
    out.update((k, v) for k, v in d.items() if k not in order)
    return out


def ordered_details(details: dict) -> dict:
    """StatusDetails (and its causes) in metav1's field order, without empty fields: a core kind's
    details have no "group"."""
    out = _ordered(details, _DETAILS_ORDER)
    if isinstance(out.get("causes"), list):
        out["causes"] = [_ordered(c, _CAUSE_ORDER) if isinstance(c, dict) else c for c in out["causes"]]
    return out


def _details(name: str, group: str, kind: str, **extra) -> dict:
    d: dict[str, Any] = {}
    if name:
        d["name"] = name
    if group:
        d["group"] = group
    d["kind"] = kind
    d.update(extra)
    return d


def not_found(group: str, plural: str, name: str) -> APIError:
    gr = f"{plural}.{group}" if group else plural
    return APIError(404, "NotFound", f'{gr} "{name}" not found', _details(name, group, plural))


def already_exists(group: str, plural: str, name: str) -> APIError:
    gr = f"{plural}.{group}" if group else plural
    return APIError(409, "AlreadyExists", f'{gr} "{name}" already exists', _details(name, group, plural))


def conflict(group: str, plural: str, name: str, why: str) -> APIError:
    gr = f"{plural}.{group}" if group else plural
    return APIError(409, "Conflict", f'Operation cannot be fulfilled on {gr} "{name}": {why}', _details(name, group, plural))


STALE = "the object has been modified; please apply your changes to the latest version and try again"


#: the bytes of cause messages past which an Invalid Status collapses identical causes: ours, not
#: upstream's (which has no bound); room for a cause per error of any Status a sane request earns
CAUSES_BUDGET = 16 << 20


def invalid(group: str, kind: str, name: str, errors: list[FieldError]) -> APIError:
    """StatusError of NewInvalid: a cause per error, repeats included; the message is
    ErrorList.ToAggregate's, each distinct error once. Upstream writes every cause whatever the
    total, so 8,000 unsupported quota scopes, each cause printing the whole list, make a 1.2 GB
    Status of a 3 MiB request: past CAUSES_BUDGET, identical causes are collapsed as the message is."""
    printed: dict[tuple, str] = {}  # an error's message, once per (type, field, detail, value held)
    rows = []
    for e in errors:
        key = (e.reason, e.field, e.detail, e.has_value, id(e.value))
        message = printed.get(key)
        if message is None:
            message = printed[key] = e.message
        rows.append((e.reason, message, e.field))
    if sum(len(m) for _, m, _ in rows) > CAUSES_BUDGET:
        rows = list(dict.fromkeys(rows))
    distinct = list(dict.fromkeys(f"{f}: {m}" if f else m for _, m, f in rows))
    summary = distinct[0] if len(distinct) == 1 else "[" + ", ".join(distinct) + "]"
    gk = f"{kind}.{group}" if group else kind
    causes = [{"reason": r, "message": m, "field": f} for r, m, f in rows]
    return APIError(422, "Invalid", f'{gk} "{name}" is invalid: {summary}', _details(name, group, kind, causes=causes))


def bad_request(message: str) -> APIError:
    return APIError(400, "BadRequest", message)


def forbidden(group: str, plural: str, name: str, why: str, user: str = "") -> APIError:
    gr = f"{plural}.{group}" if group else plural
    who = f'User "{user}" cannot ' if user else ""
    msg = f'{gr} "{name}" is forbidden: {who}{why}' if name else f"{gr} is forbidden: {who}{why}"
    return APIError(403, "Forbidden", msg, _details(name, group, plural))


def route_not_found() -> APIError:
    """A path no route serves, as upstream's NewGenericServerResponse(404) answers it: its details are there
    and empty (kubectl debug reads them to tell a missing subresource from a missing pod)."""
    return APIError(404, "NotFound", "the server could not find the requested resource", {})


def generic_status_message(code: int, body: bytes) -> str:
    """client-go's message for a non-2xx answer that is not a Status."""
    text = body.decode(errors="replace").strip()
    if code == 400:
        return "the server rejected our request for an unknown reason" + (f" ({text})" if text else "")
    if code == 401:
        return "Unauthorized"
    if code == 403:
        return text or "forbidden"
    if code == 404:
        return "the server could not find the requested resource"
    if code == 500:
        return f'an error on the server ("{text}") has prevented the request from succeeding' if text else \
            "an error on the server has prevented the request from succeeding"
    if code == 503:
        return "the server is currently unable to handle the request"
    if code == 504:
        return "the server was unable to return a response in the time allotted, but may still be processing the request"
    return f"the server responded with the status code {code} but did not return more information"


_GENERIC_REASONS = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 405: "MethodNotAllowed",
                    409: "Conflict", 422: "Invalid", 429: "TooManyRequests", 500: "InternalError",
                    503: "ServiceUnavailable", 504: "Timeout"}
#: the StatusCause client-go gives an answer that was no Status, holding its body
UNEXPECTED_RESPONSE = "UnexpectedServerResponse"


def response_error(code: int, body: bytes) -> APIError:
    """client-go's error for a failed answer: the Status its body holds, else NewGenericServerResponse's
    (its reason and message by the code, the body as an UnexpectedServerResponse cause)."""
    try:
        s = orjson.loads(body)
    except ValueError:
        s = None
    if isinstance(s, dict) and s.get("kind") == "Status":
        return APIError(s.get("code") or code, s.get("reason", ""), s.get("message", ""), s.get("details"))
    causes = [{"reason": UNEXPECTED_RESPONSE, "message": body.decode(errors="replace")}]
    return APIError(code, _GENERIC_REASONS.get(code, "Unknown"), generic_status_message(code, body), {"causes": causes})


def method_not_allowed() -> APIError:
    """A method no route of the path takes: NewGenericServerResponse(405), details there and empty."""
    return APIError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource", {})


def method_not_supported(group: str, plural: str, action: str) -> APIError:
    """An action the resource's storage does not serve, though its route is there (NewMethodNotSupported): a
    list's ?watch where the storage lists but does not watch."""
    gr = f"{plural}.{group}" if group else plural
    return APIError(405, "MethodNotAllowed", f'{action} is not supported on resources of kind "{gr}"',
                    _details("", group, plural))


def gone(message: str) -> APIError:
    return APIError(410, "Expired", message)


def unsupported_media_type(ctype: str) -> APIError:
    return APIError(415, "UnsupportedMediaType", "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json" if ctype else "")


def too_large() -> APIError:
    return APIError(413, "RequestEntityTooLarge", "Request entity too large: limit is 3145728")


def internal(message: str) -> APIError:
    return APIError(500, "InternalError", f"Internal error occurred: {message}", {"causes": [{"message": message}]})


def success_status(name: str, group: str, kind: str, uid: str) -> dict:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": ordered_details({"name": name, "group": group, "kind": kind, "uid": uid}),
    }
