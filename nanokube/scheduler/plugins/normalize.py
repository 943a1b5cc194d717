"""helper.DefaultNormalizeScore: scale scores to 0..100 by the maximum,
optionally reversed (fewest is best)."""

from __future__ import annotations

from ..framework import MAX_NODE_SCORE


def default_normalize(scores: list[int], reverse: bool = False) -> None:
    top = max(scores, default=0)
    if top == 0:
        if reverse:
            scores[:] = [MAX_NODE_SCORE] * len(scores)
        return
    for i, s in enumerate(scores):
        s = MAX_NODE_SCORE * s // top
        scores[i] = MAX_NODE_SCORE - s if reverse else s
