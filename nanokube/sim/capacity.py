"""What-if edits of a simulated cluster, for capacity planning: several
cluster files together, N more nodes of a pool, some nodes taken away.

A pool's nodes are named `<pool>-<i>` for i below its count, so adding
or dropping nodes is a change of counts; which nodes go is drawn by the
run's seed, so the same seed drops the same nodes."""

from __future__ import annotations

import dataclasses
import random
import re
from collections import Counter

from ..node.cluster import Cluster, ClusterFileError


def merge(clusters: list[tuple[str, Cluster]]) -> Cluster:
    """The pools of every (file, cluster) together; a pool name two files use is an error."""
    seen: dict[str, str] = {}
    pools = []
    for path, cluster in clusters:
        for p in cluster.pools:
            if p.name in seen:
                raise ClusterFileError(f"{path}: pool {p.name!r} is also in {seen[p.name]}; pool names must differ "
                                       "across --cluster files")
            seen[p.name] = path
            pools.append(p)
    return Cluster(pools)


def add_nodes(cluster: Cluster, spec: str) -> Cluster:
    """`POOL=N`: N more nodes like the pool's."""
    m = re.fullmatch(r"([^=]+)=(\d+)", spec)
    if not m:
        raise ValueError(f"--add-nodes {spec!r}: want POOL=COUNT, e.g. {cluster.pools[0].name}=10")
    name, n = m.group(1), int(m.group(2))
    if name not in {p.name for p in cluster.pools}:
        raise ValueError(f"--add-nodes: no pool {name!r}; the cluster's pools: {', '.join(p.name for p in cluster.pools)}")
    return Cluster([dataclasses.replace(p, count=p.count + n) if p.name == name else p for p in cluster.pools])


def drop_nodes(cluster: Cluster, spec: str, seed: int) -> Cluster:
    """`N` nodes, or `P%` of them, drawn across every pool by `seed` (a pool left empty stays, with no nodes)."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(%?)", spec.strip())
    if not m or (not m.group(2) and "." in m.group(1)):
        raise ValueError(f"--drop-nodes {spec!r}: want a number of nodes (50) or a percentage of them (10%)")
    total = sum(p.count for p in cluster.pools)
    n = round(float(m.group(1)) / 100 * total) if m.group(2) else int(m.group(1))
    if n >= total:
        raise ValueError(f"--drop-nodes {spec}: {n} of the cluster's {total} nodes would leave none")
    slots = [p.name for p in cluster.pools for _ in range(p.count)]
    gone = Counter(random.Random(f"drop-nodes/{seed}").sample(slots, n))
    return Cluster([dataclasses.replace(p, count=p.count - gone[p.name]) for p in cluster.pools])


def describe(cluster: Cluster) -> str:
    nodes = sum(p.count for p in cluster.pools)
    gpus = sum(p.count * p.gpus["count"] for p in cluster.pools if p.gpus)
    return f"{nodes:,} nodes, {gpus:,} GPUs in {len(cluster.pools)} pools"
