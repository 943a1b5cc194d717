"""NodeResourcesBalancedAllocation: prefers nodes whose CPU and memory
would be used in equal fractions: score = (1 - std of fractions) * 100."""

from __future__ import annotations

import math

from ..cache import KeptColumns, ShapeMemo
from ..framework import MAX_NODE_SCORE, SKIP
from ..resources import CPU, MEMORY

_KEY = "PreScoreNodeResourcesBalancedAllocation"


def balanced_score(fractions: list[float]) -> int:
    if not fractions:
        return MAX_NODE_SCORE
    if len(fractions) == 2:
        std = abs(fractions[0] - fractions[1]) / 2
    else:
        mean = sum(fractions) / len(fractions)
        std = math.sqrt(sum((f - mean) ** 2 for f in fractions) / len(fractions))
    return int((1 - std) * MAX_NODE_SCORE)


class NodeResourcesBalancedAllocation:
    name = "NodeResourcesBalancedAllocation"

    def __init__(self, args: dict, handle) -> None:
        self.resources = [r["name"] for r in args.get("resources") or [{"name": CPU}, {"name": MEMORY}]]
        self.memo = ShapeMemo()
        self.kept = KeptColumns()

    def _requests(self, info) -> list[tuple[str, int]]:
        return [(r, info.requests.get(r)) for r in self.resources]

    def pre_score(self, state, info, nodes):
        requests = self._requests(info)
        if all(q == 0 for _, q in requests):
            return SKIP
        state[_KEY] = requests
        return None

    def score_nodes(self, state, info, nodes) -> list[int]:
        requests = state.get(_KEY)
        if requests is None:
            requests = self._requests(info)
        if [r for r, _ in requests] == [CPU, MEMORY]:
            return self._cpu_memory(state, requests[0][1], requests[1][1], nodes)
        out = []
        for node in nodes:
            alloc, used = node.allocatable, node.requested
            fractions = []
            for r, q in requests:
                if r == CPU:
                    cap, u = alloc.milli_cpu, used.milli_cpu
                elif r == MEMORY:
                    cap, u = alloc.memory, used.memory
                else:
                    cap, u = alloc.get(r), used.get(r)
                if cap == 0:
                    continue
                fractions.append(min((u + q) / cap, 1.0))
            out.append(balanced_score(fractions))
        return out

    def _cpu_memory(self, state, cpu: int, memory: int, nodes) -> list[int]:
        """The default resources, kept per node for pods of the same shape
        until the node changes, and for a search window in `kept`."""
        key = self.memo.key((cpu, memory))

        def score(node) -> int:
            if node.balanced_shape is key:
                return node.balanced_score
            s = node.balanced_score = _balanced_cpu_memory(node, cpu, memory)
            node.balanced_shape = key
            return s

        out = self.kept.values(key, getattr(state, "snapshot", None), nodes, score)
        if out is None:  # not a window of the cycle's snapshot (a workload cycle's view)
            out = []
            append = out.append
            for node in nodes:
                append(node.balanced_score if node.balanced_shape is key else score(node))
        return out


def _balanced_cpu_memory(node, cpu: int, memory: int) -> int:
    """With two fractions the standard deviation is half their difference."""
    cc, cm = node.alloc_cpu, node.alloc_memory
    if not (cc and cm):
        return MAX_NODE_SCORE
    return int((1 - abs(min((node.used_cpu + cpu) / cc, 1.0) - min((node.used_memory + memory) / cm, 1.0)) / 2)
               * MAX_NODE_SCORE)
