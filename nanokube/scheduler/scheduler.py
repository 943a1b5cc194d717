"""The scheduler: informers feed the cache and the queue; one loop pops a
pod, runs its profile's cycle and hands binding to a background task."""

from __future__ import annotations

import asyncio
import collections
import logging
import random

from ..machinery.conditions import find_condition
from ..machinery.errors import APIError
from ..client.http import EXPECTED
from ..client.informer import Informer, InformerFactory
from ..clock import REAL, Clock
from . import plugins as plugin_registry
from .api import SchedulerAPI
from .cache import Cache, NodeInfo, Snapshot
from .config import SchedulerConfig
from .cycle import Algorithm, Failure, FitError, PluginError
from .framework import (
    ASSIGNED_POD,
    NODE,
    Action,
    ClusterEvent,
    Code,
    CycleState,
    Framework,
    PodInfo,
    Profile,
    Status,
    pod_update_events,
)
from .metrics import Metrics
from .podgroups import PodGroupIndex
from ..machinery import featuregates, logs
from ..machinery.meta import object_key
from ..machinery.podgroups import group_priority, min_count
from .queue import QueuedPodGroupInfo, SchedulingQueue
from .workload_cycle import WorkloadCycle

log = logging.getLogger(__name__)
#: klog V(2), the verbosity of kube-scheduler's line for each bound pod
_V2 = logs.level(2)

#: share of cycles whose per-plugin durations are recorded, as upstream's pluginMetricsSamplePercent
PLUGIN_METRICS_SAMPLE_PERCENT = 10
#: background tasks kept before the first sweep of finished ones (see `spawn`)
_MIN_SWEEP = 64
#: the most failure reports written at once (see `_submit`)
REPORTERS = 32
#: CycleState key: the binding cycle set the pod's nominatedNodeName (`_expect`)
_NOMINATED = "Scheduler/nominated"


def _already_reported(pod: dict, reason: str, message: str) -> bool:
    """Whether the pod's PodScheduled condition already says this: then it is not written again
    (upstream keeps an unchanged condition). Its FailedScheduling event goes to the event
    recorder on every attempt, whose series absorbs the repeats, so a pod that fits nowhere
    costs no writes per attempt."""
    c = find_condition((pod.get("status") or {}).get("conditions"), "PodScheduled")
    return c is not None and c.get("status") == "False" and c.get("reason") == reason and c.get("message") == message


def _condition_statuses(node: dict) -> dict:
    """type -> status of the node's conditions: heartbeats and messages alone change nothing."""
    return {c.get("type"): c.get("status") for c in (node.get("status") or {}).get("conditions") or []}


def node_update_events(old: dict, new: dict) -> list[ClusterEvent]:
    """One event per scheduling-relevant aspect of the node that changed,
    as upstream's NodeSchedulingPropertiesChange; none for a heartbeat, nor
    for a cordon (upstream's nodeSpecUnschedulableChanged: only a node that
    becomes schedulable can let a pod in)."""
    om, nm = old.get("metadata") or {}, new.get("metadata") or {}
    osp, nsp = old.get("spec") or {}, new.get("spec") or {}
    ost, nst = old.get("status") or {}, new.get("status") or {}
    changes = (
        (bool(osp.get("unschedulable")) and not nsp.get("unschedulable"), Action.UPDATE_NODE_TAINT,
         "NodeSpecUnschedulableChange"),
        (ost.get("allocatable") != nst.get("allocatable"), Action.UPDATE_NODE_ALLOCATABLE, "NodeAllocatableChange"),
        ((om.get("labels") or {}) != (nm.get("labels") or {}), Action.UPDATE_NODE_LABEL, "NodeLabelChange"),
        ((osp.get("taints") or []) != (nsp.get("taints") or []), Action.UPDATE_NODE_TAINT, "NodeTaintChange"),
        (_condition_statuses(old) != _condition_statuses(new), Action.UPDATE_NODE_CONDITION, "NodeConditionChange"),
        ((om.get("annotations") or {}) != (nm.get("annotations") or {}), Action.UPDATE_NODE_ANNOTATION,
         "NodeAnnotationChange"),
    )
    return [ClusterEvent(NODE, action, label) for changed, action, label in changes if changed]


def _terminal(pod: dict) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


class Scheduler:
    """`Scheduler(client, clock)`; `await start()` begins scheduling pods
    whose spec.schedulerName names one of `profiles` (or the profiles of a
    loaded KubeSchedulerConfiguration, `config`, which also sets the queue's
    backoff); `await stop()`."""

    def __init__(self, client, clock: Clock = REAL, name: str = "default-scheduler",
                 profiles: list[Profile] | None = None, metrics: Metrics | None = None, seed: int | None = None,
                 config: SchedulerConfig | None = None, informers: InformerFactory | None = None,
                 event_client=None) -> None:
        """`informers`: a factory shared with other components of the process (upstream's
        scheduler.New takes the informer factory it shares; scheduler_perf hands the same one to
        the ResourceClaim controller), which its owner stops; without one the scheduler runs (and
        stops) informers of its own. `event_client` writes the Events (kube-scheduler's eventClient,
        without the '/scheduler' user agent suffix; `client` by default)."""
        if config is not None:
            profiles = config.profiles
        self.client = client
        self.clock = clock
        self.name = name
        self.metrics = metrics or Metrics()
        self.api = SchedulerAPI(client, clock, name, event_client)
        self.cache = Cache()
        self.snapshot = Snapshot()
        self.algorithm = Algorithm(random.Random(seed))
        self._metrics_rng = random.Random(seed)
        self.informer_factory = informers or InformerFactory(clock)
        self._own_factory = informers is None
        self.nodes = self.informer_factory.informer(client.resource("", "v1", "nodes"))
        self.pods = self.informer_factory.informer(client.resource("", "v1", "pods"))
        #: informers plugins asked for through `informer()`, started with the scheduler
        self.informers: dict[tuple[str, str, str], Informer] = {}
        #: events heard from every informer the scheduler and its plugins read (`_failure_key`)
        self._heard = 0
        self._count_events(self.nodes)
        self._count_events(self.pods)
        #: state plugins share across profiles, keyed by plugin-chosen names
        self.shared: dict[str, object] = {}
        self.frameworks: dict[str, Framework] = {}
        for prof in profiles or [plugin_registry.default_profile(name)]:
            self.frameworks[prof.scheduler_name] = Framework(prof, plugin_registry.build(prof, self), self.metrics, clock)
        self.queue = SchedulingQueue(self.frameworks, clock, self.metrics)
        if config is not None:
            self.queue.initial_backoff, self.queue.max_backoff = config.pod_initial_backoff, config.pod_max_backoff
        #: GenericWorkload: PodGroups watched and their pods scheduled together; off, no PodGroup is read
        #: and a pod's schedulingGroup (one stored while it was on) is no group's
        self.workloads = featuregates.enabled("GenericWorkload")
        self.podgroups = PodGroupIndex()
        self.queue.group_priority = lambda group: group_priority(self.podgroups.get(group) or {})
        if self.workloads:
            self.podgroup_client = client.resource("scheduling.k8s.io", "v1beta1", "podgroups")
            self.podgroup_informer = self.informer_factory.informer(self.podgroup_client)
            self._count_events(self.podgroup_informer)
            self.workload_cycle = WorkloadCycle(self)
        self._tasks: list[asyncio.Task] = []
        self._binds: set[asyncio.Task] = set()
        #: (error, framework) -> its attempts counter and duration histogram series, for `_failed`
        self._failure_series: dict[tuple[bool, Framework], tuple] = {}
        self._sweep_at = _MIN_SWEEP
        #: failure reports waiting for a reporter, the reporters waiting for one, and the reporters'
        #: tasks: kept apart from `_binds`, whose tasks all end, as an idle reporter does not
        self._reports: collections.deque[tuple] = collections.deque()
        self._idle: list[asyncio.Future] = []
        self._reporters: set[asyncio.Task] = set()
        #: pod UID -> (resourceVersion, reason, message) of the last PodScheduled=False patch sent
        #: (`_needs_status_patch`), until the pod binds or goes
        self._sent_status: dict[str, tuple] = {}

    def _count_events(self, inf: Informer) -> None:
        inf.add_handlers(self._hear, self._hear, self._hear)

    def _hear(self, *_) -> None:
        self._heard += 1

    def _failure_key(self, fwk: Framework) -> tuple:
        """What a failed attempt's outcome depends on besides the pod itself: the cache (nodes and
        the pods on them, assumed ones included), the NodeInfos changed in place, every informer
        event (claims, slices, volumes, PDBs, other pods' priorities...), and the plugins' own state."""
        return self.cache.generation, NodeInfo.change_epoch, self._heard, fwk.state_version()

    def informer(self, group: str, version: str, plural: str) -> Informer:
        """One shared informer per resource for plugins that need more than nodes and pods."""
        key = (group, version, plural)
        if key not in self.informers:
            self.informers[key] = self.informer_factory.informer(self.client.resource(group, version, plural))
            self._count_events(self.informers[key])
        return self.informers[key]

    # --- informer handlers -------------------------------------------------

    def _responsible(self, spec: dict) -> bool:
        """A pod of one of its profiles, by the pod's spec."""
        return spec.get("schedulerName", "default-scheduler") in self.frameworks

    def _on_node_add(self, node: dict) -> None:
        self.cache.add_node(node)
        self.queue.on_event(ClusterEvent(NODE, Action.ADD, "NodeAdd"), None, node)

    def _on_node_update(self, old: dict, new: dict) -> None:
        self.cache.update_node(new)
        for event in node_update_events(old, new):
            self.queue.on_event(event, old, new)

    def _on_node_delete(self, node: dict) -> None:
        self.cache.remove_node(node["metadata"]["name"])
        self.queue.on_event(ClusterEvent(NODE, Action.DELETE, "NodeDelete"), node, None)

    def _on_pod_add(self, pod: dict) -> None:
        # a pod without schedulingGroup (most) is no group's member: observe_pod would do nothing
        group = self.podgroups.observe_pod(pod) if (pod.get("spec") or {}).get("schedulingGroup") and self.workloads \
            else None
        self._pod_add(pod)
        if group:
            self.queue.activate_group(group, "PodGroupMemberAdd")

    def _pod_add(self, pod: dict) -> None:
        spec = pod.get("spec") or {}
        node = spec.get("nodeName")
        if node:
            if not _terminal(pod):
                self._on_assigned_pod_add(pod, node)
        elif self._responsible(spec) and not pod["metadata"].get("deletionTimestamp"):
            self.queue.add(pod)

    def _on_assigned_pod_add(self, pod: dict, node: str) -> None:
        uid = pod["metadata"].get("uid", "")
        info = self.cache.assumed_info(uid)
        # the assumed PodInfo is counted on the node already: reuse it unless its requests changed meanwhile
        if info is None or not info.same_requests(pod):
            info = PodInfo(pod, 0.0)
        else:
            info.update(pod, same_requests=True)
        self.cache.add_pod(info, node)
        self.queue.on_event(ClusterEvent(ASSIGNED_POD, Action.ADD, "AssignedPodAdd"), None, pod)

    def _on_pod_update(self, old: dict, new: dict) -> None:
        """A pod that becomes bound is an assigned-pod add (upstream's
        informers see it enter the assigned-pod view); a pending pod's own
        update is weighed by the queue for that pod alone."""
        spec = new.get("spec") or {}
        if spec.get("schedulingGroup") and self.workloads:
            self.podgroups.observe_pod(new)
        node = spec.get("nodeName")
        if node:
            newly_bound = not (old.get("spec") or {}).get("nodeName")
            if newly_bound:
                self.queue.delete(new)
                self._sent_status.pop(new["metadata"].get("uid", ""), None)
            if _terminal(new):
                if not _terminal(old):
                    self._on_assigned_pod_gone(new)
            elif newly_bound:
                self._on_assigned_pod_add(new, node)
            else:
                self.cache.add_pod(PodInfo(new, 0.0), node)
                for event in pod_update_events(ASSIGNED_POD, old, new):
                    self.queue.on_event(event, old, new)
        elif self._responsible(spec):
            self.queue.update(old, new)

    def _on_assigned_pod_gone(self, pod: dict) -> None:
        self.cache.remove_pod(pod["metadata"].get("uid", ""))
        self.queue.on_event(ClusterEvent(ASSIGNED_POD, Action.DELETE, "AssignedPodDelete"), pod, None)

    def _on_pod_delete(self, pod: dict) -> None:
        self.podgroups.forget_pod(pod)
        self._sent_status.pop(pod["metadata"].get("uid", ""), None)
        if (pod.get("spec") or {}).get("nodeName") or self.cache.is_assumed(pod["metadata"].get("uid", "")):
            self._on_assigned_pod_gone(pod)
        else:
            self.queue.delete(pod)

    def _on_podgroup_add(self, pg: dict) -> None:
        self.podgroups.set_group(pg)
        self.queue.activate_group(object_key(pg), "PodGroupAdd")

    def _on_podgroup_update(self, old: dict, new: dict) -> None:
        self.podgroups.set_group(new)
        if (min_count(new) or 0) < (min_count(old) or 0):
            self.queue.activate_group(object_key(new), "PodGroupMinCountDecrease")

    # --- lifecycle ---------------------------------------------------------

    async def start(self) -> None:
        await self.sync()
        await self.run()

    async def sync(self) -> None:
        """Start the informers with their handlers and wait until they have synced: the cache and
        the queue fill, nothing is scheduled yet (kube-scheduler does this before it campaigns)."""
        self.nodes.add_handlers(self._on_node_add, self._on_node_update, self._on_node_delete)
        self.pods.add_handlers(self._on_pod_add, self._on_pod_update, self._on_pod_delete)
        groups = [self.podgroup_informer] if self.workloads else []
        for inf in groups:
            inf.add_handlers(self._on_podgroup_add, self._on_podgroup_update, self.podgroups.remove_group)
        for inf in (self.nodes, *groups, self.pods, *self.informers.values()):
            self.informer_factory.start([inf])
            await inf.synced.wait()

    async def run(self) -> None:
        """Schedule: after `sync`, the event recorder and the scheduling loop start."""
        self.api.broadcaster.start()
        self._tasks.append(asyncio.create_task(self.queue.run_flushers()))
        self._tasks.append(asyncio.create_task(self._loop()))

    async def stop(self) -> None:
        self.queue.close()
        tasks = [*self._tasks, *self._binds, *self._reporters]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._reporters.clear()  # one cancelled before it ran never left
        self._reports.clear()
        await self.api.broadcaster.stop()
        if self._own_factory:
            await self.informer_factory.stop()

    async def _loop(self) -> None:
        while True:
            info = await self.queue.pop()
            if info is None:
                return
            try:
                if isinstance(info, QueuedPodGroupInfo):
                    self.workload_cycle.schedule_group(info)
                else:
                    self.schedule_one(info)
            except Exception:
                log.exception("scheduling %s", info.key)
                self.queue.add_unschedulable(info, error=True)
            await asyncio.sleep(0)

    # --- the cycle ---------------------------------------------------------

    def cycle_state(self) -> CycleState:
        """A new cycle's state; one cycle in ten records its plugins' durations (for a pod group's
        trial placements too: a 1024-pod gang is 1024 cycles). Drawn with `random()` (C), not
        `randrange` (~70 bytecodes of Python per cycle)."""
        return CycleState(self._metrics_rng.random() * 100 < PLUGIN_METRICS_SAMPLE_PERCENT)

    def schedule_one(self, info: PodInfo) -> None:
        pod = info.pod
        fwk = self.frameworks[(pod.get("spec") or {}).get("schedulerName") or "default-scheduler"]
        start = self.clock.monotonic()
        if pod["metadata"].get("deletionTimestamp") or self.cache.is_assumed(info.uid):
            self.queue.done(info)
            return
        state = self.cycle_state()
        if self.snapshot.generation != self.cache.generation:  # no call while nothing changed
            self.cache.update_snapshot(self.snapshot)
        last = info.last_failure
        if last is not None and last.pod is info.pod and last.key == self._failure_key(fwk):
            self._repeat_failure(fwk, info, last, start)
            return
        try:
            node, _, _ = self.algorithm.schedule(fwk, state, info, self.snapshot)
        except FitError as e:
            preemptions = self.metrics.preemption_attempts.value
            nominated, st = fwk.run_post_filter(state, info, e.statuses)
            if st is not None:
                e.post_filter_msg = st.message()
            info.unschedulable_plugins = e.plugins()
            message = str(e)
            if nominated is None and not info.group and not state.read_clock and (st is None or st.code != Code.ERROR):
                info.last_failure = Failure(info.pod, self._failure_key(fwk), message, info.unschedulable_plugins,
                                            e.searched, self.metrics.preemption_attempts.value - preemptions)
            self._failed(fwk, info, "Unschedulable", message, start)
            return
        except PluginError as e:
            self._failed(fwk, info, "SchedulerError", str(e), start, error=True)
            return
        self.metrics.algorithm_duration.observe(self.clock.monotonic() - start)  # a host found, as upstream's
        self.cache.assume(info, node)
        st = fwk.run_reserve(state, info, node)
        if st is None:
            st = fwk.run_permit(state, info, node)
        if st is not None and st.code != Code.WAIT:
            self._unreserved(fwk, state, info, node, st, start)
            return
        self.spawn(self._bind(fwk, state, info, node, start))

    def _repeat_failure(self, fwk: Framework, info: PodInfo, last: Failure, start: float) -> None:
        """A retry of a pod that found no node, with nothing it depends on changed since (the 5-minute
        flush of the unschedulable pods, an event its plugins registered for that changed nothing
        they read): the last attempt's outcome again, with its effects on the search's start and the
        preemption attempts counted, and its FailedScheduling event recorded and the pod requeued
        as every failed attempt."""
        self.algorithm.repeat_failure(last.searched)
        if last.preemption_attempts:
            self.metrics.preemption_attempts.inc(last.preemption_attempts)
        info.unschedulable_plugins = last.plugins
        self._failed(fwk, info, "Unschedulable", last.message, start)

    def _unreserved(self, fwk: Framework, state: CycleState, info: PodInfo, node: str, st: Status,
                    start: float) -> None:
        """A reserved pod's Reserve, Permit or binding failed: its reservations are undone and the
        attempt fails, Unschedulable by the plugin that said so or a SchedulerError."""
        fwk.run_unreserve(state, info, node)
        self.cache.forget(info)
        if state.pop(_NOMINATED, False):  # upstream's clearNominatedNode on a binding cycle's failure
            self.spawn(self._write(self.api.nominate(info.pod, None)))
        if st.unschedulable:
            info.unschedulable_plugins = {st.plugin}
        self._failed(fwk, info, "Unschedulable" if st.unschedulable else "SchedulerError",
                     st.message(), start, error=not st.unschedulable)

    async def _bind(self, fwk: Framework, state: CycleState, info: PodInfo, node: str, start: float) -> None:
        try:
            if fwk.will_wait_on_permit(info) or fwk.run_pre_bind_pre_flights(state, info, node):
                state[_NOMINATED] = True
                await self._expect(info.pod, node)
            st: Status | None = await fwk.wait_on_permit(info)
            if st is None:
                st = await fwk.run_pre_bind(state, info, node)
            if st is None:
                st = await fwk.run_bind(state, info, node)
        except APIError as e:  # e.g. the pod or its claim was deleted while it waited or bound
            st = Status(Code.ERROR, [e.message])
        except EXPECTED as e:  # the server gone or the connection cut mid-request: an error to retry, not a bug
            log.error("binding %s/%s to %s failed: %s", info.pod["metadata"].get("namespace"),
                      info.pod["metadata"]["name"], node, e)
            st = Status(Code.ERROR, [f"binding failed: {e}"])
        except Exception as e:  # a plugin's bug fails this attempt; it must not end the task unseen
            log.exception("binding %s/%s to %s failed", info.pod["metadata"].get("namespace"),
                          info.pod["metadata"]["name"], node)
            st = Status(Code.ERROR, [f"binding failed: {e}"])
        if st is not None:
            self._unreserved(fwk, state, info, node, st, start)
            return
        now = self.clock.monotonic()
        prof = fwk.profile.scheduler_name
        self.metrics.schedule_attempts.labels("scheduled", prof).inc()
        self.metrics.attempt_duration.labels("scheduled", prof).observe(now - start)
        self.metrics.pod_scheduled(info.attempts, now - info.initial_timestamp)
        self.queue.done(info)
        fwk.run_post_bind(state, info, node)
        md = info.pod["metadata"]
        if log.isEnabledFor(_V2):  # kube-scheduler's V(2) line for a bound pod (`-v=2`, `--vmodule=scheduler=2`)
            log.log(_V2, "Successfully bound pod to node",
                    extra=logs.values(pod=logs.obj(md.get("namespace"), md["name"]), node=node))
        await self._write(self.api.event(info.pod, "Normal", "Scheduled",
                                         f"Successfully assigned {md.get('namespace')}/{md['name']} to {node}"))

    async def _expect(self, pod: dict, node: str) -> None:
        """NominatedNodeNameForExpectation (beta, on since 1.35): before a Permit wait or a PreBind
        with work to do, status.nominatedNodeName tells other components (an autoscaler, a
        restarted scheduler) where the pod is going; the binding clears it, and so does a failure
        of the binding cycle (`_unreserved`). A failed write does not stop the binding."""
        try:
            await self.api.nominate(pod, node)
        except APIError as e:
            log.info("nominating %s/%s to %s: %s", pod["metadata"].get("namespace"), pod["metadata"]["name"], node,
                     e.message)

    def _failed(self, fwk: Framework, info: PodInfo, reason: str, message: str, start: float,
                error: bool = False) -> None:
        key = (error, fwk)
        series = self._failure_series.get(key)
        if series is None:
            prof, result = fwk.profile.scheduler_name, "error" if error else "unschedulable"
            series = self._failure_series[key] = (self.metrics.schedule_attempts.labels(result, prof),
                                                  self.metrics.attempt_duration.labels(result, prof))
        series[0].inc()
        series[1].observe(self.clock.monotonic() - start)
        if info.group:
            self.queue.return_to_group(info)
        else:
            self.queue.add_unschedulable(info, error=error)
        event = self.api.record_event(info.pod, "Warning", "FailedScheduling", message)
        reported = not self._needs_status_patch(info.pod, reason, message)
        if event is not None or not reported:
            self._submit((event, info.pod, reason, message, reported))

    def spawn(self, coro) -> None:
        """Runs an API write or binding in the background, cancelled on stop. Finished tasks leave
        `_binds` in sweeps, once it has doubled since the last one, not through a done callback
        each (a callback is one more handle for the loop to run per pending pod's report)."""
        binds = self._binds
        binds.add(asyncio.get_running_loop().create_task(coro))
        if len(binds) >= self._sweep_at:
            self._binds = binds = {t for t in binds if not t.done()}
            self._sweep_at = max(_MIN_SWEEP, 2 * len(binds))

    def _submit(self, report: tuple) -> None:
        """Queues a failure report (`_report`'s arguments: its Event's write, then PodScheduled=False)
        for the reporters: at most REPORTERS long-lived tasks that take the reports in turn, as
        upstream's API dispatcher runs its calls on a bounded pool. A task per report cost ~25 k
        instructions to create, of a pending pod's ~440 k in the scheduler. The queue holds plain
        values, so a stop that drops it leaves no coroutine unawaited."""
        self._reports.append(report)
        if self._idle:
            self._idle.pop().set_result(None)
        elif len(self._reporters) < REPORTERS:
            self._reporters.add(asyncio.get_running_loop().create_task(self._reporter()))

    async def _reporter(self) -> None:
        """Writes queued reports until there are none, then waits to be handed more."""
        idle = None
        try:
            while True:
                while self._reports:
                    try:
                        await self._report(*self._reports.popleft())
                    except EXPECTED as e:  # (the server unreachable: the pod's next attempt reports again)
                        log.error("writing a failure report failed: %s", e)
                    except Exception:
                        log.exception("writing a failure report")
                idle = asyncio.get_running_loop().create_future()
                self._idle.append(idle)
                await idle
        finally:
            self._reporters.discard(asyncio.current_task())
            if idle is not None and idle in self._idle:
                self._idle.remove(idle)

    async def _report_failure(self, pod: dict, reason: str, message: str) -> None:
        """A gang member's failure, as `_failed` reports a pod's."""
        await self._report(self.api.record_event(pod, "Warning", "FailedScheduling", message), pod, reason, message,
                           not self._needs_status_patch(pod, reason, message))

    def _needs_status_patch(self, pod: dict, reason: str, message: str) -> bool:
        """Whether a failed attempt must patch PodScheduled=False: not when the pod says so already,
        nor when this scheduler sent the same patch for this version of the pod, which the
        informer has not delivered yet (a retry at the same instant). Upstream's API dispatcher
        skips such a call as a no-op against the pod status its cache synced from the last call;
        each repeat would bump the resourceVersion and so start a new FailedScheduling series.
        Records the patch it asks for."""
        if _already_reported(pod, reason, message):
            return False
        md = pod["metadata"]
        sent = (md.get("resourceVersion"), reason, message)
        uid = md.get("uid", "")
        if self._sent_status.get(uid) == sent:
            return False
        self._sent_status[uid] = sent
        return True

    async def _report(self, event, pod: dict, reason: str, message: str, reported: bool = False) -> None:
        """The FailedScheduling event's write (if it needs one), then PodScheduled=False unless the
        pod says so already."""
        await self.api.write(event)
        if not reported:
            try:
                await self.api.set_unschedulable(pod, reason, message)
            except EXPECTED as e:
                log.info("scheduler write failed: %s", e.message if isinstance(e, APIError) else e)
                md = pod["metadata"]  # not sent after all: the next attempt tries again
                uid = md.get("uid", "")
                if self._sent_status.get(uid) == (md.get("resourceVersion"), reason, message):
                    del self._sent_status[uid]

    async def _write(self, coro) -> None:
        try:
            await coro
        except APIError as e:
            log.info("scheduler write failed: %s", e.message)
