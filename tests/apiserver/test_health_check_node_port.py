"""spec.healthCheckNodePort through the official client against an in-process API server whose node
port range is small (30000-30004): kube-apiserver allocates one to a LoadBalancer Service with
externalTrafficPolicy Local (and to no other), keeps one asked for by number, frees it when the
Service no longer needs it or is deleted, and refuses to change it; a port it cannot allocate is
its 500 InternalError ("failed to allocate requested HealthCheck NodePort N: ...", or "... a
HealthCheck NodePort 0: range is full"), as upstream's alloc.go wraps it. A refused or dry-run
update frees nothing; a type change drops the fields the new type does not use."""

from __future__ import annotations

import asyncio
import json

import pytest
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from nanokube.apiserver.app import APIServer
from nanokube.pki.ca import ensure_pki
from nanokube.pki.kubeconfig import write_kubeconfig
from nanokube.registry.core_services import NodePortAllocator
from nanokube.store.memory import MemoryStore

RANGE = set(range(30000, 30005))


@pytest.fixture
async def core(tmp_path):
    pki = ensure_pki(str(tmp_path))
    server = APIServer(MemoryStore(), pki, port=0)
    strategy = server.index.get("", "v1", "services").strategy
    whole = strategy.node_ports
    strategy.node_ports = NodePortAllocator("30000-30004")  # the server's own Service strategy
    try:
        await server.start()
        kubeconfig = str(tmp_path / "kubeconfig")
        write_kubeconfig(kubeconfig, server.url, pki)
        api = client.CoreV1Api(config.new_client_from_config(config_file=kubeconfig))
        yield api
        api.api_client.close()
    finally:
        await server.stop()
        strategy.node_ports = whole


def _lb(name: str, ports: int | list = 1, **spec) -> dict:
    ports = ports if isinstance(ports, list) else [{"name": f"p{i}", "port": 80 + i} for i in range(ports)]
    spec = {"type": "LoadBalancer", "externalTrafficPolicy": "Local", "ports": ports, **spec}
    return {"metadata": {"name": name}, "spec": spec}


async def _call(api, method: str, *args, **kwargs):
    return await asyncio.to_thread(getattr(api, method), *args, **kwargs)


async def _create(api, body: dict):
    return await _call(api, "create_namespaced_service", "default", body)


async def _refused(coro) -> tuple[int, str]:
    with pytest.raises(ApiException) as e:
        await coro
    return e.value.status, json.loads(e.value.body)["message"]


def _held(svc) -> set[int]:
    return {p.node_port for p in svc.spec.ports if p.node_port} | (
        {svc.spec.health_check_node_port} if svc.spec.health_check_node_port else set())


async def test_only_a_local_load_balancer_gets_one_and_keeps_one_asked_for(core):
    lb = await _create(core, _lb("lb"))
    hc = lb.spec.health_check_node_port
    assert hc in RANGE and hc != lb.spec.ports[0].node_port
    for name, spec in [("cluster", {"externalTrafficPolicy": "Cluster"}), ("np", {"type": "NodePort"}),
                       ("plain", {"type": "ClusterIP", "externalTrafficPolicy": None})]:
        made = await _create(core, _lb(name, **spec))
        assert made.spec.health_check_node_port is None, name
    await _call(core, "delete_namespaced_service", "np", "default")
    await _call(core, "delete_namespaced_service", "cluster", "default")
    free = sorted(RANGE - _held(lb))
    asked = await _create(core, _lb("asked", allocateLoadBalancerNodePorts=False, healthCheckNodePort=free[0]))
    assert (asked.spec.health_check_node_port, asked.spec.ports[0].node_port) == (free[0], None)
    got = await _call(core, "read_namespaced_service", "asked", "default")
    assert got.spec.health_check_node_port == free[0]


async def test_a_port_it_cannot_have_is_an_internal_error_and_nothing_is_kept(core):
    lb = await _create(core, _lb("lb"))
    taken = lb.spec.ports[0].node_port
    prefix = "Internal error occurred: failed to allocate requested HealthCheck NodePort"
    for value, problem in [(taken, "provided port is already allocated"), (lb.spec.health_check_node_port,
                           "provided port is already allocated"),
                           (31000, "provided port is not in the valid range. The range of valid ports is 30000-30004")]:
        code, message = await _refused(_create(core, _lb("wants", healthCheckNodePort=value)))
        assert (code, message) == (500, f"{prefix} {value}: {problem}")
    # one of its own node ports (asked for, or picked before it) is taken too
    mine = min(RANGE - _held(lb))
    code, message = await _refused(_create(core, _lb("own", ports=[{"port": 80, "nodePort": mine}],
                                                     healthCheckNodePort=mine)))
    assert (code, message) == (500, f"{prefix} {mine}: provided port is already allocated")
    # nothing the refused Services were given is kept: the three free ports go to one that needs them all
    assert len(RANGE - _held(lb)) == 3
    two = await _create(core, _lb("two", ports=2))
    assert _held(two) == RANGE - _held(lb)


async def test_a_full_range_is_an_internal_error(core):
    await _create(core, _lb("three", ports=3))  # three node ports and a health check port: one is left
    code, message = await _refused(_create(core, _lb("one-more")))  # its node port takes the last one
    assert (code, message) == (500, "Internal error occurred: failed to allocate a HealthCheck NodePort 0: range is full")
    code, message = await _refused(_create(core, _lb("two-more", ports=2)))
    assert (code, message) == (500, "Internal error occurred: failed to allocate a nodePort: range is full")
    # neither kept what it was given: the last port goes to the health check of one without node ports
    last = await _create(core, _lb("no-node-ports", allocateLoadBalancerNodePorts=False))
    assert last.spec.health_check_node_port in RANGE
    assert {s.metadata.name for s in (await _call(core, "list_namespaced_service", "default")).items} - {
        "kubernetes"} == {"three", "no-node-ports"}


async def test_validation(core):
    prefix = 'Service "bad" is invalid: spec.healthCheckNodePort: Invalid value: 30001: '
    for spec in [{"externalTrafficPolicy": "Cluster"}, {"type": "NodePort"}]:
        code, message = await _refused(_create(core, _lb("bad", healthCheckNodePort=30001, **spec)))
        assert (code, message) == (422, prefix + "may only be set when `type` is 'LoadBalancer' and "
                                         "`externalTrafficPolicy` is 'Local'"), spec
    # where it is needed, upstream's allocator sees a port out of range before validation does
    for port in (-1, 70000):
        code, message = await _refused(_create(core, _lb("bad", healthCheckNodePort=port)))
        assert (code, message) == (500, f"Internal error occurred: failed to allocate requested HealthCheck NodePort "
                                        f"{port}: provided port is not in the valid range. The range of valid ports "
                                        "is 30000-30004")


async def test_updates_keep_it_free_it_and_never_change_it(core):
    lb = await _create(core, _lb("lb", allocateLoadBalancerNodePorts=False))
    hc = lb.spec.health_check_node_port
    patch = lambda body: _call(core, "patch_namespaced_service", "lb", "default", body)  # noqa: E731
    # a replace that leaves it out keeps it (upstream's patchAllocatedValues); another value is refused
    got = await _call(core, "read_namespaced_service", "lb", "default")
    got.spec.health_check_node_port = None
    assert (await _call(core, "replace_namespaced_service", "lb", "default", got)).spec.health_check_node_port == hc
    other = min(RANGE - {hc})
    code, message = await _refused(patch({"spec": {"healthCheckNodePort": other}}))
    assert (code, message) == (422, 'Service "lb" is invalid: spec.healthCheckNodePort: Forbidden: field is immutable')
    # policy Cluster: dropped and freed, so another Service may ask for it
    assert (await patch({"spec": {"externalTrafficPolicy": "Cluster"}})).spec.health_check_node_port is None
    taker = await _create(core, _lb("taker", allocateLoadBalancerNodePorts=False, healthCheckNodePort=hc))
    assert taker.spec.health_check_node_port == hc
    # Local again: a new one, or the one asked for (not a taken one)
    code, message = await _refused(patch({"spec": {"externalTrafficPolicy": "Local", "healthCheckNodePort": hc}}))
    assert (code, message) == (500, f"Internal error occurred: failed to allocate requested HealthCheck NodePort "
                                    f"{hc}: provided port is already allocated")
    again = await patch({"spec": {"externalTrafficPolicy": "Local"}})
    assert again.spec.health_check_node_port in RANGE - {hc}
    # type NodePort: dropped and freed too; the delete frees the taker's
    dropped = await patch({"spec": {"type": "NodePort", "allocateLoadBalancerNodePorts": None}})
    assert dropped.spec.health_check_node_port is None
    await _call(core, "delete_namespaced_service", "taker", "default")
    for name, port in [("a", hc), ("b", again.spec.health_check_node_port)]:
        made = await _create(core, _lb(name, allocateLoadBalancerNodePorts=False, healthCheckNodePort=port))
        assert made.spec.health_check_node_port == port


async def test_a_refused_or_dry_run_update_leaves_the_service_what_it_holds(core):
    await _create(core, _lb("lb", ports=[{"port": 80, "nodePort": 30000}], healthCheckNodePort=30001))
    await _create(core, _lb("np", type="NodePort", ports=[{"port": 80, "nodePort": 30002}]))
    to_cluster_ip = {"spec": {"type": "ClusterIP", "externalTrafficPolicy": None, "allocateLoadBalancerNodePorts": None,
                              "ports": [{"port": 80, "nodePort": None}]}}
    refused = {"metadata": {"labels": {"not a key!": "x"}}}
    # a dry run, and an update refused after its values were prepared: both frees nothing (before, both did)
    changed = await _call(core, "patch_namespaced_service", "lb", "default", to_cluster_ip, dry_run="All")
    assert (changed.spec.type, changed.spec.health_check_node_port) == ("ClusterIP", None)
    code, _ = await _refused(_call(core, "patch_namespaced_service", "lb", "default", {**to_cluster_ip, **refused}))
    assert code == 422
    code, message = await _refused(_create(core, _lb("wants", ports=[{"port": 80, "nodePort": 30000}])))
    assert (code, message) == (422, 'Service "wants" is invalid: spec.ports[0].nodePort: Invalid value: 30000: '
                                    "provided port is already allocated")
    code, message = await _refused(_create(core, _lb("wants", allocateLoadBalancerNodePorts=False,
                                                     healthCheckNodePort=30001)))
    assert (code, message) == (500, "Internal error occurred: failed to allocate requested HealthCheck NodePort "
                                    "30001: provided port is already allocated")
    # nor keeps what it was given: NodePort to a Local LoadBalancer picks a health check port, refused
    code, _ = await _refused(_call(core, "patch_namespaced_service", "np", "default", {
        "spec": {"type": "LoadBalancer", "externalTrafficPolicy": "Local"}, **refused}))
    assert code == 422
    two = await _create(core, _lb("two", ports=2, externalTrafficPolicy="Cluster"))
    assert {p.node_port for p in two.spec.ports} == {30003, 30004}
    got = await _call(core, "read_namespaced_service", "lb", "default")
    assert (got.spec.type, got.spec.ports[0].node_port, got.spec.health_check_node_port) == ("LoadBalancer", 30000, 30001)


async def test_a_type_change_drops_what_the_new_type_does_not_use(core):
    """Upstream's dropTypeDependentFields: `kubectl patch -p '{"spec":{"type":...}}'` alone changes the type."""
    await _create(core, _lb("lb", loadBalancerClass="example.com/lb"))
    patch = lambda spec: _call(core, "patch_namespaced_service", "lb", "default", {"spec": spec})  # noqa: E731
    np = await patch({"type": "NodePort"})
    assert (np.spec.health_check_node_port, np.spec.allocate_load_balancer_node_ports, np.spec.load_balancer_class,
            np.spec.external_traffic_policy, np.spec.ports[0].node_port in RANGE) == (None, None, None, "Local", True)
    plain = await patch({"type": "ClusterIP"})
    assert (plain.spec.external_traffic_policy, plain.spec.ports[0].node_port) == (None, None)
    # a field the client changed along with the type is not dropped: validation sees it
    await patch({"type": "NodePort", "externalTrafficPolicy": "Cluster"})
    code, message = await _refused(patch({"type": "ClusterIP", "externalTrafficPolicy": "Local"}))
    assert (code, message) == (422, 'Service "lb" is invalid: spec.externalTrafficPolicy: Invalid value: "Local": '
                                    "may only be set for externally-accessible services")
