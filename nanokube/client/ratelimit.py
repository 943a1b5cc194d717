"""A client's own rate limit, as client-go's rest.Config QPS and Burst make one: a token bucket
(flowcontrol.NewTokenBucketRateLimiter over golang.org/x/time/rate) that every request of one
clientset waits on before it is sent. Watches, streaming lists included, are not limited
(rest.Request.Watch skips the limiter: a watch is one long request, not a rate of them). The
bucket runs on the component's clock, so a simulated component is throttled in virtual time."""

from __future__ import annotations

from ..clock import Clock

#: the requests that wait for a token (everything but `watch`)
LIMITED = ("get", "list", "list_page", "create", "update", "patch", "delete", "delete_collection",
           "get_scale", "update_scale", "create_subresource")


class TokenBucket:
    """golang.org/x/time/rate's Limiter as Wait uses it: `burst` tokens at first, `qps` more a
    second up to `burst`; each request reserves one, and when none is left it waits for the
    refill its reservation ran ahead of (so waiting requests go in the order they came)."""

    def __init__(self, qps: float, burst: int, clock: Clock) -> None:
        self.qps, self.burst, self.clock = qps, burst, clock
        self.tokens = float(burst)
        self.last = clock.monotonic()

    def reserve(self) -> float:
        """Takes a token; the seconds until it is there (0: at once)."""
        now = self.clock.monotonic()
        self.tokens = min(self.burst, self.tokens + max(0.0, now - self.last) * self.qps) - 1
        self.last = max(self.last, now)
        return -self.tokens / self.qps if self.tokens < 0 else 0.0

    async def wait(self) -> None:
        if (delay := self.reserve()) > 0:
            await self.clock.sleep(delay)


class RateLimitedClient:
    """`client` (LocalClient or HTTPClient) with every request but a watch waiting on `bucket`
    (None: none yet, as `nanokube simulate` starts a scheduler before virtual time runs); `named`
    children share the bucket, as the clients of one clientset do."""

    def __init__(self, client, bucket: TokenBucket | None) -> None:
        self.client, self.bucket = client, bucket

    def __getattr__(self, name: str):
        return getattr(self.client, name)

    def named(self, name: str) -> RateLimitedClient:
        return RateLimitedClient(self.client.named(name), self.bucket)

    def resource(self, group: str, version: str, plural: str) -> RateLimitedResource:
        return RateLimitedResource(self.client.resource(group, version, plural), self)


class RateLimitedResource:
    """One resource's client whose requests wait on its client's bucket first."""

    def __init__(self, rc, owner: RateLimitedClient) -> None:
        self.rc, self.owner = rc, owner

    def __getattr__(self, name: str):
        attr = getattr(self.rc, name)
        if name not in LIMITED:
            return attr
        owner = self.owner

        async def request(*args, **kw):
            if owner.bucket is not None:
                await owner.bucket.wait()
            return await attr(*args, **kw)
        setattr(self, name, request)
        return request


def limited(client, qps: float, burst: int, clock: Clock):
    """`client` behind a bucket of its own; as client-go's, a negative qps sets no limit (a
    configuration defaults 0 to its own default first)."""
    return RateLimitedClient(client, TokenBucket(qps, burst, clock)) if qps > 0 else client
