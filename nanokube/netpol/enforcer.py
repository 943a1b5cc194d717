"""The policy agent of a process-runtime cluster: informers on Pods,
Namespaces and NetworkPolicies (shared by every node), and per node one nft
table rewritten in one transaction whenever what it depends on changed, at
most every `min_sync_period` seconds."""

from __future__ import annotations

import asyncio
import logging

from ..client.informer import Informer
from ..clock import REAL, Clock
from ..machinery.user import User
from ..node.runtime.netns import host_veth
from ..proxy.nftables.nft import Nft, NftError
from .policy import Cluster, rules_for
from .rules import removal, transaction

log = logging.getLogger(__name__)

#: the identity of the policy agent (a CNI's node agent reads these three kinds)
AGENT_USER = User("system:serviceaccount:kube-system:network-policy-agent",
                  ("system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"))


class NetworkPolicyEnforcer:
    def __init__(self, client, nodes: list[tuple[str, str]], clock: Clock = REAL, min_sync_period: float = 0.2,
                 nft_for=Nft):
        """`nodes`: (node name, network namespace) of each node."""
        self.clock = clock
        self.min_sync_period = min_sync_period
        self.pods = Informer(client.resource("", "v1", "pods"), clock=clock)
        self.namespaces = Informer(client.resource("", "v1", "namespaces"), clock=clock)
        self.policies = Informer(client.resource("networking.k8s.io", "v1", "networkpolicies"), clock=clock)
        self.nft = {name: nft_for(netns) for name, netns in nodes}
        self.written: dict[str, str] = {}
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task] = []
        for inf in (self.pods, self.namespaces, self.policies):
            inf.add_handlers(lambda o: self._wake.set(), lambda o, n: self._wake.set(), lambda o: self._wake.set())

    async def start(self) -> None:
        for inf in (self.pods, self.namespaces, self.policies):
            self._tasks.append(asyncio.create_task(inf.run()))
        for inf in (self.pods, self.namespaces, self.policies):
            await inf.synced.wait()
        self.sync()
        self._tasks.append(asyncio.create_task(self._loop()))

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for name, nft in self.nft.items():
            if self.written.get(name):
                try:
                    nft.apply(removal())
                except NftError:
                    pass  # the node namespace is already gone
            nft.close()

    async def _loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                self.sync()
            except Exception:
                log.exception("network policy sync failed")
            await self.clock.sleep(self.min_sync_period)

    def sync(self) -> None:
        """Write each node's table if its rules changed."""
        pods = self.pods.list()
        cluster = Cluster(pods, self.namespaces.list())
        policies = self.policies.list()
        for node, nft in self.nft.items():
            local = [p for p in pods if (p.get("spec") or {}).get("nodeName") == node]
            rules = rules_for(local, policies, cluster)
            text = transaction(rules, host_veth) if rules else ""
            if text == self.written.get(node, ""):
                continue
            try:
                nft.apply(text or removal())
            except NftError as e:
                log.warning("network policy rules for node %s: %s", node, e)
                continue
            self.written[node] = text
