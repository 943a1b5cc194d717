"""The scheduler's cache: one NodeInfo per node with the pods on it (bound
or assumed), the subsets of them carrying inter-pod (anti-)affinity terms
(so affinity pre-passes skip the many pods without any), and their summed
requests, kept up to date from informer events, the nodes' zones (a
NodeTree, which orders the search), and a Snapshot cloned per cycle from the
nodes that changed since the last."""

from __future__ import annotations

import itertools

from ..machinery.scheduling import host_ports
from .framework import PodInfo
from .node_tree import NodeTree, zone_key
from .resources import Resources, from_list


#: the images of a node that lists none: shared, never changed
_NO_IMAGES: dict[str, int] = {}


class NodeInfo:
    """A node and the totals scheduling reads: allocatable, requested,
    non-zero requested (for scoring), host ports in use and pod count.

    The cache changes its own NodeInfos through `_add`/`_remove` and hands
    the changes to snapshots as dirty nodes; anyone else adding or removing
    a pod with inter-pod terms in place (the workload cycle's trial
    placements in the snapshot, preemption's trial copies) goes through
    `add_pod`/`remove_pod`, which bump `affinity_epoch` so every snapshot
    rebuilds its lists of nodes holding such pods."""

    #: bumped whenever a pod with inter-pod terms is added or removed outside the cache
    affinity_epoch = 0
    #: bumped whenever any pod is added or removed outside the cache (a NodeInfo changed in
    #: place, not replaced by a clone): KeptColumns then drop every value they hold
    change_epoch = 0

    # What Filter and Score read for every node comes first, so those reads share the object's
    # first cache line (its header and six slots): a node unchanged since it was last searched
    # answers NodeResourcesFit's Filter, LeastAllocated and BalancedAllocation from its kept
    # results alone. Unschedulable and tainted nodes are counted by the snapshot, so those two
    # are read only where there are some; the totals next only where a result is not kept.
    __slots__ = (  # noqa: RUF023
        "fits_shape",
        "unfit_shape",
        "unfit_status",
        "least_shape",
        "least_score",
        "balanced_shape",
        "balanced_score",
        "unschedulable",
        "taints",
        "free_pods",
        "free_cpu",
        "free_memory",
        "free_ephemeral",
        "alloc_cpu",
        "alloc_memory",
        "nonzero_cpu",
        "nonzero_memory",
        "used_cpu",
        "used_memory",
        "labels",
        "name",
        "affinity_pods",
        "allocatable",
        "allowed_pods",
        "anti_affinity_pods",
        "generation",
        "images",
        "node",
        "nonzero",
        "pods",
        "ports",
        "requested",
    )

    def __init__(self, name: str) -> None:
        self.name = name
        self.node: dict | None = None
        self.labels: dict = {}
        self.taints: list | tuple = ()
        self.unschedulable = False
        self.allocatable = Resources()
        self.allowed_pods = 0
        self.requested = Resources()
        self.nonzero = Resources()
        self.pods: dict[str, PodInfo] = {}
        #: pods with any pod (anti-)affinity, and those with required anti-affinity
        self.affinity_pods: dict[str, PodInfo] = {}
        self.anti_affinity_pods: dict[str, PodInfo] = {}
        self.ports: list[tuple[str, str, int]] = []
        self.generation = 0
        #: image name -> size in bytes, for every name of every image in status.images (ImageLocality)
        self.images: dict[str, int] = _NO_IMAGES
        self._totals()

    def _totals(self) -> None:
        """Mirrors the CPU, memory and ephemeral-storage totals, and the pod
        slots left, in flat ints: Filter and Score read them for hundreds of
        nodes a cycle, and one attribute of the node is much cheaper there
        than one of a Resources held by it."""
        a, r, nz = self.allocatable, self.requested, self.nonzero
        self.alloc_cpu, self.alloc_memory = a.milli_cpu, a.memory
        self.used_cpu, self.used_memory = r.milli_cpu, r.memory
        self.nonzero_cpu, self.nonzero_memory = nz.milli_cpu, nz.memory
        self.free_cpu, self.free_memory = a.milli_cpu - r.milli_cpu, a.memory - r.memory
        self.free_ephemeral = a.ephemeral - r.ephemeral
        self.free_pods = self.allowed_pods - len(self.pods)
        # results kept for one pod shape (a ShapeMemo key) while these totals hold:
        # NodeResourcesFit's fit or rejection, LeastAllocated and BalancedAllocation scores
        self.fits_shape = self.unfit_shape = self.unfit_status = self.least_shape = self.balanced_shape = None
        self.least_score = self.balanced_score = 0

    def set_node(self, node: dict) -> None:
        old_status = (self.node or {}).get("status") or {}
        old_images = old_status.get("images")
        old_alloc = old_status.get("allocatable") if self.node is not None else None
        self.node = node
        self.labels = (node.get("metadata") or {}).get("labels") or {}
        spec = node.get("spec") or {}
        # the shared empty tuple: TaintToleration's test of an untainted node reads no object of its own
        self.taints = spec.get("taints") or ()
        self.unschedulable = bool(spec.get("unschedulable"))
        status = node.get("status") or {}
        images = status.get("images")
        if images != old_images:  # an update that keeps them (a heartbeat) keeps the dict: no recount
            self.images = {name: image.get("sizeBytes") or 0 for image in images or ()
                           for name in image.get("names") or ()} or _NO_IMAGES
        alloc = status.get("allocatable") or {}
        if old_alloc == alloc:  # a heartbeat: the totals, and the results kept for them, still hold
            return
        self.allocatable = from_list(alloc)
        try:
            self.allowed_pods = int(str(alloc.get("pods", "0")))
        except ValueError:
            self.allowed_pods = 0
        self._totals()

    def add_pod(self, info: PodInfo) -> None:
        self._add(info)
        NodeInfo.change_epoch += 1
        if info.has_affinity:
            NodeInfo.affinity_epoch += 1

    def remove_pod(self, uid: str) -> bool:
        info = self._remove(uid)
        if info is not None:
            NodeInfo.change_epoch += 1
            if info.has_affinity:
                NodeInfo.affinity_epoch += 1
        return info is not None

    def _add(self, info: PodInfo) -> None:
        self.pods[info.uid] = info
        self.requested.add(info.requests)
        self.nonzero.add(info.nonzero)
        if info.has_affinity:
            self.affinity_pods[info.uid] = info
            if info.has_required_anti_affinity:
                self.anti_affinity_pods[info.uid] = info
        self.ports.extend(host_ports(info.pod))
        self._totals()

    def _remove(self, uid: str) -> PodInfo | None:
        info = self.pods.pop(uid, None)
        if info is None:
            return None
        self.requested.add(info.requests, -1)
        self.nonzero.add(info.nonzero, -1)
        self.affinity_pods.pop(uid, None)
        self.anti_affinity_pods.pop(uid, None)
        for p in host_ports(info.pod):
            self.ports.remove(p)
        self._totals()
        return info

    def clone(self) -> NodeInfo:
        """A copy whose pods and totals can change apart from this one's."""
        c = self._shell()
        c.requested = self.requested.copy()
        c.nonzero = self.nonzero.copy()
        c.pods = dict(self.pods)
        c.affinity_pods = dict(self.affinity_pods)
        c.anti_affinity_pods = dict(self.anti_affinity_pods)
        c.ports = list(self.ports)
        return c

    def _shell(self) -> NodeInfo:
        """A copy of everything but the pods and what is counted from them. Every slot is
        assigned by name: a loop of getattr/setattr over `__slots__` cost ~12 us a clone,
        paid for each node a cycle's snapshot takes in and each node preemption tries."""
        c = NodeInfo.__new__(NodeInfo)
        c.fits_shape, c.unfit_shape, c.unfit_status = self.fits_shape, self.unfit_shape, self.unfit_status
        c.least_shape, c.least_score = self.least_shape, self.least_score
        c.balanced_shape, c.balanced_score = self.balanced_shape, self.balanced_score
        c.unschedulable, c.taints = self.unschedulable, self.taints
        c.free_pods, c.free_cpu, c.free_memory, c.free_ephemeral = (
            self.free_pods, self.free_cpu, self.free_memory, self.free_ephemeral)
        c.alloc_cpu, c.alloc_memory = self.alloc_cpu, self.alloc_memory
        c.nonzero_cpu, c.nonzero_memory = self.nonzero_cpu, self.nonzero_memory
        c.used_cpu, c.used_memory = self.used_cpu, self.used_memory
        c.labels, c.name, c.allocatable, c.allowed_pods = self.labels, self.name, self.allocatable, self.allowed_pods
        c.generation, c.node, c.images = self.generation, self.node, self.images
        return c

    def without(self, uids: set[str]) -> NodeInfo:
        """A copy without the pods in `uids`; when they are most of its pods (preemption's
        candidate with every lower-priority pod removed) it is rebuilt from the pods it
        keeps instead of taking each one off, which recounts the totals per pod."""
        gone = [info for uid, info in self.pods.items() if uid in uids]
        if 2 * len(gone) <= len(self.pods):
            c = self.clone()
            for info in gone:
                c._remove(info.uid)
        else:
            c = self._shell()
            c.requested, c.nonzero, c.pods, c.affinity_pods, c.anti_affinity_pods, c.ports = (
                Resources(), Resources(), {}, {}, {}, [])
            for uid, info in self.pods.items():
                if uid not in uids:
                    c._add(info)
            c._totals()
        if gone:
            NodeInfo.change_epoch += 1
            if any(info.has_affinity for info in gone):
                NodeInfo.affinity_epoch += 1
        return c


class ShapeMemo:
    """Keys under which a Filter or Score plugin whose result depends only
    on a node's totals and on the pod's requests keeps it in the NodeInfo
    (`fits_shape`, `least_shape`/`least_score`, ...): pods of one shape (a
    Deployment's replicas) then find an unchanged node fits, or score it, by
    comparing the key the node holds with `is`, which reads nothing but the
    node itself, where the computation reads several objects per node (those
    memory reads, not the arithmetic, are most of a cycle at thousands of
    nodes). Keys are never reused, so a key dropped here can never match
    another shape's result."""

    _next = itertools.count(1)
    MAX_SHAPES = 1024

    def __init__(self) -> None:
        self._keys: dict[tuple, int] = {}

    def key(self, shape: tuple) -> int:
        k = self._keys.get(shape)
        if k is None:
            if len(self._keys) >= self.MAX_SHAPES:
                self._keys.clear()
            k = self._keys[shape] = next(self._next)
        return k


class Snapshot:
    """The cluster as one scheduling cycle sees it; `nodes` is in the order of
    the cache's NodeTree (zones in turn) so the search rotates through every
    zone. Like upstream's
    HavePodsWithAffinityNodeInfoList and
    HavePodsWithRequiredAntiAffinityNodeInfoList, it keeps the nodes holding
    pods with inter-pod terms, so affinity pre-passes skip all the others."""

    def __init__(self) -> None:
        self.infos: dict[str, NodeInfo] = {}
        self.nodes: list[NodeInfo] = []
        self.index: dict[str, int] = {}
        self.generation = -1
        #: the NodeTree.version `nodes` was listed at; -1: never
        self.tree_version = -1
        self._with_affinity: dict[str, NodeInfo] = {}
        self._with_anti_affinity: dict[str, NodeInfo] = {}
        #: the NodeInfo.affinity_epoch the two maps reflect; -1: never built
        self._epoch = -1
        #: label key -> value -> names of the nodes carrying it, so a nodeSelector finds its
        #: nodes (or learns there are none) without visiting every node
        self.label_index: dict[str, dict[str, set[str]]] = {}
        #: image name -> how many nodes list it in status.images (upstream's ImageStateSummary.NumNodes),
        #: kept by Cache.update_snapshot as nodes change (`counted`), so ImageLocality reads the
        #: spread of an image without a walk of every node
        self.image_nodes: dict[str, int] = {}
        #: how many nodes are unschedulable and how many tainted, kept by Cache.update_snapshot
        #: (`counted`; a view whose `nodes` were set directly is not), so the checks only such a
        #: node can fail (NodeUnschedulable, TaintToleration) know without a walk that none can
        self.counted = False
        self.num_unschedulable = 0
        self.num_tainted = 0
        #: bumped whenever `nodes` is rebuilt (positions move); `replaced`: the positions whose
        #: node the cache replaced in place since, in order, after `replaced_base` older ones
        #: (for KeptColumns)
        self.layout = 0
        self.replaced: list[int] = []
        self.replaced_base = 0

    def none_unschedulable(self) -> bool:
        """Whether the snapshot is known to hold no unschedulable node."""
        return self.counted and not self.num_unschedulable

    def none_tainted(self) -> bool:
        """Whether the snapshot is known to hold no tainted node."""
        return self.counted and not self.num_tainted

    def _count(self, info: NodeInfo | None, sign: int) -> None:
        if info is not None:
            if info.unschedulable:
                self.num_unschedulable += sign
            if info.taints:
                self.num_tainted += sign

    def nodes_with_labels(self, selector: dict) -> set[str]:
        """Names of the nodes that carry every `key: value` of a nodeSelector."""
        found = []
        for key, value in selector.items():
            names = self.label_index.get(key, {}).get(value)
            if not names:
                return set()
            found.append(names)
        found.sort(key=len)
        return found[0].intersection(*found[1:]) if found else set(self.infos)

    def _relabel(self, name: str, old: dict | None, new: dict | None) -> None:
        """Keeps `label_index` in step with a node's labels (node changes are rare next to pod changes)."""
        if old == new:
            return
        for key, value in (old or {}).items():
            values = self.label_index.get(key)
            if values is not None and value in values:
                values[value].discard(name)
                if not values[value]:
                    del values[value]
                    if not values:
                        del self.label_index[key]
        for key, value in (new or {}).items():
            self.label_index.setdefault(key, {}).setdefault(value, set()).add(name)

    def _reimage(self, old: dict | None, new: dict | None) -> None:
        """Keeps `image_nodes` in step with a node's images (a clone shares its node's dict: a
        pod change costs one identity test)."""
        if old is new:
            return
        counts = self.image_nodes
        for name in old or ():
            left = counts[name] - 1
            if left:
                counts[name] = left
            else:
                del counts[name]
        for name in new or ():
            counts[name] = counts.get(name, 0) + 1

    def have_pods_with_affinity(self) -> list[NodeInfo]:
        """Nodes with a pod carrying any inter-pod (anti-)affinity term."""
        self._refresh()
        return list(self._with_affinity.values())

    def have_pods_with_required_anti_affinity(self) -> list[NodeInfo]:
        """Nodes with a pod carrying required pod anti-affinity."""
        self._refresh()
        return list(self._with_anti_affinity.values())

    def _refresh(self) -> None:
        """Rebuilds the maps from `nodes` when a NodeInfo changed in place
        (or `nodes` was set directly, as views of a snapshot do)."""
        if self._epoch == NodeInfo.affinity_epoch:
            return
        self._with_affinity = {n.name: n for n in self.nodes if n.affinity_pods}
        self._with_anti_affinity = {n.name: n for n in self._with_affinity.values() if n.anti_affinity_pods}
        self._epoch = NodeInfo.affinity_epoch

    def _replaced(self, name: str, info: NodeInfo | None) -> None:
        """Keeps the maps up to date with a node the cache cloned in (or took out)."""
        if self._epoch != NodeInfo.affinity_epoch:
            return
        self._with_affinity.pop(name, None)
        self._with_anti_affinity.pop(name, None)
        if info is not None and info.affinity_pods:
            self._with_affinity[name] = info
            if info.anti_affinity_pods:
                self._with_anti_affinity[name] = info


class _Column:
    __slots__ = ("layout", "snap", "stale", "values", "version")

    def __init__(self, snap: Snapshot, version: int) -> None:
        self.snap, self.layout, self.version = snap, snap.layout, version
        self.values: list = [None] * len(snap.nodes)
        #: positions whose node was replaced since its value was worked out (or never worked out)
        self.stale = set(range(len(snap.nodes)))


class KeptColumns:
    """A plugin's per-node results for each pod shape, kept in lists aligned with the
    snapshot's node list. The search rotates through the snapshot in contiguous windows, and
    the cache replaces a changed node by a new clone at the same position and logs the
    position (`Snapshot.replaced`), so a window's results are a slice of the column but for
    the positions replaced since it was last searched: a window of hundreds of nodes costs a
    C-level identity comparison with the snapshot's list and a Python visit of the few nodes
    that changed, and the unchanged nodes are not read at all (reading them, even for a kept
    result of their own, was most of Filter's and Score's cost at thousands of nodes). For a
    list that is not a window of a snapshot the cache keeps (nodes some Filter rejected, a
    workload cycle's view) `values` answers None and the plugin walks the nodes itself, reading
    each node's own kept result inline; nodes changed in place (trial placements through
    `NodeInfo.add_pod`/`remove_pod`) bump `NodeInfo.change_epoch`, which drops every column."""

    MAX_COLUMNS = 32

    def __init__(self) -> None:
        self._columns: dict[int, _Column] = {}
        self._epoch = NodeInfo.change_epoch

    def values(self, key: int, snap: Snapshot | None, nodes: list, compute) -> list | None:
        """`compute(node)` for each of `nodes`, in order, or None where `nodes` is not a
        window of `snap`; `key` names the pod shape (a ShapeMemo key) the values are for."""
        if snap is None or not snap.counted or not nodes:
            return None
        p, size, n = snap.index.get(nodes[0].name), len(snap.nodes), len(nodes)
        if p is None or n > size:
            return None
        end = p + n
        whole = snap.nodes
        if (whole[p:end] if end <= size else whole[p:] + whole[:end - size]) != nodes:
            return None
        if self._epoch != NodeInfo.change_epoch:
            self._columns.clear()
            self._epoch = NodeInfo.change_epoch
        version = snap.replaced_base + len(snap.replaced)
        col = self._columns.get(key)
        if col is None or col.snap is not snap or col.layout != snap.layout or col.version < snap.replaced_base:
            if len(self._columns) >= self.MAX_COLUMNS:
                self._columns.clear()
            col = self._columns[key] = _Column(snap, version)
        elif col.version != version:
            col.stale.update(snap.replaced[col.version - snap.replaced_base:])
            col.version = version
        kept, stale = col.values, col.stale
        out = kept[p:end] if end <= size else kept[p:] + kept[:end - size]
        if stale:
            if end <= size:
                hit = [j for j in stale if p <= j < end] if len(stale) <= n else \
                    [j for j in range(p, end) if j in stale]
            else:
                hit = [j for j in stale if j >= p or j < end - size] if len(stale) <= n else \
                    [j for j in (*range(p, size), *range(end - size)) if j in stale]
            for j in hit:
                i = j - p if j >= p else j + size - p
                out[i] = kept[j] = compute(nodes[i])
            if hit:  # a new set: one emptied by discards keeps its table, and iterating it walks that
                col.stale = stale.difference(hit)
        return out


class Cache:
    def __init__(self) -> None:
        self.infos: dict[str, NodeInfo] = {}
        self.assumed: dict[str, str] = {}  # pod uid -> node name
        self.pod_nodes: dict[str, str] = {}  # pod uid -> node name, for every pod held
        #: nodes changed since the last snapshot, in the order they first changed (a set's order
        #: would vary with the process's string hashing)
        self._dirty: dict[str, None] = {}
        self.generation = 0
        #: the nodes by zone, in the order each was first seen: the snapshot's node order
        self.tree = NodeTree()

    def _info(self, name: str) -> NodeInfo:
        info = self.infos.get(name)
        if info is None:
            info = self.infos[name] = NodeInfo(name)
        return info

    def _touch(self, info: NodeInfo) -> None:
        self.generation += 1
        info.generation = self.generation
        self._dirty[info.name] = None

    # nodes
    def add_node(self, node: dict) -> None:
        info = self._info(node["metadata"]["name"])
        info.set_node(node)
        self.tree.add(info.name, zone_key(info.labels))
        self._touch(info)

    #: an update is the same write: the tree moves the node only when its zone changed
    update_node = add_node

    def remove_node(self, name: str) -> None:
        info = self.infos.get(name)
        if info is None:
            return
        info.node = None
        if not info.pods:
            del self.infos[name]
        self.tree.remove(name)
        self._touch(info)

    # pods
    def assume(self, info: PodInfo, node: str) -> None:
        """Counts a pod on `node` before its binding is written, so the next
        cycles see the resources taken."""
        self._info(node)._add(info)
        self.assumed[info.uid] = node
        self.pod_nodes[info.uid] = node
        self._touch(self.infos[node])

    def forget(self, info: PodInfo) -> None:
        if self.assumed.pop(info.uid, None) is not None:
            self.remove_pod(info.uid)

    def is_assumed(self, uid: str) -> bool:
        return uid in self.assumed

    def assumed_info(self, uid: str) -> PodInfo | None:
        """The PodInfo of an assumed pod, for reuse when its binding is seen."""
        node = self.assumed.get(uid)
        info = self.infos.get(node) if node is not None else None
        return info.pods.get(uid) if info is not None else None

    def add_pod(self, info: PodInfo, node: str) -> None:
        """A bound pod seen through the informer; confirms an assumed one. An assumed pod whose
        PodInfo is confirmed on its node is counted there already: nothing is redone (nor
        cloned into the next snapshot)."""
        node_info = self.infos.get(node)
        if self.assumed.get(info.uid) == node and node_info is not None and node_info.pods.get(info.uid) is info:
            del self.assumed[info.uid]
            return
        self.assumed.pop(info.uid, None)
        self.remove_pod(info.uid)
        self._info(node)._add(info)
        self.pod_nodes[info.uid] = node
        self._touch(self.infos[node])

    def remove_pod(self, uid: str) -> None:
        node = self.pod_nodes.pop(uid, None)
        if node is None:
            return
        self.assumed.pop(uid, None)
        info = self.infos.get(node)
        if info is not None and info._remove(uid) is not None:
            self._touch(info)
            if info.node is None and not info.pods:
                del self.infos[node]

    def update_snapshot(self, snap: Snapshot) -> None:
        """Clones only the NodeInfos changed since the snapshot was taken. The node order (and
        with it every KeptColumns' layout) is listed from the tree again only when the tree
        changed (a node entered or left, or changed zone), as upstream's updateNodeInfoSnapshotList;
        a node that changed otherwise (a kubelet's status post, a new pod) is replaced in its
        place. A NodeInfo kept only for pods on a node not seen (or no longer) is in none."""
        if snap.generation == self.generation:
            return
        for name in self._dirty:
            info = self.infos.get(name)
            old = snap.infos.get(name)
            snap._count(old, -1)
            if info is None or info.node is None:
                if old is None:
                    continue
                del snap.infos[name]
                snap._replaced(name, None)
                snap._relabel(name, old.labels, None)
                snap._reimage(old.images, None)
            else:
                snap.infos[name] = info.clone()
                snap._count(info, 1)
                snap._replaced(name, snap.infos[name])
                snap._relabel(name, old.labels if old is not None else None, info.labels)
                snap._reimage(old.images if old is not None else None, info.images)
        snap.counted = True
        if snap.tree_version != self.tree.version:
            infos = snap.infos
            snap.nodes = [infos[name] for name in self.tree.list()]
            snap.tree_version = self.tree.version
            snap.index = {n.name: i for i, n in enumerate(snap.nodes)}
            snap.layout += 1
            snap.replaced_base += len(snap.replaced)
            snap.replaced.clear()
        else:
            replaced = snap.replaced
            if len(replaced) > 2 * len(snap.nodes) + 64:  # columns that far behind start over
                snap.replaced_base += len(replaced)
                replaced.clear()
            index, infos = snap.index, snap.infos
            for name in self._dirty:
                i = index.get(name)
                if i is not None:
                    snap.nodes[i] = infos[name]
                    replaced.append(i)
        self._dirty.clear()
        snap.generation = self.generation
