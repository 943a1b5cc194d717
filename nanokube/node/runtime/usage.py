"""Measured usage of process containers, as the kubelet's resource metrics
report it to metrics-server: CPU as the rate of the container's cumulative
CPU time between two samples, memory as its resident set, and its processes.
A container is its process session (every container's command leads a session
of its own; its launcher, a shim outside it, is not counted), read from /proc."""

from __future__ import annotations

import os

from ...metrics.usage import Usage

CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
#: a new sample is taken when the last one is at least this old
MIN_INTERVAL = 1.0


def session_stats(sessions: set[int]) -> dict[int, tuple[int, int, int]]:
    """Per session id: (CPU clock ticks used, reaped children's included; resident bytes; processes)."""
    out: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()
        sid = int(fields[3])
        if sid in sessions:
            t = out.setdefault(sid, [0, 0, 0])
            t[0] += sum(int(x) for x in fields[11:15])
            t[1] += int(fields[21]) * PAGE_SIZE
            t[2] += 1
    return {sid: (ticks, rss, n) for sid, (ticks, rss, n) in out.items()}


class CPUSamples:
    """The last two (time, cumulative ticks) samples of one container instance,
    the first taken when it starts (nothing used yet)."""

    def __init__(self, started: float = 0.0) -> None:
        self.samples: list[tuple[float, int]] = [(started, 0)]

    def rate(self, ticks: int, now: float) -> int:
        """Millicores between the two latest samples, taking a new one when due."""
        if now - self.samples[-1][0] >= MIN_INTERVAL:
            self.samples = [self.samples[-1], (now, ticks)]
        if len(self.samples) < 2:
            return 0
        (t0, c0), (t1, c1) = self.samples
        return max(0, round((c1 - c0) / CLK_TCK / (t1 - t0) * 1000))


def measure(containers, now: float) -> dict[str, Usage]:
    """Usage of running containers (objects with .name, .proc, .pid and .cpu) at monotonic time `now`."""
    running = [c for c in containers if c.proc is not None and c.proc.returncode is None]
    stats = session_stats({c.pid for c in running})
    out = {}
    for c in running:
        ticks, rss, processes = stats.get(c.pid, (0, 0, 0))
        out[c.name] = Usage(c.cpu.rate(ticks, now), rss, processes)
    return out
