"""The resources a pod holds while it is resized in place (upstream's PodResourcesOptions
UseStatusResources in component-helpers' resource package). A resize is allocated and actuated
for the whole pod at once, so the scheduler and the quota evaluator count, for each resource, the
largest of three pod totals (kubernetes#140047): what the spec asks, what the node allocated
(status.containerStatuses[].allocatedResources) and what runs (.resources); a container the
status does not report counts its spec in each. Once the node reports the resize Infeasible, the
spec's total drops out (its ask will not be granted). With InPlacePodLevelResourcesVerticalScaling
(beta, on since 1.36) the pod-level status (status.allocatedResources and status.resources), when
the node writes it, stands for the containers' allocated and running totals, and pod-level
requests and limits are likewise the largest of spec and status (overhead taken out).

`resources_spec` gives a spec whose containers carry, per resource, the amounts of the total that
wins, so podresources' PodRequests and PodLimits of it are those maxima in any caller's numbers."""

from __future__ import annotations

from .conditions import find_condition
from .podresources import POD_LEVEL, QUANTITIES, aggregate
from .quantity import Quantity, QuantityError, parse, parse_list

RESIZE_PENDING = "PodResizePending"
INFEASIBLE = "Infeasible"
_HUGEPAGES = "hugepages-"
_KEYS = ("containers", "initContainers")


def resize_infeasible(pod: dict) -> bool:
    """IsPodResizeInfeasible: the PodResizePending condition's reason is Infeasible."""
    c = find_condition((pod.get("status") or {}).get("conditions"), RESIZE_PENDING)
    return c is not None and c.get("reason") == INFEASIBLE


def _statuses(pod: dict) -> dict[str, dict]:
    """The container statuses (init containers' too), by name."""
    status = pod.get("status") or {}
    return {s.get("name"): s for key in ("containerStatuses", "initContainerStatuses")
            for s in status.get(key) or ()}


def _allocated(c: dict, s: dict | None, infeasible: bool) -> dict | None:
    """containerAllocatedRequests: the status' allocation, else the spec's ask (nothing once Infeasible)."""
    if s is not None and s.get("allocatedResources") is not None:
        return s["allocatedResources"]
    return None if infeasible else (c.get("resources") or {}).get("requests")


def _actuated(bag: str):
    """containerActuatedRequests / containerActuatedLimits: what the container runs with, else
    (requests) its allocation, else the spec (nothing once Infeasible)."""
    def view(c: dict, s: dict | None, infeasible: bool) -> dict | None:
        running = (s or {}).get("resources")
        if running is not None and running.get(bag) is not None:
            return running[bag]
        if bag == "requests" and s is not None and s.get("allocatedResources") is not None:
            return s["allocatedResources"]
        return None if infeasible else (c.get("resources") or {}).get(bag)
    return view


def _spec_view(bag: str):
    def view(c: dict, s: dict | None, infeasible: bool) -> dict | None:
        return (c.get("resources") or {}).get(bag)
    return view


def _containers_view(spec: dict, statuses: dict, infeasible: bool, per_container) -> dict[str, list]:
    """Each container's list under one view, by spec key."""
    return {key: [per_container(c, statuses.get(c.get("name")), infeasible) or {} for c in spec.get(key) or ()]
            for key in _KEYS}


def _spec_views(spec: dict, bag: str) -> dict:
    """The spec's own containers view, marked so that `_winning` can keep the spec when it wins."""
    return {**_containers_view(spec, {}, False, _spec_view(bag)), "spec": True}


def _total(spec: dict, view: dict[str, list]) -> dict[str, Quantity]:
    """AggregateContainerRequests of a view: the containers' lists added up, init containers as floors."""
    shaped = {key: [{**c, "resources": {"requests": rl}} for c, rl in zip(spec.get(key) or (), view[key])]
              for key in _KEYS}
    return aggregate({**spec, **shaped}, "requests", QUANTITIES)


def _is_containers(view) -> bool:
    """Whether a view is each container's list (by spec key) rather than one pod total."""
    return isinstance(view.get("containers"), list) and isinstance(view.get("initContainers"), list)


def _winning(spec: dict, views: list[dict]) -> dict[str, list] | None:
    """Per resource, the view whose pod total is the largest (the first on a tie), and the
    containers' lists that make those totals: each container's amount of a resource is its winning
    view's. A view is a containers view or a pod total (a resource list); a pod total that wins
    puts its amount on the first container and an explicit zero on the others, so the sum is the
    total and no default for a missing request is added. None when the first view wins throughout
    and is the spec's own."""
    totals = [_total(spec, v) if _is_containers(v) else parse_list(v) for v in views]
    best: dict[str, int] = {}
    for i, t in enumerate(totals):
        for name, q in t.items():
            if name not in best or q.value > totals[best[name]][name].value:
                best[name] = i
    if all(i == 0 for i in best.values()) and _is_containers(views[0]) and views[0].get("spec"):
        return None
    out = {key: [{} for _ in spec.get(key) or ()] for key in _KEYS}
    for key in _KEYS:
        for n, chosen in enumerate(out[key]):
            for name, i in best.items():
                v = views[i]
                if _is_containers(v):
                    if name in v[key][n]:
                        chosen[name] = v[key][n][name]
                else:
                    chosen[name] = v[name] if (key, n) == ("containers", 0) else "0"
    return out


def _less_overhead(rl: dict | None, overhead: dict | None) -> dict | None:
    """A pod-level status list without the pod's overhead (never below zero)."""
    if rl is None or not overhead:
        return rl
    minus = parse_list(overhead)
    out = {}
    for name, q in rl.items():
        if name in minus:
            try:
                have = parse(str(q))
            except QuantityError:
                out[name] = q
                continue
            out[name] = str(Quantity(max(have.value - minus[name].value, 0), have.format))
        else:
            out[name] = q
    return out


def _max_list(*lists: dict | None) -> dict:
    """Each named resource at its largest in `lists` (the first list's quantity on a tie)."""
    out: dict = {}
    values: dict = {}
    for rl in lists:
        for name, q in parse_list(rl).items():
            if name not in values or q.value > values[name]:
                out[name], values[name] = (rl or {})[name], q.value
    return out


def _supported(rl: dict | None) -> bool:
    return any(n in POD_LEVEL or n.startswith(_HUGEPAGES) for n in rl or ())


def _pod_level(spec: dict, pstatus: dict, infeasible: bool) -> dict | None:
    """Pod-level requests and limits as upstream's PodRequests and PodLimits take them with the
    pod-level status: the larger of spec and status, the status less overhead; None when unchanged."""
    res = spec.get("resources") or {}
    running = pstatus.get("resources")
    allocated = pstatus.get("allocatedResources")
    out = dict(res)
    overhead = spec.get("overhead")
    if _supported(res.get("requests")) and (running is not None or allocated is not None):
        out["requests"] = _max_list(None if infeasible else res.get("requests"),
                                    _less_overhead((running or {}).get("requests"), overhead),
                                    _less_overhead(allocated, overhead))
    if (_supported(res.get("requests")) or _supported(res.get("limits"))) and running is not None:
        out["limits"] = _max_list(None if infeasible else res.get("limits"),
                                  _less_overhead(running.get("limits"), overhead))
    return out if out != res else None


def resources_spec(pod: dict) -> dict:
    """The pod's spec with its containers' requests and limits (and pod-level ones) as upstream's
    PodRequests and PodLimits take them with UseStatusResources; the spec itself (not a copy)
    when the status reports nothing that changes them, as for a pending pod."""
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    statuses = _statuses(pod)
    infeasible = resize_infeasible(pod)
    pod_allocated, pod_running = status.get("allocatedResources"), status.get("resources")
    if not infeasible and pod_allocated is None and pod_running is None and _settled(spec, statuses):
        return spec
    if pod_allocated is not None and (pod_running or {}).get("requests") is not None:
        request_views = [pod_running["requests"], pod_allocated]
    else:
        request_views = [_containers_view(spec, statuses, infeasible, _actuated("requests")),
                         _containers_view(spec, statuses, infeasible, _allocated)]
    if (pod_running or {}).get("limits") is not None:
        limit_views = [pod_running["limits"]]
    else:
        limit_views = [_containers_view(spec, statuses, infeasible, _actuated("limits"))]
    if not infeasible:
        request_views.insert(0, _spec_views(spec, "requests"))
        limit_views.insert(0, _spec_views(spec, "limits"))
    requests, limits = _winning(spec, request_views), _winning(spec, limit_views)
    pod_level = _pod_level(spec, status, infeasible)
    if requests is None and limits is None and pod_level is None:
        return spec
    out = {**spec}
    for key in _KEYS:
        if not spec.get(key):
            continue
        rebuilt = []
        for n, c in enumerate(spec[key]):
            res = dict(c.get("resources") or {})
            for bag, chosen in (("requests", requests), ("limits", limits)):
                if chosen is not None:
                    res[bag] = chosen[key][n]
            rebuilt.append({**c, "resources": res})
        out[key] = rebuilt
    if pod_level is not None:
        out["resources"] = pod_level
    return out


def _within(reported: dict | None, asked: dict | None) -> bool:
    """Whether every quantity `reported` is the one `asked` names."""
    asked = asked or {}
    return all(asked.get(k) == q for k, q in (reported or {}).items())


def _settled(spec: dict, statuses: dict[str, dict]) -> bool:
    """Whether no container's status holds anything its spec does not ask for, as the same strings:
    the usual running pod, whose status repeats its spec (no quantity parsed)."""
    for key in _KEYS:
        for c in spec.get(key) or ():
            s = statuses.get(c.get("name"))
            if s is None:
                continue
            res, running = c.get("resources") or {}, s.get("resources") or {}
            requests, limits, allocated = res.get("requests"), res.get("limits"), s.get("allocatedResources")
            if allocated == requests and running.get("requests") == requests and running.get("limits") == limits:
                continue  # the status repeats the spec: one comparison of each list
            if not (_within(allocated, requests) and _within(running.get("requests"), requests)
                    and _within(running.get("limits"), limits)):
                return False
    return True


def resize_parts(pod: dict) -> tuple:
    """What `resources_spec` reads of a pod's status, to tell cheaply whether a status write
    changed it."""
    status = pod.get("status") or {}
    statuses = _statuses(pod)
    if not statuses and status.get("resources") is None and status.get("allocatedResources") is None:
        return ()
    return (resize_infeasible(pod), status.get("resources"), status.get("allocatedResources"),
            tuple((n, s.get("resources"), s.get("allocatedResources")) for n, s in statuses.items()))
