"""A discrete-event run: the control plane on a VirtualClock, the trace
replayed at its instants, time jumping to the next timer whenever every
component is idle (asyncio's run queue is empty).

With `speed` set, the same run goes on a real clock instead (`PacedClock`,
`speed` times faster than the wall clock): components sleep for real and
race as they would in a cluster, so it can be watched as it happens, and
it is what the virtual run is checked against.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import sys
import time
from dataclasses import dataclass, field

from ..apiserver.eventttl import DEFAULT_TTL
from ..apiserver.timeout import Deadlines
from ..clock import REAL, Clock, VirtualClock
from ..client.informer import Informer
from ..machinery.errors import APIError
from ..node.cluster import Cluster
from ..scheduler.config import SchedulerConfig
from .recorder import Recorder
from .stack import DEFAULT_CONTROLLERS, SimulatedControlPlane
from .trace import Trace, TraceEvent

#: draining, how long nothing may change while no pod runs before what still waits is taken to fit nowhere: two
#: of the scheduler's 5-minute retries of unschedulable pods, and more than a Job's longest pod-failure backoff (6m)
DRAIN_QUIET = 600.0
#: where virtual time starts (2027-01-15T08:00:00Z): any fixed instant keeps runs reproducible
EPOCH = 1_800_000_000.0


@dataclass
class RunResult:
    name: str
    placements: dict[str, str]
    wall_s: float
    #: CPU seconds of the process over the run (what the machine's load does not change)
    cpu_s: float
    virtual_s: float
    events: int
    metrics: dict = field(default_factory=dict)
    #: the run was stopped (`interrupt`) before the end of its trace: its numbers cover `virtual_s` only
    interrupted: bool = False
    #: trace writes that did not happen, each as printed when refused (an invalid object, a kind not served)
    refused: list[str] = field(default_factory=list)

    @property
    def placement_hash(self) -> str:
        """sha256 of `pod node` lines in pod-name order: equal across runs that placed every pod alike."""
        text = "".join(f"{k} {v}\n" for k, v in sorted(self.placements.items()))
        return hashlib.sha256(text.encode()).hexdigest()[:16]


class PacedClock(Clock):
    """The wall clock, `speed` times faster, starting at `start`."""

    def __init__(self, start: float, speed: float):
        self.start, self.speed = start, speed
        self._t0 = time.monotonic()

    def monotonic(self) -> float:
        return (time.monotonic() - self._t0) * self.speed

    def now(self) -> float:
        return self.start + self.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(seconds, 0.0) / self.speed)

    def call_later(self, seconds: float, callback) -> asyncio.TimerHandle:
        return asyncio.get_running_loop().call_later(max(seconds, 0.0) / self.speed, callback)


#: seconds between progress lines: rewritten in place on a terminal; appended, less often, to a file or pipe
TERMINAL_EVERY, LOG_EVERY = 1.0, 10.0


class Progress:
    """One line on stderr, rewritten at most once a second: virtual time, trace writes, events/s, ETA.
    The ETA follows the share of the trace's writes replayed where it is given (`writes`), since
    virtual time says little of the work left: openb's first 115 of 149 days hold a few pods.
    Where stderr is no terminal (a log file, CI), a whole line every LOG_EVERY seconds instead,
    not a run of carriage returns that reads as one line of hundreds of updates."""

    def __init__(self, label: str, span: float, out=sys.stderr, enabled: bool = True, writes: int | None = None):
        self.label, self.span, self.out, self.enabled, self.writes = label, span, out, enabled, writes
        self.t0 = time.perf_counter()
        self._last = 0.0
        self.terminal = enabled and out.isatty()
        self.every = TERMINAL_EVERY if self.terminal else LOG_EVERY

    def update(self, virtual: float, events: int, force: bool = False, draining: str = "",
               written: int | None = None) -> None:
        """`draining`: past the trace's end, what the run still waits for; `written`: trace writes replayed."""
        now = time.perf_counter()
        if not self.enabled or (not force and now - self._last < self.every):
            return
        self._last = now
        wall = now - self.t0
        frac = min(virtual / self.span, 1.0) if self.span else 1.0
        done = frac
        writes = ""
        if self.writes and written is not None:
            done = written / self.writes
            writes = f"writes {written:,}/{self.writes:,}, "
        eta = wall * (1 - done) / done if done > 0 else float("inf")
        rest = f"draining: {draining}" if draining else f"ETA {eta:.0f}s"
        line = (f"{self.label}: virtual {_dur(virtual)} / {_dur(self.span)} ({frac:5.1%}) {writes}"
                f"{events / wall if wall else 0:,.0f} events/s, wall {wall:.0f}s, {rest}")
        self.out.write(f"\r{line}   " if self.terminal else f"{line}\n")
        self.out.flush()

    def done(self, virtual: float, events: int, written: int | None = None) -> None:
        self.update(virtual, events, force=True, written=written)
        if self.terminal:
            self.out.write("\n")


def _dur(s: float) -> str:
    d, s = divmod(int(s), 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    return f"{d}d{h:02d}:{m:02d}:{s:02d}" if d else f"{h:02d}:{m:02d}:{s:02d}"


async def _apply(client, e: TraceEvent) -> str | None:
    """One trace write through the API server, as a client would send it; a
    refusal (an invalid object, a kind not served) is the trace's business and
    does not stop the run: it is printed at once and returned, to be counted
    after the run. A delete of what is gone already is no refusal."""
    obj = e.obj
    group, _, version = obj["apiVersion"].rpartition("/")
    res = client.index.by_kind(group, obj["kind"])
    if res is None:
        return _refused(f"{obj['apiVersion']} {obj['kind']}: not served; skipped")
    rc = client.resource(group, version, res.plural)
    md = obj["metadata"]
    ns = (md.get("namespace") or "default") if res.namespaced else None
    try:
        if e.verb == "create":
            await rc.create(obj, namespace=ns)
        else:
            await rc.delete(md["name"], namespace=ns, propagation_policy="Background")
    except APIError as err:
        if not (e.verb == "delete" and err.code == 404):
            return _refused(f"{e.verb} {obj['kind']} {md['name']}: {err.message}")
    return None


def _refused(why: str) -> str:
    print(f"nanokube simulate: {why}", file=sys.stderr)
    return why


async def _replay(client, clock: VirtualClock, trace: Trace, t0: float, until: float | None, counter: list,
                  refused: list[str]) -> None:
    for e in trace.events:
        if until is not None and e.time > until:
            return
        wait = t0 + e.time - clock.monotonic()
        if wait > 0:
            await clock.sleep(wait)
        if (why := await _apply(client, e)) is not None:
            refused.append(why)
        counter[0] += 1


async def run(name: str, cluster: Cluster, trace: Trace, config: SchedulerConfig | None, seed: int = 0,
              until: float | None = None, speed: float | None = None, controllers: str = DEFAULT_CONTROLLERS,
              progress: bool = True, tail: float = 0.0, serve_port: int | None = None, stop: bool = True,
              event_ttl: float = DEFAULT_TTL, interrupt: asyncio.Event | None = None, drain: bool = False,
              label: str | None = None) -> RunResult:
    """Replay `trace` on `cluster` with `config`; stop at `until` (seconds of
    trace time) or once the trace is replayed and `tail` more seconds passed,
    or with `drain` once it is replayed and every pod has ended (or none runs
    and nothing changed for DRAIN_QUIET: what waits can no longer fit), at
    `until` at the latest; or early, at the virtual instant it is set, once
    `interrupt` is set (the result then measures what ran). `stop=False` is
    for a caller that ends its process right after: the components are left
    as they are (only the run's directory is removed). `label`: the progress line's name for the run
    (default `name`)."""
    clock = PacedClock(EPOCH, speed) if speed else VirtualClock(start=EPOCH, max_turns=1 << 62)
    plane = SimulatedControlPlane(cluster, clock, config, seed, controllers, serve_port=serve_port, event_ttl=event_ttl)
    if serve_port is not None and speed:
        # a served watch's default length (--min-request-timeout's draw) runs on this clock: scaled,
        # `kubectl get -w` lasts as many real seconds as against `nanokube up`, not 1/speed of them
        plane.server.handlers.min_request_timeout *= speed
        # and a request's deadline (--request-timeout's 60 s) is the wall clock's, as upstream's:
        # on this clock a client would have 60/speed real seconds (60 ms at 1000x) to be answered
        plane.server.deadlines = Deadlines(REAL)
    wall0, cpu0 = time.perf_counter(), time.process_time()
    await plane.start()
    if serve_port is not None:
        print(f"{name}: serving on {plane.server.url}; export KUBECONFIG={plane.kubeconfig}", file=sys.stderr, flush=True)
    recorder = Recorder(clock, trace, cluster)
    pods = Informer(plane.client.resource("", "v1", "pods"), clock=clock)
    recorder.watch_pods(pods)
    claims = Informer(plane.client.resource("resource.k8s.io", "v1", "resourceclaims"), clock=clock)
    recorder.watch_claims(claims)
    tasks = [asyncio.create_task(pods.run()), asyncio.create_task(claims.run())]
    await pods.synced.wait()
    await claims.synced.wait()
    t0 = clock.monotonic()
    recorder.t0 = clock.now()
    recorder.start()
    span = (until if until is not None else trace.span + tail)
    counter, refused = [0], []
    replay = asyncio.create_task(_replay(plane.client, clock, trace, t0, until, counter, refused))
    writes = sum(1 for e in trace.events if until is None or e.time <= until)
    bar = Progress(label or name, span, enabled=progress, writes=None if speed else writes)
    end = t0 + span
    interrupt = interrupt or asyncio.Event()

    def limit() -> float:
        """Where the run stops, as things stand."""
        if not drain or until is not None and until <= trace.span or not replay.done():
            return end
        if recorder.drained():
            stop = clock.monotonic()
        else:
            stop = math.inf if recorder.running() else t0 + recorder.changed + DRAIN_QUIET
        return stop if until is None else min(stop, end)

    def waiting() -> str:
        return f"{recorder.running()} pods running, {len(recorder.pending)} pending" \
            if drain and clock.monotonic() > t0 + trace.span else ""
    if speed:
        while (left := limit() - clock.monotonic()) > 0 and not interrupt.is_set():
            try:
                await asyncio.wait_for(interrupt.wait(), min(left, speed) / speed)
            except asyncio.TimeoutError:
                pass
            bar.update(clock.monotonic() - t0, counter[0], draining=waiting())
    else:
        while not interrupt.is_set():
            await clock._settle()
            due = clock.next_due()
            if due is None or due > limit():
                break
            await clock.advance(due - clock.monotonic())
            bar.update(clock.monotonic() - t0, clock.wakeups + counter[0], draining=waiting(), written=counter[0])
        if not interrupt.is_set() and (last := limit()) < math.inf:
            await clock.advance(max(last - clock.monotonic(), 0.0))
    events = counter[0] + getattr(clock, "wakeups", 0)
    bar.done(clock.monotonic() - t0, events, counter[0])
    if not replay.done():
        replay.cancel()
    await asyncio.gather(replay, return_exceptions=True)
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    result = RunResult(name, dict(recorder.placements), wall, cpu, clock.monotonic() - t0, events, recorder.summary(),
                       interrupted=interrupt.is_set(), refused=refused)
    if not stop:
        plane.abandon()
        return result
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await plane.stop()
    # what the stopped components left waiting (pod workers, watch streams) ends with the run
    rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for t in rest:
        t.cancel()
    await asyncio.gather(*rest, return_exceptions=True)
    return result
