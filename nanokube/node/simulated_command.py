"""The few commands a simulated container interprets, so that what people type
first ends as it would on a real node.

The simulated runtime runs no processes: a container lives as long as its
pod's annotations say (lifecycle.py), by default forever. Yet `kubectl create
job hello --image=busybox -- echo hi` should complete, print `hi` in its log
and exit 0, and `-- sh -c 'sleep 2; exit 3'` fail with 3 two seconds later on
the node's clock. So a container's command (its `command` then its `args`) is
read as one of a small, closed set; anything else is left to the annotations
(`interpret` returns None), as before:

- `true`, `false`, `:`, `echo [-n] WORD...` (no escapes, as busybox's echo),
  `sleep N...` (seconds, summed; a suffix s, m, h or d as busybox's; `inf`
  or `infinity`, and `tail -f /dev/null`, run until stopped), `date`
  (the node's clock, in UTC, as busybox prints it: the CronJob docs'
  `date; echo Hello from the Kubernetes cluster`), each by name or path;
- `sh -c SCRIPT` (also ash, bash, dash; by name or path): SCRIPT is those and
  `exit [N]`, joined by `;`, `&&`, `||` or new lines, its words quoted as a
  shell quotes them. A script with anything a shell would expand or redirect
  (`$`, a backquote, a glob, `~`), a pipe, a background job or another
  command is not interpreted at all.

It is not a shell: nothing is expanded, and no other command is recognised.
A shell started without `-c` (`kubectl exec -it pod -- sh`) reads its stdin
line by line (`Shell`): each line runs as such a script, and a command not
interpreted answers as busybox's sh does for one not in the image
(`sh: X: not found`, status 127), so the session goes on.
"""

from __future__ import annotations

import math
import os
import re
import shlex
from dataclasses import dataclass
from datetime import datetime, timezone

SHELLS = frozenset({"sh", "ash", "bash", "dash"})
#: images whose default command is a shell (`kubectl debug -it pod --image=busybox` runs it)
SHELL_IMAGES = frozenset({"busybox", "alpine", "ubuntu", "debian"})
#: what the script may not hold anywhere: what a shell expands, and globs
_EXPANDS = re.compile(r"[$`*?\[]|(^|\s)~")
_OPERATORS = frozenset({";", "&&", "||"})
_SLEEP = re.compile(r"(\d+(?:\.\d*)?|\.\d+)([smhd]?)")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


@dataclass(frozen=True)
class Program:
    """How an interpreted command runs: what it writes to stdout and when (seconds after it
    started), how long it takes (math.inf: until it is stopped), and its exit code."""

    output: tuple[tuple[float, str], ...]
    seconds: float
    exit_code: int


class _Unknown(Exception):
    """The command is not one this module interprets."""


def interpret(argv: list[str], now: float = 0.0) -> Program | None:
    """The program `argv` runs when it starts at `now` (the node's wall clock, epoch seconds), or
    None when it is not one of the commands interpreted here."""
    if not argv:
        return None
    try:
        if os.path.basename(argv[0]) in SHELLS:
            if len(argv) < 3 or argv[1] != "-c":
                return None
            return _script(argv[2], now)
        run = _Run(now)
        run.command(argv, in_shell=False)
        return run.program()
    except _Unknown:
        return None


def reads_stdin(argv: list[str], image: str) -> bool:
    """Whether the container runs a shell reading its commands from stdin: a shell named alone, or no
    command in an image whose default is one."""
    if argv:
        return len(argv) == 1 and os.path.basename(argv[0]) in SHELLS
    name = image.split("@")[0].rsplit("/", 1)[-1].split(":")[0]
    return name in SHELL_IMAGES


class _Run:
    """The state of an interpreted run: the clock (seconds since it started), output, status."""

    def __init__(self, started: float, status: int = 0):
        self.started = started
        self.now = 0.0
        self.output: list[tuple[float, str]] = []
        self.status = status
        self.exited = False
        #: interactive: a command not interpreted is not found (its message on stderr), as a shell says
        self.errors: list[tuple[int, float, str]] | None = None  # (its place in `output`, when, text)

    def program(self) -> Program:
        return Program(tuple(self.output), self.now, self.status)

    def command(self, words: list[str], in_shell: bool) -> None:
        name, args = os.path.basename(words[0]), words[1:]
        if name in ("true", ":"):
            self.status = 0
        elif name == "false":
            self.status = 1
        elif name == "echo":
            newline = not (args and args[0] == "-n")
            self.output.append((self.now, " ".join(args[0 if newline else 1:]) + ("\n" if newline else "")))
            self.status = 0
        elif name == "date" and args in ([], ["-u"]):
            d = datetime.fromtimestamp(self.started + self.now, timezone.utc)
            self.output.append((self.now, f"{d:%a %b} {d.day:2d} {d:%H:%M:%S} UTC {d.year}\n"))
            self.status = 0
        elif name == "tail" and args == ["-f", "/dev/null"]:
            self.now = math.inf
        elif name == "sleep" and args:
            self.now += sum(_seconds(a) for a in args)
            self.status = 0
        elif name == "exit" and in_shell and len(args) <= 1:
            if args:
                if not args[0].isdigit():
                    raise _Unknown
                self.status = int(args[0]) & 255
            self.exited = True
        else:
            raise _Unknown


def _seconds(arg: str) -> float:
    if arg in ("inf", "infinity"):
        return math.inf
    m = _SLEEP.fullmatch(arg)
    if not m:
        raise _Unknown
    return float(m.group(1)) * _UNITS[m.group(2)]


def _script(script: str, now: float) -> Program:
    """A `sh -c` script of interpreted commands joined by `;`, `&&`, `||` and new lines."""
    return _execute(script, _Run(now)).program()


def _execute(script: str, run: _Run) -> _Run:
    if _EXPANDS.search(script):
        raise _Unknown
    lexer = shlex.shlex(script.replace("\n", ";"), posix=True, punctuation_chars=";&|<>()")
    try:
        tokens = list(lexer)
    except ValueError:  # an unterminated quote: the shell's syntax error is not simulated
        raise _Unknown from None
    words, op = [], ";"
    for token in [*tokens, ";"]:
        if token not in _OPERATORS and not set(token) <= set(";&|<>()"):
            words.append(token)
            continue
        if token not in _OPERATORS or (not words and token != ";"):
            raise _Unknown  # a pipe, a redirection, a subshell, a background job, or `&&` with nothing before it
        if words and (op == ";" or (op == "&&") == (run.status == 0)):
            try:
                run.command(words, in_shell=True)
            except _Unknown:
                if run.errors is None:
                    raise
                run.errors.append((len(run.output), run.now, f"sh: {words[0]}: not found\n"))
                run.status = 127
            if run.exited or math.isinf(run.now):  # what follows never runs
                break
        if words or token != ";":
            op = token
        words = []
    return run


@dataclass(frozen=True)
class Step:
    """What one line typed at a `Shell` does: its output ((seconds after the line started, "stdout" or
    "stderr", text)), how long it takes, and whether it ended the shell (`exit`)."""

    output: tuple[tuple[float, str, str], ...]
    seconds: float
    exited: bool


class Shell:
    """`sh` reading its commands from stdin: each line runs as a `sh -c` script would, `$?` (`status`)
    carrying over, until `exit [N]` or the end of stdin (then the shell exits with `status`)."""

    def __init__(self):
        self.status = 0

    def line(self, text: str, now: float) -> Step:
        """Run one line typed at `now` (the node's wall clock, epoch seconds)."""
        run = _Run(now, self.status)
        run.errors = []
        try:
            _execute(text, run)
        except _Unknown:  # what a shell would expand, redirect or pipe
            run.errors.append((0, 0.0, "sh: nanokube's simulated shell runs no expansions, pipes or redirections\n"))
            run.status = 2
        self.status = run.status
        out = [(t, "stdout", x) for t, x in run.output]
        for place, t, x in reversed(run.errors):
            out.insert(place, (t, "stderr", x))
        return Step(tuple(out), run.now, run.exited)
