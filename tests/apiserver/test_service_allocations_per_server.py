"""A server's ClusterIP and node port allocations are its own: another server in the same process
(a test's, an operator author's) neither takes nor forgets them."""

from __future__ import annotations

import asyncio

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.controllers import make_stack
from tests.served import served


def _service(name: str) -> dict:
    return {"metadata": {"name": name, "namespace": "default"},
            "spec": {"type": "NodePort", "clusterIP": "10.96.0.20", "ports": [{"port": 80, "nodePort": 30020}]}}


async def _create(api: client.ApiClient, name: str) -> client.V1Service:
    return await asyncio.to_thread(client.CoreV1Api(api).create_namespaced_service, "default", _service(name))


async def test_two_servers_in_one_process_each_give_the_same_explicit_cluster_ip(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    async with served(tmp_path / "a") as (_, a):
        assert (await _create(a, "web")).spec.cluster_ip == "10.96.0.20"
        async with served(tmp_path / "b") as (_, b):
            # the second server's start read its own (empty) store: the first's Service still holds its address
            with pytest.raises(ApiException) as e:
                await _create(a, "other")
            assert e.value.status == 422 and "10.96.0.20" in e.value.body
            made = await _create(b, "web")
            assert (made.spec.cluster_ip, made.spec.ports[0].node_port) == ("10.96.0.20", 30020)
    async with served(tmp_path / "a") as (_, again):  # one started after them, as a later test's
        assert (await _create(again, "web")).spec.cluster_ip == "10.96.0.20"


async def test_a_stack_left_with_a_service_does_not_hold_its_address_for_the_next():
    """A test's stack closed with its Service still there (as one that fails midway leaves it)."""
    for _ in range(2):
        s = await make_stack()
        made = await s.client.resource("", "v1", "services").create(_service("web"))
        assert made["spec"]["clusterIP"] == "10.96.0.20"
        await s.close()
