"""The Service allocators' shares: API server workers that pick dynamically at the same moment
never pick one value, and each still takes any value of its range by name. What a restart (or a
worker following the others' Services) rebuilds from stored Services. Then the order of a
refusal's errors through the official client, as upstream's Store and ValidateService(Update)
give them."""

from __future__ import annotations

import asyncio
import copy
import ipaddress
import json

import pytest
from kubernetes.client.rest import ApiException

from nanokube.registry.core_services import AllocationError, NodePortAllocator, ServiceIPAllocator, ServiceStrategy


def test_two_shares_of_the_ip_ranges_pick_disjoint_addresses():
    workers = [ServiceIPAllocator("10.0.0.0/30") for _ in range(2)]
    for i, a in enumerate(workers):
        a.share(2, i)
        a.set_extra_ranges({"more": ["10.1.0.0/24"]})  # a range added after the share is shared too
    picked = [[a.allocate(f"w{i}-{n}") for n in range(50)] for i, a in enumerate(workers)]
    assert not set(picked[0]) & set(picked[1])
    assert all(int(ipaddress.ip_address(ip)) % 2 == i for i, ips in enumerate(picked) for ip in ips)
    assert {ip.rsplit(".", 2)[0] for ips in picked for ip in ips} == {"10.0", "10.1"}
    # by name, a worker takes an address of the other's share
    assert workers[0].allocate("named", picked[1][-1]) == picked[1][-1]


def test_two_shares_of_the_node_port_range_pick_disjoint_ports():
    workers = [NodePortAllocator("30000-30099") for _ in range(2)]
    for i, a in enumerate(workers):
        a.share(2, i)
    picked = [[a.allocate(f"w{i}-{n}") for n in range(50)] for i, a in enumerate(workers)]
    assert sorted(picked[0] + picked[1]) == list(range(30000, 30100))
    assert all(p % 2 == i for i, ports in enumerate(picked) for p in ports)
    assert workers[1].allocate("named", 30000) == 30000


def test_a_full_share_takes_the_others_values_before_the_range_is_full():
    ports = NodePortAllocator("30000-30009")
    ports.share(2, 1)
    picked = [ports.allocate(f"s{n}") for n in range(10)]
    assert [p % 2 for p in picked] == [1] * 5 + [0] * 5 and sorted(picked) == list(range(30000, 30010))
    with pytest.raises(AllocationError, match="range is full"):
        ports.allocate("one-more")
    ips = ServiceIPAllocator("10.0.0.0/29")  # .1 to .6
    ips.share(2, 0)
    ips.set_extra_ranges({"more": ["10.1.0.0/30"]})  # .1, .2
    picked = [ips.allocate(f"s{n}") for n in range(8)]
    # every range's own share first, then the others' values
    assert sorted(picked[:4]) == ["10.0.0.2", "10.0.0.4", "10.0.0.6", "10.1.0.2"]
    assert sorted(picked[4:]) == ["10.0.0.1", "10.0.0.3", "10.0.0.5", "10.1.0.1"]
    with pytest.raises(AllocationError, match="range is full"):
        ips.allocate("one-more")


def test_restore_takes_every_node_port_a_service_holds_its_health_checks_too():
    svc = {"metadata": {"name": "lb", "namespace": "default", "uid": "u1"},
           "spec": {"type": "LoadBalancer", "externalTrafficPolicy": "Local", "clusterIP": "10.96.0.10",
                    "ports": [{"port": 80, "nodePort": 30010}], "healthCheckNodePort": 30011}}
    strategy = ServiceStrategy()
    strategy.restore([svc])
    assert [strategy.node_ports.owner(p) for p in (30010, 30011)] == ["u1", "u1"]
    strategy.release(svc)
    assert [strategy.node_ports.owner(p) for p in (30010, 30011)] == [None, None]


def _svc(name: str, **spec) -> dict:
    return {"metadata": {"name": name}, "spec": {"ports": [{"port": 80}], **spec}}


async def _refused(call, *args) -> tuple[int, str]:
    with pytest.raises(ApiException) as e:
        await asyncio.to_thread(call, *args)
    return e.value.status, json.loads(e.value.body)["message"]


async def test_allocation_refuses_before_validation_runs(core):
    """Store.BeginCreate allocates before BeforeCreate validates: a taken ClusterIP is the whole
    answer however wrong the rest is, and a bad ClusterIP field (ValidateServiceClusterIPsRelatedFields,
    which the allocator runs first) is reported alone too."""
    await asyncio.to_thread(core.create_namespaced_service, "default", _svc("a", clusterIP="10.96.0.10"))
    bad_rest = {"ports": [{"port": 80}, {"port": 81}], "sessionAffinity": "Sometimes"}
    code, message = await _refused(core.create_namespaced_service, "default",
                                   _svc("Not_A_Label", clusterIP="10.96.0.10", **bad_rest))
    assert (code, message) == (422, 'Service "Not_A_Label" is invalid: spec.clusterIPs: Invalid value: ["10.96.0.10"]: '
                                    'failed to allocate IP 10.96.0.10: provided IP is already allocated')
    code, message = await _refused(core.create_namespaced_service, "default",
                                   _svc("b", clusterIP="10.96.0.300", **bad_rest))
    assert (code, message) == (422, 'Service "b" is invalid: spec.clusterIPs[0]: Invalid value: "10.96.0.300": '
                                    'must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)')
    # a NodePort Service stops at its first port that cannot be had
    taken = (await asyncio.to_thread(core.create_namespaced_service, "default", _svc("np", type="NodePort"))) \
        .spec.ports[0].node_port
    code, message = await _refused(core.create_namespaced_service, "default", _svc(
        "np2", type="NodePort", ports=[{"name": "a", "port": 80, "nodePort": taken}, {"name": "b", "port": 81, "nodePort": 80}]))
    assert (code, message) == (422, f'Service "np2" is invalid: spec.ports[0].nodePort: Invalid value: {taken}: '
                                    'provided port is already allocated')
    names = {s.metadata.name for s in (await asyncio.to_thread(core.list_namespaced_service, "default")).items}
    assert names == {"kubernetes", "a", "np"}


async def test_validation_lists_errors_in_upstreams_order(core):
    """ValidateService: the ports before the session affinity, the ClusterIPs, the type; a Forbidden
    sessionAffinityConfig without ClientIP affinity; an appProtocol that is not a qualified name."""
    code, message = await _refused(core.create_namespaced_service, "default", _svc(
        "c", type="Bogus", sessionAffinity="None", sessionAffinityConfig={"clientIP": {"timeoutSeconds": 5}},
        ports=[{"port": 80, "appProtocol": "not a name"}, {"port": 0}]))
    fields = [part.split(":")[0] for part in message.split(": ", 1)[1].strip("[]").split(", spec.")]
    assert fields == ["spec.ports[0].name", "ports[0].appProtocol", "ports[1].name", "ports[1].port",
                      "ports[1].targetPort", "sessionAffinityConfig", "type"], message


async def test_a_repeated_port_is_reported_with_the_internal_key_upstream_builds(core):
    """ValidateService finds a (protocol, port) twice through a map keyed by a core.ServicePort
    holding only those two fields; field.Duplicate prints that struct (no JSON tags: Go's names)."""
    code, message = await _refused(core.create_namespaced_service, "default", _svc(
        "d", ports=[{"name": "a", "port": 80}, {"name": "b", "port": 80, "targetPort": 8080}]))
    assert (code, message) == (422, 'Service "d" is invalid: spec.ports[1]: Duplicate value: {"Name":"","Protocol":'
                                    '"TCP","AppProtocol":null,"Port":80,"TargetPort":0,"NodePort":0}')


async def test_an_update_reports_the_clusterip_change_first_as_upstream_words_it(core):
    """ValidateServiceUpdate checks the ClusterIPs (validateUpgradeDowngradeClusterIPs: 'may not change
    once set', at clusterIPs[0], the new list as value) before ValidateService; the changed address is
    not allocated. A class removed from a LoadBalancer is the nil pointer Go prints as "null"."""
    svc = await asyncio.to_thread(core.create_namespaced_service, "default", _svc("web", selector={"app": "web"}))
    body = core.api_client.sanitize_for_serialization(svc)
    changed = copy.deepcopy(body)
    changed["spec"]["clusterIP"], changed["spec"]["clusterIPs"] = "10.96.0.77", ["10.96.0.77"]
    changed["spec"]["selector"] = {"app": "bad value!"}
    code, message = await _refused(core.replace_namespaced_service, "web", "default", changed)
    assert code == 422 and message.startswith(
        'Service "web" is invalid: [spec.clusterIPs[0]: Invalid value: ["10.96.0.77"]: may not change once set, '
        'spec.selector: Invalid value: "bad value!": '), message
    await asyncio.to_thread(core.create_namespaced_service, "default", _svc("again", clusterIP="10.96.0.77"))
    lb = await asyncio.to_thread(core.create_namespaced_service, "default",
                                 _svc("lb", type="LoadBalancer", loadBalancerClass="example.com/lb"))
    lb = core.api_client.sanitize_for_serialization(lb)
    del lb["spec"]["loadBalancerClass"]
    code, message = await _refused(core.replace_namespaced_service, "lb", "default", lb)
    assert (code, message) == (422, 'Service "lb" is invalid: spec.loadBalancerClass: Invalid value: null: '
                                    'may not change once set')


async def test_families_this_cluster_does_not_serve_are_refused_before_allocation(core):
    """initIPFamilyFields: an IPv4-only cluster refuses an IPv6 family, a second ClusterIP of IPv6 and
    RequireDualStack (a headless Service without a selector is the exception); all were stored."""
    cases = [({"ipFamilies": ["IPv6"]}, 'spec.ipFamilies[0]: Invalid value: "IPv6": not configured on this cluster'),
             ({"ipFamilyPolicy": "RequireDualStack"}, 'spec.ipFamilyPolicy: Invalid value: "RequireDualStack": '
                                                      'this cluster is not configured for dual-stack services'),
             ({"clusterIP": "10.96.0.54", "clusterIPs": ["10.96.0.54", "fd00::5"], "ipFamilyPolicy": "PreferDualStack"},
              'spec.clusterIPs[1]: Invalid value: ["10.96.0.54","fd00::5"]: IPv6 is not configured on this cluster')]
    for i, (spec, want) in enumerate(cases):
        assert await _refused(core.create_namespaced_service, "default", _svc(f"f{i}", **spec)) == (
            422, f'Service "f{i}" is invalid: {want}')
    headless = await asyncio.to_thread(core.create_namespaced_service, "default",
                                       {"metadata": {"name": "hl"}, "spec": {"clusterIP": "None"}})
    assert (headless.spec.ip_family_policy, headless.spec.cluster_ips) == ("RequireDualStack", ["None"])


async def test_leading_zeros_are_refused_with_the_strict_message(core):
    """StrictIPCIDRValidation is beta and on in 1.37: "010.96.0.10" in a Service's IP fields is
    refused with IsValidIPForLegacyField's strict message."""
    for name, spec, path, ip in (("z1", {"clusterIP": "010.96.0.10"}, "spec.clusterIPs[0]", "010.96.0.10"),
                                 ("z2", {"externalIPs": ["192.0.2.010"]}, "spec.externalIPs[0]", "192.0.2.010")):
        assert await _refused(core.create_namespaced_service, "default", _svc(name, **spec)) == (
            422, f'Service "{name}" is invalid: {path}: Invalid value: "{ip}": must not have leading 0s')


async def test_source_ranges_and_topology_annotations_are_validated(core):
    """ValidateService's loadBalancerSourceRanges (upstream's path has a capital L; a legacy field,
    trimmed, strict: bits beyond the prefix refused) and the topology-mode annotation; all were stored."""
    lb = {"metadata": {"name": "lb", "annotations": {"service.kubernetes.io/topology-mode": "Auto",
                                                     "service.kubernetes.io/topology-aware-hints": "Disabled"}},
          "spec": {"type": "LoadBalancer", "ports": [{"port": 80}],
                   "loadBalancerSourceRanges": [" 10.0.0.0/24", "bogus", "10.0.0.1/24"]}}
    code, message = await _refused(core.create_namespaced_service, "default", lb)
    assert (code, message) == (422, 'Service "lb" is invalid: [metadata.annotations[service.kubernetes.io/topology-mode]: '
                                    'Invalid value: "Auto": must match annotations[service.kubernetes.io/topology-aware-hints] '
                                    'when both are specified, spec.LoadBalancerSourceRanges[1]: Invalid value: "bogus": '
                                    'must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64), '
                                    'spec.LoadBalancerSourceRanges[2]: Invalid value: "10.0.0.1/24": '
                                    'must not have bits set beyond the prefix length]')
    code, message = await _refused(core.create_namespaced_service, "default",
                                   _svc("plain", loadBalancerSourceRanges=["10.0.0.0/8"]))
    assert (code, message) == (422, 'Service "plain" is invalid: spec.LoadBalancerSourceRanges: Forbidden: '
                                    "may only be used when `type` is 'LoadBalancer'")
    del lb["metadata"]["annotations"], lb["spec"]["loadBalancerSourceRanges"][1:]
    made = await asyncio.to_thread(core.create_namespaced_service, "default", lb)
    assert made.spec.load_balancer_source_ranges == [" 10.0.0.0/24"]


async def test_load_balancer_status_ip_mode_and_type(core):
    """ValidateLoadBalancerStatus with LoadBalancerIPMode GA and AllowServiceLBStatusOnNonLB gone: an
    ingress point on a Service of another type is refused; an ip without ipMode is given VIP (v1
    defaulting, LoadBalancer Services alone); an ipMode needs an ip and is VIP or Proxy."""
    await asyncio.to_thread(core.create_namespaced_service, "default", _svc("plain"))
    status = {"status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.7", "ipMode": "VIP"}]}}}
    assert await _refused(core.patch_namespaced_service_status, "plain", "default", status) == (
        422, 'Service "plain" is invalid: status.loadBalancer.ingress: Forbidden: '
             "may only be used when `spec.type` is 'LoadBalancer'")
    await asyncio.to_thread(core.create_namespaced_service, "default", _svc("lb", type="LoadBalancer"))
    body = {"status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.7"}, {"hostname": "lb.example.com"}]}}}
    written = await asyncio.to_thread(core.patch_namespaced_service_status, "lb", "default", body)
    assert [(i.ip, i.ip_mode, i.hostname) for i in written.status.load_balancer.ingress] == [
        ("192.0.2.7", "VIP", None), (None, None, "lb.example.com")]
    body = {"status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.8", "ipMode": "Direct"},
                                                    {"hostname": "lb.example.com", "ipMode": "Proxy"}]}}}
    assert await _refused(core.patch_namespaced_service_status, "lb", "default", body) == (
        422, 'Service "lb" is invalid: [status.loadBalancer.ingress[0].ipMode: Unsupported value: "Direct": '
             'supported values: "Proxy", "VIP", status.loadBalancer.ingress[1].ipMode: Forbidden: '
             "may not be specified when `ip` is not set]")
    proxied = {"status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.8", "ipMode": "Proxy"}]}}}
    written = await asyncio.to_thread(core.patch_namespaced_service_status, "lb", "default", proxied)
    assert [(i.ip, i.ip_mode) for i in written.status.load_balancer.ingress] == [("192.0.2.8", "Proxy")]
