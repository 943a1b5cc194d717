"""The TTL controller's node.alpha.kubernetes.io/ttl annotation, sized by the node count."""

import pytest

from nanokube.controllers.ttl import ANNOTATION, TTLController
from tests.controllers import eventually, make_stack


@pytest.fixture
async def env():
    s = await make_stack()
    ctl = TTLController(s.client)
    await ctl.start()
    yield s.client, ctl
    await ctl.stop()
    await s.close()


def _ttl(nodes, name: str, want: str):
    async def check():
        node = await nodes.get(name)
        return (node["metadata"].get("annotations") or {}).get(ANNOTATION) == want
    return check


async def test_nodes_get_ttl_zero_and_a_changed_value_is_put_back(env):
    client, _ = env
    nodes = client.resource("", "v1", "nodes")
    await nodes.create({"metadata": {"name": "n1"}})
    assert await eventually(_ttl(nodes, "n1", "0"))
    await nodes.patch("n1", {"metadata": {"annotations": {ANNOTATION: "7"}}})
    assert await eventually(_ttl(nodes, "n1", "0"))


async def test_past_100_nodes_the_ttl_is_15_and_back_to_0_below_90(env):
    client, ctl = env
    nodes = client.resource("", "v1", "nodes")
    for i in range(101):
        await nodes.create({"metadata": {"name": f"n{i}"}})
    assert await eventually(_ttl(nodes, "n100", "15"))
    assert (await nodes.get("n50"))["metadata"]["annotations"][ANNOTATION] == "0"  # set when it was added
    await nodes.patch("n50", {"metadata": {"labels": {"touched": "once"}}})  # an update re-syncs the node
    assert await eventually(_ttl(nodes, "n50", "15"))
    for i in range(12):
        await nodes.delete(f"n{i}")

    async def shrunk():
        return ctl.desired_ttl == 0

    assert await eventually(shrunk)
    await nodes.patch("n50", {"metadata": {"labels": {"touched": "twice"}}})
    assert await eventually(_ttl(nodes, "n50", "0"))
