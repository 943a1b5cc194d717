"""Admission keeps its LimitRange, ResourceQuota and PriorityClass listings
between requests (lookup.Listing): a pod created right after one of those is
created, updated or deleted is admitted as a fresh listing would admit it."""

import copy

import pytest

from nanokube.machinery.errors import APIError
from tests.controllers import make_stack

NS = "default"


@pytest.fixture
async def stack():
    s = await make_stack()
    await s.client.resource("", "v1", "namespaces").create({"metadata": {"name": "other"}})
    yield s
    await s.close()


def rc(stack, plural, group=""):
    return stack.client.resource(group, "v1", plural)


def pod(name, ns=NS, resources=None):
    c = {"name": "main", "image": "busybox", **({"resources": resources} if resources else {})}
    return {"metadata": {"name": name, "namespace": ns}, "spec": {"containers": [c]}}


def limits(got):
    return got["spec"]["containers"][0].get("resources", {}).get("limits")


async def test_limit_range_changes_reach_the_next_pod(stack):
    pods, lrs = rc(stack, "pods"), rc(stack, "limitranges")
    assert limits(await pods.create(pod("before"))) is None
    lr = await lrs.create({"metadata": {"name": "lr", "namespace": NS}, "spec": {"limits": [
        {"type": "Container", "default": {"cpu": "500m"}}]}})
    assert limits(await pods.create(pod("created"))) == {"cpu": "500m"}
    assert limits(await pods.create(pod("elsewhere", "other"))) is None  # another namespace's ranges
    lr = copy.deepcopy(lr)
    lr["spec"]["limits"][0]["default"] = {"cpu": "700m"}
    await lrs.update(lr)
    assert limits(await pods.create(pod("updated"))) == {"cpu": "700m"}
    await lrs.delete("lr", NS)
    assert limits(await pods.create(pod("deleted"))) is None


async def test_quota_changes_reach_the_next_pod(stack):
    pods, quotas = rc(stack, "pods"), rc(stack, "resourcequotas")
    await pods.create(pod("before", resources={"requests": {"cpu": "100m"}}))
    await quotas.create({"metadata": {"name": "q", "namespace": NS}, "spec": {"hard": {"requests.cpu": "1"}}})
    q = {**await quotas.get("q", NS), "status": {"hard": {"requests.cpu": "1"}, "used": {"requests.cpu": "0"}}}
    await quotas.update(q, subresource="status")
    with pytest.raises(APIError) as e:
        await pods.create(pod("nocpu"))
    assert e.value.message == 'pods "nocpu" is forbidden: failed quota: q: must specify requests.cpu for: main'
    await pods.create(pod("fits", resources={"requests": {"cpu": "600m"}}))
    with pytest.raises(APIError) as e:  # the status the previous create wrote is what this one reads
        await pods.create(pod("over", resources={"requests": {"cpu": "600m"}}))
    assert "used: requests.cpu=600m, limited: requests.cpu=1" in e.value.message
    await pods.create(pod("elsewhere", "other"))
    await quotas.delete("q", NS)
    await pods.create(pod("nocpu"))


async def test_priority_class_changes_reach_the_next_pod(stack):
    pods, pcs = rc(stack, "pods"), rc(stack, "priorityclasses", "scheduling.k8s.io")
    assert (await pods.create(pod("before")))["spec"]["priority"] == 0
    pc = await pcs.create({"metadata": {"name": "high"}, "value": 1000, "globalDefault": True})
    got = await pods.create(pod("created"))
    assert (got["spec"]["priorityClassName"], got["spec"]["priority"]) == ("high", 1000)
    pc = await pcs.update({**pc, "globalDefault": False})
    assert "priorityClassName" not in (await pods.create(pod("updated")))["spec"]
    await pcs.update({**pc, "globalDefault": True})
    assert (await pods.create(pod("again")))["spec"]["priority"] == 1000
    await pcs.delete("high")
    got = await pods.create(pod("deleted"))
    assert ("priorityClassName" not in got["spec"], got["spec"]["priority"]) == (True, 0)


async def test_cache_change_number_moves_with_each_write(stack):
    prefix = "/registry/limitranges/"
    seen = [stack.cache.changes(prefix)]
    lr = await rc(stack, "limitranges").create({"metadata": {"name": "lr", "namespace": NS}, "spec": {"limits": []}})
    seen.append(stack.cache.changes(prefix))
    await rc(stack, "configmaps").create({"metadata": {"name": "cm", "namespace": NS}})
    assert stack.cache.changes(prefix) == seen[-1]  # another resource's write
    await rc(stack, "limitranges").update({**lr, "metadata": {**lr["metadata"], "labels": {"a": "b"}}})
    seen.append(stack.cache.changes(prefix))
    await rc(stack, "limitranges").delete("lr", NS)
    seen.append(stack.cache.changes(prefix))
    await stack.cache._relist()
    seen.append(stack.cache.changes(prefix))
    assert len(set(seen)) == len(seen)
