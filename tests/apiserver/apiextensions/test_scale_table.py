"""`kubectl get <custom resource> --subresource=scale` with kubectl 1.37: apiextensions' scale scope
is a copy of the custom resource's request scope, table convertor included, so the Scale is printed
as a Table of the CRD version's own columns read on the Scale (a column naming .spec.replicas shows
the Scale's, one naming a field the Scale lacks is empty), not as the bare Scale kubectl would
print with its own NAME/AGE fallback."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

from kubernetes.client.rest import ApiException

from tests.apiserver.test_rest_managedfields import call
from tests.controllers import tries
from tests.served import served

KUBECTL = str(Path(sys.executable).parent / "kubectl")
GROUP = "scaletable.example.com"
PODSETS = f"/apis/{GROUP}/v1/namespaces/default/podsets"
CRD = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
       "metadata": {"name": f"podsets.{GROUP}"},
       "spec": {"group": GROUP, "scope": "Namespaced", "names": {"plural": "podsets", "kind": "PodSet"},
                "versions": [{"name": "v1", "served": True, "storage": True,
                              "subresources": {"scale": {"specReplicasPath": ".spec.replicas",
                                                         "statusReplicasPath": ".status.replicas"}},
                              "additionalPrinterColumns": [
                                  {"name": "Desired", "type": "integer", "jsonPath": ".spec.replicas"},
                                  {"name": "Image", "type": "string", "jsonPath": ".spec.image"}],
                              "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                                  "spec": {"type": "object", "properties": {"replicas": {"type": "integer"},
                                                                            "image": {"type": "string"}}},
                                  "status": {"type": "object", "properties": {"replicas": {"type": "integer"}}}}}}}]}}


async def test_a_custom_resources_scale_is_printed_with_the_crds_columns(tmp_path):
    async with served(tmp_path) as (_, c):
        await call(c, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", CRD)
        for _ in tries():
            try:
                await call(c, "POST", PODSETS, {"apiVersion": f"{GROUP}/v1", "kind": "PodSet", "metadata": {"name": "p"},
                                                "spec": {"replicas": 2, "image": "busybox"}})
                break
            except ApiException as e:
                assert e.status == 404  # not served yet
                await asyncio.sleep(0.05)

        def kubectl(*args: str) -> str:
            return subprocess.run([KUBECTL, "--kubeconfig", str(tmp_path / "kubeconfig"), *args],
                                  capture_output=True, text=True, check=True).stdout

        assert (await asyncio.to_thread(kubectl, "get", "podsets", "p")).split() == [
            "NAME", "DESIRED", "IMAGE", "p", "2", "busybox"]
        assert (await asyncio.to_thread(kubectl, "get", "podsets", "p", "--subresource=scale")).split() == [
            "NAME", "DESIRED", "IMAGE", "p", "2"]  # (no image in a Scale: an empty cell)
