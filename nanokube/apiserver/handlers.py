"""HTTP transport of the API: routing, content negotiation, watch streaming.

Everything semantic happens in `rest.GenericREST`; this module only maps
requests to it and renders results (objects, lists, Tables, Status).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import zlib
from collections.abc import Callable, Iterator
from typing import Any

import orjson
import yaml
from aiohttp import HttpVersion11, web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.payload import Payload
from aiohttp.web_protocol import RequestPayloadError

from ..clock import Clock
from ..metrics.api import GROUPS as METRICS_GROUPS, MetricsAPI
from ..metrics.provider import MetricsProvider
from ..registry.base import Resource
from ..machinery import errors, gofmt, gojson
from . import discovery, expect, latencytrackers, protobuf, protobuf_encode, serializer, tables, warning
from .cache import served_json
from .loopback import LocalClient
from .metrics import CONNECT_SUBRESOURCES
from .audit import ASKED as AUDIT_ASKED
from .audit import PANIC, REQUEST_BODY, RESPONSE_OBJECT
from .audit import asked as audit_asked
from .auth.authorizer import USER
from .rest import GenericREST, ResourceIndex, User, WriteOptions
from ..machinery.responses import dumps, error_response, go_escaped, json_response
from ..machinery.selectors import field_requirements, parse_label_selector
from ..machinery.validation import user_agent_manager
from .patch import strict
from .options import (
    APPLY_PATCH,
    MIN_REQUEST_TIMEOUT,
    delete_body_kind_errors,
    delete_options,
    integer,
    list_options_errors,
    options_invalid,
    watch_list_defaults,
    watch_timeout,
    write_options_errors,
)
from .streaming.kubelet import Kubelets
from .streaming.pods import PodStreaming
from .streaming.proxy import ProxySubresources
from .subresources import Subresources
from .watchsocket import WatchSocket, is_websocket_watch

log = logging.getLogger(__name__)

MAX_BODY = 3 * 1024 * 1024
PATCH_TYPES = (
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
)
_JSON = "application/json"
_YAML = "application/yaml"
#: MonitorRequest's read requests, whose responses apiserver_response_sizes observes
_READS = frozenset(("GET", "LIST"))
#: a watch event's line longer than this goes through the watch's task, written in slices of this
#: length with the loop free between them (`_write_sliced`)
_EVENT_SLICE = 1 << 18
#: bytes of a loop turn's events a direct watch holds before it writes them (`_Batches`): a burst
#: still goes out in few writes, and one of thousands of events reaches the connection, and the
#: check against the transport's high-water mark, in parts instead of as one copy per watcher
_HELD_MAX = 1 << 16
#: seconds between the checks, from a watch's deadline until its response has ended, of whether its
#: client has stopped taking what it was sent (`_end_watch`)
_ENDING_CHECK = 0.1
#: the raw body and what it decoded to, for the strict decoder's duplicate keys
_DUPLICATES = web.RequestKey("nanokube.body", tuple)
#: Warning headers every response to the request carries (a deprecated version's)
_WARNINGS = web.RequestKey("nanokube.warnings", list)
#: a watch through a legacy /watch/ path without ?watch: ListResource's forceWatch, whose options are a list's
_FORCED_WATCH = web.RequestKey("nanokube.forced_watch", bool)
#: the Go type of a custom resource's answer, which has no protobuf encoding (`_negotiate`)
_UNMARSHALABLE = web.RequestKey("nanokube.unmarshalable", str)
#: the apiserver_response_sizes histogram a read's answer is observed in once negotiated (`sized`)
_RESPONSE_SIZE = web.RequestKey("nanokube.response_size", object)
_OPTIONS_KIND = {"POST": "CreateOptions", "PUT": "UpdateOptions", "PATCH": "PatchOptions"}
#: a write's checked options by (method, raw query, a patch's Content-Type): (dry_run, field_manager,
#: field_validation, force), as `_write_opts` makes them; cleared when full
_WRITE_OPTS: dict[tuple[str, str, str | None], tuple[bool, str, str, bool]] = {}
_WRITE_OPTS_LIMIT = 256


#: the meta.k8s.io versions a response may be converted to (Accept's `as`, `g` and `v`)
_META_VERSIONS = frozenset({"v1", "v1beta1"})
_CONVERSIONS = {"Table": "table", "PartialObjectMetadata": "partial", "PartialObjectMetadataList": "partiallist"}
#: a pod's subresources that stream (connect handlers, the log's) rather than answer with an object
_UNNEGOTIATED = frozenset({"exec", "attach", "portforward", "proxy", "log"})
#: core subresources whose storage has no TableConvertor (as a create-only kind's, a review's)
_NO_TABLES = frozenset({"binding", "eviction", "token"})


def _negotiate(accept: str, unmarshalable: str = "", conversions: bool = True) -> tuple[str, str, str]:
    """(media type, 'table', 'partial', 'partiallist' or 'object', meta.k8s.io version) an Accept header
    negotiates, as upstream's NegotiateMediaTypeOptions: no header is JSON; otherwise the clauses by
    quality (then the specific before the wildcards), the first one whose media type is served and whose
    conversion (`as`, `g` and `v` together) is one the endpoint makes: a Table only in JSON or YAML;
    none where `conversions` is false (an error's). `unmarshalable`: the Go type of a custom resource's
    answer, which protobuf cannot encode: its protobuf clause is passed over for the next, and is
    errNotMarshalable's 406 where none follows."""
    if accept == _JSON or not accept:  # what most clients send; no header is the first media type
        return _JSON, "object", ""
    clauses = []
    for part in accept.split(","):
        bits = [b.strip() for b in part.split(";")]
        params = {}
        for b in bits[1:]:
            k, eq, v = b.partition("=")
            if eq:
                params[k.strip().lower()] = v.strip()
        mt = bits[0].lower()
        q = params.pop("q", "1")
        try:
            quality = float(q)
        except ValueError:
            quality = 0.0
        clauses.append((-quality, mt.startswith("*/"), mt.endswith("/*"), mt, params))
    clauses.sort(key=lambda c: c[:3])
    passed_over = False
    for _, _, _, mt, params in clauses:
        if mt not in (_JSON, "*/*", "application/*", _YAML, _PROTOBUF):
            continue
        if params.get("stream", "watch") != "watch":
            continue
        media = mt if mt in (_YAML, _PROTOBUF) else _JSON
        if not {"as", "g", "v"} & params.keys():
            if media == _PROTOBUF and unmarshalable:
                passed_over = True
                continue
            return media, "object", ""
        kind = _CONVERSIONS.get(params.get("as", ""))
        if (conversions and kind and params.get("g") == "meta.k8s.io" and params.get("v") in _META_VERSIONS
                and not (kind == "table" and media == _PROTOBUF)):
            return media, kind, params["v"]
    if passed_over:
        raise errors.APIError(406, "NotAcceptable", f"object {unmarshalable} does not implement the protobuf "
                              "marshalling interface and cannot be encoded to a protobuf message")
    raise _not_acceptable()


def _not_acceptable(stream: bool = False) -> errors.APIError:
    """NewNotAcceptableError: the media types the endpoint serves (a watch: those that stream)."""
    served = f"{_JSON};stream=watch, {_PROTOBUF};stream=watch" if stream else _MEDIA_TYPES
    return errors.APIError(406, "NotAcceptable", f"only the following media types are accepted: {served}")


def _accept(request: web.Request) -> str:
    """'table', 'partial', 'partiallist' or 'object', as the request's Accept header negotiates it."""
    return _negotiate(request.headers.get("Accept", ""), request.get(_UNMARSHALABLE, ""))[1]


def _meta_version(request: web.Request) -> str:
    """The meta.k8s.io version of the Table or PartialObjectMetadata(List) the Accept header asks for:
    a conversion to v1beta1 is served as v1beta1, as upstream encodes it in the version asked for."""
    return _negotiate(request.headers.get("Accept", ""), request.get(_UNMARSHALABLE, ""))[2] or "v1"


def _include_object(q) -> str:
    """TableOptions.includeObject, judged as upstream's optionsForTransform does (ValidateTableOptions)
    before any Table is made: a value it does not know is a 400."""
    include = q.get("includeObject", "")
    if include not in ("", "None", "Object", "Metadata"):
        raise errors.bad_request(f"Unable to convert to Table as requested: includeObject: Invalid value: "
                                 f"{gofmt.quote(include)}: must be 'Metadata', 'Object', 'None', or empty")
    return include or "Metadata"


def _go_type(res: Resource, is_list: bool) -> str:
    """The Go type (`%T`) upstream's handlers name in a conversion's error: the kind's internal type
    (events.k8s.io's Events are core's), or Unstructured for a custom resource."""
    if not res.strategy.strategic_merge:  # a custom resource (no patch strategies: it is unstructured)
        return "*unstructured.UnstructuredList" if is_list else "*unstructured.Unstructured"
    pkg = {"": "core", "events.k8s.io": "core", "internal.apiserver.k8s.io": "apiserverinternal"}.get(
        res.group, res.group.split(".")[0])
    return f"*{pkg}.{res.kind}{'List' if is_list else ''}"


def _wrong_partial(res: Resource, is_list: bool) -> errors.APIError:
    """asPartialObjectMetadata(List)'s 406: PartialObjectMetadata asked for a list, or
    PartialObjectMetadataList for one object."""
    if is_list:
        msg = f"you requested PartialObjectMetadata, but the requested object is a list ({_go_type(res, True)})"
    else:
        msg = f"you requested PartialObjectMetadataList, but the requested object is not a list ({_go_type(res, False)})"
    return errors.APIError(406, "NotAcceptable", msg)


def _watch_accept(request: web.Request) -> tuple[str, str]:
    """As `_accept`, for a watch, with the media type: it must stream, and YAML has no stream
    serializer (upstream's NegotiateOutputMediaTypeStream), so a watch that negotiates it (first,
    by quality) is Not Acceptable rather than JSON."""
    media, kind, _ = _negotiate(request.headers.get("Accept", ""), request.get(_UNMARSHALABLE, ""))
    if media == _YAML:
        raise _not_acceptable(stream=True)
    return kind, media


def _pretty(request: web.Request) -> bool:
    """isPrettyPrint: ?pretty as strconv.ParseBool reads it (what does not parse is false); without it,
    a browser's or a command-line HTTP tool's User-Agent (curl, Wget, Mozilla/5.0)."""
    pp = request.query.get("pretty", "")
    if pp:
        return pp in ("1", "t", "T", "true", "TRUE", "True")
    return request.headers.get("User-Agent", "").startswith(("curl", "Wget", "Mozilla/5.0"))


def sized(request: web.Request, response: web.StreamResponse) -> web.StreamResponse:
    """`response`, observed in apiserver_response_sizes where it answers a read: the bytes sent, in the
    media type negotiated (a protobuf or YAML answer's own size, not its JSON's)."""
    histogram = request.pop(_RESPONSE_SIZE, None)
    if histogram is not None and (size := _body_size(response)) is not None:
        histogram.observe(size)
    return response


async def as_negotiated(request: web.Request, response: web.StreamResponse) -> web.StreamResponse:
    """`_negotiated`, `compressed`, `sized`."""
    return sized(request, await compressed(request, await _negotiated(request, response)))


#: upstream's defaultGzipThresholdBytes: an answer longer than this is gzipped for a client that accepts it
GZIP_THRESHOLD = 128 * 1024


async def compressed(request: web.Request, response: web.StreamResponse) -> web.StreamResponse:
    """APIResponseCompression, as upstream's deferredResponseWriter: an answer (any verb's, errors too;
    never a watch's stream) of more than GZIP_THRESHOLD bytes is gzipped at level 1
    (defaultGzipContentEncodingLevel) where an Accept-Encoding token is `gzip`
    (negotiateContentEncoding), with `Vary: Accept-Encoding`. In a worker thread: zlib lets go of the
    GIL, and a 40 MB list would hold the loop for a tenth of a second and more."""
    if type(response) is not web.Response or not any(
            t.strip() == "gzip" for t in request.headers.get("Accept-Encoding", "").split(",")):
        return response
    body = response.body
    if not (isinstance(body, JoinedPayload) and body.size > GZIP_THRESHOLD
            or isinstance(body, bytes) and len(body) > GZIP_THRESHOLD):
        return response
    response.body = await asyncio.to_thread(gzipped, body, 1)
    response.headers["Content-Encoding"] = "gzip"
    response.headers.add("Vary", "Accept-Encoding")
    return response


def gzipped(body: bytes | JoinedPayload, level: int) -> bytes:
    """`body` gzipped; a list's JoinedPayload slice by slice, never joined whole (a 40 MB list's copy)."""
    z = zlib.compressobj(level, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    if isinstance(body, bytes):
        return z.compress(body) + z.flush()
    return b"".join([*map(z.compress, body.slices()), z.flush()])


def accepts_gzip(request: web.Request) -> bool:
    """NYTimes gziphandler's acceptsGzip (around /openapi/v2): a `gzip` coding of Accept-Encoding
    whose quality is above 0 (`gzip;q=0` refuses it; a quality that does not parse is 0)."""
    for coding in request.headers.get("Accept-Encoding", "").split(","):
        name, _, params = coding.partition(";")
        if name.strip() != "gzip":
            continue
        q = 1.0
        for param in params.split(";"):
            key, _, value = param.strip().partition("=")
            if key == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        return q > 0
    return False


async def _negotiated(request: web.Request, response: web.StreamResponse) -> web.StreamResponse:
    """A JSON response in YAML where the Accept header negotiates application/yaml, as upstream's YAML
    serializer writes it (sigs.k8s.io/yaml: keys sorted, block style), or in protobuf where it
    negotiates that; errors too, negotiated as ErrorNegotiated does (no conversion; a custom
    resource's Status is protobuf too). A watch is framed by its handler.
    A JSON one pretty-printed where isPrettyPrint asks for it (json.MarshalIndent: two spaces, no
    newline after it). A body of serializer.OFF_LOOP bytes or more is converted in a worker thread
    (a 3 MB list took PyYAML 16 s, all of it a hold of the loop)."""
    if type(response) is not web.Response or response.content_type != _JSON:
        return response
    accept = request.headers.get("Accept", "")
    error = response.status >= 400
    try:
        media = _JSON if "yaml" not in accept and "protobuf" not in accept else _negotiate(
            accept, "" if error else request.get(_UNMARSHALABLE, ""), conversions=not error)[0]
    except errors.APIError:
        return response
    if media != _PROTOBUF and media != _YAML and not _pretty(request):
        return response
    body = response.body
    data = body.decode() if isinstance(body, Payload) else bytes(body or b"")
    if len(data) < serializer.OFF_LOOP:
        return _converted(response, data, media)
    return await asyncio.to_thread(_converted, response, data, media)


def _converted(response: web.Response, data: bytes, media: str) -> web.Response:
    """`response`, its JSON body `data` written in `media` (YAML, protobuf, or indented JSON)."""
    if media == _PROTOBUF:
        return _as_protobuf(response, data)
    to_yaml = media == _YAML
    if to_yaml:
        text = yaml.safe_dump(orjson.loads(data), sort_keys=True, default_flow_style=False, allow_unicode=True).encode()
    else:
        text = go_escaped(orjson.dumps(orjson.loads(data), option=orjson.OPT_INDENT_2))
    out = web.Response(body=text, status=response.status, content_type=_YAML if to_yaml else _JSON)
    for k, v in response.headers.items():
        if k.lower() not in ("content-type", "content-length"):
            out.headers.add(k, v)
    return out


def _as_protobuf(response: web.Response, data: bytes) -> web.Response:
    """A JSON response re-encoded in protobuf; one whose kind has no message (an aggregated API's)
    stays JSON."""
    obj = orjson.loads(data)
    if type(obj) is not dict:
        return response
    status = response.status
    try:
        data = protobuf_encode.encode(obj)
    except protobuf_encode.NotMarshalable:
        return response
    except protobuf_encode.ProtobufError as e:  # a stored object the table does not fit: a bug
        log.exception("cannot encode %s %s as protobuf", obj.get("apiVersion"), obj.get("kind"))
        status, data = 500, protobuf_encode.encode(errors.internal(f"protobuf encoding: {e}").status())
    out = web.Response(body=data, status=status, content_type=_PROTOBUF)
    for k, v in response.headers.items():
        if k.lower() not in ("content-type", "content-length"):
            out.headers.add(k, v)
    return out


def _bool(q: str | None) -> bool:
    """A boolean query parameter as upstream's Convert_Slice_string_To_bool reads it: absent, "0" or
    "false" in any case is false, anything else (an empty value too) true."""
    return q is not None and q != "0" and q.lower() != "false"


def _maybe_bool(q, name: str) -> bool | None:
    """A *bool query parameter (sendInitialEvents): None when absent, else as `_bool` reads it."""
    raw = q.get(name)
    return None if raw is None else _bool(raw)


def _collection_options(q) -> dict:
    """A DELETECOLLECTION's ListOptions, decoded (400, selectors included) and judged (SetListOptionsDefaults and
    ValidateListOptions, a 422) before its body is read, as delete.go does; the list it deletes
    is read with them (a page of `limit`, from a resourceVersion or a continue token)."""
    limit = max(integer(q, "limit") or 0, 0)
    integer(q, "timeoutSeconds")
    # the selectors parse while the options convert to their internal form (a 400 before the 422); the
    # field labels are converted after validation, when the list reads them
    if q.get("labelSelector"):
        parse_label_selector(q["labelSelector"])
    field_requirements(q.get("fieldSelector", ""))
    watch, rv, cont = _bool(q.get("watch")), q.get("resourceVersion", ""), q.get("continue", "")
    match, sie = q.get("resourceVersionMatch", ""), _maybe_bool(q, "sendInitialEvents")
    if watch:
        match, sie = watch_list_defaults(rv, match, sie)
    errs = list_options_errors(watch, rv, match, sie, cont)
    if errs:
        raise options_invalid("ListOptions", errs)
    return {"limit": limit, "continue_": cont, "resource_version": rv, "resource_version_match": "" if watch else match}


def _user(request: web.Request) -> User:
    return request.get(USER) or User("system:anonymous", ("system:unauthenticated",))


def _field_manager_default(request: web.Request) -> str:
    ua = request.headers.get("User-Agent", "")
    return user_agent_manager(ua) if ua else "unknown"


class APIHandlers:
    def __init__(self, rest: GenericREST, index: ResourceIndex, clock: Clock, metrics, openapi_cache) -> None:
        self.rest = rest
        self.index = index
        self.clock = clock
        self.metrics = metrics
        self.openapi = openapi_cache
        self.sub = Subresources(rest)
        #: pods/exec, pods/attach and pods/portforward, proxied to the node agents that register
        self.streams = PodStreaming(lambda ns, name: rest._entry(index.get("", "v1", "pods"), ns, name).obj)
        self.streams.admit = rest.admit_connect
        #: pods/proxy, services/proxy and nodes/proxy, reaching pods through the same node agents
        self.proxies = ProxySubresources(rest, index, self.streams.node_servers)
        #: the nodes' kubelets: an in-process agent's, or dialled at the Node's address
        self.kubelets = self.proxies.nodes = self.streams.kubelets = Kubelets(
            lambda name: rest._entry(index.get("", "v1", "nodes"), None, name).obj, self.streams.get_pod,
            self.proxies.kubelets, clock)
        self.sub.kubelet_log = self.kubelets.read_log
        #: answers create on review resources (verbs == ("create",)): `await reviews(res, body, user, namespace)`
        self.reviews = None
        self._discovery_cache: dict[str, bytes] = {}
        #: the server's external address, which /api names (set by the server: its port is known once bound)
        self.external_address: Callable[[], str] = lambda: ""
        #: (APIGroup, APIResourceList) of groups served by in-process adapters
        #: (metrics APIs) and no remote APIService, listed in /apis like aggregated API services
        self.extra_groups: list[tuple[dict, dict]] = []
        self._metrics_api: MetricsAPI | None = None
        #: called when the metrics group/versions the built-in adapter serves change (their OpenAPI goes or comes)
        self.on_built_in_change: Callable[[], None] = lambda: None
        self._built_in = list(METRICS_GROUPS.items())
        rest.raw_get = self.get_raw
        #: the aggregator (apiserver/aggregator): proxies the group/versions of remote APIServices
        self.aggregator = None
        #: (APIGroup, APIResourceList) of the remote APIServices' groups
        self.aggregated_groups: list[tuple[dict, dict]] = []
        self._batches = _Batches()
        #: kube-apiserver's --min-request-timeout: a watch without timeoutSeconds is served a random
        #: time from this to twice this many seconds (`options.watch_timeout`)
        self.min_request_timeout: float = MIN_REQUEST_TIMEOUT

    # --- discovery ------------------------------------------------------

    def forget_discovery(self) -> None:
        """The served resources changed (a CRD came, went or changed): build discovery anew."""
        self._discovery_cache.clear()

    def _cached(self, key: str, build) -> web.Response:
        b = self._discovery_cache.get(key)
        if b is None:
            b = self._discovery_cache[key] = dumps(build())
        return web.Response(body=b, content_type=_JSON)

    def _aggregated_requested(self, request: web.Request) -> bool:
        return "as=APIGroupDiscoveryList" in request.headers.get("Accept", "")

    async def api(self, request: web.Request) -> web.Response:
        if self._aggregated_requested(request):
            r = self._cached("agg-legacy", lambda: discovery.aggregated(self.index, legacy=True))
            r.content_type = "application/json"
            r.headers["Content-Type"] = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
            return r
        return self._cached("api", lambda: discovery.api_versions(self.external_address()))

    async def apis(self, request: web.Request) -> web.Response:
        if self._aggregated_requested(request):
            r = self._cached("agg", lambda: discovery.with_extra_aggregated(
                discovery.aggregated(self.index, legacy=False), self.extra_groups + self.aggregated_groups))
            r.headers["Content-Type"] = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
            return r
        return self._cached("apis", lambda: discovery.with_extra_groups(discovery.api_group_list(self.index),
                                                                        self.extra_groups + self.aggregated_groups))

    @property
    def metrics_api(self) -> MetricsAPI:
        """The built-in metrics adapter, which serves the metrics groups no remote APIService takes: made
        on first use, after `nanokube up` has set the provider's sources."""
        if self._metrics_api is None:
            self._metrics_api = MetricsAPI(MetricsProvider(LocalClient(self.rest), self.clock))
            self.extra_groups = self._metrics_api.discovery()
        return self._metrics_api

    def aggregates(self, path: str) -> bool:
        """Whether a remote APIService serves `path`'s group/version (its group's document: any version)."""
        if self.aggregator is None:
            return False
        parts = path.split("/", 4)
        return len(parts) > 2 and self.aggregator.serves(parts[2], parts[3] if len(parts) > 3 and parts[3] else None)

    async def get_raw(self, path: str, query, user: User) -> dict:
        """A loopback client's GET of a path outside the REST stack, answered as over HTTP: a remote
        APIService's (the aggregator asks its server as the proxy would), else the built-in metrics
        adapter's. The document, or the APIError the client would make of the answer."""
        if self.aggregates(path):
            return await self.aggregator.get(path, query, user)
        parts = path.split("/", 3)
        if len(parts) > 2 and parts[1] == "apis" and parts[2] in METRICS_GROUPS:
            return await self.metrics_api.get(path, query)
        raise errors.route_not_found()

    def built_in(self, group: str, version: str) -> bool:
        """Whether the built-in metrics adapter serves `group`/`version`: one of its own that no remote
        APIService takes and whose APIService was not deleted."""
        withdrawn = self._metrics_api.withdrawn if self._metrics_api is not None else ()
        return METRICS_GROUPS.get(group) == version and group not in withdrawn and \
            not (self.aggregator is not None and self.aggregator.serves(group, version))

    def set_aggregated(self, aggregator) -> None:
        """The APIServices changed: rebuild their discovery, in which a remote APIService's group replaces
        the built-in adapter's, and a group whose APIService is deleted is served by none."""
        self.metrics_api.withdrawn = frozenset(g for g, v in METRICS_GROUPS.items() if (g, v) in aggregator.withdrawn)
        self.aggregated_groups = aggregator.discovery_groups()
        self.extra_groups = [(g, rl) for g, rl in self.metrics_api.discovery() if not aggregator.serves(g["name"], None)]
        if (built_in := [gv for gv in METRICS_GROUPS.items() if self.built_in(*gv)]) != self._built_in:
            self._built_in = built_in
            self.on_built_in_change()
        self._discovery_cache.pop("agg", None)
        self._discovery_cache.pop("apis", None)

    # --- resources ------------------------------------------------------

    async def dispatch(self, request: web.Request) -> web.StreamResponse:
        """A request on the API's paths: the application's catch-all route `/{tail}` and the API
        server's own `_serve` call it, so the path is read as that route reads it."""
        path = request.rel_url.path_safe[1:]
        if "%" in path:  # the route's unquoting: path_safe keeps only these two escaped
            path = path.replace("%2F", "/").replace("%25", "%")
        t0 = time.perf_counter()
        labels = ["", "", "", "", "", None, "", ""]  # verb, group, version, resource, sub, warnings, scope, dry run
        code = 500
        resp = None
        recording = warning.start()
        tracking, trackers = latencytrackers.start(request)
        try:
            resp = await self._route(request, path, labels)
            code = resp.status
            if labels[5] and not resp.prepared:
                # a deprecated version's warning comes first, as upstream's handler adds it before the
                # request's own (the body's unknown fields, the kind's warnings)
                later = resp.headers.popall("Warning", [])
                for w in labels[5]:
                    resp.headers.add("Warning", warning.header(w))
                for h in later:
                    resp.headers.add("Warning", h)
            if not resp.prepared:
                warning.limit(resp.headers)
            return resp
        except errors.APIError as e:
            code = e.code
            resp = error_response(e)
            # what was warned before the failure (a deprecated version's, the body's fields), as upstream's
            # recorder wrote those headers as they came
            held = e.headers.get("Warning", "")  # an admission refusal's own warnings, in one header
            for w in dict.fromkeys([*(labels[5] or ()), *warning.recorded()]):
                if warning.header(w) not in held:
                    resp.headers.add("Warning", warning.header(w))
            warning.limit(resp.headers)
            return resp
        except asyncio.CancelledError:
            code = 499
            raise
        except Exception as e:  # a bug must not take the server down
            log.exception("internal error serving %s %s", request.method, request.path)
            code = 500
            request[PANIC] = e  # the audit's Panic stage
            return error_response(errors.internal(str(e)))
        finally:
            warning.stop(recording)
            latencytrackers.stop(tracking)
            verb, g, v, r, s, _, scope, dry = labels
            if verb:  # a watch once it ends (MonitorRequest runs when the handler returns)
                elapsed = time.perf_counter() - t0
                self.metrics.request_count(verb, dry, g, v, r, s, scope, "apiserver", str(code)).inc()
                self.metrics.request_latency(verb, dry, g, v, r, s, scope, "apiserver").observe(elapsed)
                if verb != "WATCH":  # a watch has no latency trackers, so no SLI
                    self.metrics.request_sli(verb, g, v, r, s, scope, "apiserver").observe(elapsed - trackers.excluded())
                # a read's route (a log's is a GET's, a connect's is not), observed once negotiated (`sized`)
                if (verb in _READS or s == "log") and resp is not None:
                    request[_RESPONSE_SIZE] = self.metrics.response_size(verb, g, v, r, s, scope, "apiserver")

    @contextlib.contextmanager
    def long_running(self, labels: list) -> Iterator[None]:
        """RecordLongRunning around a connect (exec, attach, portforward, proxy): counted in
        apiserver_longrunning_requests while it is served, under verb CONNECT (CleanVerb's)."""
        _, group, version, plural, sub, _, scope, _ = labels
        g = self.metrics.longrunning.labels("CONNECT", group, version, plural, sub, scope, "apiserver")
        g.inc()
        try:
            yield
        finally:
            g.dec()

    async def _route(self, request: web.Request, path: str, labels: list) -> web.StreamResponse:
        parts = path.rstrip("/").split("/")
        # go-restful's router trims only trailing slashes: a doubled one leaves an empty segment no route
        # matches (kubernetes#70942), but in a proxy's own path
        tail = next((i for i, p in enumerate(parts) if p == "proxy" and i >= 4), len(parts))
        if "" in parts[:tail] and parts != [""]:
            raise errors.route_not_found()
        parts = [p for p in parts if p]
        if parts and parts[0] == "api":
            group, rest = "", parts[1:]
            if not rest:
                return await self.api(request)
            version, rest = rest[0], rest[1:]
        elif parts and parts[0] == "apis":
            if len(parts) == 1:
                return await self.apis(request)
            group = parts[1]
            version = parts[2] if len(parts) > 2 else None
            if self.aggregator is not None and self.aggregator.serves(group, version):
                return await self.aggregator.serve(request, group, version)
            if len(parts) == 2:
                g = discovery.api_group(self.index, group)
                if g is None:
                    raise errors.route_not_found()
                return json_response(g)
            version, rest = parts[2], parts[3:]
        else:
            raise errors.route_not_found()
        if not rest:
            if version not in self.index.group_versions().get(group, []):
                raise errors.route_not_found()
            return self._cached(f"rl/{group}/{version}", lambda: discovery.api_resource_list(self.index, group, version))
        namespace = None
        if rest[0] == "watch":  # legacy /watch/ paths
            rest = rest[1:]
            forced = not _bool(request.query.get("watch"))
            request = request.clone(rel_url=request.rel_url.update_query(watch="true"))
            request[_FORCED_WATCH] = forced
        if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] not in ("status", "finalize"):
            namespace, rest = rest[1], rest[2:]
        plural = rest[0]
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else ""
        if len(rest) > 3 and (sub != "proxy" or group):  # a proxy's path goes on after it
            raise errors.route_not_found()
        res = self.index.get(group, version, plural)
        if res is None:
            raise errors.route_not_found()
        if not res.strategy.strategic_merge and sub != "scale":  # a custom resource (its Scale is typed):
            # unstructured, which protobuf cannot encode
            request[_UNMARSHALABLE] = _go_type(res, name is None and request.method in ("GET", "DELETE"))
        if sub and sub not in res.subresources:
            raise errors.route_not_found()
        if res.namespaced is False and namespace is not None:
            raise errors.route_not_found()
        q = request.query
        m = request.method
        # an object's own path is a GET whatever its ?watch (RequestInfo makes only a collection's a watch);
        # one object is watched through the legacy /watch/ path or a metadata.name field selector
        watch = _bool(q.get("watch")) and (name is None or _FORCED_WATCH in request)
        if m == "GET":
            verb = "WATCH" if watch else ("GET" if name else "LIST")
        elif m == "DELETE":
            verb = "DELETE" if name else "DELETECOLLECTION"
        else:
            verb = m
        if sub in CONNECT_SUBRESOURCES:
            verb = "CONNECT"  # CleanVerb's, whatever the method (a log's too)
        elif m == "PATCH" and request.content_type == "application/apply-patch+yaml":
            verb = "APPLY"  # cleanVerb: a server-side apply is reported as its own verb
        labels[:5] = verb, group, version, plural, sub
        labels[6] = "resource" if name or m == "POST" else ("namespace" if namespace else "cluster")  # CleanScope
        if "dryRun" in request.query_string:  # cleanDryRun: the distinct values, sorted, or "invalid"
            dry = sorted(set(q.getall("dryRun", [])))
            labels[7] = ",".join(dry) if set(dry) <= {"All"} else "invalid"
        deprecated = res.strategy.deprecation(version)
        if deprecated:
            request[_WARNINGS] = labels[5] = [deprecated]
            self.metrics.deprecated_apis.labels(group, version, plural, sub, "").set(1)  # none is to be removed
        if res.namespaced and namespace is None and (m != "GET" or name):
            if m == "POST" and not name:
                pass
            else:
                raise errors.route_not_found()
        if not sub and _verb(m, name, watch) not in res.verbs:
            if watch and m == "GET" and "list" in res.verbs:  # the list's route takes it, and its storage cannot
                # watch (ListResource's rw == nil): refused once the options are read and judged, naming the resource
                _collection_options(q)
                self.rest._filters(res, version, "", q.get("fieldSelector", ""))  # field labels converted: a 400
                raise errors.method_not_supported(group, plural, "watch")
            raise errors.method_not_allowed()
        if (sub not in _UNNEGOTIATED or group) and _accept(request) == "table" and (
                sub in _NO_TABLES and not group or res.verbs == ("create",)):
            # every handler negotiates its answer's media type first (NegotiateOutputMediaType): an Accept
            # none serves is a 406 before the body is read, let alone written; a Table is served only by an
            # endpoint whose storage converts to one (AllowsMediaTypeTransform), which these do not
            raise _not_acceptable()
        if res.group == "" and res.plural == "bindings" and not name and m == "POST":
            return await self.sub.create_binding(self, request, version, namespace)
        if res.verbs == ("create",) and self.reviews is not None:
            if m != "POST" or name:
                raise errors.method_not_allowed()
            # decoded as any create's body is (types; unknown fields per fieldValidation), as upstream's create handler
            body, opts = await self._create_input(request, res.kind)
            labels[5] = (labels[5] or []) + self.rest._decode_checks(res, version, body, opts)
            return self.render_untabled(request, await self.reviews(res, body, _user(request), namespace), _go_type(res, False))
        if sub in ("exec", "attach", "portforward") and not group:
            with self.long_running(labels):
                return await self.streams.handle(request, namespace, name, sub)
        if sub == "proxy" and not group:
            with self.long_running(labels):
                return await self.proxies.handle(request, plural, namespace, name, rest[3:], path.endswith("/"))
        if sub in ("binding", "eviction", "log", "scale", "token"):
            return await self.sub.handle(self, request, res, version, namespace, name, sub)
        if sub and m not in ("GET", "PUT", "PATCH"):  # a subresource that serves its object is read and written
            raise errors.method_not_allowed()
        if m == "GET":
            if watch:
                return await self._watch(request, res, version, namespace, name, labels)
            if name:
                obj = await self.rest.get(res, version, namespace, name, q.get("resourceVersion", ""))
                if _accept(request) == "object":
                    e = self.rest.cache.get(res.key(namespace, name))
                    if e is not None and e.obj is obj:  # not converted: the cache's JSON of it, as LIST serves
                        return web.Response(body=e.raw + b"\n", content_type=_JSON)
                return self._render_one(request, res, obj, version)
            return await self._list(request, res, version, namespace)
        if m == "POST":
            if name:
                raise errors.method_not_allowed()
            body, opts = await self._create_input(request, res.kind)
            if res.namespaced and not namespace:
                namespace = (body.get("metadata") or {}).get("namespace") if isinstance(body, dict) else None
                if not namespace:
                    raise errors.route_not_found()
            opts.field_manager = opts.field_manager or _field_manager_default(request)
            await self._note_duplicates(request, opts)
            r = await self.rest.create(res, version, namespace, body, opts)
            return self._render_write(request, res, r, version)
        if m == "PUT":
            if not name:
                raise errors.method_not_allowed()
            body, opts = await self._update_input(request, res.kind)
            opts.field_manager = opts.field_manager or _field_manager_default(request)
            await self._note_duplicates(request, opts)
            r = await self.rest.update(res, version, namespace, name, body, opts, subresource=sub)
            return self._render_write(request, res, r, version)
        if m == "PATCH":
            if not name:
                raise errors.method_not_allowed()
            ctype = self._patch_media(request, res)
            raw = await self._raw(request)
            opts = self._write_opts(request)  # after the media type and the body, as upstream's patch handler
            if ctype != APPLY_PATCH:
                opts.field_manager = opts.field_manager or _field_manager_default(request)
            dup_warnings = await strict.patch_duplicates(raw, ctype, opts)
            r = await self.rest.patch(res, version, namespace, name, ctype, raw, opts, subresource=sub,
                                      duplicates=dup_warnings)
            r.warnings[:0] = dup_warnings
            return self._render_write(request, res, r, version)
        if m == "DELETE":
            listing = None if name else _collection_options(q)
            raw = await self._raw(request)
            body = await _decode_body(raw, _content_type(request)) if raw.strip() else {}
            delete_body_kind_errors(body)
            # DeleteOptions come from the body when there is one, else from the query: never both
            query = {} if raw.strip() else q
            options = delete_options(query, body, q.getall("dryRun", []) if query else [])
            # DeleteOptions has no fieldManager or fieldValidation: such query parameters are ignored
            opts = WriteOptions(dry_run=bool(options.get("dryRun")), user=_user(request))
            if name:
                r = await self.rest.delete(res, version, namespace, name, options, opts)
                if r.obj.get("kind") == "Status" or _accept(request) == "object":  # (a Status is never transformed)
                    return json_response(r.obj, r.code)
                return self._render_one(request, res, r.obj, version, r.code, r.internal)
            meta: dict = {}
            deleted = await self.rest.delete_collection(
                res, version, namespace, options, opts, label_selector=q.get("labelSelector", ""),
                field_selector=q.get("fieldSelector", ""), list_meta=meta, **listing)
            if _accept(request) != "object":
                return self._render_list(request, res, deleted, meta, version)
            if res.strategy.unstructured:  # an UnstructuredList's keys sorted, as Go writes a map's
                return json_response({"apiVersion": res.api_version(version), "items": deleted,
                                      "kind": res.list_kind, "metadata": dict(sorted(meta.items()))})
            return json_response({"kind": res.list_kind, "apiVersion": res.api_version(version),
                                  "metadata": meta, "items": deleted})
        raise errors.method_not_allowed()

    def _write_opts(self, request: web.Request) -> WriteOptions:
        """The write's options, checked. They are a function of the method, the raw query and a patch's
        media type, which a client sends alike request after request: those that pass are worked out
        once per such triple (~2% of the scheduler's status patch); a request's user is its own."""
        method = request.method
        ctype = request.headers.get("Content-Type", "") if method == "PATCH" else None
        key = (method, request.rel_url.raw_query_string, ctype)
        known = _WRITE_OPTS.get(key)
        if known is None:
            q = request.query
            dry = q.getall("dryRun", [])
            fv = q.get("fieldValidation", "")
            patch_type = ctype.split(";")[0].strip() if ctype is not None else None
            problems = write_options_errors(q.get("fieldManager", ""), dry, fv, patch_type, q.get("force"))
            if problems:
                raise options_invalid(_OPTIONS_KIND.get(method, "CreateOptions"), problems)
            known = ("All" in dry, q.get("fieldManager", ""), fv or "Warn", _bool(q.get("force")))
            if len(_WRITE_OPTS) >= _WRITE_OPTS_LIMIT:
                _WRITE_OPTS.clear()
            _WRITE_OPTS[key] = known
        return WriteOptions(*known, user=_user(request))

    async def _raw(self, request: web.Request) -> bytes:
        """The whole body: `read(n)` returns what has arrived so far, so read until EOF."""
        if request.content_length and request.content_length > MAX_BODY:
            raise errors.too_large()
        await expect.continued(request)
        chunks, size = [], 0
        content = request.content
        while size <= MAX_BODY:
            try:
                chunk = await content.read(MAX_BODY + 1 - size)
            except (HttpProcessingError, RequestPayloadError) as e:  # e.g. a gzip body that does not decode
                # the rest of the body cannot be read past either: the connection ends with this answer, which
                # says so (it was left open, to fail unanswered on the next request with a logged traceback)
                request.protocol.close()  # (closes once this request is answered)
                content.feed_eof()  # (nothing more to read: not drained after the answer, to fail again)
                error = errors.bad_request("the request body could not be read: " + " ".join(str(e).split()))
                error.headers["Connection"] = "close"
                raise error from None
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if content.at_eof():  # all of it has arrived (the usual case): no read just to learn so
                break
        if size > MAX_BODY:
            raise errors.too_large()
        raw = request[REQUEST_BODY] = _content_decoded(request, b"".join(chunks))  # for the audit's Request level
        return raw

    @staticmethod
    def _patch_media(request: web.Request, res: Resource) -> str:
        """The patch's media type, judged first as the patch handler does: one the resource does not
        take is a 415 listing those it does (a custom resource takes no strategic merge patch)."""
        ctype = request.headers.get("Content-Type", "").split(";")[0].strip()
        if ctype == "application/strategic-merge-patch+json" and not res.strategy.strategic_merge:
            raise errors.APIError(415, "UnsupportedMediaType", "the body of the request was in an unknown format - accepted "
                                  "media types include: application/json-patch+json, application/merge-patch+json, "
                                  "application/apply-patch+yaml")
        if ctype not in PATCH_TYPES:
            raise errors.APIError(415, "UnsupportedMediaType",
                                  f'the body of the request was in an unknown format - accepted media types include: {", ".join(PATCH_TYPES)}')
        return ctype

    async def _create_input(self, request: web.Request, kind: str = "") -> tuple[Any, WriteOptions]:
        """A create's body and options in create.go's order: the media type (415), the body's size
        (413), the query options (400/422), then the body decoded."""
        _check_media(_content_type(request))
        raw = await self._raw(request)
        opts = self._write_opts(request)
        return await self._decoded(request, raw, kind), opts

    async def _update_input(self, request: web.Request, kind: str = "") -> tuple[Any, WriteOptions]:
        """An update's, in update.go's order: the body's size (413), the query options, then the
        media type (415) as the body is decoded."""
        raw = await self._raw(request)
        opts = self._write_opts(request)
        return await self._decoded(request, raw, kind), opts

    async def _decoded(self, request: web.Request, raw: bytes, kind: str = "") -> Any:
        body = await _decode_body(raw, _content_type(request), kind)
        if type(body) is dict:
            request[_DUPLICATES] = (raw, body)
            if self.rest.audit is not None:  # what the body names, before the write fills in its own
                request[AUDIT_ASKED] = audit_asked(body)
        return body

    async def _note_duplicates(self, request: web.Request, opts: WriteOptions) -> None:
        """The strict decoder's texts for the keys the body repeats, onto `opts` with a JSON body itself:
        the write's decoding reports them with its unknown fields, one error (Strict) or warnings (Warn)."""
        raw, body = request.get(_DUPLICATES) or (b"", None)
        if not raw or opts.field_validation == "Ignore":
            return
        ctype = _content_type(request)
        if ctype in ("application/yaml", "application/x-yaml"):  # YAMLToJSONStrict's, JSON text or not
            texts = await serializer.off_loop(serializer.yaml_duplicates, raw)
        else:  # called before the write touches the body, so a JSON body is still what orjson decoded
            texts = await serializer.off_loop(serializer.duplicates, raw, False, body if ctype == _JSON else None)
        if texts and texts[0].startswith("line "):  # YAMLToJSONStrict's one error: go-yaml's TypeError of them all
            texts = ["yaml: unmarshal errors:" + "".join(f"\n  {t}" for t in texts)]
        opts.duplicates = tuple(texts)
        opts.body = raw if ctype == _JSON else b""

    def _render_one(self, request: web.Request, res: Resource, obj: dict, version: str, code: int = 200,
                    internal: dict | None = None) -> web.Response:
        """`internal`: a write's object as stored, whose cells its Table shows; a read's is the cache's."""
        kind = _accept(request)
        if kind == "table":
            include = _include_object(request.query)
            if internal is None:
                entry = self.rest.cache.get(res.key(obj["metadata"].get("namespace"), obj["metadata"]["name"]))
                internal = entry.obj if entry else obj
            t = tables.table(res, [(obj, internal)], self.clock, include,
                             {"resourceVersion": obj["metadata"].get("resourceVersion", "")}, meta_version=_meta_version(request),
                             version=version)
            return json_response(t, code)
        if kind == "partial":
            return json_response(tables.partial_metadata(obj, _meta_version(request)), code)
        if kind == "partiallist":
            raise _wrong_partial(res, False)
        return json_response(obj, code)

    def render_scale(self, request: web.Request, res: Resource, scale: dict, version: str) -> web.Response:
        """`res`'s Scale as JSON, as PartialObjectMetadata, or as a Table when one is asked for: printScale's
        of a built-in workload's, a CRD's own columns read on the Scale (its scale scope keeps the custom
        resource's table convertor)."""
        kind = _accept(request)
        if kind == "partial":
            return json_response(tables.partial_metadata(scale, _meta_version(request)))
        if kind == "partiallist":
            raise errors.APIError(406, "NotAcceptable", "you requested PartialObjectMetadataList, but the requested "
                                  "object is not a list (*autoscaling.Scale)")
        if kind != "table":
            return json_response(scale)
        meta = {"resourceVersion": scale["metadata"].get("resourceVersion", "")}
        return json_response(tables.table(res, [(scale, scale)], self.clock, _include_object(request.query), meta,
                                          cols=res.strategy.columns_at(version) or tables.SCALE_COLUMNS,
                                          meta_version=_meta_version(request)))

    def render_untabled(self, request: web.Request, obj: dict, go_type: str, code: int = 201) -> web.Response:
        """The answer of an endpoint with no Table (a review, a TokenRequest): as it is, or as the
        PartialObjectMetadata asked for; PartialObjectMetadataList of it is asPartialObjectMetadataList's 406."""
        kind = _accept(request)
        if kind == "partial":
            return json_response(tables.partial_metadata(obj, _meta_version(request)), code)
        if kind == "partiallist":
            raise errors.APIError(406, "NotAcceptable", "you requested PartialObjectMetadataList, but the requested "
                                  f"object is not a list ({go_type})")
        return json_response(obj, code)

    def _render_write(self, request: web.Request, res: Resource, r, version: str) -> web.Response:
        """A write's object, converted as a read's is when the Accept header asks for a Table or
        PartialObjectMetadata (transformResponseObject serves both)."""
        if _accept(request) != "object":
            resp = self._render_one(request, res, r.obj, version, r.code, r.internal)
        else:
            body = served_json(*r.stored) if r.stored is not None else None
            resp = json_response(r.obj, r.code) if body is None else web.Response(body=body, status=r.code,
                                                                                   content_type=_JSON)
        request[RESPONSE_OBJECT] = r.obj
        for w in warning.texts(r.warnings):
            resp.headers.add("Warning", warning.header(w))
        return resp

    async def _list(self, request: web.Request, res: Resource, version: str, namespace: str | None) -> web.Response:
        q = request.query
        integer(q, "timeoutSeconds")  # decoded with the list's options (before limit, in ListOptions' order): a 400
        limit = max(integer(q, "limit") or 0, 0)  # (a negative limit is none, as upstream's storage reads it)
        kind = _accept(request)
        encoded: list[bytes | None] = []
        items, meta = await self.rest.list(
            res, version, namespace, label_selector=q.get("labelSelector", ""), field_selector=q.get("fieldSelector", ""),
            limit=limit, continue_=q.get("continue", ""), resource_version=q.get("resourceVersion", ""),
            resource_version_match=q.get("resourceVersionMatch", ""), send_initial_events=_maybe_bool(q, "sendInitialEvents"),
            encoded=encoded if kind == "object" else None)
        if kind != "object":
            return self._render_list(request, res, items, meta, version)
        accept = request.headers.get("Accept", "")
        if "protobuf" in accept and _negotiate(accept, request.get(_UNMARSHALABLE, ""))[0] == _PROTOBUF:
            # encoded from the objects (no JSON to parse again), a long list in a thread: the loop serves
            # other requests meanwhile, as it does while a JoinedPayload is written
            listed = {"kind": res.list_kind, "apiVersion": res.api_version(version), "metadata": meta, "items": items}
            encode = protobuf_encode.encode
            large = len(items) > 100 or sum(len(raw) for raw in encoded if raw is not None) >= serializer.OFF_LOOP
            data = await asyncio.to_thread(encode, listed) if large else encode(listed)
            return web.Response(body=data, content_type=_PROTOBUF)
        if None in encoded:  # items converted for the version asked for have no cached JSON
            encoded = [raw if raw is not None else dumps(o) for raw, o in zip(encoded, items)]
        if res.strategy.unstructured:  # an UnstructuredList: its keys sorted as Go writes a map's, items among them
            head = dumps({"apiVersion": res.api_version(version)})[:-1] + b',"items":['
            tail = b"]," + dumps({"kind": res.list_kind, "metadata": dict(sorted(meta.items()))})[1:] + b"\n"
            return web.Response(body=JoinedPayload(head, encoded, tail), content_type=_JSON)
        head = dumps({"kind": res.list_kind, "apiVersion": res.api_version(version), "metadata": meta})
        return web.Response(body=JoinedPayload(head[:-1] + b',"items":[', encoded, b"]}\n"), content_type=_JSON)

    def _render_list(self, request: web.Request, res: Resource, items: list, meta: dict, version: str) -> web.Response:
        """A list converted to the Table or PartialObjectMetadataList asked for (a list, or a DeleteCollection's)."""
        kind = _accept(request)
        if kind == "table":
            pairs = []
            for o in items:
                e = self.rest.cache.get(res.key(o["metadata"].get("namespace"), o["metadata"]["name"]))
                pairs.append((o, e.obj if e else o))
            return json_response(tables.table(res, pairs, self.clock, _include_object(request.query), meta,
                                              meta_version=_meta_version(request), version=version))
        if kind == "partial":
            raise _wrong_partial(res, True)
        mv = _meta_version(request)
        return json_response({"kind": "PartialObjectMetadataList", "apiVersion": f"meta.k8s.io/{mv}", "metadata": meta,
                              "items": [tables.partial_metadata(o, mv) for o in items]})

    def _direct(self, translate, batch: _Batch, sent):
        """A JSON watch's `Watcher.direct`: each event as one pre-framed chunk (`encode_chunk`, shared
        by every watcher of the event) written to the connection, the turn's later ones together
        (`_Batches`); False, so the event is queued for the watch's task and its flow control, while
        the connection holds more unsent than its transport's high-water mark (asyncio's flow control:
        64 KiB, or 512 KiB with TLS), past which the watch's task would wait for the client too: then its
        events wait in its queue as references to the cache's shared ones, as upstream's cacheWatcher
        holds a channel of events with the kernel's socket buffer below. (A client that reads nothing
        held 1 MiB here before, as direct writes went on to that.)"""
        cache = self.rest.cache
        transport = batch.transport
        high = transport.get_write_buffer_limits()[1]
        batches = self._batches

        def direct(cev) -> bool:
            if transport.is_closing() or transport.get_write_buffer_size() > high:
                return False
            out = translate(cev)
            if out is not None:
                chunk = cache.encode_chunk(*out)
                if len(chunk) > _EVENT_SLICE:
                    return False
                batches.add(batch, chunk)
                sent.add(len(chunk) - chunk.index(b"\r\n") - 4)  # the event's line, without the chunk's framing
            return True

        return direct

    async def _watch(self, request: web.Request, res: Resource, version: str, namespace: str | None, name: str | None,
                     labels: list) -> web.StreamResponse:
        q = request.query
        kind, media = _watch_accept(request)
        pb = media == _PROTOBUF

        def event(typ: str, obj: dict) -> bytes:
            return protobuf_encode.watch_event(typ, obj) if pb else dumps({"type": typ, "object": obj}) + b"\n"

        ctype = f"{_PROTOBUF};stream=watch" if pb else _JSON
        ws = is_websocket_watch(request)

        def respond() -> web.StreamResponse:
            if ws:  # each event one message (HandleWS)
                return WatchSocket(request, pb)
            return web.StreamResponse(status=200, headers={"Content-Type": ctype, "Transfer-Encoding": "chunked"})

        timeout = watch_timeout(integer(q, "timeoutSeconds"), self.min_request_timeout)
        integer(q, "limit")  # (decoded with the other ListOptions, though a watch reads it not: a 400 if it does not parse)
        field_selector = q.get("fieldSelector", "")
        try:
            stream = await self.rest.watch(
                res, version, namespace, resource_version=q.get("resourceVersion", ""),
                label_selector=q.get("labelSelector", ""), field_selector=field_selector,
                send_initial_events=_maybe_bool(q, "sendInitialEvents"), allow_bookmarks=_bool(q.get("allowWatchBookmarks")),
                timeout=timeout, name=name, resource_version_match=q.get("resourceVersionMatch", ""), continue_=q.get("continue", ""),
                forced=request.get(_FORCED_WATCH, False))
        except errors.APIError as e:
            if e.code not in (410, 504):
                raise
            if kind == "table":  # the Table's options are judged before the watch is served, as its list options
                _include_object(q)
            # as the cacher does: an expired resourceVersion, or one a watch-list's cache did not reach in
            # time, is a watch that sends one ERROR event and ends
            gone = respond()
            await gone.prepare(request)
            await gone.write(event("ERROR", e.status()))
            await gone.write_eof()
            return gone
        try:
            include = _include_object(q) if kind == "table" else ""
        except errors.APIError:
            await stream.aclose()
            raise
        mv = _meta_version(request)
        resp = respond()
        for w in request.get(_WARNINGS, ()):  # a watch of a deprecated version is warned too, before it streams
            resp.headers.add("Warning", warning.header(w))
        await resp.prepare(request)
        verb, group, version, plural, sub, _, scope, _ = labels  # RecordLongRunning's: the request's own labels
        g = self.metrics.longrunning.labels(verb, group, version, plural, sub, scope, "apiserver")
        g.inc()
        sent = self.metrics.watch_sent(group, version, plural)
        deadline = self.clock.monotonic() + timeout
        columns_sent = False
        transport = request.transport
        batch = _Batch(transport)
        if ws:
            resp.on_gone = lambda: stream.watcher.queue.put_nowait(None)
        elif kind == "object" and not pb and stream.translate is not None and request.version == HttpVersion11 and transport:
            stream.watcher.direct = self._direct(stream.translate, batch, sent)

        async def emit(ev: tuple[str, dict]) -> None:
            nonlocal columns_sent
            typ, obj = ev
            if typ == "BOOKMARK" and kind != "table":  # transformed as any event's object: a metadata watch's is PartialObjectMetadata
                partial = kind in ("partial", "partiallist")
                line = event(typ, tables.partial_metadata(obj, mv) if partial else obj)
            elif kind == "table":  # a bookmark's Table too (asTable of its object): one row, the bookmark's metadata
                # the cells read the event's stored object, as a list's (not the served version, nor a newer state)
                stored = (typ != "BOOKMARK" and stream.watcher.stored) or obj
                table = tables.table(res, [(obj, stored)], self.clock, include,
                                     {"resourceVersion": obj["metadata"].get("resourceVersion", "")}, not columns_sent,
                                     meta_version=mv, version=version)
                columns_sent = True
                line = dumps({"type": typ, "object": table}) + b"\n"
            elif kind in ("partial", "partiallist"):
                line = event(typ, tables.partial_metadata(obj, mv))
            elif pb:
                line = event(typ, obj)
            else:
                line = self.rest.cache.encode_event(typ, obj)
            batch.flush()  # events handed to it directly and still held go first
            if len(line) > _EVENT_SLICE and not ws:
                await _write_sliced(resp, line)
            else:
                await resp.write(line)
            sent.add(len(line))

        ender = asyncio.get_running_loop().create_task(self._end_watch(stream.watcher, timeout, request.protocol, transport))
        try:
            try:
                while self.clock.monotonic() < deadline:
                    try:
                        ev = await stream.__anext__()
                    except StopAsyncIteration:
                        break
                    if self.clock.monotonic() >= deadline:  # taken past it (queued before the end marker): not sent
                        break
                    await emit(ev)
            except (ConnectionResetError, asyncio.CancelledError):
                pass
            except Exception as e:  # the stream is open: end it with an ERROR event, as upstream does
                if not isinstance(e, errors.APIError):
                    log.exception("watch of %s failed", request.path)
                    e = errors.internal(str(e))
                try:
                    batch.flush()
                    await resp.write(event("ERROR", e.status()))
                except (ConnectionResetError, RuntimeError):
                    pass
            finally:
                stream.watcher.direct = None
                await stream.aclose()
            try:
                batch.flush()
                await resp.write_eof()
            except (ConnectionResetError, RuntimeError):
                pass
        finally:  # the request runs, and its deadline holds, until its response has ended; the gauge
            # falls even when the handler is cancelled while its stream closes
            ender.cancel()
            g.dec()
        return resp

    async def _end_watch(self, w, seconds: float, protocol, transport) -> None:
        """Ends watch `w` once its `seconds` have passed on the injected clock (serveWatch's timeout):
        the end marker wakes its task, whose loop then sees the deadline passed. A watch ended before
        (as unresponsive: WatchCache._blocked_out, or its CRD's storage rebuilt) ends likewise, after
        what its connection was sent, which a client that reads, however slowly, gets, and then the
        stream's last chunk (upstream's cacheWatcher closes its result channel, and the handler ends
        the response). From the deadline until the response has ended (the task cancels this then),
        a connection whose client is not taking what it was sent (asyncio paused its writes: the
        task waits, or would, in a write that may never end, its final chunk's too) is aborted, as
        any answer's not taken by its request's deadline (APIServer._written), instead of keeping
        it, its task and its buffers for as long as the client keeps it open."""
        await self.clock.sleep(seconds)
        w.queue.put_nowait(None)
        while not protocol.writing_paused:
            await self.clock.sleep(_ENDING_CHECK)
        if transport is not None:
            transport.abort()


class _Batch:
    """A direct watch's connection, and the events handed to it in this loop turn after its first."""

    __slots__ = ("transport", "chunks", "size", "held")

    def __init__(self, transport) -> None:
        self.transport = transport
        self.chunks: list[bytes] = []
        self.size = 0
        #: an event went out this turn: the turn's next ones wait for its end (`_Batches`)
        self.held = False

    def write(self, data: bytes) -> None:
        if not self.transport.is_closing():
            self.transport.write(data)

    def flush(self) -> None:
        """The held chunks in one write: one `send` (and TLS records of up to 16 KiB) for a burst."""
        chunks = self.chunks
        if chunks:
            data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
            chunks.clear()
            self.size = 0
            self.write(data)


class _Batches:
    """Coalesces the direct watches' writes per loop turn, as upstream's WatchServer flushes only
    once its channel is empty: a watch's first event of a turn is written at once (a lone update
    reaches its watchers before its writer is answered, as before), the events that follow in the
    same turn (a group commit of many creates) are held and written together by one callback at
    the start of the next turn (or once _HELD_MAX bytes are held), instead of a TLS record and a
    `send` per event and watch. A watch's task writes what is held before anything of its own (an
    event it dequeued, a bookmark, an error, the final chunk), so order is kept."""

    def __init__(self) -> None:
        self._held: list[_Batch] = []

    def add(self, batch: _Batch, chunk: bytes) -> None:
        if batch.held:
            batch.chunks.append(chunk)
            batch.size += len(chunk)
            if batch.size >= _HELD_MAX:
                batch.flush()
            return
        if not self._held:
            asyncio.get_running_loop().call_soon(self._flush)
        self._held.append(batch)
        batch.held = True
        batch.write(chunk)

    def _flush(self) -> None:
        held, self._held = self._held, []
        for batch in held:
            batch.held = False
            batch.flush()


_PROTOBUF = "application/vnd.kubernetes.protobuf"
_MEDIA_TYPES = "application/json, application/yaml, application/vnd.kubernetes.protobuf"
_BODY_TYPES = frozenset({_JSON, "application/yaml", "application/x-yaml", _PROTOBUF})


def _body_size(resp: web.StreamResponse) -> int | None:
    """The bytes of a response's body (a list's JoinedPayload knows its own); None for a stream."""
    size = resp.content_length
    if size is None and isinstance(resp, web.Response) and isinstance(resp.body, Payload):
        size = resp.body.size
    return size


async def _write_sliced(resp: web.StreamResponse, line: bytes) -> None:
    """A large watch event's line (its JSON is encoded once for every watcher), written in slices
    with the loop free between them: its TLS encryption and copies cost each watcher ~30 ms at
    3 MB, and forty watchers woken by one event held the loop for 1.2 s in one turn."""
    view = memoryview(line)
    for i in range(0, len(line), _EVENT_SLICE):
        await resp.write(view[i:i + _EVENT_SLICE])
        await asyncio.sleep(0)


class JoinedPayload(Payload):
    """A list's body, `head`, its items' cached JSON separated by commas, `tail`, kept as those
    pieces and written in slices of about 256 KiB, each made by one join: no copy of the whole body
    is made, no Python step is taken per item, and the client reads the first slice while the
    server encrypts the next (a 10,000-pod list is about 40 MB). Each slice is copied three times
    on its way out (the join, the TLS memory BIO's ciphertext, the bytes read out of it): at 1 MiB
    the server spent 6-10% more CPU per list and per paginated walk."""

    SLICE = 1 << 18

    def __init__(self, head: bytes, items: list[bytes], tail: bytes) -> None:
        super().__init__(items, content_type=_JSON)
        self._head, self._tail = head, tail
        self._size = len(head) + sum(map(len, items)) + max(len(items) - 1, 0) + len(tail)

    def joined(self) -> bytes:
        return self._head + b",".join(self._value) + self._tail

    def decode(self, encoding: str = "utf-8", errors: str = "strict") -> str:
        return self.joined().decode(encoding, errors)

    def slices(self) -> Iterator[bytes]:
        """The body in slices of about SLICE bytes, each one join of its items."""
        items = self._value
        if not items:
            yield self._head + self._tail
            return
        n = len(items)
        step = max(1, n * self.SLICE // self._size)  # items per slice
        for i in range(0, n, step):
            group = items[i:i + step]
            if i:
                group.insert(0, b"")  # the comma before the slice's first item
            else:
                group[0] = self._head + group[0]
            if i + step >= n:
                group[-1] += self._tail
            yield b",".join(group)

    async def write(self, writer) -> None:
        for piece in self.slices():
            await writer.write(piece)


def _verb(method: str, name: str | None, watch: bool) -> str:
    """The API verb of a request on a resource (not a subresource)."""
    if method in ("GET", "HEAD"):
        return "watch" if watch else ("get" if name else "list")
    if method == "DELETE":
        return "delete" if name else "deletecollection"
    return {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(method, method.lower())


#: the Content-Encodings a body is decompressed from (the server reads bodies as sent: aiohttp's own
#: decompression failed in its transport, so a body the handler did not read, answered before it was, was then
#: drained into an error that dropped the kept-alive connection and logged a traceback)
_COMPRESSED = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


def _content_decoded(request: web.Request, raw: bytes) -> bytes:
    """The body decompressed as its Content-Encoding says (gzip, deflate), at most MAX_BODY bytes of it; a
    body that does not decompress is a 400."""
    coding = request.headers.get("Content-Encoding", "").strip().lower()
    wbits = _COMPRESSED.get(coding)
    if wbits is None or not raw:
        return raw
    inflate = zlib.decompressobj(wbits)
    try:
        out = inflate.decompress(raw, MAX_BODY + 1)
    except zlib.error:
        out = None
    if out is None or not inflate.eof and not inflate.unconsumed_tail:
        raise errors.bad_request(f"the request body could not be read: Can not decode content-encoding: {coding}")
    if len(out) > MAX_BODY or inflate.unconsumed_tail:
        raise errors.too_large()
    return out


def _content_type(request: web.Request) -> str:
    """The body's media type; none at all is JSON, the first the server supports, as upstream's
    NegotiateInputSerializerForMediaType (the `kubernetes` Python client sends no Content-Type)."""
    return (request.headers.get("Content-Type") or _JSON).split(";")[0].strip().lower()


async def _decode_body(raw: bytes, ctype: str, kind: str = "") -> Any:
    """A request body in any media type kube-apiserver accepts, as its JSON form; `kind`: the one a
    create or update decodes into, which its error for JSON that does not parse names."""
    try:
        if ctype in ("application/yaml", "application/x-yaml"):
            return await serializer.off_loop(serializer.loads_yaml, raw)
        if ctype == _JSON:
            return await serializer.off_loop_json(raw, lenient=True)
        if ctype == _PROTOBUF:
            return protobuf.decode(raw)
    except (orjson.JSONDecodeError, yaml.YAMLError, protobuf.ProtobufError) as e:
        go = kind and ctype == _JSON and gojson.unrecognized(kind, raw)
        raise errors.bad_request(go or f"error decoding the body: {e}") from None
    _check_media(ctype)


def _check_media(ctype: str) -> None:
    """NegotiateInputSerializer: a body media type the server does not decode is a 415."""
    if ctype not in _BODY_TYPES:
        raise errors.APIError(415, "UnsupportedMediaType",
                              f"the body of the request was in an unknown format - accepted media types include: {_MEDIA_TYPES}")
