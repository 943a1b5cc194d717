"""ImageLocality: Score prefers nodes that already hold the pod's container
images (status.images), so it starts without pulling them. Each image found
counts its size scaled by the fraction of nodes holding it (an image every
node has moves no node above another, which keeps a widely cached image from
heaping pods on the few nodes that pulled it first); the sum is clamped
between 23 MiB and 1000 MiB per container and scaled to 0..100."""

from __future__ import annotations

from collections import Counter

from ..framework import MAX_NODE_SCORE

MB = 1024 * 1024
#: below this an image is quick to pull: no score
MIN_THRESHOLD = 23 * MB
#: the size per container at which a node scores the most
MAX_CONTAINER_THRESHOLD = 1000 * MB


def normalized_image_name(name: str) -> str:
    """Upstream's normalizedImageName: a name without a tag gets ":latest" (a colon before the
    last slash is a registry's port, not a tag). Registries are not filled in, so "nginx" does
    not match a node's "docker.io/library/nginx:latest", as upstream."""
    return name if name.rfind(":") > name.rfind("/") else name + ":latest"


def _pod_images(pod: dict) -> tuple[tuple[str, ...], int]:
    """(the normalized image of each init container and container, the number of them)."""
    spec = pod.get("spec") or {}
    containers = (spec.get("initContainers") or []) + (spec.get("containers") or [])
    return tuple(normalized_image_name(c.get("image") or "") for c in containers), len(containers)


def calculate_priority(total: int, num_containers: int) -> int:
    """The node's score from the summed scaled sizes of the images it holds."""
    top = MAX_CONTAINER_THRESHOLD * num_containers
    total = min(max(total, MIN_THRESHOLD), top)
    return MAX_NODE_SCORE * (total - MIN_THRESHOLD) // (top - MIN_THRESHOLD)


def _image_counts(snap, nodes: list) -> tuple[dict[str, int], int]:
    """(image name -> nodes holding it, number of nodes) over the whole snapshot, as upstream
    counts every node, not only the feasible ones: the cache keeps the counts as nodes change;
    a snapshot built from a list of nodes (no scheduler's) is counted here."""
    if snap is not None and snap.counted:
        return snap.image_nodes, len(snap.nodes)
    pool = snap.nodes if snap is not None else nodes
    return Counter(name for n in pool for name in n.images), len(pool)


class ImageLocality:
    name = "ImageLocality"
    default_weight = 1

    def __init__(self, args: dict, handle) -> None:
        self.handle = handle

    def score_nodes(self, state, info, nodes) -> list[int]:
        images, num_containers = info.derived(self.name, _pod_images)
        # the scheduler's snapshot (upstream's SnapshotSharedLister), also where the cycle
        # searches a view of some nodes (a workload placement's)
        snap = getattr(self.handle, "snapshot", None) or getattr(state, "snapshot", None)
        counts, total = _image_counts(snap, nodes)
        # an image's scaled size depends on the node only through whether the node holds it
        spread = {name: counts[name] / total for name in set(images) if name in counts}
        if not spread:  # no node holds any of the pod's images: every node scores 0
            return [0] * len(nodes)
        found = [(name, spread[name]) for name in images if name in spread]
        scores = []
        for n in nodes:
            held, total_size = n.images, 0
            if held:
                for name, fraction in found:
                    size = held.get(name)
                    if size:
                        total_size += int(size * fraction)
            scores.append(calculate_priority(total_size, num_containers) if total_size > MIN_THRESHOLD else 0)
        return scores
