"""VolumeBinding: schedules pods that use PersistentVolumeClaims, as
upstream's plugin does through the API. PreFilter needs every claim to exist
and Immediate claims to be bound already (the PV controller binds them);
Filter keeps nodes where each bound volume's node affinity admits the node
and each WaitForFirstConsumer claim can take an available volume there or
be provisioned there (the class has a provisioner and its allowedTopologies
admit the node); Reserve remembers the choice, so two pods in flight never
take one volume and pods that share a claim to provision go to the node the
first one selected for it (upstream's assume cache holds the claim with that
node until the informer has it), a selected node restricting a claim as the
annotation does; PreBind writes it (a volume's claimRef for a static volume,
`volume.kubernetes.io/selected-node` on a claim to provision) and waits for
the PV controller and provisioner to bind every claim."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from ...machinery.errors import APIError
from ...volume.binding import BOUND_BY_CONTROLLER, SELECTED_NODE, find_matching_volume, node_affinity_matches
from ...volume.classes import WAIT_FOR_FIRST_CONSUMER, binding_mode, claim_class
from ..framework import NODE, SKIP, Action, ClusterEvent, Code, Hint, Registration, Status, unschedulable

PVC, PV, STORAGE_CLASS = "PersistentVolumeClaim", "PersistentVolume", "StorageClass"
UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
NODE_CONFLICT = "node(s) had volume node affinity conflict"
NO_VOLUMES = "node(s) didn't find available persistent volumes to bind"
#: upstream's default bindTimeoutSeconds
BIND_TIMEOUT = 600.0
POLL = 0.1
_STATE = "VolumeBinding"


def pod_claims(pod: dict) -> list[tuple[str, bool]]:
    """(claim name, whether it is a generic ephemeral volume's) for each claim the pod mounts."""
    out = []
    for v in (pod.get("spec") or {}).get("volumes") or []:
        if v.get("persistentVolumeClaim"):
            out.append((v["persistentVolumeClaim"].get("claimName", ""), False))
        elif v.get("ephemeral"):
            out.append((f"{pod['metadata']['name']}-{v['name']}", True))
    return out


def claim_names(pod: dict) -> list[str]:
    return [name for name, _ in pod_claims(pod)]


def uses_claim(pod: dict, claim: dict) -> bool:
    """Whether the pod mounts the PersistentVolumeClaim (upstream's isPVCRequestedFromPod)."""
    md = claim["metadata"]
    return md.get("namespace") == pod["metadata"].get("namespace") and md["name"] in claim_names(pod)


def _bound(pvc: dict) -> bool:
    return bool((pvc.get("spec") or {}).get("volumeName"))


def _topology_allows(sc: dict, node: dict) -> bool:
    terms = sc.get("allowedTopologies") or []
    if not terms:
        return True
    labels = (node.get("metadata") or {}).get("labels") or {}
    return any(all(labels.get(e.get("key")) in (e.get("values") or []) for e in t.get("matchLabelExpressions") or [])
               for t in terms)


@dataclass
class _Cycle:
    bound: list[dict] = field(default_factory=list)  # bound claims: their volumes constrain nodes
    delayed: list[dict] = field(default_factory=list)  # unbound WaitForFirstConsumer claims
    #: node -> {claim key: volume name to bind, or "" to provision}
    found: dict[str, dict[str, str]] = field(default_factory=dict)
    assumed: list[str] = field(default_factory=list)  # volume names reserved in flight
    selected: list[str] = field(default_factory=list)  # claim keys whose node this pod selected in flight


class VolumeBinding:
    name = "VolumeBinding"
    #: its PreFilter skips a pod mounting no claim: the framework skips it for such a pod unasked
    claims_only = True

    def __init__(self, args: dict, handle) -> None:
        self.handle = handle
        self.timeout = float((args or {}).get("bindTimeoutSeconds", BIND_TIMEOUT))
        if handle is None:
            return
        self.claims = handle.informer("", "v1", "persistentvolumeclaims")
        self.volumes = handle.informer("", "v1", "persistentvolumes")
        self.classes = handle.informer("storage.k8s.io", "v1", "storageclasses")
        #: volume names chosen by pods between Reserve and their binding, shared by every profile
        self.in_flight: set[str] = handle.shared.setdefault(self.name, set())
        #: claim key -> the node a pod between Reserve and PreBind's end selected for it to be provisioned on
        self.selecting: dict[str, str] = handle.shared.setdefault(f"{self.name}/selected-node", {})
        self.pvcs = handle.client.resource("", "v1", "persistentvolumeclaims")
        self.pvs = handle.client.resource("", "v1", "persistentvolumes")
        for inf, kind in ((self.claims, PVC), (self.volumes, PV), (self.classes, STORAGE_CLASS)):
            inf.add_handlers(lambda o, k=kind: self._event(k, Action.ADD, None, o),
                             lambda old, new, k=kind: self._event(k, Action.UPDATE, old, new))

    def _event(self, kind: str, action: Action, old, new) -> None:
        self.handle.queue.on_event(ClusterEvent(kind, action, f"{kind}{action.name.title()}"), old, new)

    def pre_filter(self, state, info):
        claims = pod_claims(info.pod)
        if not claims:
            return None, SKIP
        ns = info.pod["metadata"].get("namespace", "")
        cyc = _Cycle()
        for name, ephemeral in claims:
            pvc = self.claims.get(f"{ns}/{name}")
            if pvc is None:
                return None, unschedulable(f'persistentvolumeclaim "{name}" not found', resolvable=False)
            if ephemeral and not any(r.get("uid") == info.uid and r.get("controller")
                                     for r in pvc["metadata"].get("ownerReferences") or []):
                return None, unschedulable(f"PVC {ns}/{name} was not created for pod {ns}/{info.pod['metadata']['name']} "
                                           "(pod is not owner)", resolvable=False)
            if pvc["metadata"].get("deletionTimestamp"):
                return None, unschedulable(f'persistentvolumeclaim "{name}" is being deleted', resolvable=False)
            if _bound(pvc):
                cyc.bound.append(pvc)
                continue
            if binding_mode(self.classes.get(claim_class(pvc))) != WAIT_FOR_FIRST_CONSUMER:
                return None, unschedulable(UNBOUND_IMMEDIATE, resolvable=False)
            cyc.delayed.append(pvc)
        state[_STATE] = cyc
        return None, None

    def filter(self, state, info, node):
        cyc: _Cycle = state[_STATE]
        n = node.node or {"metadata": {"name": node.name, "labels": node.labels}}
        for pvc in cyc.bound:
            pv = self.volumes.get(pvc["spec"]["volumeName"])
            if pv is not None and not node_affinity_matches(pv, n):
                return unschedulable(NODE_CONFLICT, resolvable=False)
        choice: dict[str, str] = {}
        taken = set(self.in_flight)
        for pvc in cyc.delayed:
            key = f"{pvc['metadata']['namespace']}/{pvc['metadata']['name']}"
            selected = (pvc["metadata"].get("annotations") or {}).get(SELECTED_NODE) or self.selecting.get(key)
            if selected and selected != node.name:
                return unschedulable(NO_VOLUMES, resolvable=False)
            pv = None if selected else find_matching_volume(pvc, self.volumes.list(), node=n, taken=taken)
            if pv is not None:
                choice[key] = pv["metadata"]["name"]
                taken.add(pv["metadata"]["name"])
                continue
            sc = self.classes.get(claim_class(pvc)) or {}
            if not sc.get("provisioner") or sc["provisioner"] == "kubernetes.io/no-provisioner" \
                    or not _topology_allows(sc, n):
                return unschedulable(NO_VOLUMES, resolvable=False)
            choice[key] = ""
        cyc.found[node.name] = choice
        return None

    def reserve(self, state, info, node: str):
        cyc: _Cycle | None = state.get(_STATE)
        if cyc is None:
            return None
        for key, name in (cyc.found.get(node) or {}).items():
            if not name:
                if key not in self.selecting:
                    self.selecting[key] = node
                    cyc.selected.append(key)
                elif self.selecting[key] != node:
                    return Status(Code.UNSCHEDULABLE, [NO_VOLUMES])
            elif name in self.in_flight:
                return Status(Code.UNSCHEDULABLE, [NO_VOLUMES])
            else:
                self.in_flight.add(name)
                cyc.assumed.append(name)
        return None

    def unreserve(self, state, info, node: str) -> None:
        cyc: _Cycle | None = state.get(_STATE)
        if cyc is None:
            return
        self._forget(cyc)

    def pre_bind_pre_flight(self, state, info, node: str) -> bool:
        """PreBind has work unless all the pod's claims are bound (upstream's allBound)."""
        cyc: _Cycle | None = state.get(_STATE)
        return cyc is not None and bool(cyc.delayed)

    async def pre_bind(self, state, info, node: str):
        cyc: _Cycle | None = state.get(_STATE)
        if cyc is None or not cyc.delayed:
            return None
        try:
            for key, volume in (cyc.found.get(node) or {}).items():
                ns, name = key.split("/", 1)
                if volume:
                    await self._bind_volume(volume, self.claims.get(key))
                else:
                    await self._select_node(ns, name, node)
            return await self._wait_bound(cyc, node)
        except APIError as e:
            return Status(Code.ERROR, [f"binding volumes: {e.message}"])
        finally:
            self._forget(cyc)

    def _forget(self, cyc: _Cycle) -> None:
        """Release what the pod reserved: its volumes, and the nodes it selected for claims (the
        claims carry them by then, or the pod failed and another may select)."""
        for name in cyc.assumed:
            self.in_flight.discard(name)
        for key in cyc.selected:
            self.selecting.pop(key, None)
        cyc.assumed.clear()
        cyc.selected.clear()

    async def _bind_volume(self, volume: str, pvc: dict) -> None:
        """Pre-bind the volume to the claim; the PV controller completes the claim's side."""
        pv = copy.deepcopy(await self.pvs.get(volume))
        md = pvc["metadata"]
        pv["spec"]["claimRef"] = {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": md["namespace"],
                                  "name": md["name"], "uid": md["uid"], "resourceVersion": md.get("resourceVersion", "")}
        pv["metadata"].setdefault("annotations", {})[BOUND_BY_CONTROLLER] = "yes"
        await self.pvs.update(pv)

    async def _select_node(self, namespace: str, name: str, node: str) -> None:
        await self.pvcs.patch(name, {"metadata": {"annotations": {SELECTED_NODE: node}}}, namespace=namespace)

    async def _wait_bound(self, cyc: _Cycle, node: str) -> Status | None:
        clock = self.handle.clock
        deadline = clock.now() + self.timeout
        keys = list(cyc.found.get(node) or {})
        while True:
            claims = [self.claims.get(k) for k in keys]
            if any(c is None for c in claims):
                return Status(Code.ERROR, ["binding volumes: a claim was deleted"])
            if all(_bound(c) and (c.get("status") or {}).get("phase") == "Bound" for c in claims):
                return None
            if clock.now() >= deadline:
                return Status(Code.ERROR, ["binding volumes: context deadline exceeded"])
            await clock.sleep(POLL)

    def events_to_register(self) -> list[Registration]:
        def claim_hint(pod: dict, old, new) -> Hint:
            return Hint.QUEUE if uses_claim(pod, new) else Hint.SKIP

        def class_hint(pod: dict, old, new) -> Hint:
            """Upstream's isSchedulableAfterStorageClassChange: a new class, or new allowedTopologies
            (the rest of a class cannot change)."""
            return Hint.QUEUE if old is None or old.get("allowedTopologies") != new.get("allowedTopologies") else Hint.SKIP

        return [Registration(ClusterEvent(PVC, Action.ADD | Action.UPDATE), claim_hint),
                Registration(ClusterEvent(PV, Action.ADD | Action.UPDATE)),
                Registration(ClusterEvent(STORAGE_CLASS, Action.ADD | Action.UPDATE), class_hint),
                Registration(ClusterEvent(NODE, Action.ADD | Action.UPDATE_NODE_LABEL))]
