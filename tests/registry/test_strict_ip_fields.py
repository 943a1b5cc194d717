"""StrictIPCIDRValidation (KEP-4858: beta, on by default in 1.37) through the official client: each
kind of IP and CIDR field refuses a new IPv4 address with leading zeros, an IPv4-mapped IPv6 one or
an ambiguous CIDR with upstream's message and path, while an object stored before (planted here in
the store, as no request can write it now) keeps its value through an unrelated update. Then the
Service allocator's dual-stack ClusterIPs and spec.trafficDistribution."""

from __future__ import annotations

import asyncio
import copy
import json

import orjson
import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from nanokube.apiserver.app import APIServer
from nanokube.machinery.validation import interface_address_errors
from tests.served import served
from tests.controllers import tries


class Cluster:
    def __init__(self, server: APIServer, api_client):
        self.server = server
        self.core = client.CoreV1Api(api_client)
        self.net = client.NetworkingV1Api(api_client)
        self.discovery = client.DiscoveryV1Api(api_client)

    async def plant(self, group: str, plural: str, namespace: str | None, name: str, change) -> None:
        """Rewrite a stored object as an older server would have let it be written, and wait until
        reads see it."""
        key = self.server.index.get(group, "v1", plural).key(namespace, name)
        kv = await self.server.store.get(key)
        obj = orjson.loads(kv.value)
        change(obj)
        planted = await self.server.store.update(key, orjson.dumps(obj), kv.mod_revision)
        for _ in tries():
            if (entry := self.server.cache.get(key)) is not None and entry.rev >= planted.mod_revision:
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"{key} not seen planted")


@pytest.fixture
async def cluster(tmp_path):
    async with served(tmp_path) as (server, api_client):
        yield Cluster(server, api_client)


async def _call(f, *args, **kw):
    return await asyncio.to_thread(f, *args, **kw)


async def _refused(f, *args, **kw) -> str:
    with pytest.raises(ApiException) as e:
        await _call(f, *args, **kw)
    assert e.value.status == 422, e.value.body
    return json.loads(e.value.body)["message"]


LABEL = {"metadata": {"labels": {"touched": "yes"}}}


def _pod(name: str, **spec) -> dict:
    return {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "busybox"}], **spec}}


async def test_service_ips_and_cidrs(cluster):
    core = cluster.core
    svc = {"metadata": {"name": "s"}, "spec": {"type": "LoadBalancer", "ports": [{"port": 80}],
                                               "externalIPs": ["192.0.2.10"], "loadBalancerSourceRanges": ["10.0.0.0/8"]}}
    assert await _refused(core.create_namespaced_service, "default",
                          {**svc, "spec": {**svc["spec"], "externalIPs": ["::ffff:192.0.2.10"]}}) == (
        'Service "s" is invalid: spec.externalIPs[0]: Invalid value: "::ffff:192.0.2.10": '
        "must not be an IPv4-mapped IPv6 address")
    await _call(core.create_namespaced_service, "default", svc)

    def legacy(o):
        o["spec"]["externalIPs"] = ["192.0.2.010"]
        o["spec"]["loadBalancerSourceRanges"] = ["10.0.0.1/8"]
    await cluster.plant("", "services", "default", "s", legacy)
    patched = await _call(core.patch_namespaced_service, "s", "default", LABEL)
    assert (patched.spec.external_ips, patched.spec.load_balancer_source_ranges) == (["192.0.2.010"], ["10.0.0.1/8"])
    # the old values stand; a new one is checked
    body = {"spec": {"externalIPs": ["192.0.2.010", "192.0.2.011"]}}
    assert await _refused(core.patch_namespaced_service, "s", "default", body) == (
        'Service "s" is invalid: spec.externalIPs[1]: Invalid value: "192.0.2.011": must not have leading 0s')
    status = {"status": {"loadBalancer": {"ingress": [{"ip": "198.51.100.010"}]}}}
    assert await _refused(core.patch_namespaced_service_status, "s", "default", status) == (
        'Service "s" is invalid: status.loadBalancer.ingress[0].ip: Invalid value: "198.51.100.010": '
        "must not have leading 0s")


async def test_pod_spec_and_status_ips(cluster):
    core = cluster.core
    assert await _refused(core.create_namespaced_pod, "default", _pod(
        "p", dnsPolicy="None", dnsConfig={"nameservers": ["010.0.0.53"]},
        hostAliases=[{"ip": "::ffff:10.0.0.1", "hostnames": ["db"]}])) == (
        'Pod "p" is invalid: [spec.dnsConfig.nameservers[0]: Invalid value: "010.0.0.53": must not have leading 0s, '
        'spec.hostAliases[0].ip: Invalid value: "::ffff:10.0.0.1": must not be an IPv4-mapped IPv6 address]')
    await _call(core.create_namespaced_pod, "default", _pod(
        "p", dnsPolicy="None", dnsConfig={"nameservers": ["10.0.0.53"]}, hostAliases=[{"ip": "10.0.0.1"}]))

    def legacy(o):
        o["spec"]["dnsConfig"]["nameservers"] = ["010.0.0.53"]
        o["spec"]["hostAliases"][0]["ip"] = "::ffff:10.0.0.1"
        o["status"]["podIPs"], o["status"]["podIP"] = [{"ip": "10.1.0.010"}], "10.1.0.010"
    await cluster.plant("", "pods", "default", "p", legacy)
    patched = await _call(core.patch_namespaced_pod, "p", "default", LABEL)
    assert patched.spec.dns_config.nameservers == ["010.0.0.53"] and patched.metadata.labels == {"touched": "yes"}
    await _call(core.patch_namespaced_pod_status, "p", "default", {"status": {"hostIP": "10.9.0.1"}})
    # (the strategic merge keeps the old entry too: two IPv4 addresses are refused as well)
    assert 'status.podIPs[0]: Invalid value: "10.1.0.011": must not have leading 0s' in await _refused(
        core.patch_namespaced_pod_status, "p", "default", {"status": {"podIP": "10.1.0.011", "podIPs": [{"ip": "10.1.0.011"}]}})


def _template(restart: str = "Always") -> dict:
    return {"metadata": {"labels": {"app": "a"}},
            "spec": {"containers": [{"name": "c", "image": "busybox"}], "restartPolicy": restart,
                     "dnsConfig": {"nameservers": ["10.0.0.53"]}, "hostAliases": [{"ip": "10.0.0.1", "hostnames": ["db"]}]}}


#: kind: (API, group, plural, a body holding the template, the template's path in it)
_WORKLOADS = {
    "Deployment": ("apps", "apps", "deployments", {"selector": {"matchLabels": {"app": "a"}}}, ("spec",)),
    "ReplicaSet": ("apps", "apps", "replicasets", {"selector": {"matchLabels": {"app": "a"}}}, ("spec",)),
    "DaemonSet": ("apps", "apps", "daemonsets", {"selector": {"matchLabels": {"app": "a"}}}, ("spec",)),
    "StatefulSet": ("apps", "apps", "statefulsets", {"selector": {"matchLabels": {"app": "a"}}}, ("spec",)),
    "Job": ("batch", "batch", "jobs", {}, ("spec",)),
    "CronJob": ("batch", "batch", "cronjobs", {"schedule": "* * * * *"}, ("spec", "jobTemplate", "spec")),
    "ReplicationController": ("core", "", "replicationcontrollers", {"selector": {"app": "a"}}, ("spec",)),
    "PodTemplate": ("core", "", "podtemplates", None, ()),
}


def _holder(obj: dict, path: tuple[str, ...]) -> dict:
    for key in path:
        obj = obj.setdefault(key, {})
    return obj


@pytest.mark.parametrize("kind", list(_WORKLOADS))
async def test_workload_templates_keep_old_ips(cluster, kind):
    """A workload's pod template is validated as a pod's spec (1.37's strict IPs) and ratcheted as a
    pod is: a template stored with an IP now invalid keeps it through updates that leave it there,
    its other fields changing too; a new one is refused."""
    api_name, group, plural, spec, path = _WORKLOADS[kind]
    api = {"apps": client.AppsV1Api, "batch": client.BatchV1Api, "core": client.CoreV1Api}[api_name](
        cluster.core.api_client)
    snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in kind).lstrip("_")
    create, patch = getattr(api, f"create_namespaced_{snake}"), getattr(api, f"patch_namespaced_{snake}")
    body = {"metadata": {"name": "w"}}
    if spec is not None:
        body["spec"] = copy.deepcopy(spec)
    _holder(body, path)["template"] = _template("Never" if group == "batch" else "Always")
    await _call(create, "default", body)

    def legacy(o):
        tspec = _holder(o, path)["template"]["spec"]
        tspec["dnsConfig"]["nameservers"] = ["010.0.0.53"]
        tspec["hostAliases"][0]["ip"] = "::ffff:10.0.0.1"
    await cluster.plant(group, plural, "default", "w", legacy)
    patched = (await _call(patch, "w", "default", LABEL)).to_dict()
    assert patched["metadata"]["labels"]["touched"] == "yes"
    read_path = tuple(k.replace("jobTemplate", "job_template") for k in path)  # to_dict's names
    tspec = _holder(patched, read_path)["template"]["spec"]
    assert (tspec["dns_config"]["nameservers"], tspec["host_aliases"][0]["ip"]) == (["010.0.0.53"], "::ffff:10.0.0.1")
    change: dict = {}
    if kind != "Job":  # a Job's template is immutable
        _holder(change, path)["template"] = {"spec": {"containers": [{"name": "c", "image": "busybox:1.37"}]}}
        patched = (await _call(patch, "w", "default", change)).to_dict()
        assert _holder(patched, read_path)["template"]["spec"]["containers"][0]["image"] == "busybox:1.37"
    _holder(change, path)["template"] = {"spec": {"dnsConfig": {"nameservers": ["010.0.0.53", "010.0.0.54"]}}}
    tpath = ".".join((*path, "template", "spec"))
    assert f'{tpath}.dnsConfig.nameservers[1]: Invalid value: "010.0.0.54": must not have leading 0s' in await _refused(
        patch, "w", "default", change)


async def test_node_pod_cidrs(cluster):
    core = cluster.core
    assert await _refused(core.create_node, {"metadata": {"name": "n"}, "spec": {"podCIDRs": ["10.244.0.1/24"]}}) == (
        'Node "n" is invalid: spec.podCIDRs[0]: Invalid value: "10.244.0.1/24": '
        "must not have bits set beyond the prefix length")
    await _call(core.create_node, {"metadata": {"name": "n"}, "spec": {"podCIDRs": ["10.244.0.0/24"]}})

    def legacy(o):
        o["spec"]["podCIDR"], o["spec"]["podCIDRs"] = "10.244.000.0/24", ["10.244.000.0/24"]
    await cluster.plant("", "nodes", None, "n", legacy)
    assert (await _call(core.patch_node, "n", LABEL)).spec.pod_cidrs == ["10.244.000.0/24"]


async def test_endpoints_keep_old_addresses_only_while_subsets_are_unchanged(cluster):
    core = cluster.core
    ep = {"metadata": {"name": "e"}, "subsets": [{"addresses": [{"ip": "10.0.0.1"}], "ports": [{"port": 80}]}]}
    bad = {**ep, "subsets": [{"addresses": [{"ip": "010.0.0.1"}], "ports": [{"port": 80}]}]}
    assert await _refused(core.create_namespaced_endpoints, "default", bad) == (
        'Endpoints "e" is invalid: subsets[0].addresses[0].ip: Invalid value: "010.0.0.1": must not have leading 0s')
    await _call(core.create_namespaced_endpoints, "default", ep)
    await cluster.plant("", "endpoints", "default", "e", lambda o: o["subsets"][0]["addresses"][0].update(ip="010.0.0.1"))
    await _call(core.patch_namespaced_endpoints, "e", "default", LABEL)
    moved = {"subsets": [{"addresses": [{"ip": "010.0.0.1"}, {"ip": "10.0.0.2"}], "ports": [{"port": 80}]}]}
    assert await _refused(core.patch_namespaced_endpoints, "e", "default", moved) == (
        'Endpoints "e" is invalid: subsets[0].addresses[0].ip: Invalid value: "010.0.0.1": must not have leading 0s')


async def test_endpoint_slices_keep_old_addresses_only_while_endpoints_are_unchanged(cluster):
    api = cluster.discovery
    es = {"metadata": {"name": "es"}, "addressType": "IPv4", "endpoints": [{"addresses": ["10.0.0.1"]}]}
    bad = [{"addresses": ["::ffff:10.0.0.1"]}]
    assert await _refused(api.create_namespaced_endpoint_slice, "default", {**es, "endpoints": bad}) == (
        'EndpointSlice.discovery.k8s.io "es" is invalid: endpoints[0].addresses[0]: '
        'Invalid value: "::ffff:10.0.0.1": must not be an IPv4-mapped IPv6 address')
    await _call(api.create_namespaced_endpoint_slice, "default", es)
    await cluster.plant("discovery.k8s.io", "endpointslices", "default", "es", lambda o: o.update(endpoints=bad))
    await _call(api.patch_namespaced_endpoint_slice, "es", "default", LABEL)
    more = {"endpoints": [*bad, {"addresses": ["10.0.0.2"]}]}
    assert "must not be an IPv4-mapped IPv6 address" in await _refused(
        api.patch_namespaced_endpoint_slice, "es", "default", more)


async def test_network_policy_cidrs_and_ingress_status(cluster):
    net = cluster.net
    block = {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}
    np = {"metadata": {"name": "np"}, "spec": {"podSelector": {}, "ingress": [{"from": [{"ipBlock": block}]}]}}
    bad = {**np, "spec": {"podSelector": {}, "ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.1/8"}}]}]}}
    assert await _refused(net.create_namespaced_network_policy, "default", bad) == (
        'NetworkPolicy.networking.k8s.io "np" is invalid: spec.ingress[0].from[0].ipBlock.cidr: '
        'Invalid value: "10.0.0.1/8": must not have bits set beyond the prefix length')
    await _call(net.create_namespaced_network_policy, "default", np)
    await cluster.plant("networking.k8s.io", "networkpolicies", "default", "np",
                        lambda o: o["spec"]["ingress"][0]["from"][0]["ipBlock"].update(cidr="10.0.0.1/8"))
    await _call(net.patch_namespaced_network_policy, "np", "default", LABEL)
    # an old CIDR may stand anywhere in the new policy (ValidateNetworkPolicyUpdate's existingCIDRs)
    egress = {"spec": {"egress": [{"to": [{"ipBlock": {"cidr": "10.0.0.1/8"}}]}]}}
    await _call(net.patch_namespaced_network_policy, "np", "default", egress)

    ing = {"metadata": {"name": "i"}, "spec": {"defaultBackend": {"service": {"name": "s", "port": {"number": 80}}}}}
    await _call(net.create_namespaced_ingress, "default", ing)
    status = {"status": {"loadBalancer": {"ingress": [{"ip": "::ffff:198.51.100.1"}]}}}
    assert await _refused(net.patch_namespaced_ingress_status, "i", "default", status) == (
        'Ingress.networking.k8s.io "i" is invalid: status.loadBalancer.ingress[0].ip: '
        'Invalid value: "::ffff:198.51.100.1": must not be an IPv4-mapped IPv6 address')


def test_network_data_ips_are_interface_addresses():
    """IsValidInterfaceAddress: ParseCIDRSloppy's reading, in canonical form (Go prints an
    IPv4-mapped address as IPv4, its prefix length less 96)."""
    p = "status.devices[0].networkData.ips[0]"
    assert interface_address_errors("10.0.0.5/24", p) == []
    assert [e.detail for e in interface_address_errors("010.0.0.5/24", p)] == ['must be in canonical form ("10.0.0.5/24")']
    assert [e.detail for e in interface_address_errors("::ffff:10.0.0.5/120", p)] == [
        'must be in canonical form ("10.0.0.5/24")']
    assert [e.detail for e in interface_address_errors("10.0.0.5", p)] == [
        "must be a valid address in CIDR form, (e.g. 10.9.8.7/24 or 2001:db8::1/64)"]


async def test_dual_stack_services_get_an_address_of_each_family(cluster):
    """allocClusterIPs gives a dual-stack Service one ClusterIP per family: both it asked for, or the
    cluster's other family picked; a single-stack cluster gives PreferDualStack its primary only. An
    update asking for dual-stack allocates the secondary (updateClusterIPs)."""
    core = cluster.core
    dual = {"ipFamilyPolicy": "PreferDualStack", "ports": [{"port": 80}]}
    made = await _call(core.create_namespaced_service, "default", {"metadata": {"name": "single"}, "spec": dual})
    assert (made.spec.ip_families, len(made.spec.cluster_ips)) == (["IPv4"], 1)
    ips = cluster.server.index.get("", "v1", "services").strategy.ips  # the server's allocator
    ips.set_extra_ranges({"v6": ["fd00:10:96::/108"]})
    try:
        asked = {"ipFamilyPolicy": "RequireDualStack", "clusterIPs": ["10.96.0.50", "fd00:10:96::50"], "ports": [{"port": 80}]}
        made = await _call(core.create_namespaced_service, "default", {"metadata": {"name": "asked"}, "spec": asked})
        assert (made.spec.cluster_ip, made.spec.cluster_ips, made.spec.ip_families) == (
            "10.96.0.50", ["10.96.0.50", "fd00:10:96::50"], ["IPv4", "IPv6"])
        made = await _call(core.create_namespaced_service, "default", {"metadata": {"name": "picked"}, "spec": dual})
        assert made.spec.ip_families == ["IPv4", "IPv6"] and [ip.count(":") > 0 for ip in made.spec.cluster_ips] == [False, True]
        # a second Service asking for a taken secondary is refused; its primary is not kept
        again = {**asked, "clusterIPs": ["10.96.0.51", "fd00:10:96::50"]}
        assert await _refused(core.create_namespaced_service, "default", {"metadata": {"name": "again"}, "spec": again}) == (
            'Service "again" is invalid: spec.clusterIPs: Invalid value: ["10.96.0.51","fd00:10:96::50"]: '
            "failed to allocate IP fd00:10:96::50: provided IP is already allocated")
        made = await _call(core.create_namespaced_service, "default",
                           {"metadata": {"name": "after"}, "spec": {"clusterIP": "10.96.0.51", "ports": [{"port": 80}]}})
        assert made.spec.cluster_ips == ["10.96.0.51"]
        # an update keeps both
        patched = await _call(core.patch_namespaced_service, "asked", "default", LABEL)
        assert patched.spec.cluster_ips == ["10.96.0.50", "fd00:10:96::50"]
        # a single-stack Service turned dual-stack gets its secondary; turned back, gives it up
        await _call(core.create_namespaced_service, "default",
                    {"metadata": {"name": "up"}, "spec": {"clusterIP": "10.96.0.52", "ports": [{"port": 80}]}})
        up = await _call(core.patch_namespaced_service, "up", "default", {"spec": {"ipFamilyPolicy": "RequireDualStack"}})
        assert (up.spec.ip_families, up.spec.cluster_ips[0], len(up.spec.cluster_ips)) == (["IPv4", "IPv6"], "10.96.0.52", 2)
        secondary = up.spec.cluster_ips[1]
        down = await _call(core.patch_namespaced_service, "up", "default", {"spec": {
            "ipFamilyPolicy": "SingleStack", "ipFamilies": ["IPv4"], "clusterIPs": ["10.96.0.52"]}})
        assert down.spec.cluster_ips == ["10.96.0.52"] and ips.owner(secondary) is None
    finally:
        ips.set_extra_ranges({})


async def test_traffic_distribution_is_one_of_upstreams(cluster):
    core = cluster.core
    for value in ("PreferClose", "PreferSameZone", "PreferSameNode"):
        made = await _call(core.create_namespaced_service, "default",
                           {"metadata": {"name": value.lower()}, "spec": {"ports": [{"port": 80}], "trafficDistribution": value}})
        assert made.spec.traffic_distribution == value
    assert await _refused(core.create_namespaced_service, "default",
                          {"metadata": {"name": "x"}, "spec": {"ports": [{"port": 80}], "trafficDistribution": "Nearest"}}) == (
        'Service "x" is invalid: spec.trafficDistribution: Unsupported value: "Nearest": '
        'supported values: "PreferClose", "PreferSameZone", "PreferSameNode"')


def test_pod_status_ips_one_per_family_and_host_ip_first():
    """validatePodIPs and validateHostIPs past each address: hostIP is hostIPs[0], two IPs at most and
    of two families, none twice; the entries as json.Marshal writes the internal core.PodIP."""
    from nanokube.registry.core_pods import validate_pod_status_update

    def errs(status):
        return [str(e) for e in validate_pod_status_update({"status": status}, {"status": {}})]

    assert errs({"podIP": "10.0.0.1", "podIPs": [{"ip": "10.0.0.1"}, {"ip": "fd00::1"}],
                 "hostIP": "10.1.0.1", "hostIPs": [{"ip": "10.1.0.1"}, {"ip": "fd01::1"}]}) == []
    assert errs({"podIP": "10.0.0.1", "podIPs": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.1"}],
                 "hostIP": "10.1.0.1", "hostIPs": [{"ip": "10.1.0.2"}]}) == [
        'status.podIPs: Invalid value: [{"IP":"10.0.0.1"},{"IP":"10.0.0.1"}]: '
        "may specify no more than one IP for each IP family",
        'status.podIPs[1]: Duplicate value: {"IP":"10.0.0.1"}',
        'status.hostIPs[0].ip: Invalid value: "10.1.0.2": must be equal to `hostIP`']


def test_only_the_old_services_own_ranges_stand():
    """The ranges that stand on update are the old Service's (field or annotation), none else: an
    empty one is still refused when the old Service had no annotation."""
    from nanokube.registry.core_services import validate_service_spec

    spec = {"type": "LoadBalancer", "sessionAffinity": "None", "ports": [{"port": 80, "protocol": "TCP"}]}
    old = {"metadata": {}, "spec": {**spec, "loadBalancerSourceRanges": ["10.0.0.1/8"]}}
    errs = validate_service_spec({**spec, "loadBalancerSourceRanges": [" ", "10.0.0.1/8"]}, {}, old)
    assert [str(e) for e in errs] == [
        'spec.LoadBalancerSourceRanges[0]: Invalid value: "": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)']
