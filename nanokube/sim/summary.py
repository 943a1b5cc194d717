"""The headline numbers of a run, what a capacity planner compares between
configurations: GPU allocation and fragmentation (time-weighted means over
the run), scheduling delay percentiles, makespan and what was left at the
end; and the table `nanokube simulate` prints of them, every unit named."""

from __future__ import annotations

import math
import re
from collections import Counter

#: scheduling delay percentiles reported (nearest rank)
PERCENTILES = (50, 90, 95, 99)
#: a scheduled pod bound this long after its creation or later waited (the scheduler's backoff flush tick): in a
#: trace that mostly fits, the few that wait hide below every percentile (openb on a fifth of a tenth of its
#: nodes: 42 of 8,151 pods waited 2 minutes to 23 days, p99 0.0s)
WAITED_S = 1.0
#: arrived GPU workload (share of the cluster's GPUs) at which an inflation run's allocation is reported
ARRIVED = (1.0, 1.3)


#: the node reasons of the scheduler's FitError message, before what PostFilter (preemption) adds
_FIT = re.compile(r"0/\d+ nodes are available: (.*?)\.(?: |$)")
#: a gang's (or composite group's) members that fit are too few; how many did, which varies, is left out
_GANG = re.compile(r"(min\w*Count \(\d+\) cannot be satisfied)")
#: a pod the scheduler gave no unschedulable message (deleted before its first attempt, or bound after a gang's wait)
NO_REASON = "no reason recorded"


def reasons(message: str) -> list[str]:
    """The reasons in the scheduler's word on a pod it could not place, without their node counts: '0/31 nodes
    are available: 26 cannot allocate all claims, 5 Insufficient cpu. preemption: ...' gives the two; a message
    of another form (a gang's too few members, scheduling gates) is one reason, without how many fit."""
    m = _FIT.match(message)
    if not m:
        gang = _GANG.match(message)
        return [gang.group(1) if gang else message]
    out = []
    for part in m.group(1).split(", "):
        count, _, reason = part.partition(" ")
        out.append(reason if count.isdigit() and reason else part)
    return out


def by_reason(why: dict[str, str], pods) -> dict[str, int]:
    """Pods per reason of their last unschedulable message (a pod under each reason a node gave it), most first."""
    counts = Counter(r for k in pods for r in (dict.fromkeys(reasons(why[k])) if k in why else (NO_REASON,)))
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def arrival_points(inflate: float | None) -> tuple[float, ...]:
    """Where an inflation to `inflate` x the cluster reports its allocation: ARRIVED up to there, and its end."""
    if not inflate:
        return ()
    return tuple(sorted({a for a in ARRIVED if a <= inflate + 1e-9} | {round(inflate, 2)}))


def time_mean(t: list[float], v: list[float], end: float) -> float | None:
    """Mean of a step series (each value holds until the next point) from its first point to `end`."""
    if not t:
        return None
    span = end - t[0]
    if span <= 0:
        return v[-1]
    total = sum(v[i] * ((t[i + 1] if i + 1 < len(t) else end) - t[i]) for i in range(len(t)))
    return total / span


def percentile(sorted_values: list[float], p: float) -> float | None:
    if not sorted_values:
        return None
    return sorted_values[max(math.ceil(p / 100 * len(sorted_values)) - 1, 0)]


def headline(run: dict, arrived: tuple[float, ...] = ()) -> dict:
    """From one run of results.json (or a RunResult's metrics with its `virtual_s`); `arrived`:
    arrival_points'."""
    s, end = run["series"], run["virtual_s"]
    delays = sorted(run["scheduling_delay_s"])
    timeline = run.get("timeline") or {}
    created = [v[0] for v in timeline.values()]
    ended = [v[3] for v in timeline.values()]
    running = sum(1 for v in timeline.values() if v[1] is not None and v[3] is None)
    pending = sum(1 for v in timeline.values() if v[1] is None and v[3] is None)
    # gone before any node took them (the trace deleted them waiting): no delay counts them, so they are said apart
    deleted_waiting = sum(1 for v in timeline.values() if v[1] is None and v[3] is not None)
    why = run.get("unschedulable") or {}
    by_arrival = run["by_arrival"]

    def at(key: str) -> dict[str, float | None]:
        points = dict(zip((round(a, 2) for a in by_arrival["arrived_ratio"]), by_arrival.get(key) or []))
        return {str(a): points.get(a) for a in arrived}

    gpus = bool(run.get("total_gpu_milli"))  # a cluster without GPUs has no GPU ratios (not 0%)
    return {
        "pods": run["pods"], "scheduled": run["scheduled"], "pending_at_end": pending,
        "deleted_waiting": deleted_waiting, "running_at_end": running,
        "gpu_alloc_ratio_mean": time_mean(s["t"], s["gpu_alloc_ratio"], end) if gpus else None,
        "gpu_alloc_ratio_max": max(s["gpu_alloc_ratio"], default=None) if gpus else None,
        "fragmentation_ratio_mean": time_mean(s["t"], s["fragmentation_ratio"], end) if gpus else None,
        "gpu_alloc_ratio_at_arrived": at("gpu_alloc_ratio"),
        # the paper's two fragmentation curves at those points: of all GPU capacity, and of the unallocated
        "fragmentation_ratio_at_arrived": at("fragmentation_ratio"),
        "fragmentation_rate_at_arrived": at("fragmentation_rate"),
        "waited": sum(1 for d in delays if d >= WAITED_S),
        # why: the scheduler's last word on each, the pods never scheduled and the ones that waited
        "unschedulable_reasons": by_reason(why, (k for k, v in timeline.items() if v[1] is None)),
        "waited_reasons": by_reason(why, (k for k, v in timeline.items()
                                          if v[1] is not None and v[1] - v[0] >= WAITED_S)),
        "scheduling_delay_s": {**{f"p{p}": percentile(delays, p) for p in PERCENTILES},
                               "max": delays[-1] if delays else None,
                               "mean": sum(delays) / len(delays) if delays else None},
        # first pod created to last pod ended: none while any pod still runs or waits
        "makespan_s": max(ended) - min(created) if created and None not in ended else None,
        "evicted": len(run["evictions"]),
    }


def duration(s: float | None) -> str:
    """Seconds as a person reads them, as Go prints durations but shorter: 0.8s, 42s, 5m30s, 2h05m, 149d08h."""
    if s is None:
        return "-"
    if s < 60:
        return f"{s:.1f}s" if s < 10 else f"{s:.0f}s"
    s = round(s)
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def ratio(r: float | None) -> str:
    """A share in percent; under 10% with two decimals, where a large cluster's replay sits (openb's first
    1,000 tasks on all its nodes: fragmentation 0.66% with LeastAllocated, 0.71% with MostAllocated, both
    0.7% at one decimal)."""
    if r is None:
        return "-"
    return f"{r:.2%}" if 0 < r < 0.1 else f"{r:.1%}"


def _aligned(grid: list[list[str]]) -> list[str]:
    """Each row a line, each column as wide as its widest cell, three spaces between."""
    widths = [max(len(row[i]) for row in grid) for i in range(len(grid[0]))]
    return ["   ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() for row in grid]


def table(runs: list[dict], inflate: float | None = None, width: int | None = None) -> str:
    """One row per configuration, the columns of `headline`, then what each column means.
    `inflate`: an inflation experiment's factor, for the allocation at its arrived workload (in
    a replay pods end, so what has arrived in all says nothing of what is asked for at once).
    `width`: a terminal's; where the rows would not fit it, one line per column instead, the
    configurations side by side (a script reading a pipe gets the rows)."""
    arrived = arrival_points(inflate)
    heads = [headline(r, arrived) for r in runs]
    inflated = bool(arrived)
    cols = ["CONFIGURATION", "PODS", "SCHEDULED", "PENDING AT END", "DELETED WAITING", "GPU ALLOC MEAN", "GPU ALLOC MAX",
            "GPU FRAG MEAN"]
    if inflated:
        cols += [f"{what} AT {a:.0%} ARRIVED" for what in ("ALLOC", "FRAG") for a in arrived]
    cols += ["WAITED"] + [f"DELAY P{p}" for p in PERCENTILES] + ["DELAY MAX", "MAKESPAN", "EVICTED"]
    rows = []
    for r, h in zip(runs, heads):
        d = h["scheduling_delay_s"]
        row = [r["name"] + (" (interrupted)" if r.get("interrupted") else ""), str(h["pods"]), str(h["scheduled"]),
               str(h["pending_at_end"]), str(h["deleted_waiting"]), ratio(h["gpu_alloc_ratio_mean"]),
               ratio(h["gpu_alloc_ratio_max"]), ratio(h["fragmentation_ratio_mean"])]
        if inflated:
            row += [ratio(h[f"{key}_at_arrived"][str(a)]) for key in ("gpu_alloc_ratio", "fragmentation_ratio")
                    for a in arrived]
        row += [str(h["waited"])] + [duration(d[f"p{p}"]) for p in PERCENTILES] + [
            duration(d["max"]), duration(h["makespan_s"]), str(h["evicted"])]
        rows.append(row)
    lines = _aligned([cols, *rows])
    if width is not None and max(map(len, lines)) > width:
        lines = _aligned([list(line) for line in zip(cols, *rows)])
    total = runs[0].get("total_gpu_milli", 0) / 1000 if runs else 0
    gpus = (f"GPU ALLOC / GPU FRAG: share of the cluster's {total:g} GPUs allocated / fragmented (free but too small "
            "for the trace's tasks, as FGD measures it), time-weighted over the run's virtual time"
            if total else "GPU ALLOC / GPU FRAG: '-', the cluster has no GPUs")
    if inflated:
        gpus += ("; ALLOC / FRAG AT N% ARRIVED: the same shares when the GPUs the arrived pods ask for reach N% of "
                 "the cluster's (results.json adds the fragmented share of the unallocated GPUs, the paper's frag rate)")
    lines += [
        "DELETED WAITING: pods the trace deleted before any node took them; with PENDING AT END, the pods never "
        "scheduled (PODS - SCHEDULED)",
        gpus,
        "DELAY: a scheduled pod's creation to its binding, in virtual time (pods never scheduled are left out); "
        f"WAITED: scheduled pods whose delay was {WAITED_S:g}s or more",
        "MAKESPAN: first pod created to last pod ended, in virtual time ('-': pods still running or pending at the end)",
    ]
    for key, what in (("unschedulable_reasons", "NOT SCHEDULED"), ("waited_reasons", "WAITED")):
        if any(h[key] for h in heads):
            lines.append(f"{what}, pods by the scheduler's last reason (a pod counts under each reason a node gave it):")
            lines += [f"  {r['name']}: " + (", ".join(f"{n} {why}" for why, n in h[key].items()) or "none")
                      for r, h in zip(runs, heads)]
    return "\n".join(lines)
