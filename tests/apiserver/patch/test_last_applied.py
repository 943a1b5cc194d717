"""`kubectl apply --server-side` over an object `kubectl apply` made client-side: what the
last-applied annotation shows as applied, and the live object still holds, is taken over without a
conflict (upstream's lastAppliedManager; kubectl then moves the client-side entry into its own,
csaupgrade); a field someone else changed since still conflicts, and only it is reported; each
such apply rewrites the annotation (lastAppliedUpdater). Another field manager gets no such help."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import yaml

from tests.apiserver.test_rest_managedfields import call, refused
from tests.served import served

KUBECTL = str(Path(sys.executable).parent / "kubectl")
DEPLOYS = "/apis/apps/v1/namespaces/default/deployments"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def deployment(name: str, replicas: int, image: str) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "app", "image": image}]}}}}


async def test_server_side_apply_after_client_side_apply(tmp_path):
    async with served(tmp_path) as (_, api):
        async def kubectl(*args: str, body: dict | None = None) -> subprocess.CompletedProcess:
            return await asyncio.to_thread(
                subprocess.run, [KUBECTL, "--kubeconfig", str(tmp_path / "kubeconfig"), *args],
                input=yaml.safe_dump(body) if body else None, capture_output=True, text=True, timeout=60)

        assert (await kubectl("apply", "-f", "-", body=deployment("web", 2, "nginx"))).returncode == 0
        assert (await kubectl("set", "image", "deploy/web", "app=nginx:1")).returncode == 0
        # replicas is as last applied: no conflict; the image was changed by someone else since
        r = await kubectl("apply", "--server-side", "-f", "-", body=deployment("web", 3, "nginx:2"))
        assert r.returncode == 1 and r.stderr.startswith(
            'error: Apply failed with 1 conflict: conflict with "kubectl-set" using apps/v1: '
            '.spec.template.spec.containers[name="app"].image\n'), r.stderr
        assert (await kubectl("set", "image", "deploy/web", "app=nginx")).returncode == 0
        r = await kubectl("apply", "--server-side", "-f", "-", body=deployment("web", 3, "nginx:2"))
        assert r.returncode == 0 and r.stdout == "deployment.apps/web serverside-applied\n", r.stderr
        got = await call(api, "GET", f"{DEPLOYS}/web")
        assert got["spec"]["replicas"] == 3 and got["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:2"
        assert got["metadata"]["annotations"][LAST_APPLIED] == json.dumps(
            deployment("web", 3, "nginx:2"), sort_keys=True, separators=(",", ":")) + "\n"
        owners = {e["manager"]: e["operation"] for e in got["metadata"]["managedFields"]}
        assert owners == {"kubectl": "Apply", "kubectl-last-applied": "Apply"}, owners

        # only the manager named kubectl is let through
        assert (await kubectl("apply", "-f", "-", body=deployment("api", 2, "nginx"))).returncode == 0
        status, message = await refused(api, "PATCH", f"{DEPLOYS}/api", deployment("api", 3, "nginx"), "other",
                                        content_type="application/apply-patch+yaml")
        assert (status, message) == (409, 'Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" '
                                          "using apps/v1: .spec.replicas")
        applied = await call(api, "PATCH", f"{DEPLOYS}/api", deployment("api", 2, "nginx"), "other",
                             content_type="application/apply-patch+yaml")
        assert '"replicas":2' in applied["metadata"]["annotations"][LAST_APPLIED]  # not rewritten by another manager
