"""Objects an older server stored without the fields the decoder now fills (a StatefulSet's
`serviceName: ""`, a PVC dataSource's `apiGroup: null`: tagged without omitempty) compare equal to the
same object sent back, as upstream's do once decoded into Go structs: an update that changes
nothing the spec holds is not refused as a change of an immutable spec, nor bumps the generation.
Such an update is still written, as upstream's is where the object it encodes differs from the
stored bytes: `kubectl replace` brings the stored object up to date."""

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import orjson
from kubernetes import client

from tests.controllers import tries
from tests.served import served

KUBECTL = str(Path(sys.executable).parent / "kubectl")
STS = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "s", "namespace": "default"},
       "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {
           "metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}}


async def _plant(server, group: str, plural: str, name: str, change, namespace: str | None = "default") -> None:
    """Rewrite the stored object as an older server wrote it, and wait until reads see it."""
    key = server.index.get(group, "v1", plural).key(namespace, name)
    kv = await server.store.get(key)
    obj = orjson.loads(kv.value)
    change(obj)
    planted = await server.store.update(key, orjson.dumps(obj), kv.mod_revision)
    for _ in tries():
        if (entry := server.cache.get(key)) is not None and entry.rev >= planted.mod_revision:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{key} not seen planted")


async def _json(f, *args):
    return json.loads((await asyncio.to_thread(f, *args, _preload_content=False)).data)


async def test_a_statefulset_stored_without_service_name_takes_its_spec_back(tmp_path):
    async with served(tmp_path) as (server, api):
        apps = client.AppsV1Api(api)
        await _json(apps.create_namespaced_stateful_set, "default", STS)
        await _plant(server, "apps", "statefulsets", "s", lambda o: o["spec"].pop("serviceName"))
        got = await _json(apps.read_namespaced_stateful_set, "s", "default")
        got["metadata"]["labels"] = {"tier": "db"}
        put = await _json(apps.replace_namespaced_stateful_set, "s", "default", got)
        assert put["spec"]["serviceName"] == "" and put["metadata"]["generation"] == 1
        r = await asyncio.to_thread(
            subprocess.run, [KUBECTL, "--kubeconfig", str(tmp_path / "kubeconfig"), "apply", "-f", "-"],
            input=json.dumps({**STS, "metadata": {**STS["metadata"], "labels": {"tier": "web"}}}),
            capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        await _plant(server, "apps", "statefulsets", "s", lambda o: o["spec"].pop("serviceName"))
        r = await asyncio.to_thread(
            subprocess.run, [KUBECTL, "--kubeconfig", str(tmp_path / "kubeconfig"), "apply", "-f", "-"],
            input=json.dumps({**STS, "metadata": {**STS["metadata"], "labels": {"tier": "cache"}}}),
            capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        got = await _json(apps.read_namespaced_stateful_set, "s", "default")
        assert got["metadata"]["labels"] == {"tier": "cache"} and got["metadata"]["generation"] == 1


async def test_a_claim_stored_without_a_null_api_group_takes_its_spec_back(tmp_path):
    async with served(tmp_path) as (server, api):
        core = client.CoreV1Api(api)
        source = {"kind": "PersistentVolumeClaim", "name": "src"}
        await _json(core.create_namespaced_persistent_volume_claim, "default", {
            "metadata": {"name": "c"}, "spec": {"accessModes": ["ReadWriteOnce"], "dataSource": source,
                                                "resources": {"requests": {"storage": "1Gi"}}}})

        def older(o):
            for f in ("dataSource", "dataSourceRef"):
                del o["spec"][f]["apiGroup"]
        await _plant(server, "", "persistentvolumeclaims", "c", older)
        got = await _json(core.read_namespaced_persistent_volume_claim, "c", "default")
        got["metadata"]["labels"] = {"tier": "db"}
        put = await _json(core.replace_namespaced_persistent_volume_claim, "c", "default", got)
        assert put["spec"]["dataSource"] == {**source, "apiGroup": None}


async def test_a_node_stored_without_its_structs_is_written_again_by_an_unchanged_replace(tmp_path):
    kubectl = [KUBECTL, "--kubeconfig", str(tmp_path / "kubeconfig")]
    async with served(tmp_path) as (server, api):
        core = client.CoreV1Api(api)
        await _json(core.create_node, {"metadata": {"name": "n1"}})

        def older(o):
            del o["spec"], o["status"]
        await _plant(server, "", "nodes", "n1", older, namespace=None)
        stored = await _json(core.read_node, "n1")
        assert "spec" not in stored  # the older server's object, as it was stored
        r = await asyncio.to_thread(subprocess.run, [*kubectl, "replace", "-f", "-"], input=json.dumps(stored),
                                    capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        got = await _json(core.read_node, "n1")
        assert got["metadata"]["resourceVersion"] != stored["metadata"]["resourceVersion"]
        assert got["spec"] == {} and got["status"]["daemonEndpoints"] == {"kubeletEndpoint": {"Port": 0}}
