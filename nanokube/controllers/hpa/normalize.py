"""Turning the metrics' proposal into the replica count to set: stabilization
windows and rate limits, with behavior (policies) or without (the legacy
path), each reporting the AbleToScale/ScalingLimited reasons upstream writes.

State (past recommendations, past scale events) is per HPA and in memory, as
upstream's controller keeps it."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

UP_STABILIZED = ("ScaleUpStabilized", "recent recommendations were lower than current one, applying the lowest recent recommendation")
DOWN_STABILIZED = ("ScaleDownStabilized", "recent recommendations were higher than current one, applying the highest recent recommendation")
READY = ("ReadyForNewScale", "recommended size matches current size")
UP_LIMIT = ("ScaleUpLimit", "the desired replica count is increasing faster than the maximum scale rate")
DOWN_LIMIT = ("ScaleDownLimit", "the desired replica count is decreasing faster than the maximum scale rate")
TOO_MANY = ("TooManyReplicas", "the desired replica count is more than the maximum replica count")
TOO_FEW = ("TooFewReplicas", "the desired replica count is less than the minimum replica count")
IN_RANGE = ("DesiredWithinRange", "the desired count is within the acceptable range")


@dataclass
class Outcome:
    """The replica count, and the conditions the normalisation implies."""

    replicas: int
    able: tuple[str, str]
    limited: bool
    limit: tuple[str, str]


@dataclass
class History:
    """One HPA's past recommendations and scale events, as (time, value)."""

    recommendations: list[tuple[float, int]] = field(default_factory=list)
    ups: list[tuple[float, int]] = field(default_factory=list)
    downs: list[tuple[float, int]] = field(default_factory=list)
    seeded: bool = False

    def seed(self, now: float, current: int) -> None:
        """recordInitialRecommendation: an HPA's first sync counts the target's replicas as a
        recommendation, so that a controller that just started (or an HPA just created) does not
        scale down before a stabilization window of its own recommendations has passed."""
        if not self.seeded:
            self.seeded = True
            self.recommendations.append((now, current))

    def record_scale(self, now: float, old: int, new: int) -> None:
        if new > old:
            self.ups.append((now, new - old))
        elif new < old:
            self.downs.append((now, old - new))

    def _keep(self, now: float, horizon: float) -> None:
        self.recommendations = [r for r in self.recommendations if r[0] > now - horizon]
        self.ups = [e for e in self.ups if e[0] > now - horizon]
        self.downs = [e for e in self.downs if e[0] > now - horizon]


def _changed(events: list[tuple[float, int]], now: float, period: float) -> int:
    return sum(n for t, n in events if t > now - period)


def scale_up_limit(current: int, rules: dict, h: History, now: float) -> int:
    """calculateScaleUpLimitWithScalingRules; `current` when Disabled."""
    select = rules.get("selectPolicy") or "Max"
    if select == "Disabled":
        return current
    pick = max if select == "Max" else min
    result = None
    for p in rules.get("policies") or []:
        period = p["periodSeconds"]
        start = current - _changed(h.ups, now, period) + _changed(h.downs, now, period)
        proposed = start + p["value"] if p["type"] == "Pods" else math.ceil(start * (1 + p["value"] / 100))
        result = proposed if result is None else pick(result, proposed)
    return current if result is None else result


def scale_down_limit(current: int, rules: dict, h: History, now: float) -> int:
    """calculateScaleDownLimitWithBehaviors; `current` when Disabled."""
    select = rules.get("selectPolicy") or "Max"
    if select == "Disabled":
        return current
    pick = min if select == "Max" else max
    result = None
    for p in rules.get("policies") or []:
        period = p["periodSeconds"]
        start = current + _changed(h.downs, now, period) - _changed(h.ups, now, period)
        proposed = start - p["value"] if p["type"] == "Pods" else int(start * (1 - p["value"] / 100))
        result = proposed if result is None else pick(result, proposed)
    return current if result is None else result


def with_behavior(current: int, desired: int, lo: int, hi: int, behavior: dict, down_window: float,
                  h: History, now: float) -> Outcome:
    """normalizeDesiredReplicasWithBehaviors. A nil scaleDown window is the controller flag's."""
    up_rules, down_rules = behavior.get("scaleUp") or {}, behavior.get("scaleDown") or {}
    up_window = up_rules.get("stabilizationWindowSeconds") or 0
    dw = down_rules.get("stabilizationWindowSeconds")
    dw = down_window if dw is None else dw
    up = down = desired
    for t, rec in h.recommendations:
        if t > now - up_window:
            up = min(up, rec)
        if t > now - dw:
            down = max(down, rec)
    stabilized, able = current, READY
    if stabilized < up:
        stabilized = up
    if stabilized > down:
        stabilized = down
    if stabilized != desired:
        able = UP_STABILIZED if stabilized < desired else DOWN_STABILIZED
    periods = [p["periodSeconds"] for r in (up_rules, down_rules) for p in r.get("policies") or []]
    h.recommendations.append((now, desired))
    h._keep(now, max([up_window, dw, *periods]))
    out, limit = stabilized, IN_RANGE
    if stabilized > current:
        cap, limit = hi, TOO_MANY
        up_limit = max(scale_up_limit(current, up_rules, h, now), current)
        if cap > up_limit:
            cap, limit = up_limit, UP_LIMIT
        out = min(stabilized, cap)
    elif stabilized < current:
        floor, limit = lo, TOO_FEW
        down_limit = min(scale_down_limit(current, down_rules, h, now), current)
        if floor < down_limit:
            floor, limit = down_limit, DOWN_LIMIT
        out = max(stabilized, floor)
    if out == stabilized:
        limit = IN_RANGE
    return Outcome(out, able, out != stabilized, limit)


def legacy(current: int, desired: int, lo: int, hi: int, down_window: float, h: History, now: float) -> Outcome:
    """normalizeDesiredReplicas: highest recommendation over the downscale
    window, then [min, max] with scale-up capped at max(2×current, 4)."""
    stabilized = max([desired] + [r for t, r in h.recommendations if t > now - down_window])
    h.recommendations.append((now, desired))
    h._keep(now, down_window)
    able = READY if stabilized == desired else DOWN_STABILIZED
    up_cap = max(2 * current, 4)
    if stabilized < lo:
        out, limit = lo, TOO_FEW
    elif stabilized > min(hi, up_cap):
        out, limit = (up_cap, UP_LIMIT) if hi > up_cap else (hi, TOO_MANY)
    else:
        out, limit = stabilized, IN_RANGE
    return Outcome(out, able, out != stabilized, limit)
