"""Encryption at rest through the API: each provider's stored prefix and ciphertext, reads and
watches in plaintext, the first provider writing and the others reading (key rotation), values
no provider reads answered as corrupt objects, and a KMS v2 plugin over gRPC on a unix socket."""

from __future__ import annotations

import asyncio
import base64
import json
import re
import tempfile

import pytest
import yaml

from nanokube.apiserver.auth.authorizer import Decision
from nanokube.apiserver.encryption.controller import Encryption
from nanokube.apiserver.encryption.corrupt import corrupt_object
from nanokube.apiserver.encryption.options import install
from nanokube.apiserver.encryption.kmsv2 import key_id_hash
from nanokube.apiserver.encryption.proto import kmsv2_pb2 as pb
from nanokube.apiserver.encryption.value import TransformError
from nanokube.machinery import featuregates
from nanokube.machinery.errors import APIError
from nanokube.store.memory import MemoryStore
from tests.apiserver.kms_plugin import ANNOTATION, Plugin
from tests.controllers import make_stack
from tests.node import ManualClock
from tests.served import send, served

SECRET_KEY = "/registry/secrets/default/s1"


def key(n: int, size: int = 32) -> str:
    return base64.b64encode(bytes([n]) * size).decode()


def aes(kind: str, *names_and_keys: tuple[str, str]) -> dict:
    return {kind: {"keys": [{"name": n, "secret": k} for n, k in names_and_keys]}}


def write_config(path, *providers: dict, resources=("secrets",)) -> str:
    path.write_text(yaml.safe_dump({"apiVersion": "apiserver.config.k8s.io/v1", "kind": "EncryptionConfiguration",
                                    "resources": [{"resources": list(resources), "providers": list(providers)}]}))
    return str(path)


class Encrypted:
    """An in-process stack whose store is a MemoryStore under the configuration at `path`."""

    def __init__(self, path: str, mem: MemoryStore | None = None) -> None:
        self.encryption = Encryption(path)
        self.mem = mem or MemoryStore()
        self.store = self.encryption.wrap(self.mem)

    async def __aenter__(self):
        self.mem._data.pop("/registry/namespaces/default", None)  # (make_stack makes it again)
        self.stack = await make_stack(store=self.store)
        self.stack.rest.unreadable, self.stack.rest.stale = self.store.unreadable, self.store.stale
        self.store.watch_cache = self.stack.cache
        self.secrets = self.stack.client.resource("", "v1", "secrets")
        return self

    async def __aexit__(self, *exc) -> None:
        """The server stopped; the memory store stays, for the next one (a restart)."""
        await self.stack.rest.admission.client.close()
        await self.stack.cache.stop()
        self.encryption.resources.close()

    def raw(self, k: str = SECRET_KEY) -> bytes:
        return self.mem._data[k].value


def metrics_of(enc: Encryption) -> dict:
    """The encryption metrics' samples by (name, sorted labels)."""
    return {(m.name, tuple(sorted(m.labels.items()))): m.value
            for family in enc.metrics.registry.collect() for m in family.samples}


def metrics(s: Encrypted) -> dict:
    return metrics_of(s.encryption)


def secret(name: str = "s1", value: bytes = b"hunter2") -> dict:
    return {"metadata": {"name": name, "namespace": "default"}, "data": {"password": base64.b64encode(value).decode()}}


@pytest.mark.parametrize("provider,prefix", [
    (aes("aescbc", ("k1", key(1))), b"k8s:enc:aescbc:v1:k1:"),
    (aes("aesgcm", ("k1", key(1, 16))), b"k8s:enc:aesgcm:v1:k1:"),
    (aes("secretbox", ("k1", key(1))), b"k8s:enc:secretbox:v1:k1:"),
])
async def test_each_provider_stores_its_prefix_and_no_plaintext(tmp_path, provider, prefix):
    async with Encrypted(write_config(tmp_path / "enc.yaml", provider)) as s:
        watch = await s.secrets.watch(namespace="default")
        created = await s.secrets.create(secret(), namespace="default")
        raw = s.raw()
        assert raw.startswith(prefix)
        assert b"hunter2" not in raw and base64.b64encode(b"hunter2") not in raw
        got = await s.secrets.get("s1", namespace="default")
        assert base64.b64decode(got["data"]["password"]) == b"hunter2"
        typ, obj = await asyncio.wait_for(watch.__anext__(), 10)
        assert (typ, obj["metadata"]["name"], obj["data"]) == ("ADDED", "s1", created["data"])
        await watch.aclose()
        items, _ = await s.secrets.list(namespace="default")
        assert [i["data"]["password"] for i in items] == [created["data"]["password"]]
        # a resource the configuration does not name is stored as it was
        await s.stack.client.resource("", "v1", "configmaps").create(
            {"metadata": {"name": "c1", "namespace": "default"}, "data": {"a": "plain"}}, namespace="default")
        assert b'"plain"' in s.raw("/registry/configmaps/default/c1")
        samples = metrics(s)
        assert samples[("apiserver_storage_transformation_operations_total", (
            ("status", "OK"), ("transformation_type", "to_storage"), ("transformer_prefix", prefix[:-3].decode())))] == 1
        assert samples[("apiserver_storage_transformation_duration_seconds_count", (
            ("transformation_type", "to_storage"), ("transformer_prefix", prefix[:-3].decode())))] == 1


async def test_aesgcm_binds_a_value_to_its_key(tmp_path):
    """The key is the authenticated data: a ciphertext copied under another name does not read."""
    async with Encrypted(write_config(tmp_path / "enc.yaml", aes("aesgcm", ("k1", key(1))))) as s:
        await s.secrets.create(secret(), namespace="default")
        t = s.encryption.resources.for_resource("secrets")
        assert t.from_storage(s.raw(), SECRET_KEY.encode())[0].startswith(b"{")
        with pytest.raises(TransformError, match="^cipher: message authentication failed$"):
            t.from_storage(s.raw(), b"/registry/secrets/default/other")


async def test_rotation_new_key_first_then_rewrite_then_drop_the_old(tmp_path):
    path = tmp_path / "enc.yaml"
    mem = MemoryStore()
    async with Encrypted(write_config(path, aes("aescbc", ("old", key(1)))), mem) as s:
        await s.secrets.create(secret(), namespace="default")
        assert s.raw().startswith(b"k8s:enc:aescbc:v1:old:")
    # the new key added first (it writes), the old one kept (it reads), the server restarted
    write_config(path, aes("aescbc", ("new", key(2)), ("old", key(1))))
    async with Encrypted(str(path), mem) as s:
        assert s.raw().startswith(b"k8s:enc:aescbc:v1:old:")
        t = s.encryption.resources.for_resource("secrets")
        assert t.from_storage(s.raw(), SECRET_KEY.encode())[1] is True  # stale: not the writing key's
        # `kubectl get secrets -o json | kubectl replace -f -`: every secret written again
        for item in (await s.secrets.list(namespace="default"))[0]:
            await s.secrets.update(item)
        assert s.raw().startswith(b"k8s:enc:aescbc:v1:new:")
        assert t.from_storage(s.raw(), SECRET_KEY.encode())[1] is False
    # the old key removed: everything still reads
    write_config(path, aes("aescbc", ("new", key(2))))
    async with Encrypted(str(path), mem) as s:
        got = await s.secrets.get("s1", namespace="default")
        assert base64.b64decode(got["data"]["password"]) == b"hunter2"


async def test_identity_first_decrypts_on_the_next_write(tmp_path):
    path = tmp_path / "enc.yaml"
    mem = MemoryStore()
    async with Encrypted(write_config(path, aes("secretbox", ("k", key(3)))), mem) as s:
        await s.secrets.create(secret(), namespace="default")
    write_config(path, {"identity": {}}, aes("secretbox", ("k", key(3))))
    async with Encrypted(str(path), mem) as s:
        item = await s.secrets.get("s1", namespace="default")
        await s.secrets.update(item)
        assert json.loads(s.raw())["data"]["password"] == base64.b64encode(b"hunter2").decode()


async def test_values_no_provider_reads_are_corrupt_objects(tmp_path):
    path = tmp_path / "enc.yaml"
    mem = MemoryStore()
    async with Encrypted(write_config(path, aes("aescbc", ("k1", key(1)))), mem) as s:
        await s.secrets.create(secret("s1"), namespace="default")
        await s.secrets.create(secret("s2"), namespace="default")
    # a configuration that lost the key: the secrets are there but do not read; other resources are unaffected
    write_config(path, aes("aesgcm", ("k2", key(2))))
    async with Encrypted(str(path), mem) as s:
        with pytest.raises(APIError) as e:
            await s.secrets.get("s1", namespace="default")
        assert (e.value.code, e.value.reason, e.value.message) == (
            500, "InternalError", "Internal error occurred: StorageError: corrupt object, Code: 7, Key: "
            "/registry/secrets/default/s1, ResourceVersion: 0, AdditionalErrorMsg: data from the storage is not "
            "transformable")
        with pytest.raises(APIError) as e:
            await s.secrets.list(namespace="default")
        assert (e.value.code, e.value.reason) == (500, "")
        assert e.value.message.startswith("unable to transform or decode 2 objects: {\n\tStorageError: corrupt object, "
                                          "Code: 7, Key: /registry/secrets/default/s1, ")
        assert s.store.unreadable[SECRET_KEY] == "no matching prefix found"
        assert metrics(s)[("apiserver_storage_transformation_operations_total", (
            ("status", "Unknown"), ("transformation_type", "from_storage"), ("transformer_prefix", "unknown")))] == 2
        # a namespace without them lists
        assert (await s.secrets.list(namespace="kube-system"))[0] == []


async def test_identity_refuses_to_read_encrypted_values(tmp_path):
    path = tmp_path / "enc.yaml"
    mem = MemoryStore()
    async with Encrypted(write_config(path, aes("aescbc", ("k1", key(1)))), mem):
        pass
    async with Encrypted(write_config(path, aes("aescbc", ("k1", key(1)))), mem) as s:
        await s.secrets.create(secret(), namespace="default")
    async with Encrypted(write_config(path, {"identity": {}}), mem) as s:
        with pytest.raises(APIError, match="corrupt object"):
            await s.secrets.get("s1", namespace="default")
        assert s.store.unreadable[SECRET_KEY] == "identity transformer tried to read encrypted data"


@pytest.fixture
def plugin():
    with tempfile.TemporaryDirectory(prefix="nanokube-kms-") as d:
        p = Plugin(f"{d}/kms.sock")
        p.start()
        try:
            yield p
        finally:
            p.stop()


def kms(plugin: Plugin, name: str = "vault") -> dict:
    return {"kms": {"apiVersion": "v2", "name": name, "endpoint": "unix://" + plugin.socket_path, "timeout": "2s"}}


async def test_kms_v2_envelope(tmp_path, plugin):
    path = tmp_path / "enc.yaml"
    mem = MemoryStore()
    async with Encrypted(write_config(path, kms(plugin)), mem) as s:
        assert [c.name for c in s.encryption.checks()] == ["kms-provider-0"]
        assert s.encryption.checks()[0].run() is None
        for n in range(3):
            await s.secrets.create(secret(f"s{n}"), namespace="default")
        assert plugin.calls["Encrypt"] == 1  # one seed for every write under one key ID
        raw = s.raw("/registry/secrets/default/s0")
        prefix = b"k8s:enc:kms:v2:vault:"
        assert raw.startswith(prefix) and b"hunter2" not in raw
        obj = pb.EncryptedObject.FromString(raw[len(prefix):])
        assert (obj.keyID, dict(obj.annotations), obj.encryptedDEKSourceType) == (
            "key-1", {ANNOTATION: b"1"}, pb.HKDF_SHA256_XNONCE_AES_GCM_SEED)
        got = await s.secrets.get("s0", namespace="default")
        assert base64.b64decode(got["data"]["password"]) == b"hunter2"
        samples = metrics(s)
        assert samples[("apiserver_envelope_encryption_key_id_hash_total", (
            ("apiserver_id_hash", s.encryption.metrics.id), ("key_id_hash", key_id_hash("key-1")),
            ("provider_name", "vault"), ("transformation_type", "to_storage")))] == 3
        assert samples[("apiserver_envelope_encryption_kms_operations_latency_seconds_count", (
            ("grpc_status_code", "OK"), ("method_name", "Encrypt"), ("provider_name", "vault")))] == 1
        assert samples[("apiserver_envelope_encryption_dek_source_cache_size", (("provider_name", "vault"),))] == 1
    # a restart reads the seed back through the plugin, once
    async with Encrypted(str(path), mem) as s:
        items, _ = await s.secrets.list(namespace="default")
        assert len(items) == 3
        assert plugin.calls["Decrypt"] == 1
        # the plugin's key rotated: the next Status makes a new seed under it
        plugin.rotate("key-2")
        s.encryption.resources.kms[0]._polled = float("-inf")
        await s.secrets.update(items[0])
        raw = s.raw("/registry/secrets/default/s0")
        assert pb.EncryptedObject.FromString(raw[len(b"k8s:enc:kms:v2:vault:"):]).keyID == "key-2"
        plugin.healthy = False
        s.encryption.resources.kms[0]._health = (float("-inf"), None)
        assert s.encryption.checks()[0].run() == ("kmsv2 Provider vault is not healthy, error: got unexpected healthz "
                                                  "status: unhealthy")


async def test_kms_v2_plugin_away(tmp_path, caplog):
    """No plugin on the socket: writes fail as upstream's, with no seed (`got unexpected nil transformer`),
    the poll's log and the health check say why."""
    path = write_config(tmp_path / "enc.yaml", {"kms": {"apiVersion": "v2", "name": "gone",
                                                        "endpoint": f"unix://{tmp_path}/none.sock", "timeout": "1s"}})
    async with Encrypted(path) as s:
        with pytest.raises(APIError) as e:
            await s.secrets.create(secret(), namespace="default")
        assert (e.value.code, e.value.message) == (500, "Internal error occurred: got unexpected nil transformer")
        assert ("kms plugin failed health check probe: failed to perform status section of the healthz check for KMS "
                "Provider gone, error: rpc error: code = Unavailable") in caplog.text
        why = s.encryption.checks()[0].run()
        assert why.startswith("failed to perform status section of the healthz check for KMS Provider gone, error: "
                              "rpc error: code = Unavailable")


async def test_a_seed_whose_key_id_went_unconfirmed_for_3_minutes_stops_writing(tmp_path, plugin):
    """Upstream's kmsv2PluginWriteDEKSourceMaxTTL: a seed writes for 3 minutes past the start of the
    last Status that confirmed its key ID; past that, with the plugin away, every write is refused in
    ValidateEncryptCapability's words (asked again only 10 s after a failed poll) while reads go on;
    once a Status answers again the same seed writes again. A write a minute after the last poll waits
    for the next, so a key the plugin rotated to meanwhile is written under at once."""
    clock = ManualClock()
    encryption = Encryption(write_config(tmp_path / "enc.yaml", kms(plugin)), clock=clock)
    async with served(tmp_path, store=encryption.wrap(MemoryStore()),
                      prepare=lambda server: install(server, encryption)) as (server, api):
        url = "/api/v1/namespaces/default/secrets"
        start = clock.t
        assert (await send(api, "POST", url, secret("s1")))[0] == 201
        plugin.stop()
        await clock.advance(180)
        assert (await send(api, "POST", url, secret("s2")))[0] == 201  # (its key ID poll, due, fails meanwhile)
        await clock.advance(1)
        code, body = await send(api, "POST", url, secret("s3"))
        assert (code, body["message"]) == (500, f'Internal error occurred: encryptedDEKSource with keyID hash '
                                                f'"{key_id_hash("key-1")}" expired at {clock.rfc3339(start + 180)} '
                                                f'(current time is {clock.rfc3339(start + 181)})')
        calls = metrics_of(encryption)[("apiserver_envelope_encryption_kms_operations_latency_seconds_count", (
            ("grpc_status_code", "Unavailable"), ("method_name", "Status"), ("provider_name", "vault")))]
        assert calls == 1
        assert (await send(api, "POST", url, secret("s3")))[0] == 500  # refused at once, the plugin not asked
        assert metrics_of(encryption)[("apiserver_envelope_encryption_kms_operations_latency_seconds_count", (
            ("grpc_status_code", "Unavailable"), ("method_name", "Status"), ("provider_name", "vault")))] == calls
        code, body = await send(api, "GET", url + "/s2")
        assert (code, base64.b64decode(body["data"]["password"])) == (200, b"hunter2")
        plugin.start()
        for _ in range(100):  # until gRPC reconnected (its backoff is real time), a poll each 10 s
            await clock.advance(10)
            if (code := (await send(api, "POST", url, secret("s3")))[0]) == 201:
                break
            await asyncio.sleep(0.05)
        assert code == 201
        assert plugin.calls["Encrypt"] == 1  # the key ID unchanged: the same seed, confirmed again
        # a key the plugin rotated to while the server sat idle: the first write a minute on writes under it
        plugin.rotate("key-2")
        await clock.advance(60)
        assert (await send(api, "POST", url, secret("s4")))[0] == 201
        raw = encryption.store.inner._data["/registry/secrets/default/s4"].value
        assert pb.EncryptedObject.FromString(raw[len(b"k8s:enc:kms:v2:vault:"):]).keyID == "key-2"


async def test_storage_version_migration_rewrites_stale_values(tmp_path):
    """The migrator's empty apply (the object's uid and resourceVersion only) changes nothing, yet writes a
    value stored under a key that no longer writes."""
    path = tmp_path / "enc.yaml"
    mem = MemoryStore()
    async with Encrypted(write_config(path, aes("aesgcm", ("old", key(1)))), mem) as s:
        await s.secrets.create(secret(), namespace="default")
    async with Encrypted(write_config(path, aes("aesgcm", ("new", key(2)), ("old", key(1)))), mem) as s:
        md = (await s.secrets.get("s1", namespace="default"))["metadata"]
        body = {"apiVersion": "v1", "kind": "Secret", "metadata": {"uid": md["uid"], "resourceVersion": md["resourceVersion"]}}
        patched = await s.secrets.patch("s1", json.dumps(body).encode(), "application/apply-patch+yaml",
                                        namespace="default", field_manager="storage-version-migrator-controller")
        assert patched["metadata"]["resourceVersion"] != md["resourceVersion"]
        assert s.raw().startswith(b"k8s:enc:aesgcm:v1:new:")
        # a value already under the writing key is left as it is
        again = await s.secrets.patch("s1", json.dumps({**body, "metadata": {"uid": md["uid"]}}).encode(),
                                      "application/apply-patch+yaml", namespace="default",
                                      field_manager="storage-version-migrator-controller")
        assert again["metadata"]["resourceVersion"] == patched["metadata"]["resourceVersion"]


async def test_a_reload_whose_kms_plugin_is_away_keeps_the_last_good_configuration(tmp_path, plugin):
    path = tmp_path / "enc.yaml"
    write_config(path, aes("aescbc", ("k1", key(1))))
    enc = Encryption(str(path), reload=True)
    store = enc.wrap(MemoryStore())
    assert [c.name for c in enc.checks()] == ["kms-providers"]
    first = enc.resources
    write_config(path, {"kms": {"apiVersion": "v2", "name": "away", "endpoint": f"unix://{tmp_path}/none.sock",
                                "timeout": "1s"}})
    enc.reload()
    assert enc.resources is first and store.resources is first
    assert metrics_of(enc)[("apiserver_encryption_config_controller_automatic_reloads_total", (
        ("apiserver_id_hash", enc.metrics.id), ("status", "failure")))] == 1
    # a healthy plugin's configuration is taken, and its check joins kms-providers
    write_config(path, kms(plugin), aes("aescbc", ("k1", key(1))))
    enc.reload()
    assert store.resources is enc.resources is not first and len(enc.resources.kms) == 1
    assert enc.checks()[0].run() is None
    await store.create(SECRET_KEY, b'{"kind":"Secret"}')
    assert store.inner._data[SECRET_KEY].value.startswith(b"k8s:enc:kms:v2:vault:")
    enc.resources.close()


async def test_a_watched_value_another_server_encrypted_is_a_corrupt_object_not_data(tmp_path):
    """Two API servers over one store while only one has a resource's key (workers between their
    reloads of the file): the other's watch cache is handed the value it cannot read as what it is,
    a corrupt object (as upstream's identity transformer refuses `k8s:enc:` data), never the ciphertext
    as the object."""
    mem = MemoryStore()
    async with Encrypted(write_config(tmp_path / "a.yaml", aes("aescbc", ("k1", key(1)))), mem) as a, \
            Encrypted(write_config(tmp_path / "b.yaml", aes("aescbc", ("k1", key(1))), resources=("configmaps",)), mem) as b:
        await a.secrets.create(secret(), namespace="default")
        assert a.raw().startswith(b"k8s:enc:aescbc:v1:k1:")
        for _ in range(200):  # until b's watch cache took the event
            if SECRET_KEY in b.store.unreadable:
                break
            await asyncio.sleep(0.01)
        assert b.store.unreadable[SECRET_KEY] == "identity transformer tried to read encrypted data"
        with pytest.raises(APIError) as e:
            await b.secrets.get("s1", namespace="default")
        assert (e.value.code, "corrupt object" in e.value.message) == (500, True)
        with pytest.raises(APIError, match="corrupt object"):
            await b.secrets.list(namespace="default")
        assert (await a.secrets.get("s1", namespace="default"))["data"] == secret()["data"]



class Deny:
    """An authorizer that allows everything but the unsafe delete."""

    def __init__(self) -> None:
        self.asked = []

    def authorize(self, user, groups, a):
        self.asked.append(a)
        return Decision(a.verb != "unsafe-delete-ignore-read-errors", "no RBAC rule")


async def test_a_secret_whose_key_was_dropped_is_deleted_unread_with_the_option(tmp_path, monkeypatch):
    """KEP-3926 over HTTP: a Secret no provider reads answers the corrupt-object error to a plain delete;
    with ignoreStoreReadErrorWithClusterBreakingPotential (and the unsafe-delete verb) it goes, unread.
    The option beside what an unread object cannot honour is invalid, on a readable object it is
    refused, with the gate off it is ignored, and a dry run leaves the object."""
    path = tmp_path / "enc.yaml"
    mem = MemoryStore()
    async with Encrypted(write_config(path, aes("aescbc", ("k1", key(1)))), mem) as s:
        await s.secrets.create(secret("s1"), namespace="default")
        await s.secrets.create(secret("fine"), namespace="default")
    write_config(path, aes("aescbc", ("k2", key(2)), ("k0", key(1, 16))))  # k1 dropped: s1 and fine unread
    encryption = Encryption(str(path))
    store = encryption.wrap(mem)
    async with served(tmp_path, store=store, prepare=lambda server: install(server, encryption)) as (server, api):
        url, unsafe = "/api/v1/namespaces/default/secrets/", {"ignoreStoreReadErrorWithClusterBreakingPotential": True}
        code, body = await send(api, "DELETE", url + "s1")
        assert (code, body["message"]) == (500, "Internal error occurred: StorageError: corrupt object, Code: 7, Key: "
                                           "/registry/secrets/default/s1, ResourceVersion: 0, AdditionalErrorMsg: data "
                                           "from the storage is not transformable")
        code, body = await send(api, "DELETE", url + "s1", {**unsafe, "gracePeriodSeconds": 0})
        assert (code, body["message"]) == (422, 'DeleteOptions.meta.k8s.io "" is invalid: ignoreStoreReadErrorWith'
                                           "ClusterBreakingPotential: Invalid value: true: cannot be set together with "
                                           ".gracePeriodSeconds")
        assert (await send(api, "POST", url, secret("readable")))[0] == 201
        code, body = await send(api, "DELETE", url + "readable", unsafe)
        assert (code, body["message"]) == (422, 'secrets "readable" is invalid: ignoreStoreReadErrorWithCluster'
                                           "BreakingPotential: Invalid value: true: is exclusively used to delete "
                                           "corrupt object(s), try again by removing this option")
        server.rest.admission.authorizer = deny = Deny()
        code, body = await send(api, "DELETE", url + "s1", unsafe)
        assert (code, body["message"]) == (403, 'secrets "s1" is forbidden: not permitted to do '
                                           '"unsafe-delete-ignore-read-errors", reason: no RBAC rule')
        assert [(a.verb, a.resource, a.namespace, a.name) for a in deny.asked] == [
            ("unsafe-delete-ignore-read-errors", "secrets", "default", "s1")]
        server.rest.admission.authorizer = server.authorizer
        monkeypatch.setattr(featuregates, "GATES", featuregates.FeatureGates({"AllowUnsafeMalformedObjectDeletion": False}))
        assert (await send(api, "DELETE", url + "s1", unsafe))[0] == 500  # the gate off: the option is ignored
        monkeypatch.undo()
        assert (await send(api, "DELETE", url + "s1", {**unsafe, "dryRun": ["All"]}))[0] == 200
        assert SECRET_KEY in mem._data
        code, body = await send(api, "DELETE", url + "s1", unsafe)
        assert (code, body["status"], body["details"]["name"]) == (200, "Success", "s1")
        assert SECRET_KEY not in mem._data
        for _ in range(200):  # until the watch cache took the delete
            if SECRET_KEY not in store.unreadable:
                break
            await asyncio.sleep(0.01)
        assert (await send(api, "GET", url + "s1"))[0] == 404
        code, body = await send(api, "GET", url)  # the other unread one still fails the list
        assert (code, body["message"].count("corrupt object")) == (500, 1)
        assert "/registry/secrets/default/fine" in body["message"]


async def fetched(api, path: str) -> tuple[int, str]:
    """A GET's code and text (a health endpoint's answer is no JSON), in a worker thread."""
    def get():
        r = api.rest_client.pool_manager.request("GET", api.configuration.host + path)
        return r.status, r.data.decode()
    return await asyncio.to_thread(get)


async def test_a_kms_plugin_that_holds_its_answer_holds_only_the_requests_that_need_it(tmp_path, plugin):
    """The plugin's calls run off the event loop: while it holds the first seed's Encrypt, and then
    a health check's Status, other requests are served; a plugin that answers past the provider's
    timeout (1s here) is a failed check with gRPC's DeadlineExceeded, as upstream's call deadline."""
    encryption = Encryption(write_config(tmp_path / "enc.yaml", {"kms": {**kms(plugin)["kms"], "timeout": "1s"}}))
    async with served(tmp_path, store=encryption.wrap(MemoryStore()),
                      prepare=lambda server: install(server, encryption)) as (server, api):
        url = "/api/v1/namespaces/default/secrets"
        plugin.answering.clear()
        create = asyncio.ensure_future(send(api, "POST", url, secret("s1")))
        for _ in range(200):  # until the write asked the plugin
            if encryption.resources.kms[0]._polling is not None:
                break
            await asyncio.sleep(0.01)
        assert (await send(api, "GET", "/api/v1/namespaces/default"))[0] == 200
        assert not create.done()
        plugin.answering.set()
        code, body = await create
        assert code == 201 and plugin.calls["Encrypt"] == 1
        plugin.answering.clear()
        encryption.resources.kms[0]._health = (float("-inf"), None)  # (the write's probe answered it)
        health = asyncio.ensure_future(fetched(api, "/readyz/kms-provider-0"))
        for _ in range(200):  # until the check asked the plugin
            if encryption.resources.kms[0]._checking is not None:
                break
            await asyncio.sleep(0.01)
        assert (await send(api, "GET", url + "/s1"))[0] == 200
        assert not health.done()
        code, text = await health  # the plugin still holding its answer past the call's deadline
        plugin.answering.set()
        assert (code, text) == (500, "internal server error: failed to perform status section of the healthz check "
                                     "for KMS Provider vault, error: rpc error: code = DeadlineExceeded desc = Deadline "
                                     "Exceeded\n")
        encryption.resources.kms[0]._health = (float("-inf"), None)
        assert await fetched(api, "/readyz/kms-provider-0") == (200, "ok")


@pytest.mark.parametrize("fault, failed", [
    ("no key", "failed to encrypt DEK, error: rpc error: code = Unknown desc = Exception calling application: 'key-2'"),
    ("annotations", 'failed to validate annotations: [annotations: Invalid value: "Kms.io": a lowercase RFC 1123 '
                    "subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end "
                    "with an alphanumeric character (e.g. 'example.com', regex used for validation is "
                    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*'), annotations: Invalid "
                    'value: "panda": should be a domain with at least two segments separated by dots]'),
])
async def test_a_key_id_the_plugin_cannot_encrypt_under_keeps_the_old_seed_and_fails_the_check(tmp_path, plugin, fault,
                                                                                               failed):
    """Upstream's rotateDEKOnKeyIDChange: a Status naming a new key ID whose Encrypt fails, or answers
    what ValidateEncryptedObject refuses, keeps the seed that writes (until its expiry) and fails the
    health check in upstream's words."""
    encryption = Encryption(write_config(tmp_path / "enc.yaml", kms(plugin)))
    async with served(tmp_path, store=encryption.wrap(MemoryStore()),
                      prepare=lambda server: install(server, encryption)) as (server, api):
        url = "/api/v1/namespaces/default/secrets"
        assert (await send(api, "POST", url, secret("s1")))[0] == 201
        plugin.rotate("key-2")
        if fault == "no key":
            del plugin.keys["key-2"]
        else:
            plugin.annotations = {"panda": b"", "Kms.io": b""}
        envelope = encryption.resources.kms[0]
        envelope._health = (float("-inf"), None)
        code, text = await fetched(api, "/readyz/kms-provider-0")
        assert code == 500
        assert re.fullmatch(
            r'internal server error: kmsv2 Provider vault is not healthy, error: failed to rotate DEK uid="[-0-9a-f]{36}", '
            r"useSeed=true, errState=<nil>, errGen=" + re.escape(failed) + ", "
            f'statusKeyIDHash="{key_id_hash("key-2")}", encryptKeyIDHash="", stateKeyIDHash="{key_id_hash("key-1")}", '
            r"expirationTimestamp=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\n", text), text
        assert (await send(api, "POST", url, secret("s2")))[0] == 201  # under key-1's seed still
        raw = encryption.store.inner._data["/registry/secrets/default/s2"].value
        assert pb.EncryptedObject.FromString(raw[len(b"k8s:enc:kms:v2:vault:"):]).keyID == "key-1"


@pytest.mark.parametrize("store", [MemoryStore, "Streamed"])
async def test_a_reload_that_makes_unread_values_readable_relists_the_watch_cache(tmp_path, store):
    """As upstream's cacher relists until its values read: once the reloaded configuration has the key
    back, the Secret that did not read is served again, by name and in the list (after the next
    change where the watch cache streams the store's changes)."""
    path = tmp_path / "enc.yaml"
    mem = Streamed() if store == "Streamed" else store()
    async with Encrypted(write_config(path, aes("aescbc", ("k1", key(1)))), mem) as s:
        await s.secrets.create(secret("s1"), namespace="default")
    write_config(path, aes("aescbc", ("k2", key(2))))  # k1 lost
    encryption = Encryption(str(path), reload=True)
    async with served(tmp_path, store=encryption.wrap(mem),
                      prepare=lambda server: install(server, encryption)) as (server, api):
        url = "/api/v1/namespaces/default/secrets"
        assert (await send(api, "GET", url + "/s1"))[0] == 500
        assert (await send(api, "POST", url, secret("s2")))[0] == 201
        write_config(path, aes("aescbc", ("k2", key(2)), ("k1", key(1))))
        encryption.reload()
        assert (await send(api, "POST", url, secret("s3")))[0] == 201
        for _ in range(200):  # until the watch cache relisted
            if (await send(api, "GET", url + "/s1"))[0] == 200:
                break
            await asyncio.sleep(0.01)
        code, body = await send(api, "GET", url + "/s1")
        assert (code, base64.b64decode(body["data"]["password"])) == (200, b"hunter2")
        code, body = await send(api, "GET", url)
        assert (code, [i["metadata"]["name"] for i in body["items"]]) == (200, ["s1", "s2", "s3"])
        assert encryption.store.unreadable == {}
        assert (await send(api, "POST", url, secret("s4")))[0] == 201  # and it follows the store again
        for _ in range(200):
            if len((await send(api, "GET", url))[1]["items"]) == 4:
                break
            await asyncio.sleep(0.01)
        assert [i["metadata"]["name"] for i in (await send(api, "GET", url))[1]["items"]] == ["s1", "s2", "s3", "s4"]


async def test_a_watched_value_that_no_longer_reads_leaves_the_watch_cache_and_relists_its_resource_alone(tmp_path):
    """Upstream's cacher meets a watched value it cannot decrypt as an error and relists, so no reader
    is served the value it replaced as if current. Server b (key k1 alone) caches s1; server a, whose
    key k2 writes, rewrites it. b then answers s1, and its list, with the corrupt-object error (before:
    the old plaintext), its secrets watch ends and resumes only as 410 Expired, its configmaps watch
    goes on; its reload with k2 relists secrets alone, and s1 is served as a wrote it."""
    mem = MemoryStore()
    path_b = write_config(tmp_path / "b.yaml", aes("aescbc", ("k1", key(1))))
    encryption = Encryption(path_b, reload=True)

    def watch(api, path: str, first_only: bool) -> list[dict]:
        r = api.rest_client.pool_manager.request("GET", api.configuration.host + path, preload_content=False,
                                                 timeout=60)
        events = []
        for line in r:  # (to the end of the stream)
            events.append(json.loads(line))
            if first_only:
                break
        r.release_conn()
        return events

    async with Encrypted(write_config(tmp_path / "a.yaml", aes("aescbc", ("k2", key(2)), ("k1", key(1)))), mem) as a, \
            served(tmp_path, store=encryption.wrap(mem), prepare=lambda server: install(server, encryption)) as (server, b):
        url = "/api/v1/namespaces/default/secrets"
        assert (await send(b, "POST", url, secret("s1")))[0] == 201
        rv = (await send(b, "GET", url + "/s1"))[1]["metadata"]["resourceVersion"]
        watching = server.cache.watcher_count  # (the server's own)
        secrets = asyncio.ensure_future(asyncio.to_thread(watch, b, f"{url}?watch=1&resourceVersion={rv}", False))
        configmaps = asyncio.ensure_future(asyncio.to_thread(
            watch, b, f"/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={rv}", True))
        for _ in range(500):  # until both watches started and a's list shows s1
            if server.cache.watcher_count == watching + 2 and (await a.secrets.list(namespace="default"))[0]:
                break
            await asyncio.sleep(0.01)
        s1 = await a.secrets.get("s1", namespace="default")
        await a.secrets.update({**s1, "data": {"password": base64.b64encode(b"rotated").decode()}})
        assert a.raw().startswith(b"k8s:enc:aescbc:v1:k2:")
        for _ in range(200):  # until b's watch cache met the value it cannot read
            if (await send(b, "GET", url + "/s1"))[0] != 200:
                break
            await asyncio.sleep(0.01)
        code, body = await send(b, "GET", url + "/s1")
        assert (code, body["message"]) == (500, "Internal error occurred: " + corrupt_object(SECRET_KEY))
        assert (await send(b, "GET", url))[0] == 500
        assert await asyncio.wait_for(secrets, 30) == []  # ended, the rewrite never shown as the old value
        resumed = await asyncio.to_thread(watch, b, f"{url}?watch=1&resourceVersion={rv}", True)
        assert [(e["type"], e["object"]["code"], e["object"]["reason"]) for e in resumed] == [("ERROR", 410, "Expired")]
        assert not configmaps.done()
        write_config(tmp_path / "b.yaml", aes("aescbc", ("k1", key(1)), ("k2", key(2))))
        encryption.reload()
        for _ in range(200):  # until b relisted secrets
            if (await send(b, "GET", url + "/s1"))[0] == 200:
                break
            await asyncio.sleep(0.01)
        code, body = await send(b, "GET", url + "/s1")
        assert (code, base64.b64decode(body["data"]["password"])) == (200, b"rotated")
        assert [i["metadata"]["name"] for i in (await send(b, "GET", url))[1]["items"]] == ["s1"]
        assert not configmaps.done()  # the relist was secrets' alone
        assert (await send(b, "POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "c"}}))[0] == 201
        got = await asyncio.wait_for(configmaps, 30)
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in got] == [("ADDED", "c")]


async def test_a_watched_value_whose_seed_the_plugin_failed_is_served_once_it_answers_again(tmp_path, plugin):
    """The watch cache relists a resource whose watched value did not read, backing off, as upstream's
    reflector retries its relist: a plugin that could not decrypt the other server's seed for a while
    leaves that Secret a corrupt object only until it answers again."""
    mem = MemoryStore()
    config = write_config(tmp_path / "enc.yaml", {"kms": {**kms(plugin)["kms"], "timeout": "30s"}})  # (a loaded CI)
    async with Encrypted(config, mem) as a, Encrypted(config, mem) as b:
        await a.encryption.resources.kms[0].ready()  # a's seed, made while the plugin has its key
        held = plugin.keys.pop("key-1")  # (the plugin loses its key encryption key for a while)
        await a.secrets.create(secret("s1"), namespace="default")
        for _ in range(500):  # until b's watch met a's write, whose seed the plugin could not decrypt
            if SECRET_KEY in b.store.unreadable:
                break
            await asyncio.sleep(0.01)
        with pytest.raises(APIError, match="corrupt object"):
            await b.secrets.get("s1", namespace="default")
        plugin.keys["key-1"] = held
        for _ in range(500):  # until b's relist, after its backoff, read it
            if SECRET_KEY not in b.store.unreadable:
                break
            await asyncio.sleep(0.01)
        got = await b.secrets.get("s1", namespace="default")
        assert base64.b64decode(got["data"]["password"]) == b"hunter2"
        assert [s["metadata"]["name"] for s in (await b.secrets.list(namespace="default"))[0]] == ["s1"]


class Streamed(MemoryStore):
    """A store whose events come only through its change stream (etcd's way)."""

    def follow(self, from_revision, apply, lost=None):
        return None


@pytest.mark.parametrize("store", [MemoryStore, Streamed])
async def test_a_watched_value_under_another_servers_seed_is_decrypted_off_the_loop(tmp_path, plugin, store):
    """Two API servers over one store and one plugin, each with its own seed: the second's watch asks
    the plugin for the first's seed in a worker thread (a store that hands its commits to the watch
    cache hands this one over to its change stream), so while the plugin holds its answer the event
    loop is free, and once it answers the Secret is served there."""
    mem = store()
    config = write_config(tmp_path / "enc.yaml", {"kms": {**kms(plugin)["kms"], "timeout": "30s"}})  # (a loaded CI)
    async with Encrypted(config, mem) as a, Encrypted(config, mem) as b:
        await b.secrets.create(secret("mine"), namespace="default")  # b's seed, which a's watch decrypts
        await a.encryption.resources.kms[0].ready()  # a's seed, made before the plugin holds
        for _ in range(500):  # until a's watch cache took b's write (the plugin decrypted b's seed)
            if (await a.secrets.list(namespace="default"))[0]:
                break
            await asyncio.sleep(0.01)
        plugin.answering.clear()
        await a.secrets.create(secret("theirs"), namespace="default")
        await asyncio.sleep(0.05)  # b's watch is asking the plugin for a's seed
        # the loop both servers share is free: a answers (b's reads wait for its watch cache to catch up)
        assert (await a.secrets.get("theirs", namespace="default"))["metadata"]["name"] == "theirs"
        assert plugin.calls["Decrypt"] == 1
        plugin.answering.set()
        for _ in range(200):  # until b's watch cache took a's write
            if len((await b.secrets.list(namespace="default"))[0]) == 2:
                break
            await asyncio.sleep(0.01)
        got = await b.secrets.get("theirs", namespace="default")
        assert base64.b64decode(got["data"]["password"]) == b"hunter2"
        assert plugin.calls["Decrypt"] == 2  # each server's seed, once by the other
