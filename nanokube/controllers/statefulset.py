"""StatefulSet controller (k/k pkg/controller/statefulset): pods with stable
names `<set>-<ordinal>` and hostnames under the governing Service, each with
its own PersistentVolumeClaims `<template>-<set>-<ordinal>`; created in order
and each only once its predecessor is Running and Ready (OrderedReady) or all
at once (Parallel); scaled down from the highest ordinal; rolled out from the
highest ordinal down to the partition within maxUnavailable, or on deletion
(OnDelete); template history kept as ControllerRevisions.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable

from ..client.informer import InformerFactory, key_of
from ..clock import Clock
from ..machinery.errors import APIError
from ..machinery.meta import controller_ref
from ..machinery.podphase import pod_is_terminal
from ..machinery.selectors import selector_from_object
from .base import Controller
from .deployment import resolve_int_or_percent
from ..client.record import CoreEventRecorder
from .history import HASH_LABEL, POD_REVISION_LABEL, History, hash_revision, revision_name, template_patch
from .own_writes import OwnWrites
from .slow_start import slow_start_batch
from .replicaset import (claim_objects, owner_reference, pod_available_in, pod_is_ready,
                         pod_added, pod_updated, resolving, selecting)

POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"
#: upstream's MaxBatchSize: the largest slow-start batch of a Parallel set
MAX_BATCH_SIZE = 500


async def run_for_all(ordinals: list[int], process: Callable[[int], Awaitable[bool]], monotonic: bool) -> bool:
    """runForAll: an OrderedReady set processes its ordinals in order and stops where `process` says
    so (True returned); a Parallel one processes them all in slow-start batches, the first failure
    raised."""
    if monotonic:
        for o in ordinals:
            if await process(o):
                return True
        return False
    _, failure = await slow_start_batch(len(ordinals), lambda i: process(ordinals[i]), limit=MAX_BATCH_SIZE)
    if failure is not None:
        raise failure
    return False


def set_selector(sts: dict):
    return selector_from_object(sts["spec"].get("selector"))


def ordinal_of(set_name: str, pod_name: str) -> int | None:
    """getOrdinal: the trailing number of `<set>-<n>`, None for other names."""
    m = re.fullmatch(re.escape(set_name) + r"-(0|[1-9][0-9]*)", pod_name)
    return int(m.group(1)) if m else None


def claim_name(template: dict, set_name: str, ordinal: int) -> str:
    return f"{template['metadata']['name']}-{set_name}-{ordinal}"


def revision_template(revision: dict) -> dict:
    """ApplyRevision for the only field a revision holds: the pod template."""
    template = dict(((revision.get("data") or {}).get("spec") or {}).get("template") or {})
    template.pop("$patch", None)
    return template


def is_running_and_ready(pod: dict) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running" and pod_is_ready(pod)


def is_terminating(pod: dict) -> bool:
    return bool(pod["metadata"].get("deletionTimestamp"))


class ClaimsNotReady(Exception):
    """createPersistentVolumeClaims' aggregated error: claims that could not be created or are
    still being deleted; the pod waits for them (the set is synced again, rate limited)."""

    def __init__(self, errors: list[str]):
        super().__init__(errors[0] if len(errors) == 1 else f"[{', '.join(errors)}]")


class StatefulSetController(Controller):
    name = "statefulset-controller"
    queue_name = "statefulset"
    workers = 2
    retriable = (ClaimsNotReady,)

    def __init__(self, client, clock: Clock | None = None, informers: InformerFactory | None = None):
        super().__init__(client, informers=informers, **({"clock": clock} if clock else {}))
        self.sets = client.resource("apps", "v1", "statefulsets")
        self.pods = client.resource("", "v1", "pods")
        self.claims = client.resource("", "v1", "persistentvolumeclaims")
        self.recorder = CoreEventRecorder(client, "statefulset-controller", self.clock)
        self.set_inf = self.informer_factory.informer(self.sets)
        self._owner_key = resolving(self.set_inf, "StatefulSet")
        self.pod_inf = self.informer_factory.informer(self.pods)
        self.claim_inf = self.informer_factory.informer(self.claims)
        self.rev_inf = self.informer_factory.informer(client.resource("apps", "v1", "controllerrevisions"))
        self.history = History(client, self.rev_inf, "apps/v1", "StatefulSet")
        self.own_writes = OwnWrites()
        self.set_inf.add_handlers(on_add=self._enqueue, on_update=self._set_updated,
                                  on_delete=lambda sts: self.own_writes.forget(key_of(sts)))
        self.pod_inf.add_handlers(on_add=self._pod_added, on_update=self._pod_updated, on_delete=self._pod_deleted)
        self.claim_inf.add_handlers(on_update=lambda o, n: self._claim_changed(n), on_delete=self._claim_gone)

    def informers(self):
        return [self.set_inf, self.pod_inf, self.claim_inf, self.rev_inf]

    def _enqueue(self, sts: dict) -> None:
        self.queue.add(key_of(sts))

    def _set_updated(self, old: dict, sts: dict) -> None:
        self.own_writes.seen(key_of(sts), sts)
        self._enqueue(sts)

    def _pod_added(self, pod: dict) -> None:
        pod_added(pod, self._owner_key, self.queue.add, self._enqueue_selecting, self._pod_deleted)

    def _pod_updated(self, old: dict, pod: dict) -> None:
        """updatePod: the set controlling the pod, the one that did when its reference moved, and
        for an orphan whose labels or reference changed, every set selecting it."""
        pod_updated(old, pod, self._owner_key, self.queue.add, self._enqueue_selecting)

    def _pod_deleted(self, pod: dict) -> None:
        if key := self._owner_key(pod, controller_ref(pod)):
            self.queue.add(key)

    def _enqueue_selecting(self, pod: dict) -> None:
        for sts in selecting(self.set_inf, pod, set_selector):
            self._enqueue(sts)

    def _claim_changed(self, claim: dict) -> None:
        for ref in claim["metadata"].get("ownerReferences") or []:
            if ref.get("kind") == "StatefulSet":
                self.queue.add(f"{claim['metadata']['namespace']}/{ref['name']}")

    def _claim_gone(self, claim: dict) -> None:
        """A claim gone may be what a member waits for (one being deleted, or a stale one): the
        sets whose claims are named like it are synced."""
        md = claim["metadata"]
        for sts in self.set_inf.list_namespace(md["namespace"]):
            set_name = sts["metadata"]["name"]
            if any(ordinal_of(f"{t['metadata']['name']}-{set_name}", md["name"]) is not None
                   for t in sts["spec"].get("volumeClaimTemplates") or []):
                self._enqueue(sts)

    # --- sync ---------------------------------------------------------------------

    async def sync(self, key: str) -> None:
        sts = self.own_writes.latest(key, self.set_inf.get(key))
        if sts is None or sts["metadata"].get("deletionTimestamp"):
            return
        pods = await self._claim_pods(sts)
        current, update, history = await self._revisions(sts)
        by_ordinal = {ordinal_of(sts["metadata"]["name"], p["metadata"]["name"]): p for p in pods}
        now = self.clock.now()
        status = self._status(sts, by_ordinal, current["metadata"]["name"], update["metadata"]["name"], now)
        failure = None
        try:
            await self._update(sts, by_ordinal, current, update, now)
        except (APIError, ClaimsNotReady) as e:
            failure = e  # the status is written all the same, as upstream's performUpdate does
        live = {current["metadata"]["name"], update["metadata"]["name"]}
        live |= {(p["metadata"].get("labels") or {}).get(POD_REVISION_LABEL) for p in pods}
        await self.history.truncate(history, live, sts["spec"].get("revisionHistoryLimit", 10))
        await self._write_status(sts, status)
        if failure is not None:
            raise failure

    async def _claim_pods(self, sts: dict) -> list[dict]:
        """Pods this set controls: matching its selector and named as its members."""
        name = sts["metadata"]["name"]
        return await claim_objects(self.pods, self.pod_inf.list_namespace(sts["metadata"]["namespace"]), sts,
                                   set_selector(sts), "apps/v1", "StatefulSet",
                                   member=lambda p: ordinal_of(name, p["metadata"]["name"]) is not None)

    async def _revisions(self, sts: dict) -> tuple[dict, dict, list[dict]]:
        """getStatefulSetRevisions: (current, update, every owned revision)."""
        history = await self.history.claim(sts)
        status = sts.get("status") or {}
        collisions = status.get("collisionCount")
        patch = template_patch(sts)
        number = (history[-1].get("revision", 0) if history else 0) + 1
        equal = [r for r in history if r.get("data") == patch]
        if equal and equal[-1] is history[-1]:
            update = equal[-1]
        elif equal:
            update = await self.history.renumber(equal[-1], number)
            history = [r for r in history if r is not equal[-1]] + [update]
        else:
            hash_ = hash_revision(patch, collisions)
            labels = {**(((sts["spec"].get("template") or {}).get("metadata") or {}).get("labels") or {}),
                      HASH_LABEL: hash_}
            body = self.history.new_revision(sts, revision_name(sts["metadata"]["name"], hash_), labels, number,
                                             sts["metadata"].get("annotations"))
            created, ok = await self.history.create(body)
            if not ok:
                await self.sets.update({**sts, "status": {**status, "collisionCount": (collisions or 0) + 1}},
                                       subresource="status")
                raise APIError(409, "Conflict", f"ControllerRevision {body['metadata']['name']} collides; "
                                                "collisionCount bumped")
            update = created
            history = history + [created]
        current = next((r for r in history if r["metadata"]["name"] == status.get("currentRevision")), update)
        return current, update, history

    # --- pods and claims ----------------------------------------------------------

    def _new_pod(self, sts: dict, revision: dict, ordinal: int) -> dict:
        """newVersionedStatefulSetPod: the revision's template with the pod's identity and storage."""
        template = revision_template(revision)
        set_name, ns = sts["metadata"]["name"], sts["metadata"]["namespace"]
        name = f"{set_name}-{ordinal}"
        tmd = template.get("metadata") or {}
        md: dict = {"name": name, "namespace": ns,
                    "labels": {**(tmd.get("labels") or {}), POD_NAME_LABEL: name, POD_INDEX_LABEL: str(ordinal),
                               POD_REVISION_LABEL: revision["metadata"]["name"]},
                    "ownerReferences": [owner_reference(sts, "apps/v1", "StatefulSet")]}
        for f in ("annotations", "finalizers"):
            if tmd.get(f):
                md[f] = dict(tmd[f]) if isinstance(tmd[f], dict) else list(tmd[f])
        spec = dict(template.get("spec") or {})
        spec["hostname"] = name
        if sts["spec"].get("serviceName"):
            spec["subdomain"] = sts["spec"]["serviceName"]
        claims = sts["spec"].get("volumeClaimTemplates") or []
        if claims:
            names = {c["metadata"]["name"] for c in claims}
            volumes = [v for v in spec.get("volumes") or [] if v.get("name") not in names]
            spec["volumes"] = [{"name": c["metadata"]["name"], "persistentVolumeClaim": {
                "claimName": claim_name(c, set_name, ordinal)}} for c in claims] + volumes
        return {"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": spec}

    def _claim_owner_refs(self, sts: dict, pod: dict | None, scaled_away: bool) -> list[dict]:
        """The retention policy as controller references (addControllerRef): Delete when the set is
        deleted → owned by the set; Delete when scaled away → owned by the condemned pod."""
        policy = sts["spec"].get("persistentVolumeClaimRetentionPolicy") or {}
        if policy.get("whenScaled") == "Delete" and pod is not None and scaled_away:
            return [owner_reference(pod, "v1", "Pod")]  # only the pod: the collector waits for every owner to go
        if policy.get("whenDeleted") == "Delete":
            return [owner_reference(sts, "apps/v1", "StatefulSet")]
        return []

    async def _ensure_claims(self, sts: dict, pod: dict, ordinal: int) -> None:
        """createPersistentVolumeClaims: each missing claim is created; ClaimsNotReady names those
        that could not be and those still being deleted (the pod must wait for them to go)."""
        set_name, ns = sts["metadata"]["name"], sts["metadata"]["namespace"]
        sel_labels = (sts["spec"].get("selector") or {}).get("matchLabels") or {}
        errors = []
        for template in sts["spec"].get("volumeClaimTemplates") or []:
            name = claim_name(template, set_name, ordinal)
            existing = self.claim_inf.get(f"{ns}/{name}")
            if existing is not None:
                if is_terminating(existing):
                    errors.append(f"pvc {name} is being deleted")
                continue
            tmd = template.get("metadata") or {}
            md = {"name": name, "namespace": ns, "labels": {**(tmd.get("labels") or {}), **sel_labels}}
            if tmd.get("annotations"):
                md["annotations"] = dict(tmd["annotations"])
            refs = self._claim_owner_refs(sts, None, False)
            if refs:
                md["ownerReferences"] = refs
            try:
                await self.claims.create({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": md,
                                          "spec": dict(template.get("spec") or {})})
            except APIError as e:
                if e.code == 409 and e.reason == "AlreadyExists":
                    continue
                await self.recorder.emit(sts, "Warning", "FailedCreate",
                                         f"create Claim {name} for Pod {pod['metadata']['name']} in StatefulSet "
                                         f"{set_name} failed error: {e.message}")
                errors.append(f"failed to create PVC {name}: {e.message}")
                continue
            await self.recorder.emit(sts, "Normal", "SuccessfulCreate",
                                     f"create Claim {name} Pod {pod['metadata']['name']} in StatefulSet {set_name} success")
        if errors:
            raise ClaimsNotReady(errors)

    def _claim_is_stale(self, sts: dict, pod: dict, ordinal: int) -> bool:
        """PodClaimIsStale: with whenScaled Delete, a claim still owned by an earlier pod of this
        name (scaled away, its claim not yet collected) must go before the pod is made again."""
        policy = sts["spec"].get("persistentVolumeClaimRetentionPolicy") or {}
        if policy.get("whenScaled") != "Delete":
            return False
        ns, pod_name = sts["metadata"]["namespace"], pod["metadata"]["name"]
        for template in sts["spec"].get("volumeClaimTemplates") or []:
            claim = self.claim_inf.get(f"{ns}/{claim_name(template, sts['metadata']['name'], ordinal)}")
            if claim is not None and any(r.get("kind") == "Pod" and r.get("name") == pod_name
                                         for r in claim["metadata"].get("ownerReferences") or []):
                return True
        return False

    async def _create_pod(self, sts: dict, pod: dict, ordinal: int) -> None:
        """CreateStatefulPod: the claims first; a claim not ready fails the pod's creation too."""
        name, set_name = pod["metadata"]["name"], sts["metadata"]["name"]
        if self._claim_is_stale(sts, pod, ordinal):
            return
        try:
            await self._ensure_claims(sts, pod, ordinal)
        except ClaimsNotReady as e:
            await self.recorder.emit(sts, "Warning", "FailedCreate",
                                     f"create Pod {name} in StatefulSet {set_name} failed error: {e}")
            raise
        try:
            await self.pods.create(pod)
        except APIError as e:
            if e.code == 409 and e.reason == "AlreadyExists":
                return
            await self.recorder.emit(sts, "Warning", "FailedCreate",
                                     f"create Pod {name} in StatefulSet {set_name} failed error: {e.message}")
            raise
        await self.recorder.emit(sts, "Normal", "SuccessfulCreate", f"create Pod {name} in StatefulSet {set_name} successful")

    async def _delete_pod(self, sts: dict, pod: dict) -> None:
        name, set_name = pod["metadata"]["name"], sts["metadata"]["name"]
        try:
            await self.pods.delete(name, pod["metadata"]["namespace"], preconditions={"uid": pod["metadata"]["uid"]})
        except APIError as e:
            if e.code in (404, 409):
                return
            await self.recorder.emit(sts, "Warning", "FailedDelete",
                                     f"delete Pod {name} in StatefulSet {set_name} failed error: {e.message}")
            raise
        await self.recorder.emit(sts, "Normal", "SuccessfulDelete", f"delete Pod {name} in StatefulSet {set_name} successful")

    async def _set_claim_owners(self, sts: dict, pod: dict, ordinal: int, scaled_away: bool) -> None:
        """updateClaimOwnerRefForSetAndPod: each claim's references to the set and the pod follow
        the retention policy. A claim referring to an earlier set or pod of the same name is left
        alone (hasStaleOwnerRef), and one another object controls only loses ours (hasUnexpectedController)."""
        set_name, ns = sts["metadata"]["name"], sts["metadata"]["namespace"]
        ours = {("StatefulSet", set_name): sts["metadata"]["uid"], ("Pod", pod["metadata"]["name"]): pod["metadata"]["uid"]}
        for template in sts["spec"].get("volumeClaimTemplates") or []:
            claim = self.claim_inf.get(f"{ns}/{claim_name(template, set_name, ordinal)}")
            if claim is None or is_terminating(claim):
                continue
            have = claim["metadata"].get("ownerReferences") or []
            mine = [r for r in have if (r.get("kind"), r.get("name")) in ours]
            if any(r.get("uid") != ours[(r["kind"], r["name"])] for r in mine):
                continue
            keep = [r for r in have if r not in mine]
            foreign = any(r.get("controller") for r in keep)
            refs = keep + ([] if foreign else self._claim_owner_refs(sts, pod, scaled_away))
            if refs != have:
                try:
                    await self.claims.patch(claim["metadata"]["name"], {"metadata": {
                        "ownerReferences": refs or None}}, namespace=ns)
                except APIError as e:
                    if e.code != 404:
                        raise

    async def _restore_identity(self, sts: dict, pod: dict, ordinal: int) -> None:
        """identityMatches (updateStatefulPod): a member's identity labels are put back; a
        Pending one's missing claims are created again (createMissingPersistentVolumeClaims)."""
        name = pod["metadata"]["name"]
        want = {POD_NAME_LABEL: name, POD_INDEX_LABEL: str(ordinal)}
        labels = pod["metadata"].get("labels") or {}
        if any(labels.get(k) != v for k, v in want.items()):
            try:
                await self.pods.patch(name, {"metadata": {"labels": want}}, namespace=pod["metadata"]["namespace"])
            except APIError as e:
                if e.code != 404:
                    raise
            await self.recorder.emit(sts, "Normal", "SuccessfulUpdate",
                                     f"update Pod {name} in StatefulSet {sts['metadata']['name']} successful")
        if (pod.get("status") or {}).get("phase") == "Pending":  # createMissingPersistentVolumeClaims
            await self._ensure_claims(sts, pod, ordinal)

    # --- the update -------------------------------------------------------------------

    def _healthy(self, sts: dict, pod: dict, now: float) -> bool:
        """Running, Ready for minReadySeconds and not terminating."""
        if not is_running_and_ready(pod) or is_terminating(pod):
            return False
        return pod_available_in(pod, sts["spec"].get("minReadySeconds", 0), now) == 0

    async def _update(self, sts: dict, by_ordinal: dict[int, dict], current: dict, update: dict, now: float) -> None:
        """updateStatefulSet: bring the pods (by ordinal) to the spec."""
        spec, set_name = sts["spec"], sts["metadata"]["name"]
        start = (spec.get("ordinals") or {}).get("start", 0)
        end = start + spec.get("replicas", 1)
        monotonic = spec.get("podManagementPolicy", "OrderedReady") != "Parallel"
        strategy = spec.get("updateStrategy") or {}
        partition = ((strategy.get("rollingUpdate") or {}).get("partition") or 0) if strategy.get("type") == "RollingUpdate" else 0
        replicas = {o: by_ordinal.get(o) for o in range(start, end)}
        condemned = sorted((o for o in by_ordinal if not start <= o < end), reverse=True)
        update_name = update["metadata"]["name"]

        def revision_for(ordinal: int) -> dict:
            """Below the partition a recreated pod keeps the current revision."""
            if strategy.get("type") == "RollingUpdate" and ordinal < start + partition:
                return current
            return update

        unhealthy_first = None

        async def process_replica(o: int) -> bool:
            """processReplica: whether an OrderedReady set stops at this ordinal."""
            nonlocal unhealthy_first
            pod = replicas[o]
            if pod is not None and pod_is_terminal(pod) and not is_terminating(pod):
                phase = pod["status"]["phase"]
                reason = "RecreatingFailedPod" if phase == "Failed" else "RecreatingTerminatedPod"
                what = "failed" if phase == "Failed" else "terminated"
                await self.recorder.emit(sts, "Warning" if phase == "Failed" else "Normal", reason,
                                         f"StatefulSet {sts['metadata']['namespace']}/{set_name} is recreating "
                                         f"{what} Pod {pod['metadata']['name']}")
                await self._delete_pod(sts, pod)
                return True
            if pod is None:
                await self._create_pod(sts, self._new_pod(sts, revision_for(o), o), o)
                return True
            if is_terminating(pod):
                return True
            await self._restore_identity(sts, pod, o)
            await self._set_claim_owners(sts, pod, o, False)
            if not self._healthy(sts, pod, now):
                if unhealthy_first is None:
                    unhealthy_first = pod
                return True
            return False

        async def process_condemned(o: int) -> bool:
            """processCondemned: whether an OrderedReady set stops at this ordinal."""
            pod = by_ordinal[o]
            await self._set_claim_owners(sts, pod, o, True)
            if is_terminating(pod) or monotonic and unhealthy_first is not None:
                return True
            await self._delete_pod(sts, pod)
            return True

        if await run_for_all(list(range(start, end)), process_replica, monotonic) or \
                await run_for_all(condemned, process_condemned, monotonic):
            return
        if strategy.get("type") != "RollingUpdate":
            return
        max_unavailable = max(1, resolve_int_or_percent((strategy.get("rollingUpdate") or {}).get("maxUnavailable", 1),
                                                        spec.get("replicas", 1), False))
        targets = [replicas[o] for o in range(start, end)]
        unavailable = sum(1 for p in targets if p is None or not self._healthy(sts, p, now))
        room = max_unavailable - unavailable
        for o in range(end - 1, start + partition - 1, -1):
            if room <= 0:
                break
            pod = replicas[o]
            if pod is None or is_terminating(pod):
                continue
            if (pod["metadata"].get("labels") or {}).get(POD_REVISION_LABEL) != update_name:
                await self._delete_pod(sts, pod)
                room -= 1

    def _status(self, sts: dict, by_ordinal: dict, current: str, update: str, now: float) -> dict:
        """The counts of every pod the set has; one ready but not yet available for minReadySeconds
        brings the set back when it becomes available (upstream requeues after minReadySeconds on
        the pod's update and while availableReplicas falls short), whichever pod the update stops at.
        collisionCount is always written, 0 included, as updateStatefulSet does."""
        min_ready = sts["spec"].get("minReadySeconds", 0)
        counts = {"replicas": 0, "readyReplicas": 0, "availableReplicas": 0, "currentReplicas": 0, "updatedReplicas": 0}
        waits = []
        for pod in by_ordinal.values():
            created = bool((pod.get("status") or {}).get("phase"))
            counts["replicas"] += created
            if is_running_and_ready(pod):
                counts["readyReplicas"] += 1
                if (wait := pod_available_in(pod, min_ready, now)) == 0:
                    counts["availableReplicas"] += 1
                else:
                    waits.append(wait)
            if created and not is_terminating(pod):
                rev = (pod["metadata"].get("labels") or {}).get(POD_REVISION_LABEL)
                counts["currentReplicas"] += rev == current
                counts["updatedReplicas"] += rev == update
        if waits:
            self.queue.add_after(key_of(sts), min(waits) + 0.05)
        return {**counts, "currentRevision": current, "updateRevision": update,
                "observedGeneration": sts["metadata"].get("generation", 1),
                "collisionCount": (sts.get("status") or {}).get("collisionCount") or 0}

    async def _write_status(self, sts: dict, computed: dict) -> None:
        """With every pod updated and ready, a rolling update is complete: the
        update revision becomes current (completeRollingUpdate)."""
        spec = sts["spec"]
        if (spec.get("updateStrategy") or {}).get("type") == "RollingUpdate" \
                and computed["updatedReplicas"] == computed["replicas"] == computed["readyReplicas"]:
            computed["currentRevision"] = computed["updateRevision"]
            computed["currentReplicas"] = computed["updatedReplicas"]
        old = sts.get("status") or {}
        status = {**old, **computed}
        for f in ("readyReplicas", "currentReplicas", "updatedReplicas"):
            if not status[f]:
                status.pop(f)
        if status == old:
            return
        try:
            self.own_writes.wrote(key_of(sts), sts, await self.sets.update({**sts, "status": status}, subresource="status"))
        except APIError as e:
            if e.code != 404:
                raise
