"""pods/ephemeralcontainers and pods/resize through the official client: what each write may
change of a pod and upstream's refusals (ValidatePodEphemeralContainersUpdate, ValidatePodResize,
validateEphemeralContainers, validateResizePolicy), with their field paths and messages."""

import asyncio
import json

import pytest
from kubernetes.client.rest import ApiException

RESOURCES = {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "200m", "memory": "128Mi"}}


async def _call(f, *args, **kwargs):
    return await asyncio.to_thread(f, *args, **kwargs)


async def _refused(f, *args, code: int = 422) -> str:
    with pytest.raises(ApiException) as e:
        await _call(f, *args)
    assert e.value.status == code, e.value.body
    return json.loads(e.value.body)["message"]


def _pod(name: str, **spec) -> dict:
    containers = [{"name": "app", "image": "nginx", "resources": RESOURCES}]
    return {"metadata": {"name": name, "labels": {"app": name}}, "spec": {"containers": containers, **spec}}


def _debug(name: str = "dbg", **fields) -> dict:
    return {"spec": {"ephemeralContainers": [{"name": name, "image": "busybox", **fields}]}}


async def test_an_ephemeral_container_is_added_only_through_its_subresource(core):
    assert await _refused(core.create_namespaced_pod, "default", _pod("c", ephemeralContainers=[
        {"name": "dbg", "image": "busybox"}])) == 'Pod "c" is invalid: spec.ephemeralContainers: Forbidden: cannot be set on create'
    await _call(core.create_namespaced_pod, "default", _pod("p"))
    body = {**_debug(targetContainerName="app"), "metadata": {"labels": {"changed": "yes"}}}
    pod = await _call(core.patch_namespaced_pod_ephemeralcontainers, "p", "default", body)
    ec = pod.spec.ephemeral_containers
    assert [(c.name, c.image, c.target_container_name, c.image_pull_policy, c.termination_message_policy) for c in ec] \
        == [("dbg", "busybox", "app", "Always", "File")]
    assert pod.metadata.labels == {"app": "p"}  # the write's metadata is the stored one's
    assert pod.metadata.generation == 2
    entry = pod.metadata.managed_fields[-1]
    assert (entry.operation, entry.subresource) == ("Update", "ephemeralcontainers")
    assert list(entry.fields_v1) == ["f:spec"] and list(entry.fields_v1["f:spec"]) == ["f:ephemeralContainers"]
    got = await _call(core.read_namespaced_pod_ephemeralcontainers, "p", "default")
    assert [c.name for c in got.spec.ephemeral_containers] == ["dbg"]


async def test_ephemeral_containers_are_validated_as_upstream(core):
    await _call(core.create_namespaced_pod, "default", _pod("e"))
    await _call(core.patch_namespaced_pod_ephemeralcontainers, "e", "default", _debug())
    # (a strategic merge patch puts the items it adds first, as upstream's mergeSortedSlice)
    message = await _refused(core.patch_namespaced_pod_ephemeralcontainers, "e", "default", _debug(
        "app", targetContainerName="nope", ports=[{"containerPort": 80}], resources={"limits": {"cpu": "1"}},
        lifecycle={"preStop": {"exec": {"command": ["x"]}}}, volumeMounts=[{"name": "v", "mountPath": "/v", "subPath": "s"}]))
    assert message == (
        'Pod "e" is invalid: ['
        'spec.ephemeralContainers[0].volumeMounts[0].name: Not found: "v", '
        'spec.ephemeralContainers[0].name: Duplicate value: "app", '
        'spec.ephemeralContainers[0].targetContainerName: Not found: "nope", '
        "spec.ephemeralContainers[0].ports: Forbidden: cannot be set for an Ephemeral Container, "
        "spec.ephemeralContainers[0].resources: Forbidden: cannot be set for an Ephemeral Container, "
        "spec.ephemeralContainers[0].lifecycle: Forbidden: cannot be set for an Ephemeral Container, "
        "spec.ephemeralContainers[0].volumeMounts[0].subPath: Forbidden: cannot be set for an Ephemeral Container]")
    changed = _debug(image="alpine")
    assert await _refused(core.patch_namespaced_pod_ephemeralcontainers, "e", "default", changed) == (
        'Pod "e" is invalid: spec.ephemeralContainers: Forbidden: existing ephemeral containers "dbg" may not be changed\n'
        '  {\n- \t"image": "busybox",\n+ \t"image": "alpine",\n  \t... // 5 identical fields\n  }')
    assert await _refused(core.replace_namespaced_pod_ephemeralcontainers, "e", "default", _pod("e")) == (
        'Pod "e" is invalid: spec.ephemeralContainers: Forbidden: existing ephemeral containers "dbg" may not be removed\n')


async def test_a_static_pod_takes_no_ephemeral_container(core):
    static = _pod("s", nodeName="n1")
    static["metadata"]["annotations"] = {"kubernetes.io/config.mirror": "x"}
    await _call(core.create_namespaced_pod, "default", static)
    assert await _refused(core.patch_namespaced_pod_ephemeralcontainers, "s", "default", _debug()) == (
        'Pod "s" is invalid: []: Forbidden: static pods do not support ephemeral containers')
    assert await _refused(core.patch_namespaced_pod_resize, "s", "default", {"spec": {"containers": [
        {"name": "app", "resources": {"requests": {"cpu": "150m"}}}]}}) == (
        'Pod "s" is invalid: []: Forbidden: static pods cannot be resized')


def _resize(**resources) -> dict:
    return {"spec": {"containers": [{"name": "app", "resources": resources}]}}


async def test_a_resize_changes_only_resources_and_resize_policies(core):
    await _call(core.create_namespaced_pod, "default", _pod("r"))
    body = _resize(requests={"cpu": "150m"}, limits={"cpu": "300m"})
    body["spec"]["containers"][0]["image"] = "other"
    body["metadata"] = {"labels": {"changed": "yes"}}
    pod = await _call(core.patch_namespaced_pod_resize, "r", "default", body)
    c = pod.spec.containers[0]
    assert (c.image, c.resources.requests, c.resources.limits) == (
        "nginx", {"cpu": "150m", "memory": "64Mi"}, {"cpu": "300m", "memory": "128Mi"})
    assert pod.metadata.labels == {"app": "r"} and pod.metadata.generation == 2
    assert pod.metadata.managed_fields[-1].subresource == "resize"


@pytest.mark.parametrize("patch, message", [
    (_resize(requests={"cpu": "200m", "memory": "128Mi"}),
     'spec: Invalid value: "Burstable": Pod QOS Class may not change as a result of resizing'),
    (_resize(requests={"ephemeral-storage": "1Gi"}), "spec: Forbidden: only cpu and memory resources are mutable"),
    ({"spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "150m"}},
                               "resizePolicy": [{"resourceName": "cpu", "restartPolicy": "Sometimes"}]}]}},
     '[spec.containers[0].resizePolicy: Unsupported value: "Sometimes": supported values: "NotRequired", '
     '"RestartContainer", spec: Forbidden: only cpu and memory resources are mutable]'),  # a policy stays as created
])
async def test_a_resize_is_validated_as_upstream(core, patch, message):
    await _call(core.create_namespaced_pod, "default", _pod("v"))
    assert await _refused(core.patch_namespaced_pod_resize, "v", "default", patch) == f'Pod "v" is invalid: {message}'


async def test_a_memory_limit_may_shrink_or_appear_under_the_default_policy(core):
    """Since 1.34 (kubernetes#133012) ValidatePodResize leaves a memory limit decrease to the
    kubelet's usage check, whatever the resize policy; adding one is decreasing it from 'max'."""
    await _call(core.create_namespaced_pod, "default", _pod("m"))
    pod = await _call(core.patch_namespaced_pod_resize, "m", "default", _resize(limits={"memory": "100Mi"}))
    assert pod.spec.containers[0].resources.limits == {"cpu": "200m", "memory": "100Mi"}
    burstable = _pod("a")
    burstable["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "100m"}}
    await _call(core.create_namespaced_pod, "default", burstable)
    pod = await _call(core.patch_namespaced_pod_resize, "a", "default", _resize(limits={"memory": "1Gi"}))
    assert pod.spec.containers[0].resources.limits == {"memory": "1Gi"}


async def test_a_resize_adds_no_other_resource_to_a_container_that_had_none(core):
    """kubernetes#135084: a container without requests may gain cpu or memory ones only."""
    best_effort = _pod("b")
    del best_effort["spec"]["containers"][0]["resources"]
    await _call(core.create_namespaced_pod, "default", best_effort)
    assert await _refused(core.patch_namespaced_pod_resize, "b", "default",
                          _resize(requests={"ephemeral-storage": "1Gi"})) == (
        'Pod "b" is invalid: spec: Forbidden: only cpu and memory resources are mutable')


async def test_requests_and_limits_may_not_be_removed_and_plain_init_containers_are_resized(core):
    """A plain (non-sidecar) init container's cpu and memory may be resized as since 1.36
    (InPlacePodVerticalScalingInitContainers, GA in 1.37), its other resources not; no request or
    limit may go, of any container."""
    pod = _pod("i", initContainers=[{"name": "init", "image": "busybox", "resources": RESOURCES}])
    await _call(core.create_namespaced_pod, "default", pod)
    body = {"spec": {"initContainers": [{"name": "init", "resources": {"requests": {"cpu": "150m"}}}],
                     "containers": [{"name": "app", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"},
                                                                  "limits": {"cpu": "200m", "memory": "128Mi"}}}]}}
    got = await _call(core.patch_namespaced_pod_resize, "i", "default", body)
    assert got.spec.init_containers[0].resources.requests == {"cpu": "150m", "memory": "64Mi"}
    more = {"spec": {"initContainers": [{"name": "init", "resources": {"requests": {"ephemeral-storage": "1Gi"}}}]}}
    assert await _refused(core.patch_namespaced_pod_resize, "i", "default", more) == (
        'Pod "i" is invalid: spec: Forbidden: only cpu and memory resources are mutable')
    gone = [{"op": "remove", "path": "/spec/initContainers/0/resources/limits"}]
    assert await _refused(core.patch_namespaced_pod_resize, "i", "default", gone) == (
        'Pod "i" is invalid: spec.initContainers[0].resources.limits: Forbidden: resource limits cannot be removed')
    remove = [{"op": "remove", "path": "/spec/containers/0/resources/limits"}]
    assert await _refused(core.patch_namespaced_pod_resize, "i", "default", remove) == (
        'Pod "i" is invalid: spec.containers[0].resources.limits: Forbidden: resource limits cannot be removed')


async def test_a_running_pod_is_resized_only_where_its_node_reports_resources(core):
    await _call(core.create_namespaced_pod, "default", _pod("n", nodeName="n1"))
    await _call(core.patch_namespaced_pod_status, "n", "default", {"status": {"phase": "Running", "containerStatuses": [
        {"name": "app", "image": "nginx", "imageID": "", "ready": True, "restartCount": 0,
         "state": {"running": {"startedAt": "2026-12-04T00:00:00Z"}}}]}})
    assert await _refused(core.patch_namespaced_pod_resize, "n", "default", _resize(requests={"cpu": "150m"})) == (
        'Pod "n" is invalid: spec: Forbidden: Pod running on node without support for resize')


@pytest.mark.parametrize("policies, restart, message", [
    ([{"resourceName": "cpu", "restartPolicy": "NotRequired"}, {"resourceName": "cpu", "restartPolicy": "NotRequired"}],
     "Always", 'spec.containers[0].resizePolicy[1]: Duplicate value: "cpu"'),
    ([{"resourceName": "gpu", "restartPolicy": "NotRequired"}], "Always",
     'spec.containers[0].resizePolicy: Unsupported value: "gpu": supported values: "cpu", "memory"'),
    ([{"resourceName": "memory", "restartPolicy": "RestartContainer"}], "Never",
     "spec.containers[0].resizePolicy: Invalid value: \"RestartContainer\": must be 'NotRequired' when `restartPolicy` "
     "is 'Never'"),
])
async def test_resize_policies_are_validated_on_create(core, policies, restart, message):
    pod = _pod("x", restartPolicy=restart)
    pod["spec"]["containers"][0]["resizePolicy"] = policies
    assert await _refused(core.create_namespaced_pod, "default", pod) == f'Pod "x" is invalid: {message}'


async def test_pod_level_resources_are_resized_in_place(core):
    """InPlacePodLevelResourcesVerticalScaling (beta, on since 1.36): a resize changes the pod's own
    cpu and memory, or adds them; it removes none, changes nothing else and keeps the QoS class."""
    pod = _pod("pl", resources={"requests": {"cpu": "200m", "memory": "128Mi"},
                                "limits": {"cpu": "400m", "memory": "256Mi", "hugepages-2Mi": "2Mi"}})
    await _call(core.create_namespaced_pod, "default", pod)
    body = {"spec": {"resources": {"requests": {"cpu": "300m", "memory": "128Mi"},
                                   "limits": {"cpu": "600m", "memory": "256Mi", "hugepages-2Mi": "2Mi"}}}}
    got = await _call(core.patch_namespaced_pod_resize, "pl", "default", body)
    assert (got.spec.resources.requests, got.spec.resources.limits) == (  # (hugepages requests defaulted)
        {"cpu": "300m", "memory": "128Mi", "hugepages-2Mi": "2Mi"}, {"cpu": "600m", "memory": "256Mi", "hugepages-2Mi": "2Mi"})
    assert got.metadata.generation == 2
    hugepages = {"spec": {"resources": {"requests": {"hugepages-2Mi": "4Mi"}, "limits": {"hugepages-2Mi": "4Mi"}}}}
    assert await _refused(core.patch_namespaced_pod_resize, "pl", "default", hugepages) == (
        'Pod "pl" is invalid: spec: Forbidden: only cpu and memory resources are mutable')
    gone = [{"op": "remove", "path": "/spec/resources/limits/memory"}]
    assert await _refused(core.patch_namespaced_pod_resize, "pl", "default", gone) == (
        'Pod "pl" is invalid: spec.resources.limits: Forbidden: resource limits cannot be removed')
    below = {"spec": {"resources": {"requests": {"cpu": "50m"}}}}  # under the container's own 100m
    assert await _refused(core.patch_namespaced_pod_resize, "pl", "default", below) == (
        'Pod "pl" is invalid: spec.resources.requests[cpu]: Invalid value: "50m": '
        "must be greater than or equal to aggregate container requests of 100m")
    await _call(core.create_namespaced_pod, "default", _pod("plain"))
    added = {"spec": {"resources": {"requests": {"cpu": "500m"}}}}
    got = await _call(core.patch_namespaced_pod_resize, "plain", "default", added)
    assert got.spec.resources.requests == {"cpu": "500m"}
