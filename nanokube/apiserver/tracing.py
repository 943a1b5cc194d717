"""kube-apiserver's tracing (APIServerTracing, GA since 1.34): `--tracing-config-file` names a
TracingConfiguration (apiserver.config.k8s.io/v1: `endpoint`, an OTLP gRPC collector, default
localhost:4317; `samplingRatePerMillion`, default 0), and the server exports spans of its API
requests there with the OpenTelemetry SDK, in batches.

The spans, as upstream names them:
- the request's, `<METHOD> /api/v1/namespaces/{:namespace}/pods[/{:name}][/sub]` (the method alone
  for a request that is no resource's), kind server, with otelhttp's attributes (http.request.method,
  url.path, user_agent.original, http.response.status_code...) and the filter's http.target and
  audit-id. It starts once the request is authorized, as upstream's filter sits after authorization:
  a W3C `traceparent` is its parent (and decides its sampling) only for system:masters and
  system:monitoring, anyone else's is a link from a new root, since the API server may be public.
- the handler's child, `Create`, `Update`, `Patch`, `Delete`, `DeleteCollection`, `Get` or `List`,
  with traceFields' attributes (accept, audit-id, client, protocol, resource, scope, url,
  user-agent, verb);
- under it, the store's write or read, `Create etcd3` (`sqlite`, `memory` for those stores), with
  audit-id, key and resource; and each admission webhook's call, `Call mutating webhook` or `Call
  validating webhook` (configuration, webhook, resource, subresource, operation), whose request
  carries the trace onward in its `traceparent`.

Nothing of this is on the request path without a configuration: `install` wraps the handlers, the
REST verbs, the store and the webhooks of one server instance when there is one. Sampling is
ParentBased(TraceIdRatioBased(samplingRatePerMillion / 10^6)), as upstream's.
"""

from __future__ import annotations

import contextvars
import functools
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from ..machinery import configfile, gofmt
from ..machinery.configfile import Kind, Struct
from .auth.authentication_config import SCHEME
from .auth.authorizer import USER, request_attributes
from .audit import AUDIT_ID

GROUP = "apiserver.config.k8s.io"
VERSIONS = ("v1", "v1beta1", "v1alpha1")
DEFAULT_ENDPOINT = "localhost:4317"
#: the groups whose trace context the server takes as the parent of its own (notSystemPrivilegedGroup)
PRIVILEGED = frozenset({"system:masters", "system:monitoring"})
#: the REST verbs' spans (upstream's handlers'), by GenericREST method
VERBS = {"create": "Create", "update": "Update", "patch": "Patch", "delete": "Delete",
         "delete_collection": "DeleteCollection", "get": "Get", "list": "List"}
_STORE_VERBS = {"create": "Create", "update": "GuaranteedUpdate", "delete": "Delete", "get": "Get"}
#: the request a traced handler serves, for its children's attributes (None: not in a traced request)
_REQUEST: contextvars.ContextVar = contextvars.ContextVar("traced_request", default=None)


class TracingConfigError(ValueError):
    pass


#: a TracingConfiguration file (apiserver.config.k8s.io v1, v1beta1, v1alpha1: component-base's
#: TracingConfiguration inline) as kube-apiserver's scheme for it decodes it
FILE = Kind(tuple(f"{GROUP}/{v}" for v in VERSIONS), "TracingConfiguration", SCHEME, lambda v: Struct(
    f"{v}.TracingConfiguration", {"apiVersion": str, "kind": str, "endpoint": str, "samplingRatePerMillion": int}))


@dataclass(frozen=True)
class TracingConfiguration:
    endpoint: str = DEFAULT_ENDPOINT
    sampling_rate_per_million: int = 0


def load(path: str) -> TracingConfiguration:
    """The file's TracingConfiguration, validated as ValidateTracingConfiguration does."""
    failed = "--tracing-config-file: failed to read tracing config: "
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise TracingConfigError(f"{failed}unable to read tracing configuration from {gofmt.quote(path)}: open {path}: "
                                 f"{(e.strerror or str(e)).lower()}") from None
    try:
        doc, _ = configfile.decode(data, FILE)
    except configfile.DecodeError as e:
        raise TracingConfigError(f"{failed}unable to decode tracing configuration data: {e}") from None
    endpoint = doc.get("endpoint")
    rate = doc.get("samplingRatePerMillion")
    errs = []
    if endpoint is not None:
        if not endpoint:  # (the decoding found it a string)
            errs.append(f"endpoint: Invalid value: {endpoint!r}: must be a host:port or a URL")
        else:
            try:
                urlsplit(endpoint if "//" in endpoint else "//" + endpoint).port
            except ValueError as e:
                errs.append(f"endpoint: Invalid value: {endpoint!r}: parse {endpoint!r}: {e}")
    if rate is not None:
        if rate < 0:  # (the decoding found it an int32)
            errs.append(f"samplingRatePerMillion: Invalid value: {rate}: sampling rate must be positive")
        elif rate > 1_000_000:
            errs.append(f"samplingRatePerMillion: Invalid value: {rate}: sampling rate must be less than or "
                        "equal to one million")
    if errs:
        raise TracingConfigError("--tracing-config-file: " + ", ".join(errs))
    return TracingConfiguration(endpoint or DEFAULT_ENDPOINT, rate or 0)


class Tracing:
    """The server's tracer provider, its OTLP gRPC exporter and W3C propagator."""

    def __init__(self, config: TracingConfiguration, exporter=None) -> None:
        from opentelemetry.propagators.composite import CompositePropagator
        from opentelemetry.baggage.propagation import W3CBaggagePropagator
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        if exporter is None:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

            endpoint = config.endpoint
            insecure = not endpoint.startswith("https://")
            exporter = OTLPSpanExporter(endpoint=endpoint, insecure=insecure)
        self.provider = TracerProvider(
            sampler=ParentBased(TraceIdRatioBased(config.sampling_rate_per_million / 1_000_000)),
            resource=Resource.create({"service.name": "apiserver", "service.instance.id": socket.gethostname()}))
        self.provider.add_span_processor(BatchSpanProcessor(exporter))
        self.tracer = self.provider.get_tracer("k8s.io/apiserver")
        self.propagator = CompositePropagator([TraceContextTextMapPropagator(), W3CBaggagePropagator()])

    def shutdown(self) -> None:
        """Exports what is left, then stops (the server's stop)."""
        self.provider.shutdown()

    # --- the request's span ----------------------------------------------

    def serving(self, dispatch):
        """`dispatch` (APIHandlers.dispatch, after authentication, authorization and APF) in the
        request's span."""
        from opentelemetry import trace
        from opentelemetry.trace import Link, SpanKind, Status, StatusCode

        tracer, propagator = self.tracer, self.propagator

        @functools.wraps(dispatch)
        async def traced(request):
            remote = propagator.extract(request.headers)
            user = request.get(USER)
            links = ()
            if user is None or PRIVILEGED.isdisjoint(user.groups):  # a public endpoint's: a new root, linked
                remote_span = trace.get_current_span(remote).get_span_context()
                links = (Link(remote_span),) if remote_span.is_valid else ()
                remote = None
            # otelhttp's operation name, and no attributes, until the sampler has kept the span: an
            # unsampled request builds nothing more
            with tracer.start_as_current_span("KubernetesAPI", context=remote, kind=SpanKind.SERVER,
                                              links=links) as span:
                recording = span.is_recording()
                if recording:
                    name, route = _span_name(request)
                    span.update_name(name)
                    span.set_attributes(_server_attributes(request, route))
                token = _REQUEST.set(request)
                try:
                    response = await dispatch(request)
                finally:
                    _REQUEST.reset(token)
                if recording:
                    status = response.status
                    span.set_attribute("http.response.status_code", status)
                    if status >= 500:
                        span.set_status(Status(StatusCode.ERROR))
                return response

        return traced

    # --- children --------------------------------------------------------

    def child(self, name: str, method, attributes):
        """`method` (a coroutine function) in a span `name` under the traced request it runs for,
        `attributes(request, *args)` its attributes; outside one, or under one not sampled (whose
        children would not be either), `method` as it is."""
        from opentelemetry.trace import get_current_span

        tracer = self.tracer

        @functools.wraps(method)
        async def traced(*args, **kwargs):
            request = _REQUEST.get()
            if request is None or not get_current_span().is_recording():
                return await method(*args, **kwargs)
            with tracer.start_as_current_span(name, attributes=attributes(request, *args)):
                return await method(*args, **kwargs)

        return traced

    def inject(self, headers: dict) -> None:
        """The current span's trace context into an outgoing request's `headers` (traceparent)."""
        if _REQUEST.get() is not None:
            self.propagator.inject(headers)


def _span_name(request) -> tuple[str, str]:
    """getSpanNameFromRequestInfo: (span name, route template) of a resource request; the method
    and '' for any other."""
    a = request_attributes(request)
    if not a.resource_request:
        return request.method, ""
    route = ("/apis/" + a.group if a.group else "/api") + "/" + a.version
    if a.namespace:
        route += "/namespaces/{:namespace}"
    route += "/" + a.resource
    if a.name:
        route += "/{:name}"
    if a.subresource:
        route += "/" + a.subresource
    return f"{request.method} {route}", route


def _server_attributes(request, route: str) -> dict:
    """otelhttp's server span attributes (semantic conventions' stable HTTP names), with the
    tracing filter's http.target and audit-id."""
    host, _, port = (request.host or "").rpartition(":")
    out = {"http.request.method": request.method, "url.scheme": "https", "url.path": request.path,
           "server.address": host or request.host, "network.protocol.version": "%d.%d" % request.version,
           "http.target": request.path_qs, "audit-id": request.get(AUDIT_ID, "")}
    if port.isdigit():
        out["server.port"] = int(port)
    if route:
        out["http.route"] = route
    ua = request.headers.get("User-Agent")
    if ua:
        out["user_agent.original"] = ua
    if request.remote:
        out["client.address"] = request.remote
    return out


def _handler_attributes(request, res, *_) -> dict:
    """traceFields: what the handler's span says of its request."""
    a = request_attributes(request)
    verb = request.method.upper()
    if verb == "GET" and request.query.get("watch") in ("1", "true"):
        verb = "WATCH"
    return {"accept": request.headers.get("Accept", ""), "audit-id": request.get(AUDIT_ID, ""),
            "client": request.remote or "", "protocol": "HTTP/%d.%d" % request.version,
            "resource": a.resource, "scope": "resource" if a.name else "namespace" if a.namespace else "cluster",
            "url": request.path, "user-agent": request.headers.get("User-Agent", "")[:256], "verb": verb}


def _store_attributes(request, key: str, *_) -> dict:
    parts = key.split("/")
    return {"audit-id": request.get(AUDIT_ID, ""), "key": key, "resource": parts[2] if len(parts) > 2 else ""}


def _webhook_attributes(request, hook, a, *_) -> dict:
    res = a.res
    return {"configuration": hook.config, "webhook": hook.name,
            "resource": f"{res.group}/{a.version}, Resource={res.plural}", "subresource": a.subresource,
            "operation": a.operation}


def start(server, config: TracingConfiguration, store: str) -> Tracing:
    """Tracing by `config` for `server`, over the store `store` (--store's value), installed."""
    tracing = Tracing(config)
    install(server, tracing, "etcd3" if store.startswith("etcd") else store)
    return tracing


def install(server, tracing: Tracing, backend: str) -> None:
    """Traces `server`'s requests (before it starts: its catch-all route takes the traced
    handler). `backend`: the store's span suffix (etcd3, sqlite, memory)."""
    handlers, rest = server.handlers, server.rest
    handlers.dispatch = tracing.serving(handlers.dispatch)
    for method, name in VERBS.items():
        setattr(rest, method, tracing.child(name, getattr(rest, method), _handler_attributes))
    store = rest.store
    for method, name in _STORE_VERBS.items():
        setattr(store, method, tracing.child(f"{name} {backend}", getattr(store, method), _store_attributes))
    webhooks = rest.admission.webhooks
    mutating = tracing.child("Call mutating webhook", webhooks._call, _webhook_attributes)
    validating = tracing.child("Call validating webhook", webhooks._call, _webhook_attributes)
    webhooks._call = lambda hook, a, t: (mutating if hook.mutating else validating)(hook, a, t)
    rest.admission.client.on_request = tracing.inject
