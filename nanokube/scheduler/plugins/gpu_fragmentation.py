"""GPU fragmentation as "Beware of Fragmentation" (Weng et al., USENIX ATC'23)
measures it: a node's unallocated GPU compute that a task of the target
workload could not use, weighted by how common that task is.

For a task of `count` GPUs at `milli` thousandths each: if the node cannot
host it at all, every free share on the node is fragment; otherwise a
GPU's free share is fragment when it is smaller than what the task needs
of one GPU (a partly used GPU for a whole-GPU task). The workload is a
list of ((count, milli), popularity). CPU and memory are left out: the
measure is about GPUs only.
"""

from __future__ import annotations

#: a whole GPU, in thousandths
WHOLE = 1000

Workload = list[tuple[tuple[int, int], float]]


def task_fragment(free: list[int], count: int, milli: int) -> int:
    if milli < WHOLE:
        fits = any(f >= milli for f in free)
        return sum(f for f in free if f < milli) if fits else sum(free)
    fits = sum(1 for f in free if f >= WHOLE) >= count
    return sum(f for f in free if f < WHOLE) if fits else sum(free)


def node_fragmentation(free: list[int], workload: Workload) -> float:
    """Expected fragment (GPU thousandths) of a node whose GPUs have `free` thousandths left."""
    return sum(p * task_fragment(free, c, m) for (c, m), p in workload)


def place(free: list[int], count: int, milli: int) -> list[int] | None:
    """`free` after hosting the task on the GPUs that leave the least
    fragmentation behind (the paper's choice within a node): a share goes to
    the fullest GPU it fits on, whole GPUs to free ones; None if it cannot."""
    if milli < WHOLE:
        fits = [i for i, f in enumerate(free) if f >= milli]
        if not fits:
            return None
        i = min(fits, key=lambda j: (free[j], j))
        return free[:i] + [free[i] - milli] + free[i + 1:]
    whole = [i for i, f in enumerate(free) if f >= WHOLE]
    if len(whole) < count:
        return None
    out = list(free)
    for i in whole[:count]:
        out[i] = 0
    return out
