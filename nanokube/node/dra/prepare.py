"""The kubelet's half of DRA on one simulated node: before a pod starts,
check that each of its claims is allocated and reserved for it (or for its
PodGroup) and that the kubelet plugin of every driver of its devices runs on
this node (upstream's "DRA driver ... is not registered" otherwise), and
prepare the devices this node's drivers own; after it ends, unprepare them
once no other pod on the node still uses the claim.

A device of an external driver, one whose kubelet plugin registered on this
node (plugin_manager.py), is prepared by calling the plugin's
NodePrepareResources with the claims the pod needs, once per driver; the CDI
device IDs it returns for each request go to the containers that use the
request (their environment is what the CDI specs the driver wrote say, cdi.py).
The last pod out calls NodeUnprepareResources, again with backoff while it fails.

Preparing a NIC configures it: the driver reports the interface name, its
rail address and MAC in the claim's `status.devices[]` with `Ready=True`,
the 1.37 standardised network data (KEP-4817).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable, Collection
from dataclasses import asdict, dataclass

from ...machinery.errors import APIError
from ...clock import REAL, Clock
from ...dra.podgroup_claims import owned_by_group
from ...dra.resourceclaim import EXTENDED_CLAIM_REF, pod_claims, reserved_for_pod
from ..cluster import NodeSpec
from . import cdi, checkpoint, nvidia
from .driver import GPU_DRIVER, NIC_DRIVER, nic_address
from .grpc_api import DRA_SERVICES
from .metrics import ANY_DRIVER, PREPARE, UNPREPARE, DRAMetrics
from .plugin_manager import DRAPluginManager
from .plugin_watcher import rpc_error

# grpc is imported where a call is made: `nanokube simulate`'s kubelets make none, and each
# of its runs would pay for the import (3.5% of a small run's instructions)

log = logging.getLogger(__name__)

DRIVERS = (GPU_DRIVER, NIC_DRIVER, nvidia.NVIDIA_DRIVER)
_MIG_NAME = re.compile(r"(gpu-\d+)-mig-.+-(\d+)-(\d+)")
STATUS_RETRIES = 6
#: how a failed NodeUnprepareResources is retried (the pod worker's backoff)
UNPREPARE_RETRY_INITIAL = 1.0
UNPREPARE_RETRY_MAX = 16.0
STATUS_BACKOFF = 0.05
#: how containerd words a container it cannot create (CRI CreateContainer), a CDI device it cannot resolve among them
CDI_CREATE_FAILED = "failed to create containerd container: "
#: the gRPC methods a built-in driver's preparation stands for, as its kubelet plugin would serve them
_BUILTIN_PREPARE = f"/{DRA_SERVICES['v1.DRAPlugin']}/NodePrepareResources"
_BUILTIN_UNPREPARE = f"/{DRA_SERVICES['v1.DRAPlugin']}/NodeUnprepareResources"


def _made_for(claim: dict, pod: dict) -> bool:
    """Upstream's resourceclaim.IsForPod, which the kubelet asks of a claim the pod does not name
    itself (generated from a template, or the scheduler's extended resource claim,
    kubernetes#135404): the pod, or its PodGroup for a claim the group shares, controls it. A
    claim of the same name that another pod owns must not be prepared for this one."""
    uid = pod["metadata"]["uid"]
    return any(r.get("controller") and r.get("uid") == uid for r in claim["metadata"].get("ownerReferences") or []) \
        or owned_by_group(claim, pod)


@dataclass(frozen=True)
class _Prepared:
    """A device prepared for a claim: one an external driver's NodePrepareResources returned, or a
    built-in driver's allocation result."""

    #: the claim's requests it serves (none: all of them)
    requests: tuple[str, ...]
    pool: str
    device: str
    cdi_ids: tuple[str, ...]
    #: the share of a device allocated with consumable capacity (the result's shareID; KEP-5075), else None
    share_id: str | None = None


def _ref(claim: dict) -> dict:
    md = claim["metadata"]
    return {"namespace": md["namespace"], "uid": md["uid"], "name": md["name"]}


class NotReady(Exception):
    """A claim the pod needs is missing, unallocated or not reserved for it."""


def _key(d: dict) -> tuple:
    return d["driver"], d["pool"], d["device"], d.get("shareID")


class ClaimPreparer:
    """Prepared claims of one node, counted by the pods that use them."""

    def __init__(self, client, spec: NodeSpec, drivers: Collection[str], clock: Clock = REAL,
                 plugins: DRAPluginManager | None = None, cdi_dirs: tuple[str, ...] = (),
                 device_health: Callable[[str], str] | None = None, checkpoint_path: str = ""):
        """`device_health(device)`: a built-in driver's device's health, "Healthy" or "Unhealthy";
        `checkpoint_path`: where the prepared claims are kept across restarts (checkpoint.py), if anywhere;
        `cdi_dirs`: where the runtime finds CDI specs, a later directory's taking precedence (cdi.py)."""
        self.claims = client.resource("resource.k8s.io", "v1", "resourceclaims")
        self.spec = spec
        #: the built-in drivers whose kubelet plugin runs on this node
        self.drivers = frozenset(drivers)
        #: the external drivers' plugins registered on this node, and where they write CDI specs
        self.plugins = plugins
        self.cdi_dirs = tuple(d for d in cdi_dirs if d)
        #: claim uid -> {external driver: the devices its NodePrepareResources returned}
        self.external: dict[str, dict[str, list[_Prepared]]] = {}
        #: claim uid -> {built-in driver: its devices prepared for the claim}
        self.builtin: dict[str, dict[str, list[_Prepared]]] = {}
        self.device_health = device_health
        #: pod uid -> {claim uid: (namespace, name)} whose drivers were called but that is not prepared yet
        self.attempted: dict[str, dict[str, tuple[str, str]]] = {}
        #: claim uid -> the task asking drivers that failed to unprepare it again
        self.unpreparing: dict[str, asyncio.Task] = {}
        #: claim uid -> (namespace, name, the drivers yet to unprepare it): checkpointed, so that a
        #: restarted node asks them again (upstream keeps such a claim in its cache until they succeed)
        self.unprepare_left: dict[str, tuple[str, str, list[str]]] = {}
        #: releasing the claims of pods deleted while the node was down (`release_gone`)
        self._releasing: asyncio.Task | None = None
        self.clock = clock
        self.nics = {d.name: (i, d) for i, d in enumerate(x for x in spec.devices if x.kind == "nic")}
        self.gpus = {d.name: d for d in spec.devices if d.kind == "gpu" and d.attributes.get("driver") == "nvidia"}
        #: claim uid -> the NVIDIA devices prepared for it, with the request each one serves
        self.nvidia_devices: dict[str, list[dict]] = {}
        #: claim uid -> (namespace, name, uids of the pods on this node using it)
        self.prepared: dict[str, tuple[str, str, set[str]]] = {}
        #: pod uid -> claim uids it holds
        self.by_pod: dict[str, list[str]] = {}
        #: claim uid (a prepared one) -> the drivers of its devices the node acts on
        self.drivers_of: dict[str, tuple[str, ...]] = {}
        #: pods whose claims were asked for and not yet released: each release is one UnprepareResources
        self.pods_seen: set[str] = set()
        self.metrics = DRAMetrics(clock, self.claims_in_use)
        self.checkpoint_path = checkpoint_path
        if checkpoint_path:
            self._restore(checkpoint.load(checkpoint_path))
        if plugins is not None:
            plugins.metrics = self.metrics

    def _ours(self, claim: dict) -> list[dict]:
        """Allocation results this node's drivers act on."""
        results = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []
        return [r for r in results if r["driver"] in DRIVERS and r["pool"] == self.spec.name
                and not r.get("skipNodeOperations")]

    async def prepare(self, pod: dict) -> None:
        """Check and prepare every claim of the pod; raise NotReady naming the
        first one that stops it. Idempotent: a retry re-checks everything. Each call is one
        PrepareResources in dra_operations_duration_seconds, as the kubelet times each pod's,
        whether it has claims or not."""
        started, failed = self.clock.monotonic(), True
        self.pods_seen.add(pod["metadata"]["uid"])
        try:
            await self._prepare(pod)
            failed = False
        finally:
            self.metrics.operation(PREPARE, started, failed)
            if failed and self.attempted.get(pod["metadata"]["uid"]):
                self._save()  # a driver may hold part of a claim it failed to prepare: see `unprepare`

    async def _prepare(self, pod: dict) -> None:
        md = pod["metadata"]
        ns = md["namespace"]
        recorded = {s["name"] for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []}
        named = {ref["name"] for ref in pod["spec"].get("resourceClaims") or [] if ref.get("resourceClaimName")}
        ready: list[dict] = []
        for ref, name in pod_claims(pod):
            if name is None:
                if ref in recorded:  # the controller recorded that no claim is needed
                    continue
                raise NotReady(f'prepare dynamic resources: pod "{ns}/{md["name"]}": ResourceClaim not created yet')
            try:
                claim = await self.claims.get(name, ns)
            except APIError as e:
                if e.code != 404:
                    raise
                raise NotReady(f"prepare dynamic resources: fetch ResourceClaim {name}: {e.message}") from None
            if ref not in named and not _made_for(claim, pod):
                raise NotReady(f"prepare dynamic resources: ResourceClaim {ns}/{name} was not created for pod "
                               f"{ns}/{md['name']} (pod is not owner)")
            # an unallocated claim is reserved for nobody
            if not (claim.get("status") or {}).get("allocation") or not reserved_for_pod(claim, pod):
                raise NotReady(f"prepare dynamic resources: pod {md['name']} ({md['uid']}) is not allowed to use "
                               f"ResourceClaim {name} ({claim['metadata']['uid']})")
            if (older := self._held_as(ns, name, claim["metadata"]["uid"])) is not None:
                raise NotReady(f"prepare dynamic resources: old ResourceClaim with same name {name} and different "
                               f"UID {older} still exists (previous pod force-deleted?!)")
            for r in claim["status"]["allocation"].get("devices", {}).get("results") or []:
                if r["driver"] not in self.drivers and not r.get("skipNodeOperations") and \
                        not (self.plugins and self.plugins.get(r["driver"])):
                    raise NotReady(f"prepare dynamic resources: DRA driver {r['driver']} is not registered")
            ready.append(claim)
        await self._prepare_external([c for c in ready if c["metadata"]["uid"] not in self.prepared], md["uid"])
        uids = []
        # the built-in drivers' share, one NodePrepareResources per driver for the claims new here
        builtin = sorted({d for c in ready if c["metadata"]["uid"] not in self.prepared for d in self._drivers(c)
                          if d in self.drivers})
        started = self.clock.monotonic()
        try:
            for claim in ready:
                cmd = claim["metadata"]
                entry = self.prepared.get(cmd["uid"])
                if entry is None:
                    if self.gpus:
                        self.nvidia_devices[cmd["uid"]] = self._prepare_nvidia(claim)
                    await self._publish(cmd["namespace"], cmd["name"], claim, self._network_status(claim))
                    entry = self.prepared[cmd["uid"]] = (cmd["namespace"], cmd["name"], set())
                    for r in self._ours(claim):
                        self.builtin.setdefault(cmd["uid"], {}).setdefault(r["driver"], []).append(
                            _Prepared((r["request"],), r["pool"], r["device"], (), r.get("shareID")))
                    self.drivers_of[cmd["uid"]] = tuple(self._drivers(claim))
                entry[2].add(md["uid"])
                uids.append(cmd["uid"])
        finally:
            for driver in builtin:
                self.metrics.call(driver, _BUILTIN_PREPARE, started)
            # every claim the pod was added to, also where a later one failed: the pod's end releases them
            held = self.by_pod.get(md["uid"], [])
            self.by_pod[md["uid"]] = held + [uid for uid in uids if uid not in held]
        self.attempted.pop(md["uid"], None)
        if uids:
            self._save()

    def _held_as(self, ns: str, name: str, uid: str) -> str | None:
        """The UID of another claim of this namespace and name the node still holds (prepared, tried,
        or with an unprepare due), if any: a claim deleted and created again while a pod that used it
        (force-deleted from the API) is still being torn down here. Upstream's kubelet keys its claim
        cache by namespace/name and refuses the new claim until the old one is released."""
        held = [(u, n, c) for u, (n, c, _) in self.prepared.items()]
        held += [(u, n, c) for u, (n, c, _) in self.unprepare_left.items()]
        held += [(u, n, c) for claims in self.attempted.values() for u, (n, c) in claims.items()]
        return next((u for u, n, c in held if n == ns and c == name and u != uid), None)

    async def unprepare(self, pod_uid: str) -> None:
        """Release the pod's claims; the last pod out unprepares the claim. A claim whose
        preparation a driver was asked for but that never completed is unprepared too (upstream
        caches a claim before calling its drivers), unless another pod holds or tries it."""
        if pod_uid not in self.pods_seen:  # released already (or never started here)
            return
        self.pods_seen.discard(pod_uid)
        started, failed = self.clock.monotonic(), False
        for uid, (ns, name) in self.attempted.pop(pod_uid, {}).items():
            if uid not in self.prepared and not any(uid in a for a in self.attempted.values()):
                failed |= not await self._unprepare_external(uid, ns, name)
        left = len(self.unprepare_left)
        held = self.by_pod.pop(pod_uid, [])
        for uid in held:
            ns, name, pods = self.prepared[uid]
            pods.discard(pod_uid)
            if pods:
                continue
            del self.prepared[uid]
            self.nvidia_devices.pop(uid, None)
            self.builtin.pop(uid, None)
            builtin_started = self.clock.monotonic()
            failed |= not await self._unprepare_external(uid, ns, name)
            try:
                await self._publish(ns, name, None, [])
            except APIError as e:
                log.warning("node %s: unprepare claim %s/%s: %s", self.spec.name, ns, name, e.message)
            for driver in self.drivers_of.pop(uid, ()):
                if driver in self.drivers:
                    self.metrics.call(driver, _BUILTIN_UNPREPARE, builtin_started)
        if held or len(self.unprepare_left) != left:  # (a claim other pods still use: saved without this one)
            self._save()
        self.metrics.operation(UNPREPARE, started, failed)

    def _save(self) -> None:
        """Checkpoint the prepared claims, each with its pods and devices; those whose drivers
        were asked to prepare them for a pod and failed (the pod's end unprepares them); and those
        drivers failed to unprepare (asked again)."""
        if not self.checkpoint_path:
            return
        attempted: dict[str, dict] = {}
        for pod, claims in self.attempted.items():
            for uid, (ns, name) in claims.items():
                if uid not in self.prepared and uid not in self.unprepare_left:
                    attempted.setdefault(uid, {"namespace": ns, "name": name, "attempted": [],
                                               "drivers": sorted(self.external.get(uid, {}))})["attempted"].append(pod)
        state = {uid: {"namespace": ns, "name": name, "pods": sorted(pods),
                       "drivers": list(self.drivers_of.get(uid, ())),
                       "external": {d: [asdict(p) for p in ps] for d, ps in self.external.get(uid, {}).items()},
                       "builtin": {d: [asdict(p) for p in ps] for d, ps in self.builtin.get(uid, {}).items()},
                       "nvidia": self.nvidia_devices.get(uid, [])}
                 for uid, (ns, name, pods) in self.prepared.items()}
        state.update({uid: {"namespace": ns, "name": name, "unprepare": drivers}
                      for uid, (ns, name, drivers) in self.unprepare_left.items()})
        state.update(attempted)
        try:
            checkpoint.save(self.checkpoint_path, state)
        except OSError as e:
            log.warning("node %s: writing DRA checkpoint: %s", self.spec.name, e)

    def _restore(self, state: dict[str, dict]) -> None:
        """Take up what the node's previous run checkpointed: its pods' claims count as prepared,
        those it failed to prepare as tried for their pods, and the unprepares left are still due."""
        def devices(by_driver: dict) -> dict[str, list[_Prepared]]:
            return {d: [_Prepared(tuple(p["requests"]), p["pool"], p["device"], tuple(p["cdi_ids"]), p["share_id"])
                        for p in ps] for d, ps in by_driver.items()}
        for uid, c in state.items():
            if "unprepare" in c:
                self.unprepare_left[uid] = (c["namespace"], c["name"], c["unprepare"])
                continue
            if "attempted" in c:
                self.external[uid] = {d: [] for d in c["drivers"]}
                for pod in c["attempted"]:
                    self.attempted.setdefault(pod, {})[uid] = (c["namespace"], c["name"])
                    self.pods_seen.add(pod)
                continue
            self.prepared[uid] = (c["namespace"], c["name"], set(c["pods"]))
            self.drivers_of[uid] = tuple(c["drivers"])
            if c["external"]:
                self.external[uid] = devices(c["external"])
            if c["builtin"]:
                self.builtin[uid] = devices(c["builtin"])
            if c["nvidia"]:
                self.nvidia_devices[uid] = c["nvidia"]
            for pod in c["pods"]:
                self.by_pod.setdefault(pod, []).append(uid)
                self.pods_seen.add(pod)

    def is_prepared(self, namespace: str, name: str) -> bool:
        return any(ns == namespace and n == name for ns, n, _ in self.prepared.values())

    def _prepare_nvidia(self, claim: dict) -> list[dict]:
        """As NVIDIA's kubelet plugin prepares a claim: each result's opaque
        config is normalized and validated (a refusal is the plugin's error,
        so the pod stays ContainerCreating), and MIG devices get their UUIDs."""
        md = claim["metadata"]
        try:
            out = [{"request": r["request"], "device": r["device"], **self._describe(r["device"])}
                   for r in self._ours(claim) if r["driver"] == nvidia.NVIDIA_DRIVER]
            configs = nvidia.prepare_configs(claim, out)
        except nvidia.PrepareError as e:
            raise NotReady(f"prepare dynamic resources: NodePrepareResources failed for ResourceClaim {md['name']}: "
                           f"error preparing devices for claim {md['namespace']}/{md['name']}:{md['uid']}: "
                           f"prepare devices failed: {e}") from None
        return [{**d, "config": c} for d, c in zip(out, configs)]

    def _describe(self, device: str) -> dict:
        """What nvidia-smi says about a device of this node; PrepareError
        (the plugin's words) for a device this node does not publish."""
        m = _MIG_NAME.fullmatch(device)
        gpu = self.gpus.get(m.group(1) if m else device)
        a = gpu.attributes if gpu else {}
        if m and gpu:
            if device in nvidia.mig_device_names(a):
                profile = next(p.name for p in nvidia.PRODUCTS[a["model"]].mig if p.id == int(m.group(2)))
                return {"type": "mig", "uuid": nvidia.mig_uuid(a["uuid"], device), "parentUUID": a["uuid"],
                        "productName": a["productName"], "profile": profile}
        elif gpu and not a.get("migDevices"):
            return {"type": "gpu", "uuid": a["uuid"], "parentUUID": "", "productName": a["productName"], "profile": ""}
        raise nvidia.PrepareError(f"requested device is not allocatable: {device}")

    def container_devices(self, pod: dict, container: str) -> list[dict] | None:
        """The NVIDIA devices a container of the pod was given (its
        `resources.claims`, narrowed to a request where it names one), or
        None when the node has no NVIDIA GPUs."""
        if not self.gpus:
            return None
        ns = pod["metadata"]["namespace"]
        by_ref = dict(pod_claims(pod))
        uid_of = {(n, name): uid for uid, (n, name, _) in self.prepared.items()}
        spec = next((c for c in (pod.get("spec") or {}).get("containers") or [] if c["name"] == container), {})
        out = []
        for ref in (spec.get("resources") or {}).get("claims") or []:
            uid = uid_of.get((ns, by_ref.get(ref["name"])))
            for d in self.nvidia_devices.get(uid, []):
                want = ref.get("request")
                if not want or d["request"] == want or d["request"].startswith(want + "/"):
                    out.append(d)
        # extended resources backed by DRA: the requests of the pod's extended resource claim
        # that serve this container
        extended = (pod.get("status") or {}).get("extendedResourceClaimStatus") or {}
        mine = {m.get("requestName") for m in extended.get("requestMappings") or [] if m.get("containerName") == container}
        uid = uid_of.get((ns, by_ref.get(EXTENDED_CLAIM_REF)))
        out += [d for d in self.nvidia_devices.get(uid, []) if d["request"] in mine]
        return out

    @staticmethod
    def _drivers(claim: dict) -> list[str]:
        """The drivers of the claim's devices the node acts on (not those whose results skip node operations)."""
        results = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []
        return sorted({r["driver"] for r in results if not r.get("skipNodeOperations")})

    def _external_drivers(self, claim: dict) -> list[str]:
        """The drivers of the claim's devices that a registered kubelet plugin prepares."""
        return [d for d in self._drivers(claim) if d not in self.drivers]

    def claims_in_use(self) -> dict[str, int]:
        """The prepared claims by driver, and all of them under "<any>" (dra_resource_claims_in_use)."""
        out = {ANY_DRIVER: len(self.prepared)}
        for uid in self.prepared:
            for driver in self.drivers_of.get(uid, ()):
                out[driver] = out.get(driver, 0) + 1
        return out

    async def _prepare_external(self, claims: list[dict], pod_uid: str) -> None:
        """Call NodePrepareResources of each external driver once, with all the claims it
        serves; record the devices (CDI IDs by request) each claim got. Errors as upstream's
        kubelet words them; the claim stays unprepared and the pod's next retry calls again."""
        by_driver: dict[str, list[dict]] = {}
        for c in claims:
            for driver in self._external_drivers(c):
                by_driver.setdefault(driver, []).append(c)
        for c in claims:  # prepared again before a failed unprepare was retried: it need not be
            self.unprepare_left.pop(c["metadata"]["uid"], None)
            if (retry := self.unpreparing.pop(c["metadata"]["uid"], None)) is not None:
                retry.cancel()
        for driver, group in by_driver.items():
            plugin = self.plugins.get(driver) if self.plugins else None
            if plugin is None:
                raise NotReady(f"prepare dynamic resources: DRA driver {driver} is not registered")
            for c in group:  # from now on the driver may hold something of it: the pod's end unprepares it
                self.external.setdefault(c["metadata"]["uid"], {}).setdefault(driver, [])
                self.attempted.setdefault(pod_uid, {})[c["metadata"]["uid"]] = (c["metadata"]["namespace"],
                                                                               c["metadata"]["name"])
            import grpc

            try:
                resp = await plugin.prepare([_ref(c) for c in group])
            except grpc.RpcError as e:
                raise NotReady(f"prepare dynamic resources: NodePrepareResources: {rpc_error(e)}") from None
            asked = {c["metadata"]["uid"] for c in group}
            if unknown := next((uid for uid in resp.claims if uid not in asked), None):
                raise NotReady(f"prepare dynamic resources: NodePrepareResources returned result for unknown "
                               f"claim UID {unknown}")
            for c in group:
                result = resp.claims.get(c["metadata"]["uid"])
                if result is not None and result.error:
                    raise NotReady(f"prepare dynamic resources: NodePrepareResources failed for ResourceClaim "
                                   f"{c['metadata']['name']}: {result.error}")
            left = sum(c["metadata"]["uid"] not in resp.claims for c in group)
            if left:
                raise NotReady(f"prepare dynamic resources: NodePrepareResources skipped {left} ResourceClaims")
            for c in group:
                self.external.setdefault(c["metadata"]["uid"], {})[driver] = [
                    _Prepared(tuple(d.request_names), d.pool_name, d.device_name, tuple(d.cdi_device_ids),
                              d.share_id if d.HasField("share_id") else None)
                    for d in resp.claims[c["metadata"]["uid"]].devices]

    async def _unprepare_external(self, uid: str, ns: str, name: str) -> bool:
        """NodeUnprepareResources of each external driver that prepared the claim; whether all
        succeeded. One that fails (or is not registered) is asked again, backing off, until it
        succeeds or the claim is prepared again: upstream's pod worker retries a pod's cleanup
        until unpreparing works, each try another UnprepareResources."""
        left = await self._unprepare_calls(uid, ns, name, list(self.external.pop(uid, {})))
        if left:
            self.unprepare_left[uid] = (ns, name, left)
            self.unpreparing[uid] = asyncio.create_task(self._retry_unprepare(uid, ns, name, left))
        return not left

    async def _unprepare_calls(self, uid: str, ns: str, name: str, drivers: list[str]) -> list[str]:
        """Call each driver's NodeUnprepareResources with the claim; the drivers that failed, logged."""
        failed = []
        for driver in drivers:
            plugin = self.plugins.get(driver) if self.plugins else None
            if plugin is None:
                err = f"DRA driver {driver} is not registered"
            else:
                import grpc

                try:
                    resp = await plugin.unprepare([{"namespace": ns, "uid": uid, "name": name}])
                    r = resp.claims.get(uid)
                    unknown = next((u for u in resp.claims if u != uid), None)
                    err = f"NodeUnprepareResources returned result for unknown claim UID {unknown}" if unknown \
                        else "NodeUnprepareResources skipped 1 ResourceClaims" if r is None \
                        else r.error and f"NodeUnprepareResources failed for ResourceClaim {name}: {r.error}"
                except grpc.RpcError as e:
                    err = f"NodeUnprepareResources: {rpc_error(e)}"
            if err:
                log.warning("node %s: unprepare claim %s/%s: %s", self.spec.name, ns, name, err)
                failed.append(driver)
        return failed

    async def _retry_unprepare(self, uid: str, ns: str, name: str, drivers: list[str]) -> None:
        delay = UNPREPARE_RETRY_INITIAL
        try:
            while drivers:
                await self.clock.sleep(delay)
                delay = min(delay * 2, UNPREPARE_RETRY_MAX)
                started = self.clock.monotonic()
                drivers = await self._unprepare_calls(uid, ns, name, drivers)
                self.metrics.operation(UNPREPARE, started, bool(drivers))
                if drivers:
                    self.unprepare_left[uid] = (ns, name, drivers)
                else:
                    self.unprepare_left.pop(uid, None)
                    self._save()
        finally:
            if self.unpreparing.get(uid) is asyncio.current_task():
                del self.unpreparing[uid]

    def release_gone(self, pods: Collection[str]) -> None:
        """Release the claims of the pods the checkpoint holds that are not among `pods` (the
        node's as the API server first lists them): deleted while the node was down, their claims
        are unprepared now, as upstream's DRA manager reconciles its cache with the active pods;
        and ask the drivers that had not unprepared a claim before the restart again."""
        for uid, (ns, name, drivers) in self.unprepare_left.items():
            if uid not in self.unpreparing:
                self.unpreparing[uid] = asyncio.create_task(self._retry_unprepare(uid, ns, name, drivers))
        gone = [uid for uid in self.pods_seen if uid not in pods]
        if gone:
            log.info("node %s: releasing the claims of %d pods gone while it was down", self.spec.name, len(gone))
            self._releasing = asyncio.create_task(self._release(gone))

    async def _release(self, pod_uids: list[str]) -> None:
        for uid in pod_uids:
            await self.unprepare(uid)

    async def close(self) -> None:
        """Stop retrying unprepare calls (the node stops)."""
        tasks = [*self.unpreparing.values(), *([self._releasing] if self._releasing else [])]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self.unpreparing.clear()

    def prepared_devices(self, pod: dict, container: str) -> list[tuple[dict, str, _Prepared]]:
        """(claim reference, driver, device) for each device drivers prepared for the claims (and
        requests) a container of the pod names in `resources.claims`."""
        ns = pod["metadata"]["namespace"]
        by_ref = dict(pod_claims(pod))
        uid_of = {(n, name): uid for uid, (n, name, _) in self.prepared.items()}
        pspec = pod.get("spec") or {}
        spec = next((c for key in ("containers", "initContainers") for c in pspec.get(key) or []
                     if c["name"] == container), {})
        out = []
        for ref in (spec.get("resources") or {}).get("claims") or []:
            want = ref.get("request")
            uid = uid_of.get((ns, by_ref.get(ref["name"])))
            for driver, devices in [*self.external.get(uid, {}).items(), *self.builtin.get(uid, {}).items()]:
                out += [(ref, driver, d) for d in devices if not want or not d.requests
                        or any(r == want or r.startswith(want + "/") for r in d.requests)]
        return out

    def cdi_devices(self, pod: dict, container: str) -> list[str]:
        """The CDI device IDs of a container's devices from external drivers, in order, each once."""
        out: list[str] = []
        for _, _, d in self.prepared_devices(pod, container):
            out += [i for i in d.cdi_ids if i not in out]
        return out

    def resource_health(self, pod: dict, container: str) -> list[dict]:
        """The container's `allocatedResourcesStatus` (KEP-4680) for its claims' devices of
        drivers that report health (external ones that stream it; the built-in ones, whose
        devices are Unhealthy while a fault is on them): one entry per claim reference
        ("claim:NAME[/REQUEST]"), each device as "driver/pool/device" with its health."""
        plugins = self.plugins
        # every status write asks: most pods use neither
        if not (plugins and plugins.health and self.external) and not (self.device_health and self.builtin):
            return []
        out: dict[str, list[dict]] = {}
        for ref, driver, d in self.prepared_devices(pod, container):
            if driver in self.drivers and self.device_health:
                health = self.device_health(d.device)
            elif plugins and plugins.reports_health(driver):
                health = plugins.device_health(driver, d.pool, d.device)
            else:
                continue
            entry = out.setdefault("claim:" + ref["name"] + (f"/{ref['request']}" if ref.get("request") else ""), [])
            rid = f"{driver}/{d.pool}/{d.device}"
            if all(r["resourceID"] != rid for r in entry):
                entry.append({"resourceID": rid, "health": health})
        return [{"name": name, "resources": resources} for name, resources in out.items()]

    def uses_driver(self, pod_uid: str, driver: str) -> bool:
        """Whether a claim the pod holds on this node has devices the driver prepared."""
        return any(driver in self.external.get(uid, {}) or driver in self.builtin.get(uid, {})
                   for uid in self.by_pod.get(pod_uid, ()))

    def cdi_error(self, pod: dict, container: str) -> str:
        """Why the runtime refuses to create the container: a CDI device of its claims that no
        spec in the node's CDI directories resolves, in containerd's words ("" if none)."""
        ids = self.cdi_devices(pod, container)
        if not ids:
            return ""
        try:
            cdi.environment(self.cdi_dirs, ids)
        except cdi.CDIError as e:
            return f"{CDI_CREATE_FAILED}CDI device injection failed: {e}"
        return ""

    def cdi_edits(self, pod: dict, container: str) -> cdi.ContainerEdits:
        """What the CDI specs of the container's devices do to it (cdi.py): none while one of
        them does not resolve (the runtime then refuses to create it, `cdi_error`)."""
        ids = self.cdi_devices(pod, container)
        if not ids:
            return cdi.ContainerEdits()
        try:
            return cdi.edits(self.cdi_dirs, ids)
        except cdi.CDIError as e:
            log.warning("node %s: container %s of pod %s/%s: %s", self.spec.name, container,
                        pod["metadata"]["namespace"], pod["metadata"]["name"], e)
            return cdi.ContainerEdits()

    def cdi_environment(self, pod: dict, container: str) -> dict[str, str]:
        """The variables the CDI specs of the container's devices add."""
        return self.cdi_edits(pod, container).env

    def _network_status(self, claim: dict) -> list[dict]:
        """Device status entries for the claim's NICs on this node: configured and Ready."""
        now = self.clock.rfc3339()
        out = []
        for r in self._ours(claim):
            if r["driver"] != NIC_DRIVER or r["device"] not in self.nics:
                continue
            i, nic = self.nics[r["device"]]
            entry = {"driver": r["driver"], "pool": r["pool"], "device": r["device"],
                     "conditions": [{"type": "Ready", "status": "True", "reason": "InterfaceConfigured",
                                     "message": f"{nic.attributes['interfaceName']} is up", "lastTransitionTime": now,
                                     "observedGeneration": claim["metadata"].get("generation", 1)}],
                     "networkData": {"interfaceName": nic.attributes["interfaceName"],
                                     "ips": [nic_address(self.spec.index, i)],
                                     "hardwareAddress": nic.attributes["hardwareAddress"]}}
            if r.get("shareID"):
                entry["shareID"] = r["shareID"]
            out.append(entry)
        return out

    async def _publish(self, ns: str, name: str, claim: dict | None, entries: list[dict]) -> None:
        """Replace this node's entries in `status.devices`, keeping other
        writers' ones, by merge patch. The server patches its cached copy,
        which can trail a claim controller write just made; on a conflict
        the driver backs off briefly, like a kubelet plugin, and tries again."""
        for attempt in range(STATUS_RETRIES):
            if claim is None:
                try:
                    claim = await self.claims.get(name, ns)
                except APIError as e:
                    if e.code == 404:
                        return
                    raise
            current = (claim.get("status") or {}).get("devices") or []
            mine = {_key(d) for d in entries}
            keep = [d for d in current if not (d["driver"] in DRIVERS and d["pool"] == self.spec.name)
                    and _key(d) not in mine]
            devices = keep + entries
            if devices == current:
                return
            try:
                await self.claims.patch(name, {"status": {"devices": devices or None}}, namespace=ns,
                                        subresource="status")
                return
            except APIError as e:
                if e.code == 404:
                    return
                if e.code != 409 or attempt == STATUS_RETRIES - 1:
                    raise
            claim = None
            await self.clock.sleep(STATUS_BACKOFF * 2 ** attempt)
