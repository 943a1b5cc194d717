"""Core v1 Events as client-go's tools/record writes them (the controllers, the local-path
provisioner): an event correlator between the recorder and the API server, on the
component's clock.

- An identical event (same source, involvedObject, type, reason and message) patches the first
  one's Event with its `count`, `lastTimestamp` and `message` instead of creating another, so
  an Event that keeps happening keeps being written and outlives the API server's --event-ttl;
  one deleted meanwhile is created again under its name, count included (eventLogger).
- Events about one object alike but for their message fold, from the 10th distinct message
  within 10 minutes of the previous one, into one "(combined from similar events): " Event,
  counted and patched like a repeat (EventAggregator).
- A token bucket per source and object (25 events, one more every 5 minutes) drops the
  excess (EventSourceObjectSpamFilter); as upstream, a dropped repeat still counts in the
  Event's next count.

Each of the three caches keeps the 4096 keys used last. `emit` correlates the event and queues
its write for the recorder's writer task (events.EventQueue: at most 1,000 waiting, more dropped),
and returns without waiting for the API server, as upstream's recorders hand their events to the
broadcaster's channel; a failure is logged, never raised, so the action it reports still counts.
The writer writes them in turn, as recordToSink: one the server answered (refused as invalid,
already exists, or any other status) is dropped, as upstream's recordEvent drops it; a transport
error (no answer) is tried again, up to 12 tries in all, the first wait a random part of 10 s (so
that clients do not all come back at once after an outage), then 10 s, on the recorder's clock,
the writes behind it waiting. `close` (the component stopping) drops what is left, as upstream's
broadcaster Shutdown cancels its sink's writer. events.k8s.io Events (the scheduler's, kube-proxy's)
are client/events.py's.
"""

from __future__ import annotations

import itertools
import logging
import random
import struct
from collections import OrderedDict

from ..clock import Clock
from ..machinery.errors import APIError
from .events import EventQueue

log = logging.getLogger(__name__)

#: upstream's maxLruCacheEntries, defaultAggregateMaxEvents, defaultAggregateIntervalInSeconds,
#: defaultSpamBurst and defaultSpamQPS
CACHE_SIZE = 4096
AGGREGATE_MAX_EVENTS = 10
AGGREGATE_INTERVAL = 600.0
SPAM_BURST = 25
#: as client-go holds it: CorrelatorOptions.QPS is a float32, so the limiter's rate is 1/300 rounded
#: to float32, a hair faster than 1/300 (a token due at an instant is there, not a rounding error later)
SPAM_QPS = struct.unpack("f", struct.pack("f", 1 / 300))[0]
#: upstream's maxTriesPerEvent and defaultSleepDuration (the first wait is a random part of it)
MAX_TRIES = 12
SLEEP = 10.0
COMBINED = "(combined from similar events): "
#: the only types upstream's recorder writes (v1.EventTypeNormal, v1.EventTypeWarning)
EVENT_TYPES = ("Normal", "Warning")
#: made unique across the recorders of a process: on a clock that stands still, two components'
#: events on one object (the kubelet's and the node controller's on a Node) would share a name
_SEQ = itertools.count(1)
SMP = "application/strategic-merge-patch+json"


class _LRU:
    """A bounded map that forgets the key used longest ago (groupcache's lru.Cache)."""

    __slots__ = ("_d",)

    def __init__(self) -> None:
        self._d: OrderedDict = OrderedDict()

    def get(self, key):
        value = self._d.get(key)
        if value is not None:
            self._d.move_to_end(key)
        return value

    def add(self, key, value) -> None:
        self._d[key] = value
        self._d.move_to_end(key)
        if len(self._d) > CACHE_SIZE:
            self._d.popitem(last=False)


class _Similar:
    """aggregateRecord: the distinct messages seen (insertion-ordered, so the one dropped at the
    limit is the oldest: deterministic where upstream pops any) and when the last one came."""

    __slots__ = ("messages", "last")

    def __init__(self) -> None:
        self.messages: dict[str, None] = {}
        self.last = 0.0


class _Observed:
    """eventLog: the Event a key's occurrences are counted on."""

    __slots__ = ("count", "first", "name")

    def __init__(self, count: int, first: str, name: str) -> None:
        self.count, self.first, self.name = count, first, name


class _Bucket:
    """A token bucket (golang.org/x/time/rate's Limiter as TryAccept uses it), full at first."""

    __slots__ = ("tokens", "last")

    def __init__(self, now: float) -> None:
        self.tokens, self.last = float(SPAM_BURST), now

    def take(self, now: float) -> bool:
        """AllowN(now, 1) (reserveN): only a granted token moves the state on; a shortfall worth
        under a nanosecond of refill is granted, as its wait truncates to a zero Duration."""
        tokens = min(SPAM_BURST, self.tokens + max(0.0, now - self.last) * SPAM_QPS)
        if (1 - tokens) / SPAM_QPS * 1e9 >= 1:
            return False
        self.tokens, self.last = tokens - 1, now
        return True


def _object_key(event: dict) -> tuple:
    """The source and involvedObject (getSpamKey; the other keys start with it)."""
    src, io = event["source"], event["involvedObject"]
    return (src.get("component", ""), src.get("host", ""), io.get("kind", ""), io.get("namespace", ""),
            io.get("name", ""), io.get("uid", ""), io.get("apiVersion", ""))


class EventCorrelator:
    """Filters, aggregates and counts one recorder's events (upstream's EventCorrelator with its
    defaults)."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._similar = _LRU()
        self._observed = _LRU()
        self._buckets = _LRU()

    def name(self, obj_name: str, now: float) -> str:
        """A new Event's name: the object's and the time in nanoseconds (made unique, as virtual
        time stands still)."""
        return f"{obj_name}.{int(now * 1e9) + next(_SEQ):x}"

    def correlate(self, event: dict) -> tuple[dict, tuple, dict | None] | None:
        """EventCorrelate: (the Event to write, its cache key, the patch that writes it when it
        repeats one already written, else None), or None when the spam filter drops it."""
        event, key = self._aggregate(event)
        event, patch = self._observe(event, key)
        if not self._allow(event):
            return None
        return event, key, patch

    def _aggregate(self, event: dict) -> tuple[dict, tuple]:
        now = self.clock.now()
        obj = _object_key(event)
        io = event["involvedObject"]
        similar_key = (obj, event["type"], event["reason"], event.get("reportingComponent", ""),
                       event.get("reportingInstance", ""))
        record = self._similar.get(similar_key)
        if record is None or now - record.last > AGGREGATE_INTERVAL:
            record = _Similar()
        record.messages[event["message"]] = None
        record.last = now
        self._similar.add(similar_key, record)
        if len(record.messages) < AGGREGATE_MAX_EVENTS:
            return event, (*obj, io.get("fieldPath", ""), event["type"], event["reason"], event["message"])
        del record.messages[next(iter(record.messages))]
        ts = self.clock.rfc3339(now)
        return {"metadata": {"name": self.name(io["name"], now), "namespace": event["metadata"]["namespace"]},
                "involvedObject": io, "count": 1, "firstTimestamp": ts, "lastTimestamp": ts,
                "message": COMBINED + event["message"], "type": event["type"], "reason": event["reason"],
                "source": event["source"]}, similar_key

    def _observe(self, event: dict, key: tuple) -> tuple[dict, dict | None]:
        """eventObserve: a key seen before counts on its Event; the patch carries what the
        repeat changes (upstream's two-way merge patch against the Event with count 0, the epoch
        for lastTimestamp and no message)."""
        seen = self._observed.get(key)
        patch = None
        if seen is not None:
            event = {**event, "metadata": {**event["metadata"], "name": seen.name},
                     "firstTimestamp": seen.first, "count": seen.count + 1}
            patch = {"count": event["count"], "lastTimestamp": event["lastTimestamp"]}
            if event["message"]:
                patch["message"] = event["message"]
        self._observed.add(key, _Observed(event["count"], event["firstTimestamp"], event["metadata"]["name"]))
        return event, patch

    def _allow(self, event: dict) -> bool:
        now = self.clock.now()
        key = _object_key(event)
        bucket = self._buckets.get(key) or _Bucket(now)
        allowed = bucket.take(now)
        self._buckets.add(key, bucket)
        return allowed


class CoreEventRecorder:
    """One component's core/v1 Events, through its own correlator (each kube-controller-manager
    controller has its own broadcaster). `rand()` picks the part of the first retry's wait. `host`
    (a kubelet's node name) is the source's host and the events' reportingInstance."""

    def __init__(self, client, component: str, clock: Clock, rand=random.random, host: str = ""):
        self.events = client.resource("", "v1", "events")
        self.component = component
        self.host = host
        self.clock = clock
        self.rand = rand
        self.correlator = EventCorrelator(clock)
        self._queue = EventQueue(self._deliver)

    async def emit(self, obj: dict, type_: str, reason: str, message: str, field_path: str = "",
                   annotations: dict[str, str] | None = None) -> None:
        """Record one event on `obj` (which needs kind), or on the part of it `field_path` names (a
        pod's container), with `annotations` on the Event (AnnotatedEventf's: the kubelet's eviction
        says what it reclaimed there): correlated now, its write queued; never waits for the API
        server. A type other than Normal or Warning is logged and dropped, as upstream's
        ValidateEventType drops it."""
        if type_ not in EVENT_TYPES:
            log.error("%s: unsupported event type %r (event %s dropped)", self.component, type_, reason)
            return
        event = self._make(obj, type_, reason, message, field_path)
        if annotations:
            event["metadata"]["annotations"] = dict(annotations)
        correlated = self.correlator.correlate(event)
        if correlated is not None:
            event, _, patch = correlated
            self._queue.post((event, patch))

    async def close(self) -> None:
        """Stop writing: the write in progress and those queued are dropped (upstream's broadcaster
        Shutdown)."""
        await self._queue.close()

    async def _deliver(self, item: tuple[dict, dict | None]) -> None:
        """recordToSink's loop: try until the server answers, at most MAX_TRIES times."""
        event, patch = item
        tries = 0
        while not await self._write(event, patch):
            tries += 1
            if tries >= MAX_TRIES:
                log.error("%s: unable to write event %s on %s (retry limit exceeded!)", self.component,
                          event["reason"], event["metadata"]["name"])
                return
            await self.clock.sleep(SLEEP * self.rand() if tries == 1 else SLEEP)

    def _make(self, obj: dict, type_: str, reason: str, message: str, field_path: str = "") -> dict:
        """makeEvent: a new Event with count 1. A reference without apiVersion (the kubelet's
        nodeRef) has none."""
        md = obj["metadata"]
        now = self.clock.now()
        ref = {"kind": obj["kind"], "apiVersion": obj.get("apiVersion"), "name": md["name"], "uid": md.get("uid")}
        if not ref["apiVersion"]:
            del ref["apiVersion"]
        if md.get("namespace"):
            ref["namespace"] = md["namespace"]
        if md.get("resourceVersion"):
            ref["resourceVersion"] = md["resourceVersion"]
        if field_path:
            ref["fieldPath"] = field_path
        ts = self.clock.rfc3339(now)
        name = self.correlator.name(md["name"], now)
        event = {"metadata": {"name": name, "namespace": md.get("namespace") or "default"}, "involvedObject": ref,
                 "reason": reason, "message": message, "type": type_, "count": 1, "firstTimestamp": ts,
                 "lastTimestamp": ts, "source": {"component": self.component}, "reportingComponent": self.component}
        if self.host:
            event["source"]["host"] = event["reportingInstance"] = self.host
        return event

    async def _write(self, event: dict, patch: dict | None) -> bool:
        """recordEvent: a repeat is patched, and created (by name, with its count) if the Event is
        gone; a new one created. False when the server could not be reached (try again)."""
        md = event["metadata"]
        try:
            if patch is not None:
                try:
                    await self.events.patch(md["name"], patch, SMP, namespace=md["namespace"])
                    return True
                except APIError as e:
                    if e.code != 404:
                        raise
            await self.events.create(event)
        except APIError as e:
            log.info("%s: server rejected event %s on %s (will not retry!): %s", self.component, event["reason"],
                     md["name"], e.message)
        except Exception as e:  # a transport error
            log.info("%s: unable to write event %s on %s (may retry after sleeping): %s", self.component,
                     event["reason"], md["name"], e)
            return False
        return True
