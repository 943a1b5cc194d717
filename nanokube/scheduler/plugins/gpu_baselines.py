"""The baseline GPU policies "Beware of Fragmentation" compares FGD with,
each one score function: best-fit, dot-product, GPU packing and random."""

from __future__ import annotations

import random

from ..resources import CPU
from .gpu_fragmentation import WHOLE, GPUScorePlugin, place


def _cpu_free(node, info) -> tuple[float, float]:
    """(free CPU fraction after the pod, the pod's CPU fraction of the node)."""
    cap = node.allocatable.milli_cpu or 1
    want = info.requests.get(CPU) if info is not None else 0
    return max(cap - node.requested.milli_cpu - want, 0) / cap, want / cap


class GPUBestFit(GPUScorePlugin):
    """The node left with the least free GPU and CPU after the pod (each as a share of the node)."""

    name = "GPUBestFit"
    best_low = True

    def score_nodes(self, state, info, nodes):
        self._info = info
        return super().score_nodes(state, info, nodes)

    def score_gpu(self, free, demand, node, _allocated=None) -> float:
        after = place(free, *demand) or free
        gpus = len(free) or 1
        return sum(after) / (gpus * WHOLE) + _cpu_free(node, self._info)[0]


class GPUDotProduct(GPUScorePlugin):
    """Tetris' alignment: the node whose free (CPU, GPU) vector has the largest dot product with the pod's demand."""

    name = "GPUDotProduct"
    best_low = False

    def score_nodes(self, state, info, nodes):
        self._info = info
        return super().score_nodes(state, info, nodes)

    def score_gpu(self, free, demand, node, _allocated=None) -> float:
        count, milli = demand
        gpus = len(free) or 1
        cpu_free_after, cpu_want = _cpu_free(node, self._info)
        return (cpu_free_after + cpu_want) * cpu_want + (sum(free) / (gpus * WHOLE)) * (count * milli / (gpus * WHOLE))


class GPUPacking(GPUScorePlugin):
    """Pack GPUs: a share goes to a partly used GPU first, then to a node with
    GPUs in use, then to an idle node; fewer free GPUs break ties."""

    name = "GPUPacking"
    best_low = False

    def score_gpu(self, free, demand, _node, _allocated=None) -> float:
        count, milli = demand
        partly = [f for f in free if 0 < f < WHOLE]
        tier = 2 if milli < WHOLE and any(f >= milli for f in partly) else 1 if any(f < WHOLE for f in free) else 0
        return tier * 10 * len(free) * WHOLE - sum(free)


class RandomScore(GPUScorePlugin):
    """A seeded random score per node (`seed` arg), for pods with GPU claims."""

    name = "RandomScore"
    best_low = False
    #: each score draws from the seeded generator
    kept = False

    def __init__(self, args: dict, handle) -> None:
        super().__init__(args, handle)
        self.rng = random.Random(int(args.get("seed", 0)))

    def score_gpu(self, free, demand, _node, _allocated=None) -> float:
        return self.rng.random()
