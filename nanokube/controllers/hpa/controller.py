"""The HorizontalPodAutoscaler controller: every sync period it reads each
HPA's scale target and metrics, normalises the proposal (stabilization, rate
limits, bounds), rescales the target and writes status, conditions and
events, following upstream's reconcileAutoscaler including the 1.37
scale-to-zero state machine (spec §3.2)."""

from __future__ import annotations

import asyncio
import logging

from prometheus_client import CollectorRegistry

from ...machinery.conditions import find_condition, set_condition
from ...machinery.errors import APIError
from ...machinery.featuregates import enabled
from ...client.informer import key_of
from ...client.record import CoreEventRecorder
from ...machinery.quantity import parse_quantity
from ...machinery.selectors import matches_labels, parse_label_selector
from ..base import Controller
from . import monitor, normalize
from .metrics_client import RESTMetricsClient
from . import replica_calculator as calc
from .sources import SourceError, Target, propose

log = logging.getLogger(__name__)

SCALED_TO_ZERO = ("True", "ScaledToZero", "the HPA controller scaled the workload to zero")
NOT_SCALED_TO_ZERO = ("False", "NotScaledToZero", "the HPA controller did not scale the workload to zero")
_ZERO_KINDS = ("Object", "External")


def _error_label(e: SourceError) -> str:
    """Only an unknown metric type is the spec's fault (errSpec); a metric that cannot be read is internal."""
    return monitor.SPEC if e.reason == "InvalidMetricSourceType" else monitor.INTERNAL


def _tolerances(spec: dict, default: float) -> calc.Tolerances:
    """Per-direction tolerance from behavior (HPAConfigurableTolerance), else the flag."""
    b = spec.get("behavior") or {}

    def one(rules: dict | None) -> float:
        t = (rules or {}).get("tolerance")
        return default if t is None else float(parse_quantity(str(t)))
    return calc.Tolerances(down=one(b.get("scaleDown")), up=one(b.get("scaleUp")))


class HPAController(Controller):
    name = "horizontal-pod-autoscaler-controller"
    aliases = ("horizontalpodautoscaling",)
    queue_name = "horizontalpodautoscaler"
    #: its Events' source component (upstream's recorder keeps the controller's older name)
    event_source = "horizontal-pod-autoscaler"

    def __init__(self, client, *, sync_period: float = 15.0, downscale_window: float = 300.0, tolerance: float = 0.1,
                 cpu_initialization_period: float = 300.0, initial_readiness_delay: float = 30.0,
                 metrics=None, metrics_api_clients: tuple | None = None, **kw):
        """`metrics`: kube-controller-manager's ControllerMetrics, whose `hpa` this controller updates.
        `metrics_api_clients`: the clients the resource, custom and external metrics APIs are read over,
        by default `client` (upstream builds a clientset for each from the HPA's client config: each
        a rate limit of its own)."""
        super().__init__(client, **kw)
        self.monitor = metrics.hpa if metrics is not None else monitor.HPAMetrics(CollectorRegistry())
        self.sync_period = sync_period
        self.downscale_window = downscale_window
        self.tolerance = tolerance
        self.cpu_init = cpu_initialization_period
        self.readiness_delay = initial_readiness_delay
        #: the metrics APIs, read through the API server as upstream's REST metrics client reads them
        self.metrics_client = RESTMetricsClient(client, self.clock, sync_period, metrics_api_clients)
        self.hpas = client.resource("autoscaling", "v2", "horizontalpodautoscalers")
        self.recorder = CoreEventRecorder(client, self.event_source, self.clock)
        self.pods = client.resource("", "v1", "pods")
        self.inf = self.informer_factory.informer(self.hpas)
        self.inf.add_handlers(on_add=self._added, on_update=self._spec_changed, on_delete=self._forget)
        self.history: dict[str, normalize.History] = {}
        #: each HPA's target's selector as its last sync read it (upstream's hpaSelectors): pods two
        #: HPAs select are an AmbiguousSelector
        self.selectors: dict[str, list] = {}
        #: the HPAs the controller has seen added and not deleted (num_horizontal_pod_autoscalers)
        self.tracked: set[str] = set()

    def informers(self):
        return [self.inf]

    def _enqueue(self, hpa: dict) -> None:
        self.queue.add(key_of(hpa))

    def _added(self, hpa: dict) -> None:
        if (key := key_of(hpa)) not in self.tracked:
            self.tracked.add(key)
            self.monitor.hpas.labels().inc()
        self._enqueue(hpa)

    def _spec_changed(self, old: dict, new: dict) -> None:
        """Status writes (ours) must not retrigger a sync; spec edits do."""
        if old.get("spec") != new.get("spec"):
            self._enqueue(new)

    def _forget(self, hpa: dict) -> None:
        self.history.pop(key_of(hpa), None)
        self.selectors.pop(key_of(hpa), None)
        if key_of(hpa) in self.tracked:
            self.tracked.discard(key_of(hpa))
            self.monitor.hpas.labels().dec()

    async def start(self) -> None:
        await super().start()
        self._tasks.append(asyncio.create_task(self._resync()))

    async def _resync(self) -> None:
        while True:
            await self.clock.sleep(self.sync_period)
            for hpa in self.inf.list():
                self._enqueue(hpa)

    async def sync(self, key: str) -> None:
        hpa = self.inf.get(key)
        if hpa is not None:
            await self.reconcile(hpa)

    # --- target -------------------------------------------------------------------

    async def _target(self, hpa: dict):
        ref = hpa["spec"]["scaleTargetRef"]
        api_version = ref.get("apiVersion") or "v1"
        group, _, version = api_version.rpartition("/")
        res = await self.client.mapping(group, ref.get("kind", ""))
        if res is None or "scale" not in res.subresources:
            raise LookupError(f'no matches for kind "{ref.get("kind")}" in group "{group}"')
        rc = self.client.resource(group, version if version in res.versions else res.versions[0], res.plural)
        return rc, await rc.get_scale(ref["name"], hpa["metadata"]["namespace"])

    async def _pods(self, namespace: str, selector: str) -> list[dict]:
        items, _ = await self.pods.list(namespace, label_selector=selector)
        return items

    # --- reconcile ----------------------------------------------------------------

    async def reconcile(self, hpa: dict) -> None:
        """One pass of reconcileAutoscaler for `hpa`; writes status and maybe rescales. Counted and
        timed by what it did and how it failed (the `horizontal_pod_autoscaler_controller_*` metrics)."""
        start, outcome = self.clock.monotonic(), (monitor.NONE, monitor.INTERNAL)
        try:
            outcome = await self._reconcile(hpa)
        finally:
            self.monitor.reconciled(*outcome, self.clock.monotonic() - start)

    async def _reconcile(self, hpa: dict) -> tuple[str, str]:
        """(action, error) labels of the pass."""
        key = key_of(hpa)
        spec, md = hpa["spec"], hpa["metadata"]
        now = self.clock.now()
        conds: dict[str, tuple[str, str, str]] = {}
        status = dict(hpa.get("status") or {})
        ref = spec["scaleTargetRef"]
        try:
            rc, scale = await self._target(hpa)
        except (APIError, LookupError) as e:
            msg = f"the HPA controller was unable to get the target's current scale: {getattr(e, 'message', e)}"
            conds["AbleToScale"] = ("False", "FailedGetScale", msg)
            await self._event(hpa, "Warning", "FailedGetScale", str(getattr(e, "message", e)))
            await self._write_status(hpa, status, conds)
            return monitor.NONE, monitor.INTERNAL
        conds["AbleToScale"] = ("True", "SucceededGetScale", "the HPA controller was able to get the target's current scale")
        current = scale["spec"].get("replicas", 0)
        self.history.setdefault(key, normalize.History()).seed(now, current)
        lo, hi = spec.get("minReplicas", 1), spec["maxReplicas"]
        metric_specs = spec.get("metrics") or []
        has_obj_or_ext = any(m.get("type") in _ZERO_KINDS for m in metric_specs)
        # HPAScaleToZero off: no ScaledToZero written, and one left from before wakes nothing (upstream
        # reads the gate each pass); minReplicas 0 is then only an HPA stored while it was on
        zero_gate = enabled("HPAScaleToZero")
        scaled_to_zero = zero_gate and (find_condition((hpa.get("status") or {}).get("conditions"), "ScaledToZero")
                                        or {}).get("status") == "True"
        can_wake = scaled_to_zero and has_obj_or_ext
        # the scale's spec, as upstream's setStatus: a target still rolling out (or a custom resource whose
        # status lags) reads as the replicas it was asked for; the per-pod averages divide by the status'
        status["currentReplicas"] = current
        # setStatus: the metrics this pass read, none where it read none (a paused target, one outside
        # [minReplicas, maxReplicas]), never an earlier pass's
        status["currentMetrics"] = None
        desired, reason, error = current, "", monitor.NONE
        # a target at zero stays paused unless the HPA scaled it there; then its metrics wake it, to at
        # least a minReplicas raised since (shouldComputeMetricsForZeroReplicas)
        waking = current == 0 and (can_wake or (lo != 0 and scaled_to_zero))
        if current == 0 and not waking:
            desired = 0
            conds["ScalingActive"] = ("False", "ScalingDisabled", "scaling is disabled since the replica count of the target is zero")
        elif not waking and current > hi:
            desired, reason = hi, "Current number of replicas above Spec.MaxReplicas"
        elif not waking and current < lo:
            desired, reason = lo, "Current number of replicas below Spec.MinReplicas"
        else:
            selector = scale["status"].get("selector") or ""
            if not selector:  # validateAndParseSelector: never every pod of the namespace
                await self._event(hpa, "Warning", "SelectorRequired", "selector is required")
                conds["ScalingActive"] = ("False", "InvalidSelector", "the HPA target's scale is missing a selector")
                await self._event(hpa, "Warning", "FailedComputeMetricsReplicas", "selector is required")
                status["currentMetrics"] = None
                await self._write_status(hpa, status, conds)
                return monitor.NONE, monitor.INTERNAL
            pods = await self._pods(md["namespace"], selector)
            if (others := self._controlling(key, selector, pods)) is not None:
                msg = f"pods by selector {selector} are controlled by multiple HPAs: [{' '.join(others)}]"
                await self._event(hpa, "Warning", "AmbiguousSelector", msg)
                conds["ScalingActive"] = ("False", "AmbiguousSelector", msg)
                await self._event(hpa, "Warning", "FailedComputeMetricsReplicas", msg)
                status["currentMetrics"] = None
                await self._write_status(hpa, status, conds)
                return monitor.NONE, monitor.INTERNAL
            target = Target(md["namespace"], current, scale["status"].get("replicas", 0), pods, selector)
            computed, error = await self._compute(hpa, metric_specs, target, conds, status)
            if computed is None:
                await self._write_status(hpa, status, conds)
                return monitor.NONE, error
            proposed, metric_name = computed
            if proposed > current:
                reason = f"{metric_name} above target"
            elif proposed < current:
                reason = "All metrics below target"
            h = self.history.setdefault(key, normalize.History())
            if spec.get("behavior") is not None:
                out = normalize.with_behavior(current, proposed, lo, hi, spec["behavior"], self.downscale_window, h, now)
            else:
                out = normalize.legacy(current, proposed, lo, hi, self.downscale_window, h, now)
            desired = out.replicas
            conds["AbleToScale"] = ("True", *out.able)
            conds["ScalingLimited"] = ("True" if out.limited else "False", *out.limit)
            if waking and lo != 0 and scaled_to_zero and desired < lo:
                desired, reason = lo, reason or "Current number of replicas below Spec.MinReplicas"
        if desired != current:
            try:
                await rc.update_scale(ref["name"], desired, namespace=md["namespace"])
            except APIError as e:
                conds["AbleToScale"] = ("False", "FailedUpdateScale", f"the HPA controller was unable to update the target scale: {e.message}")
                await self._event(hpa, "Warning", "FailedRescale", f"New size: {desired}; reason: {reason}; error: {e.message}")
                await self._write_status(hpa, status, conds)
                return monitor.NONE, monitor.INTERNAL
            if spec.get("behavior") is not None:  # storeScaleEvent: only the policies read them
                self.history.setdefault(key, normalize.History()).record_scale(now, current, desired)
            conds["AbleToScale"] = ("True", "SucceededRescale", f"the HPA controller was able to update the target scale to {desired}")
            if zero_gate:
                to_zero = current > 0 and desired == 0 and lo == 0 and has_obj_or_ext
                conds["ScaledToZero"] = SCALED_TO_ZERO if to_zero else NOT_SCALED_TO_ZERO
            await self._event(hpa, "Normal", "SuccessfulRescale", f"New size: {desired}; reason: {reason}")
            status["lastScaleTime"] = self.clock.rfc3339(now)
        status["desiredReplicas"] = desired
        self.monitor.desired_replicas.labels(md["name"], md["namespace"]).set(desired)
        await self._write_status(hpa, status, conds)
        return monitor.action(desired, current), error

    def _controlling(self, key: str, selector: str, pods: list[dict]) -> list[str] | None:
        """validateAndParseSelector's check: the HPAs (`key`'s included, its selector kept now) whose
        targets select any of `pods`, sorted, where they are more than one; else None."""
        try:
            self.selectors[key] = parse_label_selector(selector)
        except ValueError:
            return None
        namespace = key.split("/", 1)[0]
        hpas = sorted(k for k, reqs in self.selectors.items() if k.split("/", 1)[0] == namespace and
                      any(matches_labels(reqs, p["metadata"].get("labels")) for p in pods))
        return hpas if len(hpas) > 1 else None

    async def _compute(self, hpa: dict, metric_specs: list[dict], target: Target, conds: dict, status: dict):
        """computeReplicasForMetrics: the largest proposal and its metric name, or None (with
        ScalingActive False) when metrics failed such that acting is unsafe; with the error label of
        the first metric that failed (`none` if none did)."""
        tol = _tolerances(hpa["spec"], self.tolerance)
        timing = calc.Timing(self.clock.now(), self.cpu_init, self.readiness_delay)
        best, best_name, statuses, failure, failures = 0, "", [], None, 0
        recorded = (hpa.get("status") or {}).get("currentReplicas") or 0
        for m in metric_specs:
            start = self.clock.monotonic()
            try:
                p = await propose(self.metrics_client, m, target, tol, timing)
            except SourceError as e:
                self.monitor.computed(monitor.NONE, _error_label(e), self.clock.monotonic() - start, m.get("type", ""))
                failures += 1
                failure = failure or e
                await self._event(hpa, "Warning", e.reason, e.detail)
                statuses.append({"type": ""})
                continue
            self.monitor.computed(monitor.action(p.replicas, recorded), monitor.NONE, self.clock.monotonic() - start,
                                  m["type"])
            statuses.append(p.status)
            if best == 0 or p.replicas > best:
                best, best_name = p.replicas, p.name
        # a metric that failed keeps its place as {"type": ""}, the zero MetricStatus upstream leaves there:
        # kubectl pairs spec.metrics[i] with status.currentMetrics[i]
        status["currentMetrics"] = statuses or None
        if failure is not None and (failures >= len(metric_specs) or best < target.spec_replicas):
            conds["ScalingActive"] = ("False", failure.reason, failure.condition_message)
            await self._event(hpa, "Warning", "FailedComputeMetricsReplicas",
                              f"invalid metrics ({failures} invalid out of {len(metric_specs)}), first error is: {failure}")
            return None, _error_label(failure)
        conds["ScalingActive"] = ("True", "ValidMetricFound", f"the HPA was able to successfully calculate a replica count from {best_name}")
        # a metric failed but the others scale: the pass still reports its error
        return (best, best_name), monitor.NONE if failure is None else _error_label(failure)

    # --- writes -------------------------------------------------------------------

    async def _write_status(self, hpa: dict, status: dict, conds: dict[str, tuple[str, str, str]]) -> None:
        now = self.clock.rfc3339()
        merged = (hpa.get("status") or {}).get("conditions")
        for typ, (st, reason, msg) in conds.items():
            merged = set_condition(merged, {"type": typ, "status": st, "lastTransitionTime": now, "reason": reason,
                                            "message": msg})
        order = ["AbleToScale", "ScalingActive", "ScalingLimited", "ScaledToZero"]
        status["conditions"] = sorted(merged or [], key=lambda c: order.index(c["type"]) if c["type"] in order else 9)
        status["observedGeneration"] = hpa["metadata"].get("generation")
        status.setdefault("desiredReplicas", status.get("currentReplicas", 0))
        status = {k: v for k, v in status.items() if v is not None}
        # (the server answers a status without currentMetrics with currentMetrics: null, as upstream's
        # field without omitempty: null is no change, or every sync rewrites the same status)
        if status == {k: v for k, v in (hpa.get("status") or {}).items() if v is not None}:
            return
        body = {**hpa, "status": status}
        try:
            await self.hpas.update(body, subresource="status")
        except APIError as e:
            if e.code not in (404, 409):
                raise
            log.info("hpa %s: status not written: %s", key_of(hpa), e.message)

    async def _event(self, hpa: dict, type_: str, reason: str, message: str) -> None:
        """Through client-go's correlator, as upstream's recorder: a warning repeated each sync is
        one Event with a growing count, not a new Event per sync."""
        await self.recorder.emit({**hpa, "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler"},
                                 type_, reason, message)
