"""A list or watch of a custom resource with a fieldSelector on a selectableField that its
conversion webhook renames between versions (v1's .spec.size is v2's .spec.sizeV2), over HTTP: the
selector matches each object converted to the version the client asked for, as kube-apiserver's
per-version custom resource storage does. It was matched on the object as stored (v1), so v2's
`spec.sizeV2=3` found nothing."""

from __future__ import annotations

import json
from urllib.parse import quote

import pytest

from tests.apiserver.apiextensions import lines_until, open_watch
from tests.apiserver.apiextensions.test_conversion_pruning import create_when_served
from tests.apiserver.apiextensions.test_conversion_webhook_reads import GROUP, SCHEMAS, serving
from tests.apiserver.test_rest_managedfields import call

PATHS = {"v1": ".spec.size", "v2": ".spec.sizeV2"}


@pytest.fixture
async def dials(tmp_path):
    """Dials stored at v1: a 3 labelled small and a 5; each version selects on its own field."""
    async with serving(tmp_path, "dials", "Dial", [
            {"name": v, "served": True, "storage": v == "v1", "schema": {"openAPIV3Schema": s},
             "selectableFields": [{"jsonPath": PATHS[v]}]} for v, s in SCHEMAS.items()]) as (hook, c):
        for name, size, labels in (("small", 3, {"size": "small"}), ("big", 5, {})):
            await create_when_served(c, _at("v1"), {"apiVersion": f"{GROUP}/v1", "kind": "Dial",
                                                    "metadata": {"name": name, "labels": labels},
                                                    "spec": {"size": size}})
        yield hook, c


def _at(version: str) -> str:
    return f"/apis/{GROUP}/{version}/namespaces/default/dials"


async def _names(c, version: str, query: str) -> list[tuple[str, dict]]:
    listed = await call(c, "GET", f"{_at(version)}?{query}")
    return [(o["metadata"]["name"], o["spec"]) for o in listed["items"]]


async def test_a_list_selects_on_the_field_of_the_version_it_asks_for(dials):
    hook, c = dials
    assert await _names(c, "v2", "fieldSelector=spec.sizeV2%3D3") == [("small", {"sizeV2": 3})]
    assert await _names(c, "v2", "fieldSelector=spec.sizeV2!%3D3") == [("big", {"sizeV2": 5})]
    assert await _names(c, "v1", "fieldSelector=spec.size%3D3") == [("small", {"size": 3})]
    hook.calls.clear()
    assert await _names(c, "v2", "fieldSelector=spec.sizeV2%3D5&limit=1") == [("big", {"sizeV2": 5})]
    # both objects converted for the match in one review, and the match served without another
    assert [len(r["request"]["objects"]) for r in hook.calls_to("/convert")] == [2]
    # a label selector and metadata.name still select at v2
    assert await _names(c, "v2", "labelSelector=size%3Dsmall") == [("small", {"sizeV2": 3})]
    assert await _names(c, "v2", "fieldSelector=metadata.name%3Dbig") == [("big", {"sizeV2": 5})]
    assert await _names(c, "v2", "fieldSelector=metadata.name%3Dbig,spec.sizeV2%3D3") == []


async def test_a_watch_selects_each_event_on_the_object_at_its_version(dials):
    """Events replayed from a resourceVersion and live ones alike: a dial whose sizeV2 becomes 5
    arrives ADDED, one that leaves 5 DELETED, one that stays at 5 MODIFIED."""
    _, c = dials
    listed = await call(c, "GET", f"{_at('v2')}?fieldSelector=spec.sizeV2%3D5")
    rv = listed["metadata"]["resourceVersion"]
    selector = quote("spec.sizeV2=5")

    watching = await open_watch(c, f"{_at('v2')}?watch=1&resourceVersion={rv}&fieldSelector={selector}&timeoutSeconds=30")
    for name, size, labels in (("small", 5, {}), ("big", 4, {}), ("small", 5, {"a": "b"}), ("small", 6, {"a": "b"})):
        dial = await call(c, "GET", f"{_at('v1')}/{name}")
        await call(c, "PUT", f"{_at('v1')}/{name}", {**dial, "metadata": {**dial["metadata"], "labels": labels},
                                                     "spec": {"size": size}})
    events = [json.loads(line) for line in await lines_until(watching, lambda lines: len(lines) == 4)]
    assert [(e["type"], e["object"]["metadata"]["name"], e["object"]["spec"]) for e in events] == [
        ("ADDED", "small", {"sizeV2": 5}), ("DELETED", "big", {"sizeV2": 4}), ("MODIFIED", "small", {"sizeV2": 5}),
        ("DELETED", "small", {"sizeV2": 6})]
