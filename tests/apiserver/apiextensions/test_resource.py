"""The custom resource strategy (apiextensions/resource.py) on a served CRD: what decoding refuses."""

from __future__ import annotations

import asyncio

import pytest
from kubernetes import client

from nanokube.machinery.errors import APIError
from tests.served import served

from .test_serving import GROUP, crd, env, established  # noqa: F401 - env is the fixture
from tests.controllers import tries

DECODE = 'Widget in version "v1" cannot be handled as a Widget: json: cannot unmarshal '


@pytest.mark.parametrize("meta, error", [
    ({"labels": -1}, "number into Go struct field ObjectMeta.labels of type map[string]string"),
    ({"annotations": {"a": 1}}, "number into Go struct field ObjectMeta.annotations of type string"),
    ({"finalizers": "x"}, "string into Go struct field ObjectMeta.finalizers of type []string"),
])
async def test_metadata_of_the_wrong_type_is_a_bad_request_on_every_write(env, meta, error):  # noqa: F811
    await env.crds.create(crd())
    await established(env, f"widgets.{GROUP}")
    w = env.stack.client.resource(GROUP, "v1", "widgets")
    seed = await w.create({"metadata": {"name": "a", "namespace": "default", "labels": {"app": "x"}}, "spec": {"size": 1}})
    writes = [
        lambda: w.create({"metadata": {"name": "b", "namespace": "default", **meta}, "spec": {"size": 1}}),
        lambda: w.update({**seed, "metadata": {**seed["metadata"], **meta}}),
        lambda: w.patch("a", {"metadata": meta}, namespace="default"),
    ]
    for write in writes:
        with pytest.raises(APIError) as e:
            await write()
        assert (e.value.code, e.value.message) == (400, DECODE + error)
    assert await w.get("a", "default") == seed


async def test_added_finalizers_are_warned_about_not_refused(tmp_path):
    """customresource strategy's WarningsOnCreate/Update: only apimachinery's generic ObjectMeta rules
    refuse; each finalizer a write adds that is neither standard nor domain-qualified is warned about, sorted."""
    prefer = "prefer a domain-qualified finalizer name to avoid accidental conflicts with other finalizer writers"

    def write(api, method: str, path: str, body: dict, ctype: str = "application/json"):
        request = api.param_serialize(method, path, header_params={"Content-Type": ctype, "Accept": "application/json"})
        response = api.call_api(request[0], request[1], request[2], body)
        response.read()
        return response.status, response.getheaders().getlist("Warning")

    async with served(tmp_path) as (_, api):
        await asyncio.to_thread(client.ApiextensionsV1Api(api).create_custom_resource_definition, crd())
        path = f"/apis/{GROUP}/v1/namespaces/default/widgets"
        body = {"apiVersion": f"{GROUP}/v1", "kind": "Widget",
                "metadata": {"name": "w", "finalizers": ["zeta", "example.com/ok", "orphan"]}}
        for _ in tries():  # until the new kind is served
            status, warned = await asyncio.to_thread(write, api, "POST", path, body)
            if status != 404:
                break
            await asyncio.sleep(0.05)
        assert status == 201
        assert warned == [f'299 - "metadata.finalizers: \\"zeta\\": {prefer}"']
        patch = {"metadata": {"finalizers": ["zeta", "example.com/ok", "orphan", "beta", "alpha"]}}
        status, warned = await asyncio.to_thread(write, api, "PATCH", f"{path}/w", patch, "application/merge-patch+json")
        assert status == 200
        assert warned == [f'299 - "metadata.finalizers: \\"{fin}\\": {prefer}"' for fin in ("alpha", "beta")]
