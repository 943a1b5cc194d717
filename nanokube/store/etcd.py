"""etcd v3 backend, spoken through etcd's gRPC-gateway JSON API over HTTP.

No client library: every call is a POST of proto3-JSON (keys and values
base64, int64 as strings) to `/v3/...` (etcd >= 3.4) or `/v3beta/...` (3.3),
chosen by probing at start. Revisions are etcd's own global revision, so they
survive restarts and are shared with every other client of the cluster.

The store owns the whole etcd keyspace: `watch` opens one etcd watch over every
key (key "\\0", range_end "\\0"), matching the local backends whose change
stream spans all keys. Point nanokube at a dedicated etcd cluster.

Failover: endpoints are tried in order starting from the last one that
answered. A request is retried on the next endpoint when the connection could
not be made; writes are not retried after the request may have reached etcd
(their outcome is unknown), and raise Unavailable instead.
"""

from __future__ import annotations

import asyncio
import base64
import logging
from typing import Any, AsyncIterator

import aiohttp
import orjson

from .interface import (
    DELETE,
    KV,
    PUT,
    Compacted,
    Event,
    KeyExists,
    KeyNotFound,
    RevisionMismatch,
    Store,
    StoreError,
    Unavailable,
)

_API_PREFIXES = ("/v3", "/v3beta")
log = logging.getLogger(__name__)
_GRPC_UNAVAILABLE = 14
_WHOLE_KEYSPACE = "\0"
#: the key kube-apiserver's compactor keeps its rounds in, outside /registry/ (see compaction_round)
COMPACT_REV_KEY = "compact_rev_key"


def _b64(data: bytes | str) -> str:
    if isinstance(data, str):
        data = data.encode()
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str | None) -> bytes:
    return base64.b64decode(text) if text else b""


def _kv(raw: dict[str, Any]) -> KV:
    return KV(
        _unb64(raw.get("key")).decode(),
        _unb64(raw.get("value")),
        int(raw.get("create_revision", 0)),
        int(raw.get("mod_revision", 0)),
    )


def _prefix_end(prefix: str) -> str:
    """The smallest key greater than every key starting with `prefix`, base64."""
    raw = bytearray(prefix.encode())
    while raw and raw[-1] == 0xFF:
        raw.pop()
    if not raw:
        return _b64(_WHOLE_KEYSPACE)
    raw[-1] += 1
    return _b64(bytes(raw))


def _event(raw: dict[str, Any]) -> Event:
    kv = _kv(raw["kv"])
    prev = _kv(raw["prev_kv"]) if raw.get("prev_kv") else None
    if raw.get("type") == "DELETE":
        gone = KV(kv.key, prev.value if prev else b"", prev.create_revision if prev else 0, kv.mod_revision)
        return Event(DELETE, gone, prev)
    return Event(PUT, kv, None if kv.create_revision == kv.mod_revision else prev)


def _grpc_error(body: bytes) -> tuple[int, str]:
    """(gRPC code, message) from a gateway error body; 3.3-3.5 spell it differently."""
    try:
        err = orjson.loads(body)
    except orjson.JSONDecodeError:
        return 0, body.decode(errors="replace")
    if isinstance(err.get("error"), dict):  # streaming calls wrap it
        err = err["error"]
    code = err.get("code", err.get("grpc_code", 0))
    return int(code), str(err.get("message") or err.get("error") or err)


class _EtcdError(StoreError):
    """An error status etcd itself reported (gRPC code and message)."""

    def __init__(self, code: int, message: str):
        super().__init__(f"etcd error {code}: {message}")
        self.code = code
        self.message = message


class _NotServed(StoreError):
    """The gateway does not serve this API path (wrong version prefix)."""


class EtcdStore(Store):
    def __init__(self, endpoints: list[str], request_timeout: float = 30.0) -> None:
        self.endpoints = [e if "://" in e else f"http://{e}" for e in (x.strip() for x in endpoints) if e]
        if not self.endpoints:
            raise ValueError("etcd store needs at least one endpoint")
        self._timeout = aiohttp.ClientTimeout(total=request_timeout, sock_connect=5)
        self._preferred = 0
        self._api = _API_PREFIXES[0]
        self._session: aiohttp.ClientSession | None = None
        self._streams: set[aiohttp.ClientResponse] = set()
        self._closed = False
        self._compacted = 0
        #: the last Status answer's dbSize, and the Status call asking for a newer one
        self._db_size: int | None = None
        self._status: asyncio.Task | None = None

    def size(self) -> int | None:
        """dbSize as the last Status call answered it, a new call started (one at a time) for the
        next scrape: kube-apiserver's storage monitor asks on each scrape, waiting up to a
        second, but a scrape here renders without waiting on the network."""
        if self._session is not None and (self._status is None or self._status.done()):
            self._status = asyncio.get_running_loop().create_task(self._read_size())
        return self._db_size

    async def _read_size(self) -> None:
        try:
            status = await self._post("/maintenance/status", {}, idempotent=True)
            self._db_size = int(status.get("dbSize") or 0)
        except StoreError as e:
            log.info("storage metrics: etcd status failed: %s", e)

    async def start(self) -> None:
        self._session = aiohttp.ClientSession(json_serialize=lambda o: orjson.dumps(o).decode())
        self._closed = False
        for api in _API_PREFIXES:
            self._api = api
            try:
                await self._post("/kv/range", {"key": _b64(_WHOLE_KEYSPACE), "count_only": True}, idempotent=True)
                return
            except _NotServed:
                continue
        raise Unavailable(f"no etcd v3 JSON gateway at {', '.join(self.endpoints)}")

    async def close(self) -> None:
        self._closed = True
        if self._status is not None:
            self._status.cancel()
        for resp in list(self._streams):
            resp.close()
        if self._session:
            await self._session.close()
            self._session = None

    def _order(self) -> list[int]:
        n = len(self.endpoints)
        return [(self._preferred + i) % n for i in range(n)]

    async def _post(self, path: str, body: dict[str, Any], *, idempotent: bool) -> dict[str, Any]:
        """One unary gateway call with failover; returns the decoded response."""
        if self._session is None:
            raise Unavailable("etcd store is not started")
        failures = []
        for i in self._order():
            url = self.endpoints[i] + self._api + path
            try:
                async with self._session.post(url, json=body, timeout=self._timeout) as resp:
                    payload = await resp.read()
                    status = resp.status
            except aiohttp.ClientConnectorError as e:
                failures.append(f"{url}: {e}")
                continue
            except (aiohttp.ClientError, asyncio.TimeoutError) as e:
                if idempotent:
                    failures.append(f"{url}: {e!r}")
                    continue
                raise Unavailable(f"{url}: outcome unknown: {e!r}") from e
            if status == 404:
                raise _NotServed(url)
            if status != 200:
                code, message = _grpc_error(payload)
                if code == _GRPC_UNAVAILABLE and idempotent:
                    failures.append(f"{url}: {message}")
                    continue
                raise _EtcdError(code, message)
            self._preferred = i
            return orjson.loads(payload)
        raise Unavailable("no etcd endpoint answered: " + "; ".join(failures))

    async def _txn(self, compare: list[dict], success: list[dict], failure: list[dict]) -> dict[str, Any]:
        return await self._post("/kv/txn", {"compare": compare, "success": success, "failure": failure}, idempotent=False)

    async def get(self, key: str) -> KV | None:
        resp = await self._post("/kv/range", {"key": _b64(key)}, idempotent=True)
        kvs = resp.get("kvs")
        return _kv(kvs[0]) if kvs else None

    async def list(self, prefix: str) -> tuple[list[KV], int]:
        start = _b64(prefix) if prefix else _b64(_WHOLE_KEYSPACE)
        resp = await self._post("/kv/range", {"key": start, "range_end": _prefix_end(prefix)}, idempotent=True)
        return [_kv(raw) for raw in resp.get("kvs", [])], int(resp["header"]["revision"])

    async def create(self, key: str, value: bytes) -> KV:
        k = _b64(key)
        resp = await self._txn(
            [{"key": k, "target": "CREATE", "result": "EQUAL", "create_revision": "0"}],
            [{"request_put": {"key": k, "value": _b64(value)}}],
            [],
        )
        if not resp.get("succeeded"):
            raise KeyExists(key)
        rev = int(resp["header"]["revision"])
        return KV(key, value, rev, rev)

    @staticmethod
    def _guards(k: str, expected_mod_revision: int | None) -> list[dict]:
        """Compares that hold only if the key exists (and has the expected revision)."""
        guards = [{"key": k, "target": "CREATE", "result": "NOT_EQUAL", "create_revision": "0"}]
        if expected_mod_revision is not None:
            guards.append({"key": k, "target": "MOD", "result": "EQUAL", "mod_revision": str(expected_mod_revision)})
        return guards

    @staticmethod
    def _lost(key: str, resp: dict[str, Any]) -> StoreError:
        current = resp.get("responses", [{}])[0].get("response_range", {}).get("kvs")
        return RevisionMismatch(key, _kv(current[0])) if current else KeyNotFound(key)

    async def update(self, key: str, value: bytes, expected_mod_revision: int, prev: KV | None = None) -> KV:
        """A `prev` at the expected revision gives the create revision, so the put does not ask etcd
        to send the previous value back (the watch's events carry their own prev_kv)."""
        k = _b64(key)
        known = prev is not None and prev.mod_revision == expected_mod_revision and prev.key == key
        resp = await self._txn(
            self._guards(k, expected_mod_revision),
            [{"request_put": {"key": k, "value": _b64(value), "prev_kv": not known}}],
            [{"request_range": {"key": k}}],
        )
        if not resp.get("succeeded"):
            raise self._lost(key, resp)
        if not known:
            prev = _kv(resp["responses"][0]["response_put"]["prev_kv"])
        return KV(key, value, prev.create_revision, int(resp["header"]["revision"]))

    async def delete(self, key: str, expected_mod_revision: int | None = None, prev: KV | None = None) -> KV:
        """A `prev` at the expected revision is the deleted value, so etcd is not asked to send it
        back (an unconditional delete's prev could be stale: it asks)."""
        k = _b64(key)
        known = prev is not None and expected_mod_revision is not None \
            and prev.mod_revision == expected_mod_revision and prev.key == key
        resp = await self._txn(
            self._guards(k, expected_mod_revision),
            [{"request_delete_range": {"key": k, "prev_kv": not known}}],
            [{"request_range": {"key": k}}],
        )
        if not resp.get("succeeded"):
            raise self._lost(key, resp)
        if not known:
            prev = _kv(resp["responses"][0]["response_delete_range"]["prev_kvs"][0])
        return KV(key, prev.value, prev.create_revision, int(resp["header"]["revision"]))

    async def current_revision(self) -> int:
        resp = await self._post("/kv/range", {"key": _b64(_WHOLE_KEYSPACE), "count_only": True}, idempotent=True)
        return int(resp["header"]["revision"])

    async def compact(self, revision: int) -> None:
        """etcd keeps revision R itself when compacting at R, so the `prev` of the
        event at R+1 stays readable. This client then refuses watches from below
        R; another client may still watch from R-1, which etcd can serve."""
        try:
            await self._post("/kv/compaction", {"revision": str(revision)}, idempotent=True)
        except _EtcdError as e:
            if "has been compacted" not in e.message:
                raise
        self._compacted = max(self._compacted, revision)

    async def list_at(self, prefix: str, revision: int, after: str = "", limit: int = 0) -> tuple[int, list[KV]]:
        body = {"key": _b64(after + "\0" if after else prefix), "range_end": _prefix_end(prefix),
                "revision": str(revision), "limit": str(limit)}
        try:
            resp = await self._post("/kv/range", body, idempotent=True)
        except _EtcdError as e:
            if "has been compacted" in e.message:
                raise Compacted(revision, max(self._compacted, revision + 1)) from None
            raise
        return int(resp.get("count", 0)), [_kv(raw) for raw in resp.get("kvs", [])]

    async def compaction_round(self, turn: int, revision: int) -> tuple[int, int, int]:
        """kube-apiserver's round, taken by one of the API servers sharing this etcd: the version of
        the key `compact_rev_key` is the rounds' count; the server whose count matches it bumps it
        (writing `revision` there) and compacts, the others learn the count, and the revision last
        compacted, from the key. So etcd is compacted once an interval however many servers share it."""
        key = _b64(COMPACT_REV_KEY)
        resp = await self._txn([{"key": key, "target": "VERSION", "result": "EQUAL", "version": str(turn)}],
                               [{"request_put": {"key": key, "value": _b64(str(revision))}}],
                               [{"request_range": {"key": key}}])
        current = int(resp["header"]["revision"])
        if not resp.get("succeeded"):
            kvs = resp["responses"][0]["response_range"].get("kvs")
            if not kvs:  # the key was deleted since: the next round starts the count again
                return 0, current, 0
            kv = kvs[0]
            try:
                compacted = int(_unb64(kv.get("value")))
            except ValueError:  # not a revision: the round is learned all the same
                compacted = 0
            self._compacted = max(self._compacted, compacted)
            return int(kv.get("version", 0)), current, compacted
        if revision:
            await self.compact(revision)
            log.debug("etcd: compacted rev (%d), endpoints (%s)", revision, ",".join(self.endpoints))
        return turn + 1, current, revision

    @property
    def compacted_revision(self) -> int:
        return self._compacted

    async def watch(self, from_revision: int) -> AsyncIterator[Event]:
        if from_revision < self._compacted:
            raise Compacted(from_revision, self._compacted)
        last = from_revision
        while not self._closed:
            try:
                resp = await self._open_watch(last + 1)
            except Unavailable:
                if self._closed:
                    return
                raise
            try:
                async for event in self._read_watch(resp, last):
                    last = event.revision
                    yield event
            except (aiohttp.ClientError, asyncio.TimeoutError):
                pass  # the stream broke: resume after `last`, possibly on another endpoint
            finally:
                self._streams.discard(resp)
                resp.close()

    async def _open_watch(self, start_revision: int) -> aiohttp.ClientResponse:
        if self._session is None:
            raise Unavailable("etcd store is not started")
        body = {
            "create_request": {
                "key": _b64(_WHOLE_KEYSPACE),
                "range_end": _b64(_WHOLE_KEYSPACE),
                "start_revision": str(start_revision),
                "prev_kv": True,
            }
        }
        failures = []
        for i in self._order():
            url = self.endpoints[i] + self._api + "/watch"
            try:
                resp = await self._session.post(
                    url, json=body, timeout=aiohttp.ClientTimeout(total=None, sock_connect=5)
                )
            except (aiohttp.ClientError, asyncio.TimeoutError) as e:
                failures.append(f"{url}: {e}")
                continue
            if resp.status != 200:
                code, message = _grpc_error(await resp.read())
                resp.close()
                if code == _GRPC_UNAVAILABLE:
                    failures.append(f"{url}: {message}")
                    continue
                raise _EtcdError(code, message)
            self._preferred = i
            self._streams.add(resp)
            return resp
        raise Unavailable("no etcd endpoint answered the watch: " + "; ".join(failures))

    async def _read_watch(self, resp: aiohttp.ClientResponse, after: int) -> AsyncIterator[Event]:
        """Decode the newline-delimited stream of WatchResponse messages."""
        buf = b""
        async for chunk in resp.content.iter_any():
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for line in lines:
                if not line.strip():
                    continue
                msg = orjson.loads(line)
                if "result" not in msg:
                    raise _EtcdError(*_grpc_error(line))
                result = msg["result"]
                if result.get("canceled"):
                    compacted = int(result.get("compact_revision", 0))
                    if compacted:
                        self._compacted = max(self._compacted, compacted)
                        raise Compacted(after, compacted)
                    raise StoreError(f"etcd canceled the watch: {result.get('cancel_reason', 'no reason given')}")
                for raw in result.get("events", ()):
                    event = _event(raw)
                    after = event.revision
                    yield event
