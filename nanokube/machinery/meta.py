"""Object-meta helpers every side uses."""

from __future__ import annotations

import binascii
import os


def object_key(obj: dict) -> str:
    md = obj["metadata"]
    return f"{md.get('namespace', '')}/{md['name']}"


def controller_ref(obj: dict) -> dict | None:
    """The owner reference marked controller, if any (metav1.GetControllerOf)."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return ref
    return None


#: the UIDs of one os.urandom read, as text. `next` on it is a single C call, so two threads never
#: get the same one; a forked child starts on fresh bytes (it must not repeat its parent's UIDs)
_random = iter(())
#: UIDs made per read: each from a 38-character window of the read's hex (19 bytes), whose four
#: dashes, version digit and two separating spaces are written over it at their fixed offsets
_BATCH = 256
_WINDOW = 38
_DASHES = b"-" * _BATCH
_FOURS = b"4" * _BATCH
_SPACES = b" " * _BATCH
#: a hex digit to the variant's (10xx in binary: 8, 9, a or b), keeping its two low bits
_VARIANT = bytes.maketrans(b"0123456789abcdef", b"89ab89ab89ab89ab")


def _refill() -> None:
    global _random
    text = bytearray(binascii.hexlify(os.urandom(_WINDOW // 2 * _BATCH)))
    text[8::_WINDOW] = text[13::_WINDOW] = text[18::_WINDOW] = text[23::_WINDOW] = _DASHES
    text[14::_WINDOW] = _FOURS
    text[19::_WINDOW] = text[19::_WINDOW].translate(_VARIANT)
    text[36::_WINDOW] = text[37::_WINDOW] = _SPACES
    _random = iter(text.decode().split())


def _forget() -> None:
    global _random
    _random = iter(())


os.register_at_fork(after_in_child=_forget)


def new_uid() -> str:
    """A random (version 4) UUID as text, as `str(uuid.uuid4())` gives it: 122 random bits from
    the kernel's CSPRNG, read for 256 UIDs at a time (as google/uuid's random pool does) and
    laid out by slice assignments over the read's hex, all in C; every write takes one or two
    (uid, audit ID), and formatting each from its own 16 bytes in Python cost ~4.5 times as much."""
    uid = next(_random, None)
    if uid is None:
        _refill()
        uid = next(_random)
    return uid


def without_zero_creation(md: dict | None) -> dict:
    """Object metadata as 1.37 encodes it: a zero (null) creationTimestamp is left out, ObjectMeta's
    field being omitzero since 1.34 (kubernetes#130989), as for objects a server answers without
    storing them (access reviews)."""
    return {k: v for k, v in (md or {}).items() if not (k == "creationTimestamp" and v is None)}
