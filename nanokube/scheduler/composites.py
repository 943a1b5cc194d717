"""CompositePodGroups (scheduling.k8s.io/v1alpha3): groups of groups. A
PodGroup with `parentCompositePodGroupName` is a leaf of a tree whose inner
nodes are CompositePodGroups; the whole tree, from its root, is one
scheduling unit. A composite is satisfied when `minGroupCount` of its
children are (one for a basic composite), a leaf when its gang's minCount
pods are placed (one for a basic group). The runtime check refuses a tree
with a cycle, deeper than four levels, or spanning more than one Workload."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from ..machinery.meta import object_key
from ..machinery.podgroups import group_key, min_count

API = ("scheduling.k8s.io", "v1alpha3", "compositepodgroups")
CONDITION = "CompositePodGroupInitiallyScheduled"
INVALID = "Invalid"
MAX_DEPTH = 4
NOT_READY = "waiting for minGroupCount groups from a composite pod group to appear in scheduling queue"


def parent_name(obj: dict) -> str | None:
    return (obj.get("spec") or {}).get("parentCompositePodGroupName")


def _workload(obj: dict) -> str | None:
    return ((obj.get("spec") or {}).get("workloadRef") or {}).get("workloadName")


@dataclass
class Member:
    """One node of a tree: a CompositePodGroup or a leaf PodGroup."""

    key: str
    obj: dict
    composite: bool
    children: list[Member] = field(default_factory=list)
    depth: int = 1  # levels from this node down to its deepest descendant

    @property
    def need(self) -> int:
        """Children (composite) or pods (leaf) that must be placed: 1 for basic."""
        if not self.composite:
            return min_count(self.obj) or 1
        gang = ((self.obj.get("spec") or {}).get("schedulingPolicy") or {}).get("gang")
        return int(gang.get("minGroupCount") or 1) if gang else 1

    def leaves(self) -> list[Member]:
        if not self.composite:
            return [self]
        return [leaf for c in self.children for leaf in c.leaves()]

    def composites(self) -> list[Member]:
        if not self.composite:
            return []
        return [self] + [m for c in self.children for m in c.composites()]


@dataclass
class Tree:
    """What climbing from a leaf found: the root's tree, or why there is none."""

    root: Member | None = None
    waiting: str = ""  # a parent does not exist yet
    invalid: str = ""  # the hierarchy breaks a rule
    culprit: dict | None = None  # the composite the Invalid condition goes on


class CompositeIndex:
    """CompositePodGroups by `ns/name` from their informer; on a composite
    add, a new member or a new PodGroup in a tree, every leaf of the tree is
    re-checked by PreEnqueue (readiness is decided at the root)."""

    def __init__(self, handle) -> None:
        self.handle = handle
        self.groups: dict[str, dict] = {}
        inf = handle.informer(*API)
        inf.add_handlers(self._added, lambda old, new: self._set(new), self._removed)
        handle.pods.add_handlers(on_add=self._pod_added)
        handle.podgroup_informer.add_handlers(on_add=self._podgroup_added)

    def _set(self, obj: dict) -> None:
        self.groups[object_key(obj)] = obj

    def _added(self, obj: dict) -> None:
        self._set(obj)
        self._activate(obj, "CompositePodGroupAdd", composite=True)

    def _removed(self, obj: dict) -> None:
        self.groups.pop(object_key(obj), None)

    def _pod_added(self, pod: dict) -> None:
        if not (pod.get("spec") or {}).get("schedulingGroup"):
            return  # no group (most pods): told apart before calling group_key
        key = group_key(pod)
        pg = self.handle.podgroups.get(key) if key else None
        if pg is not None and parent_name(pg):
            self._activate(pg, "PodGroupMemberAdd")

    def _podgroup_added(self, pg: dict) -> None:
        if parent_name(pg):
            self._activate(pg, "PodGroupAdd")

    def _activate(self, obj: dict, event: str, composite: bool = False) -> None:
        """Re-checks every leaf of the tree `obj` is in, after the
        scheduler's own handlers have seen the change."""
        tree = self.tree(obj, composite)
        if tree.root is None:
            return
        queue = self.handle.queue
        for leaf in tree.root.leaves():
            asyncio.get_running_loop().call_soon(queue.activate_group, leaf.key, event)

    def get(self, key: str) -> dict | None:
        return self.groups.get(key)

    def tree(self, obj: dict, composite: bool = False) -> Tree:
        """Climbs from a PodGroup (or a CompositePodGroup) to its root and
        builds the root's tree."""
        ns = obj["metadata"].get("namespace", "")
        seen = {object_key(obj)}
        chain = [obj]
        cur = obj
        while parent_name(cur):
            key = f"{ns}/{parent_name(cur)}"
            if key in seen:
                return Tree(invalid=f'the composite pod group hierarchy has a cycle through "{parent_name(cur)}"',
                            culprit=self.groups.get(key))
            parent = self.groups.get(key)
            if parent is None:
                return Tree(waiting=f'waiting for pod group\'s parent composite pod group "{parent_name(cur)}" '
                                    "to appear in scheduling queue")
            seen.add(key)
            chain.append(parent)
            cur = parent
        if cur is obj and not composite:
            return Tree(root=Member(object_key(obj), obj, composite=False))
        root = self._build(cur, ns, 1)
        if root.depth > MAX_DEPTH:
            return Tree(invalid=f"the composite pod group hierarchy is deeper than {MAX_DEPTH} levels", culprit=cur)
        names = {_workload(m.obj) or "" for m in root.composites() + root.leaves()}
        if len(names) > 1:
            listed = ", ".join(f'"{n}"' for n in sorted(names))
            return Tree(invalid=f"the composite pod group hierarchy spans more than one Workload: {listed}",
                        culprit=cur)
        return Tree(root=root)

    def _build(self, comp: dict, ns: str, level: int) -> Member:
        """The subtree under `comp`, children in name order (composites
        first); the walk stops one level past the limit."""
        name = comp["metadata"]["name"]
        node = Member(object_key(comp), comp, composite=True)
        if level <= MAX_DEPTH:
            subs = sorted((c for c in self.groups.values()
                           if c["metadata"].get("namespace", "") == ns and parent_name(c) == name),
                          key=lambda c: c["metadata"]["name"])
            pgs = sorted((p for p in self.handle.podgroups.groups.values()
                          if p["metadata"].get("namespace", "") == ns and parent_name(p) == name),
                         key=lambda p: p["metadata"]["name"])
            node.children = [self._build(c, ns, level + 1) for c in subs]
            node.children += [Member(object_key(p), p, composite=False) for p in pgs]
        node.depth = 1 + max((c.depth for c in node.children), default=0 if level <= MAX_DEPTH else MAX_DEPTH)
        return node

    def ready(self, node: Member) -> bool:
        """PreEnqueue's test, recursively: enough children (or members) have appeared."""
        if not node.composite:
            return self.handle.podgroups.member_count(node.key) >= node.need
        return sum(1 for c in node.children if self.ready(c)) >= node.need


def composite_index(handle) -> CompositeIndex:
    """The scheduler's one CompositeIndex, shared by GangScheduling and the workload cycle."""
    index = handle.shared.get("CompositePodGroups")
    if index is None:
        index = handle.shared["CompositePodGroups"] = CompositeIndex(handle)
    return index
