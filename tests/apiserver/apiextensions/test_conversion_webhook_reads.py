"""A custom resource converted by a webhook, over HTTP as an operator's tests drive it: the fields a
write at a non-storage version manages are recorded in that version's shape (upstream's field
manager works on the object as the request's version has it), and every read asks the webhook
again, so a webhook that is redeployed, or goes down, is seen at once as on kube-apiserver."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from kubernetes.client.rest import ApiException

from tests.apiserver.admission.server import WebhookServer
from tests.apiserver.apiextensions import lines_until, open_watch
from tests.apiserver.apiextensions.test_conversion_pruning import create_when_served
from tests.apiserver.test_rest_managedfields import call
from tests.served import served

GROUP = "convreads.example.com"
KUBECTL = str(Path(sys.executable).parent / "kubectl")
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
SCHEMAS = {  # the storage version v1 calls the field size, v2 calls it sizeV2
    "v1": {"type": "object", "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}},
    "v2": {"type": "object", "properties": {"spec": {"type": "object", "properties": {"sizeV2": {"type": "integer"}}}}},
}


def converter(factor: int = 1):
    """A conversion webhook renaming size <-> sizeV2; towards v2 the value is multiplied by `factor`."""
    def review(body: dict) -> dict:
        req = body["request"]
        want = req["desiredAPIVersion"]
        out = []
        for o in req["objects"]:
            spec = dict(o.get("spec") or {})
            if want.endswith("/v2") and "size" in spec:
                spec["sizeV2"] = spec.pop("size") * factor
            elif want.endswith("/v1") and "sizeV2" in spec:
                spec["size"] = spec.pop("sizeV2")
            out.append({**o, "apiVersion": want, "spec": spec})
        return {"apiVersion": body["apiVersion"], "kind": "ConversionReview",
                "response": {"uid": req["uid"], "result": {"status": "Success"}, "convertedObjects": out}}
    return review


def crd(hook: WebhookServer, plural: str, kind: str, versions: list[dict]) -> dict:
    """A namespaced CRD of GROUP whose versions `hook`'s /convert converts."""
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{GROUP}"},
            "spec": {"group": GROUP, "scope": "Namespaced", "names": {"plural": plural, "kind": kind},
                     "versions": versions, "conversion": {"strategy": "Webhook", "webhook": {
                         "conversionReviewVersions": ["v1"],
                         "clientConfig": {"url": hook.url("/convert"), "caBundle": hook.ca.bundle}}}}}


@contextlib.asynccontextmanager
async def serving(tmp_path, plural: str, kind: str, versions: list[dict]):
    """(webhook, client) of an API server with a CRD that `converter()` converts."""
    hook = WebhookServer().start()
    hook.handlers["/convert"] = converter()
    try:
        async with served(tmp_path) as (_, c):
            await call(c, "POST", CRDS, crd(hook, plural, kind, versions))
            yield hook, c
    finally:
        hook.stop()


@pytest.fixture
async def boxes(tmp_path):
    async with serving(tmp_path, "boxes", "Box", [{"name": v, "served": True, "storage": v == "v1",
                                                   "schema": {"openAPIV3Schema": s}} for v, s in SCHEMAS.items()]) as x:
        yield x


def _fields(obj: dict) -> list[tuple[str, str, str, dict]]:
    return [(m["manager"], m["operation"], m["apiVersion"], m["fieldsV1"]) for m in obj["metadata"]["managedFields"]]


async def test_fields_written_at_a_non_storage_version_are_managed_in_its_shape(boxes):
    _, c = boxes
    v2 = f"/apis/{GROUP}/v2/namespaces/default/boxes"
    body = {"apiVersion": f"{GROUP}/v2", "kind": "Box", "metadata": {"name": "b"}, "spec": {"sizeV2": 3}}
    created = await create_when_served(c, f"{v2}?fieldManager=maker", body)
    assert created["spec"] == {"sizeV2": 3}
    assert _fields(created) == [("maker", "Update", f"{GROUP}/v2", {"f:spec": {"f:sizeV2": {}}})]
    updated = await call(c, "PUT", f"{v2}/b", {**created, "metadata": {**created["metadata"], "labels": {"a": "b"}},
                                               "spec": {"sizeV2": 4}}, manager="changer")
    assert updated["spec"] == {"sizeV2": 4}
    assert _fields(updated) == [  # maker's only field is changer's now
        ("changer", "Update", f"{GROUP}/v2", {"f:metadata": {"f:labels": {".": {}, "f:a": {}}},
                                              "f:spec": {"f:sizeV2": {}}})]


async def test_every_read_asks_the_webhook_again(boxes):
    hook, c = boxes
    v1, v2 = (f"/apis/{GROUP}/{v}/namespaces/default/boxes" for v in ("v1", "v2"))
    await create_when_served(c, v1, {"apiVersion": f"{GROUP}/v1", "kind": "Box", "metadata": {"name": "b"},
                                     "spec": {"size": 3}})
    assert (await call(c, "GET", f"{v2}/b"))["spec"] == {"sizeV2": 3}
    hook.handlers["/convert"] = converter(factor=10)  # a new release of the webhook
    assert (await call(c, "GET", f"{v2}/b"))["spec"] == {"sizeV2": 30}
    assert [o["spec"] for o in (await call(c, "GET", v2))["items"]] == [{"sizeV2": 30}]
    hook.handlers["/convert"] = lambda body: {
        "apiVersion": body["apiVersion"], "kind": "ConversionReview",
        "response": {"uid": body["request"]["uid"], "result": {"status": "Failure", "message": "down for repair"}}}
    with pytest.raises(ApiException) as e:
        await call(c, "GET", f"{v2}/b")
    assert e.value.status == 500
    assert f"conversion webhook for {GROUP}/v1, Kind=Box failed: down for repair" in e.value.body
    assert (await call(c, "GET", f"{v1}/b"))["spec"] == {"size": 3}  # the storage version needs no webhook
    # a delete reads the object at its version too (Store.Delete's Get), so it fails alike, dry run or not
    for query in ("?dryRun=All", ""):
        with pytest.raises(ApiException) as e:
            await call(c, "DELETE", f"{v2}/b{query}")
        assert e.value.status == 500 and "failed: down for repair" in e.value.body
    assert (await call(c, "DELETE", f"{v1}/b"))["status"] == "Success"


async def test_a_watch_at_a_non_storage_version_gets_live_events_through_the_webhook(boxes):
    """A live event of a kind whose conversion awaits a webhook is prepared for its watch (rest.py's
    `_stream` awaits that preparation only for such kinds)."""
    _, c = boxes
    v1, v2 = (f"/apis/{GROUP}/{v}/namespaces/default/boxes" for v in ("v1", "v2"))
    made = await create_when_served(c, v1, {"apiVersion": f"{GROUP}/v1", "kind": "Box", "metadata": {"name": "b"},
                                            "spec": {"size": 3}})
    rv = made["metadata"]["resourceVersion"]

    watching = await open_watch(c, f"{v2}?watch=1&resourceVersion={rv}&timeoutSeconds=30")
    await call(c, "PUT", f"{v1}/b", {**made, "spec": {"size": 5}})
    events = [json.loads(line) for line in await lines_until(watching, len)]
    assert [(e["type"], e["object"]["apiVersion"], e["object"]["spec"]) for e in events] == [
        ("MODIFIED", f"{GROUP}/v2", {"sizeV2": 5})]


def failing(calls: list) -> callable:
    """A conversion webhook that answers every review with a Failure, counting them in `calls`."""
    def review(body: dict) -> dict:
        calls.append(1)
        return {"apiVersion": body["apiVersion"], "kind": "ConversionReview",
                "response": {"uid": body["request"]["uid"], "result": {"status": "Failure", "message": "down"}}}
    return review


async def _watch_then_break(boxes) -> tuple:
    """A watch at v2 of box b, then the webhook failing and b changed at v1: (watch, calls, v1 path)."""
    hook, c = boxes
    v1, v2 = (f"/apis/{GROUP}/{v}/namespaces/default/boxes" for v in ("v1", "v2"))
    made = await create_when_served(c, v1, {"apiVersion": f"{GROUP}/v1", "kind": "Box", "metadata": {"name": "b"},
                                            "spec": {"size": 3}})
    watching = await open_watch(c, f"{v2}?watch=1&resourceVersion={made['metadata']['resourceVersion']}"
                                   f"&timeoutSeconds=60")
    calls: list = []
    hook.handlers["/convert"] = failing(calls)
    await call(c, "PUT", f"{v1}/b", {**made, "spec": {"size": 5}})
    return watching, calls


async def test_a_watch_waits_out_a_conversion_webhook_that_comes_back(boxes):
    """Upstream's per-version watch cache retries the event it could not convert (its reflector
    retries internal errors for 30 s): the watch at v2 gets no ERROR, and the event once the
    webhook answers again."""
    hook, _ = boxes
    watching, calls = await _watch_then_break(boxes)
    while not calls:  # the event's conversion has been tried and refused
        await asyncio.sleep(0.02)
    hook.handlers["/convert"] = converter()
    events = [json.loads(line) for line in await lines_until(watching, len)]
    assert [(e["type"], e["object"]["spec"]) for e in events] == [("MODIFIED", {"sizeV2": 5})]


async def test_a_watch_ends_without_an_error_event_when_conversion_keeps_failing(boxes, monkeypatch):
    """Past the retries the cache ends every watch of the version (terminateAllWatchers before it
    relists): the stream closes, no ERROR event sent. (The 30 s window made 0 here.)"""
    from nanokube.apiserver import rest

    monkeypatch.setattr(rest, "WATCH_CONVERSION_RETRY", 0.0)
    watching, calls = await _watch_then_break(boxes)
    assert await lines_until(watching, lambda lines: False) == []  # read until the server ends the stream
    assert len(calls) >= 2  # tried again before giving up


async def test_a_watch_waiting_on_a_failing_webhook_still_ends_at_its_timeout(boxes, monkeypatch):
    """A watch whose next event cannot be converted ends at its timeoutSeconds, as upstream's watch
    does whatever its events wait on, not once the retries are over (made an hour here)."""
    from nanokube.apiserver import rest

    monkeypatch.setattr(rest, "WATCH_CONVERSION_RETRY", 3600.0)
    hook, c = boxes
    v1, v2 = (f"/apis/{GROUP}/{v}/namespaces/default/boxes" for v in ("v1", "v2"))
    made = await create_when_served(c, v1, {"apiVersion": f"{GROUP}/v1", "kind": "Box", "metadata": {"name": "b"},
                                            "spec": {"size": 3}})
    watching = await open_watch(c, f"{v2}?watch=1&resourceVersion={made['metadata']['resourceVersion']}"
                                   "&timeoutSeconds=2")
    calls: list = []
    hook.handlers["/convert"] = failing(calls)
    await call(c, "PUT", f"{v1}/b", {**made, "spec": {"size": 5}})
    # read until the server ends the stream (a guard far past the 2 s, far before the hour)
    assert await asyncio.wait_for(lines_until(watching, lambda lines: False), 60) == []
    assert calls  # its event's conversion was tried


async def _watches_then_change(boxes, review, n: int) -> list:
    """`n` watches at v2 of box b, then `review` as the webhook (counting its calls in what this
    returns) and b changed at v1: (the watches, the calls)."""
    hook, c = boxes
    v1, v2 = (f"/apis/{GROUP}/{v}/namespaces/default/boxes" for v in ("v1", "v2"))
    made = await create_when_served(c, v1, {"apiVersion": f"{GROUP}/v1", "kind": "Box", "metadata": {"name": "b"},
                                            "spec": {"size": 3}})
    watches = [await open_watch(c, f"{v2}?watch=1&resourceVersion={made['metadata']['resourceVersion']}"
                                   f"&timeoutSeconds=60") for _ in range(n)]
    calls: list = []

    def counted(body: dict) -> dict:
        calls.append(1)
        return review(body)
    hook.handlers["/convert"] = counted
    await call(c, "PUT", f"{v1}/b", {**made, "spec": {"size": 5}})
    return watches, calls


async def test_the_watches_of_a_version_share_each_event_s_conversion(boxes):
    """Upstream's watch cache of v2 converts an event once, as its reflector decodes it, for every
    watch of v2: three watches ask the webhook once, not once each."""
    watches, calls = await _watches_then_change(boxes, converter(), 3)
    for watching in watches:
        events = [json.loads(line) for line in await lines_until(watching, len)]
        assert [(e["type"], e["object"]["spec"]) for e in events] == [("MODIFIED", {"sizeV2": 5})]
    assert len(calls) == 1


async def test_the_watches_of_a_version_share_the_attempts_at_a_failing_conversion(boxes, monkeypatch):
    """Upstream's reflector retries the event it could not convert for every watch of the version:
    three watches of a failing webhook ask it once a second together (twice here, the retries' window
    made 0), not three times a second, and all end."""
    from nanokube.apiserver import rest

    monkeypatch.setattr(rest, "WATCH_CONVERSION_RETRY", 0.0)
    watches, calls = await _watches_then_change(boxes, failing([]), 3)
    for watching in watches:
        assert await lines_until(watching, lambda lines: False) == []
    assert len(calls) == 2


async def test_each_versions_scale_reads_and_writes_its_own_replicas_path(tmp_path):
    """A version's /scale is served from the object converted to it, at that version's
    specReplicasPath (v1 .spec.size, v2 .spec.sizeV2), as on kube-apiserver: a write through v2's
    was answered 200 and lost (v2's object got the storage version's path set, which the
    conversion back to v1 overwrote), and its writer owns v2's path."""
    status = {"type": "object", "properties": {"replicas": {"type": "integer"}}}
    versions = [{"name": v, "served": True, "storage": v == "v1",
                 "subresources": {"scale": {"specReplicasPath": path, "statusReplicasPath": ".status.replicas"}},
                 "schema": {"openAPIV3Schema": {**SCHEMAS[v], "properties": {**SCHEMAS[v]["properties"], "status": status}}}}
                for v, path in (("v1", ".spec.size"), ("v2", ".spec.sizeV2"))]
    async with serving(tmp_path, "crates", "Crate", versions) as (_, c):
        v1, v2 = (f"/apis/{GROUP}/{v}/namespaces/default/crates" for v in ("v1", "v2"))
        await create_when_served(c, f"{v2}?fieldManager=maker", {
            "apiVersion": f"{GROUP}/v2", "kind": "Crate", "metadata": {"name": "c"}, "spec": {"sizeV2": 3}})
        assert (await call(c, "GET", f"{v2}/c/scale"))["spec"] == {"replicas": 3}
        out = await call(c, "PATCH", f"{v2}/c/scale", {"spec": {"replicas": 5}}, "scaler",
                         "application/merge-patch+json")
        assert out["spec"] == {"replicas": 5}
        assert (await call(c, "GET", f"{v1}/c"))["spec"] == {"size": 5}
        crate = await call(c, "GET", f"{v2}/c")
        assert crate["spec"] == {"sizeV2": 5}
        assert [(m["manager"], m["apiVersion"], m.get("subresource"), m["fieldsV1"])
                for m in crate["metadata"]["managedFields"]] == [  # maker's one field is the scaler's now
            ("scaler", f"{GROUP}/v2", "scale", {"f:spec": {"f:sizeV2": {}}})]
        assert (await call(c, "GET", f"{v1}/c/scale"))["spec"] == {"replicas": 5}


async def test_a_write_is_validated_by_the_schema_and_rules_of_its_own_version(tmp_path):
    """A write at v2 is validated as v2 declares (upstream's CR handler holds the request's version
    and converts only to store): v2's rule refuses an odd sizeV2 and v1's maximum does not apply
    to it. Before, the object converted to the storage version v1 was validated: v1's maximum
    refused sizeV2 8 under v1's field name, and v2's rule never ran."""
    schemas = {"v1": {"type": "object", "properties": {"spec": {"type": "object", "properties": {
                   "size": {"type": "integer", "maximum": 5}}}}},
               "v2": {"type": "object", "properties": {"spec": {"type": "object", "properties": {
                   "sizeV2": {"type": "integer"}},
                   "x-kubernetes-validations": [{"rule": "self.sizeV2 % 2 == 0", "message": "sizeV2 must be even"}]}}}}
    versions = [{"name": v, "served": True, "storage": v == "v1", "schema": {"openAPIV3Schema": s}}
                for v, s in schemas.items()]
    async with serving(tmp_path, "bins", "Bin", versions) as (_, c):
        v1, v2 = (f"/apis/{GROUP}/{v}/namespaces/default/bins" for v in ("v1", "v2"))
        made = await create_when_served(c, v2, {"apiVersion": f"{GROUP}/v2", "kind": "Bin",
                                                "metadata": {"name": "b"}, "spec": {"sizeV2": 8}})
        assert made["spec"] == {"sizeV2": 8}
        assert (await call(c, "GET", f"{v1}/b"))["spec"] == {"size": 8}
        with pytest.raises(ApiException) as odd:
            await call(c, "POST", v2, {"apiVersion": f"{GROUP}/v2", "kind": "Bin",
                                       "metadata": {"name": "odd"}, "spec": {"sizeV2": 3}})
        assert odd.value.status == 422
        assert json.loads(odd.value.body)["details"]["causes"] == [
            {"reason": "FieldValueInvalid", "message": "Invalid value: sizeV2 must be even", "field": "spec"}]
        with pytest.raises(ApiException) as update:
            await call(c, "PUT", f"{v2}/b", {**made, "spec": {"sizeV2": 7}})
        assert json.loads(update.value.body)["message"] == \
            f'Bin.{GROUP} "b" is invalid: spec: Invalid value: sizeV2 must be even'
        with pytest.raises(ApiException) as at_v1:  # v1's own maximum still holds for a write at v1
            await call(c, "PATCH", f"{v1}/b", {"spec": {"size": 6}}, content_type="application/merge-patch+json")
        assert "spec.size: Invalid value: 6: spec.size in body should be less than or equal to 5" in \
            json.loads(at_v1.value.body)["message"]


async def test_objects_stored_before_a_storage_version_change_are_converted_from_their_own_version(boxes):
    """An operator moves storage to v2 and migrates (reads each object at v2 and writes it back,
    as kube-storage-version-migrator or `kubectl get -o json | kubectl replace` does): an object
    still stored at v1 is converted from v1 by the webhook, as upstream decodes what it stored by
    the stored object's own apiVersion. It was taken for a v2 object: the read served v1's fields
    as v2's (where v2's schema has defaults, pruned and defaulted: a replicas of 9 read as the
    default 1), and the migration wrote that back."""
    hook, c = boxes
    v1, v2 = (f"/apis/{GROUP}/{v}/namespaces/default/boxes" for v in ("v1", "v2"))
    await create_when_served(c, f"{v1}?fieldManager=maker", {"apiVersion": f"{GROUP}/v1", "kind": "Box", "metadata": {"name": "old"},
                                     "spec": {"size": 3}})
    crd = await call(c, "GET", f"{CRDS}/boxes.{GROUP}")
    for v in crd["spec"]["versions"]:
        v["storage"] = v["name"] == "v2"
    await call(c, "PUT", f"{CRDS}/boxes.{GROUP}", crd)
    for _ in range(200):  # the new storage version is served once the CRD's storage is rebuilt
        if (await call(c, "GET", f"{CRDS}/boxes.{GROUP}"))["status"]["storedVersions"] == ["v1", "v2"]:
            break
        await asyncio.sleep(0.05)
    hook.calls.clear()
    old = await call(c, "GET", f"{v2}/old")
    assert old["spec"] == {"sizeV2": 3}
    assert [r["request"]["desiredAPIVersion"] for r in hook.calls_to("/convert")] == [f"{GROUP}/v2"]
    migrated = await call(c, "PUT", f"{v2}/old", old, "migrator")
    assert migrated["spec"] == {"sizeV2": 3}
    assert (await call(c, "GET", f"{v1}/old"))["spec"] == {"size": 3}
    # nothing changed: the field stays its writer's, at the version it wrote (it was the migrator's,
    # the object at v1 compared with it at v2)
    assert [(m["manager"], m["apiVersion"], m["fieldsV1"]) for m in migrated["metadata"]["managedFields"]] == [
        ("maker", f"{GROUP}/v1", {"f:spec": {"f:size": {}}})]


async def test_kubectl_get_prints_each_version_with_its_own_columns_on_the_converted_object(tmp_path):
    """Upstream serves each version from a storage whose table convertor has that version's
    columns and reads the object converted to it, so `kubectl get` of either version prints
    its own columns, filled, whichever version the objects are stored at."""
    columns = {"v1": [{"name": "Size", "type": "integer", "jsonPath": ".spec.size"}],
               "v2": [{"name": "Size-V2", "type": "integer", "jsonPath": ".spec.sizeV2"}]}
    versions = [{"name": v, "served": True, "storage": v == "v1", "schema": {"openAPIV3Schema": s},
                 "additionalPrinterColumns": columns[v]} for v, s in SCHEMAS.items()]
    async with serving(tmp_path, "crates", "Crate", versions) as (_, c):
        await create_when_served(c, f"/apis/{GROUP}/v1/namespaces/default/crates", {
            "apiVersion": f"{GROUP}/v1", "kind": "Crate", "metadata": {"name": "small"}, "spec": {"size": 3}})

        async def get(*args: str) -> str:
            r = await asyncio.to_thread(subprocess.run, [KUBECTL, "--kubeconfig", str(tmp_path / "kubeconfig"),
                                                         "get", *args], capture_output=True, text=True, check=True)
            return r.stdout

        for version, header in (("v1", "SIZE"), ("v2", "SIZE-V2")):
            for args in ((f"crates.{version}.{GROUP}",), (f"crates.{version}.{GROUP}", "small")):
                assert (await get(*args)).split() == ["NAME", header, "small", "3"], (version, args)
