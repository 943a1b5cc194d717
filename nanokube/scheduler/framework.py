"""The scheduling framework: statuses, the per-cycle state, pod infos,
cluster events with queueing hints, and a Framework that runs a profile's
plugins at each extension point."""

from __future__ import annotations

import asyncio
import enum
import functools
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from itertools import repeat
from operator import add, mul

from .metrics import Metrics
from ..machinery import featuregates
from ..volume.attachment import uses_claims
from ..machinery.podgroups import group_key
from ..machinery.podresize import resize_parts, resources_spec
from .resources import Resources, pod_requests, pod_requests_pair

MAX_NODE_SCORE = 100


class Code(enum.IntEnum):
    SUCCESS = 0
    ERROR = 1
    UNSCHEDULABLE = 2
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    WAIT = 4
    SKIP = 5


@dataclass(slots=True)
class Status:
    """A plugin's verdict; plugins return None for success on hot paths."""

    code: Code
    reasons: list[str] = field(default_factory=list)
    plugin: str = ""
    timeout: float = 0.0  # for WAIT from Permit

    @property
    def unschedulable(self) -> bool:
        return self.code in (Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)

    def message(self) -> str:
        return ", ".join(self.reasons)


def unschedulable(*reasons: str, resolvable: bool = True) -> Status:
    return Status(Code.UNSCHEDULABLE if resolvable else Code.UNSCHEDULABLE_AND_UNRESOLVABLE, list(reasons))


SKIP = Status(Code.SKIP)


def _failed_at(point: str, plugin: str, st: Status) -> Status:
    """The status a plugin's error (not a rejection) ends Reserve, Permit, PreBind or Bind with:
    upstream's framework wraps it (`running PreBind plugin "DynamicResources": ...`), and that is
    what the pod's FailedScheduling Event and condition say."""
    if st.code == Code.ERROR:
        return Status(Code.ERROR, [f'running {point} plugin "{plugin}": {st.message()}'], plugin)
    st.plugin = plugin
    return st


class NodeToStatus(dict):
    """Node name -> the status that rejected it, and `absent`: the one status of every node not
    listed (the nodes a PreFilter result left out), as upstream's NodeToStatus keeps it, so a pod
    that fits nowhere in a large cluster costs no object per node."""

    def __init__(self, statuses=(), absent: Status | None = None, num_absent: int = 0) -> None:
        if statuses:  # none for a pod PreFilter turned away from every node (most that fit nowhere)
            super().__init__(statuses)
        self.absent = absent
        self.num_absent = num_absent if absent is not None else 0

    def get(self, name, default=None):
        st = dict.get(self, name)
        if st is not None:
            return st
        return self.absent if default is None else default

    def all_unresolvable(self) -> bool:
        """No node could take the pod even after evicting others: preemption is pointless."""
        if self.absent is not None and self.absent.code != Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
            return False
        return not self or all(s.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE for s in self.values())


class CycleState(dict):
    """Data plugins share within one scheduling cycle of one pod, keyed by
    plugin-chosen names; also records which plugins asked to be skipped and
    whether this cycle samples per-plugin durations (upstream records them
    for 10% of cycles)."""

    def __init__(self, record_plugin_metrics: bool = True) -> None:
        self.skip_filter: set[str] = set()
        self.skip_score: set[str] = set()
        #: the PreFilter plugins that narrowed the nodes to search (PreFilterResult)
        self.narrowed_by: list[str] = []
        self.record_plugin_metrics = record_plugin_metrics
        #: the snapshot the cycle searches (set by the search), for what it counts of all its nodes
        self.snapshot = None
        #: a verdict of this cycle depended on the clock (a timeout): a retry may not repeat it
        self.read_clock = False


class PodInfo:
    """A pod as the queue and plugins see it: its JSON plus what is derived
    from it once (requests, its group) and its scheduling history."""

    __slots__ = (
        "_cached",
        "_nonzero",
        "_requests",
        "attempts",
        "backoff_expires",
        "gated_by",
        "group",
        "has_affinity",
        "has_required_anti_affinity",
        "in_flight_since",
        "initial_timestamp",
        "key",
        "last_failure",
        "pod",
        "priority",
        "spec",
        "timestamp",
        "uid",
        "unschedulable_plugins",
    )

    def __init__(self, pod: dict, now: float) -> None:
        self.attempts = 0
        self.initial_timestamp = now
        self.timestamp = now
        self.unschedulable_plugins: set[str] = set()
        self.gated_by = ""
        self.backoff_expires = 0.0
        self.in_flight_since = 0
        self._requests = self._nonzero = None
        #: the outcome of its last attempt that found no node, for a retry over the same cluster (cycle.Failure)
        self.last_failure = None
        self.pod: dict = {}
        self.update(pod)

    def update(self, pod: dict, same_requests: bool = False) -> None:
        """Takes the pod's latest JSON; parsed requests are dropped only when
        what they derive from changed (not on binding, say), unless the
        caller compared them already (`same_requests`). A write that kept the
        pod's spec object (the watch cache hands a status write the same one)
        changes nothing derived from it, nor the pod's name or uid."""
        md = pod["metadata"]
        spec = pod.get("spec") or {}
        old = self.pod
        self.pod = pod
        #: the pod's spec ({} when it has none): an attribute, as plugins read it several times a cycle
        self.spec: dict = spec
        self._cached: dict = {}
        if spec is old.get("spec") and md.get("uid") == old["metadata"].get("uid"):
            return
        if self._requests is not None and not same_requests and \
                _resource_parts(old.get("spec") or {}) != _resource_parts(spec):
            self._requests = self._nonzero = None
        self.key = f"{md.get('namespace', '')}/{md['name']}"
        #: the queue key of its PodGroup, or None (asked of each pod at every step of the queue)
        self.group = group_key(pod) if spec.get("schedulingGroup") and featuregates.enabled("GenericWorkload") else None
        self.uid = md.get("uid", "")
        #: read for every pod of every node a preemption attempt visits: an attribute, not a lookup
        self.priority: int = spec.get("priority") or 0
        affinity = spec.get("affinity") or {}
        anti = affinity.get("podAntiAffinity") or {}
        #: whether the pod carries inter-pod terms: the cache indexes such pods per node
        self.has_affinity = bool(affinity.get("podAffinity") or anti)
        self.has_required_anti_affinity = bool(anti.get("requiredDuringSchedulingIgnoredDuringExecution"))

    @property
    def requests(self) -> Resources:
        """What the pod requests, parsed at the first read (as upstream's NodeResourcesFit parses
        them in PreFilter): a pod a PreFilter turns away before it, one whose nodeSelector no
        node carries, never needs them."""
        if self._requests is None:
            self._requests, self._nonzero = pod_requests_pair(resources_spec(self.pod))
        return self._requests

    @property
    def nonzero(self) -> Resources:
        """`requests` with the scheduler's defaults for a container that asks no CPU or memory."""
        if self._nonzero is None:
            self._requests, self._nonzero = pod_requests_pair(resources_spec(self.pod))
        return self._nonzero

    def same_requests(self, pod: dict) -> bool:
        """Whether `pod` requests what this PodInfo counted."""
        return _resource_parts(self.pod.get("spec") or {}) == _resource_parts(pod.get("spec") or {}) \
            and resize_parts(self.pod) == resize_parts(pod)

    def derived(self, name: str, build: Callable[[dict], object]):
        """A value plugins derive from the pod spec, built once per pod update."""
        try:
            return self._cached[name]
        except KeyError:
            v = self._cached[name] = build(self.pod)
            return v


def _resource_parts(spec: dict) -> tuple:
    """The parts of a pod spec its requests are computed from."""
    return spec.get("containers"), spec.get("initContainers"), spec.get("overhead"), spec.get("resources")


class Action(enum.IntFlag):
    ADD = 1
    DELETE = 2
    UPDATE_NODE_ALLOCATABLE = 4
    UPDATE_NODE_LABEL = 8
    UPDATE_NODE_TAINT = 16
    UPDATE_NODE_CONDITION = 32
    UPDATE_NODE_ANNOTATION = 64
    UPDATE_POD_LABEL = 128
    UPDATE_POD_SCALE_DOWN = 256
    UPDATE_POD_TOLERATIONS = 512
    UPDATE_POD_SCHEDULING_GATES_ELIMINATED = 1024
    UPDATE_POD_OTHER = 2048
    UPDATE = (UPDATE_NODE_ALLOCATABLE | UPDATE_NODE_LABEL | UPDATE_NODE_TAINT | UPDATE_NODE_CONDITION
              | UPDATE_NODE_ANNOTATION | UPDATE_POD_LABEL | UPDATE_POD_SCALE_DOWN | UPDATE_POD_TOLERATIONS
              | UPDATE_POD_SCHEDULING_GATES_ELIMINATED | UPDATE_POD_OTHER)
    ALL = ADD | DELETE | UPDATE


NODE, ASSIGNED_POD, UNSCHEDULED_POD, WILDCARD = "Node", "Pod", "UnscheduledPod", "*"


@dataclass(frozen=True, slots=True)
class ClusterEvent:
    resource: str
    action: Action
    label: str = ""

    def matches(self, other: ClusterEvent) -> bool:
        """Whether this registration covers the event `other` that happened."""
        if self.resource == WILDCARD:
            return True
        # int's & on the flags: IntFlag's own builds a new flag member each time
        return self.resource == other.resource and int.__and__(self.action, other.action) != 0


#: resource -> its pod update events: label, scale down, gates eliminated, tolerations, other
_POD_EVENTS = {r: (ClusterEvent(r, Action.UPDATE_POD_LABEL, "PodLabelChange"),
                   ClusterEvent(r, Action.UPDATE_POD_SCALE_DOWN, "PodRequestScaledDown"),
                   ClusterEvent(r, Action.UPDATE_POD_SCHEDULING_GATES_ELIMINATED, "PodSchedulingGateEliminatedChange"),
                   ClusterEvent(r, Action.UPDATE_POD_TOLERATIONS, "PodTolerationChange"),
                   ClusterEvent(r, Action.UPDATE_POD_OTHER, "PodUpdate"))
               for r in (ASSIGNED_POD, UNSCHEDULED_POD)}


def pod_update_kinds(resource: str) -> tuple[ClusterEvent, ...]:
    """Every event `pod_update_events` can hand out for `resource`."""
    return _POD_EVENTS[resource]


def _scaled_down(old: dict, new: dict) -> bool:
    """Whether any resource the old pod requested is requested less (or not at all) now, its
    containers counted with the resources they hold while resized (`resources_spec`)."""
    before, after = pod_requests(resources_spec(old)), pod_requests(resources_spec(new))
    return (after.milli_cpu < before.milli_cpu or after.memory < before.memory or after.ephemeral < before.ephemeral
            or any(after.scalars.get(k, 0) < v for k, v in before.scalars.items()))


def pod_update_events(resource: str, old: dict, new: dict) -> list[ClusterEvent]:
    """One event per scheduling-relevant change of a pod, as upstream's
    PodSchedulingPropertiesChange; UPDATE_POD_OTHER when none applies (a
    status write: no plugin registers for it). The events are built once:
    every status write of every pending pod asks."""
    label, scale_down, gates, tolerations, other = _POD_EVENTS[resource]
    events = []
    if old["metadata"].get("labels") != new["metadata"].get("labels"):
        events.append(label)
    osp, nsp = old.get("spec") or {}, new.get("spec") or {}
    spec_changed = osp is not nsp and osp != nsp  # a status write keeps the spec object (the watch cache's)
    # the node's status write that actuates a resize shrinks what the pod holds
    if (spec_changed or resize_parts(old) != resize_parts(new)) and _scaled_down(old, new):
        events.append(scale_down)
    if spec_changed:
        if osp.get("schedulingGates") and not nsp.get("schedulingGates"):
            events.append(gates)
        if osp.get("tolerations") != nsp.get("tolerations"):
            events.append(tolerations)
    return events or [other]


class Hint(enum.Enum):
    QUEUE = "Queue"
    SKIP = "QueueSkip"


def own_update(pod: dict, old: dict | None, new: dict | None) -> Hint:
    """The hint of a registration for the pod's own update (an UnscheduledPod event): it helps
    only the pod that changed (upstream's `modifiedPod.UID == pod.UID`), as the events recorded
    while pods are in flight reach every pod that failed meanwhile."""
    return Hint.QUEUE if new is not None and new["metadata"].get("uid") == pod["metadata"].get("uid") else Hint.SKIP


#: decides, for one pod a plugin rejected, whether an event may make it schedulable
QueueingHintFn = Callable[[dict, "dict | None", "dict | None"], Hint]


#: the queue keys of the only pods a hint can return Queue for after a change (old, new), or None: any pod
HintTargetsFn = Callable[["dict | None", "dict | None"], "Collection[str] | None"]


@dataclass(slots=True)
class Registration:
    event: ClusterEvent
    hint: QueueingHintFn | None = None
    #: with `hint`: lets the queue ask the hint only of these pods, not of every pod the plugin turned away
    targets: HintTargetsFn | None = None


@dataclass
class Profile:
    """One KubeSchedulerConfiguration profile: which plugins, their score
    weights and arguments; `points` (extension point method -> plugin names
    in order, "sort_key" for QueueSort) when a configuration chose them per
    point, else every plugin takes part wherever it has the method."""

    scheduler_name: str = "default-scheduler"
    plugins: list[str] = field(default_factory=list)
    weights: dict[str, int] = field(default_factory=dict)
    args: dict[str, dict] = field(default_factory=dict)
    percentage_of_nodes_to_score: int = 0
    points: dict[str, list[str]] | None = None


class WaitingPod:
    """A pod held at Permit until every waiting plugin allows it."""

    def __init__(self, info: PodInfo, pending: dict[str, float]) -> None:
        self.info = info
        self.pending = dict(pending)
        self.result: asyncio.Future = asyncio.get_running_loop().create_future()

    def allow(self, plugin: str) -> None:
        self.pending.pop(plugin, None)
        if not self.pending and not self.result.done():
            self.result.set_result(None)

    def reject(self, plugin: str, msg: str) -> None:
        if not self.result.done():
            st = unschedulable(msg)
            st.plugin = plugin
            self.result.set_result(st)


def _extension_point(point: str, status_of: Callable = lambda out: out):
    """Times a run_* method as upstream's frameworkImpl times each extension point it runs
    (framework_extension_point_duration_seconds, by the status `status_of` its result gives;
    None is Success). Filter, run per node, is not timed, as upstream's RunFilterPlugins is not."""
    def wrap(run):
        if asyncio.iscoroutinefunction(run):
            async def timed(self, *args):
                t = self.clock.monotonic()
                out = await run(self, *args)
                self.metrics.extension_point(point, status_of(out), self.profile.scheduler_name, self.clock.monotonic() - t)
                return out
        else:
            def timed(self, *args):
                t = self.clock.monotonic()
                out = run(self, *args)
                self.metrics.extension_point(point, status_of(out), self.profile.scheduler_name, self.clock.monotonic() - t)
                return out
        return functools.wraps(run)(timed)
    return wrap


def _second(out):
    return out[1]


def _success(out):
    return None


class Framework:
    """Runs one profile's plugins; a plugin takes part in an extension point
    by defining the method of that name."""

    POINTS = ("pre_enqueue", "pre_filter", "filter", "post_filter", "pod_group_post_filter", "pre_score", "score",
              "reserve", "permit", "pre_bind", "bind", "post_bind")

    def __init__(self, profile: Profile, plugins: list, metrics: Metrics, clock) -> None:
        self.profile = profile
        self.metrics = metrics
        self.clock = clock
        self.plugins = {p.name: p for p in plugins}
        if profile.points is None:
            self.points = {pt: [p for p in plugins if hasattr(p, pt) or pt == "score" and hasattr(p, "score_nodes")]
                           for pt in self.POINTS}
            sorters = [p for p in plugins if hasattr(p, "sort_key")]
        else:
            self.points = {pt: [self.plugins[n] for n in profile.points.get(pt, [])] for pt in self.POINTS}
            if "pod_group_post_filter" not in profile.points:  # the configured PostFilter order
                self.points["pod_group_post_filter"] = [p for p in self.points["post_filter"]
                                                        if hasattr(p, "pod_group_post_filter")]
            sorters = [self.plugins[n] for n in profile.points.get("sort_key", [])]
        if len(sorters) != 1:
            raise ValueError(f"profile {profile.scheduler_name}: exactly one QueueSort plugin is required")
        self.queue_sort = sorters[0]
        self.weights = {p.name: profile.weights.get(p.name, getattr(p, "default_weight", 1)) for p in self.points["score"]}
        self.waiting: dict[str, WaitingPod] = {}
        #: the PreFilter plugins that skip every pod mounting no claim (`claims_only`: the volume
        #: plugins), and the others: a pod without a claim skips the former on one look at its volumes
        self._claims_only = {p.name for p in self.points["pre_filter"] if getattr(p, "claims_only", False)}
        self._pre_filter_without_claims = [p for p in self.points["pre_filter"] if p.name not in self._claims_only]
        #: the plugins whose verdicts read in-memory state of their own that can change while no informer
        #: event nor cache change says so (DynamicResources' devices allocated in flight)
        self._versioned = [p.state_version for p in plugins if hasattr(p, "state_version")]

    def state_version(self) -> tuple:
        """What the plugins' own state is at: equal versions, equal verdicts on an unchanged cluster."""
        return tuple(v() for v in self._versioned) if self._versioned else ()

    def registrations(self) -> dict[str, list[Registration]]:
        return {name: p.events_to_register() for name, p in self.plugins.items() if hasattr(p, "events_to_register")}

    def _timed(self, point: str, plugin: str, start: float, st: Status | None) -> None:
        self.metrics.plugin_duration(plugin, point, st, self.clock.monotonic() - start)

    def run_pre_enqueue(self, info: PodInfo) -> Status | None:
        for p in self.points["pre_enqueue"]:
            st = p.pre_enqueue(info)
            if st is not None:
                st.plugin = p.name
                return st
        return None

    @_extension_point("PreFilter", _second)
    def run_pre_filter(self, state: CycleState, info: PodInfo) -> tuple[set[str] | None, Status | None]:
        """Runs PreFilter; returns the node names the plugins narrowed the
        search to (None = all) and a failing status. Once the narrowed set is
        empty no node can be searched, and the remaining plugins do not run
        (upstream's RunPreFilterPlugins returns there): a pod whose
        nodeSelector no node carries costs one label lookup, not every
        plugin's pre-pass."""
        narrowed: set[str] | None = None
        timed = state.record_plugin_metrics
        plugins = self.points["pre_filter"]
        if self._claims_only and not uses_claims(info.pod):  # as each of them would: Skip
            plugins = self._pre_filter_without_claims
            state.skip_filter.update(self._claims_only)
        for p in plugins:
            t = self.clock.monotonic() if timed else 0.0
            nodes, st = p.pre_filter(state, info)
            if timed:
                self._timed("PreFilter", p.name, t, st)
            if st is not None:
                if st.code == Code.SKIP:
                    state.skip_filter.add(p.name)
                    continue
                st.plugin = p.name
                return None, st
            if nodes is not None:
                narrowed = set(nodes) if narrowed is None else narrowed & set(nodes)
                state.narrowed_by.append(p.name)
                if not narrowed:
                    break
        return narrowed, None

    def filters(self, state: CycleState) -> list:
        return [p for p in self.points["filter"] if p.name not in state.skip_filter]

    @_extension_point("PostFilter", _second)
    def run_post_filter(self, state: CycleState, info: PodInfo, statuses: dict[str, Status]) -> tuple[str | None, Status | None]:
        """Runs PostFilter until a plugin succeeds (its nominated node, and
        its status where it says something, for the FitError message) or
        gives an unresolvable or error verdict; when every plugin says
        Unschedulable, their reasons are joined into one Unschedulable status
        attributed to the first of them, for the FitError message."""
        rejected: list[Status] = []
        for p in self.points["post_filter"]:
            nominated, st = p.post_filter(state, info, statuses)
            if st is None or st.code == Code.SUCCESS:
                return nominated, st if st is not None and st.reasons else None
            st.plugin = p.name
            if st.code != Code.UNSCHEDULABLE:
                return None, st
            rejected.append(st)
        if len(rejected) < 2:  # none, or the one plugin's own verdict (DefaultPreemption's, in most profiles)
            return None, rejected[0] if rejected else None
        return None, Status(Code.UNSCHEDULABLE, [r for st in rejected for r in st.reasons], rejected[0].plugin)

    def run_pod_group_post_filter(self, group) -> tuple[dict[str, str] | None, Status | None]:
        """Runs PodGroupPostFilter once for a group whose workload cycle
        failed, in order until a plugin succeeds (its nominations, pod uid
        -> node, and its status where it says something); otherwise the
        plugins' reasons as one Unschedulable status, or None when no
        plugin takes part."""
        reasons: list[str] = []
        for p in self.points["pod_group_post_filter"]:
            nominated, st = p.pod_group_post_filter(group)
            if st is None or st.code == Code.SUCCESS:
                return nominated or {}, st if st is not None and st.reasons else None
            reasons.extend(st.reasons)
        return None, Status(Code.UNSCHEDULABLE, reasons) if reasons else None

    @_extension_point("PreScore")
    def run_pre_score(self, state: CycleState, info: PodInfo, nodes: list) -> Status | None:
        timed = state.record_plugin_metrics
        for p in self.points["pre_score"]:
            t = self.clock.monotonic() if timed else 0.0
            st = p.pre_score(state, info, nodes)
            if timed:
                self._timed("PreScore", p.name, t, st)
            if st is not None:
                if st.code == Code.SKIP:
                    state.skip_score.add(p.name)
                    continue
                st.plugin = p.name
                return st
        return None

    @_extension_point("Score", _success)
    def run_score(self, state: CycleState, info: PodInfo, nodes: list) -> list[int]:
        """Weighted, normalised total score per node (in `nodes` order); a
        plugin scores all nodes in one `score_nodes` call, or one `score`
        call per node. A plugin giving every node the same score adds it
        once, not per node."""
        n = len(nodes)
        offset = 0
        columns: list[tuple[list[int], int]] = []
        for p in self.points["score"]:
            if p.name in state.skip_score:
                continue
            t = self.clock.monotonic() if state.record_plugin_metrics else 0.0
            if hasattr(p, "score_nodes"):
                scores = p.score_nodes(state, info, nodes)
            else:
                scores = [p.score(state, info, n) for n in nodes]
            if hasattr(p, "normalize_score"):
                p.normalize_score(state, info, scores)
            if state.record_plugin_metrics:
                self._timed("Score", p.name, t, None)
            if not scores:
                continue
            lo, hi = min(scores), max(scores)
            if not (0 <= lo and hi <= MAX_NODE_SCORE):
                bad = next(s for s in scores if not 0 <= s <= MAX_NODE_SCORE)
                raise ValueError(f"plugin {p.name} returned an invalid score {bad}")
            w = self.weights[p.name]
            if lo == hi:
                offset += lo * w
            else:
                columns.append((scores, w))
        if not columns:
            return [offset] * n
        (first, w), rest = columns[0], columns[1:]
        if w != 1:
            first = list(map(mul, first, repeat(w, n)))
        totals = list(map(add, first, repeat(offset, n))) if offset else list(first)
        for scores, w in rest:
            totals = list(map(add, totals, scores if w == 1 else map(mul, scores, repeat(w, n))))
        return totals

    @_extension_point("Reserve")
    def run_reserve(self, state: CycleState, info: PodInfo, node: str) -> Status | None:
        for p in self.points["reserve"]:
            st = p.reserve(state, info, node)
            if st is not None:
                return _failed_at("Reserve", p.name, st)
        return None

    @_extension_point("Unreserve")
    def run_unreserve(self, state: CycleState, info: PodInfo, node: str) -> None:
        for p in reversed(self.points["reserve"]):
            p.unreserve(state, info, node)

    @_extension_point("Permit")
    def run_permit(self, state: CycleState, info: PodInfo, node: str) -> Status | None:
        """Runs Permit; a pod some plugin asks to wait for is parked in
        `waiting` and WAIT is returned."""
        pending: dict[str, float] = {}
        for p in self.points["permit"]:
            st = p.permit(state, info, node)
            if st is None:
                continue
            if st.code == Code.WAIT:
                pending[p.name] = st.timeout
                continue
            return _failed_at("Permit", p.name, st)
        if pending:
            self.waiting[info.uid] = WaitingPod(info, pending)
            return Status(Code.WAIT)
        return None

    async def wait_on_permit(self, info: PodInfo) -> Status | None:
        wp = self.waiting.get(info.uid)
        if wp is None:
            return None
        timeout = min(wp.pending.values())

        async def expire():
            await self.clock.sleep(timeout)
            for name in list(wp.pending):
                wp.reject(name, f"rejected due to timeout after waiting {timeout:g}s at plugin {name}")

        timer = asyncio.create_task(expire())
        try:
            return await wp.result
        finally:
            timer.cancel()
            self.waiting.pop(info.uid, None)

    def will_wait_on_permit(self, info: PodInfo) -> bool:
        """Whether a Permit plugin asked the pod to wait (upstream's WillWaitOnPermit)."""
        return info.uid in self.waiting

    def run_pre_bind_pre_flights(self, state: CycleState, info: PodInfo, node: str) -> bool:
        """Upstream's RunPreBindPreFlights: whether some PreBind plugin has work to do for the pod
        on `node` (one without `pre_bind_pre_flight` is taken to have)."""
        for p in self.points["pre_bind"]:
            flight = getattr(p, "pre_bind_pre_flight", None)
            if flight is None or flight(state, info, node):
                return True
        return False

    @_extension_point("PreBind")
    async def run_pre_bind(self, state: CycleState, info: PodInfo, node: str) -> Status | None:
        for p in self.points["pre_bind"]:
            st = await p.pre_bind(state, info, node)
            if st is not None:
                return _failed_at("PreBind", p.name, st)
        return None

    @_extension_point("Bind")
    async def run_bind(self, state: CycleState, info: PodInfo, node: str) -> Status | None:
        for p in self.points["bind"]:
            st = await p.bind(state, info, node)
            if st is not None and st.code == Code.SKIP:
                continue
            return st if st is None else _failed_at("Bind", p.name, st)
        return Status(Code.ERROR, ["no bind plugin bound the pod"])

    @_extension_point("PostBind")
    def run_post_bind(self, state: CycleState, info: PodInfo, node: str) -> None:
        for p in self.points["post_bind"]:
            p.post_bind(state, info, node)
