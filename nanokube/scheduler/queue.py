"""The scheduling queue: activeQ (a heap in QueueSort order), backoffQ
(pods waiting out 1s→10s exponential backoff) and the unschedulable pool
(pods that wait for a cluster event one of their rejecting plugins
registered for, and whose queueing hint says it may help)."""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
from collections.abc import Callable

from .framework import (
    UNSCHEDULED_POD,
    ClusterEvent,
    Framework,
    Hint,
    PodInfo,
    Registration,
    pod_update_events,
    pod_update_kinds,
)
from .metrics import Metrics
from ..machinery.podgroups import group_key

INITIAL_BACKOFF = 1.0
MAX_BACKOFF = 10.0
MAX_IN_UNSCHEDULABLE = 300.0  # podMaxInUnschedulablePodsDuration
#: the backoffQ flush ticks every second; every 30th tick also flushes the unschedulable leftovers
FLUSH_UNSCHEDULABLE_TICKS = 30
#: cluster events kept for the pods in flight; past this, a failing pod backs off instead of
#: having each event's hint checked (a bound on memory while one pod waits long in Permit)
MAX_IN_FLIGHT_EVENTS = 10_000


class QueuedPodGroupInfo:
    """One queue entry for the pending pods of a PodGroup, queued like a pod
    (by group priority, then timestamp); the workload cycle schedules it."""

    def __init__(self, group: str, priority: int, now: float) -> None:
        self.group = group
        self.key = f"podgroup/{group}"
        self.priority = priority
        self.members: dict[str, PodInfo] = {}
        self.attempts = 0
        self.initial_timestamp = self.timestamp = now
        self.backoff_expires = 0.0
        self.unschedulable_plugins: set[str] = set()
        self.gated_by = ""
        self.in_flight_since = 0

    @property
    def pod(self) -> dict:
        """A representative member, for the profile and queueing hints."""
        return next(iter(self.members.values())).pod


class UnschedulablePods(dict):
    """The unschedulable pool (key -> PodInfo, in arrival order), indexed by the plugins that
    rejected each pod, so a cluster event visits only the pods whose rejecting plugins registered
    for it: with thousands of pods that fit nowhere, each bound pod's event would otherwise walk
    them all. It also counts the gated pods and indexes the gated members of each PodGroup, so
    neither the pending gauge nor a group's activation walks the pool (a 1024-pod gang waits
    gated member by member until its last one arrives). Its overrides (and InFlight's) call
    dict's methods directly: `super()` builds an object per call, and every pending pod calls them."""

    def __init__(self) -> None:
        super().__init__()
        self.by_plugin: dict[str, dict[str, None]] = {}
        #: the gated pods apart, by the plugin whose PreEnqueue turned them away: events skip them
        #: (their plugin retries them), so each claim created does not walk every pod still waiting for one
        self.gated_by_plugin: dict[str, dict[str, None]] = {}
        self.gated_in_group: dict[str, dict[str, None]] = {}
        self.gated = 0
        #: the PodGroup entries here: a hint asked of one reads a member, which an event's targets may not name
        self.group_entries: dict[str, None] = {}
        #: key -> its rejecting plugins, its group if gated, and its place in arrival order
        self._meta: dict[str, tuple[tuple[str, ...], str | None, int]] = {}
        self._arrivals = itertools.count()

    def __setitem__(self, key: str, info) -> None:
        # a key already here keeps its place in the dict, so it keeps its arrival number
        if key in self:
            seq = self._meta[key][2]
            self._unindex(key)
        else:
            seq = next(self._arrivals)
        dict.__setitem__(self, key, info)
        plugins = tuple(info.unschedulable_plugins)
        group = None
        if info.gated_by:
            self.gated += 1
            group = "" if isinstance(info, QueuedPodGroupInfo) else (info.group or "")
            if group:
                self.gated_in_group.setdefault(group, {})[key] = None
        self._meta[key] = plugins, group, seq
        if isinstance(info, QueuedPodGroupInfo):
            self.group_entries[key] = None
        index = self.gated_by_plugin if info.gated_by else self.by_plugin
        for p in plugins:
            keys = index.get(p)
            if keys is None:
                keys = index[p] = {}
            keys[key] = None

    def _unindex(self, key: str) -> None:
        plugins, group, _ = self._meta.pop(key, ((), None, 0))
        self.group_entries.pop(key, None)
        index = self.by_plugin if group is None else self.gated_by_plugin
        for p in plugins:
            keys = index.get(p)
            if keys is not None:
                keys.pop(key, None)
                if not keys:
                    del index[p]
        if group is not None:
            self.gated -= 1
            keys = self.gated_in_group.get(group)
            if keys is not None:
                keys.pop(key, None)
                if not keys:
                    del self.gated_in_group[group]

    def __delitem__(self, key: str) -> None:
        dict.__delitem__(self, key)
        self._unindex(key)

    _MISSING = object()

    def pop(self, key: str, default=_MISSING):
        if key in self:
            self._unindex(key)
            return dict.pop(self, key)
        if default is self._MISSING:
            raise KeyError(key)
        return default

    def gated_members(self, group: str):
        """The gated pods of PodGroup `group`, in arrival order, each taken
        out of the pool as it is yielded; one put back (gated again) goes
        behind the rest and is not yielded again. Lazy, so a walk that stops
        at its first member costs nothing for the others."""
        keys = self.gated_in_group.get(group)
        for _ in range(len(keys) if keys else 0):
            if not keys:
                return
            info = self[next(iter(keys))]
            del self[info.key]
            yield info

    def rejected_by(self, plugins, gated: bool = False, narrowed: dict | None = None) -> list:
        """The pods any of `plugins` rejected (in a scheduling attempt, or with `gated` in
        PreEnqueue), in arrival order: a walk of the pool when they are a good part of it, else a
        sort of just their keys (a bound pod's event concerns none of thousands of pods a
        nodeSelector keeps out). `narrowed` (plugin -> keys) keeps, of a plugin's pods, only
        those keys and the PodGroup entries."""
        index = self.gated_by_plugin if gated else self.by_plugin
        keys: set[str] = set()
        for p in plugins:
            mine = index.get(p)
            if not mine:
                continue
            only = narrowed.get(p) if narrowed else None
            if only is None:
                keys.update(mine)
            else:
                keys.update(k for k in only if k in mine)
                keys.update(k for k in self.group_entries if k in mine)
        if not keys:
            return []
        if len(keys) * 4 >= len(self):
            return [info for key, info in self.items() if key in keys]
        meta = self._meta
        return [self[k] for k in sorted(keys, key=lambda k: meta[k][2])]


class InFlight(dict):
    """The pods being scheduled or bound (key -> PodInfo), counting how many
    started at each event sequence number, so the oldest one still in
    flight is found without walking them all (a gang binds a thousand at once)."""

    def __init__(self) -> None:
        super().__init__()
        self._since: dict[int, int] = {}

    def __setitem__(self, key: str, info) -> None:
        old = self.get(key)
        if old is not None:
            self._forget(old.in_flight_since)
        dict.__setitem__(self, key, info)
        self._since[info.in_flight_since] = self._since.get(info.in_flight_since, 0) + 1

    def __delitem__(self, key: str) -> None:
        self._forget(self[key].in_flight_since)
        dict.__delitem__(self, key)

    def _forget(self, since: int) -> None:
        n = self._since[since] - 1
        if n:
            self._since[since] = n
        else:
            del self._since[since]

    def oldest(self) -> int:
        return min(self._since)


class SchedulingQueue:
    def __init__(self, frameworks: dict[str, Framework], clock, metrics: Metrics,
                 initial_backoff: float = INITIAL_BACKOFF, max_backoff: float = MAX_BACKOFF) -> None:
        self.frameworks = frameworks
        self.clock = clock
        self.metrics = metrics
        self.initial_backoff, self.max_backoff = initial_backoff, max_backoff
        self.active: list[tuple] = []
        self.active_keys: dict[str, PodInfo] = {}
        self.backoff: dict[str, PodInfo] = {}
        self.unschedulable = UnschedulablePods()
        self.in_flight = InFlight()
        self.groups: dict[str, QueuedPodGroupInfo] = {}  # group key -> its entry
        self.group_priority = lambda group: 0
        self.registrations: dict[str, list[Registration]] = {}
        for fwk in frameworks.values():
            self.registrations.update(fwk.registrations())
        self._interest: dict[tuple[str, int], tuple[str, ...]] = {}
        #: the plugins registered for some event of a pending pod's own update (set at the first update)
        self._update_plugins: frozenset[str] | None = None
        self.scheduling_cycle = 0
        #: registered cluster events that arrived while pods were in flight, numbered, so a pod
        #: that fails is checked against exactly the events of its own attempt (upstream's
        #: inFlightEvents): one its rejecting plugins' hints say may help sends it to backoff,
        #: any other event leaves it waiting in the unschedulable pool
        self.in_flight_events: list[tuple[int, ClusterEvent, dict | None, dict | None]] = []
        self._event_seq = 0
        self._dropped_upto = 0
        self._seq = itertools.count()
        self._wake = asyncio.Event()
        #: True only while `_wake` is set (pop clears both)
        self._woken = False
        #: set whenever backoffQ or the unschedulable pool may hold a pod for the flushers
        self._flushable = asyncio.Event()
        self._flush_woken = False
        #: while the flushers sleep towards a tick: the tick before it (a pod whose backoff ends by
        #: then must wake them) and the future that wakes them early
        self._nap_before = float("inf")
        self._nap: asyncio.Future | None = None
        self._closed = False
        metrics.pending_from(self._pending_counts)
        #: queue_incoming's labels(queue, event), bound once: each pod's arrival and failure count here,
        #: the two hot sites through `_series` (its series by (queue, event)) without a call
        self._incoming = metrics.queue_incoming.labels
        self._series: dict[tuple[str, str], object] = {}

    def _fwk(self, pod: dict) -> Framework:
        return self.frameworks[(pod.get("spec") or {}).get("schedulerName") or "default-scheduler"]

    def _gauge(self) -> None:
        """Wakes the flushers once backoffQ or the unschedulable pool holds a pod they may move
        (`_flush_woken` mirrors the event, so a call while it is set costs no `Event.set`), and
        the sleeping flushers once both are empty."""
        if self.backoff or len(self.unschedulable) > self.unschedulable.gated:
            if not self._flush_woken:
                self._flush_woken = True
                self._flushable.set()
        elif self._nap is not None and not self._nap.done():  # emptied: the next tick sends them idle
            self._nap.set_result(None)

    def _pending_counts(self) -> tuple[int, int, int, int]:
        gated = self.unschedulable.gated
        return len(self.active_keys), len(self.backoff), len(self.unschedulable) - gated, gated

    def _push_active(self, info: PodInfo, event: str) -> None:
        key = self._fwk(info.pod).queue_sort.sort_key(info)
        heapq.heappush(self.active, (key, next(self._seq), info))
        self.active_keys[info.key] = info
        (self._series.get(("active", event)) or self._new_series("active", event)).inc()
        if not self._woken:  # set while the loop has not emptied activeQ since: no Event.set call
            self._woken = True
            self._wake.set()

    def _new_series(self, queue: str, event: str):
        series = self._series[queue, event] = self._incoming(queue, event)
        return series

    def _gate(self, info: PodInfo, event: str) -> bool:
        """Runs PreEnqueue; a rejected pod is parked as gated."""
        st = self._fwk(info.pod).run_pre_enqueue(info)
        if st is None:
            info.gated_by = ""
            return False
        info.gated_by = st.plugin
        info.unschedulable_plugins = {st.plugin}
        self.unschedulable[info.key] = info
        self._incoming("unschedulable", event).inc()
        return True

    def add(self, pod: dict) -> None:
        info = PodInfo(pod, self.clock.monotonic())
        if not self._gate(info, "PodAdd"):
            self._enter(info, "PodAdd")
            if info.group is not None:  # its group's entry may have gone to backoffQ
                self._gauge()

    def _enter(self, info: PodInfo, event: str) -> None:
        """A pod past PreEnqueue: into activeQ, or into its group's entry
        (a new member requeues a group waiting in the unschedulable pool)."""
        group = info.group
        if group is None:
            self._push_active(info, event)
            return
        entry = self.groups.get(group)
        if entry is None:
            entry = self.groups[group] = QueuedPodGroupInfo(group, self.group_priority(group), info.timestamp)
            entry.members[info.key] = info
            self._push_active(entry, event)
            return
        entry.members[info.key] = info
        if self.unschedulable.pop(entry.key, None) is not None:
            self._requeue(entry, event)

    def _readmit(self, info: PodInfo, event: str) -> None:
        """A parked pod let back in: a group member rejoins its group's
        entry (never scheduled alone), any other pod is requeued."""
        if not isinstance(info, QueuedPodGroupInfo) and info.group is not None:
            self._enter(info, event)
        else:
            self._requeue(info, event)

    def retry_gated(self, plugin: str, event: str, concerns: Callable[[PodInfo], bool] | None = None,
                    keys=None) -> None:
        """Re-runs PreEnqueue for the pods `plugin` turned away (those the
        event `concerns`, when given), after an event that may let them in
        (a claim created for them). `keys`, when given, are the only pods the
        event can concern (the caller's index says so), so the pool is not walked."""
        if keys is None:
            infos = self.unschedulable.rejected_by((plugin,), gated=True)
        else:
            infos = [self.unschedulable[k] for k in keys if k in self.unschedulable]
        for info in infos:
            if info.gated_by == plugin and (concerns is None or concerns(info)):
                del self.unschedulable[info.key]
                if not self._gate(info, event):
                    self._readmit(info, event)
        self._gauge()

    def activate_group(self, group: str, event: str) -> None:
        """Re-runs PreEnqueue for the group's gated members and requeues its
        entry: on PodGroup add, member add and minCount decrease. A member
        turned away by a plugin whose verdict is the same for the whole
        group (`group_wide`) stops the walk: the rest would be too."""
        for info in self.unschedulable.gated_members(group):
            if not self._gate(info, event):
                self._enter(info, event)
            elif getattr(self._fwk(info.pod).plugins.get(info.gated_by), "group_wide", False):
                break
        entry = self.groups.get(group)
        if entry is not None and self.unschedulable.pop(entry.key, None) is not None:
            self._requeue(entry, event)
        self._gauge()

    def regate_group(self, entry: QueuedPodGroupInfo) -> bool:
        """A group fallen below what PreEnqueue admits (a member deleted,
        minCount raised) waits there again, as upstream's PreEnqueue on every
        move to activeQ would keep it, until an event lets it in (member add,
        minCount decrease); False, the entry left as is, when PreEnqueue
        admits it."""
        first = next(iter(entry.members.values()))
        if self._fwk(first.pod).run_pre_enqueue(first) is None:
            return False
        self._ungroup(entry, "ScheduleAttemptFailure", self._enter)
        return True

    def dissolve_group(self, entry: QueuedPodGroupInfo) -> None:
        """The group's PodGroup is gone: its members wait in PreEnqueue again."""
        self._ungroup(entry, "PodGroupDelete", self._push_active)

    def _ungroup(self, entry: QueuedPodGroupInfo, event: str, admit: Callable[[PodInfo, str], None]) -> None:
        """Drops the group's entry; each member goes through PreEnqueue again, `admit` taking those it lets in."""
        self.done(entry)
        self.groups.pop(entry.group, None)
        for info in entry.members.values():
            if not self._gate(info, event):
                admit(info, event)
        self._gauge()

    def _where(self, key: str) -> PodInfo | None:
        found = self.active_keys.get(key) or self.backoff.get(key) or self.unschedulable.get(key) or self.in_flight.get(key)
        if found is None:
            for entry in self.groups.values():
                if key in entry.members:
                    return entry.members[key]
        return found

    def update(self, old: dict, new: dict) -> None:
        """A pending pod's own update, weighed as upstream's Update with queueing hints: each
        scheduling-relevant change is an UnscheduledPod event that moves the pod out of the
        unschedulable pool only when a plugin that rejected it says the change may help (its
        gates are gone, a toleration was added, it asks for less); a label change or a status
        write (the scheduler's own PodScheduled=False patch) leaves it waiting. A pod in flight
        has the change recorded among its attempt's events instead."""
        md = new["metadata"]
        key = f"{md.get('namespace', '')}/{md['name']}"
        info = self._where(key)
        if info is None:
            self.add(new)
            return
        info.update(new)
        if self.in_flight.get(key) is info:
            for event in pod_update_events(UNSCHEDULED_POD, old, new):
                self._record(event, old, new)
        elif key in self.unschedulable:
            plugins = self._update_plugins
            if plugins is None:
                plugins = self._update_plugins = frozenset(
                    name for event in pod_update_kinds(UNSCHEDULED_POD) for name in self._interested(event)[0])
            if plugins.isdisjoint(info.unschedulable_plugins):
                return  # no event of this update can concern a plugin that rejected the pod (NodeAffinity's)
            for event in pod_update_events(UNSCHEDULED_POD, old, new):
                if self._worth_retrying(info, event, old, new):
                    del self.unschedulable[key]
                    if not self._gate(info, event.label):
                        self._readmit(info, event.label)
                    self._gauge()
                    return

    def delete(self, pod: dict) -> None:
        md = pod["metadata"]
        key = f"{md.get('namespace', '')}/{md['name']}"
        self.backoff.pop(key, None)
        self.unschedulable.pop(key, None)
        if self.active_keys.pop(key, None) is not None:
            self.active = [e for e in self.active if e[2].key != key]
            heapq.heapify(self.active)
        group = group_key(pod)
        entry = self.groups.get(group) if group else None
        if entry is not None and entry.members.pop(key, None) is not None and not entry.members:
            self._drop_group(entry)
        self._gauge()

    def _drop_group(self, entry: QueuedPodGroupInfo) -> None:
        del self.groups[entry.group]
        self.backoff.pop(entry.key, None)
        self.unschedulable.pop(entry.key, None)
        self.active_keys.pop(entry.key, None)

    async def pop(self) -> PodInfo | None:
        """The next pod to schedule, waiting for one; None once closed."""
        while True:
            if self._closed:
                return None
            while self.active:
                _, _, info = heapq.heappop(self.active)
                if self.active_keys.get(info.key) is info:
                    del self.active_keys[info.key]
                    return self._start_attempt(info)
            info = self._pop_backoff()
            if info is not None:
                return info
            self._woken = False
            self._wake.clear()
            await self._wake.wait()

    def _pop_backoff(self) -> PodInfo | None:
        """SchedulerPopFromBackoffQ (KEP-5142): with activeQ empty, the pod
        whose backoff ends first (by 1-s window, then in QueueSort order)
        is tried at once instead of leaving the scheduler idle. Pods backing
        off after an error (no rejecting plugin) wait out their backoff."""
        best = best_key = None
        for info in self.backoff.values():
            if not info.unschedulable_plugins:
                continue
            key = (int(info.backoff_expires), self._fwk(info.pod).queue_sort.sort_key(info))
            if best is None or key < best_key:
                best, best_key = info, key
        if best is None:
            return None
        del self.backoff[best.key]
        self._gauge()
        return self._start_attempt(best)

    def _start_attempt(self, info: PodInfo) -> PodInfo:
        """A popped pod is in flight: the events from now on are the ones its attempt is judged by."""
        info.attempts += 1
        self.scheduling_cycle += 1
        info.in_flight_since = self._event_seq
        self.in_flight[info.key] = info
        return info

    def done(self, info: PodInfo) -> None:
        """The pod's scheduling attempt finished (bound, or requeued); events no pod in flight
        can still need are forgotten."""
        if self.in_flight.get(info.key) is info:
            del self.in_flight[info.key]
            if not self.in_flight:
                self.in_flight_events.clear()
            elif self.in_flight_events:
                oldest = self.in_flight.oldest()
                if self.in_flight_events[0][0] <= oldest:
                    self.in_flight_events = [e for e in self.in_flight_events if e[0] > oldest]

    def _moved_while_in_flight(self, info: PodInfo) -> bool:
        """Whether an event during this pod's attempt may have made it schedulable."""
        since = info.in_flight_since
        if since < self._dropped_upto:
            return True
        return bool(self.in_flight_events) and any(seq > since and self._worth_retrying(info, event, old, new)
                   for seq, event, old, new in self.in_flight_events)

    def group_done(self, entry: QueuedPodGroupInfo, error: bool = False) -> None:
        """The group's cycle finished: pods left in it wait for an event (or
        back off after an error); an empty entry leaves the queue."""
        if entry.members:
            self.add_unschedulable(entry, error=error)
        else:
            self.done(entry)
            if self.groups.get(entry.group) is entry:
                del self.groups[entry.group]
            self._gauge()

    def return_to_group(self, info: PodInfo) -> None:
        """A group member whose binding failed rejoins its group's entry."""
        self.done(info)
        group = info.group
        entry = self.groups.get(group)
        if entry is not None:
            entry.members[info.key] = info
            return
        entry = self.groups[group] = QueuedPodGroupInfo(group, self.group_priority(group), self.clock.monotonic())
        entry.members[info.key] = info
        self.add_unschedulable(entry, error=True)

    def backoff_duration(self, info: PodInfo) -> float:
        """initial * 2^(attempts-1), at most max: doubled only while below max, as upstream's
        calculateBackoffDuration (a pod retried over a thousand times overflowed the float)."""
        d = self.initial_backoff
        for _ in range(info.attempts - 1):
            if d >= self.max_backoff:
                break
            d += d
        return min(d, self.max_backoff)

    def _requeue(self, info: PodInfo, event: str) -> None:
        if info.backoff_expires > self.clock.monotonic():
            self.backoff[info.key] = info
            self._incoming("backoff", event).inc()
            self._wake.set()
            self._backed_off(info)
        else:
            self._push_active(info, event)

    def add_unschedulable(self, info: PodInfo, error: bool = False) -> None:
        """Requeues a pod whose attempt in `cycle` failed: to backoffQ when it
        failed with an error or a move request came in meanwhile, otherwise
        to the unschedulable pool."""
        moved = error or not info.unschedulable_plugins or info.in_flight_since < self._dropped_upto or \
            bool(self.in_flight_events) and self._moved_while_in_flight(info)  # no call while no event is kept
        self.done(info)
        if info.key in self.active_keys or info.key in self.backoff or info.key in self.unschedulable:
            return
        now = self.clock.monotonic()
        info.timestamp = now
        info.backoff_expires = now + (min(self.initial_backoff, self.max_backoff) if info.attempts <= 1
                                      else self.backoff_duration(info))
        if moved:
            self.backoff[info.key] = info
            self._incoming("backoff", "ScheduleAttemptFailure").inc()
            self._wake.set()
            self._backed_off(info)
        else:
            self.unschedulable[info.key] = info
            (self._series.get(("unschedulable", "ScheduleAttemptFailure"))
             or self._new_series("unschedulable", "ScheduleAttemptFailure")).inc()
        self._gauge()

    def flush_backoff_completed(self) -> None:
        now = self.clock.monotonic()
        for key, info in list(self.backoff.items()):
            if info.backoff_expires <= now:
                del self.backoff[key]
                self._push_active(info, "BackoffComplete")
        self._gauge()

    def flush_unschedulable_leftover(self) -> None:
        now = self.clock.monotonic()
        for key, info in list(self.unschedulable.items()):
            if not info.gated_by and now - info.timestamp > MAX_IN_UNSCHEDULABLE:
                del self.unschedulable[key]
                self._requeue(info, "UnschedulableTimeout")
        self._gauge()

    def _worth_retrying(self, info: PodInfo, event: ClusterEvent, old, new) -> bool:
        interested = self._interested(event)[0]  # cached: a pending pod's status write concerns no plugin
        for plugin in info.unschedulable_plugins:
            if plugin not in interested:
                continue
            for reg in self.registrations[plugin]:
                if reg.event.matches(event) and (reg.hint is None or reg.hint(info.pod, old, new) == Hint.QUEUE):
                    return True
        return False

    def _interested(self, event: ClusterEvent) -> tuple[tuple[str, ...], tuple[tuple[str, tuple], ...]]:
        """The plugins with a registration the event matches, and of those, the ones whose every
        matching registration names its hint's targets, with those registrations (cached per
        resource and action)."""
        key = (event.resource, int(event.action))
        found = self._interest.get(key)
        if found is None:
            names, targeted = [], []
            for name, regs in self.registrations.items():
                matching = tuple(reg for reg in regs if reg.event.matches(event))
                if matching:
                    names.append(name)
                    if all(reg.hint is not None and reg.targets is not None for reg in matching):
                        targeted.append((name, matching))
            found = self._interest[key] = tuple(names), tuple(targeted)
        return found

    @staticmethod
    def _narrowed(targeted, old, new) -> dict[str, set[str]] | None:
        """Plugin -> the only pods its hints can queue after this change (see Registration.targets)."""
        narrowed = None
        for name, regs in targeted:
            keys: set[str] = set()
            for reg in regs:
                found = reg.targets(old, new)
                if found is None:
                    break
                keys.update(found)
            else:
                if narrowed is None:
                    narrowed = {}
                narrowed[name] = keys
        return narrowed

    def _record(self, event: ClusterEvent, old: dict | None, new: dict | None) -> None:
        """Keeps a registered event for the attempts in flight (upstream's inFlightEvents)."""
        if self.in_flight and self._interested(event)[0]:
            self._event_seq += 1
            self.in_flight_events.append((self._event_seq, event, old, new))
            if len(self.in_flight_events) > MAX_IN_FLIGHT_EVENTS:
                self._dropped_upto = self.in_flight_events.pop(0)[0]

    def on_event(self, event: ClusterEvent, old: dict | None, new: dict | None) -> None:
        """A cluster event: moves the unschedulable pods it may help. One no
        plugin registered for (a pod's status update) cannot help any pod,
        so it does not send the pods in flight to backoff either."""
        interested, targeted = self._interested(event)
        if not interested:
            return
        self._record(event, old, new)
        narrowed = self._narrowed(targeted, old, new) if targeted else None
        for info in self.unschedulable.rejected_by(interested, narrowed=narrowed):
            if info.gated_by or not self._worth_retrying(info, event, old, new):
                continue
            del self.unschedulable[info.key]
            self._requeue(info, event.label or f"{event.resource}{event.action.name}")
        self._gauge()

    def _backed_off(self, info: PodInfo) -> None:
        """Wakes the sleeping flushers when the pod's backoff ends before the tick they sleep towards."""
        if info.backoff_expires <= self._nap_before and self._nap is not None and not self._nap.done():
            self._nap.set_result(None)

    def _next_flush(self, last: float, ticks: int) -> tuple[float, float, int]:
        """The first tick after tick number `ticks` (at `last`) that may do something: one at or
        past the earliest backoff expiry, a 30th past the oldest unschedulable pod's 5 minutes,
        or, both queues being empty, the next one (where a 1-s loop goes idle), at most 360 ticks
        on. Returns the tick before it, its time and its number; the ticks passed over move no pod.
        Each condition's first tick is counted from the times, not found by visiting the ticks
        (a walk of up to 360 of them was ~100 us a call, once per wake-up of the flushers)."""
        inf = float("inf")
        expiry = min((info.backoff_expires for info in self.backoff.values()), default=inf)
        oldest = min((info.timestamp for info in self.unschedulable.values() if not info.gated_by), default=inf)
        most = 2 * FLUSH_UNSCHEDULABLE_TICKS + int(MAX_IN_UNSCHEDULABLE)
        k = most + 1
        if expiry < inf:
            k = _first_tick(last, lambda t: t >= expiry, expiry - last, k)
        if oldest < inf:
            old = _first_tick(last, lambda t: t - oldest > MAX_IN_UNSCHEDULABLE, oldest + MAX_IN_UNSCHEDULABLE - last, k)
            k = min(k, old + (-(ticks + old)) % FLUSH_UNSCHEDULABLE_TICKS)
        if expiry == oldest == inf:
            now = self.clock.monotonic()
            k = _first_tick(last, lambda t: t > now, now - last, k)
        if k > most:
            return last + most, last + most, ticks + most
        return last + (k - 1), last + k, ticks + k

    async def run_flushers(self) -> None:
        """Upstream's two periodic flushes: backoffQ every second, pods left in
        the unschedulable pool too long every 30, with every pod moved at the
        tick a 1-s loop moves it at, but ticks that can move none slept through:
        the loop sleeps to the first tick that reaches a backoff expiry or a
        5-minute deadline, woken early by a pod whose backoff ends sooner or by
        both queues emptying (a 1-s loop goes idle at the next tick). A virtual
        clock is thus not woken 300 times for one pod left waiting. While both
        are empty the loop waits for a pod to arrive: an idle scheduler sets no timer."""
        loop = asyncio.get_running_loop()
        ticks, last = 0, self.clock.monotonic()
        idle = not self.backoff and len(self.unschedulable) == self.unschedulable.gated
        while True:
            if idle:
                self._flush_woken = False
                self._flushable.clear()
                await self._flushable.wait()
                last = self.clock.monotonic()
            before, due, n = self._next_flush(last, ticks)
            self._nap_before, self._nap = before, loop.create_future()
            sleeper = asyncio.ensure_future(self.clock.sleep(due - self.clock.monotonic()))
            sleeper.add_done_callback(lambda _, nap=self._nap: nap.done() or nap.set_result(None))
            try:
                await self._nap
            finally:
                sleeper.cancel()
                self._nap_before, self._nap = float("inf"), None
            idle = False
            if self.clock.monotonic() < due:  # woken early: the ticks up to now moved nothing
                continue
            ticks, last = n, due
            self.flush_backoff_completed()
            if ticks % FLUSH_UNSCHEDULABLE_TICKS == 0:
                self.flush_unschedulable_leftover()
            idle = not self.backoff and len(self.unschedulable) == self.unschedulable.gated

    def close(self) -> None:
        self._closed = True
        self._wake.set()

    def pending_count(self) -> int:
        return len(self.active_keys) + len(self.backoff) + len(self.unschedulable)


def _first_tick(last: float, reached: Callable[[float], bool], gap: float, cap: int) -> int:
    """The least k >= 1 whose tick `last + k` has `reached` (false, then true for good, as time
    goes on), `gap` seconds on being about where; `cap` when that is later than tick `cap - 1`."""
    if gap >= cap + 1:
        return cap
    k = max(1, math.ceil(gap))
    while k > 1 and reached(last + (k - 1)):
        k -= 1
    while k < cap and not reached(last + k):
        k += 1
    return k
