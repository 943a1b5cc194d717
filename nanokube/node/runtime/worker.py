"""One pod under the process runtime: each container is a real process in
its pod's network namespace (netns.py), started through launch.py with its
env, working directory and volumes.

Init containers run one after another first (sidecars, restartPolicy
Always, start in order and keep running until the app containers are done);
then the containers run, exit and restart on their own (restartPolicy, or the
container's own restartPolicy and restartPolicyRules,
crash-loop backoff). Exit codes, restart counts and probes (startup,
readiness, liveness; exec, httpGet, tcpSocket) make the container statuses
and the pod's Ready condition; a failed liveness or startup probe kills the
container. A container's postStart hook runs as it starts (its status is
Running only once the hook is done; a failed one kills it: FailedPostStartHook,
PostStartHookError); stopping a container (deletion, a failed probe, a restart)
runs its preStop hook first, within the grace period, then sends SIGTERM with
what is left of it (at least 2 s) to its first process and SIGKILL to all its
processes once that is up; its processes left when the first exits are killed
with it, as a container's go with its init. Hooks exec in
the container's context as `kubectl exec` does, or request the pod's IP
(hooks.py). Each container instance
logs stdout and stderr to a file of its own (logs.py serves them).
Each container runs in a PID namespace of its own (its first process is
PID 1, which ignores the signals it has no handler for), the pod's
(shareProcessNamespace: the sandbox's pause process is PID 1, every
container sees the others; were the pause process to die, the pod is killed
and its sandbox made anew, SandboxChanged), or the host's (hostPID); an exec,
probe or hook joins the container's (launch.py). Each container's processes are in a
cgroup of their own, an exec's in one below it (cgroup.py), which a kill
empties, below its pod's by QoS class and limited to its requests and limits
(limits.py): an instance OOM-killed there ends OOMKilled.
Images are recorded, not pulled: a container with neither command nor args
runs ENTRYPOINT in place of the image's.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import logging
import os
import pwd
import shutil
import signal
import sys
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from ...machinery import errors, restartrules
from ...machinery.streaming import StreamFailed, executable_not_found, sandbox_id
from .. import inplace
from ..streaming import no_log
from ..lifecycle import DEADLINE, DEADLINE_MESSAGE, PodWorker, field_path, image_id, image_ref, terminate_pod
from ..lifecycle import volume_mount_statuses
from .. import container_env, dns, hooks, hosts_file
from ..simulated_accounts import run_as
from ..simulated_command import reads_stdin
from .netns import NetnsError
from .probes import http_get, run_probe
from . import cgroup as cgroups, stdio
from .limits import Settings, container_settings, over_limit, pod_settings, qos_parent
from .stdio import ContainerIO
from .usage import CPUSamples, session_stats
from ..containerlog import FileContainerLog

if TYPE_CHECKING:
    from .process import ProcessRuntime

log = logging.getLogger(__name__)
LAUNCHER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "launch.py")
#: what runs in place of an image's entrypoint (images are not pulled): it waits, and ends on SIGTERM as a
#: server does (a bare `sleep` as its container's PID 1 would ignore it and be killed when the grace is up)
ENTRYPOINT = ["sh", "-c", "trap 'exit 143' TERM; sleep infinity & wait"]


def exit_code(returncode: int) -> int:
    """A process killed by signal N exits 128+N, as container runtimes report it."""
    return 128 - returncode if returncode < 0 else returncode
#: the lastState the kubelet gives a container whose status was running and that its runtime no longer
#: knows (convertToAPIContainerStatuses), its restartCount one more
LOST = {"terminated": {"exitCode": 137, "reason": "ContainerStatusUnknown", "startedAt": None, "finishedAt": None,
                       "message": "The container could not be located when the pod was deleted.  "
                                  "The container used to be Running"}}


@dataclass
class Container:
    """One container of a pod and its current instance."""

    spec: dict
    state: dict = field(default_factory=lambda: {"waiting": {"reason": "ContainerCreating"}})
    last_state: dict = field(default_factory=dict)
    restarts: int = 0
    instances: int = 0  # processes started so far; the current one logs to log_path(instances - 1)
    ready: bool = False
    started: bool = False  # running, and past its startup probe if it has one
    up: asyncio.Event = field(default_factory=asyncio.Event)  # set once an instance is started
    proc: asyncio.subprocess.Process | None = None  # the launcher: the command's shim, or the command (hostPID)
    pid: int = 0  # the command's process (the host's numbering), which leads its process group and session
    cgroup: str | None = None  # its cgroup, the one of each instance and its execs (None: no cgroups)
    joins: list[str] = field(default_factory=list)  # its cgroups of v1 controllers (limits.py), its execs' too
    oom_kills: int = 0  # the kernel's OOM kills in its cgroup before its current instance
    oom_killed: bool = False  # its current instance was killed by the runtime's memory watchdog
    log_dir: str = ""
    logs: list[FileContainerLog] = field(default_factory=list)  # one per instance, the last is current
    io: ContainerIO = field(default_factory=ContainerIO)
    cpu: CPUSamples = field(default_factory=CPUSamples)
    #: stopped to take a resize its policy restarts it for: started again at once, no back-off
    resize_restart: bool = False

    @property
    def name(self) -> str:
        return self.spec["name"]

    @property
    def sidecar(self) -> bool:
        return self.spec.get("restartPolicy") == "Always"

    def log_path(self, instance: int) -> str:
        return os.path.join(self.log_dir, f"{instance}.log")


class ProcessPodWorker(PodWorker):
    """A pod whose containers are processes; reuses PodWorker's status writes,
    claim and volume set-up, events and deletion."""

    def __init__(self, agent, pod: dict, runtime: ProcessRuntime):
        super().__init__(agent, pod)
        self.runtime = runtime
        self.netns = ""
        self._creating: asyncio.Future | None = None
        #: shareProcessNamespace: the sandbox's pause process (launcher, PID), the PID 1 of the pod's namespace
        self._pause: tuple[asyncio.subprocess.Process, int] | None = None
        self.containers: dict[str, Container] = {}
        self.inits: dict[str, Container] = {}
        #: the ephemeral containers started (`kubectl debug`), by name; never restarted
        self.debug: dict[str, Container] = {}
        self._initializing = False
        self._children: list[asyncio.Task] = []
        self._stopping = asyncio.Event()
        self._ending = False  # stopped for good: the pod ends (its sandbox is not made again)
        self._write_lock = asyncio.Lock()
        self._published: bytes = b""
        self._mounts: dict[str, list[tuple[str, str, bool]]] = {}  # container -> (source, target, read-only)
        self._cdi_mounts: dict[str, list[tuple[str, str, bool]]] = {}  # the same, of its DRA devices' CDI specs
        self._env: dict[str, dict[str, str]] = {}
        self._log_root = ""
        #: the pod's cgroup below the runtime's, by its QoS class (limits.py)
        self._cgroup = qos_parent(pod)

    # --- set-up and tear-down -------------------------------------------------------

    async def _sandbox(self, _pod: dict) -> None:
        """Create the pod's namespace; shielded, as the thread that builds it
        runs on when the worker is cancelled, and teardown waits for it. A hostNetwork
        pod runs in its node's namespace, which outlives it."""
        spec = self.pod.get("spec") or {}
        if spec.get("hostNetwork"):
            self.netns = self.runtime.net.nodes[self.agent.name][0]
        else:
            self._creating = asyncio.ensure_future(
                asyncio.to_thread(self.runtime.net.add_pod, self.agent.name, self.uid, self.ip))
            self.netns = await asyncio.shield(self._creating)
        if spec.get("shareProcessNamespace") and not spec.get("hostPID"):
            self._pause = await self._start_pause()

    async def _start_pause(self) -> tuple[asyncio.subprocess.Process, int]:
        """The sandbox's pause process, the PID 1 of the pod's shared PID namespace."""
        proc, pid = await stdio.launch(self._launch({"hostname": self._kernel_hostname(), "pid": "new", "pause": True}),
                                       self.runtime.cgroups.path(self._cgroup, "pause"), stdin=asyncio.subprocess.DEVNULL,
                                       stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
        if not pid:
            await proc.wait()
            raise NetnsError("the pause process did not start")
        return proc, pid

    async def _prepare(self) -> None:
        """Log directories, mount targets and environments of every container."""
        self._log_root = os.path.join(self.runtime.state_dir, "logs", f"{self.namespace}_{self.name}_{self.uid}")
        init_specs = (self.pod.get("spec") or {}).get("initContainers") or []
        self._initializing = bool(init_specs)
        self._write_hosts_file()
        self._write_resolv_conf()
        for spec in init_specs + self._containers():
            c = await self._set_up(Container(spec))
            if spec in init_specs:
                self.inits[c.name] = c
            else:
                self.containers[c.name] = c
                if init_specs:
                    c.state = {"waiting": {"reason": "PodInitializing"}}
        # what the containers start with is allocated to them, their pod's cgroup limited to it
        self.allocated = inplace.desired(self.pod)
        self.runtime.limits.pod(self._cgroup, self._pod_settings(self.allocated))
        self.runtime.pods[(self.namespace, self.name)] = self
        self._actuate()

    def _pod_settings(self, allocation: dict[str, dict]) -> Settings:
        """The pod cgroup's limits with its containers' `allocation`, its pids.max the node's
        podPidsLimit where that is above 0 (-1, the default, and 0 set none)."""
        pids = self.agent.pod_pids_limit
        return pod_settings(self.pod, allocation, pids if pids > 0 else None)

    async def _set_up(self, c: Container) -> Container:
        """A container's log directory, mount targets and environment."""
        spec = c.spec
        c.log_dir = os.path.join(self._log_root, spec["name"])
        os.makedirs(c.log_dir, exist_ok=True)
        mounts = self._mounts[c.name] = []
        for vm in spec.get("volumeMounts") or []:
            src = self.agent.volumes.volume_dir(self.uid, vm["name"])
            if vm.get("subPath"):
                src = os.path.join(src, vm["subPath"])
            if not os.path.exists(src):
                os.makedirs(src, exist_ok=True)
            self.runtime.claim_mountpoint(vm["mountPath"], os.path.isfile(src))
            mounts.append((src, vm["mountPath"], bool(vm.get("readOnly"))
                           or self.agent.volumes.read_only(self.uid, vm["name"])))
        # a Block claim's device (the file map_device made) at its devicePath (makeBlockVolumes):
        # read-only where the claim is taken so (the device's permissions "r", not "mrw")
        for vd in spec.get("volumeDevices") or []:
            src = os.path.realpath(self.agent.volumes.volume_dir(self.uid, vd["name"]))
            if os.path.isfile(src):
                self.runtime.claim_mountpoint(vd["devicePath"], True)
                mounts.append((src, vd["devicePath"], self.agent.volumes.read_only(self.uid, vd["name"])))
        if hosts_file.managed(self.pod, spec):
            mounts.append((self._hosts_path(), hosts_file.PATH, False))
        if dns.mounted(spec) and os.path.exists(dns.RESOLV_CONF):
            mounts.append((self._resolv_path(), dns.RESOLV_CONF, False))
        self._env[c.name] = await self._environment(spec)
        return c

    def _hosts_path(self) -> str:
        """The pod's managed hosts file, in its directory (the kubelet's pods/<uid>/etc-hosts)."""
        return os.path.join(self.agent.volumes.pod_dir(self.uid), "etc-hosts")

    def _write_hosts_file(self) -> None:
        """ensureHostsFile: written once the pod has its IP, before any container starts; a pod
        with a subdomain (an Indexed Job's or a StatefulSet's under its headless Service) is named
        by its FQDN first, so `hostname -f` answers `<hostname>.<subdomain>.<ns>.svc.cluster.local`."""
        spec = self.pod.get("spec") or {}
        if spec.get("hostNetwork"):
            return
        os.makedirs(os.path.dirname(self._hosts_path()), exist_ok=True)
        with open(self._hosts_path(), "w") as f:
            f.write(hosts_file.content(self._hostname(), [self.ip], spec.get("hostAliases"),
                                       hosts_file.domain(self.pod, dns.ZONE)))

    def _resolv_path(self) -> str:
        """The pod's resolv.conf, in its directory (the runtime's sandbox copy, bound in each container)."""
        return os.path.join(self.agent.volumes.pod_dir(self.uid), "resolv.conf")

    def _write_resolv_conf(self) -> None:
        """What the kubelet's DNS configurer gives the pod (dns.resolv_conf), from the node's own
        /etc/resolv.conf (the kubelet's --resolv-conf, its nameservers the runtime's node_dns where
        it has them) and the cluster's DNS server."""
        try:
            with open(dns.RESOLV_CONF) as f:
                host = f.read()
        except OSError:
            host = ""
        if self.runtime.node_dns:
            host = dns.with_nameservers(host, self.runtime.node_dns)
        os.makedirs(os.path.dirname(self._resolv_path()), exist_ok=True)
        with open(self._resolv_path(), "w") as f:
            f.write(dns.resolv_conf(self.pod, self.runtime.cluster_dns, host))

    async def _environment(self, spec: dict) -> dict[str, str]:
        """The container's environment, HOME its user's home in the node's /etc/passwd (the
        process runtime's image), "/" for a uid it lacks, as runc sets it."""
        uid = run_as(self.pod, spec["name"])[0]
        try:
            home = pwd.getpwuid(uid).pw_dir if uid else "/root"
        except KeyError:
            home = "/"
        return await container_env.environment(self, spec, home)

    async def _teardown(self) -> None:
        """Kill what is left, the pause process last, each reaped; remove the pod's namespace and
        the mount targets made for it."""
        running = [c.proc for c in [*self._all(), *self.debug.values()] if c.proc and c.proc.returncode is None]
        for c in [*self._all(), *self.debug.values()]:
            _kill(c, signal.SIGKILL)
        await asyncio.gather(*(stdio.exited(proc) for proc in running))
        if self._pause is not None:
            stdio.kill(*self._pause, signal.SIGKILL)
            await self._pause[0].wait()
            self._pause = None
        await asyncio.to_thread(cgroups.remove, self.runtime.cgroups.path(self._cgroup, create=False))
        await asyncio.to_thread(self.runtime.limits.remove_pod, self._cgroup)
        if self._creating is not None:
            await asyncio.gather(self._creating, return_exceptions=True)
            await asyncio.to_thread(self.runtime.net.remove_pod, self.agent.name, self.uid)
            self._creating, self.netns = None, ""
        for _, target, _ in (m for mounts in [*self._mounts.values(), *self._cdi_mounts.values()] for m in mounts):
            self.runtime.release_mountpoint(target)
        self._mounts.clear()
        self._cdi_mounts.clear()

    async def stop(self) -> None:
        for t in self._children:
            t.cancel()
        await asyncio.gather(*self._children, return_exceptions=True)
        await super().stop()
        await self._teardown()
        if self.runtime.pods.get((self.namespace, self.name)) is self:
            del self.runtime.pods[(self.namespace, self.name)]
            self.runtime.update_qos()
        if self._log_root:
            shutil.rmtree(self._log_root, ignore_errors=True)

    # --- the pod ----------------------------------------------------------------------

    async def _resync(self) -> None:
        """A sync that failed before the pod's sandbox was made is made again; one after is not
        (its processes would start twice): the pod is removed once it is deleted."""
        if self._creating is None and not self.netns:
            await super()._resync()
        elif await self._wait(None):
            await self._delete()

    async def _run_containers(self, adopted: bool) -> None:
        """Start every container and wait until they are all done for good or the pod is deleted.
        A pod adopted from an earlier run starts its containers again (the runtime's start ended
        what the crashed run left), each counting on from the instances it logged (`_count_on`)."""
        if not await self._retry(self._sandbox, NetnsError, "FailedCreatePodSandBox",
                                 "Failed to create pod sandbox: {}"):
            await self._teardown()
            await self._delete()
            return
        await self._prepare()
        if adopted:
            self._count_on()
        flow = asyncio.create_task(self._pod_flow())
        self._children.append(flow)
        while not self.deleting() and not flow.done():
            self.changed.clear()
            if self.reconcile and self._last_write:  # another writer changed what the status says (resync)
                self.reconcile = False
                await self._write(**self._last_write, now=self.clock.rfc3339())
            await self._sync_spec()  # an ephemeral container added, a resize
            left = self._active_deadline_left() if self.eviction is None else None
            if left is not None and left <= 0:
                self.eviction = DEADLINE
            if self.eviction is not None:
                break
            waits = [flow, asyncio.ensure_future(self.changed.wait())]
            if left is not None:
                waits.append(asyncio.ensure_future(self.clock.sleep(left)))
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            for t in waits[1:]:
                t.cancel()
        if (self.eviction is not None and not self.deleting()) or not flow.done():
            # deleted, past activeDeadlineSeconds, or evicted: stopped with the grace the simulated runtime's kill
            # settles (`_kill_grace`), counted as killPod counts it: from now, not from the request (a
            # deletionTimestamp in whole seconds, seen late on a busy node, would eat a 1 s grace and skip the
            # preStop hooks); what never ran ends unknown
            self.terminating = True
            if self.eviction is DEADLINE and not self.deleting():
                await self._event("Normal", "DeadlineExceeded", DEADLINE_MESSAGE)
            await self._kill_gracefully([*self._all(), *self.debug.values()],
                                        self.clock.now() + self._kill_grace().seconds)
        for c in self.debug.values():  # the app containers are done: what is left of a debug session goes
            _kill(c, signal.SIGKILL)
        await asyncio.gather(*self._children)
        now = self.clock.rfc3339()
        inits, statuses = self._init_statuses(now, False) if self.inits else [], self._statuses()
        if self.eviction is not None or self.deleting():  # stopped: what never ran (or waited to restart) is unknown
            inits, statuses = terminate_pod(inits, statuses, not self._initializing)
        sidecars = {c.name for c in self.inits.values() if c.sidecar}
        codes = [(s["state"].get("terminated") or (s.get("lastState") or {}).get("terminated") or {}).get("exitCode", 0)
                 for s in inits + statuses if s["name"] not in sidecars]
        try:
            succeeded = all(code == 0 for code in codes) and self.eviction is None
            await self._write("Succeeded" if succeeded else "Failed", statuses, False, now,
                              "PodCompleted" if succeeded else "PodFailed", initialized=not self._initializing,
                              inits=inits if self.inits else None)
        except errors.APIError as e:
            if e.code != 404:
                raise
        await self._teardown()
        self.agent.ips.release(self.uid)
        await self.agent.claims.unprepare(self.uid)
        self.agent.volumes.unmount(self.uid)
        if self.deleting():
            await self._delete()

    def _count_on(self) -> None:
        """An adopted pod's containers count on from the instances their log directories kept
        (which outlive a crash, as the kubelet's calcRestartCountByLogDir counts them): the instance
        about to start is a restart, the last logged one its previous (`kubectl logs --previous`),
        and the one the status last showed running its lastState, as the kubelet reports a running
        container its runtime lost (`LOST`: the crashed run's, its runtime with it, which this run's
        start killed). Their crash-loop back-off starts over, as a restarted kubelet's (kept in memory)
        does: each one's next exit restarts it at once (`PodWorker.backoff_from`)."""
        st = self.pod.get("status") or {}
        shown = {s["name"]: s for s in [*(st.get("initContainerStatuses") or ()), *(st.get("containerStatuses") or ())]}
        for c in self._all():
            logged = [int(n[:-4]) for n in os.listdir(c.log_dir) if n.endswith(".log") and n[:-4].isdigit()]
            if not logged:
                continue
            c.instances = c.restarts = self.backoff_from[c.name] = max(logged) + 1
            c.logs = [FileContainerLog(c.log_path(max(logged)), self.runtime.log_max_size, self.runtime.log_max_files)]
            status = shown.get(c.name) or {}
            state = status.get("state") or {}
            if "running" in state:
                state = LOST
            c.last_state = state if "terminated" in state else status.get("lastState") or {}

    async def _pod_flow(self) -> None:
        """The pod's containers (`_containers_flow`) in its sandbox. Where the sandbox's pause
        process dies under them (its PID namespace ends, with every process in it), the kubelet's
        computePodActions kills the pod and, where a container would start in a new sandbox
        (`sandbox_again`), makes it (SandboxChanged) and starts its init containers from the first
        and its containers again in it (under OnFailure, those that had not succeeded), each
        restart counted."""
        while True:
            flow = asyncio.ensure_future(self._containers_flow())
            if self._pause is None:
                return await flow
            lost = asyncio.ensure_future(stdio.exited(self._pause[0]))
            try:
                await asyncio.wait([flow, lost], return_when=asyncio.FIRST_COMPLETED)
            finally:
                lost.cancel()
                if not flow.done() and not lost.done():  # cancelled: the pod's worker stops
                    flow.cancel()
            if not self._sandbox_gone() or self._stopping.is_set():
                return await flow
            again = sandbox_again((self.pod.get("spec") or {}).get("restartPolicy", "Always"),
                                  list(self.inits.values()), list(self.containers.values()))
            if again:
                await self._event("Normal", "SandboxChanged", "Pod sandbox changed, it will be killed and re-created.")
            await self._kill_gracefully([*self._all(), *self.debug.values()], self._grace_deadline(), for_good=not again)
            await flow
            await asyncio.gather(*(t for t in self._children if t is not asyncio.current_task()))
            await self._pause[0].wait()
            if not again or self._ending or self.deleting():
                return
            if not await self._retry(self._new_sandbox, NetnsError, "FailedCreatePodSandBox",
                                     "Failed to create pod sandbox: {}"):
                return
            if self._ending or self.deleting():  # stopped for good while the sandbox was made: that stop stands
                return
            self._stopping.clear()

    def _sandbox_gone(self) -> bool:
        """Whether the pod's pause process has ended or is ending (a pod without one has no sandbox
        to lose)."""
        return self._pause is not None and stdio.ending(*self._pause)

    async def _new_sandbox(self, _pod: dict) -> None:
        """The sandbox made again: a new pause process; every container to start in it waits as a
        new pod's do, its restart counted and its last instance its lastState (the kubelet counts
        on from the container's last status, or its logs)."""
        self._pause = await self._start_pause()
        policy = (self.pod.get("spec") or {}).get("restartPolicy", "Always")
        self._initializing = bool(self.inits)
        for c in self._all():
            ended = c.state.get("terminated")
            if policy == "OnFailure" and c.name in self.containers and ended and ended["exitCode"] == 0:
                continue
            if c.instances:
                c.restarts += 1
                c.last_state = {"terminated": ended} if ended else c.last_state
            c.state = {"waiting": {"reason": "PodInitializing" if self._initializing else "ContainerCreating"}}
            c.ready = c.started = False
            c.up.clear()
        await self._publish()

    async def _containers_flow(self) -> None:
        """Init containers in order (a failed one that may not restart fails
        the pod), then the app containers until none restarts; sidecars are
        stopped once the app containers are done."""
        policy = (self.pod.get("spec") or {}).get("restartPolicy", "Always")
        init_policy = "OnFailure" if policy == "Always" else policy  # an init container must complete
        for c in self.inits.values():
            if self._stopping.is_set() or self.eviction is not None:
                return
            self._next_sync()
            if c.sidecar:
                loop = asyncio.create_task(self._container_loop(c, lambda _code: True))
                self._children.append(loop)
                await self._sidecar_started(c, loop)
                continue
            code = await self._container_loop(c, functools.partial(_restarts, c, init_policy))
            if code != 0:
                return
        if self._stopping.is_set() or self.eviction is not None:
            return
        self._initializing = False
        self._next_sync()  # (one sync starts them all)
        await asyncio.gather(*(self._container_loop(c, functools.partial(_restarts, c, policy))
                               for c in self.containers.values() if "terminated" not in c.state))
        sidecars = [c for c in self.inits.values() if c.sidecar]
        if sidecars and not self._stopping.is_set() and not self._sandbox_gone():  # else: being stopped
            grace = (self.pod.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
            await self._kill_gracefully(sidecars, self.clock.now() + grace)

    async def _sidecar_started(self, c: Container, loop: asyncio.Task) -> None:
        """The next init container starts only once sidecar `c` is started (KEP-753,
        computeInitContainerActions): running, past its startupProbe if it has one; its `loop`
        restarts it meanwhile where it exits or fails that probe. The pod stopping ends the wait."""
        waits = [asyncio.ensure_future(c.up.wait()), asyncio.ensure_future(self._stopping.wait())]
        await asyncio.wait([loop, *waits], return_when=asyncio.FIRST_COMPLETED)
        for t in waits:
            t.cancel()

    def _all(self):
        return [*self.inits.values(), *self.containers.values()]

    def _next_sync(self) -> None:
        """Containers starting once one has started do so at a sync of their own, which reads the
        pull secrets again (PodWorker._pull_secrets); the first share the one that made the sandbox."""
        if any(c.instances for c in (*self._all(), *self.debug.values())):
            self.secrets_read = False

    async def _kill_gracefully(self, containers: list[Container], deadline: float, for_good: bool = True) -> None:
        """No more restarts (not `for_good`: until the sandbox is made again); every running
        container stopped at once (`_stop`), within the grace period that ends at `deadline` (wall
        clock)."""
        self._stopping.set()
        self._ending = self._ending or for_good
        running = [c for c in containers if c.proc and c.proc.returncode is None]
        await self._kill_events([c.spec for c in running if not c.sidecar] + [c.spec for c in running if c.sidecar][::-1])
        await asyncio.gather(*(self._stop(c, deadline) for c in running))

    async def _stop(self, c: Container, deadline: float) -> None:
        """killContainer once its Killing is told: the preStop hook, cut off at `deadline` (wall
        clock; a failure told as FailedPreStopHook), then SIGTERM, and SIGKILL when what is left
        of the grace period (at least MIN_GRACE) is up."""
        if c.proc is None or c.proc.returncode is not None:
            return
        if (spec := hooks.handler(c.spec, "preStop")) and deadline > self.clock.now():
            hook = asyncio.ensure_future(self._hook(c, spec))
            exited = asyncio.ensure_future(c.proc.wait())
            await asyncio.wait([hook, exited], timeout=deadline - self.clock.now(), return_when=asyncio.FIRST_COMPLETED)
            exited.cancel()
            if hook.done() and (message := hook.result()):
                log.warning("pod %s/%s: %s", self.namespace, self.name, message)
                await self._event("Warning", "FailedPreStopHook", hooks.PRE_STOP_FAILED, field_path(self.pod, c.name))
            hook.cancel()  # one not done by the deadline is cut off: its command is killed
            await asyncio.gather(hook, return_exceptions=True)
        _kill(c, signal.SIGTERM)
        try:
            await asyncio.wait_for(asyncio.shield(c.proc.wait()), max(deadline - self.clock.now(), hooks.MIN_GRACE))
        except TimeoutError:
            _kill(c, signal.SIGKILL)
            await c.proc.wait()

    def _grace_deadline(self) -> float:
        """When (wall clock) the pod's terminationGracePeriodSeconds, from now, are up."""
        return self.clock.now() + (self.pod.get("spec") or {}).get("terminationGracePeriodSeconds", 30)

    async def _hook(self, c: Container, spec: dict) -> str:
        """Run one of `c`'s lifecycle hooks ('' or why it failed, hooks.run): a command in the
        container's context, a request from the node's namespace."""
        node_ns = self.runtime.net.nodes[self.agent.name][0]

        async def get(host: str, port: int, path: str, headers: list[dict], scheme: str) -> str:
            return (await http_get(node_ns, host, port, path, headers, scheme, hooks.USER_AGENT))[1]
        return await hooks.run(self.pod, c.spec, spec, self.ip,
                               hooks.Runner(lambda argv: self._run_in(c, argv), get, self.clock.sleep,
                                            self._http_fallback, self._sleep_cut))

    async def _post_start(self, c: Container) -> str:
        """startContainer's last step: `c`'s postStart hook, if any, its process started. A failed
        one is told (FailedPostStartHook) and the container killed (Killing FailedPostStartHook,
        `_stop`); why it failed is returned ('' when it did not). The pod stopping cuts it off."""
        spec = hooks.handler(c.spec, "postStart")
        if spec is None:
            return ""
        hook = asyncio.ensure_future(self._hook(c, spec))
        stopping = asyncio.ensure_future(self._stopping.wait())
        await asyncio.wait([hook, stopping], return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        if not hook.done():
            hook.cancel()
            await asyncio.gather(hook, return_exceptions=True)
            return ""
        if message := hook.result():
            log.warning("pod %s/%s: %s", self.namespace, self.name, message)
            path = field_path(self.pod, c.name)
            await self._event("Warning", "FailedPostStartHook", hooks.POST_START_FAILED, path)
            await self._event("Normal", "Killing", "FailedPostStartHook", path)
            await self._stop(c, self._grace_deadline())
        return message

    # --- one container --------------------------------------------------------------

    def _argv(self, c: Container) -> list[str]:
        """Its command and args; without them, a shell where the image's default is one and the
        container keeps a stdin (`kubectl debug -i --image=busybox`, `kubectl run -i`: the user's
        commands are read there), else the stand-in for the image's entrypoint."""
        if argv := container_env.command(c.spec, self._env[c.name]):
            return argv
        return ["sh"] if c.spec.get("stdin") and reads_stdin([], c.spec.get("image", "")) else ENTRYPOINT

    def _hostname(self) -> str:
        """The pod's hostname: its node's for a hostNetwork pod, which shares the node's UTS namespace."""
        return container_env.hostname(self.pod, self.agent.name)

    def _kernel_hostname(self) -> str:
        """What its UTS namespace is named: the FQDN with setHostnameAsFQDN (container_env.kernel_hostname)."""
        return container_env.kernel_hostname(self.pod, self.agent.name)

    def _launch_argv(self, c: Container, argv: list[str], env: dict[str, str] | None = None,
                     pid: str | None = "") -> list[str]:
        """launch.py's command line for `argv` in `c`'s context: its PID namespace (`pid`, for
        launch.py) is `c`'s own unless named, as an exec joins the container's."""
        mounts = self._mounts[c.name] + self._cdi_mounts.get(c.name, [])
        self.runtime.restore_mountpoints([(target, not os.path.isdir(src)) for src, target, _ in mounts])
        spec = {"hostname": self._kernel_hostname(), "mounts": mounts, "workdir": c.spec.get("workingDir") or "/",
                "env": env or self._env[c.name], "argv": argv, "pid": self._joined(c.proc) if pid == "" else pid,
                "user": run_as(self.pod, c.name), "cgroupfs": cgroups.views([c.cgroup, *c.joins])}
        return self._launch(spec)

    def _launch(self, spec: dict) -> list[str]:
        return ["ip", "netns", "exec", self.netns, sys.executable, "-I", LAUNCHER, json.dumps(spec)]

    def _joined(self, launcher: asyncio.subprocess.Process) -> str | None:
        """The PID namespace a launched command runs in, to join (None: the host's, hostPID)."""
        if (self.pod.get("spec") or {}).get("hostPID"):
            return None
        return f"/proc/{launcher.pid}/ns/pid_for_children"

    def _pid_namespace(self, c: Container) -> str | None:
        """Where `c` runs (the CRI's NamespaceOption pid): the host's (hostPID), the pod's, whose
        PID 1 is the pause process (shareProcessNamespace), an ephemeral container's target's, or
        a new one of its own."""
        if (self.pod.get("spec") or {}).get("hostPID"):
            return None
        if self._pause is not None:
            return self._joined(self._pause[0])
        name = c.spec.get("targetContainerName", "") if c.name in self.debug else ""
        target = self.containers.get(name) or self.inits.get(name)
        if target is not None and target.proc is not None and target.proc.returncode is None:
            return self._joined(target.proc)
        return "new"

    async def _spawn(self, c: Container) -> None:
        log = FileContainerLog(c.log_path(c.instances), self.runtime.log_max_size, self.runtime.log_max_files)
        for old in c.logs[:-1]:  # the kubelet keeps the current and the previous instance's logs
            old.remove()
        c.logs = [*c.logs[-1:], log]
        c.io = ContainerIO()
        c.cpu = CPUSamples(self.clock.monotonic())
        # the environment is made as each instance starts (makeEnvironmentVariables): an init container
        # may have just written an env file, a ConfigMap or Secret it names may have appeared or changed
        self._env[c.name] = await self._environment(c.spec)
        self._set_cdi_mounts(c)
        c.cgroup = self.runtime.cgroups.path(self._cgroup, c.name)
        c.joins = self.runtime.limits.container(self._cgroup, c.name, container_settings(self.actuated.get(c.name) or {}))
        c.oom_kills, c.oom_killed = self.runtime.limits.oom_kills(self._cgroup, c.name), False
        c.proc, c.pid = await stdio.spawn(self._launch_argv(c, self._argv(c), pid=self._pid_namespace(c)), c.spec, log,
                                          c.io, self.clock.now, c.cgroup, c.joins)
        c.instances += 1

    def _set_cdi_mounts(self, c: Container) -> None:
        """The CDI mounts of its DRA devices, worked out again as each instance is created (the
        runtime applies the specs then: a spec written or changed since counts); a device node
        from another host path is bound at its own (one at the same path the process sees already)."""
        edits = self.agent.claims.cdi_edits(self.pod, c.name)
        old, new = self._cdi_mounts.pop(c.name, []), []
        for src, target, read_only in edits.mounts + [(host, path, False) for path, host, _ in edits.device_nodes
                                                      if host != path]:
            if os.path.exists(src):
                self.runtime.claim_mountpoint(target, not os.path.isdir(src))
                new.append((src, target, read_only))
        for _, target, _ in old:
            self.runtime.release_mountpoint(target)
        self._cdi_mounts[c.name] = new

    async def _container_loop(self, c: Container, restart) -> int:
        """Run `c` until it exits and `restart(exit code)` says no (or the pod
        stops), with crash-loop backoff in between; returns the last exit code. Each restart is
        a sync of its own (the pull secrets read again)."""
        again = False
        while True:
            if again:
                self.secrets_read = False
            again = True
            if await self._ensure_image(c.spec) or self._stopping.is_set() or await self._ensure_config(c.spec) \
                    or self._stopping.is_set():
                return 0  # deleted while waiting for its image or configuration: never started
            await self._spawn(c)
            for reason in ("Created", "Started"):
                await self._event("Normal", reason, f"Container {reason.lower()}", field_path(self.pod, c.name))
            if self._stopping.is_set():  # the pod began stopping as it started: too late for `_kill_gracefully`
                await self._kill_events([c.spec])
                await self._stop(c, self._grace_deadline())
            started, began = self.clock.rfc3339(), self.clock.monotonic()
            probe = None
            if not (failed := await self._post_start(c)):
                c.state = {"running": {"startedAt": started}}
                probed = any(c.spec.get(k) for k in ("startupProbe", "readinessProbe", "livenessProbe"))
                c.started = not c.spec.get("startupProbe")
                c.ready = c.started and not c.spec.get("readinessProbe")
                await self._publish()
                if c.started:
                    c.up.set()
                probe = asyncio.create_task(self._probes(c)) if probed else None
            watchdog = None if self.runtime.limits.memory else asyncio.create_task(self._memory_watchdog(c))
            try:
                await stdio.exited(c.proc)
                _kill_rest(c)
                code = exit_code(await c.proc.wait())
            finally:
                for task in (probe, watchdog):
                    if task:
                        task.cancel()
            await stdio.finished(c.io, c.logs[-1])
            c.ready = c.started = False
            term = {"exitCode": code, "reason": self._end_reason(c, code), "startedAt": started,
                    "finishedAt": self.clock.rfc3339(), "containerID": self._container_id(c)}
            c.state = {"terminated": term}
            if c.resize_restart and not self._stopping.is_set():
                c.resize_restart = False
                c.last_state, c.restarts = {"terminated": term}, c.restarts + 1
                continue
            if self._stopping.is_set() or self._sandbox_gone() or not restart(code):
                await self._publish()
                return code
            c.last_state = {"terminated": term}
            # kuberuntime's doBackOff: the first exit (or the first after a run of over 10 min) has no back-off entry
            if not (delay := self._crash_backoff(c.name, c.restarts, began, self.clock.monotonic(),
                                                 self.runtime.backoff_initial)):
                c.restarts += 1
                continue
            if failed:  # the sync that started it says why it failed (reasonCache), the next its back-off
                c.state = {"waiting": {"reason": "PostStartHookError", "message": failed}}
                await self._publish()
            c.state = {"waiting": {"reason": "CrashLoopBackOff",
                                   "message": f"back-off {int(delay)}s restarting failed container={c.name} "
                                              f"pod={self.name}_{self.namespace}({self.uid})"}}
            await self._publish()
            await self._event("Warning", "BackOff", f"Back-off restarting failed container {c.name} in pod "
                              f"{self.name}_{self.namespace}({self.uid})", field_path(self.pod, c.name))
            try:
                await asyncio.wait_for(self._stopping.wait(), delay)
                return code
            except TimeoutError:
                # counted as it starts again: while it waited, its status was the instance that ended
                c.restarts += 1

    def _end_reason(self, c: Container, code: int) -> str:
        """How an instance ended, as containerd tells it: OOMKilled where the kernel OOM-killed a
        process in its cgroup while it ran (or the runtime's watchdog killed it), whatever it
        exited with; else Completed or Error."""
        if c.oom_killed or self.runtime.limits.oom_kills(self._cgroup, c.name) > c.oom_kills:
            return "OOMKilled"
        return "Completed" if code == 0 else "Error"

    async def _memory_watchdog(self, c: Container) -> None:
        """Without a memory controller (limits.py): the container is killed once its processes'
        resident memory exceeds its memory limit, checked every second (a scan of /proc, in a thread:
        the node's event loop serves every pod and the API)."""
        settings = container_settings(self.actuated.get(c.name) or {})
        while settings.memory is not None:
            await self.clock.sleep(1.0)
            rss = (await asyncio.to_thread(session_stats, {c.pid})).get(c.pid, (0, 0))[1]
            if over_limit(settings, rss):
                log.warning("pod %s/%s: container %s over its memory limit (%d > %d bytes): killed",
                            self.namespace, self.name, c.name, rss, settings.memory)
                c.oom_killed = True
                _kill(c, signal.SIGKILL)
                return
            settings = container_settings(self.actuated.get(c.name) or {})

    async def _resize_blocked(self, restarted: list[str]) -> str:
        """A memory limit lowered below what is in use, the pod's (its cgroup's limit: a pod-level one,
        or its containers' summed) or a running container's (not `restarted`), resident memory as the
        node's stats report it, is not set yet, as the kubelet checks before it lowers one (cgroup v2
        would OOM-kill, v1 refuses the write): its errors in its words, aggregated as Go's are."""
        def lowered(limit: int | None, was: int | None) -> bool:
            return limit is not None and (was is None or limit < was)
        running = [c for c in [*self.containers.values(), *(c for c in self.inits.values() if c.sidecar)]
                   if c.name not in restarted and c.proc is not None and c.proc.returncode is None]
        pod = self._pod_settings(self.allocated).memory
        checked = [(c, limit) for c in running if lowered(limit := container_settings(self.allocated.get(c.name) or {}).memory,
                                                          container_settings(self.actuated.get(c.name) or {}).memory)]
        pod_lowered = lowered(pod, self._pod_settings(self.actuated).memory)
        if not checked and not pod_lowered:
            return ""
        stats = await asyncio.to_thread(session_stats, {c.pid for c in running})
        errors = []
        if pod_lowered and (used := sum(stats.get(c.pid, (0, 0))[1] for c in running)) > pod:
            errors.append(f"attempting to set pod memory limit ({pod}) below current usage ({used})")
        errors += [f'attempting to set container "{c.name}" memory limit ({limit}) below current usage ({used})'
                   for c, limit in checked if (used := stats.get(c.pid, (0, 0))[1]) > limit]
        if not errors:
            return ""
        return "cannot decrease memory limits: " + (errors[0] if len(errors) == 1 else f"[{', '.join(errors)}]")

    def _actuate(self) -> None:
        """The containers run with what was allocated to them: their cgroups (and their pod's) are
        limited to it (a resize's new limits, set in place)."""
        super()._actuate()
        if self.containers or self.inits:
            self.runtime.limits.resize(self._cgroup, self._pod_settings(self.actuated),
                                       {name: container_settings(a) for name, a in self.actuated.items() if name != inplace.POD})
            self.runtime.update_qos()

    def burstable_cpu(self) -> int:
        """The milli-CPU the pod requests as its containers run, where it is Burstable (else 0)."""
        burstable = self._cgroup.startswith("kubepods/burstable/")
        return self._pod_settings(self.actuated).cpu_request if burstable and self.actuated else 0

    async def _probes(self, c: Container) -> None:
        """A startup probe first (until it passes nothing else probes; failing
        kills the container), then readiness and liveness side by side."""
        spec = c.spec
        if spec.get("startupProbe") and not await self._probe_loop(c, spec["startupProbe"], until_success=True):
            await self._kill_unhealthy(c, "Startup")
            return
        c.started = True
        c.ready = not spec.get("readinessProbe")
        await self._publish()
        c.up.set()
        loops = []
        if spec.get("readinessProbe"):
            loops.append(self._probe_loop(c, spec["readinessProbe"]))
        if spec.get("livenessProbe"):
            loops.append(self._liveness(c))
        await asyncio.gather(*loops)

    async def _liveness(self, c: Container) -> None:
        if not await self._probe_loop(c, c.spec["livenessProbe"], until_success=False):
            await self._kill_unhealthy(c, "Liveness")

    async def _kill_unhealthy(self, c: Container, kind: str) -> None:
        """A failed startup or liveness probe: the container is killed, with the failed probe's own
        terminationGracePeriodSeconds where it sets one (setTerminationGracePeriod), and its
        restartPolicy decides what follows."""
        await self._event("Normal", "Killing", f"Container {c.name} failed {kind.lower()} probe, will be restarted",
                          field_path(self.pod, c.name))
        grace = (c.spec.get(f"{kind.lower()}Probe") or {}).get("terminationGracePeriodSeconds")
        await self._stop(c, self._grace_deadline() if grace is None else self.clock.now() + grace)

    async def _probe_loop(self, c: Container, p: dict, until_success: bool | None = None) -> bool:
        """Probe every periodSeconds. Readiness (`until_success` None) follows
        successThreshold/failureThreshold for ever; a startup probe returns
        True on its first success; a liveness probe returns False once it has
        failed failureThreshold times in a row."""
        period = float(p.get("periodSeconds") or 10)
        need_ok, need_fail = int(p.get("successThreshold") or 1), int(p.get("failureThreshold") or 3)
        ok = fail = 0
        node_ns = self.runtime.net.nodes[self.agent.name][0]
        await self.clock.sleep(float(p.get("initialDelaySeconds") or 0))
        while True:
            passed, output = await run_probe(p, c.spec, node_ns, self.ip, lambda argv, t: self._exec(c, argv, t))
            ok, fail = (ok + 1, 0) if passed else (0, fail + 1)
            kind = "Readiness" if until_success is None else "Startup" if until_success else "Liveness"
            self.agent.count_probe(kind, "successful" if passed else "failed", c.name, self.pod)
            if not passed:  # the prober's Unhealthy, for every failed attempt
                await self._event("Warning", "Unhealthy", f"{kind} probe failed: {output}", field_path(self.pod, c.name))
            if until_success is not None:
                if until_success and passed:
                    return True
                if fail >= need_fail:
                    return False
            else:
                ready = True if ok >= need_ok else False if fail >= need_fail else c.ready
                if ready != c.ready:
                    c.ready = ready
                    await self._publish()
            await self.clock.sleep(period)

    async def _exec(self, c: Container, argv: list[str], timeout: float) -> tuple[int, str]:
        """An exec probe: `argv` in the container's context; its exit code and output (stdout and
        stderr together, the first 10 KiB as upstream reads); a timeout fails it (-1) with the
        prober's `command "..." timed out`, and kills it with all it started (run_to_end), as a
        cancelled probe's is."""
        if not argv:
            return -1, ""
        code, out, _ = await stdio.run_to_end(self._launch_argv(c, argv), self.runtime.cgroups.exec_path(c.cgroup),
                                              timeout, c.joins, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        if code is None:
            return -1, f'command "{" ".join(argv)}" timed out'
        return exit_code(code), out[:10240].decode(errors="replace")

    async def _run_in(self, c: Container, argv: list[str]) -> tuple[int, bytes, bytes]:
        """A hook's command in `c`'s context, as `kubectl exec` runs one there, to its end: its exit
        code, stdout and stderr; cancelled (cut off), it is killed."""
        self._running(c.name)
        code, out, err = await stdio.run_to_end(self._launch_argv(c, argv), self.runtime.cgroups.exec_path(c.cgroup),
                                                None, c.joins, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        return exit_code(code), out, err

    # --- what changes of a running pod's spec (PodWorker._sync_spec decides) --------------

    async def _start_ephemeral(self) -> bool:
        """Start the ephemeral containers the spec gained as processes of the pod, each run once;
        whether there were any."""
        started = False
        for spec in (self.pod.get("spec") or {}).get("ephemeralContainers") or ():
            if spec.get("name") in self.debug:
                continue
            c = self.debug[spec["name"]] = Container(spec)
            self._children.append(asyncio.create_task(self._start_debug(c)))
            started = True
        return started

    async def _start_debug(self, c: Container) -> None:
        self._next_sync()
        await self._container_loop(await self._set_up(c), lambda _code: False)

    async def _write_running(self, now: str) -> None:
        await self._publish()

    async def _restart_container(self, name: str) -> None:
        """A resize its policy restarts the container for: the process is stopped (SIGTERM, then
        SIGKILL after the pod's grace) and its loop starts it again at once, restartCount one more."""
        c = self.containers.get(name) or self.inits[name]
        path = "spec.containers" if name in self.containers else "spec.initContainers"
        await self._event("Normal", "Killing", f"Container {name} resize requires restart", f"{path}{{{name}}}")
        if c.proc is None or c.proc.returncode is not None:
            return
        c.resize_restart = True
        await self._stop(c, self._grace_deadline())

    # --- streaming (node/streaming.py) ------------------------------------------------

    def _named(self, container: str) -> Container | None:
        return self.containers.get(container) or self.inits.get(container) or self.debug.get(container)

    def has_container(self, container: str) -> bool:
        """Whether the container is running (see PodWorker.has_container)."""
        c = self._named(container)
        return c is not None and c.proc is not None and c.proc.returncode is None

    def container_logs(self) -> dict:
        return {c.name: (c.restarts, c.logs[-1]) for c in [*self._all(), *self.debug.values()] if c.logs}

    def _running(self, container: str) -> Container:
        c = self._named(container)
        if c is None or c.proc is None or c.proc.returncode is not None:
            raise StreamFailed(f'container "{container}" in pod "{self.name}" is not running')
        return c

    async def exec(self, container: str, command: list[str], session):
        c = self._running(container)
        if "/" not in command[0] and shutil.which(command[0], path=self._env[c.name].get("PATH")) is None:
            exec_id = hashlib.sha256(f"{self.uid}/{container}/{command}/{self.clock.now()}".encode()).hexdigest()
            raise executable_not_found(exec_id, command[0])
        env = {**self._env[c.name], "TERM": "xterm"} if session.tty else None  # containerd's exec with a tty
        return await stdio.run(self._launch_argv(c, command, env), session, exit_code, c.cgroup, c.joins)

    async def attach(self, container: str, session):
        c = self._running(container)
        return await stdio.attach(c.io, c.proc, session, exit_code, bool(c.spec.get("stdinOnce")))

    async def port_forward(self, port: int):
        if not self.netns:
            raise StreamFailed(f'pod "{self.name}" has no network namespace yet')
        shown = "host" if (self.pod.get("spec") or {}).get("hostNetwork") else f"/var/run/netns/{self.netns}"
        return await stdio.connect(self.netns, port, sandbox_id(self.uid), shown)

    async def logs(self, container: str, options):
        c = self._named(container)
        if c is None or not c.logs:
            raise no_log(self.pod, container)
        if options.previous:
            # lastState.terminated's instance: while the container waits to start again (its
            # back-off, a pull) the one that just ended, else the one before the current
            ended = 1 if "waiting" in c.state else 2
            if len(c.logs) < ended:
                raise errors.bad_request(f'previous terminated container "{container}" in pod "{self.name}" not found')
            return c.logs[-ended].serve(replace(options, follow=False))
        return c.logs[-1].serve(options)

    # --- status -----------------------------------------------------------------------

    def _container_id(self, c: Container) -> str:
        return "containerd://" + hashlib.sha256(f"{self.uid}/{c.name}/{c.instances}".encode()).hexdigest()

    def _statuses(self, containers=None, resources: bool = True) -> list[dict]:
        """The containers' statuses; a running one's with what was allocated to it and what it
        runs with (`resources`: not for ephemeral containers, which have none)."""
        out = []
        for c in self.containers.values() if containers is None else containers:
            s = {"name": c.name, "state": c.state, "lastState": c.last_state, "ready": c.ready,
                 "restartCount": c.restarts, "image": image_ref(c.spec.get("image", "")),
                 "imageID": image_id(c.spec.get("image", "")), "started": c.started}
            if mounts := volume_mount_statuses(c.spec, self.recursive_mounts):
                s["volumeMounts"] = mounts
            if c.instances:
                s["containerID"] = self._container_id(c)
            else:  # never created: the spec's image as given, no image ID (no runtime status yet)
                s["image"], s["imageID"] = c.spec.get("image", ""), ""
            if resources and "running" in c.state:
                if requests := (self.allocated.get(c.name) or {}).get("requests"):
                    s["allocatedResources"] = requests
                s["resources"] = self.reported.get(c.name) or {}
            out.append(s)
        return out

    def _init_statuses(self, now: str, running: bool) -> list[dict]:
        """The init containers' own statuses (PodInitializing until they are set up)."""
        if self.inits:
            return self._statuses(self.inits.values())
        return [self._status_of(c, {"waiting": {"reason": "PodInitializing"}}, False, False)
                for c in (self.pod.get("spec") or {}).get("initContainers") or []]

    async def _image_waiting(self, c: dict, reason: str, message: str) -> None:
        """The container waits for its image in its own state, published with the others'."""
        container = self._named(c["name"])
        if container is not None:
            container.state = {"waiting": {"reason": reason, "message": message}}
            await self._publish()

    async def _publish(self) -> None:
        """Write the pod's status if it changed (containers publish concurrently)."""
        async with self._write_lock:
            statuses = self._statuses()
            sidecars = [c for c in self.inits.values() if c.sidecar]
            ready = not self._initializing and all(c.ready for c in [*self.containers.values(), *sidecars])
            self.ephemeral = {s["name"]: s for s in self._statuses(self.debug.values(), resources=False)}
            key = json.dumps([statuses, self._init_statuses("", True), ready, self.ephemeral, self.resize_conditions,
                              self.pod["metadata"].get("generation")], sort_keys=True).encode()
            if key == self._published or (self.deleting() and self._stopping.is_set()):
                return
            self._published = key
            try:
                await self._write("Pending" if self._initializing else "Running", statuses, ready,
                                  self.clock.rfc3339(), "" if ready else "ContainersNotReady", running=True,
                                  initialized=not self._initializing)
            except errors.APIError as e:
                if e.code != 404:
                    raise


def sandbox_again(policy: str, inits: list[Container], containers: list[Container]) -> bool:
    """Whether a pod whose sandbox died gets a new one (computePodActions): not where no container
    would start in it: under Never once any container ran, under OnFailure once every app
    container succeeded (its last instance exited 0; a running one is dying with the sandbox)."""
    if policy == "Never":
        return not any(c.instances for c in [*inits, *containers])
    if policy == "OnFailure":
        return not containers or not all(
            (c.state.get("terminated") or {}).get("exitCode", 1) == 0 for c in containers)
    return True


def _restarts(c: Container, policy: str, code: int) -> bool:
    """Whether the container is restarted in place after exiting with `code`: its own policy and
    rules, else the pod's `policy` (restartrules.on_exit). A RestartAllContainers rule's match is not
    carried out by this runtime (the simulated one does): the container then stays as it ended."""
    return restartrules.on_exit(c.spec, policy, code) == restartrules.RESTART


def _kill(c: Container, sig: int) -> None:
    """SIGTERM to the container's first process only, as a runtime's StopContainer signals it (its
    children run on: a shell's `sleep` ends as it would, and the shell's trap then runs; a PID 1
    with no handler for it ignores it); SIGKILL to every process of the container (its process
    group and cgroup; in a PID namespace of its own, the namespace)."""
    if c.proc is not None:
        stdio.kill(c.proc, c.pid, sig, c.cgroup)


def _kill_rest(c: Container) -> None:
    """What is left of a container whose first process exited (a command it started in the
    background, its execs) goes with it, as a container's processes go with its init (in a
    namespace of its own the kernel saw to that): its cgroup's, and its process group's, whose ID
    is not reused while any of them lives."""
    cgroups.kill(c.cgroup)
    try:
        os.killpg(c.pid or c.proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass

