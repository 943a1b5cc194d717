"""A KMS v2 provider (storage/value/encrypt/envelope/kmsv2): envelope encryption through a plugin
that holds the key encryption key and answers Status, Encrypt and Decrypt over gRPC on a unix
socket. The API server makes a random 32-byte seed, has the plugin encrypt it once, and encrypts
each value with AES-GCM under a key derived from the seed and 32 random bytes (HKDF-SHA256, so no
nonce repeats however many writes); the value is stored as an EncryptedObject holding the data,
the plugin's key_id and annotations and the encrypted seed. A Status whose key_id changed makes a
new seed; a read asks the plugin to decrypt a seed it has not seen, then keeps it.

The plugin is called in worker threads, each call bounded by the provider's timeout (3 s unless
the configuration says), so a slow or hung plugin holds the request that needs it and not the
event loop: a write waits for the key ID poll once a minute (`ready`); a health check's Status is
awaited before it answers (`refresh`); the store asks for the seeds a get, a list or its watch
needs before it reads (`unseen`, `learn`).

A seed writes for 3 minutes past the start of the last Status that confirmed its key ID (a key ID
poll or a health check; upstream's kmsv2PluginWriteDEKSourceMaxTTL), so a plugin whose key moved
on while it cannot be asked does not leave values written under the old key for ever: past that
every write fails, in upstream's words, until a Status succeeds again; reads of values under any
seed go on. Upstream polls every minute in the background; nanokube asks on demand, at the first
write a minute after the last poll (10 s after a failed one)."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import threading
import uuid
from dataclasses import dataclass

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDFExpand
from google.protobuf.message import DecodeError

from ...clock import REAL, Clock
from ...machinery.validation import fully_qualified_domain_name
from .proto import kmsv2_pb2 as pb
from .value import AESGCM, TransformError

log = logging.getLogger(__name__)

SERVICE = "v2.KeyManagementService"
#: the plugin API version a healthy plugin's Status reports (v2beta1's is still taken)
API_VERSION = "v2"
_API_VERSIONS = (API_VERSION, "v2beta1")
#: Go's zero time.Time as RFC 3339 (an expiry where there is no seed)
_ZERO_TIME = "0001-01-01T00:00:00Z"
SEED_SIZE = 32
_INFO_SIZE = 32
_MAX_SIZE = 1024
_MAX_ANNOTATIONS = 32 * 1024
#: how often a write asks the plugin's Status whether its key_id moved on (upstream's key ID poll)
STATUS_EVERY = 60.0
#: how long a seed writes after the Status that last confirmed its key ID began
WRITE_SEED_TTL = 180.0
#: how soon a write whose seed expired asks again after a failed key ID poll (upstream's fast poll)
_RETRY_AFTER = 10.0
#: how long a health check's answer stands, healthy and not
_HEALTHY_TTL, _UNHEALTHY_TTL = 20.0, 3.0


def rpc_error(e: Exception) -> str:
    """A failed call as a Go gRPC client's error reads."""
    code = getattr(e, "code", None)
    if callable(code):
        name = "".join(w.title() for w in code().name.split("_"))
        return f"rpc error: code = {name} desc = {e.details()}"
    return str(e)


class ExtendedNonceGCM:
    """AES-GCM under a key derived per write: HKDF-Expand(SHA-256, seed, info) with 32 random bytes
    of info stored before the GCM output."""

    def __init__(self, seed: bytes) -> None:
        self._seed = seed

    def _gcm(self, info: bytes) -> AESGCM:
        return AESGCM(HKDFExpand(hashes.SHA256(), 32, info).derive(self._seed))

    def from_storage(self, data: bytes, key: bytes) -> tuple[bytes, bool]:
        if len(data) < _INFO_SIZE:
            raise TransformError("the stored data was shorter than the required size")
        return self._gcm(data[:_INFO_SIZE]).from_storage(data[_INFO_SIZE:], key)

    def to_storage(self, data: bytes, key: bytes) -> bytes:
        info = os.urandom(_INFO_SIZE)
        return info + self._gcm(info).to_storage(data, key)


@dataclass(frozen=True, slots=True)
class _State:
    """What writes use now: the seed's transformer and the EncryptedObject fields stored with it."""

    transformer: ExtendedNonceGCM
    key_id: str
    encrypted_seed: bytes
    annotations: dict[str, bytes]


def key_id_hash(key_id: str) -> str:
    return "sha256:" + hashlib.sha256(key_id.encode()).hexdigest()


def _hash_if(key_id: str) -> str:
    """GetHashIfNotEmpty: the key ID's hash, "" for none."""
    return key_id_hash(key_id) if key_id else ""


def _validate_annotations(annotations) -> None:
    """validateAnnotations' checks, in its words: each key a fully qualified domain name, keys and
    values 32 KiB at most together (the keys in order: Go's map gives them in any)."""
    errs = [str(e) for k in sorted(annotations) for e in fully_qualified_domain_name(k, "annotations")]
    size = sum(len(k) + len(v) for k, v in annotations.items())
    if size > _MAX_ANNOTATIONS:
        errs.append(f"total size of annotations is {size}, which exceeds the max size of {_MAX_ANNOTATIONS}")
    if errs:
        errs = list(dict.fromkeys(errs))
        raise TransformError("failed to validate annotations: " + (errs[0] if len(errs) == 1 else
                                                                   "[" + ", ".join(errs) + "]"))


def _key_id_error(key_id: str) -> str | None:
    """ValidateKeyID's refusal of a key ID."""
    if not key_id:
        return "keyID is empty"
    if len(key_id) > _MAX_SIZE:
        return f"keyID is {len(key_id)} bytes, which exceeds the max size of {_MAX_SIZE}"
    return None


def _validate(obj: pb.EncryptedObject) -> None:
    """ValidateEncryptedObject's checks, in its words."""
    if obj.encryptedDEKSourceType not in (pb.AES_GCM_KEY, pb.HKDF_SHA256_XNONCE_AES_GCM_SEED):
        raise TransformError(f"unknown encryptedDEKSourceType: {obj.encryptedDEKSourceType}")
    if not obj.encryptedData:
        raise TransformError("encrypted data is empty")
    if not obj.encryptedDEKSource:
        raise TransformError("failed to validate encrypted DEK source: encrypted DEK source is empty")
    if len(obj.encryptedDEKSource) > _MAX_SIZE:
        raise TransformError(f"failed to validate encrypted DEK source: encrypted DEK source is "
                             f"{len(obj.encryptedDEKSource)} bytes, which exceeds the max size of {_MAX_SIZE}")
    if why := _key_id_error(obj.keyID):
        raise TransformError(f"failed to validate key id: {why}")
    _validate_annotations(obj.annotations)


class Envelope:
    """The provider named `name` of the plugin at `endpoint` (unix:///path), each call bounded by
    `timeout` seconds. `metrics`: an EncryptionMetrics (apiserver_envelope_encryption_*)."""

    def __init__(self, name: str, endpoint: str, timeout: float, clock: Clock = REAL, metrics=None) -> None:
        import grpc

        self.name = name
        self._timeout = timeout
        self._clock = clock
        self._metrics = metrics
        self._channel = grpc.insecure_channel(endpoint)
        self._calls = {m: self._channel.unary_unary(f"/{SERVICE}/{m}", request_serializer=req.SerializeToString,
                                                    response_deserializer=resp.FromString)
                       for m, req, resp in (("Status", pb.StatusRequest, pb.StatusResponse),
                                            ("Encrypt", pb.EncryptRequest, pb.EncryptResponse),
                                            ("Decrypt", pb.DecryptRequest, pb.DecryptResponse))}
        self._state: _State | None = None
        #: (monotonic) when the last key ID poll succeeded, and when the last one failed
        self._polled = self._poll_failed = float("-inf")
        #: (wall clock, as upstream's ExpirationTimestamp) until when the seed writes
        self._expires = float("-inf")
        #: the transformers of the seeds read, by a digest of what was stored with them
        self._seeds: dict[bytes, ExtendedNonceGCM | AESGCM] = {}
        #: the last health check: (when, why it failed or None)
        self._health: tuple[float, str | None] = (float("-inf"), None)
        #: the key ID poll and the health check in flight in a worker thread, if any
        self._polling: asyncio.Future | None = None
        self._checking: asyncio.Future | None = None
        #: the API version of the plugin's first Status, which it may not change
        self._version = ""
        self._probing = threading.Lock()
        #: digest -> why the plugin last failed to decrypt that seed (`learn`), answered by every read
        #: of a value under it until a `learn` succeeds: a read never asks the plugin on the loop
        self._failed: dict[bytes, str] = {}

    def close(self) -> None:
        self._channel.close()

    def _call(self, method: str, request):
        t0 = self._clock.monotonic()
        code = "OK"
        try:
            return self._calls[method](request, timeout=self._timeout)
        except Exception as e:
            code = "".join(w.title() for w in e.code().name.split("_")) if callable(getattr(e, "code", None)) \
                else "Unknown"
            raise
        finally:
            if self._metrics is not None:
                self._metrics.kms_call(self.name, method, code, self._clock.monotonic() - t0)

    def status(self) -> pb.StatusResponse:
        return self._call("Status", pb.StatusRequest())

    def _health_fresh(self) -> bool:
        at, why = self._health
        return self._clock.monotonic() - at < (_UNHEALTHY_TTL if why else _HEALTHY_TTL)

    async def refresh(self) -> None:
        """The health check's Status asked in a worker thread where its last answer is stale; one at a time."""
        if self._health_fresh():
            return
        if self._checking is None or self._checking.done():
            self._checking = asyncio.ensure_future(asyncio.to_thread(self.check))
        await asyncio.shield(self._checking)

    def check(self) -> str | None:
        """The plugin's health as the kms-provider check reports it, asked at most every 20 s (3 s after
        a failure); blocks on the plugin: `refresh` first on the loop. As upstream's probe, whatever
        the plugin says of its health, a valid key ID confirms the seed (its expiry moves on) or, where
        it moved on, makes a new one (`_rotate_if`)."""
        if self._health_fresh():
            return self._health[1]
        with self._probing:  # (one at a time, as upstream's: the health check's and the key ID poll's)
            if self._health_fresh():
                return self._health[1]
            why = self._probe()
            self._health = (self._clock.monotonic(), why)
            return why

    def _probe(self) -> str | None:
        started = self._clock.now()
        try:
            resp = self.status()
        except Exception as e:
            why = f"failed to perform status section of the healthz check for KMS Provider {self.name}, error: " \
                  f"{rpc_error(e)}"
        else:
            problems = []
            if resp.healthz != "ok":
                problems.append(f"got unexpected healthz status: {resp.healthz}")
            if resp.version not in _API_VERSIONS:
                problems.append(f"expected KMSv2 API version {API_VERSION}, got {resp.version}")
            elif resp.version != self._version:
                if not self._version:  # (the first Status's)
                    self._version = resp.version
                else:
                    problems.append(f"KMSv2 API version should not change after the initial status response "
                                    f"version {self._version}, got {resp.version}")
            if invalid_key_id := _key_id_error(resp.key_id):
                if self._metrics is not None:
                    self._metrics.invalid_key_id(self.name, "empty" if not resp.key_id else "too_long")
                problems.append(f'got invalid KMSv2 KeyID hash "{_hash_if(resp.key_id)}": {invalid_key_id}')
            else:
                try:
                    self._rotate_if(resp.key_id, started)
                except TransformError as e:
                    problems.append(str(e))
            why = None
            if problems:
                joined = problems[0] if len(problems) == 1 else "[" + ", ".join(problems) + "]"
                why = f"kmsv2 Provider {self.name} is not healthy, error: {joined}"
        return why

    def _rotate_if(self, key_id: str, started: float) -> None:
        """A new seed when the plugin's key_id moved on (or there is none yet); either way the seed
        writes until WRITE_SEED_TTL past `started` (when the Status that said `key_id` began). A
        new seed the plugin does not encrypt, or encrypts under another key ID than its Status
        said, keeps the old seed and its expiry: TransformError in upstream's words."""
        state = self._state
        if state is not None and state.key_id == key_id:
            self._expires = started + WRITE_SEED_TTL
            return
        uid, seed = str(uuid.uuid4()), os.urandom(SEED_SIZE)
        made = None
        try:
            try:
                resp = self._call("Encrypt", pb.EncryptRequest(plaintext=seed, uid=uid))
            except Exception as e:
                raise TransformError(f"failed to encrypt DEK, error: {rpc_error(e)}") from None
            obj = pb.EncryptedObject(encryptedData=b"\0", keyID=resp.key_id, encryptedDEKSource=resp.ciphertext,
                                     annotations=resp.annotations,
                                     encryptedDEKSourceType=pb.HKDF_SHA256_XNONCE_AES_GCM_SEED)
            _validate(obj)  # (the data's byte: any, to pass)
            made, failed = obj, None
        except TransformError as e:
            failed = str(e)
        if failed is None and made.keyID == key_id:
            transformer = ExtendedNonceGCM(seed)
            self._seeds[self._digest(pb.HKDF_SHA256_XNONCE_AES_GCM_SEED, made.encryptedDEKSource, made.keyID,
                                     made.annotations)] = transformer
            self._state = _State(transformer, made.keyID, made.encryptedDEKSource, dict(made.annotations))
            self._expires = started + WRITE_SEED_TTL
            if self._metrics is not None:
                self._metrics.seeds(self.name, len(self._seeds))
            return
        raise TransformError(
            f'failed to rotate DEK uid="{uid}", useSeed=true, '
            f'errState={"<nil>" if state is not None else "got unexpected nil transformer"}, errGen={failed or "<nil>"}, '
            f'statusKeyIDHash="{_hash_if(key_id)}", encryptKeyIDHash="{_hash_if(made.keyID if made else "")}", '
            f'stateKeyIDHash="{_hash_if(state.key_id if state else "")}", expirationTimestamp='
            f'{self._clock.rfc3339(self._expires) if state is not None else _ZERO_TIME}')

    def _poll(self) -> None:
        """The key ID poll (in a worker thread): the health check's probe, logged where it fails."""
        now = self._clock.monotonic()
        why = self.check()
        if why is None:
            self._polled = now
            return
        self._poll_failed = now
        log.error("kms plugin failed health check probe: %s (name %s)", why, self.name)

    async def ready(self) -> None:
        """Before a write: the seed's key ID confirmed within the last STATUS_EVERY, as upstream's
        background poll keeps it, so a key the plugin rotated to is written under by every write a
        minute later (what upstream's 3 minutes promise a storage migration), however long the
        server sat idle: a due poll runs in a worker thread (one at a time) and the write waits for
        it. After a failed poll the plugin is asked again only _RETRY_AFTER later; meanwhile writes
        go on under the seed until it expires (`to_storage`)."""
        now = self._clock.monotonic()
        if now - self._polled < STATUS_EVERY or now - self._poll_failed < _RETRY_AFTER:
            return
        if self._polling is None or self._polling.done():
            self._polling = asyncio.ensure_future(asyncio.to_thread(self._poll))
        await asyncio.shield(self._polling)

    def _current(self) -> _State:
        """The seed that writes; before any, upstream's getCurrentState's answer (why the plugin
        could not be asked is logged by the poll, as upstream's probe logs it)."""
        if self._state is None:
            raise TransformError("got unexpected nil transformer")
        return self._state

    @staticmethod
    def _digest(kind: int, seed: bytes, key_id: str, annotations) -> bytes:
        h = hashlib.sha256(b"%d\x00" % kind + seed + b"\x00" + key_id.encode())
        for k in sorted(annotations):
            h.update(b"\x00" + k.encode() + b"\x00" + annotations[k])
        return h.digest()

    def to_storage(self, data: bytes, key: bytes) -> bytes:
        state = self._current()
        if (now := self._clock.now()) > self._expires:  # (ValidateEncryptCapability's words)
            raise TransformError(f'encryptedDEKSource with keyID hash "{key_id_hash(state.key_id)}" expired at '
                                 f"{self._clock.rfc3339(self._expires)} (current time is {self._clock.rfc3339(now)})")
        out = pb.EncryptedObject(encryptedData=state.transformer.to_storage(data, key), keyID=state.key_id,
                                 encryptedDEKSource=state.encrypted_seed, annotations=state.annotations,
                                 encryptedDEKSourceType=pb.HKDF_SHA256_XNONCE_AES_GCM_SEED).SerializeToString()
        if self._metrics is not None:
            self._metrics.key_id_used(self.name, "to_storage", state.key_id)
        return out

    def _parsed(self, data: bytes) -> tuple[pb.EncryptedObject, bytes]:
        try:
            obj = pb.EncryptedObject.FromString(data)
        except DecodeError as e:
            raise TransformError(f"failed to unmarshal encrypted object: {e}") from None
        _validate(obj)
        return obj, self._digest(obj.encryptedDEKSourceType, obj.encryptedDEKSource, obj.keyID, obj.annotations)

    def unseen(self, data: bytes) -> pb.EncryptedObject | None:
        """The stored value's EncryptedObject where its seed is one the plugin has yet to decrypt."""
        try:
            obj, digest = self._parsed(data)
        except TransformError:
            return None
        return None if digest in self._seeds else obj

    def learn(self, obj: pb.EncryptedObject) -> None:
        """`obj`'s seed decrypted by the plugin (in a worker thread) and kept; a failure is kept for
        the reads of values under that seed, which answer it without asking again (a list's every
        value under it, not only the first), until a later `learn` of the seed succeeds."""
        digest = self._digest(obj.encryptedDEKSourceType, obj.encryptedDEKSource, obj.keyID, obj.annotations)
        try:
            self._transformer_for(obj, digest)
        except TransformError as e:
            self._failed[digest] = str(e)
        else:
            self._failed.pop(digest, None)

    def _transformer_for(self, obj: pb.EncryptedObject, digest: bytes) -> ExtendedNonceGCM | AESGCM:
        try:
            resp = self._call("Decrypt", pb.DecryptRequest(ciphertext=obj.encryptedDEKSource, uid=str(uuid.uuid4()),
                                                           key_id=obj.keyID, annotations=obj.annotations))
        except Exception as e:
            raise TransformError(f"failed to decrypt DEK, error: {rpc_error(e)}") from None
        if obj.encryptedDEKSourceType == pb.HKDF_SHA256_XNONCE_AES_GCM_SEED:
            if len(resp.plaintext) < SEED_SIZE:
                raise TransformError(f"invalid seed length {len(resp.plaintext)} used for key generation")
            transformer = ExtendedNonceGCM(resp.plaintext)
        else:
            try:
                transformer = AESGCM(resp.plaintext)
            except ValueError as e:
                raise TransformError(f"failed to create transformer from decrypted DEK: {e}") from None
        self._seeds[digest] = transformer
        if self._metrics is not None:
            self._metrics.seeds(self.name, len(self._seeds))
        return transformer

    def from_storage(self, data: bytes, key: bytes) -> tuple[bytes, bool]:
        obj, digest = self._parsed(data)
        transformer = self._seeds.get(digest)
        if transformer is None:
            if (why := self._failed.get(digest)) is not None:
                raise TransformError(why)
            transformer = self._transformer_for(obj, digest)
        out, _ = transformer.from_storage(obj.encryptedData, key)
        if self._metrics is not None:
            self._metrics.key_id_used(self.name, "from_storage", obj.keyID)
        state = self._state
        return out, state is None or state.key_id != obj.keyID or \
            obj.encryptedDEKSourceType != pb.HKDF_SHA256_XNONCE_AES_GCM_SEED
