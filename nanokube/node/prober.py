"""When a simulated container's startup and readiness probes first pass.

A simulated container has no process to probe, so every probe succeeds; what is left of the
kubelet's prober is its timing, on the injected clock. A probe worker ticks every
periodSeconds from the container's start (the first tick at once: the kubelet triggers a
readiness probe that has no result yet), skips the ticks before initialDelaySeconds, and
needs successThreshold successes in a row; readiness probes only count once the startup
probe passed. A liveness probe that execs a command the runtime interprets on the container's
files (`cat /tmp/healthy`) fails when the container's own command makes it fail (`failing`): the
kubelet then kills the container (137) to restart it; other liveness probes pass. A sidecar's (a restartable init
container's) probes are timed alike: the next container starts once it is Started, and the pod
is Ready only once it is Ready too (lifecycle.py). The process runtime probes for real
(runtime/probes.py)."""

from __future__ import annotations

import math

#: the API's defaults (SetDefaults_Probe)
PERIOD_SECONDS = 10
SUCCESS_THRESHOLD = 1
FAILURE_THRESHOLD = 3


def first_pass(probe: dict | None, not_before: float = 0.0) -> float:
    """Seconds after the container's start at which `probe` has passed, counting only ticks at
    or after `not_before` (the startup probe's pass, for readiness); no probe passes at once."""
    if not probe:
        return not_before
    period = probe.get("periodSeconds") or PERIOD_SECONDS
    first = max(probe.get("initialDelaySeconds") or 0, not_before)
    return math.ceil(first / period) * period + ((probe.get("successThreshold") or SUCCESS_THRESHOLD) - 1) * period


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


def passing(container: dict, started: float) -> tuple[float, float]:
    """When (on the clock `started` is read from) a container started then is Started (past
    its startupProbe) and Ready (past its readinessProbe too)."""
    up = first_pass(container.get("startupProbe"))
    return started + up, started + first_pass(container.get("readinessProbe"), up)
