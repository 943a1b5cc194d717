"""The fixtures most scheduler tests start from: an API server in the test's loop (the
controllers' test stack) with a scheduler, seed 1, over it."""

import pytest

from nanokube.scheduler.scheduler import Scheduler
from tests.controllers import make_stack
from tests.scheduler import add_priority_classes
from tests.scheduler.test_scheduler import add_node


@pytest.fixture
async def stack():
    """(client, scheduler), the scheduler not started: a test adds what it must find first.
    Stopped, and the API server closed, after the test."""
    s = await make_stack()
    await add_priority_classes(s.client)
    sched = Scheduler(s.client, seed=1)
    yield s.client, sched
    await sched.stop()
    await s.close()


@pytest.fixture
async def schedulers():
    """(client, start): `await start(*nodes)` adds the nodes and starts another scheduler over the
    same API server (one that restarts, or one beside it); each is stopped after the test."""
    s = await make_stack()
    await add_priority_classes(s.client)
    started = []

    async def start(*nodes):
        for n in nodes:
            await add_node(s.client, n)
        sched = Scheduler(s.client, seed=1)
        await sched.start()
        started.append(sched)
        return sched

    yield s.client, start
    for sched in started:
        await sched.stop()
    await s.close()
