"""The custom resource strategy (apiextensions/resource.py) on a served CRD: what decoding refuses."""

from __future__ import annotations

import pytest

from nanokube.machinery.errors import APIError

from .test_serving import GROUP, crd, env, established  # noqa: F401 - env is the fixture

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
