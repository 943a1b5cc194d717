"""ValidatePodSpec rules a pod's admission plugins usually refuse first, met by templates
(found by the fuzzer on CronJobs and StatefulSets); then pods/status writes (ValidatePodStatusUpdate,
the status strategy's preparation and warnings) through the official client."""

import asyncio
import json

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from nanokube.registry.core_pods import validate_pod_spec

DNS = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start "
       "and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
       "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")


@pytest.mark.parametrize("extra, errors", [
    ({"runtimeClassName": "gvisor", "preemptionPolicy": "Never", "os": {"name": "linux"}}, []),
    ({"runtimeClassName": "*"}, [f'template.spec.runtimeClassName: Invalid value: "*": {DNS}']),
    ({"runtimeClassName": ""}, [f'template.spec.runtimeClassName: Invalid value: "": {DNS}']),
    ({"preemptionPolicy": "bogus"},
     ['template.spec.preemptionPolicy: Unsupported value: "bogus": supported values: "PreemptLowerPriority", "Never"']),
    ({"preemptionPolicy": ""}, ["template.spec.preemptionPolicy: Required value"]),
    ({"os": {"name": "plan9"}}, ['template.spec.os: Unsupported value: "plan9": supported values: "linux", "windows"']),
    ({"os": {}}, ["template.spec.os.name: Required value: cannot be empty"]),
])
def test_runtime_class_preemption_policy_and_os_are_validated(extra, errors):
    spec = {"containers": [{"name": "c", "image": "i", "imagePullPolicy": "Always", "terminationMessagePolicy": "File"}],
            "restartPolicy": "Always", "dnsPolicy": "ClusterFirst", **extra}
    assert [str(e) for e in validate_pod_spec(spec, "template.spec")] == errors


def test_an_ephemeral_volume_claim_template_may_only_carry_labels_and_annotations():
    """ValidatePersistentVolumeClaimTemplate's ValidateTemplateObjectMeta."""
    template = {"metadata": {"name": "x", "annotations": {"a": "b"}},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}
    spec = {"containers": [{"name": "c", "image": "i", "imagePullPolicy": "Always", "terminationMessagePolicy": "File"}],
            "restartPolicy": "Always", "dnsPolicy": "ClusterFirst",
            "volumes": [{"name": "v", "ephemeral": {"volumeClaimTemplate": template}}]}
    assert [str(e) for e in validate_pod_spec(spec, "spec")] == [
        "spec.volumes[0].ephemeral.volumeClaimTemplate.metadata.name: Forbidden: cannot be set"]


# --- pods/status: ValidatePodStatusUpdate and the status strategy, through the official client ---

QUALIFIED = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
             "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
             "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")


def _status_pod(name: str, **spec) -> dict:
    return {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "busybox"}], **spec}}


async def _call(f, *args):
    return await asyncio.to_thread(f, *args)


async def _refused(f, *args) -> str:
    with pytest.raises(ApiException) as e:
        await _call(f, *args)
    assert e.value.status == 422, e.value.body
    return json.loads(e.value.body)["message"]


async def _patch_status(core, name: str, status: dict):
    return await _call(core.patch_namespaced_pod_status_with_http_info, name, "default", {"status": status})


async def test_status_conditions_nominated_node_and_qos_class(core):
    """Custom condition types are qualified names (upstream reports them under metadata, field "Type");
    nominatedNodeName is a DNS subdomain when it changes; qosClass never changes, and a write without
    it keeps the stored one."""
    await _call(core.create_namespaced_pod, "default", _status_pod("p"))
    assert await _refused(core.patch_namespaced_pod_status, "p", "default", {"status": {
        "conditions": [{"type": "PodScheduled", "status": "False"}, {"type": "bad type", "status": "True"}],
        "nominatedNodeName": "Node_1", "qosClass": "Guaranteed"}}) == (
        'Pod "p" is invalid: ['
        f'metadata.conditions[1].Type: Invalid value: "bad type": {QUALIFIED}, '
        'status.nominatedNodeName: Invalid value: "Node_1": a lowercase RFC 1123 subdomain must consist of lower case '
        "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. "
        "'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*'), "
        'status.qosClass: Invalid value: "Guaranteed": field is immutable]')
    pod = await _call(core.read_namespaced_pod_status, "p", "default")
    body = client.ApiClient().sanitize_for_serialization(pod)
    body["status"] = {"phase": "Running", "conditions": [{"type": "example.com/Warm", "status": "True"}]}
    replaced = await _call(core.replace_namespaced_pod_status, "p", "default", body)
    assert (replaced.status.phase, replaced.status.qos_class) == ("Running", "BestEffort")
    assert [c.type for c in replaced.status.conditions] == ["example.com/Warm"]


async def test_status_observed_generations_are_kept_when_cleared(core):
    """A status written without observedGeneration (the status's, or a condition's: matched to the
    old conditions of its type in order) keeps the stored value; a condition of a new type gets none."""
    await _call(core.create_namespaced_pod, "default", _status_pod("g"))
    await _patch_status(core, "g", {"observedGeneration": 1, "conditions": [
        {"type": "Ready", "status": "False", "observedGeneration": 1}]})
    body = client.ApiClient().sanitize_for_serialization(await _call(core.read_namespaced_pod, "g", "default"))
    body["status"] = {"phase": "Pending", "conditions": [{"type": "Ready", "status": "True"},
                                                         {"type": "example.com/Other", "status": "True"}]}
    pod = await _call(core.replace_namespaced_pod_status, "g", "default", body)
    assert (pod.status.observed_generation, pod.status.qos_class) == (1, "BestEffort")
    assert [(c.type, c.status, c.observed_generation) for c in pod.status.conditions] == [
        ("Ready", "True", 1), ("example.com/Other", "True", None)]


@pytest.mark.parametrize("policy, exit_code, refused", [("Never", 0, True), ("OnFailure", 0, True),
                                                        ("OnFailure", 1, False), ("Always", 0, False)])
async def test_a_terminated_container_runs_again_only_where_it_restarts(core, policy, exit_code, refused):
    """ValidateContainerStateTransition by the pod's restartPolicy; the phase itself is not checked."""
    await _call(core.create_namespaced_pod, "default", _status_pod("t", restartPolicy=policy))
    await _patch_status(core, "t", {"phase": "Failed", "containerStatuses": [
        {"name": "c", "image": "busybox", "imageID": "", "ready": False, "restartCount": 0,
         "state": {"terminated": {"exitCode": exit_code}}}]})
    running = {"phase": "Running", "containerStatuses": [
        {"name": "c", "image": "busybox", "imageID": "", "ready": True, "restartCount": 1, "state": {"running": {}}}]}
    if refused:
        assert await _refused(core.patch_namespaced_pod_status, "t", "default", {"status": running}) == (
            'Pod "t" is invalid: status.containerStatuses[0].state: Forbidden: may not be transitioned to '
            "non-terminated state")
    else:
        pod, status, _ = await _patch_status(core, "t", running)
        assert status == 200 and pod.status.phase == "Running"


async def test_init_sidecar_and_ephemeral_state_transitions(core):
    """A sidecar (restartPolicy Always init container) may run again; a plain init container and
    an ephemeral container may not."""
    await _call(core.create_namespaced_pod, "default", _status_pod(
        "i", restartPolicy="Never", initContainers=[{"name": "setup", "image": "busybox"},
                                                    {"name": "side", "image": "busybox", "restartPolicy": "Always"}]))

    def cs(name: str, state: dict) -> dict:
        return {"name": name, "image": "busybox", "imageID": "", "ready": False, "restartCount": 0, "state": state}

    done = {"terminated": {"exitCode": 0}}
    await _patch_status(core, "i", {"initContainerStatuses": [cs("setup", done), cs("side", done)],
                                    "ephemeralContainerStatuses": [cs("debug", done)]})
    assert await _refused(core.patch_namespaced_pod_status, "i", "default", {"status": {
        "initContainerStatuses": [cs("setup", {"running": {}}), cs("side", {"running": {}})],
        "ephemeralContainerStatuses": [cs("debug", {"waiting": {}})]}}) == (
        'Pod "i" is invalid: [status.initContainerStatuses[0].state: Forbidden: may not be transitioned to '
        "non-terminated state, status.ephemeralContainerStatuses[0].state: Forbidden: may not be transitioned "
        "to non-terminated state]")
    pod, _, _ = await _patch_status(core, "i", {"initContainerStatuses": [cs("setup", done), cs("side", {"running": {}})]})
    assert [s.state.running is not None for s in pod.status.init_container_statuses] == [False, True]


async def test_claim_statuses_users_and_allocated_resources(core):
    await _call(core.create_namespaced_pod, "default", {
        "metadata": {"name": "a"},
        "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}],
                 "containers": [{"name": "c", "image": "busybox",
                                 "resources": {"requests": {"cpu": "1"}, "claims": [{"name": "gpu", "request": "r"}]}}]}})

    def cs(name: str, **extra) -> dict:
        return {"name": name, "image": "busybox", "imageID": "", "ready": False, "restartCount": 0, **extra}

    message = await _refused(core.patch_namespaced_pod_status, "a", "default", {"status": {
        "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "a-gpu-x1"}, {"name": "gpu"},
                                  {"name": "tpu", "resourceClaimName": "Bad"}],
        "containerStatuses": [cs("c", user={"linux": {"uid": -1, "gid": 0, "supplementalGroups": [2147483648]}},
                                 allocatedResourcesStatus=[
                                     {"name": "claim:gpu/r", "resources": [{"resourceID": "d0", "health": "Healthy"},
                                                                           {"resourceID": "d0", "health": "Sick"}]},
                                     {"name": "claim:gpu"}, {"name": "memory"}])],
        "ephemeralContainerStatuses": [cs("debug", allocatedResourcesStatus=[{"name": "cpu"}])]}})
    assert message.removeprefix('Pod "a" is invalid: [').removesuffix("]").split(", status.") == [
        'status.resourceClaimStatuses[1].name: Duplicate value: "gpu"',
        'resourceClaimStatuses[2].name: Invalid value: "tpu": must match the name of an entry in `spec.resourceClaims`',
        'resourceClaimStatuses[2].name: Invalid value: "Bad": a lowercase RFC 1123 subdomain must consist of lower '
        "case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. "
        "'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
        "containerStatuses[0].linux.uid: Invalid value: -1: must be between 0 and 2147483647, inclusive",
        "containerStatuses[0].linux.supplementalGroups[0]: Invalid value: 2147483648: must be between 0 and "
        "2147483647, inclusive",
        'containerStatuses[0].allocatedResourcesStatus[0].resources[1].health: Unsupported value: "Sick": supported '
        'values: "Healthy", "Unhealthy", "Unknown"',
        'containerStatuses[0].allocatedResourcesStatus[0].resources[1].resourceID: Duplicate value: "d0"',
        'containerStatuses[0].allocatedResourcesStatus[1].name: Invalid value: "claim:gpu": must match one of the '
        "container's resource claims in a format 'claim:<claimName>/<request>' or 'claim:<claimName>' if request "
        "is empty",
        'containerStatuses[0].allocatedResourcesStatus[2].name: Invalid value: "memory": must match one of the '
        "container's resource requests",
        "ephemeralContainerStatuses[0].allocatedResourcesStatus: Forbidden: must not be specified in container status"]
    pod, status, _ = await _patch_status(core, "a", {
        "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "a-gpu-x1"}],
        "containerStatuses": [cs("c", user={"linux": {"uid": 1000, "gid": 1000}}, allocatedResourcesStatus=[
            {"name": "cpu"}, {"name": "claim:gpu/r", "resources": [{"resourceID": "d0", "health": "Healthy"}]}])]})
    assert status == 200 and pod.status.container_statuses[0].user.linux.uid == 1000


async def test_a_windows_pods_status_carries_no_linux_user(core):
    await _call(core.create_namespaced_pod, "default", _status_pod("w", os={"name": "windows"}))
    assert await _refused(core.patch_namespaced_pod_status, "w", "default", {"status": {"containerStatuses": [
        {"name": "c", "image": "i", "imageID": "", "ready": False, "restartCount": 0,
         "user": {"linux": {"uid": 0, "gid": 0}}}]}}) == (
        'Pod "w" is invalid: status.containerStatuses[0].linux: Forbidden: cannot be set for a windows pod')


async def test_status_ips_are_warned_about_in_their_non_standard_forms(core):
    """podStatusStrategy.WarningsOnUpdate: GetWarningsForIP on every pod and host IP; a write in
    canonical forms gets none."""
    await _call(core.create_namespaced_pod, "default", _status_pod("ip"))
    _, status, headers = await _patch_status(core, "ip", {
        "podIP": "10.0.0.1", "podIPs": [{"ip": "10.0.0.1"}, {"ip": "2001:DB8::1"}],
        "hostIP": "fd00::0:1", "hostIPs": [{"ip": "fd00::0:1"}]})
    assert status == 200
    assert headers.getlist("Warning") == [
        '299 - "status.podIPs[1].ip: IPv6 address \\"2001:DB8::1\\" should be in RFC 5952 canonical format '
        '(\\"2001:db8::1\\")"',
        '299 - "status.hostIPs[0].ip: IPv6 address \\"fd00::0:1\\" should be in RFC 5952 canonical format '
        '(\\"fd00::1\\")"']
    body = client.ApiClient().sanitize_for_serialization(await _call(core.read_namespaced_pod, "ip", "default"))
    body["status"].update(podIPs=[{"ip": "10.0.0.1"}, {"ip": "2001:db8::1"}], hostIP="fd00::1", hostIPs=[{"ip": "fd00::1"}])
    pod, status, headers = await _call(core.replace_namespaced_pod_status_with_http_info, "ip", "default", body)
    assert status == 200 and "Warning" not in headers and [i.ip for i in pod.status.host_ips] == ["fd00::1"]


async def test_field_selectors_v1s_conversion_also_accepts_spec_host_and_status_pod_ips(core):
    """core/v1's Pod conversion func passes status.podIPs (absent from the pod's selectable fields, so it
    reads as "") and converts spec.host to spec.nodeName; neither is refused as an unknown label."""
    await _call(core.create_namespaced_pod, "default", _status_pod("on-n1", nodeName="n1"))
    await _call(core.create_namespaced_pod, "default", _status_pod("unbound"))

    async def names(sel: str) -> list[str]:
        pods = await asyncio.to_thread(core.list_namespaced_pod, "default", field_selector=sel)
        return sorted(p.metadata.name for p in pods.items)

    assert await names("spec.host=n1") == ["on-n1"]
    assert await names("spec.host!=n1") == ["unbound"]
    assert await names("status.podIPs=") == ["on-n1", "unbound"]
    assert await names("status.podIPs=10.0.0.1") == []
    with pytest.raises(ApiException) as e:
        await asyncio.to_thread(core.list_namespaced_pod, "default", field_selector="status.hostIP=1.2.3.4")
    assert (e.value.status, json.loads(e.value.body)["message"]) == (400, "field label not supported: status.hostIP")


async def test_probes_and_lifecycle_hooks_are_validated(core):
    """validateContainers' and validateInitContainers' probe and hook rules (validateProbe,
    validateHandler), through the official client."""
    pod = _status_pod("h")
    c = pod["spec"]["containers"][0]
    c["livenessProbe"] = {"successThreshold": 2, "initialDelaySeconds": -1}
    c["readinessProbe"] = {"terminationGracePeriodSeconds": 5, "exec": {"command": []},
                           "tcpSocket": {"port": "http"}}
    c["startupProbe"] = {"successThreshold": 0, "httpGet": {"port": 0, "scheme": "FTP",
                                                           "httpHeaders": [{"name": "Bad Header", "value": "x"}]}}
    c["lifecycle"] = {"preStop": {"sleep": {"seconds": 40}}, "postStart": {}}
    pod["spec"]["initContainers"] = [
        {"name": "plain", "image": "busybox", "readinessProbe": {"exec": {"command": ["true"]}}, "lifecycle": {}},
        {"name": "sidecar", "image": "busybox", "restartPolicy": "Always", "livenessProbe": {"grpc": {"port": 70000}}}]
    with pytest.raises(ApiException) as e:
        await _call(core.create_namespaced_pod, "default", pod)
    assert e.value.status == 422, e.value.body
    header = ("a valid HTTP header must consist of alphanumeric characters or '-' (e.g. 'X-Header-Name', regex used "
              "for validation is '[-A-Za-z0-9]+')")
    p = "spec.containers[0]"
    assert [(x["field"], x["message"]) for x in json.loads(e.value.body)["details"]["causes"]] == [
        (f"{p}.lifecycle.postStart", "Required value: must specify a handler type"),
        (f"{p}.lifecycle.preStop.sleep",
         "Invalid value: 40: must be non-negative and less than terminationGracePeriodSeconds (30)"),
        (f"{p}.livenessProbe", "Required value: must specify a handler type"),
        (f"{p}.livenessProbe.initialDelaySeconds", "Invalid value: -1: must be greater than or equal to 0"),
        (f"{p}.livenessProbe.successThreshold", "Invalid value: 2: must be 1"),
        (f"{p}.readinessProbe.exec.command", "Required value"),
        (f"{p}.readinessProbe.tcpSocket", "Forbidden: may not specify more than 1 handler type"),
        (f"{p}.readinessProbe.terminationGracePeriodSeconds", "Invalid value: 5: must not be set for readinessProbes"),
        (f"{p}.startupProbe.httpGet.port", "Invalid value: 0: must be between 1 and 65535, inclusive"),
        (f"{p}.startupProbe.httpGet.scheme", 'Unsupported value: "FTP": supported values: "HTTP", "HTTPS"'),
        (f"{p}.startupProbe.httpGet.httpHeaders", f'Invalid value: "Bad Header": {header}'),
        # validateInitContainers runs after validateContainers
        ("spec.initContainers[0].lifecycle", "Forbidden: may not be set for init containers without restartPolicy=Always"),
        ("spec.initContainers[0].readinessProbe",
         "Forbidden: may not be set for init containers without restartPolicy=Always"),
        ("spec.initContainers[1].livenessProbe.grpc.port", "Invalid value: 70000: must be between 1 and 65535, inclusive")]
    # a zero threshold is v1's default (1), an empty path is "/"
    pod = _status_pod("ok")
    pod["spec"]["containers"][0]["startupProbe"] = {"successThreshold": 0, "httpGet": {"path": "", "port": 8080}}
    made = await _call(core.create_namespaced_pod, "default", pod)
    probe = made.spec.containers[0].startup_probe
    assert (probe.success_threshold, probe.http_get.path, probe.http_get.scheme) == (1, "/", "HTTP")


async def test_env_value_sources_are_validated(core):
    """validateEnvVarValueFrom: each source's rules (a downward API field ConvertDownwardAPIFieldLabel
    accepts and env offers, a resource env offers, a key selector's name and key), then one source
    and no value."""
    pod = _status_pod("e")
    pod["spec"]["containers"][0]["env"] = [
        {"name": "A", "valueFrom": {}},
        {"name": "B", "valueFrom": {"fieldRef": {"fieldPath": "spec.x"}}},
        {"name": "C", "valueFrom": {"fieldRef": {"fieldPath": "status.phase"}}},
        {"name": "D", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['bad key']"}}},
        {"name": "E", "valueFrom": {"fieldRef": {"fieldPath": "spec['x']"}}},
        {"name": "F", "valueFrom": {"resourceFieldRef": {"resource": "limits.gpu"}}},
        {"name": "G", "valueFrom": {"configMapKeyRef": {"name": "Bad_Name", "key": ""},
                                    "secretKeyRef": {"name": "s", "key": "a b"}}},
        {"name": "H", "value": "x", "valueFrom": {"fieldRef": {"fieldPath": "spec.host"}}}]
    with pytest.raises(ApiException) as e:
        await _call(core.create_namespaced_pod, "default", pod)
    assert e.value.status == 422, e.value.body
    p = "spec.containers[0].env"
    causes = [(x["field"], x["message"]) for x in json.loads(e.value.body)["details"]["causes"]]
    starts = [
        (f"{p}[0].valueFrom", 'Invalid value: "": must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` '
                              "or `secretKeyRef`"),
        (f"{p}[1].valueFrom.fieldRef.fieldPath", 'Invalid value: "spec.x": error converting fieldPath'),
        (f"{p}[2].valueFrom.fieldRef.fieldPath", 'Unsupported value: "status.phase": supported values'),
        (f"{p}[3].valueFrom.fieldRef", 'Invalid value: "bad key": name part must consist of alphanumeric characters'),
        (f"{p}[4].valueFrom.fieldRef.fieldPath", "Invalid value: \"spec['x']\": error converting fieldPath"),
        (f"{p}[5].valueFrom.resourceFieldRef.resource", 'Unsupported value: "limits.gpu": supported values: '
                                                        '"limits.cpu", "limits.ephemeral-storage", "limits.memory"'),
        (f"{p}[6].valueFrom.configMapKeyRef.name", 'Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain'),
        (f"{p}[6].valueFrom.configMapKeyRef.key", "Required value"),
        (f"{p}[6].valueFrom.secretKeyRef.key", 'Invalid value: "a b": a valid config key must consist'),
        (f"{p}[6].valueFrom", 'Invalid value: "": may not have more than one field specified at a time'),
        (f"{p}[7].valueFrom", 'Invalid value: "": may not be specified when `value` is not empty')]
    assert [f for f, _ in causes] == [f for f, _ in starts]
    assert all(m.startswith(want) for (_, m), (_, want) in zip(causes, starts)), causes
    messages = {x["field"]: x["message"] for x in json.loads(e.value.body)["details"]["causes"]}
    assert messages[f"{p}[1].valueFrom.fieldRef.fieldPath"] == (
        'Invalid value: "spec.x": error converting fieldPath: field label not supported: spec.x')
    assert messages[f"{p}[2].valueFrom.fieldRef.fieldPath"] == (
        'Unsupported value: "status.phase": supported values: "metadata.name", "metadata.namespace", "metadata.uid", '
        '"spec.nodeName", "spec.serviceAccountName", "status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs"')
    assert messages[f"{p}[4].valueFrom.fieldRef.fieldPath"] == (
        "Invalid value: \"spec['x']\": error converting fieldPath: field label does not support subscript: spec['x']")


async def test_topology_spread_constraints_are_validated(core):
    """validateTopologySpreadConstraints: maxSkew above zero, a topology key, a known action, no
    {key, action} twice, minDomains only positive and with DoNotSchedule, known node policies, a
    valid selector."""
    pod = _status_pod("t")
    pod["spec"]["topologySpreadConstraints"] = [
        {"maxSkew": 0, "topologyKey": "", "whenUnsatisfiable": "Maybe"},
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway", "minDomains": 0,
         "nodeTaintsPolicy": "Sometimes", "labelSelector": {"matchExpressions": [{"key": "a", "operator": "In"}]}},
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}]
    with pytest.raises(ApiException) as e:
        await _call(core.create_namespaced_pod, "default", pod)
    assert e.value.status == 422, e.value.body
    p = "spec.topologySpreadConstraints"
    assert [(x["field"], x["message"]) for x in json.loads(e.value.body)["details"]["causes"]] == [
        (f"{p}[0].maxSkew", "Invalid value: 0: must be greater than zero"),
        (f"{p}[0].topologyKey", "Required value: can not be empty"),
        (f"{p}[0].whenUnsatisfiable", 'Unsupported value: "Maybe": supported values: "DoNotSchedule", "ScheduleAnyway"'),
        (f"{p}[1].{{topologyKey, whenUnsatisfiable}}", 'Duplicate value: "{zone, ScheduleAnyway}"'),
        (f"{p}[1].minDomains", "Invalid value: 0: must be greater than zero"),
        (f"{p}[1].minDomains", "Invalid value: 0: can only use minDomains if whenUnsatisfiable=DoNotSchedule, not "
                               "ScheduleAnyway"),
        (f"{p}[1].nodeTaintsPolicy", 'Unsupported value: "Sometimes": supported values: "Honor", "Ignore"'),
        (f"{p}[1].labelSelector.matchExpressions[0].values",
         "Required value: must be specified when `operator` is 'In' or 'NotIn'")]


async def test_a_spread_constraint_is_a_duplicate_where_a_later_one_repeats_its_key_and_action(core):
    """ValidateSpreadConstraintNotRepeat compares each constraint with the ones after it: of three
    alike, the first two are duplicates (found by counting, so 10,000 distinct ones are one pass)."""
    pod = _status_pod("t")
    same = {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
    pod["spec"]["topologySpreadConstraints"] = [same, {**same, "whenUnsatisfiable": "ScheduleAnyway"}, same, same]
    with pytest.raises(ApiException) as e:
        await _call(core.create_namespaced_pod, "default", pod)
    p = "spec.topologySpreadConstraints"
    assert [(x["field"], x["message"]) for x in json.loads(e.value.body)["details"]["causes"]] == [
        (f"{p}[0].{{topologyKey, whenUnsatisfiable}}", 'Duplicate value: "{zone, DoNotSchedule}"'),
        (f"{p}[2].{{topologyKey, whenUnsatisfiable}}", 'Duplicate value: "{zone, DoNotSchedule}"')]
    pod["spec"]["topologySpreadConstraints"] = [{**same, "topologyKey": f"k{i}"} for i in range(10_000)]
    created = await _call(core.create_namespaced_pod, "default", pod)
    assert len(created.spec.topology_spread_constraints) == 10_000


async def test_node_selector_and_affinity_are_validated(core):
    """ValidatePodSpec's nodeSelector labels and validateAffinity: ValidateNodeSelector's terms
    (label and node-name field requirements), weights 1-100, pod affinity terms' selectors,
    namespaces (reported at "namespace", as upstream) and topology key."""
    pod = _status_pod("a")
    pod["spec"]["nodeSelector"] = {"zone": "a b"}
    pod["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{
                "matchExpressions": [{"key": "gpu", "operator": "Gt", "values": ["1", "2"]},
                                     {"key": "zone", "operator": "Exists", "values": ["a"]}],
                "matchFields": [{"key": "metadata.uid", "operator": "In", "values": ["x"]}]}]},
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 0, "preference": {"matchExpressions": [{"key": "k", "operator": "Near"}]}}]},
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "web"}}, "namespaces": ["Bad_NS"], "topologyKey": ""}]}}
    with pytest.raises(ApiException) as e:
        await _call(core.create_namespaced_pod, "default", pod)
    assert e.value.status == 422, e.value.body
    na = "spec.affinity.nodeAffinity"
    term = f"{na}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
    pa = "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]"
    causes = [(x["field"], x["message"]) for x in json.loads(e.value.body)["details"]["causes"]]
    want = [
        ("spec.nodeSelector", 'Invalid value: "a b": a valid label must be an empty string or'),
        (f"{term}.matchExpressions[0].values", "Required value: must be specified single value when `operator"),
        (f"{term}.matchExpressions[1].values", "Forbidden: may not be specified when `operator` is 'Exists' o"),
        (f"{term}.matchFields[0].key", 'Invalid value: "metadata.uid": not a valid field selector key'),
        (f"{na}.preferredDuringSchedulingIgnoredDuringExecution[0].weight", "Invalid value: 0: must be in the range 1-100"),
        (f"{na}.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchExpressions[0].operator",
         'Invalid value: "Near": not a valid selector operator'),
        (f"{pa}.namespace", 'Invalid value: "Bad_NS": a lowercase RFC 1123 label must consis'),
        (f"{pa}.topologyKey", "Required value: can not be empty"),
        (f"{pa}.topologyKey", 'Invalid value: "": name part must be non-empty'),
        (f"{pa}.topologyKey", 'Invalid value: "": name part must consist of alphanumeric char')]
    assert [f for f, _ in causes] == [f for f, _ in want]
    assert all(m.startswith(w) for (_, m), (_, w) in zip(causes, want)), causes


async def test_a_persistent_volume_node_affinity_is_a_node_selector(core):
    """validateVolumeNodeAffinity: required must be there, and is ValidateNodeSelector's."""
    pv = {"metadata": {"name": "v"}, "spec": {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"},
                                              "hostPath": {"path": "/tmp"}, "nodeAffinity": {}}}
    with pytest.raises(ApiException) as e:
        await _call(core.create_persistent_volume, pv)
    assert [(x["field"], x["message"]) for x in json.loads(e.value.body)["details"]["causes"]] == [
        ("spec.nodeAffinity.required", "Required value: must specify required node constraints")]
    pv["spec"]["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "kubernetes.io/hostname", "operator": "In"}]}]}}
    with pytest.raises(ApiException) as e:
        await _call(core.create_persistent_volume, pv)
    assert [(x["field"], x["message"]) for x in json.loads(e.value.body)["details"]["causes"]] == [
        ("spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].values",
         "Required value: must be specified when `operator` is 'In' or 'NotIn'")]


async def test_security_contexts_and_mount_paths_are_validated(core):
    """ValidateSecurityContext and validatePodSpecSecurityContext (IDs, procMount, seccomp, the
    privileged/no-escalation clash printing the internal SecurityContext, pod policies), and
    ValidateVolumeMounts' subPath and mountPropagation, reported at the list's path as upstream."""
    pod = _status_pod("s")
    c = pod["spec"]["containers"][0]
    c["securityContext"] = {"privileged": True, "allowPrivilegeEscalation": False, "runAsUser": -1,
                            "seccompProfile": {"type": "Localhost"}}
    c["volumeMounts"] = [{"name": "v", "mountPath": "/a", "subPath": "/abs/../x", "mountPropagation": "Bidirectional"}]
    pod["spec"]["volumes"] = [{"name": "v", "emptyDir": {}}]
    pod["spec"].update(hostPID=True, shareProcessNamespace=True)
    pod["spec"]["securityContext"] = {"fsGroup": -2, "fsGroupChangePolicy": "Sometimes",
                                      "seccompProfile": {"type": "RuntimeDefault", "localhostProfile": "p.json"}}
    with pytest.raises(ApiException) as e:
        await _call(core.create_namespaced_pod, "default", pod)
    assert e.value.status == 422, e.value.body
    p, sc = "spec.containers[0]", "spec.securityContext"
    assert [(x["field"], x["message"]) for x in json.loads(e.value.body)["details"]["causes"]] == [
        (f"{p}.volumeMounts.subPath", 'Invalid value: "/abs/../x": must be a relative path'),
        (f"{p}.volumeMounts.subPath", "Invalid value: \"/abs/../x\": must not contain '..'"),
        (f"{p}.securityContext.runAsUser", "Invalid value: -1: must be between 0 and 2147483647, inclusive"),
        (f"{p}.securityContext.seccompProfile.localhostProfile",
         "Required value: must be set when seccomp type is Localhost"),
        (f"{p}.securityContext", 'Invalid value: {"Capabilities":null,"Privileged":true,"SELinuxOptions":null,'
                                 '"WindowsOptions":null,"RunAsUser":-1,"RunAsGroup":null,"RunAsNonRoot":null,'
                                 '"ReadOnlyRootFilesystem":null,"AllowPrivilegeEscalation":false,"ProcMount":null,'
                                 '"SeccompProfile":{"Type":"Localhost","LocalhostProfile":null},"AppArmorProfile":null}: '
                                 "cannot set `allowPrivilegeEscalation` to false and `privileged` to true"),
        (f"{sc}.fsGroup", "Invalid value: -2: must be between 0 and 2147483647, inclusive"),
        (f"{sc}.shareProcessNamespace", "Invalid value: true: ShareProcessNamespace and HostPID cannot both be enabled"),
        (f"{sc}.fsGroupChangePolicy", 'Unsupported value: "Sometimes": supported values: "Always", "OnRootMismatch"'),
        (f"{sc}.seccompProfile.localhostProfile", 'Invalid value: {"Type":"RuntimeDefault","LocalhostProfile":"p.json"}: '
                                                  "can only be set when seccomp type is Localhost")]
    # Bidirectional propagation is for privileged containers: this one is, so only a plain one is refused
    pod = _status_pod("b")
    pod["spec"]["containers"][0]["volumeMounts"] = [{"name": "v", "mountPath": "/a", "mountPropagation": "Bidirectional"}]
    pod["spec"]["volumes"] = [{"name": "v", "emptyDir": {}}]
    with pytest.raises(ApiException) as e:
        await _call(core.create_namespaced_pod, "default", pod)
    assert [(x["field"], x["message"]) for x in json.loads(e.value.body)["details"]["causes"]] == [
        ("spec.containers[0].volumeMounts.mountPropagation",
         "Forbidden: Bidirectional mount propagation is available only to privileged containers")]


async def test_env_from_sources_are_validated(core):
    """ValidateEnvFrom: prefix an env name, one source with a name (a trailing '-' allowed, as a
    prefix), and the count errors at envFrom itself."""
    pod = _status_pod("f")
    pod["spec"]["containers"][0]["envFrom"] = [
        {"prefix": "A=", "configMapRef": {"name": "cfg-"}},
        {"configMapRef": {"name": "Bad_Name"}, "secretRef": {"name": ""}},
        {"prefix": "B_"}]
    with pytest.raises(ApiException) as e:
        await _call(core.create_namespaced_pod, "default", pod)
    p = "spec.containers[0].envFrom"
    causes = [(x["field"], x["message"]) for x in json.loads(e.value.body)["details"]["causes"]]
    assert [f for f, _ in causes] == [f"{p}[0].prefix", f"{p}[1].configMapRef.name", f"{p}[1].secretRef.name", p, p]
    assert causes[0][1] == ('Invalid value: "A=": a valid environment variable name must consist only of printable '
                            "ASCII characters other than '='")
    assert causes[1][1].startswith('Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain')
    assert causes[2:] == [(f"{p}[1].secretRef.name", "Required value"),
                          (p, 'Invalid value: "": may not have more than one field specified at a time'),
                          (p, 'Invalid value: "": must specify one of: `configMapRef` or `secretRef`')]


async def test_sysctls_and_hugepages_alone_are_refused(core):
    """validateSysctls (names, duplicates, host namespaces) and ValidateContainerResourceRequirements'
    'HugePages require cpu or memory'."""
    pod = _status_pod("y")
    pod["spec"]["containers"][0]["resources"] = {"limits": {"hugepages-2Mi": "2Mi"}, "requests": {"hugepages-2Mi": "2Mi"}}
    pod["spec"]["hostNetwork"] = True
    pod["spec"]["securityContext"] = {"sysctls": [{"name": "Bad!", "value": "1"}, {"name": "net.core.somaxconn", "value": "1"},
                                                  {"name": "kernel.shm_rmid_forced", "value": "1"},
                                                  {"name": "kernel.shm_rmid_forced", "value": "0"}]}
    with pytest.raises(ApiException) as e:
        await _call(core.create_namespaced_pod, "default", pod)
    sc = "spec.securityContext.sysctls"
    assert [(x["field"], x["message"]) for x in json.loads(e.value.body)["details"]["causes"]] == [
        ("spec.containers[0].resources", "Forbidden: HugePages require cpu or memory"),
        (f"{sc}[0].name", 'Invalid value: "Bad!": must have at most 253 characters and match regex '
                          "^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$"),
        (f"{sc}[1].name", "Invalid value: \"net.core.somaxconn\": may not be specified when 'hostNetwork' is true"),
        (f"{sc}[3].name", 'Duplicate value: "kernel.shm_rmid_forced"')]


async def test_over_http_match_label_keys_in_affinity_and_spread(core):
    """validateMatchLabelKeysAndMismatchLabelKeys for pod (anti-)affinity terms (a key the selector
    names twice is reported at the term's path indexed by the key, as upstream does) and, for
    topology spread, a labelSelector to merge into and label names."""
    sel = {"matchLabels": {"app": "a"}, "matchExpressions": [{"key": "app", "operator": "In", "values": ["a"]}]}
    pod = _status_pod("p", affinity={
        "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": "zone", "labelSelector": sel, "matchLabelKeys": ["x", "app"],
             "mismatchLabelKeys": ["bad key", "x"]}]},
        "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "podAffinityTerm": {"topologyKey": "zone", "mismatchLabelKeys": ["app"]}}]}},
        topologySpreadConstraints=[{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                                    "matchLabelKeys": ["app"]},
                                   {"maxSkew": 1, "topologyKey": "rack", "whenUnsatisfiable": "DoNotSchedule",
                                    "labelSelector": {"matchLabels": {"app": "a"}}, "matchLabelKeys": ["-x"]}])
    with pytest.raises(ApiException) as e:
        await _call(core.create_namespaced_pod, "default", pod)
    assert e.value.status == 422
    term = "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]"
    assert [(c["field"], c["message"]) for c in json.loads(e.value.body)["details"]["causes"]] == [
        (f"{term}.mismatchLabelKeys[0]", f'Invalid value: "bad key": {QUALIFIED}'),
        (f"{term}[1]", 'Invalid value: "app": exists in both matchLabelKeys and labelSelector'),
        (f"{term}.matchLabelKeys[0]", 'Invalid value: "x": exists in both matchLabelKeys and mismatchLabelKeys'),
        ("spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm."
         "mismatchLabelKeys", "Forbidden: must not be specified when labelSelector is not set"),
        ("spec.topologySpreadConstraints[0].matchLabelKeys",
         "Forbidden: must not be specified when labelSelector is not set"),
        ("spec.topologySpreadConstraints[1].matchLabelKeys[0]", f'Invalid value: "-x": {QUALIFIED}')]


async def test_over_http_pod_specific_annotations(core):
    """ValidatePodSpecificAnnotations before the spec's errors (mirror pod, deletion cost, the
    deprecated seccomp and AppArmor annotations), validateSeccompAnnotationsAndFields on create, and
    on update the AppArmor and mirror annotations fixed (ValidatePodSpecificAnnotationUpdates)."""
    pod = _status_pod("p", securityContext={"seccompProfile": {"type": "RuntimeDefault"}})
    pod["spec"]["containers"][0]["securityContext"] = {"seccompProfile": {"type": "Localhost", "localhostProfile": "a"}}
    pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "-1"}}
    pod["metadata"]["annotations"] = {
        "kubernetes.io/config.mirror": "x", "controller.kubernetes.io/pod-deletion-cost": "007",
        "seccomp.security.alpha.kubernetes.io/pod": "unconfined",
        "container.seccomp.security.alpha.kubernetes.io/c": "localhost/b",
        "container.seccomp.security.alpha.kubernetes.io/x": "bogus",
        "container.apparmor.security.beta.kubernetes.io/ghost": "enforce"}
    with pytest.raises(ApiException) as e:
        await _call(core.create_namespaced_pod, "default", pod)
    assert e.value.status == 422
    a = "metadata.annotations"
    assert [(c["field"], c["message"]) for c in json.loads(e.value.body)["details"]["causes"]] == [
        (f"{a}[kubernetes.io/config.mirror]", 'Invalid value: "x": must set spec.nodeName if mirror pod annotation is set'),
        (f"{a}[controller.kubernetes.io/pod-deletion-cost]", 'Invalid value: "007": must be a 32bit integer'),
        (f"{a}.container.seccomp.security.alpha.kubernetes.io/x", 'Invalid value: "bogus": must be a valid seccomp profile'),
        (f"{a}[container.apparmor.security.beta.kubernetes.io/ghost]", 'Invalid value: "ghost": container not found'),
        (f"{a}[container.apparmor.security.beta.kubernetes.io/ghost]",
         'Invalid value: "enforce": invalid AppArmor profile name: "enforce"'),
        ("spec.containers[0].resources.requests[cpu]", 'Invalid value: "-1": must be greater than or equal to 0'),
        ("spec.securityContext.seccompProfile.type", "Forbidden: seccomp type in annotation and field must match"),
        ("spec.containers[0].securityContext.seccompProfile.localhostProfile",
         "Forbidden: seccomp profile in annotation and field must match")]
    ok = _status_pod("q")
    ok["metadata"]["annotations"] = {"controller.kubernetes.io/pod-deletion-cost": "-8"}
    await _call(core.create_namespaced_pod, "default", ok)
    patch = {"metadata": {"annotations": {"container.apparmor.security.beta.kubernetes.io/c": "runtime/default",
                                          "controller.kubernetes.io/pod-deletion-cost": "+1"}}}
    with pytest.raises(ApiException) as e:
        await _call(core.patch_namespaced_pod, "q", "default", patch)
    cost = ("metadata.annotations[controller.kubernetes.io/pod-deletion-cost]",
            'Invalid value: "+1": must be a 32bit integer')
    assert [(c["field"], c["message"]) for c in json.loads(e.value.body)["details"]["causes"]] == [
        cost, ("metadata.annotations[container.apparmor.security.beta.kubernetes.io/c]",
               "Forbidden: may not add AppArmor annotations"), cost]


async def test_the_status_column_reads_the_first_initialized_condition(core):
    """kubectl's STATUS comes from the pod printer, whose isPodInitializedConditionTrue reads the first
    Initialized condition: a pod whose first one says False still shows its init containers' progress
    (over HTTP, as the Table kubectl asks for)."""
    pod = _status_pod("init", initContainers=[{"name": "setup", "image": "busybox"}])
    await _call(core.create_namespaced_pod, "default", pod)
    await _patch_status(core, "init", {
        "conditions": [{"type": "Initialized", "status": "False"}, {"type": "Initialized", "status": "True"}],
        "initContainerStatuses": [{"name": "setup", "image": "busybox", "imageID": "", "ready": False,
                                   "restartCount": 0, "state": {"waiting": {"reason": "PodInitializing"}}}],
        "containerStatuses": [{"name": "c", "image": "busybox", "imageID": "", "ready": False, "restartCount": 0,
                               "state": {"waiting": {"reason": "ContainerCreating"}}}]})
    api = core.api_client
    r = await _call(lambda: api.rest_client.request(
        "GET", f"{api.configuration.host}/api/v1/namespaces/default/pods/init",
        headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io", **api.default_headers}))
    table = json.loads(r.read())
    status = [c["name"] for c in table["columnDefinitions"]].index("Status")
    assert [row["cells"][status] for row in table["rows"]] == ["Init:0/1"]


async def test_over_http_a_workload_template_as_validate_pod_template_spec(tmp_path):
    """ValidatePodTemplateSpec: the template's labels and annotations at <template>.labels and
    <template>.annotations (not metadata.*), its pod-specific annotations, the seccomp annotations
    against the fields, and no ephemeral containers."""
    from tests.served import served

    labels = {"app": "web"}
    template = {"metadata": {"labels": {**labels, "bad key": "x"}, "annotations": {
                    "controller.kubernetes.io/pod-deletion-cost": "1.5",
                    "seccomp.security.alpha.kubernetes.io/pod": "unconfined"}},
                "spec": {"securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
                         "containers": [{"name": "c", "image": "nginx"}],
                         "ephemeralContainers": [{"name": "e", "image": "busybox"}]}}
    body = {"metadata": {"name": "web"}, "spec": {"selector": {"matchLabels": labels}, "template": template}}
    async with served(tmp_path) as (_, api_client):
        with pytest.raises(ApiException) as e:
            await _call(client.AppsV1Api(api_client).create_namespaced_deployment, "default", body)
    assert e.value.status == 422
    t = "spec.template"
    assert [(c["field"], c["message"]) for c in json.loads(e.value.body)["details"]["causes"]] == [
        (f"{t}.labels", f'Invalid value: "bad key": {QUALIFIED}'),
        (f"{t}.annotations[controller.kubernetes.io/pod-deletion-cost]", 'Invalid value: "1.5": must be a 32bit integer'),
        (f"{t}.spec.securityContext.seccompProfile.type", "Forbidden: seccomp type in annotation and field must match"),
        (f"{t}.spec.ephemeralContainers", "Forbidden: ephemeral containers not allowed in pod template")]


def _spread(key: str, **extra) -> dict:
    return {"maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule", **extra}


async def test_match_label_keys_are_merged_into_the_selectors_on_create(core):
    """PrepareForCreate's mutatePodAffinity and mutateTopologySpreadConstraints: a key the pod's
    labels carry joins the selector as `key In (value)` (mismatchLabelKeys: `NotIn`); a key the
    labels lack, and a term without a selector, are left alone; the keys lists stay."""
    pod = _status_pod("p", affinity={
        "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": "zone", "labelSelector": {"matchLabels": {"app": "web"}},
             "matchLabelKeys": ["rev", "absent"], "mismatchLabelKeys": ["tenant"]}]},
        "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "podAffinityTerm": {"topologyKey": "zone", "labelSelector": {},
                                              "mismatchLabelKeys": ["rev"]}}]}},
        topologySpreadConstraints=[_spread("zone", labelSelector={"matchExpressions": [
            {"key": "app", "operator": "Exists"}]}, matchLabelKeys=["rev"])])
    pod["metadata"]["labels"] = {"app": "web", "rev": "2", "tenant": "t1"}
    await _call(core.create_namespaced_pod, "default", pod)
    raw = await asyncio.to_thread(core.read_namespaced_pod, "p", "default", _preload_content=False)
    spec = json.loads(raw.data)["spec"]
    term = spec["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert term["labelSelector"] == {"matchLabels": {"app": "web"}, "matchExpressions": [
        {"key": "rev", "operator": "In", "values": ["2"]}, {"key": "tenant", "operator": "NotIn", "values": ["t1"]}]}
    assert term["matchLabelKeys"] == ["rev", "absent"] and term["mismatchLabelKeys"] == ["tenant"]
    anti = spec["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]
    assert anti["podAffinityTerm"]["labelSelector"] == {"matchExpressions": [
        {"key": "rev", "operator": "NotIn", "values": ["2"]}]}
    assert spec["topologySpreadConstraints"][0]["labelSelector"] == {"matchExpressions": [
        {"key": "app", "operator": "Exists"}, {"key": "rev", "operator": "In", "values": ["2"]}]}
    # a label changed later leaves the merged selectors as they were
    await _call(core.patch_namespaced_pod, "p", "default", {"metadata": {"labels": {"rev": "3"}}})
    again = await _call(core.read_namespaced_pod, "p", "default")
    assert again.spec.topology_spread_constraints[0].label_selector.match_expressions[1].values == ["2"]


async def test_a_match_label_key_the_selector_names_is_refused_once_merged(core):
    """With the merge, a matchLabelKeys key the selector already names (matchLabels or
    matchExpressions) is named twice, for an affinity term and for a spread constraint alike
    (ValidateMatchLabelKeysAndMismatchLabelKeys, reported at the term's or constraint's path
    indexed by the key); without the label there is no merge and no error."""
    pod = _status_pod("p", affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "zone", "labelSelector": {"matchLabels": {"app": "web"}}, "matchLabelKeys": ["app"]}]}},
        topologySpreadConstraints=[_spread("zone", labelSelector={"matchExpressions": [
            {"key": "rev", "operator": "Exists"}]}, matchLabelKeys=["app", "rev"])])
    pod["metadata"]["labels"] = {"app": "web", "rev": "1"}
    with pytest.raises(ApiException) as e:
        await _call(core.create_namespaced_pod, "default", pod)
    assert e.value.status == 422
    assert [(c["field"], c["message"]) for c in json.loads(e.value.body)["details"]["causes"]] == [
        ("spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0][0]",
         'Invalid value: "app": exists in both matchLabelKeys and labelSelector'),
        ("spec.topologySpreadConstraints[0][1]", 'Invalid value: "rev": exists in both matchLabelKeys and labelSelector')]
    pod["metadata"]["labels"] = {"other": "x"}
    await _call(core.create_namespaced_pod, "default", pod)


async def test_a_pod_with_many_errors_lists_them_in_upstream_order(core):
    """ValidatePodSpec's order: volumes, each container's common checks (terminationMessagePolicy,
    env, then imagePullPolicy), the regular containers' host port conflicts, the init containers,
    the host network's ports, dnsPolicy, nodeSelector, readinessGates, topology spread, nodeName,
    activeDeadlineSeconds, hostname, tolerations; then a pod's own rules (an image's whitespace)."""
    pod = {"metadata": {"name": "many"}, "spec": {
        "hostNetwork": True, "dnsPolicy": "Sometimes", "nodeSelector": {"bad key!": "v"},
        "nodeName": "Bad_Node", "activeDeadlineSeconds": 0, "hostname": "Bad_Host",
        "tolerations": [{"key": "", "operator": "Equal", "value": "x"}],
        "readinessGates": [{"conditionType": "bad type"}],
        "topologySpreadConstraints": [{"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}],
        "volumes": [{"name": "Bad_Vol", "emptyDir": {}}],
        "initContainers": [{"name": "i", "image": "busybox", "restartPolicy": "Sometimes"}],
        "containers": [
            {"name": "c", "image": " busybox", "imagePullPolicy": "Sometimes", "terminationMessagePolicy": "Maybe",
             "env": [{"name": ""}], "ports": [{"containerPort": 80, "hostPort": 81}]},
            {"name": "c2", "image": "busybox", "ports": [{"containerPort": 81, "hostPort": 81}]}]}}
    with pytest.raises(ApiException) as e:
        await _call(core.create_namespaced_pod, "default", pod)
    assert e.value.status == 422, e.value.body
    fields = [c["field"] for c in json.loads(e.value.body)["details"]["causes"]]
    assert fields == [
        "spec.volumes[0].name", "spec.containers[0].terminationMessagePolicy", "spec.containers[0].env[0].name",
        "spec.containers[0].imagePullPolicy", "spec.containers[1].ports[0].hostPort",
        "spec.initContainers[0].restartPolicy", "spec.containers[0].ports[0].hostPort", "spec.dnsPolicy",
        "spec.nodeSelector", "spec.readinessGates[0].conditionType", "spec.topologySpreadConstraints[0].maxSkew",
        "spec.nodeName", "spec.activeDeadlineSeconds", "spec.hostname", "spec.tolerations[0].operator",
        "spec.containers[0].image"]
    causes = {c["field"]: c["message"] for c in json.loads(e.value.body)["details"]["causes"]}
    assert causes["spec.containers[1].ports[0].hostPort"] == 'Duplicate value: "TCP//81"'
    assert causes["spec.containers[0].ports[0].hostPort"] == (
        "Invalid value: 81: must match `containerPort` when `hostNetwork` is true")


async def test_a_template_image_may_keep_whitespace_and_a_host_network_port_must_match(core):
    """validateContainerOnlyForPod is a pod's rule: a template's image " " (a placeholder some
    tools fill in) is accepted; under hostNetwork a template's unset hostPort is defaulted to the
    containerPort, as a pod's, and another value must match it."""
    apps = client.AppsV1Api(core.api_client)

    def deployment(name, port):
        return {"metadata": {"name": name}, "spec": {
            "selector": {"matchLabels": {"app": name}}, "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"hostNetwork": True, "containers": [{"name": "c", "image": " ", "ports": [port]}]}}}}

    made = await _call(apps.create_namespaced_deployment, "default", deployment("d", {"containerPort": 80}))
    assert made.spec.template.spec.containers[0].image == " "
    assert made.spec.template.spec.containers[0].ports[0].host_port == 80  # defaulted, as a pod's
    with pytest.raises(ApiException) as e:
        await _call(apps.create_namespaced_deployment, "default",
                    deployment("e", {"containerPort": 80, "hostPort": 81}))
    assert [(c["field"], c["message"]) for c in json.loads(e.value.body)["details"]["causes"]] == [
        ("spec.template.spec.containers[0].ports[0].hostPort",
         "Invalid value: 81: must match `containerPort` when `hostNetwork` is true")]


def _env_file_pod(name: str, *env: dict, volumes=({"name": "envs", "emptyDir": {}},)) -> dict:
    return {"metadata": {"name": name}, "spec": {"volumes": list(volumes), "containers": [
        {"name": "c", "image": "busybox", "env": list(env)}]}}


def _file_ref(name: str, **ref) -> dict:
    return {"name": name, "valueFrom": {"fileKeyRef": ref}}


async def test_env_from_a_file_in_an_empty_dir_volume(core):
    """env[].valueFrom.fileKeyRef (EnvFiles, beta and on by default since 1.35) is a source of its
    own: accepted and kept as sent."""
    ref = {"volumeName": "envs", "path": "conf/app.env", "key": "DB_ADDRESS", "optional": True}
    await _call(core.create_namespaced_pod, "default", _env_file_pod("p", _file_ref("DB", **ref)))
    raw = await asyncio.to_thread(core.read_namespaced_pod, "p", "default", _preload_content=False)
    assert json.loads(raw.data)["spec"]["containers"][0]["env"] == [{"name": "DB", "valueFrom": {"fileKeyRef": ref}}]


async def test_a_file_key_ref_is_validated(core):
    """A FileKeySelector's key, volume and path, with another source beside it, and its volume
    among the pod's emptyDir volumes."""
    pod = _env_file_pod(
        "p",
        _file_ref("A", volumeName="envs", path="/abs/../x.env", key="BAD=KEY"),
        _file_ref("B", volumeName="", path="", key=""),
        {"name": "C", "valueFrom": {"fileKeyRef": {"volumeName": "envs", "path": "a.env", "key": "C"},
                                    "secretKeyRef": {"name": "s", "key": "k"}}},
        _file_ref("D", volumeName="nowhere", path="a.env", key="D"),
        _file_ref("E", volumeName="claim", path="a.env", key="E"),
        volumes=({"name": "envs", "emptyDir": {}}, {"name": "claim", "persistentVolumeClaim": {"claimName": "c"}}))
    with pytest.raises(ApiException) as e:
        await _call(core.create_namespaced_pod, "default", pod)
    assert e.value.status == 422, e.value.body
    env = "spec.containers[0].env"
    assert [(c["field"], c["message"]) for c in json.loads(e.value.body)["details"]["causes"]] == [
        (f"{env}[0].valueFrom.fileKeyRef.key", 'Invalid value: "BAD=KEY": a valid environment variable name must '
                                               "consist only of printable ASCII characters other than '='"),
        (f"{env}[0].valueFrom.fileKeyRef.path", 'Invalid value: "/abs/../x.env": must be a relative path'),
        (f"{env}[0].valueFrom.fileKeyRef.path", "Invalid value: \"/abs/../x.env\": must not contain '..'"),
        (f"{env}[1].valueFrom.fileKeyRef.key", "Required value"),
        (f"{env}[1].valueFrom.fileKeyRef.volumeName", "Required value"),
        (f"{env}[1].valueFrom.fileKeyRef.path", "Required value"),
        (f"{env}[2].valueFrom", 'Invalid value: "": may not have more than one field specified at a time'),
        (f"{env}[3].valueFrom.fileKeyRef.volumeName", 'Not found: "nowhere"'),
        (f"{env}[4].valueFrom.fileKeyRef.volumeName", 'Invalid value: "claim": must reference an emptyDir volume')]


async def test_zero_values_of_omitempty_fields_are_not_stored(core):
    """Upstream decodes a body into Go structs: an omitempty value field sent as its zero
    (`hostNetwork: false`, `nodeName: ""`, a port's `hostPort: 0`) is stored as unset, so a PUT
    that leaves it out is no change (a 422 'pod updates may not change fields' before). Pointer fields keep a zero (`automountServiceAccountToken:
    false`, `activeDeadlineSeconds` unset stays unset)."""
    pod = {"metadata": {"name": "z", "generateName": ""}, "spec": {
        "hostNetwork": False, "hostPID": False, "nodeName": "", "automountServiceAccountToken": False,
        "containers": [{"name": "c", "image": "busybox", "stdin": False, "workingDir": "",
                        "ports": [{"containerPort": 80, "hostPort": 0, "name": ""}]}]}}
    await _call(core.create_namespaced_pod, "default", pod)
    raw = await asyncio.to_thread(core.read_namespaced_pod, "z", "default", _preload_content=False)
    stored = json.loads(raw.data)
    spec, c = stored["spec"], stored["spec"]["containers"][0]
    assert not {"hostNetwork", "hostPID", "nodeName"} & set(spec) and spec["automountServiceAccountToken"] is False
    assert not {"stdin", "workingDir"} & set(c) and c["ports"] == [{"containerPort": 80, "protocol": "TCP"}]
    assert "generateName" not in stored["metadata"]
    # a client's PUT without the zeros first written (or with them) changes no spec field
    stored["metadata"]["labels"] = {"a": "b"}
    stored["spec"].pop("hostPID", None)
    stored["spec"]["containers"][0]["stdin"] = False
    updated = await asyncio.to_thread(core.replace_namespaced_pod, "z", "default", stored, _preload_content=False)
    assert json.loads(updated.data)["metadata"]["labels"] == {"a": "b"}


async def test_pod_level_resources_are_validated(core):
    """validatePodResources: cpu, memory and hugepages only (a name that is no standard resource
    is refused first); requests within limits; then validatePodResourceConsistency: a pod-level
    request covers the containers' aggregate (regular containers and sidecars added, an init
    container a floor), a container limit stays within the pod's."""
    def pod(name, resources, *containers, inits=()):
        return {"metadata": {"name": name}, "spec": {"resources": resources, "initContainers": list(inits),
                                                      "containers": list(containers)}}

    def c(name, requests=None, limits=None, **extra):
        return {"name": name, "image": "busybox", **extra,
                "resources": {k: v for k, v in (("requests", requests), ("limits", limits)) if v}}

    bad = pod("bad", {"requests": {"cpu": "1", "memory": "576Mi", "ephemeral-storage": "1Gi", "cpus": "1"},
                      "limits": {"cpu": "500m"}},
              c("a", {"cpu": "500m", "memory": "3Gi"}, {"cpu": "2"}), c("b", {"cpu": "1", "memory": "3Gi"}),
              inits=[c("side", {"cpu": "250m"}, restartPolicy="Always"), c("init", {"cpu": "1200m"})])
    with pytest.raises(ApiException) as e:
        await _call(core.create_namespaced_pod, "default", bad)
    assert e.value.status == 422, e.value.body
    r = "spec.resources"
    assert [(x["field"], x["message"]) for x in json.loads(e.value.body)["details"]["causes"]] == [
        (f"{r}.requests[cpus]", 'Invalid value: "cpus": must be a standard resource type or fully qualified'),
        (f"{r}.requests[ephemeral-storage]",
         'Unsupported value: "ephemeral-storage": supported values: "cpu", "hugepages-", "memory"'),
        (f"{r}.requests", 'Invalid value: "1": must be less than or equal to cpu limit of 500m'),
        (f"{r}.requests[cpu]", 'Invalid value: "1": must be greater than or equal to aggregate container requests '
                               "of 1750m"),
        (f"{r}.requests[memory]", 'Invalid value: "576Mi": must be greater than or equal to aggregate container '
                                  "requests of 6Gi"),
        (f"{r}.containers[0][cpu].limits", 'Invalid value: "2": must be less than or equal to pod limits of 500m')]
    good = pod("good", {"requests": {"cpu": "2", "memory": "8Gi"}, "limits": {"cpu": "2"}},
               c("a", {"cpu": "500m", "memory": "3Gi"}), c("b", {"memory": "3Gi"}, {"cpu": "1"}))
    await _call(core.create_namespaced_pod, "default", good)


async def test_pod_level_request_message_sums_in_the_first_nonzero_requests_format(core):
    """The aggregate a pod-level request must cover is a Go Quantity sum: a zero first term
    takes the next one's format, so 0 and 2Mi add up to 2Mi, not 2097152."""
    pod = {"metadata": {"name": "zero-first"}, "spec": {"resources": {"requests": {"memory": "1Mi"}}, "containers": [
        {"name": "a", "image": "busybox", "resources": {"requests": {"memory": "0"}}},
        {"name": "b", "image": "busybox", "resources": {"requests": {"memory": "2Mi"}}}]}}
    with pytest.raises(ApiException) as e:
        await _call(core.create_namespaced_pod, "default", pod)
    assert [(x["field"], x["message"]) for x in json.loads(e.value.body)["details"]["causes"]] == [
        ("spec.resources.requests[memory]",
         'Invalid value: "1Mi": must be greater than or equal to aggregate container requests of 2Mi')]


async def test_volume_devices_are_validated(core):
    """ValidateVolumeDevices, and ValidateVolumeMounts' overlap with them: a block device comes
    from a claim (or an ephemeral claim) the pod names, each name and path once and without '..',
    and neither the volume nor the path is also mounted."""
    pod = {"metadata": {"name": "dev"}, "spec": {
        "volumes": [{"name": "claim", "persistentVolumeClaim": {"claimName": "c"}}, {"name": "cfg", "emptyDir": {}}],
        "containers": [{"name": "c", "image": "busybox", "volumeMounts": [{"name": "claim", "mountPath": "/data"}],
                        "volumeDevices": [{"name": "cfg", "devicePath": "/data"}, {"name": "nope", "devicePath": "/dev/a"},
                                          {"name": "claim", "devicePath": "/dev/../b"},
                                          {"name": "nope", "devicePath": "/dev/a"}]}]}}
    with pytest.raises(ApiException) as e:
        await _call(core.create_namespaced_pod, "default", pod)
    assert e.value.status == 422, e.value.body
    m, d = "spec.containers[0].volumeMounts[0]", "spec.containers[0].volumeDevices"
    assert [(x["field"], x["message"]) for x in json.loads(e.value.body)["details"]["causes"]] == [
        (f"{m}.name", 'Invalid value: "claim": must not already exist in volumeDevices'),
        (f"{m}.mountPath", 'Invalid value: "/data": must not already exist as a path in volumeDevices'),
        (f"{d}[0].name", 'Invalid value: "cfg": can only use volume source type of PersistentVolumeClaim or '
                         "Ephemeral for block mode"),
        (f"{d}[0].devicePath", 'Invalid value: "/data": must not already exist as a path in volumeMounts'),
        (f"{d}[1].name", 'Not found: "nope"'),
        (f"{d}[2].devicePath", "Invalid value: \"/dev/../b\": can not contain backsteps ('..')"),
        (f"{d}[2].name", 'Invalid value: "claim": must not already exist in volumeMounts'),
        (f"{d}[3].name", 'Invalid value: "nope": must be unique'),
        (f"{d}[3].name", 'Not found: "nope"'),
        (f"{d}[3].devicePath", 'Invalid value: "/dev/a": must be unique')]
    pod["spec"]["containers"][0]["volumeMounts"] = []
    pod["spec"]["containers"][0]["volumeDevices"] = [{"name": "claim", "devicePath": "/dev/xvda"}]
    await _call(core.create_namespaced_pod, "default", pod)
