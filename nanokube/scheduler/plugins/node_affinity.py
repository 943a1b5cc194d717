"""NodeAffinity: spec.nodeSelector and required node affinity terms filter
nodes; preferred terms add their weights to a node's score."""

from __future__ import annotations

from ..framework import (
    NODE,
    SKIP,
    Action,
    ClusterEvent,
    Hint,
    Registration,
    unschedulable,
)
from ...machinery.scheduling import NodeMatcher, term_matches
from .normalize import default_normalize

REASON = "node(s) didn't match Pod's node affinity/selector"


def _node_affinity(pod: dict) -> dict:
    return (((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity")) or {}


def node_matcher(pod: dict) -> NodeMatcher:
    """The pod's nodeSelector and required node affinity, parsed."""
    return NodeMatcher((pod.get("spec") or {}).get("nodeSelector") or {},
                       _node_affinity(pod).get("requiredDuringSchedulingIgnoredDuringExecution"))


def pod_matches_node(pod: dict, labels: dict, name: str) -> bool:
    return node_matcher(pod).matches(labels, name)


def _label_keys(matcher: NodeMatcher) -> tuple[str, ...] | None:
    """The node labels a matcher reads, or None when a term also reads the
    node's name (matchFields)."""
    terms = matcher.terms or []
    if any(fields for _, fields in terms):
        return None
    return tuple(dict.fromkeys([k for k, _ in matcher.pairs] + [e[0] for exprs, _ in terms for e in exprs]))


def _named_nodes(required: dict | None) -> set[str] | None:
    """The node names required affinity allows when every term pins `metadata.name` with `In`
    (upstream's PreFilterResult for NodeAffinity); None when some term does not."""
    names: set[str] = set()
    for term in (required or {}).get("nodeSelectorTerms") or []:
        pinned = [f for f in term.get("matchFields") or [] if f.get("key") == "metadata.name" and f.get("operator") == "In"]
        if not pinned:
            return None
        allowed = set(pinned[0].get("values") or [])
        for f in pinned[1:]:
            allowed &= set(f.get("values") or [])
        names |= allowed
    return names if (required or {}).get("nodeSelectorTerms") else None


def _key(pod: dict) -> str:
    return f"{pod['metadata'].get('namespace', '')}/{pod['metadata']['name']}"


class PendingSelectors:
    """The pods not yet bound whose nodeSelector or required node affinity NodeAffinity judges,
    each under one of its nodeSelector's label pairs (a node without that label cannot match it),
    or among the `loose` ones that only affinity terms constrain: a node event then asks the hint
    of the pods its labels could satisfy, not of every pod the plugin turned away (with thousands
    pending for a pool that does not exist, a joining node cost each of them a hint call)."""

    def __init__(self, pods) -> None:
        self.by_pair: dict[tuple[str, str], dict[str, None]] = {}
        self.loose: dict[str, None] = {}
        self._placed: dict[str, tuple[str, str] | None] = {}  # key -> its pair, None when loose
        pods.add_handlers(on_add=self._put, on_update=self._updated, on_delete=lambda pod: self._drop(_key(pod)))

    def _updated(self, old: dict, new: dict) -> None:
        """Only the spec places a pod: a status write (the watch cache hands it the same spec) moves nothing."""
        if new.get("spec") is not old.get("spec"):
            self._put(new)

    def _put(self, pod: dict) -> None:
        spec = pod.get("spec") or {}
        selector = spec.get("nodeSelector")
        if not selector and not _node_affinity(pod).get("requiredDuringSchedulingIgnoredDuringExecution"):
            return  # never indexed: an update may add a selector or narrow affinity, never remove them
        key = _key(pod)
        if spec.get("nodeName"):
            self._drop(key)
            return
        place = min(selector.items()) if selector else None
        if key in self._placed:
            if self._placed[key] == place:
                return
            self._drop(key)
        self._placed[key] = place
        if place is None:
            self.loose[key] = None
        elif (keys := self.by_pair.get(place)) is not None:
            keys[key] = None
        else:
            self.by_pair[place] = {key: None}

    def _drop(self, key: str) -> None:
        if key not in self._placed:
            return
        place = self._placed.pop(key)
        if place is None:
            del self.loose[key]
            return
        keys = self.by_pair[place]
        del keys[key]
        if not keys:
            del self.by_pair[place]

    def targets(self, old, new):
        """The pods a node (added, or relabelled into `new`) can match."""
        if new is None:
            return ()
        found = set(self.loose)
        for item in ((new.get("metadata") or {}).get("labels") or {}).items():
            keys = self.by_pair.get(item)
            if keys:
                found.update(keys)
        return found


class NodeAffinity:
    name = "NodeAffinity"
    default_weight = 2
    #: how the nodes PreFilter leaves out are reported: as Filter would have rejected them
    absent_reason = REASON

    def __init__(self, args: dict, handle) -> None:
        self.handle = handle
        #: one index for every profile's NodeAffinity; none without the scheduler's pod informer
        self.pending = getattr(handle, "shared", {}).get(self.name)
        if self.pending is None and getattr(handle, "pods", None) is not None:
            self.pending = handle.shared[self.name] = PendingSelectors(handle.pods)

    def pre_filter(self, state, info):
        """Narrows the search to the nodes the pod can match: those carrying every nodeSelector
        label (from the snapshot's label index) and those required affinity pins by name. A pod
        whose selector no node carries is turned away here, without visiting any node."""
        spec = info.spec
        selector = spec.get("nodeSelector")
        required = _node_affinity(info.pod).get("requiredDuringSchedulingIgnoredDuringExecution")
        if not selector and not required:
            return None, SKIP
        snap = getattr(self.handle, "snapshot", None)
        narrowed = snap.nodes_with_labels(selector) if selector and snap is not None else None
        named = _named_nodes(required) if required else None
        if named is not None:
            narrowed = named if narrowed is None else narrowed & named
        return narrowed, None

    def filter(self, state, info, node):
        if info.derived(self.name, node_matcher).matches(node.labels, node.name):
            return None
        return unschedulable(REASON, resolvable=False)

    def filter_nodes(self, state, info, nodes) -> dict:
        """`filter` over many nodes. A matcher that reads only labels gives
        the same answer for nodes with the same values of the labels it
        reads (a zone, say), so each distinct set of values is matched once."""
        matcher = info.derived(self.name, node_matcher)
        matches = matcher.matches
        keys = _label_keys(matcher)
        if keys is None:
            rejected = [i for i, n in enumerate(nodes) if not matches(n.labels, n.name)]
        else:
            seen: dict = {}
            rejected = []
            key = keys[0] if len(keys) == 1 else None
            for i, n in enumerate(nodes):
                labels = n.labels
                values = labels.get(key) if key is not None else tuple(map(labels.get, keys))
                ok = seen.get(values)
                if ok is None:
                    ok = seen[values] = matches(labels, n.name)
                if not ok:
                    rejected.append(i)
        if not rejected:
            return {}
        st = unschedulable(REASON, resolvable=False)
        return dict.fromkeys(rejected, st)

    def pre_score(self, state, info, nodes):
        if not _node_affinity(info.pod).get("preferredDuringSchedulingIgnoredDuringExecution"):
            return SKIP
        return None

    def score_nodes(self, state, info, nodes) -> list[int]:
        """Sum of the weights of the preferred terms each node matches."""
        prefs = [(p["weight"], p.get("preference") or {})
                 for p in _node_affinity(info.pod).get("preferredDuringSchedulingIgnoredDuringExecution") or []
                 if p.get("weight")]
        return [sum(w for w, term in prefs if term_matches(term, n.labels, n.name)) for n in nodes]

    def normalize_score(self, state, info, scores: list[int]) -> None:
        default_normalize(scores)

    def events_to_register(self) -> list[Registration]:
        def hint(pod: dict, old, new) -> Hint:
            """Upstream's isSchedulableAfterNodeChange: a matching node arrived, or a node's labels
            changed from not matching to matching (one that matched before did not reject the pod)."""
            if new is None:
                return Hint.SKIP
            matcher = node_matcher(pod)
            md = new.get("metadata") or {}
            if not matcher.matches(md.get("labels") or {}, md.get("name", "")):
                return Hint.SKIP
            if old is None:
                return Hint.QUEUE
            md = old.get("metadata") or {}
            return Hint.SKIP if matcher.matches(md.get("labels") or {}, md.get("name", "")) else Hint.QUEUE

        targets = self.pending.targets if self.pending is not None else None
        return [Registration(ClusterEvent(NODE, Action.ADD | Action.UPDATE_NODE_LABEL), hint, targets)]
