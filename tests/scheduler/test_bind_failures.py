"""A binding cycle whose plugin fails (the pod deleted between scheduling and
binding) fails that attempt: nothing escapes the binding task unseen, and the
scheduler goes on binding other pods."""

import asyncio
import gc

import pytest

from nanokube.machinery.errors import not_found
from tests.controllers import eventually
from tests.scheduler import node, pod
from tests.scheduler.test_scheduler import add_node, bound, strip_uid


@pytest.fixture
async def env(stack):
    client, sched = stack
    await add_node(client, node("n1", "4", "8Gi"))
    await sched.start()
    return stack


@pytest.mark.parametrize("failure", ["deleted", "bug"])
async def test_a_failing_binding_cycle_is_handled(env, failure):
    client, sched = env
    pods = client.resource("", "v1", "pods")
    fwk = sched.frameworks["default-scheduler"]
    real_pre_bind = fwk.run_pre_bind
    unretrieved = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _, ctx: unretrieved.append(ctx))

    async def pre_bind(state, info, node_name):
        if info.pod["metadata"]["name"] == "doomed":
            await pods.delete("doomed", "default", grace_period_seconds=0)
            if failure == "deleted":
                raise not_found("", "pods", "doomed")
            raise RuntimeError("a plugin bug")
        return await real_pre_bind(state, info, node_name)

    fwk.run_pre_bind = pre_bind
    try:
        await pods.create(strip_uid(pod("doomed", "1")))
        await pods.create(strip_uid(pod("fine", "1")))
        assert await eventually(bound(pods, "fine")) == "n1"
        await asyncio.sleep(0.2)
        gc.collect()
        assert not unretrieved, unretrieved
    finally:
        loop.set_exception_handler(None)


async def test_a_binding_cut_by_the_connection_is_one_error_line_and_retried(env, caplog):
    """The server gone mid-binding (a kill, a restart) is an error the pod's next attempt
    retries, told in one line, not a plugin bug's traceback."""
    import aiohttp

    client, sched = env
    pods = client.resource("", "v1", "pods")
    fwk = sched.frameworks["default-scheduler"]
    real_bind, cuts = fwk.run_bind, []

    async def bind(state, info, node_name):
        if not cuts:
            cuts.append(info.pod["metadata"]["name"])
            raise aiohttp.ServerDisconnectedError()
        return await real_bind(state, info, node_name)

    fwk.run_bind = bind
    await pods.create(strip_uid(pod("cut", "1")))
    assert await eventually(bound(pods, "cut")) == "n1"
    failed = [r for r in caplog.records if r.getMessage().startswith("binding default/cut to n1 failed")]
    assert cuts == ["cut"] and len(failed) == 1 and failed[0].exc_info is None
    assert "Server disconnected" in failed[0].getMessage()
