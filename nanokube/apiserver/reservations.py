"""ClusterIPs and node ports reserved in the store, for several API server processes on one store.

With one API server process the allocators in registry/core_services.py are the one arbiter.
With several each process's allocators learn the others' Services only from the watch, so two
clients asking for one value through two processes at one moment could both get it. The
processes are `up --api-workers N`'s workers (workers.py) or the API servers of an HA control
plane on one etcd (each `up` its own process). As upstream's allocators do, the store
arbitrates: a value handed to a Service is first recorded there by a create that fails when the
value is recorded already. A ClusterIP is recorded as its IPAddress object
(MultiCIDRServiceAllocator's record, the object the IPAddress repair loop otherwise makes after
the Service); a node port (a port's, or the health check's of a LoadBalancer with
externalTrafficPolicy Local) as a key of its own under NODE_PORTS, outside /registry/ and so
outside every watch cache (upstream keeps one bitmap key updated by compare-and-swap; a key per
port is as sound and never retries between processes).
The process that writes a Service makes its records just before the write and removes them if
the write fails; the one that deletes it, or updates values away, removes them after. What a
process that ended between the two left behind, the repair loops remove after a grace period
(worker 0's; on etcd every API server's, as every kube-apiserver runs them): the IPAddress
repair loop an IPAddress, NodePortRepair a node port.
A value another process recorded first is "already allocated", with the allocator's message;
a value picked dynamically that another process recorded first (asked for by value through it)
is given up for the next free one.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import logging
from collections.abc import Awaitable

import orjson

from ..machinery.errors import APIError
from ..machinery.services import needs_health_check
from ..registry.core_services import AllocationError, ServiceStrategy, cluster_ips, node_ports
from ..store.interface import KV, KeyExists, KeyNotFound, RevisionMismatch
from .ipaddresses import GROUP, ip_address_for
from .background import BackgroundLoop
from .rest import SYSTEM, WriteGoesOn, WriteOptions

log = logging.getLogger(__name__)

#: where node ports are recorded: NODE_PORTS + the port, holding {"uid": the Service's uid, "at": when}
NODE_PORTS = "/ranges/servicenodeports/"
#: dynamic picks given up for another process's records, at most, before the create fails
_REPICKS = 64
_OPTS = WriteOptions(field_manager="kube-apiserver", user=SYSTEM)


class Reservations:
    """Set as `ServiceStrategy.reservations` when several processes share the store (workers, or API
    servers on one etcd); the REST layer calls `reserve` before it writes a Service, `undo` if the
    write fails, and `free` after a delete or an update."""

    def __init__(self, rest, strategy: ServiceStrategy) -> None:
        self.rest, self.store, self.strategy, self.clock = rest, rest.store, strategy, rest.clock
        self.ipaddresses = rest.index.get(GROUP, "v1", "ipaddresses")

    async def reserve(self, obj: dict, old: dict | None) -> tuple[list, list]:
        """Records every value `obj` holds in this process's allocators that `old` did not hold;
        returns the records made and the allocation errors (none made then), or raises the
        InternalError of a range with no value left to record (none made either). A request
        cancelled meanwhile (its client gone) has what it records removed once recorded: a
        store write cancelled in flight may have been made."""
        task = asyncio.ensure_future(self._reserve(obj, old))
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            _BACKGROUND.add(task)
            task.add_done_callback(self._undo_unclaimed)
            raise

    def _undo_unclaimed(self, task: asyncio.Task) -> None:
        """What a cancelled request's `_reserve` recorded (it removed its records itself if it failed)."""
        _BACKGROUND.discard(task)
        if not task.cancelled() and task.exception() is None and task.result()[0]:
            _hold(asyncio.ensure_future(self.undo(task.result()[0])))

    async def _reserve(self, obj: dict, old: dict | None) -> tuple[list, list]:
        s, spec, uid = self.strategy, obj["spec"], obj["metadata"]["uid"]
        old_ips = set(cluster_ips(old["spec"])) if old else set()
        old_ports = set(node_ports(old["spec"])) if old else set()
        made: list = []
        lost = False
        try:
            for i, ip in enumerate(cluster_ips(spec)):
                if ip not in old_ips and s.ips.owner(ip) == uid:
                    ip = await self._record_ip(obj, i, ip, uid)
                    lost |= ip is None
                    if ip is not None:
                        made.append(("ip", ip))
            holders = [(p, "nodePort") for p in spec.get("ports") or []]
            holders += [(spec, "healthCheckNodePort")] if needs_health_check(spec) else []
            for holder, field in holders:
                np = holder.get(field)
                if np and np not in old_ports and s.node_ports.owner(np) == uid and ("port", np) not in made:
                    got = await self._record_port(np, uid)
                    if got is None:
                        lost = True
                        if s.picked(uid, np):  # no other could be recorded: the range is full
                            holder.pop(field)
                    else:
                        holder[field] = got
                        made.append(("port", got))
            errs = s.allocation_errors(obj, old) if lost else []  # raises when the range is full
        except BaseException:
            await self.undo(made)
            raise
        finally:
            s.forget_picks(uid)
        if errs:
            await self.undo(made)
            return [], errs
        return made, []

    async def _record_ip(self, obj: dict, i: int, ip: str, uid: str) -> str | None:
        """The IP recorded as the Service's `i`th ClusterIP (another of its family, if `ip` was
        picked dynamically and is taken), or None: the value is given back to the allocator and
        validation reports it allocated (asked for by value) or the range full (picked, and no
        other could be recorded: the ClusterIPs are cut before it)."""
        s, spec = self.strategy, obj["spec"]
        version = ipaddress.ip_address(ip).version
        for attempt in range(_REPICKS):
            try:
                await self.rest.create(self.ipaddresses, "v1", None, ip_address_for(ip, obj), _OPTS)
                return ip
            except APIError as e:
                if e.code != 409:
                    raise
            s.ips.release(ip, uid)
            if not s.picked(uid, ip):
                return None
            if attempt == _REPICKS - 1:
                break
            try:
                ip = s.ips.allocate(uid, None, version, after=ip)
            except AllocationError:
                break
            s.pick(uid, ip)
            ips = spec.setdefault("clusterIPs", [spec.get("clusterIP")])
            ips[i] = ip
            spec["clusterIP"] = ips[0]
        if i:
            del spec["clusterIPs"][i:]
            return None
        spec["clusterIP"] = ""
        spec.pop("clusterIPs", None)
        return None

    async def _record_port(self, port: int, uid: str) -> int | None:
        """The port recorded (another, if `port` was picked and is taken), or None, as `_record_ip`."""
        s = self.strategy
        for attempt in range(_REPICKS):
            try:
                await self.store.create(f"{NODE_PORTS}{port}", orjson.dumps({"uid": uid, "at": self.clock.now()}))
                return port
            except KeyExists:
                pass
            s.node_ports.release(port, uid)
            if not s.picked(uid, port) or attempt == _REPICKS - 1:
                return None
            try:
                port = s.node_ports.allocate(uid, after=port)
            except AllocationError:
                return None
            s.pick(uid, port)
        return None

    async def written(self, write: Awaitable[KV], made: list, old: dict | None = None, new: dict | None = None) -> KV:
        """The Service's store `write`, its values recorded as `made`; `new` the Service written, `old` the
        one it updates. A request cancelled while the write is in flight (its client gone, its deadline
        past) leaves the write to end in a task of its own, since the store may make it all the same
        (WriteGoesOn: the caller leaves the values to it). If it fails, its records are removed (a
        Service stored without them would let another process hand its values out again) and this
        process's allocators give up what only `new` held; if it is made, the values `old` held that
        `new` does not are freed, records and allocations, as the caller would have after it. The
        allocators are settled here, not by the cancelled caller: the watch event of a write made
        before the request ended may have come already (it re-allocates what the Service holds only
        as it comes), and none comes after. `made` is emptied then, so the caller's `undo` removes nothing."""
        task = asyncio.ensure_future(write)
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            records = made[:]
            made.clear()
            _BACKGROUND.add(task)
            task.add_done_callback(functools.partial(self._settle_unanswered, records, old, new))
            raise WriteGoesOn() from None

    def _settle_unanswered(self, records: list, old: dict | None, new: dict | None, task: asyncio.Task) -> None:
        """A cancelled request's write has ended: its `records` removed and `new`'s values given back if
        the store did not make it, `old`'s values it gave up freed if it did."""
        _BACKGROUND.discard(task)
        if task.cancelled() or task.exception() is not None:
            if old is not None:
                self.strategy.finish_update(new, old, False)
            elif new is not None:
                self.strategy.release(new)
            _hold(asyncio.ensure_future(self.undo(records)))
        elif old is not None:
            self.strategy.finish_update(new, old, True)
            _hold(asyncio.ensure_future(self.free(old, new)))

    async def undo(self, made: list) -> None:
        """Removes the records `made` (the write failed), to the end even if the request is
        cancelled meanwhile (its client gone): a record left behind holds its value until repair."""
        if made:
            await _to_the_end(self._remove(made, None, None))

    async def free(self, obj: dict, new: dict | None = None) -> None:
        """Removes the records of the values `obj` held that `new` (its update) does not; to the
        end, as `undo`."""
        spec = obj["spec"]
        kept_ips = set(cluster_ips(new["spec"])) if new else set()
        kept_ports = set(node_ports(new["spec"])) if new else set()
        gone = [("ip", ip) for ip in cluster_ips(spec) if ip not in kept_ips]
        gone += [("port", port) for port in node_ports(spec) if port not in kept_ports]
        if gone:
            await _to_the_end(self._remove(gone, obj["metadata"], obj["metadata"]["uid"]))

    async def _remove(self, records: list, md: dict | None, uid: str | None) -> None:
        for kind, value in records:
            if kind == "ip":
                await self._free_ip(value, md)
            else:
                await self._free_port(value, uid)

    async def _free_ip(self, ip: str, md: dict | None) -> None:
        """Deletes the IPAddress `ip` if it is the Service's (`md`; None: the caller just made it)."""
        try:
            current = await self.rest.get(self.ipaddresses, "v1", None, ip)
            ref = current["spec"].get("parentRef") or {}
            if md is not None and (ref.get("resource") != "services" or ref.get("namespace") != md.get("namespace")
                                   or ref.get("name") != md.get("name")):
                return
            uid = current["metadata"]["uid"]
            await self.rest.delete(self.ipaddresses, "v1", None, ip, {"preconditions": {"uid": uid}}, _OPTS)
        except APIError as e:
            if e.code not in (404, 409):
                raise

    async def _free_port(self, port: int, uid: str | None) -> None:
        key = f"{NODE_PORTS}{port}"
        kv = await self.store.get(key)
        if kv is None or (uid is not None and orjson.loads(kv.value).get("uid") != uid):
            return
        try:
            await self.store.delete(key, kv.mod_revision, kv)
        except (KeyNotFound, RevisionMismatch):
            pass


#: tasks that outlive the request that started them, held until they end
_BACKGROUND: set[asyncio.Task] = set()


async def _to_the_end(work) -> None:
    """Awaits `work` shielded from the caller's cancellation, which it then outlives; what it raises
    after that is logged, as no caller is left to take it."""
    task = asyncio.ensure_future(work)
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:
        _hold(task)
        raise


def _hold(task: asyncio.Task) -> None:
    _BACKGROUND.add(task)
    task.add_done_callback(_ended)


def _ended(task: asyncio.Task) -> None:
    _BACKGROUND.discard(task)
    if not task.cancelled() and task.exception() is not None:
        log.warning("removing Service value records failed after the request was cancelled: %s", task.exception())


class NodePortRepair(BackgroundLoop):
    """Worker 0's loop where several processes share the store (workers, or every API server on one
    etcd): a node port recorded for a Service that does not hold it (its process ended between the
    record and the write) is freed once the record is older than `grace`, as upstream's node port
    repair loop frees what no Service holds. As upstream's, it
    passes once at start, before the server serves (its post-start hook holds readiness for that
    pass), so a restart after a kill frees what the kill left at once; then every `every` seconds
    (upstream's RepairServicesInterval, 3 minutes)."""

    def __init__(self, server, grace: float, every: float = 180.0) -> None:
        self.store, self.cache, self.clock = server.store, server.cache, server.clock
        self.prefix = server.index.get("", "v1", "services").key_prefix()
        self.grace, self.every = grace, every

    async def start(self) -> None:
        await self._pass()
        await super().start()

    async def _loop(self) -> None:
        while True:
            await self.clock.sleep(self.every)
            await self._pass()

    async def _pass(self) -> None:
        try:
            await self.repair()
        except Exception:
            log.exception("node port repair failed")

    async def repair(self) -> list[int]:
        """Frees the stale records; returns their ports."""
        kvs, _ = await self.store.list(NODE_PORTS)
        await self.cache.sync()
        held = {(e.obj["metadata"]["uid"], port) for _, e in self.cache.list(self.prefix)
                for port in node_ports(e.obj["spec"])}
        freed = []
        for kv in kvs:
            record, port = orjson.loads(kv.value), int(kv.key[len(NODE_PORTS):])
            if (record.get("uid"), port) in held or record.get("at", 0) + self.grace > self.clock.now():
                continue
            try:
                await self.store.delete(kv.key, kv.mod_revision, kv)
                freed.append(port)
            except (KeyNotFound, RevisionMismatch):
                pass
        return freed
