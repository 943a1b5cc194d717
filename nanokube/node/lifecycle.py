"""The kubelet's pod lifecycle, simulated: one worker per bound pod walks it
from ContainerCreating to Running to Succeeded/Failed, restarts containers
per restartPolicy with crash-loop backoff, and finishes graceful deletion.

The worker is what the simulated runtime (the default) runs; a runtime is
the seam between the agent and how containers actually run:
`runtime.worker(agent, pod)` returns the worker that drives one pod, and the
process runtime (runtime/process.py) returns one that runs real processes.

A container whose command is one simulated_command interprets (`true`,
`echo hi`, `sleep 2`, `sh -c 'sleep 1; exit 3'` ...) runs as that command
would, on the node's clock. How long other simulated containers run and how
they exit is declared on the pod, for each container's run of its own (and
these annotations, where set, win over an interpreted command): `sim.nanokube.io/run-seconds` (default:
forever), `sim.nanokube.io/exit-code` (default 0; a list `42,1` gives each
run of a container its own, the last repeating), `sim.nanokube.io/stop-seconds` (time to stop after its stop signal,
default 0), `sim.nanokube.io/stop-exit-code` (how its stop signal ends it, by
default as its image's program exits on its image's STOPSIGNAL, else SIGTERM's 143:
stop_signals), `sim.nanokube.io/pull-seconds` (how long pulling one of its images
takes, default 0) and `sim.nanokube.io/pull-error` (while set, pulling its
images fails with this error; `not-found` words containerd's for a tag the
registry lacks: ErrImagePull, then ImagePullBackOff until a retry, after 10 s
doubling to 300 s, finds it gone). A numeric one that is not a number keeps its
default, and the pod gets an InvalidSimulationAnnotation Warning naming it. Each container start records the kubelet's events:
Pulling/Pulled (by imagePullPolicy and the images the node holds), Created,
Started; stopping a running one records Killing.

Lifecycle hooks (hooks.py) run on the node's clock: a container's postStart (an app
container's or a sidecar's, the next init container waiting for it) once it started,
before its status says Running (a failed one kills it:
FailedPostStartHook, PostStartHookError, restarted per policy); each running
container's preStop as the pod stops, side by side, its own SIGTERM following once
its hook is done or the grace period is up, with what is left of it (at least 2 s),
a sidecar's only after the app containers stopped. An exec hook
runs as `kubectl exec` does in the container (simulated_io: its files, the
simulated shell; a command it does not run passes, as probes do); an httpGet
one reaches the pod's simulated servers, plain HTTP on any port but one only its
containers not running now declare (an HTTPS one falls back to HTTP: hooks.py).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import logging
import math
from dataclasses import dataclass

from ..machinery.backoff import doubling
from ..machinery.goduration import string as go_duration
from ..machinery.gofmt import quote as go_quote
from ..machinery.conditions import transition_time
from ..machinery import restartrules
from ..machinery.errors import APIError
from ..machinery.streaming import StreamFailed, StreamSession, executable_not_found, start_not_found
from ..client.http import EXPECTED
from ..clock import parse_time
from . import container_env, dns, hooks, hosts_file, image_sizes, prober, simulated_net, userns
from .imagename import invalid_image_message
from .dra.prepare import CDI_CREATE_FAILED, NotReady
from .envvars import environment_error
from . import inplace
from .simulated_applets import Terminal
from .simulated_command import Program, interpret, outlives_sigterm
from .simulated_io import SimulatedIO
from .static_pods import MIRROR
from .stop_signals import SIGTERM_EXIT, stop_signal
from .volumes import MountError

log = logging.getLogger(__name__)

RUN_SECONDS = "sim.nanokube.io/run-seconds"
EXIT_CODE = "sim.nanokube.io/exit-code"
STOP_SECONDS = "sim.nanokube.io/stop-seconds"
STOP_EXIT_CODE = "sim.nanokube.io/stop-exit-code"
PULL_SECONDS = "sim.nanokube.io/pull-seconds"
#: the kubelet's activeDeadlineHandler's message (status.message and its DeadlineExceeded Event)
#: the kubelet's --sync-frequency: how often it syncs a pod with nothing new (a resize held back again)
SYNC_FREQUENCY = 60.0
DEADLINE_MESSAGE = "Pod was active on the node longer than the specified deadline"


@dataclass(frozen=True, slots=True)
class Eviction:
    """Why the kubelet stops a pod before its end (a kill with upstream's KillPodOptions.Evict): the
    pod is Failed with this status reason and message, and these (type, reason, message)
    conditions True, once its containers stopped with its grace period, or with `grace` seconds
    where given (KillPodFunc's gracePeriodOverride)."""

    reason: str
    message: str
    conditions: tuple[tuple[str, str, str], ...] = ()
    grace: int | None = None


@dataclass(frozen=True, slots=True)
class KillGrace:
    """The grace period a pod's containers stop with (`seconds`), and when (wall clock) the request
    that set it came (`asked`): the simulated runtime counts it from then, the process runtime from
    its kill's start, as killPod does."""

    seconds: float
    asked: float


#: spec.activeDeadlineSeconds ran out (activeDeadlineHandler)
DEADLINE = Eviction("DeadlineExceeded", DEADLINE_MESSAGE)
#: the state the status manager's TerminatePod gives a container that had not finished when its pod ended
#: (its times zero: null, as the server serves them)
UNKNOWN_STATE = {"terminated": {"exitCode": 137, "reason": "ContainerStatusUnknown",
                                "message": "The container could not be located when the pod was terminated",
                                "startedAt": None, "finishedAt": None}}
PULL_ERROR = "sim.nanokube.io/pull-error"
#: how soon after a failed pull the pod is synced again and reported backing off
PULL_RESYNC = 1.0
BACKOFF_INITIAL = 10.0
BACKOFF_MAX = 300.0
#: a container that ran longer than this from its last (re)start before it exited starts its crash-loop
#: back-off over, whatever maxContainerRestartPeriod says (the kubelet's HasExpiredFunc on its back-off)
BACKOFF_RESET = 600.0
#: a status write that failed (the server busy or down, the connection lost) is tried again after
#: this, doubling up to the status manager's sync period, with which syncBatch retries what did not land
STATUS_RETRY_INITIAL = 1.0
STATUS_SYNC_PERIOD = 10.0


def pod_gone(e: BaseException) -> bool:
    """The API error says the pod a write was for is no more: deleted (404), or replaced by one of
    its name (the UID precondition failed, 409); the status manager then stops writing for it."""
    return isinstance(e, APIError) and (e.code == 404 or e.code == 409 and "UID in precondition" in e.message)


def crash_backoff(restarts: int, longest: float | None = None, initial: float = BACKOFF_INITIAL) -> float:
    """How long the kubelet waits to start a container again that exited after `restarts` restarts
    (kuberuntime's doBackOff): the first exit finds no back-off entry, so the container restarts
    at once; then 10 s (`initial`), doubling to 5 min (KEP-4603's shorter curve, ReduceDefaultCrashLoopBackOffDecay,
    is alpha and off by default). `longest`: the node's crashLoopBackOff.maxContainerRestartPeriod
    (KEP-4603's KubeletCrashLoopBackOffMax) in place of 5 min; one under 10 s is the first step too."""
    longest = BACKOFF_MAX if longest is None else longest
    return 0.0 if restarts <= 0 else doubling(min(initial, longest), restarts - 1, longest)

#: how often a pod blocked on its resource claims or volumes re-checks them (doubling)
CLAIM_RETRY_INITIAL = 1.0
CLAIM_RETRY_MAX = 16.0
#: how soon a pod whose sync failed (an image a Never policy names is not on the node) is synced
#: again: the pod workers' back-off after an error (workerBackOffPeriod)
SYNC_RETRY = 10.0
SMP = "application/strategic-merge-patch+json"


def _annotation(pod: dict, key: str, default: float | None) -> float | None:
    v = ((pod.get("metadata") or {}).get("annotations") or {}).get(key)
    if v is None:
        return default
    try:
        return float(v)
    except ValueError:
        log.warning("pod %s: annotation %s=%r is not a number; using %s", pod["metadata"]["name"], key, v, default)
        return default


#: each numeric simulation annotation and what its default means, for the event an unreadable one gets
_NUMERIC_DEFAULTS = {RUN_SECONDS: "run until stopped", EXIT_CODE: "0", STOP_SECONDS: "0",
                     STOP_EXIT_CODE: f"its image's program's, {SIGTERM_EXIT} for most", PULL_SECONDS: "0"}


def _exit_codes(value: str) -> list[int]:
    """The codes of an exit-code annotation, one per run: `3`, or `42,1` (ValueError if one is not a number)."""
    return [int(float(v)) for v in value.split(",")]


def exit_code(pod: dict, run: int) -> int:
    """How the containers' `run`th run (0: the first) exits: the exit-code annotation's code for it,
    its last one for every later run; 0 without one or with one that is not a number."""
    given = ((pod.get("metadata") or {}).get("annotations") or {}).get(EXIT_CODE)
    try:
        codes = _exit_codes(given) if given is not None else [0]
    except ValueError:
        return 0
    return codes[min(run, len(codes) - 1)]


def _end(start: float, program: Program) -> float | None:
    """When (monotonic) `program` started at `start` ends; None for one that runs until stopped."""
    return None if math.isinf(program.seconds) else start + program.seconds


#: the start containerd reports for a container whose task was never created (StartError)
NEVER_STARTED = "1970-01-01T00:00:00Z"


def start_error(argv: list[str], image: str) -> str:
    """containerd's answer where the process a container starts, `argv` (its command and args,
    $(VAR) references expanded: the images LACKING names have no entrypoint, so `args` alone name
    it too), is a tool `image` lacks (simulated_net.LACKING), not one a shell runs: runc cannot exec
    it, so the container never runs; "" where it starts."""
    if argv and argv[0].rpartition("/")[2] in simulated_net.image_lacks(image):
        return start_not_found(argv[0])
    return ""


#: the probes a container's prober workers run, in the order they count, with the name their
#: events give each
PROBES = {"startupProbe": "Startup", "readinessProbe": "Readiness", "livenessProbe": "Liveness"}


def _net_probe(c: dict, kind: str, spec: dict) -> dict | None:
    """Container `c`'s probe of `kind` (PROBES) where it reaches the network: it execs a network
    tool (`wget -qO- http://web`, or a shell running one), or it is an httpGet or tcpSocket probe
    of a port the pod `spec` is known not to answer on once its containers run (`probe_port`):
    it passes as the command does on the cluster's simulated network, or as the port answers
    (`simulated_net.answers`: what the containers' programs listen on), run each period with its
    thresholds and timeout (`PodWorker._net_probes`), not on timing alone as other simulated
    probes."""
    probe = c.get(kind) or {}
    command = (probe.get("exec") or {}).get("command") or []
    if command:
        return probe if simulated_net.names_network(" ".join(command)) else None
    port = probe_port(c, probe)
    running = {x["name"] for x in spec.get("containers") or ()} | \
        {x["name"] for x in spec.get("initContainers") or () if x.get("restartPolicy") == "Always"}
    return probe if port is not None and not simulated_net.answers(spec, running, port) else None


def probe_port(c: dict, probe: dict) -> int | None:
    """The TCP port an httpGet or tcpSocket probe of container `c` dials (a name: its containerPort's)."""
    action = probe.get("httpGet") or probe.get("tcpSocket")
    port = (action or {}).get("port")
    if isinstance(port, str) and not port.isdigit():
        port = next((p.get("containerPort") for p in c.get("ports") or () if p.get("name") == port), None)
    return int(port) if port is not None else None


def invalid_annotations(pod: dict) -> list[str]:
    """Why each numeric simulation annotation that is not a number is ignored (its default is used)."""
    given = (pod.get("metadata") or {}).get("annotations") or {}
    out = []
    for key, default in _NUMERIC_DEFAULTS.items():
        if key in given:
            try:
                _exit_codes(given[key]) if key == EXIT_CODE else float(given[key])
            except ValueError:
                out.append(f'annotation {key}="{given[key]}" is not a number; using the default ({default})')
    return out


def terminate_pod(inits: list[dict], containers: list[dict], initialized: bool) -> tuple[list[dict], list[dict]]:
    """The init and app container statuses as the status manager's TerminatePod leaves a pod that
    ended with containers whose end is not known (never started, or waiting to restart): once the
    pod initialized, each app container not terminated is ContainerStatusUnknown (137, no
    containerID); of the init containers, those up to the last one that ever started (the first
    one at least) are, and the ones after it keep waiting."""
    def unknown(s: dict) -> dict:
        if "terminated" in s["state"]:
            return s
        return {k: v for k, v in s.items() if k not in ("containerID", "resources", "allocatedResources")} | {
            "state": UNKNOWN_STATE, "ready": False, "started": False}
    last = next((i for i in range(len(inits) - 1, -1, -1) if "waiting" not in inits[i]["state"]
                 or (inits[i].get("lastState") or {}).get("terminated")), 0)
    return ([unknown(s) if i <= last else s for i, s in enumerate(inits)],
            [unknown(s) for s in containers] if initialized else containers)


def stop_exit_code(pod: dict, grace: float, default: int = SIGTERM_EXIT) -> int:
    """How a container its stop signal stops exits: killed (137) when it takes longer than the grace
    period, else `stop-exit-code`, by default `default`: 143, a process SIGTERM ends, or what the
    image's program gives on its signal (stop_signals: nginx's graceful 0). A Job's deleted or
    evicted pod is then Failed, not Succeeded, as for most programs."""
    if (_annotation(pod, STOP_SECONDS, 0.0) or 0.0) > grace:
        return 137
    return int(_annotation(pod, STOP_EXIT_CODE, default) or 0)


# cached: a cluster runs few distinct images, and every status write names each container's image twice
@functools.lru_cache(maxsize=4096)
def image_ref(image: str) -> str:
    """The fully qualified reference a runtime reports: docker.io/library/x:latest."""
    name, at, digest = image.partition("@")
    first = name.split("/")[0]
    if "/" not in name:
        name = f"docker.io/library/{name}"
    elif not ("." in first or ":" in first or first == "localhost"):
        name = f"docker.io/{name}"
    if not digest and ":" not in name.rsplit("/", 1)[-1]:
        name += ":latest"
    return name + at + digest


@functools.lru_cache(maxsize=4096)
def image_id(image: str) -> str:
    """repo@sha256:..., a stable stand-in digest for the image."""
    ref = image_ref(image)
    repo = ref.split("@")[0]
    if ":" in repo.rsplit("/", 1)[-1]:
        repo = repo[:repo.rfind(":")]
    return f"{repo}@sha256:{hashlib.sha256(ref.encode()).hexdigest()}"


@functools.lru_cache(maxsize=4096)
def image_size(image: str) -> int:
    """The image's size in bytes, as a runtime reports it (image_sizes)."""
    return image_sizes.size(image_ref(image))


def pulled_message(image: str, seconds: float) -> str:
    """The image manager's Pulled message for a pull that took `seconds` (nothing queued ahead
    of it here: the time including waiting is the same), truncated to the millisecond and
    printed as Go prints a Duration."""
    took = go_duration(int(seconds * 1000) * 1_000_000)
    return f'Successfully pulled image "{image}" in {took} ({took} including waiting). ' \
           f"Image size: {image_size(image)} bytes."


def pull_error(pod: dict, image: str) -> str:
    """The error pulling `image` fails with while the pod's pull-error annotation is set ('' once
    it is not): `not-found` in containerd's words for a tag the registry lacks, else as given."""
    error = ((pod.get("metadata") or {}).get("annotations") or {}).get(PULL_ERROR, "")
    if error == "not-found":
        ref = image_ref(image)
        return f'rpc error: code = NotFound desc = failed to pull and unpack image "{ref}": failed to resolve ' \
               f'reference "{ref}": {ref}: not found'
    return error


def volume_mount_statuses(container: dict, recursive: bool) -> list[dict]:
    """The kubelet's VolumeMountStatus of each of a container's mounts (convertToAPIContainerStatuses,
    RecursiveReadOnlyMounts GA): a read-only one's recursiveReadOnly is Enabled where asked for
    (Enabled or IfPossible) and the runtime's mounts are `recursive`, else Disabled."""
    out = []
    for m in container.get("volumeMounts") or ():
        s = {"name": m.get("name", ""), "mountPath": m.get("mountPath", "")}
        if m.get("readOnly"):
            rro = recursive and m.get("recursiveReadOnly") in ("Enabled", "IfPossible")
            s |= {"readOnly": True, "recursiveReadOnly": "Enabled" if rro else "Disabled"}
        out.append(s)
    return out


def recursive_read_only_error(container: dict, recursive: bool) -> str:
    """Why the kubelet cannot make the container's mounts (makeMounts' resolveRecursiveReadOnly):
    one asks for recursiveReadOnly Enabled where the runtime's mounts are not `recursive` ('' if none)."""
    if recursive:
        return ""
    name = next((m.get("name", "") for m in container.get("volumeMounts") or ()
                 if m.get("recursiveReadOnly") == "Enabled"), None)
    return "" if name is None else f'failed to resolve recursive read-only mode: volume "{name}" requested ' \
                                   "recursive read-only mode, but it is not supported by the runtime"


def field_path(pod: dict, name: str) -> str:
    """The fieldPath of a container's events: spec.containers{NAME}, spec.initContainers{NAME}."""
    spec = pod.get("spec") or {}
    for key in ("containers", "initContainers", "ephemeralContainers"):
        if any(c.get("name") == name for c in spec.get(key) or ()):
            return f"spec.{key}{{{name}}}"
    return ""


#: the pod conditions a kubelet owns (upstream's PodConditionByKubelet); other writers' conditions are kept
KUBELET_CONDITIONS = frozenset({"PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled",
                                inplace.PENDING, inplace.IN_PROGRESS, restartrules.CONDITION})
#: the status lists a strategic merge patch merges by key (patchMergeKey); the kubelet's other lists are atomic
_MERGE_KEYS = {"conditions": "type", "podIPs": "ip", "hostIPs": "ip"}


def resource_version(obj: dict) -> int:
    return int(obj["metadata"].get("resourceVersion") or 0)


def _owned(status: dict, gates: frozenset[str] = frozenset()) -> tuple:
    """What of a pod's status the kubelet owns and another writer may have changed: the phase and
    its conditions' statuses (the node lifecycle controller marks Ready False), and those of the
    conditions its readiness gates name, which its Ready follows."""
    return status.get("phase"), tuple(sorted((c.get("type"), c.get("status")) for c in status.get("conditions") or ()
                                             if c.get("type") in KUBELET_CONDITIONS or c.get("type") in gates))


def _gates(spec: dict) -> frozenset[str]:
    return frozenset(g.get("conditionType") for g in spec.get("readinessGates") or ())


def readiness_gates_message(spec: dict, conditions: list[dict]) -> str:
    """Why the pod's readiness gates keep Ready False though its containers are ready, as the
    kubelet's GeneratePodReadyCondition words it ('' when every gate's condition is True)."""
    have = {c.get("type"): c.get("status") for c in conditions}
    out = []
    for g in spec.get("readinessGates") or ():
        name = g.get("conditionType")
        if name not in have:
            out.append(f'corresponding condition of pod readiness gate "{name}" does not exist.')
        elif have[name] != "True":
            out.append(f'the status of pod readiness gate "{name}" is not "True", but {have[name]}')
    return ", ".join(out)


def _condition(ctype: str, ok: bool, now: str, live: dict, generation: int | None, reason: str = "",
               message: str = "") -> dict:
    """A kubelet condition for the pod's `generation`; its lastTransitionTime stays the live one's
    while its status does not change (upstream's updateLastTransitionTime). Its lastProbeTime is
    never set, so null, as the server serves it (a metav1.Time value): the status compares equal."""
    status = "True" if ok else "False"
    c = {"type": ctype, "status": status, "lastProbeTime": None,
         "lastTransitionTime": transition_time(live.get(ctype), status, now)}
    if generation:
        c["observedGeneration"] = generation
    if reason:
        c["reason"] = reason
    if message:
        c["message"] = message
    return c


def unready_message(spec: dict, containers: list[dict], inits: list[dict] | None) -> str:
    """Why ContainersReady (and so Ready) is False, as the kubelet's GenerateContainersReadyCondition
    words it: the sidecars (restartable init containers), then the app containers, that have no
    status ("containers with unknown status: [a]") or are not ready ("containers with unready
    status: [a b]")."""
    have = {s["name"]: s for s in [*(inits or ()), *containers]}
    named = [c["name"] for c in spec.get("initContainers") or () if c.get("restartPolicy") == "Always"] + \
        [c["name"] for c in spec.get("containers") or ()]
    unknown = [n for n in named if n not in have]
    unready = [n for n in named if n in have and not have[n].get("ready")]
    return ", ".join(f"containers with {what} status: [{' '.join(names)}]"
                     for what, names in (("unknown", unknown), ("unready", unready)) if names)


def uninitialized_message(spec: dict, inits: list[dict] | None) -> str:
    """Why Initialized is False, as the kubelet's GeneratePodInitializedCondition words it: the init
    containers with no status ("containers with unknown status: [a]") or not done ("containers
    with incomplete status: [a b]"; done: exited 0, or, for a sidecar, started)."""
    have = {s["name"]: s for s in inits or ()}
    unknown, incomplete = [], []
    for c in spec.get("initContainers") or ():
        s = have.get(c["name"])
        if s is None:
            unknown.append(c["name"])
        elif not (s.get("started") if c.get("restartPolicy") == "Always"
                  else (s["state"].get("terminated") or {}).get("exitCode") == 0):
            incomplete.append(c["name"])
    return ", ".join(f"containers with {what} status: [{' '.join(names)}]"
                     for what, names in (("unknown", unknown), ("incomplete", incomplete)) if names)


def status_patch(live: dict, new: dict) -> dict:
    """The strategic merge patch from the live status to `new`, as upstream's status manager sends
    one (statusutil.PatchPodStatus) for the fields in `new`: changed scalars and atomic lists whole,
    a list merged by key as its changed items, each with only its changed fields (null for one that
    went); {} when nothing changed. Fields the kubelet does not write stay their writers'. Where the
    list's order changes, every item is listed (an unchanged one by its key alone), in place of
    upstream's `$setElementOrder/<field>`: the same result, and the server merging a few fields
    instead of the whole status (ordering by the directive cost it ~210 k instructions a write)."""
    patch: dict = {}
    for field, value in new.items():
        was = live.get(field)
        if was == value:
            continue
        key = _MERGE_KEYS.get(field)
        patch[field] = value if key is None or not was else _list_patch(was, value, key)
    return patch


def _list_patch(live: list[dict], new: list[dict], key: str) -> list[dict]:
    """strategicpatch's diffListsOfMaps for items of scalars: the new and changed items (every item
    when the keys' order changes), then a `$patch: delete` for each live item gone."""
    before = {item.get(key): item for item in live}
    keys = [item.get(key) for item in new]
    whole = [item.get(key) for item in live] != keys
    out = []
    for item in new:
        was = before.get(item.get(key))
        if was is None:
            out.append(item)
        elif was != item:
            change = {f: v for f, v in item.items() if f not in was or was[f] != v}
            change.update((f, None) for f in was if f not in item)
            change[key] = item[key]
            out.append(change)
        elif whole:
            out.append({key: item[key]})
    out.extend({key: item.get(key), "$patch": "delete"} for item in live if item.get(key) not in keys)
    return out


class PodWorker:
    """Drives one pod; `update` feeds it newer copies of the pod from the informer."""

    def __init__(self, agent, pod: dict):
        self.agent = agent
        self.clock = agent.clock
        #: when (wall clock) this worker first saw the pod deleted: the deletion's grace counts from
        #: then, as killContainer counts it from the kill's start (the deletionTimestamp, in whole
        #: seconds and read late on a busy node, would eat a 1 s grace and skip the preStop hooks)
        self.deleted_at: float | None = None
        self.pod = pod
        self.uid = pod["metadata"]["uid"]
        self.changed = asyncio.Event()
        self.restarts = 0
        self.last_state: dict = {}
        self.started_at = ""
        self.start_time = ""
        self.ip = ""
        #: whether the pod's sandbox is made: not while its claims are prepared and its volumes
        #: mounted (the kubelet does both before createPodSandbox), so no podIP is reported, and
        #: PodReadyToStartContainers is False, for a pod stuck there
        self.sandboxed = False
        self._task: asyncio.Task | None = None
        self.io = SimulatedIO(self)
        #: each container's requests and limits as allocated, and as its running instance has them
        #: (they differ while a resize is actuated); filled from the spec when the pod starts
        self.allocated: dict[str, dict] = {}
        self.actuated: dict[str, dict] = {}
        #: what each running container's status reports of `actuated` (worked out when it changes)
        self.reported: dict[str, dict] = {}
        #: the resize conditions the next status write reports
        self.resize_conditions: list[dict] = []
        #: whether a sync period's retry of a resize held back (`_resize_blocked`) is due
        self.resize_retry_due = False
        #: the statuses of the ephemeral containers started, by name
        self.ephemeral: dict[str, dict] = {}
        #: the specs of those started since their start events were recorded
        self.ephemeral_started: list[dict] = []
        #: the containers run: a change of the spec (an ephemeral container, a resize) is acted on
        self.live = False
        #: containers restarted on their own (a resize under a RestartContainer policy), by name: the
        #: restarts beyond the pod's, and, until the pod's containers next restart together, when
        #: the instance started and how the previous one ended
        self.own_restarts: dict[str, int] = {}
        self.own_started: dict[str, str] = {}
        #: the image each app container and sidecar runs, by name: a new one in the spec (`kubectl set
        #: image`) restarts it (`_sync_images`)
        self.run_images: dict[str, str] = {c["name"]: c.get("image", "") for c in self._sidecars() + self._containers()}
        self.own_last_state: dict[str, dict] = {}
        #: the app containers waiting out their crash-loop back-off: their waiting state, by name
        self.waiting: dict[str, dict] = {}
        #: those of them whose restart is counted as they start again: meanwhile their status is the
        #: instance that ended (restartCount, containerID), as convertToAPIContainerStatuses
        #: reports a container in back-off from its last dead one
        self.restart_due: set[str] = set()
        #: when (monotonic) each app container started passes its startup and readiness probes
        self.probed: dict[str, tuple[float, float]] = {}
        #: when (monotonic) each running app container or sidecar started, and the workers of its probes that
        #: reach the network (`_net_probe`), by (container, kind)
        self.began: dict[str, float] = {}
        self.net: dict[tuple[str, str], prober.Worker] = {}
        #: each running app container's end (monotonic; None: not on its own) and exit code
        self.lifetimes: dict[str, tuple[float | None, int]] = {}
        #: the last status write's arguments and what it left of the status the kubelet owns: a copy
        #: that says otherwise is written again (the status manager's needsReconcile)
        self._last_write: dict | None = None
        self._last_now = ""
        self._wrote: tuple | None = None
        self.reconcile = False
        #: the status manager's side: the last status wanted has not landed (its write failed), the
        #: task that writes it again on the clock until it does, and the lock that orders the writes
        self.unsynced = False
        self._status_retry: asyncio.Task | None = None
        self._status_lock = asyncio.Lock()
        #: the kubelet stops the pod (its active deadline ran out, `evict`): it is stopped and Failed;
        #: when (wall clock) it was asked to, the time its grace period counts from (None: as it stops)
        self.eviction: Eviction | None = None
        self.evicted_at: float | None = None
        #: the container whose start (its image) is under way, or was last
        self.starting = ""
        #: the sync under way read the pod's image pull secrets (getPullSecretsForPod: once a sync)
        self.secrets_read = False
        #: when each (non-sidecar) init container ran: (startedAt, finishedAt), kept across writes
        self.init_ran: dict[str, tuple[str, str]] = {}
        #: app containers that exited for good while others restart (their own policy or rules): their final status
        self.ended: dict[str, dict] = {}
        #: the pod's containers are stopped to restart them all (a RestartAllContainers rule matched),
        #: how many times that happened, and the init containers' runs before the last time
        self.restarting_all = False
        self.all_restarts = 0
        self.init_last: dict[str, dict] = {}
        #: the times each init container that runs an interpreted command failed and was restarted
        #: for it, and the one that failed for good (restartPolicy Never): its spec and how it ended
        self.init_restarts: dict[str, int] = {}
        self.init_failed: tuple[dict, dict] | None = None
        #: the running containers whose liveness probe is to fail (their end in `lifetimes` is the
        #: kill's start): what it prints then, and when (None: never) and how the command would end;
        #: and the kind of those a probe on the network failed (its Unhealthy events told as it ran)
        self.liveness_failed: dict[str, tuple[str, float | None, int]] = {}
        self.net_failed: dict[str, str] = {}
        #: when (monotonic) each app container waiting out its back-off starts again, by name
        self.backoff: dict[str, float] = {}
        #: the restart count each container's crash-loop back-off counts from: the one it had when
        #: an instance that ran past BACKOFF_RESET ended (`_crash_backoff`), by name
        self.backoff_from: dict[str, int] = {}
        #: how far the lifecycle got, where a sync that failed goes on from (`_resync`): the
        #: containers were started and their loop entered; the pod's final status is wanted
        self.ran = False
        self.finished = False
        #: its containers are being stopped for good (`_terminate`): a kill under way is not changed
        self.terminating = False

    @property
    def pod(self) -> dict:
        return self._pod

    @pod.setter
    def pod(self, pod: dict) -> None:
        md = pod["metadata"]
        if md.get("deletionTimestamp") and self._static(pod):  # another deleted the mirror pod alone
            pod = {**pod, "metadata": {k: v for k, v in md.items()
                                       if k not in ("deletionTimestamp", "deletionGracePeriodSeconds")}}
        self._pod = pod
        if self.deleted_at is None and pod["metadata"].get("deletionTimestamp"):
            self.deleted_at = self.clock.now()

    def _static(self, pod: dict) -> bool:
        """Whether `pod` is the mirror pod of a static pod the node runs (`agent.runs_static`): its
        deletion by another, or its being gone, leaves the static pod running."""
        return MIRROR in (pod["metadata"].get("annotations") or {}) and self.agent.runs_static(pod)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    def evict(self, why: Eviction) -> None:
        """Stop the pod as `why` says, unless it ends or is being stopped already: a deletion's kill
        under way keeps its grace period and its status, as upstream's SyncTerminatingPod, which
        runs to its end with the grace and status function it began with (its context is not the
        pod worker's, kubernetes#113606), does (the pod is not then Failed as `why` says)."""
        if self.eviction is None and not (self.finished or self.terminating):
            self.eviction, self.evicted_at = why, self.clock.now()
            self.changed.set()

    async def ends_within(self, timeout: float) -> bool:
        """Whether the pod's lifecycle ends within `timeout` seconds (on the agent's clock)."""
        if self._task is None:
            return False
        limit = asyncio.ensure_future(self.clock.sleep(timeout))
        try:
            await asyncio.wait([self._task, limit], return_when=asyncio.FIRST_COMPLETED)
        finally:
            limit.cancel()
        return self._task.done()

    def update(self, pod: dict) -> None:
        """A copy older than the one a status write returned (the informer lags) is dropped: the
        next write's patch is computed against the newest status known."""
        if resource_version(pod) < resource_version(self.pod):
            return
        self.pod = pod
        self.resync()
        self.changed.set()

    def resync(self) -> None:
        """Write the last status again when the server's copy of what the kubelet owns differs,
        unless the kubelet is silent (lease-stop; the agent asks again once it speaks) or the pod
        ended there (a terminal phase is never left)."""
        st = self.pod.get("status") or {}
        if self._wrote is not None and not self.agent.faults.lease_stop and \
                st.get("phase") not in ("Succeeded", "Failed") and \
                _owned(st, _gates(self.pod.get("spec") or {})) != self._wrote:
            self.reconcile = True
            self.changed.set()

    async def removed(self) -> None:
        """The pod is gone from the API (force-deleted): the kubelet still stops what runs of it as
        it stops a deleted pod (HandlePodRemoves' kill), from the last copy it knew -- its
        deletionGracePeriodSeconds where it had seen it deleted, else its own grace period --, its
        preStop hooks, SIGTERM and at least 2 s before SIGKILL; then the worker stops."""
        md = self.pod["metadata"]
        if not md.get("deletionTimestamp"):
            self.pod = {**self.pod, "metadata": {**md, "deletionTimestamp": self.clock.rfc3339()}}
        self.changed.set()
        try:
            if self._task is not None:
                await asyncio.gather(self._task, return_exceptions=True)
        finally:
            await self.stop()

    async def stop(self) -> None:
        for t in (self._task, self._status_retry):
            if t is not None:
                t.cancel()
                await asyncio.gather(t, return_exceptions=True)
        self.io.stop()
        self.agent.ips.release(self.uid)

    # --- streaming (node/streaming.py); the process runtime's worker runs real processes ---

    def has_container(self, container: str) -> bool:
        """Whether the container is running: the kubelet finds exec's and attach's container among
        the runtime's running ones, so one that exited (a finished init container, one waiting out its
        back-off) is `container not found`."""
        instances = self.io.logs.get(container)
        return bool(instances) and not instances[-1].closed

    async def exec(self, container: str, command: list[str], session):
        return await self.io.exec(container, command, session)

    async def attach(self, container: str, session):
        return await self.io.attach(container, session)

    async def port_forward(self, port: int):
        return await self.io.port_forward(port)

    async def logs(self, container: str, options):
        return self.io.serve_log(container, options)

    def empty_dir(self, name: str):
        """The in-memory tree of the pod's emptyDir `name` (simulated_fs.Dir), None while no
        container has looked at its files (the volume stats measure it)."""
        files = self.io._files
        return None if files is None else files.volumes.get(name)

    def container_root(self, name: str):
        """The in-memory root of container `name`'s current instance (simulated_fs.Dir: what it
        wrote to its writable layer), None while nothing has looked at its files."""
        files = self.io._files
        return None if files is None else files.roots.get(name)

    def log_sizes(self, name: str) -> list[int]:
        """The size of each CRI log file of container `name` the kubelet keeps: its current
        instance's and the last one that ended."""
        return [log.size for log in self.io.logs.get(name, ())]

    def etc_hosts(self) -> str | None:
        """The pod's etc-hosts file as the kubelet writes it (hosts_file; a hostNetwork pod's the
        copy of its node's), None where none of its containers mounts one."""
        spec = self.pod.get("spec") or {}
        hostname = container_env.hostname(self.pod, self.agent.name)
        return next((hosts for c in spec.get("containers") or () if (hosts := hosts_file.simulated(
            self.pod, c, hostname, self.ip, dns.ZONE, self.agent.name)) is not None), None)

    def container_logs(self) -> dict:
        """Each container's current log and its restart count (the log file's name), as the
        kubelet's /logs/ lists them."""
        st = self.pod.get("status") or {}
        restarts = {cs.get("name"): cs.get("restartCount", 0) for key in
                    ("initContainerStatuses", "containerStatuses", "ephemeralContainerStatuses")
                    for cs in st.get(key) or ()}
        return {name: (restarts.get(name, 0), logs[-1]) for name, logs in self.io.logs.items() if logs}

    # --- helpers -------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self.pod["metadata"]["name"]

    @property
    def namespace(self) -> str:
        return self.pod["metadata"]["namespace"]

    def deleting(self) -> bool:
        return bool(self.pod["metadata"].get("deletionTimestamp"))

    async def _sleep_until(self, deadline: float) -> None:
        """Measure what is left when the timer task actually starts, so time
        that passed before it was scheduled still counts. The event loop may wake a timer a
        clock tick early: sleep again until the deadline has really passed, so a pull of 1.5 s
        never reports 1.499s."""
        while (left := deadline - self.clock.monotonic()) > 0:
            await self.clock.sleep(left)

    def _active_deadline_left(self) -> float | None:
        """Seconds left of spec.activeDeadlineSeconds, counted from the pod's start (None without one)."""
        seconds = (self.pod.get("spec") or {}).get("activeDeadlineSeconds")
        if seconds is None or not self.start_time:
            return None
        return parse_time(self.start_time) + seconds - self.clock.now()

    async def _wait(self, deadline: float | None, active: bool = False, wake: asyncio.Event | None = None) -> bool:
        """Sleep until the monotonic `deadline` (None: forever) or until `wake` is set; True if cut
        short by deletion, or (`active`: the pod is being set up, its containers run or wait to
        restart) by the pod's activeDeadlineSeconds running out or its eviction (`eviction`).
        Deadlines are fixed before the status write so the API round trip counts as run time.
        Running containers' wait also ends, False, when one reading stdin reaches its EOF."""
        timer = waiter = limit = None
        if deadline is not None:
            timer = asyncio.ensure_future(self._sleep_until(deadline))
        if wake is not None:  # a timer of a kind: it ends the wait as the deadline would
            timer = asyncio.ensure_future(self._until_woken(timer, wake))
        try:
            while not self.deleting():
                self.changed.clear()
                if self.reconcile and self._last_write:
                    self.reconcile = False
                    await self._write(**self._last_write, now=self.clock.rfc3339())
                if self.live:
                    await self._sync_spec()
                left = self._active_deadline_left() if active and self.eviction is None else None
                if left is not None and left <= 0:
                    self.eviction, self.evicted_at = DEADLINE, self.clock.now()
                if active and self.eviction is not None:
                    return True
                if self.io.stdin_closed and (self.live or self.starting in self.io.stdin_closed):
                    return False  # a container reading stdin got EOF and exited
                if self.io.ended and (self.live or self.starting in self.io.ended):  # a command went on, ended
                    return False
                waiter = asyncio.ensure_future(self.changed.wait())
                limit = asyncio.ensure_future(self.clock.sleep(left)) if left is not None else None
                done, _ = await asyncio.wait([t for t in (timer, waiter, limit) if t],
                                             return_when=asyncio.FIRST_COMPLETED)
                for t in (waiter, limit):  # a spec change may move the active deadline: it is worked out again
                    if t is not None and t not in done:
                        t.cancel()
                if timer in done:
                    return self.deleting()
            return True
        finally:
            # also when this wait is itself cancelled (the pod's worker stops): no task left pending
            for t in (timer, waiter, limit):
                if t is not None and not t.done():
                    t.cancel()

    @staticmethod
    async def _until_woken(timer: asyncio.Future | None, wake: asyncio.Event) -> None:
        woken = asyncio.ensure_future(wake.wait())
        try:
            await asyncio.wait([t for t in (timer, woken) if t], return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in (timer, woken):
                if t is not None:
                    t.cancel()

    def _containers(self) -> list[dict]:
        return (self.pod.get("spec") or {}).get("containers") or []

    @property
    def recursive_mounts(self) -> bool:
        """Whether the runtime's read-only mounts are recursive (its handlers' feature)."""
        return self.agent.runtime.handler_features["recursiveReadOnlyMounts"]

    def _sidecars(self) -> list[dict]:
        return [c for c in (self.pod.get("spec") or {}).get("initContainers") or [] if c.get("restartPolicy") == "Always"]

    def _status_of(self, c: dict, state: dict, ready: bool, started: bool) -> dict:
        name = c["name"]
        if name in self.ended:
            return self.ended[name]
        restarts = self.restarts + self.own_restarts.get(name, 0)
        ended = restarts if name in self.restart_due else restarts - 1  # the instance lastState tells of
        s = {"name": name, "state": state, "lastState": self.own_last_state.get(name, self.last_state),
             "ready": ready, "restartCount": restarts, "image": image_ref(c.get("image", "")),
             "imageID": image_id(c.get("image", "")), "started": started}
        if mounts := volume_mount_statuses(c, self.recursive_mounts):
            s["volumeMounts"] = mounts
        if "running" in state or "terminated" in state:
            s["containerID"] = self._container_id(name, restarts)
        elif "terminated" in s["lastState"] and ended >= 0:  # waiting to restart: the instance that ended
            s["containerID"] = self._container_id(name, ended)
        else:  # never created (its image pulling or failing, its config missing): the spec's image, as
            # given, and no image ID (convertToAPIContainerStatuses' default status; no runtime status)
            s["image"], s["imageID"] = c.get("image", ""), ""
        if "terminated" in s["lastState"] and ended >= 0:
            s["lastState"] = {"terminated": {**s["lastState"]["terminated"],
                                             "containerID": self._container_id(name, ended)}}
        if "running" in state:  # what runs (convertContainerStatusResources: for a running container only)
            if not self.allocated:
                self.allocated = inplace.desired(self.pod)
                self._actuate()
            if requests := (self.allocated.get(c["name"]) or {}).get("requests"):
                s["allocatedResources"] = requests
            s["resources"] = self.reported.get(c["name"]) or {}
        return s

    def _container_id(self, name: str, instance: int) -> str:
        """The runtime's ID of the container's `instance`th run (its restartCount then)."""
        return "containerd://" + hashlib.sha256(f"{self.uid}/{name}/{instance}".encode()).hexdigest()

    def _default_waiting(self) -> dict:
        """The state of a container not started yet: PodInitializing in a pod with init containers
        (also once they are done), else ContainerCreating (convertToAPIContainerStatuses)."""
        return {"waiting": {"reason": "PodInitializing" if (self.pod.get("spec") or {}).get("initContainers")
                            else "ContainerCreating"}}

    def _init_progress(self, now: str, current: str = "", state: dict | None = None) -> list[dict]:
        """The init containers' statuses while they start in order: those before `current` ran (a
        sidecar runs, another completed), `current` is in `state`, the rest wait PodInitializing (all
        of them when there is no `current`)."""
        inits = (self.pod.get("spec") or {}).get("initContainers") or []
        names = [c["name"] for c in inits]
        done = names.index(current) if current in names else len(names) if current else 0
        ran = self._init_statuses(now, True)[:done]
        return ran + [self._init_run(c, self._status_of(c, state if c["name"] == current and state else
                                                        {"waiting": {"reason": "PodInitializing"}}, False, False))
                      for c in inits[done:]]

    def _init_run(self, c: dict, status: dict) -> dict:
        """An init container that runs to completion restarts only with the whole pod: its
        restartCount and lastState are those of the pod's restarts in place (not its app containers')."""
        if c.get("restartPolicy") == "Always":
            return status
        status = {k: v for k, v in status.items() if k != "containerID" or "waiting" not in status["state"]}
        return status | {"restartCount": self.all_restarts + self.init_restarts.get(c["name"], 0),
                         "lastState": self.init_last.get(c["name"], {})}

    def _init_statuses(self, now: str, running: bool, at: float | None = None) -> list[dict]:
        """The init containers' statuses: a sidecar (restartable init container) is Started and
        Ready once its startup and readiness probes passed by the monotonic `at` (default now).
        Not `running`, one waits PodInitializing, or as it waited to restart once it had run (one
        stopped with the pod is terminated: `ended`)."""
        out = []
        at = self.clock.monotonic() if at is None else at
        for c in (self.pod.get("spec") or {}).get("initContainers") or []:
            if c.get("restartPolicy") == "Always":
                initializing = {"waiting": {"reason": "PodInitializing"}}
                state = (self.waiting.get(c["name"]) or {"running": {
                    "startedAt": self.own_started.get(c["name"]) or self.started_at or now}}) if running else \
                    self.waiting.get(c["name"], initializing) if c["name"] in self.own_last_state else initializing
                up = running and c["name"] not in self.waiting  # not while waiting out its back-off
                started, ready = self.probed.get(c["name"], (at, at))
                worker = self.net.get((c["name"], "readinessProbe"))
                ready = ready <= at and (not self._net_probe(c) or worker is not None and worker.result is True)
                out.append(self._status_of(c, state, up and ready, up and started <= at))
            else:
                started, finished = self.init_ran.get(c["name"], (now, now))
                term = {"exitCode": 0, "reason": "Completed", "startedAt": started, "finishedAt": finished}
                restarts = self.all_restarts + self.init_restarts.get(c["name"], 0)
                out.append(self._status_of(c, {"terminated": term}, False, False) | {
                    "restartCount": restarts, "lastState": self.init_last.get(c["name"], {}),
                    "containerID": self._container_id(c["name"], restarts)})
        return out

    # --- what changes of a running pod's spec --------------------------------------

    async def _sync_spec(self) -> None:
        """Start the ephemeral containers the spec gained, and allocate and actuate a resize it
        asks for (or report it pending), each reported by a status write and events (upstream's
        allocation manager: ResizeStarted; ResizeDeferred or ResizeInfeasible when the pending
        condition is new or its reason or generation changes, not for a new message alone;
        ResizeCompleted). A spec change with nothing to act on is still observed: its generation.
        An allocation not actuated yet (a sync failed in between) is actuated now, as the kubelet's
        next SyncPod actuates what its allocation manager checkpointed."""
        await self._sync_images()
        if await self._start_ephemeral() | self._end_ephemeral():
            await self._write_running(self.clock.rfc3339())
        started, self.ephemeral_started = self.ephemeral_started, []
        await self._start_events(started, interruptible=False)
        wanted = inplace.desired(self.pod)
        gen = self.pod["metadata"].get("generation")
        if wanted == self.allocated and self.actuated == self.allocated:
            if self.resize_conditions:  # a pending resize was taken back (no event, as upstream)
                self.resize_conditions = []
                await self._write_running(self.clock.rfc3339())
            elif gen and (self.pod.get("status") or {}).get("observedGeneration") != gen:
                await self._write_running(self.clock.rfc3339())
            return
        now = self.clock.rfc3339()
        live = {c.get("type"): c for c in (self.pod.get("status") or {}).get("conditions") or ()}
        others = [w.allocated_requests() for w in self.agent.workers.values()
                  if w is not self and (w.pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
        refused = wanted != self.allocated and \
            inplace.refusal(inplace.requests_with(self.pod, wanted), self.agent.spec.allocatable, others)
        if refused:
            reason, why = refused
            was = self.resize_conditions[0] if self.resize_conditions else {}
            if (was.get("reason"), was.get("message"), was.get("observedGeneration")) != (reason, why, gen):
                self.resize_conditions = [inplace.condition(inplace.PENDING, live.get(inplace.PENDING), now, gen,
                                                            reason, why)]
                if (was.get("reason"), was.get("observedGeneration")) != (reason, gen):
                    await self._event("Warning", f"Resize{reason}",
                                      inplace.message(f"Pod resize {reason}", self.pod, gen, why))
                await self._write_running(now)
            return
        if wanted != self.allocated:
            self.allocated = wanted
            self.resize_conditions = [inplace.condition(inplace.IN_PROGRESS, live.get(inplace.IN_PROGRESS), now, gen)]
            await self._event("Normal", "ResizeStarted", inplace.message("Pod resize started", self.pod, gen))
            await self._write_running(now)
        restarted = inplace.restarts(self.pod, self.actuated, self.allocated)
        if blocked := await self._resize_blocked(restarted):
            # the kubelet's best effort against an OOM kill: the resize stays in progress, with the error,
            # tried again at each sync (and at least each sync period)
            was = self.resize_conditions[0] if self.resize_conditions else {}
            if (was.get("type"), was.get("reason"), was.get("message")) != (inplace.IN_PROGRESS, "Error", blocked):
                self.resize_conditions = [inplace.condition(inplace.IN_PROGRESS, live.get(inplace.IN_PROGRESS), now,
                                                            gen, "Error", blocked)]
                await self._write_running(now)
            if not self.resize_retry_due:
                self.resize_retry_due = True
                self.clock.call_later(SYNC_FREQUENCY, self._retry_resize)
            return
        self._actuate()
        for name in restarted:
            await self._restart_container(name)
        self.resize_conditions = []
        await self._write_running(self.clock.rfc3339())
        await self._event("Normal", "ResizeCompleted", inplace.message("Pod resize completed", self.pod, gen))
        self.agent.retry_resizes()  # a pod that shrank leaves room

    async def _sync_images(self) -> None:
        """A container whose image the spec changed (the one field of a running container's that an
        update may change) is killed and started again with the new one, as computePodActions
        finds its hash changed: Killing `definition changed, will be restarted`, then the pull and
        start events, its restartCount one more. One not running starts with it when it starts."""
        for c in self._sidecars() + self._containers():
            name, image = c["name"], c.get("image", "")
            if self.run_images.setdefault(name, image) != image:
                self.run_images[name] = image
                await self._restart_container(name, f"Container {name} definition changed, will be restarted")
                await self._write_running(self.clock.rfc3339())

    async def _restart_container(self, name: str, why: str = "") -> None:
        """Stop one running container and start it again (its resize needs a restart, its image
        changed), as SyncPod's killContainer does before the start, the pod's sync waiting for it:
        the Killing event, its preStop hook, SIGTERM with what is left of the pod's grace period
        (at least 2 s) and SIGKILL when that is up (`_kill_container`); then the start's (Pulled,
        Created, Started), its restartCount one more, and lastState how the instance ended. One not
        running (waiting out its back-off, or ended) has nothing to stop: it starts with what is
        allocated, if it starts again."""
        if name not in self.io.running:
            return
        path = "spec.containers" if any(c["name"] == name for c in self._containers()) else "spec.initContainers"
        await self._event("Normal", "Killing", why or f"Container {name} resize requires restart", f"{path}{{{name}}}")
        spec = next(c for c in self._sidecars() + self._containers() if c["name"] == name)
        grace = (self.pod.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
        left = await self._pre_stop(spec, self.clock.now() + grace)
        _, code, ended = await self._kill_container(spec, left)
        self.changed.set()  # (the wait clears it: what changed meanwhile, a deletion, is looked at again)
        now = self.clock.rfc3339()
        self.io.restarted(name, image_ref(spec.get("image", "")), code, ended, lambda: self._program(spec))
        self.own_last_state[name] = {"terminated": {
            "exitCode": code, "reason": "Completed" if code == 0 else "Error",
            "startedAt": self.own_started.get(name) or self.started_at or now, "finishedAt": now}}
        self.own_restarts[name] = self.own_restarts.get(name, 0) + 1
        self.own_started[name] = now
        if name in self.lifetimes:  # the new instance runs its command from the start
            self.lifetimes[name] = self._lifetime(spec)
        await self._start_events([spec], interruptible=False)

    def _retry_resize(self) -> None:
        self.resize_retry_due = False
        self.changed.set()

    async def _resize_blocked(self, restarted: list[str]) -> str:
        """Why actuating the allocation must wait (the runtime's own say: a memory limit below what a
        running container, not `restarted`, uses), or ""; nothing here holds it back."""
        return ""

    def _actuate(self) -> None:
        """The containers run with what was allocated to them."""
        self.actuated = self.allocated
        self.reported = {name: inplace.status_resources(r) for name, r in self.actuated.items()}

    def allocated_requests(self):
        """What the pod holds of its node: its requests as allocated (as its spec asks, before it starts)."""
        return inplace.requests_with(self.pod, self.allocated or inplace.desired(self.pod))

    async def _start_ephemeral(self) -> bool:
        """Start the ephemeral containers not started yet, each with its environment (its `env`,
        `envFrom`, the Service variables) as any container; whether there were any."""
        started = False
        for c in (self.pod.get("spec") or {}).get("ephemeralContainers") or ():
            name = c.get("name", "")
            if name in self.ephemeral:
                continue
            image, now = c.get("image", ""), self.clock.rfc3339()
            state, last = {"running": {"startedAt": now}}, {}
            if error := self._start_error(c):  # it ends as it starts, never started again
                self.io.start_ephemeral(name, image_ref(image), Program((), 0.0, 128))
                state = {"terminated": {"exitCode": 128, "reason": "StartError", "message": error,
                                        "startedAt": NEVER_STARTED, "finishedAt": now}}
                if (self.pod.get("spec") or {}).get("restartPolicy") != "Never":  # (ShouldContainerBeRestarted)
                    state, last = {"waiting": {"reason": "RunContainerError", "message": error}}, state
            else:
                await self.io.prepare(c)
                self.io.start_ephemeral(name, image_ref(image), self._program(c))
            self.ephemeral_started.append(c)
            cid = hashlib.sha256(f"{self.uid}/{name}/0".encode()).hexdigest()
            self.ephemeral[name] = {"name": name, "state": state, "lastState": last,
                                    "ready": False, "restartCount": 0, "image": image_ref(image),
                                    "imageID": image_id(image), "containerID": f"containerd://{cid}"}
            if "running" in state:  # (the kubelet reports resources, none for an ephemeral one, while it runs)
                self.ephemeral[name]["resources"] = {}
            if mounts := volume_mount_statuses(c, self.recursive_mounts):
                self.ephemeral[name]["volumeMounts"] = mounts
            started = True
        return started

    def _end_ephemeral(self) -> bool:
        """Report terminated the ephemeral containers whose command ended on its own (they are never
        restarted); whether there were any."""
        ended, self.io.ephemeral_ended = self.io.ephemeral_ended, {}
        now = self.clock.rfc3339()
        for name, code in ended.items():
            s = self.ephemeral[name]
            if running := s["state"].get("running"):
                self.ephemeral[name] = {**_not_running(s), "state": {"terminated": {
                    "exitCode": code, "reason": "Completed" if code == 0 else "Error",
                    "startedAt": running["startedAt"], "finishedAt": now}}}
        return bool(ended)

    async def _write_running(self, now: str, at: float | None = None) -> None:
        """The status of the pod's containers running since `started_at` (or their own restart),
        each Started and Ready once its probes passed by the monotonic `at` (prober.py)."""
        at = self.clock.monotonic() if at is None else at

        def state(c: dict) -> dict:
            return self.waiting.get(c["name"]) or \
                {"running": {"startedAt": self.own_started.get(c["name"]) or self.started_at or now}}

        def passed(c: dict, probe: int) -> bool:
            worker = self.net.get((c["name"], "readinessProbe"))
            return c["name"] not in self.waiting and self.probed.get(c["name"], (at, at))[probe] <= at and \
                (probe == 0 or not self._net_probe(c) or worker is not None and worker.result is True)
        statuses = [self._status_of(c, state(c), passed(c, 1), passed(c, 0)) for c in self._containers()]
        inits = self._init_statuses(now, True, at) if (self.pod.get("spec") or {}).get("initContainers") else None
        sidecars = {c["name"] for c in self._sidecars()}
        # a container that exited for good, or waits to restart, is not ready, nor then is the pod; nor
        # while a sidecar is not (GenerateContainersReadyCondition counts restartable init containers)
        ready = not (self.ended or self.waiting) and all(s["ready"] for s in statuses) and \
            all(s["ready"] for s in inits or () if s["name"] in sidecars)
        await self._write("Running", statuses, ready, now, "" if ready else "ContainersNotReady", running=True,
                          inits=inits)

    async def _write(self, phase: str, containers: list[dict], ready: bool, now: str, reason: str = "",
                     running: bool = False, initialized: bool = True, inits: list[dict] | None = None) -> None:
        """Want this status for the pod and write it, as upstream's status manager does. A write that
        fails on the way (a refusal that is not the pod's end, a lost connection) is tried again on
        the clock while the pod's lifecycle goes on (`_sync_status`); only the pod's end raises."""
        self._last_write = {"phase": phase, "containers": containers, "ready": ready, "reason": reason,
                            "running": running, "initialized": initialized, "inits": inits}
        self._last_now = now
        await self._sync_status()

    async def _sync_status(self) -> None:
        """Patch the status to the last one wanted (skipped when that changes nothing): other writers'
        conditions stay, first. The status and the kubelet's conditions observe the generation of the
        spec acted on (PodObservedGenerationTracking, GA in 1.35). One write at a time, each of the
        newest status wanted, so an older one never lands after a newer one."""
        async with self._status_lock:
            try:
                await self._patch_status(now=self._last_now, **self._last_write)
            except EXPECTED as e:
                if pod_gone(e) and self._static(self.pod):
                    return  # its mirror pod is gone: the next one is written once adopted (`resync`)
                if pod_gone(e):
                    raise
                log.warning("pod %s/%s on %s: status not written, trying again: %s", self.namespace, self.name,
                            self.agent.name, e)
                self.unsynced = True
                if self._status_retry is None or self._status_retry.done():
                    self._status_retry = asyncio.create_task(self._retry_status())
                return
            self.unsynced = False

    async def _retry_status(self) -> None:
        """The status manager's retries: the newest status wanted is written again, backing off up to
        its sync period, until it lands or the pod is gone."""
        delay = STATUS_RETRY_INITIAL
        while self.unsynced:
            await self.clock.sleep(delay)
            delay = min(delay * 2, STATUS_SYNC_PERIOD)
            try:
                await self._sync_status()
            except APIError:  # the pod is gone: nothing to write
                return

    async def _patch_status(self, phase: str, containers: list[dict], ready: bool, now: str, reason: str,
                            running: bool, initialized: bool, inits: list[dict] | None) -> None:
        live = self.pod.get("status") or {}
        gen = self.pod["metadata"].get("generation")
        conditions = live.get("conditions") or []
        kept = {c.get("type"): c for c in conditions}
        evicted = {c[0]: c for c in self.eviction.conditions} if self.eviction else {}
        spec = self.pod.get("spec") or {}
        init_statuses = (self._init_statuses(now, running) if inits is None else inits) \
            if spec.get("initContainers") else None
        message = unready_message(spec, containers, init_statuses) if reason == "ContainersNotReady" else ""
        # Ready also waits for the conditions the readiness gates name (other writers')
        gated = readiness_gates_message(spec, conditions) if ready else ""
        pod_ready, ready_reason, ready_message = (False, "ReadinessGatesNotReady", gated) if gated else \
            (ready, reason, message)
        # the health device plugins and DRA drivers last reported of the containers' devices (KEP-4680)
        containers = [{**c, "allocatedResourcesStatus": health} if (health := self.agent.devices.resource_health(
            self.uid, c["name"]) + self.agent.claims.resource_health(self.pod, c["name"])) else c for c in containers]
        st = {
            "phase": phase, "hostIP": self.agent.host_ip, "hostIPs": [{"ip": self.agent.host_ip}],
            **({"podIP": self.ip, "podIPs": [{"ip": self.ip}]} if self.sandboxed or spec.get("hostNetwork") else {}),
            "startTime": self.start_time,
            "conditions": [c for c in conditions if c.get("type") not in KUBELET_CONDITIONS and c.get("type") not in
                           evicted] + [_condition(t, True, now, kept, gen, why, message)
                                       for t, why, message in evicted.values()] + self.resize_conditions + [
                _condition("PodReadyToStartContainers", self.sandboxed, now, kept, gen),
                # a Succeeded pod's is PodCompleted (GeneratePodInitializedCondition)
                _condition("Initialized", initialized, now, kept, gen,
                           ("PodCompleted" if phase == "Succeeded" else "") if initialized else "ContainersNotInitialized",
                           "" if initialized else uninitialized_message(spec, init_statuses)),
                _condition("Ready", pod_ready, now, kept, gen, ready_reason, ready_message),
                _condition("ContainersReady", ready, now, kept, gen, reason, message),
                _condition("PodScheduled", True, now, kept, gen),
            ],
            "containerStatuses": containers,
        }
        if (pod_level := self.actuated.get(inplace.POD)) is not None:  # what runs and is allocated at pod level
            if requests := (self.allocated.get(inplace.POD) or {}).get("requests"):
                st["allocatedResources"] = requests
            st["resources"] = inplace.status_resources(pod_level)
        if restartrules.restarts_all(self.pod):
            ok, why, message = restartrules.condition_status(self.restarting_all, phase)
            st["conditions"].append(_condition(restartrules.CONDITION, ok, now, kept, gen, why, message))
        if gen:
            st["observedGeneration"] = gen
        if self.eviction is not None and phase in ("Succeeded", "Failed"):
            # (with the terminal phase, not before: the status manager holds a terminal phase back while
            # containers may run, and the reason and message with it: mergePodStatus)
            st["reason"], st["message"] = self.eviction.reason, self.eviction.message
        if init_statuses is not None:
            st["initContainerStatuses"] = init_statuses
        if self.ephemeral:
            st["ephemeralContainerStatuses"] = list(self.ephemeral.values())
        patch = status_patch(live, st)
        if patch:
            self.pod = await self.agent.pods.patch(self.name, {"metadata": {"uid": self.pod["metadata"]["uid"]},
                                                               "status": patch}, SMP,
                                                   namespace=self.namespace, subresource="status")
        self._wrote = _owned(self.pod.get("status") or {}, _gates(self.pod.get("spec") or {}))

    async def _event(self, type_: str, reason: str, message: str, field_path: str = "") -> None:
        """A core/v1 Event about the pod (or, by `field_path`, one of its containers) from this
        node's kubelet, through its recorder (repeats counted, failures logged)."""
        md = self.pod["metadata"]
        ref = {"kind": "Pod", "apiVersion": "v1", "metadata": {
            "name": self.name, "namespace": self.namespace, "uid": self.uid,
            "resourceVersion": md.get("resourceVersion")}}
        await self.agent.recorder.emit(ref, type_, reason, message, field_path)

    async def _ensure_image(self, c: dict, interruptible: bool = True) -> bool:
        """The image manager's EnsureImageExists for container `c`: pulled when its policy is Always,
        or IfNotPresent and the node does not hold the image (Pulling; the pod's pull-seconds on the
        clock; Pulled with the time it took and the image's size), else Pulled "already present".
        A Never policy naming an image the node does not hold (its pool did not preload it, no pod
        pulled it here) fails the sync with ErrImageNeverPull, tried again each SYNC_RETRY until
        another pod's pull brings it; before all that, an image the reference grammar refuses
        (imagename: `Foo:a:b`) fails each sync with InspectFailed and InvalidImageName, never
        pulled. True if the pod was deleted or ran past its active deadline
        meanwhile; a pull that is not `interruptible` (a container restarted while the pod runs)
        holds up the pod's worker until it is done, as SyncPod's does."""
        image, path = c.get("image", ""), field_path(self.pod, c["name"])
        policy = c.get("imagePullPolicy") or "IfNotPresent"
        await self._pull_secrets()
        while interruptible and (message := invalid_image_message(image)):  # (the reference parsed before all else)
            await self._event("Warning", "InspectFailed", message, path)
            await self._container_error("InvalidImageName", path)
            await self._image_waiting(c, "InvalidImageName", message)
            if await self._wait(self.clock.monotonic() + self.agent.sync_retry, active=True):
                return True
        if policy == "Never" and interruptible:
            while image_ref(image) not in self.agent.images:
                message = f'Container image "{image}" is not present with pull policy of Never'
                await self._event("Warning", "ErrImageNeverPull", message, path)
                await self._container_error("ErrImageNeverPull", path)
                await self._image_waiting(c, "ErrImageNeverPull", message)
                if await self._wait(self.clock.monotonic() + self.agent.sync_retry, active=True):
                    return True
        if policy == "Always" or (policy == "IfNotPresent" and image_ref(image) not in self.agent.images):
            delay = BACKOFF_INITIAL
            while True:
                await self._event("Normal", "Pulling", f'Pulling image "{image}"', path)
                began = self.clock.monotonic()
                seconds = _annotation(self.pod, PULL_SECONDS, 0.0) or 0.0
                if seconds > 0 and not interruptible:
                    await self.clock.sleep(seconds)
                elif seconds > 0 and (await self._initialized(c) or
                                      await self._wait(began + seconds, active=True)):
                    return True
                if not (interruptible and (error := pull_error(self.pod, image))):
                    break
                if await self._pull_failed(c, error, began + seconds + delay):
                    return True
                delay = min(delay * 2, BACKOFF_MAX)
                self.secrets_read = False  # (the sync that pulls again reads them again)
                await self._pull_secrets()
            self.agent.images.add(image_ref(image))
            await self._event("Normal", "Pulled", pulled_message(image, self.clock.monotonic() - began), path)
        else:
            await self._event("Normal", "Pulled", f'Container image "{image}" already present on machine and can be '
                                                  "accessed by the pod", path)
        return False

    async def _restart_sync(self, c: dict) -> bool:
        """The sync restarting container `c` (one of its own, reading the pull secrets again)
        ensures its image and its environment: True if the pod was deleted or ran past its
        active deadline meanwhile."""
        self.secrets_read = False
        return await self._ensure_image(c) or await self._ensure_config(c)

    async def _pull_secrets(self) -> None:
        """getPullSecretsForPod, as SyncPod runs it once before it ensures any image (a sync that
        starts several containers, or pulls an image volume then starts one, reads them once): the
        pod's imagePullSecrets the node cannot read are told in one Warning
        (FailedToRetrieveImagePullSecret), and the images are pulled all the same, without them.
        The sync's end is its caller's to mark (`secrets_read` False): after each init container's
        start, after the containers started together, before a restart, before a pull tried again."""
        if self.secrets_read:
            return
        self.secrets_read = True
        names = [ref["name"] for ref in (self.pod.get("spec") or {}).get("imagePullSecrets") or () if ref.get("name")]
        secrets = self.agent.volumes.watched["secrets"] if names else None
        if missing := [name for name in names if await secrets.get(self.namespace, name) is None]:
            await self._event("Warning", "FailedToRetrieveImagePullSecret",
                              f"Unable to retrieve some image pull secrets ({', '.join(missing)}); attempting to "
                              "pull the image may not succeed.")

    async def _ensure_config(self, c: dict, blocked: dict[str, str] | None = None) -> bool:
        """The ConfigMaps and Secrets container `c`'s environment names (envvars.py), read again at
        each of its starts: while one, or a key of it, that is not optional is missing, its start
        fails with CreateContainerConfigError (Warning Failed 'Error: ...'), as does a failed
        PreStartContainer of a device plugin that asks for it, tried again each
        SYNC_RETRY; then the runtime's part: a CDI device of its claims that no CDI spec on the
        node resolves fails it with CreateContainerError, as containerd refuses to create it. With
        `blocked` (a container restarting while others run on) that is not waited for here: the
        error is put there by the container's name, for the pod's loop to try again. True if the
        pod was deleted or ran past its active deadline meanwhile."""
        while True:
            reason, error = "CreateContainerConfigError", await environment_error(
                self.agent.volumes.watched, self.namespace, c)
            if not error:
                error = recursive_read_only_error(c, self.recursive_mounts)
            if not error:  # the device plugins' PreStartContainer (GetDeviceRunContainerOptions)
                error = await self.agent.devices.pre_start(self.uid, c["name"])
            if not error:
                reason, error = "CreateContainerError", self.agent.claims.cdi_error(self.pod, c["name"])
            if not error:
                return False
            await self._event("Warning", "Failed", f"Error: {error}", field_path(self.pod, c["name"]))
            if blocked is not None:
                blocked[c["name"]] = error
                return False
            await self._image_waiting(c, reason, error)
            if await self._wait(self.clock.monotonic() + self.agent.sync_retry, active=True):
                return True

    async def _initialized(self, c: dict) -> bool:
        """Before the first pull of an app container's image in a pod whose init containers just
        ran: the pod is Initialized and its containers wait PodInitializing (kubectl: PodInitializing),
        as the kubelet reports it while the pull takes. Always False (a step of `_ensure_image`'s)."""
        first = not (self.started_at or self.restarts)
        if first and field_path(self.pod, c["name"]).startswith("spec.containers") and \
                (self.pod.get("spec") or {}).get("initContainers"):
            statuses = [self._status_of(x, self._default_waiting(), False, False) for x in self._containers()]
            await self._write("Pending", statuses, False, self.clock.rfc3339(), "ContainersNotReady", running=True)
        return False

    async def _pull_failed(self, c: dict, error: str, retry_at: float) -> bool:
        """A failed pull as the kubelet reports it: Failed events and the container waiting in
        ErrImagePull; at the next sync, BackOff and ImagePullBackOff until `retry_at`. An init
        container's waiting state is not written (its events are). True if the pod was deleted or
        ran past its active deadline meanwhile."""
        image, path = c.get("image", ""), field_path(self.pod, c["name"])
        await self._event("Warning", "Failed", f'Failed to pull image "{image}": {error}', path)
        for reason, message, resync in (
                ("ErrImagePull", error, self.clock.monotonic() + PULL_RESYNC),
                ("ImagePullBackOff", f'Back-off pulling image "{image}": ErrImagePull: {error}', retry_at)):
            if reason == "ImagePullBackOff":
                await self._event("Normal", "BackOff", f'Back-off pulling image "{image}"', path)
            await self._container_error(reason, path)
            await self._image_waiting(c, reason, message)
            if await self._wait(resync, active=True):
                return True
        return False

    async def _container_error(self, reason: str, path: str) -> None:
        """startContainer's Warning Failed "Error: <reason>" for the container at `path` ("": an
        image volume's pull, whose events are the image manager's alone)."""
        if path:
            await self._event("Warning", "Failed", f"Error: {reason}", path)

    async def _image_waiting(self, c: dict, reason: str, message: str) -> None:
        """Report container `c` waiting for its image (ErrImagePull, ImagePullBackOff,
        ErrImageNeverPull) or its configuration (CreateContainerConfigError) with `message`, the others in their default waiting state. An init
        container's keeps the pod Pending and not Initialized (kubectl: Init:ErrImagePull)."""
        now, state = self.clock.rfc3339(), {"waiting": {"reason": reason, "message": message}}
        path = field_path(self.pod, c["name"])
        if path.startswith("spec.initContainers"):
            statuses = [self._status_of(x, self._default_waiting(), False, False) for x in self._containers()]
            await self._write("Pending", statuses, False, now, "ContainersNotReady", initialized=False,
                              inits=self._init_progress(now, c["name"], state))
            return
        if not path.startswith("spec.containers"):
            return
        def other(x: dict) -> dict:  # the others as they are: running on while this one restarts, or not started
            if x["name"] in self.io.running:
                return self._status_of(x, {"running": {"startedAt": self.own_started.get(x["name"]) or
                                                       self.started_at or now}}, True, True)
            return self._status_of(x, self.waiting.get(x["name"]) or self._default_waiting(), False, False)
        statuses = [self._status_of(x, state, False, False) if x["name"] == c["name"] else other(x)
                    for x in self._containers()]
        phase = "Running" if (self.pod.get("status") or {}).get("phase") == "Running" else "Pending"
        await self._write(phase, statuses, False, now, "ContainersNotReady")

    async def _start_events(self, containers: list[dict], interruptible: bool = True,
                            blocked: dict[str, str] | None = None) -> bool:
        """What the kubelet records as it starts each of `containers` in turn (startContainer): its
        image ensured, then Created and Started; with `blocked`, one whose environment cannot be
        made is left there (`_ensure_config`) and not started. True if the pod was deleted or ran
        past its active deadline meanwhile."""
        if not containers:  # (no container to start: no sync whose end to mark)
            return False
        init = False
        try:
            for c in containers:
                if init:  # the previous was an init container: this one starts at the sync its end brings
                    self.secrets_read = False
                self.starting, path = c["name"], field_path(self.pod, c["name"])
                init = path.startswith("spec.initContainers")
                if await self._ensure_image(c, interruptible) or \
                        (interruptible and await self._ensure_config(c, blocked)):
                    return True
                if blocked and c["name"] in blocked:
                    continue
                await self.io.prepare(c)
                await self._event("Normal", "Created", "Container created", path)
                error = await self._started(c, path)
                if init and c.get("restartPolicy") == "Always" and \
                        blocked is None and interruptible and await self._sidecar_startup(c):
                    return True
                if init and c.get("restartPolicy") != "Always":
                    # (one not started has no program; one reading its stdin runs on what it is sent)
                    if (program := self._program(c)) is not None or error or self.io.runs_on_stdin(c):
                        if await self._run_init(c, program):
                            return True
                        continue
                    now = self.clock.rfc3339()  # a simulated init container ends as it starts
                    self.init_ran.setdefault(c["name"], (now, now))
            return False
        finally:
            self.secrets_read = False  # (a container starting later does so at a sync of its own)

    def _start_error(self, c: dict) -> str:
        """`start_error` for container `c` as it starts now (its environment made)."""
        return start_error(self.io.command(c), c.get("image", ""))

    async def _started(self, c: dict, path: str) -> str:
        """The event of container `c`'s start (at `path`): Started, or where runc cannot exec its
        process (`start_error`), Failed in containerd's words (startContainer's "Error: ..."),
        which this gives, "" where it started."""
        if error := self._start_error(c):
            await self._event("Warning", "Failed", f"Error: {error}", path)
        else:
            await self._event("Normal", "Started", "Container started", path)
        return error

    async def _sidecar_startup(self, c: dict) -> bool:
        """Sidecar `c` started as the pod initializes: it runs from now, beside the init containers
        after it (whose files it may write); the kubelet starts the next container only once it is
        Started, past its startupProbe (computeInitContainerActions), the pod Pending meanwhile; its
        readiness probe's timing counts from its start. Its postStart hook runs first, as startContainer
        runs it for every container it starts: one that fails ends it (PostStartHookError), and it
        starts again after its crash-loop back-off, the next init container waiting for a start whose
        hook passes. True if the pod was deleted or ran past its active deadline meanwhile."""
        name = c["name"]
        while True:
            if error := self._start_error(c):  # runc could not start it: it ends now (StartError, 128)
                self.waiting[name] = {"waiting": {"reason": "RunContainerError", "message": error}}
                self.lifetimes[name] = self.clock.monotonic(), 128
            else:
                self.io.start(name, image_ref(c.get("image", "")), self._program(c))
                self.own_started[name] = self.clock.rfc3339()
                if name in self.io.programs:
                    self.lifetimes[name] = self._lifetime(c)
                await self._post_start_hooks([c])
            if self.deleting():
                return True
            if name not in self.waiting:
                start = self.clock.monotonic()
                self.probed[name] = self._passing(c)
                up = self.probed[name][0]
                if up <= start:
                    return False
                await self._init_waiting(c, {"running": {"startedAt": self.clock.rfc3339()}})
                # a startup probe that runs on the network: the next container waits for it to pass
                while math.isinf(up) and (tick := self._net_tick(c, "startupProbe")) is not None:
                    if await self._wait(tick, active=True):
                        return True
                    await self._net_probes(max(self.clock.monotonic(), tick))
                    up = self.probed[name][0]
                if not math.isinf(up):
                    return await self._wait(up, active=True)
                # it failed failureThreshold times: killed (preStop, grace), it starts again after its back-off
                output, end, code = self.liveness_failed.pop(name)
                kind = self.net_failed.pop(name)
                await self._liveness_kills({name: c}, {name: output}, {name: kind})
                self.lifetimes[name] = end, code = await self._liveness_kill(c, end, code, kind)
                if await self._wait(end, active=True):
                    return True
                self.waiting[name] = {"terminated": {"exitCode": code, "reason": "Error", "startedAt":
                                                     self.own_started.get(name, ""), "finishedAt": self.clock.rfc3339()}}
            if await self._sidecar_hook_failed(c):
                return True

    async def _sidecar_hook_failed(self, c: dict) -> bool:
        """Sidecar `c`'s postStart hook failed as the pod initializes, or runc could not start it
        (`start_error`): it ended (its status waits in PostStartHookError or RunContainerError, then
        CrashLoopBackOff) and starts again after its back-off (at once the first time), its
        restartCount one more. True if the pod was deleted or ran past its active deadline meanwhile."""
        name = c["name"]
        end, code = self.lifetimes.pop(name)
        self.io.exit(name, code, at=end)
        now = self.clock.rfc3339()
        self.own_last_state[name] = {"terminated": {
            "exitCode": code, "reason": "Error", "startedAt": self.own_started.get(name) or now, "finishedAt": now}}
        if error := self._start_error(c):
            self.own_last_state[name] = {"terminated": {"exitCode": 128, "reason": "StartError", "message": error,
                                                        "startedAt": NEVER_STARTED, "finishedAt": now}}
        await self._init_waiting(c, self.waiting[name])
        # (it ended as it started: its back-off goes on, whatever an earlier instance ran)
        if delay := self._crash_backoff(name, self._restart_count(name), None, self.clock.monotonic()):
            self.waiting[name] = {"waiting": {
                "reason": "CrashLoopBackOff", "message": f"back-off {int(delay)}s restarting failed container="
                                                        f"{name} pod={self.name}_{self.namespace}({self.uid})"}}
            await self._init_waiting(c, self.waiting[name])
            await self._event("Warning", "BackOff", f"Back-off restarting failed container {name} in pod "
                              f"{self.name}_{self.namespace}({self.uid})", field_path(self.pod, name))
            if await self._wait(self.clock.monotonic() + delay, active=True):
                return True
        self.own_restarts[name] = self.own_restarts.get(name, 0) + 1
        del self.waiting[name]
        if await self._restart_sync(c):
            return True
        path = field_path(self.pod, name)
        await self._event("Normal", "Created", "Container created", path)
        await self._started(c, path)
        return False

    async def _run_init(self, c: dict, program: Program | None) -> bool:
        """Init container `c`, started, runs its interpreted command `program` (None: what reads its
        stdin, as an app container's does, until that ends: its EOF, its `exit`, the script's end):
        the pod Pending with `c` running until the command ends. Exit 0 and the next one starts;
        another code restarts it after a crash-loop back-off (Init:CrashLoopBackOff) unless the
        pod's restartPolicy is Never, which fails the pod (`init_failed`). One runc could not
        start (`start_error`) ends so at once (Init:RunContainerError; StartError, 128). True if
        the pod must stop: deleted or past its active deadline meanwhile, or failed."""
        name, image = c["name"], image_ref(c.get("image", ""))
        never = (self.pod.get("spec") or {}).get("restartPolicy") == "Never"
        while True:
            started, began = self.clock.rfc3339(), self.clock.monotonic()
            if error := self._start_error(c):
                await self._init_waiting(c, {"waiting": {"reason": "RunContainerError", "message": error}})
                term = {"exitCode": 128, "reason": "StartError", "message": error, "startedAt": NEVER_STARTED,
                        "finishedAt": started}
            else:
                program = self._program(c) or program  # made again at each start (`date` says when)
                self.io.start(name, image, program)  # before its end is reckoned: it schedules what it writes from now
                end = None if program is None else _end(self.clock.monotonic(), program)
                await self._init_waiting(c, {"running": {"startedAt": started}})
                while True:  # the sidecars started before it may exit and restart meanwhile
                    ticks = [self._net_tick(s, kind) for s in self._sidecars() for kind in PROBES]
                    due = [t for t in (end, *self._sidecars_due(), *ticks) if t is not None]
                    if await self._wait(wake := min(due, default=None), active=True):
                        return True
                    if name in self.io.ended or name in self.io.stdin_closed or \
                            end is not None and self.clock.monotonic() >= end:
                        break
                    await self._net_probes(max(self.clock.monotonic(), wake or 0.0))
                    if await self._restart_sidecars(c, started):
                        return True
                if name in self.io.stdin_closed:  # its stdin's EOF (a shell's `exit`) ended it
                    self.io.stdin_closed.discard(name)
                    code = self.io.stdin_status.pop(name, 0)
                else:  # found as it ran: it waited for its files, or was worked out on its stdin
                    code = self.io.ended.pop(name, 0 if program is None else program.exit_code)
                self.io.exit(name, code, at=end)
                if code == 0:
                    self.init_ran[name] = (started, self.clock.rfc3339())
                    return False
                term = {"exitCode": code, "reason": "Error", "startedAt": started,
                        "finishedAt": self.clock.rfc3339()}
            if never:
                self.init_failed = (c, term)
                return True
            delay = self._crash_backoff(name, self.init_restarts.get(name, 0), began, self.clock.monotonic())
            self.init_last[name] = {"terminated": term}
            path = field_path(self.pod, name)
            if delay:  # the first exit restarts at once
                await self._init_waiting(c, {"waiting": {
                    "reason": "CrashLoopBackOff", "message": f"back-off {int(delay)}s restarting failed container="
                                                            f"{name} pod={self.name}_{self.namespace}({self.uid})"}})
                await self._event("Warning", "BackOff", f"Back-off restarting failed container {name} in pod "
                                  f"{self.name}_{self.namespace}({self.uid})", path)
                if await self._wait(self.clock.monotonic() + delay, active=True):
                    return True
            # counted as it starts again: while it waits, its status is the instance that ended
            self.init_restarts[name] = self.init_restarts.get(name, 0) + 1
            if await self._restart_sync(c):
                return True
            await self._event("Normal", "Created", "Container created", path)
            await self._started(c, path)

    def _sidecars_due(self) -> list[float]:
        """When (monotonic) a sidecar's command ends, or one waiting out its back-off starts again."""
        names = {s["name"] for s in self._sidecars()}
        return [end for name, (end, _) in self.lifetimes.items() if name in names and end is not None] + \
            [t for name, t in self.backoff.items() if name in names]

    async def _restart_sidecars(self, c: dict, started: str) -> bool:
        """While init container `c` (running since `started`) runs, a sidecar whose command ended
        restarts after its crash-loop back-off (at once the first time), as the kubelet restarts
        a restartable init container that exits during initialization; the pod's status says so.
        True if the pod was deleted or ran past its active deadline meanwhile."""
        at = self.clock.monotonic()
        for spec in self._sidecars():
            name = spec["name"]
            end, code = self.lifetimes.get(name, (None, 0))
            if end is not None and end <= at and name in self.liveness_failed:  # its probe failed: killed first
                output, end, code = self.liveness_failed.pop(name)
                kind = self.net_failed.pop(name, "livenessProbe")
                await self._liveness_kills({name: spec}, {name: output}, {name: kind})
                self.lifetimes[name] = end, code = await self._liveness_kill(spec, end, code, kind)
            if end is not None and end <= at:
                del self.lifetimes[name]
                self.io.exit(name, code, at=end)
                now = self.clock.rfc3339()
                self.own_last_state[name] = {"terminated": {
                    "exitCode": code, "reason": "Completed" if code == 0 else "Error",
                    "startedAt": self.own_started.get(name) or now, "finishedAt": now}}
                delay = self._crash_backoff(name, self._restart_count(name), self.began.get(name), end)
                self.backoff[name] = at + delay
                if not delay:
                    self.own_restarts[name] = self.own_restarts.get(name, 0) + 1
                else:
                    self.restart_due.add(name)
                    self.waiting[name] = {"waiting": {
                        "reason": "CrashLoopBackOff",
                        "message": f"back-off {int(delay)}s restarting failed container={name} "
                                   f"pod={self.name}_{self.namespace}({self.uid})"}}
                    await self._event("Warning", "BackOff", f"Back-off restarting failed container {name} in pod "
                                      f"{self.name}_{self.namespace}({self.uid})", field_path(self.pod, name))
            if self.backoff.get(name, math.inf) <= at:
                del self.backoff[name]
                self._count_restart(name)
                if await self._restart_sync(spec):
                    return True
                path = field_path(self.pod, name)
                await self._event("Normal", "Created", "Container created", path)
                await self._started(spec, path)
                self.io.start(name, image_ref(spec.get("image", "")), self._program(spec))
                self.own_started[name] = self.clock.rfc3339()
                self.waiting.pop(name, None)
                self.probed[name] = self._passing(spec)
                if name in self.io.programs:
                    self.lifetimes[name] = self._lifetime(spec)
                await self._post_start_hooks([spec])  # a failure ends it now: it restarts as one that exited
                if self.deleting():
                    return True
        await self._init_waiting(c, {"running": {"startedAt": started}})
        return False

    async def _init_waiting(self, c: dict, state: dict) -> None:
        """The pod not initialized while init container `c` is in `state`."""
        now = self.clock.rfc3339()
        await self._write("Pending", [self._status_of(x, self._default_waiting(), False, False)
                                      for x in self._containers()], False, now, "ContainersNotReady",
                          initialized=False, inits=self._init_progress(now, c["name"], state))

    async def _ended(self) -> None:
        """A pod whose phase is final gives back what it held (its IP, its claims' preparation, its
        volumes, room for resizes waiting on its node), and goes if it is being deleted."""
        self.agent.retry_resizes()
        self.agent.ips.release(self.uid)
        await self.agent.claims.unprepare(self.uid)
        self.agent.volumes.unmount(self.uid)
        if self.deleting():
            await self._delete()

    async def _init_failed(self, c: dict, term: dict) -> None:
        """An init container failed under restartPolicy Never: the pod is Failed, not initialized,
        its app containers never started (waiting PodInitializing)."""
        self.finished = True
        now = self.clock.rfc3339()
        self.io.exited(term["exitCode"])  # the sidecars started before it
        await self._write("Failed", [self._status_of(x, self._default_waiting(), False, False)
                                     for x in self._containers()], False, now, "PodFailed", initialized=False,
                          inits=self._init_progress(now, c["name"], {"terminated": term}))
        await self._ended()

    async def _kill_events(self, containers: list[dict]) -> None:
        """Killing for each running container a pod's deletion stops (killContainer): the app
        containers, then the sidecars in reverse order, as the kubelet stops them."""
        for c in containers:
            await self._event("Normal", "Killing", f"Stopping container {c['name']}", field_path(self.pod, c["name"]))

    async def _prepare_claims(self) -> bool:
        """Block in ContainerCreating until every claim is allocated and reserved for the pod, then
        prepare it; False if deleted or past the active deadline meanwhile."""
        return await self._retry(self.agent.claims.prepare, NotReady, "FailedPrepareDynamicResources",
                                 "Failed to prepare dynamic resources: {}")

    async def _mount_volumes(self) -> bool:
        """Block in ContainerCreating until every volume is set up; False if deleted or past the
        active deadline meanwhile."""
        return await self._retry(self.agent.volumes.mount, MountError, "FailedMount", "{}")

    async def _sandbox_config(self) -> bool:
        """Block in ContainerCreating while the sandbox cannot be configured (a user namespace the
        runtime has not: userns.py); False if deleted or past the active deadline meanwhile."""
        async def user_namespace(pod: dict) -> None:
            userns.check(pod, self.agent.runtime.handler_features)
        return await self._retry(user_namespace, userns.Unsupported, "FailedCreatePodSandBox",
                                 "Failed to create pod sandbox: {}")

    async def _retry(self, step, not_ready: type[Exception], reason: str, message: str) -> bool:
        """Run `step(pod)` until it stops raising `not_ready`, backing off, or sooner when a refusal
        names an event that tells what it waits for changed (`wake`: a volume waiting for its
        attachment, woken when the Node's volumesAttached changes); each refusal is reported as a
        Warning event, which the recorder folds into one with a count (but for one marked `quiet`:
        a volume waiting for its attachment, told only once it waited long)."""
        delay = CLAIM_RETRY_INITIAL
        while True:
            try:
                await step(self.pod)
                return True
            except not_ready as e:
                if not getattr(e, "quiet", False):
                    await self._event("Warning", reason, message.format(e))
                wake = getattr(e, "wake", None)
            if await self._wait(self.clock.monotonic() + delay, active=True, wake=wake):
                return False
            delay = min(delay * 2, CLAIM_RETRY_MAX)

    # --- lifecycle hooks (hooks.py) -----------------------------------------------------

    async def _run_hook(self, c: dict, spec: dict) -> str:
        """Run one of container `c`'s hooks: '' or why it failed. An exec runs as `kubectl exec`
        would (its output kept for the message), one the simulation neither interprets nor is
        told the output of (an exec annotation) passing, as the runtime's probes do. An httpGet
        reaches the pod's simulated servers, which answer in plain HTTP on any port (as its probes
        pass: what listens in a container is not known, and a real hook to a port the spec does
        not declare works where a process listens), but refuse the connection on one that only
        containers not running now declare, or at another host (as from the node)."""
        async def run_in(argv: list[str]) -> tuple[int, bytes, bytes]:
            out: list[bytes] = []
            err: list[bytes] = []

            async def to_out(data: bytes) -> None:
                out.append(data)

            async def to_err(data: bytes) -> None:
                err.append(data)
            session = StreamSession(stdin=False, stdout=True, stderr=True, tty=False, write_stdout=to_out,
                                    write_stderr=to_err)
            try:
                code = await self.exec(c["name"], argv, session)
            except StreamFailed:
                if not self.has_container(c["name"]):
                    raise
                return 0, b"", b""  # a command the simulation does not run passes, as its exec probes do
            return code, b"".join(out), b"".join(err)

        async def get(host: str, port: int, path: str, headers: list[dict], scheme: str) -> str:
            url = f'Get "{scheme.lower()}://{host}:{port}{path or "/"}": '
            # the kubelet dials from the node: localhost is the pod only for a hostNetwork one
            pod = {self.ip} | ({"localhost", "127.0.0.1"} if (self.pod.get("spec") or {}).get("hostNetwork") else set())
            if host not in pod or not self.io.listens(port):
                return f"{url}dial tcp {host}:{port}: connect: connection refused"
            return url + hooks.SCHEME_MISMATCH if scheme.upper() == "HTTPS" else ""  # (a plain HTTP server)
        return await hooks.run(self.pod, c, spec, self.ip, hooks.Runner(run_in, get, self.clock.sleep,
                                                                         self._http_fallback, self._sleep_cut))

    async def _http_fallback(self, message: str) -> None:
        """An HTTPS hook passed over HTTP (hooks.py): counted on the kubelet's metrics, told on the pod."""
        self.agent.lifecycle_http_fallbacks += 1
        await self._event("Warning", hooks.FALLBACK_EVENT, message)

    def _sleep_cut(self) -> None:
        """A sleep hook cut off before its end (hooks.py): counted on the kubelet's metrics."""
        self.agent.lifecycle_sleeps_cut += 1

    async def _unless_deleted(self, aw) -> bool:
        """Await `aw` unless the pod's deletion comes first (it is then cancelled): True if it did."""
        task = asyncio.ensure_future(aw)
        try:
            while not task.done():
                if self.deleting():
                    return True
                self.changed.clear()  # (what `_wait` acts on is state it checks again itself)
                waiter = asyncio.ensure_future(self.changed.wait())
                await asyncio.wait([task, waiter], return_when=asyncio.FIRST_COMPLETED)
                waiter.cancel()
            return False
        finally:
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)

    async def _post_start_hooks(self, started: list[dict]) -> None:
        """Each of the containers just `started` that has a postStart hook runs it, in turn, before
        the status says they run. One whose hook fails is told (FailedPostStartHook, without the
        hook's output), killed (Killing FailedPostStartHook) with the pod's grace period, as
        killContainer does: its preStop hook first (the pod's loop waits for it, as SyncPod does),
        then SIGTERM with what is left, at least 2 s (`_sigterm`: a first process with no TERM
        handler runs on until it is up, 137), and waits in PostStartHookError with why until the pod's loop restarts it or not. The pod's
        deletion cuts the hooks short."""
        for c in started:
            if (spec := hooks.handler(c, "postStart")) is None or c["name"] not in self.io.running:
                continue
            hook = asyncio.ensure_future(self._run_hook(c, spec))
            if await self._unless_deleted(hook):
                return
            if not (message := hook.result()):
                continue
            log.info("pod %s/%s: %s", self.namespace, self.name, message)
            path = field_path(self.pod, c["name"])
            await self._event("Warning", "FailedPostStartHook", hooks.POST_START_FAILED, path)
            await self._event("Normal", "Killing", "FailedPostStartHook", path)
            deadline = self.clock.now() + (self.pod.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
            pre_stop = asyncio.ensure_future(self._pre_stop(c, deadline))
            if await self._unless_deleted(pre_stop):
                return  # (the deletion stops it)
            end, code = self.lifetimes.get(c["name"], (None, 0))
            if c["name"] in self.io.ended:  # its command ended on its own while the hook ran
                end, code = self.clock.monotonic(), self.io.ended.pop(c["name"])
            elif end is None or end > self.clock.monotonic():
                left = max(pre_stop.result(), hooks.MIN_GRACE)
                end, code, _ = self._sigterm(c, self.clock.monotonic(), left, end, code)
            self.lifetimes[c["name"]] = end, code
            self.waiting[c["name"]] = {"waiting": {"reason": "PostStartHookError", "message": message}}

    async def _pre_stop(self, c: dict, deadline: float) -> float:
        """killContainer's preStop hook of container `c`, cut off at `deadline` (wall clock), and the
        seconds of grace then left for its SIGTERM as executePreStopHook counts them: what was left
        as it began less the whole seconds it ran (Go's int64 of the elapsed time), so a 1.5 s hook
        takes 1 s off. At least MIN_GRACE is the caller's to give."""
        began = self.clock.now()
        left = max(deadline - began, 0.0)
        if await self._pre_stop_hooks(deadline, {c["name"]}):
            left -= math.floor(self.clock.now() - began + 1e-6)  # (a float's 2.9999... is 3 s run)
        return left

    async def _pre_stop_hooks(self, deadline: float, names: set[str] | None = None) -> bool:
        """The running containers' preStop hooks (those `names` only, if given), side by side, cut
        off at `deadline` (wall clock); each failure told (FailedPreStopHook). Whether any ran."""
        specs = [c for c in self._sidecars() + self._containers() if c["name"] in self.io.running and
                 (names is None or c["name"] in names) and hooks.handler(c, "preStop")]
        if not specs or deadline <= self.clock.now():
            return False
        runs = {c["name"]: asyncio.ensure_future(self._run_hook(c, hooks.handler(c, "preStop"))) for c in specs}
        limit = asyncio.ensure_future(self._sleep_until(self.clock.monotonic() + deadline - self.clock.now()))
        try:
            await asyncio.wait([limit, asyncio.gather(*runs.values(), return_exceptions=True)],
                               return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in (limit, *runs.values()):
                if not t.done():
                    t.cancel()
            await asyncio.gather(limit, *runs.values(), return_exceptions=True)
        for name, run in runs.items():
            if not run.cancelled() and run.exception() is None and (message := run.result()):
                log.info("pod %s/%s: %s", self.namespace, self.name, message)
                await self._event("Warning", "FailedPreStopHook", hooks.PRE_STOP_FAILED, field_path(self.pod, name))
        return True

    # --- the lifecycle ----------------------------------------------------------------

    async def _run(self) -> None:
        """The pod's lifecycle. One that the pod's end cuts short stops quietly; one that fails for
        another reason is logged with its traceback and told as upstream's pod workers tell a failed
        sync (a FailedSync Warning event), then synced again as theirs are: at once when the pod
        changes (an ephemeral container, a resize, its deletion), else after their back-off
        (SYNC_RETRY), each failure told again, until a sync goes through (`_resync`)."""
        sync = self._lifecycle
        while True:
            try:
                await sync()
                return
            except asyncio.CancelledError:
                raise
            except Exception as e:
                if pod_gone(e):
                    return
                self.changed.clear()  # an update from now on syncs it again at once
                self.live = False
                log.exception("pod %s/%s on %s failed", self.namespace, self.name, self.agent.name)
                await self._event("Warning", "FailedSync", f"error determining status: {e}")
            await self._sync_backoff()
            sync = self._resync

    async def _sync_backoff(self) -> None:
        """Until the pod changes, or SYNC_RETRY passes (workerBackOffPeriod, without its jitter)."""
        waits = [asyncio.ensure_future(self.changed.wait()),
                 asyncio.ensure_future(self._sleep_until(self.clock.monotonic() + self.agent.sync_retry))]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in waits:
                t.cancel()

    async def _resync(self) -> None:
        """Sync again after a failed sync, from where the pod stands, as the kubelet's SyncPod
        compares the spec with what runs: its final status written again and what it held given
        back; its running containers' loop gone on with (the status wanted written again, the
        spec's changes acted on, a deletion stopping it gracefully); else its start made again,
        the init containers that completed not run again."""
        if self.finished:
            await self._write(**self._last_write, now=self._last_now)
            await self._ended()
        elif self.ran:
            self.reconcile = True
            await self._run_containers(False, resume=True)
        else:
            await self._lifecycle()

    async def _lifecycle(self) -> None:
        st = self.pod.get("status") or {}
        if st.get("phase") in ("Succeeded", "Failed"):
            if self.deleting():
                await self._delete()
            return
        if self.deleting():
            await self._delete()
            return
        # a hostNetwork pod has the node's IP, as the kubelet reports it; no pod IP is taken for it
        host_network = (self.pod.get("spec") or {}).get("hostNetwork")
        self.ip = self.agent.host_ip if host_network else self.agent.ips.allocate(self.uid, st.get("podIP"))
        self.start_time = st.get("startTime") or self.clock.rfc3339()
        adopted = st.get("phase") == "Running" and st.get("containerStatuses")
        if adopted:
            for ics in st.get("initContainerStatuses") or ():
                if term := (ics.get("state") or {}).get("terminated"):
                    self.init_ran[ics["name"]] = (term.get("startedAt", ""), term.get("finishedAt", ""))
                if "running" in (ics.get("state") or {}):  # a sidecar: its start is its own
                    self.own_started[ics["name"]] = ics["state"]["running"].get("startedAt", "")
            # each container's restarts, start and last end are its own (the pod's: the fewest restarts)
            self.restarts = min(c.get("restartCount", 0) for c in st["containerStatuses"])
            for c in st["containerStatuses"]:
                if c.get("restartCount", 0) > self.restarts:
                    self.own_restarts[c["name"]] = c["restartCount"] - self.restarts
                if "terminated" in (c.get("lastState") or {}):
                    self.own_last_state[c["name"]] = c["lastState"]
                if "running" in (c.get("state") or {}):
                    self.own_started[c["name"]] = c["state"]["running"].get("startedAt", "")
            # a restarted kubelet's back-off entries are gone (in memory): each next exit restarts at once
            self.backoff_from = {c["name"]: c.get("restartCount", 0) for c in st["containerStatuses"]}
            # a container that exited for good while others restart (its own policy or rules) stays so
            self.ended = {c["name"]: c for c in st["containerStatuses"] if "terminated" in (c.get("state") or {})}
            self.started_at = next((c["state"]["running"]["startedAt"] for c in st["containerStatuses"]
                                    if "running" in (c.get("state") or {})), "")
        else:
            now, inits = self.clock.rfc3339(), bool((self.pod.get("spec") or {}).get("initContainers"))
            await self._write("Pending", [self._status_of(c, self._default_waiting(), False, False)
                                          for c in self._containers()], False, now, "ContainersNotReady",
                              initialized=not inits, inits=self._init_progress(now) if inits else None)
            if not (await self._prepare_claims() and await self._mount_volumes() and await self._sandbox_config()):
                await self._never_started()
                return
        self.sandboxed = True
        if not adopted and await self._image_volumes():
            await self._never_started()
            return
        await self._run_containers(bool(adopted))

    async def _image_volumes(self) -> bool:
        """getImageVolumes, once the sandbox is made: each image volume's reference (KEP-4639) is
        ensured as a container's image is, its events the pod's (no fieldPath); while one fails
        (ErrImagePull, its back-off, InvalidImageName) no container starts: they wait
        ContainerCreating. True if the pod was deleted or ran past its active deadline meanwhile."""
        for vol in (self.pod.get("spec") or {}).get("volumes") or ():
            if (image := vol.get("image")) is not None:
                # (named as no container can be: `field_path` finds none, and no container waits on it)
                source = {"name": f"volume {vol['name']}", "image": image.get("reference", ""),
                          "imagePullPolicy": image.get("pullPolicy")}
                if await self._ensure_image(source):
                    return True
        return False

    async def _run_containers(self, adopted: bool, resume: bool = False) -> None:
        """Start the containers, then run each app container for its own lifetime (`_lifetime`):
        as one exits, its own policy, rules or the pod's policy (restartrules.on_exit) restart it
        after its own crash-loop back-off while the others run on, until none is left running or
        waiting to restart; or the whole pod restarts in place when a RestartAllContainers rule
        matches. Sidecars run until the pod stops, or for their interpreted command's lifetime:
        whatever the pod's restartPolicy, one that exits restarts after its back-off, as upstream's
        restartable init containers; the pod ends when its app containers have. `resume`: they
        run, and their loop goes on (a sync again after a failed one)."""
        for message in () if resume else invalid_annotations(self.pod):
            await self._event("Warning", "InvalidSimulationAnnotation", message)
        policy = (self.pod.get("spec") or {}).get("restartPolicy", "Always")
        inits = (self.pod.get("spec") or {}).get("initContainers") or []
        # first the init containers, in order (not one that completed or runs before a failed sync)
        starting = [] if adopted or resume else \
            [c for c in inits if c["name"] not in self.init_ran and c["name"] not in self.io.running] + \
            self._containers()
        together = not resume  # every container starts, not one that waited out its back-off
        lifetimes = self.lifetimes
        backoff = self.backoff
        if resume:  # one whose restart was under way (not running, nor waiting out its back-off, nor ended)
            starting = [c for c in self._sidecars() + self._containers() if c["name"] not in self.io.running
                        and c["name"] not in backoff and c["name"] not in self.ended]
        while True:
            if starting or together:
                blocked: dict[str, str] = {}
                if await self._start_events(starting, blocked=None if together else blocked):
                    if self.init_failed:
                        await self._init_failed(*self.init_failed)
                        return
                    first = not (adopted or self.started_at or self.restarts)
                    await (self._never_started() if first else self._terminate())
                    return
                now = self.clock.rfc3339()
                write = True
                fresh: list[dict] = []
                if together:
                    running = [c for c in self._containers() if c["name"] not in self.ended]
                    for c in self._sidecars() + running if adopted else ():  # no start made their environment
                        await self.io.prepare(c)
                    # the sidecars started among the init containers run on (`_sidecar_startup`)
                    fresh = [c for c in self._sidecars() if c["name"] not in self.io.running and
                             c["name"] not in self.backoff]  # (one waiting out its back-off starts when due)
                    self.io.started({c["name"]: image_ref(c.get("image", "")) for c in fresh + running},
                                    {c["name"]: image_ref(c.get("image", "")) for c in inits
                                     if c.get("restartPolicy") != "Always"},
                                    {c["name"]: p for c in fresh + running if (p := self._program(c))})
                    self.ran = True  # they run: a sync that fails from here on goes on with them
                    write = not (adopted and self.started_at)
                    if write:
                        self.started_at = now
                    lifetimes.update((c["name"], self._lifetime(c)) for c in fresh if c["name"] in self.io.programs)
                else:
                    for name, error in blocked.items():  # tried again at the next sync, the others running on
                        reason = "CreateContainerError" if error.startswith(CDI_CREATE_FAILED) else \
                            "CreateContainerConfigError"
                        self.waiting[name] = {"waiting": {"reason": reason, "message": error}}
                        backoff[name] = self.clock.monotonic() + self.agent.sync_retry
                    running = [c for c in starting if c["name"] not in blocked]
                    for c in running:
                        self.io.start(c["name"], image_ref(c.get("image", "")), self._program(c))
                        self.own_started[c["name"]] = now
                        self.waiting.pop(c["name"], None)
                lifetimes.update((c["name"], self._lifetime(c)) for c in running)
                for c in running:  # one runc could not start ends at once (`_lifetime`), never running
                    if error := self._start_error(c):
                        self.waiting[c["name"]] = {"waiting": {"reason": "RunContainerError", "message": error}}
                await self._post_start_hooks([] if adopted else fresh + running)  # (an adopted one ran its hook)
                if write:
                    self.probed.update((c["name"], self._passing(c)) for c in running)
                    await self._write_running(now)
                elif adopted:
                    self._adopt_probes(self._sidecars() + running)
            adopted = together = False
            starting = []
            probes = [t for times in self.probed.values() for t in times if self.clock.monotonic() < t < math.inf]
            ticks = [t for c in self._sidecars() + self._containers() for kind in PROBES
                     if (t := self._net_tick(c, kind)) is not None]
            wake = min([end for end, _ in lifetimes.values() if end is not None] + list(backoff.values()) + probes +
                       ticks, default=None)
            self.live = self.ran = True
            stopped = await self._wait(wake, active=True)
            self.live = False
            if stopped:
                await self._kill_events([c for c in self._containers() if c["name"] in lifetimes] +
                                        self._sidecars()[::-1])
                await self._terminate()
                return
            apps = {c["name"] for c in self._containers()}
            closed = self.io.stdin_closed & lifetimes.keys() & apps  # a sidecar's EOF is not its end
            self.io.stdin_closed.clear()
            went_on = {name: code for name, code in self.io.ended.items() if name in lifetimes}  # its end found late
            self.io.ended.clear()
            # woken by the timer (not by an EOF): what was due then is, however early the wake-up
            reached = self.clock.monotonic() if closed or went_on or wake is None else \
                max(self.clock.monotonic(), wake)
            changed = await self._net_probes(reached)  # (one failing liveness now ends as it is killed)
            exits = {name: self.io.stdin_status.pop(name, 0) if name in closed else went_on.get(name, code)
                     for name, (end, code) in lifetimes.items()
                     if name in closed or name in went_on or (end is not None and end <= reached)}
            starting = [c for c in self._sidecars() + self._containers() if backoff.get(c["name"], reached + 1) <= reached]
            for c in starting:
                del backoff[c["name"]]
                self._count_restart(c["name"])
            if not exits:
                if wake in probes or changed:  # a probe passed (Started or Ready), or a network one changed
                    await self._write_running(self.clock.rfc3339(), at=reached)
                continue
            now = self.clock.rfc3339()
            specs = {c["name"]: c for c in self._sidecars() + self._containers()}
            failed = {name: self.liveness_failed.pop(name) for name in exits if name in self.liveness_failed
                      and name not in closed | went_on.keys()}  # (not one that ended on its own first)
            kinds = {name: self.net_failed.pop(name, "livenessProbe") for name in failed}
            await self._liveness_kills(specs, {name: output for name, (output, _, _) in failed.items()}, kinds)
            stops = await asyncio.gather(*(self._liveness_kill(specs[name], *failed[name][1:], kinds[name])
                                           for name in failed))
            for name, (end, code) in zip(failed, stops):
                lifetimes[name] = end, code  # it ends then: now, or as SIGTERM left it
                del exits[name]
            if not exits:
                continue
            terms, ends = {}, {}
            for name, code in exits.items():
                end = lifetimes.pop(name)[0]
                self.waiting.pop(name, None)  # (PostStartHookError: its end is now known)
                ends[name] = reached if end is None or name in closed | went_on.keys() else end
                self.io.exit(name, code, at=ends[name])
                terms[name] = {"exitCode": code, "reason": "Completed" if code == 0 else "Error",
                               "startedAt": self.own_started.get(name) or self.started_at, "finishedAt": now}
                if error := self._start_error(specs[name]):  # as containerd reports a task never created
                    terms[name] = {"exitCode": 128, "reason": "StartError", "message": error,
                                   "startedAt": NEVER_STARTED, "finishedAt": now}
            actions = {name: restartrules.on_exit(specs[name], policy, code) for name, code in exits.items()}
            if restartrules.RESTART_ALL in actions.values():
                term = terms[next(n for n, a in actions.items() if a == restartrules.RESTART_ALL)]
                self.io.exited(term["exitCode"])
                if await self._restart_all(term, now):
                    return
                lifetimes.clear()
                backoff.clear()
                self.restart_due.clear()
                starting, together = inits + self._containers(), True
                continue
            at_once: set[str] = set()
            for name, term in terms.items():
                if not actions[name]:
                    self.ended[name] = self._status_of(specs[name], {"terminated": term}, False, False)
                    continue
                delay = self._crash_backoff(name, self._restart_count(name), self.began.get(name), ends[name])
                backoff[name] = self.clock.monotonic() + delay
                self.own_last_state[name] = {"terminated": term}
                if not delay:  # started again at once, at the top of the loop
                    self.own_restarts[name] = self.own_restarts.get(name, 0) + 1
                    at_once.add(name)
                    continue
                self.restart_due.add(name)
                self.waiting[name] = {"waiting": {
                    "reason": "CrashLoopBackOff",
                    "message": f"back-off {int(delay)}s restarting failed container={name} "
                               f"pod={self.name}_{self.namespace}({self.uid})"}}
            # the sidecars stop with the pod, once no app container runs, waits to restart or starts again now
            if not apps & (lifetimes.keys() | backoff.keys() | {c["name"] for c in starting}):
                now = await self._stop_sidecars(now)
                await self._finish(next((terms[n] for n in reversed(terms) if n in apps), term), now)
                return
            if terms.keys() - at_once:  # those restarting at once are written as they start
                await self._write_running(now)
            for name in terms:  # the kubelet's BackOff, counted on one Event per container
                if actions[name] and name not in at_once:
                    await self._event("Warning", "BackOff", f"Back-off restarting failed container {name} in pod "
                                      f"{self.name}_{self.namespace}({self.uid})", field_path(self.pod, name))

    def _net_probe(self, c: dict, kind: str = "readinessProbe") -> dict | None:
        """Container `c`'s probe of `kind` where it reaches the network (`_net_probe`)."""
        return _net_probe(c, kind, self.pod.get("spec") or {})

    def _passing(self, c: dict) -> tuple[float, float]:
        """When (monotonic) container `c` (an app container or sidecar), starting now, is Started and
        Ready as far as its probes' timing goes (prober.passing); one whose startup probe reaches the
        network is Started only once that probe passes (`_net_probes`), its old probe workers gone."""
        self.began[c["name"]] = start = self.clock.monotonic()
        for kind in PROBES:
            self.net.pop((c["name"], kind), None)
        return (math.inf, math.inf) if self._net_probe(c, "startupProbe") else prober.passing(c, start)

    def _adopt_probes(self, containers: list[dict]) -> None:
        """The agent restarted and adopted `containers` running: their probes run again, as a
        restarted kubelet's probe workers do, their initialDelaySeconds counted from each container's
        start (its status' startedAt: the worker's time since StartedAt), not from the adoption, so
        on the ticks they would have had without the restart (a container that was Started is not
        startup-probed again on the network; until its readiness probe passes, it is not Ready)."""
        now, wall = self.clock.monotonic(), self.clock.now()
        for c in containers:
            name = c["name"]
            self._passing(c)
            started = self.own_started.get(name) or self.started_at
            self.began[name] = began = now - max(wall - parse_time(started), 0.0) if started else now
            if self._net_probe(c, "startupProbe"):
                self.probed[name] = now, now
                self.net[name, "startupProbe"] = prober.Worker(now, result=True, held=True)
            else:
                self.probed[name] = prober.passing(c, began)

    def _net_tick(self, c: dict, kind: str) -> float | None:
        """When (monotonic) running container or sidecar `c`'s probe of `kind` that reaches the network
        (`_net_probe`) runs next: a startup probe from the start, the others from the first tick
        after the container is Started, then each periodSeconds; None while it has none to run."""
        probe, name = self._net_probe(c, kind), c["name"]
        running = name in self.lifetimes or name in self.io.running  # (a sidecar may have no end of its own)
        if probe is None or not running or name not in self.began or name in self.waiting:
            return None
        worker = self.net.get((name, kind))
        if worker is None:
            up = 0.0 if kind == "startupProbe" else self.probed.get(name, (math.inf,))[0] - self.began[name]
            if math.isinf(up):
                return None
            worker = self.net[name, kind] = prober.Worker(self.began[name] + prober.first_tick(probe, up))
        return None if worker.held else worker.due

    async def _net_probes(self, at: float) -> bool:
        """Run the probes that reach the network due by the monotonic `at`, as the kubelet's
        workers run them (prober/worker.go): each failed run is an Unhealthy event; a result counts
        once successThreshold runs in a row pass, or failureThreshold fail. A startup probe that
        passes makes its container Started (its other probes start); a liveness or startup probe that
        fails has it killed (`_liveness_kill`: its end in `lifetimes` is now). Whether a container's
        Started or Ready changed."""
        changed = False
        for c in self._sidecars() + self._containers():
            name = c["name"]
            for kind, called in PROBES.items():
                end = self.lifetimes.get(name, (None,))[0]
                if (tick := self._net_tick(c, kind)) is None or tick > at or end is not None and end <= at:
                    continue  # (not one ending now)
                probe, worker = self._net_probe(c, kind), self.net[name, kind]
                ok, output = await self._exec_probe(c, probe)
                if ok is None:  # an error, not a result: thrown away (doProbe), the state unchanged
                    worker.ran(probe, at)
                    await self._event("Warning", "Unhealthy", f"{called} probe errored and resulted in unknown state: "
                                      f"{output}", field_path(self.pod, name))
                    continue
                if not ok:
                    await self._event("Warning", "Unhealthy", f"{called} probe failed: {output}", field_path(self.pod, name))
                if not worker.record(probe, ok, at):
                    continue
                if kind == "readinessProbe":
                    changed = True
                elif ok and kind == "startupProbe":
                    worker.held = changed = True
                    since = at - self.began[name]
                    self.probed[name] = at, self.began[name] + prober.first_pass(c.get("readinessProbe"), since)
                elif not ok and kind != "readinessProbe":
                    worker.held = True
                    self.liveness_failed[name] = output, *self.lifetimes.get(name, (None, 0))
                    self.net_failed[name] = kind
                    self.lifetimes[name] = at, 137
        return changed

    async def _exec_probe(self, c: dict, probe: dict) -> tuple[bool | None, str]:
        """Run exec probe `probe` in running container `c` as `kubectl exec` runs its command, on
        simulated_net's view of the cluster now: whether it passed, and its output (stdout then
        stderr, as ExecSync gives them). One that runs past timeoutSeconds fails with the runtime's
        words; one not interpreted passes, as other simulated probes do. A tool the image lacks,
        exec'd directly, cannot run at all: None, and the runtime's error."""
        if "exec" not in probe:
            return self._port_probe(c, probe)
        command, name = probe["exec"]["command"], c["name"]
        if command[0].rpartition("/")[2] in simulated_net.image_lacks(c.get("image", "")):
            exec_id = hashlib.sha256(f"{self.uid}/{name}/{command}".encode()).hexdigest()
            return None, f"rpc error: code = Unknown desc = {executable_not_found(exec_id, command[0])}"
        timeout = probe.get("timeoutSeconds") or prober.TIMEOUT_SECONDS
        token = simulated_net.NETWORK.set(await simulated_net.view(self, " ".join(command), c.get("image", "")))
        try:
            program = interpret(command, self.clock.now(), lambda: self.io.draft(name, fresh=False), b"",
                                self.io.environment(name))
            elapsed, writes = 0.0, []
            while program is not None:
                writes += program.writes()
                if program.wait is None:
                    elapsed += program.seconds
                    break
                elapsed += program.wait.at  # (`sleep 1; wget ...`: the rest at its time, if within the timeout)
                if elapsed > timeout:
                    break
                program = program.wait.resume(self.io.draft(name, fresh=False), self.clock.now() + elapsed)
        finally:
            simulated_net.NETWORK.reset(token)
        if program is None:
            return True, ""
        if elapsed > timeout:  # (the exec is cut at its deadline: what it wrote is not given)
            return False, f"command {go_quote(' '.join(command))} timed out"
        text = "".join(x if isinstance(x, str) else x.decode(errors="replace")
                       for stream in ("stdout", "stderr") for _, s, x in writes if s == stream)
        return program.exit_code == 0, text

    def _port_probe(self, c: dict, probe: dict) -> tuple[bool, str]:
        """Run httpGet or tcpSocket probe `probe` of container `c`, dialled from the node as the
        kubelet dials it: it passes where the pod answers on its port now (a plain HTTP server, as
        the simulated pod's), else the connection is refused, in the kubelet's words."""
        port, action = probe_port(c, probe), probe.get("httpGet")
        host = (action or probe.get("tcpSocket") or {}).get("host") or self.ip
        if host == self.ip and self.io.listens(port):
            return True, ""
        refused = f"dial tcp {host}:{port}: connect: connection refused"
        if action is None:
            return False, refused
        return False, f'Get "{(action.get("scheme") or "HTTP").lower()}://{host}:{port}{action.get("path") or "/"}": {refused}'

    def _restart_count(self, name: str) -> int:
        return self.restarts + self.own_restarts.get(name, 0)

    def _crash_backoff(self, name: str, restarts: int, began: float | None, ended: float,
                       initial: float = BACKOFF_INITIAL) -> float:
        """How long container `name`, whose instance that started at `began` (monotonic; None: not
        known) ended at `ended` after `restarts` restarts, waits to start again: its back-off entry
        expires once an instance ran longer than BACKOFF_RESET, so such an exit starts at once and
        the next ones back off from 10 s (`initial`) again (doBackOff's IsInBackOffSince and Next)."""
        if began is not None and ended - began > BACKOFF_RESET:
            self.backoff_from[name] = restarts
        return crash_backoff(restarts - self.backoff_from.get(name, 0), self.agent.max_container_restart_period,
                             initial)

    def _count_restart(self, name: str) -> None:
        """Container `name` starts again after its back-off: its restartCount is one more now."""
        if name in self.restart_due:
            self.restart_due.discard(name)
            self.own_restarts[name] = self.own_restarts.get(name, 0) + 1

    def _program(self, c: dict) -> Program | None:
        """What container `c`'s command runs as simulated_command interprets it (its file commands on
        a draft of its files: the changes are made as it starts); None where it is not a command
        interpreted there, or where the pod's run-seconds or exit-code annotation declares how its
        containers run (what a simulation says wins). One with `tty` runs on a terminal the runtime
        made, not yet sized by any client (0 0)."""
        given = (self.pod.get("metadata") or {}).get("annotations") or {}
        if RUN_SECONDS in given or EXIT_CODE in given or self._start_error(c):
            return None
        return interpret(self.io.command(c), self.clock.now(), lambda: self.io.draft(c["name"]),
                         b"" if not c.get("stdin") else None, self.io.environment(c["name"]),
                         Terminal() if c.get("tty") else None)

    def _lifetime(self, c: dict) -> tuple[float | None, int]:
        """When container `c`, started just now, exits (monotonic; None: not on its own) and with
        which code: as the interpreted command it started with runs (not worked out again: its
        first changes are made by now, and a second `mkdir` would fail), else as the pod's
        run-seconds and exit-code annotations say for its run; one runc could not start (`start_error`)
        ends now, with containerd's 128."""
        if self._start_error(c) and c["name"] in {s["name"] for s in self._containers()}:
            return self.clock.monotonic(), 128
        if program := self.io.programs.get(c["name"]):
            end, now = _end(self.clock.monotonic(), program), self.clock.monotonic()
            failed = self._liveness(c, program)
            self.liveness_failed.pop(c["name"], None)
            if failed is not None and (end is None or now + failed[0] < end):
                self.liveness_failed[c["name"]] = failed[1], end, program.exit_code
                return now + failed[0], 137  # then killed to be restarted (`_liveness_kill`)
            return end, program.exit_code
        run = _annotation(self.pod, RUN_SECONDS, None)
        return (None if run is None else self.clock.monotonic() + max(run, 0.0),
                exit_code(self.pod, self._restart_count(c["name"])))

    async def _liveness_kills(self, specs: dict[str, dict], outputs: dict[str, str], kinds: dict[str, str]) -> None:
        """The kubelet's events for the containers killed as their liveness (or startup: `kinds`)
        probe failed, with what its last run printed (by name): Unhealthy for each failed run
        (folded into one with a count; one that reached the network told them as it ran), then
        Killing."""
        for name, output in outputs.items():
            path = field_path(self.pod, name)
            for _ in range(0 if self._net_probe(specs[name], kinds[name]) else
                           specs[name]["livenessProbe"].get("failureThreshold") or prober.FAILURE_THRESHOLD):
                await self._event("Warning", "Unhealthy", f"Liveness probe failed: {output}", path)
            await self._event("Normal", "Killing", f"Container {name} failed {PROBES[kinds[name]].lower()} probe, "
                              "will be restarted", path)

    async def _liveness_kill(self, c: dict, end: float | None, code: int, kind: str) -> tuple[float, int]:
        """killContainer for container `c`, whose liveness (or startup: `kind`) probe failed just now
        and whose command would end at `end` (monotonic; None: never) with `code`: its preStop hook,
        then SIGTERM with what is left of the grace period (the failed probe's own
        terminationGracePeriodSeconds if set, else the pod's; at least 2 s), as
        setTerminationGracePeriod picks it by the kill's reason. When it then ends and with which
        code (`_sigterm`): a first process with no TERM handler at the grace's end (137)."""
        probe = c.get(kind) or {}
        grace = probe.get("terminationGracePeriodSeconds")
        if grace is None:
            grace = (self.pod.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
        deadline = self.clock.now() + grace
        left = max(await self._pre_stop(c, deadline), hooks.MIN_GRACE)
        at = self.clock.monotonic()
        if end is not None and end <= at:  # its command ended while its hook ran
            return at, code
        end, code, _ = self._sigterm(c, at, left, end, code)
        return end, code

    def _liveness(self, c: dict, program: Program) -> tuple[float, str] | None:
        """When (seconds from its start) container `c`'s exec liveness probe fails for good, as its
        command changes its files, and the probe's output then; None if it never does, or is not
        an exec of a command simulated_command interprets."""
        command = ((c.get("livenessProbe") or {}).get("exec") or {}).get("command") or []
        if not command or self._net_probe(c, "livenessProbe") or interpret(command, self.clock.now(), lambda: self.io.draft(c["name"])) is None:
            return None
        timeout = c["livenessProbe"].get("timeoutSeconds") or prober.TIMEOUT_SECONDS

        def check(t: float) -> tuple[bool, str]:
            fs = self.io.draft(c["name"])
            fs.replay([change for change in program.changes if change[0] <= t])
            probe = interpret(command, self.clock.now() + t, fs, env=self.io.environment(c["name"]))
            if probe.seconds > timeout:  # (ExecProbeTimeout: cut at its deadline, what it wrote not given)
                return False, f"command {go_quote(' '.join(command))} timed out"
            text = "".join(x if isinstance(x, str) else x.decode(errors="replace") for _, _, x in probe.writes())
            return probe.exit_code == 0, text
        return prober.failing(c["livenessProbe"], check, max((change[0] for change in program.changes), default=0.0))

    async def _restart_all(self, term: dict, now: str) -> bool:
        """A RestartAllContainers rule matched (KEP-5532): the pod reports AllContainersRestarting
        while its containers stop (the sidecars killed, without their grace period), then, that
        condition False, waits Pending with every container's restartCount one more (the init
        containers' too) for the crash-loop back-off (the KEP's guard against restart loops), and
        starts over from its init containers, keeping its UID, IP, volumes and node. True if the
        pod was deleted or ran past its active deadline meanwhile (it is then terminated)."""
        self.restarting_all = True
        await self._write("Running", [self._status_of(c, {"terminated": term}, False, False)
                                      for c in self._containers()], False, now, "ContainersNotReady")
        await self._kill_events(self._sidecars()[::-1])
        self.restarting_all = False
        self.ended.clear()
        self.waiting.clear()
        self.last_state = {"terminated": term}
        delay = crash_backoff(self.restarts + 1, self.agent.max_container_restart_period)
        self.restarts += 1
        self.all_restarts += 1
        self.started_at = ""
        self.own_started.clear()
        self.own_last_state.clear()
        self.init_last = {name: {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": started,
                                                "finishedAt": finished}}
                          for name, (started, finished) in self.init_ran.items()}
        self.init_ran.clear()
        now = self.clock.rfc3339()
        inits = bool((self.pod.get("spec") or {}).get("initContainers"))
        await self._write("Pending", [self._status_of(c, self._default_waiting(), False, False)
                                      for c in self._containers()], False, now, "ContainersNotReady",
                          inits=self._init_progress(now) if inits else None)
        if await self._wait(self.clock.monotonic() + delay, active=True):
            await self._terminate()
            return True
        return False

    async def _finish(self, term: dict, now: str) -> None:
        """The pod ends: Succeeded when each of its containers exited 0 (those that had not ended on
        their own, or by their TERM trap, with `term`)."""
        self.finished = True
        statuses = [self._status_of(c, {"terminated": term}, False, False) for c in self._containers()]
        codes = [s["state"]["terminated"]["exitCode"] for s in statuses]
        phase = "Succeeded" if not any(codes) and self.eviction is None else "Failed"
        for name, s in self.ephemeral.items():  # they stop with the pod
            if running := s["state"].get("running"):
                self.ephemeral[name] = {**_not_running(s), "state": {"terminated": {**term, "startedAt": running["startedAt"]}}}
        self.io.exited(term["exitCode"])  # the sidecars
        self.io.ephemeral_exited(term["exitCode"])
        await self._write(phase, statuses, False, now, "PodCompleted" if phase == "Succeeded" else "PodFailed")
        await self._ended()

    async def _stop_sidecars(self, now: str) -> str:
        """The app containers are done for good, so the kubelet kills the pod (computePodActions'
        KillPod): its running sidecars stop as a deletion stops them (Killing, in reverse order, each
        its preStop hook and SIGTERM in turn, within the pod's grace period), each then terminated
        with its own exit code. Until then the pod is Running with the apps' ends (getPhase counts a
        running sidecar). When they all stopped."""
        sidecars = [c for c in self._sidecars() if c["name"] in self.io.running]
        if not sidecars:
            return now
        await self._write_running(now)
        await self._kill_events(sidecars[::-1])
        deadline = self.clock.now() + (self.pod.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
        stopped = {c["name"]: asyncio.Event() for c in sidecars}
        await asyncio.gather(*(self._stop(c, deadline, [stopped[x["name"]] for x in sidecars[i + 1:]],
                                          stopped[c["name"]]) for i, c in enumerate(sidecars)))
        return self.clock.rfc3339()

    async def _never_started(self) -> None:
        """The pod ended before its containers ran (its claims, volumes or an image were not ready
        yet): deleted, or past the active deadline, which the kubelet's sync loop checks first
        (DeadlineExceeded). The pod is Failed with each container that did not finish terminated
        as the status manager's TerminatePod leaves it (ContainerStatusUnknown, 137, no
        containerID), not as a container a SIGTERM stopped."""
        self.finished = True
        if self.eviction is DEADLINE:
            await self._event("Normal", "DeadlineExceeded", DEADLINE_MESSAGE)
        self.io.exited(SIGTERM_EXIT, "received SIGTERM")  # an init container running its command, sidecars
        now = self.clock.rfc3339()
        inits = (self.pod.get("spec") or {}).get("initContainers") or []
        initializing = bool(inits) and self.starting in ("", *(c["name"] for c in inits))
        init_statuses, statuses = terminate_pod(
            self._init_progress(now, self.starting) if inits else [],
            [self._status_of(c, self._default_waiting(), False, False) for c in self._containers()], not initializing)
        await self._write("Failed", statuses, False, now, "PodFailed", initialized=not initializing,
                          inits=init_statuses if inits else None)
        await self._ended()  # (one deleted as the deadline passed: nothing is left to stop)

    async def _terminate(self) -> None:
        """Graceful deletion, as killContainersWithSyncResult stops the running containers: each at
        once, side by side, its own preStop hook first, then its SIGTERM with what is left of the
        grace period (`_kill_grace`), at least 2 s; it stops after min(that, stop-seconds), exiting
        as stop_exit_code says (137: still running when its time is up) or as its TERM trap does;
        an interpreted command with no TERM handler ignores the signal, as runc's first process
        does, and is killed when its time is up (137); it ends with its own code where its command
        ended first (one waiting for what a hook wrote). A sidecar's SIGTERM waits its turn
        (KEP-753's termination ordering): until the app containers and the sidecars after it
        stopped, or its time is up. Past activeDeadlineSeconds the kubelet kills the pod the same
        way, with the pod's own grace period, and as it evicts one (`evict`)."""
        self.terminating = True
        if self.eviction is DEADLINE and not self.deleting():
            await self._event("Normal", "DeadlineExceeded", DEADLINE_MESSAGE)
        grace = self._kill_grace()
        apps = [c for c in self._containers() if c["name"] in self.io.running and c["name"] not in self.ended]
        sidecars = [c for c in self._sidecars() if c["name"] in self.io.running]
        stopped = {c["name"]: asyncio.Event() for c in apps + sidecars}
        turns = {c["name"]: [stopped[x["name"]] for x in apps + sidecars[i + 1:]] for i, c in enumerate(sidecars)}
        await asyncio.gather(*(self._stop(c, grace.asked + grace.seconds, turns.get(c["name"], []), stopped[c["name"]])
                               for c in apps + sidecars))
        code = stop_exit_code(self.pod, grace.seconds)
        now = self.clock.rfc3339()
        term = {"exitCode": code, "reason": "Completed" if code == 0 else "Error",
                "startedAt": self.started_at or now, "finishedAt": now}
        try:
            await self._finish(term, now)
        except APIError as e:
            if e.code != 404:
                raise

    def _kill_grace(self) -> KillGrace:
        """The grace period the pod's containers stop with and when (wall clock) it was asked for, as
        the pod workers' calculateEffectiveGracePeriod settles it from the requests in the order
        they came: the deletion's (deletionGracePeriodSeconds, from when this worker saw it) and the
        kubelet's own (an eviction; node shutdown's gracePeriodOverride; from their request) -- the
        first sets it, a later one only shortens it --, the pod's terminationGracePeriodSeconds
        where the first gives none (its active deadline, a preemption), and never under 1 s (a
        deletion with grace 0 that a finalizer holds gets 1)."""
        md = self.pod["metadata"]
        asks: list[tuple[float, float | None]] = []
        if self.deleting():  # (one gone from the API without a deletion seen: the kubelet's own request)
            asks.append((self.deleted_at, md.get("deletionGracePeriodSeconds")))
        if self.eviction is not None:
            asks.append((self.clock.now() if self.evicted_at is None else self.evicted_at, self.eviction.grace))
        grace, asked = None, self.clock.now()
        for at, given in sorted(asks, key=lambda a: a[0]):
            if given is None and grace is None:
                given = (self.pod.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
            if given is not None and (grace is None or given < grace):
                grace, asked = max(given, 1), at
        if grace is None:
            grace = max((self.pod.get("spec") or {}).get("terminationGracePeriodSeconds", 30), 1)
        return KillGrace(grace, asked)

    async def _stop(self, c: dict, deadline: float, turn: list[asyncio.Event], done: asyncio.Event) -> None:
        """killContainer for container `c` as the pod stops by `deadline` (wall clock): its preStop
        hook, for a sidecar its turn (once each of `turn` is set, or its time is up; the whole
        seconds it waited come off, as waitForTurn's are truncated), then SIGTERM with what is
        left, at least 2 s (minimumGracePeriodInSeconds, whether a hook ran or not); `done` is
        set once it stopped. Its status says how it ended (a sidecar's too: upstream's shows the
        terminated container the runtime reports)."""
        name = c["name"]
        try:
            left = await self._pre_stop(c, deadline)
            if turn and left > 0:
                start = self.clock.monotonic()
                limit = asyncio.ensure_future(self._sleep_until(start + left))
                waits = [asyncio.ensure_future(e.wait()) for e in turn]
                try:
                    await asyncio.wait([limit, asyncio.gather(*waits)], return_when=asyncio.FIRST_COMPLETED)
                finally:
                    for t in (limit, *waits):
                        t.cancel()
                    await asyncio.gather(limit, *waits, return_exceptions=True)
                left -= math.floor(self.clock.monotonic() - start + 1e-6)  # waitForTurn's seconds, truncated
            end, code, why = await self._kill_container(c, left)
            self.io.exit(name, code, why, at=end)
            now = self.clock.rfc3339()
            self.ended[name] = self._status_of(c, {"terminated": {
                "exitCode": code, "reason": "Completed" if code == 0 else "Error",
                "startedAt": self.own_started.get(name) or self.started_at or now, "finishedAt": now}},
                False, False)
        finally:
            done.set()

    async def _kill_container(self, c: dict, left: float) -> tuple[float, int, str]:
        """StopContainer for container `c` once its preStop hook ran: SIGTERM now, with `left`
        seconds of grace, at least 2 s (minimumGracePeriodInSeconds, whether a hook ran or not),
        waited out unless it ends first. When (monotonic) and with which code it ended, and why
        as the runtime tells it ("" for its own end); the caller reports the end."""
        left = max(left, hooks.MIN_GRACE)
        at = self.clock.monotonic()
        end, code = self.lifetimes.get(c["name"], (None, 0))
        if c["name"] in self.io.ended:  # its command ended on its own meanwhile
            return at, self.io.ended.pop(c["name"]), ""
        if end is not None and end <= at:
            return end, code, ""
        end, code, why = self._sigterm(c, at, left, end, code)
        if (own := await self._until_ended(c["name"], end)) is not None:  # its command ended first
            return *own, ""
        return end, code, why

    def _sigterm(self, c: dict, at: float, left: float, end: float | None, code: int) -> tuple[float, int, str]:
        """The runtime's stop signal (its image's STOPSIGNAL, else SIGTERM: stop_signals) at
        monotonic `at` to container `c`, which would end at `end` with `code` on its own (None:
        never), killed `left` seconds later if still running: when it ends, with which code, and
        why (as the runtime tells it; "" for its own end). A TERM trap acts on SIGTERM where it sets
        one; a first process with no handler runs on (runc); otherwise the pod's stop annotations
        say, by default what the image's program does."""
        signal, exits = stop_signal(c.get("image") or "")
        if signal == "SIGTERM" and (trapped := self.io.signalled([c["name"]]).get(c["name"])):
            end, code = trapped
            if end is None or end > at + left:
                return at + left, 137, ""
            return end, code, ""
        if self._outlives_signal(c, signal):  # it ends on its own, or is killed when its time is up
            if end is None or end > at + left:
                return at + left, 137, "was killed after the grace period"
            return end, code, ""
        stop = _annotation(self.pod, STOP_SECONDS, 0.0) or 0.0
        code = stop_exit_code(self.pod, left, exits)
        return at + min(left, stop), code, f"received {signal}" if code != 137 else "was killed after the grace period"

    def _outlives_signal(self, c: dict, signal: str) -> bool:
        """Whether container `c`'s command, its first process, runs on past stop signal `signal` as
        runc's would (simulated_command.outlives_sigterm; a command interpreted here handles no
        other signal): not where the pod's stop annotations say how its containers stop, which
        win over what the command would do."""
        annotations = (self.pod.get("metadata") or {}).get("annotations") or {}
        if STOP_SECONDS in annotations or STOP_EXIT_CODE in annotations:
            return False
        interpreted = c["name"] in self.io.programs
        return outlives_sigterm(self.io.command(c), interpreted) if signal == "SIGTERM" else interpreted

    async def _until_ended(self, name: str, end: float) -> tuple[float, int] | None:
        """Sleep until monotonic `end` unless container `name`'s command ends first (one whose TERM
        trap lets it wait on for a file): when and with which code it did, then."""
        timer = asyncio.ensure_future(self._sleep_until(end))
        try:
            while not timer.done():
                self.changed.clear()  # (each waiter checks its own state again once woken)
                if name in self.io.ended:
                    return self.clock.monotonic(), self.io.ended.pop(name)
                waiter = asyncio.ensure_future(self.changed.wait())
                await asyncio.wait([timer, waiter], return_when=asyncio.FIRST_COMPLETED)
                waiter.cancel()
        finally:
            timer.cancel()
            await asyncio.gather(timer, return_exceptions=True)
        return None

    async def _delete(self) -> None:
        """The status manager removes a deleted pod once its final status landed: a failed delete
        is tried again, backing off as its writes do."""
        if self._status_retry is not None:
            await asyncio.gather(self._status_retry, return_exceptions=True)
        delay = STATUS_RETRY_INITIAL
        while True:
            try:
                await self.agent.pods.delete(self.name, self.namespace, grace_period_seconds=0,
                                             preconditions={"uid": self.pod["metadata"]["uid"]})
                break
            except EXPECTED as e:
                if not isinstance(e, APIError) or e.code not in (404, 409):
                    log.warning("pod %s/%s on %s: not deleted, trying again: %s", self.namespace, self.name,
                                self.agent.name, e)
                    await self.clock.sleep(delay)
                    delay = min(delay * 2, STATUS_SYNC_PERIOD)
                    continue
                break
        self.agent.ips.release(self.uid)


class SimulatedRuntime:
    """The default runtime: containers are timers driven by the pod's annotations."""

    name = "simulated"
    #: what each of its handlers supports, as the CRI's status reports it: recursive read-only
    #: mounts (all below a read-only mount's path is read-only, what the node mounted there too);
    #: no user namespaces (a hostUsers: false pod's sandbox is never made: userns.py)
    handler_features = {"recursiveReadOnlyMounts": True, "userNamespaces": False}
    #: the kubelet's clusterDNS: simulated pods' names are answered as the cluster's DNS server answers (dns)
    cluster_dns = (dns.DNS_SERVER,)

    def worker(self, agent, pod: dict) -> PodWorker:
        return PodWorker(agent, pod)


def _not_running(status: dict) -> dict:
    """A container status without what the kubelet reports of a running container alone (its
    `resources`)."""
    return {k: v for k, v in status.items() if k != "resources"}
