"""API Priority and Fairness for requests over HTTP (the in-process
components' loopback calls are not limited, as upstream's loopback
privileged user is exempt).

Each request is classified by the FlowSchemas (lowest matchingPrecedence
first, then name) into a PriorityLevelConfiguration and answered with
`X-Kubernetes-PF-FlowSchema-UID` and `X-Kubernetes-PF-PriorityLevel-UID`.
Exempt levels run at once. A Limited level has a share of the server's
concurrency limit (600 seats, kube-apiserver's default max-requests-inflight
400 + max-mutating-requests-inflight 200) in proportion to its
nominalConcurrencyShares; beyond that a request waits in the level's queue
(first come, first served: no shuffle sharding across flows) up to
queues x queueLengthLimit waiting requests, or is refused with 429 when
the level's limitResponse is Reject or the queue is full. Long-running
requests other than watches (exec, attach, port-forward, proxy, logs) are
neither classified nor counted; a watch waits for a seat as any request
does and holds it until it is initialized (its head written).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Callable
from typing import Any, NamedTuple

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.core import Metric

from ..machinery import errors
from ..machinery.responses import error_response
from .auth.authorizer import USER, Attributes, request_attributes
from .latencytrackers import APF_WAIT
from .metrics import Family, InflightWatermark

SERVER_CONCURRENCY = 600
#: the matched FlowSchema's and level's PF headers, for a handler that streams its answer (the
#: aggregator's proxy: its head is written before `serve` sees it) to put on it
PF_HEADERS = web.RequestKey("nanokube.apf_headers", dict)
#: a watch's initialization signal, for a handler that hands it on (the aggregator's proxy: upstream's
#: RequestDelegated lets the watch's seat go before the extension server is asked)
DELEGATED = web.RequestKey("nanokube.apf_delegated", object)
#: apiserver_flowcontrol_request_wait_duration_seconds' buckets (upstream's queue wait histogram)
_WAIT_BUCKETS = (0, 0.005, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30)
#: nonMutatingRequestVerbs: a request of any other verb is a mutating one to the inflight watermark
_READ_ONLY = frozenset(("get", "list", "watch"))
#: kube-apiserver's LongRunningFunc: BasicLongRunningRequestCheck of these verbs and subresources
_LONG_RUNNING_VERBS = frozenset(("watch", "proxy"))
_LONG_RUNNING = frozenset(("attach", "exec", "proxy", "log", "portforward"))


def _has(values: list | None, want: str) -> bool:
    return bool(values) and ("*" in values or want in values)


def _subject_matches(s: dict, user) -> bool:
    kind = s.get("kind")
    if kind == "User":
        return (s.get("user") or {}).get("name") in ("*", user.name)
    if kind == "Group":
        name = (s.get("group") or {}).get("name")
        return name == "*" or name in user.groups
    if kind == "ServiceAccount":
        sa = s.get("serviceAccount") or {}
        prefix = f"system:serviceaccount:{sa.get('namespace', '')}:"
        return user.name.startswith(prefix) and sa.get("name") in ("*", user.name[len(prefix):])
    return False


def _resource_rule_matches(r: dict, a: Attributes) -> bool:
    resource = f"{a.resource}/{a.subresource}" if a.subresource else a.resource
    if not (_has(r.get("verbs"), a.verb) and _has(r.get("apiGroups"), a.group) and _has(r.get("resources"), resource)):
        return False
    return _has(r.get("namespaces"), a.namespace) if a.namespace else bool(r.get("clusterScope"))


def _url_matches(urls: list | None, path: str) -> bool:
    for u in urls or ():
        if u == "*" or u == path or (u.endswith("/*") and (path == u[:-2] or path.startswith(u[:-1]))):
            return True
    return False


def matches(schema: dict, user, a: Attributes) -> bool:
    for rule in (schema.get("spec") or {}).get("rules") or []:
        if not any(_subject_matches(s, user) for s in rule.get("subjects") or []):
            continue
        if a.resource_request:
            if any(_resource_rule_matches(r, a) for r in rule.get("resourceRules") or []):
                return True
        elif any(_has(r.get("verbs"), a.verb) and _url_matches(r.get("nonResourceURLs"), a.path)
                 for r in rule.get("nonResourceRules") or []):
            return True
    return False


def long_running(a: Attributes) -> bool:
    """Whether kube-apiserver serves the request as long-running: by its verb or its subresource alone
    (a pods/log read is one whether it follows or not; so is an aggregated API's exec, never its console)."""
    return a.verb in _LONG_RUNNING_VERBS or a.resource_request and a.subresource in _LONG_RUNNING


_UNKNOWN = object()
_CLASSIFIED_MAX = 4096


class _Route(NamedTuple):
    """A (FlowSchema, level) pair's metric labels, response headers and metric children."""

    fs: dict
    pl: dict
    labels: tuple[str, str]
    headers: dict[str, str]
    limited: bool
    dispatched: Any
    executing: Any
    inqueue: Any
    #: the queue wait's histogram series of a request that executes (execute="true")
    waited: Any


class PriorityLevel:
    """The seats and the waiting line of one Limited priority level."""

    def __init__(self, seats: int, max_waiting: int) -> None:
        self.seats, self.max_waiting = seats, max_waiting
        self.executing = 0
        self.waiting: deque[asyncio.Future] = deque()

    async def acquire(self, inqueue=None) -> bool:
        """A seat, after a wait in the queue where none is free; `inqueue`: the gauge a waiting
        request is counted in (apiserver_flowcontrol_current_inqueue_requests)."""
        if self.executing < self.seats:
            self.executing += 1
            return True
        if len(self.waiting) >= self.max_waiting:
            return False
        fut = asyncio.get_running_loop().create_future()
        self.waiting.append(fut)
        if inqueue is not None:
            inqueue.inc()
        try:
            await fut
        except asyncio.CancelledError:
            if fut in self.waiting:
                self.waiting.remove(fut)
            elif fut.done() and not fut.cancelled():
                self.release()  # the seat handed over while we were cancelled
            raise
        finally:
            if inqueue is not None:
                inqueue.dec()
        return True

    def release(self) -> None:
        while self.waiting:
            fut = self.waiting.popleft()
            if not fut.done():
                fut.set_result(None)  # the seat passes on; executing stays
                return
        self.executing -= 1


class FlowControl:
    """`middleware` classifies and limits, from the FlowSchema and
    PriorityLevelConfiguration informers it is given (the status loop's)."""

    def __init__(self, schemas, levels, server_concurrency: int = SERVER_CONCURRENCY,
                 inflight: InflightWatermark | None = None, refused=None) -> None:
        self.schemas, self.levels = schemas, levels
        #: the server's request metrics (APIMetrics.refused), told of each request refused with 429
        self.refused = refused
        #: the requests executing, by kind (apiserver_current_inflight_requests)
        self.inflight = inflight or InflightWatermark()
        self.server_concurrency = server_concurrency
        self._state: dict[str, PriorityLevel] = {}
        #: (FlowSchema, its level) by precedence, rebuilt after any change
        self._ordered: list[tuple[dict, dict]] | None = None
        self.registry = CollectorRegistry()
        self.dispatched = Family("counter", "apiserver_flowcontrol_dispatched_requests_total",
                                 "[BETA] Number of requests executed by API Priority and Fairness subsystem",
                                 ["flow_schema", "priority_level"], self.registry)
        self.rejected = Family("counter", "apiserver_flowcontrol_rejected_requests_total",
                               "[BETA] Number of requests rejected by API Priority and Fairness subsystem",
                               ["flow_schema", "priority_level", "reason"], self.registry)
        self.executing = Family("gauge", "apiserver_flowcontrol_current_executing_requests",
                                "[BETA] Number of requests in initial (for a WATCH) or any (for a non-WATCH) execution "
                                "stage in the API Priority and Fairness subsystem",
                                ["flow_schema", "priority_level"], self.registry)
        self.registry.register(_ExecutingSeats(self.executing))
        self.inqueue = Family("gauge", "apiserver_flowcontrol_current_inqueue_requests",
                              "[BETA] Number of requests currently pending in queues of the API Priority and Fairness "
                              "subsystem", ["flow_schema", "priority_level"], self.registry)
        self.nominal = Family("gauge", "apiserver_flowcontrol_nominal_limit_seats",
                              "[BETA] Nominal number of execution seats configured for each priority level",
                              ["priority_level"], self.registry)
        self.wait = Family("histogram", "apiserver_flowcontrol_request_wait_duration_seconds",
                           "[BETA] Length of time a request spent waiting in its queue",
                           ["execute", "flow_schema", "priority_level"], self.registry, buckets=_WAIT_BUCKETS)
        #: classify's answers by what a FlowSchema can match on (the user and the attributes but the
        #: object's name and the field selector), forgotten when the configuration changes
        self._classified: dict[tuple, tuple[dict, dict] | None] = {}
        #: what a request of each (FlowSchema, level) pair is answered and counted with
        self._routes: dict[tuple[int, int], _Route] = {}
        for inf in (schemas, levels):
            inf.add_handlers(self._changed, lambda old, new: self._changed(new), self._changed)

    def _changed(self, _obj: dict) -> None:
        self._ordered = None
        self._classified = {}
        self._routes = {}

    def _configuration(self) -> list[tuple[dict, dict]]:
        if self._ordered is None:
            levels = {pl["metadata"]["name"]: pl for pl in self.levels.list()}
            ordered = []
            for fs in sorted(self.schemas.list(), key=lambda s: ((s.get("spec") or {}).get("matchingPrecedence", 1000),
                                                                 s["metadata"]["name"])):
                pl = levels.get(((fs.get("spec") or {}).get("priorityLevelConfiguration") or {}).get("name", ""))
                if pl is not None:
                    ordered.append((fs, pl))
            self._seats(list(levels.values()))
            self._ordered = ordered
        return self._ordered

    def classify(self, user, a: Attributes) -> tuple[dict, dict] | None:
        """The first (FlowSchema, level) by precedence whose rules match; worked out once per
        user and request shape (every request of a client looks alike), not per request."""
        ordered = self._configuration()
        key = (user.name, user.groups, a.resource_request, a.verb, a.group, a.resource, a.subresource, a.namespace,
               "" if a.resource_request else a.path)
        found = self._classified.get(key, _UNKNOWN)
        if found is _UNKNOWN:
            found = next(((fs, pl) for fs, pl in ordered if matches(fs, user, a)), None)
            if len(self._classified) >= _CLASSIFIED_MAX:
                self._classified.clear()
            self._classified[key] = found
        return found

    def _route(self, fs: dict, pl: dict) -> _Route:
        route = self._routes.get((id(fs), id(pl)))
        if route is None or route.fs is not fs or route.pl is not pl:
            labels = (fs["metadata"]["name"], pl["metadata"]["name"])
            route = self._routes[(id(fs), id(pl))] = _Route(
                fs, pl, labels,
                {"X-Kubernetes-PF-FlowSchema-UID": fs["metadata"].get("uid", ""),
                 "X-Kubernetes-PF-PriorityLevel-UID": pl["metadata"].get("uid", "")},
                (pl.get("spec") or {}).get("type") == "Limited", self.dispatched.labels(*labels),
                self.executing.labels(*labels), self.inqueue.labels(*labels), self.wait.labels("true", *labels))
        return route

    def _seats(self, levels: list[dict]) -> None:
        """Each Limited level's share of the server's seats and its waiting room; every level's
        nominal seats, of which an Exempt one (nominalConcurrencyShares 0 by default) uses none."""
        shares = {p["metadata"]["name"]: ((p.get("spec") or {}).get("limited") or {}).get("nominalConcurrencyShares", 30)
                  for p in levels if (p.get("spec") or {}).get("type") == "Limited"}
        exempt = {p["metadata"]["name"]: ((p.get("spec") or {}).get("exempt") or {}).get("nominalConcurrencyShares", 0)
                  for p in levels if (p.get("spec") or {}).get("type") == "Exempt"}
        total = sum(shares.values()) + sum(exempt.values()) or 1
        for name, share in exempt.items():
            self.nominal.labels(name).set(math.ceil(self.server_concurrency * share / total))
        state = {}
        for p in levels:
            name = p["metadata"]["name"]
            if name not in shares:
                continue
            lr = ((p.get("spec") or {}).get("limited") or {}).get("limitResponse") or {}
            q = lr.get("queuing") or {}
            waiting = q.get("queues", 0) * q.get("queueLengthLimit", 0) if lr.get("type") == "Queue" else 0
            seats = max(1, math.ceil(self.server_concurrency * shares[name] / total))
            level = state[name] = self._state.get(name) or PriorityLevel(seats, waiting)
            level.seats, level.max_waiting = seats, waiting
            self.nominal.labels(name).set(seats)
        self._state = state

    @web.middleware
    async def middleware(self, request: web.Request, handler) -> web.StreamResponse:
        try:
            user = request[USER]
        except KeyError:  # unauthenticated: a public path
            return await handler(request)
        return await self.serve(request, user, request_attributes(request), handler)

    async def serve(self, request: web.Request, user, a: Attributes, handler) -> web.StreamResponse:
        """`middleware` for an authenticated request whose user and attributes the caller has
        (the API server's authentication calls it directly: one coroutine less per request)."""
        watch = a.verb == "watch"
        if not watch and long_running(a):  # WithPriorityAndFairness leaves these be: not classified nor counted
            return await handler(request)
        found = self.classify(user, a)
        if found is None:
            return await handler(request)
        route = self._route(*found)
        level = self._state.get(route.labels[1]) if route.limited else None
        queued = time.perf_counter() if level is not None else 0.0
        if level is not None and not await level.acquire(route.inqueue):
            self.rejected.labels(*route.labels, "queue-full" if level.max_waiting else "concurrency-limit").inc()
            self.wait.labels("false", *route.labels).observe(time.perf_counter() - queued)
            if self.refused is not None:
                self.refused(request, a)
            e = errors.APIError(429, "TooManyRequests", "Too many requests, please try again later.",
                                {"retryAfterSeconds": 1}, {"Retry-After": "1"})
            resp = error_response(e)
            resp.headers.update(route.headers)
            return resp
        if queued:  # the queue wait, which the request's SLI latency leaves out
            route.waited.observe(wait := time.perf_counter() - queued)
            request[APF_WAIT] = wait
        route.dispatched.inc()
        executing = route.executing
        executing.inc()
        mutating = a.verb not in _READ_ONLY
        self.inflight.enter(mutating)
        if watch:
            return await self._watch(request, handler, route, level, executing)
        request[PF_HEADERS] = route.headers
        try:
            resp = await handler(request)
        finally:
            executing.dec()
            self.inflight.leave(mutating)
            if level is not None:
                level.release()
        if not resp.prepared:
            resp.headers.update(route.headers)
        return resp

    async def _watch(self, request: web.Request, handler, route, level, executing) -> web.StreamResponse:
        """A watch holds its seat until it is initialized (upstream's initialization signal): here, as its
        head goes out, the watcher registered; or as its handler ends without one."""
        held = True

        def release() -> None:
            nonlocal held
            if held:
                held = False
                executing.dec()
                self.inflight.leave(False)
                if level is not None:
                    level.release()
        _headed(request, route.headers, release)
        request[DELEGATED] = release
        try:
            return await handler(request)
        finally:
            release()


class _ExecutingSeats:
    """apiserver_flowcontrol_current_executing_seats, written at scrape time from the executing
    requests' gauge: every request here occupies one seat (no work estimator widens it)."""

    def __init__(self, executing: Family) -> None:
        self.executing = executing

    def describe(self) -> list[Metric]:
        return [Metric("apiserver_flowcontrol_current_executing_seats", "", "gauge")]

    def collect(self) -> list[Metric]:
        m = Metric("apiserver_flowcontrol_current_executing_seats",
                   "[BETA] Concurrency (number of seats) occupied by the currently executing (initial stage for a "
                   "WATCH, any stage otherwise) requests in the API Priority and Fairness subsystem", "gauge")
        for family in self.executing.collect():
            for s in family.samples:
                m.add_sample("apiserver_flowcontrol_current_executing_seats", s.labels, s.value)
        return [m]


def _headed(request: web.Request, headers: dict[str, str], initialized: Callable[[], None]) -> None:
    """The PF headers on a watch's response as its head is written: the filter sets them before the
    handler, which streams (it is prepared before `serve` sees it), as a proxied one does. The head
    goes out once the watch is registered, where upstream's initialization signal lets its seat go."""
    prepare = request._prepare_hook

    async def hook(response: web.StreamResponse) -> None:
        response.headers.update(headers)
        initialized()
        await prepare(response)
    object.__setattr__(request, "_prepare_hook", hook)  # (as audit_id's: __setattr__ would warn in debug mode)
