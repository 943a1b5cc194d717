"""Services when a range is exhausted, through the official client against an in-process API server
whose service CIDR and node port range are small: a value to be picked from a full range is
kube-apiserver's 500 InternalError ("failed to allocate a serviceIP/nodePort: range is full"),
a value asked for by name that is taken stays a 422 on its field, and nothing is created."""

from __future__ import annotations

import asyncio
import json

import pytest
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from nanokube.apiserver.app import APIServer
from nanokube.pki.ca import ensure_pki
from nanokube.pki.kubeconfig import write_kubeconfig
from nanokube.registry.core_services import NodePortAllocator, ServiceIPAllocator
from nanokube.store.memory import MemoryStore
from tests.controllers import tries


@pytest.fixture
async def core(tmp_path):
    pki = ensure_pki(str(tmp_path))
    server = APIServer(MemoryStore(), pki, port=0)
    strategy = server.index.get("", "v1", "services").strategy
    whole = strategy.ips, strategy.node_ports
    # the server's own Service strategy: the kubernetes Service takes 10.96.0.1, five addresses are left
    strategy.ips, strategy.node_ports = ServiceIPAllocator("10.96.0.0/29"), NodePortAllocator("30000-30002")
    try:
        await server.start()
        kubeconfig = str(tmp_path / "kubeconfig")
        write_kubeconfig(kubeconfig, server.url, pki)
        api = client.CoreV1Api(config.new_client_from_config(config_file=kubeconfig))
        for _ in tries():  # the kubernetes Service holds the range's first address before the test takes any
            if await _names(api) == {"kubernetes"}:
                break
            await asyncio.sleep(0.01)
        yield api
        api.api_client.close()
    finally:
        await server.stop()
        strategy.ips, strategy.node_ports = whole


def _service(name: str, **spec) -> dict:
    return {"metadata": {"name": name}, "spec": {"ports": [{"port": 80}], **spec}}


async def _create(api, body: dict):
    return await asyncio.to_thread(api.create_namespaced_service, "default", body)


async def _refused(api, body: dict) -> tuple[int, dict]:
    with pytest.raises(ApiException) as e:
        await _create(api, body)
    return e.value.status, json.loads(e.value.body)


async def _names(api) -> set[str]:
    return {s.metadata.name for s in (await asyncio.to_thread(api.list_namespaced_service, "default")).items}


async def test_a_cluster_ip_from_a_full_range_is_an_internal_error(core):
    made = [await _create(core, _service(f"s{i}")) for i in range(5)]
    assert sorted(s.spec.cluster_ip for s in made) == [f"10.96.0.{i}" for i in range(2, 7)]
    code, status = await _refused(core, _service("one-more"))
    assert (code, status["reason"], status["message"], status["details"]) == (
        500, "InternalError", "Internal error occurred: failed to allocate a serviceIP: range is full",
        {"causes": [{"message": "failed to allocate a serviceIP: range is full"}]})
    # by name, a taken address stays the field's 422; the allocation runs before validation
    # (Store.BeginCreate, then BeforeCreate), so an invalid name meets the full range first
    code, status = await _refused(core, _service("wants-2", clusterIP="10.96.0.2"))
    assert (code, status["message"]) == (422, 'Service "wants-2" is invalid: spec.clusterIPs: Invalid value: '
                                              '["10.96.0.2"]: failed to allocate IP 10.96.0.2: provided IP is already allocated')
    code, status = await _refused(core, _service("Not_A_Label"))
    assert (code, status["reason"]) == (500, "InternalError"), status
    # headless needs no address
    assert (await _create(core, _service("headless", clusterIP="None"))).spec.cluster_ip == "None"
    assert await _names(core) == {"kubernetes", "headless", *(f"s{i}" for i in range(5))}
    await asyncio.to_thread(core.delete_namespaced_service, "s0", "default")
    assert (await _create(core, _service("one-more"))).spec.cluster_ip == made[0].spec.cluster_ip


async def test_a_node_port_from_a_full_range_is_an_internal_error(core):
    made = await _create(core, _service("three", type="NodePort", ports=[
        {"name": f"p{i}", "port": 80 + i} for i in range(3)]))
    assert sorted(p.node_port for p in made.spec.ports) == [30000, 30001, 30002]
    code, status = await _refused(core, _service("one-more", type="NodePort"))
    assert (code, status["reason"], status["message"]) == (
        500, "InternalError", "Internal error occurred: failed to allocate a nodePort: range is full")
    code, status = await _refused(core, _service("wants-30001", type="NodePort", ports=[{"port": 80, "nodePort": 30001}]))
    assert (code, status["message"]) == (422, 'Service "wants-30001" is invalid: spec.ports[0].nodePort: '
                                              'Invalid value: 30001: provided port is already allocated')
    # a LoadBalancer that allocates no node ports needs none; its ClusterIP is not kept by the refusals above
    lb = await _create(core, _service("lb", type="LoadBalancer", allocateLoadBalancerNodePorts=False))
    assert lb.spec.ports[0].node_port is None
    assert await _names(core) == {"kubernetes", "three", "lb"}
    # a ClusterIP Service turned NodePort by an update is refused the same way, and keeps what it had
    plain = await _create(core, _service("plain"))
    with pytest.raises(ApiException) as e:
        await asyncio.to_thread(core.patch_namespaced_service, "plain", "default", {"spec": {"type": "NodePort"}})
    assert (e.value.status, json.loads(e.value.body)["message"]) == (
        500, "Internal error occurred: failed to allocate a nodePort: range is full")
    got = await asyncio.to_thread(core.read_namespaced_service, "plain", "default")
    assert (got.spec.type, got.spec.cluster_ip) == ("ClusterIP", plain.spec.cluster_ip)
