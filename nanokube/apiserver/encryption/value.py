"""The value transformers of k8s.io/apiserver's storage/value: each turns a stored value's plaintext
into what the store keeps and back, given the value's key as authenticated data (AES-GCM binds a
ciphertext to its key, so a value copied under another name does not read). A provider's output
starts with its prefix (`k8s:enc:aescbc:v1:<key name>:`...), which is how a read picks the
provider and key that wrote it, so an etcd dump looks the same as kube-apiserver's."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Protocol

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM as _AESGCM

#: what every encrypting provider's prefix starts with
ENCRYPTED = b"k8s:enc:"
AESCBC_PREFIX = b"k8s:enc:aescbc:v1:"
AESGCM_PREFIX = b"k8s:enc:aesgcm:v1:"
SECRETBOX_PREFIX = b"k8s:enc:secretbox:v1:"
KMSV2_PREFIX = b"k8s:enc:kms:v2:"

_SHORT = "the stored data was shorter than the required size"


class TransformError(Exception):
    """A value that does not transform (a read no provider can decrypt); the text is upstream's."""


class Transformer(Protocol):
    def from_storage(self, data: bytes, key: bytes) -> tuple[bytes, bool]:
        """(plaintext, stale): stale when it was not written by the provider that writes now."""

    def to_storage(self, data: bytes, key: bytes) -> bytes: ...


class Identity:
    """Writes plaintext; reads plaintext only, so a config that lists identity first (to decrypt
    everything on the next write) still hands encrypted values on to the providers after it."""

    def from_storage(self, data: bytes, key: bytes) -> tuple[bytes, bool]:
        if data.startswith(ENCRYPTED):
            raise TransformError("identity transformer tried to read encrypted data")
        return data, False

    def to_storage(self, data: bytes, key: bytes) -> bytes:
        return data


IDENTITY = Identity()


class AESGCM:
    """A random 12-byte nonce, then the sealed value, bound to its key."""

    def __init__(self, secret: bytes) -> None:
        self._aead = _AESGCM(secret)

    def from_storage(self, data: bytes, key: bytes) -> tuple[bytes, bool]:
        if len(data) < 12:
            raise TransformError(_SHORT)
        try:
            return self._aead.decrypt(data[:12], data[12:], key), False
        except InvalidTag:
            raise TransformError("cipher: message authentication failed") from None

    def to_storage(self, data: bytes, key: bytes) -> bytes:
        nonce = os.urandom(12)
        return nonce + self._aead.encrypt(nonce, data, key)


class AESCBC:
    """A random IV, then the PKCS#7-padded value in CBC mode (not authenticated: a wrong key shows
    as bad padding, or as bytes that do not decode)."""

    def __init__(self, secret: bytes) -> None:
        self._aes = algorithms.AES(secret)

    def from_storage(self, data: bytes, key: bytes) -> tuple[bytes, bool]:
        if len(data) < 16:
            raise TransformError(_SHORT)
        iv, body = data[:16], data[16:]
        if len(body) % 16:
            raise TransformError("the stored data is not a multiple of the block size")
        dec = Cipher(self._aes, modes.CBC(iv)).decryptor()
        out = dec.update(body) + dec.finalize()
        if not out:
            raise TransformError("invalid PKCS7 data (empty or not padded)")
        pad = out[-1]
        if pad == 0 or pad > len(out) or out[-pad:] != bytes([pad]) * pad:
            raise TransformError("invalid padding on input")
        return out[:-pad], False

    def to_storage(self, data: bytes, key: bytes) -> bytes:
        iv = os.urandom(16)
        pad = 16 - len(data) % 16
        enc = Cipher(self._aes, modes.CBC(iv)).encryptor()
        return iv + enc.update(data + bytes([pad]) * pad) + enc.finalize()


class Secretbox:
    """XSalsa20-Poly1305 (NaCl's secretbox): a random 24-byte nonce, then the sealed value."""

    def __init__(self, secret: bytes) -> None:
        from nacl.secret import SecretBox

        self._box = SecretBox(secret)

    def from_storage(self, data: bytes, key: bytes) -> tuple[bytes, bool]:
        from nacl.exceptions import CryptoError

        if len(data) < 24 + 16:
            raise TransformError(_SHORT)
        try:
            return self._box.decrypt(data[24:], data[:24]), False
        except CryptoError:  # upstream's words for a failed Open
            raise TransformError("output array was not large enough for encryption") from None

    def to_storage(self, data: bytes, key: bytes) -> bytes:
        return bytes(self._box.encrypt(data, os.urandom(24)))


@dataclass(frozen=True, slots=True)
class Prefixed:
    prefix: bytes
    transformer: Transformer


class PrefixTransformers:
    """The first writes, its prefix before its output; a read tries each whose prefix the value
    starts with, in order, and is stale unless the first read it. Two providers may share a prefix
    (aescbc listed twice while its key rotates), so a failed match goes on to the next; `err` is
    the answer when no prefix matched at all. `observe(direction, prefix, seconds, failed)` records
    each transformation (the provider list's: apiserver_storage_transformation_*). `unread(values)`:
    what the plugins must be asked before `values` read, as (provider, EncryptedObject) pairs."""

    def __init__(self, err: str, items: list[Prefixed], observe=None) -> None:
        self.err, self.items, self.observe = err, items, observe
        #: the providers that call out to a plugin (KMS v2's Envelope): the writer's `ready` awaited
        #: before a write, and (prefix, provider) of each that may need a seed decrypted before a read
        self.ready = getattr(items[0].transformer, "ready", None) if items else None
        self.plugins = [(p.prefix, p.transformer) for p in items if hasattr(p.transformer, "unseen")]

    def from_storage(self, data: bytes, key: bytes) -> tuple[bytes, bool]:
        errs: list[str] = []
        observe = self.observe
        t0 = time.perf_counter() if observe else 0.0
        for i, p in enumerate(self.items):
            if not data.startswith(p.prefix):
                continue
            try:
                out, stale = p.transformer.from_storage(data[len(p.prefix):], key)
            except TransformError as e:
                errs.append(str(e))
                if observe and p.prefix:
                    observe("from_storage", p.prefix, time.perf_counter() - t0, True)
                continue
            if observe:
                observe("from_storage", p.prefix, time.perf_counter() - t0, False)
            return out, stale or i != 0
        if errs:
            raise TransformError(errs[0] if len(errs) == 1 else "[" + ", ".join(errs) + "]")
        if observe:
            observe("from_storage", None, time.perf_counter() - t0, True)
        raise TransformError(self.err)

    def unread(self, data: bytes) -> tuple | None:
        for prefix, plugin in self.plugins:
            if data.startswith(prefix) and (obj := plugin.unseen(data[len(prefix):])) is not None:
                return plugin, obj
        return None

    def to_storage(self, data: bytes, key: bytes) -> bytes:
        p = self.items[0]
        t0 = time.perf_counter() if self.observe else 0.0
        try:
            out = p.prefix + p.transformer.to_storage(data, key)
        except TransformError:
            if self.observe:
                self.observe("to_storage", p.prefix, time.perf_counter() - t0, True)
            raise
        if self.observe:
            self.observe("to_storage", p.prefix, time.perf_counter() - t0, False)
        return out
