"""A workload trace: API writes at instants (seconds from the trace's start),
replayed in time order. The generic form is JSON Lines, one write a line:
`{"time": 12.5, "verb": "create"|"delete", "object": {...}}` for any kind
the API server serves (a delete needs apiVersion, kind and metadata name,
and namespace where it has one)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

VERBS = ("create", "delete")


class TraceError(ValueError):
    """A malformed trace line; the message names the file and line."""


@dataclass(order=True, frozen=True)
class TraceEvent:
    time: float
    seq: int
    verb: str = field(compare=False)
    obj: dict = field(compare=False)


@dataclass
class Trace:
    events: list[TraceEvent]
    #: what a GPU-fragmentation-aware policy measures against: ((GPUs, milli per GPU, CPU millicores), share of tasks)
    task_sizes: list[tuple[tuple[int, int, int], float]] = field(default_factory=list)
    #: GPUs each pod the trace creates asks for (in thousandths), by namespace/name: the arrived workload
    gpu_milli: dict[str, int] = field(default_factory=dict)

    @property
    def span(self) -> float:
        return self.events[-1].time if self.events else 0.0


#: where a kind that makes pods keeps their spec (a Deployment's, a Job's... template; a CronJob's Job's)
_POD_SPECS = (("spec",), ("spec", "template", "spec"), ("spec", "jobTemplate", "spec", "template", "spec"))


def scheduler_names(trace: Trace) -> set[str]:
    """The schedulerNames the pods the trace creates, or has made, ask for (a pod spec's default when unset)."""
    from ..scheduler.config import DEFAULT_SCHEDULER

    names = set()
    for e in trace.events:
        if e.verb != "create":
            continue
        for path in _POD_SPECS[1:] if e.obj["kind"] != "Pod" else _POD_SPECS[:1]:
            spec = e.obj
            for key in path:
                spec = spec.get(key) if isinstance(spec, dict) else None
            if isinstance(spec, dict) and "containers" in spec:
                names.add(spec.get("schedulerName") or DEFAULT_SCHEDULER)
    return names


def first_pods(trace: Trace, n: int) -> Trace:
    """The trace cut to its first `n` pods created, for a quick run: their writes (creation,
    deletion) and every write of another kind (claim templates, Jobs...) stay."""
    kept: set[tuple[str, str]] = set()
    events = []
    for e in trace.events:
        if e.obj["kind"] == "Pod":
            md = e.obj["metadata"]
            key = (md.get("namespace") or "default", md["name"])
            if e.verb == "create" and key not in kept:
                if len(kept) >= n:
                    continue
                kept.add(key)
            elif key not in kept:
                continue
        events.append(e)
    gpu_milli = {k: v for k, v in trace.gpu_milli.items() if tuple(k.split("/", 1)) in kept}
    return Trace(events, trace.task_sizes, gpu_milli)


def scale_arrivals(trace: Trace, factor: float) -> Trace:
    """The what-if of a busier (or quieter) workload: every create comes `factor` times sooner
    (its time divided by `factor`) and keeps its object's lifetime, so the delete of what it
    created moves with it; a delete of what the trace did not create is scaled as a create.
    An object created again after its delete is not created before that delete."""
    moved: dict[tuple, float] = {}  # object -> how much sooner its last create came
    gone: dict[tuple, float] = {}  # object -> when its last delete now comes
    events = []
    for e in trace.events:
        md = e.obj["metadata"]
        key = (e.obj["kind"], md.get("namespace") or "", md["name"])
        if e.verb == "create":
            t = max(e.time / factor, gone.get(key, 0.0))
            moved[key] = e.time - t
        else:
            t = e.time - moved.pop(key) if key in moved else e.time / factor
            gone[key] = t
        events.append(TraceEvent(t, e.seq, e.verb, e.obj))
    events.sort()
    return Trace(events, trace.task_sizes, trace.gpu_milli)


def load_jsonl(path: str) -> Trace:
    events = []
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
    except OSError as e:
        raise TraceError(f"{path}: cannot read: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise TraceError(f"{path}: not JSON Lines: {e}") from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            raise TraceError(f"{path}:{n}: not JSON: {e.msg}") from None
        if not isinstance(rec, dict):
            raise TraceError(f"{path}:{n}: must be an object")
        verb, obj, t = rec.get("verb", "create"), rec.get("object"), rec.get("time", 0)
        if verb not in VERBS:
            raise TraceError(f"{path}:{n}: verb: must be one of {', '.join(VERBS)}, got {verb!r}")
        if not isinstance(t, (int, float)) or t < 0:
            raise TraceError(f"{path}:{n}: time: must be a number of seconds >= 0")
        if not isinstance(obj, dict) or not obj.get("kind") or not obj.get("apiVersion") \
                or not (obj.get("metadata") or {}).get("name"):
            raise TraceError(f"{path}:{n}: object: needs apiVersion, kind and metadata.name")
        events.append(TraceEvent(float(t), len(events), verb, obj))
    events.sort()
    return Trace(events, gpu_milli=_gpu_milli(events))


def _gpu_milli(events: list[TraceEvent]) -> dict[str, int]:
    """GPUs a pod of a generic trace asks for: the `count` of its claims'
    gpu.nanokube.io requests (claims and templates named in the trace)."""
    per_claim: dict[str, int] = {}
    for e in events:
        if e.verb == "create" and e.obj["kind"] in ("ResourceClaim", "ResourceClaimTemplate"):
            spec = e.obj.get("spec") or {}
            spec = spec.get("spec", spec) if e.obj["kind"] == "ResourceClaimTemplate" else spec
            n = sum(int(r.get("exactly", r).get("count", 1)) * 1000
                    for r in (spec.get("devices") or {}).get("requests") or []
                    if "gpu" in (r.get("exactly", r).get("deviceClassName") or ""))
            per_claim[f"{e.obj['metadata'].get('namespace', 'default')}/{e.obj['metadata']['name']}"] = n
    out = {}
    for e in events:
        if e.verb == "create" and e.obj["kind"] == "Pod":
            md = e.obj["metadata"]
            ns = md.get("namespace", "default")
            out[f"{ns}/{md['name']}"] = sum(
                per_claim.get(f"{ns}/{c.get('resourceClaimName') or c.get('resourceClaimTemplateName')}", 0)
                for c in (e.obj.get("spec") or {}).get("resourceClaims") or [])
    return out


#: between two inflation arrivals: the control plane settles between them whatever the gap, and the whole
#: experiment then stays within the scheduler's 5-minute requeue of unschedulable pods, which here could
#: only retry pods that cannot fit anymore (nothing ends); with one a second openb's ~10,900 arrivals would
#: span three hours, every pod that does not fit tried again on every node each five minutes to no effect
INFLATE_INTERVAL = 0.01


def inflate(trace: Trace, cluster_gpu_milli: int, factor: float, seed: int, interval: float = INFLATE_INTERVAL) -> Trace:
    """The inflation experiment of "Beware of Fragmentation": pods drawn from
    the trace's pod creations (with replacement, by `seed`), arriving one per
    `interval` and never finishing, until the GPUs they ask for reach
    `factor` x the cluster's. Objects other than pods (claim templates...)
    are created first, as in the trace."""
    import random

    rng = random.Random(seed)
    setup = [e.obj for e in trace.events if e.verb == "create" and e.obj["kind"] != "Pod"]
    pods = [e.obj for e in trace.events if e.verb == "create" and e.obj["kind"] == "Pod"]
    if not pods:
        raise TraceError("--inflate: the trace creates no pods")
    events = [TraceEvent(0.0, i, "create", o) for i, o in enumerate(setup)]
    gpu_milli: dict[str, int] = {}
    asked, n = 0, 0
    while asked < factor * cluster_gpu_milli:
        src = rng.choice(pods)
        md = src["metadata"]
        ns = md.get("namespace", "default")
        want = trace.gpu_milli.get(f"{ns}/{md['name']}", 0)
        if not want and not cluster_gpu_milli:
            break
        n += 1
        name = f"inflated-{n:06d}"
        obj = {**src, "metadata": {**md, "name": name}}
        events.append(TraceEvent(n * interval, len(events), "create", obj))
        gpu_milli[f"{ns}/{name}"] = want
        asked += want
    return Trace(events, trace.task_sizes, gpu_milli)
