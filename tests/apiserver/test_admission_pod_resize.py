"""Admission of pods/resize: ResourceQuota charges what a resize adds (upstream's podEvaluator
handles the resize subresource) and counts a pod being resized at what it holds meanwhile;
LimitRanger bounds a resize as it bounds a create."""

import pytest

from nanokube.machinery.errors import APIError
from tests.apiserver.test_admission_storage_quota import NS, pod, quota, rc

SMP = "application/strategic-merge-patch+json"


async def resize(pods, name, resources):
    return await pods.patch(name, {"spec": {"containers": [{"name": "main", "resources": resources}]}}, SMP,
                            namespace=NS, subresource="resize")


async def used(stack):
    return (await rc(stack, "resourcequotas").get("q", NS))["status"]["used"]


async def test_a_resize_is_charged_to_the_quota_and_refused_beyond_it(stack):
    await quota(stack, {"requests.cpu": "2", "limits.cpu": "4"})
    pods = rc(stack, "pods")
    await pods.create(pod("app", {"requests": {"cpu": "500m"}, "limits": {"cpu": "1"}}))
    assert await used(stack) == {"requests.cpu": "500m", "limits.cpu": "1"}
    await resize(pods, "app", {"requests": {"cpu": "1500m"}, "limits": {"cpu": "2"}})
    assert await used(stack) == {"requests.cpu": "1500m", "limits.cpu": "2"}
    with pytest.raises(APIError) as e:
        await resize(pods, "app", {"requests": {"cpu": "2500m"}, "limits": {"cpu": "3"}})
    assert (e.value.code, e.value.message) == (403, 'pods "app" is forbidden: exceeded quota: q, requested: '
                                               'requests.cpu=1, used: requests.cpu=1500m, limited: requests.cpu=2')
    got = await pods.get("app", NS)
    assert got["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "1500m"}, "limits": {"cpu": "2"}}
    assert await used(stack) == {"requests.cpu": "1500m", "limits.cpu": "2"}


async def test_a_pod_being_resized_is_charged_what_its_node_allocated_when_that_is_more(stack):
    """Shrunk from 1500m to 500m while its node still runs it with 1500m: a resize back up to 1700m
    adds only 200m to the charge (quota's PodUsageFunc reads the container statuses)."""
    await quota(stack, {"requests.cpu": "1600m"})
    pods = rc(stack, "pods")
    await pods.create(pod("app", {"requests": {"cpu": "1500m"}}))
    await resize(pods, "app", {"requests": {"cpu": "500m"}})
    p = await pods.get("app", NS)
    await pods.update({**p, "status": {"phase": "Running", "containerStatuses": [{
        "name": "main", "image": "busybox", "imageID": "", "ready": True, "restartCount": 0,
        "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}, "allocatedResources": {"cpu": "1500m"},
        "resources": {"requests": {"cpu": "1500m"}}}]}}, subresource="status")
    with pytest.raises(APIError) as e:
        await resize(pods, "app", {"requests": {"cpu": "1700m"}})
    assert e.value.message == ('pods "app" is forbidden: exceeded quota: q, requested: requests.cpu=200m, '
                               'used: requests.cpu=1500m, limited: requests.cpu=1600m')


async def test_limit_ranger_bounds_a_resize(stack):
    await rc(stack, "limitranges").create({"metadata": {"name": "lr", "namespace": NS}, "spec": {"limits": [
        {"type": "Container", "max": {"cpu": "1"}}]}})
    pods = rc(stack, "pods")
    await pods.create(pod("app", {"requests": {"cpu": "500m"}, "limits": {"cpu": "1"}}))
    with pytest.raises(APIError) as e:
        await resize(pods, "app", {"requests": {"cpu": "500m"}, "limits": {"cpu": "2"}})
    assert (e.value.code, e.value.message) == (403, 'pods "app" is forbidden: maximum cpu usage per Container is 1, '
                                               'but limit is 2')
    got = await resize(pods, "app", {"requests": {"cpu": "800m"}, "limits": {"cpu": "1"}})
    assert got["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "800m"}, "limits": {"cpu": "1"}}
