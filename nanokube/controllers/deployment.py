"""Deployment controller: rolls a Deployment's pod template out through
ReplicaSets named `<deployment>-<pod-template-hash>`.

RollingUpdate grows the new ReplicaSet within `maxSurge` and shrinks old ones
within `maxUnavailable`; Recreate empties the old ones before the new one
starts. Status and the Available/Progressing conditions carry upstream's
reasons, which is what `kubectl rollout status` reads.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import orjson

from ..machinery.conditions import find_condition, remove_condition, set_condition
from ..machinery.errors import APIError
from ..machinery.meta import controller_ref
from ..machinery.selectors import matches_labels, selector_from_object
from ..client.informer import InformerFactory, key_of
from ..clock import Clock, format_time, parse_time
from .base import Controller, in_turns
from .deployment_scale import DESIRED, MAX_REPLICAS, is_scaling_event, scaled_sizes
from .own_writes import OwnWrites
from ..client.record import CoreEventRecorder
from .replicaset import ignore_missing, owner_reference, pod_updated, resolving, selecting

HASH_LABEL = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"
REVISION_HISTORY = "deployment.kubernetes.io/revision-history"
MAX_REVISION_HISTORY_CHARS = 2000
NO_DEADLINE = 2**31 - 1  # progressDeadlineSeconds meaning "never time out"
#: deployment annotations that are not copied onto its ReplicaSets
_NOT_COPIED = {REVISION, REVISION_HISTORY, DESIRED, MAX_REPLICAS, "deprecated.deployment.rollback.to",
               "kubectl.kubernetes.io/last-applied-configuration"}
_SAFE = "bcdfghjklmnpqrstvwxz2456789"  # upstream's SafeEncodeString alphabet: no vowels, no look-alikes


def template_hash(template: dict, collision_count: int | None) -> str:
    """FNV-1a 32 of the template (and collisionCount), safely encoded."""
    data = orjson.dumps(template, option=orjson.OPT_SORT_KEYS)
    if collision_count:
        data += str(collision_count).encode()
    h = 0x811C9DC5
    for b in data:
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return "".join(_SAFE[ord(c) % len(_SAFE)] for c in str(h))


def _without_hash(template: dict) -> dict:
    md = dict(template.get("metadata") or {})
    labels = {k: v for k, v in (md.get("labels") or {}).items() if k != HASH_LABEL}
    md["labels"] = labels or None
    return {**template, "metadata": {k: v for k, v in md.items() if v is not None}}


def resolve_int_or_percent(value, total: int, round_up: bool) -> int:
    if isinstance(value, int):
        return value
    pct = int(str(value).rstrip("%")) * total / 100
    return math.ceil(pct) if round_up else math.floor(pct)


def surge_and_unavailable(d: dict) -> tuple[int, int]:
    """ResolveFenceposts: both zero would stall, so unavailable becomes 1."""
    replicas = d["spec"].get("replicas", 1)
    ru = (d["spec"].get("strategy") or {}).get("rollingUpdate") or {}
    surge = resolve_int_or_percent(ru.get("maxSurge", "25%"), replicas, True)
    unavailable = resolve_int_or_percent(ru.get("maxUnavailable", "25%"), replicas, False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, min(unavailable, replicas)


def revision(obj: dict) -> int:
    try:
        return int((obj["metadata"].get("annotations") or {}).get(REVISION, "0"))
    except ValueError:
        return 0


def _with_old_revision(history: str, old: str) -> str:
    """Append `old` to a comma-separated revision history, dropping the oldest
    entries to stay within upstream's 2000 characters."""
    revs = [r for r in history.split(",") if r]
    while revs and len(",".join(revs + [old])) > MAX_REVISION_HISTORY_CHARS:
        revs.pop(0)
    return ",".join(revs + [old])


def _replicas(rs: dict) -> int:
    return rs["spec"].get("replicas", 1)


def _st(rs: dict, field: str) -> int:
    return (rs.get("status") or {}).get(field, 0)


def _has_deadline(d: dict) -> bool:
    """HasProgressDeadline: progressDeadlineSeconds other than the largest int32, which means never."""
    return d["spec"].get("progressDeadlineSeconds", 600) != NO_DEADLINE


def _progressed(before: dict, after: dict) -> bool:
    """Upstream's DeploymentProgressing: more updated, ready or available replicas, or fewer old ones,
    than the last status reported (a count that only fell is no progress)."""
    def n(st: dict, field: str) -> int:
        return st.get(field, 0)
    return (n(after, "updatedReplicas") > n(before, "updatedReplicas")
            or n(after, "replicas") - n(after, "updatedReplicas") < n(before, "replicas") - n(before, "updatedReplicas")
            or n(after, "readyReplicas") > n(before, "readyReplicas")
            or n(after, "availableReplicas") > n(before, "availableReplicas"))


def terminating_replicas(rss: list[dict]) -> int | None:
    """GetTerminatingReplicaCountForReplicaSets: the sets' status.terminatingReplicas summed. A set its
    controller never synced (no observedGeneration) adds none; a synced one without the field makes the
    sum unknown (None), so the Deployment reports none rather than too few."""
    total = 0
    for rs in rss:
        st = rs.get("status") or {}
        if "terminatingReplicas" in st:
            total += st["terminatingReplicas"]
        elif st.get("observedGeneration"):
            return None
    return total


def new_rs_replicas(d: dict, all_rs: list[dict], new_rs: dict | None) -> int:
    """NewRSNewReplicas: how far the new ReplicaSet may grow now."""
    want = d["spec"].get("replicas", 1)
    current_new = _replicas(new_rs) if new_rs else 0
    if (d["spec"].get("strategy") or {}).get("type") == "Recreate":
        return want
    surge, _ = surge_and_unavailable(d)
    total = sum(_replicas(r) for r in all_rs)
    if total >= want + surge:
        return current_new
    return current_new + min(want + surge - total, max(0, want - current_new))


def old_scale_down_budget(d: dict, new_rs: dict | None, old: list[dict]) -> int:
    """How many old replicas may go now without dropping below minAvailable."""
    want = d["spec"].get("replicas", 1)
    _, unavailable = surge_and_unavailable(d)
    min_available = want - unavailable
    all_rs = old + ([new_rs] if new_rs else [])
    new_unavailable = (_replicas(new_rs) - _st(new_rs, "availableReplicas")) if new_rs else 0
    return sum(_replicas(r) for r in all_rs) - min_available - new_unavailable


class DeploymentController(Controller):
    name = "deployment-controller"
    queue_name = "deployment"
    workers = 2

    def __init__(self, client, clock: Clock | None = None, informers: InformerFactory | None = None):
        super().__init__(client, informers=informers, **({"clock": clock} if clock else {}))
        self.recorder = CoreEventRecorder(client, "deployment-controller", self.clock)
        self.deps = client.resource("apps", "v1", "deployments")
        self.rs = client.resource("apps", "v1", "replicasets")
        self.dep_inf = self.informer_factory.informer(self.deps)
        self.rs_inf = self.informer_factory.informer(self.rs)
        #: the key of the Deployment a ReplicaSet's controller reference names, while it has the reference's uid
        self._owner_key = resolving(self.dep_inf, "Deployment")
        self.own_writes = OwnWrites()
        self.dep_inf.add_handlers(on_add=self._enqueue, on_update=self._dep_updated, on_delete=self._enqueue)
        self.rs_inf.add_handlers(on_add=self._rs_added, on_update=self._rs_updated, on_delete=self._rs_deleted)
        self.pod_inf = self.informer_factory.informer(client.resource("", "v1", "pods"))
        self.pod_inf.add_handlers(on_delete=self._pod_deleted)

    def informers(self):
        return [self.dep_inf, self.rs_inf, self.pod_inf]

    def _enqueue(self, d: dict) -> None:
        self.queue.add(key_of(d))

    def _dep_updated(self, old: dict, d: dict) -> None:
        self.own_writes.seen(key_of(d), d)
        self._enqueue(d)

    def _rs_added(self, rs: dict) -> None:
        """addReplicaSet: the Deployment controlling it, or every one selecting an orphan."""
        ref = controller_ref(rs)
        if ref is None:
            self._enqueue_selecting(rs)
        elif key := self._owner_key(rs, ref):
            self.queue.add(key)

    def _rs_updated(self, old: dict, rs: dict) -> None:
        """updateReplicaSet, which reads as updatePod: the Deployment controlling it, the one that
        did when its reference moved, and an orphan's selecting ones only when its labels or
        reference changed (not on each of its status writes)."""
        pod_updated(old, rs, self._owner_key, self.queue.add, self._enqueue_selecting)

    def _rs_deleted(self, rs: dict) -> None:
        """deleteReplicaSet: no Deployment cares about an orphan going."""
        if key := self._owner_key(rs, controller_ref(rs)):
            self.queue.add(key)

    def _enqueue_selecting(self, rs: dict) -> None:
        for d in selecting(self.dep_inf, rs, lambda d: selector_from_object(d["spec"].get("selector"))):
            self._enqueue(d)

    def _pod_deleted(self, pod: dict) -> None:
        """deletePod: a Recreate Deployment waits for every pod of its old ReplicaSets to be gone
        (terminating ones too), so the last of its pods going syncs it."""
        ref = controller_ref(pod)
        if ref is None or ref.get("kind") != "ReplicaSet":
            return
        rs = self.rs_inf.get(f"{pod['metadata']['namespace']}/{ref['name']}")
        if rs is None or rs["metadata"]["uid"] != ref.get("uid") or not (key := self._owner_key(rs, controller_ref(rs))):
            return
        d = self.dep_inf.get(key)
        if d is not None and (d["spec"].get("strategy") or {}).get("type") == "Recreate" and not any(
                map(self._has_pod(d), self.pod_inf.list_namespace(d["metadata"]["namespace"]))):
            self.queue.add(key)

    def _has_pod(self, d: dict, of: list[dict] | None = None) -> Callable[[dict], bool]:
        """getPodMapForDeployment's pods: whether a pod is one it selects controlled by its ReplicaSets
        (by `of`). A test per pod, for a caller to stop at the first (a handler, which cannot let the
        loop run) or to pass over the namespace's pods in turns (a sync)."""
        md = d["metadata"]
        if of is None:
            of = [rs for rs in self.rs_inf.list_namespace(md["namespace"])
                  if (controller_ref(rs) or {}).get("uid") == md["uid"]]
        uids = {rs["metadata"]["uid"] for rs in of}
        sel = selector_from_object(d["spec"].get("selector"))
        return lambda p: (controller_ref(p) or {}).get("uid") in uids and matches_labels(sel, p["metadata"].get("labels"))

    async def sync(self, key: str) -> None:
        d = self.own_writes.latest(key, self.dep_inf.get(key))
        if d is None:
            self.own_writes.forget(key)
            return
        if d["metadata"].get("deletionTimestamp"):
            return
        owned = await self._claim(d)
        new_rs, old = self._split(d, owned)
        if d["spec"].get("paused") or is_scaling_event(d, owned):
            await self._scale_all(d, new_rs, old)
        else:
            if (d["spec"].get("strategy") or {}).get("type") == "Recreate":
                new_rs = await self._recreate(d, new_rs, old)
            else:
                new_rs = await self._ensure_new_rs(d, new_rs, old)
                await self._rolling(d, new_rs, old)
            if self._complete(d, new_rs, old):
                await self._cleanup(d, old)
        await self._update_status(d, new_rs, old)

    async def _claim(self, d: dict) -> list[dict]:
        md = d["metadata"]
        sel = selector_from_object(d["spec"].get("selector"))
        owned = []
        for rs in self.rs_inf.list_namespace(md["namespace"]):
            rmd = rs["metadata"]
            ref = controller_ref(rs)
            if ref is not None and ref["uid"] == md["uid"]:
                owned.append(rs)
            elif ref is None and matches_labels(sel, rmd.get("labels")) and not rmd.get("deletionTimestamp"):
                refs = list(rmd.get("ownerReferences") or []) + [owner_reference(d, "apps/v1", "Deployment")]
                try:
                    owned.append(await self.rs.patch(rmd["name"], {"metadata": {
                        "ownerReferences": refs, "uid": rmd["uid"]}}, namespace=rmd["namespace"]))
                except APIError as e:
                    if e.code not in (404, 409, 422):
                        raise
        return owned

    @staticmethod
    def _split(d: dict, owned: list[dict]) -> tuple[dict | None, list[dict]]:
        """The oldest ReplicaSet whose template equals the Deployment's is the new one."""
        target = _without_hash(d["spec"]["template"])
        owned = sorted(owned, key=lambda r: (r["metadata"].get("creationTimestamp") or "", r["metadata"]["name"]))
        new_rs = next((r for r in owned if _without_hash(r["spec"]["template"]) == target), None)
        return new_rs, [r for r in owned if r is not new_rs]

    def _annotations(self, d: dict, rs: dict | None, rev: int) -> dict:
        """The Deployment's annotations copied on; a ReplicaSet brought back by a
        rollback keeps its former revisions in revision-history."""
        ann = dict((rs or {}).get("metadata", {}).get("annotations") or {})
        for k, v in (d["metadata"].get("annotations") or {}).items():
            if k not in _NOT_COPIED:
                ann[k] = v
        if rs is not None and 0 < revision(rs) < rev:
            ann[REVISION_HISTORY] = _with_old_revision(ann.get(REVISION_HISTORY, ""), ann[REVISION])
        ann[REVISION] = str(rev)
        ann[DESIRED] = str(d["spec"].get("replicas", 1))
        ann[MAX_REPLICAS] = str(d["spec"].get("replicas", 1) + surge_and_unavailable(d)[0])
        return ann

    async def _ensure_new_rs(self, d: dict, new_rs: dict | None, old: list[dict]) -> dict:
        rev = max((revision(r) for r in old), default=0) + 1
        if new_rs is not None:
            ann = self._annotations(d, new_rs, max(rev, revision(new_rs)))
            if ann != (new_rs["metadata"].get("annotations") or {}):
                new_rs = await self.rs.patch(new_rs["metadata"]["name"], {"metadata": {"annotations": ann}},
                                             namespace=new_rs["metadata"]["namespace"])
            await self._set_deployment_revision(d, revision(new_rs))
            return new_rs
        collisions = (d.get("status") or {}).get("collisionCount")
        h = template_hash(d["spec"]["template"], collisions)
        tmpl = d["spec"]["template"]
        tmd = dict(tmpl.get("metadata") or {})
        tmd["labels"] = {**(tmd.get("labels") or {}), HASH_LABEL: h}
        sel = dict(d["spec"].get("selector") or {})
        sel["matchLabels"] = {**(sel.get("matchLabels") or {}), HASH_LABEL: h}
        name = f"{d['metadata']['name']}-{h}"
        body = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "metadata": {"name": name, "namespace": d["metadata"]["namespace"],
                             "labels": dict(tmd["labels"]), "annotations": self._annotations(d, None, rev),
                             "ownerReferences": [owner_reference(d, "apps/v1", "Deployment")]},
                "spec": {"replicas": 0, "minReadySeconds": d["spec"].get("minReadySeconds", 0),
                         "selector": sel, "template": {**tmpl, "metadata": tmd}}}
        body["spec"]["replicas"] = new_rs_replicas(d, old, None)
        try:
            created = await self.rs.create(body)
        except APIError as e:
            if e.code != 409:
                raise
            await self._bump_collisions(d, name)
            raise
        if body["spec"]["replicas"] > 0:
            await self._scaled_event(d, name, 0, body["spec"]["replicas"])
        await self._set_deployment_revision(d, rev, created=name)
        return created

    async def _bump_collisions(self, d: dict, name: str) -> None:
        """A same-named ReplicaSet with another template: hash again with collisionCount+1."""
        existing = await self.rs.get(name, d["metadata"]["namespace"])
        if _without_hash(existing["spec"]["template"]) == _without_hash(d["spec"]["template"]):
            return
        cur = self._current(d)
        status = dict(cur.get("status") or {})
        status["collisionCount"] = status.get("collisionCount", 0) + 1
        await self._write_status(cur, {**cur, "status": status})

    def _current(self, d: dict) -> dict:
        """The newest copy of `d` this controller knows: its informer's, with its own writes since."""
        return self.own_writes.latest(key_of(d), self.dep_inf.get(key_of(d))) or d

    async def _write_status(self, cur: dict, new: dict) -> None:
        """UpdateStatus of `new`, changed from `cur` (its resourceVersion the precondition, so another
        writer's change in between is a conflict), the object it returns read by the next sync."""
        self.own_writes.wrote(key_of(cur), cur, await self.deps.update(new, subresource="status"))

    async def _set_deployment_revision(self, d: dict, rev: int, created: str = "") -> None:
        """The revision annotation, written through /status as upstream's UpdateStatus writes it
        (the deployment-controller role may update deployments/status, not patch Deployments); for a
        ReplicaSet just `created`, its Progressing condition in the same write, as upstream's getNewReplicaSet."""
        cur = new = self._current(d)
        if revision(cur) != rev:
            md = cur["metadata"]
            new = {**cur, "metadata": {**md, "annotations": {**(md.get("annotations") or {}), REVISION: str(rev)}}}
        if created and _has_deadline(cur):
            st = dict(cur.get("status") or {})
            st["conditions"] = self._with_condition(st, "Progressing", "True", "NewReplicaSetCreated",
                                                    f'Created new replica set "{created}"')
            new = {**new, "status": st}
        if new is not cur:
            await self._write_status(cur, new)

    async def _scale(self, d: dict, rs: dict, replicas: int) -> None:
        """Resize, recording the Deployment size (and ceiling) the ReplicaSet was sized for; on the
        ReplicaSet as read (its resourceVersion a precondition, as upstream's Update), so a stale
        copy scales nothing and records no second ScalingReplicaSet event for one change: its
        conflict ends the sync, which the work queue retries (rate limited) on the newer copy, as
        upstream's sync returns scaleReplicaSet's error."""
        old = _replicas(rs)
        want = d["spec"].get("replicas", 1)
        ann = {DESIRED: str(want), MAX_REPLICAS: str(want + surge_and_unavailable(d)[0])}
        current = rs["metadata"].get("annotations") or {}
        if old == replicas and all(current.get(k) == v for k, v in ann.items()):
            return
        rv = rs["metadata"].get("resourceVersion")
        try:
            await self.rs.patch(rs["metadata"]["name"], {"metadata": {"annotations": ann, "resourceVersion": rv},
                                                         "spec": {"replicas": replicas}},
                                namespace=rs["metadata"]["namespace"])
        except APIError as e:
            if e.code != 404:
                raise
            return
        if old != replicas:
            await self._scaled_event(d, rs["metadata"]["name"], old, replicas)

    async def _scale_all(self, d: dict, new_rs: dict | None, old: list[dict]) -> None:
        """A paused Deployment, or one resized mid-rollout, only scales its ReplicaSets."""
        want = d["spec"].get("replicas", 1)
        saturated = new_rs is not None and _replicas(new_rs) == want and _st(new_rs, "availableReplicas") >= want \
            and (new_rs["metadata"].get("annotations") or {}).get(DESIRED) == str(want)
        rolling = (d["spec"].get("strategy") or {}).get("type") != "Recreate"
        sizes = scaled_sizes(d, new_rs, old, surge_and_unavailable(d)[0], saturated, rolling)
        for rs in ([new_rs] if new_rs else []) + old:
            if rs["metadata"]["name"] in sizes:
                await self._scale(d, rs, sizes[rs["metadata"]["name"]])

    async def _scaled_event(self, d: dict, rs_name: str, old: int, new: int) -> None:
        direction = "up" if old < new else "down"
        await self.recorder.emit(d, "Normal", "ScalingReplicaSet",
                                 f"Scaled {direction} replica set {rs_name} from {old} to {new}")

    async def _rolling(self, d: dict, new_rs: dict, old: list[dict]) -> None:
        want = d["spec"].get("replicas", 1)
        if _replicas(new_rs) > want:
            await self._scale(d, new_rs, want)
        elif _replicas(new_rs) < want:
            await self._scale(d, new_rs, new_rs_replicas(d, old + [new_rs], new_rs))
        budget = old_scale_down_budget(d, new_rs, old)
        if budget <= 0:
            return
        active_old = sorted((r for r in old if _replicas(r) > 0),
                            key=lambda r: r["metadata"].get("creationTimestamp") or "")
        for rs in active_old:  # unhealthy replicas first: removing them costs no availability
            if budget <= 0:
                break
            unhealthy = min(budget, _replicas(rs) - _st(rs, "availableReplicas"))
            if unhealthy > 0:
                await self._scale(d, rs, _replicas(rs) - unhealthy)
                rs = {**rs, "spec": {**rs["spec"], "replicas": _replicas(rs) - unhealthy}}
                budget -= unhealthy
        _, unavailable = surge_and_unavailable(d)
        available = sum(_st(r, "availableReplicas") for r in old + [new_rs])
        room = min(budget, available - (want - unavailable))
        for rs in active_old:
            if room <= 0:
                break
            cur = self.rs_inf.get(key_of(rs)) or rs
            step = min(_replicas(cur), room)
            await self._scale(d, cur, _replicas(cur) - step)
            room -= step

    async def _recreate(self, d: dict, new_rs: dict | None, old: list[dict]) -> dict | None:
        """rolloutRecreate: the old ReplicaSets scaled to 0, and only once no pod of theirs runs
        (oldPodsRunning: a terminating pod still does, a finished one does not) is the new one
        created, or grown; returns it (None while it is not yet created)."""
        if new_rs is not None:
            new_rs = await self._ensure_new_rs(d, new_rs, old)
        for rs in old:
            await self._scale(d, rs, 0)
        if any(_st(rs, "replicas") > 0 for rs in old) or await self._old_pods_running(d, old):
            return new_rs
        new_rs = await self._ensure_new_rs(d, new_rs, old)
        await self._scale(d, new_rs, d["spec"].get("replicas", 1))
        return new_rs

    async def _old_pods_running(self, d: dict, old: list[dict]) -> bool:
        """oldPodsRunning's pods: one of `old`'s not finished, found in a pass over the namespace's
        pods in turns (in_turns)."""
        has_pod = self._has_pod(d, old)
        async for part in in_turns(self.pod_inf.list_namespace(d["metadata"]["namespace"])):
            if any(has_pod(p) and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed") for p in part):
                return True
        return False

    @staticmethod
    def _complete(d: dict, new_rs: dict | None, old: list[dict]) -> bool:
        want = d["spec"].get("replicas", 1)
        return bool(new_rs) and _st(new_rs, "replicas") == want and _st(new_rs, "availableReplicas") >= want \
            and _replicas(new_rs) == want and all(_st(r, "replicas") == 0 for r in old)

    async def _cleanup(self, d: dict, old: list[dict]) -> None:
        """Keep at most revisionHistoryLimit old, empty ReplicaSets (oldest go first)."""
        limit = d["spec"].get("revisionHistoryLimit", 10)
        empty = sorted((r for r in old if _replicas(r) == 0 and _st(r, "replicas") == 0
                        and not r["metadata"].get("deletionTimestamp")), key=revision)
        for rs in empty[:max(0, len(empty) - limit)]:
            await ignore_missing(self.rs.delete(rs["metadata"]["name"], rs["metadata"]["namespace"],
                                                preconditions={"uid": rs["metadata"]["uid"]}))

    def _with_condition(self, st: dict, ctype: str, status: str, reason: str, message: str,
                        touch: bool = False) -> list[dict]:
        """Conditions with one set. As upstream's SetDeploymentCondition, one with the same status
        and reason stays as it is, message and lastUpdateTime included, unless `touch` records
        progress (upstream's Progressing special case)."""
        conds = st.get("conditions")
        old = find_condition(conds, ctype)
        if old and old["status"] == status and old.get("reason") == reason and not touch:
            return list(conds or [])
        now = format_time(self.clock.now())
        cond = {"type": ctype, "status": status, "lastUpdateTime": now, "lastTransitionTime": now,
                "reason": reason, "message": message}
        return sorted(set_condition(conds, cond), key=lambda c: c["type"])

    async def _update_status(self, d: dict, new_rs: dict | None, old: list[dict]) -> None:
        fresh_new = self.rs_inf.get(key_of(new_rs)) if new_rs else None
        new_rs = fresh_new or new_rs
        all_rs = old + ([new_rs] if new_rs else [])
        want = d["spec"].get("replicas", 1)
        cur = self._current(d)
        st = dict(cur.get("status") or {})
        available = sum(_st(r, "availableReplicas") for r in all_rs)
        st.update({"observedGeneration": d["metadata"].get("generation", 1),
                   "replicas": sum(_st(r, "replicas") for r in all_rs),
                   "updatedReplicas": _st(new_rs, "replicas") if new_rs else 0,
                   "readyReplicas": sum(_st(r, "readyReplicas") for r in all_rs),
                   "availableReplicas": available,
                   # calculateStatus: the sets' desired replicas (a surge pod too) less the available ones
                   "unavailableReplicas": max(sum(r["spec"].get("replicas", 0) for r in all_rs) - available, 0)})
        for f in ("replicas", "updatedReplicas", "readyReplicas", "availableReplicas", "unavailableReplicas"):
            if not st[f]:
                st.pop(f)
        st.pop("terminatingReplicas", None)
        if (terminating := terminating_replicas(all_rs)) is not None:
            st["terminatingReplicas"] = terminating  # a pointer upstream: 0 shows
        _, unavailable = surge_and_unavailable(d)
        if available >= want - unavailable:
            st["conditions"] = self._with_condition(st, "Available", "True", "MinimumReplicasAvailable",
                                                    "Deployment has minimum availability.")
        else:
            st["conditions"] = self._with_condition(st, "Available", "False", "MinimumReplicasUnavailable",
                                                    "Deployment does not have minimum availability.")
        st["conditions"] = self._replica_failure(st, new_rs, old)
        st["conditions"] = self._paused_condition(d, st)
        if new_rs and not d["spec"].get("paused"):
            st["conditions"] = self._progress(d, cur.get("status") or {}, st, new_rs, old)
        if st != (cur.get("status") or {}):
            try:
                await self._write_status(cur, {**cur, "status": st})
            except APIError as e:
                if e.code != 404:
                    raise

    def _replica_failure(self, st: dict, new_rs: dict | None, old: list[dict]) -> list[dict]:
        """A ReplicaSet's ReplicaFailure (the new one's first) shows on the Deployment."""
        failure = next((c for r in ([new_rs] if new_rs else []) + old
                        for c in (r.get("status") or {}).get("conditions") or []
                        if c["type"] == "ReplicaFailure" and c["status"] == "True"), None)
        if failure is None:
            return remove_condition(st.get("conditions"), "ReplicaFailure")
        return self._with_condition(st, "ReplicaFailure", "True", failure.get("reason", ""), failure.get("message", ""))

    def _paused_condition(self, d: dict, st: dict) -> list[dict]:
        """Pausing or resuming shows in Progressing (Unknown), unless there is
        no progress deadline or it was already exceeded."""
        prog = find_condition(st.get("conditions"), "Progressing")
        if not _has_deadline(d) or prog is not None and prog.get("reason") == "ProgressDeadlineExceeded":
            return list(st.get("conditions") or [])
        was_paused = prog is not None and prog.get("reason") == "DeploymentPaused"
        if d["spec"].get("paused") and not was_paused:
            return self._with_condition(st, "Progressing", "Unknown", "DeploymentPaused", "Deployment is paused")
        if not d["spec"].get("paused") and was_paused:
            return self._with_condition(st, "Progressing", "Unknown", "DeploymentResumed", "Deployment is resumed")
        return list(st.get("conditions") or [])

    def _progress(self, d: dict, before: dict, st: dict, new_rs: dict, old: list[dict]) -> list[dict]:
        """Progressing as upstream's syncRolloutStatus: none without a deadline; untouched once a rollout
        completed with nothing left to replace (a scale keeps NewReplicaSetAvailable and its message); else complete, then any
        progress since the last status `before` (which ends a ProgressDeadlineExceeded: a rollback out
        of a stuck rollout is progressing again), then the deadline, counted from the last progress."""
        name = new_rs["metadata"]["name"]
        if not _has_deadline(d):
            return remove_condition(st.get("conditions"), "Progressing")
        prog = find_condition(st.get("conditions"), "Progressing")
        if prog is None:  # getNewReplicaSet: the ReplicaSet of a deployment that came to have a deadline
            st = {**st, "conditions": self._with_condition(st, "Progressing", "True", "FoundNewReplicaSet",
                                                           f'Found new replica set "{name}"')}
            prog = find_condition(st["conditions"], "Progressing")
        if prog.get("reason") == "NewReplicaSetAvailable" and st.get("replicas", 0) == st.get("updatedReplicas", 0):
            return list(st.get("conditions") or [])
        if self._complete(d, new_rs, old):
            return self._with_condition(st, "Progressing", "True", "NewReplicaSetAvailable",
                                        f'ReplicaSet "{name}" has successfully progressed.')
        if _progressed(before, st):
            return self._with_condition(st, "Progressing", "True", "ReplicaSetUpdated",
                                        f'ReplicaSet "{name}" is progressing.', touch=True)
        if prog.get("reason") not in ("NewReplicaSetAvailable", "ProgressDeadlineExceeded"):
            since, deadline = parse_time(prog["lastUpdateTime"]), d["spec"].get("progressDeadlineSeconds", 600)
            if self.clock.now() - since > deadline:
                return self._with_condition(st, "Progressing", "False", "ProgressDeadlineExceeded",
                                            f'ReplicaSet "{name}" has timed out progressing.')
            self.queue.add_after(key_of(d), max(0.0, since + deadline - self.clock.now()) + 0.05)
        return list(st.get("conditions") or [])
