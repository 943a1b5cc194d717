"""Scaling a Deployment mid-rollout, as upstream's deployment controller
does: a change of `spec.replicas` that the active ReplicaSets have not seen
(their desired-replicas annotation differs) is spread over them in
proportion to their sizes, instead of rolling on."""

from __future__ import annotations

DESIRED = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS = "deployment.kubernetes.io/max-replicas"


def _replicas(rs: dict) -> int:
    return rs["spec"].get("replicas", 1)


def _annotation(rs: dict, key: str) -> int | None:
    try:
        return int((rs["metadata"].get("annotations") or {})[key])
    except (KeyError, ValueError):
        return None


def _active(rss: list[dict]) -> list[dict]:
    return [r for r in rss if _replicas(r) > 0]


def is_scaling_event(d: dict, all_rs: list[dict]) -> bool:
    want = d["spec"].get("replicas", 1)
    return any((v := _annotation(r, DESIRED)) is not None and v != want for r in _active(all_rs))


def _created(rs: dict) -> str:
    return rs["metadata"].get("creationTimestamp") or ""


def _fraction(rs: dict, d: dict, max_surge: int) -> int:
    """How far this ReplicaSet moves when the Deployment's ceiling changes
    from what the ReplicaSet last saw (max-replicas) to replicas+maxSurge."""
    want = d["spec"].get("replicas", 1)
    if want == 0:
        return -_replicas(rs)
    before = _annotation(rs, MAX_REPLICAS) or (d.get("status") or {}).get("replicas", 0)
    if not before:
        return 0
    return int(_replicas(rs) * (want + max_surge) / before + 0.5) - _replicas(rs)


def scaled_sizes(d: dict, new_rs: dict | None, old: list[dict], max_surge: int,
                 saturated: bool, rolling: bool) -> dict[str, int]:
    """Target replicas by ReplicaSet name for the ReplicaSets this scaling touches."""
    want = d["spec"].get("replicas", 1)
    everything = ([new_rs] if new_rs else []) + old
    active = _active(everything)
    if len(active) <= 1:
        target = active[0] if active else (new_rs or max(old, key=_created, default=None))
        return {} if target is None else {target["metadata"]["name"]: want}
    if saturated:
        return {r["metadata"]["name"]: 0 for r in _active(old)}
    if not rolling:
        return {}
    to_add = (want + max_surge if want > 0 else 0) - sum(_replicas(r) for r in active)
    if to_add == 0:
        return {r["metadata"]["name"]: _replicas(r) for r in active}
    # bigger first; on ties the newer one when growing, the older one when shrinking
    active.sort(key=_created, reverse=to_add > 0)
    active.sort(key=_replicas, reverse=True)
    sizes, added = {}, 0
    for rs in active:
        allowed = to_add - added
        fraction = _fraction(rs, d, max_surge) if allowed else 0
        step = min(fraction, allowed) if to_add > 0 else max(fraction, allowed)
        sizes[rs["metadata"]["name"]] = _replicas(rs) + step
        added += step
    first = active[0]["metadata"]["name"]
    sizes[first] = max(0, sizes[first] + to_add - added)
    return sizes
