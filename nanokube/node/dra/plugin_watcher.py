"""The kubelet's plugin watcher (pkg/kubelet/pluginmanager) for one node:
a plugin announces itself by creating a unix socket in the node's
plugins_registry directory; the watcher dials it, asks Registration.GetInfo,
hands the answer to the handler of its type (DRAPlugin: plugin_manager.py) to
validate and register, and tells the plugin the outcome with
NotifyRegistrationStatus. Removing the socket deregisters the plugin; a
socket made anew (another inode) is a new plugin instance.

The directory is polled on the node's clock (upstream uses inotify), by one
task for all the nodes of a process that looks at up to POLL_BATCH
directories a second, and scans only those whose mtime changed. A failed
registration is tried again with upstream's exponential backoff
(nestedpendingoperations: 0.5 s doubling to 2 min 2 s), calling GetInfo and
notifying the plugin each time, as the kubelet's reconciler does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import stat
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from ...clock import REAL, Clock
from .grpc_api import REGISTRATION_METHODS, REGISTRATION_SERVICE, stub, target
from .proto import pluginregistration_pb2 as pb

# grpc is imported where a call is made: `nanokube simulate`'s kubelets make none, and each
# of its runs would pay for the import (3.5% of a small run's instructions)
if TYPE_CHECKING:
    import grpc

log = logging.getLogger(__name__)

POLL_INTERVAL = 1.0
#: the most directories one poll looks at
POLL_BATCH = 500
DIAL_TIMEOUT = 10.0
GET_INFO_TIMEOUT = 1.0
NOTIFY_TIMEOUT = 5.0
BACKOFF_INITIAL = 0.5
BACKOFF_MAX = 122.0


class RegistrationError(Exception):
    """A handler refused a plugin; the message is what the plugin is told."""


class PluginHandler(Protocol):
    def validate(self, name: str, endpoint: str, versions: list[str]) -> None: ...

    def register(self, name: str, endpoint: str, versions: list[str]) -> None: ...

    def deregister(self, name: str, endpoint: str) -> None: ...


@dataclass
class _Registered:
    identity: tuple[int, int]
    handler: PluginHandler
    name: str
    endpoint: str


@dataclass
class _Failed:
    identity: tuple[int, int]
    retry_at: float
    delay: float


class PluginWatcher:
    """Registers the plugins whose sockets appear in `path` with `handlers` (plugin type -> handler)."""

    def __init__(self, path: str, handlers: dict[str, PluginHandler], clock: Clock = REAL, node: str = "",
                 interval: float = POLL_INTERVAL):
        self.path = path
        self.handlers = handlers
        self.clock = clock
        self.node = node
        self.interval = interval
        #: socket path -> the plugin registered through it (upstream's actual state of world)
        self.registered: dict[str, _Registered] = {}
        #: the sockets the last pass found, registered or not yet (its desired state of world)
        self.desired: list[str] = []
        self._failed: dict[str, _Failed] = {}
        self._seen_mtime: int | None = None
        #: socket path -> its registration under way
        self._attempts: dict[str, asyncio.Task] = {}

    async def start(self) -> None:
        os.makedirs(self.path, exist_ok=True)
        _Poller.of(self.clock, self.interval).watchers[self] = None

    async def stop(self) -> None:
        poller = _Poller.running(self.clock, self.interval)
        if poller is not None:
            poller.watchers.pop(self, None)
            if not poller.watchers:
                await poller.close()
        for t in list(self._attempts.values()):
            t.cancel()
        await asyncio.gather(*self._attempts.values(), return_exceptions=True)

    def changed(self) -> bool:
        """Whether a pass could do anything: the directory changed (a socket came or went) since
        the last one, or a failed registration waits for its retry."""
        try:
            mtime = os.stat(self.path).st_mtime_ns
        except FileNotFoundError:
            mtime = -1
        if mtime != self._seen_mtime:
            self._seen_mtime = mtime
            return True
        return bool(self._failed)

    def _sockets(self) -> dict[str, tuple[int, int]]:
        """The sockets in the directory (not its subdirectories; names starting with '.' are
        ignored, as upstream's watcher does), each with what tells one instance from the next."""
        out = {}
        with contextlib.suppress(FileNotFoundError), os.scandir(self.path) as it:
            for e in it:
                if e.name.startswith("."):
                    continue
                with contextlib.suppress(FileNotFoundError):
                    st = e.stat(follow_symlinks=False)
                    if stat.S_ISSOCK(st.st_mode):
                        out[e.path] = (st.st_ino, st.st_mtime_ns)
        return out

    async def sync(self) -> None:
        """One pass of the reconciler: deregister plugins whose socket went (or was made
        anew), then start registering the new sockets whose backoff has passed. Each
        registration runs as a task of its own, so that a socket nobody answers on (a plugin
        that died without removing it) holds up no other node's, nor this node's, next pass."""
        sockets = self._sockets()
        self.desired = sorted(sockets)
        for path in [p for p, r in self.registered.items() if sockets.get(p) != r.identity]:
            r = self.registered.pop(path)
            log.info("node %s: plugin %s at %s deregistered (socket removed)", self.node, r.name, path)
            r.handler.deregister(r.name, r.endpoint)
        for path in [p for p in self._failed if p not in sockets]:
            del self._failed[path]
        now = self.clock.monotonic()
        for path, ident in sockets.items():
            if path in self.registered or path in self._attempts:
                continue
            failed = self._failed.get(path)
            if failed and failed.identity == ident and now < failed.retry_at:
                continue
            self._attempts[path] = asyncio.create_task(self._attempt(path, ident, failed))

    async def _attempt(self, path: str, ident: tuple[int, int], failed: _Failed | None) -> None:
        try:
            self.registered[path] = await self.register(path, ident)
            self._failed.pop(path, None)
        except RegistrationError as e:
            log.warning("node %s: %s", self.node, e)
            delay = min(failed.delay * 2, BACKOFF_MAX) if failed and failed.identity == ident else BACKOFF_INITIAL
            self._failed[path] = _Failed(ident, self.clock.monotonic() + delay, delay)
        finally:
            del self._attempts[path]
            self._seen_mtime = None  # the socket may have gone meanwhile: the next pass looks

    async def register(self, path: str, identity: tuple[int, int]) -> _Registered:
        """Upstream's RegisterPlugin operation for the socket at `path`."""
        import grpc

        channel = grpc.insecure_channel(target(path))
        try:
            calls = stub(channel, REGISTRATION_SERVICE, REGISTRATION_METHODS)
            ready = grpc.channel_ready_future(channel)
            try:
                await asyncio.to_thread(ready.result, timeout=DIAL_TIMEOUT)
            except asyncio.CancelledError:
                ready.cancel()  # wakes the thread: a stopping node waits for no dial to time out
                raise
            except grpc.FutureTimeoutError:
                raise RegistrationError(f"RegisterPlugin error -- dial failed at socket {path}, err: "
                                        "context deadline exceeded") from None
            try:
                info = await asyncio.to_thread(calls["GetInfo"], pb.InfoRequest(), timeout=GET_INFO_TIMEOUT)
            except grpc.RpcError as e:
                raise RegistrationError(f"RegisterPlugin error -- failed to get plugin info using RPC GetInfo at "
                                        f"socket {path}, err: {rpc_error(e)}") from None
            handler = self.handlers.get(info.type)
            if handler is None:
                await self._refuse(calls, path, f"RegisterPlugin error -- no handler registered for plugin type: "
                                                f"{info.type} at socket {path}")
            endpoint = info.endpoint or path
            versions = list(info.supported_versions)
            try:
                handler.validate(info.name, endpoint, versions)
            except RegistrationError as e:
                await self._refuse(calls, path, f"RegisterPlugin error -- plugin validation failed with err: {e}",
                                   "RegisterPlugin error -- pluginHandler.ValidatePluginFunc failed")
            try:
                handler.register(info.name, endpoint, versions)
            except RegistrationError as e:
                await self._refuse(calls, path, f"RegisterPlugin error -- plugin registration failed with err: {e}")
            try:
                await self._notify(calls, True, "")
            except grpc.RpcError as e:
                handler.deregister(info.name, endpoint)
                raise RegistrationError(f"RegisterPlugin error -- failed to send registration status at socket "
                                        f"{path}, err: {rpc_error(e)}") from None
            log.info("node %s: registered %s plugin %s at %s (endpoint %s, versions %s)", self.node, info.type,
                     info.name, path, endpoint, versions)
            return _Registered(identity, handler, info.name, endpoint)
        finally:
            channel.close()

    async def _refuse(self, calls: dict, path: str, told: str, logged: str = "") -> None:
        """Tell the plugin why it is not registered, then fail with `logged` (or what it was told)."""
        import grpc

        try:
            await self._notify(calls, False, told)
        except grpc.RpcError as e:
            raise RegistrationError(f"RegisterPlugin error -- failed to send error at socket {path}, "
                                    f"err: {rpc_error(e)}") from None
        raise RegistrationError(logged or told)

    @staticmethod
    async def _notify(calls: dict, registered: bool, error: str) -> None:
        await asyncio.to_thread(calls["NotifyRegistrationStatus"],
                                pb.RegistrationStatus(plugin_registered=registered, error=error),
                                timeout=NOTIFY_TIMEOUT)


class _Poller:
    """One task polls every node's watcher of a clock (thousands of nodes share an event loop):
    a directory whose modification time did not change costs one stat."""

    _all: dict[tuple[int, float], _Poller] = {}

    def __init__(self, clock: Clock, interval: float):
        self.clock = clock
        self.interval = interval
        #: in the order they started (a dict keeps it)
        self.watchers: dict[PluginWatcher, None] = {}
        self.task = asyncio.create_task(self._run())

    @classmethod
    def running(cls, clock: Clock, interval: float) -> _Poller | None:
        """The clock's poller running on this loop, if any."""
        poller = cls._all.get((id(clock), interval))
        if poller is None or poller.task.done() or poller.task.get_loop() is not asyncio.get_running_loop():
            return None
        return poller

    @classmethod
    def of(cls, clock: Clock, interval: float) -> _Poller:
        poller = cls.running(clock, interval)
        if poller is None:
            poller = cls._all[(id(clock), interval)] = cls(clock, interval)
        return poller

    async def _run(self) -> None:
        turn = 0
        while True:
            watchers = list(self.watchers)
            # past POLL_BATCH nodes, each pass looks at the next batch: a node is looked at every
            # len/POLL_BATCH passes (10 s at 5000 nodes), a pass costs POLL_BATCH stats
            start = turn * POLL_BATCH % len(watchers) if watchers else 0
            turn += 1
            for w in (watchers + watchers)[start:start + min(POLL_BATCH, len(watchers))]:
                if not w.changed():
                    continue
                try:
                    await w.sync()
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("node %s: plugin watcher", w.node)
            await self.clock.sleep(self.interval)

    async def close(self) -> None:
        if self._all.get((id(self.clock), self.interval)) is self:
            del self._all[(id(self.clock), self.interval)]
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)


def rpc_error(e: grpc.RpcError) -> str:
    """A gRPC error as Go's status package prints it ("rpc error: code = Unavailable desc = ...")."""
    code = e.code() if hasattr(e, "code") else None
    name = code.name.title().replace("_", "") if code else "Unknown"
    details = e.details() if hasattr(e, "details") else str(e)
    return f"rpc error: code = {name} desc = {details}"
