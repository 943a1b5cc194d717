"""`nanokube up --encryption-provider-config` as a cluster operator encrypts Secrets at rest: the
store holds upstream's prefix and no plaintext while kubectl reads plaintext; a key rotated the
documented way (the new key added first and reloaded, every Secret replaced, the old key removed)
with --encryption-provider-config-automatic-reload, a bad file keeping the last good one; then
a restart with two API workers under a key that cannot read the Secrets (corrupt objects) beside
a KMS v2 plugin encrypting ConfigMaps; and a file that does not validate stopping `up` with one line."""

from __future__ import annotations

import asyncio
import base64
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml

from .conftest import STORE, fresh_store, start_cluster, wait_for

pytestmark = pytest.mark.skipif(STORE == "memory", reason="the values are read from the store's own files or server")

ROOT = Path(__file__).resolve().parents[2]


def key(n: int) -> str:
    return base64.b64encode(bytes([n]) * 32).decode()


def write_config(path: Path, secrets: list[dict], configmaps: list[dict] | None = None) -> None:
    resources = [{"resources": ["secrets"], "providers": secrets}]
    if configmaps:
        resources.append({"resources": ["configmaps"], "providers": configmaps})
    text = yaml.safe_dump({"apiVersion": "apiserver.config.k8s.io/v1", "kind": "EncryptionConfiguration",
                           "resources": resources})
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(path)  # as an editor's save: the reload never reads half a file


def aescbc(*names: tuple[str, int]) -> dict:
    return {"aescbc": {"keys": [{"name": n, "secret": key(k)} for n, k in names]}}


def raw(cluster, k: str) -> bytes:
    """The value the store holds under `k`, read around the API server."""
    if cluster.store == "sqlite":
        db = sqlite3.connect(f"file:{cluster.data_dir / 'state.db'}?mode=ro", uri=True)
        try:
            return db.execute("SELECT value FROM kv WHERE key = ?", (k,)).fetchone()[0]
        finally:
            db.close()
    from nanokube.store.etcd import EtcdStore

    async def get() -> bytes:
        store = EtcdStore(cluster.store[len("etcd://"):].split(","))
        await store.start()
        try:
            return (await store.get(k)).value
        finally:
            await store.close()

    return asyncio.run(get())


def reloads(cluster, status: str) -> float:
    text = cluster.kubectl("get", "--raw", "/metrics").stdout
    for line in text.splitlines():
        if line.startswith("apiserver_encryption_config_controller_automatic_reloads_total{") \
                and f'status="{status}"' in line:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_rotation_with_automatic_reload_then_a_lost_key_and_a_kms_plugin(tmp_path):
    d = Path(tempfile.mkdtemp(prefix="nanokube-e2e-encryption-"))
    config = tmp_path / "encryption.yaml"
    write_config(config, [aescbc(("key1", 1)), {"identity": {}}])
    with fresh_store() as store:
        try:
            c = start_cluster(d, store, ("--encryption-provider-config", str(config),
                                         "--encryption-provider-config-automatic-reload"))
            try:
                c.kubectl("create", "secret", "generic", "db", "--from-literal=password=hunter2")
                stored = raw(c, "/registry/secrets/default/db")
                assert stored.startswith(b"k8s:enc:aescbc:v1:key1:")
                assert b"hunter2" not in stored and base64.b64encode(b"hunter2") not in stored
                got = c.kubectl_json("get", "secret", "db")
                assert base64.b64decode(got["data"]["password"]) == b"hunter2"
                assert c.kubectl("get", "--raw", "/healthz/kms-providers").stdout == "ok"
                # step 1: the new key first; the reload makes it the writing one
                write_config(config, [aescbc(("key2", 2), ("key1", 1)), {"identity": {}}])
                wait_for(lambda: reloads(c, "success") >= 1, 30, "the reload")
                # step 2: every Secret written again, as the docs do it
                listed = c.kubectl("get", "secrets", "-A", "-o", "json").stdout
                c.kubectl("replace", "-f", "-", input=listed)
                assert raw(c, "/registry/secrets/default/db").startswith(b"k8s:enc:aescbc:v1:key2:")
                # a file that does not load is counted and the last good configuration stays
                config.write_text("apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\n")
                wait_for(lambda: reloads(c, "failure") >= 1, 30, "the failed reload")
                c.kubectl("create", "secret", "generic", "after", "--from-literal=a=b")
                assert raw(c, "/registry/secrets/default/after").startswith(b"k8s:enc:aescbc:v1:key2:")
                # step 3: the old key removed
                write_config(config, [aescbc(("key2", 2))])
                wait_for(lambda: reloads(c, "success") >= 2, 30, "the second reload")
                assert base64.b64decode(c.kubectl_json("get", "secret", "db")["data"]["password"]) == b"hunter2"
            finally:
                c.stop()
            # a restart with a key that reads none of them, and a KMS v2 plugin for ConfigMaps
            sock = tmp_path / "kms.sock"
            plugin = subprocess.Popen([sys.executable, str(ROOT / "tests" / "apiserver" / "kms_plugin.py"), str(sock)],
                                      stdout=subprocess.PIPE, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
            try:
                assert plugin.stdout.readline().strip() == b"serving"
                kms = {"kms": {"apiVersion": "v2", "name": "plugin", "endpoint": f"unix://{sock}"}}
                other = {"aesgcm": {"keys": [{"name": "other", "secret": key(9)}]}}
                write_config(config, [other], [kms, {"identity": {}}])  # (identity: the ConfigMaps stored before)
                c = start_cluster(d, store, ("--encryption-provider-config", str(config), "--api-workers", "2"))
                try:
                    r = c.kubectl("get", "secret", "db", check=False)
                    assert r.returncode == 1
                    assert r.stderr.strip() == (
                        "Error from server (InternalError): Internal error occurred: StorageError: corrupt object, "
                        "Code: 7, Key: /registry/secrets/default/db, ResourceVersion: 0, AdditionalErrorMsg: data "
                        "from the storage is not transformable")
                    r = c.kubectl("get", "secrets", check=False)
                    assert "unable to transform or decode 2 objects" in r.stderr
                    c.kubectl("create", "configmap", "settings", "--from-literal=token=s3cr3t")
                    stored = raw(c, "/registry/configmaps/default/settings")
                    assert stored.startswith(b"k8s:enc:kms:v2:plugin:") and b"s3cr3t" not in stored
                    assert c.kubectl_json("get", "configmap", "settings")["data"] == {"token": "s3cr3t"}
                    assert c.kubectl("get", "--raw", "/readyz/kms-provider-0").stdout == "ok"
                    wait_for(lambda: "[+]kms-provider-0 ok" in c.kubectl("get", "--raw", "/healthz?verbose").stdout,
                             10, "the verbose healthz")
                finally:
                    c.stop()
            finally:
                plugin.kill()
                plugin.wait()
        finally:
            shutil.rmtree(d, ignore_errors=True)


def test_a_file_that_does_not_validate_stops_up_with_one_line(tmp_path):
    config = tmp_path / "encryption.yaml"
    write_config(config, [{"aescbc": {"keys": [{"name": "short", "secret": base64.b64encode(b"x" * 7).decode()}]}}])
    r = subprocess.run([sys.executable, "-m", "nanokube.cli", "up", "--data-dir", str(tmp_path / "data"), "--port", "0",
                        "--encryption-provider-config", str(config)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert r.stderr.splitlines() == [
        'nanokube: --encryption-provider-config: error while parsing file: '
        'resources[0].providers[0].aescbc.keys[0].secret: Invalid value: "REDACTED": secret is not of the expected '
        'length, got 7, expected one of [16 24 32]']


@pytest.mark.parametrize("gates, answer", [
    ((), "KMSv1 is deprecated and will only receive security updates going forward. Use KMSv2 instead.  Set "
         "--feature-gates=KMSv1=true to use the deprecated KMSv1 feature."),
    (("--feature-gates", "KMSv1=true"), "KMSv1 is deprecated and nanokube does not implement its plugins: use a KMS v2 "
                                        "provider (apiVersion: v2)"),
])
def test_a_kms_v1_provider_is_refused_with_its_gate_off_and_on(tmp_path, gates, answer):
    """KMSv1 is a known gate (deprecated, off): off, upstream's answer; on, the gate is taken with its
    warnings and the provider refused, as nanokube has no v1 plugin client."""
    config = tmp_path / "encryption.yaml"
    write_config(config, [{"kms": {"name": "old", "endpoint": "unix:///nowhere.sock"}}])
    r = subprocess.run([sys.executable, "-m", "nanokube.cli", "up", "--data-dir", str(tmp_path / "data"), "--port", "0",
                        "--encryption-provider-config", str(config), *gates], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert r.stderr.splitlines()[-1] == f"nanokube: --encryption-provider-config: error while building transformers: {answer}"
    assert ("nanokube does not implement these features: KMSv1" in r.stderr) == bool(gates)
