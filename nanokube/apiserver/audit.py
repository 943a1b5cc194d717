"""Audit logging, as kube-apiserver's log backend writes it: one `audit.k8s.io/v1` Event per line
and stage. With `--audit-policy-file` (audit_policy.Policy) every request, reads and non-resource
URLs included, is audited at the level and in the stages its first matching rule says:
RequestReceived, ResponseStarted (long-running requests only: watches, exec/attach/portforward,
a followed log), ResponseComplete, and Panic for an unhandled exception; Request adds the body as
sent (a patch as the patch), RequestResponse the body answered. Without a policy every create,
update, patch and delete is audited at Metadata, stage ResponseComplete only (nanokube's default;
kube-apiserver audits nothing without a policy), refused ones included. The components that run
inside the server and write through the loopback client are audited alike (upstream's run as
separate clients); their reads, cache reads that never make a request, are not. A request whose
credentials fail has one ResponseStarted event and no user (`AuditLog.unauthenticated`); every
response, audited or not, carries its request's audit ID in an Audit-Id header (`audit_id`)."""

from __future__ import annotations

import asyncio
import functools
import logging

import orjson
import yaml
from aiohttp import Payload, hdrs, web
from multidict import istr
from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import CounterMetricFamily

from ..clock import REAL, Clock
from ..machinery import gofmt, keepalive
from ..machinery.errors import APIError
from ..machinery.httpstream.transports import RawUpgrade
from ..machinery.responses import error_response
from ..machinery.meta import new_uid
from ..machinery.user import User
from ..machinery.validation import sloppy_ip
from .audit_policy import COMPLETE, METADATA, NONE, RECEIVED, REQUEST, REQUEST_RESPONSE, STARTED, Decision, Policy
from .audit_file import Batches, BufferFull, LogFile, LogOptions
from .audit_policy import PANIC as STAGE_PANIC
from .audit_truncate import truncated
from .auth.authorizer import USER, request_attributes
from .http_errors import internal_error, status_response
from .timeout import FINISHER_MESSAGE, TIMED_OUT

log = logging.getLogger(__name__)

#: request key under which authentication/authorization leave the event's annotations
ANNOTATIONS = web.RequestKey("audit_annotations", dict)
#: the object a successful write answered with, which the handler leaves so the event need not decode its body
RESPONSE_OBJECT = web.RequestKey("audit_response_object", dict)
#: the request's body as the handler read it (decompressed), which the Request level decodes
REQUEST_BODY = web.RequestKey("audit_request_body", bytes)
#: the namespace, name, uid and resourceVersion a create's or update's body named (`asked`), which the
#: handler records as it decodes the body, only where an audit log is kept: the objectRef's (see _ref)
ASKED = web.RequestKey("audit_asked", tuple)
#: the user authentication found, which the event names (and the policy matches) when it impersonates another
REQUESTER = web.RequestKey("audit_requester", User)
#: the exception a handler answered with a 500 (a bug: upstream's handler panics), which the audit reports
PANIC = web.RequestKey("audit_panic", Exception)
#: the request's audit state, by which authentication has its RequestReceived event written (`authenticated`)
_CONTEXT = web.RequestKey("audit_context", object)
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})
#: what authorization leaves on a loopback request's event (only encoded, never changed)
_LOOPBACK_ANNOTATIONS = {"authorization.k8s.io/decision": "allow",
                         "authorization.k8s.io/reason": "loopback: a component of the API server"}
#: a loopback event's line before its auditID, and after its stageTimestamp
_LOOPBACK_HEAD = b'{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata",'
_LOOPBACK_TAIL = b',"annotations":' + orjson.dumps(_LOOPBACK_ANNOTATIONS) + b"}\n"
#: loopback clients (user, groups, user agent) whose encoded identity `AuditLog._who` keeps, at most
_WHO_MAX = 256
#: what is audited without a policy: writes at Metadata, their ResponseComplete stage only
_WRITES = Decision(METADATA, frozenset({RECEIVED, STARTED, STAGE_PANIC}))
_NOTHING = Decision(NONE)
_ANONYMOUS = {"username": "system:anonymous", "groups": ["system:unauthenticated"]}
#: the levels that log the request's body
_BODIES = frozenset({REQUEST, REQUEST_RESPONSE})
#: WithCacheControl's Cache-Control, on the response before any handler runs: a handler's own
#: replaces it (Header.Set); a proxied answer's follows it (ReverseProxy copies with Header.Add)
NO_CACHE = "no-cache, private"
#: set on a request whose answer a backend in this process writes itself (an in-process kubelet's
#: stream): its own Cache-Control follows NO_CACHE, as a proxied answer's does (AuditedRequest)
PROXIED = web.RequestKey("proxied", bool)
#: the verbs whose body is the object written, which completes the objectRef (see _ref)
_OBJECT_VERBS = frozenset({"create", "update"})
_ANONYMOUS_USER = User("system:anonymous", ("system:unauthenticated",))
#: the user of a request that failed authentication (upstream's event has none: `"user":{}`)
_NOBODY = User("")
#: the request's Audit-ID (`audit_id`), which its response's Audit-Id header and its events carry
AUDIT_ID = web.RequestKey("audit_id", str)
#: the header, as istr: a CIMultiDict reads and sets one without folding its case each time
_AUDIT_ID_HEADER = istr("Audit-Id")


class _Request:
    """One audited request's state across its stages' events."""
    __slots__ = ("log", "request", "attrs", "received", "audit_id", "decision", "refused", "request_object",
                 "response_object", "started")

    def __init__(self, log: AuditLog, request: web.Request, attrs, received: str, audit_id: str):
        self.log, self.request, self.attrs, self.received, self.audit_id = log, request, attrs, received, audit_id
        self.decision: Decision | None = None
        #: its RequestReceived event could not be stored in a blocking-strict backend: answered with a 500
        self.refused = False
        self.request_object: dict | None = None
        self.response_object: dict | None = None
        #: a long-running request's: whether its ResponseStarted event is behind it (None: not one)
        self.started: bool | None = None


class AuditMetrics:
    """kube-apiserver's apiserver_audit_* counters (k8s.io/apiserver/pkg/audit/metrics.go; events,
    errors and levels BETA since 1.36): every event written, the events a backend failed to take
    (by plugin: log, webhook, buffered for a full batch buffer, truncate for one too large), each
    request's policy level, and the requests a blocking-strict backend refused. Plain numbers, read
    when /metrics is collected: a loopback write's line is ~35 k instructions, and a Family's
    labels() and inc() per event added ~10% to it."""

    def __init__(self) -> None:
        self.events = self.rejected = 0
        self.errors: dict[str, int] = {}
        self.levels: dict[str, int] = {}
        self.registry = CollectorRegistry()
        self.registry.register(self)

    def error(self, plugin: str, events: int = 1) -> None:
        self.errors[plugin] = self.errors.get(plugin, 0) + events

    def collect(self) -> list:
        events = CounterMetricFamily("apiserver_audit_event_total",
                                     "[BETA] Counter of audit events generated and sent to the audit backend.",
                                     value=self.events)
        errors = CounterMetricFamily("apiserver_audit_error_total",
                                     "[BETA] Counter of audit events that failed to be audited properly. Plugin "
                                     "identifies the plugin affected by the error.", labels=["plugin"])
        for plugin, n in self.errors.items():
            errors.add_metric([plugin], n)
        levels = CounterMetricFamily("apiserver_audit_level_total",
                                     "[BETA] Counter of policy levels for audit events (1 per request).", labels=["level"])
        for level, n in self.levels.items():
            levels.add_metric([level], n)
        rejected = CounterMetricFamily("apiserver_audit_requests_rejected_total",
                                       "[ALPHA] Counter of apiserver requests rejected due to an error in audit "
                                       "logging backend.", value=self.rejected)
        return [events, errors, levels, rejected]


class AuditLog:
    def __init__(self, path: str, clock: Clock = REAL, policy: Policy | None = None, webhook=None,
                 options: LogOptions = LogOptions(), shared: bool = False):
        """`webhook`: an audit_webhook.WebhookBackend that gets every event the file does (started here,
        in the server's loop). `options`: the --audit-log-* flags: `legacy` format writes one line of
        text per event (the webhook gets JSON either way), the mode, and the file's rotation;
        `shared`: other processes (the API workers) write the same file."""
        self.path = path
        self.clock = clock
        self.policy = policy
        self.webhook = webhook
        self.legacy = options.format == "legacy"
        #: a failed write of a RequestReceived event fails its request (--audit-log-mode blocking-strict)
        self.strict = options.mode == "blocking-strict"
        self._blocking = webhook if webhook is not None and webhook.mode != "batch" else None
        #: served at /metrics with the server's
        self.metrics = AuditMetrics()
        self._levels = self.metrics.levels
        if webhook is not None:
            webhook.errors = self.metrics
            webhook.start()
        self._file = LogFile(path, clock, max_size=options.max_size, max_backups=options.max_backups,
                             max_age=options.max_age, compress=options.compress, shared=shared)
        #: what each line is written to: the file, or batch mode's buffer in front of it
        self._batches = Batches(self._file, options, self._log_error) if options.mode == "batch" else None
        self._sink = self._batches or self._file
        #: the file whose `room` lets a line be written without a call into it (not in batch mode)
        self._fast = self._file if self._batches is None else None
        #: --audit-log-truncate-max-event-size where --audit-log-truncate-enabled, else 0
        self._max_event = options.truncate.max_event if options.truncate is not None else 0
        #: the encoded user, sourceIPs and userAgent of each loopback client's events
        self._who: dict[tuple, bytes] = {}

    def close(self) -> None:
        if self._batches is not None:
            self._batches.close()
        self._file.close()

    async def aclose(self) -> None:
        """Close, after the webhook has sent what it holds."""
        if self.webhook is not None:
            await self.webhook.close()
        self.close()

    @web.middleware
    async def middleware(self, request: web.Request, handler) -> web.StreamResponse:
        """The requests the application routes (non-resource URLs, the metrics APIs); the API
        server's own `_serve` calls `serve` for the rest."""
        if AUDIT_ID not in request:  # (an application served on its own, as tests serve it)
            audit_id(request, routed=True)
        attrs = request_attributes(request)
        if self.policy is None and attrs.verb not in WRITE_VERBS:
            return await handler(request)
        return await self._around(request, attrs, handler, None)

    async def serve(self, request: web.Request, attrs, authn, dispatch) -> web.StreamResponse:
        """An API request through authentication and `dispatch`, audited; HTTP exceptions as a Status."""
        return await self._around(request, attrs, authn, dispatch)

    async def _around(self, request: web.Request, attrs, call, then) -> web.StreamResponse:
        """Run a request (`call(request)`, or `call(request, then)` with its HTTP exceptions of 400 and
        above answered as a Status) and write its stages' events. The policy is asked once the
        request is authenticated, which has its RequestReceived event, stamped with the time the
        request was received, written then (`authenticated`); one whose credentials fail has its
        one event written as it is refused (`unauthenticated`)."""
        received = self.clock.rfc3339_micro()
        ctx = request[_CONTEXT] = _Request(self, request, attrs, received, request[AUDIT_ID])
        if self.policy is not None:  # (without one, no RequestReceived event is written)
            if _long_running(attrs):
                prior = request._prepare_hook  # (audit_id's)
                ctx.started = False

                async def started(response: web.StreamResponse) -> None:
                    await prior(response)
                    if self._start(ctx, response.status) and self._blocking is not None:
                        await self._blocking.flush()  # sent before the headers are, as upstream's WriteHeader
                # aiohttp's hook as each response's headers are written; the fast path has no router
                # signal to attach it to (an instance attribute: __setattr__ would warn in debug mode)
                object.__setattr__(request, "_prepare_hook", started)
        blocking = self._blocking
        try:
            response = await (call(request) if then is None else call(request, then))
            if ctx.refused:  # (upstream's filter returns without a ResponseComplete event)
                return response
        except web.HTTPException as e:
            if then is None or e.status < 400:
                self._start(ctx, e.status)
                self._complete(ctx, e)
                if blocking is not None:
                    await blocking.flush()
                raise
            response = status_response(e)
        except asyncio.CancelledError:
            if request.get(TIMED_OUT):  # the handler's answer as its context ends: the finisher's 504
                response = error_response(APIError(504, "Timeout", FINISHER_MESSAGE, {}))
                self._start(ctx, 504)
                self._complete(ctx, response)
                if blocking is not None:
                    await blocking.flush()
            raise
        except Exception as e:
            self._panic(ctx, e)
            if blocking is not None:
                await blocking.flush()
            raise
        if response.status == 500 and (e := request.get(PANIC)) is not None:  # (a miss raises inside get)
            self._panic(ctx, e)
        else:
            if not response.prepared:  # its headers are written after this; upstream's WriteHeader is before
                self._start(ctx, response.status)
            self._complete(ctx, response)
        if blocking is not None:  # the webhook's blocking mode: answered once its events are sent
            await blocking.flush()
        return response

    def _start(self, ctx: _Request, status: int) -> bool:
        """A long-running request's ResponseStarted event, once, as its response's headers go out;
        whether it was written now."""
        if ctx.started is not False:
            return False
        ctx.started = True
        self._stage(ctx, STARTED, status, None)
        return True

    def _panic(self, ctx: _Request, e: Exception) -> None:
        """The Panic stage, in place of ResponseComplete, as upstream's audit filter recovers a panic
        (the 500 then goes out past the filter: no ResponseStarted for it)."""
        if ctx.started is False:
            ctx.started = True
        self._stage(ctx, STAGE_PANIC, 500, {"kind": "Status", "status": "Failure", "reason": "InternalError",
                                            "message": f"APIServer panic'd: {e}", "code": 500})

    async def received(self, ctx: _Request) -> web.StreamResponse | None:
        """The RequestReceived event, once authentication knows the user (`authenticated`): sent to a
        blocking webhook before the request goes on; None, or, where a blocking-strict backend could
        not store it, upstream's plain-text 500 (`Internal Server Error: "URI": failed to store
        audit event`), with which the request ends."""
        if ctx.decision is not None:
            return None
        stored = self._decide(ctx, webhook=self._blocking is None)
        if stored is None:  # not audited, or not at this stage
            return None
        written, line = stored
        ok = written or not self.strict
        blocking = self._blocking
        if blocking is not None and (sent := blocking.truncated(line)) is not None and \
                not await blocking.send([sent]) and blocking.mode == "blocking-strict":
            ok = False
        if ok:
            return None
        ctx.refused = True
        self.metrics.rejected += 1
        return internal_error(ctx.request, "failed to store audit event")

    async def unauthenticated(self, ctx: _Request) -> None:
        """A request whose credentials failed, answered 401 without a user, as upstream's
        WithFailedAuthenticationAudit audits it: the policy asked for no user, one event at stage
        ResponseStarted naming the methods attempted, no RequestReceived or ResponseComplete.
        Without a policy nothing (the default audits ResponseComplete only; upstream, nothing)."""
        ctx.refused = True
        await self._failed(ctx, 401, _attempted(ctx.request))

    async def refused(self, request: web.Request, attrs, e: APIError) -> None:
        """A request refused before authentication (WithRequestDeadline's 400 for a `timeout` that does
        not parse), audited as upstream's withFailedRequestAudit does: as `unauthenticated`, with the
        refusal's code and message."""
        await self._failed(_Request(self, request, attrs, self.clock.rfc3339_micro(), request[AUDIT_ID]),
                           e.code, e.message)

    async def _failed(self, ctx: _Request, code: int, message: str) -> None:
        """The one ResponseStarted event of a request refused before it has a user, the policy asked
        for no user."""
        a = ctx.attrs
        if self.policy is None:
            ctx.decision = _NOTHING
            return
        d = ctx.decision = self.policy.decide(_NOBODY, a.verb, a.resource_request, a.group, a.resource,
                                              a.subresource, a.namespace, a.name, a.path)
        self._levels[d.level] = self._levels.get(d.level, 0) + 1
        if d.level == NONE or STARTED in d.omit_stages:
            return
        status = {"kind": "Status", "message": message}
        self._append(self._event(ctx, STARTED, code, status, self.clock.rfc3339_micro(), _NOBODY))
        if self._blocking is not None:
            await self._blocking.flush()

    def _decide(self, ctx: _Request, webhook: bool = True) -> tuple[bool, bytes] | None:
        """The policy's decision for the request, asked once; when it is first asked and audits the
        RequestReceived stage, that event is written: (written to the file, its JSON line)."""
        if ctx.decision is not None:
            return None
        policy, a, user = self.policy, ctx.attrs, ctx.request.get(REQUESTER) or ctx.request.get(USER)
        if policy is None:
            ctx.decision = _WRITES if a.verb in WRITE_VERBS else _NOTHING
        else:
            ctx.decision = policy.decide(user or _ANONYMOUS_USER, a.verb, a.resource_request, a.group, a.resource,
                                         a.subresource, a.namespace, a.name, a.path)
        levels = self._levels
        levels[ctx.decision.level] = levels.get(ctx.decision.level, 0) + 1
        if ctx.decision.level == NONE or RECEIVED in ctx.decision.omit_stages:
            return None
        line = orjson.dumps(self._event(ctx, RECEIVED, None, None, ctx.received)) + b"\n"
        return self._write(line, webhook), line

    def _stage(self, ctx: _Request, stage: str, code: int, status: dict | None) -> None:
        self._decide(ctx)
        d = ctx.decision
        if d.level != NONE and stage not in d.omit_stages:
            self._append(self._event(ctx, stage, code, status, self.clock.rfc3339_micro()))

    def _complete(self, ctx: _Request, response: web.StreamResponse) -> None:
        self._decide(ctx)
        d = ctx.decision
        if d.level == NONE or COMPLETE in d.omit_stages:
            return
        request = ctx.request
        obj = request.get(RESPONSE_OBJECT) if response.status < 300 else None
        body = obj if obj is not None else _json_body(response)
        if d is _WRITES:
            self._write(self._write_line(ctx, response.status, body))
            return
        if d.level in _BODIES and ctx.attrs.verb in WRITE_VERBS:
            ctx.request_object = _request_body(request)
        if d.level == REQUEST_RESPONSE:
            ctx.response_object = body or _json_body(response, joined=True) or None
        self._append(self._event(ctx, COMPLETE, response.status, body, self.clock.rfc3339_micro()))

    def _write_line(self, ctx: _Request, code: int, body: dict) -> bytes:
        """A write's ResponseComplete event where no policy is given (Metadata, its one stage): the
        event `_event` makes, built in one pass without event_dict's keywords, copies and
        comprehensions (a test holds them equal), as every write over HTTP writes one."""
        request, a = ctx.request, ctx.attrs
        user, requester = request.get(USER), request.get(REQUESTER)
        who = requester or user
        event = {"kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": METADATA, "auditID": ctx.audit_id,
                 "stage": COMPLETE, "requestURI": str(request.rel_url), "verb": a.verb,
                 "user": ({"username": who.name, "groups": list(who.groups)} if who.name else {}) if who else _ANONYMOUS}
        if requester is not None and user is not None and user is not requester:  # (none: impersonation refused)
            event["impersonatedUser"] = {"username": user.name, "groups": list(user.groups)}
        event["sourceIPs"], event["userAgent"] = source_ips(request), request.headers.get("User-Agent", "")
        if a.resource_request:
            namespace, name, uid, rv = _ref(request.get(ASKED), a.namespace, a.name) if a.verb in _OBJECT_VERBS else \
                (a.namespace, a.name, "", "")
            ref = {}
            for k, v in (("resource", a.resource), ("namespace", namespace), ("name", name), ("apiGroup", a.group),
                         ("apiVersion", a.version), ("subresource", a.subresource), ("uid", uid),
                         ("resourceVersion", rv)):
                if v:
                    ref[k] = v
            event["objectRef"] = ref
        event["responseStatus"] = _status(code, body)
        event["requestReceivedTimestamp"], event["stageTimestamp"] = ctx.received, self.clock.rfc3339_micro()
        event["annotations"] = request.get(ANNOTATIONS) or {}
        return orjson.dumps(event) + b"\n"

    def _event(self, ctx: _Request, stage: str, code: int | None, body: dict | None, stamp: str,
               nobody: User | None = None) -> dict:
        request, attrs, d = ctx.request, ctx.attrs, ctx.decision
        ref = None
        if attrs.resource_request:
            ref = {"resource": attrs.resource, "namespace": attrs.namespace, "name": attrs.name,
                   "apiGroup": attrs.group, "apiVersion": attrs.version, "subresource": attrs.subresource}
            if stage != RECEIVED and attrs.verb in _OBJECT_VERBS:  # (RequestReceived's is before the body is read)
                ref["namespace"], ref["name"], ref["uid"], ref["resourceVersion"] = _ref(
                    request.get(ASKED), attrs.namespace, attrs.name)
        strip = _without_managed_fields if d.omit_managed_fields else _same
        user, requester = request.get(USER), request.get(REQUESTER)
        return event_dict(
            level=d.level, stage=stage, audit_id=ctx.audit_id, uri=str(request.rel_url), verb=attrs.verb,
            # (upstream's impersonation filter runs after RequestReceived is written, and names whom for the rest)
            user=requester or user or nobody,
            impersonated=user if requester is not None and user is not requester and stage != RECEIVED else None,
            source_ips=source_ips(request), user_agent=request.headers.get("User-Agent", ""),
            ref=ref, code=code, body=body or {}, received=ctx.received, stamp=stamp,
            annotations=dict(request.get(ANNOTATIONS) or {}),
            request_object=None if ctx.request_object is None else strip(ctx.request_object),
            response_object=None if ctx.response_object is None else strip(ctx.response_object))

    def loopback(self, verb: str, user, res, version: str, namespace: str | None, name: str, subresource: str,
                 code: int, body: dict, received: str, user_agent: str, sent=None) -> None:
        """A write by a component running inside the server (controllers, scheduler, node agents): its
        requests never cross HTTP but are audited the same, with the URI the HTTP request would have.
        The same line `event_dict` makes (a test holds them equal), built in one pass: every scheduler
        failure report is two loopback writes, and the keyword dicts, merges and comprehensions of
        the general path were ~80 k instructions of each. The fields that never change for a client
        (its user, source IP and user agent, the annotations) are encoded once and joined in."""
        namespaced = res.namespaced and namespace
        group = res.group
        in_url = name  # (`name` becomes the one the body names below)
        path = (f"/apis/{group}/{version}" if group else f"/api/{version}") + \
            (f"/namespaces/{namespace}/{res.plural}" if namespaced else f"/{res.plural}")
        if name:
            path += f"/{name}"
        if subresource:
            path += f"/{subresource}"
        ref = {"resource": res.plural}
        if namespaced:
            ref["namespace"] = namespace
        uid = rv = ""
        if verb in _OBJECT_VERBS and sent is not None:  # (its dict: a patch's bytes are no object)
            namespace, name, uid, rv = _ref(asked(sent), ref.get("namespace", ""), name)
            if namespace:
                ref["namespace"] = namespace
        if name:
            ref["name"] = name
        if group:
            ref["apiGroup"] = group
        if version:
            ref["apiVersion"] = version
        if subresource:
            ref["subresource"] = subresource
        if uid:
            ref["uid"] = uid
        if rv:
            ref["resourceVersion"] = rv
        status = _status(code, body)
        policy = self.policy
        if policy is not None:
            d = policy.decide_loopback(user, verb, group, res.plural, subresource, namespace if namespaced else "", in_url)
            levels = self._levels
            levels[d.level] = levels.get(d.level, 0) + 1
            if d.level != METADATA or RECEIVED not in d.omit_stages or COMPLETE in d.omit_stages:
                self._loopback_policy(d, verb, user, path, ref, status, body, received, user_agent, sent, in_url)
                return
            # else the line below: Metadata, ResponseComplete only
        else:
            levels = self._levels
            levels[METADATA] = levels.get(METADATA, 0) + 1
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

    def _loopback_policy(self, d: Decision, verb: str, user, path: str, ref: dict, status: dict, body: dict,
                         received: str, user_agent: str, sent, name: str) -> None:
        """A loopback write's events as the policy decided (once per client, verb and resource where
        no rule looks at namespaces or names); `sent`: the object or patch (bytes) written."""
        if d.level == NONE:
            return
        head = {"kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": d.level, "auditID": new_uid()}
        tail = {"requestURI": path, "verb": verb,
                "user": {"username": user.name, "groups": list(user.groups)}, "sourceIPs": ["127.0.0.1"],
                "userAgent": user_agent}
        if RECEIVED not in d.omit_stages:
            as_asked = {k: v for k, v in ref.items() if k not in ("uid", "resourceVersion")}
            if not name:
                as_asked.pop("name", None)
            self._append({**head, "stage": RECEIVED, **tail, "objectRef": as_asked, "requestReceivedTimestamp": received,
                          "stageTimestamp": received, "annotations": _LOOPBACK_ANNOTATIONS})
        if COMPLETE not in d.omit_stages:
            event = {**head, "stage": COMPLETE, **tail, "objectRef": ref, "responseStatus": status}
            if sent is not None and d.level in _BODIES:
                if not isinstance(sent, dict):
                    sent = _decoded(sent)
                if sent is not None:
                    event["requestObject"] = _without_managed_fields(sent) if d.omit_managed_fields else sent
            if d.level == REQUEST_RESPONSE and body:
                event["responseObject"] = _without_managed_fields(body) if d.omit_managed_fields else body
            event |= {"requestReceivedTimestamp": received, "stageTimestamp": self.clock.rfc3339_micro(),
                      "annotations": _LOOPBACK_ANNOTATIONS}
            self._append(event)

    def now(self) -> str:
        return self.clock.rfc3339_micro()

    def _append(self, event: dict) -> None:
        self._write(orjson.dumps(event) + b"\n")

    def _write(self, line: bytes, webhook: bool = True) -> bool:
        """The whole line, in the file before the write it reports is answered (as upstream's
        blocking log backend), and to the webhook unless `webhook` is False; False if the file's
        write failed (logged, as upstream's backend reports it)."""
        self.metrics.events += 1
        if webhook and self.webhook is not None:
            self.webhook.add(line)
        if self._max_event and (line := truncated(line, self._max_event)) is None:
            log.error("audit log %s: an event is too large even after truncating", self.path)
            self.metrics.error("truncate")
            return True  # (dropped, not failed: upstream's truncate plugin reports success)
        if self.legacy:
            line = legacy_line(orjson.loads(line))
        try:
            f, n = self._fast, len(line)
            if f is not None and n <= f.room:  # LogFile.write's own first step, without the call
                f.room -= n
                done = f.raw.write(line)
                if done < n:
                    f.put(line[done:])
            else:
                self._sink.write(line)
        except OSError as e:
            self._log_error(e)
            return False
        return True

    def _log_error(self, e: OSError) -> None:
        """An event the log did not take, as upstream's HandlePluginError reports it (the buffer's
        plugin is `buffered`)."""
        log.error("audit log %s: %s", self.path, e)
        self.metrics.error("buffered" if isinstance(e, BufferFull) else "log")


class AuditedRequest(keepalive.Request):
    """The API server's requests (http_errors.StatusAppRunner makes them; one that asks for an upgrade closes its
    connection with its answer, keepalive.py): the response echoes the
    request's audit ID in an Audit-Id header from the hook aiohttp calls as any response's headers
    are written, a stream's before its handler returns, set where the response is written rather
    than by a hook made for each request (a closure and an attribute per request: ~15 k
    instructions of a GET). Its storage is read as the dict it is: Mapping's get and `in` call
    the request's __getitem__ and catch its KeyError: 4.5 k instructions for a key not set, 1.7 k now,
    and a create asks a dozen of them (a GET four)."""

    def get(self, key, default=None):
        return self._state.get(key, default)

    def __contains__(self, key) -> bool:
        return key in self._state

    async def _prepare_hook(self, response: web.StreamResponse) -> None:
        headers = response.headers
        keepalive.unbranded(headers)  # (aiohttp's own path names itself; Go's server names none)
        # an upgrade's 101, or a proxied upgrade's refusal, is written on the hijacked connection,
        # past what the filters set: none of it
        if response.status != 101 and type(response) is not RawUpgrade:
            value = self._state.get(AUDIT_ID)
            if value is not None:
                headers[_AUDIT_ID_HEADER] = value
            # WithCacheControl: no answer may be kept by a cache unless its handler said otherwise, or,
            # proxied, whatever the backend says: after it
            if headers.setdefault(hdrs.CACHE_CONTROL, NO_CACHE) is not NO_CACHE and self._state.get(PROXIED):
                theirs = headers.popall(hdrs.CACHE_CONTROL)
                headers.add(hdrs.CACHE_CONTROL, NO_CACHE)
                headers.extend((hdrs.CACHE_CONTROL, v) for v in theirs)
        if self._match_info is not None:  # routed by the application: its on_response_prepare signal
            await web.Request._prepare_hook(self, response)


def audit_id(request: web.Request, routed: bool = False) -> None:
    """The request's audit ID, as upstream's WithAuditInit gives every request one: its Audit-ID
    header's, else a new UUID; its events carry it and its response's Audit-Id header, set as the
    headers are written (`AuditedRequest`; another request, as a test's own application makes,
    gets a hook that sets it). `routed`: the application routes the request, whose
    on_response_prepare signal is sent then too."""
    request[AUDIT_ID] = value = request.headers.get(_AUDIT_ID_HEADER) or new_uid()
    if isinstance(request, AuditedRequest):
        return
    if routed:
        async def hook(response: web.StreamResponse) -> None:
            response.headers[_AUDIT_ID_HEADER] = value
            await type(request)._prepare_hook(request, response)
    else:  # (a hook that holds the request is a cycle, which left every GET to the cyclic collector: +4.5%)
        async def hook(response: web.StreamResponse) -> None:
            response.headers[_AUDIT_ID_HEADER] = value
    object.__setattr__(request, "_prepare_hook", hook)  # (an instance attribute: __setattr__ would warn in debug mode)


async def unauthenticated(request: web.Request) -> None:
    """Called by authentication as it answers 401 (`AuditLog.unauthenticated`)."""
    ctx = request.get(_CONTEXT)
    if ctx is not None:
        await ctx.log.unauthenticated(ctx)


def _attempted(request: web.Request) -> str:
    """The 401 event's message, naming the credentials the request carried, as upstream's
    getAuthMethods (whose `basic` never shows here: an Authorization header holds one scheme, and
    only a bearer token fails a request; Basic credentials, which nothing reads, leave it anonymous)."""
    methods = []
    parts = request.headers.get("Authorization", "").strip().split(" ")
    if len(parts) > 1 and parts[0].lower() == "bearer":
        methods.append("bearer")
    if request.query.get("access_token", "").strip():
        methods.append("access_token")
    transport = request.transport
    if transport is not None and transport.get_extra_info("peercert"):
        methods.append("x509")
    if methods:
        return "Authentication failed, attempted: " + ", ".join(methods)
    return "Authentication failed, no credentials provided"


async def authenticated(request: web.Request) -> web.StreamResponse | None:
    """Called by authentication once it knows who sent the request (anonymous included), before
    impersonation, authorization and priority and fairness, which is where upstream's WithAudit
    sits in the handler chain: the request's RequestReceived event is written now, with
    authentication's annotations; the response that ends the request where a blocking-strict
    backend could not store it, else None."""
    ctx = request.get(_CONTEXT)
    return None if ctx is None else await ctx.log.received(ctx)


def legacy_line(ev: dict) -> bytes:
    """An event in --audit-log-format legacy, as upstream's audit.EventString writes it (Go's %q
    quoting; the groups each quoted, then quoted again; RFC3339Nano's trailing zeros trimmed)."""
    user, ref, status = ev.get("user") or {}, ev.get("objectRef") or {}, ev.get("responseStatus")
    username, groups = "<none>", "<none>"
    if user.get("username"):
        username = user["username"]
        if user.get("groups"):
            groups = ",".join(gofmt.quote(g) for g in user["groups"])
    asuser, asgroups = "<self>", "<lookup>"
    if (imp := ev.get("impersonatedUser")) is not None:
        asuser = imp.get("username", "")
        if imp.get("groups") is not None:
            asgroups = ",".join(gofmt.quote(g) for g in imp["groups"])
    stamp = ev.get("requestReceivedTimestamp", "")
    if "." in stamp:
        whole, frac = stamp[:-1].split(".")
        stamp = (f"{whole}.{frac.rstrip('0')}" if frac.rstrip("0") else whole) + "Z"
    q = gofmt.quote
    text = (f"{stamp} AUDIT: id={q(ev.get('auditID', ''))} stage={q(ev.get('stage', ''))} "
            f"ip={q((ev.get('sourceIPs') or ['<unknown>'])[0])} method={q(ev.get('verb', ''))} user={q(username)} "
            f"groups={q(groups)} as={q(asuser)} asgroups={q(asgroups)} user-agent={q(ev.get('userAgent', ''))} "
            f"namespace={q(ref.get('namespace') or '<none>')} uri={q(ev.get('requestURI', ''))} "
            f'response="{status["code"] if status else "<deferred>"}"\n')
    return text.encode()


def source_ips(request: web.Request) -> list[str]:
    """The event's sourceIPs, as upstream's utilnet.SourceIPs lists them: each valid address of
    X-Forwarded-For (a proxy chain, client first), X-Real-Ip unless that chain holds it, then the
    connection's address, which cannot be spoofed, unless it is the chain's last already. The
    headers are the client's word and only the last entry is sure, as upstream warns."""
    headers = request.headers
    return list(_source_ips(headers.get("X-Forwarded-For", ""), headers.get("X-Real-Ip", ""), request.remote or ""))


@functools.lru_cache(maxsize=1024)
def _source_ips(forwarded: str, real_ip: str, remote: str) -> tuple[str, ...]:
    """`source_ips` of the headers' values and the connection's address, remembered: a client's
    requests repeat them, and parsing each address again (ipaddress) was a third of a create's event
    under cProfile."""
    ips = [ip for part in forwarded.split(",") if (ip := sloppy_ip(part.strip()))]
    real = sloppy_ip(real_ip)
    if real is not None and real not in ips:
        ips.append(real)
    addr = sloppy_ip(remote)
    if addr is not None and (not ips or ips[-1] != addr):
        ips.append(addr)
    return tuple(str(ip) for ip in ips)


def _json_body(response: web.StreamResponse, joined: bool = False) -> dict:
    """A response's JSON object; `joined`: a list's too, which is joined for it (handlers.JoinedPayload)."""
    body = getattr(response, "body", None)
    if joined and isinstance(body, Payload) and body.content_type == "application/json":
        body = body.decode().encode()
    if not isinstance(body, bytes | bytearray) or not body.startswith(b"{"):
        return {}
    try:
        out = orjson.loads(body)
    except orjson.JSONDecodeError:
        return {}
    return out if isinstance(out, dict) else {}


def _long_running(attrs) -> bool:
    """apf.long_running, imported when a policy first asks (not with the module: an in-process
    component's writes pay for every module the server holds, in its collections' passes)."""
    from .apf import long_running

    return long_running(attrs)


def _status(code: int, body: dict) -> dict:
    """The event's responseStatus: what LogResponseObject copies of a Status answer (a refusal's details
    name the object and the invalid fields; a delete's Success what it deleted), and the HTTP code."""
    status = {"metadata": {}}
    if body.get("kind") == "Status":
        for k in ("status", "message", "reason", "details"):
            if v := body.get(k):
                status[k] = v
    status["code"] = code
    return status


def event_dict(*, level: str, stage: str, audit_id: str, uri: str, verb: str, user, source_ips: list[str],
               user_agent: str, ref: dict | None, code: int | None, body: dict, received: str, stamp: str,
               annotations: dict, request_object=None, response_object=None, impersonated=None) -> dict:
    """An Event in the order of upstream's fields. `user`: who authenticated; `impersonated`: whom
    they act as (`kubectl --as`). `ref`: the request's objectRef (empty values left out), never
    completed from the object answered (see _ref); `code` None: no response yet (RequestReceived)."""
    event = {
        "kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": level, "auditID": audit_id, "stage": stage,
        "requestURI": uri, "verb": verb,
        "user": ({"username": user.name, "groups": list(user.groups)} if user.name else {}) if user else _ANONYMOUS,
    }
    if impersonated is not None:
        event["impersonatedUser"] = {"username": impersonated.name, "groups": list(impersonated.groups)}
    event["sourceIPs"], event["userAgent"] = source_ips, user_agent
    if ref is not None:
        event["objectRef"] = {k: v for k, v in ref.items() if v}
    if code is not None:
        event["responseStatus"] = _status(code, body)
        if request_object is not None:
            event["requestObject"] = request_object
        if response_object is not None:
            event["responseObject"] = response_object
    event["requestReceivedTimestamp"] = received
    event["stageTimestamp"] = stamp
    event["annotations"] = annotations
    return event


def asked(obj) -> tuple[str, str, str, str] | None:
    """The namespace, name, uid and resourceVersion a create's or update's decoded body names (None:
    not an object with metadata), read before the write fills in its own (`ASKED`)."""
    md = obj.get("metadata") if type(obj) is dict else None
    if type(md) is not dict:
        return None
    ns, name, uid, rv = md.get("namespace"), md.get("name"), md.get("uid"), md.get("resourceVersion")
    return (ns if type(ns) is str else "", name if type(name) is str else "", uid if type(uid) is str else "",
            rv if type(rv) is str else "")


def _ref(got: tuple[str, str, str, str] | None, namespace: str, name: str) -> tuple[str, str, str, str]:
    """A create's or update's objectRef namespace, name, uid and resourceVersion, as upstream's
    LogRequestObject fills them: from the request (the URL's stand), then from the body the client
    sent (`asked`), never from the object answered (kubernetes#100466). So a `generateName` create
    names nothing, a create no uid or resourceVersion (a body sets none), an update the uid and
    resourceVersion it was sent with (none where the client sent none), whether the write succeeds
    or fails: one refused as AlreadyExists or Invalid names the object it asked for."""
    if got is None:
        return namespace, name, "", ""
    return namespace or got[0], name or got[1], got[2], got[3]


def _same(obj):
    return obj


def _without_managed_fields(obj):
    """A copy of an object (or each item of a list) with no metadata.managedFields, as upstream's
    removeManagedFields; what is not an object is logged as it is."""
    if not isinstance(obj, dict):
        return obj
    out = obj
    md = obj.get("metadata")
    if isinstance(md, dict) and "managedFields" in md:
        out = {**obj, "metadata": {k: v for k, v in md.items() if k != "managedFields"}}
    items = obj.get("items")
    if isinstance(items, list):
        out = {**out, "items": [_without_managed_fields(i) for i in items]}
    return out


def _request_body(request: web.Request):
    """The request's body as sent, decoded (JSON, YAML or protobuf, as its JSON form; a patch as the
    patch); None for none or one that does not decode."""
    from . import protobuf

    raw = request.get(REQUEST_BODY)
    if not raw:
        return None
    ctype = request.content_type
    if ctype == "application/vnd.kubernetes.protobuf":
        try:
            return protobuf.decode(raw)
        except protobuf.ProtobufError:
            return None
    return _decoded(raw)


def _decoded(raw: bytes):
    """A JSON or YAML body (an apply patch is YAML) as its object; None for one that does not decode."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        pass
    try:
        return yaml.safe_load(raw)
    except yaml.YAMLError:
        return None
