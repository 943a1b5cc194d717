"""Starts and stops every simulated node of a cluster description.

One pod informer (bound pods only) serves all agents and dispatches by
spec.nodeName: a watch per node would cost thousands of watchers.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import tempfile
from collections.abc import AsyncIterable, Mapping

from ..machinery import envknob
from ..machinery.user import User
from ..client.informer import Informer, key_of
from ..client.ratelimit import DEFAULT_BURST, DEFAULT_QPS, rest_limit
from ..clock import REAL, Clock
from ..metrics.provider import MetricsProvider
from ..metrics.usage import running_containers
from .agent import NodeAgent, Throttle
from .kubelet_server import KubeletServer
from .lifecycle import SYNC_RETRY
from .streaming import NodeStreamingServer, log_options
from .volumes.stats import AGG_PERIOD, memory_backed, tmpfs_charges, tmpfs_usage
from .volumes.watch_based_manager import WatchBasedManager
from .cluster import Cluster
from .simulated_cluster import WatchedCluster
from .dra.deviceclasses import ensure_device_classes, nvidia_models
from .faults import ANNOTATION as FAULT_ANNOTATION

log = logging.getLogger(__name__)

NODE_USER = User("system:node-agents", ("system:nodes", "system:authenticated"))
#: registrations and heartbeats in flight at once (see agent.Throttle)
API_CONCURRENCY = 8
#: from this many nodes on, start-up ends by freezing the heap (see `start`)
GC_FREEZE_NODES = 1000
RENEW_ENV = "NANOKUBE_NODE_RENEW_INTERVAL"
VOLUME_STATS_ENV = "NANOKUBE_VOLUME_STATS_AGG_PERIOD"
RESTART_PERIOD_ENV = "NANOKUBE_MAX_CONTAINER_RESTART_PERIOD"


def options_from_env(env: Mapping[str, str] = os.environ) -> dict[str, float]:
    """A shorter lease renew interval (seconds) for `nanokube up`, so tests can
    also shorten the node lifecycle controller's grace period; a shorter volume
    stats aggregation period (seconds), so they see a write in the stats soon; the
    kubelets' crashLoopBackOff.maxContainerRestartPeriod (seconds, 1 to 300 as the
    kubelet validates it), so a crash-looping container restarts sooner."""
    out = {"renew_interval": float(env[RENEW_ENV])} if env.get(RENEW_ENV) else {}
    if env.get(VOLUME_STATS_ENV):
        out["volume_stats_agg_period"] = float(env[VOLUME_STATS_ENV])
    period = envknob.seconds(env, RESTART_PERIOD_ENV, lambda s: 1 <= s <= 300,
                             "crashLoopBackOff.maxContainerRestartPeriod must be between 1s and 300s")
    if period is not None:
        out["max_container_restart_period"] = period
    return out


@contextlib.contextmanager
def _full_collections_deferred(nodes: int):
    """No full (generation 2) collection while thousands of nodes are built and
    register. Nearly everything that allocates lives on (agents, API objects,
    caches, informer copies), so each full collection CPython triggers as the
    heap grows by a quarter walks a heap that is all live: at 5000 nodes 15 of
    them took about a third of start-up's CPU. The young generations are
    collected as usual throughout."""
    if nodes < GC_FREEZE_NODES:
        yield
        return
    young0, young1, old = gc.get_threshold()
    gc.set_threshold(young0, young1, 1 << 30)
    try:
        yield
    finally:
        gc.set_threshold(*gc.get_threshold()[:2], old)


def _freeze(nodes: int) -> None:
    """Thousands of nodes leave millions of long-lived objects (agents, API
    objects, caches). Python's full collections walk them all and stall the
    event loop for seconds, making Leases late; frozen objects are left out of
    those walks. Building agents and registering them leaves no cyclic garbage
    behind (a full collection after start-up found none at 1000 and 5000
    nodes, and took 1 CPU-s at 5000), so only the young generations are
    collected before each freeze."""
    if nodes >= GC_FREEZE_NODES:
        gc.collect(1)
        gc.freeze()


#: KubeletConfiguration v1beta1's defaults for its client's limit (kubeAPIQPS 50, kubeAPIBurst 100) and
#: its event client's (eventRecordQPS 50, eventBurst 100)
KUBELET_CLIENT_LIMITS = {"api_limit": (50.0, 100), "event_limit": (50.0, 100)}


def kubelet_client_limits(api_qps: int, api_burst: int, event_qps: int, event_burst: int,
                          flag_prefix: str = "--") -> dict[str, tuple[float, int]]:
    """NodeManager's `client_limits` from the kubelet's kubeAPIQPS, kubeAPIBurst, eventRecordQPS and
    eventBurst (their flags `flag_prefix` + kube-api-qps, ...): none may be negative (ValueError,
    the kubelet's validation words); a zero one is client-go's default (5 a second, a burst of 10).
    The API client is a clientset, so a qps without a burst is refused as NewForConfig does; the event
    client a CoreV1 client, which takes the default burst instead."""
    given = (("kubeAPIQPS", "kube-api-qps", api_qps), ("kubeAPIBurst", "kube-api-burst", api_burst),
             ("eventRecordQPS", "event-qps", event_qps), ("eventBurst", "event-burst", event_burst))
    for field, flag, value in given:
        if value < 0:
            raise ValueError(f"invalid configuration: {field} ({flag_prefix}{flag}) {value} must not be a negative number")
    return {"api_limit": rest_limit(api_qps, api_burst),
            "event_limit": (float(event_qps or DEFAULT_QPS), event_burst or DEFAULT_BURST)}


class NodeManager:
    def __init__(self, connect, cluster: Cluster, clock: Clock = REAL, *, renew_interval: float = 10.0,
                 status_interval: float = 300.0, pods_dir: str | None = None, runtime=None,
                 plugin_registry: bool = True, volume_stats_agg_period: float = AGG_PERIOD,
                 sync_retry: float = SYNC_RETRY, max_container_restart_period: float | None = None,
                 client_limits: dict | None = None, pod_pids_limit: int = -1, standalone: bool = False,
                 node_dir: str = "", cdi_spec_dirs: tuple[str, ...] = ()):
        """`connect(user, field_manager)` gives the client the agents act through (the loopback
        client in `up`). `pods_dir` holds each node's pod directories (volumes); without one
        a temporary directory is used and removed on stop. `runtime` runs every
        node's containers (default: simulated). `plugin_registry=False`: the agents watch no
        plugins_registry directory (NodeAgent). `volume_stats_agg_period`: how long the kubelet
        endpoints' volume measurements stand (volumeStatsAggPeriod). `sync_retry`,
        `max_container_restart_period`: NodeAgent's. `client_limits`: NodeAgent's `api_limit` and
        `event_limit` for every agent, each its own buckets as each kubelet's clientsets are (`up`:
        KUBELET_CLIENT_LIMITS; None: none, as `nanokube simulate` has it). `pod_pids_limit`: every
        agent's podPidsLimit (NodeAgent's). `standalone`: the one node of `cluster` under its own
        credentials (`nanokube kubelet`): it watches only its own pods, as the Node authorizer lets a
        node, and leaves the cluster's DeviceClasses to whoever set the cluster up; `node_dir`: that node's
        directory (its plugins_registry, plugins, pods' directories, DRA checkpoint) in place of one under
        `pods_dir`, as a kubelet's --root-dir holds them; `cdi_spec_dirs`: NodeAgent's."""
        self.client = connect(NODE_USER, "kubelet")
        self.clock = clock
        #: the directory of its own when given none: removed on stop, or else when the manager goes (one never
        #: started, or whose start failed, is only dropped: its directory stayed in /tmp)
        self._own_pods_dir = None if pods_dir else tempfile.TemporaryDirectory(prefix="nanokube-pods-",
                                                                               ignore_cleanup_errors=True)
        self.pods_dir = pods_dir or self._own_pods_dir.name
        self.throttle = Throttle(API_CONCURRENCY)
        #: the agents' kubelet endpoints (nodes/proxy), made when first asked for; they started with this manager
        self._kubelets: dict[str, KubeletServer] = {}
        self._volume_stats_agg_period = volume_stats_agg_period
        self._started = clock.now()
        #: the ConfigMaps and Secrets the agents' pods' volumes name, one watch each for all agents
        self.watched = {p: WatchBasedManager(self.client, p, clock) for p in ("configmaps", "secrets")}
        self.standalone = standalone
        selector = f"spec.nodeName={cluster.nodes()[0].name}" if standalone else "spec.nodeName!="
        self.pods = Informer(self.client.resource("", "v1", "pods"), field_selector=selector, clock=clock)
        #: the Services, EndpointSlices and (these) pods simulated pods' network commands reach
        self.watched_cluster = WatchedCluster(self.client, clock, pods=self.pods)
        with _full_collections_deferred(sum(p.count for p in cluster.pools)):
            self.agents = {
                s.name: NodeAgent(self.client, s, clock, renew_interval=renew_interval, status_interval=status_interval,
                                  pods_dir=self.pods_dir, runtime=runtime, throttle=self.throttle,
                                  watched=self.watched, plugin_registry=plugin_registry, sync_retry=sync_retry,
                                  max_container_restart_period=max_container_restart_period,
                                  cluster=self.watched_cluster, pod_pids_limit=pod_pids_limit, node_dir=node_dir,
                                  cdi_spec_dirs=cdi_spec_dirs, **(client_limits or {}))
                for s in cluster.nodes()
            }
        _freeze(len(self.agents))
        # a pool's nodes all have the same devices: its first one says whether it has NVIDIA GPUs
        first = [d for p in cluster.pools if p.count for d in self.agents[p.node_name(0)].spec.devices]
        self._nvidia = any(d.attributes.get("driver") == "nvidia" for d in first)
        self._nvidia_gpus = nvidia_models(d.attributes.get("model", "") for d in first if d.kind == "gpu")
        self.pods.add_handlers(on_add=self._dispatch, on_update=lambda _old, new: self._dispatch(new),
                               on_delete=self._forget)
        #: until the pods' first list is handed out: the keys of those listed (see `start`)
        self._listed: list[str] | None = []
        self._informer: asyncio.Task | None = None
        # (a standalone node's credentials read its own Node only: the Node authorizer's rule)
        self.nodes = Informer(self.client.resource("", "v1", "nodes"), clock=clock,
                              field_selector=f"metadata.name={cluster.nodes()[0].name}" if standalone else "")
        self.nodes.add_handlers(on_add=lambda n: self._node_changed(None, n), on_update=self._node_changed)
        self._fault_tasks: set[asyncio.Task] = set()
        self._node_informer: asyncio.Task | None = None

    async def start(self) -> None:
        """Register every node and publish its devices (bounded concurrency),
        then start running pods. One list of ResourceSlices up front lets each
        driver adopt what a previous run published."""
        if not self.standalone:
            await ensure_device_classes(self.client, nvidia=self._nvidia, nvidia_gpus=self._nvidia_gpus)
        existing: dict[str, dict[str, list[dict]]] = {}
        # (a standalone node lists its own: a node may list ResourceSlices only through spec.nodeName)
        items, _ = await self.client.resource("resource.k8s.io", "v1", "resourceslices").list(
            field_selector=f"spec.nodeName={next(iter(self.agents))}" if self.standalone else "")
        for s in items:
            node = s["spec"].get("nodeName")
            if node in self.agents:
                existing.setdefault(node, {}).setdefault(s["spec"]["driver"], []).append(s)

        async def one(agent: NodeAgent) -> None:
            async with self.throttle.slot(Throttle.REGISTRATION):
                await agent.start(existing.get(agent.name, {}))

        with _full_collections_deferred(len(self.agents)):
            await asyncio.gather(*(one(a) for a in self.agents.values()))
            # no agent (`up` with a cluster of no nodes, as scheduler_perf's harness runs it): no pod
            # or node is any agent's, so neither is watched (the API server handed every binding and
            # node write to these informers, whose handlers found no agent to give it to)
            if self.agents:
                self._informer = asyncio.create_task(self.pods.run())
                await self.pods.synced.wait()
                self._admit_listed()
                self._node_informer = asyncio.create_task(self.nodes.run())
                await self.nodes.synced.wait()
        _freeze(len(self.agents))
        MetricsProvider.memory_charges = (*MetricsProvider.memory_charges, self.tmpfs_charge)
        log.info("%d simulated nodes registered", len(self.agents))

    async def stop(self) -> None:
        MetricsProvider.memory_charges = tuple(c for c in MetricsProvider.memory_charges if c != self.tmpfs_charge)
        for t in (self._informer, self._node_informer, *self._fault_tasks):
            if t:
                t.cancel()
                await asyncio.gather(t, return_exceptions=True)
        await asyncio.gather(*(a.stop() for a in self.agents.values()), return_exceptions=True)
        for manager in self.watched.values():
            await manager.close()
        await self.watched_cluster.close()
        if self._own_pods_dir:
            self._own_pods_dir.cleanup()

    def _node_changed(self, old: dict | None, node: dict) -> None:
        """Show the agent the server's copy of its Node (see NodeAgent.node_seen),
        and hand it a changed fault annotation (faults.py)."""
        agent = self.agents.get(node["metadata"]["name"])
        if agent is None:
            return
        agent.node_seen(node)
        value = (node["metadata"].get("annotations") or {}).get(FAULT_ANNOTATION)
        before = ((old or {}).get("metadata", {}).get("annotations") or {}).get(FAULT_ANNOTATION)
        if value == before:
            return
        t = asyncio.create_task(agent.apply_faults(value))
        self._fault_tasks.add(t)
        t.add_done_callback(self._fault_tasks.discard)

    # --- the agents' streaming servers, for the API server -------------------------------

    def streaming_for(self, node: str) -> NodeStreamingServer | None:
        """The streaming server of `node` if one of these agents runs it."""
        agent = self.agents.get(node)
        return None if agent is None else agent.streaming

    def kubelet_for(self, node: str) -> KubeletServer | None:
        """The kubelet endpoints of `node` if one of these agents runs it."""
        agent = self.agents.get(node)
        if agent is None:
            return None
        if node not in self._kubelets:
            self._kubelets[node] = KubeletServer(agent, self._started, self._volume_stats_agg_period)
        return self._kubelets[node]

    async def read_log(self, namespace: str, name: str, container: str, query) -> bytes | AsyncIterable | None:
        """A pods/log reader (Subresources.log_readers): None for pods none of these agents runs."""
        pod = self.pods.get(f"{namespace}/{name}")
        agent = self._agent(pod) if pod is not None else None
        if agent is None:
            return None
        return await agent.streaming.logs(namespace, name, pod["metadata"]["uid"], container,
                                          log_options(query, self.clock.now(), name))

    def tmpfs_charge(self, pod: dict) -> dict[str, int] | None:
        """MetricsProvider.memory_charges: the pages of the memory-backed emptyDirs of a pod these
        agents run, by the running container they count in (stats.tmpfs_charges); None for others."""
        agent = self._agent(pod) if memory_backed(pod) else None
        worker = agent.worker(pod["metadata"].get("uid", "")) if agent is not None else None
        if worker is None:
            return None
        return tmpfs_charges(pod, tmpfs_usage(agent.volumes, worker, pod), [c["name"] for c in running_containers(pod)])

    def _agent(self, pod: dict) -> NodeAgent | None:
        return self.agents.get((pod.get("spec") or {}).get("nodeName") or "")

    def _admit_listed(self) -> None:
        """Hand the pods the first list found to their agents oldest first, as a starting kubelet
        admits the pods it finds sorted by creation time: each is admitted against those before it.
        Each agent gets the informer's latest copy; one deleted meanwhile is left out."""
        listed, self._listed = self._listed or [], None
        pods = [p for p in map(self.pods.get, dict.fromkeys(listed)) if p is not None]
        pods.sort(key=lambda p: p["metadata"].get("creationTimestamp") or "")
        for pod in pods:
            self._dispatch(pod)
        by_node: dict[str, set[str]] = {}
        for pod in pods:
            by_node.setdefault((pod.get("spec") or {}).get("nodeName") or "", set()).add(pod["metadata"]["uid"])
        for name, agent in self.agents.items():
            if agent.claims.pods_seen or agent.claims.unprepare_left:  # (a checkpoint's, of the node's last run)
                agent.claims.release_gone(by_node.get(name, set()))

    def _dispatch(self, pod: dict) -> None:
        if self._listed is not None:
            self._listed.append(key_of(pod))
            return
        agent = self._agent(pod)
        if agent is not None:
            agent.sync_pod(pod)

    def _forget(self, pod: dict) -> None:
        agent = self._agent(pod)
        if agent is not None:
            agent.forget_pod(pod)
