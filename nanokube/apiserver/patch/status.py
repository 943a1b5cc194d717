"""Status patches remembered by what they start from: a merge or strategic merge patch of a
/status write that names only status (GenericREST._status_only) yields a status that is a function
of the live status, the patch and the kind's schema alone, and so does the decoding check of that
status. A scheduler marking many pods unschedulable in one second sends the same PodScheduled=False
patch over the same Pending status each time: merging and checking it again was ~15% of that write.

The key is the live status's JSON and the patch's bytes (equal JSON is an equal value: orjson
writes 1 and 1.0, true and 1 apart, and keeps key order), with the schema by identity (held in the
entry, so its id cannot be reused). The status remembered is the one the first such write stored:
it goes into each later write's object unchanged and shared, as the watch cache shares equal spec
values (cached objects are never changed in place; nothing changes a status-only write's object
after its decoding: no policy or webhook sees it, and the in-tree plugins leave status writes be).
A writer whose patches keep missing (a kubelet's carry each pod's own IPs and times) stops making
keys, trying again every `_TRIES`th write, as the managedFields memos of apply.py do."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import orjson

from ...machinery import encoded as json_memo

#: key -> (schema, status), the oldest first (OrderedDict: see machinery/encoded.py)
_PATCHED: OrderedDict[tuple, tuple[dict, dict]] = OrderedDict()
#: (patch type, patch bytes) of the patches remembered: each names status alone and repeats no key,
#: so a request that sends them again is known to be such a patch without decoding them, nor
#: scanning them for repeated keys (strict.patch_duplicates)
_SEEN: OrderedDict[tuple[str, bytes], None] = OrderedDict()
#: keys that missed in a row, by writer (resource and field manager)
_MISSES: dict[tuple, int] = {}
_LIMIT = 1024
_TRIES = 32


def key(schema: dict, patch_type: str, patch: bytes, live: dict, writer: tuple, stored: bool = False) -> tuple | None:
    """What the patched and checked status of `live` depends on; None when the writer's patches
    keep missing or the live status cannot be a key. With `stored`, the live status is the watch
    cache's (never changed in place): the JSON encoded here is remembered with it, for the status
    write's managedFields key (apply._status_key), which would encode it again."""
    if type(patch) is not bytes:
        return None
    misses = _MISSES.get(writer, 0)
    if misses >= _TRIES and misses % _TRIES:
        _MISSES[writer] = misses + 1
        return None
    if "status" not in live:
        return id(schema), patch_type, patch, b"", writer
    before = json_memo.known(live["status"])  # a status a remembered patch left
    if before is None:
        try:
            before = orjson.dumps(live["status"])
        except TypeError:
            return None
        if stored:
            json_memo.remember(live["status"], before)
    return id(schema), patch_type, patch, before, writer


def seen(patch_type: str, patch: bytes) -> bool:
    """Whether `patch` is a remembered status patch (its top level is `status` alone)."""
    return type(patch) is bytes and (patch_type, patch) in _SEEN


def get(k: tuple, schema: dict) -> dict | None:
    """The status remembered for `k`, counting a miss against its writer."""
    hit = _PATCHED.get(k)
    writer = k[-1]
    if hit is not None and hit[0] is schema:
        _MISSES[writer] = 0
        return hit[1]
    if len(_MISSES) >= _LIMIT:
        _MISSES.clear()
    _MISSES[writer] = _MISSES.get(writer, 0) + 1
    return None


def remember(k: tuple, schema: dict, status: Any) -> None:
    """The patched status for `k`, decoded and checked, which its write stores as it is."""
    if type(status) is not dict:
        return
    if len(_PATCHED) >= _LIMIT:
        _PATCHED.popitem(last=False)
    _PATCHED[k] = (schema, status)
    if len(_SEEN) >= _LIMIT:
        _SEEN.popitem(last=False)
    _SEEN[k[1], k[2]] = None
    json_memo.fragment(status)
