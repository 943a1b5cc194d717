"""Importers for openb, the GPU cluster trace published with "Beware of
Fragmentation" (USENIX ATC'23): node lists as a cluster, pod lists as a trace.

Nodes keep their CPU, memory and GPUs; each GPU model becomes the
`gpu.nanokube.io` devices' `model` attribute and the node label
`gpu.nanokube.io/model`. GPUs are shareable (consumable capacity), so a
task with a fractional `gpu_milli` claims that many thousandths of one GPU
(and the same share of its memory) while whole-GPU tasks claim `num_gpu`
devices outright. `gpu_spec` (allowed models, `A|B`) becomes a CEL selector.
Every pod is created at its `creation_time` and deleted at its
`deletion_time`, through ResourceClaimTemplates (one per task shape), so
the resourceclaim controller makes and removes each pod's claim. With
`run_times`, a task the trace scheduled instead runs what it ran there
(`deletion_time - scheduled_time`) from its start here, so a what-if that
makes it wait delays its end rather than cutting it short.
"""

from __future__ import annotations

import csv
from collections import Counter

from ..node.cluster import Cluster, ClusterFileError, Pool
from .trace import Trace, TraceError, TraceEvent

MODEL_LABEL = "gpu.nanokube.io/model"
NAMESPACE = "default"
GPU_CLASS = "gpu.nanokube.io"
#: pods a node accepts: openb's own simulator has no per-node pod limit
MAX_PODS = "256"
#: memory and generation of the disclosed models; G1-G3 are undisclosed, given placeholder values
MODELS = {
    "T4": ("16Gi", "Turing", "7.5"), "P100": ("16Gi", "Pascal", "6.0"), "V100M16": ("16Gi", "Volta", "7.0"),
    "V100M32": ("32Gi", "Volta", "7.0"), "A10": ("24Gi", "Ampere", "8.6"),
}
UNDISCLOSED = ("32Gi", "undisclosed", "0.0")


NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")
#: columns a pod list may leave out (openb_pod_list_multigpu50.csv has none of them): no model constraint,
#: no QoS label; without times the tasks can only be sampled (`inflate`)
POD_OPTIONAL = ("gpu_spec", "qos", "creation_time", "deletion_time")


def _read(path: str, kind: str, required: tuple[str, ...], optional: tuple[str, ...], error: type[ValueError]):
    """(line number, row) of a CSV whose header names every `required` column; a missing
    column, a short or long line is `error` naming the file (and line), not a KeyError."""
    try:
        # utf-8-sig: a list a spreadsheet saved starts with a byte-order mark, not part of the first column's name
        with open(path, newline="", encoding="utf-8-sig") as f:
            lines = list(csv.reader(f))
    except OSError as e:
        raise error(f"{path}: cannot read: {e.strerror}") from None
    except (UnicodeDecodeError, csv.Error) as e:
        raise error(f"{path}: not a CSV file: {e}") from None
    if not lines:
        raise error(f"{path}: empty; an openb {kind} starts with the header {','.join(required)}")
    header = [h.strip() for h in lines[0]]
    missing = [c for c in required if c not in header]
    if missing:
        raise error(f"{path}:1: missing column{'s' if len(missing) > 1 else ''} {', '.join(missing)}: an openb "
                    f"{kind} has the columns {','.join(required + optional)}")
    for n, values in enumerate(lines[1:], 2):
        if not values:
            continue
        if len(values) != len(header):
            raise error(f"{path}:{n}: {len(values)} fields, the header has {len(header)}")
        yield n, _Row(path, n, dict(zip(header, values)), error)


class _Row:
    """One CSV line's fields, read as numbers with the file and line in any error."""

    def __init__(self, path: str, line: int, fields: dict[str, str], error: type[ValueError]):
        self.path, self.line, self.fields, self.error = path, line, fields, error

    def text(self, col: str) -> str:
        return (self.fields.get(col) or "").strip()

    def number(self, col: str, kind=int):
        v = self.text(col)
        try:
            n = kind(v) if v else kind(0)
        except ValueError:
            raise self.error(f"{self.path}:{self.line}: {col}: {v!r} is not {'an integer' if kind is int else 'a number'}") \
                from None
        if n < 0:
            raise self.error(f"{self.path}:{self.line}: {col}: must not be negative, got {v}")
        return n


def load_nodes(path: str) -> Cluster:
    """One pool per distinct (CPU, memory, GPU count, model), nodes named `<pool>-<i>`."""
    shapes: Counter = Counter()
    for _, row in _read(path, "node list", NODE_COLUMNS, (), ClusterFileError):
        shapes[(row.number("cpu_milli"), row.number("memory_mib"), row.number("gpu"), row.text("model"))] += 1
    if not shapes:
        raise ClusterFileError(f"{path}: no nodes")
    pools = []
    for (cpu, mem, gpus, model), count in sorted(shapes.items(), key=lambda kv: (kv[0][3], kv[0][2], kv[0][0], kv[0][1])):
        name = f"{model.lower() or 'cpu'}-{gpus}g-{cpu // 1000}c-{mem // 1024}g" if gpus else f"cpu-{cpu // 1000}c-{mem // 1024}g"
        capacity = {"cpu": f"{cpu}m" if cpu % 1000 else str(cpu // 1000), "memory": f"{mem}Mi", "pods": MAX_PODS}
        labels = {MODEL_LABEL: model} if gpus else {}
        gpu = None
        if gpus:
            memory, arch, cc = MODELS.get(model, UNDISCLOSED)
            gpu = {"count": gpus, "model": model, "memory": memory, "architecture": arch, "driverVersion": "470.82.1",
                   "cudaVersion": "11.4", "computeCapability": cc, "numaNodes": 1, "sharing": True}
        pools.append(Pool(name, count, capacity, dict(capacity), labels, [], {}, gpu, None))
    return Cluster(pools)


def gpu_memory(model: str) -> str:
    return MODELS.get(model, UNDISCLOSED)[0]


def _template(name: str, num_gpu: int, milli: int, spec: str) -> dict:
    exactly: dict = {"deviceClassName": GPU_CLASS}
    if milli < 1000:
        # a share of one GPU's compute; memory is asked for in proportion, so a sharer never takes it all
        exactly["capacity"] = {"requests": {"milli": str(milli), "memory": f"{milli * 16 * 1024 // 1000}Mi"}}
    else:
        exactly["count"] = num_gpu
    if spec:
        models = ", ".join(f"'{m}'" for m in spec.split("|"))
        exactly["selectors"] = [{"cel": {"expression": f"device.attributes['{GPU_CLASS}'].model in [{models}]"}}]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}}}


def load_pods(path: str, untimed: bool = False, run_times: bool = False) -> Trace:
    """Creates at `creation_time`, deletes at `deletion_time`; the task-size
    distribution (GPU count, milli per GPU) is the GPU tasks' shares.
    `untimed`: a list without creation times is taken (every task at 0, for
    sampling); otherwise it is refused. `run_times`: a task with a
    `scheduled_time` is not deleted but runs `deletion_time - scheduled_time`
    once started, then ends as its `pod_phase` says (Failed: exit code 1); one
    the trace never scheduled is still deleted at `deletion_time`, waiting."""
    events: list[TraceEvent] = []
    templates: dict[tuple, str] = {}
    sizes: Counter = Counter()
    gpu_milli: dict[str, int] = {}
    setup: list[dict] = []
    lines: dict[str, int] = {}  # task name -> its line: a name is one pod, created once
    if run_times:  # (here, not above: node.lifecycle imports much of the node agent, 0.3 CPU-s of a refused list)
        from ..node.lifecycle import EXIT_CODE, RUN_SECONDS
    timed = None
    for _, row in _read(path, "pod list", POD_COLUMNS, POD_OPTIONAL, TraceError):
        if timed is None:
            timed = "creation_time" in row.fields
            if not timed and not untimed:
                raise TraceError(f"{path}: no creation_time column: its tasks have no arrival times, so it can "
                                 "only be sampled (--inflate FACTOR)")
            if run_times and "scheduled_time" not in row.fields:
                raise TraceError(f"{path}: no scheduled_time column: the tasks' run times (deletion_time - "
                                 "scheduled_time) are unknown")
        num_gpu, milli = row.number("num_gpu"), row.number("gpu_milli")
        # openb's shapes: no GPU, a 1-1000 share of one GPU, or whole GPUs; any other pair was a guess
        if milli > 1000 or (num_gpu == 0) != (milli == 0) or (num_gpu > 1 and milli != 1000):
            raise TraceError(f"{path}:{row.line}: gpu_milli: {milli} with num_gpu {num_gpu}: a task asks for no GPU "
                             "(0 and 0), a share of one (1 and 1-1000) or whole GPUs (N and 1000)")
        phase = row.text("pod_phase")
        if phase and phase not in PHASES:
            raise TraceError(f"{path}:{row.line}: pod_phase: {phase!r} is not one of {', '.join(PHASES)}")
        spec = row.text("gpu_spec")
        name = row.text("name")
        if not name:
            raise TraceError(f"{path}:{row.line}: name: required")
        if name in lines:
            raise TraceError(f"{path}:{row.line}: name: {name} is also the task on line {lines[name]}")
        lines[name] = row.line
        pod: dict = {"apiVersion": "v1", "kind": "Pod",
                     "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"openb.qos": row.text("qos") or "none"}},
                     "spec": {"terminationGracePeriodSeconds": 0, "containers": [{
                         "name": "task", "image": "openb/task",
                         "resources": {"requests": {"cpu": f"{row.number('cpu_milli')}m",
                                                    "memory": f"{row.number('memory_mib')}Mi"}}}]}}
        if num_gpu:
            shape = (num_gpu, milli, spec)
            tname = templates.get(shape)
            if tname is None:
                tname = templates[shape] = f"gpu-{shape[0]}x{milli}" + (f"-spec{len(templates)}" if spec else "")
                setup.append(_template(tname, *shape))
            pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": tname}]
            pod["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
            sizes[(*shape[:2], row.number("cpu_milli"))] += 1
            gpu_milli[f"{NAMESPACE}/{name}"] = shape[0] * milli
        created = row.number("creation_time", float)
        # no deletion_time: the task never ends; one equal to creation_time lived no time (openb-pod-7285,
        # Pending in the trace), deleted right after it is created rather than kept to the trace's end
        deleted = row.number("deletion_time", float) if row.text("deletion_time") else None
        if deleted is not None and deleted < created:
            raise TraceError(f"{path}:{row.line}: deletion_time: {deleted:g} is before creation_time {created:g}")
        if run_times and deleted is not None and row.text("scheduled_time"):
            started = row.number("scheduled_time", float)
            if not created <= started <= deleted:
                raise TraceError(f"{path}:{row.line}: scheduled_time: {row.text('scheduled_time')} is not between "
                                 f"creation_time {row.text('creation_time')} and deletion_time {row.text('deletion_time')}")
            ran = deleted - started
            pod["metadata"]["annotations"] = {RUN_SECONDS: str(int(ran)) if ran == int(ran) else str(ran)}
            if row.text("pod_phase") == "Failed":
                pod["metadata"]["annotations"][EXIT_CODE] = "1"
            pod["spec"]["restartPolicy"] = "Never"
            deleted = None
        events.append(TraceEvent(created, len(events), "create", pod))
        if deleted is not None:
            events.append(TraceEvent(deleted, len(events), "delete", {"apiVersion": "v1", "kind": "Pod", "metadata": {
                "name": name, "namespace": NAMESPACE}}))
    # the templates come first, so no pod waits for its template
    events = [TraceEvent(0.0, i - len(setup), "create", t) for i, t in enumerate(setup)] + sorted(events)
    total = sum(sizes.values()) or 1
    return Trace(events, [(k, v / total) for k, v in sorted(sizes.items())], gpu_milli)
