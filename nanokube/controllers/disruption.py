"""Disruption controller: keeps each PodDisruptionBudget's status current so
the eviction subresource and the scheduler's preemption see real numbers.

`expectedPods` is the pod count (integer minAvailable) or the scale of the
pods' controllers (maxUnavailable or a percentage); `desiredHealthy` follows
from the budget; `currentHealthy` counts ready pods that are neither being
deleted nor recently evicted (`disruptedPods`, kept until the pod is gone or
two minutes pass). `disruptionsAllowed` is their difference, and the
`DisruptionAllowed` condition says whether it is positive. A pod whose
`DisruptionTarget` condition outlived two minutes without a deletion gets it
set back to False, as upstream does. Selected pods without a controller
are left out of a controller scale (with an UnmanagedPods Warning on the
budget) rather than failing the sync, and a budget expecting no pods allows
no disruption.
"""

from __future__ import annotations

import math

from ..machinery.conditions import find_condition, observed_generation, set_condition
from ..machinery.errors import APIError
from ..machinery.meta import controller_ref
from ..machinery.selectors import go_label_selector, matches_labels, selector_from_object
from ..client.informer import InformerFactory, key_of
from ..clock import REAL, Clock, parse_time
from .base import Controller, in_turns
from ..client.record import CoreEventRecorder
from .replicaset import pod_is_ready

DELETION_TIMEOUT = 120.0
SMP = "application/strategic-merge-patch+json"
UNMANAGED = ("Pods selected by this PodDisruptionBudget (selector: %s) were found to be unmanaged. As a result, the "
             "status of the PDB cannot be calculated correctly, which may result in undefined behavior. To account "
             'for these pods please set ".spec.minAvailable" field of the PDB to an integer value.')


class ExpectedCountError(Exception):
    """The scale behind a budget's pods could not be determined."""


def scaled_value(value, total: int, round_up: bool) -> int:
    """IntOrString as a count of `total`, percentages rounded as asked."""
    if isinstance(value, int):
        return value
    pct = int(str(value).rstrip("%")) * total / 100
    return math.ceil(pct) if round_up else math.floor(pct)


def _selector(pdb: dict):
    """policy/v1: a nil selector matches no pods, an empty one every pod in the namespace."""
    sel = (pdb.get("spec") or {}).get("selector")
    return None if sel is None else selector_from_object(sel)


def _disruption_target(pod: dict) -> dict | None:
    """The pod's DisruptionTarget condition (the first, as GetPodCondition) when it is True."""
    c = find_condition((pod.get("status") or {}).get("conditions"), "DisruptionTarget")
    return c if c is not None and c.get("status") == "True" else None


class DisruptionController(Controller):
    name = "disruption-controller"
    queue_name = "disruption"

    def __init__(self, client, clock: Clock = REAL, informers: InformerFactory | None = None):
        super().__init__(client, clock, informers)
        self.pdbs_api = client.resource("policy", "v1", "poddisruptionbudgets")
        self.pods_api = client.resource("", "v1", "pods")
        self.rs_api = client.resource("apps", "v1", "replicasets")
        self.deps_api = client.resource("apps", "v1", "deployments")
        self.sts_api = client.resource("apps", "v1", "statefulsets")
        self.rc_api = client.resource("", "v1", "replicationcontrollers")
        self.recorder = CoreEventRecorder(client, "controllermanager", clock)
        self.pdbs = self.informer_factory.informer(self.pdbs_api)
        self.pods = self.informer_factory.informer(self.pods_api)
        self.pdbs.add_handlers(self._pdb_changed, lambda _o, n: self._pdb_changed(n))
        self.pods.add_handlers(self._pod_changed, lambda o, n: self._pod_changed(n, o), self._pod_changed)
        self._no_pods: set[str] = set()

    def informers(self):
        return [self.pdbs, self.pods]

    def _pdb_changed(self, pdb: dict) -> None:
        self.queue.add(("pdb", key_of(pdb)))

    def _pod_changed(self, pod: dict, old: dict | None = None) -> None:
        """The budgets selecting the pod (on an update that changed its labels, also those that
        selected `old`), and the pod itself while it carries a DisruptionTarget condition."""
        md = pod["metadata"]
        if pdbs := self.pdbs.list_namespace(md["namespace"]):
            labels = md.get("labels") or {}
            old_labels = (old["metadata"].get("labels") or {}) if old is not None else labels
            moved = old_labels != labels
            for pdb in pdbs:
                sel = _selector(pdb)
                if sel is not None and (matches_labels(sel, labels) or moved and matches_labels(sel, old_labels)):
                    self._pdb_changed(pdb)
        if not md.get("deletionTimestamp") and _disruption_target(pod):
            self.queue.add(("pod", key_of(pod)))

    async def sync(self, key) -> None:
        kind, name = key
        if kind == "pdb":
            await self._sync_pdb(name)
        else:
            await self._sync_stale_disruption(name)

    # -- PodDisruptionBudget status ---------------------------------------

    async def pods_for(self, pdb: dict) -> list[dict]:
        """getPodsForPdb, from a pass over the namespace's pods in turns (in_turns): the in-process
        controllers share the API server's loop."""
        sel = _selector(pdb)
        if sel is None:
            return []
        ns = pdb["metadata"]["namespace"]
        return [p async for part in in_turns(self.pods.list_namespace(ns)) for p in part
                if matches_labels(sel, p["metadata"].get("labels") or {})]

    async def expected_and_desired(self, pdb: dict, pods: list[dict]) -> tuple[int, int, list[str]]:
        """(expectedPods, desiredHealthy, names of selected pods no controller owns) as getExpectedPodCount."""
        spec = pdb.get("spec") or {}  # a budget may leave its spec out (then it selects no pod)
        if spec.get("maxUnavailable") is not None:
            expected, unmanaged = await self._controller_scale(pods)
            return expected, max(0, expected - scaled_value(spec["maxUnavailable"], expected, True)), unmanaged
        min_available = spec.get("minAvailable")
        if isinstance(min_available, int):
            return len(pods), min_available, []
        if min_available is not None:
            expected, unmanaged = await self._controller_scale(pods)
            return expected, scaled_value(min_available, expected, True), unmanaged
        return len(pods), 0, []

    async def _controller_scale(self, pods: list[dict]) -> tuple[int, list[str]]:
        """Sum of the replicas of the pods' distinct controllers (a Deployment through its ReplicaSet),
        and the pods without a controller, which upstream leaves out of the sum rather than failing."""
        scales: dict[str, int] = {}
        unmanaged = []
        async for part in in_turns(pods):
            for pod in part:
                ref = controller_ref(pod)
                if ref is None:
                    unmanaged.append(pod["metadata"]["name"])
                    continue
                if ref["uid"] in scales:
                    continue
                uid, replicas = await self._scale_of(pod["metadata"]["namespace"], ref)
                if uid is None:
                    raise ExpectedCountError(f'found no controllers for pod "{pod["metadata"]["name"]}"')
                scales[uid] = replicas
        return sum(scales.values()), unmanaged

    async def _scale_of(self, ns: str, ref: dict) -> tuple[str | None, int]:
        """getExpectedScale's finders, in upstream's order: a ReplicationController, a Deployment through
        its ReplicaSet, a ReplicaSet, a StatefulSet, else any controller serving the scale subresource
        (a custom resource's); (None, 0) when the reference names none of them."""
        group, _, version = str(ref.get("apiVersion", "")).rpartition("/")
        kind = ref.get("kind", "")
        if (group, kind) in (("", "ReplicationController"), ("apps", "StatefulSet")):
            return await self._owner_replicas(self.rc_api if kind == "ReplicationController" else self.sts_api, ns, ref)
        if (group, kind) != ("apps", "ReplicaSet"):
            return await self._subresource_scale(ns, ref, group, version)
        try:
            rs = await self.rs_api.get(ref["name"], ns)
        except APIError as e:
            if e.code == 404:
                return None, 0
            raise
        if rs["metadata"]["uid"] != ref["uid"]:
            return None, 0
        owner = controller_ref(rs)
        if owner is not None and owner.get("kind") == "Deployment":
            try:
                d = await self.deps_api.get(owner["name"], ns)
            except APIError as e:
                if e.code != 404:
                    raise
            else:
                if d["metadata"]["uid"] == owner["uid"]:
                    return d["metadata"]["uid"], d["spec"].get("replicas", 1)
        return rs["metadata"]["uid"], rs["spec"].get("replicas", 1)

    @staticmethod
    async def _owner_replicas(api, ns: str, ref: dict) -> tuple[str | None, int]:
        try:
            owner = await api.get(ref["name"], ns)
        except APIError as e:
            if e.code == 404:
                return None, 0
            raise
        if owner["metadata"]["uid"] != ref["uid"]:
            return None, 0
        return owner["metadata"]["uid"], owner["spec"].get("replicas", 1)

    async def _subresource_scale(self, ns: str, ref: dict, group: str, version: str) -> tuple[str | None, int]:
        """getScaleController: the owner's /scale, when its resource serves one."""
        res = await self.client.mapping(group, ref.get("kind", ""))
        if res is None:
            raise ExpectedCountError(f'no matches for kind "{ref.get("kind", "")}" in group "{group}"')
        if "scale" not in res.subresources:
            raise ExpectedCountError(f"{res.plural}{'.' + group if group else ''} does not implement the scale subresource")
        api = self.client.resource(group, version if version in res.versions else res.versions[0], res.plural)
        try:
            scale = await api.get_scale(ref["name"], ns)
        except APIError as e:
            if e.code == 404:
                return None, 0
            raise
        if scale["metadata"].get("uid") != ref["uid"]:
            return None, 0
        return ref["uid"], scale["spec"].get("replicas", 0)

    async def _disrupted(self, pdb: dict, pods: list[dict]) -> tuple[dict, float | None]:
        """disruptedPods still in effect, and when the earliest of them expires."""
        now = self.clock.now()
        recorded = (pdb.get("status") or {}).get("disruptedPods") or {}
        live = {p["metadata"]["name"]: p async for part in in_turns(pods) for p in part} if recorded else {}
        kept, expiry = {}, None
        for name, at in recorded.items():
            pod = live.get(name)
            if pod is None or pod["metadata"].get("deletionTimestamp"):
                continue
            ends = parse_time(at) + DELETION_TIMEOUT
            if ends < now:
                continue
            kept[name] = at
            expiry = ends if expiry is None else min(expiry, ends)
        return kept, expiry

    async def _sync_pdb(self, key: str) -> None:
        pdb = self.pdbs.get(key)
        if pdb is None or pdb["metadata"].get("deletionTimestamp"):
            self._no_pods.discard(key)
            return
        pods = await self.pods_for(pdb)
        if pods:
            self._no_pods.discard(key)
        elif key not in self._no_pods:
            self._no_pods.add(key)
            await self.recorder.emit(pdb, "Normal", "NoPods", "No matching pods found")
        try:
            expected, desired, unmanaged = await self.expected_and_desired(pdb, pods)
        except ExpectedCountError as e:
            await self.recorder.emit(pdb, "Warning", "CalculateExpectedPodCountFailed",
                                     f"Failed to calculate the number of expected pods: {e}")
            await self._write(pdb, self._fail_safe(pdb, str(e)))
            return
        if unmanaged:
            await self.recorder.emit(pdb, "Warning", "UnmanagedPods", UNMANAGED % go_label_selector(
                (pdb.get("spec") or {}).get("selector")))
        disrupted, expiry = await self._disrupted(pdb, pods)
        healthy = sum([1 async for part in in_turns(pods) for p in part if not p["metadata"].get("deletionTimestamp")
                       and p["metadata"]["name"] not in disrupted and pod_is_ready(p)])
        allowed = max(0, healthy - desired) if expected > 0 else 0  # a budget expecting no pod allows nothing
        gen = pdb["metadata"].get("generation", 1)
        st = dict(pdb.get("status") or {})
        st.update({"observedGeneration": gen, "disruptedPods": disrupted or None, "disruptionsAllowed": allowed,
                   "currentHealthy": healthy, "desiredHealthy": desired, "expectedPods": expected})
        st = {k: v for k, v in st.items() if v is not None}
        if allowed > 0:
            st["conditions"] = self._with_condition(st, "True", "SufficientPods", "", gen)
        else:
            st["conditions"] = self._with_condition(st, "False", "InsufficientPods", "", gen)
        await self._write(pdb, st)
        if expiry is not None:
            self.queue.add_after(("pdb", key), max(0.0, expiry - self.clock.now()) + 0.01)

    def _fail_safe(self, pdb: dict, message: str) -> dict:
        """Upstream's failSafe: no disruptions until the count is known again."""
        st = dict(pdb.get("status") or {})
        st["disruptionsAllowed"] = 0
        st["conditions"] = self._with_condition(st, "False", "SyncFailed", message, st.get("observedGeneration", 0))
        return st

    def _with_condition(self, st: dict, status: str, reason: str, message: str, gen: int) -> list[dict]:
        """DisruptionAllowed set as upstream's UpdateDisruptionAllowedCondition (SetStatusCondition):
        in its place, its time moving only with its status."""
        return set_condition(st.get("conditions"), {
            "type": "DisruptionAllowed", "status": status, "observedGeneration": gen, "reason": reason,
            "message": message, "lastTransitionTime": self.clock.rfc3339()})

    async def _write(self, pdb: dict, st: dict) -> None:
        if st == (pdb.get("status") or {}):
            return
        try:
            await self.pdbs_api.update({**pdb, "status": st}, subresource="status")
        except APIError as e:
            if e.code != 404:
                raise

    # -- stale DisruptionTarget conditions --------------------------------

    async def _sync_stale_disruption(self, key: str) -> None:
        pod = self.pods.get(key)
        cond = pod and _disruption_target(pod)
        if not cond or pod["metadata"].get("deletionTimestamp"):
            return
        wait = parse_time(cond["lastTransitionTime"]) + DELETION_TIMEOUT - self.clock.now() \
            if cond.get("lastTransitionTime") else 0
        if wait > 0:
            self.queue.add_after(("pod", key), wait)
            return
        # upstream's UpdatePodCondition replaces the condition whole: the reason and message go
        reset = {"type": "DisruptionTarget", **observed_generation(pod), "status": "False",
                 "lastTransitionTime": self.clock.rfc3339(),
                 "reason": None, "message": None}
        try:
            await self.pods_api.patch(pod["metadata"]["name"], {"status": {"conditions": [reset]}}, SMP,
                                      namespace=pod["metadata"]["namespace"], subresource="status")
        except APIError as e:
            if e.code != 404:
                raise
