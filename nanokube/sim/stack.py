"""The control plane a simulation runs: the same objects `nanokube up` wires
(API server REST stack with admission and authorization over a memory store,
controller manager, simulated nodes and DRA drivers, scheduler), all on one
injected clock and talking through the loopback client.

Left out, because they serve clients that a simulation has none of: the
HTTPS listener and the API server's housekeeping loops (its identity Lease,
IP repair, APF status, compaction), leader election, and the nodes' kubelet
plugin watchers (external DRA drivers register there; a simulation's drivers
are the nodes' own, and a watcher polls its directory every virtual second,
over openb's 149 days most of a run's work). Nodes renew their
Leases and post status once per `heartbeat` seconds (default: a year) and
the node lifecycle controller is off unless asked for, since over a
149-day trace a 10-second heartbeat per node would be most of the events
(with the controller on, the heartbeat is the kubelet's 10 s).
"""

from __future__ import annotations

import os
import random
import tempfile
import uuid

from .. import gcsettle
from ..apiserver.app import APIServer
from ..apiserver.controlplane import bootstrap
from ..apiserver.eventttl import DEFAULT_TTL
from ..apiserver.loopback import LocalClient, connector
from ..apiserver.rest import NAME_CHARS
from ..client.ratelimit import RateLimitedClient, TokenBucket
from ..clock import Clock
from ..controllers.manager import ControllerManager
from ..machinery.user import SCHEDULER_USER, User
from ..node.cluster import Cluster
from ..node.manager import NodeManager
from ..pki.ca import ensure_pki
from ..pki.kubeconfig import write_kubeconfig
from ..registry.resource import _ClockedStrategy
from ..scheduler.config import SchedulerConfig
from ..scheduler.scheduler import Scheduler
from ..store.memory import MemoryStore

#: who replays the trace: a cluster admin, authorized like kubectl with the admin kubeconfig
TRACE_USER = User("nanokube-simulate", ("system:masters", "system:authenticated"))
#: controllers a simulation runs by default: every one but the node lifecycle controller (see module doc)
DEFAULT_CONTROLLERS = "*,-node-lifecycle"
YEAR = 365 * 86400.0
KUBELET_HEARTBEAT = 10.0
#: the directories of this process's planes not yet stopped: an exit that runs no finalizer (os._exit) removes them
_DIRS: set[tempfile.TemporaryDirectory] = set()


class SeededNames:
    """generateName suffixes drawn per prefix from the run's seed: the n-th
    pod of a Job or ReplicaSet gets the same name in every run, however its
    creation interleaves with other objects'."""

    def __init__(self, seed: int):
        self.seed = seed
        self._rngs: dict[str, random.Random] = {}

    def __call__(self, prefix: str) -> str:
        rng = self._rngs.get(prefix)
        if rng is None:
            rng = self._rngs[prefix] = random.Random(f"{self.seed}/{prefix}")
        return "".join(rng.choice(NAME_CHARS) for _ in range(5))


class SeededUIDs:
    """metadata.uid drawn from the run's seed (version 4 UUIDs, as the server's): the n-th object created
    gets the same uid in every run, and so do the names made from uids (a Job's Workload and PodGroup)."""

    def __init__(self, seed: int):
        self._rng = random.Random(f"{seed}/uid")

    def __call__(self) -> str:
        return str(uuid.UUID(int=self._rng.getrandbits(128), version=4))


class SimulatedControlPlane:
    def __init__(self, cluster: Cluster, clock: Clock, config: SchedulerConfig | None = None, seed: int = 0,
                 controllers: str = DEFAULT_CONTROLLERS, heartbeat: float | None = None, serve_port: int | None = None,
                 event_ttl: float = DEFAULT_TTL):
        """`serve_port`: also serve HTTPS there, as `nanokube up` does (with its housekeeping
        loops), writing an admin kubeconfig, so a paced run can be watched with kubectl."""
        self.cluster, self.clock, self.config, self.seed = cluster, clock, config, seed
        self.serve_port = serve_port
        self.controllers_spec = controllers
        lifecycle = "node-lifecycle" in controllers.replace("-controller", "").split(",")
        self.heartbeat = heartbeat or (KUBELET_HEARTBEAT if lifecycle else YEAR)
        self._dir = tempfile.TemporaryDirectory(prefix="nanokube-sim-")
        _DIRS.add(self._dir)
        pki = ensure_pki(self._dir.name) if serve_port is not None else None
        self.server = APIServer(MemoryStore(), pki, port=serve_port or 0, clock=clock, audit_log_path="",
                                event_ttl=event_ttl)
        # served or not, the same run: the PKI a served one needs would turn ServiceAccount admission on,
        # which refused every pod of an openb trace (whose controllers make no `default` ServiceAccount)
        self.server.rest.admission.disable("ServiceAccount")
        if not lifecycle:  # nothing would take TaintNodesByCondition's not-ready taint off a new node
            self.server.rest.admission.disable("TaintNodesByCondition")
        self.server.rest.name_suffix = SeededNames(seed)
        self.server.rest.new_uid = SeededUIDs(seed)
        # and the Services' ClusterIPs and node ports, which the allocators pick at random as upstream's
        self.server.index.get("", "v1", "services").strategy.picks.seed(f"{seed}/picks")
        self.connect = connector(self.server.rest)
        self.client: LocalClient = self.connect(TRACE_USER, "nanokube-simulate")
        self.kubeconfig = os.path.join(self._dir.name, "kubeconfig")

    async def start(self) -> None:
        s = self.server
        # stamps the registry takes from the wall clock (taints' timeAdded) follow this run's clock while it runs
        self._stamps = [(r.strategy, r.strategy.now) for r in s.index.resources if isinstance(r.strategy, _ClockedStrategy)]
        for strategy, _ in self._stamps:
            strategy.now = self.clock.rfc3339
        if self.serve_port is not None:
            await s.start()
            # kubeadm's super-admin.conf's user (kubernetes-super-admin in system:masters), not admin.conf's:
            # kubernetes-admin is cluster-admin by the kubeadm:cluster-admins binding, an object a served
            # run would have and the same run unserved would not (each create draws a seeded uid)
            write_kubeconfig(self.kubeconfig, s.url, s.pki, user="super-admin")
        else:
            await s.store.start()
            await s.cache.start()
            s.event_ttl.start()
            await s._bootstrap()
            await bootstrap(s)
        self.controllers = ControllerManager.in_process(self.connect, self.clock, None,
                                                        controllers=self.controllers_spec)
        await self.controllers.start()
        self.nodes = NodeManager(self.connect, self.cluster, self.clock, renew_interval=self.heartbeat,
                                 status_interval=self.heartbeat, pods_dir=self._dir.name, plugin_registry=False)
        await self.nodes.start()
        clients = [RateLimitedClient(self.connect(SCHEDULER_USER, "default-scheduler"), None) for _ in range(2)]
        self.scheduler = Scheduler(clients[0], clock=self.clock, config=self.config, seed=self.seed,
                                   event_client=clients[1])
        await self.scheduler.start()
        # a clientConnection.qps/burst the configuration sets holds in virtual time, its own client's and
        # its events' apart, from the trace's start (its informers' first lists, before virtual time runs,
        # would wait for ever). Not the default (50/s, bursts of 100): it would measure the limit, not
        # the policy (an openb inflation binds 84 of 1,105 pods in its 11 virtual seconds, 880 without)
        cfg = self.config
        if cfg is not None and cfg.limit_set and cfg.qps > 0:
            for c in clients:
                c.bucket = TokenBucket(cfg.qps, cfg.burst, self.clock)
        self._gc_thresholds = gcsettle.settle(young_only=True)

    async def stop(self) -> None:
        await self.scheduler.stop()
        await self.nodes.stop()
        await self.controllers.stop()
        if self.serve_port is not None:
            await self.server.stop()
        else:
            await self.server.event_ttl.stop()
            await self.server.cache.stop()
            await self.server.store.close()
        for strategy, now in self._stamps:
            strategy.now = now
        self.abandon()
        # what the run froze is garbage now, for the collector (a next run, or the process's end) to free
        gcsettle.restore(self._gc_thresholds)

    def abandon(self) -> None:
        """Instead of `stop` when the process ends right after: of what the run holds, only its
        directory lives outside the process."""
        _DIRS.discard(self._dir)
        self._dir.cleanup()


def remove_dirs() -> None:
    """Before an exit that runs no finalizer: the directories of the planes still running (a second
    Ctrl-C ends `nanokube simulate` at once)."""
    while _DIRS:
        _DIRS.pop().cleanup()
