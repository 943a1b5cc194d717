"""A client's own rate limit, as client-go's rest.Config QPS and Burst make one: a token bucket
(flowcontrol.NewTokenBucketRateLimiter over golang.org/x/time/rate) that every request of one
clientset waits on before it is sent. Watches, streaming lists included, are not limited
(rest.Request.Watch skips the limiter: a watch is one long request, not a rate of them). The
bucket runs on the component's clock, so a simulated component is throttled in virtual time."""

from __future__ import annotations

import asyncio

from ..clock import Clock
from .metrics import RATE_LIMITER, VERBS

#: the requests that wait for a token (everything but `watch`)
LIMITED = ("get", "list", "list_page", "create", "update", "patch", "delete", "delete_collection",
           "get_scale", "update_scale", "create_subresource")


class TokenBucket:
    """golang.org/x/time/rate's Limiter as Wait uses it: `burst` tokens at first, `qps` more a
    second up to `burst`; each request reserves one, and when none is left it waits for the
    refill its reservation ran ahead of (so waiting requests go in the order they came). A wait
    cancelled before its time gives its token back, as Wait's Reservation.Cancel does."""

    def __init__(self, qps: float, burst: int, clock: Clock) -> None:
        self.qps, self.burst, self.clock = qps, burst, clock
        self.tokens = float(burst)
        self.last = clock.monotonic()
        #: the instant the latest reservation's token is there (the Limiter's lastEvent)
        self.last_event = self.last

    def _advance(self, now: float) -> float:
        """The tokens at `now`: those left at `last` and the refill since, up to `burst`."""
        return min(self.burst, self.tokens + max(0.0, now - self.last) * self.qps)

    def _take(self, now: float) -> float:
        """Takes a token at `now`; the instant it is there."""
        self.tokens = self._advance(now) - 1
        self.last = max(self.last, now)
        self.last_event = now - self.tokens / self.qps if self.tokens < 0 else now
        return self.last_event

    def reserve(self) -> float:
        """Takes a token; the seconds until it is there (0: at once)."""
        now = self.clock.monotonic()
        return self._take(now) - now

    def cancel(self, at: float) -> None:
        """Reservation.Cancel: a token reserved for `at`, not yet there, comes back, less the part
        the reservations made after it already counted on (they keep their times)."""
        now = self.clock.monotonic()
        restore = 1 - (self.last_event - at) * self.qps
        if at < now or restore <= 0:
            return
        self.tokens = min(self.burst, self._advance(now) + restore)
        self.last = max(self.last, now)
        if at == self.last_event and at - 1 / self.qps >= now:
            self.last_event = at - 1 / self.qps

    async def wait(self) -> float:
        """Waits for a token; the seconds it waited."""
        now = self.clock.monotonic()
        if (at := self._take(now)) > now:
            try:
                await self.clock.sleep(at - now)
            except asyncio.CancelledError:
                self.cancel(at)
                raise
            return at - now
        return 0.0


class RateLimitedClient:
    """`client` (LocalClient or HTTPClient) with every request but a watch waiting on `bucket`
    (None: none yet, as `nanokube simulate` starts a scheduler before virtual time runs); `named`
    children share the bucket, as the clients of one clientset do."""

    def __init__(self, client, bucket: TokenBucket | None) -> None:
        self.client, self.bucket = client, bucket
        #: the `host` of rest_client_rate_limiter_duration_seconds: an HTTP client's (an in-process
        #: client's waits are not counted, as its requests are not)
        self.host: str | None = getattr(client, "host", None)

    def throttled(self, wait: float, verb: str) -> None:
        """client-go's tryThrottle observation: every wait on the bucket, none at all without one."""
        if self.host is not None:
            RATE_LIMITER.labels(verb, self.host).observe(wait)

    def __getattr__(self, name: str):
        return getattr(self.client, name)

    def named(self, name: str) -> RateLimitedClient:
        return RateLimitedClient(self.client.named(name), self.bucket)

    def resource(self, group: str, version: str, plural: str) -> RateLimitedResource:
        return RateLimitedResource(self.client.resource(group, version, plural), self)

    async def get_raw(self, path: str, params: dict[str, str] | None = None) -> dict:
        """An AbsPath GET (the metrics APIs) waits on the bucket as any request of the clientset."""
        if self.bucket is not None:
            self.throttled(await self.bucket.wait(), "GET")
        return await self.client.get_raw(path, params)


class RateLimitedResource:
    """One resource's client whose requests wait on its client's bucket first."""

    def __init__(self, rc, owner: RateLimitedClient) -> None:
        self.rc, self.owner = rc, owner

    def __getattr__(self, name: str):
        attr = getattr(self.rc, name)
        if name not in LIMITED:
            return attr
        owner, verb = self.owner, VERBS[name]

        async def request(*args, **kw):
            if owner.bucket is not None:
                owner.throttled(await owner.bucket.wait(), verb)
            return await attr(*args, **kw)
        setattr(self, name, request)
        return request


def limited(client, qps: float, burst: int, clock: Clock):
    """`client` behind a bucket of its own; as client-go's, a negative qps sets no limit (a
    configuration defaults 0 to its own default first)."""
    return RateLimitedClient(client, TokenBucket(qps, burst, clock)) if qps > 0 else client


#: rest.DefaultQPS and DefaultBurst: the limit of a client whose rest.Config leaves QPS (and Burst) zero
DEFAULT_QPS, DEFAULT_BURST = 5.0, 10
BURST_REQUIRED = "burst is required to be greater than 0 when RateLimiter is not set and QPS is set to greater than 0"


def rest_limit(qps: float, burst: int) -> tuple[float, int]:
    """The limit client-go makes of a rest.Config's QPS and Burst as a component's flags set them:
    NewForConfig refuses a positive qps without a burst (ValueError, its words); a zero qps leaves
    the bucket to each REST client, rest's 5/s (a burst of 10 if that is zero too; upstream one
    bucket per API group, here one per clientset); a negative one none."""
    if qps > 0 and burst <= 0:
        raise ValueError(BURST_REQUIRED)
    if qps == 0:
        return DEFAULT_QPS, burst if burst > 0 else DEFAULT_BURST
    return qps, burst


class ClientBuilder:
    """kube-controller-manager's client builder under its --kube-api-qps/--kube-api-burst: every
    `named` client is a clientset of its own (ClientOrDie calls NewForConfig each time), so each
    has a bucket of its own; `builder` is the root client or the service-account client builder."""

    def __init__(self, builder, qps: float, burst: int, clock: Clock,
                 scaled: dict[str, tuple[int, int]] | None = None) -> None:
        """`scaled`: a client name's factors for qps and burst (a controller that raises its own)."""
        self.builder, self.qps, self.burst, self.clock = builder, qps, burst, clock
        self.scaled = scaled or {}

    def named(self, name: str):
        q, b = self.scaled.get(name, (1, 1))
        return limited(self.builder.named(name), self.qps * q, self.burst * b, self.clock)

    def unscaled(self, name: str):
        """`name`'s clientset at the builder's own limit, where `named` raises it: the garbage
        collector raises only its metadata client's qps, its Events go through a clientset at 1x."""
        return limited(self.builder.named(name), self.qps, self.burst, self.clock)
