"""The kubelet's DRAPluginManager (pkg/kubelet/cm/dra/plugin) for one node:
the registration handler of "DRAPlugin" plugins (plugin_watcher.py) and
the client the kubelet prepares claims through.

Validation picks the newest DRAPlugin service the plugin lists that the
kubelet speaks (v1, then v1beta1); one instance cannot take over another's
endpoint. When the last plugin of a driver goes away the driver's
ResourceSlices on this node are deleted after a grace period (upstream's
wipingDelay, 30 s), unless a plugin of the driver registers again first:
pods must not be scheduled against devices no plugin can prepare.
Upstream also wipes a driver whose gRPC connection drops and all of the
node's slices when the kubelet starts; nanokube wipes only on
deregistration, so the built-in simulated drivers' slices and those a test
publishes itself are left alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from dataclasses import dataclass, field

import grpc

from ...clock import REAL, Clock
from ...machinery.errors import APIError
from .grpc_api import DRA_METHODS, DRA_SERVICES, stub, target
from .plugin_watcher import RegistrationError
from .proto import dra_pb2 as pb

log = logging.getLogger(__name__)

#: how long a driver may be without a plugin before its ResourceSlices on the node are deleted
WIPING_DELAY = 30.0
#: how long a plugin has to answer one call (upstream's defaultClientCallTimeout)
CLIENT_CALL_TIMEOUT = 45.0


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

    async def prepare(self, claims: list[dict]) -> pb.NodePrepareResourcesResponse:
        return await asyncio.to_thread(self.calls["NodePrepareResources"],
                                       pb.NodePrepareResourcesRequest(claims=[_claim(c) for c in claims]),
                                       timeout=CLIENT_CALL_TIMEOUT)

    async def unprepare(self, claims: list[dict]) -> pb.NodeUnprepareResourcesResponse:
        return await asyncio.to_thread(self.calls["NodeUnprepareResources"],
                                       pb.NodeUnprepareResourcesRequest(claims=[_claim(c) for c in claims]),
                                       timeout=CLIENT_CALL_TIMEOUT)


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

    def get(self, driver: str) -> DRAPlugin | None:
        """The driver's most recent plugin (upstream's heuristic: most likely the newest)."""
        plugins = self.store.get(driver)
        return plugins[-1] if plugins else None

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
        channel = grpc.insecure_channel(target(endpoint))
        plugin = DRAPlugin(name, endpoint, service, channel, stub(channel, DRA_SERVICES[service], DRA_METHODS))
        self.store.setdefault(name, []).append(plugin)
        wipe = self.wipes.pop(name, None)
        if wipe:
            wipe.cancel()
        log.info("node %s: DRA driver %s registered (endpoint %s, service %s)", self.node, name, endpoint, service)

    def deregister(self, name: str, endpoint: str) -> None:
        plugins = self.store.get(name, [])
        gone = [p for p in plugins if p.endpoint == endpoint]
        if not gone:
            return
        for p in gone:
            p.channel.close()
        plugins[:] = [p for p in plugins if p.endpoint != endpoint]
        if plugins:
            return
        del self.store[name]
        if name not in self.wipes:
            self.wipes[name] = asyncio.create_task(self._wipe(name))

    async def _wipe(self, driver: str) -> None:
        """After the grace period, delete the driver's ResourceSlices on this node."""
        await self.clock.sleep(self.wiping_delay)
        try:
            items, _ = await self.slices.list(field_selector=f"spec.nodeName={self.node},spec.driver={driver}")
            for s in items:
                with contextlib.suppress(APIError):
                    await self.slices.delete(s["metadata"]["name"])
            log.info("node %s: deleted %d ResourceSlices of DRA driver %s, gone for %gs", self.node, len(items),
                     driver, self.wiping_delay)
        except APIError as e:
            log.warning("node %s: wiping ResourceSlices of DRA driver %s: %s", self.node, driver, e.message)
        finally:
            if self.wipes.get(driver) is asyncio.current_task():
                del self.wipes[driver]

    async def stop(self) -> None:
        for t in self.wipes.values():
            t.cancel()
        await asyncio.gather(*self.wipes.values(), return_exceptions=True)
        self.wipes.clear()
        for plugins in self.store.values():
            for p in plugins:
                p.channel.close()
        self.store.clear()
