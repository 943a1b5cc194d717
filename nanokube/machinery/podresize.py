"""The resources a pod holds while it is resized in place (upstream's PodResourcesOptions
UseStatusResources in component-helpers' resource package): the scheduler and the quota
evaluator count a container at the larger of what its spec asks, what the node allocated to it
and what it runs with (status.containerStatuses[].allocatedResources and .resources), so a
resize in progress or pending holds the larger of old and new; once the node reports the resize
Infeasible, only what was allocated and runs counts (the spec's ask will not be granted)."""

from __future__ import annotations

from .quantity import QuantityError, parse_quantity

RESIZE_PENDING = "PodResizePending"
INFEASIBLE = "Infeasible"


def resize_infeasible(pod: dict) -> bool:
    """IsPodResizeInfeasible: the PodResizePending condition's reason is Infeasible."""
    for c in (pod.get("status") or {}).get("conditions") or ():
        if c.get("type") == RESIZE_PENDING:
            return c.get("reason") == INFEASIBLE
    return False


def _value(q) -> object:
    try:
        return parse_quantity(str(q))
    except QuantityError:
        return 0


def _max(*lists: dict | None) -> dict:
    """Each named resource at its largest in `lists` (the first list's quantity on a tie)."""
    out: dict = {}
    for rl in lists:
        for name, q in (rl or {}).items():
            if name not in out or _value(q) > _value(out[name]):
                out[name] = q
    return out


def _status_resources(pod: dict) -> dict[str, dict]:
    """The container statuses (init containers' too) that report resources, by name."""
    status = pod.get("status") or {}
    return {s.get("name"): s for key in ("containerStatuses", "initContainerStatuses")
            for s in status.get(key) or () if s.get("resources") is not None}


def resources_spec(pod: dict) -> dict:
    """The pod's spec with each container's and sidecar's requests and limits as upstream's
    determineContainerReqs and determineContainerLimits take them from its status; the spec
    itself (not a copy) when no container status reports resources, as for a pending pod."""
    spec = pod.get("spec") or {}
    statuses = _status_resources(pod)
    if not statuses:
        return spec
    infeasible = resize_infeasible(pod)
    if not infeasible and _settled(spec, statuses):
        return spec
    out = {**spec}
    for key in ("containers", "initContainers"):
        containers = spec.get(key)
        if not containers:
            continue
        rebuilt = []
        for c in containers:
            s = statuses.get(c.get("name"))
            if s is None or (key == "initContainers" and c.get("restartPolicy") != "Always"):
                rebuilt.append(c)
                continue
            res, running = c.get("resources") or {}, s.get("resources") or {}
            allocated = s.get("allocatedResources")
            if infeasible:
                requests, limits = _max(running.get("requests"), allocated), dict(running.get("limits") or {})
            else:
                requests = _max(res.get("requests"), running.get("requests"), allocated)
                limits = _max(res.get("limits"), running.get("limits"))
            rebuilt.append({**c, "resources": {**res, "requests": requests, "limits": limits}})
        out[key] = rebuilt
    return out


def _within(reported: dict | None, asked: dict | None) -> bool:
    """Whether every quantity `reported` is the one `asked` names (so the larger of both is `asked`)."""
    asked = asked or {}
    return all(asked.get(k) == q for k, q in (reported or {}).items())


def _settled(spec: dict, statuses: dict[str, dict]) -> bool:
    """Whether no container's status holds anything its spec does not ask for, as the same strings:
    the usual running pod, whose status repeats its spec (no quantity parsed)."""
    for key in ("containers", "initContainers"):
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
    statuses = _status_resources(pod)
    if not statuses:
        return ()
    return (resize_infeasible(pod),
            tuple((n, s.get("resources"), s.get("allocatedResources")) for n, s in statuses.items()))
