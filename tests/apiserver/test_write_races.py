"""Writes that lose a race with another writer, over HTTP: one that names no precondition is made
again on the newer object for as long as it keeps losing, as upstream's GuaranteedUpdate and
conditionalDelete loop (scripts/race.py found deletes refused with 409 on etcd after five lost
rounds while two clients patched the object); one that names a resourceVersion is refused."""

from __future__ import annotations

import asyncio
import json
import threading

from nanokube.apiserver import turns
from nanokube.store.interface import KV, RevisionMismatch
from nanokube.store.memory import MemoryStore
from nanokube.store.sqlite import SQLiteStore
from tests.apiserver.admission.server import WebhookServer, allow
from tests.controllers import make_stack
from tests.served import send, served

CMS = "/api/v1/namespaces/default/configmaps"
PODS = "/api/v1/namespaces/default/pods"
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
#: more rounds lost in a row than the server used to try
RACES = 8
DEPLOYMENT = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
              "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "d"}},
                       "template": {"metadata": {"labels": {"app": "d"}},
                                    "spec": {"containers": [{"name": "c", "image": "x"}]}}}}


class Racing:
    """A store where another writer rewrites `key` just before each of the next `races` writes to it,
    so that each of them finds the key moved on from the revision it read; `lost` counts those."""

    key = ""
    races = lost = 0

    def race(self, key: str, times: int = RACES) -> None:
        self.key, self.races = key, times

    async def _moved_on(self, key: str) -> None:
        if key == self.key and self.races:
            self.races -= 1
            now = await self.get(key)
            await super().update(key, now.value, now.mod_revision)

    async def update(self, key: str, value: bytes, expected_mod_revision: int, prev: KV | None = None) -> KV:
        await self._moved_on(key)
        try:
            return await super().update(key, value, expected_mod_revision, prev)
        except RevisionMismatch:
            self.lost += key == self.key
            raise

    async def delete(self, key: str, expected_mod_revision: int | None = None, prev: KV | None = None) -> KV:
        await self._moved_on(key)
        return await super().delete(key, expected_mod_revision, prev)


class RacingStore(Racing, MemoryStore):
    pass


def cm(name: str, **md) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, **md}, "data": {"k": "v"}}


async def test_a_delete_that_keeps_losing_races_is_made_on_the_newer_object(tmp_path):
    store = RacingStore()
    async with served(tmp_path, store=store) as (_, api):
        assert (await send(api, "POST", CMS, cm("held", finalizers=["example.com/hold"])))[0] == 201
        assert (await send(api, "POST", CMS, cm("plain")))[0] == 201
        store.race("/registry/configmaps/default/held")
        code, out = await send(api, "DELETE", f"{CMS}/held")
        assert code == 200 and out["metadata"]["deletionTimestamp"] and store.races == 0
        store.race("/registry/configmaps/default/plain")
        code, out = await send(api, "DELETE", f"{CMS}/plain")
        assert code == 200 and store.races == 0
        assert (await send(api, "GET", f"{CMS}/plain"))[0] == 404


async def test_a_binding_that_keeps_losing_races_is_made_on_the_newer_pod(tmp_path):
    store = RacingStore()
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"containers": [{"name": "c", "image": "x"}]}}
    async with served(tmp_path, store=store) as (_, api):
        assert (await send(api, "POST", PODS, pod))[0] == 201
        store.race("/registry/pods/default/p")
        binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"},
                   "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"}}
        code, out = await send(api, "POST", f"{PODS}/p/binding", binding)
        assert code == 201 and store.races == 0
        assert (await send(api, "GET", f"{PODS}/p"))[1]["spec"]["nodeName"] == "n1"


async def test_a_delete_naming_the_resource_version_it_read_is_refused_once_another_write_moved_it(tmp_path):
    store = RacingStore()
    async with served(tmp_path, store=store) as (_, api):
        code, made = await send(api, "POST", CMS, cm("c"))
        store.race("/registry/configmaps/default/c", 1)
        code, out = await send(api, "DELETE", f"{CMS}/c",
                               {"preconditions": {"resourceVersion": made["metadata"]["resourceVersion"]}})
        # (the storage layer's words: the first read passed BeforeDelete's check, the race's winner fails it)
        assert code == 409 and out["message"].startswith(
            'Operation cannot be fulfilled on configmaps "c": StorageError: invalid object, Code: 4, Key: '
            '/registry/configmaps/default/c, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: '
            f'ResourceVersion in precondition: {made["metadata"]["resourceVersion"]}, ResourceVersion in object meta: ')
        assert (await send(api, "GET", f"{CMS}/c"))[0] == 200


async def test_a_scale_update_without_a_resource_version_that_keeps_losing_races_is_made(tmp_path):
    store = RacingStore()
    async with served(tmp_path, store=store) as (_, api):
        assert (await send(api, "POST", DEPLOYMENTS, DEPLOYMENT))[0] == 201
        store.race("/registry/deployments.apps/default/d")
        scale = {"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "d"}, "spec": {"replicas": 4}}
        code, out = await send(api, "PUT", f"{DEPLOYMENTS}/d/scale", scale)
        assert code == 200 and out["spec"]["replicas"] == 4 and store.races == 0
        assert (await send(api, "GET", f"{DEPLOYMENTS}/d"))[1]["spec"]["replicas"] == 4


class FollowedStore(MemoryStore):
    """Another writer rewrites `key` right after the next write to it, before its writer answers,
    replacing `old` with `new` in its bytes."""

    key = ""
    old = new = b""

    def follow(self, key: str, old: bytes, new: bytes) -> None:
        self.key, self.old, self.new = key, old, new

    async def update(self, key: str, value: bytes, expected_mod_revision: int, prev: KV | None = None) -> KV:
        kv = await super().update(key, value, expected_mod_revision, prev)
        if key == self.key:
            self.key = ""
            await super().update(key, value.replace(self.old, self.new), kv.mod_revision)
        return kv


async def test_a_scale_update_answers_the_scale_it_wrote_not_a_later_one(tmp_path):
    store = FollowedStore()
    async with served(tmp_path, store=store) as (_, api):
        assert (await send(api, "POST", DEPLOYMENTS, DEPLOYMENT))[0] == 201
        store.follow("/registry/deployments.apps/default/d", b'"replicas":4', b'"replicas":7')
        scale = {"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "d"}, "spec": {"replicas": 4}}
        code, out = await send(api, "PUT", f"{DEPLOYMENTS}/d/scale", scale)
        now = (await send(api, "GET", f"{DEPLOYMENTS}/d"))[1]
        assert now["spec"]["replicas"] == 7  # the later write
        assert code == 200 and out["spec"]["replicas"] == 4 and int(out["metadata"]["resourceVersion"]) == int(now["metadata"]["resourceVersion"]) - 1


async def test_a_graceful_delete_answers_the_object_it_wrote_not_a_later_one(tmp_path):
    store = FollowedStore()
    async with served(tmp_path, store=store) as (_, api):
        assert (await send(api, "POST", CMS, cm("held", finalizers=["example.com/hold"])))[0] == 201
        store.follow("/registry/configmaps/default/held", b'"data":{"k":"v"}', b'"data":{"k":"later"}')
        code, out = await send(api, "DELETE", f"{CMS}/held")
        now = (await send(api, "GET", f"{CMS}/held"))[1]
        assert now["data"] == {"k": "later"} and now["metadata"]["deletionTimestamp"]
        assert code == 200 and out["data"] == {"k": "v"} and out["metadata"]["deletionTimestamp"]
        assert int(out["metadata"]["resourceVersion"]) == int(now["metadata"]["resourceVersion"]) - 1


async def test_a_write_answered_as_a_table_shows_the_object_it_wrote_not_a_later_one(tmp_path):
    """kubectl asks for a Table on apply, edit, scale ...: its cells are the write's object's, as
    upstream's transformResponseObject renders it, not the cache's (here already the later write's)."""
    store = FollowedStore()
    async with served(tmp_path, store=store) as (_, api):
        assert (await send(api, "POST", CMS, cm("c")))[0] == 201
        store.follow("/registry/configmaps/default/c", b'"data":{"k":"v"}', b'"data":{"k":"v","k2":"v"}')

        def patched():
            r = api.rest_client.pool_manager.request(
                "PATCH", f"{api.configuration.host}{CMS}/c", body=json.dumps({"metadata": {"labels": {"a": "b"}}}),
                headers={"Content-Type": "application/merge-patch+json",
                         "Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
            return r.status, json.loads(r.data)
        code, table = await asyncio.to_thread(patched)
        now = (await send(api, "GET", f"{CMS}/c"))[1]
        assert len(now["data"]) == 2  # the later write
        names = [c["name"] for c in table["columnDefinitions"]]
        assert code == 200 and table["rows"][0]["cells"][names.index("Data")] == 1


class RacingSQLite(Racing, SQLiteStore):
    pass


async def test_patches_that_lost_a_race_take_turns_instead_of_losing_to_each_other_again(tmp_path):
    """Eight patches of one object each lose their first try; then each tries again in its turn and
    wins, instead of all eight trying again at once and seven losing again, then six, ... (SQLite: a
    write waits for its commit, so each retry reads the object before the others' writes land)."""
    store = RacingSQLite(str(tmp_path / "db.sqlite"))
    stack = await make_stack(store=store)
    cms = stack.client.resource("", "v1", "configmaps")
    await cms.create({"metadata": {"name": "c", "namespace": "default"}, "data": {}})
    store.race("/registry/configmaps/default/c", 8)
    await asyncio.gather(*(cms.patch("c", {"data": {f"k{i}": "v"}}, namespace="default") for i in range(8)))
    assert (await cms.get("c", "default"))["data"] == {f"k{i}": "v" for i in range(8)}
    assert store.lost == 8 and stack.rest.turns._keys == {}
    await stack.cache.stop()
    await store.close()


async def test_a_webhook_that_writes_the_object_it_admits_does_not_wait_for_the_turn_of_the_write(monkeypatch):
    """A write sets its turn aside while a webhook answers: a mutating webhook that itself writes the
    object (its first call makes the write lose a round, so the write holds the turn at the second)
    writes at once, instead of waiting for that turn (WAIT, made an hour here, then the webhook's
    timeout: the write failed)."""
    monkeypatch.setattr(turns, "WAIT", 3600.0)
    loop = asyncio.get_running_loop()
    stack = await make_stack()
    cms = stack.client.resource("", "v1", "configmaps")
    await cms.create({"metadata": {"name": "c", "namespace": "default"}, "data": {"k": "v"}})
    calls: list[int] = []

    def hooked(review):
        calls.append(1)
        if len(calls) <= 2:
            label = {"metadata": {"labels": {f"hook{len(calls)}": "y"}}}
            asyncio.run_coroutine_threadsafe(cms.patch("c", label, namespace="default"), loop).result(30)
        return allow(review)

    server = WebhookServer().start()
    try:
        server.handlers["/w"] = hooked
        await stack.client.resource("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations").create(
            {"metadata": {"name": "w"}, "webhooks": [{
                "name": "w.example.com", "clientConfig": {"url": server.url("/w"), "caBundle": server.ca.bundle},
                "rules": [{"operations": ["UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}],
                "sideEffects": "None", "admissionReviewVersions": ["v1"], "timeoutSeconds": 10,
                # the write admitted, not the webhook's own
                "matchConditions": [{"name": "outer", "expression": "object.data.k == 'outer'"}]}]})
        await cms.patch("c", {"data": {"k": "outer"}}, namespace="default")
        got = await cms.get("c", "default")
        assert got["data"] == {"k": "outer"} and got["metadata"]["labels"] == {"hook1": "y", "hook2": "y"}
        assert len(calls) == 3 and stack.rest.turns._keys == {}
    finally:
        server.stop()
        await stack.close()


async def _mutating_webhook(stack, server: WebhookServer, condition: str) -> None:
    await stack.client.resource("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations").create(
        {"metadata": {"name": "w"}, "webhooks": [{
            "name": "w.example.com", "clientConfig": {"url": server.url("/w"), "caBundle": server.ca.bundle},
            "rules": [{"operations": ["UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}],
            "sideEffects": "None", "admissionReviewVersions": ["v1"], "timeoutSeconds": 30,
            "matchConditions": [{"name": "only", "expression": condition}]}]})


async def test_a_slow_webhook_of_one_write_does_not_hold_another_write_of_the_object(monkeypatch):
    """A patch that lost a race holds its object's turn for its next try; while a webhook is slow to
    admit that try, another patch of the object (which no webhook sees) is made, instead of waiting
    for the turn until the webhook answers (WAIT, made an hour here, bounded that wait). The slow one
    then loses to it and is made on its object."""
    monkeypatch.setattr(turns, "WAIT", 3600.0)
    loop = asyncio.get_running_loop()
    store = RacingStore()
    stack = await make_stack(store=store)
    cms = stack.client.resource("", "v1", "configmaps")
    await cms.create({"metadata": {"name": "c", "namespace": "default"}, "data": {"k": "v"}})
    calls: list[int] = []
    entered, release = threading.Event(), threading.Event()

    def slow(review):
        calls.append(1)
        if len(calls) == 2:  # the try after the lost round, made holding the turn
            entered.set()
            release.wait(30)
        return allow(review)

    server = WebhookServer().start()
    try:
        server.handlers["/w"] = slow
        await _mutating_webhook(stack, server, "object.data.k == 'slow'")
        store.race("/registry/configmaps/default/c", 1)
        first = asyncio.ensure_future(cms.patch("c", {"data": {"k": "slow"}}, namespace="default"))
        assert await loop.run_in_executor(None, entered.wait, 30)
        other = await asyncio.wait_for(cms.patch("c", {"data": {"b": "1"}}, namespace="default"), 10)
        assert other["data"] == {"k": "v", "b": "1"} and not first.done()
        release.set()
        assert (await asyncio.wait_for(first, 30))["data"] == {"k": "slow", "b": "1"}
        assert len(calls) == 3 and stack.rest.turns._keys == {}
    finally:
        release.set()
        server.stop()
        await stack.close()
