"""The few commands a simulated container interprets, so that what people type
first ends as it would on a real node.

The simulated runtime runs no processes: a container lives as long as its
pod's annotations say (lifecycle.py), by default forever. Yet `kubectl create
job hello --image=busybox -- echo hi` should complete, print `hi` in its log
and exit 0, and `-- sh -c 'sleep 2; exit 3'` fail with 3 two seconds later on
the node's clock. So a container's command (its `command` then its `args`) is
read as one of a small, closed set; anything else is left to the annotations
(`interpret` returns None), as before:

- `true`, `false`, `:`, `echo [-neE] WORD...` (escapes with -e, as busybox's echo),
  `sleep N...` (seconds, summed; a suffix s, m, h or d as busybox's; `inf`
  or `infinity`, and `tail -f /dev/null`, run until stopped), `date [-u]
  [+FORMAT]` (the node's clock, in UTC, as busybox prints it: the CronJob
  docs' `date; echo Hello from the Kubernetes cluster`), each by name or path;
- `sh -c SCRIPT [NAME ARG...]` (also ash, bash, dash; by name or path):
  SCRIPT is a shell script (simulated_script: its syntax) of those and the
  shell's builtins (simulated_builtins: `exit [N]`, `exec CMD`, `export`, `unset`, `break`,
  `continue`, `return`, `local`, `read [-r]`, `set` (-e, -x, -u, -o pipefail, `--`), `trap`
  (EXIT's action runs as the shell ends), `printf`, and `env`, `printenv [NAME...]`, `xargs`),
  `seq`, `basename` and `dirname`: commands joined by `;`, `&&`, `||`, `|`
  (each command's output the next one's stdin, one after the other) or new
  lines, in `while`/`until`/`for` loops, `if`/`elif`/`else`, `case`, `{ }` and
  functions (`NAME() { ...; }`); its words quoted as a shell quotes them, and
  expanded: `$NAME`, `${NAME:-x}`, `${NAME%pattern}` (`%%`, `#`, `##`), `${#NAME}`,
  `$?`, `$1`, `$RANDOM` (seeded by the pod, the command and its start on the
  node's clock: a replayed simulation draws the same numbers), `$((arithmetic))`,
  `$(command)`, split at blanks unless quoted.
  Its variables start as the container's environment (container_env, given
  as `env`). A loop that starts a pass as an earlier pass did, with no change
  to its files since (`while true; do echo step; sleep 5; done`), repeats
  those passes forever: each is worked out when its time comes
  (`Program.repeat`), so it logs on the node's clock until the container is
  stopped. A loop that cannot end (`while true` with no break, exit or set
  in it) whose passes differ (a step counter, a file it adds to) is worked
  out ahead for `LAZY_AFTER` passes, then as its passes come (`Endless`).
  One that may end, starting a top-level list, and repeats itself having
  read the files (`until [ -f /work/ready ]; do sleep 1; done`) waits
  (`Program.wait`): its owner runs it again at each later pass on the files
  as they are then (another container or an exec may make the file), and
  what follows once it ends.
  A script with a glob outside case's patterns, `~`, a backquote, a
  background job that changes the shell or writes after its start (`sleep N &`, `tail -f
  /dev/null &` are jobs; `$!` the last one's PID, for `wait PID`), a subshell, a descriptor past stderr's redirection,
  another command, or a loop that may end but neither ends nor repeats
  itself within `BUDGET` commands is not interpreted at all.

Where the container's files are given (`fs`, simulated_fs: what exec and an
interactive shell see), the commands `kubectl cp` and people use on files
run too, as busybox's do (simulated_applets): `cat`, `ls [-1aAl]`, `mkdir [-p]`, `rm [-rf]`,
`touch`, `test`/`[` (-e -f -d -s -L -n -z, =, !=, -eq and the integer comparisons, !), `tar` (c, x, t; `f -`
for stdin or stdout, `-C DIR`; real archives, through tarfile), `wc`,
`md5sum`, `sha256sum`, `tee [-a]`, `cp [-rap]`, `mv`, `ln -s [-fn]`, `head`/`tail` (-n, -c, tail's +N: `kubectl cp
--retries` resumes with `tar cf - SRC | tail -c+N`), `hostname`, `readlink [-f]`, `stat -c`,
`timeout SECONDS PROGRAM`, `dd` (if=, of=, bs=, count=,
status=) and `fallocate [-o N] -l N` (zeros that take no memory, to fill a volume or the
writable layer up to its storage limits), the
filters `tr`, `grep`, `sed`, `awk` and `cut` in the forms people type
(simulated_filters), and a script's `>`, `>>`, `<` and `2>&1`-like
redirections, of simple and compound commands (`done > log`). A command reading
stdin gets what the exec client sent (read to its end first; a filter
alone, `kubectl exec -i pod -- grep x`, answers each line as it comes:
simulated_io); a `stdin: true` container's script is given its stdin as it comes
(`written_so_far`: all before a read that waits for more), whole at EOF. A container's own command runs them on a draft
of its files (simulated_fs.PodFiles.draft), as does exec's; the changes are
made, as the output is written, when their time comes on the node's clock
(`sleep 5; touch /tmp/ready` makes the file 5 s later, and not at all if
the container is stopped before). Without files these commands are not interpreted.
`nslookup`, `getent hosts`, `wget`, `curl`, `ping -c N` and `nc` reach the cluster's Services and
pods as simulated_net works them out (where the runtime gave it the cluster's network), read
when each runs: a command reaching it is worked out no earlier than its time, so a run that
reaches one of the script's top-level lists naming one after time has passed (`sleep 5; wget
web`) waits there (`Wait`, `_Run.defers`), and an endless loop's later passes are each worked out
as they come (`PASS`); so does a pass of a loop that ends (a `for`, a counted `while`) starting
a top-level list, once time has passed in it (`_Run._pass_defers`).
`id`, `whoami`, `uname` and `ps` answer for the container's security context, the simulated
node and the pod's containers (simulated_identity); `nvidia-smi` for the GPUs the container was
given (simulated_gpu); `nproc`, `free`, `df` and `du` for its node's machine (simulated_system).

It is not a whole shell: no other command is recognised. A shell started
without `-c` (`kubectl exec -it pod -- sh`) reads its stdin line by line
(`Shell`): each line runs as such a script (one that leaves a command
unfinished waits for the next, prompting `> `), and a command not
interpreted answers as busybox's sh does for one not in the image (`sh: X:
not found`, status 127), so the session goes on.
"""

from __future__ import annotations

import ast
import itertools
import math
import os
import posixpath
import random
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone

from . import simulated_filters as filters
from . import simulated_find as find
from . import simulated_gpu as gpu
from . import simulated_identity as identity
from . import simulated_limits as limits
from . import simulated_net as net
from . import simulated_system as system
from .simulated_applets import APPLETS, TERMINAL_APPLETS, WRITE_BUDGET, Terminal, reads_data
from .simulated_applets import NoTerminal as _NoTerminal, NotFound as _NotFound, Unknown as _Unknown
from .simulated_builtins import (BUILTINS, DEFAULT_IFS, SHELL_ONLY, SHELLS, TERMINAL as _TERMINAL, Exit as _Exit,
                                 Jump as _Jump, Open, Replaced, Return, split_fields)
from .simulated_fs import NOT_FOUND, ContainerFS, Dir, File, FsError, NoSpace
from .simulated_script import (PATTERN_OPS, Background, Case, For, Function, Group, If, Incomplete, Loop, Pipeline, Redirected,
                               Simple, Script, Word, expansions, literal, parse)

#: images whose default command is a shell (`kubectl debug -it pod --image=busybox` runs it)
SHELL_IMAGES = frozenset({"busybox", "alpine", "ubuntu", "debian"})
_PYTHON = frozenset({"python", "python3"})
#: the shells and interpreters the images people exec into lack, by repository: busybox's and
#: alpine's sh is busybox's ash (no bash, no dash), the distributions' is dash (bash beside it, no
#: ash), and none has python; a distroless image has no shell at all but in its `debug` tags
#: (busybox's), python3 only in distroless/python3. An image not named here (python, a CUDA
#: image) has them.
_LACKING = {"busybox": frozenset({"bash", "dash", *_PYTHON}), "alpine": frozenset({"bash", "dash", *_PYTHON}),
            "ubuntu": frozenset({"ash", *_PYTHON}), "debian": frozenset({"ash", *_PYTHON})}
_SLEEP = re.compile(r"(\d+(?:\.\d*)?|\.\d+)([smhd]?)")
#: the globs in an unquoted expansion's value (the lexer's, in a word's text): they match filenames too
_GLOBS = re.compile(r"[*?]|\[!?\]?[^\s\]]*\]")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
#: the builtins a background job may run (`_job`): they only write, changing nothing of the shell
_WRITERS = frozenset({"echo", "printf", "true", "false", ":"})
#: how many passes of a loop that cannot end, each different, are worked out ahead (`Endless`)
LAZY_AFTER = 50
#: the mark a loop's later passes give, at its time, before each is worked out where the command
#: reaches the cluster's network (`paced`): its reader waits for it before asking for the pass,
#: which so sees the cluster as it is then (a Service made since, endpoints ready since)
PASS = "pass"
#: where a descriptor's output goes, unredirected
_STDOUT, _STDERR = "\0stdout", "\0stderr"
#: how many simple commands one run interprets at most: a loop that has not ended (nor repeated
#: itself, see `_Run.loop`) by then leaves the command uninterpreted
BUDGET = 10000
#: how often a loop waiting for its files with no time passing in its passes (`until [ -f F ]; do
#: :; done`) reads them again, on the node's clock: a real one spins, reading them all the time
BUSY_WAIT = 1.0


def paced() -> bool:
    """Whether the command running reaches the cluster's network (simulated_net): its loops' later
    passes are each worked out at their time (`PASS`), never ahead."""
    return net.NETWORK.get() is not None


@dataclass(frozen=True)
class Repeat:
    """An endless loop's iterations, the first at `start` (seconds after the program started),
    one each `period`: each is worked out when it is reached (`iteration(at)`: what it writes,
    (when, stream, text); None where it ends), so an endless loop costs nothing before its time
    comes. A `paced` one marks each iteration's start (`PASS`) before working it out, and goes on
    through iterations that write nothing (a wget that fails quietly, until its Service comes)."""

    start: float
    period: float
    iteration: Callable[[float], list[tuple[float, str, str | bytes]] | None]
    paced: bool = False

    def timeline(self) -> Iterator[tuple[float, str, object]]:
        for n in itertools.count():
            at = self.start + n * self.period
            if self.paced:
                yield at, PASS, None
            written = self.iteration(at)
            if written is None or not written and not self.paced:
                return
            yield from written

    def writes(self) -> Iterator[tuple[float, str, str | bytes]]:
        return (e for e in self.timeline() if e[1] != PASS)


class Endless:
    """A loop that cannot end (`while true` with no break, exit or set in it) whose passes do not
    repeat one another (a counter, a file it adds to): its passes from where it is now are run
    when asked for, `CHUNK` at a time, each chunk on the state the last one left, so that it costs
    nothing before its time comes. Passes that take no time (a flood) end what it writes."""

    CHUNK = 50

    def __init__(self, run: _Run, node: Loop):
        self.node, self.started, self.fs, self.stdin = node, run.started, run.fs, run.stdin
        self.terminal = run.terminal
        self.state = (run.status, run.snapshot(), run.now)
        #: one pass at a time, each marked (`PASS`), where it reaches the network
        self.paced = paced()

    def timeline(self) -> Iterator[tuple[float, str, object]]:
        fs, stdin = self.fs, self.stdin
        status, shell, at = self.state
        while True:
            if self.paced:
                yield at, PASS, None
            run = _Run(self.started, status, fs=fs, stdin=stdin, terminal=self.terminal)
            run.restore(shell)
            run.now, run.loops = at, 1
            mark = run._journal()
            try:
                for _ in range(1 if self.paced else self.CHUNK):
                    run._condition(self.node.cond)
                    run.script(self.node.body)
                done = run.now <= at
            except (_Unknown, _Exit, _Jump, _Forever, _Aborted, RecursionError):
                done = True
            journal = run.fs.journal[mark:] if isinstance(run.fs, ContainerFS) and run.fs.journal else []
            changes = [(t - self.started, change, a, kw) for t, change, a, kw in journal]
            if journal:
                del run.fs.journal[mark:]  # given: not kept for the container's lifetime
            yield from sorted([*((c[0], "files", c) for c in changes), *run.program().writes()], key=lambda e: e[0])
            if done:
                return
            fs, stdin, status, shell, at = run.fs, run.stdin, run.status, run.snapshot(), run.now

    def writes(self) -> Iterator[tuple[float, str, str | bytes]]:
        return (e for e in self.timeline() if e[1] not in ("files", PASS))


@dataclass(frozen=True)
class Program:
    """How an interpreted command runs: what it writes to stdout and when (seconds after it
    started), how long it takes (math.inf: until it is stopped), and its exit code; what it
    writes to stderr ((its place among `output`, when, text)); and, worked out on a draft of the
    container's files, the changes it makes to them ((when, change, its arguments)), made when
    their time comes. One that loops forever writes, after `output`, what `repeat` gives."""

    output: tuple[tuple[float, str | bytes], ...]
    seconds: float
    exit_code: int
    errors: tuple[tuple[int, float, str], ...] = ()
    changes: tuple = field(default=(), compare=False)
    repeat: Repeat | Endless | None = field(default=None, compare=False)
    wait: Wait | None = field(default=None, compare=False)
    #: where the script traps TERM: how it runs when the signal comes `at` seconds after it started
    #: (`signalled(at, fs)`, on the files given), None where that is not worked out
    signalled: Callable[[float, Files], Program | None] | None = field(default=None, compare=False)
    #: where it is what `signalled` gave: how many of its writes and changes came before its TERM trap ran
    taken: tuple[int, int] | None = field(default=None, compare=False)

    def writes(self) -> list[tuple[float, str, str | bytes]]:
        """Everything written before any endless repetition, in order: (when, "stdout" or "stderr", text)."""
        out: list[tuple[float, str, str | bytes]] = [(t, "stdout", x) for t, x in self.output]
        for place, t, x in reversed(self.errors):
            out.insert(place, (t, "stderr", x))
        return out

    def timeline(self, signalled: float | None = None) -> Iterator[tuple[float, str, object]]:
        """What it writes and the changes it makes to its files, in order: (when, "stdout",
        "stderr" or "files", the text or the change); a change comes before what is written then.
        Endless where the program repeats itself forever. With `signalled` (seconds in: the SIGTERM
        that `Program.signalled` worked this program out for), only what is still to come then:
        what comes later, and what its TERM trap does at that instant (where the command running as
        the signal came ends then), which the program it replaces never did."""
        writes, changes = self.writes(), [(c[0], "files", c) for c in self.changes]
        if signalled is not None:
            before_writes, before_changes = self.taken or (len(writes), len(changes))
            writes = [e for i, e in enumerate(writes) if e[0] > signalled or i >= before_writes]
            changes = [e for i, e in enumerate(changes) if e[0] > signalled or i >= before_changes]
        yield from sorted([*changes, *writes], key=lambda e: e[0])
        if self.repeat is not None:
            yield from (e for e in self.repeat.timeline() if signalled is None or e[0] > signalled)


#: the container's files, or what gives them when a command first needs them
Files = ContainerFS | Callable[[], ContainerFS] | None


@dataclass(frozen=True)
class Wait:
    """A script waiting in a loop that reads its files (`until [ -f /work/ready ]; do sleep 1;
    done`), its passes repeating themselves on the files it was worked out on: another container
    or an exec may make what it waits for. At `at` (seconds after the program started), and each
    `period` after while it still waits, its owner runs `resume(fs, now)`: the rest of the script
    from that pass on, on the container's files as they are then (`fs`), started at `now` (the
    node's wall clock). It gives the program from there (itself waiting again where the file is
    still missing), or None where what follows is not interpreted (the container runs on).
    `go_on` gives the run itself (a Shell keeps its variables and status)."""

    at: float
    period: float
    go_on: Callable[..., _Run | None]

    def resume(self, fs: ContainerFS, now: float) -> Program | None:
        """The program from this pass on; where the script traps TERM, with how it runs when the
        signal comes during it (`Program.signalled`, worked out from the pass as the start's is)."""
        later = self.go_on(fs, now)
        if later is None:
            return None
        program = later.program()
        if "TERM" not in later.trapped:
            return program

        def signalled(at: float, files: Files) -> Program | None:
            files = files() if callable(files) else files
            again = None if files is None else self.go_on(files, now, at)
            return None if again is None else again.program()
        return replace(program, signalled=signalled)


def interpret(argv: list[str], now: float = 0.0, fs: Files = None, stdin: bytes | None = b"",
              env: dict[str, str] | None = None, terminal: Terminal | None = None,
              not_found: bool = False) -> Program | None:
    """The program `argv` runs when it starts at `now` (the node's wall clock, epoch seconds) with
    the environment `env`, or None when it is not one of the commands interpreted here. With `fs`
    (the container's files) the file commands run too, reading `stdin` (None: what is still to
    come, a `stdin: true` container's; one that reads it is not worked out ahead). `terminal`: the
    one it runs on (`tty`, `stty size`), None for none. `not_found`: a `sh -c` script's command
    not interpreted is not found, as at an interactive shell (an exec's: `sh -c 'ip addr; echo
    x'` says `sh: ip: not found` and goes on), instead of leaving the script uninterpreted (a
    container's own: `sh -c 'python train.py'` runs on)."""
    if not argv:
        return None
    try:
        if os.path.basename(argv[0]) in SHELLS:
            shell, called = os.path.basename(argv[0]), invocation(argv)
            if called is None and len(argv) == 1 and stdin is not None:  # `sh` reading its script from stdin
                called = set(), stdin.decode(errors="replace"), argv[:1]
            if called is None or called[1] is None and fs is None:  # (`sh FILE` reads the container's files)
                return None
            options, seed, args = called

            def started(files: Files, signal: float | None = None) -> _Run:
                run = _Run(now, fs=files, stdin=stdin, env=env, args=args, seed=seed or args[0], terminal=terminal,
                           not_found=not_found, shell=shell)
                run.signal, run.options = signal, set(options)
                script = parse(seed) if seed is not None else run.script_file(args[0], shell)
                return _execute(script or [], run)
            run = started(fs)
            if "TERM" not in run.trapped:
                return run.program()

            def signalled(at: float, files: Files) -> Program | None:
                try:
                    return started(files, at).program()
                except _Unknown:
                    return None
            return replace(run.program(), signalled=signalled)
        run = _Run(now, fs=fs, stdin=stdin, env=env, seed=" ".join(argv), terminal=terminal)
        try:
            run.command(argv, in_shell=False)
        except _Forever:  # (`nvidia-smi dmon`: its later writes are `repeat`'s)
            pass
        return run.program()
    except _Unknown:
        return None


def _interpreted(argv: list[str]) -> bool:
    """Whether `argv` is a command interpreted here, its files aside (simulated_net.interprets: what a
    container running it listens on is then known)."""
    return interpret(argv) is not None


net.interprets = _interpreted


def written_so_far(argv: list[str], now: float, fs: Files, stdin: bytes, env: dict[str, str] | None = None,
                   terminal: Terminal | None = None) -> tuple[list[tuple[float, str, str | bytes]], bool] | None:
    """What the `sh -c` script `argv`, started at `now`, has written (when, "stdout" or "stderr",
    text) while its stdin, still open, has held `stdin`: all before the read that waits for more
    (`read` with no whole line left, `cat` before its EOF), or before the top-level list holding
    it where what it reads goes into a pipe or `$(...)`; and whether that read waits for the EOF
    (`cat`, `wc`: more data changes nothing before it). None where it does not wait (it ends
    first: its program is `interpret`'s on that stdin); nothing, waiting for the EOF, where it is
    not worked out so (the network read later, a loop waiting for its files: all is worked out
    at EOF). Changes to its files are made once it is worked out whole."""
    options, script, args = invocation(argv) or (set(), None, [])
    if script is None:
        return [], True
    run = _Run(now, fs=fs, stdin=Open(stdin), env=env, args=args, seed=script, terminal=terminal,
               shell=os.path.basename(argv[0]))
    run.options = set(options)
    marks = 0, 0
    try:
        for and_or in parse(script):
            marks = len(run.output), len(run.errors)
            run.script([and_or])
    except _NoTerminal:
        if run.captured_read:
            del run.output[marks[0]:], run.errors[marks[1]:]
        return run.program().writes(), run.reads_to_eof
    except (_Exit, _Forever, _Jump):
        return None
    except (_Unknown, _Waiting, _Aborted, RecursionError):
        return [], True
    return None


def invocation(argv: list[str]) -> tuple[set[str], str | None, list[str]] | None:
    """What a shell's command line asks of it (`sh -c SCRIPT [NAME ARG...]`, `sh FILE [ARG...]`, after
    options: `-e`, `-u`, `-x`, `-o pipefail`, bundled or not, `+` turning one off, `-l` and
    `--login` (no profile is simulated), `--`, and `-c` among them: `bash -ec`, `bash -lc`): its
    options, the `-c` script (None for a file's), and its positional parameters from `$0` (the
    file's path, or NAME, else the shell's own). None for another option, or nothing to run."""
    options: set[str] = set()
    command, i = False, 1
    while i < len(argv) and argv[i][:1] in "-+" and len(argv[i]) > 1 and argv[i] != "--":
        word, i = argv[i], i + 1
        if word == "--login":
            continue
        for letter in word[1:]:
            if letter == "o" and argv[i:i + 1] == ["pipefail"]:
                option, i = "pipefail", i + 1
            elif letter in "eux":
                option = letter
            elif letter in "cl" and word[0] == "-":
                command = command or letter == "c"
                continue
            else:
                return None
            (options.add if word[0] == "-" else options.discard)(option)
    operands = argv[i + (argv[i:i + 1] == ["--"]):]
    if not operands:
        return None
    if command:
        return options, operands[0], operands[1:] or argv[:1]
    return options, None, operands


def image_command(image: str) -> list[str]:
    """The command `image` runs by default where it matters here: a shell image's is `sh` (which,
    with no stdin, exits at once); a CUDA sample's its sample (simulated_gpu)."""
    name = image.split("@")[0].rsplit("/", 1)[-1].split(":")[0]
    return ["sh"] if name in SHELL_IMAGES else gpu.image_command(image)


def reads_stdin(argv: list[str], image: str) -> bool:
    """Whether the container runs a shell reading its commands from stdin: a shell named alone, or no
    command in an image whose default is one."""
    argv = argv or image_command(image)
    return len(argv) == 1 and os.path.basename(argv[0]) in SHELLS


def has_program(image: str, program: str) -> bool:
    """Whether image `image` holds `program`, a shell (sh, ash, bash, dash) or python
    (`_LACKING`); any other, or in an image not known here, it may."""
    repository = net.repository(image)
    if repository.startswith("distroless/"):
        if program in _PYTHON:
            return repository.startswith("distroless/python3") and program == "python3"
        tag = image.split("@")[0].rsplit("/", 1)[-1].partition(":")[2]
        return program not in SHELLS or "debug" in tag and program not in _LACKING["busybox"]
    return program not in _LACKING.get(repository, ())


def outlives_sigterm(argv: list[str], interpreted: bool) -> bool:
    """Whether `argv`, run as its container's first process, runs on past the kubelet's SIGTERM
    (to be killed when the grace period is up): the kernel drops a signal a PID namespace's init
    has no handler for. An `interpreted` command installs none (no command simulated here does),
    unless its script sets a TERM trap that acts; a `sh -c` script that ignores TERM (`trap ''
    TERM`) stays the first process, its commands its children, so it outlives the signal whatever
    it runs. False where a trap may act (its action not worked out) or the program is another's,
    its handlers unknown."""
    if not argv or os.path.basename(argv[0]) not in SHELLS:
        return interpreted
    actions = _term_traps(argv)
    if actions is None or any(a not in ("", "-") for a in actions):
        return False
    return interpreted or "" in actions


def _term_traps(argv: list[str]) -> list[str] | None:
    """The actions a `sh -c` script's `trap`s give TERM, in order; None where that cannot be told
    (no such script, or one that may set a trap no one can see here: `eval`, `.`)."""
    called = invocation(argv) if argv and os.path.basename(argv[0]) in SHELLS else None
    try:
        script = parse(called[1]) if called is not None and called[1] is not None else None
    except _Unknown:
        return None
    if script is None:
        return None
    actions = []
    for command in _simple_commands(script):
        words = [_static(w) for w in command.words]
        if words and words[0] in (None, "eval", ".", "source"):
            return None
        if words and words[0] == "trap" and len(words) > 2 and any(
                (w or "").upper().removeprefix("SIG") in ("TERM", "15") for w in words[2:]):
            actions.append(words[1])
    return actions


def _simple_commands(node) -> Iterator[Simple]:
    """Every simple command of a script (a list of and-or lists) or compound command, at any depth."""
    if isinstance(node, list):
        for and_or in node:
            for _, pipeline in and_or.items if isinstance(and_or, Background) else and_or:
                for command in pipeline.commands:
                    yield from _simple_commands(command)
    elif isinstance(node, Simple):
        yield node
    elif isinstance(node, Redirected):
        yield from _simple_commands(node.node)
    elif isinstance(node, If):
        for cond, body in node.branches:
            yield from _simple_commands(cond)
            yield from _simple_commands(body)
        yield from _simple_commands(node.otherwise or [])
    elif isinstance(node, Case):
        for _, body in node.items:
            yield from _simple_commands(body)
    elif isinstance(node, Loop):
        yield from _simple_commands(node.cond)
        yield from _simple_commands(node.body)
    elif isinstance(node, For | Group | Function):
        yield from _simple_commands(node.body)


def _reaches_network(script: Script, functions: dict[str, object]) -> bool:
    """Whether a command of `script` may reach the cluster's network: one of simulated_net's
    applets, a command named by an expansion, a function running one, or a command substitution
    naming one."""
    called: set[str] = set()

    def reaches(node) -> bool:
        for command in _simple_commands(node):
            words = [w for _, w in command.assigns] + command.words
            if any(part[0] == "cmd" and net.names_network(part[1]) for w in words for part in w):
                return True
            first = _static(command.words[0]) if command.words else ""
            if first in (None, "eval") or os.path.basename(first) in net.NAMES:
                return True
            if first in functions and first not in called:
                called.add(first)
                if reaches(functions[first]):
                    return True
        return False
    return reaches(script)


def _static(word: Word) -> str | None:
    """The word's text where it has no expansion (quoted or not), else None."""
    if all(part[0] == "lit" for part in word):
        return "".join(part[1] for part in word)
    return None


def stream(argv: list[str]) -> filters.Filter | None:
    """The filter `argv` runs on its stdin as it comes (simulated_filters): a filter named alone, or
    a `sh -c` script that is one pipeline of them with plain words (`grep x | tr a b`); None else."""
    if not argv or os.path.basename(argv[0]) not in SHELLS:
        return filters.stream(argv)
    called = invocation(argv)
    try:
        script = parse(called[1]) if called is not None and called[1] is not None and not called[0] else None
    except _Unknown:
        return None
    if not script or len(script) != 1 or len(script[0]) != 1 or script[0][0][1].negate:
        return None
    chain = []
    for node in script[0][0][1].commands:
        if not isinstance(node, Simple) or node.assigns or node.redirects:
            return None
        words = [_plain(w) for w in node.words]
        if None in words:
            return None
        f = filters.stream(words)
        if f is None:
            return None
        chain.append(f)
    return chain[0] if len(chain) == 1 else filters.Chain(chain)


def uses_environment(argv: list[str]) -> bool:
    """Whether the command reads its environment (a `$` anywhere, `env`, `printenv`), or is a
    shell that may (one reading its commands from stdin)."""
    words = " ".join(argv)
    return "$" in words or bool(re.search(r"\b(env|printenv)\b", words)) or len(argv) == 1 and \
        os.path.basename(argv[0]) in SHELLS


def wants_stdin(argv: list[str]) -> bool:
    """Whether the interpreted `argv` reads the data on its stdin (`tar xf -`, `cat`, `sh -c 'cat >
    /f'`): exec reads what the client sends to its end before running it."""
    try:
        if os.path.basename(argv[0]) in SHELLS:
            called = invocation(argv)
            return called is not None and called[1] is not None and _reads(parse(called[1]))
        return reads_data(list(argv)) or filters.reads_stdin(list(argv)) or os.path.basename(argv[0]) == "xargs"
    except (_Unknown, IndexError):
        return False


def _plain(word: tuple) -> str | None:
    """A word's text when nothing in it is expanded, else None."""
    return "".join(p[1] for p in word) if all(p[0] == "lit" for p in word) else None


def _reads(script: Script) -> bool:
    """Whether a command of `script` that stdin reaches reads its data (a pipe feeds the others)."""
    for and_or in script:
        for _, pipeline in and_or:
            node = pipeline.commands[0]
            if isinstance(node, Simple):
                words = [_plain(w) or "" for w in node.words]
                if words and (reads_data(words) or filters.reads_stdin(words) or words[0] in ("read", "xargs")) and \
                        not any(kind.startswith("<") for _, kind, _ in node.redirects):
                    return True
            elif isinstance(node, Redirected):
                if _reads([[(";", Pipeline([node.node]))]]) and not any(k.startswith("<") for _, k, _ in node.redirects):
                    return True
            elif isinstance(node, Loop | Group):
                if _reads(getattr(node, "cond", [])) or _reads(node.body):
                    return True
            elif isinstance(node, For):
                if _reads(node.body):
                    return True
            elif isinstance(node, If):
                if any(_reads(c) or _reads(b) for c, b in node.branches) or _reads(node.otherwise or []):
                    return True
    return False


class _Forever(Exception):
    """The run reached the end of time (`sleep infinity`, an endless loop): nothing after runs."""


class _Aborted(Exception):
    """An interactive shell's line ends at an error of the shell's own (the shell goes on)."""


class _Waiting(Exception):
    """A loop at the script's top level, reading files, repeats itself: the run waits (`Wait`).
    Where it waits in a script a shell of the script runs (`sh wait.sh && echo up`), `frames`
    says how to go on: (the script's lists from the one waiting on, the shell's state, its working
    directory) of the inner shell, then of each shell it goes back to (`_Run._child_shell`)."""

    def __init__(self):
        super().__init__()
        self.frames: list[tuple[Script, tuple, str | None]] = []


def _execute(script: Script, run: _Run) -> _Run:
    """Run `script`'s top-level lists; then, where the run went on from a wait in a shell the
    script ran (`run.outer`), the lists of each shell it goes back to, with that shell's status."""
    while True:
        try:
            i = 0
            while i < len(script):
                run.rest = script[i:]
                if run.now > 0 and run.defers(script[i]):
                    raise _Waiting  # (`sleep 5; wget -qO- web`: the wget sees the cluster 5 s on)
                try:
                    run.script([script[i]])
                    i += 1
                except Replaced as e:  # `exec sh -c SCRIPT`: the new shell's script from its start
                    run.replaced(e)
                    script, i = e.script, 0
                except _Aborted:  # (bash's error: the rest of that line is dropped, the script goes on)
                    if run.interactive:
                        raise
                    end, i = max(_lines(script[i])), i + 1
                    while i < len(script) and min(_lines(script[i])) <= end:
                        i += 1
        except _Waiting as waiting:
            here = waiting.frames or [(run.rest, run.snapshot(), run.fs.cwd)]
            run.wait = Wait(run.now, run.period, _resumption(run, here + run.outer))
            run.now = math.inf
        except _Exit:
            run.exited = True
        except (_Forever, _Jump, _Aborted, Return):  # (Return: a sourced file's, going on after a wait)
            pass
        except RecursionError:  # (a function calling itself without end: a real shell's stack overflows)
            raise _Unknown from None
        if run.wait is not None or math.isinf(run.now) or (script := _back(run)) is None:
            break
    run.rest = []
    if run.wait is None and not math.isinf(run.now) and (run.exited or not run.interactive):
        _on_exit(run)
    return run


def _back(run: _Run) -> Script | None:
    """Where `run`, gone on from a wait in a script its script ran (`run.outer`), goes back to once
    that script ends: the rest of the shell that ran it (its EXIT trap run, that shell's state again,
    the inner one's status kept), or of the shell that sourced it (its own arguments again; after
    an `exit`, which ends that shell too, where that shell goes back to); None where none is left."""
    while run.outer:
        script, shell, cwd = run.outer.pop(0)
        if shell[0] == "source":
            if shell[1] is not None:
                run.args = shell[1]
            if run.exited:
                continue
        else:
            _on_exit(run)
            status, run.exited = run.status, False
            run.restore(shell)
            run.status = status
            if cwd is not None and isinstance(run.fs, ContainerFS):
                run.fs.cwd = cwd
        run.sourcing = _sourced(run.outer)
        return script
    return None


def _sourced(frames: list) -> int:
    """How many sourced files the script a run goes on in is inside (`. FILE`: `return` ends it)."""
    return len(list(itertools.takewhile(lambda frame: frame[1][0] == "source", frames)))


def _lines(and_or: list | Background) -> list[int]:
    """The lines a top-level list's simple commands start on."""
    items = and_or.items if isinstance(and_or, Background) else and_or
    return [c.line for c in _simple_commands([items])] or [0]


def _on_exit(run: _Run) -> None:
    """The shell ends: its EXIT trap runs (once), the shell's status kept unless it exits itself."""
    action = run.traps.pop("EXIT", "")
    if not action:
        return
    status = run.status
    try:
        run.script(parse(action))
    except _Exit:
        return
    except (_Forever, _Jump, _Aborted):
        pass
    run.status = status


def _resumption(run: _Run, frames: list[tuple[Script, tuple, str | None]]) -> Callable[..., _Run | None]:
    """How `run`, waiting in the loop that starts the lists the first of `frames` gives (with the
    shell's state then), goes on later on other files (with SIGTERM coming `signal` seconds in, if
    given), going back to each shell the others say once the one before it ends."""
    (rest, shell, cwd), *outer = frames
    state = run.status, shell, run.stdin, cwd
    interactive, terminal, trapped, not_found = run.interactive, run.terminal, set(run.trapped), run.not_found
    jobs = {pid: (run.started + end, status) for pid, (end, status) in run.jobs.items()}  # (on the node's clock)
    last_job = run.last_job

    def go_on(fs: ContainerFS, now: float, signal: float | None = None) -> _Run | None:
        status, shell, stdin, cwd = state
        later = _Run(now, status, fs=fs, stdin=stdin, interactive=interactive, terminal=terminal, not_found=not_found)
        later.restore(shell)
        later.trapped, later.signal, later.last_job = set(trapped), signal, last_job
        later.jobs = {pid: (end - now, code) for pid, (end, code) in jobs.items()}
        later.outer, later.sourcing = list(outer), _sourced(outer)
        fs.cwd = cwd
        try:
            return _execute(rest, later)
        except _Unknown:
            return None
    return go_on


def _text(chunks) -> str:
    return "".join(x if isinstance(x, str) else x.decode(errors="replace") for _, x in chunks)


class _Run:
    """The state of an interpreted run: the clock (seconds since it started), output, status, the
    shell's variables (those exported: its environment) and arguments, and the container's files
    and what is left of stdin, where given."""

    def __init__(self, started: float, status: int = 0, fs: Files = None,
                 stdin: bytes | None = b"", interactive: bool = False, env: dict[str, str] | None = None,
                 args: list[str] | None = None, seed: str = "", terminal: Terminal | None = None,
                 not_found: bool = False, shell: str = "sh"):
        self.started = started
        #: the shell running (sh, ash, bash, dash): whose wording an error of its own has; the line
        #: of the script the command running starts on
        self.shell, self.line = shell, 1
        self.terminal = terminal
        #: how many captures of stdout the command running is inside (a pipe, `$(...)`, a redirection),
        #: and how many redirections of its stdout or stderr
        self.captured = self.redirected = 0
        #: how many subshells (a pipe's commands, `$(...)`) the command running is inside
        self.subshells = 0
        #: whether the read that waits for stdin still to come is inside one, and reads all to the
        #: EOF (`cat`, not `read`): `written_so_far`
        self.captured_read = self.reads_to_eof = False
        self.now = 0.0
        self.output: list[tuple[float, str | bytes]] = []
        self.written = 0  # bytes written to stdout and stderr: WRITE_BUDGET's
        self.status = status
        self.exited = False
        #: the root an interactive `chroot DIR` entered: the Shell reads its next lines there until `exit`
        self.entered: str | None = None
        self.fs = fs
        self.stdin = stdin
        #: an interactive shell's, reading its terminal
        self.interactive = interactive
        #: a command not interpreted is not found (its message on stderr), as a shell says, instead of
        #: leaving the whole run uninterpreted: at an interactive shell, or where asked (an exec's)
        self.not_found = interactive or not_found
        self.errors: list[tuple[int, float, str]] = []  # (its place in `output`, when, text)
        self.vars: dict[str, str] = dict(env or {})
        self.exported: set[str] = set(self.vars)
        self.vars["IFS"] = DEFAULT_IFS  # (a shell sets it at its start, whatever its environment says)
        self.args = list(args or ["sh"])  # $0, $1...
        self.loops = 0  # how deep in loops the command running is
        self.conditions = 0  # how deep in conditions
        self.options: set[str] = set()  # `set`'s: e, x, u, pipefail
        self.steps = 0
        self.substituted = False  # a command's substitution ran in the words just expanded
        self.repeat: Repeat | None = None
        #: the script's top-level lists from the one running on (a loop starting them may wait: `Wait`),
        #: and, for each shell a script runs (`_child_shell`), whether a wait in its script can go back
        #: to the lists of the shell that ran it (`_resumable`); where the run went on from such a
        #: wait, the shells to go back to as each ends (`_Waiting.frames`)
        self.rest: Script = []
        self.resumable: list[bool] = []
        self.outer: list[tuple[Script, tuple, str | None]] = []
        #: the simple command running, its words expanded
        self.simple_running: Simple | None = None
        self.wait: Wait | None = None
        self.period = 0.0  # how often a waiting loop reads its files again
        #: `$RANDOM`'s numbers: seeded by what runs, where and when (the node's clock), so the same
        #: simulation gives the same ones; how many were drawn (a loop drawing them does not repeat)
        self.random = random.Random(f"{self.vars.get('HOSTNAME', '')}\0{seed}\0{started}")
        self.drawn = 0
        #: the functions defined, by name (their bodies), and, for each call running, the values its
        #: `local` variables had before (None: unset), given back as it returns
        self.functions: dict[str, object] = {}
        self.frames: list[dict[str, str | None]] = []
        self.sourcing = 0  # how many sourced files (`. FILE`) are running: `return` ends the last
        #: `trap`'s actions by condition (EXIT, TERM...): EXIT's runs as the shell ends (`_on_exit`),
        #: TERM's as the signal is taken (`_take_signal`); the conditions ever trapped
        self.traps: dict[str, str] = {}
        self.trapped: set[str] = set()
        #: when SIGTERM comes (seconds since the start), where the run works out what it then does,
        #: whether it was taken, and how much it had written and changed then (`Program.taken`)
        self.signal: float | None = None
        self.signal_taken = False
        self.taken: tuple[int, int] | None = None
        #: when each background job (`sleep N &`) ends, seconds since the start, and its status, by
        #: its PID (kept once waited for: `wait` answers for it again); the last one's PID (`$!`)
        self.jobs: dict[int, tuple[float, int]] = {}
        self.last_job: int | None = None

    def snapshot(self) -> tuple:
        """The shell's state a later run goes on from (`restore`): its variables, positional
        parameters, options, `$RANDOM`'s generator, its functions and traps."""
        return (dict(self.vars), set(self.exported), list(self.args), set(self.options), self.random.getstate(),
                self.drawn, dict(self.functions), dict(self.traps), self.shell)

    def restore(self, snapshot: tuple) -> None:
        variables, exported, args, options, random_state, self.drawn, functions, traps, self.shell = snapshot
        self.vars, self.exported, self.args, self.options = dict(variables), set(exported), list(args), set(options)
        self.random.setstate(random_state)
        self.functions, self.traps = dict(functions), dict(traps)

    def program(self) -> Program:
        journal = self.fs.journal or () if isinstance(self.fs, ContainerFS) else ()
        changes = tuple((t - self.started, *change) for t, *change in journal)
        return Program(tuple(self.output), self.now, self.status, tuple(self.errors), changes, self.repeat,
                       self.wait, taken=self.taken)

    @property
    def out_terminal(self) -> Terminal | None:
        """The terminal stdout is, if it is one (not captured: a pipe, `$(...)`, a file)."""
        return None if self.captured else self.terminal

    def repeats(self, period: float, text: str) -> None:
        """Write `text` to stdout now and each `period` seconds after, until the command is stopped
        (`nvidia-smi dmon` without -c): the run ends here, each later write worked out as its time
        comes (`Repeat`)."""
        self.out(text)
        self.repeat = Repeat(self.now + period, period, lambda at: [(at, "stdout", text)])
        self.now = math.inf
        raise _Forever

    def err(self, text: str) -> None:
        """Write to stderr."""
        self._spend(len(text))
        self.errors.append((len(self.output), self.now, text))

    def out(self, data: str | bytes) -> None:
        """Write to stdout."""
        if data:
            self._spend(len(data))
            self.output.append((self.now, data))

    def _spend(self, size: int) -> None:
        self.written += size
        if self.written > WRITE_BUDGET:
            raise _Unknown

    def defers(self, and_or: list) -> bool:
        """Whether the run, some time after it started, leaves the top-level list `and_or` for its
        owner to run when its time comes (`Wait`, at no period): where the list reaches the
        cluster's network, so that it sees the cluster as it is then, not as at the start."""
        if not paced() or self.signal is not None or self.fs is None or \
                not _reaches_network([and_or], self.functions):
            return False
        self._files()
        return True

    def _pid(self) -> int:
        """The shell's PID (`$$`, its subshells' too), as `ps` numbers the container's processes: 1,
        its container's first process; an exec's (`not_found`) the next after those it sees."""
        if not self.not_found or self.fs is None:
            return 1
        fs = self._files()
        return 1 + 6 * len(identity.processes(fs.pod, fs.container))

    def _files(self) -> ContainerFS:
        if self.fs is None:
            raise _Unknown
        if callable(self.fs):
            self.fs = self.fs()
        self.fs.now = self.started + self.now
        return self.fs

    def read_stdin(self, enough: Callable[[bytes], bool] | None = None) -> bytes:
        """All that is left of stdin (nothing after). One still open waits for its EOF, unless
        what came is `enough` for the reader (`head -n 1` has its line): it takes all that came,
        as its buffered read(2) of the pipe does, and what comes later is left to the next; until
        then it waits for more, not for the EOF."""
        if isinstance(self.stdin, Open) and enough is not None and enough(self.stdin):
            data, self.stdin = bytes(self.stdin), Open(b"")
            return data
        if self.stdin is _TERMINAL or isinstance(self.stdin, Open):
            self.reads_to_eof = enough is None
            raise _NoTerminal
        data, self.stdin = self.stdin, b""
        return data

    # --- the script's structure ------------------------------------------------------

    def script(self, script: Script) -> None:
        """And-or lists, one after the other: `&&` runs its pipeline after a success, `||` after a failure."""
        for and_or in script:
            if isinstance(and_or, Background):
                self._background(and_or.items)
                continue
            for i, (op, pipeline) in enumerate(and_or):
                if op == ";" or (op == "&&") == (self.status == 0):
                    self.pipeline(pipeline)
                    if math.isinf(self.now):
                        raise _Forever
                    if self.status and "e" in self.options and not self.conditions and not pipeline.negate and \
                            i == len(and_or) - 1:  # `set -e`: a failure that is no condition ends the shell
                        raise _Exit

    def _background(self, items: list) -> None:
        """`sleep N &`: a job that ends N seconds from now, which `wait` waits for (the pattern
        that lets a TERM trap run at once: `trap ... TERM; sleep infinity & wait`); another command
        as `_job` runs it. A pipeline, an and-or list, redirections, assignments, or a job typed
        at an interactive shell (it would outlive the line) are not simulated."""
        [(_, pipeline)] = items if len(items) == 1 else [(None, None)]
        simple = pipeline.commands[0] if pipeline is not None and len(pipeline.commands) == 1 else None
        if self.interactive or not isinstance(simple, Simple) or simple.assigns or simple.redirects or pipeline.negate:
            raise _Unknown
        self._take_signal()
        words = [f for w in simple.words for f in self.expand(w)]
        if not words:
            raise _Unknown
        seconds = _seconds(words[1]) if len(words) == 2 and os.path.basename(words[0]) == "sleep" else None
        job = (self.now + seconds, 0) if seconds is not None else self._job(words)
        # its PID: the next after the last job's, counted as `ps` numbers the container's processes
        self.last_job = (self.last_job or self._pid()) + 6
        self.jobs[self.last_job] = job
        self.status = 0

    def _job(self, words: list[str]) -> tuple[float, int]:
        """A background command other than `sleep`, worked out now (its stdin /dev/null, as a
        non-interactive shell's job has it): when it ends and its status. Only one that cannot
        change the shell (no function, no builtin but those that only write) and that writes and
        changes nothing after its start, where it would interleave with what the shell goes on
        with: `tail -f /dev/null &` (never ends), `touch /tmp/started &`, `echo hi &`."""
        name = os.path.basename(words[0])
        if name in BUILTINS and name not in _WRITERS or words[0] in self.functions:
            raise _Unknown
        began, stdin, marks = self.now, self.stdin, (len(self.output), len(self.errors), self._journal())
        self.stdin = b""
        try:
            self._command_or_not_found(words)
        except _Forever:
            raise _Unknown from None  # (one writing forever in among what the shell goes on with)
        finally:
            self.stdin = stdin
        end, self.now = self.now, began
        if end != began and (len(self.output), len(self.errors), self._journal()) != marks:
            raise _Unknown
        return end, self.status

    def node(self, node) -> None:
        if isinstance(node, Simple):
            self.simple(node)
        elif isinstance(node, Redirected):
            redirects = [(fd, kind, self._string(target)) for fd, kind, target in node.redirects]
            self._redirected(redirects, lambda: self.node(node.node))
        elif isinstance(node, Loop):
            self.loop(node)
        elif isinstance(node, Case):
            subject = self._string(node.word)
            self.status = 0
            for patterns, body in node.items:
                if any(re.fullmatch(self._glob(p), subject, re.S) for p in patterns):
                    self.script(body)
                    break
        elif isinstance(node, For):
            self.for_loop(node)
        elif isinstance(node, Function):
            self.functions[node.name] = node.body
            self.status = 0
        elif isinstance(node, If):
            for cond, body in node.branches:
                self._condition(cond)
                if self.status == 0:
                    self.script(body)
                    return
            if node.otherwise is not None:
                self.script(node.otherwise)
            else:
                self.status = 0
        else:
            self.script(node.body)

    def _condition(self, script: Script) -> None:
        """A condition (if's, while's): its failure does not end a `set -e` shell."""
        self.conditions += 1
        try:
            self.script(script)
        finally:
            self.conditions -= 1

    def _iterate(self, body: Script, condition: bool = False) -> str | None:
        """One pass of a loop's body (or its `condition`): "break" or "continue" where one of those left it."""
        try:
            (self._condition if condition else self.script)(body)
        except _Jump as jump:
            if jump.levels > 1:
                jump.levels -= 1
                raise
            return jump.kind
        return None

    def _state(self) -> tuple:
        """What the rest of the run depends on (the clock aside)."""
        cwd = self.fs.cwd if isinstance(self.fs, ContainerFS) else None
        return (tuple(self.vars.items()), frozenset(self.exported), self.status, cwd, self.stdin, tuple(self.args),
                frozenset(self.options), self.drawn)

    def _journal(self) -> int:
        return len(self.fs.journal or ()) if isinstance(self.fs, ContainerFS) else 0

    def loop(self, node: Loop) -> None:
        """`while`/`until`: its body runs while its condition succeeds (fails). A pass that starts as
        an earlier one did, with no change to the files since, starts an endless repetition of the
        passes between: each is worked out when its time comes (`Repeat`)."""
        status, seen, began, seen_marks = 0, {}, self.now, (len(self.output), len(self.errors))
        self.loops += 1
        try:
            for passes in itertools.count():
                state, mark = self._state(), (len(self.output), len(self.errors), self._journal(), self.now, passes)
                before = seen.setdefault(state, mark)
                if before is not mark and before[2] == mark[2]:
                    if self.signal is None or self.signal_taken:
                        self._endless(node, before, passes - before[4])
                    period = self.now - before[3]  # passes that repeat until the signal comes: skipped
                    if period > 0 and self.now + period <= self.signal:
                        self.now += (self.signal - self.now) // period * period
                    seen.clear()
                if passes >= (1 if paced() else LAZY_AFTER) and self._cannot_end(node) and not {"e", "u"} & self.options and \
                        (self.signal is None or self.signal_taken):  # (worked out to the signal, within BUDGET)
                    if self.now == began and (len(self.output) > seen_marks[0] or len(self.errors) > seen_marks[1]):
                        raise _Unknown  # writing without end at one instant: not simulated
                    if self.now > began:  # a counter, or files it adds to: its passes as they come
                        self.repeat = Endless(self, node)
                    self.now = math.inf  # else it spins, silent, forever
                    raise _Forever
                if self._pass_defers(node):  # (the loop again from here, its condition read then)
                    raise _Waiting
                if self._iterate(node.cond, condition=True) == "break":
                    break
                if (self.status == 0) == node.until:
                    break
                jumped = self._iterate(node.body)
                status = 0 if jumped else self.status
                if jumped == "break":
                    break
        finally:
            self.loops -= 1
        self.status = status

    def _waits(self, node: Loop) -> bool:
        """Whether `node`, repeating itself, waits for its files to change: a loop that may end,
        starting one of the script's top-level lists (what follows it runs once it ends), that read
        the container's files (a line typed at a shell too: the shell goes on with it, `Shell.resume`)."""
        pipeline = self.rest[0][0][1] if self.rest else None
        return pipeline is not None and len(pipeline.commands) == 1 and pipeline.commands[0] is node and \
            not pipeline.negate and isinstance(self.fs, ContainerFS) and not self._cannot_end(node) and \
            all(self.resumable)

    def _cannot_end(self, node: Loop) -> bool:
        """`_cannot_end`, where no function is defined (one called in the loop might leave it)."""
        return not self.functions and _cannot_end(node)

    def _endless(self, node: Loop, mark: tuple, passes: int) -> None:
        """`node` repeats its last `passes` passes (which started at `mark`) forever: the run ends
        here, its later passes written as they come."""
        period = self.now - mark[3]
        wrote = len(self.output) > mark[0] or len(self.errors) > mark[1]
        if (period > 0 or not wrote) and self._waits(node):
            if period <= 0:  # it spins, silent (`do :; done`): it reads its files again each BUSY_WAIT
                period = BUSY_WAIT
                self.now += period
            self.period = period
            raise _Waiting
        if period <= 0:
            if wrote:
                raise _Unknown  # a loop writing without end at one instant is not simulated
            self.now = math.inf
            raise _Forever
        if wrote:
            state = self.snapshot(), self.status, self.stdin
            fs = self.fs

            def iteration(at: float) -> list[tuple[float, str, str | bytes]]:
                run = _Run(self.started, state[1], fs=fs, stdin=state[2], terminal=self.terminal)
                run.restore(state[0])
                run.now, run.loops = at, 1
                try:
                    for _ in range(passes):
                        run._condition(node.cond)
                        run.script(node.body)
                except (_Unknown, _Exit, _Jump, _Forever, _Aborted):
                    return None
                return run.program().writes()
            self.repeat = Repeat(self.now, period, iteration, paced())
        self.now = math.inf
        raise _Forever

    def _pass_defers(self, node: Loop | For) -> bool:
        """Whether the run leaves loop `node`'s next pass, time having passed since it started, for
        its owner to run when its time comes (`Wait`, at no period), as `defers` leaves a top-level
        list: where the loop starts the top-level list running (not nested in a loop, condition,
        function or capture) and reaches the cluster's network, so each pass sees the cluster as
        it is then, not as at the loop's start."""
        if self.now <= 0 or self.loops != 1 or self.conditions or self.captured or self.frames or not self.rest or \
                not all(self.resumable):
            return False
        pipeline = self.rest[0][0][1]
        return len(pipeline.commands) == 1 and pipeline.commands[0] is node and self.defers(self.rest[0])

    def for_loop(self, node: For) -> None:
        items = self.args[1:] if node.items is None else [f for w in node.items for f in self.expand(w)]
        status = 0
        self.loops += 1
        try:
            for i, item in enumerate(items):
                if self._pass_defers(node):  # the rest of its items, then what follows it
                    (op, pipeline), *after = self.rest[0]
                    rest = For(node.name, [(("lit", x, True),) for x in items[i:]], node.body)
                    self.rest = [[(op, Pipeline([rest], pipeline.negate)), *after], *self.rest[1:]]
                    raise _Waiting
                self.vars[node.name] = item
                jumped = self._iterate(node.body)
                status = 0 if jumped else self.status
                if jumped == "break":
                    break
        finally:
            self.loops -= 1
        self.status = status

    def pipeline(self, pipeline: Pipeline) -> None:
        """Commands joined by `|`, one after the other: what each writes to stdout is the next one's
        stdin; the pipeline's status is the last one's (negated by `!`). Each command of a longer
        pipeline runs in a subshell, as bash and busybox's sh run it: its `exit` ends only it, and
        what it sets (variables, `cd`, functions) is gone after it (`... | while read x`)."""
        stages = pipeline.commands
        if len(stages) == 1:
            self.node(stages[0])
        else:
            rest, piped, failed = self.stdin, b"", 0
            for i, node in enumerate(stages):
                last = i == len(stages) - 1
                if i:
                    self.stdin = piped
                mark = len(self.output)
                self.captured += not last
                self.subshells += 1
                shell = dict(self.vars), set(self.exported), dict(self.functions), dict(self.traps), list(self.args), \
                    set(self.options), self.fs.cwd if isinstance(self.fs, ContainerFS) else None
                try:
                    self.node(node)
                except Replaced as e:
                    self._subshell_replaced(e)
                except (_Exit, _Aborted):  # (a subshell's end)
                    pass
                except _Forever:
                    raise _Unknown from None  # an endless command in a pipe is not simulated
                finally:
                    self.captured -= not last
                    self.subshells -= 1
                    self.vars, self.exported, self.functions, self.traps, self.args, self.options, cwd = shell
                    if cwd is not None and isinstance(self.fs, ContainerFS):
                        self.fs.cwd = cwd
                if i == 0:
                    rest = self.stdin
                failed = self.status or failed
                if not last:
                    piped = b"".join(x if isinstance(x, bytes) else x.encode() for _, x in self.output[mark:])
                    del self.output[mark:]
                    self.errors = [(min(place, mark), t, x) for place, t, x in self.errors]
            self.stdin = rest
            if "pipefail" in self.options:  # the last command's failure that failed
                self.status = self.status or failed
        if pipeline.negate:
            self.status = 0 if self.status else 1

    # --- words -----------------------------------------------------------------------

    def expand(self, word: tuple, split: bool = True) -> list[str]:
        """The fields a word expands to: its parameters and substitutions, and, unquoted, their
        values split at blanks (`split`: as a command's words, each then the pathnames its unquoted
        `*`, `?` and `[...]` match, written or from an unquoted expansion's value (`P=/ckpt/*.pt;
        ls $P`): `_pathnames`; else one field, as an assignment's)."""
        fields: list[tuple[str, list[tuple[int, int]]]] = []  # each with where its globs are
        current, has, globs = "", False, []
        for part in word:
            if part[0] == "lit":
                current += part[1]
                has = has or part[2] or bool(part[1])
                continue
            if part[0] == "glob":
                globs.append((len(current), len(current) + len(part[1])))
                current, has = current + part[1], True
                continue
            value = self._value(part)
            if part[-1] or not split:
                current += value
                has = has or part[-1]
                continue
            pieces, lead, trail = split_fields(value, self.vars.get("IFS", DEFAULT_IFS))
            if lead and has:
                fields.append((current, globs))
                current, has, globs = "", False, []
                if pieces and pieces[0] == "":  # (the separator that ended that field)
                    pieces.pop(0)
            for i, piece in enumerate(pieces):
                if i:
                    fields.append((current, globs))
                    current, globs = "", []
                globs += [(len(current) + m.start(), len(current) + m.end()) for m in _GLOBS.finditer(piece)]
                current += piece
                has = True
            if pieces and trail:
                fields.append((current, globs))
                current, has, globs = "", False, []
        if not split:
            return [current]
        if has:
            fields.append((current, globs))
        return [path for text, at in fields for path in (self._pathnames(text, at) if at else [text])]

    def _pathnames(self, text: str, globs: list[tuple[int, int]]) -> list[str]:
        """The paths of the container's files a field matches, sorted, its globs at `globs` (spans of
        `text`) matching as a shell's: a name starting with `.` only where the pattern's component
        does, each component but the last a directory; none matching, the field itself."""
        fs = self._files()
        components: list[tuple[str, str | None]] = []  # (its text, its regular expression if a pattern)
        start, pattern, globbed = 0, "", False
        for i, c in enumerate(text + "/"):
            glob = next(((a, b) for a, b in globs if a <= i < b), None)
            if c == "/" and glob is None:
                components.append((text[start:i], pattern if globbed else None))
                start, pattern, globbed = i + 1, "", False
            elif glob is not None:
                if i == glob[0]:
                    pattern += _glob_regex(text[glob[0]:glob[1]])
                globbed = True
            else:
                pattern += re.escape(c)
        paths = ["/" if text.startswith("/") else ""]
        for k, (name, regex) in enumerate(components):
            if not name and k < len(components) - 1:
                continue  # (the root's, or `//`)
            if regex is None:
                paths = [p + name + ("/" if k < len(components) - 1 else "") for p in paths]
                continue
            paths = [f"{p}{n}{'/' if k < len(components) - 1 else ''}" for p in paths
                     for n in self._listing(fs, p) if re.fullmatch(regex, n, re.S) and
                     (not n.startswith(".") or name.startswith("."))]
        found = sorted(p for p in paths if fs.lookup(p) is not None)
        return found or [text]

    @staticmethod
    def _listing(fs: ContainerFS, directory: str) -> list[str]:
        try:
            return fs.listdir(directory or ".")
        except FsError:
            return []

    def _string(self, parts: tuple) -> str:
        return self.expand(parts, split=False)[0]

    def _value(self, part: tuple) -> str:
        kind = part[0]
        if kind == "arith":
            try:  # (its parameters and substitutions expanded first, as a shell does)
                return str(_arithmetic(self._string(expansions(part[1])) if "$" in part[1] else part[1], self.vars))
            except _DivisionByZero as e:
                self._division_by_zero(e)
        if kind == "cmd":
            return self._substitute(part[1])
        _, name, op, arg, _ = part
        if name == "?":
            value: str | None = str(self.status)
        elif name == "#":
            value = str(len(self.args) - 1)
        elif name == "!":  # (unset before the first background job)
            value = None if self.last_job is None else str(self.last_job)
        elif name == "$":
            value = str(self._pid())
        elif name.isdigit():
            value = self.args[int(name)] if int(name) < len(self.args) else None
        elif name in ("@", "*"):
            value = " ".join(self.args[1:])
        elif name == "RANDOM":  # ash's: 0 to 32767, another each time
            value = str(self.random.randrange(32768))
            self.drawn += 1
        else:
            value = self.vars.get(name)
        if op in ("?", ":?") and (value is None or op == ":?" and not value):
            self._unset(name, self._string(arg), op == ":?")
        if value is None and "u" in self.options and op not in ("-", ":-", "=", ":=", "+", ":+") and \
                name not in ("@", "*"):
            self.err(f"sh: {name}: parameter not set\n")
            self.status = 2
            raise _Exit
        if op == "length":
            return str(len(value or ""))
        if op in PATTERN_OPS:
            return _trimmed(value or "", self._glob(arg), op)
        if op in (":-", ":=") and not value or op in ("-", "=") and value is None:
            value = self._string(arg)
            if op.endswith("="):
                self.vars[name] = value
        elif op in (":+", "+"):
            value = self._string(arg) if (value if op == ":+" else value is not None) else ""
        return value or ""

    def _shell_error(self, text: str, status: int, fatal: bool = True) -> None:
        """An expansion's error, the shell's own: `text` on stderr after the shell's name (and the
        line, bash's and dash's, but at an interactive shell); the shell ends with `status` (an
        interactive one ends the line typed), or, not `fatal`, drops the rest of the line (bash's)."""
        where = {"bash": f"line {self.line}: ", "dash": f"{self.line}: "}.get(self.shell, "")
        self.err(f"{self.shell}: {'' if self.interactive else where}{text}\n")
        self.status = status
        raise _Aborted if self.interactive or not fatal else _Exit

    def _division_by_zero(self, e: _DivisionByZero) -> None:
        """`$((x / 0))`: dash and busybox's sh end (status 2), bash drops the rest of the line and
        goes on (status 1); each words it its way."""
        self._shell_error({"bash": f'{e.expression.lstrip()}: division by 0 (error token is "{e.token}")',
                           "dash": f'arithmetic expression: division by zero: "{e.expression}"'}.get(
            self.shell, "divide by zero"), 1 if self.shell == "bash" else 2, fatal=self.shell != "bash")

    def _unset(self, name: str, message: str, null: bool) -> None:
        """`${NAME?message}` (`:?`: or empty) of a variable unset: `message`, else the shell's own
        words; the shell ends (bash's status 127, 1 a subshell's; dash's and busybox's 2)."""
        if not message:
            message = "parameter " + ({"bash": "null or not set"}.get(self.shell, "not set or null") if null else "not set")
        self._shell_error(f"{name}: {message}", (1 if self.subshells else 127) if self.shell == "bash" else 2)

    def _glob(self, parts: tuple) -> str:
        """A pattern word (case's, `${x%.*}`'s) as a regular expression: its unquoted `*`, `?` and
        `[...]` match as a glob's (`_glob_regex`; an unquoted expansion's value too), its quoted
        text is itself."""
        out = ""
        for part in parts:
            if part[0] == "glob":
                out += _glob_regex(part[1])
                continue
            quoted = part[2] if part[0] == "lit" else part[-1]
            text = part[1] if part[0] == "lit" else self._value(part)
            out += re.escape(text) if quoted else _glob_regex(text)
        return out

    def _substitute(self, script: str) -> str:
        """`$(script)`: what it writes to stdout, its last new lines removed, run as in a subshell
        (what it sets stays there); its status is the shell's."""
        saved = dict(self.vars), set(self.exported), self.fs.cwd if isinstance(self.fs, ContainerFS) else None
        mark = len(self.output)
        self.captured += 1
        self.subshells += 1
        try:
            self.script(parse(script))
        except Replaced as e:
            self._subshell_replaced(e)
        except (_Exit, _Aborted):  # (a subshell's end)
            pass
        except _Forever:
            raise _Unknown from None
        finally:
            self.captured -= 1
            self.subshells -= 1
            self.vars, self.exported = saved[0], saved[1]
            if saved[2] is not None:
                self.fs.cwd = saved[2]
        captured = _text(self.output[mark:])
        del self.output[mark:]
        self.errors = [(min(place, mark), t, x) for place, t, x in self.errors]
        self.substituted = True
        return captured.rstrip("\n")

    # --- simple commands -------------------------------------------------------------

    def simple(self, node: Simple) -> None:
        """One command: its words expanded, its assignments made (for it alone when it has a
        command), its redirections applied."""
        self.steps += 1
        if self.steps > BUDGET:
            raise _Unknown
        self._take_signal()
        self.substituted, self.line = False, node.line
        words = [f for w in node.words for f in self.expand(w)]
        assigns = [(name, self._string(value)) for name, value in node.assigns]
        if sum(map(len, words)) + sum(len(v) for _, v in assigns) > WRITE_BUDGET:
            raise _Unknown
        redirects = [(fd, kind, self._string(target)) for fd, kind, target in node.redirects]
        if "x" in self.options:  # `set -x`: each command as it runs, on stderr
            quoted = str if self.shell == "dash" else _quoted  # (dash traces the words as they are)
            self.err("+ " + " ".join([*(quoted(f"{n}={v}") for n, v in assigns), *map(quoted, words)]) + "\n")
        if not words:
            self.vars.update(assigns)
            if not self.substituted:
                self.status = 0
            if redirects:
                self._redirected(redirects, lambda: None)
            return
        saved = None
        if assigns:  # `NAME=value command`: in its environment only (what it sets itself stays: `IFS=, read a b`)
            saved = {name: self.vars.get(name) for name, _ in assigns}, {n for n, _ in assigns if n in self.exported}
            self.vars.update(assigns)
            self.exported.update(name for name, _ in assigns)
        self.simple_running = node
        try:
            if redirects:
                self._redirected(redirects, lambda: self._command_or_not_found(words))
            else:
                self._command_or_not_found(words)
        finally:
            for name, value in saved[0].items() if saved is not None else ():
                if value is None:
                    self.vars.pop(name, None)
                else:
                    self.vars[name] = value
                if name not in saved[1]:
                    self.exported.discard(name)

    def replaced(self, e: Replaced) -> None:
        """The shell as the one `exec sh -c` started in its place (`Replaced`): the exported
        variables alone (and the limits `ulimit` set, the process's own), no functions, options
        nor traps (its EXIT trap never runs: the process is another program), its own positional
        parameters."""
        self.vars = {k: v for k, v in self.vars.items() if k in self.exported or k == limits.KEY}
        self.functions, self.traps, self.args, self.shell = {}, {}, list(e.args), e.shell
        self.options.clear()

    def _subshell_replaced(self, e: Replaced) -> None:
        """`exec sh -c SCRIPT` in a subshell (a pipe's command, `$(...)`): the new shell runs its
        script there, which ends with it; the shell around it is as it was."""
        saved = dict(self.vars), set(self.exported), dict(self.functions), dict(self.traps), self.args, \
            set(self.options), self.shell
        try:
            self.replaced(e)
            self.script(e.script)
        except Replaced as again:
            self._subshell_replaced(again)
        except (_Exit, _Aborted):
            pass
        finally:
            (self.vars, self.exported, self.functions, self.traps, self.args, self.options,
             self.shell) = saved

    def located(self, name: str) -> str | None:
        """Where the command `name` runs from, as the shell's PATH search finds it: a path naming a
        file, itself; a busybox applet simulated here, in /bin (the image's); nvidia-smi, where the
        container was given GPUs, in /usr/bin (the NVIDIA runtime mounts it there). None where
        it is not found: a command simulated nowhere is, at an exec's shell (`not_found`), as
        everywhere else it is; elsewhere (the image's own programs unknown) not simulated."""
        fs = self._files()
        if "/" in name:
            return name if isinstance(fs.lookup(name), File) else None
        if name == "nvidia-smi":
            gpus = gpu.GPUS.get().get(fs.container)
            if gpus is None:
                raise _Unknown
            return "/usr/bin/nvidia-smi" if gpus else None
        known = {*BUILTINS, *APPLETS, *TERMINAL_APPLETS, *filters.APPLETS, *find.APPLETS, *net.APPLETS, *identity.APPLETS,
                 *system.APPLETS, "basename", "dirname", "date", "sleep", "seq", "timeout"} - SHELL_ONLY - {":", "wait"}
        if name in known:
            return f"/bin/{name}"
        if not self.not_found:
            raise _Unknown
        return None

    def _take_signal(self) -> None:
        """SIGTERM, come by now, is taken once the command running as it came has ended (a real
        shell runs a trap then): TERM's action runs, the shell going on after it unless it exits;
        untrapped, the signal is ignored, as by a container's first process."""
        if self.signal is None or self.signal_taken or self.now < self.signal or math.isinf(self.now):
            return
        self.signal_taken = True
        self.taken = len(self.output) + len(self.errors), len(self.fs.journal or ()) if isinstance(self.fs, ContainerFS) else 0
        action = self.traps.get("TERM")
        if not action:
            return
        status = self.status
        self.script(parse(action))
        self.status = status

    def _call(self, body, args: list[str]) -> None:
        """A function's body run with `args` as its positional parameters (`$0` the shell's), until
        it ends or `return`s; its `local` variables are given back their values after."""
        saved, self.args = self.args, [self.args[0], *args]
        self.frames.append({})
        try:
            self.node(body)
        except Return:
            pass
        finally:
            self.args = saved
            for var, value in self.frames.pop().items():
                if value is None:
                    self.vars.pop(var, None)
                else:
                    self.vars[var] = value

    def _redirected(self, redirects: list[tuple[int, str, str]], run: Callable[[], None]) -> None:
        """`run` with its redirections applied in order, as a shell opens them before it runs: a
        descriptor's output into a file (`>` empties it first, `>>` adds to it), /dev/null, or where
        another's goes (`2>&1`, `>&2`); stdin from a file (`<`) or a here-document (`<<`)."""
        saved, fs = self.stdin, None
        table: dict[int, str | None] = {1: _STDOUT, 2: _STDERR}  # where each goes: a file's path, or None
        for fd, kind, target in redirects:
            if kind == ">&":
                if target == "0":
                    raise _Unknown
                table[fd] = table[int(target)]
                continue
            if kind.startswith("<<"):  # a here-document: its body, expanded, is stdin
                if fd != 0:
                    raise _Unknown
                self.stdin = target.encode()
                continue
            fs = fs or self._files()
            try:
                if fd == 0 or kind == "<":
                    if fd != 0 or kind != "<":
                        raise _Unknown
                    self.stdin = b"" if fs.normal(target) == "/dev/null" else fs.read(target)
                    continue
                table[fd] = None if fs.normal(target) == "/dev/null" else target
                if table[fd]:
                    fs.write(target, b"", append=kind == ">>")
            except FsError as e:
                opening = "open" if kind == "<" else "create"
                reason = {NOT_FOUND: "no such file" if kind == "<" else "nonexistent directory"}.get(e.reason,
                                                                                                 e.reason)
                self.err(f"sh: can't {opening} {target}: {reason}\n")
                self.status = 1
                self.stdin = saved
                return
        marks = len(self.output), len(self.errors)
        captured = table[1] not in (_STDOUT, _STDERR)  # stdout into a file or /dev/null
        redirected = table != {1: _STDOUT, 2: _STDERR}
        self.captured += captured
        self.redirected += redirected
        try:
            run()
        finally:
            self.captured -= captured
            self.redirected -= redirected
            if table != {1: _STDOUT, 2: _STDERR}:
                self._route(marks, table, fs)
            if any(kind.startswith("<") for _, kind, _ in redirects):
                self.stdin = saved

    def _route(self, marks: tuple[int, int], table: dict[int, str | None], fs: ContainerFS | None) -> None:
        """What was written since `marks` (stdout's and stderr's), sent where `table` says, in order."""
        if self.repeat is not None:
            raise _Unknown  # an endless loop's later passes redirected: not simulated
        written = [(t, _STDOUT, x) for t, x in self.output[marks[0]:]]
        for place, t, x in reversed(self.errors[marks[1]:]):
            written.insert(place - marks[0], (t, _STDERR, x))
        del self.output[marks[0]:], self.errors[marks[1]:]
        into: dict[str, list[bytes]] = {}
        for t, stream, x in written:
            where = table[1 if stream == _STDOUT else 2]
            if where == _STDOUT:
                self.output.append((t, x))
            elif where == _STDERR:
                self.errors.append((len(self.output), t, x if isinstance(x, str) else x.decode(errors="replace")))
            elif where is not None:
                into.setdefault(where, []).append(x if isinstance(x, bytes) else x.encode())
        for path, chunks in into.items():
            try:
                fs.write(path, b"".join(chunks), append=True)
            except NoSpace as e:  # a tmpfs filled: what fitted went in
                self.err(f"sh: write error: {e.reason}\n")
                self.status = 1
            except FsError as e:  # the file went meanwhile (`rm f > f`)
                self.err(f"sh: can't create {path}: {e.reason}\n")

    def _command_or_not_found(self, words: list[str]) -> None:
        try:
            self.command(words, in_shell=True)
        except _NoTerminal:
            if not self.interactive:  # a container's stdin that is still to come: not worked out ahead
                self.captured_read = self.captured > 0
                raise
            self.err(f"sh: {words[0]}: nanokube's simulated shell gives a command no terminal to read\n")
            self.status = 1
        except _Unknown as e:
            if not self.not_found and not isinstance(e, _NotFound):
                raise
            self.err(f"sh: {words[0]}: not found\n")
            self.status = 127

    def command(self, words: list[str], in_shell: bool) -> None:
        name, args = os.path.basename(words[0]), words[1:]
        if name in SHELL_ONLY and not in_shell:
            raise _Unknown
        if in_shell and words[0] in self.functions:
            self._call(self.functions[words[0]], args)
        elif name in BUILTINS:
            self.status = BUILTINS[name](self, name, args)
        elif name in ("basename", "dirname") and 1 <= len(args) <= (2 if name == "basename" else 1):
            path = args[0].rstrip("/") or ("/" if args[0] else "")
            if name == "dirname":
                self.out((posixpath.dirname(path).rstrip("/") or ("/" if path.startswith("/") else ".")) + "\n")
            else:
                base = posixpath.basename(path) or path
                if len(args) == 2 and base != args[1] and base.endswith(args[1]):
                    base = base[:-len(args[1])]
                self.out(base + "\n")
            self.status = 0
        elif name == "date" and len(args) <= 2 and all(a == "-u" or a.startswith("+") for a in args):
            d = datetime.fromtimestamp(self.started + self.now, timezone.utc)
            fmt = next((a[1:] for a in args if a.startswith("+")), None)
            if fmt is None:
                self.output.append((self.now, f"{d:%a %b} {d.day:2d} {d:%H:%M:%S} UTC {d.year}\n"))
            else:  # the node's clock in UTC, as the container's TZ is
                if re.search(r"%[^%aAbBcdDeFHIjklmMnpsStTuUVwWxXyYzZ]", fmt):
                    raise _Unknown
                self.out(d.strftime(fmt.replace("%s", str(int(d.timestamp()))).replace("%Z", "UTC")) + "\n")
            self.status = 0
        elif name == "tail" and args == ["-f", "/dev/null"]:
            self.now = math.inf
        elif name == "sleep" and args:
            seconds = [_seconds(a) for a in args]
            if None in seconds:  # busybox's: what is not a number of seconds (`-1`, `nan`) ends it at once
                self.err(f"sleep: invalid number '{args[seconds.index(None)]}'\n")
                self.status = 1
            else:
                self.now += sum(seconds)
                self.status = 0
                self._take_signal()
        elif name == "seq" and (seq := _seq(args)) is not None:
            separator, wide, n = seq
            first, step, last = (1, 1, n[0]) if len(n) == 1 else (n[0], 1, n[1]) if len(n) == 2 else n
            numbers = range(first, last + (1 if step > 0 else -1), step) if step else range(0)
            width = max(len(str(first)), len(str(last)))
            if len(numbers) * (width + len(separator)) > WRITE_BUDGET - self.written:
                raise _Unknown
            if numbers:
                self.out(separator.join(f"{i:0{width}d}" if wide else str(i) for i in numbers) + "\n")
            self.status = 0
        elif name in TERMINAL_APPLETS:
            self.status = TERMINAL_APPLETS[name](self, name, args)
        elif name in APPLETS:
            self.status = APPLETS[name](self, self._files(), name, args)
        elif name in filters.APPLETS:
            self.status = filters.APPLETS[name](self, self._files(), name, args)
        elif name in find.APPLETS:
            self.status = find.APPLETS[name](self, self._files(), name, args)
        elif name in net.APPLETS:
            self.status = net.APPLETS[name](self, self._files(), name, args)
        elif name in identity.APPLETS:
            self.status = identity.APPLETS[name](self, self._files(), name, args)
        elif name in gpu.APPLETS:
            self.status = gpu.APPLETS[name](self, self._files(), name, args)
        elif name in system.APPLETS:
            self.status = system.APPLETS[name](self, self._files(), name, args)
        elif name == "timeout" and len(args) >= 2:
            self.status = self._timeout(args)
        elif name == "chroot" and len(args) >= 2 and not args[0].startswith("-"):
            self.status = self._chroot(args[0], args[1:])
        elif name == "chroot" and len(args) == 1 and not args[0].startswith("-") and self.stdin is _TERMINAL \
                and not self.subshells and not self.captured:
            self.status = self._cannot_change_root(args[0])
            if not self.status:
                self.entered = self._files().normal(args[0])
        elif name in (".", "source") and in_shell and args:
            self._source(args[0], args[1:])
        elif name in SHELLS and self._lacks(name):
            raise _NotFound
        elif name in SHELLS and (called := invocation(words)) is not None:
            options, seed, args = called
            script = parse(seed) if seed is not None else self.script_file(args[0], name)
            if script is not None:
                self._child_shell(script, args, name, options)
        elif "/" in words[0]:
            self._executable(words[0], args)
        else:
            raise _Unknown

    def script_file(self, path: str, shell: str) -> Script | None:
        """The script in the container's file `path` (`sh FILE`), or None where there is none: the
        shell `shell` that was to run it says so (busybox's and dash's status 2, bash's 127)."""
        try:
            return parse(self._files().read(path).decode(errors="replace"))
        except FsError as e:
            if e.reason != NOT_FOUND:
                raise _Unknown from None
        self.err({"bash": f"bash: {path}: No such file or directory\n",
                  "dash": f"dash: 0: cannot open {path}: No such file\n"}.get(
            shell, f"{shell}: can't open '{path}': No such file or directory\n"))
        self.status = 127 if shell == "bash" else 2
        return None

    def _source(self, path: str, args: list[str]) -> None:
        """`. FILE [ARG...]` (`source`): its commands run in this shell, what they set staying set;
        `return` ends them. Its ARGs are the positional parameters while it runs, the shell's again
        after (busybox's sh and bash; dash ignores them). A missing file: busybox's sh and dash end
        (status 2), bash says so and goes on (1)."""
        try:
            script = parse(self._files().read(path).decode(errors="replace"))
        except FsError as e:
            if e.reason != NOT_FOUND:
                raise _Unknown from None
            where = {"bash": f"line {self.line}: ", "dash": f"{self.line}: .: "}.get(self.shell, ".: ")
            words = {"bash": f"{path}: No such file or directory", "dash": f"cannot open {path}: No such file"}.get(
                self.shell, f"can't open '{path}': No such file or directory")
            self.err(f"{self.shell}: {where}{words}\n")
            self.status = 1 if self.shell == "bash" else 2
            if self.shell != "bash":
                raise _Exit from None
            return
        self.status = 0
        self.sourcing += 1
        saved = self.args
        if args and self.shell != "dash":
            self.args = [self.args[0], *args]
        try:
            self._lists(script, (("source", saved if args and self.shell != "dash" else None), None))
        except Return:
            pass
        finally:
            self.sourcing -= 1
            if args and self.shell != "dash":
                self.args = saved

    def _executable(self, path: str, args: list[str]) -> None:
        """A script file run by its path (`./run.sh`, `/scripts/launch.sh`): without the exec bit the
        shell cannot (126); with it, the kernel runs the interpreter its `#!` line names, given the
        rest of the line as one argument, then the path and ARGs: a shell, with its options
        (`#!/bin/bash -e`), or, through env, the program env finds (`#!/usr/bin/env bash`). An
        interpreter the image lacks (bash in busybox's, python in any image known here, and
        /usr/bin/env in busybox's) is not found; one env cannot find, env says so as alpine's
        busybox or GNU's words it (127). Another
        interpreter (python where the image may have it), or no `#!` line: not simulated."""
        node = self._files().lookup(path)
        if not isinstance(node, File):
            raise _Unknown
        if not node.mode & 0o111:
            where = {"bash": f"line {self.line}: ", "dash": f"{self.line}: "}.get(self.shell, "")
            self.err(f"{self.shell}: {'' if self.interactive else where}{path}: Permission denied\n")
            self.status = 126
            return
        m = re.fullmatch(r"#![ \t]*(\S+)[ \t]*(.*?)\s*", node.data.split(b"\n", 1)[0].decode(errors="replace"))
        if m is None:
            raise _Unknown  # (no `#!` line: the shell would run it itself, not simulated)
        interpreter, arg = m.groups()
        program = os.path.basename(interpreter)
        if program == "env" and arg:
            repository = net.repository(self._image() or "")
            if repository.startswith("distroless/") or repository == "busybox" and interpreter != "/bin/env":
                raise _NotFound  # (busybox's image has its applets in /bin alone; distroless has no env)
            if re.search(r"\s", arg) or self._lacks(arg):
                self.err(f"env: can't execute '{arg}': No such file or directory\n" if repository == "alpine" else
                         f"{interpreter}: '{arg}': No such file or directory\n" +
                         (f"{interpreter}: use -[v]S to pass options in shebang lines\n" if " " in arg else ""))
                self.status = 127
                return
            interpreter, program, arg = arg, arg, ""
        if self._lacks(program):
            raise _NotFound  # (the kernel finds no interpreter)
        called = invocation([interpreter, *([arg] if arg else []), path, *args]) if program in SHELLS else None
        if called is None or called[1] is not None:
            raise _Unknown  # (python in an image that may have it, another interpreter)
        self._child_shell(parse(node.data.decode(errors="replace")), called[2], program, called[0])

    def _timeout(self, args: list[str]) -> int:
        """`timeout [-s SIGNAL] [-k SECONDS] SECONDS PROGRAM [ARG...]`: PROGRAM, ended by SIGNAL (TERM)
        if it has not ended SECONDS later: what it would write or change after then never is, and
        its status is the signal's: busybox's timeout execs PROGRAM, so the shell sees it killed
        (128 + the signal's number); GNU's (ubuntu's and debian's images) says 124, or 137 for KILL.
        A `sh -c` script that ignores TERM (`trap '' TERM`, which the commands it runs inherit) runs
        on past it: to its end (GNU's status still 124), or with `-k` until the KILL that many
        seconds later (137). A program that is not there is timeout's error (127). An endless
        loop's passes before then are written; one changing files or reaching the network in them
        is not simulated."""
        args, signal, kill_after = list(args), 15, None
        while args and args[0].startswith("-") and len(args[0]) > 1:
            option = args.pop(0)
            if option == "-s" and args:
                value = args.pop(0).upper().removeprefix("SIG")
                signal = {"TERM": 15, "15": 15, "KILL": 9, "9": 9, "INT": 2, "2": 2}.get(value, 0)
            elif option == "-k" and args:
                kill_after = _seconds(args.pop(0))
                if kill_after is None:
                    raise _Unknown
            elif option != "--foreground":
                raise _Unknown  # (--preserve-status, a bundled option...: not simulated)
        seconds = _seconds(args[0]) if len(args) >= 2 and signal else None
        if seconds is None:
            raise _Unknown
        gnu = self.fs is not None and net.repository(self._image() or "") in ("ubuntu", "debian")
        deadline, marks = self.now + seconds, (len(self.output), len(self.errors), self._journal())
        traps = _term_traps(args[1:]) if signal == 15 else None
        ignored = bool(traps) and traps[-1] == ""
        if ignored and not kill_after:  # (a kill-after of 0 sends no KILL)
            self.command(args[1:], in_shell=False)
            return 124 if gnu and self.now >= deadline else self.status
        if ignored:
            deadline, signal = deadline + kill_after, 9
        try:
            self.command(args[1:], in_shell=False)
        except _Unknown as e:
            if not self.not_found and not isinstance(e, _NotFound):
                raise
            self.err(f"timeout: failed to run command '{args[1]}': No such file or directory\n" if gnu else
                     f"timeout: can't execute '{args[1]}': No such file or directory\n")
            return 127
        except _Forever:
            self.now, repeat, self.repeat = math.inf, self.repeat, None
            for t, stream, x in repeat.timeline() if repeat is not None else ():
                if t >= deadline:
                    break
                if stream not in ("stdout", "stderr"):
                    raise _Unknown from None
                if stream == "stdout":
                    self.output.append((t, x))
                else:
                    self.errors.append((len(self.output), t, x if isinstance(x, str) else x.decode(errors="replace")))
        if self.now < deadline:
            return self.status
        self.now = deadline  # (what would come at the deadline itself is cut off too)
        self.output[marks[0]:] = [(t, x) for t, x in self.output[marks[0]:] if t < deadline]
        self.errors[marks[1]:] = [(min(place, len(self.output)), t, x) for place, t, x in self.errors[marks[1]:]
                                  if t < deadline]
        if isinstance(self.fs, ContainerFS) and self.fs.journal:
            self.fs.journal[marks[2]:] = [c for c in self.fs.journal[marks[2]:] if c[0] < self.started + deadline]
        return 124 if gnu and signal != 9 else 128 + signal

    def _chroot(self, new_root: str, argv: list[str]) -> int:
        """`chroot NEWROOT COMMAND [ARG...]` (busybox's, or coreutils' in ubuntu's and debian's
        images): COMMAND run with its root at NEWROOT, as `kubectl debug node/N -- chroot /host
        cat /etc/os-release` is used. NEWROOT not a directory is chroot's error (busybox's 1,
        GNU's 125), a COMMAND not there its 127. Without COMMAND, at an interactive shell, a shell
        in NEWROOT reads the lines that follow until its `exit` (`run.entered`, the Shell's)."""
        if error := self._cannot_change_root(new_root):
            return error
        gnu = net.repository(self._image() or "") in ("ubuntu", "debian")
        outer, self.fs = self.fs, self._files().chrooted(new_root)
        try:
            self.command(argv, in_shell=False)
        except _Unknown as e:
            if not self.not_found and not isinstance(e, _NotFound):
                raise
            self.err(f"chroot: failed to run command '{argv[0]}': No such file or directory\n" if gnu else
                     f"chroot: can't execute '{argv[0]}': No such file or directory\n")
            return 127
        finally:
            self.fs = outer
        return self.status

    def _cannot_change_root(self, new_root: str) -> int:
        """chroot's error where `new_root` is no directory (busybox's status 1, GNU's 125), else 0."""
        node = self._files().lookup(new_root)
        if isinstance(node, Dir):
            return 0
        why = "No such file or directory" if node is None else "Not a directory"
        if net.repository(self._image() or "") in ("ubuntu", "debian"):
            self.err(f"chroot: cannot change root directory to '{new_root}': {why}\n")
            return 125
        self.err(f"chroot: can't change root directory to '{new_root}': {why}\n")
        return 1

    def _image(self) -> str | None:
        """The container's image, as its pod's spec names it."""
        fs = self._files()
        spec = fs.pod.get("spec") or {}
        return next((c.get("image", "") for key in ("containers", "initContainers", "ephemeralContainers")
                     for c in spec.get(key) or () if c.get("name") == fs.container), None)

    def _lists(self, script: Script, back: tuple) -> None:
        """The top-level lists of a script the command running runs in a shell, or sources, each as
        `_execute` runs one (a loop starting it may wait; one reaching the network after time
        passed defers): a wait in them goes on later from there, then back to the rest of this
        script's list and lists, in the state `back` gives (`_Waiting.frames`, `_back`)."""
        rest = self.rest
        self.resumable.append(self._resumable())
        try:
            for i, and_or in enumerate(script):
                self.rest = script[i:]
                if self.now > 0 and all(self.resumable) and self.defers(and_or):
                    raise _Waiting
                self.script([and_or])
        except _Waiting as waiting:
            if not waiting.frames:
                waiting.frames.append((self.rest, self.snapshot(), self.fs.cwd))
            waiting.frames.append((([rest[0][1:]] if rest[0][1:] else []) + rest[1:], *back))
            raise
        finally:
            self.rest = rest
            self.resumable.pop()

    def _resumable(self) -> bool:
        """Whether a wait in the script of a shell the command running runs can go on later and
        then back to this shell's lists: the command is the first of a top-level list of a shell
        that can itself, alone in its pipeline, without redirections or assignments, and in no
        loop, condition, function or capture."""
        node, rest = self.simple_running, self.rest
        if not rest or isinstance(rest[0], Background) or not all(self.resumable):
            return False
        pipeline = rest[0][0][1]
        return pipeline.commands == [node] and not pipeline.negate and not node.redirects and not node.assigns and \
            not (self.loops or self.conditions or self.captured or self.frames)

    def _lacks(self, program: str) -> bool:
        """Whether the container's image lacks `program` (bash in busybox's: `has_program`)."""
        image = self._image()
        return image is not None and not has_program(image, program)

    def _child_shell(self, script: Script, args: list[str], shell: str, options: set[str] = frozenset()) -> None:
        """A shell run as a command (`sh FILE ARGS`, `./run.sh`, `bash -ec SCRIPT`): `script` runs with
        the exported variables alone, `options` set (`invocation`) and `args` as `$0, $1...`; its
        status is the command's, and what it sets (variables, functions, traps, `cd`) is gone after it."""
        saved = dict(self.vars), set(self.exported), dict(self.functions), dict(self.traps), self.args, \
            set(self.options), self.shell, self.fs.cwd if isinstance(self.fs, ContainerFS) else None
        parent = self.snapshot()
        self.subshells += 1
        try:
            self.replaced(Replaced(script, args, shell))
            self.options |= options
            self.status = 0
            try:
                self._lists(script, (parent, saved[-1]))
            except Replaced as e:
                self._subshell_replaced(e)
            except (_Exit, _Aborted):
                pass
            _on_exit(self)
        finally:
            self.subshells -= 1
            (self.vars, self.exported, self.functions, self.traps, self.args, self.options, self.shell,
             cwd) = saved
            if cwd is not None and isinstance(self.fs, ContainerFS):
                self.fs.cwd = cwd


def _seq(args: list[str]) -> tuple[str, bool, list[int]] | None:
    """`seq [-w] [-s SEP] [FIRST [INC]] LAST` (integers): the separator (a new line by default),
    whether -w pads the numbers with zeros to one width, and the numbers; None for another use."""
    separator, wide = "\n", False
    while args and re.match(r"-[ws]", args[0]):
        if args[0] == "-w":
            wide, args = True, args[1:]
        elif args[0] == "-s" and len(args) > 1:
            separator, args = args[1], args[2:]
        elif args[0].startswith("-s") and len(args[0]) > 2:
            separator, args = args[0][2:], args[1:]
        else:
            return None
    if not 1 <= len(args) <= 3 or not all(re.fullmatch(r"-?\d+", a) for a in args):
        return None
    return separator, wide, [int(a) for a in args]


def _cannot_end(node: Loop) -> bool:
    """Whether the loop runs forever whatever its passes do: its condition is `true` (`false` for
    until) and no command of its body may leave it (break, exit, set: -e ends at a failure), nor
    is one named by an expansion."""
    [[(_, cond)]] = node.cond if len(node.cond) == 1 and len(node.cond[0]) == 1 else [[(None, None)]]
    if cond is None or cond.negate or len(cond.commands) != 1 or not isinstance(cond.commands[0], Simple):
        return False
    simple = cond.commands[0]
    if simple.assigns or simple.redirects or [literal(w) for w in simple.words] not in (
            [["false"]] if node.until else [["true"], [":"]]):
        return False

    return not _may_leave(node.body, 0)


def _may_leave(script: Script, depth: int) -> bool:
    """Whether a command of `script` (`depth` loops inside the loop in question) may end that loop:
    exit, set, exec, break (at its level, or `break N` deeper), or a command named by an expansion."""
    for and_or in script:
        for _, pipeline in and_or:
            for command in pipeline.commands:
                while isinstance(command, Redirected):
                    command = command.node
                if isinstance(command, Simple):
                    first = literal(command.words[0]) if command.words else ""
                    if first in (None, "exit", "set", "exec", "return", "eval") or \
                            first == "break" and (depth == 0 or len(command.words) > 1) or \
                            first == "continue" and depth > 0 and len(command.words) > 1:
                        return True
                elif isinstance(command, Case):
                    if any(_may_leave(body, depth) for _, body in command.items):
                        return True
                elif isinstance(command, If):
                    if any(_may_leave(c, depth) or _may_leave(b, depth) for c, b in command.branches) or \
                            _may_leave(command.otherwise or [], depth):
                        return True
                elif isinstance(command, Loop | For):
                    if _may_leave(getattr(command, "cond", []), depth + 1) or _may_leave(command.body, depth + 1):
                        return True
                elif _may_leave(command.body, depth):
                    return True
    return False


def _quoted(word: str) -> str:
    """A word as `set -x` shows it: in single quotes where a shell would read it otherwise."""
    if word and not re.search(r"[\s'\"\\$`|&;<>()*?~#{}]", word):
        return word
    return "'" + word.replace("'", "'\\''") + "'"


_ARITH = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
          ast.Lt: lambda a, b: a < b, ast.LtE: lambda a, b: a <= b, ast.Gt: lambda a, b: a > b,
          ast.GtE: lambda a, b: a >= b, ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b}
_EQUALITY = (ast.Eq, ast.NotEq)


def _int64(n: int) -> int:
    """`n` wrapped to a 64-bit signed integer, as dash's and bash's intmax_t arithmetic holds it."""
    return (n + (1 << 63)) % (1 << 64) - (1 << 63)


class _DivisionByZero(Exception):
    """`$((x / 0))`: the expression, and its text from the divisor on (bash's "error token")."""

    def __init__(self, at: int, expression: str = "", token: str = ""):
        super().__init__(expression)
        self.at, self.expression, self.token = at, expression, token


#: what `_arithmetic` rewrites for Python's parser: a variable (`${x}`, `$x`, `x`), `&&`, `||`, `/`, `!`
_ARITH_TOKEN = re.compile(r"\$\{([A-Za-z_]\w*)\}|\$([A-Za-z_]\w*)|\b([A-Za-z_]\w*)\b|&&|\|\||/|!(?!=)")
_ARITH_OPS = {"&&": " and ", "||": " or ", "/": "//", "!": "~"}  # (`!` as Python's `~`: C's precedence)


def _arithmetic(expression: str, variables: dict[str, str]) -> int:
    """`$((expression))` on 64-bit signed integers, as dash and bash work it out: + - * / % (each
    result wrapped, a quotient and remainder truncated toward zero as C's), comparisons and `!`
    (1 or 0; < > <= >= before == !=, each left to right), `&&`, `||`, parentheses, and variables
    by name or `$NAME` (unset or empty: 0); anything else (assignments) is not simulated. A zero
    divisor is `_DivisionByZero`, its token found in `expression` through where each character of
    the rewritten text came from."""
    if "~" in expression:  # (bitwise, not simulated)
        raise _Unknown
    text, origin, last = "", [], 0
    for m in _ARITH_TOKEN.finditer(expression):
        if m.group(0) in _ARITH_OPS:
            piece = _ARITH_OPS[m.group(0)]
        else:
            piece = (variables.get(m.group(1) or m.group(2) or m.group(3)) or "0").strip()
            if not re.fullmatch(r"-?\d+", piece):
                raise _Unknown
            piece = f"({piece})"
        text += expression[last:m.start()] + piece
        origin += [*range(last, m.start()), *[m.start()] * len(piece)]
        last = m.end()
    text += expression[last:]
    origin += range(last, len(expression))
    lead = len(text) - len(text.lstrip())
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        raise _Unknown from None
    try:
        return _evaluate(tree.body)
    except _DivisionByZero as e:
        at = origin[lead + e.at]
        operator = max(expression.rfind("/", 0, at), expression.rfind("%", 0, at))
        raise _DivisionByZero(at, expression, expression[operator + 1:].lstrip()) from None


def _evaluate(node: ast.expr) -> int:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return _int64(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd, ast.Invert)):
        value = _evaluate(node.operand)
        return int(not value) if isinstance(node.op, ast.Invert) else _int64(-value) if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BoolOp):  # short-circuit, as && and || are
        if isinstance(node.op, ast.And):
            return int(all(_evaluate(v) for v in node.values))
        return int(any(_evaluate(v) for v in node.values))
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod)):
        a, b = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, (ast.FloorDiv, ast.Mod)):
            if b == 0:
                raise _DivisionByZero(node.right.col_offset)
            q = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
            return _int64(q if isinstance(node.op, ast.FloorDiv) else a - b * q)
        return _int64(_ARITH[type(node.op)](a, b))
    if isinstance(node, ast.Compare) and all(type(op) in _ARITH for op in node.ops):
        # Python chains `a < b < c`; C compares (a < b) with c, its relations before its equalities
        values, ops = [_evaluate(node.left)], []
        for op, right in zip(node.ops, node.comparators):
            value = _evaluate(right)
            if isinstance(op, _EQUALITY):
                values.append(value)
                ops.append(op)
            else:
                values[-1] = int(_ARITH[type(op)](values[-1], value))
        result = values[0]
        for op, value in zip(ops, values[1:]):
            result = int(_ARITH[type(op)](result, value))
        return result
    raise _Unknown


def _glob_regex(text: str) -> str:
    """Unquoted pattern text as a regular expression: `*`, `?` and `[...]` (`[!...]` too) as a
    shell's glob matches them, a backslash quoting the next character."""
    out, i = "", 0
    while i < len(text):
        c = text[i]
        end = text.find("]", i + 2) if c == "[" else -1
        if c == "*":
            out += ".*"
        elif c == "?":
            out += "."
        elif c == "\\" and i + 1 < len(text):
            i += 1
            out += re.escape(text[i])
        elif end > 0:
            inner = text[i + 1:end]
            out += "[" + ("^" + inner[1:] if inner.startswith("!") else inner).replace("\\", "\\\\") + "]"
            i = end
        else:
            out += re.escape(c)
        i += 1
    return out


def _trimmed(value: str, pattern: str, op: str) -> str:
    """`${x%p}` (and `%%`, `#`, `##`): `value` less the shortest (`%`, `#`) or longest (`%%`, `##`)
    suffix (`%`) or prefix (`#`) that `pattern` matches; as it is where none does."""
    cuts = range(len(value) + 1)
    if op in ("%", "##"):  # the shortest suffix, the longest prefix: from the end
        cuts = reversed(cuts)
    for i in cuts:
        if op.startswith("%") and re.fullmatch(pattern, value[i:], re.S):
            return value[:i]
        if op.startswith("#") and re.fullmatch(pattern, value[:i], re.S):
            return value[i:]
    return value


def _seconds(arg: str) -> float | None:
    """`sleep`'s argument in seconds; None for one busybox's sleep refuses (a sign, `nan`). A
    number GNU's sleep reads and busybox's not (`1e3`, `0x10`) is not simulated."""
    if arg in ("inf", "infinity"):
        return math.inf
    m = _SLEEP.fullmatch(arg)
    if m:
        return float(m.group(1)) * _UNITS[m.group(2)]
    try:
        value = float(arg)
    except ValueError:
        return None
    if value >= 0:
        raise _Unknown
    return None


@dataclass(frozen=True)
class Step:
    """What one line typed at a `Shell` does: its output ((seconds after the line started, "stdout" or
    "stderr", text); endless for an endless loop, its passes marked where paced: `PASS`), how long it takes, and whether it ended the
    shell (`exit`); where it waits in a loop for its files (`wait.at` after it started, its
    seconds then infinite), the shell goes on with it then (`Shell.resume`)."""

    output: tuple[tuple[float, str, str | bytes], ...] | Iterator[tuple[float, str, str | bytes]]
    seconds: float
    exited: bool
    wait: Wait | None = None


class Shell:
    """`sh` reading its commands from stdin: each line runs as a `sh -c` script would, `$?` (`status`)
    and its variables (`env`: the container's environment, exported) carrying over, until `exit
    [N]` or the end of stdin (then the shell exits with `status`). A line that leaves a command
    unfinished (`while true; do`) waits for the next ones, prompting `> `. `files()`, where given,
    is the container's files, for the file commands; `cwd` the working directory (the container's
    workingDir), where `cd` goes from line to line; `terminal` the one it reads from, if any."""

    def __init__(self, files: Callable[[], ContainerFS] | None = None, cwd: str = "/",
                 env: dict[str, str] | None = None, terminal: Terminal | None = None):
        self.status = 0
        self.terminal = terminal
        self.files = files
        self.cwd = cwd
        self.vars = dict(env or {})
        self.exported = set(self.vars)
        self.vars["IFS"] = DEFAULT_IFS
        self.functions: dict[str, object] = {}
        self.traps: dict[str, str] = {}
        self.pending = ""
        #: the shells `chroot DIR` started, innermost last: the files and working directory of the
        #: shell each `exit` goes back to
        self.outer: list[tuple[Callable[[], ContainerFS], str]] = []

    def _files(self) -> ContainerFS:
        fs = self.files()
        fs.cwd = self.cwd
        return fs

    def prompt(self) -> str:
        """busybox sh's prompt (`\\w \\$ `): the working directory, `~` for root's home, then `#` for
        root and `$` for another user (simulated_identity); `> ` while a command is unfinished."""
        if self.pending:
            return "> "
        fs = self.files() if self.files else None
        mark = "#" if fs is None or identity.run_as(fs.pod, fs.container)[0] == 0 else "$"
        return ("~" + self.cwd[5:] if (self.cwd + "/").startswith("/root/") else self.cwd) + f" {mark} "

    def line(self, text: str, now: float) -> Step:
        """Run one line typed at `now` (the node's wall clock, epoch seconds)."""
        run = _Run(now, self.status, fs=self._files if self.files else None, stdin=_TERMINAL, interactive=True,
                   env=self.vars, seed=text, terminal=self.terminal)
        run.vars, run.exported, run.functions, run.traps = self.vars, self.exported, self.functions, self.traps
        source, self.pending = self.pending + text, ""
        try:
            _execute(parse(source), run)
        except Incomplete:
            self.pending = source + "\n"
            return Step((), 0.0, False)
        except _Unknown:  # what a shell would do that is not simulated
            run.errors.append((0, 0.0, _CANNOT_RUN))
            run.status = 2
        return self._step(run)

    def close(self, now: float) -> Step:
        """The end of stdin (EOF, ^D) ends the shell at `now`: its EXIT trap runs, as at `exit`."""
        run = _Run(now, self.status, fs=self._files if self.files else None, stdin=_TERMINAL, interactive=True,
                   terminal=self.terminal)
        run.vars, run.exported, run.functions, run.traps = self.vars, self.exported, self.functions, self.traps
        try:
            _on_exit(run)
        except _Unknown:
            run.errors.append((0, 0.0, _CANNOT_RUN))
        return self._step(run)

    def resume(self, wait: Wait, now: float) -> Step:
        """Go on at `now` with a line that waited in a loop for its files (`Step.wait`), on the
        files as they are now, as a container's command does."""
        later = wait.go_on(self._files(), now)
        if later is None:
            later = _Run(now, 2, interactive=True)
            later.vars, later.exported = self.vars, self.exported
            later.err(_CANNOT_RUN)
        return self._step(later)

    def _step(self, run: _Run) -> Step:
        """What `run` did to the shell (its status, variables and working directory carry over)."""
        self.status = run.status
        self.vars, self.exported, self.functions, self.traps = run.vars, run.exported, run.functions, run.traps
        if isinstance(run.fs, ContainerFS):
            self.cwd = run.fs.cwd
        exited = run.exited
        if run.entered is not None:  # `chroot DIR`: busybox's `sh -i` in DIR reads the next lines
            self.outer.append((self.files, self.cwd))
            files, root = self.files, run.entered
            self.files, self.cwd = (lambda: files().chrooted(root) or files()), "/"
        elif exited and self.outer:  # its `exit` goes back to the shell that ran chroot
            (self.files, self.cwd), exited = self.outer.pop(), False
        program = run.program()
        output = tuple(program.writes()) if program.repeat is None else itertools.chain(
            program.writes(), (e for e in program.repeat.timeline() if e[1] != "files"))
        return Step(output, run.now, exited, run.wait)


_CANNOT_RUN = "sh: nanokube's simulated shell cannot run this line\n"
