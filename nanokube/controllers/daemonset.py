"""DaemonSet controller (k/k pkg/controller/daemon): one pod per node the
DaemonSet should run on, placed by the scheduler through a required node
affinity on `metadata.name` (as upstream since 1.12), rolled out node by node
within maxUnavailable or maxSurge, with its template history kept as
ControllerRevisions for `kubectl rollout history/undo`.
"""

from __future__ import annotations

from ..client.informer import InformerFactory, key_of
from ..clock import Clock
from ..machinery.errors import APIError
from ..machinery.meta import controller_ref
from ..machinery.scheduling import NodeMatcher, untolerated
from ..machinery.selectors import selector_from_object
from .base import Controller
from .deployment import resolve_int_or_percent, template_hash
from ..client.record import CoreEventRecorder
from .history import POD_REVISION_LABEL, History, template_patch
from .replicaset import (
    BURST,
    Expectations,
    claim_objects,
    create_pods,
    delete_pods,
    owner_reference,
    pod_added,
    pod_available_in,
    pod_from_template,
    pod_is_ready,
    pod_updated,
    resolving,
    selecting,
)

TEMPLATE_GENERATION_LABEL = "pod-template-generation"
TEMPLATE_GENERATION = "deprecated.daemonset.template.generation"
#: tolerations every daemon pod gets (AddOrUpdateDaemonPodTolerations); no tolerationSeconds
DAEMON_TOLERATIONS = (
    ("node.kubernetes.io/not-ready", "NoExecute"),
    ("node.kubernetes.io/unreachable", "NoExecute"),
    ("node.kubernetes.io/disk-pressure", "NoSchedule"),
    ("node.kubernetes.io/memory-pressure", "NoSchedule"),
    ("node.kubernetes.io/pid-pressure", "NoSchedule"),
    ("node.kubernetes.io/unschedulable", "NoSchedule"),
)
NETWORK_UNAVAILABLE = ("node.kubernetes.io/network-unavailable", "NoSchedule")
FAILED_BACKOFF_BASE, FAILED_BACKOFF_MAX = 1.0, 900.0


def daemon_tolerations(spec: dict) -> list[dict]:
    """The template's tolerations plus the automatic ones it lacks."""
    tolerations = list(spec.get("tolerations") or [])
    auto = DAEMON_TOLERATIONS + ((NETWORK_UNAVAILABLE,) if spec.get("hostNetwork") else ())
    for key, effect in auto:
        t = {"key": key, "operator": "Exists", "effect": effect}
        if not any(x.get("key") == key and x.get("effect") == effect and x.get("operator") == "Exists" for x in tolerations):
            tolerations.append(t)
    return tolerations


def pin_to_node(affinity: dict | None, node: str) -> dict:
    """ReplaceDaemonSetPodNodeNameNodeAffinity: the required node terms become
    one `metadata.name In [node]` term; preferred terms and other affinities stay."""
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    affinity = dict(affinity or {})
    node_affinity = dict(affinity.get("nodeAffinity") or {})
    required = dict(node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    required["nodeSelectorTerms"] = [term]
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = required
    affinity["nodeAffinity"] = node_affinity
    return affinity


def target_node(pod: dict) -> str | None:
    """GetTargetNodeName: spec.nodeName, else the node its pinning affinity names."""
    spec = pod.get("spec") or {}
    if spec.get("nodeName"):
        return spec["nodeName"]
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    for term in required.get("nodeSelectorTerms") or []:
        for f in term.get("matchFields") or []:
            if f.get("key") == "metadata.name" and f.get("operator") == "In" and len(f.get("values") or []) == 1:
                return f["values"][0]
    return None


class Placement:
    """NodeShouldRunDaemonPod for one DaemonSet, its template's node matcher
    and tolerations read once, since a sync asks it of every node."""

    __slots__ = ("node_name", "matcher", "tolerations")

    def __init__(self, ds: dict):
        tspec = ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}
        self.node_name = tspec.get("nodeName")
        required = (((tspec.get("affinity") or {}).get("nodeAffinity") or {})
                    .get("requiredDuringSchedulingIgnoredDuringExecution"))
        self.matcher = NodeMatcher(tspec.get("nodeSelector") or {}, required)
        self.tolerations = daemon_tolerations(tspec)

    def verdict(self, node: dict) -> tuple[bool, bool]:
        """(should run, should continue running) on `node`."""
        name = node["metadata"]["name"]
        if self.node_name and self.node_name != name:
            return False, False
        if not self.matcher.matches(node["metadata"].get("labels") or {}, name):
            return False, False
        taints = (node.get("spec") or {}).get("taints")
        if taints and untolerated(taints, self.tolerations, ("NoSchedule", "NoExecute")) is not None:
            return False, untolerated(taints, self.tolerations, ("NoExecute",)) is None
        return True, True


def should_run(node: dict, ds: dict) -> tuple[bool, bool]:
    return Placement(ds).verdict(node)


def _selector(ds: dict):
    return selector_from_object(ds["spec"].get("selector"))


def template_generation(ds: dict) -> str | None:
    return (ds["metadata"].get("annotations") or {}).get(TEMPLATE_GENERATION)


def is_updated(pod: dict, hash_: str, generation: str | None) -> bool:
    """IsPodUpdated: the pod carries the current revision hash or template generation."""
    labels = pod["metadata"].get("labels") or {}
    return (bool(hash_) and labels.get(POD_REVISION_LABEL) == hash_) or (
        generation is not None and labels.get(TEMPLATE_GENERATION_LABEL) == generation)


def _conditions(node: dict) -> list:
    return sorted((c.get("type"), c.get("status")) for c in (node.get("status") or {}).get("conditions") or [])


def _same_but_heartbeat(old: dict, new: dict) -> bool:
    """shouldIgnoreNodeUpdate: labels, spec and condition states unchanged."""
    return (old["metadata"].get("labels") == new["metadata"].get("labels") and old.get("spec") == new.get("spec")
            and _conditions(old) == _conditions(new))


def _age_rank(pod: dict) -> tuple:
    """podByCreationTimestampAndPhase: scheduled first, then oldest, then by name."""
    return (not (pod.get("spec") or {}).get("nodeName"), pod["metadata"].get("creationTimestamp") or "",
            pod["metadata"]["name"])


class DaemonSetController(Controller):
    name = "daemonset-controller"
    queue_name = "daemonset"
    workers = 2

    def __init__(self, client, clock: Clock | None = None, informers: InformerFactory | None = None):
        super().__init__(client, informers=informers, **({"clock": clock} if clock else {}))
        self.ds = client.resource("apps", "v1", "daemonsets")
        self.pods = client.resource("", "v1", "pods")
        self.recorder = CoreEventRecorder(client, "daemonset-controller", self.clock)
        self.ds_inf = self.informer_factory.informer(self.ds)
        self.pod_inf = self.informer_factory.informer(self.pods)
        self.node_inf = self.informer_factory.informer(client.resource("", "v1", "nodes"))
        self.rev_inf = self.informer_factory.informer(client.resource("apps", "v1", "controllerrevisions"))
        self.history = History(client, self.rev_inf, "apps/v1", "DaemonSet")
        self.expectations = Expectations(self.clock)
        self._owner_key = resolving(self.ds_inf, "DaemonSet")
        self._backoff: dict[tuple[str, str], tuple[float, float]] = {}
        self.ds_inf.add_handlers(on_add=self._enqueue, on_update=lambda o, n: self._enqueue(n), on_delete=self._enqueue)
        self.pod_inf.add_handlers(on_add=self._pod_added, on_update=self._pod_updated, on_delete=self._pod_deleted)
        self.node_inf.add_handlers(on_add=self._node_added, on_update=self._node_updated, on_delete=self._node_added)

    def informers(self):
        return [self.ds_inf, self.pod_inf, self.node_inf, self.rev_inf]

    def _enqueue(self, ds: dict) -> None:
        self.queue.add(key_of(ds))

    def _pod_added(self, pod: dict) -> None:
        pod_added(pod, self._owner_key, self.queue.add, self._enqueue_selecting, self._pod_deleted,
                  self.expectations.observed_add)

    def _pod_updated(self, old: dict, pod: dict) -> None:
        """updatePod: a pod given its deletionTimestamp counts as deleted at once (its DaemonSet need not
        wait out the grace period to replace it); else the owners of both sides, adopters on a change."""
        if pod["metadata"].get("deletionTimestamp"):
            self._pod_deleted(pod)
            return
        pod_updated(old, pod, self._owner_key, self.queue.add, self._enqueue_selecting)

    def _enqueue_selecting(self, pod: dict) -> None:
        """An orphan may be adopted by any DaemonSet selecting it."""
        for ds in selecting(self.ds_inf, pod, _selector):
            self._enqueue(ds)

    def _pod_deleted(self, pod: dict) -> None:
        if key := self._owner_key(pod, controller_ref(pod)):
            self.expectations.observed_del(key)
            self.queue.add(key)

    def _node_added(self, node: dict) -> None:
        """A node that comes or goes matters to the DaemonSets that should run on it."""
        for ds in self.ds_inf.list():
            if should_run(node, ds)[0]:
                self._enqueue(ds)

    def _node_updated(self, old: dict, node: dict) -> None:
        """Heartbeats are ignored; other changes enqueue the DaemonSets whose
        verdict for the node changed (upstream's updateNode)."""
        if _same_but_heartbeat(old, node):
            return
        for ds in self.ds_inf.list():
            if should_run(old, ds) != should_run(node, ds):
                self._enqueue(ds)

    def _failed_backoff(self, ds: dict, node: str) -> float:
        """Seconds to wait before killing another failed pod on `node` (0: go
        now, and back off longer next time): upstream's 1 s..15 min backoff
        keeps a node that rejects the pod from being hot-looped."""
        k = (ds["metadata"]["uid"], node)
        now = self.clock.monotonic()
        delay, last = self._backoff.get(k, (0.0, 0.0))
        if delay and now - last < delay:
            return delay - (now - last)
        if delay and now - last > 2 * FAILED_BACKOFF_MAX:
            delay = 0.0  # long quiet: start over
        self._backoff[k] = (min(FAILED_BACKOFF_MAX, delay * 2 or FAILED_BACKOFF_BASE), now)
        return 0.0

    # --- sync -----------------------------------------------------------------

    async def sync(self, key: str) -> None:
        ds = self.ds_inf.get(key)
        if ds is None:
            self.expectations.forget(key)
            return
        if ds["metadata"].get("deletionTimestamp"):
            return
        placement = Placement(ds)
        nodes = {n["metadata"]["name"]: placement.verdict(n) for n in self.node_inf.list()}
        current, old = await self._construct_history(ds)
        hash_ = (current["metadata"].get("labels") or {}).get(POD_REVISION_LABEL, "")
        failure = None
        # with creates or deletes still unseen only the counts are written: observedGeneration stays,
        # since this generation was not acted on
        managed = self.expectations.satisfied(key)
        if managed:
            try:
                await self._update_daemon_set(key, ds, nodes, hash_, old)
            except APIError as e:
                failure = e  # the status is written all the same, as upstream's syncDaemonSet does
        await self._update_status(key, ds, nodes, hash_, managed)
        if failure is not None:
            raise failure

    async def _update_daemon_set(self, key: str, ds: dict, nodes: dict[str, tuple[bool, bool]], hash_: str,
                                 old: list[dict]) -> None:
        """updateDaemonSet: manage, then roll out and prune history once the expectations hold."""
        await self._manage(key, ds, nodes, hash_)
        if self.expectations.satisfied(key):
            strategy = (ds["spec"].get("updateStrategy") or {})
            if strategy.get("type") == "RollingUpdate":
                await self._rolling_update(key, ds, nodes, hash_)
            await self._cleanup_history(ds, old)

    async def _node_to_pods(self, ds: dict) -> dict[str, list[dict]]:
        """getNodesToDaemonPods: the pods this DaemonSet controls (orphans it
        selects adopted, as claimed now rather than as the cache shows them),
        by target node; finished pods already being deleted are left out."""
        out: dict[str, list[dict]] = {}
        for pod in await claim_objects(self.pods, self.pod_inf.list_namespace(ds["metadata"]["namespace"]), ds,
                                       _selector(ds), "apps/v1", "DaemonSet"):
            pmd = pod["metadata"]
            phase = (pod.get("status") or {}).get("phase")
            if pmd.get("deletionTimestamp") and phase in ("Succeeded", "Failed"):
                continue
            node = target_node(pod)
            if node:
                out.setdefault(node, []).append(pod)
        return out

    async def _construct_history(self, ds: dict) -> tuple[dict, list[dict]]:
        """The revision matching the current template (created, or renumbered
        newest after a rollback) and the older ones."""
        history = await self.history.claim(ds)
        patch = template_patch(ds)
        current = [r for r in history if r.get("data") == patch]
        old = [r for r in history if r.get("data") != patch]
        number = max((r.get("revision", 0) for r in old), default=0) + 1
        if not current:
            return await self._snapshot(ds, number), old
        cur = current[-1]
        for dup in current[:-1]:
            await self.history.delete(dup)
        if cur.get("revision", 0) < number:
            cur = await self.history.renumber(cur, number)
        return cur, old

    async def _snapshot(self, ds: dict, number: int) -> dict:
        collisions = (ds.get("status") or {}).get("collisionCount")
        hash_ = template_hash(ds["spec"].get("template") or {}, collisions)
        labels = {**(((ds["spec"].get("template") or {}).get("metadata") or {}).get("labels") or {}),
                  POD_REVISION_LABEL: hash_}
        body = self.history.new_revision(ds, f"{ds['metadata']['name']}-{hash_}", labels, number,
                                         ds["metadata"].get("annotations"))
        created, ok = await self.history.create(body)
        if ok:
            return created
        status = {**(ds.get("status") or {}), "collisionCount": (collisions or 0) + 1}
        await self.ds.update({**ds, "status": status}, subresource="status")
        raise APIError(409, "Conflict", f"found a stale ControllerRevision {body['metadata']['name']} for "
                                        f"DaemonSet {ds['metadata']['name']}, bumped its collisionCount")

    async def _manage(self, key: str, ds: dict, nodes: dict[str, tuple[bool, bool]], hash_: str) -> None:
        """manage: create pods on nodes that need one, delete pods that must go;
        `nodes` holds each node's (should run, should continue running)."""
        by_node = await self._node_to_pods(ds)
        surge = self._max_surge(ds, nodes) > 0
        need, delete = [], []
        for name, (run, keep) in nodes.items():
            pods = by_node.get(name, [])
            if run and not pods:
                need.append(name)
            elif keep:
                running = []
                for pod in pods:
                    if pod["metadata"].get("deletionTimestamp"):
                        continue
                    phase = (pod.get("status") or {}).get("phase")
                    if phase == "Failed":
                        wait = self._failed_backoff(ds, name)
                        if wait:
                            self.queue.add_after(key, wait)
                            continue
                        await self.recorder.emit(ds, "Warning", "FailedDaemonPod",
                                                 f"Found failed daemon pod {pod['metadata']['namespace']}/"
                                                 f"{pod['metadata']['name']} on node {name}, will try to kill it")
                        delete.append(pod)
                    elif phase == "Succeeded":
                        delete.append(pod)
                    else:
                        running.append(pod)
                delete += self._excess(ds, running, hash_, surge, run, name, need)
            elif pods:
                delete += [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        for node_name, pods in by_node.items():
            if node_name not in nodes:  # the node is gone
                delete += [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        await self._sync_nodes(key, ds, delete, need, hash_)

    def _excess(self, ds: dict, running: list[dict], hash_: str, surge: bool, run: bool, node: str,
                need: list[str]) -> list[dict]:
        """More than one running pod on a node: without surge keep the oldest;
        with surge keep the oldest new and the oldest old, the old one only
        while it is ready and the new one not yet available."""
        running.sort(key=_age_rank)
        if not surge:
            return running[1:]
        if not running:
            if run:
                need.append(node)
            return []
        gen = template_generation(ds)
        new = [p for p in running if is_updated(p, hash_, gen)]
        old = [p for p in running if not is_updated(p, hash_, gen)]
        out = new[1:] + old[1:]
        if new and old:
            avail = pod_available_in(new[0], ds["spec"].get("minReadySeconds", 0), self.clock.now())
            if not pod_is_ready(old[0]) or avail == 0:
                out.append(old[0])
        return out

    async def _sync_nodes(self, key: str, ds: dict, delete: list[dict], nodes: list[str], hash_: str) -> None:
        """syncNodes: both counts expected at once, then a pinned pod created per node (in slow-start
        batches), then the given pods deleted, even after a failed create; the first failure is raised."""
        template = (ds["spec"].get("template") or {})
        ref = owner_reference(ds, "apps/v1", "DaemonSet")
        bodies = []
        for node in nodes[:BURST]:
            pod = pod_from_template(template, ds, ref, f"{ds['metadata']['name']}-")
            md = pod["metadata"]
            md["labels"] = {**(md.get("labels") or {}), POD_REVISION_LABEL: hash_}
            if (gen := template_generation(ds)) is not None:
                md["labels"][TEMPLATE_GENERATION_LABEL] = gen
            spec = pod["spec"]
            spec["tolerations"] = daemon_tolerations(spec)
            spec["affinity"] = pin_to_node(spec.get("affinity"), node)
            bodies.append(pod)
        victims = delete[:BURST]
        self.expectations.expect(key, adds=len(bodies), dels=len(victims))
        _, failure = await create_pods(self.pods, self.expectations, key, bodies, self.recorder, ds, expect=False)
        _, failed_delete = await delete_pods(self.pods, self.expectations, key, victims, self.recorder, ds, expect=False)
        failure = failure or failed_delete
        if failure is not None:
            raise failure

    # --- rolling update ---------------------------------------------------------------

    def _desired(self, nodes: dict[str, tuple[bool, bool]]) -> int:
        return sum(1 for run, _ in nodes.values() if run)

    def _budgets(self, ds: dict, nodes: dict[str, tuple[bool, bool]]) -> tuple[int, int, int]:
        """updatedDesiredNodeCounts: (maxSurge, maxUnavailable, desired), percentages of the desired count rounded up."""
        desired = self._desired(nodes)
        ru = (ds["spec"].get("updateStrategy") or {}).get("rollingUpdate") or {}
        surge = resolve_int_or_percent(ru.get("maxSurge", 0), desired, True)
        unavailable = resolve_int_or_percent(ru.get("maxUnavailable", 1), desired, True)
        if surge == 0 and unavailable == 0:
            unavailable = 1
        return surge, unavailable, desired

    def _max_surge(self, ds: dict, nodes: dict[str, tuple[bool, bool]]) -> int:
        strategy = ds["spec"].get("updateStrategy") or {}
        if strategy.get("type") != "RollingUpdate":
            return 0
        return resolve_int_or_percent((strategy.get("rollingUpdate") or {}).get("maxSurge", 0),
                                      self._desired(nodes), True)

    def _new_and_old(self, ds: dict, pods: list[dict], hash_: str) -> tuple[dict | None, dict | None, bool]:
        """findUpdatedPodsOnNode: at most one new and one old live pod, else not ok."""
        new = old = None
        gen = template_generation(ds)
        for pod in pods:
            if pod["metadata"].get("deletionTimestamp"):
                continue
            if is_updated(pod, hash_, gen):
                if new is not None:
                    return None, None, False
                new = pod
            else:
                if old is not None:
                    return None, None, False
                old = pod
        return new, old, True

    async def _rolling_update(self, key: str, ds: dict, nodes: dict[str, tuple[bool, bool]], hash_: str) -> None:
        by_node = await self._node_to_pods(ds)
        surge, max_unavailable, desired = self._budgets(ds, nodes)
        now, min_ready = self.clock.now(), ds["spec"].get("minReadySeconds", 0)

        def available(pod):
            return pod_available_in(pod, min_ready, now) == 0

        if surge == 0:
            unavailable, replace, candidates = 0, [], []
            for pods in by_node.values():
                new, old, ok = self._new_and_old(ds, pods, hash_)
                if not ok or (new is None) == (old is None):
                    unavailable += 1
                elif new is not None:
                    unavailable += not available(new)
                elif not available(old):
                    replace.append(old)
                elif unavailable < max_unavailable:
                    candidates.append(old)
            room = min(max(0, max_unavailable - unavailable), len(candidates))
            await self._sync_nodes(key, ds, replace + candidates[:room], [], hash_)
            return
        delete, not_run, candidates, allowed = [], [], [], []
        surging = available_count = 0
        for name, pods in by_node.items():
            new, old, ok = self._new_and_old(ds, pods, hash_)
            if not ok:
                surging += 1
                continue
            counted = old if old is not None else new
            if counted is not None and available(counted):
                available_count += 1
            runs = nodes.get(name, (False, False))[0]
            if old is None:
                continue
            if new is None:
                if not available(old):  # replace an unavailable old pod at once, where it may still run
                    if runs:
                        allowed.append(name)
                    else:
                        delete.append(old)
                elif not runs:
                    not_run.append(old)
                elif surging < surge:
                    candidates.append(name)
            elif not available(new):
                surging += 1
            else:
                delete.append(old)
        room = min(max(0, surge - surging), len(candidates))
        unavailable_room = max(0, max_unavailable - (desired - available_count))
        delete += not_run[:unavailable_room]
        await self._sync_nodes(key, ds, delete, allowed + candidates[:room], hash_)

    # --- history and status -----------------------------------------------------------

    async def _cleanup_history(self, ds: dict, old: list[dict]) -> None:
        """cleanupHistory: revisions beyond revisionHistoryLimit that no pod still uses."""
        limit = ds["spec"].get("revisionHistoryLimit", 10)
        if len(old) <= limit:
            return
        live = {(p["metadata"].get("labels") or {}).get(POD_REVISION_LABEL)
                for pods in (await self._node_to_pods(ds)).values() for p in pods}
        live_names = {r["metadata"]["name"] for r in old
                      if (r["metadata"].get("labels") or {}).get(POD_REVISION_LABEL) in live}
        await self.history.truncate(old, live_names, limit)

    async def _update_status(self, key: str, ds: dict, nodes: dict[str, tuple[bool, bool]], hash_: str,
                             observed: bool) -> None:
        """updateDaemonSetStatus; `observed`: observedGeneration becomes the DaemonSet's generation."""
        by_node = await self._node_to_pods(ds)
        now, min_ready = self.clock.now(), ds["spec"].get("minReadySeconds", 0)
        gen = template_generation(ds)
        desired = current = ready = available = updated = misscheduled = 0
        waits = []
        for name, (run, _) in nodes.items():
            pods = by_node.get(name)
            if not run:
                misscheduled += bool(pods)
                continue
            desired += 1
            if not pods:
                continue
            current += 1
            pod = sorted(pods, key=_age_rank)[0]
            if pod_is_ready(pod):
                ready += 1
                wait = pod_available_in(pod, min_ready, now)
                if wait == 0:
                    available += 1
                elif wait:
                    waits.append(wait)
            updated += is_updated(pod, hash_, gen)
        status = {**(ds.get("status") or {}), "currentNumberScheduled": current, "numberMisscheduled": misscheduled,
                  "desiredNumberScheduled": desired, "numberReady": ready}
        if observed:
            status["observedGeneration"] = ds["metadata"].get("generation", 1)
        status.update(updatedNumberScheduled=updated, numberAvailable=available, numberUnavailable=desired - available)
        for f in ("updatedNumberScheduled", "numberAvailable", "numberUnavailable"):
            if not status[f]:
                status.pop(f)
        if waits:
            self.queue.add_after(key, min(waits) + 0.05)
        if status == (ds.get("status") or {}):
            return
        try:
            await self.ds.update({**ds, "status": status}, subresource="status")
        except APIError as e:
            if e.code != 404:
                raise
