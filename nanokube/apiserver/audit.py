"""Audit logging of writes, as kube-apiserver's log backend writes them: one
`audit.k8s.io/v1` Event per line at the `Metadata` level and stage
`ResponseComplete`, for every create, update, patch and delete, including
those refused by authentication, authorization, admission or validation."""

from __future__ import annotations

import logging
import uuid

import orjson
from aiohttp import web

from ..clock import REAL, Clock
from .auth.authorizer import attributes_for

log = logging.getLogger(__name__)

#: request key under which authentication/authorization leave the event's annotations
ANNOTATIONS = web.RequestKey("audit_annotations", dict)
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})


class AuditLog:
    def __init__(self, path: str, clock: Clock = REAL):
        self.path = path
        self.clock = clock
        self._file = open(path, "ab")  # noqa: SIM115 - held open for the server's life

    def close(self) -> None:
        self._file.close()

    @web.middleware
    async def middleware(self, request: web.Request, handler) -> web.StreamResponse:
        attrs = attributes_for(request.method, request.path, request.query)
        if attrs.verb not in WRITE_VERBS:
            return await handler(request)
        received = self.clock.rfc3339_micro()
        try:
            response = await handler(request)
        except web.HTTPException as e:
            self._write(request, attrs, e, received)
            raise
        self._write(request, attrs, response, received)
        return response

    def _write(self, request: web.Request, attrs, response: web.StreamResponse, received: str) -> None:
        user = request.get("user")
        event = {
            "kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Metadata",
            "auditID": request.headers.get("Audit-ID") or str(uuid.uuid4()), "stage": "ResponseComplete",
            "requestURI": str(request.rel_url), "verb": attrs.verb,
            "user": {"username": user.name, "groups": list(user.groups)} if user else
                    {"username": "system:anonymous", "groups": ["system:unauthenticated"]},
            "sourceIPs": [request.remote] if request.remote else [],
            "userAgent": request.headers.get("User-Agent", ""),
        }
        body = _json_body(response)
        if attrs.resource_request:
            ref = {"resource": attrs.resource, "namespace": attrs.namespace, "name": attrs.name,
                   "apiGroup": attrs.group, "apiVersion": attrs.version, "subresource": attrs.subresource}
            md = body.get("metadata") if response.status < 300 and body.get("kind") != "Status" else None
            if isinstance(md, dict):
                ref["name"] = ref["name"] or md.get("name", "")
                ref["uid"] = md.get("uid", "")
                ref["resourceVersion"] = md.get("resourceVersion", "")
            event["objectRef"] = {k: v for k, v in ref.items() if v}
        status = {"metadata": {}, "code": response.status}
        if response.status >= 400 and body.get("kind") == "Status":
            status |= {k: body[k] for k in ("status", "message", "reason") if body.get(k)}
        event["responseStatus"] = status
        event["requestReceivedTimestamp"] = received
        event["stageTimestamp"] = self.clock.rfc3339_micro()
        event["annotations"] = dict(request.get(ANNOTATIONS) or {})
        try:
            self._file.write(orjson.dumps(event) + b"\n")
            self._file.flush()
        except OSError as e:
            log.error("audit log %s: %s", self.path, e)


def _json_body(response: web.StreamResponse) -> dict:
    body = getattr(response, "body", None)
    if not isinstance(body, bytes | bytearray) or not body.startswith(b"{"):
        return {}
    try:
        out = orjson.loads(body)
    except orjson.JSONDecodeError:
        return {}
    return out if isinstance(out, dict) else {}
