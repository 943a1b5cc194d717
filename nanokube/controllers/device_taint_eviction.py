"""Device-taint eviction (KEP-5055, kube-controller-manager's
device-taint-eviction-controller).

A pod using an allocated ResourceClaim whose devices carry a NoExecute taint
(from the device's ResourceSlice entry or from a DeviceTaintRule) that the
tolerations copied into the allocation result do not tolerate is evicted at
`timeAdded + tolerationSeconds`: at once without a matching toleration, never
with one that has no seconds. Eviction is a `DisruptionTarget` condition, an
event, then a delete with a UID precondition. Each DeviceTaintRule's
`EvictionInProgress` condition reports pending and evicted pods, and for
`effect: None` what NoExecute would do.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..machinery.conditions import find_condition, remove_condition, transition_time
from ..machinery.errors import APIError
from ..client.informer import InformerFactory, key_of
from ..clock import REAL, Clock, parse_time
from ..dra.resourceclaim import claim_names, reserved_for_pod
from ..machinery.podgroups import POD_GROUP_INDEX, group_key
from ..machinery.podphase import pod_is_terminal
from .base import Controller
from ..client.record import CoreEventRecorder
from .taint_eviction import toleration_seconds

REASON = "DeletionByDeviceTaintManager"
MESSAGE = "Device Taint manager: deleting due to NoExecute taint"
CONDITION = "EvictionInProgress"
RULE_STATUS_PERIOD = 10.0
SMP = "application/strategic-merge-patch+json"
R = "resource.k8s.io"
#: the claim informer's index of allocated claims by the device selectors that select one of their
#: devices (selector_keys), so a rule reads the claims it selects, whichever fields it sets
CLAIM_DEVICE_INDEX = "allocatedDevice"
#: the rule informer's index of DeviceTaintRules by their selector's key (selector_key), so a device
#: reads the rules selecting it: the eight keys of its selector_keys
RULE_SELECTOR_INDEX = "deviceSelector"


def options_from_env() -> dict:
    """`NANOKUBE_DEVICE_TAINT_RULE_STATUS_PERIOD` shortens the time between
    rule status updates (10s upstream) for tests."""
    period = os.environ.get("NANOKUBE_DEVICE_TAINT_RULE_STATUS_PERIOD")
    return {"rule_status_period": float(period)} if period else {}


def selector_key(driver: str | None, pool: str | None, device: str | None) -> str:
    """A device selector as one string, an unset (or empty) field empty: "driver|pool|device"
    ('|' is in no driver, pool or device name, and none of them is empty)."""
    return f"{driver or ''}|{pool or ''}|{device or ''}"


def selector_keys(driver: str, pool: str, device: str) -> tuple[str, ...]:
    """The keys of the eight selectors that select a device: each of its fields set or left out."""
    return tuple(selector_key(driver if m & 4 else None, pool if m & 2 else None, device if m & 1 else None)
                 for m in range(8))


def _rule_selector_key(rule: dict) -> str | None:
    """RULE_SELECTOR_INDEX's value: a nil selector selects nothing, so it is under no key."""
    sel = (rule.get("spec") or {}).get("deviceSelector")
    return None if sel is None else selector_key(sel.get("driver"), sel.get("pool"), sel.get("device"))


def rule_selects(rule: dict, driver: str, pool: str, device: str) -> bool:
    """A nil selector selects nothing, an empty one everything; set fields must match."""
    sel = (rule.get("spec") or {}).get("deviceSelector")
    if sel is None:
        return False
    return all(not sel.get(k) or sel[k] == v for k, v in (("driver", driver), ("pool", pool), ("device", device)))


def _plural(n: int, one: str, many: str) -> str:
    return one if n == 1 else many % n


@dataclass(frozen=True)
class Eviction:
    """When a pod must go, and the rules among the reasons: by UID, and by name (to queue their status)."""
    when: float
    rules: frozenset[str]
    names: frozenset[str] = frozenset()


class DeviceTaintEvictionController(Controller):
    name = "device-taint-eviction-controller"
    queue_name = "device-taint-eviction-controller"

    def __init__(self, client, clock: Clock = REAL, rule_status_period: float = RULE_STATUS_PERIOD,
                 informers: InformerFactory | None = None):
        super().__init__(client, clock, informers)
        self.rule_status_period = rule_status_period
        self.pods_api = client.resource("", "v1", "pods")
        self.rules_api = client.resource(R, "v1", "devicetaintrules")
        self.recorder = CoreEventRecorder(client, self.name, clock)
        self.pods = self.informer_factory.informer(self.pods_api)
        self.pods.add_index(POD_GROUP_INDEX, group_key)
        self.claims = self.informer_factory.informer(client.resource(R, "v1", "resourceclaims"))
        self.claims.add_index(CLAIM_DEVICE_INDEX, _allocated_devices)
        self.slices = self.informer_factory.informer(client.resource(R, "v1", "resourceslices"))
        self.rules = self.informer_factory.informer(self.rules_api)
        self.rules.add_index(RULE_SELECTOR_INDEX, _rule_selector_key)
        self.pods.add_handlers(self._pod_changed, lambda _o, n: self._pod_changed(n), self._pod_gone)
        self.claims.add_handlers(self._claim_changed, lambda o, n: self._claim_changed(n, o), self._claim_changed)
        self.slices.add_handlers(self._slice_changed, lambda o, n: self._slice_changed(n, o), self._slice_changed)
        self.rules.add_handlers(self._rule_changed, lambda o, n: self._rule_changed(n, o), self._rule_changed)
        self._pools: dict[tuple[str, str], dict[str, dict]] = {}
        self._taints: dict[tuple[str, str], dict[str, list[dict]]] = {}
        self._first_seen: dict[tuple, float] = {}
        self._scheduled: set[str] = set()
        #: pods (by uid) each rule (by uid) evicted; a set, since a pod may be synced again
        #: before the informer shows its deletion
        self._evicted: dict[str, set[str]] = {}
        #: pods (by uid) this controller deleted whose deletion the informer has not shown yet;
        #: a sync in that window must not evict (and record the event) a second time
        self._deleting: set[str] = set()

    def informers(self):
        return [self.slices, self.rules, self.claims, self.pods]

    # -- indexes and event handlers --------------------------------------

    def _slice_changed(self, new: dict, old: dict | None = None) -> None:
        """Keep the pools' slices; queue the consumers of the devices whose NoExecute taints changed."""
        touched: list[tuple[str, str]] = []
        for s in (old, new):
            if s is None:
                continue
            pool = (s["spec"].get("driver", ""), (s["spec"].get("pool") or {}).get("name", ""))
            slices = self._pools.setdefault(pool, {})
            if s is new and self.slices.get(key_of(s)) is not None:
                slices[s["metadata"]["name"]] = s
            else:
                slices.pop(s["metadata"]["name"], None)
            if pool not in touched:
                touched.append(pool)
        for pool in touched:
            before = self._taints.get(pool) or {}
            self._reindex(pool)
            after = self._taints.get(pool) or {}
            for device in [*before, *(d for d in after if d not in before)]:
                if before.get(device) != after.get(device):
                    for claim in self.claims.by_index(CLAIM_DEVICE_INDEX, selector_key(*pool, device)):
                        self._enqueue_consumers(claim)

    def _reindex(self, pool: tuple[str, str]) -> None:
        """NoExecute taints by device name, from the pool's latest generation only."""
        slices = self._pools.get(pool) or {}
        if not slices:
            self._pools.pop(pool, None)
            self._taints.pop(pool, None)
            return
        gen = max(int((s["spec"].get("pool") or {}).get("generation") or 0) for s in slices.values())
        taints: dict[str, list[dict]] = {}
        for s in slices.values():
            if int((s["spec"].get("pool") or {}).get("generation") or 0) != gen:
                continue
            for d in s["spec"].get("devices") or []:
                noexec = [t for t in d.get("taints") or [] if t.get("effect") == "NoExecute"]
                if noexec:
                    taints[d["name"]] = noexec
        self._taints[pool] = taints

    def _claim_changed(self, new: dict, old: dict | None = None) -> None:
        for c in (old, new):
            if c is not None:
                self._enqueue_consumers(c)

    def _rule_changed(self, rule: dict, old: dict | None = None) -> None:
        """The rule's status is due again; a new, deleted or respecified rule also queues the
        consumers of the claims on devices it selects (or selected). A status write changes no pod."""
        self.queue.add(("rule", rule["metadata"]["name"]))
        if old is not None and old.get("spec") == rule.get("spec"):
            return
        for r in (old, rule):
            if r is not None:
                for claim in self._rule_claims(r):
                    self._enqueue_consumers(claim)

    def _pod_changed(self, pod: dict) -> None:
        if pod["spec"].get("resourceClaims"):
            self.queue.add(("pod", key_of(pod)))

    def _pod_gone(self, pod: dict) -> None:
        self._scheduled.discard(key_of(pod))
        self._deleting.discard(pod["metadata"]["uid"])

    def _enqueue_consumers(self, claim: dict) -> None:
        for key in self._consumers(claim):
            self.queue.add(("pod", key))

    def _consumers(self, claim: dict):
        """The keys of the pods a claim is reserved for: by name, or a PodGroup's members from the pod index."""
        ns = claim["metadata"]["namespace"]
        for ref in (claim.get("status") or {}).get("reservedFor") or []:
            if ref.get("resource") == "pods" and not ref.get("apiGroup"):
                yield f"{ns}/{ref['name']}"
            elif ref.get("resource") == "podgroups":
                for pod in self.pods.by_index(POD_GROUP_INDEX, f"{ns}/{ref['name']}"):
                    yield key_of(pod)

    def _rule_claims(self, rule: dict) -> list[dict]:
        """The allocated claims with a device the rule selects: the claim index's entry under the
        rule's selector, whichever of driver, pool and device it sets (none: every allocated claim)."""
        key = _rule_selector_key(rule)
        return [] if key is None else self.claims.by_index(CLAIM_DEVICE_INDEX, key)

    # -- when does a pod go ----------------------------------------------

    def _added(self, ident: tuple, taint: dict) -> float:
        """The taint's timeAdded, or when this controller first saw it without one."""
        if taint.get("timeAdded"):
            return parse_time(taint["timeAdded"])
        return self._first_seen.setdefault(ident + (taint.get("key"), taint.get("value")), self.clock.now())

    def _selecting(self, driver: str, pool: str, device: str) -> list[dict]:
        """The DeviceTaintRules selecting one device, from the rule index under its eight keys: a
        pod's check reads the rules that match, not every rule."""
        return [r for key in selector_keys(driver, pool, device) for r in self.rules.by_index(RULE_SELECTOR_INDEX, key)]

    def _device_taints(self, rules: list[dict] | None, driver: str, pool: str,
                       device: str) -> list[tuple[dict, dict | None]]:
        """NoExecute taints on one device, each with the rule it came from (None: the slice); `rules`
        (a simulation's) instead of the informer's."""
        out: list[tuple[dict, dict | None]] = [(t, None) for t in (self._taints.get((driver, pool)) or {}).get(device, [])]
        selecting = self._selecting(driver, pool, device) if rules is None else \
            [r for r in rules if rule_selects(r, driver, pool, device)]
        for rule in selecting:
            taint = rule["spec"].get("taint") or {}
            if taint.get("effect") == "NoExecute":
                out.append((taint, rule))
        return out

    def claim_eviction(self, claim: dict, rules: list[dict] | None = None) -> Eviction | None:
        """The earliest time an untolerated NoExecute taint on an allocated device is due."""
        when, reasons = None, {}
        for r in _results(claim):
            ident = (r.get("driver", ""), r.get("pool", ""), r.get("device", ""))
            for taint, rule in self._device_taints(rules, *ident):
                seconds = toleration_seconds(taint, r.get("tolerations") or [])
                if seconds is None:
                    continue
                at = self._added(ident, taint) + seconds
                when = at if when is None else min(when, at)
                if rule is not None:
                    reasons[rule["metadata"]["uid"]] = rule["metadata"]["name"]
        return None if when is None else Eviction(when, frozenset(reasons), frozenset(reasons.values()))

    def pod_eviction(self, pod: dict, rules: list[dict] | None = None) -> Eviction | None:
        """The earliest eviction over the allocated claims reserved for this
        scheduled pod (or its PodGroup); an unscheduled pod is never evicted. `rules`: a
        simulation's, instead of the informer's."""
        if not pod["spec"].get("nodeName"):
            return None
        md = pod["metadata"]
        found = []
        for name in claim_names(pod):
            claim = self.claims.get(f"{md['namespace']}/{name}")
            if claim is not None and reserved_for_pod(claim, pod):
                found.append(self.claim_eviction(claim, rules))
        found = [e for e in found if e is not None]
        if not found:
            return None
        return Eviction(min(e.when for e in found), frozenset().union(*(e.rules for e in found)),
                        frozenset().union(*(e.names for e in found)))

    # -- work --------------------------------------------------------------

    async def sync(self, key) -> None:
        kind, name = key
        if kind == "pod":
            await self._sync_pod(name)
        else:
            await self._sync_rule(name)

    async def _sync_pod(self, key: str) -> None:
        pod = self.pods.get(key)
        if pod is None or pod["metadata"].get("deletionTimestamp") or pod["metadata"]["uid"] in self._deleting \
                or pod_is_terminal(pod):
            self._scheduled.discard(key)
            return
        e = self.pod_eviction(pod)
        if e is None:
            if key in self._scheduled:
                self._scheduled.discard(key)
                await self.recorder.emit(pod, "Normal", "DeviceTaintManagerEviction", "Cancelling deletion")
            return
        self._scheduled.add(key)
        for name in e.names:
            self.queue.add(("rule", name))
        wait = e.when - self.clock.now()
        if wait > 0:
            self.queue.add_after(("pod", key), wait)
            return
        if await self._evict(pod):
            for uid in e.rules:
                self._evicted.setdefault(uid, set()).add(pod["metadata"]["uid"])
            for name in e.names:
                self.queue.add_after(("rule", name), self.rule_status_period)

    async def _evict(self, pod: dict) -> bool:
        """Condition, event, delete; False if the pod was already gone."""
        md = pod["metadata"]
        ns, name = md["namespace"], md["name"]
        old = find_condition((pod.get("status") or {}).get("conditions"), "DisruptionTarget")
        cond = {"type": "DisruptionTarget", "status": "True", "reason": REASON, "message": MESSAGE,
                "lastTransitionTime": transition_time(old, "True", self.clock.rfc3339())}
        self._deleting.add(md["uid"])
        try:
            await self.recorder.emit(pod, "Normal", "DeviceTaintManagerEviction", "Marking for deletion")
            await self.pods_api.patch(name, {"status": {"conditions": [cond]}}, SMP, namespace=ns, subresource="status")
            await self.pods_api.delete(name, ns, preconditions={"uid": md["uid"]})
        except APIError as e:
            self._deleting.discard(md["uid"])
            if e.code not in (404, 409):
                raise
            return False
        self._scheduled.discard(key_of(pod))
        return True

    # -- DeviceTaintRule status ------------------------------------------

    def _pending(self, rule: dict, rules: list[dict] | None = None) -> tuple[int, int]:
        """Pods (and their namespaces) whose eviction this rule is among the reasons for: only
        consumers of the claims on devices it selects can be. `rules`: a simulation's."""
        uid = rule["metadata"]["uid"]
        keys = dict.fromkeys(k for c in self._rule_claims(rule) for k in self._consumers(c))
        pods, namespaces = 0, set()
        for key in keys:
            pod = self.pods.get(key)
            if pod is None or pod["metadata"].get("deletionTimestamp") or not pod["spec"].get("resourceClaims"):
                continue
            e = self.pod_eviction(pod, rules)
            if e is not None and uid in e.rules:
                pods += 1
                namespaces.add(pod["metadata"]["namespace"])
        return pods, len(namespaces)

    def _selected(self, rule: dict) -> tuple[int, int]:
        """Published devices (latest generations) and allocated devices the rule selects."""
        published = 0
        for (driver, pool), slices in self._pools.items():
            gen = max(int((s["spec"].get("pool") or {}).get("generation") or 0) for s in slices.values())
            for s in slices.values():
                if int((s["spec"].get("pool") or {}).get("generation") or 0) == gen:
                    published += sum(rule_selects(rule, driver, pool, d["name"]) for d in s["spec"].get("devices") or [])
        allocated = sum(rule_selects(rule, r.get("driver", ""), r.get("pool", ""), r.get("device", ""))
                        for c in self._rule_claims(rule) for r in _results(c))
        return published, allocated

    def rule_condition(self, rule: dict) -> dict:
        """EvictionInProgress as upstream words it (without lastTransitionTime)."""
        uid = rule["metadata"]["uid"]
        effect = (rule["spec"].get("taint") or {}).get("effect")
        cond = {"type": CONDITION, "status": "False", "reason": f"Effect{effect}", "message": "",
                "observedGeneration": rule["metadata"].get("generation", 1)}
        if effect == "NoExecute":
            pods, namespaces = self._pending(rule)
            if pods:
                cond.update(status="True", reason="PodsPendingEviction", message=(
                    _plural(pods, "1 pod needs", "%d pods need") + " to be evicted in "
                    + _plural(namespaces, "1 namespace.", "%d different namespaces.")))
            else:
                cond["reason"] = "Completed" if self._evicted.get(uid) else "NotStarted"
        elif effect == "None":
            # upstream's simulation evaluates this rule alone, as NoExecute: whether it is among a
            # pod's reasons does not depend on the other rules
            as_noexec = {**rule, "spec": {**rule["spec"], "taint": {**rule["spec"]["taint"], "effect": "NoExecute"}}}
            pods, namespaces = self._pending(as_noexec, [as_noexec])
            published, allocated = self._selected(rule)
            cond["reason"] = "NoEffect"
            cond["message"] = (
                _plural(published, "1 published device selected. ", "%d published devices selected. ")
                + _plural(allocated, "1 allocated device selected. ", "%d allocated devices selected. ")
                + _plural(pods, "1 pod would be evicted in ", "%d pods would be evicted in ")
                + _plural(namespaces, "1 namespace ", "%d different namespaces ")
                + "if the effect was NoExecute. This information will not be updated again. "
                  "Recreate the DeviceTaintRule to trigger an update.")
        else:
            cond.update(reason="OtherEffect", message="Eviction only happens for the NoExecute effect.")
        if evicted := len(self._evicted.get(uid, ())):
            cond["message"] = (cond["message"] + " " if cond["message"] else "") + _plural(
                evicted, "1 pod ", "%d pods ") + "evicted since starting the controller."
        return cond

    async def _sync_rule(self, name: str) -> None:
        rule = self.rules.get(name)
        if rule is None:
            return
        status = rule.get("status") or {}
        old = find_condition(status.get("conditions"), CONDITION)
        gen = rule["metadata"].get("generation", 1)
        if old is not None and old.get("observedGeneration") == gen:
            if (rule["spec"].get("taint") or {}).get("effect") == "None":
                return
            since = self.clock.now() - parse_time(old["lastTransitionTime"])
            if since < self.rule_status_period:
                self.queue.add_after(("rule", name), self.rule_status_period - since)
                return
        cond = self.rule_condition(rule)
        if old is not None and {k: v for k, v in old.items() if k != "lastTransitionTime"} == cond:
            return
        cond["lastTransitionTime"] = self.clock.rfc3339()
        others = remove_condition(status.get("conditions"), CONDITION)
        try:
            await self.rules_api.update({**rule, "status": {**status, "conditions": others + [cond]}},
                                        subresource="status")
        except APIError as e:
            if e.code != 404:
                raise
        if cond["status"] == "True":
            self.queue.add_after(("rule", name), self.rule_status_period)


def _results(claim: dict) -> list[dict]:
    alloc = (claim.get("status") or {}).get("allocation") or {}
    return (alloc.get("devices") or {}).get("results") or []


def _allocated_devices(claim: dict) -> tuple[str, ...] | None:
    """CLAIM_DEVICE_INDEX's values for a claim: the selector keys of each allocated device."""
    results = _results(claim)
    if not results:
        return None
    keys: dict[str, None] = {}
    for r in results:
        keys.update(dict.fromkeys(selector_keys(r.get("driver", ""), r.get("pool", ""), r.get("device", ""))))
    return tuple(keys)

