"""The kubelet's HTTP endpoints a node agent answers (pkg/kubelet/server), which
the API server's nodes/proxy reaches: /healthz (and /healthz/ping, /log, /syncloop), /pods, /runningpods/, /configz, /stats/summary,
/metrics, /metrics/resource, /metrics/cadvisor, /metrics/probes, /containerLogs/ and /logs/ (the
node's /var/log as the system log handler, on by default, lists it: the pods' log files), and the
streaming endpoints /exec/, /attach/, /portForward/ (upgraded to the WebSocket channel protocols or
SPDY, by the shared machinery/httpstream servers, as the kubelet's streaming server) and /run/. Usage is the pods' usage as `kubectl top` reads it
(metrics/usage.py's model, or what the process runtime measures), integrated
over the time each pod has run for the cumulative CPU counters; the node adds
the system's share. Volume stats (volumes/stats.py) are measured from the volumes'
directories (a simulated emptyDir from its pod's files in memory), each measurement standing for
the kubelet's volumeStatsAggPeriod."""

from __future__ import annotations

import asyncio
import html
import inspect
from typing import TYPE_CHECKING
from urllib.parse import quote

import orjson
from aiohttp import web
from multidict import CIMultiDict

from ..machinery import featuregates, healthz
from ..machinery.goduration import string as go_duration
from ..machinery.httpstream.portforward import serve_port_forward
from ..machinery.httpstream.remotecommand import serve_command
from ..clock import parse_time
from ..machinery.errors import APIError
from ..machinery.quantity import QuantityError, parse_quantity
from ..machinery.streaming import StreamFailed, StreamSession
from ..metrics.build_info import BUILD_INFO
from ..metrics.exposition import CONTENT_TYPE, go_float as _float, gzip_preferred, gzipped, render, scrape_headers
from ..metrics.process import PROCESS
from ..metrics.provider import MetricsProvider
from ..metrics.usage import MEMORY_THRESHOLD, SYSTEM_CPU, SYSTEM_MEMORY, Usage, with_leak
from . import dns
from .containerlog import cri_line
from .eviction import IMAGEFS, IMAGEFS_INODES, NODEFS, NODEFS_INODES, PIDS, PodStats
from .volumes import pod_certificate
from .volumes.stats import (AGG_PERIOD, LocalUsage, StatCache, ephemeral_volumes, in_memory_volumes, local_usage,
                            memory_backed, pod_volume_stats, tree_usage)
from .streaming import log_options

if TYPE_CHECKING:
    from .agent import NodeAgent

_TEXT = "text/plain; charset=utf-8"
#: how long the sync loop may go unentered before /healthz/syncloop fails: the kubelet's
#: max(2 x resyncInterval (1m), 5m)
SYNC_LOOP_GRACE = 300.0
#: the resource metrics (kubelet's /metrics/resource collector): name, type, help
_RESOURCE_METRICS = (
    ("container_cpu_usage_seconds_total", "counter", "Cumulative cpu time consumed by the container in core-seconds"),
    ("container_memory_working_set_bytes", "gauge", "Current working set of the container in bytes"),
    ("container_start_time_seconds", "gauge", "Start time of the container since unix epoch in seconds"),
    ("node_cpu_usage_seconds_total", "counter", "Cumulative cpu time consumed by the node in core-seconds"),
    ("node_memory_working_set_bytes", "gauge", "Current working set of the node in bytes"),
    ("pod_cpu_usage_seconds_total", "counter", "Cumulative cpu time consumed by the pod in core-seconds"),
    ("pod_memory_working_set_bytes", "gauge", "Current working set of the pod in bytes"),
    ("resource_scrape_error", "gauge", "1 if there was an error while getting container metrics, 0 otherwise"),
)

#: the volume stats collector's per-claim gauges (kubelet_volume_stats_NAME), sorted: name, FsStats field, help
_VOLUME_METRICS = (
    ("available_bytes", "availableBytes", "Number of available bytes in the volume"),
    ("capacity_bytes", "capacityBytes", "Capacity in bytes of the volume"),
    ("inodes", "inodes", "Maximum number of inodes in the volume"),
    ("inodes_free", "inodesFree", "Number of free inodes in the volume"),
    ("inodes_used", "inodesUsed", "Number of used inodes in the volume"),
    ("used_bytes", "usedBytes", "Number of used bytes in the volume"),
)

#: the cAdvisor container metrics kept (cAdvisor's names, types and help)
_CADVISOR_METRICS = (
    ("container_cpu_usage_seconds_total", "counter", "Cumulative cpu time consumed in seconds."),
    ("container_memory_usage_bytes", "gauge",
     "Current memory usage in bytes, including all memory regardless of when it was accessed"),
    ("container_memory_working_set_bytes", "gauge", "Current working set in bytes."),
    ("container_start_time_seconds", "gauge", "Start time of the container since unix epoch in seconds."),
    ("machine_cpu_cores", "gauge", "Number of logical CPU cores."),
    ("machine_memory_bytes", "gauge", "Amount of memory installed on the machine."),
)


def _go_seconds(seconds: int) -> str:
    """Whole seconds as Go's time.Duration prints them (metav1.Duration in the configuration)."""
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m}m{s}s" if h else f"{m}m{s}s" if m else f"{s}s"


class KubeletServer:
    """One node agent's kubelet endpoints: `serve(method, path, query)` answers as the kubelet would."""

    def __init__(self, agent: NodeAgent, started: float, volume_stats_agg_period: float = AGG_PERIOD):
        """`started`: when the kubelet started (the node's startTime, the base of its CPU counter);
        `volume_stats_agg_period`: how long a volume's measurement stands (volumeStatsAggPeriod)."""
        self.agent = agent
        self.metrics = MetricsProvider(agent.client, agent.clock)
        self.started = started
        self.volume_stats = StatCache(volume_stats_agg_period)
        #: KubeletConfiguration fields a joined kubelet's --config and flags set, over those /configz derives
        self.configured: dict = {}

    async def serve(self, request: web.Request, path: str) -> web.StreamResponse:
        """`request` as the API server's proxy received it; `path` the kubelet path it asks for."""
        if path.startswith("/containerLogs/"):
            return await self._container_logs(request, path.split("/")[2:])
        if path.split("/")[1] in _STREAMING:
            return await self._streaming(request, path.split("/")[1:])
        if path.startswith("/logs/") and request.method in ("GET", "HEAD"):
            return self._logs(path[len("/logs/"):])
        if path == "/healthz" or path.removeprefix("/healthz/") in ("ping", "log", "syncloop"):
            if request.method not in ("GET", "HEAD"):
                return _text(405, "405: Method Not Allowed")
            response = self._healthz(request.query) if path == "/healthz" else self._healthz_check(path.split("/")[2])
            response.headers["X-Content-Type-Options"] = "nosniff"
            return response
        handler = {"/pods": self._pods, "/pods/": self._pods, "/configz": self._configz,
                   "/runningpods/": self._running_pods,
                   "/stats/summary": self._summary, "/stats/summary/": self._summary,
                   "/metrics": self._metrics, "/metrics/resource": self._resource_metrics,
                   "/metrics/cadvisor": self._cadvisor, "/metrics/probes": self._probe_metrics}.get(path)
        if handler is None:
            return _text(404, "404 page not found\n")
        if request.method not in ("GET", "HEAD"):
            return _text(405, "405: Method Not Allowed")
        response = handler()
        if inspect.isawaitable(response):  # volumes are measured off the event loop
            response = await response
        if path.startswith("/metrics"):  # as promhttp answers: its text format's escaping, gzip where preferred
            gzip = gzip_preferred(request.headers.getall("Accept-Encoding", ()))
            response = web.Response(status=response.status, body=gzipped(response.body) if gzip else response.body,
                                    headers=CIMultiDict(scrape_headers(request.headers.get("Accept"), gzip)))
        return response

    async def _container_logs(self, request: web.Request, parts: list[str]) -> web.StreamResponse:
        """/containerLogs/{namespace}/{pod}/{container}: the container's log as pods/log reads it,
        followed as it grows with ?follow=true."""
        if len(parts) != 3 or not all(parts):
            return _text(404, "404 page not found\n")
        namespace, name, container = parts
        worker = next((w for w in list(self.agent.workers.values())
                       if w.pod["metadata"].get("namespace") == namespace and w.pod["metadata"]["name"] == name),
                      None)
        if worker is None:
            return _text(404, f'pod "{name}" does not exist\n')
        names = {c["name"] for key in ("initContainers", "containers", "ephemeralContainers")
                 for c in (worker.pod.get("spec") or {}).get(key) or []}
        if container not in names:
            return _text(404, f'container "{container}" not found in pod "{name}"\n')
        try:
            options = log_options(request.query, self.agent.clock.now(), name)
            out = await self.agent.streaming.logs(namespace, name, worker.pod["metadata"]["uid"], container, options)
        except APIError as e:
            return _text(400, e.message + "\n")
        if isinstance(out, bytes):
            return web.Response(body=out, content_type="text/plain", charset="utf-8")
        resp = web.StreamResponse(headers={"Content-Type": "text/plain; charset=utf-8"})
        await resp.prepare(request)
        async for chunk in out:
            await resp.write(chunk)
        await resp.write_eof()
        return resp

    def _worker(self, namespace: str, name: str, uid: str = ""):
        return next((w for w in list(self.agent.workers.values())
                     if w.pod["metadata"].get("namespace") == namespace and w.pod["metadata"]["name"] == name
                     and (not uid or w.uid == uid)), None)

    async def _streaming(self, request: web.Request, parts: list[str]) -> web.StreamResponse:
        """/exec|/attach/{namespace}/{pod}[/{uid}]/{container} and /portForward/{namespace}/{pod}[/{uid}]:
        the kubelet's checks (a stream asked for, the pod and container exist), then the streams over
        the upgrade the client asks for, served by the same code as the API server's pods/exec,
        pods/attach and pods/portforward. A request that does not upgrade is refused as the kubelet's
        proxy to its streaming server refuses it (500 `Upgrade request required`)."""
        kind, args = parts[0], parts[1:]
        if kind == "run":
            return await self._run(request, args)
        if request.method not in ("GET", "POST"):
            return _text(405, "405: Method Not Allowed")
        forward = kind == "portForward"
        if len(args) not in ((2, 3) if forward else (3, 4)) or not all(args):
            return _text(404, "404 page not found\n")
        q = request.query
        if not forward and not any(q.get(k) in ("1", "true", "True") for k in ("stdin", "stdout", "stderr")):
            return _text(400, "you must specify at least 1 of stdin, stdout, stderr\n")
        uid = args[2] if len(args) == (3 if forward else 4) else ""
        worker = self._worker(args[0], args[1], uid)
        if worker is None:
            if uid and self._worker(args[0], args[1]) is not None:  # the pod, but not the instance the uid names
                return _text(404, f'pod not found ("{args[1]}_{args[0]}")' if forward
                             else f'container not found ("{args[-1]}")')
            return _text(404, "pod does not exist\n")
        if not forward:
            if not worker.has_container(args[-1]):
                return _text(404, f'container not found ("{args[-1]}")')
            if kind == "exec" and not q.getall("command", []):
                return _text(400, "you must specify at least one command for the container\n")
        if "upgrade" not in request.headers.get("Connection", "").lower():
            return _text(500, "Upgrade request required\n")
        try:
            if forward:
                return await serve_port_forward(request, self.agent.streaming, args[0], args[1], worker.uid, "port")
            return await serve_command(request, self.agent.streaming, args[0], args[1], worker.uid, args[-1], kind)
        except APIError as e:
            return _text(e.code, e.message + "\n")

    async def _run(self, request: web.Request, args: list[str]) -> web.Response:
        """POST /run/{namespace}/{pod}[/{uid}]/{container}?cmd=...: the command (the query's `cmd`
        split at spaces) run to its end, its stdout then its stderr answered (the kubelet's
        RunInContainer); one that cannot run or exits non-zero is a 500 with the runtime's error."""
        if request.method != "POST":
            return _text(405, "405: Method Not Allowed")
        if len(args) not in (3, 4) or not all(args):
            return _text(404, "404 page not found\n")
        worker = self._worker(args[0], args[1], args[2] if len(args) == 4 else "")
        if worker is None:
            return _text(404, "pod does not exist\n")
        container, command = args[-1], request.query.get("cmd", "").split(" ")
        if not worker.has_container(container):
            return _text(500, f'container not found ("{container}")')
        out: dict[int, list[bytes]] = {1: [], 2: []}

        def sink(fd: int):
            async def write(data: bytes) -> None:
                out[fd].append(data)
            return write

        session = StreamSession(False, True, True, False, sink(1), sink(2))
        try:
            code = await worker.exec(container, command, session)
        except StreamFailed as e:
            return _text(500, str(e))
        stdout, stderr = b"".join(out[1]), b"".join(out[2])
        if code:
            return _text(500, f"command '{' '.join(command)}' exited with {code}: {stderr.decode(errors='replace')}")
        return web.Response(body=stdout + stderr, content_type="application/json")

    def _logs(self, sub: str) -> web.Response:
        """The kubelet's /logs/ file server over the node's /var/log: `pods/` holds each pod's
        directory (NAMESPACE_NAME_UID), a directory per container, and the current instance's
        CRI log file (RESTARTS.log), as the kubelet lays them out under podLogsDir."""
        parts = sub.split("/")
        is_dir = sub == "" or sub.endswith("/")
        names = parts[:-1] if is_dir else parts
        if names == []:
            return _listing(["pods/"])
        if names[0] != "pods":
            return _text(404, "404 page not found\n")
        pods = {f"{w.namespace}_{w.name}_{w.uid}": w for w in list(self.agent.workers.values())}
        if len(names) == 1:
            return _listing(sorted(f"{d}/" for d in pods)) if is_dir else _moved(sub)
        worker = pods.get(names[1])
        if worker is None:
            return _text(404, "404 page not found\n")
        logs = {name: log for name, log in worker.container_logs().items() if log is not None}
        if len(names) == 2:
            return _listing(sorted(f"{c}/" for c in logs)) if is_dir else _moved(sub)
        found = logs.get(names[2])
        if found is None or len(names) > 4:
            return _text(404, "404 page not found\n")
        restarts, log = found
        if len(names) == 3:
            return _listing([f"{restarts}.log"]) if is_dir else _moved(sub)
        if is_dir or names[3] != f"{restarts}.log":
            return _text(404, "404 page not found\n")
        return web.Response(body=b"".join(cri_line(r) for r in log.records()), content_type="text/plain",
                            charset="utf-8")

    def _running_pods(self) -> web.Response:
        """The runtime's pods with a running container (the kubelet's GetRunningPods): each as
        ToAPIPod builds it, its name, namespace and uid and each running container's name and image."""
        items = []
        for w in sorted(list(self.agent.workers.values()), key=lambda w: (w.namespace, w.name)):
            st = w.pod.get("status") or {}
            running = [{"name": cs["name"], "image": cs.get("image", ""), "resources": {}}
                       for key in ("initContainerStatuses", "containerStatuses", "ephemeralContainerStatuses")
                       for cs in st.get(key) or () if "running" in (cs.get("state") or {})]
            if running:
                items.append({"metadata": {"name": w.name, "namespace": w.namespace, "uid": w.uid},
                              "spec": {"containers": running}, "status": {}})
        return _json({"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items}, encoded=True)

    def _probe_metrics(self) -> web.Response:
        """prober_probe_total: each probe run of the pods here, by type and result (the prober's
        series of a pod go with it)."""
        live = {w.uid for w in list(self.agent.workers.values())}
        lines = ["# HELP prober_probe_total [BETA] Cumulative number of a liveness, readiness or startup probe for a "
                 "container by result.", "# TYPE prober_probe_total counter"]
        for (kind, result, container, pod, namespace, uid), n in sorted(self.agent.probe_results.items()):
            if uid in live:
                lines.append(f'prober_probe_total{{container="{container}",namespace="{namespace}",pod="{pod}",'
                             f'pod_uid="{uid}",probe_type="{kind}",result="{result}"}} {n}')
        return web.Response(text="\n".join(lines) + "\n", headers={"Content-Type": CONTENT_TYPE})

    # --- what runs here -----------------------------------------------------------------

    def _running(self) -> list[tuple[dict, dict[str, Usage], float]]:
        """(pod, usage per container, when it started) of each pod running here."""
        out = []
        for w in list(self.agent.workers.values()):
            pod = w.pod
            status = pod.get("status") or {}
            if status.get("phase") != "Running" or pod["metadata"].get("deletionTimestamp"):
                continue
            started = parse_time(status["startTime"]) if status.get("startTime") else self.started
            out.append((pod, self.metrics.usage(pod), started))
        return out

    def _accounts(self, now: float) -> list[tuple[dict, float, list[tuple[str, Usage, float, float]]]]:
        """Each running pod, when it started, and its containers: (name, usage, start, CPU seconds used
        since then)."""
        out = []
        for pod, usage, started in self._running():
            starts = {}
            for cs in (pod.get("status") or {}).get("containerStatuses") or []:
                at = ((cs.get("state") or {}).get("running") or {}).get("startedAt")
                starts[cs["name"]] = parse_time(at) if at else started
            out.append((pod, started, [(name, u, starts.get(name, started),
                                        u.cpu / 1000 * max(now - starts.get(name, started), 0))
                                       for name, u in usage.items()]))
        return out

    def _system_cpu_seconds(self, now: float) -> float:
        return SYSTEM_CPU / 1000 * max(now - self.started, 0)

    def _node_memory(self, used: int) -> int:
        """The node's working set from what its pods and the system use: with a memory-pressure
        fault, its leak outside the pods too (usage.with_leak), as the eviction manager observes it."""
        capacity = _bytes(self.agent.spec.capacity.get("memory"))
        if capacity and "MemoryPressure" in self.agent.faults.pressure:
            return with_leak(used, capacity, MEMORY_THRESHOLD)
        return used

    # --- endpoints ----------------------------------------------------------------------

    def _checks(self) -> list[tuple[str, str | None]]:
        """The kubelet's health checks in its order (healthz.PingHealthz, LogHealthz and the
        syncloop check), each with the reason it fails or None."""
        at = self.agent.sync_loop_at
        stuck = at is not None and self.agent.clock.monotonic() > at + SYNC_LOOP_GRACE
        return [("ping", None), ("log", None), ("syncloop", "sync Loop took longer than expected" if stuck else None)]

    def _healthz(self, query) -> web.Response:
        """healthz.InstallHandler's root over the kubelet's checks (machinery/healthz.root_answer)."""
        checks = [(name, lambda reason=reason: reason) for name, reason in self._checks()]
        status, text = healthz.root_answer("healthz", checks, set(query.getall("exclude", [])), "verbose" in query)
        return _text(status, text)

    def _healthz_check(self, name: str) -> web.Response:
        """/healthz/NAME: one check, 'ok' or a 500 with its reason."""
        return _text(*healthz.check_answer(dict(self._checks())[name]))

    def _pods(self) -> web.Response:
        items = [w.pod for w in list(self.agent.workers.values())]
        return _json({"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items}, encoded=True)

    def _configz(self) -> web.Response:
        """The KubeletConfiguration (v1beta1 names, no TypeMeta) of the settings these agents follow."""
        a = self.agent
        cfg = {
            "enableServer": True, "podLogsDir": "/var/log/pods", "address": "0.0.0.0", "port": 10250,
            "nodeStatusUpdateFrequency": _go_seconds(int(a.renew_interval)),
            "nodeStatusReportFrequency": _go_seconds(int(a.status_interval)),
            "nodeLeaseDurationSeconds": a.lease_duration, "podCIDR": a.pod_cidr,
            "maxPods": int(a.spec.capacity.get("pods", 110)), "podPidsLimit": a.pod_pids_limit,
            "containerLogMaxSize": "10Mi", "containerLogMaxFiles": 5,
            "volumeStatsAggPeriod": go_duration(round(self.volume_stats.period * 1e9)),
            "crashLoopBackOff": {} if a.max_container_restart_period is None else
            {"maxContainerRestartPeriod": go_duration(round(a.max_container_restart_period * 1e9))},
        }
        if a.rotate_certificates:  # (omitempty, as serverTLSBootstrap)
            cfg["rotateCertificates"] = True
        if a.server_tls_bootstrap:
            cfg["serverTLSBootstrap"] = True
        if a.api_limit:  # the limits it applies (`nanokube simulate`'s agents apply none)
            cfg |= {"kubeAPIQPS": int(a.api_limit[0]), "kubeAPIBurst": a.api_limit[1]}
        if a.event_limit:
            cfg |= {"eventRecordQPS": int(a.event_limit[0]), "eventBurst": a.event_limit[1]}
        if a.runtime.cluster_dns:  # the runtime's pods resolve through the cluster's DNS server (dns)
            cfg |= {"clusterDomain": dns.ZONE, "clusterDNS": list(a.runtime.cluster_dns)}
        return _json({"kubeletconfig": cfg | self.configured}, headers={"X-Content-Type-Options": "nosniff"})

    async def _volume_stats(self, pods: list[dict], stamp: str, claims_only: bool = False) -> list[list[dict]]:
        """Each pod's statsapi.VolumeStats (volumes/stats.py): a volume measured within the
        aggregation period as it was then, the others measured again in a thread; a simulated
        emptyDir's files counted here first, on the loop its pod's commands change them on."""
        mgr, cache, now = self.agent.volumes, self.volume_stats, self.agent.clock.monotonic()
        cache.prune(now)
        in_memory: dict[str, dict[str, tuple[int, int]]] = {}
        for pod in () if claims_only else pods:
            uid = pod["metadata"]["uid"]
            worker = self.agent.worker(uid)  # (a static pod's by its mirror pod's UID now)
            tmpfs = memory_backed(pod)
            in_memory[uid] = {name: tree_usage(worker.empty_dir(name), name in tmpfs) for name in in_memory_volumes(mgr, pod)
                              if worker is not None and cache.fresh((uid, name), now) is None}
        allocatable = _bytes(self.agent.spec.allocatable.get("memory")) if any(map(memory_backed, pods)) else 0
        return await asyncio.to_thread(lambda: [
            pod_volume_stats(mgr, pod, stamp, claims_only, cache, now, in_memory.get(pod["metadata"]["uid"]),
                             allocatable)
            for pod in pods])

    async def _summary(self) -> web.Response:
        """statsapi.Summary: the node's and each running pod's CPU and memory, the pods' volumes,
        ephemeral storage and processes, and the node's filesystems and processes."""
        now, clock = self.agent.clock.now(), self.agent.clock
        stamp = clock.rfc3339()
        node_cpu, node_mem, node_core_s = SYSTEM_CPU, SYSTEM_MEMORY, self._system_cpu_seconds(now)
        pods, stats = [], {}
        accounts = self._accounts(now)
        volumes = await self._volume_stats([pod for pod, _, _ in accounts], stamp)
        for (pod, started, containers), volume in zip(accounts, volumes):
            md = pod["metadata"]
            worker = self.agent.worker(md.get("uid", ""))
            usage = {name: u for name, u, _, _ in containers}
            local = local_usage(self.agent.volumes, worker, pod, usage) if worker is not None else LocalUsage()
            # (what the node's filesystems and processes observe: PodStats as the eviction manager counts them)
            stats[md.get("uid", "")] = pod_stats = PodStats.of(pod, usage, local)
            # a memory-backed emptyDir's pages count in its container's working set (MetricsProvider.memory_charges),
            # those of one no running container mounts in the pod cgroup's alone
            cpu = sum(u.cpu for _, u, _, _ in containers)
            mem = sum(u.memory for _, u, _, _ in containers) + pod_stats.tmpfs
            core_s = sum(s for _, _, _, s in containers)
            node_cpu, node_mem, node_core_s = node_cpu + cpu, node_mem + mem, node_core_s + core_s
            pods.append({"podRef": {"name": md["name"], "namespace": md.get("namespace", ""), "uid": md.get("uid", "")},
                         "startTime": clock.rfc3339(started),
                         "containers": [{"name": name, "startTime": clock.rfc3339(since),
                                         "cpu": _cpu(stamp, u.cpu, cpu_s), "memory": _memory(stamp, u.memory),
                                         **({"rootfs": {"time": stamp, "usedBytes": local.rootfs[name]},
                                             "logs": {"time": stamp, "usedBytes": local.logs[name]}}
                                            if name in local.rootfs else {})}
                                        for name, u, since, cpu_s in containers],
                         "cpu": _cpu(stamp, cpu, core_s), "memory": _memory(stamp, mem)})
            if volume:
                pods[-1]["volume"] = volume
            if local.rootfs:  # calcEphemeralStorage: writable layers, logs, ephemeral volumes, etc-hosts
                ephemeral = ephemeral_volumes(pod)
                used = local.total - sum(local.empty_dirs.values()) + \
                    sum(v["usedBytes"] for v in volume or () if v["name"] in ephemeral)
                pods[-1]["ephemeral-storage"] = {"time": stamp, "usedBytes": used}
            # the pod cgroup's processes (cadvisorInfoToProcessStats), which the eviction manager ranks by
            pods[-1]["process_stats"] = {"process_count": pod_stats.processes}
        capacity = _bytes(self.agent.spec.capacity.get("memory"))
        node_mem = self._node_memory(node_mem)
        node_memory = _memory(stamp, node_mem)
        if capacity:
            node_memory["availableBytes"] = max(capacity - node_mem, 0)
        return _json({"node": {"nodeName": self.agent.name, "startTime": clock.rfc3339(self.started),
                               "cpu": _cpu(stamp, node_cpu, node_core_s), "memory": node_memory,
                               **self._node_filesystems(stamp, stats)},
                      "pods": pods})

    def _node_filesystems(self, stamp: str, stats: dict[str, PodStats]) -> dict:
        """The summary node's fs, runtime.imageFs and rlimit, from what the eviction manager observes
        (its signals are these) of the pods' `stats` the summary counted: the images' filesystem is
        the node's, holding no image bytes."""
        seen = self.agent.eviction.observations(stats)
        out: dict = {}
        if NODEFS in seen:
            for key, (space, inodes, used) in (("fs", (NODEFS, NODEFS_INODES, None)),
                                               ("imageFs", (IMAGEFS, IMAGEFS_INODES, 0))):
                fs, files = seen[space], seen[inodes]
                out[key] = {"time": stamp, "availableBytes": fs.available, "capacityBytes": fs.capacity,
                            "usedBytes": fs.capacity - fs.available if used is None else used,
                            "inodesFree": files.available, "inodes": files.capacity,
                            "inodesUsed": files.capacity - files.available if used is None else used}
            out["runtime"] = {"imageFs": out.pop("imageFs")}
        pids = seen[PIDS]
        return {**out, "rlimit": {"time": stamp, "maxpid": pids.capacity, "curproc": pids.capacity - pids.available}}

    async def _metrics(self) -> web.Response:
        """The kubelet's own metrics that an agent keeps: its DRA metrics (dra/metrics.py), the pods
        it rejected at admission, preempted for critical ones or evicted under node pressure, its
        device plugins' registrations and Allocate durations (devicemanager), its lifecycle hooks'
        HTTP fallbacks and sleeps cut short, its node's name, its pod resources endpoint's calls, its
        pod certificates' states, the pods and containers it runs, the volume stats collector's series of each claim in use (once,
        however many pods here use it), the build and feature gates (kubernetes_build_info,
        kubernetes_feature_enabled) and the process collector's process_* series, which every
        component's legacyregistry holds, and its plugin manager's plugins; families by name, as
        client_golang gathers them. The process is the one this kubelet runs in: a simulated
        kubelet's is `up`'s, shared with the API server and every other simulated kubelet there, as
        upstream's process collector reports the process whatever it runs."""
        running = self._running()
        claims: dict[tuple[str, str], dict] = {}
        for volumes in await self._volume_stats([pod for pod, _, _ in running], self.agent.clock.rfc3339(),
                                                claims_only=True):
            for v in volumes:
                claims.setdefault((v["pvcRef"]["namespace"], v["pvcRef"]["name"]), v)
        containers = sum(len(usage) for _, usage, _ in running)
        rejected = self.agent.admission_rejections
        preempted = self.agent.preemptions
        evicted = self.agent.eviction.evictions
        lines = [*(["# HELP kubelet_admission_rejections_total [ALPHA] Cumulative number pod admission rejections "
                    "by the Kubelet.", "# TYPE kubelet_admission_rejections_total counter"] if rejected else []),
                 *(f'kubelet_admission_rejections_total{{reason="{r}"}} {n}' for r, n in sorted(rejected.items())),
                 *self.agent.devices.metrics(),
                 *(["# HELP kubelet_evictions [ALPHA] Cumulative number of pod evictions by eviction signal",
                    "# TYPE kubelet_evictions counter"] if evicted else []),
                 *(f'kubelet_evictions{{eviction_signal="{s}"}} {n}' for s, n in sorted(evicted.items())),
                 "# HELP kubelet_lifecycle_handler_http_fallbacks_total [ALPHA] The number of times lifecycle "
                 "handlers successfully fell back to http from https.",
                 "# TYPE kubelet_lifecycle_handler_http_fallbacks_total counter",
                 f"kubelet_lifecycle_handler_http_fallbacks_total {self.agent.lifecycle_http_fallbacks}",
                 "# HELP kubelet_node_name [ALPHA] The node's name. The count is always 1.",
                 "# TYPE kubelet_node_name gauge", f'kubelet_node_name{{node="{self.agent.name}"}} 1',
                 *(self.agent.pod_resources.metrics() if self.agent.pod_resources else ()),
                 *pod_certificate.metrics(self.agent.volumes.state, self.agent.clock.now()),
                 *(["# HELP kubelet_preemptions_total [ALPHA] Cumulative number of pod preemptions by preemption "
                    "resource", "# TYPE kubelet_preemptions_total counter"] if preempted else []),
                 *(f'kubelet_preemptions_total{{preemption_signal="{r}"}} {n}' for r, n in sorted(preempted.items())),
                 "# HELP kubelet_running_containers [ALPHA] Number of containers currently running",
                 "# TYPE kubelet_running_containers gauge",
                 f'kubelet_running_containers{{container_state="running"}} {containers}',
                 "# HELP kubelet_running_pods [ALPHA] Number of pods that have a running pod sandbox",
                 "# TYPE kubelet_running_pods gauge", f"kubelet_running_pods {len(running)}",
                 "# HELP kubelet_sleep_action_terminated_early_total [ALPHA] The number of times lifecycle sleep "
                 "handler got terminated before it finishes",
                 "# TYPE kubelet_sleep_action_terminated_early_total counter",
                 f"kubelet_sleep_action_terminated_early_total {self.agent.lifecycle_sleeps_cut}"]
        for name, field, doc in _VOLUME_METRICS if claims else ():
            lines += [f"# HELP kubelet_volume_stats_{name} [ALPHA] {doc}", f"# TYPE kubelet_volume_stats_{name} gauge"]
            lines += [f'kubelet_volume_stats_{name}{{namespace="{ns}",persistentvolumeclaim="{claim}"}} '
                      f"{_float(v[field])}" for (ns, claim), v in sorted(claims.items())]
        dra = self.agent.claims.metrics
        text = (dra.render().decode() + "\n".join(lines) + "\n" + render(BUILD_INFO, featuregates.GATES).decode()
                + dra.render_plugins().decode() + render(PROCESS).decode())
        return web.Response(text=text, headers={"Content-Type": CONTENT_TYPE})

    def _cadvisor(self) -> web.Response:
        """cAdvisor's container metrics as the kubelet serves them at /metrics/cadvisor: one series per
        container (its cgroup, image and runtime id), per pod cgroup (container="") and for the root
        cgroup ("/", the whole node), and the machine's size."""
        now = self.agent.clock.now()
        ms = int(now * 1000)
        rows: dict[str, list[str]] = {name: [] for name, _, _ in _CADVISOR_METRICS}

        def series(cpu_s: float, memory: int, start: float, container: str = "", cgroup: str = "/", image: str = "",
                   cid: str = "", namespace: str = "", pod: str = "") -> None:
            labels = f'id="{cgroup}",image="{image}",name="{cid}",namespace="{namespace}",pod="{pod}"'
            rows["container_cpu_usage_seconds_total"].append(
                f'{{container="{container}",cpu="total",{labels}}} {_float(cpu_s)} {ms}')
            for metric in ("container_memory_usage_bytes", "container_memory_working_set_bytes"):
                rows[metric].append(f'{{container="{container}",{labels}}} {_float(memory)} {ms}')
            rows["container_start_time_seconds"].append(f'{{container="{container}",{labels}}} {_float(start)} {ms}')

        node_cpu_s, node_mem = self._system_cpu_seconds(now), SYSTEM_MEMORY
        for pod, started, containers in self._accounts(now):
            md, spec = pod["metadata"], pod.get("spec") or {}
            where = {"namespace": md.get("namespace", ""), "pod": md["name"]}
            cgroup = f"/kubepods/pod{md.get('uid', '')}"
            statuses = (pod.get("status") or {}).get("containerStatuses") or []
            ids = {cs["name"]: (cs.get("containerID") or "").partition("://")[2] for cs in statuses}
            # the image as the runtime reports it, else as the spec names it
            images = {c["name"]: c.get("image", "") for c in spec.get("containers") or []}
            images.update({cs["name"]: cs["image"] for cs in statuses if cs.get("image")})
            for name, u, since, cpu_s in containers:
                cid = ids.get(name, "")
                series(cpu_s, u.memory, since, name, f"{cgroup}/{cid}", images.get(name, ""), cid, **where)
            cpu_s, mem = sum(s for _, _, _, s in containers), sum(u.memory for _, u, _, _ in containers)
            series(cpu_s, mem, started, cgroup=cgroup, **where)
            node_cpu_s, node_mem = node_cpu_s + cpu_s, node_mem + mem
        series(node_cpu_s, self._node_memory(node_mem), self.started)
        capacity, info = self.agent.spec.capacity, self.agent.status()["nodeInfo"]
        machine = f'{{boot_id="{info["bootID"]}",machine_id="{info["machineID"]}",system_uuid="{info["systemUUID"]}"}}'
        rows["machine_cpu_cores"].append(f"{machine} {_float(_bytes(capacity.get('cpu')))}")
        rows["machine_memory_bytes"].append(f"{machine} {_float(_bytes(capacity.get('memory')))}")
        lines = []
        for name, kind, doc in _CADVISOR_METRICS:
            lines += [f"# HELP {name} {doc}", f"# TYPE {name} {kind}", *(name + r for r in sorted(rows[name]))]
        return web.Response(text="\n".join(lines) + "\n", headers={"Content-Type": CONTENT_TYPE})

    def _resource_metrics(self) -> web.Response:
        now = self.agent.clock.now()
        ms = int(now * 1000)
        samples: dict[str, list[str]] = {name: [] for name, _, _ in _RESOURCE_METRICS}
        node_cpu_s, node_mem = self._system_cpu_seconds(now), SYSTEM_MEMORY
        for pod, _, containers in self._accounts(now):
            md = pod["metadata"]
            labels = f'namespace="{md.get("namespace", "")}",pod="{md["name"]}"'
            for name, u, since, cpu_s in containers:
                c = f'container="{name}",{labels}'
                samples["container_cpu_usage_seconds_total"].append(f"{{{c}}} {_float(cpu_s)} {ms}")
                samples["container_memory_working_set_bytes"].append(f"{{{c}}} {_float(u.memory)} {ms}")
                samples["container_start_time_seconds"].append(f"{{{c}}} {_float(since)} {int(since * 1000)}")
            pod_cpu_s, mem = sum(s for _, _, _, s in containers), sum(u.memory for _, u, _, _ in containers)
            samples["pod_cpu_usage_seconds_total"].append(f"{{{labels}}} {_float(pod_cpu_s)} {ms}")
            samples["pod_memory_working_set_bytes"].append(f"{{{labels}}} {_float(mem)} {ms}")
            node_cpu_s, node_mem = node_cpu_s + pod_cpu_s, node_mem + mem
        samples["node_cpu_usage_seconds_total"].append(f" {_float(node_cpu_s)} {ms}")
        samples["node_memory_working_set_bytes"].append(f" {_float(self._node_memory(node_mem))} {ms}")
        samples["resource_scrape_error"].append(" 0")
        lines = []
        for name, kind, doc in _RESOURCE_METRICS:
            lines += [f"# HELP {name} [STABLE] {doc}", f"# TYPE {name} {kind}"]
            lines += [name + s for s in sorted(samples[name])]
        return web.Response(text="\n".join(lines) + "\n",
                            headers={"Content-Type": CONTENT_TYPE, "X-Content-Type-Options": "nosniff"})


def _cpu(stamp: str, millicores: int, core_seconds: float) -> dict:
    return {"time": stamp, "usageNanoCores": millicores * 1_000_000, "usageCoreNanoSeconds": int(core_seconds * 1e9)}


def _memory(stamp: str, working_set: int) -> dict:
    return {"time": stamp, "usageBytes": working_set, "workingSetBytes": working_set, "rssBytes": working_set,
            "pageFaults": 0, "majorPageFaults": 0}


def _bytes(q) -> int:
    try:
        return int(parse_quantity(str(q))) if q is not None else 0
    except QuantityError:
        return 0


#: the kubelet's streaming endpoints (its server's /exec, /attach, /portForward) and /run
_STREAMING = frozenset(("exec", "attach", "portForward", "run"))


def _listing(entries: list[str]) -> web.Response:
    """A directory as Go's http.FileServer lists it."""
    rows = "".join(f'<a href="{html.escape(quote(e), quote=True)}">{html.escape(e)}</a>\n' for e in entries)
    return web.Response(text=f'<!doctype html>\n<meta name="viewport" content="width=device-width">\n<pre>\n{rows}'
                             "</pre>\n", content_type="text/html", charset="utf-8")


def _moved(sub: str) -> web.Response:
    """http.FileServer's redirect of a directory asked for without its slash (relative, as Go's)."""
    return web.Response(status=301, headers={"Location": sub.rsplit("/", 1)[-1] + "/"})


def _json(value, encoded: bool = False, headers: dict[str, str] | None = None) -> web.Response:
    """JSON as the kubelet writes it: Go's encoding (compact, '<', '>', '&', U+2028 and U+2029
    escaped), a runtime codec's Encode ending it with a newline (`encoded`: /pods, /runningpods/),
    json.Marshal not (/stats/summary, /configz); `Content-Type: application/json`, no charset."""
    data = orjson.dumps(value)
    for char, escaped in _GO_ESCAPES:
        data = data.replace(char, escaped)
    return web.Response(body=data + b"\n" if encoded else data,
                        headers={"Content-Type": "application/json", **(headers or {})})


_GO_ESCAPES = ((b"<", b"\\u003c"), (b">", b"\\u003e"), (b"&", b"\\u0026"),
               ("\u2028".encode(), b"\\u2028"), ("\u2029".encode(), b"\\u2029"))


def _text(status: int, text: str) -> web.Response:
    return web.Response(status=status, text=text, content_type="text/plain", charset="utf-8")
