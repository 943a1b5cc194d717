"""What a simulated container shows of itself: its log, exec, attach and
port-forward, declared on the pod with annotations.

- Log: every container instance logs its start, readiness and exit (with
  its code), plus the lines of `sim.nanokube.io/log`: each line is printed
  when the container starts, or `@<seconds>s <text>` that many seconds
  after it started. One whose command is interpreted (simulated_command:
  `echo hi`, `sh -c 'sleep 1; echo done'`) logs what it writes, when it
  writes it, and nothing of nanokube's, as a real container's log shows.
- Exec: the image has no binaries, so a command fails as a container
  runtime fails it ("executable file not found in $PATH"), unless the pod
  declares it: `sim.nanokube.io/exec.<command>` (the command's base name)
  is its stdout, or a JSON object `{"stdout": "...", "stderr": "...",
  "exitCode": N}`; or it is one simulated_command interprets (`echo hi`,
  `sh -c 'sleep 1; exit 3'`, `env`), which runs as it would, in the
  container's environment (container_env, as the process runtime's). A shell with no
  command (`kubectl exec -it pod -- sh`) runs the lines of its stdin so,
  prompting `/ # ` on a terminal, until `exit [N]` or EOF.
- Network: a command running `wget`, `curl`, `nslookup`, `getent`, `ping` or `nc` (exec's, a shell
  line, a container's own) is given the cluster's network as the node agents' watches keep it
  (simulated_net, simulated_cluster): Services, their ready endpoints and pods' simulated servers,
  below; a loop's later passes and what runs after a sleep read it when their time comes.
- Files: exec and a shell see the container's files (simulated_fs: an
  in-memory root, its volume mounts): `cat`, `ls`, `tar` and redirections
  work on them, so `kubectl cp` (`tar cf -`, `tar xmf -`) copies to and from
  the pod. A command that reads stdin (`tar xmf -`) gets all the client sends.
- GPUs: `nvidia-smi` (its table, `-L`, `-q`, `-i`, `--query-gpu`) answers for the GPUs the container was
  given, its DRA claims' and NVIDIA_VISIBLE_DEVICES' (simulated_gpu), in exec, a shell and a
  container's own command; `nproc`, `free` and `df` for its node's machine (simulated_system).
  On a node with NVIDIA-personality GPUs `nvidia-smi -L` lists the MIG devices too; a container
  whose command runs it in a script not interpreted as a whole logs that same listing at start.
- Attach: streams what the container writes as it writes it (a prompt with no
  new line after it too, which its log keeps until the line ends), until it exits.
  A `stdin: true` container is a process reading its stdin until EOF (a
  shell): its stdin closes when an attached client closes or leaves it
  while `stdinOnce` is set (as `kubectl run -i/-it` sets it), or on ^D typed
  at its terminal (`tty: true`); then it exits 0, the pod's other containers
  running on. Without `stdinOnce` it keeps running when the client leaves.
  One whose command is interpreted (`echo hi`, `sleep 5`) does not read its
  stdin: it ends when its command does; one whose command is a filter
  (`cat`, `grep x`: simulated_filters) writes what it makes of each piece of
  its stdin as it comes, and exits with the filter's status at EOF. One whose `sh -c` script reads its
  stdin (`while read l; do echo got:$l; done`, `sleep 1; cat`) writes, as each piece comes, what it
  has written before its next read waits for more; at EOF (or once it needs no more) it is worked
  out whole on all it was sent, its file changes made then, and ends with the script's status.
  On a terminal, what the client types
  is echoed (into the log, as a tty's output is) with Enter as a new line.
  One running a shell (`kubectl run -i -- sh`, `kubectl debug -it` of
  busybox) runs the lines it is sent, as exec's shell does, and ends with
  their status at EOF, or at `exit [N]` with N.
- Port-forward (and httpGet hooks): any port of a pod with a running container
  answers HTTP requests with a line naming the pod, a TLS hello with a plain
  HTTP server's 400, and echoes anything else; a port only containers not
  running declare refuses the connection, as the kubelet reports a closed port.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import heapq
import itertools
import json
import math
import os
import re
import socket
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from ..machinery.streaming import LogOptions, StreamFailed, StreamSession, executable_not_found, sandbox_id
from . import container_env, simulated_accounts, simulated_gpu, simulated_net, simulated_system
from .containerlog import ContainerLog
from .simulated_applets import Terminal
from .simulated_builtins import SHELLS
from .simulated_command import PASS, Program, Shell, has_program, image_command, interpret, reads_stdin, uses_environment, wants_stdin, written_so_far
from .simulated_command import stream as filter_of
from .simulated_filters import Filter
from .simulated_fs import ContainerFS, PodFiles
from .streaming import no_log
from .volumes.stats import quantity_or_none, tmpfs_size

LOG = "sim.nanokube.io/log"
EXEC_PREFIX = "sim.nanokube.io/exec."
_LINE_END = re.compile(rb"\r\n?|\n")
SMI_LIST = re.compile(r"\bnvidia-smi\s+(-L|--list-gpus)\b")
#: how long an exec asking its terminal's size at once waits for the client's first one (kubectl
#: sends it as the stream opens; the wait ends when it comes, so only a client sending none waits it out)
FIRST_SIZE_WAIT = 5.0
# Go's net/http answer to bytes that are no HTTP request, a TLS ClientHello among them
BAD_REQUEST = b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n400 Bad Request"


class SimulatedIO:
    """The logs (current and previous instance) and streams of one pod's simulated containers."""

    __slots__ = ("worker", "logs", "running", "ephemeral", "_scripted", "_pending", "programs", "exit_codes",
                 "stdin_closed", "stdin_status", "shells", "ephemeral_ended", "_files", "environments",
                 "streams", "ended", "began", "scripts", "_commands")

    def __init__(self, worker):
        self.worker = worker
        self.logs: dict[str, list[ContainerLog]] = {}
        self.running: list[str] = []  # containers with a live instance (init containers have finished)
        self.ephemeral: list[str] = []  # ephemeral containers started
        #: the ephemeral containers that ended on their own since the worker last looked: their exit codes
        self.ephemeral_ended: dict[str, int] = {}
        #: the containers running a shell on their stdin (attach feeds it)
        self.shells: dict[str, Shell] = {}
        #: the containers running a filter on their stdin (`cat`, `grep x`: attach feeds it)
        self.streams: dict[str, Filter] = {}
        #: the containers whose `sh -c` script reads their stdin (`while read l; do ...; done`):
        #: what it has been sent so far, worked out as it comes, whole at EOF (`_stdin_ended`)
        self.scripts: dict[str, _StdinScript] = {}
        #: what each running container writes later, and the task writing it
        self._pending: dict[str, _Writes] = {}
        self._scripted: dict[str, asyncio.Task] = {}
        #: the running containers whose command is interpreted (simulated_command): what they run;
        #: what SIGTERM is worked out on (that program, or what went on from its wait's last pass)
        #: and when (monotonic) it began
        self.programs: dict[str, Program] = {}
        self.began: dict[str, tuple[Program, float]] = {}
        #: how each container's last instance exited, for an attach that saw it end
        self.exit_codes: dict[str, int] = {}
        #: the containers reading stdin that reached its EOF: each exits 0 (the worker's run wait ends)
        self.stdin_closed: set[str] = set()
        #: the exit status of each of those that ran a shell (`exit 3`); the others exit 0
        self.stdin_status: dict[str, int] = {}
        #: the containers' files, made when exec or a shell first needs them
        self._files: PodFiles | None = None
        #: each container's environment, made as it starts (`prepare`)
        self.environments: dict[str, dict[str, str]] = {}
        #: each container's command expanded (`command`), with the environment, command and args it was for
        self._commands: dict[str, tuple[tuple, list[str]]] = {}
        #: the containers whose command, waiting for its files (`Wait`), went on and ended since the
        #: worker last looked: their exit codes (the worker's run wait ends)
        self.ended: dict[str, int] = {}

    async def prepare(self, spec: dict) -> None:
        """Make container `spec`'s environment as it starts (container_env: the kubelet's
        makeEnvironmentVariables, each start) where its command uses it; else it is made when an
        exec or an attached shell first does (`_environment_made`), so that a pod whose command
        reads no variable costs its node no list of Services."""
        self.environments.pop(spec["name"], None)
        argv = [*(spec.get("command") or ()), *(spec.get("args") or ())] or \
            image_command(spec.get("image", ""))
        # the network its command (`wget -qO- web`) sees as it starts, for the start in this task that follows
        simulated_net.NETWORK.set(await simulated_net.view(self.worker, " ".join(argv), spec.get("image", "")))
        await self._machine(spec["name"])
        if uses_environment(argv) or reads_stdin(argv, spec.get("image", "")):
            self.environments[spec["name"]] = await container_env.environment(
                self.worker, spec, simulated_accounts.home(self.worker.pod, spec["name"]))

    async def _environment_made(self, container: str) -> dict[str, str]:
        if container not in self.environments:
            self.environments[container] = await container_env.environment(
                self.worker, self._spec(container), simulated_accounts.home(self.worker.pod, container))
        return self.environments[container]

    def environment(self, container: str) -> dict[str, str]:
        """Container `container`'s environment; the image's defaults before it was made."""
        made = self.environments.get(container)
        if made is None:
            return {"PATH": container_env.DEFAULT_PATH, "HOME": simulated_accounts.home(self.worker.pod, container),
                    "HOSTNAME": container_env.hostname(self.worker.pod, self.worker.agent.name)}
        return made

    def command(self, spec: dict) -> list[str]:
        """Container `spec`'s command and args, their $(VAR) references expanded with its environment:
        once for the environment it has (made again at each start) and the command and args
        given, not at each look a start takes (its start error, its program, its lifetime)."""
        name, key = spec["name"], (self.environments.get(spec["name"]), spec.get("command"), spec.get("args"))
        cached = self._commands.get(name)
        if cached is None or any(a is not b for a, b in zip(cached[0], key)):
            self._commands[name] = cached = key, container_env.command(spec, self.environment(name)) or \
                image_command(spec.get("image", ""))
        return cached[1]

    def files(self, container: str) -> ContainerFS:
        """What container `container` sees of its files (simulated_fs)."""
        if self._files is None:
            volumes, uid = self.worker.agent.volumes, self.worker.uid
            self._files = PodFiles(self.worker.pod, lambda name: volumes.volume_dir(uid, name), self.worker.clock,
                                   lambda name: volumes.read_only(uid, name), self.worker.agent.name,
                                   lambda name: simulated_gpu.with_device_nodes(
                                       self.worker.agent.claims.cdi_edits(self.worker.pod, name), name),
                                   lambda c: simulated_net.etc_files(self.worker.pod, c, self.worker.agent.name,
                                                                     self.worker.ip), self._tmpfs_size)
        return self._files.container(container, self.worker.pod)

    def _tmpfs_size(self, vol: dict) -> int:
        """The size the kubelet mounts memory-backed emptyDir `vol`'s tmpfs with (stats.tmpfs_size)."""
        allocatable = quantity_or_none(self.worker.agent.spec.allocatable.get("memory"))
        return tmpfs_size(self.worker.pod, vol, int(allocatable.value) if allocatable is not None else 0)

    def draft(self, container: str, fresh: bool = True) -> ContainerFS:
        """A copy of what a new instance of `container` will see (`fresh`), or the running one sees,
        for a command to be worked out on (simulated_command); the changes it makes are made when
        their time comes (`_flush`, `_exec_program`)."""
        self.files(container)
        return self._files.draft(container, self.worker.pod, fresh)

    def _annotations(self) -> dict:
        return (self.worker.pod.get("metadata") or {}).get("annotations") or {}

    def _write(self, line: str, containers=None) -> None:
        for name in containers or self.running:
            self._emit(name, line + "\n")

    def _emit(self, name: str, text: str | bytes, stream: str = "stdout") -> None:
        self.logs[name][-1].append(self.worker.clock.now(), stream, text if isinstance(text, bytes) else text.encode())

    def started(self, image_of: dict[str, str], inits: dict[str, str] | None = None,
                programs: dict[str, Program] | None = None) -> None:
        """A new instance of every container: keep the last one as `previous`.
        Init containers (`inits`, on the pod's first start) ran and exited 0 just before."""
        for name, image in (inits or {}).items():
            if name not in self.logs:
                log = ContainerLog()
                now = self.worker.clock.now()
                for line in (f"started (image {image})", "exited with code 0"):
                    log.append(now, "stdout", f"nanokube: init container {name} {line}\n".encode())
                log.close()
                self.logs[name] = [log]
        for name, image in image_of.items():
            self.start(name, image, (programs or {}).get(name))

    def start(self, name: str, image: str, program: Program | None = None) -> None:
        """A new instance of one container (the last one kept as `previous`), the others running on.
        One that runs an interpreted `program` logs what it writes, as a real one would, instead of
        nanokube's lines about it."""
        self.stdin_closed.discard(name)
        self.stdin_status.pop(name, None)
        self.ended.pop(name, None)
        self.exit_codes.pop(name, None)
        self.logs[name] = [*self.logs.get(name, [])[-1:], ContainerLog()]
        if self._files is not None:
            self._files.restarted(name)
        if name not in self.running:
            self.running.append(name)
        timeline: Iterable[tuple[float, str, object]] = ()
        spec = self._spec(name)
        self.shells.pop(name, None)
        self.streams.pop(name, None)
        self.scripts.pop(name, None)
        argv = [*(spec.get("command") or ()), *(spec.get("args") or ())]
        if program is not None:
            self.programs[name] = program
            self.began[name] = program, self.worker.clock.monotonic()
            timeline = program.timeline()
        elif spec.get("stdin") and (stream := filter_of(argv)) is not None:
            self.programs.pop(name, None)
            self.streams[name] = stream  # writes what it reads, as its stdin comes (attach)
        elif spec.get("stdin") and (script := self._stdin_script(name)) is not None:
            self.programs.pop(name, None)
            self.scripts[name] = script  # worked out as its stdin comes (attach)
            self._stdin_read(name, script)
        else:
            self.programs.pop(name, None)
            if spec.get("stdin") and reads_stdin(argv, image):
                # a shell on its stdin logs what it writes, as a real one would (`kubectl run -i -- sh`)
                self.shells[name] = Shell(lambda: self.files(name), self._workdir(name), self.environment(name),
                                          Terminal() if spec.get("tty") else None)
            else:
                self._write(f"nanokube: container {name} started (image {image})", [name])
                self._write(f"nanokube: container {name} is ready", [name])
            if name in self.shells and spec.get("tty"):  # the shell's first prompt, as busybox's sh on a terminal
                self._emit(name, self.shells[name].prompt())
            if SMI_LIST.search(" ".join(self._command(name))):  # the GPUs `prepare` found for it
                for line in simulated_gpu.listing(name).splitlines():
                    self._write(line, [name])
        declared = []
        for raw in (self._annotations().get(LOG) or "").splitlines():
            when, text = _scheduled(raw)
            declared.append((when or 0.0, "stdout", text + "\n"))
        self._schedule(name, heapq.merge(timeline, sorted(declared, key=lambda e: e[0]), key=lambda e: e[0]),
                       self._then(name, program, self.worker.clock.monotonic()))

    def _schedule(self, name: str, out: Iterable[tuple[float, str, object]], then=None,
                  now: float | None = None) -> None:
        """Container `name` writes `out` ((seconds from `now`, by default now, monotonic; stream,
        text), or changes its files: stream "files"; in time order, endless for an endless loop),
        then does `then`, if any."""
        now = self.worker.clock.monotonic() if now is None else now
        self._pending[name] = pending = _Writes((now + when, stream, text) for when, stream, text in out)
        self._flush(name, now)
        if pending.due is not None or then:
            self._scripted[name] = asyncio.ensure_future(self._later(name, then))

    def _flush(self, name: str, until: float) -> None:
        """Write what container `name` wrote by `until` (monotonic); on its terminal (`tty`) all is
        one stream, stdout, its new lines CR LF, as the pty's line discipline (onlcr) makes them."""
        pending = self._pending.get(name)
        tty = bool(self._spec(name).get("tty")) if pending is not None else False
        while pending is not None and pending.due is not None and pending.due <= until:
            _, stream, text = pending.pop()
            if stream == PASS:  # a loop's next pass, worked out now (the network as it is now)
                continue
            if stream == "files":
                self.files(name).replay([text])
            else:
                self._put(name, stream, text, tty)

    def _put(self, name: str, stream: str, text: str | bytes, tty: bool) -> None:
        """Container `name` writes `text`; on its terminal all is one stream, its new lines CR LF."""
        if tty:
            data = text if isinstance(text, bytes) else text.encode()
            self._emit(name, data.replace(b"\n", b"\r\n"))
        else:
            self._emit(name, text, stream)

    def runs_on_stdin(self, spec: dict) -> bool:
        """Whether container `spec`, its command not interpreted as it starts, runs on what its
        stdin (`stdin: true`) is sent as it comes (`start`): a filter, a `sh -c` script reading
        it, or a shell; it then ends at that stdin's EOF or its own `exit`, not as it starts."""
        argv = [*(spec.get("command") or ()), *(spec.get("args") or ())]
        return bool(spec.get("stdin")) and (filter_of(argv) is not None or self._stdin_script(spec["name"]) is not None
                                            or reads_stdin(argv, spec.get("image", "")))

    def _stdin_script(self, name: str) -> _StdinScript | None:
        """Container `name`'s `sh -c` script where it reads its stdin (`while read l; do ...; done`,
        `sleep 1; cat`), so was not worked out as it started, yet is interpreted once that stdin is
        known; None for any other command."""
        argv, spec = self.command(self._spec(name)), self._spec(name)
        if not argv or not wants_stdin(argv):
            return None
        now = self.worker.clock.now()
        if interpret(argv, now, lambda: self.draft(name, fresh=False), b"", self.environment(name),
                     Terminal() if spec.get("tty") else None) is None:
            return None
        return _StdinScript(argv, now, self.worker.clock.monotonic())

    def _stdin_read(self, name: str, script: _StdinScript) -> None:
        """The script has been sent more (or has just started): what it has written by now while
        it waits for the rest (`written_so_far`) is written, and what it writes later, before it
        reads again, when its time comes; where it ends without reading the rest, it ends so."""
        clock, spec = self.worker.clock, self._spec(name)
        if self.logs[name][-1].closed:  # (it was stopped)
            return
        so_far = written_so_far(script.argv, script.started, lambda: self.draft(name, fresh=False), bytes(script.data),
                                self.environment(name), Terminal() if spec.get("tty") else None)
        if so_far is None:
            self._stdin_ended(name, script)
            return
        writes, script.to_eof = so_far
        if script.timer is not None:
            script.timer.cancel()
            script.timer = None
        now = clock.monotonic()
        for at, stream, text in writes[script.shown:]:
            if script.began + at > now:
                async def later(delay: float = script.began + at - now) -> None:
                    await clock.sleep(delay)
                    script.timer = None
                    self._stdin_read(name, script)
                script.timer = asyncio.ensure_future(later())
                return
            self._put(name, stream, text, bool(spec.get("tty")))
            script.shown += 1

    def _stdin_ended(self, name: str, script: _StdinScript) -> None:
        """The EOF of a script's stdin (`_stdin_script`): it is worked out from its start on all it was
        sent, on the files as they are now; what it wrote by now is written at once, the rest when
        its time comes, and the worker sees it end (`ended`) with its status."""
        if self.scripts.pop(name, None) is None or self.logs[name][-1].closed:
            return
        if script.timer is not None:
            script.timer.cancel()
        program = interpret(script.argv, script.started, lambda: self.draft(name, fresh=False), bytes(script.data),
                            self.environment(name), Terminal() if self._spec(name).get("tty") else None)
        if program is None:  # (not expected: it was interpreted on an empty stdin) a reader ending at EOF
            if name in self.ephemeral:
                self.end_ephemeral(name, 0)
                return
            self.stdin_closed.add(name)
            self.worker.changed.set()
            return
        self.programs[name] = program
        self.began[name] = program, script.began
        if task := self._scripted.pop(name, None):
            task.cancel()
        declared = ((t - script.began, stream, text) for t, stream, text in _remaining(self._pending.get(name)))
        shown = itertools.count()  # what it wrote as it waited for the rest is written
        unseen = (e for e in program.timeline() if e[1] not in ("stdout", "stderr") or next(shown) >= script.shown)
        self._schedule(name, heapq.merge(unseen, declared, key=lambda e: e[0]),
                       self._then(name, program, script.began, resumed=True), now=script.began)

    def _then(self, name: str, program: Program | None, began: float, resumed: bool = False):
        """What container `name` does once `program` (started at `began`, monotonic) has written all:
        where it waits in a loop reading its files (`Wait`), it reads them again at each pass, as
        they are then, until it goes on; the end of a command that went on so (`resumed`) is the
        worker's to see (`ended`, or an ephemeral container's end), as it was not known when the
        container started."""
        clock = self.worker.clock
        if program is None or program.wait is None and (not resumed or math.isinf(program.seconds)):
            return None

        async def ends() -> None:
            await clock.sleep(max(began + program.seconds - clock.monotonic(), 0.0))
            if name in self.ephemeral:
                self.end_ephemeral(name, program.exit_code)
                return
            self.ended[name] = program.exit_code
            self.worker.changed.set()
        if program.wait is None:
            return ends

        async def passes() -> None:
            await clock.sleep(max(began + program.wait.at - clock.monotonic(), 0.0))
            now = clock.monotonic()
            await self._network(" ".join(self._command(name)), name)  # `until nslookup svc` sees it come
            later = program.wait.resume(self.draft(name, fresh=False), clock.now())
            if later is None:  # it runs on, not worked out
                self.began.pop(name, None)
            else:
                self.began[name] = later, now
                self._schedule(name, later.timeline(), self._then(name, later, now, resumed=True))
        return passes

    async def _later(self, name: str, then=None) -> None:
        pending = self._pending[name]
        while pending.due is not None:
            await self.worker.clock.sleep(max(pending.due - self.worker.clock.monotonic(), 0.0))
            self._flush(name, self.worker.clock.monotonic())
        if then:
            await then()

    def exit(self, name: str, code: int, why: str = "", at: float | None = None) -> None:
        """One container's instance ends with `code` (`why`, if said), the others running on; what
        it wrote until then (`at`, monotonic: by default now) is in its log."""
        if name not in self.running:
            return
        self._flush(name, self.worker.clock.monotonic() if at is None else at)
        self._pending.pop(name, None)
        self.ended.pop(name, None)
        if task := self._scripted.pop(name, None):
            task.cancel()
        if (script := self.scripts.get(name)) is not None and script.timer is not None:
            script.timer.cancel()
        if not any(name in d for d in (self.programs, self.streams, self.shells, self.scripts)):  # (what it wrote)
            if why:
                self._write(f"nanokube: container {name} {why}", [name])
            self._write(f"nanokube: container {name} exited with code {code}", [name])
        self.logs[name][-1].close()
        self.running.remove(name)
        self.exit_codes[name] = code

    def signalled(self, names: list[str] | None = None) -> dict[str, tuple[float | None, int]]:
        """The kubelet's SIGTERM, now, to each running container (of `names`, if given) whose command
        traps it: from now on it writes what it then does (its trap's action, once the command
        running ends); when it ends (monotonic; None: it runs on, to be killed) and with which code,
        by name."""
        now, out = self.worker.clock.monotonic(), {}
        for name in list(self.running) if names is None else [n for n in names if n in self.running]:
            running = self.began.get(name) if name in self.programs else None
            if running is None or running[0].signalled is None:
                continue
            program, began = running
            at = now - began
            later = program.signalled(at, self.draft(name, fresh=False))  # the running instance's files
            if later is None:
                continue
            self._flush(name, now)
            if task := self._scripted.pop(name, None):
                task.cancel()
            self._schedule(name, ((t - at, stream, text) for t, stream, text in later.timeline(at)),
                           self._then(name, later, now - at, resumed=True), now=now)
            out[name] = (None if math.isinf(later.seconds) else now + (later.seconds - at), later.exit_code)
        return out

    def exited(self, code: int, why: str = "") -> None:
        """Every running container ends with `code` (the pod stops)."""
        for name in list(self.running):
            self.exit(name, code, why)

    def restarted(self, name: str, image: str, code: int, why: str,
                  program: Callable[[], Program | None]) -> None:
        """One container's instance ends (`why`, with `code`) and a new one starts, the others
        running on (the kubelet restarting it for a resize or a new image): it runs its command
        anew, `program()` worked out once the old instance's changes are made."""
        self.exit(name, code, why)
        self.start(name, image, program())

    def start_ephemeral(self, name: str, image: str, program: Program | None = None) -> None:
        """An ephemeral container added to the running pod starts (once: it is never restarted). One
        that runs an interpreted `program` writes what it writes and ends when it does; one that runs a
        shell (`kubectl debug -it`) runs what an attached client sends it (`attach`), or, named with no
        stdin, ends at once as `sh` does at its EOF; any other runs until the pod stops."""
        self.logs[name] = [ContainerLog()]
        self.ephemeral.append(name)
        spec = self._spec(name)
        argv = [*(spec.get("command") or ()), *(spec.get("args") or ())]
        if program is None and reads_stdin(argv, image):
            if spec.get("stdin"):
                self.shells[name] = Shell(lambda: self.files(name), self._workdir(name), self.environment(name),
                                          Terminal() if spec.get("tty") else None)
                if spec.get("tty"):
                    self._emit(name, self.shells[name].prompt())
                return
            if argv:  # the image's own shell, with no stdin, is left running, as before
                program = Program((), 0.0, 0)
        if program is None and spec.get("stdin") and (script := self._stdin_script(name)) is not None:
            self.scripts[name] = script  # worked out as its stdin comes (attach)
            self._stdin_read(name, script)
            return
        if program is None:
            self._write(f"nanokube: ephemeral container {name} started (image {image})", [name])
            return
        self.programs[name] = program
        if program.wait is not None:  # it ends once the files it waits for are there
            self._schedule(name, program.timeline(), self._then(name, program, self.worker.clock.monotonic()))
            return
        end = self.worker.clock.monotonic() + program.seconds

        async def ended() -> None:
            await self.worker.clock.sleep(max(end - self.worker.clock.monotonic(), 0.0))
            self.end_ephemeral(name, program.exit_code)
        self._schedule(name, program.timeline(), None if math.isinf(end) else ended)

    def end_ephemeral(self, name: str, code: int) -> None:
        """An ephemeral container's command ended with `code`: the worker reports it terminated."""
        log = self.logs[name][-1]
        if log.closed:
            return
        endless = name in self.programs and math.isinf(self.programs[name].seconds)
        self._flush(name, self.worker.clock.monotonic() if endless else math.inf)
        self._pending.pop(name, None)
        self.shells.pop(name, None)
        log.close()
        self.exit_codes[name] = code
        self.ephemeral_ended[name] = code
        self.worker.changed.set()

    def ephemeral_exited(self, code: int) -> None:
        """The pod stopped: its ephemeral containers end with it."""
        for name in self.ephemeral:
            if not self.logs[name][-1].closed:
                if not any(name in d for d in (self.programs, self.shells, self.scripts)):
                    self._write(f"nanokube: ephemeral container {name} exited with code {code}", [name])
                self.logs[name][-1].close()

    def stop(self) -> None:
        for task in self._scripted.values():
            task.cancel()

    # --- served to the API server ----------------------------------------------------

    def serve_log(self, container: str, opts: LogOptions):
        from ..machinery import errors

        instances = self.logs.get(container) or []
        pod = self.worker.name
        if not instances:
            raise no_log(self.worker.pod, container)
        if opts.previous:
            # as the kubelet's validateContainerLogStatus: previous is lastState.terminated's instance,
            # which while a crashed container waits out its back-off is the one that just ended
            ended = 1 if instances[-1].closed and self._backing_off(container) else 2
            if len(instances) < ended:
                raise errors.bad_request(f'previous terminated container "{container}" in pod "{pod}" not found')
            return instances[-ended].serve(LogOptions(**{**opts.__dict__, "follow": False}))
        return instances[-1].serve(opts)

    def _backing_off(self, container: str) -> bool:
        """The container is waiting to restart (its status waiting, its lastState terminated)."""
        st = (self.worker.pod.get("status") or {})
        cs = next((c for key in ("containerStatuses", "initContainerStatuses") for c in st.get(key) or ()
                   if c.get("name") == container), {})
        return "waiting" in (cs.get("state") or {}) and "terminated" in (cs.get("lastState") or {})

    def _running(self, container: str) -> ContainerLog:
        instances = self.logs.get(container) or []
        if not instances or instances[-1].closed:
            raise StreamFailed(f"container {container} is not running")
        return instances[-1]

    def _spec(self, container: str) -> dict:
        spec = self.worker.pod.get("spec") or {}
        return next((c for key in ("containers", "initContainers", "ephemeralContainers") for c in spec.get(key) or []
                     if c.get("name") == container), {})

    def _workdir(self, container: str) -> str:
        """Where the container's processes start: its workingDir, else the image's (`/` here)."""
        return os.path.normpath(os.path.join("/", self._spec(container).get("workingDir") or "/"))

    def _command(self, container: str) -> list[str]:
        spec = self._spec(container)
        return [*(spec.get("command") or []), *(spec.get("args") or [])]

    async def _machine(self, container: str, commands: bool = True) -> None:
        """What the commands about to be worked out in `container` (in this task and those it
        starts) see of the node's machine: its capacity, boot and load (simulated_system) and,
        where commands are worked out, the GPUs the container was given (none where its spec asks
        for none: simulated_gpu.uses_gpus) and the node's RDMA NICs."""
        agent = self.worker.agent
        spec = getattr(agent, "spec", None)
        simulated_system.NODE.set(getattr(spec, "capacity", None))
        booted = getattr(agent, "booted", None)
        pods = [w.pod for w in list(getattr(agent, "workers", {}).values())]
        simulated_system.HOST.set(None if booted is None else simulated_system.Host(
            booted, simulated_system.load(pods), simulated_system.tasks(pods)))
        if commands:
            gpus = await self._gpus(container) if simulated_gpu.uses_gpus(self._spec(container)) else ()
            simulated_gpu.GPUS.set({**simulated_gpu.GPUS.get(), container: gpus})
            simulated_gpu.NICS.set(simulated_gpu.nics(getattr(spec, "devices", ())) if gpus else ())

    async def _gpus(self, container: str) -> tuple[simulated_gpu.Gpu, ...]:
        """The node's GPUs container `container` sees (simulated_gpu): those of its DRA claims (the
        NVIDIA driver's too, an extended resource's claim among them) and those
        NVIDIA_VISIBLE_DEVICES names (the device plugin's Allocate sets it; `all`: every one), each
        once, in the node's PCI bus order, as nvidia-smi enumerates them; with the MIG devices of
        each its NVIDIA-personality claims gave it."""
        agent = self.worker.agent
        node = [d for d in getattr(getattr(agent, "spec", None), "devices", ()) if d.kind == "gpu"]
        by_name = {d.name: d for d in node}
        seen = []
        claimed = getattr(agent.claims, "prepared_devices", None)
        for _, _, d in claimed(self.worker.pod, container) if claimed and node else ():
            m = re.match(r"gpu-\d+", d.device)  # a MIG device or a shared GPU's share: its GPU
            if m and m.group() in by_name:
                seen.append(by_name[m.group()])
        visible = (await self._environment_made(container)).get("NVIDIA_VISIBLE_DEVICES", "").split(",")
        by_id = {d.attributes.get("uuid"): d for d in node} | {str(d.attributes.get("index")): d for d in node}
        seen += node if visible == ["all"] else [by_id[v] for v in visible if v in by_id]
        migs: dict[str, list[dict]] = {}  # the NVIDIA driver's MIG devices it was given, by their GPU's UUID
        nvidia = getattr(agent.claims, "container_devices", None)
        for d in (nvidia(self.worker.pod, container) or ()) if nvidia and node else ():
            if (gpu := by_id.get(d["parentUUID"] or d["uuid"])) is not None:
                seen.append(gpu)
            if d["type"] == "mig":
                migs.setdefault(d["parentUUID"], []).append(d)
        numa_nodes = 1 + max((d.attributes.get("numaNode") or 0 for d in node), default=0)
        return tuple(simulated_gpu.gpu(d.attributes, d.capacity, d.attributes.get("index", 0),
                                       migs.get(d.attributes.get("uuid"), ()), numa_nodes)
                     for d in sorted({d.name: d for d in seen}.values(), key=lambda d: d.attributes.get("index", 0)))

    async def exec(self, container: str, command: list[str], session: StreamSession) -> int:
        """Run `command` in the container; with a terminal (`-t`) it is sized as the client says,
        the resizes it sends followed while the command runs."""
        self._running(container)
        terminal = None
        if session.tty:
            terminal = Terminal()
            sized = not session.resizes.empty()
            while not session.resizes.empty():  # what came with the request, before the command starts
                terminal.resized(*session.resizes.get_nowait())
            if not sized and any("stty" in word for word in command):
                # asked at once, before kubectl's first size (sent as the stream opens) is read
                with contextlib.suppress(TimeoutError):
                    terminal.resized(*await asyncio.wait_for(session.resizes.get(), FIRST_SIZE_WAIT))
        async with _following(session, terminal):
            return await self._exec(container, command, session, terminal)

    async def _exec(self, container: str, command: list[str], session: StreamSession,
                    terminal: Terminal | None) -> int:
        declared = self._annotations().get(EXEC_PREFIX + os.path.basename(command[0]))
        await self._machine(container, declared is None)
        exec_id = hashlib.sha256(f"{self.worker.uid}/{container}/{command}".encode()).hexdigest()
        shell = os.path.basename(command[0])
        if declared is None and shell in SHELLS and not has_program(self._spec(container).get("image", ""), shell):
            raise executable_not_found(exec_id, command[0])  # `bash` in busybox: runc cannot start it
        if declared is None and reads_stdin(command, ""):
            return await self._exec_shell(session, container, terminal)
        if declared is None and session.stdin and not session.tty and (stream := filter_of(command)):
            return await self._exec_stream(stream, session)
        if declared is None:
            sent: list[bytes] = []
            if session.stdin and wants_stdin(command):  # `tar xmf -`: all it is sent, to its end
                while data := await session.read_stdin():
                    sent.append(data)
            stdin = b"".join(sent)
            await self._network(" ".join(command), container)
            program = interpret(command, self.worker.clock.now(), lambda: self.draft(container, fresh=False), stdin,
                                await self._exec_environment(container, session), terminal, not_found=True)
            if program is not None:
                return await self._exec_program(program, session, container, " ".join(command))
            if shell in SHELLS and len(command) >= 2:  # (`sh -c SCRIPT`, `sh FILE`)
                # the shell is in the image (above); its script is past what the simulation runs (`$$`, arrays): it
                # says so, as a line typed at its interactive shell does, not that there is no shell
                text = f"{shell}: nanokube's simulated shell cannot run this script\n".encode()
                await (session.write_stderr if session.stderr and not session.tty else session.write_stdout)(text)
                return 2
        if declared is None:
            raise executable_not_found(exec_id, command[0])
        out = {"stdout": declared}
        if declared.lstrip().startswith("{"):
            try:
                out = json.loads(declared)
            except ValueError:
                pass
        newline = "\r\n" if session.tty else "\n"  # a terminal's line discipline (onlcr)
        if out.get("stdout") and session.stdout:
            await session.write_stdout(str(out["stdout"]).replace("\n", newline).encode())
        if out.get("stderr"):
            write = session.write_stderr if session.stderr and not session.tty else session.write_stdout
            await write(str(out["stderr"]).replace("\n", newline).encode())
        return int(out.get("exitCode", 0) or 0)

    async def _exec_program(self, program: Program, session: StreamSession, container: str, text: str) -> int:
        """An interpreted command exec'd in the container: what it writes and changes in the
        container's files, when it does on the node's clock, and its exit code once it ends. One
        waiting in a loop for its files (`Wait`) reads them again at each pass, until it goes on, and
        the cluster's network where its command line `text` asks (`until nslookup svc`)."""
        clock = self.worker.clock
        start = clock.monotonic()
        while True:
            for when, stream, written in program.timeline():
                await clock.sleep(max(start + when - clock.monotonic(), 0.0))
                if stream == PASS:
                    continue
                if stream == "files":
                    self.files(container).replay([written])
                    continue
                data = written if isinstance(written, bytes) else written.encode()
                if session.tty:  # the terminal's line discipline (onlcr)
                    data = data.replace(b"\n", b"\r\n")
                if stream == "stdout" and session.stdout:
                    await session.write_stdout(data)
                elif stream == "stderr" and (session.stderr or session.tty):
                    await (session.write_stdout if session.tty else session.write_stderr)(data)
            if program.wait is None:
                break
            await clock.sleep(max(start + program.wait.at - clock.monotonic(), 0.0))
            start = clock.monotonic()
            await self._network(text, container)
            later = program.wait.resume(self.draft(container, fresh=False), clock.now())
            if later is None:
                break
            program = later
        if math.isinf(program.seconds):  # until the client ends the session
            await asyncio.Event().wait()
        await clock.sleep(max(start + program.seconds - clock.monotonic(), 0.0))
        return program.exit_code

    async def _exec_stream(self, stream: Filter, session: StreamSession) -> int:
        """A filter exec'd on what the client sends (`kubectl exec -i pod -- grep x`): what it writes
        of each piece as the piece comes, until it is done or the client's stdin ends."""
        async def write(data: bytes) -> None:
            if data and session.stdout:
                await session.write_stdout(data)
        while not stream.done and (data := await session.read_stdin()):
            await write(stream.feed(data))
        out, code = stream.end()
        await write(out)
        return code

    async def _exec_shell(self, session: StreamSession, container: str, terminal: Terminal | None) -> int:
        """`sh` exec'd without a command: it runs each line of its stdin (simulated_command.Shell) until
        `exit` or EOF (^D on a terminal). On a terminal it prompts as busybox's does for root (`/ # `)
        and the terminal echoes what is typed, Enter as a new line."""
        tty = session.tty

        async def write(stream: str, text: str | bytes) -> None:
            data = text if isinstance(text, bytes) else text.encode()
            if tty:  # one stream
                stream = "stdout"
            if stream == "stdout" and session.stdout:
                await session.write_stdout(data)
            elif stream == "stderr" and session.stderr:
                await session.write_stderr(data)

        async def read() -> bytes:
            return await session.read_stdin() if session.stdin else b""
        shell = Shell(lambda: self.files(container), self._workdir(container),
                      await self._exec_environment(container, session), terminal)
        return await self._shell(container, shell, read, write, tty, prompt=True)

    async def _network(self, text: str, container: str) -> None:
        """The cluster's network, for the command `text` about to be worked out in `container`, where
        it runs `wget`, `curl`, `nslookup`, `getent`, `ping` or `nc` (simulated_net)."""
        if simulated_net.names_network(text):
            image = self._spec(container).get("image", "")
            simulated_net.NETWORK.set(await simulated_net.view(self.worker, text, image))

    async def _exec_environment(self, container: str, session: StreamSession) -> dict[str, str]:
        """What an exec'd command's environment is: the container's, and TERM on a terminal (containerd's exec)."""
        env = await self._environment_made(container)
        return {**env, "TERM": "xterm"} if session.tty else env

    async def _shell(self, container: str, shell: Shell, read, write, tty: bool, prompt: bool) -> int | None:
        """Run the lines `read()` gives (b"" at EOF; None: no more, stdin left open) through `shell`
        (in `container`),
        writing with `write(stream, text)`, until `exit` or EOF (^D on a terminal): the shell's exit
        status, None if stdin was left open. On a terminal it prompts as busybox's does for root
        (`/ # `; `prompt`: before the first line too), echoes what is typed, and writes CR LF."""
        clock = self.worker.clock

        async def out(stream: str, text: str | bytes) -> None:
            if tty:
                text = text.replace(b"\n", b"\r\n") if isinstance(text, bytes) else text.replace("\n", "\r\n")
            await write(stream, text)

        pending, eof = b"", False
        while True:
            if tty and prompt:
                await out("stdout", shell.prompt())
            prompt = True
            while not eof and not _LINE_END.search(pending):
                data = await read()
                if data is None:
                    return None
                eof = not data
                if tty and data:
                    data, ctrl_d, _ = data.partition(b"\x04")
                    eof = bool(ctrl_d) and not (pending + data).strip()
                    await out("stdout", data.replace(b"\r", b"\n").decode(errors="replace"))
                pending += data
            end = _LINE_END.search(pending)
            if end is None and not pending.strip():
                for _, stream, text in shell.close(clock.now()).output:  # its EXIT trap, at once
                    await out(stream, text)
                return shell.status
            line, pending = (pending[:end.start()], pending[end.end():]) if end else (pending, b"")
            start = clock.monotonic()
            await self._network(line.decode(errors="replace"), container)
            step = shell.line(line.decode(errors="replace"), clock.now())
            while True:
                for when, stream, text in step.output:
                    await clock.sleep(max(start + when - clock.monotonic(), 0.0))
                    if stream != PASS:
                        await out(stream, text)
                if step.wait is None:
                    break
                # a loop waiting for its files reads them again at its next pass, as a container's does
                start += step.wait.at
                await clock.sleep(max(start - clock.monotonic(), 0.0))
                await self._network(line.decode(errors="replace"), container)
                step = shell.resume(step.wait, clock.now())
            if math.isinf(step.seconds):  # until the client ends the session
                await asyncio.Event().wait()
            await clock.sleep(max(start + step.seconds - clock.monotonic(), 0.0))
            if step.exited:
                return shell.status

    async def attach(self, container: str, session: StreamSession) -> int | None:
        """Join the container's output (and its stdin); a shell on a terminal is sized as the client says."""
        log = self._running(container)
        written = log.attach()
        if written is None:
            return self.exit_codes.get(container)
        spec = self._spec(container)
        shell = self.shells.get(container)
        if shell is not None:  # the lines it is sent are worked out in the reader's task
            await self._machine(container)
        reader = None
        async with _following(session, shell.terminal if shell is not None and session.tty else None):
            if session.stdin and spec.get("stdin"):
                reader = asyncio.ensure_future(self._read_stdin(container, log, session, bool(spec.get("tty")),
                                                                bool(spec.get("stdinOnce"))))
            try:
                async for stream, data in written:
                    if stream == "stderr" and session.stderr and not session.tty:
                        await session.write_stderr(data)
                    else:
                        await session.write_stdout(data)
            finally:
                if reader is not None:
                    reader.cancel()
        return self.exit_codes.get(container)  # the log closes when the instance exits, its code recorded

    async def _read_stdin(self, container: str, log: ContainerLog, session: StreamSession, tty: bool, once: bool) -> None:
        """The container reading what the client sends until EOF: the client closing its stdin
        (with `stdinOnce`), or ^D on a terminal. A shell runs what it reads, and may end at `exit`."""
        if shell := self.shells.get(container):
            async def read() -> bytes | None:
                data = await session.read_stdin()
                return data if data or once else None

            async def write(stream: str, text: str | bytes) -> None:
                if not log.closed:
                    log.append(self.worker.clock.now(), stream, text if isinstance(text, bytes) else text.encode())
            code = await self._shell(container, shell, read, write, tty, prompt=False)
            if code is None:
                return
            if container in self.ephemeral:
                self.end_ephemeral(container, code)
                return
            self.stdin_status[container] = code
            self.stdin_closed.add(container)
            self.worker.changed.set()
            return
        stream, script = self.streams.get(container), self.scripts.get(container)

        def written(data: bytes) -> None:
            if data and not log.closed:
                log.append(self.worker.clock.now(), "stdout", data.replace(b"\n", b"\r\n") if tty else data)
        while data := await session.read_stdin():
            eof = b""
            if tty:
                data, eof, _ = data.partition(b"\x04")
                written(data.replace(b"\r", b"\n"))  # the terminal's echo, Enter as a new line
                data = data.replace(b"\r", b"\n")
            if stream is not None and data:
                written(stream.feed(data))
                if stream.done:
                    break
            if script is not None and data and self.scripts.get(container) is script:
                script.data += data
                if not script.to_eof:  # (one reading to the EOF writes nothing more before it)
                    self._stdin_read(container, script)
            if eof:
                break
        else:
            if not once:
                return
        if container in self.programs:  # an interpreted command does not read its stdin
            return
        if script is not None:
            self._stdin_ended(container, script)
            return
        if stream is not None:
            out, self.stdin_status[container] = stream.end()
            written(out)
        self.stdin_closed.add(container)
        self.worker.changed.set()

    def listens(self, port: int) -> bool:
        """Whether the pod's simulated servers answer on TCP `port` (simulated_net.answers)."""
        return simulated_net.answers(self.worker.pod.get("spec") or {}, self.running, port)

    async def port_forward(self, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A connection to `port` in the pod, as a real runtime dials localhost in its network
        namespace: the simulated server where one `listens`, containerd's refusal elsewhere."""
        if not self.listens(port):
            netns = f"/var/run/netns/cni-{self.worker.uid}"
            raise StreamFailed(f'failed to execute portforward in network namespace "{netns}": failed to connect to '
                               f'localhost:{port} inside namespace "{sandbox_id(self.worker.uid)}", IPv4: dial tcp4 '
                               f"127.0.0.1:{port}: connect: connection refused IPv6 dial tcp6: address localhost: "
                               f"no suitable address found ")
        ours, theirs = socket.socketpair()
        asyncio.ensure_future(self._listener(theirs, port))
        return await asyncio.open_connection(sock=ours)

    async def _listener(self, sock: socket.socket, port: int) -> None:
        """The simulated server behind a port: HTTP gets a one-line answer; a TLS ClientHello the
        400 Go's net/http sends when what it read is no HTTP request (a plain-HTTP server, as the
        hooks' HTTPS falls back to), the connection then closed; anything else is echoed."""
        reader, writer = await asyncio.open_connection(sock=sock)
        try:
            first = await reader.read(65536)
            if first.split(b" ", 1)[0] in (b"GET", b"HEAD", b"POST", b"PUT", b"DELETE", b"PATCH", b"OPTIONS"):
                while b"\r\n\r\n" not in first and (more := await reader.read(65536)):
                    first += more
                writer.write(simulated_net.response(self.worker.namespace, self.worker.name, port,
                                                    head=first.startswith(b"HEAD")))
            elif first[:2] == b"\x16\x03":  # a TLS handshake record
                writer.write(BAD_REQUEST)
            else:
                data = first
                while data:
                    writer.write(data)
                    await writer.drain()
                    data = await reader.read(65536)
            await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()


@contextlib.asynccontextmanager
async def _following(session: StreamSession, terminal: Terminal | None):
    """While in it, each size the client sends on the resize channel is `terminal`'s."""
    async def follow() -> None:
        while True:
            terminal.resized(*await session.resizes.get())
    task = asyncio.ensure_future(follow()) if terminal is not None else None
    try:
        yield
    finally:
        if task is not None:
            task.cancel()


@dataclass
class _StdinScript:
    """A `sh -c` script reading its container's stdin: its command, when it started (the node's wall
    clock, and monotonic) and what it has been sent."""

    argv: list[str]
    started: float
    began: float
    data: bytearray = field(default_factory=bytearray)
    #: how many of its writes are written (`written_so_far`'s), the task writing the next, due later,
    #: and whether it waits for the EOF (`cat`: what more comes changes nothing before it)
    shown: int = 0
    timer: asyncio.Future | None = None
    to_eof: bool = False


def _remaining(pending: _Writes | None) -> Iterator[tuple[float, str, object]]:
    """What `pending` has still to write (monotonic times)."""
    while pending is not None and pending.due is not None:
        yield pending.pop()


class _Writes:
    """What a container writes later, in time order ((monotonic time, stream, text)), taken as it
    comes due: an endless loop's writes are worked out only then."""

    def __init__(self, writes: Iterator[tuple[float, str, object]]):
        self._writes = writes
        self._next = next(writes, None)

    @property
    def due(self) -> float | None:
        """When the next write is due; None when there is none."""
        return None if self._next is None else self._next[0]

    def pop(self) -> tuple[float, str, object]:
        write, self._next = self._next, next(self._writes, None)
        return write


def _scheduled(raw: str) -> tuple[float | None, str]:
    """`@5s text` -> (5.0, "text"); any other line is printed at start."""
    if raw.startswith("@"):
        when, _, text = raw[1:].partition(" ")
        try:
            return float(when.rstrip("s")), text
        except ValueError:
            pass
    return None, raw
