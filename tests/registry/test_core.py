import copy
from datetime import datetime, timezone

import pytest

from nanokube.registry.base import all_resources
from nanokube.registry.core import (
    ConfigMapStrategy,
    EndpointsStrategy,
    EventStrategy,
    NamespaceStrategy,
    NodeStrategy,
    PodStrategy,
    SecretStrategy,
    ServiceAccountStrategy,
    ServiceIPAllocator,
    ServiceStrategy,
    validate_binding,
)
from nanokube.registry.core_pods import pod_summary, qos_class
from nanokube.registry.core_printing import human_duration

NOW = datetime(2026, 7, 1, 12, 0, 0, tzinfo=timezone.utc).timestamp()


def clock():
    return NOW


def ago(seconds):
    return datetime.fromtimestamp(NOW - seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def errs_by_field(errs):
    return {(e.field, e.reason) for e in errs}


def cells(strategy, obj, wide=False):
    return [c.fn(obj) for c in strategy.columns if (wide or c.priority == 0) and c.name != "Age"]


# --- registration ---------------------------------------------------------------


def test_core_resources_registered():
    rs = {r.plural: r for r in all_resources() if r.group == ""}
    assert rs["namespaces"].namespaced is False and rs["namespaces"].short_names == ("ns",)
    assert set(rs["namespaces"].subresources) == {"status", "finalize"}
    assert rs["nodes"].namespaced is False and rs["nodes"].short_names == ("no",)
    assert {"status", "binding", "eviction", "log"} <= set(rs["pods"].subresources)
    assert rs["pods"].categories == ("all",) and rs["services"].categories == ("all",)
    assert rs["services"].short_names == ("svc",) and rs["endpoints"].short_names == ("ep",)
    assert rs["endpoints"].singular == "endpoints"
    assert rs["configmaps"].short_names == ("cm",) and rs["serviceaccounts"].short_names == ("sa",)
    assert rs["events"].short_names == ("ev",)
    assert rs["secrets"].kind == "Secret" and rs["pods"].versions == ["v1"]


# --- pods -----------------------------------------------------------------------


def make_pod(**spec):
    base = {"containers": [{"name": "app", "image": "nginx:1.27"}]}
    base.update(spec)
    return {"metadata": {"name": "p", "namespace": "default", "uid": "u1"}, "spec": base}


def created_pod(**spec):
    s = PodStrategy(clock)
    pod = make_pod(**spec)
    s.default(pod, "v1")
    s.prepare_for_create(pod)
    return s, pod


def test_pod_defaults():
    _, pod = created_pod()
    spec = pod["spec"]
    assert spec["restartPolicy"] == "Always" and spec["dnsPolicy"] == "ClusterFirst"
    assert spec["terminationGracePeriodSeconds"] == 30 and spec["schedulerName"] == "default-scheduler"
    assert spec["securityContext"] == {} and spec["enableServiceLinks"] is True
    c = spec["containers"][0]
    assert c["imagePullPolicy"] == "IfNotPresent"
    assert c["terminationMessagePath"] == "/dev/termination-log" and c["terminationMessagePolicy"] == "File"
    assert pod["status"] == {"phase": "Pending", "qosClass": "BestEffort"}
    keys = [(t["key"], t["effect"], t["tolerationSeconds"]) for t in spec["tolerations"]]
    assert keys == [("node.kubernetes.io/not-ready", "NoExecute", 300), ("node.kubernetes.io/unreachable", "NoExecute", 300)]


@pytest.mark.parametrize("image,policy", [("nginx", "Always"), ("nginx:latest", "Always"),
                                          ("reg:5000/nginx", "Always"), ("nginx:1.2", "IfNotPresent"),
                                          ("nginx@sha256:abc", "IfNotPresent")])
def test_image_pull_policy_default(image, policy):
    _, pod = created_pod(containers=[{"name": "a", "image": image}])
    assert pod["spec"]["containers"][0]["imagePullPolicy"] == policy


def test_requests_default_to_limits_and_qos():
    _, pod = created_pod(containers=[{"name": "a", "image": "x", "ports": [{"containerPort": 80}],
                                      "resources": {"limits": {"cpu": "1000m", "memory": "1Gi"}}}])
    c = pod["spec"]["containers"][0]
    assert c["resources"]["requests"] == {"cpu": "1", "memory": "1Gi"}
    assert c["ports"][0]["protocol"] == "TCP"
    assert pod["status"]["qosClass"] == "Guaranteed"
    assert qos_class({"containers": [{"resources": {"requests": {"cpu": "1"}}}]}) == "Burstable"


def test_existing_wildcard_toleration_suppresses_defaults():
    _, pod = created_pod(tolerations=[{"operator": "Exists"}])
    assert pod["spec"]["tolerations"] == [{"operator": "Exists"}]


def test_valid_pod_has_no_errors():
    s, pod = created_pod(volumes=[{"name": "v", "emptyDir": {}}])
    assert s.validate(pod) == []


def test_pod_requires_containers():
    s, pod = created_pod(containers=[])
    assert ("spec.containers", "FieldValueRequired") in errs_by_field(s.validate(pod))


def test_container_name_and_image_rules():
    s, pod = created_pod(initContainers=[{"name": "app", "image": "x"}],
                         containers=[{"name": "app", "image": ""}, {"name": "Bad_Name", "image": "x"}])
    got = errs_by_field(s.validate(pod))
    # validateInitContainers knows the regular containers' names: the init container is the duplicate
    assert ("spec.initContainers[0].name", "FieldValueDuplicate") in got
    assert ("spec.containers[0].name", "FieldValueDuplicate") not in got
    assert ("spec.containers[0].image", "FieldValueRequired") in got
    assert ("spec.containers[1].name", "FieldValueInvalid") in got


def test_container_port_range_and_protocol():
    s, pod = created_pod(containers=[{"name": "a", "image": "x",
                                      "ports": [{"containerPort": 70000}, {"containerPort": 80, "protocol": "XTP"}]}])
    errs = s.validate(pod)
    e = next(e for e in errs if e.field == "spec.containers[0].ports[0].containerPort")
    assert e.message == "Invalid value: 70000: must be between 1 and 65535, inclusive"
    e = next(e for e in errs if e.field == "spec.containers[0].ports[1].protocol")
    assert e.message == 'Unsupported value: "XTP": supported values: "SCTP", "TCP", "UDP"'


def test_requests_above_limits():
    s, pod = created_pod(containers=[{"name": "a", "image": "x",
                                      "resources": {"limits": {"cpu": "500m"}, "requests": {"cpu": "1"}}}])
    errs = [e for e in s.validate(pod) if e.field == "spec.containers[0].resources.requests"]
    assert [e.message for e in errs] == ['Invalid value: "1": must be less than or equal to cpu limit of 500m']


def test_bad_quantity_and_resource_name():
    s, pod = created_pod(containers=[{"name": "a", "image": "x",
                                      "resources": {"requests": {"cpu": "lots", "gpu": "1"}}}])
    got = errs_by_field(s.validate(pod))
    assert ("spec.containers[0].resources.requests[cpu]", "FieldValueInvalid") in got
    assert ("spec.containers[0].resources.requests[gpu]", "FieldValueInvalid") in got


def test_restart_policy_enum():
    s, pod = created_pod(restartPolicy="Sometimes")
    e = next(e for e in s.validate(pod) if e.field == "spec.restartPolicy")
    assert e.reason == "FieldValueNotSupported"
    assert e.message.endswith('supported values: "Always", "OnFailure", "Never"')


def test_volumes_unique_and_one_source():
    s, pod = created_pod(volumes=[{"name": "v", "emptyDir": {}}, {"name": "v", "emptyDir": {}},
                                  {"name": "w"}, {"name": "x", "emptyDir": {}, "secret": {"secretName": "s"}}])
    got = errs_by_field(s.validate(pod))
    assert ("spec.volumes[1].name", "FieldValueDuplicate") in got
    assert ("spec.volumes[2]", "FieldValueRequired") in got
    assert ("spec.volumes[3].secret", "FieldValueForbidden") in got


def test_projected_pod_certificate_and_trust_bundle():
    sources = [
        {"podCertificate": {"signerName": "example.com/foo", "keyType": "RSA2048", "credentialBundlePath": "b.pem",
                            "maxExpirationSeconds": 3599}},
        {"podCertificate": {"signerName": "example.com/foo", "keyType": "ED25519", "keyPath": "k.pem"}},
        {"clusterTrustBundle": {"name": "a", "signerName": "example.com/foo", "path": "ca.pem"}},
        {"clusterTrustBundle": {"path": "/abs"}},
        {"secret": {"name": "s"}, "configMap": {"name": "c"}},
    ]
    s, pod = created_pod(volumes=[{"name": "v", "projected": {"sources": sources}}])
    got = errs_by_field(s.validate(pod))
    p = "spec.volumes[0].projected.sources"
    assert (f"{p}[0].podCertificate.keyType", "FieldValueNotSupported") in got
    assert (f"{p}[0].podCertificate.maxExpirationSeconds", "FieldValueInvalid") in got
    assert (f"{p}[1].podCertificate.certificateChainPath", "FieldValueRequired") in got
    assert (f"{p}[2].clusterTrustBundle", "FieldValueInvalid") in got
    assert (f"{p}[3].clusterTrustBundle", "FieldValueRequired") in got
    assert (f"{p}[3].clusterTrustBundle.path", "FieldValueInvalid") in got
    assert (f"{p}[4]", "FieldValueForbidden") in got
    assert pod["spec"]["volumes"][0]["projected"]["defaultMode"] == 420
    assert sources[1]["podCertificate"]["maxExpirationSeconds"] == 86400


def test_valid_pod_certificate_projection():
    src = {"podCertificate": {"signerName": "example.com/foo", "keyType": "ECDSAP256",
                              "keyPath": "k.pem", "certificateChainPath": "c.pem"}}
    s, pod = created_pod(volumes=[{"name": "v", "projected": {"sources": [src]}}])
    assert s.validate(pod) == []


def test_tolerations_rules():
    s, pod = created_pod(tolerations=[{"operator": "Equal", "value": "x"},
                                      {"key": "k", "operator": "Exists", "value": "v"},
                                      {"key": "k", "effect": "NoSchedule", "tolerationSeconds": 5},
                                      {"key": "k", "operator": "Maybe"}])
    errs = s.validate(pod)
    msgs = {e.field: e.message for e in errs}
    assert "operator must be Exists when `key` is empty" in msgs["spec.tolerations[0].operator"]
    assert "value must be empty when `operator` is 'Exists'" in msgs["spec.tolerations[1].operator"]
    assert msgs["spec.tolerations[2].effect"].endswith("effect must be 'NoExecute' when `tolerationSeconds` is set")
    assert msgs["spec.tolerations[3].operator"].startswith('Unsupported value: "Maybe"')


def test_tolerations_and_ports_that_look_common_are_still_checked():
    """The validators build a path only for errors: each value below fails one check that the
    common shape (a valid key, Exists or Equal, a known effect; a named TCP port) passes."""
    s, pod = created_pod(
        tolerations=[{"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                     {"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"},
                     {"key": "k k", "operator": "Exists", "effect": "NoSchedule"},
                     {"key": "k", "operator": "Equal", "value": "a b", "effect": "NoSchedule"},
                     {"key": "k", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 5},
                     {"key": "k", "operator": "Exists", "effect": "Sometimes"}],
        containers=[{"name": "a", "image": "x",
                     "ports": [{"name": "http", "containerPort": 80}, {"name": "http", "containerPort": 81},
                               {"name": "x--y", "containerPort": 82, "hostPort": 70000}],
                     "resources": {"limits": {"cpu": "1", "example.com/gpu": "1.5"}, "requests": {"bogus": "1"}}}])
    got = errs_by_field(s.validate(pod))
    assert not [f for f, _ in got if f.startswith(("spec.tolerations[0]", "spec.tolerations[1]"))]
    assert ("spec.tolerations[2].key", "FieldValueInvalid") in got
    assert ("spec.tolerations[3].operator", "FieldValueInvalid") in got
    assert ("spec.tolerations[4].effect", "FieldValueInvalid") in got
    assert ("spec.tolerations[5].effect", "FieldValueNotSupported") in got
    assert ("spec.containers[0].ports[1].name", "FieldValueDuplicate") in got
    assert ("spec.containers[0].ports[2].name", "FieldValueInvalid") in got
    assert ("spec.containers[0].ports[2].hostPort", "FieldValueInvalid") in got
    assert ("spec.containers[0].resources.limits[example.com/gpu]", "FieldValueInvalid") in got
    assert ("spec.containers[0].resources.requests[bogus]", "FieldValueInvalid") in got
    assert not [f for f, _ in got if f.startswith(("spec.containers[0].ports[0]", "spec.containers[0].resources.limits[cpu]"))]


def test_scheduling_gates_checked_on_create():
    s, pod = created_pod(schedulingGates=[{"name": "example.com/wait"}, {"name": "example.com/wait"}, {"name": "bad name"}])
    got = errs_by_field(s.validate(pod))
    assert ("spec.schedulingGates[1]", "FieldValueDuplicate") in got
    assert ("spec.schedulingGates[2]", "FieldValueInvalid") in got
    assert not [f for f, _ in got if f == "spec.schedulingGates[0]"]


def test_scheduling_group_name_format():
    s, pod = created_pod(schedulingGroup={"podGroupName": "Not_Valid"})
    assert ("spec.schedulingGroup.podGroupName", "FieldValueInvalid") in errs_by_field(s.validate(pod))
    s, pod = created_pod(schedulingGroup={})
    assert ("spec.schedulingGroup.podGroupName", "FieldValueRequired") in errs_by_field(s.validate(pod))
    s, pod = created_pod(schedulingGroup={"podGroupName": "group-a"})
    assert s.validate(pod) == []


def test_resource_claims():
    s, pod = created_pod(
        resourceClaims=[{"name": "gpu", "resourceClaimName": "c"}, {"name": "gpu", "resourceClaimTemplateName": "t"},
                        {"name": "none"}, {"name": "both", "resourceClaimName": "a", "resourceClaimTemplateName": "b"}],
        containers=[{"name": "a", "image": "x", "resources": {"claims": [{"name": "gpu"}, {"name": "other"}]}}],
    )
    errs = s.validate(pod)
    got = errs_by_field(errs)
    assert ("spec.resourceClaims[1].name", "FieldValueDuplicate") in got
    msgs = {e.field: e.message for e in errs}
    assert msgs["spec.resourceClaims[2]"].endswith("at least one of `resourceClaimName` or `resourceClaimTemplateName` must be set")
    assert msgs["spec.resourceClaims[3]"].endswith("at most one of `resourceClaimName` or `resourceClaimTemplateName` may be set")
    assert ("spec.containers[0].resources.claims[1]", "FieldValueNotFound") in got


def test_pod_update_allows_image_and_rejects_other_changes():
    s, old = created_pod()
    new = copy.deepcopy(old)
    new["spec"]["containers"][0]["image"] = "nginx:1.28"
    new["spec"]["tolerations"].append({"key": "k", "operator": "Exists"})
    assert s.validate_update(new, old) == []
    new["spec"]["restartPolicy"] = "Never"
    errs = s.validate_update(new, old)
    assert [e.field for e in errs] == ["spec"]
    assert errs[0].reason == "FieldValueForbidden"
    assert "pod updates may not change fields other than `spec.containers[*].image`" in errs[0].message
    # the stored spec against the sent one (its image change taken back), as go-cmp lays a diff out
    assert errs[0].message.endswith('(allow it to be set to 1 if it was previously negative)\n'
                                    '  {\n  \t... // 3 identical fields\n'
                                    '- \t"restartPolicy": "Always",\n+ \t"restartPolicy": "Never",\n'
                                    '  \t... // 4 identical fields\n  }')


def test_pod_update_refusal_opens_the_changed_container():
    """`kubectl set env pod/p -c b FOO=1`: the diff opens the containers list and the changed
    container, counting the unchanged fields and elements it passes."""
    s, old = created_pod(containers=[{"name": "a", "image": "x"}, {"name": "b", "image": "y"}])
    new = copy.deepcopy(old)
    new["spec"]["containers"][1]["env"] = [{"name": "FOO", "value": "1"}]
    [err] = s.validate_update(new, old)
    assert err.message.split("\n", 1)[1] == (
        '  {\n  \t"containers": [\n  \t\t... // 1 identical element\n  \t\t{\n'
        '+ \t\t\t"env": [{"name":"FOO","value":"1"}],\n  \t\t\t... // 6 identical fields\n  \t\t},\n'
        '  \t],\n  \t... // 7 identical fields\n  }')


def test_pod_update_rejects_removed_toleration_and_new_gate():
    s, old = created_pod(schedulingGates=[{"name": "a"}])
    new = copy.deepcopy(old)
    new["spec"]["tolerations"] = []
    new["spec"]["schedulingGates"] = [{"name": "b"}]
    msgs = {e.field: e.message for e in s.validate_update(new, old)}
    assert msgs["spec.tolerations"].endswith("existing toleration can not be modified except its tolerationSeconds")
    assert msgs["spec.schedulingGates"].endswith("only deletion is allowed, but found new scheduling gate 'b'")


def test_gated_pod_has_scheduling_gated_condition_and_status():
    s, pod = created_pod(schedulingGates=[{"name": "example.com/wait"}])
    assert pod["status"]["conditions"][0]["reason"] == "SchedulingGated"
    assert pod_summary(pod)[1] == "SchedulingGated"


def test_pod_status_update_terminated_container_stays_terminated():
    """Upstream checks no phase on a status write; what keeps a finished pod finished is its
    containers' states: under restartPolicy Never a terminated one may not run again."""
    s, old = created_pod(restartPolicy="Never")
    old["status"].update(phase="Succeeded", containerStatuses=[
        {"name": "app", "state": {"terminated": {"exitCode": 0}}}])
    new = copy.deepcopy(old)
    new["status"].update(phase="Running", containerStatuses=[{"name": "app", "state": {"running": {}}}])
    assert errs_by_field(s.validate_status_update(new, old)) == {("status.containerStatuses[0].state", "FieldValueForbidden")}


def test_binding_validation():
    """ValidatePodBinding: a target names a Node, by name."""
    assert [(e.field, e.reason) for e in validate_binding({"target": {"kind": "Pod", "name": "n"}})] == [
        ("target.kind", "FieldValueNotSupported")]
    assert [(e.field, e.reason) for e in validate_binding({"target": {"kind": "Node"}})] == [
        ("target.name", "FieldValueRequired")]
    assert validate_binding({"target": {"name": "n"}}) == []


def test_pod_field_selectors():
    s, pod = created_pod(nodeName="n1")
    pod["status"]["podIPs"] = [{"ip": "10.0.0.5"}]
    sel = s.field_selectors
    assert sel["spec.nodeName"](pod) == "n1" and sel["status.phase"](pod) == "Pending"
    assert sel["spec.hostNetwork"](pod) == "false" and sel["status.podIP"](pod) == "10.0.0.5"
    assert sel["spec.restartPolicy"](pod) == "Always" and sel["spec.schedulerName"](pod) == "default-scheduler"


# --- pod printing -------------------------------------------------------------------


def running_pod():
    s, pod = created_pod(containers=[{"name": "a", "image": "x"}, {"name": "b", "image": "x"}])
    pod["spec"]["nodeName"] = "node-1"
    pod["status"].update({
        "phase": "Running", "podIPs": [{"ip": "10.244.0.7"}],
        "conditions": [{"type": "Ready", "status": "False"}],
        "containerStatuses": [
            {"name": "a", "ready": True, "restartCount": 0, "state": {"running": {}}},
            {"name": "b", "ready": False, "restartCount": 3,
             "state": {"waiting": {"reason": "CrashLoopBackOff"}},
             "lastState": {"terminated": {"exitCode": 1, "finishedAt": ago(300)}}},
        ],
    })
    return s, pod


def test_pod_columns():
    s, pod = running_pod()
    assert [c.name for c in s.columns] == ["Name", "Ready", "Status", "Restarts", "Age", "IP", "Node",
                                           "Nominated Node", "Readiness Gates"]
    assert cells(s, pod, wide=True) == ["p", "1/2", "CrashLoopBackOff", "3 (5m ago)", "10.244.0.7", "node-1",
                                        "<none>", "<none>"]


def test_pod_status_reasons():
    s, pod = created_pod()
    assert cells(s, pod) == ["p", "0/1", "Pending", "0"]
    pod["status"]["containerStatuses"] = [{"name": "app", "state": {"waiting": {"reason": "ContainerCreating"}}}]
    assert pod_summary(pod)[1] == "ContainerCreating"
    pod["status"]["containerStatuses"] = [{"name": "app", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]
    pod["status"]["phase"] = "Succeeded"
    assert pod_summary(pod)[1] == "Completed"
    pod["status"]["containerStatuses"] = [{"name": "app", "state": {"terminated": {"exitCode": 2}}}]
    assert pod_summary(pod)[1] == "ExitCode:2"
    pod["status"]["phase"] = "Running"
    pod["metadata"]["deletionTimestamp"] = ago(1)
    assert pod_summary(pod)[1] == "Terminating"


def test_pod_init_status():
    s, pod = created_pod(initContainers=[{"name": "i1", "image": "x"}, {"name": "i2", "image": "x"}])
    pod["status"]["initContainerStatuses"] = [
        {"name": "i1", "state": {"terminated": {"exitCode": 0}}},
        {"name": "i2", "state": {"running": {}}},
    ]
    assert pod_summary(pod)[1] == "Init:1/2"
    pod["status"]["initContainerStatuses"][1]["state"] = {"waiting": {"reason": "ImagePullBackOff"}}
    assert pod_summary(pod)[1] == "Init:ImagePullBackOff"


def test_sidecar_counts_in_ready_total():
    s, pod = created_pod(initContainers=[{"name": "side", "image": "x", "restartPolicy": "Always"}])
    pod["status"]["initContainerStatuses"] = [{"name": "side", "started": True, "ready": True, "state": {"running": {}}}]
    pod["status"]["containerStatuses"] = [{"name": "app", "ready": True, "state": {"running": {}}}]
    assert pod_summary(pod)[:2] == ("2/2", "Pending")


def test_human_duration():
    assert [human_duration(s) for s in (5, 119, 150, 600, 3 * 3600 + 120, 9 * 3600, 3 * 86400 + 3600, 400 * 86400)] == [
        "5s", "119s", "2m30s", "10m", "3h2m", "9h", "3d1h", "400d"]


# --- services -----------------------------------------------------------------------


def make_svc(name="web", uid=None, **spec):
    base = {"selector": {"app": "web"}, "ports": [{"port": 80}]}
    base.update(spec)
    return {"metadata": {"name": name, "namespace": "default", "uid": uid or f"uid-{name}"}, "spec": base}


def create_svc(s, svc):
    """What a create reports: the allocation's first failure alone (begin_create), else validation."""
    s.default(svc, "v1")
    s.prepare_for_create(svc)
    return s.begin_create(svc) or s.validate(svc)


def test_service_defaults_and_allocation():
    s = ServiceStrategy()
    svc = make_svc()
    assert create_svc(s, svc) == []
    spec = svc["spec"]
    assert spec["type"] == "ClusterIP" and spec["sessionAffinity"] == "None"
    assert spec["ports"][0] == {"port": 80, "protocol": "TCP", "targetPort": 80}
    assert spec["internalTrafficPolicy"] == "Cluster"
    assert spec["ipFamilies"] == ["IPv4"] and spec["ipFamilyPolicy"] == "SingleStack"
    assert spec["clusterIPs"] == [spec["clusterIP"]]
    assert spec["clusterIP"].startswith("10.") and spec["clusterIP"] != "10.96.0.1"


def test_explicit_cluster_ip_conflict_and_range():
    s = ServiceStrategy()
    assert create_svc(s, make_svc("a", clusterIP="10.96.0.10")) == []
    errs = create_svc(s, make_svc("b", clusterIP="10.96.0.10"))
    assert [(e.field, e.message) for e in errs] == [
        ("spec.clusterIPs", 'Invalid value: ["10.96.0.10"]: failed to allocate IP 10.96.0.10: provided IP is already allocated')]
    errs = create_svc(s, make_svc("c", clusterIP="192.168.0.1"))
    assert errs[0].message.endswith(
        "failed to allocate IP 192.168.0.1: the provided IP (192.168.0.1) is not in the valid range. "
        "The range of valid IPs is 10.96.0.0/12")


def test_release_and_restore():
    s = ServiceStrategy()
    a = make_svc("a", clusterIP="10.96.0.10")
    create_svc(s, a)
    s.release(a)
    assert create_svc(s, make_svc("b", clusterIP="10.96.0.10")) == []
    fresh = ServiceStrategy()
    fresh.restore([a])
    assert create_svc(fresh, make_svc("c", clusterIP="10.96.0.10"))[0].field == "spec.clusterIPs"


def test_headless_service():
    s = ServiceStrategy()
    svc = make_svc(clusterIP="None", ports=[])
    assert create_svc(s, svc) == []
    assert svc["spec"]["clusterIPs"] == ["None"]
    assert s.columns[2].fn(svc) == "None"


def test_node_port_allocation_and_conflict():
    s = ServiceStrategy()
    svc = make_svc("np", type="NodePort")
    assert create_svc(s, svc) == []
    port = svc["spec"]["ports"][0]["nodePort"]
    assert 30000 <= port <= 32767 and svc["spec"]["externalTrafficPolicy"] == "Cluster"
    other = make_svc("np2", type="NodePort", ports=[{"port": 80, "nodePort": port}])
    errs = create_svc(s, other)
    assert [(e.field, e.message) for e in errs] == [
        ("spec.ports[0].nodePort", f"Invalid value: {port}: provided port is already allocated")]
    out = create_svc(s, make_svc("np3", type="NodePort", ports=[{"port": 80, "nodePort": 80}]))
    assert out[0].message.endswith("provided port is not in the valid range. The range of valid ports is 30000-32767")


def test_service_validation_rules():
    s = ServiceStrategy()
    errs = create_svc(s, make_svc(type="Weird", ports=[]))
    assert errs_by_field(errs) == {("spec.type", "FieldValueNotSupported"), ("spec.ports", "FieldValueRequired")}
    errs = create_svc(s, make_svc("m", ports=[{"port": 80}, {"port": 80, "name": "b"}]))
    got = errs_by_field(errs)
    assert ("spec.ports[0].name", "FieldValueRequired") in got and ("spec.ports[1]", "FieldValueDuplicate") in got
    errs = create_svc(s, make_svc("n", ports=[{"port": 0, "nodePort": 30001}]))
    got = errs_by_field(errs)
    assert ("spec.ports[0].port", "FieldValueInvalid") in got and ("spec.ports[0].nodePort", "FieldValueForbidden") in got
    errs = create_svc(s, make_svc("e", type="ExternalName", ports=[]))
    assert ("spec.externalName", "FieldValueRequired") in errs_by_field(errs)


def test_service_external_ips_are_ips_outside_the_reserved_ranges():
    """ValidateService checks each externalIP with IsValidIPForLegacyField, then ValidateEndpointIP
    (loopback, link-local, multicast and unspecified ones were stored), as Go's net.IP tells them
    (ffX2:: as link-local multicast); an IPv4-mapped address is refused first (StrictIPCIDRValidation)."""
    ips = ["bogus", "127.0.0.1", "169.254.1.1", "224.0.0.1", "0.0.0.0", "::ffff:127.0.0.1", "ff12::1",
           "::", "203.0.113.7", "2001:db8::1", "224.0.1.1"]
    errs = create_svc(ServiceStrategy(), make_svc(externalIPs=ips))
    p = "spec.externalIPs"
    assert [str(e) for e in errs] == [
        f'{p}[0]: Invalid value: "bogus": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)',
        f'{p}[1]: Invalid value: "127.0.0.1": may not be in the loopback range (127.0.0.0/8, ::1/128)',
        f'{p}[2]: Invalid value: "169.254.1.1": may not be in the link-local range (169.254.0.0/16, fe80::/10)',
        f'{p}[3]: Invalid value: "224.0.0.1": may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)',
        f'{p}[4]: Invalid value: "0.0.0.0": may not be unspecified (0.0.0.0)',
        f'{p}[5]: Invalid value: "::ffff:127.0.0.1": must not be an IPv4-mapped IPv6 address',
        f'{p}[6]: Invalid value: "ff12::1": may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)',
        f'{p}[7]: Invalid value: "::": may not be unspecified (::)']


def test_load_balancer_fields_only_on_load_balancers():
    """ValidateService forbids allocateLoadBalancerNodePorts and loadBalancerClass on other types (both
    were stored), a class must be a qualified name, and an update from LoadBalancer to LoadBalancer may
    not change the class (validateLoadBalancerClassField, then ValidateService: listed twice)."""
    s = ServiceStrategy()
    errs = create_svc(s, make_svc("np", type="NodePort", allocateLoadBalancerNodePorts=False, loadBalancerClass="x/y"))
    only = "Forbidden: may only be used when `type` is 'LoadBalancer'"
    assert [str(e) for e in errs] == [f"spec.allocateLoadBalancerNodePorts: {only}", f"spec.loadBalancerClass: {only}"]
    # null is unset (a nil pointer in Go)
    assert create_svc(s, make_svc("nil", allocateLoadBalancerNodePorts=None, loadBalancerClass=None)) == []
    errs = create_svc(s, make_svc("bad", type="LoadBalancer", loadBalancerClass="a b"))
    assert [e.field for e in errs] == ["spec.loadBalancerClass"] and errs[0].message.startswith('Invalid value: "a b": name part must')
    lb = make_svc("lb", type="LoadBalancer", loadBalancerClass="example.com/lb")
    assert create_svc(s, lb) == []
    changed = copy.deepcopy(lb)
    del changed["spec"]["loadBalancerClass"]
    s.prepare_for_update(changed, lb)
    assert [str(e) for e in s.validate_update(changed, lb)] == [
        'spec.loadBalancerClass: Invalid value: null: may not change once set']
    to_cluster_ip = copy.deepcopy(lb)  # left as they were, the LoadBalancer's fields are dropped
    to_cluster_ip["spec"]["type"] = "ClusterIP"
    s.prepare_for_update(to_cluster_ip, lb)
    assert s.validate_update(to_cluster_ip, lb) == []
    assert "loadBalancerClass" not in to_cluster_ip["spec"] and "allocateLoadBalancerNodePorts" not in to_cluster_ip["spec"]
    cls = copy.deepcopy(to_cluster_ip)  # a ClusterIP Service given a class on update
    cls["spec"]["loadBalancerClass"] = "example.com/lb"
    s.prepare_for_update(cls, to_cluster_ip)
    assert [str(e) for e in s.validate_update(cls, to_cluster_ip)] == [f"spec.loadBalancerClass: {only}"] * 2


def test_cluster_ip_immutable_and_carried_over():
    s = ServiceStrategy()
    old = make_svc()
    create_svc(s, old)
    new = copy.deepcopy(old)
    del new["spec"]["clusterIP"], new["spec"]["clusterIPs"]
    s.prepare_for_update(new, old)
    assert new["spec"]["clusterIP"] == old["spec"]["clusterIP"]
    assert s.validate_update(new, old) == []
    new["spec"]["clusterIP"] = new["spec"]["clusterIPs"][0] = "10.96.0.77"
    s.prepare_for_update(new, old)
    assert s.begin_update(new, old) == []  # not allocated: upstream allocates on update only from ExternalName
    # validateUpgradeDowngradeClusterIPs, ahead of ValidateService
    assert [str(e) for e in s.validate_update(new, old)] == [
        'spec.clusterIPs[0]: Invalid value: ["10.96.0.77"]: may not change once set']
    assert s.ips.owner("10.96.0.77") is None


def test_service_columns():
    s = ServiceStrategy()
    svc = make_svc(type="LoadBalancer", ports=[{"port": 443, "name": "https"}, {"port": 53, "protocol": "UDP", "name": "dns"}])
    create_svc(s, svc)
    row = cells(s, svc, wide=True)
    p0, p1 = (p["nodePort"] for p in svc["spec"]["ports"])
    assert row == ["web", "LoadBalancer", svc["spec"]["clusterIP"], "<pending>", f"443:{p0}/TCP,53:{p1}/UDP", "app=web"]
    svc["status"] = {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}}
    assert s.columns[3].fn(svc) == "1.2.3.4"
    assert ServiceStrategy.field_selectors["spec.type"](svc) == "LoadBalancer"


def test_ip_allocator_dynamic_avoids_static_band():
    a = ServiceIPAllocator("10.0.0.0/28")
    got = {a.allocate(f"o{i}") for i in range(14)}
    assert len(got) == 14 and "10.0.0.0" not in got and "10.0.0.15" not in got
    with pytest.raises(Exception, match="range is full"):
        a.allocate("x")


# --- namespaces, nodes ------------------------------------------------------------


def test_namespace_defaults_and_columns():
    s = NamespaceStrategy()
    ns = {"metadata": {"name": "team-a"}}
    s.default(ns, "v1")
    s.prepare_for_create(ns)
    assert ns["spec"] == {"finalizers": ["kubernetes"]} and ns["status"] == {"phase": "Active"}
    assert ns["metadata"]["labels"]["kubernetes.io/metadata.name"] == "team-a"
    assert cells(s, ns) == ["team-a", "Active"]
    assert s.field_selectors["status.phase"](ns) == "Active"
    assert s.name_validator("Team_A")


def test_namespace_status_phase_rules():
    s = NamespaceStrategy()
    ns = {"metadata": {"name": "a"}, "status": {"phase": "Terminating"}}
    assert s.validate_status_update(ns, ns)[0].field == "status.phase"
    ns["metadata"]["deletionTimestamp"] = ago(1)
    assert s.validate_status_update(ns, ns) == []


def test_namespace_update_keeps_finalizers():
    s = NamespaceStrategy()
    old = {"metadata": {"name": "a"}, "spec": {"finalizers": ["kubernetes"]}}
    new = {"metadata": {"name": "a"}, "spec": {"finalizers": []}}
    s.prepare_for_update(new, old)
    assert new["spec"]["finalizers"] == ["kubernetes"]
    bad = {"metadata": {"name": "a"}, "spec": {"finalizers": ["foo"]}}
    assert s.validate_finalize(bad, old)[0].field == "spec.finalizers[0]"


def test_node_columns_and_selector():
    s = NodeStrategy()
    node = {
        "metadata": {"name": "n1", "labels": {"node-role.kubernetes.io/control-plane": "", "kubernetes.io/role": "gpu"}},
        "spec": {"unschedulable": True},
        "status": {"conditions": [{"type": "Ready", "status": "True"}],
                   "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
                   "nodeInfo": {"kubeletVersion": "v1.37.0", "osImage": "Linux"},
                   "capacity": {"cpu": "4"}},
    }
    s.default(node, "v1")
    assert node["status"]["allocatable"] == {"cpu": "4"}
    assert cells(s, node, wide=True) == ["n1", "Ready,SchedulingDisabled", "control-plane,gpu", "v1.37.0",
                                         "10.0.0.1", "<none>", "Linux", "<unknown>", "<unknown>"]
    assert s.field_selectors["spec.unschedulable"](node) == "true"
    node["status"]["conditions"] = []
    assert s.columns[1].fn(node) == "Unknown,SchedulingDisabled"


def test_node_taints():
    s = NodeStrategy()
    node = {"metadata": {"name": "n"}, "spec": {"taints": [{"key": "a", "effect": "NoSchedule"},
                                                          {"key": "a", "effect": "NoSchedule"},
                                                          {"key": "b", "effect": "Sometimes"}]}}
    got = errs_by_field(s.validate(node))  # ValidateNode reports its taints under metadata
    assert ("metadata.taints[1].effect", "FieldValueDuplicate") in got
    assert ("metadata.taints[2].effect", "FieldValueNotSupported") in got


def test_node_resources():
    """ValidateNodeResources: capacity and allocatable not negative, integer resources whole (a negative
    cpu capacity was stored); a negative fraction of pods is both."""
    node = {"metadata": {"name": "n"}, "status": {"capacity": {"cpu": "-1", "pods": "-1.5", "memory": "1Gi"},
                                                  "allocatable": {"example.com/gpu": "500m", "cpu": "1500m"}}}
    assert [str(e) for e in NodeStrategy().validate(node)] == [
        'status.capacity.cpu: Invalid value: "-1": must be greater than or equal to 0',
        'status.capacity.pods: Invalid value: "-1.5": must be greater than or equal to 0',
        'status.capacity.pods: Invalid value: "-1.5": must be an integer',
        'status.allocatable.example.com/gpu: Invalid value: "500m": must be an integer']


def test_node_pod_cidrs():
    """ValidateNode: podCIDRs are CIDRs, a dual-stack pair at most, without repeats (two IPv4 ones were
    stored); v1's podCIDR is podCIDRs' first, and an update may change podCIDRs only from none."""
    s = NodeStrategy()

    def errs(spec, old=None):
        node = {"metadata": {"name": "n"}, "spec": spec}
        s.default(node, "v1")
        return [str(e) for e in (s.validate(node) if old is None else s.validate_update(node, old))], node

    assert errs({"podCIDRs": ["10.0.0.0/24", "fd00::/64"]})[0] == []
    one = "may specify no more than one CIDR for each IP family"
    assert errs({"podCIDRs": ["10.0.0.0/24", "10.1.0.0/24"]})[0] == [
        f'spec.podCIDRs: Invalid value: ["10.0.0.0/24","10.1.0.0/24"]: {one}']
    assert errs({"podCIDRs": ["10.0.0.0/24", "fd00::/64", "10.0.0.0/24"]})[0] == [
        f'spec.podCIDRs: Invalid value: ["10.0.0.0/24","fd00::/64","10.0.0.0/24"]: {one}',
        'spec.podCIDRs[2]: Duplicate value: "10.0.0.0/24"']
    assert errs({"podCIDRs": ["10.0.0.1", "x/8"]})[0] == [
        f'spec.podCIDRs[{i}]: Invalid value: "{c}": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)'
        for i, c in enumerate(["10.0.0.1", "x/8"])]
    got, node = errs({"podCIDR": "10.0.0.0/24", "podCIDRs": ["10.1.0.0/24"]})
    assert got == [] and node["spec"]["podCIDR"] == "10.1.0.0/24"
    assert errs({"podCIDR": "10.2.0.0/24"})[1]["spec"]["podCIDRs"] == ["10.2.0.0/24"]
    old = errs({"podCIDRs": ["10.0.0.0/24"]})[1]
    changed = 'spec.podCIDRs: Forbidden: node updates may not change podCIDR except from "" to valid'
    assert errs({"podCIDRs": ["10.0.0.0/24", "fd00::/64"]}, old)[0] == [changed]
    assert errs({"podCIDR": "10.9.0.0/24"}, old)[0] == [changed]
    assert errs({"podCIDRs": ["10.0.0.0/24", "fd00::/64"]}, errs({})[1])[0] == []



async def test_over_http_a_node_update_refuses_an_address_listed_twice_and_status_writes_are_validated(core):
    """ValidateNodeUpdate, which nodeStatusStrategy runs too: an address listed twice is a Duplicate on any
    update (a create is not checked), and a write through /status is validated as a whole node (a
    negative capacity or a repeated address sent to /status was stored; found by fuzz47)."""
    import asyncio
    import json

    from kubernetes.client.rest import ApiException

    twice = [{"type": "InternalIP", "address": "10.0.0.1"}] * 2
    created = await asyncio.to_thread(core.create_node, {"metadata": {"name": "n"}, "status": {"addresses": twice}})
    assert len(created.status.addresses) == 2

    def causes(call, *args):
        with pytest.raises(ApiException) as e:
            call(*args)
        assert e.value.status == 422
        return [(c["field"], c["message"]) for c in json.loads(e.value.body)["details"]["causes"]]

    dup = ("status.addresses[1]", 'Duplicate value: {"type":"InternalIP","address":"10.0.0.1"}')
    assert await asyncio.to_thread(causes, core.patch_node, "n", {"metadata": {"labels": {"a": "b"}}}) == [dup]
    node = {"metadata": {"name": "n"}, "status": {"addresses": twice[:1] + [{"type": "Hostname", "address": "n"}] + twice[:1]}}
    assert await asyncio.to_thread(causes, core.replace_node_status, "n", node) == [("status.addresses[2]", dup[1])]
    node["status"] = {"addresses": twice[:1], "capacity": {"cpu": "-1"}, "allocatable": {"cpu": "1"}}
    assert await asyncio.to_thread(causes, core.replace_node_status, "n", node) == [
        ("status.capacity.cpu", 'Invalid value: "-1": must be greater than or equal to 0')]
    node["status"] = {"addresses": twice[:1]}
    fixed = await asyncio.to_thread(core.replace_node_status, "n", node)
    assert [a.address for a in fixed.status.addresses] == ["10.0.0.1"]


# --- configmaps, secrets, service accounts, endpoints, events ------------------


def test_configmap_keys_size_and_immutability():
    s = ConfigMapStrategy()
    cm = {"metadata": {"name": "c", "namespace": "d"}, "data": {"ok.key": "v", "bad key": "v"}, "binaryData": {"ok.key": "AA=="}}
    errs = s.validate(cm)
    msgs = {(e.field, e.message) for e in errs}
    assert ("data[bad key]", 'Invalid value: "bad key": a valid config key must consist of alphanumeric characters, '
            "'-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is "
            "'[-._a-zA-Z0-9]+')") in msgs
    assert ("data[ok.key]", 'Invalid value: "ok.key": duplicate of key present in binaryData') in msgs
    big = {"metadata": {"name": "c"}, "data": {"k": "x" * (1024 * 1024 + 1)}}
    # kubectl create cm: 'ConfigMap "c" is invalid: []: Too long: may not be more than 1048576 bytes'
    assert [(e.reason, str(e)) for e in s.validate(big)] == [
        ("FieldValueTooLong", "[]: Too long: may not be more than 1048576 bytes")]
    old = {"metadata": {"name": "c"}, "data": {"k": "1"}, "immutable": True}
    new = {"metadata": {"name": "c"}, "data": {"k": "2"}, "immutable": True}
    assert [(e.field, e.message) for e in s.validate_update(new, old)] == [
        ("data", "Forbidden: field is immutable when `immutable` is set")]
    assert cells(s, old) == ["c", 1]


def test_secret_defaults_string_data_and_rules():
    s = SecretStrategy()
    sec = {"metadata": {"name": "s", "namespace": "d"}, "stringData": {"user": "admin"}}
    s.default(sec, "v1")
    sec = s.to_storage(sec, "v1")
    assert sec["type"] == "Opaque" and sec["data"] == {"user": "YWRtaW4="} and "stringData" not in sec
    assert s.validate(sec) == []
    assert cells(s, sec) == ["s", "Opaque", 1]
    assert s.field_selectors["type"](sec) == "Opaque"
    tls = {"metadata": {"name": "t"}, "type": "kubernetes.io/tls", "data": {"tls.crt": ""}}
    assert ("data[tls.key]", "FieldValueRequired") in errs_by_field(s.validate(tls))
    changed = dict(sec, type="kubernetes.io/tls", data={"tls.crt": "", "tls.key": ""})
    assert ("type", "FieldValueInvalid") in errs_by_field(s.validate_update(changed, sec))


def test_service_account_columns():
    s = ServiceAccountStrategy()
    sa = {"metadata": {"name": "default"}, "secrets": [{"name": "x"}]}
    assert cells(s, sa) == ["default", 1]
    assert s.validate({"imagePullSecrets": [{}]})[0].field == "imagePullSecrets[0].name"


def test_endpoints_column_and_validation():
    s = EndpointsStrategy()
    ep = {"metadata": {"name": "web"}, "subsets": [
        {"addresses": [{"ip": f"10.0.0.{i}"} for i in range(1, 5)], "ports": [{"port": 80}]}]}
    s.default(ep, "v1")
    assert s.validate(ep) == []
    assert s.columns[1].fn(ep) == "10.0.0.1:80,10.0.0.2:80,10.0.0.3:80 + 1 more..."
    assert s.columns[1].fn({"metadata": {"name": "x"}}) == "<none>"
    bad = {"subsets": [{"addresses": [{}], "ports": [{"port": 0, "protocol": "TCP"}]}]}
    got = errs_by_field(s.validate(bad))
    assert ("subsets[0].addresses[0].ip", "FieldValueRequired") in got and ("subsets[0].ports[0].port", "FieldValueInvalid") in got


def test_endpoints_addresses_are_ips_outside_the_reserved_ranges():
    """validateEndpointAddress with ValidateEndpointIP (the fuzzer's probes stored "bogus", 127.0.0.1,
    169.254.1.1 and 224.0.0.1), and a node name that must be a DNS subdomain."""
    s = EndpointsStrategy()
    addrs = [{"ip": "bogus"}, {"ip": "127.0.0.1"}, {"ip": "169.254.1.1"}, {"ip": "224.0.0.1"}, {"ip": "0.0.0.0"},
             {"ip": "fe80::1"}, {"ip": "10.0.0.1", "nodeName": "Node_1"}, {"ip": "2001:db8::1"}]
    ep = {"metadata": {"name": "web"}, "subsets": [{"addresses": addrs, "ports": [{"port": 80, "protocol": "TCP"}]}]}
    p = "subsets[0].addresses"
    assert [str(e) for e in s.validate(ep)] == [
        f'{p}[0].ip: Invalid value: "bogus": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)',
        f'{p}[0].ip: Invalid value: "bogus": must be a valid IP address',
        f'{p}[1].ip: Invalid value: "127.0.0.1": may not be in the loopback range (127.0.0.0/8, ::1/128)',
        f'{p}[2].ip: Invalid value: "169.254.1.1": may not be in the link-local range (169.254.0.0/16, fe80::/10)',
        f'{p}[3].ip: Invalid value: "224.0.0.1": may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)',
        f'{p}[4].ip: Invalid value: "0.0.0.0": may not be unspecified (0.0.0.0)',
        f'{p}[5].ip: Invalid value: "fe80::1": may not be in the link-local range (169.254.0.0/16, fe80::/10)',
        f'{p}[6].nodeName: Invalid value: "Node_1": a lowercase RFC 1123 subdomain must consist of lower case '
        "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. "
        "'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"]


def test_event_columns_and_validation():
    s = EventStrategy(clock)
    ev = {"metadata": {"name": "p.1", "namespace": "default"}, "type": "Warning", "reason": "BackOff",
          "message": " Back-off restarting ", "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default",
                                                                   "fieldPath": "spec.containers{a}"},
          "source": {"component": "kubelet", "host": "node-1"},
          "firstTimestamp": ago(600), "lastTimestamp": ago(30), "count": 4}
    assert s.columns[0].name == "Last Seen" and s.columns[-1].format == "name"
    assert [c.fn(ev) for c in s.columns] == ["30s", "Warning", "BackOff", "pod/p", "spec.containers{a}",
                                            "kubelet, node-1", "Back-off restarting", "10m", 4, "p.1"]
    assert s.validate(ev) == []
    assert s.field_selectors["involvedObject.name"](ev) == "p" and s.field_selectors["source"](ev) == "kubelet"
    wrong = dict(ev, involvedObject={"kind": "Pod", "name": "p", "namespace": "other"})
    assert [e.field for e in s.validate(wrong)] == ["involvedObject.namespace"]
    new_style = {"metadata": {"name": "e", "namespace": "default"}, "eventTime": "2026-07-01T11:59:00.000000Z",
                 "involvedObject": {"namespace": "default"}}
    got = errs_by_field(s.validate(new_style))
    assert {("reportingComponent", "FieldValueRequired"), ("reportingInstance", "FieldValueRequired"),
            ("action", "FieldValueRequired"), ("reason", "FieldValueRequired")} <= got


@pytest.mark.parametrize("containers, qos", [
    ([{"resources": {"limits": {"cpu": "500m", "memory": "1Gi"}, "requests": {"cpu": "0.5", "memory": "1024Mi"}}},
      {"resources": {"limits": {"cpu": "1", "memory": "1G"}, "requests": {"cpu": "1", "memory": "1G"}}}], "Guaranteed"),
    # equal totals across containers, but the second has no cpu limit of its own
    ([{"resources": {"limits": {"cpu": "2", "memory": "1Gi"}, "requests": {"cpu": "1", "memory": "1Gi"}}},
      {"resources": {"limits": {"memory": "1Gi"}, "requests": {"cpu": "1", "memory": "1Gi"}}}], "Burstable"),
    ([{"resources": {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "900m", "memory": "1Gi"}}}], "Burstable"),
    ([{"resources": {"requests": {"cpu": "0", "memory": "0"}, "limits": {"nvidia.com/gpu": "1"}}}], "BestEffort"),
])
def test_qos_class_from_the_containers_totals(containers, qos):
    assert qos_class({"containers": containers}) == qos


def test_qos_class_is_remembered_by_the_quantities_it_is_worked_out_from(monkeypatch):
    import nanokube.registry.core_pods as core_pods
    calls = []
    work = core_pods._qos_class
    monkeypatch.setattr(core_pods, "_qos_class", lambda groups: calls.append(groups) or work(groups))
    monkeypatch.setattr(core_pods, "_QOS", {})
    guaranteed = {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "1", "memory": "1Gi"}}
    assert qos_class({"containers": [{"resources": guaranteed}]}) == "Guaranteed"
    assert qos_class({"containers": [{"name": "other", "resources": dict(guaranteed)}]}) == "Guaranteed"
    assert len(calls) == 1
    # a quantity given as a number is none (not counted), unlike its text; unhashable values are worked out each time
    assert qos_class({"containers": [{"resources": {"limits": {"cpu": 1, "memory": "1Gi"},
                                                    "requests": {"cpu": 1, "memory": "1Gi"}}}]}) == "Burstable"
    assert qos_class({"containers": [{"resources": {"limits": {"cpu": ["1"]}}}]}) == "BestEffort"
    assert qos_class({"containers": [{"resources": {"limits": {"cpu": ["1"]}}}]}) == "BestEffort"
    assert len(calls) == 4


def test_env_names_are_printable_ascii_without_equals_and_taint_effects_are_known():
    names = ["A_b-1.x ~", "=x", "a\tb", "é", "a\x7f", "[]{}"]
    s, pod = created_pod(containers=[{"name": "app", "image": "nginx:1.27", "env": [{"name": n, "value": "v"} for n in names]}],
                         tolerations=[{"key": "k", "operator": "Exists", "effect": e} for e in ("NoExecute", "NoRun")],
                         nodeName="n1", schedulerName="Bad_Name")
    got = errs_by_field(s.validate(pod))
    assert {f for f, _ in got if ".env[" in f} == {f"spec.containers[0].env[{i}].name" for i in (1, 2, 3, 4)}
    assert ("spec.tolerations[1].effect", "FieldValueNotSupported") in got
    assert ("spec.tolerations[0].effect", "FieldValueNotSupported") not in got
    assert ("spec.schedulerName", "FieldValueInvalid") in got and not any(f == "spec.nodeName" for f, _ in got)


@pytest.mark.parametrize("stype, data, causes", [
    ("kubernetes.io/tls", {}, ["data[tls.crt]", "data[tls.key]"]),
    ("kubernetes.io/basic-auth", {}, ["data[username]", "data[password]"]),
    ("kubernetes.io/ssh-auth", {"ssh-privatekey": ""}, ["data[ssh-privatekey]"]),
])
async def test_over_http_secret_types_require_their_keys_in_validate_secrets_order(core, stype, data, causes):
    """ValidateSecret: tls.crt before tls.key, both basic-auth keys when neither is there, an empty
    ssh-privatekey as missing."""
    import asyncio
    import json

    from kubernetes.client.rest import ApiException

    with pytest.raises(ApiException) as e:
        await asyncio.to_thread(core.create_namespaced_secret, "default",
                                {"metadata": {"name": "s"}, "type": stype, "data": data})
    assert e.value.status == 422
    assert [(c["field"], c["message"]) for c in json.loads(e.value.body)["details"]["causes"]] == [
        (f, "Required value") for f in causes]


@pytest.mark.parametrize("stype, key, content, message", [
    ("kubernetes.io/dockercfg", ".dockercfg", b'{"registry": ', "unexpected end of JSON input"),
    ("kubernetes.io/dockercfg", ".dockercfg", b"[]",
     "json: cannot unmarshal array into Go value of type map[string]interface {}"),
    ("kubernetes.io/dockerconfigjson", ".dockerconfigjson", b'{"auths" {}}', "invalid character '{' after object key"),
    ("kubernetes.io/dockerconfigjson", ".dockerconfigjson", b"auths", "invalid character 'a' looking for beginning of value"),
    # Go's scanner holds 10,000 levels and refuses the bracket that opens one more (a syntax error at it)
    ("kubernetes.io/dockerconfigjson", ".dockerconfigjson", b"[" * 5_000 + b"]" * 5_000,
     "json: cannot unmarshal array into Go value of type map[string]interface {}"),
    ("kubernetes.io/dockerconfigjson", ".dockerconfigjson", b"[" * 10_001 + b"]" * 10_001,
     "invalid character '[' exceeded max depth"),
    ("kubernetes.io/dockerconfigjson", ".dockerconfigjson", b"[" * 20_000, "invalid character '[' exceeded max depth"),
])
async def test_over_http_docker_config_secrets_hold_a_json_object(core, stype, key, content, message):
    """ValidateSecret unmarshals a docker config into a map: encoding/json's error, the contents
    redacted; a JSON object (or null) passes."""
    import asyncio
    import base64
    import json

    from kubernetes.client.rest import ApiException

    def secret(name, raw):
        return {"metadata": {"name": name}, "type": stype, "data": {key: base64.b64encode(raw).decode()}}

    with pytest.raises(ApiException) as e:
        await asyncio.to_thread(core.create_namespaced_secret, "default", secret("bad", content))
    assert e.value.status == 422
    assert [(c["field"], c["message"]) for c in json.loads(e.value.body)["details"]["causes"]] == [
        (f"data[{key}]", f'Invalid value: "<secret contents redacted>": {message}')]
    created = await asyncio.to_thread(core.create_namespaced_secret, "default", secret("good", b'{"auths": {}}'))
    assert created.type == stype


async def test_over_http_a_secret_update_reports_its_type_before_its_contents(core):
    """ValidateSecretUpdate: the immutable type, then ValidateSecret's errors."""
    import asyncio
    import json

    from kubernetes.client.rest import ApiException

    await asyncio.to_thread(core.create_namespaced_secret, "default", {"metadata": {"name": "s"}, "data": {"a": "eA=="}})
    with pytest.raises(ApiException) as e:
        await asyncio.to_thread(core.replace_namespaced_secret, "s", "default",
                                {"metadata": {"name": "s"}, "type": "kubernetes.io/tls", "data": {"a": "eA=="}})
    assert [(c["field"], c["message"]) for c in json.loads(e.value.body)["details"]["causes"]] == [
        ("type", 'Invalid value: "kubernetes.io/tls": field is immutable'), ("data[tls.crt]", "Required value"),
        ("data[tls.key]", "Required value")]


async def test_over_http_a_secret_too_large_is_reported_before_its_missing_keys(core):
    import asyncio
    import base64
    import json

    from kubernetes.client.rest import ApiException

    big = base64.b64encode(b"x" * (1024 * 1024 + 1)).decode()
    with pytest.raises(ApiException) as e:
        await asyncio.to_thread(core.create_namespaced_secret, "default",
                                {"metadata": {"name": "s"}, "type": "kubernetes.io/tls", "data": {"a": big}})
    assert [(c["field"], c["message"]) for c in json.loads(e.value.body)["details"]["causes"]] == [
        ("data", "Too long: may not be more than 1048576 bytes"), ("data[tls.crt]", "Required value"),
        ("data[tls.key]", "Required value")]
