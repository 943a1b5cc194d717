"""The pod resources endpoint's rate limit (pkg/kubelet/apis/podresources/grpc/ratelimit.go): a
token bucket in front of every call, refused with ResourceExhausted. Its defaults are upstream's,
which it chose from the API's known consumers: none needs more than 100 calls a second."""

from __future__ import annotations

from ...clock import Clock

DEFAULT_QPS = 100
DEFAULT_BURST = 10
#: what a refused call is told (ErrorLimitExceeded)
LIMIT_EXCEEDED = "rejected by rate limit"


class Limiter:
    """golang.org/x/time/rate's Limiter as Allow uses it: `burst` tokens at first, `qps` more a
    second up to `burst`; a call takes one or is refused."""

    def __init__(self, clock: Clock, qps: float = DEFAULT_QPS, burst: int = DEFAULT_BURST) -> None:
        self.clock = clock
        self.qps = qps
        self.burst = burst
        self.tokens = float(burst)
        self.last = clock.monotonic()

    def allow(self) -> bool:
        """Only a granted call moves the state on; a shortfall worth under a nanosecond of refill
        is granted, as Go's wait for it truncates to a zero Duration."""
        now = self.clock.monotonic()
        tokens = min(self.burst, self.tokens + max(0.0, now - self.last) * self.qps)
        if (1 - tokens) / self.qps * 1e9 >= 1:
            return False
        self.tokens, self.last = tokens - 1, now
        return True
