"""Server-side apply of an object that does not exist yet, raced: upstream's patch handler applies
through Store.Update with forceAllowCreate, inside GuaranteedUpdate, so an apply whose create finds
the name taken is applied again to the object another client just made. Neither client sees 409
AlreadyExists; the object ends up with both managers' fields. Served from etcd, whose create is a
round trip: a second apply reads the watch cache before the first create is in it."""

from __future__ import annotations

import asyncio
import json
import uuid

from nanokube.store.etcd import EtcdStore
from tests.served import served


def apply(api_client, path: str, body: dict, manager: str) -> tuple[int, dict]:
    request = api_client.param_serialize("PATCH", path, query_params=[("fieldManager", manager)],
                                         body=json.dumps(body),
                                         header_params={"Content-Type": "application/apply-patch+yaml",
                                                        "Accept": "application/json"})
    response = api_client.call_api(*request[:4])
    response.read()
    return response.status, json.loads(response.data)


def config_map(name: str, key: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": {key: "yes"}},
            "data": {key: key}}


async def test_concurrent_applies_of_a_new_object_both_succeed(tmp_path, etcd_server):
    async with served(tmp_path, store=EtcdStore([etcd_server.endpoint])) as (_, api_client):
        base = "/api/v1/namespaces/default/configmaps"
        names = [f"raced-{uuid.uuid4().hex[:8]}-{i}" for i in range(16)]  # the etcd server is the session's
        start = asyncio.Event()

        async def applier(name: str, manager: str) -> tuple[int, dict]:
            await start.wait()
            return await asyncio.to_thread(apply, api_client, f"{base}/{name}", config_map(name, manager), manager)

        tasks = [asyncio.create_task(applier(n, m)) for n in names for m in ("alpha", "beta")]
        start.set()
        answers = await asyncio.gather(*tasks)
        assert [(code, body.get("reason")) for code, body in answers if code not in (200, 201)] == []
        for name in names:
            codes = sorted(code for code, body in answers if body["metadata"]["name"] == name)
            assert codes == [200, 201]  # one created it, the other applied to what it created
            _, stored = await asyncio.to_thread(apply, api_client, f"{base}/{name}", config_map(name, "alpha"), "alpha")
            assert stored["data"] == {"alpha": "alpha", "beta": "beta"}
            assert stored["metadata"]["labels"] == {"alpha": "yes", "beta": "yes"}
            assert {(e["manager"], e["operation"]) for e in stored["metadata"]["managedFields"]} == {
                ("alpha", "Apply"), ("beta", "Apply")}


def put(api_client, path: str, body: dict) -> tuple[int, dict]:
    request = api_client.param_serialize("PUT", path, body=body, header_params={"Content-Type": "application/json",
                                                                               "Accept": "application/json"})
    response = api_client.call_api(*request[:4])
    response.read()
    return response.status, json.loads(response.data)


async def test_concurrent_puts_creating_a_lease_both_succeed(tmp_path, etcd_server):
    """A kind created on update (Lease: AllowCreateOnUpdate): a PUT whose create finds the name taken is an
    update of the Lease another client just made, as Store.Update's GuaranteedUpdate retries it; without a
    resourceVersion (AllowUnconditionalUpdate) it applies. Neither client sees 409 AlreadyExists."""
    async with served(tmp_path, store=EtcdStore([etcd_server.endpoint])) as (_, api_client):
        base = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
        names = [f"raced-{uuid.uuid4().hex[:8]}-{i}" for i in range(16)]
        start = asyncio.Event()

        async def holder(name: str, who: str) -> tuple[int, dict]:
            await start.wait()
            return await asyncio.to_thread(put, api_client, f"{base}/{name}", {
                "apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name},
                "spec": {"holderIdentity": who, "leaseDurationSeconds": 15}})

        tasks = [asyncio.create_task(holder(n, w)) for n in names for w in ("alpha", "beta")]
        start.set()
        answers = await asyncio.gather(*tasks)
        assert [(code, body.get("reason")) for code, body in answers if code not in (200, 201)] == []
        for name in names:
            mine = [(code, body) for code, body in answers if body["metadata"]["name"] == name]
            assert sorted(code for code, _ in mine) == [200, 201]
            created = next(body for code, body in mine if code == 201)
            updated = next(body for code, body in mine if code == 200)
            assert updated["metadata"]["uid"] == created["metadata"]["uid"]  # the one Lease, updated
            assert int(updated["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
