"""When a simulated container's startup and readiness probes first pass.

A simulated container has no process to probe, so a probe succeeds (but an httpGet or
tcpSocket probe of a port its pod's programs are known not to listen on, which lifecycle.py runs
each period and which is refused: simulated_net.answers); what is left of the kubelet's prober
is its timing, on the injected clock. A probe worker ticks every
periodSeconds from the container's start (the first tick at once: the kubelet triggers a
readiness probe that has no result yet), skips the ticks before initialDelaySeconds, and
needs successThreshold successes in a row; readiness probes only count once the startup
probe passed. A liveness probe that execs a command the runtime interprets on the container's
files (`cat /tmp/healthy`) fails when the container's own command makes it fail (`failing`): the
kubelet then kills the container (137) to restart it; other liveness probes pass. An exec probe
that runs a network tool really runs, each period (lifecycle.py), its results counted as the
kubelet's worker counts them (`Worker`). A sidecar's (a restartable init
container's) probes are timed alike: the next container starts once it is Started, and the pod
is Ready only once it is Ready too (lifecycle.py). The process runtime probes for real
(runtime/probes.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass

#: the API's defaults (SetDefaults_Probe)
PERIOD_SECONDS = 10
SUCCESS_THRESHOLD = 1
FAILURE_THRESHOLD = 3
TIMEOUT_SECONDS = 1


def first_tick(probe: dict, not_before: float = 0.0) -> float:
    """Seconds after the container's start of `probe`'s first tick that counts: the first at or
    after both initialDelaySeconds and `not_before`."""
    period = probe.get("periodSeconds") or PERIOD_SECONDS
    return math.ceil(max(probe.get("initialDelaySeconds") or 0, not_before) / period) * period


def first_pass(probe: dict | None, not_before: float = 0.0) -> float:
    """Seconds after the container's start at which `probe` has passed, counting only ticks at
    or after `not_before` (the startup probe's pass, for readiness); no probe passes at once."""
    if not probe:
        return not_before
    period = probe.get("periodSeconds") or PERIOD_SECONDS
    return first_tick(probe, not_before) + ((probe.get("successThreshold") or SUCCESS_THRESHOLD) - 1) * period


def failing(probe: dict, check, settled: float) -> tuple[float, str] | None:
    """When (seconds after the container's start) `probe` has failed failureThreshold times in a
    row, and what its last run printed; None if it passes at a tick after `settled` (nothing it
    looks at changes after then). `check(t)` runs it at t: (passed, output)."""
    period = probe.get("periodSeconds") or PERIOD_SECONDS
    threshold = probe.get("failureThreshold") or FAILURE_THRESHOLD
    t, failed = math.ceil((probe.get("initialDelaySeconds") or 0) / period) * period, 0
    while True:
        ok, output = check(t)
        if ok and t > settled:
            return None
        failed = 0 if ok else failed + 1
        if failed >= threshold:
            return t, output
        t += period


@dataclass
class Worker:
    """One probe's worker (prober/worker.go) where the probe really runs (a simulated network
    tool): when it runs next (monotonic), the result it reports (None before any: not ready, not
    started, alive), and how many runs in a row gave the last run's. Held once it has no more to
    do in this container: its startup probe passed, or a failure is acted on (a kill)."""

    due: float
    result: bool | None = None
    last: bool | None = None
    run: int = 0
    held: bool = False

    def ran(self, probe: dict, at: float) -> None:
        """It ran at `at`: its next run is at the first period tick after."""
        period = probe.get("periodSeconds") or PERIOD_SECONDS
        self.due += ((at - self.due) // period + 1) * period

    def record(self, probe: dict, ok: bool, at: float) -> bool:
        """Count a run at `at` (`ran`); whether the result reported changed: it takes
        successThreshold successes, or failureThreshold failures, in a row."""
        self.ran(probe, at)
        self.run = self.run + 1 if ok == self.last else 1
        self.last = ok
        needed = (probe.get("successThreshold") or SUCCESS_THRESHOLD) if ok else \
            (probe.get("failureThreshold") or FAILURE_THRESHOLD)
        if self.run < needed or self.result is ok:
            return False
        self.result = ok
        return True


def passing(container: dict, started: float) -> tuple[float, float]:
    """When (on the clock `started` is read from) a container started then is Started (past
    its startupProbe) and Ready (past its readinessProbe too)."""
    up = first_pass(container.get("startupProbe"))
    return started + up, started + first_pass(container.get("readinessProbe"), up)
