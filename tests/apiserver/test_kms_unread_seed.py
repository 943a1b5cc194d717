"""KMS v2: a seed the plugin would not decrypt, as a list meets it under several values. The store
asks the plugin in a worker thread before it reads (3ee43c3f), once a read; every value under a
failed seed must answer that failure, not ask the plugin again, on the event loop or in a thread."""

from __future__ import annotations

import json
import tempfile

import yaml

from nanokube.apiserver.encryption.controller import Encryption
from nanokube.store.memory import MemoryStore
from tests.apiserver.kms_plugin import Plugin


async def test_a_list_under_a_seed_the_plugin_refuses_asks_it_once_in_a_thread(tmp_path):
    with tempfile.TemporaryDirectory(prefix="nanokube-kms-") as d:
        plugin = Plugin(f"{d}/kms.sock")
        plugin.start()
        try:
            config = tmp_path / "enc.yaml"
            config.write_text(yaml.safe_dump({
                "apiVersion": "apiserver.config.k8s.io/v1", "kind": "EncryptionConfiguration",
                "resources": [{"resources": ["secrets"], "providers": [{"kms": {
                    "apiVersion": "v2", "name": "vault", "endpoint": "unix://" + plugin.socket_path}}]}]}))
            mem = MemoryStore()
            writer = Encryption(str(config)).wrap(mem)
            for n in range(3):
                await writer.create(f"/registry/secrets/default/s{n}", json.dumps(
                    {"kind": "Secret", "apiVersion": "v1", "metadata": {"name": f"s{n}", "namespace": "default"}}).encode())
            plugin.keys.clear()  # the key encryption key is gone: Decrypt fails
            reader = Encryption(str(config)).wrap(mem)  # another server: the seed unseen
            before = plugin.calls["Decrypt"]
            kvs, _ = await reader.list("/registry/secrets/")
            assert kvs == []
            assert sorted(reader.unreadable) == [f"/registry/secrets/default/s{n}" for n in range(3)]
            assert all("failed to decrypt DEK" in why for why in reader.unreadable.values())
            # one Decrypt for the seed, from the store's worker thread; none again on the reads
            assert plugin.calls["Decrypt"] - before == 1
        finally:
            plugin.stop()
