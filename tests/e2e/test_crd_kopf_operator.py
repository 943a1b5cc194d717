"""An operator written with kopf runs unchanged against `nanokube up`: it watches its
custom resource, writes its status, holds its finalizer until its deletion handler has
run, and creates pods that the scheduler places."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from .conftest import kopf_run, wait_for

pytest.importorskip("kopf")

GROUP = "ml.example.com"
OPERATOR = Path(__file__).parent / "operators" / "trainingjob.py"
CRD = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
       "metadata": {"name": f"trainingjobs.{GROUP}"},
       "spec": {"group": GROUP, "scope": "Namespaced",
                "names": {"plural": "trainingjobs", "singular": "trainingjob", "kind": "TrainingJob", "shortNames": ["tj"]},
                "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
                              "additionalPrinterColumns": [{"name": "Phase", "type": "string", "jsonPath": ".status.phase"}],
                              "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                                  "spec": {"type": "object", "properties": {"workers": {"type": "integer", "minimum": 1},
                                                                            "image": {"type": "string"}}},
                                  "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}}]}}


@pytest.fixture(scope="module")
def operator(cluster):
    cluster.kubectl("apply", "-f", "-", input=json.dumps(CRD))
    cluster.kubectl("wait", "--for", "condition=Established", f"crd/trainingjobs.{GROUP}", "--timeout=50s")
    env = {**os.environ, "KUBECONFIG": cluster.kubeconfig}
    with kopf_run(["--standalone", "--namespace", "default", str(OPERATOR)], env, cluster.data_dir / "kopf.log") as proc:
        yield proc


def _log(cluster) -> str:
    return (cluster.data_dir / "kopf.log").read_text(errors="replace")


def test_kopf_operator_creates_scheduled_pods_writes_status_and_honours_its_finalizer(cluster, operator):
    job = {"apiVersion": f"{GROUP}/v1", "kind": "TrainingJob", "metadata": {"name": "llm", "namespace": "default"},
           "spec": {"workers": 2, "image": "pytorch:2"}}
    cluster.kubectl("apply", "-f", "-", input=json.dumps(job))

    def status():
        got = cluster.kubectl_json("get", "trainingjob", "llm")
        return got if (got.get("status") or {}).get("phase") == "Running" else None

    got = wait_for(status, timeout=30, what=f"kopf wrote the status\n{_log(cluster)}")
    assert got["status"]["create_workers"] == {"pods": ["llm-worker-0", "llm-worker-1"]}
    assert "kopf.zalando.org/KopfFinalizerMarker" in got["metadata"]["finalizers"]
    assert cluster.kubectl("get", "tj").stdout.splitlines()[1].split()[:2] == ["llm", "Running"]

    def placed():
        pods = cluster.kubectl_json("get", "pods", "-l", "trainingjob=llm")["items"]
        return len(pods) == 2 and all(p["spec"].get("nodeName") for p in pods) and pods

    pods = wait_for(placed, timeout=30, what="the operator's pods scheduled")
    assert all(p["metadata"]["ownerReferences"][0]["kind"] == "TrainingJob" for p in pods)

    cluster.kubectl("delete", "trainingjob", "llm", "--wait=false")
    wait_for(lambda: cluster.kubectl("get", "configmap", "llm-cleaned-up", check=False).returncode == 0, timeout=30,
             what=f"kopf's deletion handler ran\n{_log(cluster)}")
    wait_for(lambda: cluster.kubectl("get", "trainingjob", "llm", check=False).returncode != 0, timeout=30,
             what="kopf removed its finalizer")
    wait_for(lambda: not cluster.kubectl_json("get", "pods", "-l", "trainingjob=llm")["items"], timeout=30,
             what="the pods garbage-collected with their owner")
