"""Scheduling rules the scheduler, controllers and node agents share (upstream's
component-helpers/scheduling): tolerations against taints,
node selector terms against a node's labels and fields, and host ports."""

from __future__ import annotations


def tolerates(toleration: dict, taint: dict) -> bool:
    """Toleration.ToleratesTaint: effect (empty = all), key (empty with
    Exists = all) and value by operator; Gt/Lt compare integers."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    op = toleration.get("operator") or "Equal"
    if key and key != taint.get("key"):
        return False
    if op == "Exists":
        return True
    if not key:
        return False
    if op == "Equal":
        return (toleration.get("value") or "") == (taint.get("value") or "")
    if op in ("Gt", "Lt"):
        try:
            tv, nv = int(toleration.get("value") or ""), int(taint.get("value") or "")
        except ValueError:
            return False
        return nv > tv if op == "Gt" else nv < tv
    return False


def untolerated(taints: list, tolerations: list, effects: tuple[str, ...]) -> dict | None:
    """The first taint with one of `effects` that no toleration tolerates."""
    for t in taints:
        if t.get("effect") in effects and not any(tolerates(tol, t) for tol in tolerations):
            return t
    return None


def _requirement(expr: dict, value: str | None) -> bool:
    op, values = expr.get("operator"), expr.get("values") or []
    if op == "In":
        return value is not None and value in values
    if op == "NotIn":
        return value is None or value not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt"):
        if value is None or len(values) != 1:
            return False
        try:
            have, want = int(value), int(values[0])
        except ValueError:
            return False
        return have > want if op == "Gt" else have < want
    return False


def term_matches(term: dict, labels: dict, name: str) -> bool:
    """A NodeSelectorTerm: all expressions and fields match; an empty term
    matches nothing."""
    exprs, fields = term.get("matchExpressions") or [], term.get("matchFields") or []
    if not exprs and not fields:
        return False
    for e in exprs:
        if not _requirement(e, labels.get(e.get("key"))):
            return False
    for f in fields:
        if f.get("key") != "metadata.name" or not _requirement(f, name):
            return False
    return True


def selector_matches(selector: dict | None, labels: dict, name: str) -> bool:
    """A NodeSelector: its terms are ORed."""
    return any(term_matches(t, labels, name) for t in (selector or {}).get("nodeSelectorTerms") or [])


class NodeMatcher:
    """A pod's nodeSelector map and required NodeSelector parsed once, so
    Filter matches each node against plain tuples; same rules as
    `selector_matches`."""

    __slots__ = ("pairs", "terms")

    def __init__(self, node_selector: dict, required: dict | None) -> None:
        self.pairs = list(node_selector.items())
        self.terms = None if required is None else [
            ([(e.get("key"), e.get("operator"), frozenset(e.get("values") or []), e)
              for e in t.get("matchExpressions") or []], t.get("matchFields") or [])
            for t in required.get("nodeSelectorTerms") or []
            if t.get("matchExpressions") or t.get("matchFields")]

    def matches(self, labels: dict, name: str) -> bool:
        for k, v in self.pairs:
            if labels.get(k) != v:
                return False
        if self.terms is None:
            return True
        return any(self._term(exprs, fields, labels, name) for exprs, fields in self.terms)

    @staticmethod
    def _term(exprs: list, fields: list, labels: dict, name: str) -> bool:
        for key, op, values, expr in exprs:
            v = labels.get(key)
            if op == "In":
                hit = v is not None and v in values
            elif op == "NotIn":
                hit = v is None or v not in values
            elif op == "Exists":
                hit = v is not None
            elif op == "DoesNotExist":
                hit = v is None
            else:
                hit = _requirement(expr, v)
            if not hit:
                return False
        return all(f.get("key") == "metadata.name" and _requirement(f, name) for f in fields)


#: a host port on every address of the node
WILDCARD = "0.0.0.0"


def host_ports(pod: dict) -> list[tuple[str, str, int]]:
    """(hostIP, protocol, hostPort) of every container port with a host port."""
    out = []
    spec = pod.get("spec") or {}
    for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        for p in c.get("ports") or []:
            if p.get("hostPort"):
                out.append((p.get("hostIP") or WILDCARD, p.get("protocol") or "TCP", p["hostPort"]))
    return out


def ports_conflict(want: list, used: list) -> bool:
    """Whether a wanted host port is in use: the same protocol and port, when either host IP is
    the wildcard or both are equal (upstream's HostPortInfo.CheckConflict)."""
    for ip, proto, port in want:
        for uip, uproto, uport in used:
            if port == uport and proto == uproto and (ip == uip or WILDCARD in (ip, uip)):
                return True
    return False
