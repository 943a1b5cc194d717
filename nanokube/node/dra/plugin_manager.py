"""The kubelet's DRAPluginManager (pkg/kubelet/cm/dra/plugin) for one node:
the registration handler of "DRAPlugin" plugins (plugin_watcher.py) and
the client the kubelet prepares claims through.

Validation picks the newest DRAPlugin service the plugin lists that the
kubelet speaks (v1, then v1beta1); one instance cannot take over another's
endpoint. A driver is usable while one of its plugins' gRPC connections is
up (the channel is READY; one that goes idle is asked to connect again, as
upstream's stats handler does on ConnEnd). When none is, because the last
plugin deregistered or its process died leaving its sockets behind, the
driver's ResourceSlices on this node are deleted after a grace period
(upstream's wipingDelay, 30 s) unless it is usable again first: pods must not
be scheduled against devices no plugin can prepare. For the same reason a
starting node deletes the slices of its that no built-in driver publishes
(`wipe_at_start`): no external driver is registered yet, and one still
running publishes them again once it is; upstream's kubelet wipes all of
them, its own plugins republishing theirs.

A plugin that also lists a DRAResourceHealth service gets a NodeWatchResources
stream (upstream: ResourceHealthStatus, KEP-4680), opened again 5 s after it
ends; each device's reported health is kept by driver, pool and device, and
`on_health(driver)` tells the node to write its pods' statuses again. A
device it has not reported on is Unknown, as are a gone driver's, and one
whose last report is older than its `health_check_timeout_seconds` (30 s
when it names none; upstream's DefaultHealthTimeout): a plugin reports its
devices again within that time, and one that stops is not believed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ...clock import REAL, Clock
from ...machinery.errors import APIError
from .grpc_api import DRA_METHODS, DRA_SERVICES, HEALTH_METHODS, HEALTH_SERVICES, stub, target
from .metrics import DRAMetrics
from .plugin_watcher import RegistrationError
from .proto import dra_health_pb2 as health_pb
from .proto import dra_pb2 as pb

# grpc is imported where a call is made: `nanokube simulate`'s kubelets make none, and each
# of its runs would pay for the import (3.5% of a small run's instructions)
if TYPE_CHECKING:
    import grpc

log = logging.getLogger(__name__)

#: how long a driver may be without a plugin before its ResourceSlices on the node are deleted
WIPING_DELAY = 30.0
#: how long a plugin has to answer one call (upstream's defaultClientCallTimeout)
CLIENT_CALL_TIMEOUT = 45.0
#: how long after a health stream ends the kubelet opens it again
HEALTH_RETRY = 5.0
#: how soon an idle plugin connection is asked to connect again
RECONNECT_INTERVAL = 1.0
HEALTH = {health_pb.UNKNOWN: "Unknown", health_pb.HEALTHY: "Healthy", health_pb.UNHEALTHY: "Unhealthy"}
#: how long a device's reported health holds when the report names no timeout
DEFAULT_HEALTH_TIMEOUT = 30.0


def _go_quoted(items: list[str]) -> str:
    return "[" + " ".join(json.dumps(s) for s in items) + "]"


@dataclass
class DRAPlugin:
    """One registered plugin instance of a DRA driver."""

    driver: str
    endpoint: str
    #: the supported_versions entry chosen ("v1.DRAPlugin")
    service: str
    channel: grpc.Channel
    calls: dict = field(default_factory=dict)
    #: its NodeWatchResources stream's task, where it serves a health service
    health_task: asyncio.Task | None = None
    #: whether its channel is READY, and the callback gRPC reports the channel's state to
    connected: bool = False
    watch: Callable | None = None
    reconnect: asyncio.Task | None = None

    #: where its calls are counted (dra_grpc_operations_duration_seconds)
    metrics: DRAMetrics | None = None

    async def prepare(self, claims: list[dict]) -> pb.NodePrepareResourcesResponse:
        return await self._call("NodePrepareResources", pb.NodePrepareResourcesRequest(claims=[_claim(c) for c in claims]))

    async def unprepare(self, claims: list[dict]) -> pb.NodeUnprepareResourcesResponse:
        return await self._call("NodeUnprepareResources",
                                pb.NodeUnprepareResourcesRequest(claims=[_claim(c) for c in claims]))

    async def _call(self, method: str, request):
        """One unary call, timed by its status as upstream's client interceptor times it."""
        import grpc

        started = self.metrics.clock.monotonic() if self.metrics else 0.0
        path = f"/{DRA_SERVICES[self.service]}/{method}"
        try:
            response = await asyncio.to_thread(self.calls[method], request, timeout=CLIENT_CALL_TIMEOUT)
        except grpc.RpcError as e:
            if self.metrics:
                self.metrics.call(self.driver, path, started, e)
            raise
        if self.metrics:
            self.metrics.call(self.driver, path, started)
        return response


def _claim(c: dict) -> pb.Claim:
    """A claim as the plugin API names it: its namespace, uid and name."""
    return pb.Claim(namespace=c["namespace"], uid=c["uid"], name=c["name"])


class DRAPluginManager:
    """Registered DRA plugins of one node, by driver, in the order they registered."""

    def __init__(self, client, node: str, clock: Clock = REAL, wiping_delay: float = WIPING_DELAY):
        self.slices = client.resource("resource.k8s.io", "v1", "resourceslices")
        self.node = node
        self.clock = clock
        self.wiping_delay = wiping_delay
        self.store: dict[str, list[DRAPlugin]] = {}
        #: driver -> its pending ResourceSlice wipe
        self.wipes: dict[str, asyncio.Task] = {}
        #: driver (one whose plugin streams health) -> (pool, device) -> (Healthy, Unhealthy or
        #: Unknown; when reported, on the clock's monotonic time; for how long it holds)
        self.health: dict[str, dict[tuple[str, str], tuple[str, float, float]]] = {}
        #: driver -> the timer that tells its pods when a reported health runs out
        self.expiries: dict[str, asyncio.Task] = {}
        #: called with a driver whose devices' health changed
        self.on_health: Callable[[str], None] | None = None
        #: the node's DRA metrics, which its plugins' calls are counted in
        self.metrics: DRAMetrics | None = None

    def get(self, driver: str) -> DRAPlugin | None:
        """The driver's most recent connected plugin, else its most recent one (upstream's
        heuristic: most likely the newest)."""
        plugins = self.store.get(driver)
        if not plugins:
            return None
        return next((p for p in reversed(plugins) if p.connected), plugins[-1])

    @staticmethod
    def choose(versions: list[str]) -> str:
        """The newest DRAPlugin service both sides speak; RegistrationError if none."""
        if not versions:
            raise RegistrationError("empty list of supported gRPC services (aka supported versions)")
        chosen = next((s for s in DRA_SERVICES if s in versions), None)
        if chosen is None:
            raise RegistrationError(f"none of services supported by the plugin ({_go_quoted(versions)}) are "
                                    f"supported by the kubelet ({_go_quoted(list(DRA_SERVICES))})")
        return chosen

    def validate(self, name: str, endpoint: str, versions: list[str]) -> None:
        try:
            self.choose(versions)
        except RegistrationError as e:
            raise RegistrationError(f"invalid supported gRPC versions of DRA driver plugin {name} at endpoint "
                                    f"{endpoint}: {e}") from None

    def register(self, name: str, endpoint: str, versions: list[str]) -> None:
        self.validate(name, endpoint, versions)
        if any(p.endpoint == endpoint for p in self.store.get(name, [])):
            raise RegistrationError(f"endpoint {endpoint} already registered for DRA driver plugin {name}")
        service = self.choose(versions)
        import grpc

        channel = grpc.insecure_channel(target(endpoint))
        plugin = DRAPlugin(name, endpoint, service, channel, stub(channel, DRA_SERVICES[service], DRA_METHODS),
                           metrics=self.metrics)
        self.store.setdefault(name, []).append(plugin)
        self._watch_connection(plugin)
        self._sync(name)
        health = next((s for s in HEALTH_SERVICES if s in versions), None)
        if health:
            self.health.setdefault(name, {})
            plugin.health_task = asyncio.create_task(self._watch_health(plugin, health))
        log.info("node %s: DRA driver %s registered (endpoint %s, service %s)", self.node, name, endpoint, service)

    def deregister(self, name: str, endpoint: str) -> None:
        plugins = self.store.get(name, [])
        gone = [p for p in plugins if p.endpoint == endpoint]
        if not gone:
            return
        for p in gone:
            _close(p)
        plugins[:] = [p for p in plugins if p.endpoint != endpoint]
        if plugins:
            return
        del self.store[name]
        if (expiry := self.expiries.pop(name, None)) is not None:
            expiry.cancel()
        if self.health.pop(name, None) is not None and self.on_health:
            self.on_health(name)
        self._sync(name)

    def _watch_connection(self, plugin: DRAPlugin) -> None:
        """Follow the plugin's channel state (reported from gRPC's thread) on the loop."""
        loop = asyncio.get_running_loop()

        def changed(state: grpc.ChannelConnectivity) -> None:
            with contextlib.suppress(RuntimeError):  # the loop is closed
                loop.call_soon_threadsafe(self._connection_changed, plugin, state)
        plugin.watch = changed
        plugin.channel.subscribe(changed, try_to_connect=True)

    def _connection_changed(self, plugin: DRAPlugin, state: grpc.ChannelConnectivity) -> None:
        import grpc

        if plugin not in self.store.get(plugin.driver, []):
            return
        connected = state is grpc.ChannelConnectivity.READY
        if connected != plugin.connected:
            log.info("node %s: DRA driver %s plugin at %s %s", self.node, plugin.driver, plugin.endpoint,
                     "connected" if connected else "disconnected")
        plugin.connected = connected
        if state is grpc.ChannelConnectivity.IDLE and (plugin.reconnect is None or plugin.reconnect.done()):
            plugin.reconnect = asyncio.create_task(self._reconnect(plugin))
        self._sync(plugin.driver)

    async def _reconnect(self, plugin: DRAPlugin) -> None:
        """Ask an idle channel to connect again (gRPC does not on its own), at most once a second."""
        await self.clock.sleep(RECONNECT_INTERVAL)
        if plugin in self.store.get(plugin.driver, []) and plugin.watch:
            plugin.channel.unsubscribe(plugin.watch)
            plugin.channel.subscribe(plugin.watch, try_to_connect=True)

    def _sync(self, driver: str) -> None:
        """Cancel the driver's pending wipe while a plugin of it is connected; else make sure one is due."""
        if any(p.connected for p in self.store.get(driver, [])):
            wipe = self.wipes.pop(driver, None)
            if wipe:
                wipe.cancel()
        elif driver not in self.wipes:
            self.wipes[driver] = asyncio.create_task(self._wipe(driver))

    async def wipe_at_start(self, existing: dict[str, list[dict]], builtin: Collection[str]) -> None:
        """Delete the node's slices (`existing`, by driver) of the drivers not in `builtin`."""
        for driver in existing:
            if driver in builtin:
                continue
            try:
                items = await self._delete_slices(driver)
            except APIError as e:
                log.warning("node %s: wiping ResourceSlices of DRA driver %s: %s", self.node, driver, e.message)
                continue
            log.info("node %s: deleted %d ResourceSlices of DRA driver %s at start (not registered)", self.node,
                     len(items), driver)

    async def _delete_slices(self, driver: str) -> list[dict]:
        """One DeleteCollection of the driver's slices on this node, selected by their fields as upstream's
        kubelet selects them (a fields.Set's string: its keys sorted)."""
        return await self.slices.delete_collection(field_selector=f"spec.driver={driver},spec.nodeName={self.node}")

    async def _wipe(self, driver: str) -> None:
        """After the grace period, delete the driver's ResourceSlices on this node."""
        await self.clock.sleep(self.wiping_delay)
        try:
            items = await self._delete_slices(driver)
            log.info("node %s: deleted %d ResourceSlices of DRA driver %s, gone for %gs", self.node, len(items),
                     driver, self.wiping_delay)
        except APIError as e:
            log.warning("node %s: wiping ResourceSlices of DRA driver %s: %s", self.node, driver, e.message)
        finally:
            if self.wipes.get(driver) is asyncio.current_task():
                del self.wipes[driver]

    async def _watch_health(self, plugin: DRAPlugin, service: str) -> None:
        """Read the plugin's NodeWatchResources stream, opening it again after it ends, until the
        plugin goes. The stream is read by a thread of its own, not the loop's executor's."""
        import grpc

        call = stub(plugin.channel, service, HEALTH_METHODS, streaming=True)["NodeWatchResources"]
        loop = asyncio.get_running_loop()
        while True:
            stream = call(health_pb.NodeWatchResourcesRequest())
            ended = loop.create_future()

            def read(stream=stream, ended=ended) -> None:
                try:
                    for response in stream:
                        loop.call_soon_threadsafe(self._health_report, plugin.driver, response)
                except grpc.RpcError:
                    pass
                finally:
                    with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
                        loop.call_soon_threadsafe(lambda: ended.done() or ended.set_result(None))

            threading.Thread(target=read, name=f"dra-health-{plugin.driver}", daemon=True).start()
            try:
                await ended
            finally:
                stream.cancel()
            await self.clock.sleep(HEALTH_RETRY)

    def reports_health(self, driver: str) -> bool:
        """Whether a plugin of the driver streams its devices' health."""
        return driver in self.health

    def device_health(self, driver: str, pool: str, device: str) -> str:
        """The device's health as last reported, Unknown if never or longer ago than its timeout."""
        entry = self.health.get(driver, {}).get((pool, device))
        return _current(entry, self.clock.monotonic())

    def _health_report(self, driver: str, response) -> None:
        known = self.health.get(driver)
        if known is None:  # the driver went meanwhile
            return
        now = self.clock.monotonic()
        before = {key: (_current(e, now), e[2]) for key, e in known.items()}
        for d in response.devices:
            known[(d.device.pool_name, d.device.device_name)] = (
                HEALTH.get(d.health, "Unknown"), now, float(d.health_check_timeout_seconds or DEFAULT_HEALTH_TIMEOUT))
        if {key: (_current(e, now), e[2]) for key, e in known.items()} != before and self.on_health:
            self.on_health(driver)
        self._expire_later(driver)

    def _expire_later(self, driver: str) -> None:
        """Wake when the next of the driver's reported healths runs out, to have its pods' statuses
        written again (upstream finds it run out as it next generates them)."""
        if (old := self.expiries.pop(driver, None)) is not None:
            old.cancel()
        now = self.clock.monotonic()
        ends = [e[1] + e[2] for e in self.health.get(driver, {}).values() if _current(e, now) != "Unknown"]
        if ends:
            self.expiries[driver] = asyncio.create_task(self._expire(driver, min(ends) - now))

    async def _expire(self, driver: str, delay: float) -> None:
        await self.clock.sleep(delay + 0.001)  # past the end: a health holds while its age is not over the timeout
        if self.expiries.get(driver) is asyncio.current_task():
            del self.expiries[driver]
        if driver in self.health:
            if self.on_health:
                self.on_health(driver)
            self._expire_later(driver)

    async def stop(self) -> None:
        for t in [*self.wipes.values(), *self.expiries.values()]:
            t.cancel()
        await asyncio.gather(*self.wipes.values(), *self.expiries.values(), return_exceptions=True)
        self.wipes.clear()
        self.expiries.clear()
        for plugins in self.store.values():
            for p in plugins:
                _close(p)
        await asyncio.gather(*(p.health_task for ps in self.store.values() for p in ps if p.health_task),
                             return_exceptions=True)
        self.store.clear()


def _current(entry: tuple[str, float, float] | None, now: float) -> str:
    """A reported health as it stands at `now`: Unknown once older than its timeout."""
    if entry is None:
        return "Unknown"
    health, at, timeout = entry
    return health if now - at <= timeout else "Unknown"


def _close(plugin: DRAPlugin) -> None:
    for t in (plugin.health_task, plugin.reconnect):
        if t:
            t.cancel()
    if plugin.watch is None:
        plugin.channel.close()
        return
    plugin.channel.unsubscribe(plugin.watch)
    # gRPC's connectivity poller wakes every 0.2 s and only then sees nobody is subscribed; a channel
    # closed under it makes it raise in its thread, so the channel is closed once it has stopped
    timer = threading.Timer(0.5, plugin.channel.close)
    timer.daemon = True
    timer.start()
