"""The CRD naming controller's conditions, over HTTP with the official client."""

from __future__ import annotations

import asyncio

from kubernetes import client

from tests.served import served
from tests.controllers import tries

NAME = "gizmos.example.com"


def _crd() -> dict:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": NAME},
            "spec": {"group": "example.com", "scope": "Namespaced",
                     "names": {"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo", "listKind": "GizmoList"},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": {"type": "object"}}}]}}


async def _conditions(ext, ready) -> dict:
    """The CRD's conditions by type, once `ready` holds of them (or after `tries`' 30 s, as they are)."""
    for _ in tries():
        got = await asyncio.to_thread(ext.read_custom_resource_definition, NAME)
        conds = {c.type: c for c in got.status.conditions or []}
        if ready(conds):
            break
        await asyncio.sleep(0.05)
    return conds


async def test_a_condition_without_a_transition_time_gets_one_when_its_status_is_set_again(tmp_path):
    """Upstream's SetCRDCondition stamps lastTransitionTime when the status changes or the condition
    has none, so a client that writes the conditions back without times sees them stamped."""
    async with served(tmp_path) as (_, api_client):
        ext = client.ApiextensionsV1Api(api_client)
        await asyncio.to_thread(ext.create_custom_resource_definition, _crd())
        first = await _conditions(ext, lambda c: getattr(c.get("Established"), "status", "") == "True")
        assert (first["NamesAccepted"].status, first["Established"].status) == ("True", "True")
        assert first["NamesAccepted"].last_transition_time is not None

        live = api_client.sanitize_for_serialization(await asyncio.to_thread(ext.read_custom_resource_definition, NAME))
        for c in live["status"]["conditions"]:
            c.pop("lastTransitionTime")
        written = await asyncio.to_thread(ext.replace_custom_resource_definition_status, NAME, live)
        assert all(c.last_transition_time is None for c in written.status.conditions)

        after = await _conditions(ext, lambda c: all(x.last_transition_time for x in c.values()))
        assert {t: (c.status, c.reason) for t, c in after.items()} == {
            "NamesAccepted": ("True", "NoConflicts"), "Established": ("True", "InitialNamesAccepted")}
        assert all(c.last_transition_time is not None for c in after.values())
