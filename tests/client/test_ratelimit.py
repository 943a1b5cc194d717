"""A clientset's QPS/Burst bucket (client-go's token bucket over x/time/rate) on a fake clock."""

import asyncio

from nanokube.client.ratelimit import limited
from nanokube.clock import VirtualClock


class _Lists:
    """A client whose lists note the instant each was sent."""

    def __init__(self, clock):
        self.clock = clock
        self.sent: list[float] = []

    def resource(self, group, version, plural):
        return self

    async def list(self, namespace=None):
        self.sent.append(self.clock.monotonic())
        return [], "1"

    async def get_raw(self, path, params=None):
        self.sent.append(self.clock.monotonic())
        return {}


async def _spent():
    """A pods client at 1 qps with a burst of 1, its burst spent at 0 by one list."""
    clock = VirtualClock()
    backend = _Lists(clock)
    pods = limited(backend, 1.0, 1, clock).resource("", "v1", "pods")
    await pods.list()
    return clock, backend, pods


async def test_a_request_cancelled_while_it_waits_gives_its_token_back():
    """As x/time/rate's Wait cancels its reservation when its context ends: a request reserves no
    token it never used, so the next one goes as soon as the first would have."""
    clock, backend, pods = await _spent()
    first = asyncio.create_task(pods.list())  # due at 1
    await clock.advance(0.5)
    first.cancel()
    await asyncio.gather(first, return_exceptions=True)
    second = asyncio.create_task(pods.list())
    await clock.advance(0.5)
    assert second.done() and backend.sent == [0.0, 1.0]  # at 1, not at 2 behind a token nobody used
    third = asyncio.create_task(pods.list())
    await clock.advance(0.9)
    assert not third.done()
    await clock.advance(0.1)
    assert third.done() and backend.sent == [0.0, 1.0, 2.0]


async def test_a_cancelled_request_leaves_the_times_of_those_reserved_after_it():
    """Reservation.Cancel gives back only what the reservations after it have not counted on: a
    request that reserved behind the cancelled one keeps its time, and so does the next."""
    clock, backend, pods = await _spent()
    first = asyncio.create_task(pods.list())  # due at 1
    second = asyncio.create_task(pods.list())  # due at 2
    await clock.advance(0.5)
    first.cancel()
    await asyncio.gather(first, return_exceptions=True)
    third = asyncio.create_task(pods.list())
    await clock.advance(2.4)
    assert backend.sent == [0.0, 2.0] and not third.done()
    await clock.advance(0.6)
    assert third.done() and backend.sent == [0.0, 2.0, 3.0]
    await second


async def test_a_raw_get_waits_on_the_bucket_too():
    """An AbsPath GET (the HPA's reads of the metrics APIs) takes a token as any other request."""
    clock = VirtualClock()
    backend = _Lists(clock)
    client = limited(backend, 1.0, 1, clock)
    await client.get_raw("/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue")
    second = asyncio.create_task(client.get_raw("/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue"))
    await clock.advance(0.5)
    assert not second.done()
    await clock.advance(0.5)
    assert second.done() and backend.sent == [0.0, 1.0]
