"""kube-proxy for each node of a process-runtime cluster: one Proxier per
node, its nft transactions run inside the node's network namespace, and the
proxy-mode warnings (modes.py) recorded as Warning Events on every Node."""

from __future__ import annotations

import logging

from ..apiserver.errors import APIError
from ..apiserver.rest import User
from ..client.local import LocalClient
from ..clock import REAL, Clock
from .nftables.layout import Config
from .proxier import Proxier

log = logging.getLogger(__name__)

PROXY_USER = User("system:kube-proxy", ("system:node-proxier", "system:authenticated"))
MODE_EVENT_REASON = "ProxyModeWarning"
#: the API server's default service CIDR (registry/core_services.py): unallocated ClusterIPs in it are dropped
SERVICE_CIDR = "10.96.0.0/12"


class NodeProxies:
    def __init__(self, rest, nodes: list[tuple[str, str, str]], warnings: list[str], clock: Clock = REAL, *,
                 cfg: Config | None = None, min_sync_period: float = 1.0):
        """`nodes`: (node name, node IP, network namespace) of each node."""
        self.client = LocalClient(rest, PROXY_USER, field_manager="kube-proxy")
        self.clock = clock
        self.warnings = warnings
        self.proxiers = [Proxier(self.client, name, node_ip, netns=netns, clock=clock, cfg=cfg,
                                 min_sync_period=min_sync_period) for name, node_ip, netns in nodes]

    async def start(self) -> None:
        for p in self.proxiers:
            await p.start()
            for w in self.warnings:
                await self._event(p.node_name, w)
        log.info("kube-proxy (nftables) running for %d nodes", len(self.proxiers))

    async def stop(self) -> None:
        for p in self.proxiers:
            await p.stop()

    async def _event(self, node: str, message: str) -> None:
        now = self.clock.now()
        body = {
            "metadata": {"name": f"{node}.{int(now * 1e9):x}", "namespace": "default"},
            "involvedObject": {"kind": "Node", "apiVersion": "v1", "name": node, "uid": node},
            "reason": MODE_EVENT_REASON, "message": message, "type": "Warning", "count": 1,
            "source": {"component": "kube-proxy", "host": node},
            "firstTimestamp": self.clock.rfc3339(now), "lastTimestamp": self.clock.rfc3339(now),
            "reportingComponent": "kube-proxy", "reportingInstance": node,
        }
        try:
            await self.client.resource("", "v1", "events").create(body, namespace="default")
        except APIError as e:
            log.warning("node %s: proxy mode event not recorded: %s", node, e.message)
