"""The Scale of a custom resource whose spec replicas field is not set, over HTTP and with kubectl
1.37, as apiextensions' ScaleREST answers: reading it is the internal error 'the spec replicas field
".spec.size" does not exist', but a write through /scale that sets replicas (kubectl scale's merge
patch, a PUT, a JSON patch) sets the field, and one that leaves them unset (an apply without
spec.replicas) is the 400 'the spec replicas field ".spec.size" cannot be empty'."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
from kubernetes.client.rest import ApiException

from tests.apiserver.test_rest_managedfields import call
from tests.served import served
from tests.controllers import tries

KUBECTL = str(Path(sys.executable).parent / "kubectl")
GROUP = "unset.example.com"
WIDGETS = f"/apis/{GROUP}/v1/namespaces/default/widgets"
CRD = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
       "metadata": {"name": f"widgets.{GROUP}"},
       "spec": {"group": GROUP, "scope": "Namespaced", "names": {"plural": "widgets", "kind": "Widget"},
                "versions": [{"name": "v1", "served": True, "storage": True,
                              "subresources": {"scale": {"specReplicasPath": ".spec.size",
                                                         "statusReplicasPath": ".status.size"}},
                              "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                                  "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
                                  "status": {"type": "object", "properties": {"size": {"type": "integer"}}}}}}}]}}


async def _widgets(c, *names: str) -> None:
    await call(c, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", CRD)
    for name in names:
        for _ in tries():
            try:
                await call(c, "POST", WIDGETS, {"apiVersion": f"{GROUP}/v1", "kind": "Widget",
                                                "metadata": {"name": name}, "spec": {}})
                break
            except ApiException as e:
                assert e.status == 404  # not served yet
                await asyncio.sleep(0.05)


async def _refused(c, method: str, path: str, body, **kw) -> tuple[int, str]:
    with pytest.raises(ApiException) as e:
        await call(c, method, path, body, **kw)
    return e.value.status, json.loads(e.value.body)["message"]


async def test_a_write_through_scale_sets_the_unset_replicas(tmp_path):
    async with served(tmp_path) as (_, c):
        await _widgets(c, "a", "b", "d")
        assert await _refused(c, "GET", f"{WIDGETS}/a/scale", None) == (
            500, 'Internal error occurred: the spec replicas field ".spec.size" does not exist')
        out = await asyncio.to_thread(subprocess.run, [
            KUBECTL, "--kubeconfig", str(tmp_path / "kubeconfig"), "scale", "widget/a", "--replicas=3"],
            capture_output=True, text=True, timeout=60)
        assert (out.returncode, out.stdout) == (0, f"widget.{GROUP}/a scaled\n"), out.stderr
        assert (await call(c, "GET", f"{WIDGETS}/a"))["spec"] == {"size": 3}
        put = await call(c, "PUT", f"{WIDGETS}/b/scale", {"apiVersion": "autoscaling/v1", "kind": "Scale",
                                                           "metadata": {"name": "b"}, "spec": {"replicas": 2}})
        assert put["spec"] == {"replicas": 2}
        assert (await call(c, "GET", f"{WIDGETS}/b"))["spec"] == {"size": 2}
        patched = await call(c, "PATCH", f"{WIDGETS}/d/scale", [{"op": "add", "path": "/spec/replicas", "value": 4}],
                             content_type="application/json-patch+json")
        assert patched["spec"] == {"replicas": 4}


async def test_a_write_that_leaves_the_replicas_unset_is_a_bad_request(tmp_path):
    async with served(tmp_path) as (_, c):
        await _widgets(c, "a")
        empty = (400, 'the spec replicas field ".spec.size" cannot be empty')
        assert await _refused(c, "PATCH", f"{WIDGETS}/a/scale", {"apiVersion": "autoscaling/v1", "kind": "Scale",
                                                                  "metadata": {"name": "a"}},
                              manager="m", content_type="application/apply-patch+yaml") == empty
        assert await _refused(c, "PATCH", f"{WIDGETS}/a/scale", {"metadata": {"labels": {"x": "y"}}},
                              content_type="application/merge-patch+json") == empty
        assert (await call(c, "GET", f"{WIDGETS}/a"))["spec"] == {}


async def test_a_scale_at_zero_without_a_selector_leaves_out_spec_replicas_and_the_selector(tmp_path):
    """autoscaling/v1 Scale's JSON: spec.replicas and status.selector are omitempty (status.replicas
    is not), so a custom resource at 0 replicas with no labelSelectorPath reads, through kubectl get
    --raw, as spec {} and status {replicas: 0}; scaled up, its replicas are written."""
    async with served(tmp_path) as (_, c):
        await _widgets(c, "served")
        await call(c, "POST", WIDGETS, {"apiVersion": f"{GROUP}/v1", "kind": "Widget", "metadata": {"name": "z"},
                                        "spec": {"size": 0}})

        async def raw() -> dict:
            out = await asyncio.to_thread(subprocess.run, [
                KUBECTL, "--kubeconfig", str(tmp_path / "kubeconfig"), "get", "--raw", f"{WIDGETS}/z/scale"],
                capture_output=True, text=True, timeout=60)
            assert out.returncode == 0, out.stderr
            return json.loads(out.stdout)

        got = await raw()
        assert (got["spec"], got["status"]) == ({}, {"replicas": 0})
        await call(c, "PATCH", f"{WIDGETS}/z/scale", {"spec": {"replicas": 2}},
                   content_type="application/merge-patch+json")
        got = await raw()
        assert (got["spec"], got["status"]) == ({"replicas": 2}, {"replicas": 0})


async def test_a_scale_path_is_split_at_its_periods_and_nothing_trimmed(tmp_path):
    """splitReplicasPath splits `.spec.size ` at its periods, nothing trimmed: it names the field "size ",
    which the widget lacks (the internal error), not spec.size, which a kubectl JSONPath reading of
    it found (3, found by fuzz48's probes of odd scale paths)."""
    crd = json.loads(json.dumps(CRD).replace('".spec.size"', '".spec.size "'))
    async with served(tmp_path) as (_, c):
        await call(c, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
        for _ in tries():
            try:
                await call(c, "POST", WIDGETS, {"apiVersion": f"{GROUP}/v1", "kind": "Widget",
                                                "metadata": {"name": "a"}, "spec": {"size": 3}})
                break
            except ApiException as e:
                assert e.status == 404  # not served yet
                await asyncio.sleep(0.05)
        assert await _refused(c, "GET", f"{WIDGETS}/a/scale", None) == (
            500, 'Internal error occurred: the spec replicas field ".spec.size " does not exist')
