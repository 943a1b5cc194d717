"""What objects charge against quotas (upstream's evaluators) and which
quotas cover them (scopes)."""

from nanokube.quota.evaluators import (ClaimLookup, charge_changed, claim_usage, extended_names,
                                      missing_container_resources, pod_usage, quota_covers, usage)
from nanokube.quota.resources import scope_errors


def text(u):
    return {k: str(v) for k, v in u.items()}


def test_pod_usage_counts_init_containers_sidecars_overhead_and_extended_resources():
    spec = {"containers": [{"name": "a", "resources": {"requests": {"cpu": "500m", "nvidia.com/gpu": "2"},
                                                       "limits": {"memory": "1Gi", "nvidia.com/gpu": "2"}}}],
            "initContainers": [{"name": "setup", "resources": {"requests": {"cpu": "2"}}},
                               {"name": "side", "restartPolicy": "Always", "resources": {"requests": {"cpu": "100m"}}}],
            "overhead": {"cpu": "50m"}}
    got = text(pod_usage({"metadata": {"name": "p"}, "spec": spec}, 0))
    assert got == {"count/pods": "1", "pods": "1", "cpu": "2050m", "requests.cpu": "2050m", "limits.memory": "1Gi",
                   "requests.nvidia.com/gpu": "2"}
    done = pod_usage({"metadata": {"name": "p"}, "spec": spec, "status": {"phase": "Succeeded"}}, 0)
    assert text(done) == {"count/pods": "1"}


def test_a_pod_update_changes_its_charge_when_it_stops_counting_or_its_counted_spec_changes():
    spec = {"containers": [{"name": "a", "resources": {"requests": {"cpu": "1"}}}]}
    pending = {"metadata": {"name": "p"}, "spec": spec, "status": {"phase": "Pending"}}
    running = {**pending, "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}
    resized = {**running, "spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "2"}}}]}}
    done = {**running, "status": {"phase": "Succeeded"}}
    done_resized = {**resized, "status": {"phase": "Failed"}}
    gone = {**running, "metadata": {"name": "p", "deletionTimestamp": "1970-01-01T00:00:10Z",
                                    "deletionGracePeriodSeconds": 30}}
    def holding(cpu):  # the node's status of a resize: what it allocated the container
        return {**resized, "status": {"phase": "Running", "containerStatuses": [
            {"name": "a", "allocatedResources": {"cpu": cpu}, "resources": {"requests": {"cpu": cpu}}}]}}
    cases = [(pending, running, False), (running, resized, True), (running, done, True), (done, done_resized, False),
             (running, gone, False), (holding("1"), holding("3"), True), (holding("1"), holding("2"), False)]
    for old, new, changed in cases:
        assert charge_changed("", "pods", old, new, 0) is changed
        assert changed == (usage("", "pods", old, 0) != usage("", "pods", new, 0))  # the same answer as both usages
    assert charge_changed("", "pods", running, gone, 60) is True  # past its deletion grace: no longer counted
    svc = {"metadata": {"name": "s"}, "spec": {"type": "ClusterIP"}}
    assert charge_changed("", "services", svc, {**svc, "spec": {"type": "LoadBalancer", "ports": [{}]}}, 0) is True


def test_a_pod_being_resized_is_charged_what_it_holds_meanwhile():
    """PodUsageFunc with status resources: while pending or in progress, the larger of the spec
    and what the node allocated and runs (limits: spec and running); once Infeasible, the node's
    alone (limits: what runs). A plain init container is charged by its spec."""
    spec = {"containers": [{"name": "a", "resources": {"requests": {"cpu": "2", "memory": "1Gi"},
                                                       "limits": {"cpu": "4", "memory": "1Gi"}}}],
            "initContainers": [{"name": "setup", "resources": {"requests": {"cpu": "3"}}}]}
    status = {"phase": "Running", "containerStatuses": [
        {"name": "a", "allocatedResources": {"cpu": "1", "memory": "2Gi"},
         "resources": {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"cpu": "1", "memory": "2Gi"}}}],
        "initContainerStatuses": [{"name": "setup", "resources": {"requests": {"cpu": "100m"}}}]}
    got = text(pod_usage({"metadata": {"name": "p"}, "spec": spec, "status": status}, 0))
    assert (got["requests.cpu"], got["requests.memory"], got["limits.cpu"], got["limits.memory"]) == \
        ("3", "2Gi", "4", "2Gi")
    infeasible = {**status, "conditions": [{"type": "PodResizePending", "status": "True", "reason": "Infeasible"}]}
    spec["initContainers"] = []
    got = text(pod_usage({"metadata": {"name": "p"}, "spec": spec, "status": infeasible}, 0))
    assert (got["requests.cpu"], got["requests.memory"], got["limits.cpu"], got["limits.memory"]) == \
        ("1", "2Gi", "1", "2Gi")


def test_a_resize_moving_resources_between_containers_is_charged_the_larger_pod_total():
    """The spec, allocated and running totals are each summed over the containers before the larger
    is taken (kubernetes#140047): a moves from 2 CPUs to 1 and b from 1 to 2, so the pod holds 3
    (not 4); memory grows in a alone, so the spec's total wins there."""
    spec = {"containers": [{"name": "a", "resources": {"requests": {"cpu": "1", "memory": "2Gi"}}},
                           {"name": "b", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}}]}
    status = {"phase": "Running", "containerStatuses": [
        {"name": n, "allocatedResources": r, "resources": {"requests": r}}
        for n, r in (("a", {"cpu": "2", "memory": "1Gi"}), ("b", {"cpu": "1", "memory": "1Gi"}))]}
    got = text(pod_usage({"metadata": {"name": "p"}, "spec": spec, "status": status}, 0))
    assert (got["requests.cpu"], got["requests.memory"]) == ("3", "3Gi")


def test_the_pod_level_status_stands_for_the_containers_and_the_pod_level_spec():
    """With InPlacePodLevelResourcesVerticalScaling the pod's status.allocatedResources and
    status.resources are the allocated and running totals; pod-level requests are the larger of
    the spec's and the status' less overhead; once Infeasible the spec's drops out."""
    spec = {"containers": [{"name": "a"}], "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}},
            "overhead": {"cpu": "100m"}}
    status = {"phase": "Running", "allocatedResources": {"cpu": "2100m"},
              "resources": {"requests": {"cpu": "2100m"}, "limits": {"cpu": "2100m"}}}
    got = text(pod_usage({"metadata": {"name": "p"}, "spec": spec, "status": status}, 0))
    assert (got["requests.cpu"], got["limits.cpu"]) == ("2100m", "2100m")
    grown = {**spec, "resources": {"requests": {"cpu": "3"}, "limits": {"cpu": "3"}}}
    got = text(pod_usage({"metadata": {"name": "p"}, "spec": grown, "status": status}, 0))
    assert (got["requests.cpu"], got["limits.cpu"]) == ("3100m", "3100m")
    infeasible = {**status, "conditions": [{"type": "PodResizePending", "status": "True", "reason": "Infeasible"}]}
    got = text(pod_usage({"metadata": {"name": "p"}, "spec": grown, "status": infeasible}, 0))
    assert (got["requests.cpu"], got["limits.cpu"]) == ("2100m", "2100m")


def test_claim_usage_per_device_class():
    claim = {"spec": {"devices": {"requests": [
        {"name": "a", "exactly": {"deviceClassName": "gpu", "count": 2}},
        {"name": "b", "exactly": {"deviceClassName": "gpu", "allocationMode": "All"}},
        {"name": "c", "firstAvailable": [{"name": "x", "deviceClassName": "nic", "count": 3},
                                         {"name": "y", "deviceClassName": "nic"},
                                         {"name": "z", "deviceClassName": "gpu", "count": 1}]}]}}}
    assert text(claim_usage(claim)) == {"count/resourceclaims.resource.k8s.io": "1",
                                        "gpu.deviceclass.resource.k8s.io/devices": "35",
                                        "nic.deviceclass.resource.k8s.io/devices": "3",
                                        "requests.deviceclass.resource.kubernetes.io/gpu": "35",
                                        "requests.deviceclass.resource.kubernetes.io/nic": "3"}
    # a DeviceClass's explicit extendedResourceName is charged as a request too
    named = ClaimLookup(extended_names([{"metadata": {"name": "gpu"}, "spec": {"extendedResourceName": "example.com/gpu"}}]))
    assert text(claim_usage(claim, named))["requests.example.com/gpu"] == "35"


def test_extended_resource_claim_charges_what_its_verified_pod_does_not():
    """getVerifiedPodUsage (kubernetes#134210, #135404): the scheduler's claim for a pod's
    `example.com/gpu: 2` charges the devices, but not the extended resources its pod charges
    already; a claim that only says it is a pod's is charged in full."""
    claim = {"metadata": {"name": "p-gpu-abc", "namespace": "ns", "creationTimestamp": "2026-01-01T00:00:02Z",
                          "annotations": {"resource.kubernetes.io/extended-resource-claim": "true"},
                          "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u",
                                               "controller": True}]},
             "spec": {"devices": {"requests": [
                 {"name": "container-0-request-0", "exactly": {"deviceClassName": "gpu", "count": 3}}]}}}
    pod = {"metadata": {"name": "p", "namespace": "ns", "uid": "u"}, "spec": {"containers": [
        {"name": "c", "resources": {"requests": {"example.com/gpu": "2"}, "limits": {"example.com/gpu": "2"}}}]}}
    names = extended_names([{"metadata": {"name": "gpu"}, "spec": {"extendedResourceName": "example.com/gpu"}}])
    whole = {"count/resourceclaims.resource.k8s.io": "1", "gpu.deviceclass.resource.k8s.io/devices": "3",
             "requests.deviceclass.resource.kubernetes.io/gpu": "3", "requests.example.com/gpu": "3"}

    def charged(pods, claims=(), status=None):
        found = {p["metadata"]["name"]: {**p, "status": status or {}} for p in pods}
        return text(claim_usage(claim, ClaimLookup(names, lambda ns, n: found.get(n), lambda ns: [claim, *claims])))

    assert charged([pod]) == {**whole, "requests.example.com/gpu": "1"}
    assert charged([pod], status={"extendedResourceClaimStatus": {"resourceClaimName": "p-gpu-abc"}}) == \
        {**whole, "requests.example.com/gpu": "1"}
    assert charged([]) == whole  # no such pod
    assert charged([{**pod, "metadata": {**pod["metadata"], "uid": "other"}}]) == whole
    assert charged([pod], status={"extendedResourceClaimStatus": {"resourceClaimName": "another"}}) == whole
    earlier = {**claim, "metadata": {**claim["metadata"], "name": "p-gpu-first",
                                     "creationTimestamp": "2026-01-01T00:00:01Z"}}
    assert charged([pod], [earlier]) == whole  # the pod's first extended-resource claim is another
    assert text(claim_usage(claim)) == {k: v for k, v in whole.items() if k != "requests.example.com/gpu"}


def test_generic_and_legacy_object_counts():
    assert text(usage("apps", "deployments", {}, 0)) == {"count/deployments.apps": "1"}
    assert text(usage("", "secrets", {}, 0)) == {"count/secrets": "1", "secrets": "1"}
    svc = usage("", "services", {"spec": {"type": "LoadBalancer", "ports": [{"port": 80}, {"port": 443}]}}, 0)
    assert text(svc) == {"count/services": "1", "services": "1", "services.nodeports": "2", "services.loadbalancers": "1"}


def test_scopes():
    pod = {"metadata": {"name": "p"}, "spec": {"priorityClassName": "high", "activeDeadlineSeconds": 60,
                                               "containers": [{"name": "c"}]}}
    q = lambda **spec: {"spec": spec}  # noqa: E731
    assert quota_covers(q(scopes=["BestEffort", "Terminating"]), "", "pods", pod)
    assert not quota_covers(q(scopes=["NotTerminating"]), "", "pods", pod)
    sel = {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}
    assert quota_covers(q(scopeSelector=sel), "", "pods", pod)
    assert not quota_covers(q(scopes=["BestEffort"]), "", "configmaps", {})
    assert scope_errors(["BestEffort"], ["requests.cpu", "pods"]) == ["unsupported scope applied to resource"]


def test_containers_must_name_quota_resources():
    pod = {"spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "1"}}}, {"name": "b"}]}}
    assert missing_container_resources(pod, ["requests.cpu", "limits.memory", "pods"]) == \
        "must specify limits.memory for: a,b; requests.cpu for: b"
    assert missing_container_resources(pod, ["pods"]) == ""


def test_implicit_device_class_extended_resource_is_charged_as_a_request():
    spec = {"containers": [{"name": "c", "resources": {
        "requests": {"deviceclass.resource.kubernetes.io/gpu.nanokube.io": "2"},
        "limits": {"deviceclass.resource.kubernetes.io/gpu.nanokube.io": "2"}}}]}
    got = text(pod_usage({"metadata": {"name": "p"}, "spec": spec}, 0))
    assert got["requests.deviceclass.resource.kubernetes.io/gpu.nanokube.io"] == "2"


def test_a_claims_storage_is_what_is_allocated_while_more_than_its_request():
    """RecoverVolumeExpansionFailure: after a failed expansion to 1Ti the user asks for 2Gi again;
    until the resizer records 2Gi as allocated, the claim still charges 1Ti."""
    pvc = {"metadata": {"name": "c"}, "spec": {"storageClassName": "fast", "resources": {"requests": {"storage": "2Gi"}}},
           "status": {"capacity": {"storage": "1Gi"}, "allocatedResources": {"storage": "1Ti"}}}
    got = text(usage("", "persistentvolumeclaims", pvc, 0))
    assert got["requests.storage"] == "1Ti" and got["fast.storageclass.storage.k8s.io/requests.storage"] == "1Ti"
    pvc["status"]["allocatedResources"] = {"storage": "1Gi"}
    assert text(usage("", "persistentvolumeclaims", pvc, 0))["requests.storage"] == "2Gi"
