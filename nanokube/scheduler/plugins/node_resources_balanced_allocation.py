"""NodeResourcesBalancedAllocation: prefers nodes whose CPU and memory
would be used in equal fractions: score = (1 - std of fractions) * 100."""

from __future__ import annotations

import math

from ..framework import MAX_NODE_SCORE, SKIP
from ..resources import CPU, MEMORY


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

    def pre_score(self, state, info, nodes):
        if all(info.requests.get(r) == 0 for r in self.resources):
            return SKIP
        return None

    def score(self, state, info, node) -> int:
        fractions = []
        for r in self.resources:
            cap = node.allocatable.get(r)
            if cap == 0:
                continue
            fractions.append(min((node.requested.get(r) + info.requests.get(r)) / cap, 1.0))
        return balanced_score(fractions)
