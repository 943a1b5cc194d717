"""The kubelet's pod admission: the predicate admit handler's checks, the critical pod admission
handler's choice of pods to preempt and the sysctl allowlist, alone (admission.py) and as a node
agent applies them to pods bound with spec.nodeName (agent.py): a pod that does not fit is Failed
with upstream's reason, message and a Warning event; the pods admitted before it run on, unless a
critical pod preempts them."""

import asyncio
import contextlib
from types import SimpleNamespace

from multidict import CIMultiDict

from nanokube.apiserver.loopback import connector
from nanokube.node import admission
from nanokube.node.admission import (Admitted, Candidate, Rejection, apparmor_rejection, eviction_rejection,
                                     general_filter, handle_failure, is_critical, node_allocatable, os_rejection,
                                     pods_to_preempt, preemptable, requests, sysctl_rejection)
from nanokube.node.simulated_host import apparmor_enabled
from nanokube.node.cluster import parse_cluster
from nanokube.node.manager import NodeManager
from tests.controllers import becomes, eventually
from tests.node import api_on_manual_clock
from tests.node.runtime.test_process import process_agents
from tests.node.test_lifecycle import phase_is

NODE = {"metadata": {"name": "n1", "labels": {"kubernetes.io/os": "linux", "zone": "a"}},
        "spec": {}, "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "3"}}}


def spec_pod(*containers: dict, **spec) -> dict:
    return {"metadata": {"name": "p", "uid": "u"}, "spec": {"containers": list(containers), **spec}}


def asks(name: str = "app", **requests) -> dict:
    return {"name": name, "resources": {"requests": {k.replace("_", "-"): v for k, v in requests.items()}}}


def allocatable(node: dict = NODE, **own) -> dict[str, int]:
    return node_allocatable(node, {k.replace("_", "-"): v for k, v in own.items()}, {})


def held(**requests) -> Admitted:
    return Admitted(dict(requests), [])


def test_a_pod_asking_more_cpu_than_is_left_is_out_of_cpu_in_milli_cpu():
    [r] = general_filter(spec_pod(asks(cpu="2")), NODE, allocatable(), [held(cpu=1500), held(cpu=2000)])
    assert r == Rejection("OutOfcpu", "Node didn't have enough resource: cpu, requested: 2000, used: 3500, "
                                      "capacity: 4000")
    assert general_filter(spec_pod(asks(cpu="500m")), NODE, allocatable(), [held(cpu=1500), held(cpu=2000)]) == []


def test_memory_counts_bytes_and_extended_resources_their_integer():
    [mem, dongle] = general_filter(spec_pod(asks(memory="9Gi", **{"example.com/dongle": "3"})), NODE,
                                   allocatable(**{"example.com/dongle": "2"}), [held(**{"example.com/dongle": 1})])
    assert mem == Rejection("OutOfmemory", "Node didn't have enough resource: memory, requested: 9663676416, "
                                           "used: 0, capacity: 8589934592")
    assert dongle == Rejection("OutOfexample.com/dongle", "Node didn't have enough resource: example.com/dongle, "
                                                          "requested: 3, used: 1, capacity: 2")


def test_a_full_node_is_out_of_pods_first_even_for_a_pod_asking_nothing():
    others = [held(cpu=100)] * 3
    assert general_filter(spec_pod(asks()), NODE, allocatable(), others) == [
        Rejection("OutOfpods", "Node didn't have enough resource: pods, requested: 1, used: 3, capacity: 3")]
    reasons = general_filter(spec_pod(asks(cpu="4")), NODE, allocatable(), others)
    assert [r.reason for r in reasons] == ["OutOfpods", "OutOfcpu"]


def test_extended_resources_the_node_lacks_or_a_dra_claim_backs_are_left_out_hugepages_are_not():
    pod = spec_pod(asks(**{"example.com/dongle": "1", "hugepages-2Mi": "2Mi"}),
                   asks("side", **{"deviceclass.resource.kubernetes.io/gpu": "1"}))
    assert requests(pod, allocatable()) == {"hugepages-2Mi": 2097152, "deviceclass.resource.kubernetes.io/gpu": 1}
    [huge, implicit] = general_filter(pod, NODE, allocatable(), [])
    assert huge.reason == "OutOfhugepages-2Mi" and huge.message.endswith("requested: 2097152, used: 0, capacity: 0")
    assert implicit.reason == "OutOfdeviceclass.resource.kubernetes.io/gpu"
    backed = {**pod, "status": {"extendedResourceClaimStatus": {"requestMappings": [
        {"containerName": "side", "resourceName": "deviceclass.resource.kubernetes.io/gpu", "requestName": "r"}]}}}
    with_gpus = allocatable(**{"deviceclass.resource.kubernetes.io/gpu": "8", "example.com/dongle": "1"})
    assert requests(backed, with_gpus) == {"example.com/dongle": 1, "hugepages-2Mi": 2097152}


def test_requests_count_init_containers_sidecars_and_overhead_as_the_scheduler_does():
    """The init container runs beside the sidecar started before it (3.5 CPUs), more than the app
    with the sidecar (1.5); the overhead comes on top."""
    pod = spec_pod(asks(cpu="1"), initContainers=[{**asks("side", cpu="500m"), "restartPolicy": "Always"},
                                                  asks("init", cpu="3")],
                   overhead={"cpu": "250m"})
    assert requests(pod) == {"cpu": 3750}
    [r] = general_filter(pod, NODE, allocatable(), [held(cpu=1000)])
    assert r.message == "Node didn't have enough resource: cpu, requested: 3750, used: 1000, capacity: 4000"


def test_a_pod_admitted_again_counts_its_allocation_not_an_infeasible_resize():
    """After a restart the node admits its running pods again: one whose resize to more than the node
    has is pending Infeasible still holds what it was allocated."""
    pod = {**spec_pod(asks(cpu="16")), "status": {
        "phase": "Running", "conditions": [{"type": "PodResizePending", "status": "True", "reason": "Infeasible"}],
        "containerStatuses": [{"name": "app", "allocatedResources": {"cpu": "150m"},
                               "resources": {"requests": {"cpu": "150m"}}}]}}
    assert requests(pod) == {"cpu": 150}
    assert general_filter(pod, NODE, allocatable(), [held(cpu=3000)]) == []


def test_device_plugin_resources_are_at_least_what_admitted_pods_hold():
    assert node_allocatable(NODE, {"nvidia.com/gpu": "2"}, {"nvidia.com/gpu": 3})["nvidia.com/gpu"] == 3
    assert node_allocatable(NODE, {"nvidia.com/gpu": "4"}, {"nvidia.com/gpu": 3})["nvidia.com/gpu"] == 4


def test_a_node_selector_or_required_affinity_the_node_does_not_match():
    want = [Rejection("NodeAffinity", "Predicate NodeAffinity failed: node(s) didn't match Pod's node "
                                      "affinity/selector")]
    assert general_filter(spec_pod(asks(), nodeSelector={"zone": "b"}), NODE, allocatable(), []) == want
    term = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b", "c"]}]}
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}
    assert general_filter(spec_pod(asks(), affinity=affinity), NODE, allocatable(), []) == want
    assert admission.only_affinity(want)
    assert general_filter(spec_pod(asks(), nodeSelector={"zone": "a"}), NODE, allocatable(), []) == []


def test_host_ports_in_use_clash_on_the_wildcard_or_the_same_address():
    pod = spec_pod({"name": "app", "ports": [{"containerPort": 80, "hostPort": 8080, "hostIP": "10.0.0.1"}]})
    wildcard = Admitted({}, [("0.0.0.0", "TCP", 8080)])
    [r] = general_filter(pod, NODE, allocatable(), [wildcard])
    assert r == Rejection("NodePorts", "Predicate NodePorts failed: node(s) didn't have free ports for the "
                                       "requested pod ports")
    assert general_filter(pod, NODE, allocatable(), [Admitted({}, [("0.0.0.0", "UDP", 8080)]),
                                                     Admitted({}, [("10.0.0.2", "TCP", 8080)])]) == []


def test_only_untolerated_no_execute_taints_reject_and_not_a_static_pod():
    tainted = {**NODE, "spec": {"taints": [{"key": "gpu", "effect": "NoSchedule"},
                                           {"key": "maintenance", "value": "now", "effect": "NoExecute"}]}}
    [r] = general_filter(spec_pod(asks()), tainted, allocatable(), [])
    assert r == Rejection("TaintToleration", "Predicate TaintToleration failed: node(s) had taints that the pod "
                                             "didn't tolerate")
    tolerant = spec_pod(asks(), tolerations=[{"key": "maintenance", "operator": "Exists", "effect": "NoExecute"}])
    assert general_filter(tolerant, tainted, allocatable(), []) == []
    static = {**spec_pod(asks()), "metadata": {"name": "p", "annotations": {"kubernetes.io/config.source": "file"}}}
    assert general_filter(static, tainted, allocatable(), []) == []


def test_rejections_are_counted_under_few_reasons():
    assert [admission.metric_reason(r) for r in ("OutOfcpu", "OutOfpods", "OutOfnvidia.com/gpu", "NodeAffinity",
                                                 "TaintToleration", "PodOSNotSupported")] == [
        "OutOfcpu", "OutOfpods", "OutOfExtendedResources", "Other", "Other", "PodOSNotSupported"]


def test_the_os_checks():
    windows_label = {**spec_pod(asks()), "metadata": {"name": "p", "labels": {"kubernetes.io/os": "windows"}}}
    assert os_rejection(windows_label, NODE) == Rejection(
        "PodOSSelectorNodeLabelDoesNotMatch", "Failed to admit pod as the `kubernetes.io/os` label doesn't match "
                                              "node label")
    # a node whose label is missing or wrong counts as the kubelet's own OS
    linux_label = {**windows_label, "metadata": {"name": "p", "labels": {"kubernetes.io/os": "linux"}}}
    assert os_rejection(linux_label, {"metadata": {"name": "n", "labels": {"kubernetes.io/os": "plan9"}}}) is None
    assert os_rejection(spec_pod(asks(), os={"name": "windows"}), NODE) == Rejection(
        "PodOSNotSupported", "Failed to admit pod as the OS field doesn't match node OS")
    assert os_rejection(spec_pod(asks(), os={"name": "linux"}), NODE) is None


MI = 1024 * 1024


def prioritized(name: str, priority: int | None = None, qos: str = "Burstable", **annotations) -> dict:
    spec = {} if priority is None else {"priority": priority}
    return {"metadata": {"name": name, "annotations": annotations}, "spec": spec, "status": {"qosClass": qos}}


CRITICAL = prioritized("critical", 2_000_001_000)


def candidate(name: str, qos: str, priority: int | None = 0, **requests) -> Candidate:
    return Candidate(name, prioritized(name, priority, qos), dict(requests))


def test_critical_pods_are_static_mirror_or_of_system_priority_and_preempt_by_priority():
    assert is_critical(CRITICAL) and is_critical(prioritized("c", 2_000_000_000))
    assert not is_critical(prioritized("p", 1_999_999_999)) and not is_critical(prioritized("none"))
    static = prioritized("s", **{"kubernetes.io/config.source": "file"})
    mirror = prioritized("m", **{"kubernetes.io/config.mirror": "abc"})
    assert is_critical(static) and is_critical(mirror)
    assert not is_critical(prioritized("a", **{"kubernetes.io/config.source": "api"}))
    # a critical pod preempts any other; critical ones only by priority, which a static one may lack
    assert preemptable(static, prioritized("p", 1000)) and not preemptable(static, CRITICAL)
    assert preemptable(CRITICAL, prioritized("c", 2_000_000_000)) and not preemptable(prioritized("c", 2_000_000_000),
                                                                                      CRITICAL)
    assert preemptable(prioritized("hi", 10), prioritized("lo", 5)) and not preemptable(prioritized("x", 5),
                                                                                        prioritized("y", 5))


PODS = [candidate("besteffort", "BestEffort"), candidate("small", "Burstable", memory=100 * MI, cpu=100),
        candidate("big", "Burstable", memory=400 * MI), candidate("guaranteed", "Guaranteed", memory=300 * MI),
        candidate("daemon", "Burstable", 2_000_001_000, memory=1024 * MI)]


def chosen(needs) -> list[str]:
    return [c.key for c in pods_to_preempt(CRITICAL, PODS, needs)]


def test_the_fewest_pods_of_the_least_important_classes_are_preempted():
    # the burstable pod that alone frees enough, not the smaller one nor the guaranteed one
    assert chosen([("memory", 350 * MI)]) == ["big"]
    # more than every burstable pod holds: a guaranteed one too, then the burstable one closest to the rest
    assert chosen([("memory", 600 * MI)]) == ["big", "guaranteed"]
    # a pod slot: the best-effort pod frees one
    assert chosen([("pods", 1)]) == ["besteffort"]
    # two needs: each pod's distance counts both
    assert chosen([("memory", 50 * MI), ("cpu", 100)]) == ["small"]


def test_of_pods_as_close_the_one_asking_less_memory_then_cpu_goes():
    pods = [candidate("a", "Burstable", cpu=1000, memory=200 * MI), candidate("b", "Burstable", cpu=1000, memory=100 * MI),
            candidate("c", "Burstable", cpu=2000, memory=100 * MI)]
    assert [c.key for c in pods_to_preempt(CRITICAL, pods, [("cpu", 500)])] == ["b"]


def test_a_critical_pod_short_of_resources_alone_preempts_or_is_rejected_as_unexpected():
    short = [Rejection("OutOfpods", "", 1), Rejection("OutOfmemory", "", 350 * MI)]
    reasons, preemption = handle_failure(CRITICAL, short, PODS)
    assert reasons == [] and [c.key for c in preemption.victims] == ["big"] and preemption.signal == "pods"
    # another pod, or another reason, is rejected as the predicates say
    assert handle_failure(prioritized("p", 1000), short, PODS) == (short, None)
    affinity = Rejection("NodeAffinity", "Predicate NodeAffinity failed: node(s) didn't match Pod's node "
                                         "affinity/selector")
    assert handle_failure(CRITICAL, [short[1], affinity], PODS) == ([affinity], None)
    # the critical daemon's memory is not the preemptor's to take
    [r], preemption = handle_failure(CRITICAL, [Rejection("OutOfmemory", "", 2048 * MI)], PODS)
    assert preemption is None and r == Rejection(
        "UnexpectedAdmissionError", "Unexpected error while attempting to recover from admission failure: preemption: "
                                    "error finding a set of pods to preempt: no set of running pods found to reclaim "
                                    "resources: [(res: memory, q: 1308622848), ]")


def test_the_shortfall_is_what_the_pod_asks_beyond_what_is_left():
    [pods, cpu] = general_filter(spec_pod(asks(cpu="2")), NODE, allocatable(), [held(cpu=1500)] * 3)
    assert (pods.reason, pods.shortfall, cpu.reason, cpu.shortfall) == ("OutOfpods", 1, "OutOfcpu", 2500)


def test_sysctls_must_be_safe_and_not_in_a_namespace_shared_with_the_host():
    def pod(*names: str, **spec) -> dict:
        return spec_pod(asks(), securityContext={"sysctls": [{"name": n, "value": "1"} for n in names]}, **spec)

    assert sysctl_rejection(pod("net.ipv4.tcp_syncookies", "net/ipv4/ip_local_port_range", "kernel.shm_rmid_forced")) \
        is None
    assert sysctl_rejection(spec_pod(asks())) is None
    assert sysctl_rejection(pod("net.ipv4.tcp_rmem", "kernel.msgmax")) == Rejection(
        "SysctlForbidden", 'forbidden sysctl: "kernel.msgmax" not allowlisted')
    assert sysctl_rejection(pod("net/ipv4/tcp_syncookies", hostNetwork=True)) == Rejection(
        "SysctlForbidden", 'forbidden sysctl: "net.ipv4.tcp_syncookies" not allowed with host net enabled')
    assert sysctl_rejection(pod("kernel.shm_rmid_forced", hostIPC=True)).message == \
        'forbidden sysctl: "kernel.shm_rmid_forced" not allowed with host ipc enabled'
    assert sysctl_rejection(pod("kernel.shm_rmid_forced", hostNetwork=True)) is None


def test_a_pending_pod_asking_an_apparmor_profile_needs_a_node_that_enforces_them():
    def pending(*contexts: dict, annotations: dict | None = None, **spec) -> dict:
        pod = spec_pod(*({**asks(f"c{i}"), "securityContext": sc} for i, sc in enumerate(contexts)), **spec)
        return {**pod, "metadata": {"name": "p", "annotations": annotations or {}}, "status": {"phase": "Pending"}}

    runtime_default = {"appArmorProfile": {"type": "RuntimeDefault"}}
    refused = Rejection("AppArmor", "Cannot enforce AppArmor: AppArmor is not enabled on the host")
    for pod in (pending({}, runtime_default), pending(securityContext={"appArmorProfile": {
            "type": "Localhost", "localhostProfile": "k8s-deny-write"}}),
            pending({}, annotations={"container.apparmor.security.beta.kubernetes.io/c0": "runtime/default"})):
        assert apparmor_rejection(pod, enabled=False) == refused
        assert apparmor_rejection(pod, enabled=True) is None
    unconfined = {"appArmorProfile": {"type": "Unconfined"}}
    assert apparmor_rejection(pending(unconfined, annotations={
        "container.apparmor.security.beta.kubernetes.io/c0": "unconfined"}), enabled=False) is None
    # a running pod admitted again is not checked
    assert apparmor_rejection({**pending(runtime_default), "status": {"phase": "Running"}}, enabled=False) is None
    assert apparmor_enabled(False)  # a simulated node enforces them


def test_under_memory_pressure_alone_only_best_effort_pods_not_tolerating_it_are_refused():
    def qos(cls: str, **spec) -> dict:
        return {"metadata": {"name": "p"}, "spec": spec, "status": {"qosClass": cls}}
    memory = ["MemoryPressure"]
    assert eviction_rejection(qos("BestEffort"), []) is None
    assert eviction_rejection(qos("BestEffort"), memory) == Rejection("Evicted",
                                                                      "The node had condition: [MemoryPressure]. ")
    assert eviction_rejection(qos("Burstable"), memory) is None
    tolerant = [{"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"}]
    assert eviction_rejection(qos("BestEffort", tolerations=tolerant), memory) is None
    # any other pressure refuses every pod but a critical one, whatever it tolerates
    both = ["MemoryPressure", "DiskPressure"]
    assert eviction_rejection(qos("Guaranteed", tolerations=tolerant), both) == Rejection(
        "Evicted", "The node had condition: [MemoryPressure DiskPressure]. ")
    assert eviction_rejection(qos("BestEffort", priority=2_000_000_000), both) is None


# --- through the API: a node agent admitting pods bound by name ----------------------------------

CLUSTER = parse_cluster("""\
pools:
  - name: small
    count: 1
    capacity: {cpu: "4", memory: 8Gi, pods: "4"}
    labels: {zone: a}
""")


@contextlib.asynccontextmanager
async def agents(s, clock):
    mgr = NodeManager(connector(s.rest), CLUSTER, clock)
    await mgr.start()
    try:
        yield mgr
    finally:
        await mgr.stop()


async def rejections(mgr) -> dict[str, float]:
    """kubelet_admission_rejections_total on the node's /metrics, by reason."""
    text = (await mgr.kubelet_for("small-0").serve(SimpleNamespace(method="GET", query={}, headers=CIMultiDict()),
                                                   "/metrics")).text
    return {line.split('"')[1]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
            if line.startswith("kubelet_admission_rejections_total{")}


def bound(name: str, cpu: str = "", **spec) -> dict:
    res = {"resources": {"requests": {"cpu": cpu}}} if cpu else {}
    return {"metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": "small-0", "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "app", "image": "busybox:1.36", "command": ["httpd", "-f"], **res}], **spec}}


def rejected_events(events, name: str):
    async def get():
        items, _ = await events.list("default")
        return [(e["type"], e["reason"], e["message"]) for e in items
                if e["involvedObject"]["name"] == name and e["source"].get("component") == "kubelet"
                and e["type"] == "Warning"]
    return get


async def test_a_pod_bound_by_name_that_overfills_the_node_is_rejected_and_the_others_run_on():
    async with api_on_manual_clock() as (s, clock), agents(s, clock) as mgr:
        pods, events = s.client.resource("", "v1", "pods"), s.client.resource("", "v1", "events")
        assert await rejections(mgr) == {}
        await pods.create(bound("first", "3"))
        await eventually(phase_is(pods, "first", "Running"))
        await pods.create(bound("second", "2"))
        p = await eventually(phase_is(pods, "second", "Failed"))
        message = "Node didn't have enough resource: cpu, requested: 2000, used: 3000, capacity: 4000"
        assert (p["status"]["reason"], p["status"]["message"]) == ("OutOfcpu", "Pod was rejected: " + message)
        assert "containerStatuses" not in p["status"] and "startTime" not in p["status"]
        await becomes(rejected_events(events, "second"), [("Warning", "OutOfcpu", message)])
        assert await rejections(mgr) == {"OutOfcpu": 1}
        # a rejected pod holds nothing: one that fits beside the first is admitted
        await pods.create(bound("third", "1"))
        await eventually(phase_is(pods, "third", "Running"))
        assert (await pods.get("first", "default"))["status"]["phase"] == "Running"
        # a pod that ended holds nothing either
        await pods.delete("first", "default")
        await pods.create(bound("fourth", "3"))
        await eventually(phase_is(pods, "fourth", "Running"))


async def test_node_affinity_taints_and_host_ports_are_checked_on_the_nodes_own_view():
    async with api_on_manual_clock() as (s, clock), agents(s, clock) as mgr:
        pods, nodes = s.client.resource("", "v1", "pods"), s.client.resource("", "v1", "nodes")
        await pods.create(bound("elsewhere", nodeSelector={"zone": "b"}))
        p = await eventually(phase_is(pods, "elsewhere", "Failed"))
        assert (p["status"]["reason"], p["status"]["message"]) == (
            "NodeAffinity", "Pod was rejected: Predicate NodeAffinity failed: node(s) didn't match Pod's node "
                            "affinity/selector")
        # a label added since is found: the Node is read again before node affinity alone rejects a pod
        await nodes.patch("small-0", {"metadata": {"labels": {"tier": "gold"}}})
        await pods.create(bound("gold", nodeSelector={"tier": "gold"}))
        await eventually(phase_is(pods, "gold", "Running"))

        port = {"containerPort": 80, "hostPort": 8080}
        await pods.create({**bound("web"), "spec": {**bound("web")["spec"], "containers": [
            {"name": "app", "image": "nginx", "ports": [port]}]}})
        await eventually(phase_is(pods, "web", "Running"))
        await pods.create({**bound("web2"), "spec": {**bound("web2")["spec"], "containers": [
            {"name": "app", "image": "nginx", "ports": [port]}]}})
        p = await eventually(phase_is(pods, "web2", "Failed"))
        assert p["status"]["reason"] == "NodePorts"

        await nodes.patch("small-0", {"spec": {"taints": [{"key": "drain", "effect": "NoExecute"}]}})
        await eventually(lambda: _tainted(mgr))
        await pods.create(bound("late"))
        p = await eventually(phase_is(pods, "late", "Failed"))
        assert (p["status"]["reason"], p["status"]["message"]) == (
            "TaintToleration", "Pod was rejected: Predicate TaintToleration failed: node(s) had taints that the "
                               "pod didn't tolerate")
        assert await rejections(mgr) == {"Other": 3}  # NodeAffinity, NodePorts, TaintToleration


async def _tainted(mgr) -> bool:
    """The node manager's Node informer (which shows the agent its Node) has the taint."""
    node = mgr.nodes.get("small-0")
    return bool(node and (node.get("spec") or {}).get("taints"))


async def test_a_starting_node_admits_the_pods_it_finds_oldest_first():
    """The pods listed at start-up are admitted in creation order, not the list's (by name)."""
    async with api_on_manual_clock() as (s, clock):
        pods = s.client.resource("", "v1", "pods")
        await pods.create(bound("z-older", "3"))
        await clock.advance(5)
        await pods.create(bound("a-newer", "3"))
        async with agents(s, clock):
            await eventually(phase_is(pods, "z-older", "Running"))
            p = await eventually(phase_is(pods, "a-newer", "Failed"))
            assert p["status"]["reason"] == "OutOfcpu"


async def test_a_pod_for_another_os_is_rejected():
    async with api_on_manual_clock() as (s, clock), agents(s, clock):
        pods = s.client.resource("", "v1", "pods")
        await pods.create(bound("win", os={"name": "windows"}))
        p = await eventually(phase_is(pods, "win", "Failed"))
        assert (p["status"]["reason"], p["status"]["message"]) == (
            "PodOSNotSupported", "Pod was rejected: Failed to admit pod as the OS field doesn't match node OS")


async def preemptions(mgr) -> dict[str, float]:
    """kubelet_preemptions_total on the node's /metrics, by preemption signal."""
    text = (await mgr.kubelet_for("small-0").serve(SimpleNamespace(method="GET", query={}, headers=CIMultiDict()),
                                                   "/metrics")).text
    return {line.split('"')[1]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
            if line.startswith("kubelet_preemptions_total{")}


def warnings(events, name: str):
    async def get():
        items, _ = await events.list("default")
        return [(e["reason"], e["message"]) for e in items if e["involvedObject"]["name"] == name
                and e["type"] == "Warning"]
    return get


async def test_a_critical_pod_bound_to_a_full_node_preempts_the_pod_that_frees_enough_and_runs():
    async with api_on_manual_clock() as (s, clock), agents(s, clock) as mgr:
        pods, events = s.client.resource("", "v1", "pods"), s.client.resource("", "v1", "events")
        await pods.create(bound("big", "3"))
        await pods.create(bound("small", "500m"))
        for name in ("big", "small"):
            await eventually(phase_is(pods, name, "Running"))
        await pods.create(bound("critical", "2", priorityClassName="system-node-critical"))
        await eventually(phase_is(pods, "critical", "Running"))
        p = await eventually(phase_is(pods, "big", "Failed"))
        assert (p["status"]["reason"], p["status"]["message"]) == ("Preempting",
                                                                   "Preempted in order to admit critical pod")
        [target] = [c for c in p["status"]["conditions"] if c["type"] == "DisruptionTarget"]
        assert (target["status"], target["reason"], target["message"]) == (
            "True", "TerminationByKubelet", "Pod was preempted by Kubelet to accommodate a critical pod.")
        assert p["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 143
        assert ("Preempting", "Preempted in order to admit critical pod") in await warnings(events, "big")()
        assert (await pods.get("small", "default"))["status"]["phase"] == "Running"
        assert await preemptions(mgr) == {"cpu": 1}
        assert await rejections(mgr) == {}


async def test_a_critical_pod_no_set_of_pods_makes_room_for_is_rejected():
    async with api_on_manual_clock() as (s, clock), agents(s, clock) as mgr:
        pods = s.client.resource("", "v1", "pods")
        await pods.create(bound("daemon", "3", priorityClassName="system-node-critical"))
        await eventually(phase_is(pods, "daemon", "Running"))
        await pods.create(bound("critical", "2", priorityClassName="system-node-critical"))
        p = await eventually(phase_is(pods, "critical", "Failed"))
        assert (p["status"]["reason"], p["status"]["message"]) == (
            "UnexpectedAdmissionError", "Pod was rejected: Unexpected error while attempting to recover from "
                                        "admission failure: preemption: error finding a set of pods to preempt: no "
                                        "set of running pods found to reclaim resources: [(res: cpu, q: 1000), ]")
        assert await rejections(mgr) == {"UnexpectedAdmissionError": 1}
        assert (await pods.get("daemon", "default"))["status"]["phase"] == "Running"


async def test_an_apparmor_profile_runs_on_a_node_that_enforces_them_and_is_refused_elsewhere():
    async with api_on_manual_clock() as (s, clock), agents(s, clock) as mgr:
        pods = s.client.resource("", "v1", "pods")
        confined = {"securityContext": {"appArmorProfile": {"type": "RuntimeDefault"}}}
        await pods.create(bound("confined", **confined))
        await eventually(phase_is(pods, "confined", "Running"))
        mgr.agents["small-0"].apparmor = False  # as a process runtime node on a host without AppArmor
        await pods.create(bound("refused", **confined))
        p = await eventually(phase_is(pods, "refused", "Failed"))
        assert (p["status"]["reason"], p["status"]["message"]) == (
            "AppArmor", "Pod was rejected: Cannot enforce AppArmor: AppArmor is not enabled on the host")
        assert await rejections(mgr) == {"AppArmor": 1}


async def test_a_pod_asking_an_unsafe_sysctl_is_rejected():
    async with api_on_manual_clock() as (s, clock), agents(s, clock) as mgr:
        pods = s.client.resource("", "v1", "pods")
        await pods.create(bound("tuned", securityContext={"sysctls": [{"name": "kernel.msgmax", "value": "65536"}]}))
        p = await eventually(phase_is(pods, "tuned", "Failed"))
        assert (p["status"]["reason"], p["status"]["message"]) == (
            "SysctlForbidden", 'Pod was rejected: forbidden sysctl: "kernel.msgmax" not allowlisted')
        assert await rejections(mgr) == {"SysctlForbidden": 1}


async def test_a_critical_pod_stops_the_processes_of_the_pod_it_preempts(tmp_path):
    """On the process runtime: the preempted pod's process gets SIGTERM (its trap, once set, exits
    143) before the critical pod runs."""
    trapped = tmp_path / "trapped"
    serve = ["sh", "-c", f"trap 'exit 143' TERM; touch {trapped}; sleep 300 & wait"]
    async with process_agents(tmp_path, str(tmp_path / "pods")) as (client, _, mgr):
        pods = client.resource("", "v1", "pods")
        server = {"name": "app", "image": "busybox:1.36", "command": serve, "resources": {"requests": {"cpu": "60"}}}
        await pods.create({"metadata": {"name": "server", "namespace": "default"},
                           "spec": {"nodeName": "gpu-0", "containers": [server]}})
        await eventually(lambda: asyncio.sleep(0, trapped.exists()))
        await pods.create({"metadata": {"name": "agent", "namespace": "default"}, "spec": {
            "nodeName": "gpu-0", "priorityClassName": "system-node-critical", "containers": [
                {"name": "app", "image": "busybox:1.36", "command": ["sleep", "300"],
                 "resources": {"requests": {"cpu": "8"}}}]}})
        await eventually(phase_is(pods, "agent", "Running"))
        st = (await pods.get("server", "default"))["status"]
        assert (st["phase"], st["reason"]) == ("Failed", "Preempting")
        assert st["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 143
        assert mgr.agents["gpu-0"].preemptions == {"cpu": 1}


async def test_a_critical_pod_waits_for_the_pod_it_preempts_to_stop_however_long_its_grace():
    """The kill is synchronous, as upstream's killPodFunc: a victim that ignores SIGTERM holds its
    room through its 60 s grace period, and the critical pod runs only once SIGKILL ended it."""
    async with api_on_manual_clock() as (s, clock), agents(s, clock) as mgr:
        pods = s.client.resource("", "v1", "pods")
        stubborn = bound("stubborn", "3", terminationGracePeriodSeconds=60)
        stubborn["spec"]["containers"][0]["command"] = ["sh", "-c", "trap '' TERM; sleep 3600"]
        await pods.create(stubborn)
        await eventually(phase_is(pods, "stubborn", "Running"))
        await pods.create(bound("critical", "2", priorityClassName="system-node-critical"))
        await eventually(warnings(s.client.resource("", "v1", "events"), "stubborn"))
        await clock.advance(59)
        assert (await pods.get("critical", "default"))["status"].get("phase") == "Pending"
        assert (await pods.get("stubborn", "default"))["status"]["phase"] == "Running"
        await clock.advance(1)
        p = await eventually(phase_is(pods, "stubborn", "Failed"))
        assert p["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 137
        await eventually(phase_is(pods, "critical", "Running"))
        assert await preemptions(mgr) == {"cpu": 1}


async def test_a_node_under_memory_pressure_refuses_best_effort_pods_and_admits_the_others():
    async with api_on_manual_clock() as (s, clock), agents(s, clock) as mgr:
        pods, events = s.client.resource("", "v1", "pods"), s.client.resource("", "v1", "events")
        await mgr.agents["small-0"].apply_faults("memory-pressure")
        await pods.create(bound("best-effort"))
        p = await eventually(phase_is(pods, "best-effort", "Failed"))
        message = "The node had condition: [MemoryPressure]. "
        assert (p["status"]["reason"], p["status"]["message"]) == ("Evicted", "Pod was rejected: " + message)
        await becomes(rejected_events(events, "best-effort"), [("Warning", "Evicted", message)])
        await pods.create(bound("burstable", "1"))
        await eventually(phase_is(pods, "burstable", "Running"))
        assert await rejections(mgr) == {"Evicted": 1}
        await mgr.agents["small-0"].apply_faults(None)  # healed: admitted again
        await pods.create(bound("later"))
        await eventually(phase_is(pods, "later", "Running"))


async def test_a_node_shutting_down_stops_its_pods_critical_ones_last_and_refuses_new_ones():
    """Graceful node shutdown (the `shutdown` fault): Ready=False, a NodeShutdown event; the pods
    under system-critical priority stopped with 20 s (30 s shutdownGracePeriod less 10 s for
    critical pods; their own 60 s is longer), then the critical ones with 10 s; each Failed as
    Terminated. A pod bound meanwhile is refused; cancelled, the node admits pods again."""
    async with api_on_manual_clock() as (s, clock), agents(s, clock) as mgr:
        pods, nodes = s.client.resource("", "v1", "pods"), s.client.resource("", "v1", "nodes")
        stubborn = {"command": ["sh", "-c", "trap '' TERM; sleep 3600"]}
        for name, spec in (("plain", {}), ("daemon", {"priorityClassName": "system-node-critical"})):
            p = bound(name, "1", terminationGracePeriodSeconds=60, **spec)
            p["spec"]["containers"][0].update(stubborn)
            await pods.create(p)
            await eventually(phase_is(pods, name, "Running"))
        await mgr.agents["small-0"].apply_faults("shutdown")
        ready = next(c for c in (await nodes.get("small-0"))["status"]["conditions"] if c["type"] == "Ready")
        assert (ready["status"], ready["reason"], ready["message"]) == ("False", "KubeletNotReady",
                                                                        "node is shutting down")
        await pods.create(bound("late"))
        p = await eventually(phase_is(pods, "late", "Failed"))
        assert (p["status"]["reason"], p["status"]["message"]) == (
            "NodeShutdown", "Pod was rejected: Pod was rejected as the node is shutting down.")
        await clock.advance(19)
        assert (await pods.get("plain", "default"))["status"]["phase"] == "Running"
        await clock.advance(1)
        p = await eventually(phase_is(pods, "plain", "Failed"))
        message = "Pod was terminated in response to imminent node shutdown."
        assert (p["status"]["reason"], p["status"]["message"]) == ("Terminated", message)
        [target] = [c for c in p["status"]["conditions"] if c["type"] == "DisruptionTarget"]
        assert (target["reason"], target["message"]) == ("TerminationByKubelet", message)
        assert p["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 137
        await clock.advance(9)
        assert (await pods.get("daemon", "default"))["status"]["phase"] == "Running"
        await clock.advance(1)
        p = await eventually(phase_is(pods, "daemon", "Failed"))
        assert p["status"]["reason"] == "Terminated"
        assert await rejections(mgr) == {"NodeShutdown": 1}
        items, _ = await s.client.resource("", "v1", "events").list("default")
        assert ("NodeShutdown", "Shutdown manager detected shutdown event") in [
            (e["reason"], e["message"]) for e in items if e["involvedObject"]["kind"] == "Node"]
        await mgr.agents["small-0"].apply_faults(None)  # the shutdown cancelled: Ready again
        ready = next(c for c in (await nodes.get("small-0"))["status"]["conditions"] if c["type"] == "Ready")
        assert (ready["status"], ready["reason"], ready["message"]) == ("True", "KubeletReady",
                                                                        "kubelet is posting ready status")
        await pods.create(bound("after"))
        await eventually(phase_is(pods, "after", "Running"))


async def test_a_node_shutting_down_kills_a_process_with_the_shutdown_grace_not_its_own(tmp_path):
    """On the process runtime: a process that ignores SIGTERM, its pod's grace 60 s, is killed
    (137) once the shutdown's 1 s for non-critical pods (shortened here) is up."""
    async with process_agents(tmp_path, str(tmp_path / "pods")) as (client, _, mgr):
        pods = client.resource("", "v1", "pods")
        await pods.create({"metadata": {"name": "stubborn", "namespace": "default"}, "spec": {
            "nodeName": "gpu-0", "terminationGracePeriodSeconds": 60, "containers": [
                {"name": "app", "image": "busybox:1.36", "command": ["sleep", "300"]}]}})
        await eventually(phase_is(pods, "stubborn", "Running"))
        mgr.agents["gpu-0"].shutdown_grace_period = (2, 1)
        await mgr.agents["gpu-0"].apply_faults("shutdown")
        p = await eventually(phase_is(pods, "stubborn", "Failed"))
        assert (p["status"]["reason"], p["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"]) == (
            "Terminated", 137)
