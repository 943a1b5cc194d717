"""Pod spec pieces through the official client: dnsConfig (validatePodDNSConfig) as 1.37 checks it."""

from __future__ import annotations

import asyncio
import json

import pytest
from kubernetes.client.rest import ApiException


UNDERSCORE_SUBDOMAIN = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '_', '-' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'_?[a-z0-9]([-_a-z0-9]*[a-z0-9])?(\\._?[a-z0-9]([-_a-z0-9]*[a-z0-9])?)*')")
SUBDOMAIN = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start "
    "and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")


def _pod(name: str, **spec) -> dict:
    return {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "busybox"}], **spec}}


async def _refused(core, body: dict) -> str:
    with pytest.raises(ApiException) as e:
        await asyncio.to_thread(core.create_namespaced_pod, "default", body)
    assert e.value.status == 422, e.value.body
    return json.loads(e.value.body)["message"]


async def test_dns_searches_and_options_are_validated(core):
    config = {"searches": ["Bad.Example.com.", ".", "_sip._tcp.example.com.", "ok.example"],
              "options": [{"name": "ndots", "value": "2"}, {"value": "1"}]}
    assert await _refused(core, _pod("p", dnsConfig=config)) == (
        'Pod "p" is invalid: [spec.dnsConfig.searches[0]: Invalid value: "Bad.Example.com": '
        f'{UNDERSCORE_SUBDOMAIN}, spec.dnsConfig.options[1]: Required value: must not be empty]')
    config = {"searches": ["_sip._tcp.example.com.", "."], "options": [{"name": "ndots", "value": "2"}]}
    created = await asyncio.to_thread(core.create_namespaced_pod, "default", _pod("p", dnsConfig=config))
    assert created.spec.dns_config.searches == ["_sip._tcp.example.com.", "."]


async def test_dns_search_list_limits(core):
    many = [f"d{i}.example" for i in range(33)]
    listed = "[" + ",".join(f'"{s}"' for s in many) + "]"
    assert await _refused(core, _pod("p", dnsConfig={"searches": many})) == (
        f'Pod "p" is invalid: spec.dnsConfig.searches: Invalid value: {listed}: must not have more than 32 search paths')
    long = ["a" * 63 + "." + "b" * 63 + "." + "c" * 63 + "." + "d" * 61] * 9  # 9 x 253 + 8 spaces = 2285
    listed = "[" + ",".join(f'"{s}"' for s in long) + "]"
    assert await _refused(core, _pod("p", dnsConfig={"searches": long})) == (
        f'Pod "p" is invalid: spec.dnsConfig.searches: Invalid value: {listed}: must not have more than 2048 characters '
        "(including spaces) in the search list")


async def test_dns_policy_none_needs_a_config_with_a_nameserver(core):
    assert await _refused(core, _pod("p", dnsPolicy="None")) == (
        'Pod "p" is invalid: spec.dnsConfig: Required value: must provide `dnsConfig` when `dnsPolicy` is None')
    # an empty dnsConfig is a config: it lacks the nameserver, and that error is the only one of dnsConfig's
    assert await _refused(core, _pod("p", dnsPolicy="None", dnsConfig={})) == (
        'Pod "p" is invalid: spec.dnsConfig.nameservers: Required value: '
        "must provide at least one DNS nameserver when `dnsPolicy` is None")
    assert await _refused(core, _pod("p", dnsPolicy="None", dnsConfig={"options": [{}]})) == (
        'Pod "p" is invalid: spec.dnsConfig.nameservers: Required value: '
        "must provide at least one DNS nameserver when `dnsPolicy` is None")


async def test_an_exists_toleration_with_a_value_prints_the_internal_toleration(core):
    """validateTolerations hands the whole core.Toleration to field.Invalid: Go's field names, in its order."""
    toleration = {"effect": "NoSchedule", "value": "v", "operator": "Exists", "key": "k"}
    assert await _refused(core, _pod("p", tolerations=[toleration])) == (
        'Pod "p" is invalid: spec.tolerations[0].operator: Invalid value: {"Key":"k","Operator":"Exists","Value":"v",'
        '"Effect":"NoSchedule","TolerationSeconds":null}: value must be empty when `operator` is \'Exists\'')


async def _causes(core, body: dict) -> list[tuple[str, str]]:
    with pytest.raises(ApiException) as e:
        await asyncio.to_thread(core.create_namespaced_pod, "default", body)
    assert e.value.status == 422, e.value.body
    return [(c["field"], c["message"]) for c in json.loads(e.value.body)["details"]["causes"]]


BYTES = "1, 1k, 1M, 1G, 1T, 1P, 1E, 1Ki, 1Mi, 1Gi, 1Ti, 1Pi, 1Ei"


async def test_resource_field_refs_check_their_divisors_and_downward_api_files(core):
    """validateContainerResourceFieldSelector: each resource's divisors (0 is unset; the value is the
    resource's name); a downward API volume file names its container, has one of fieldRef and
    resourceFieldRef, and is reported at the volume's path (no item index), as upstream's loop does."""
    env = [{"name": "A", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu", "divisor": "2"}}},
           {"name": "B", "valueFrom": {"resourceFieldRef": {"resource": "requests.memory", "divisor": "1024Ki"}}},
           {"name": "C", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "3Mi"}}},
           {"name": "D", "valueFrom": {"resourceFieldRef": {"resource": "requests.hugepages-2Mi", "divisor": "2"}}},
           {"name": "E", "valueFrom": {"resourceFieldRef": {"resource": "limits.ephemeral-storage", "divisor": "0"}}},
           {"name": "F", "valueFrom": {"resourceFieldRef": {"resource": "limits.ephemeral-storage", "divisor": "1m"}}}]
    items = [{"path": "cpu", "resourceFieldRef": {"resource": "limits.cpu"}},
             {"path": "/abs", "fieldRef": {"fieldPath": "spec.nodeName", "apiVersion": "v1"},
              "resourceFieldRef": {"containerName": "c", "resource": "limits.cpu"}},
             {"path": "x"}]
    pod = _pod("p", volumes=[{"name": "d", "downwardAPI": {"items": items}}])
    pod["spec"]["containers"][0]["env"] = env
    e = "spec.containers[0].env"
    assert await _causes(core, pod) == [
        ("spec.volumes[0].downwardAPI.resourceFieldRef.containerName", "Required value"),
        ("spec.volumes[0].downwardAPI.path", 'Invalid value: "/abs": must be a relative path'),
        ("spec.volumes[0].downwardAPI.fieldRef.fieldPath", 'Unsupported value: "spec.nodeName": supported values: '
         '"metadata.annotations", "metadata.labels", "metadata.name", "metadata.namespace", "metadata.uid"'),
        ("spec.volumes[0].downwardAPI", 'Invalid value: "resource": fieldRef and resourceFieldRef can not be '
                                        "specified simultaneously"),
        ("spec.volumes[0].downwardAPI", "Required value: one of fieldRef and resourceFieldRef is required"),
        (f"{e}[0].valueFrom.resourceFieldRef.divisor",
         'Invalid value: "limits.cpu": only divisor\'s values 1m and 1 are supported with the cpu resource'),
        (f"{e}[2].valueFrom.resourceFieldRef.divisor",
         f'Invalid value: "limits.memory": only divisor\'s values {BYTES} are supported with the memory resource'),
        (f"{e}[3].valueFrom.resourceFieldRef.divisor", 'Invalid value: "requests.hugepages-2Mi": only divisor\'s '
                                                      f"values {BYTES} are supported with the hugepages resource"),
        (f"{e}[5].valueFrom.resourceFieldRef.divisor", 'Invalid value: "limits.ephemeral-storage": only divisor\'s '
                                                      f"values {BYTES} are supported with the local ephemeral storage "
                                                      "resource")]


async def test_recursive_read_only_mounts(core):
    """validateMountRecursiveReadOnly, at the list's path as the other mount checks report."""
    mounts = [{"name": "v", "mountPath": "/a", "recursiveReadOnly": "Enabled", "mountPropagation": "HostToContainer"},
              {"name": "v", "mountPath": "/b", "recursiveReadOnly": "Sometimes"},
              {"name": "v", "mountPath": "/c", "readOnly": True, "recursiveReadOnly": "IfPossible"},
              {"name": "v", "mountPath": "/d", "recursiveReadOnly": "Disabled"}]
    pod = _pod("p", volumes=[{"name": "v", "emptyDir": {}}])
    pod["spec"]["containers"][0]["volumeMounts"] = mounts
    path = "spec.containers[0].volumeMounts.recursiveReadOnly"
    assert await _causes(core, pod) == [
        (path, "Forbidden: may only be specified when readOnly is true"),
        (path, "Forbidden: may only be specified when mountPropagation is None or not specified"),
        (path, 'Unsupported value: "Sometimes": supported values: "Disabled", "Enabled", "IfPossible"')]


async def test_windows_options_and_apparmor_profiles(core):
    """validateWindowsSecurityContextOptions and ValidateAppArmorProfileField, for a container (after
    its other security context checks) and then the pod (after seccomp); on create, a container's
    deprecated AppArmor annotation must agree with its effective profile."""
    win = {"gmsaCredentialSpecName": "Bad_Name", "gmsaCredentialSpec": "", "runAsUserName": "dom.ain\\us:er"}
    pod = _pod("p", securityContext={"windowsOptions": {"runAsUserName": "a\\b\\c"},
                                     "appArmorProfile": {"type": "Localhost", "localhostProfile": " p "}})
    pod["spec"]["containers"][0]["securityContext"] = {"windowsOptions": win, "appArmorProfile": {"type": "Sometimes"}}
    pod["spec"]["containers"].append({"name": "d", "image": "busybox", "securityContext": {
        "appArmorProfile": {"type": "RuntimeDefault", "localhostProfile": "x"}}})
    sc = "spec.containers[0].securityContext"
    assert await _causes(core, pod) == [
        (f"{sc}.windowsOptions.gmsaCredentialSpecName", 'Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain '
         "must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an "
         "alphanumeric character (e.g. 'example.com', regex used for validation is "
         "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"),
        (f"{sc}.windowsOptions.gmsaCredentialSpec", 'Invalid value: "": gmsaCredentialSpec cannot be an empty string'),
        (f"{sc}.windowsOptions.runAsUserName", 'Invalid value: "dom.ain\\\\us:er": runAsUserName\'s User cannot '
         'contain the following characters: "/\\:;|=,+*?<>@[]'),
        (f"{sc}.appArmorProfile.type",
         'Unsupported value: "Sometimes": supported values: "Localhost", "RuntimeDefault", "Unconfined"'),
        ("spec.containers[1].securityContext.appArmorProfile.localhostProfile",
         'Invalid value: "x": can only be set when AppArmor type is Localhost'),
        ("spec.securityContext.windowsOptions.runAsUserName",
         'Invalid value: "a\\\\b\\\\c": runAsUserName cannot contain more than one backslash'),
        ("spec.securityContext.appArmorProfile.localhostProfile", 'Invalid value: " p ": must not be padded with whitespace')]
    annotated = _pod("q", securityContext={"appArmorProfile": {"type": "Localhost", "localhostProfile": "p1"}})
    annotated["spec"]["containers"].append({"name": "d", "image": "busybox", "securityContext": {
        "appArmorProfile": {"type": "RuntimeDefault"}}})
    annotated["metadata"]["annotations"] = {"container.apparmor.security.beta.kubernetes.io/c": "localhost/p2",
                                            "container.apparmor.security.beta.kubernetes.io/d": "unconfined"}
    assert await _causes(core, annotated) == [
        ("spec.containers[0].securityContext.appArmorProfile.localhostProfile",
         "Forbidden: apparmor profile in annotation and field must match"),
        ("spec.containers[1].securityContext.appArmorProfile.type",
         "Forbidden: apparmor type in annotation and field must match")]


async def test_host_users_and_linux_pods(core):
    """validateHostUsers (after the other spec checks, at upstream's HostPID/HostIPC paths) and
    validateLinux: a linux pod's security contexts take no windowsOptions."""
    pod = _pod("p", hostNetwork=True, hostPID=True, hostIPC=True, hostUsers=False, os={"name": "linux"},
               securityContext={"windowsOptions": {"runAsUserName": "u"}})
    pod["spec"]["containers"][0]["securityContext"] = {"windowsOptions": {"runAsUserName": "u"}}
    pod["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 80}]
    assert await _causes(core, pod) == [
        ("spec.hostNetwork", "Forbidden: when `pod.Spec.HostUsers` is false"),
        ("spec.HostPID", "Forbidden: when `pod.Spec.HostUsers` is false"),
        ("spec.HostIPC", "Forbidden: when `pod.Spec.HostUsers` is false"),
        ("spec.securityContext.windowsOptions", "Forbidden: windows options cannot be set for a linux pod"),
        ("spec.containers[0].securityContext.windowsOptions", "Forbidden: windows options cannot be set for a linux pod")]


async def test_an_unmasked_proc_mount_needs_a_user_namespace(core):
    """ValidateSecurityContext: procMount Unmasked only with hostUsers false (the pod's default is true)."""
    pod = _pod("p")
    pod["spec"]["containers"][0]["securityContext"] = {"procMount": "Unmasked"}
    assert await _causes(core, pod) == [
        ("spec.containers[0].securityContext.procMount", 'Invalid value: "Unmasked": `hostUsers` must be false to use '
                                                         "`Unmasked`")]
    pod["spec"]["hostUsers"] = False
    created = await asyncio.to_thread(core.create_namespaced_pod, "default", pod)
    assert created.spec.containers[0].security_context.proc_mount == "Unmasked"


async def test_a_windows_pod_sets_no_linux_settings(core):
    """validateWindows: the pod's and its containers' Linux-only settings, in upstream's order (a
    pointer set to false counts; hostPID and hostIPC only when true)."""
    pod = _pod("p", os={"name": "windows"}, hostUsers=True, hostPID=False, hostIPC=True, shareProcessNamespace=False,
               securityContext={"runAsUser": 1, "sysctls": [], "supplementalGroups": [],
                                "seccompProfile": {"type": "RuntimeDefault"}})
    pod["spec"]["containers"][0]["securityContext"] = {"privileged": False, "readOnlyRootFilesystem": True,
                                                       "capabilities": {}}
    words = "Forbidden: cannot be set for a windows pod"
    sc = "spec.containers[0].securityContext"
    assert await _causes(core, pod) == [
        ("spec.hostUsers", words), ("spec.hostIPC", words), ("spec.securityContext.seccompProfile", words),
        ("spec.shareProcessNamespace", words), ("spec.securityContext.runAsUser", words),
        ("spec.securityContext.supplementalGroups", words),
        (f"{sc}.capabilities", words), (f"{sc}.readOnlyRootFilesystem", words), (f"{sc}.privileged", words)]


async def test_host_process_containers(core):
    """validateWindowsHostProcessPod: a container's hostProcess agrees with the pod's; with any
    HostProcess container all must be, and hostNetwork is required."""
    pod = _pod("p", securityContext={"windowsOptions": {"hostProcess": True}})
    pod["spec"]["containers"][0]["securityContext"] = {"windowsOptions": {"hostProcess": False}}
    pod["spec"]["initContainers"] = [{"name": "i", "image": "busybox"}]
    assert await _causes(core, pod) == [
        ("spec.containers[0].securityContext.windowsOptions.hostProcess",
         "Invalid value: false: pod hostProcess value must be identical if both are specified, was true"),
        ("spec", 'Invalid value: "": If pod contains any hostProcess containers then all containers must be '
                 "HostProcess containers"),
        ("spec.hostNetwork", "Invalid value: false: hostNetwork must be true if pod contains any hostProcess containers")]


async def test_hostname_override_is_a_short_subdomain_of_the_pods_own(core):
    """validatePodHostName (HostnameOverride, on since 1.35): not with setHostnameAsFQDN or the host's network."""
    created = await asyncio.to_thread(core.create_namespaced_pod, "default",
                                      _pod("p", hostnameOverride="db-0.example.internal", hostname="ignored"))
    assert created.spec.hostname_override == "db-0.example.internal"
    assert await _refused(core, _pod("q", hostnameOverride="Bad_Name")) == (
        f'Pod "q" is invalid: spec.hostnameOverride: Invalid value: "Bad_Name": {SUBDOMAIN}')
    assert await _refused(core, _pod("q", hostnameOverride="a" * 65)) == (
        'Pod "q" is invalid: spec.hostnameOverride: Too long: may not be more than 64 bytes')
    assert await _refused(core, _pod("q", hostnameOverride="h", setHostnameAsFQDN=True, hostNetwork=True)) == (
        'Pod "q" is invalid: [spec.hostnameOverride: Forbidden: may not be specified when setHostnameAsFQDN is true, '
        "spec.hostnameOverride: Forbidden: may not be specified when hostNetwork is true]")


async def test_fields_of_alpha_features_are_dropped_on_create(core):
    """dropDisabledPodFields: evictionResponders (EvictionRequestAPI, no lifecycle.k8s.io/v1alpha1
    served), emptyDir.mode (EmptyDirVolumeMode), files' owner UIDs (AtomicWriteVolumeUserFields),
    bindMountOptions (VolumeBindMountOptions), httpGet's protocol (HTTPProbeProtocol), grpc's mode
    (GRPCContainerProbeTLS) and lifecycle.stopSignal (ContainerStopSignals) are alpha, off in 1.37: a
    create keeps none of them."""
    volumes = [{"name": "scratch", "emptyDir": {"mode": 448}},
               {"name": "conf", "configMap": {"name": "c", "defaultUser": 1000, "items": [
                   {"key": "k", "path": "k", "user": 1001}]}},
               {"name": "all", "projected": {"defaultUser": 1000, "sources": [
                   {"secret": {"name": "s", "items": [{"key": "k", "path": "s", "user": 7}]}},
                   {"serviceAccountToken": {"path": "token", "user": 8}}]}}]
    pod = _pod("p", evictionResponders=[{"name": "acme.io/drainer", "priority": 10000}], volumes=volumes,
               serviceAccountName="default")
    pod["spec"]["containers"][0].update(
        volumeMounts=[{"name": "scratch", "mountPath": "/s", "bindMountOptions": ["noexec"]}],
        livenessProbe={"httpGet": {"path": "/", "port": 80, "protocol": "HTTP2"}},
        readinessProbe={"grpc": {"port": 9000, "mode": "TLS"}},
        lifecycle={"preStop": {"httpGet": {"path": "/stop", "port": 80, "protocol": "HTTP2"}}, "stopSignal": "SIGUSR1"})
    created = (await asyncio.to_thread(core.api_client.sanitize_for_serialization,
                                       await asyncio.to_thread(core.create_namespaced_pod, "default", pod)))["spec"]
    assert "evictionResponders" not in created
    assert created["volumes"][:2] == [
        {"name": "scratch", "emptyDir": {}},
        {"name": "conf", "configMap": {"name": "c", "items": [{"key": "k", "path": "k"}], "defaultMode": 420}}]
    assert created["volumes"][2]["projected"] == {"sources": [
        {"secret": {"name": "s", "items": [{"key": "k", "path": "s"}]}},
        {"serviceAccountToken": {"path": "token", "expirationSeconds": 3600}}], "defaultMode": 420}
    c = created["containers"][0]
    assert c["volumeMounts"] == [{"name": "scratch", "mountPath": "/s"}]
    assert (c["livenessProbe"]["httpGet"], c["lifecycle"]) == (
        {"path": "/", "port": 80, "scheme": "HTTP"}, {"preStop": {"httpGet": {"path": "/stop", "port": 80, "scheme": "HTTP"}}})
    assert c["readinessProbe"]["grpc"] == {"port": 9000, "service": ""}  # (the service defaulted, as upstream's)


async def test_a_workload_template_drops_them_too(core):
    """DropDisabledTemplateFields: a Deployment's pod template keeps no field of an alpha feature either."""
    from kubernetes import client

    apps = client.AppsV1Api(core.api_client)
    template = {"metadata": {"labels": {"app": "d"}}, "spec": {
        "volumes": [{"name": "scratch", "emptyDir": {"mode": 448}}],
        "containers": [{"name": "c", "image": "busybox",
                        "volumeMounts": [{"name": "scratch", "mountPath": "/s", "bindMountOptions": ["nodev"]}]}]}}
    body = {"metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {"app": "d"}}, "template": template}}
    created = await asyncio.to_thread(apps.create_namespaced_deployment, "default", body)
    spec = created.spec.template.spec
    assert (spec.volumes[0].empty_dir.mode, spec.containers[0].volume_mounts[0].bind_mount_options) == (None, None)
