"""Exponential back-off: a base delay doubled per step, up to a cap (client-go's and the kubelet's
curves, and the Job controller's)."""

from __future__ import annotations

import math


def doubling(base: float, steps: int, cap: float) -> float:
    """`base` doubled `steps` times, at most `cap`. The exponent stops where the cap is reached, so a
    step count that grows without bound (a key failing for days, a container crash-looping on a short
    cap) never overflows a float at 2**1024, which would end the loop that computes it."""
    if base <= 0 or steps <= 0 or base >= cap:
        return min(max(base, 0.0), cap)
    return min(base * 2 ** min(steps, math.ceil(math.log2(cap / base))), cap)
