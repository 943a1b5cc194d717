"""Encryption at rest as the server runs it: the configuration loaded, the store wrapped, the KMS
health checks, and with --encryption-provider-config-automatic-reload the file read again as it
changes (upstream's encryptionconfig controller): a text that loads, and whose KMS providers are
healthy, replaces the transformers; any other is logged and counted and the last good one stays.

Its metrics are upstream's: apiserver_storage_transformation_* (each value transformed, by
direction and provider prefix), apiserver_envelope_encryption_* (the KMS v2 plugins' calls, seeds
and key IDs), apiserver_encryption_config_controller_* (the reloads)."""

from __future__ import annotations

import asyncio
import hashlib
import logging
from functools import partial

from prometheus_client import CollectorRegistry

from ...clock import REAL, Clock
from ...machinery.metrics import Family
from ..auth.config_reload import ReloadedConfig, read_text
from ..healthz import Check
from . import config as encryption_config
from .config import ConfigError, Resources
from .kmsv2 import Envelope, key_id_hash
from .store import EncryptedStore

log = logging.getLogger(__name__)

_TRANSFORM_BUCKETS = tuple(5e-6 * 2 ** i for i in range(25))
_KMS_BUCKETS = tuple(1e-4 * 2 ** i for i in range(15))


def _id_hash(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


class EncryptionMetrics:
    def __init__(self, apiserver_id: str) -> None:
        self.registry = r = CollectorRegistry()
        self.id = _id_hash(apiserver_id)
        self.operations = Family("counter", "apiserver_storage_transformation_operations_total",
                                 "[ALPHA] Total number of transformations. Successful transformation will have a "
                                 "status 'OK' and a varied status string when the transformation fails.",
                                 ["transformation_type", "transformer_prefix", "status"], r)
        self.durations = Family("histogram", "apiserver_storage_transformation_duration_seconds",
                                "[ALPHA] Latencies in seconds of value transformation operations.",
                                ["transformation_type", "transformer_prefix"], r, _TRANSFORM_BUCKETS)
        self.kms_latency = Family("histogram", "apiserver_envelope_encryption_kms_operations_latency_seconds",
                                  "[ALPHA] KMS operation duration with gRPC error code status total.",
                                  ["provider_name", "method_name", "grpc_status_code"], r, _KMS_BUCKETS)
        self.seed_cache = Family("gauge", "apiserver_envelope_encryption_dek_source_cache_size",
                                 "[ALPHA] Number of records in data encryption key (DEK) source cache. On a restart, "
                                 "this value is an approximation of the number of decrypt RPC calls the server will "
                                 "make to the KMS plugin.", ["provider_name"], r)
        self.key_ids = Family("counter", "apiserver_envelope_encryption_key_id_hash_total",
                              "[ALPHA] Number of times a keyID is used split by transformation type, provider, and "
                              "apiserver identity.", ["transformation_type", "provider_name", "key_id_hash",
                                                      "apiserver_id_hash"], r)
        self.invalid_key_ids = Family("counter", "apiserver_envelope_encryption_invalid_key_id_from_status_total",
                                      "[ALPHA] Number of times an invalid keyID is returned by the Status RPC call "
                                      "split by error.", ["provider_name", "error"], r)
        self.reloads = Family("counter", "apiserver_encryption_config_controller_automatic_reloads_total",
                              "[BETA] Total number of reload successes and failures of encryption configuration "
                              "split by apiserver identity.", ["status", "apiserver_id_hash"], r)
        self.reload_time = Family("gauge", "apiserver_encryption_config_controller_automatic_reload_last_timestamp_seconds",
                                  "[BETA] Timestamp of the last successful or failed automatic reload of encryption "
                                  "configuration split by apiserver identity.", ["status", "apiserver_id_hash"], r)
        self.config_info = Family("gauge", "apiserver_encryption_config_controller_last_config_info",
                                  "[ALPHA] Information about the last applied encryption configuration with hash as "
                                  "label, split by apiserver identity.", ["apiserver_id_hash", "hash"], r)

    def transformation(self, direction: str, prefix: bytes | None, seconds: float, failed: bool) -> None:
        """One value transformed (value.PrefixTransformers' `observe`): `prefix` None where none matched."""
        label = "unknown" if prefix is None else prefix.decode() if prefix else "identity"
        self.operations.labels(direction, label, "Unknown" if failed else "OK").inc()
        self.durations.labels(direction, label).observe(seconds)

    def kms_call(self, provider: str, method: str, code: str, seconds: float) -> None:
        self.kms_latency.labels(provider, method, code).observe(seconds)

    def seeds(self, provider: str, n: int) -> None:
        self.seed_cache.labels(provider).set(n)

    def key_id_used(self, provider: str, direction: str, key_id: str) -> None:
        self.key_ids.labels(direction, provider, key_id_hash(key_id), self.id).inc()

    def invalid_key_id(self, provider: str, error: str) -> None:
        self.invalid_key_ids.labels(provider, error).inc()

    def applied(self, digest: str) -> None:
        self.config_info.reset()
        self.config_info.labels(self.id, "sha256:" + digest).set(1)

    def reloaded(self, ok: bool, now: float) -> None:
        status = "success" if ok else "failure"
        self.reloads.labels(status, self.id).inc()
        self.reload_time.labels(status, self.id).set(now)


class Encryption(ReloadedConfig):
    """--encryption-provider-config's file at `path` loaded (ConfigError, in upstream's words, where
    it does not); `reload`: --encryption-provider-config-automatic-reload."""

    what = "encryption provider"

    def __init__(self, path: str, reload: bool = False, clock: Clock = REAL, apiserver_id: str = "") -> None:
        metrics = EncryptionMetrics(apiserver_id)
        self.reload_enabled = reload
        self._kms = partial(Envelope, clock=clock, metrics=metrics)
        resources = encryption_config.load(path, reload, metrics.transformation, self._kms)
        try:
            text = read_text(path)
        except OSError as e:  # (gone since it loaded)
            raise ConfigError(f"error while parsing file: {e}") from None
        super().__init__(path, text, clock, metrics)
        metrics.applied(resources.digest)
        self.resources = resources
        self.store: EncryptedStore | None = None

    def wrap(self, store) -> EncryptedStore:
        self.store = EncryptedStore(store, self.resources)
        return self.store

    def checks(self) -> list[Check]:
        """The health checks of the KMS providers: with reloads one, kms-providers, over whichever the
        configuration has now; without, kms-provider-N for each."""
        if self.reload_enabled:
            return [Check("kms-providers", self._all_healthy, self._refresh_all)]
        return [Check(f"kms-provider-{i}", k.check, k.refresh) for i, k in enumerate(self.resources.kms)]

    async def _refresh_all(self) -> None:
        await asyncio.gather(*(k.refresh() for k in self.resources.kms))

    def _all_healthy(self) -> str | None:
        problems = [why for k in self.resources.kms if (why := k.check())]
        return "; ".join(problems) or None

    def start(self) -> None:
        if self.reload_enabled:
            super().start()

    def build(self, text: str) -> Resources:
        data = text.encode("utf-8", "surrogateescape")
        if not data:
            raise ConfigError(f'encryption provider configuration file "{self.path}" is empty')
        resources = encryption_config.from_data(data, self.path, True, self.metrics.transformation, self._kms)
        for k in resources.kms:
            if why := k.check():
                resources.close()
                raise ConfigError(why)
        return resources

    def apply(self, resources: Resources) -> None:
        old, self.resources = self.resources, resources
        if self.store is not None:
            self.store.resources = resources
        self.metrics.applied(resources.digest)
        old.close()
