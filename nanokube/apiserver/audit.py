"""Audit logging of writes, as kube-apiserver's log backend writes them: one
`audit.k8s.io/v1` Event per line at the `Metadata` level and stage
`ResponseComplete`, for every create, update, patch and delete, including
those refused by authentication, authorization, admission or validation, and
those of the components that run inside the server and write through the
loopback client (upstream's run as separate clients and are audited alike)."""

from __future__ import annotations

import logging

import orjson
from aiohttp import web

from ..clock import REAL, Clock
from ..machinery.meta import new_uid
from ..machinery.validation import sloppy_ip
from .auth.authorizer import USER, request_attributes

log = logging.getLogger(__name__)

#: request key under which authentication/authorization leave the event's annotations
ANNOTATIONS = web.RequestKey("audit_annotations", dict)
#: the object a successful write answered with, which the handler leaves so the event need not decode its body
RESPONSE_OBJECT = web.RequestKey("audit_response_object", dict)
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})
#: what authorization leaves on a loopback request's event (only encoded, never changed)
_LOOPBACK_ANNOTATIONS = {"authorization.k8s.io/decision": "allow",
                         "authorization.k8s.io/reason": "loopback: a component of the API server"}
#: a loopback event's line before its auditID, and after its stageTimestamp
_LOOPBACK_HEAD = b'{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata",'
_LOOPBACK_TAIL = b',"annotations":' + orjson.dumps(_LOOPBACK_ANNOTATIONS) + b"}\n"
#: loopback clients (user, groups, user agent) whose encoded identity `AuditLog._who` keeps, at most
_WHO_MAX = 256


class AuditLog:
    def __init__(self, path: str, clock: Clock = REAL):
        self.path = path
        self.clock = clock
        # unbuffered: each line is one write(2), as upstream's log backend writes each event to its
        # file, without Python's buffer copy and flush (~2.4 k instructions a line)
        self._file = open(path, "ab", buffering=0)  # noqa: SIM115 - held open for the server's life
        #: the encoded user, sourceIPs and userAgent of each loopback client's events
        self._who: dict[tuple, bytes] = {}

    def close(self) -> None:
        self._file.close()

    @web.middleware
    async def middleware(self, request: web.Request, handler) -> web.StreamResponse:
        attrs = request_attributes(request)
        if attrs.verb not in WRITE_VERBS:
            return await handler(request)
        received = self.clock.rfc3339_micro()
        try:
            response = await handler(request)
        except web.HTTPException as e:
            self.write(request, attrs, e, received)
            raise
        self.write(request, attrs, response, received)
        return response

    def write(self, request: web.Request, attrs, response: web.StreamResponse, received: str) -> None:
        user = request.get(USER)
        ref = None
        if attrs.resource_request:
            ref = {"resource": attrs.resource, "namespace": attrs.namespace, "name": attrs.name,
                   "apiGroup": attrs.group, "apiVersion": attrs.version, "subresource": attrs.subresource}
        obj = request.get(RESPONSE_OBJECT) if response.status < 300 else None
        self._emit(
            verb=attrs.verb, uri=str(request.rel_url), user=user, ref=ref, code=response.status,
            body=obj if obj is not None else _json_body(response), received=received, audit_id=request.headers.get("Audit-ID") or new_uid(),
            source_ips=source_ips(request), user_agent=request.headers.get("User-Agent", ""),
            annotations=dict(request.get(ANNOTATIONS) or {}),
        )

    def loopback(self, verb: str, user, res, version: str, namespace: str | None, name: str, subresource: str,
                 code: int, body: dict, received: str, user_agent: str) -> None:
        """A write by a component running inside the server (controllers, scheduler, node agents): its
        requests never cross HTTP but are audited the same, with the URI the HTTP request would have.
        The same line `_emit` writes (a test holds them equal), built in one pass: every scheduler
        failure report is two loopback writes, and the keyword dicts, merges and comprehensions of
        the general path were ~80 k instructions of each. The fields that never change for a client
        (its user, source IP and user agent, the annotations) are encoded once and joined in."""
        namespaced = res.namespaced and namespace
        group = res.group
        path = (f"/apis/{group}/{version}" if group else f"/api/{version}") + \
            (f"/namespaces/{namespace}/{res.plural}" if namespaced else f"/{res.plural}")
        if name:
            path += f"/{name}"
        if subresource:
            path += f"/{subresource}"
        ref = {"resource": res.plural}
        if namespaced:
            ref["namespace"] = namespace
        md = body.get("metadata") if code < 300 and body.get("kind") != "Status" else None
        if not isinstance(md, dict):
            md = None
        if name or md is not None and (name := md.get("name", "")):
            ref["name"] = name
        if group:
            ref["apiGroup"] = group
        if version:
            ref["apiVersion"] = version
        if subresource:
            ref["subresource"] = subresource
        if md is not None:
            if uid := md.get("uid", ""):
                ref["uid"] = uid
            if rv := md.get("resourceVersion", ""):
                ref["resourceVersion"] = rv
        status = {"metadata": {}, "code": code}
        if code >= 400 and body.get("kind") == "Status":
            for k in ("status", "message", "reason"):
                if v := body.get(k):
                    status[k] = v
        who_key = (user.name, tuple(user.groups), user_agent)
        who = self._who.get(who_key)
        if who is None:
            if len(self._who) >= _WHO_MAX:
                self._who.clear()
            who = self._who[who_key] = orjson.dumps({
                "user": {"username": user.name, "groups": list(user.groups)}, "sourceIPs": ["127.0.0.1"],
                "userAgent": user_agent})[1:-1]
        # the fields in the order the whole event's encoding has them: the constant ones encoded once
        self._write(b"".join((
            _LOOPBACK_HEAD,
            orjson.dumps({"auditID": new_uid(), "stage": "ResponseComplete", "requestURI": path, "verb": verb})[1:-1],
            b",", who, b",",
            orjson.dumps({"objectRef": ref, "responseStatus": status, "requestReceivedTimestamp": received,
                          "stageTimestamp": self.clock.rfc3339_micro()})[1:-1],
            _LOOPBACK_TAIL)))

    def now(self) -> str:
        return self.clock.rfc3339_micro()

    def _emit(self, *, verb: str, uri: str, user, ref: dict | None, code: int, body: dict, received: str,
              audit_id: str, source_ips: list[str], user_agent: str, annotations: dict) -> None:
        event = {
            "kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Metadata",
            "auditID": audit_id, "stage": "ResponseComplete", "requestURI": uri, "verb": verb,
            "user": {"username": user.name, "groups": list(user.groups)} if user else
                    {"username": "system:anonymous", "groups": ["system:unauthenticated"]},
            "sourceIPs": source_ips,
            "userAgent": user_agent,
        }
        if ref is not None:
            md = body.get("metadata") if code < 300 and body.get("kind") != "Status" else None
            if isinstance(md, dict):
                ref["name"] = ref["name"] or md.get("name", "")
                ref["uid"] = md.get("uid", "")
                ref["resourceVersion"] = md.get("resourceVersion", "")
            event["objectRef"] = {k: v for k, v in ref.items() if v}
        status = {"metadata": {}, "code": code}
        if code >= 400 and body.get("kind") == "Status":
            status |= {k: body[k] for k in ("status", "message", "reason") if body.get(k)}
        event["responseStatus"] = status
        event["requestReceivedTimestamp"] = received
        event["stageTimestamp"] = self.clock.rfc3339_micro()
        event["annotations"] = annotations
        self._append(event)

    def _append(self, event: dict) -> None:
        self._write(orjson.dumps(event) + b"\n")

    def _write(self, line: bytes) -> None:
        """The whole line, in the file before the write it reports is answered (as upstream's
        blocking log backend); the rest of a short write is written after it."""
        try:
            n = self._file.write(line)
            while n < len(line):
                line = line[n:]
                n = self._file.write(line)
        except OSError as e:
            log.error("audit log %s: %s", self.path, e)


def source_ips(request: web.Request) -> list[str]:
    """The event's sourceIPs, as upstream's utilnet.SourceIPs lists them: each valid address of
    X-Forwarded-For (a proxy chain, client first), X-Real-Ip unless that chain holds it, then the
    connection's address, which cannot be spoofed, unless it is the chain's last already. The
    headers are the client's word and only the last entry is sure, as upstream warns."""
    ips = [ip for part in request.headers.get("X-Forwarded-For", "").split(",") if (ip := sloppy_ip(part.strip()))]
    real = sloppy_ip(request.headers.get("X-Real-Ip", ""))
    if real is not None and real not in ips:
        ips.append(real)
    remote = sloppy_ip(request.remote or "")
    if remote is not None and (not ips or ips[-1] != remote):
        ips.append(remote)
    return [str(ip) for ip in ips]


def _json_body(response: web.StreamResponse) -> dict:
    body = getattr(response, "body", None)
    if not isinstance(body, bytes | bytearray) or not body.startswith(b"{"):
        return {}
    try:
        out = orjson.loads(body)
    except orjson.JSONDecodeError:
        return {}
    return out if isinstance(out, dict) else {}
