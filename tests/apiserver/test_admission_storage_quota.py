"""In-tree admission of storage, quota, limits and runtime classes, through
the REST layer: DefaultStorageClass, StorageObjectInUseProtection,
LimitRanger, RuntimeClass and ResourceQuota with upstream's messages."""

import asyncio

import pytest

from nanokube.machinery.errors import APIError
from nanokube.store.sqlite import SQLiteStore
from tests.controllers import make_stack

NS = "default"


def rc(stack, plural, group="", version="v1"):
    return stack.client.resource(group, version, plural)


def pod(name, resources=None, **spec):
    c = {"name": "main", "image": "busybox", **({"resources": resources} if resources else {})}
    return {"metadata": {"name": name, "namespace": NS}, "spec": {"containers": [c], **spec}}


async def test_default_class_and_protection_finalizers(stack):
    claims = rc(stack, "persistentvolumeclaims")
    body = {"metadata": {"name": "a", "namespace": NS},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}
    assert "storageClassName" not in (await claims.create(body))["spec"]  # no default class yet
    sc = rc(stack, "storageclasses", "storage.k8s.io")
    await sc.create({"metadata": {"name": "standard", "annotations": {
        "storageclass.kubernetes.io/is-default-class": "true"}}, "provisioner": "nanokube.io/local-path"})
    got = await claims.create({**body, "metadata": {"name": "b", "namespace": NS}})
    assert got["spec"]["storageClassName"] == "standard"
    assert got["metadata"]["finalizers"] == ["kubernetes.io/pvc-protection"]
    explicit = {**body, "metadata": {"name": "c", "namespace": NS}, "spec": {**body["spec"], "storageClassName": ""}}
    assert (await claims.create(explicit))["spec"]["storageClassName"] == ""
    pv = await rc(stack, "persistentvolumes").create({"metadata": {"name": "pv1"}, "spec": {
        "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/tmp/pv1"}}})
    assert pv["metadata"]["finalizers"] == ["kubernetes.io/pv-protection"] and pv["status"]["phase"] == "Pending"


async def test_limit_ranger_defaults_and_bounds(stack):
    await rc(stack, "limitranges").create({"metadata": {"name": "lr", "namespace": NS}, "spec": {"limits": [
        {"type": "Container", "default": {"cpu": "500m", "memory": "256Mi"}, "defaultRequest": {"cpu": "100m"},
         "max": {"cpu": "1"}}]}})
    pods = rc(stack, "pods")
    got = await pods.create(pod("p"))
    res = got["spec"]["containers"][0]["resources"]
    assert res == {"limits": {"cpu": "500m", "memory": "256Mi"}, "requests": {"cpu": "100m", "memory": "256Mi"}}
    assert got["metadata"]["annotations"]["kubernetes.io/limit-ranger"] == \
        "LimitRanger plugin set: cpu, memory request for container main; cpu, memory limit for container main"
    with pytest.raises(APIError) as e:
        await pods.create(pod("big", {"limits": {"cpu": "2"}}))
    assert e.value.code == 403
    assert e.value.message == 'pods "big" is forbidden: maximum cpu usage per Container is 1, but limit is 2'


async def test_runtime_class_admission(stack):
    await rc(stack, "runtimeclasses", "node.k8s.io").create({
        "metadata": {"name": "gvisor"}, "handler": "runsc", "overhead": {"podFixed": {"cpu": "250m"}},
        "scheduling": {"nodeSelector": {"sandbox": "true"}, "tolerations": [{"key": "sandbox", "operator": "Exists"}]}})
    pods = rc(stack, "pods")
    got = await pods.create(pod("p", runtimeClassName="gvisor"))
    assert got["spec"]["overhead"] == {"cpu": "250m"} and got["spec"]["nodeSelector"] == {"sandbox": "true"}
    assert {"key": "sandbox", "operator": "Exists"} in got["spec"]["tolerations"]
    with pytest.raises(APIError) as e:
        await pods.create(pod("q", runtimeClassName="kata"))
    assert e.value.message == 'pods "q" is forbidden: pod rejected: RuntimeClass "kata" not found'
    with pytest.raises(APIError) as e:
        await pods.create(pod("r", runtimeClassName="gvisor", nodeSelector={"sandbox": "false"}))
    assert "conflict: runtimeClass.scheduling.nodeSelector[sandbox] = true; pod.spec.nodeSelector[sandbox] = false" \
        in e.value.message


async def quota(stack, hard, name="q"):
    quotas = rc(stack, "resourcequotas")
    await quotas.create({"metadata": {"name": name, "namespace": NS}, "spec": {"hard": hard}})
    # what the resource-quota controller writes first
    q = {**await quotas.get(name, NS)}  # only status is set: a shallow copy keeps the cache's as it is
    q["status"] = {"hard": hard, "used": {k: "0" for k in hard}}
    return await quotas.update(q, subresource="status")


async def test_quota_refuses_fifth_gpu_pod_and_claim(stack):
    await quota(stack, {"requests.nvidia.com/gpu": "4", "gpu.nanokube.io.deviceclass.resource.k8s.io/devices": "4"})
    pods = rc(stack, "pods")
    for i in range(4):
        await pods.create(pod(f"gpu-{i}", {"limits": {"nvidia.com/gpu": "1"}}))
    with pytest.raises(APIError) as e:
        await pods.create(pod("gpu-4", {"limits": {"nvidia.com/gpu": "1"}}))
    assert (e.value.code, e.value.message) == (403, 'pods "gpu-4" is forbidden: exceeded quota: q, requested: '
                                               'requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=4, '
                                               'limited: requests.nvidia.com/gpu=4')
    claims = rc(stack, "resourceclaims", "resource.k8s.io")

    def claim(name, count=1):
        return {"metadata": {"name": name, "namespace": NS}, "spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "gpu.nanokube.io", "count": count}}]}}}

    await claims.create(claim("two", 2))
    await claims.create(claim("one"))
    with pytest.raises(APIError) as e:
        await claims.create(claim("much", 2))
    assert e.value.message == ('resourceclaims.resource.k8s.io "much" is forbidden: exceeded quota: q, requested: '
                               'gpu.nanokube.io.deviceclass.resource.k8s.io/devices=2, used: '
                               'gpu.nanokube.io.deviceclass.resource.k8s.io/devices=3, limited: '
                               'gpu.nanokube.io.deviceclass.resource.k8s.io/devices=4')
    q = await rc(stack, "resourcequotas").get("q", NS)
    assert q["status"]["used"] == {"requests.nvidia.com/gpu": "4",
                                   "gpu.nanokube.io.deviceclass.resource.k8s.io/devices": "3"}


async def test_a_claim_charges_its_class_as_the_implicit_extended_resource(stack):
    """DRAExtendedResource: a claim's devices of class C also count as
    requests.deviceclass.resource.kubernetes.io/C (kubernetes#134210), so a quota
    on the extended resource cannot be sidestepped with a ResourceClaim."""
    await quota(stack, {"requests.deviceclass.resource.kubernetes.io/gpu.nanokube.io": "2"})
    claims = rc(stack, "resourceclaims", "resource.k8s.io")

    def claim(name, count):
        return {"metadata": {"name": name, "namespace": NS}, "spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "gpu.nanokube.io", "count": count}}]}}}

    await claims.create(claim("two", 2))
    with pytest.raises(APIError) as e:
        await claims.create(claim("more", 1))
    assert (e.value.code, e.value.message) == (403, 'resourceclaims.resource.k8s.io "more" is forbidden: exceeded '
                                               'quota: q, requested: requests.deviceclass.resource.kubernetes.io/'
                                               'gpu.nanokube.io=1, used: requests.deviceclass.resource.kubernetes.io/'
                                               'gpu.nanokube.io=2, limited: requests.deviceclass.resource.kubernetes'
                                               '.io/gpu.nanokube.io=2')


async def test_a_claim_charges_its_class_extended_resource_name_less_its_pods_requests(stack):
    """A DeviceClass serving `example.com/gpu` (extendedResourceName) makes its claims charge
    requests.example.com/gpu (kubernetes#134210), so a ResourceClaim cannot take devices past a
    quota a pod asking `example.com/gpu` is held to; the claim the scheduler makes for a pod
    charges only what its pod does not (getVerifiedPodUsage), so the pod is not counted twice."""
    await rc(stack, "deviceclasses", "resource.k8s.io").create(
        {"metadata": {"name": "gpu.example.com"}, "spec": {"extendedResourceName": "example.com/gpu"}})
    await quota(stack, {"requests.example.com/gpu": "3"})
    p = await rc(stack, "pods").create(pod("p", {"limits": {"example.com/gpu": "2"}}))
    claims = rc(stack, "resourceclaims", "resource.k8s.io")

    def claim(name, count, **meta):
        return {"metadata": {"name": name, "namespace": NS, **meta}, "spec": {"devices": {"requests": [
            {"name": "container-0-request-0", "exactly": {"deviceClassName": "gpu.example.com", "count": count}}]}}}

    made = {"annotations": {"resource.kubernetes.io/extended-resource-claim": "true"}, "ownerReferences": [
        {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": p["metadata"]["uid"], "controller": True}]}
    await claims.create(claim("p-gpu-x", 2, **made))
    used = (await rc(stack, "resourcequotas").get("q", NS))["status"]["used"]
    assert used == {"requests.example.com/gpu": "2"}
    with pytest.raises(APIError) as e:
        await claims.create(claim("direct", 2))
    assert (e.value.code, e.value.message) == (403, 'resourceclaims.resource.k8s.io "direct" is forbidden: exceeded '
                                               'quota: q, requested: requests.example.com/gpu=2, used: '
                                               'requests.example.com/gpu=2, limited: requests.example.com/gpu=3')
    # a second claim saying it is the same pod's is not: the pod's first claim is p-gpu-x
    with pytest.raises(APIError) as e:
        await claims.create(claim("p-gpu-y", 2, **made))
    assert e.value.code == 403 and "requested: requests.example.com/gpu=2" in e.value.message
    await claims.create(claim("direct", 1))
    assert (await rc(stack, "resourcequotas").get("q", NS))["status"]["used"] == {"requests.example.com/gpu": "3"}


async def test_a_claim_update_that_drops_its_pod_owner_is_charged(stack):
    """claimEvaluator.Handles takes updates: a pod's extended-resource claim charges none of
    what its pod charges, and an update that makes it nobody's (its owner reference gone)
    is checked for the extended resources it then charges, as a create would be."""
    await rc(stack, "deviceclasses", "resource.k8s.io").create(
        {"metadata": {"name": "gpu.example.com"}, "spec": {"extendedResourceName": "example.com/gpu"}})
    await quota(stack, {"requests.example.com/gpu": "3"})
    p = await rc(stack, "pods").create(pod("p", {"limits": {"example.com/gpu": "2"}}))
    claims = rc(stack, "resourceclaims", "resource.k8s.io")
    made = await claims.create({"metadata": {
        "name": "p-gpu-x", "namespace": NS, "annotations": {"resource.kubernetes.io/extended-resource-claim": "true"},
        "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": p["metadata"]["uid"],
                             "controller": True}]}, "spec": {"devices": {"requests": [
                                 {"name": "r", "exactly": {"deviceClassName": "gpu.example.com", "count": 2}}]}}})
    with pytest.raises(APIError) as e:
        await claims.update({**made, "metadata": {**made["metadata"], "ownerReferences": []}})
    assert (e.value.code, e.value.message) == (403, 'resourceclaims.resource.k8s.io "p-gpu-x" is forbidden: exceeded '
                                               'quota: q, requested: requests.example.com/gpu=2, used: '
                                               'requests.example.com/gpu=2, limited: requests.example.com/gpu=3')
    assert (await claims.get("p-gpu-x", NS))["metadata"]["ownerReferences"] == made["metadata"]["ownerReferences"]


@pytest.fixture
async def sqlite_stack(tmp_path):
    """On SQLite, as `nanokube up`: its watch cache follows the store a moment behind a write."""
    s = await make_stack(store=SQLiteStore(str(tmp_path / "state.db")))
    yield s
    await s.close()


async def test_concurrent_creates_under_a_quota_are_admitted_or_refused_never_conflict(sqlite_stack):
    """Creates racing for one quota (a ReplicaSet's slow-start batch) each see the usage the others wrote:
    upstream's evaluator re-reads a quota that changed under it, so a client gets the pod or
    'exceeded quota', never the quota's own 409 (every FailedCreate of a Deployment under a GPU quota)."""
    stack = sqlite_stack
    await quota(stack, {"requests.nvidia.com/gpu": "3", "pods": "10"})
    pods = rc(stack, "pods")
    results = await asyncio.gather(*(pods.create(pod(f"g-{i}", {"limits": {"nvidia.com/gpu": "1"}}))
                                     for i in range(8)), return_exceptions=True)
    refused = [r for r in results if isinstance(r, Exception)]
    assert len(results) - len(refused) == 3
    assert all(isinstance(r, APIError) and r.code == 403 and "exceeded quota: q" in r.message for r in refused)
    q = await rc(stack, "resourcequotas").get("q", NS)
    assert q["status"]["used"] == {"requests.nvidia.com/gpu": "3", "pods": "3"}


async def test_quota_counts_and_compute_constraints(stack):
    await quota(stack, {"count/configmaps": "1", "requests.cpu": "1"})
    cms = rc(stack, "configmaps")
    await cms.create({"metadata": {"name": "a", "namespace": NS}})
    with pytest.raises(APIError) as e:
        await cms.create({"metadata": {"name": "b", "namespace": NS}})
    assert "exceeded quota: q, requested: count/configmaps=1, used: count/configmaps=1, limited: count/configmaps=1" \
        in e.value.message
    with pytest.raises(APIError) as e:
        await rc(stack, "pods").create(pod("nocpu"))
    assert e.value.message == 'pods "nocpu" is forbidden: failed quota: q: must specify requests.cpu for: main'
    with pytest.raises(APIError):
        await rc(stack, "pods").create(pod("much", {"requests": {"cpu": "1500m"}}))
    await rc(stack, "pods").create(pod("fits", {"requests": {"cpu": "500m"}}))


async def test_storage_quota_per_class_and_claim_limits(stack):
    await quota(stack, {"requests.storage": "10Gi", "fast.storageclass.storage.k8s.io/requests.storage": "3Gi",
                        "fast.storageclass.storage.k8s.io/persistentvolumeclaims": "5"})
    await rc(stack, "limitranges").create({"metadata": {"name": "lr", "namespace": NS}, "spec": {"limits": [
        {"type": "PersistentVolumeClaim", "min": {"storage": "1Gi"}, "max": {"storage": "8Gi"}}]}})
    claims = rc(stack, "persistentvolumeclaims")

    def claim(name, size, cls="fast"):
        return {"metadata": {"name": name, "namespace": NS}, "spec": {
            "accessModes": ["ReadWriteOnce"], "storageClassName": cls, "resources": {"requests": {"storage": size}}}}

    await claims.create(claim("a", "2Gi"))
    with pytest.raises(APIError) as e:
        await claims.create(claim("b", "2Gi"))
    assert e.value.message == (
        'persistentvolumeclaims "b" is forbidden: exceeded quota: q, requested: '
        "fast.storageclass.storage.k8s.io/requests.storage=2Gi, used: fast.storageclass.storage.k8s.io/"
        "requests.storage=2Gi, limited: fast.storageclass.storage.k8s.io/requests.storage=3Gi")
    await claims.create(claim("c", "7Gi", "slow"))
    with pytest.raises(APIError) as e:
        await claims.create(claim("d", "512Mi", "slow"))
    assert e.value.message == ('persistentvolumeclaims "d" is forbidden: minimum storage usage per '
                               "PersistentVolumeClaim is 1Gi, but request is 512Mi")
    with pytest.raises(APIError) as e:
        await claims.create(claim("e", "20Gi", "slow"))
    # maxRequestConstraint: a claim's max is held against its request, and says so
    assert e.value.message == ('persistentvolumeclaims "e" is forbidden: maximum storage usage per '
                               "PersistentVolumeClaim is 8Gi, but request is 20Gi")
    used = (await rc(stack, "resourcequotas").get("q", NS))["status"]["used"]
    assert used == {"requests.storage": "9Gi", "fast.storageclass.storage.k8s.io/requests.storage": "2Gi",
                    "fast.storageclass.storage.k8s.io/persistentvolumeclaims": "1"}


async def test_quota_without_status_constrains_nothing_yet(stack):
    await rc(stack, "resourcequotas").create({"metadata": {"name": "fresh", "namespace": NS},
                                              "spec": {"hard": {"count/configmaps": "0"}}})
    created = await rc(stack, "configmaps").create({"metadata": {"name": "early", "namespace": NS}})
    assert created["metadata"]["name"] == "early"


async def test_limit_ranger_ratio_and_pod_limits(stack):
    await rc(stack, "limitranges").create({"metadata": {"name": "lr", "namespace": NS}, "spec": {"limits": [
        {"type": "Container", "maxLimitRequestRatio": {"memory": "2"}},
        {"type": "Pod", "max": {"cpu": "1"}}]}})
    pods = rc(stack, "pods")
    with pytest.raises(APIError) as e:
        await pods.create(pod("greedy", {"requests": {"memory": "1Gi"}, "limits": {"memory": "3Gi", "cpu": "500m"}}))
    assert e.value.message == ('pods "greedy" is forbidden: memory max limit to request ratio per Container is 2, '
                               "but provided ratio is 3.000000")
    two = pod("two", {"requests": {"memory": "1Gi"}, "limits": {"memory": "1Gi", "cpu": "600m"}})
    two["spec"]["containers"].append({"name": "side", "image": "busybox", "resources": {
        "requests": {"memory": "1Gi"}, "limits": {"memory": "1Gi", "cpu": "600m"}}})
    with pytest.raises(APIError) as e:
        await pods.create(two)
    assert e.value.message == 'pods "two" is forbidden: maximum cpu usage per Pod is 1, but limit is 1200m'


async def test_quota_charges_an_init_container_beside_the_sidecars_before_it(stack):
    """PodRequests: an init container runs next to the sidecars started before it, and that sum
    (its own quantity first, so in its format, as Go's Quantity.Add keeps the first term's) is the
    pod's request when it is the largest."""
    await quota(stack, {"requests.memory": "1Gi"})
    p = pod("init", {"requests": {"memory": "100Mi"}})
    p["spec"]["initContainers"] = [
        {"name": "side", "image": "busybox", "restartPolicy": "Always", "resources": {"requests": {"memory": "1Gi"}}},
        {"name": "setup", "image": "busybox", "resources": {"requests": {"memory": "2000M"}}}]
    with pytest.raises(APIError) as e:
        await rc(stack, "pods").create(p)
    assert e.value.message == ('pods "init" is forbidden: exceeded quota: q, requested: requests.memory=3073741824, '
                               "used: requests.memory=0, limited: requests.memory=1Gi")


async def test_quota_adds_pod_overhead_to_a_limit_only_where_one_is_set_and_not_zero(stack):
    """PodLimits: the RuntimeClass's overhead raises a container limit that is set, but an explicit
    zero limit (no limit) stays zero."""
    await rc(stack, "runtimeclasses", "node.k8s.io").create({
        "metadata": {"name": "vm"}, "handler": "kata", "overhead": {"podFixed": {"cpu": "250m"}}})
    await quota(stack, {"limits.cpu": "100m"})
    pods = rc(stack, "pods")
    await pods.create(pod("zero", {"limits": {"cpu": "0"}}, runtimeClassName="vm"))
    with pytest.raises(APIError) as e:
        await pods.create(pod("some", {"limits": {"cpu": "50m"}}, runtimeClassName="vm"))
    assert e.value.message == ('pods "some" is forbidden: exceeded quota: q, requested: limits.cpu=300m, '
                               "used: limits.cpu=0, limited: limits.cpu=100m")


async def test_quota_charges_pod_level_hugepages_over_the_containers(stack):
    """PodRequests: pod-level resources (cpu, memory and hugepages, IsSupportedPodLevelResource)
    replace what the containers ask."""
    await quota(stack, {"requests.hugepages-2Mi": "4Mi"})
    whole = {"memory": "1Gi", "hugepages-2Mi": "6Mi"}
    p = pod("huge", {"limits": {"memory": "512Mi", "hugepages-2Mi": "2Mi"}})
    p["spec"]["resources"] = {"requests": whole, "limits": whole}
    with pytest.raises(APIError) as e:
        await rc(stack, "pods").create(p)
    assert e.value.message == ('pods "huge" is forbidden: exceeded quota: q, requested: requests.hugepages-2Mi=6Mi, '
                               "used: requests.hugepages-2Mi=0, limited: requests.hugepages-2Mi=4Mi")
