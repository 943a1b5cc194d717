"""LimitRanger: the namespace's LimitRanges give containers their default
requests and limits (recorded in the `kubernetes.io/limit-ranger` annotation)
and bound what pods and claims may ask for (min, max, maxLimitRequestRatio),
with upstream's messages. Pods are checked when created (their containers'
resources cannot change afterwards); claims on create and update."""

from __future__ import annotations

from fractions import Fraction

from ...machinery import errors
from ...machinery.podresources import QUANTITIES, pod_limits, pod_requests
from ...machinery.quantity import Quantity, parse_list
from .lookup import Listing, object_name

ANNOTATION = "kubernetes.io/limit-ranger"


def _merge(container: dict, item: dict, prefix: str) -> list[str]:
    """mergeContainerResources: fill missing limits from `default`, missing requests from `defaultRequest`."""
    res = container.setdefault("resources", {})
    notes = []
    set_limits = [k for k in (item.get("default") or {}) if k not in (res.get("limits") or {})]
    set_requests = [k for k in (item.get("defaultRequest") or {}) if k not in (res.get("requests") or {})]
    for k in set_limits:
        res.setdefault("limits", {})[k] = item["default"][k]
    for k in set_requests:
        res.setdefault("requests", {})[k] = item["defaultRequest"][k]
    name = container.get("name", "")
    if set_requests:
        notes.append(f"{', '.join(sorted(set_requests))} request for {prefix} {name}")
    if set_limits:
        notes.append(f"{', '.join(sorted(set_limits))} limit for {prefix} {name}")
    return notes


def _values(req: Quantity | None, lim: Quantity | None, enforced: Quantity) -> tuple[Fraction, Fraction, Fraction]:
    """requestLimitEnforcedValues, exactly (upstream compares milli-values)."""
    zero = Fraction(0)
    return (req.value if req else zero), (lim.value if lim else zero), enforced.value


def min_constraint(kind: str, name: str, enforced: Quantity, requests: dict, limits: dict) -> str:
    req, lim = requests.get(name), limits.get(name)
    r, li, e = _values(req, lim, enforced)
    if req is None:
        return f"minimum {name} usage per {kind} is {enforced}.  No request is specified"
    if r < e:
        return f"minimum {name} usage per {kind} is {enforced}, but request is {req}"
    if lim is not None and li < e:
        return f"minimum {name} usage per {kind} is {enforced}, but limit is {lim}"
    return ""


def max_constraint(kind: str, name: str, enforced: Quantity, requests: dict, limits: dict) -> str:
    req, lim = requests.get(name), limits.get(name)
    r, li, e = _values(req, lim, enforced)
    if lim is None:
        return f"maximum {name} usage per {kind} is {enforced}.  No limit is specified"
    if li > e:
        return f"maximum {name} usage per {kind} is {enforced}, but limit is {lim}"
    if req is not None and r > e:
        return f"maximum {name} usage per {kind} is {enforced}, but request is {req}"
    return ""


def max_request_constraint(kind: str, name: str, enforced: Quantity, requests: dict) -> str:
    """maxRequestConstraint: a claim's max holds its request (a claim's limits are no user input)."""
    req = requests.get(name)
    if req is None:
        return f"maximum {name} usage per {kind} is {enforced}.  No request is specified"
    if req.value > enforced.value:
        return f"maximum {name} usage per {kind} is {enforced}, but request is {req}"
    return ""


def ratio_constraint(kind: str, name: str, enforced: Quantity, requests: dict, limits: dict) -> str:
    req, lim = requests.get(name), limits.get(name)
    if req is None or req.value == 0:
        return f"{name} max limit to request ratio per {kind} is {enforced}, but no request is specified or request is 0"
    if lim is None or lim.value == 0:
        return f"{name} max limit to request ratio per {kind} is {enforced}, but no limit is specified or limit is 0"
    ratio = lim.value / req.value
    if ratio > enforced.value:
        return f"{name} max limit to request ratio per {kind} is {enforced}, but provided ratio is {float(ratio):f}"
    return ""


def check(kind: str, item: dict, requests: dict, limits: dict) -> list[str]:
    out = []
    for bag, fn in (("min", min_constraint), ("max", max_constraint), ("maxLimitRequestRatio", ratio_constraint)):
        for name, enforced in sorted(parse_list(item.get(bag)).items()):
            msg = fn(kind, name, enforced, requests, limits)
            if msg:
                out.append(msg)
    return out


class LimitRanger:
    #: the (group, plural)s each hook can act on (Admission skips the others without a call)
    mutates = frozenset({("", "pods")})
    validates = frozenset({("", "pods"), ("", "persistentvolumeclaims")})

    def __init__(self, rest) -> None:
        self.rest = rest
        #: every limit of a namespace's LimitRanges (one listing serves all the types a write checks)
        self._items = Listing(rest, "", "limitranges",
                              lambda lrs: [item for lr in lrs for item in (lr.get("spec") or {}).get("limits") or []])

    @staticmethod
    def _handles(a) -> bool:
        """Creates of pods and claims, updates of claims, and pods/resize (upstream's
        SupportsAttributes: a resize changes container resources), not of a pod being deleted."""
        if a.res.group:
            return False
        if a.res.plural == "pods" and a.subresource == "resize":
            return a.operation == "UPDATE" and not ((a.old or {}).get("metadata") or {}).get("deletionTimestamp")
        if a.subresource:
            return False
        if a.res.plural == "pods":
            return a.operation == "CREATE"
        return a.res.plural == "persistentvolumeclaims" and a.operation in ("CREATE", "UPDATE")

    def mutate(self, a) -> None:
        if not self._handles(a) or a.res.plural != "pods":
            return
        items = [i for i in self._items(a.namespace or a.obj["metadata"].get("namespace", "")) if i.get("type") == "Container"]
        if not items:
            return
        spec = a.obj.setdefault("spec", {})
        notes: list[str] = []
        for item in items:
            for c in spec.get("containers") or []:
                notes += _merge(c, item, "container")
            for c in spec.get("initContainers") or []:
                notes += _merge(c, item, "init container")
        if notes:
            ann = a.obj["metadata"].setdefault("annotations", {})
            ann[ANNOTATION] = "LimitRanger plugin set: " + "; ".join(notes)

    def validate(self, a) -> None:
        if not self._handles(a):
            return
        ns = a.namespace or a.obj["metadata"].get("namespace", "")
        problems: list[str] = []
        spec = a.obj.get("spec") or {}
        items = self._items(ns)
        if a.res.plural == "pods":
            for item in items:
                if item.get("type") != "Container":
                    continue
                for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
                    res = c.get("resources") or {}
                    problems += check("Container", item, parse_list(res.get("requests")), parse_list(res.get("limits")))
            for item in items:
                if item.get("type") == "Pod":
                    problems += check("Pod", item, pod_requests(spec, QUANTITIES), pod_limits(spec, QUANTITIES))
        else:
            requests = parse_list((spec.get("resources") or {}).get("requests"))
            for item in (i for i in items if i.get("type") == "PersistentVolumeClaim"):
                for name, enforced in sorted(parse_list(item.get("min")).items()):
                    msg = min_constraint("PersistentVolumeClaim", name, enforced, requests, {})
                    problems += [msg] if msg else []
                for name, enforced in sorted(parse_list(item.get("max")).items()):
                    msg = max_request_constraint("PersistentVolumeClaim", name, enforced, requests)
                    problems += [msg] if msg else []
        if problems:
            why = problems[0] if len(problems) == 1 else "[" + ", ".join(dict.fromkeys(problems)) + "]"
            raise errors.forbidden(a.res.group, a.res.plural, object_name(a), why)
