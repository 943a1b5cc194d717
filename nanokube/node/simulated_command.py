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
  `exit [N]`, joined by `;`, `&&`, `||`, `|` (each command's output the
  next one's stdin, one after the other) or new lines, its words quoted as
  a shell quotes them. A script with anything a shell would expand (`$`, a
  backquote, a glob, `~`), a background job, a subshell, a redirection of
  a numbered descriptor or another command is not interpreted at all.

Where the container's files are given (`fs`, simulated_fs: what exec and an
interactive shell see), the commands `kubectl cp` and people use on files
run too, as busybox's do (simulated_applets): `cat`, `ls [-1aAl]`, `mkdir [-p]`, `rm [-rf]`,
`touch`, `test`/`[` (-e -f -d -s -n -z, =, !=, !), `tar` (c, x, t; `f -`
for stdin or stdout, `-C DIR`; real archives, through tarfile), `wc`,
`md5sum`, `sha256sum`, `head`/`tail` (-n, -c, tail's +N: `kubectl cp
--retries` resumes with `tar cf - SRC | tail -c+N`), `hostname`, and a
script's `>`, `>>` and `<`. A command reading stdin gets what the exec client
sent (read to its end first). A container's own command runs them on a draft
of its files (simulated_fs.PodFiles.draft), as does exec's; the changes are
made, as the output is written, when their time comes on the node's clock
(`sleep 5; touch /tmp/ready` makes the file 5 s later, and not at all if
the container is stopped before). Without files these commands are not interpreted.

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
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone

from .simulated_applets import APPLETS, NoTerminal as _NoTerminal, Unknown as _Unknown, reads_data
from .simulated_fs import NOT_FOUND, ContainerFS, FsError

SHELLS = frozenset({"sh", "ash", "bash", "dash"})
#: images whose default command is a shell (`kubectl debug -it pod --image=busybox` runs it)
SHELL_IMAGES = frozenset({"busybox", "alpine", "ubuntu", "debian"})
#: what the script may not hold anywhere: what a shell expands, globs (`[` is the test command only
#: as a word of its own), and a numbered descriptor's redirection (`2>`, which the lexer cannot tell
#: from `2 >`)
_EXPANDS = re.compile(r"[$`*?]|\[(?=\S)|(^|\s)~|(^|[\s;&|])\d+[<>]")
_OPERATORS = frozenset({";", "&&", "||"})
_REDIRECTS = frozenset({">", ">>", "<"})
_PUNCTUATION = set(";&|<>()")
_SLEEP = re.compile(r"(\d+(?:\.\d*)?|\.\d+)([smhd]?)")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
#: what a command reads as stdin when it was sent nothing: an interactive shell's commands have a
#: terminal there, which is not simulated
_TERMINAL = None


@dataclass(frozen=True)
class Program:
    """How an interpreted command runs: what it writes to stdout and when (seconds after it
    started), how long it takes (math.inf: until it is stopped), and its exit code; what it
    writes to stderr ((its place among `output`, when, text)); and, worked out on a draft of the
    container's files, the changes it makes to them ((when, change, its arguments)), made when
    their time comes."""

    output: tuple[tuple[float, str | bytes], ...]
    seconds: float
    exit_code: int
    errors: tuple[tuple[int, float, str], ...] = ()
    changes: tuple = field(default=(), compare=False)

    def writes(self) -> list[tuple[float, str, str | bytes]]:
        """Everything written, in order: (when, "stdout" or "stderr", text)."""
        out: list[tuple[float, str, str | bytes]] = [(t, "stdout", x) for t, x in self.output]
        for place, t, x in reversed(self.errors):
            out.insert(place, (t, "stderr", x))
        return out

    def timeline(self) -> list[tuple[float, str, object]]:
        """What it writes and the changes it makes to its files, in order: (when, "stdout",
        "stderr" or "files", the text or the change); a change comes before what is written then."""
        return sorted([*((c[0], "files", c) for c in self.changes), *self.writes()], key=lambda e: e[0])


#: the container's files, or what gives them when a command first needs them
Files = ContainerFS | Callable[[], ContainerFS] | None


def interpret(argv: list[str], now: float = 0.0, fs: Files = None, stdin: bytes = b"") -> Program | None:
    """The program `argv` runs when it starts at `now` (the node's wall clock, epoch seconds), or
    None when it is not one of the commands interpreted here. With `fs` (the container's files) the
    file commands run too, reading `stdin`."""
    if not argv:
        return None
    try:
        if os.path.basename(argv[0]) in SHELLS:
            if len(argv) < 3 or argv[1] != "-c":
                return None
            return _execute(_parse(argv[2]), _Run(now, fs=fs, stdin=stdin)).program()
        run = _Run(now, fs=fs, stdin=stdin)
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


def wants_stdin(argv: list[str]) -> bool:
    """Whether the interpreted `argv` reads the data on its stdin (`tar xf -`, `cat`, `sh -c 'cat >
    /f'`): exec reads what the client sends to its end before running it."""
    try:
        if os.path.basename(argv[0]) in SHELLS:
            commands = _parse(argv[2]) if len(argv) >= 3 and argv[1] == "-c" else []
        else:
            commands = [(";", [(list(argv), [])])]
        return any(reads_data(words) and not any(kind == "<" for kind, _ in redirects)
                   for _, [(words, redirects), *_] in commands)  # a pipe feeds the others
    except (_Unknown, IndexError):
        return False


#: one simple command: its words and its redirections
_Simple = tuple[list[str], list[tuple[str, str]]]
#: one command of a script: the operator before it (";", "&&", "||") and its pipeline's commands
_Command = tuple[str, list[_Simple]]


def _parse(script: str) -> list[_Command]:
    """The commands of a `sh -c` script joined by `;`, `&&`, `||` and new lines, each a pipeline
    (`|`) of commands with their `>`, `>>` and `<`; _Unknown for anything else a shell would do."""
    if _EXPANDS.search(script):
        raise _Unknown
    lexer = shlex.shlex(script.replace("\n", ";"), posix=True, punctuation_chars=";&|<>()")
    lexer.whitespace_split = True  # words split at blanks and operators only (`a+b`, `-c+0` are one)
    try:
        tokens = list(lexer)
    except ValueError:  # an unterminated quote: the shell's syntax error is not simulated
        raise _Unknown from None
    commands: list[_Command] = []
    words: list[str] = []
    redirects: list[tuple[str, str]] = []
    stages: list[_Simple] = []
    op = ";"
    tokens.append(";")
    i = 0
    while i < len(tokens):
        token = tokens[i]
        i += 1
        if token in _REDIRECTS:
            if i >= len(tokens) or set(tokens[i]) <= _PUNCTUATION:
                raise _Unknown  # a redirection to nowhere: the shell's syntax error is not simulated
            redirects.append((token, tokens[i]))
            i += 1
            continue
        if not set(token) <= _PUNCTUATION:
            words.append(token)
            continue
        if token == "|" and words:
            stages.append((words, redirects))
            words, redirects = [], []
            continue
        if token not in _OPERATORS or (not words and (token != ";" or redirects or stages)):
            raise _Unknown  # a subshell, a background job, or `&&` or `|` with nothing before it
        if words:
            commands.append((op, [*stages, (words, redirects)]))
        if words or token != ";":
            op = token
        words, redirects, stages = [], [], []
    return commands


def _execute(commands: list[_Command], run: _Run) -> _Run:
    for op, stages in commands:
        if op == ";" or (op == "&&") == (run.status == 0):
            run.pipeline(stages)
            if run.exited or math.isinf(run.now):  # what follows never runs
                break
    return run


class _Run:
    """The state of an interpreted run: the clock (seconds since it started), output, status, and
    the container's files and what is left of stdin, where given."""

    def __init__(self, started: float, status: int = 0, fs: Files = None,
                 stdin: bytes | None = b"", interactive: bool = False):
        self.started = started
        self.now = 0.0
        self.output: list[tuple[float, str | bytes]] = []
        self.status = status
        self.exited = False
        self.fs = fs
        self.stdin = stdin
        #: a command not interpreted is not found (its message on stderr), as a shell says, instead of
        #: leaving the whole run uninterpreted
        self.interactive = interactive
        self.errors: list[tuple[int, float, str]] = []  # (its place in `output`, when, text)

    def program(self) -> Program:
        journal = self.fs.journal or () if isinstance(self.fs, ContainerFS) else ()
        changes = tuple((t - self.started, *change) for t, *change in journal)
        return Program(tuple(self.output), self.now, self.status, tuple(self.errors), changes)

    def err(self, text: str) -> None:
        """Write to stderr."""
        self.errors.append((len(self.output), self.now, text))

    def out(self, data: str | bytes) -> None:
        """Write to stdout."""
        if data:
            self.output.append((self.now, data))

    def _files(self) -> ContainerFS:
        if self.fs is None:
            raise _Unknown
        if callable(self.fs):
            self.fs = self.fs()
        self.fs.now = self.started + self.now
        return self.fs

    def read_stdin(self) -> bytes:
        """All that is left of stdin (nothing after)."""
        if self.stdin is _TERMINAL:
            raise _NoTerminal
        data, self.stdin = self.stdin, b""
        return data

    def pipeline(self, stages: list[_Simple]) -> None:
        """Commands joined by `|`, one after the other: what each writes to stdout is the next one's
        stdin; the pipeline's status is the last one's."""
        rest, piped = self.stdin, b""
        for i, (words, redirects) in enumerate(stages):
            last = i == len(stages) - 1
            if i:
                self.stdin = piped
            mark = len(self.output)
            self.simple(words, redirects)
            if i == 0:
                rest = self.stdin
            if not last:
                piped = b"".join(x if isinstance(x, bytes) else x.encode() for _, x in self.output[mark:])
                del self.output[mark:]
                self.errors = [(min(place, mark), t, x) for place, t, x in self.errors]
            if self.exited:
                break
        self.stdin = rest

    def simple(self, words: list[str], redirects: list[tuple[str, str]]) -> None:
        """One command of a script, its redirections applied: stdout into a file (`>` empties it
        first, `>>` adds to it), stdin from one (`<`), as a shell opens them before it runs."""
        if not redirects:
            return self._command_or_not_found(words)
        fs = self._files()
        saved, into = self.stdin, None
        for kind, target in redirects:
            try:
                if kind == "<":
                    self.stdin = b"" if fs.normal(target) == "/dev/null" else fs.read(target)
                    continue
                into = None if fs.normal(target) == "/dev/null" else (target, kind == ">>")
                if into:
                    fs.write(target, b"", append=kind == ">>")
            except FsError as e:
                opening = "open" if kind == "<" else "create"
                reason = {NOT_FOUND: "no such file" if kind == "<" else "nonexistent directory"}.get(e.reason,
                                                                                                 e.reason)
                self.err(f"sh: can't {opening} {target}: {reason}\n")
                self.status = 1
                self.stdin = saved
                return None
        mark = len(self.output)
        self._command_or_not_found(words)
        written: list[tuple[float, str | bytes]] = []
        if any(kind != "<" for kind, _ in redirects):  # its stdout went to the file (or /dev/null)
            written = self.output[mark:]
            del self.output[mark:]
            self.errors = [(min(place, mark), t, x) for place, t, x in self.errors]
        if into:
            data = b"".join(x if isinstance(x, bytes) else x.encode() for _, x in written)
            try:
                fs.write(into[0], data, append=True)
            except FsError as e:  # the file went meanwhile (`rm f > f`)
                self.err(f"sh: can't create {into[0]}: {e.reason}\n")
        if any(kind == "<" for kind, _ in redirects):
            self.stdin = saved
        return None

    def _command_or_not_found(self, words: list[str]) -> None:
        try:
            self.command(words, in_shell=True)
        except _NoTerminal:
            self.err(f"sh: {words[0]}: nanokube's simulated shell gives a command no terminal to read\n")
            self.status = 1
        except _Unknown:
            if not self.interactive:
                raise
            self.err(f"sh: {words[0]}: not found\n")
            self.status = 127

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
        elif name in APPLETS:
            self.status = APPLETS[name](self, self._files(), name, args)
        else:
            raise _Unknown


def _seconds(arg: str) -> float:
    if arg in ("inf", "infinity"):
        return math.inf
    m = _SLEEP.fullmatch(arg)
    if not m:
        raise _Unknown
    return float(m.group(1)) * _UNITS[m.group(2)]


@dataclass(frozen=True)
class Step:
    """What one line typed at a `Shell` does: its output ((seconds after the line started, "stdout" or
    "stderr", text)), how long it takes, and whether it ended the shell (`exit`)."""

    output: tuple[tuple[float, str, str | bytes], ...]
    seconds: float
    exited: bool


class Shell:
    """`sh` reading its commands from stdin: each line runs as a `sh -c` script would, `$?` (`status`)
    carrying over, until `exit [N]` or the end of stdin (then the shell exits with `status`).
    `files()`, where given, is the container's files, for the file commands; `cwd` the working
    directory (the container's workingDir), where `cd` goes from line to line."""

    def __init__(self, files: Callable[[], ContainerFS] | None = None, cwd: str = "/"):
        self.status = 0
        self.files = files
        self.cwd = cwd

    def _files(self) -> ContainerFS:
        fs = self.files()
        fs.cwd = self.cwd
        return fs

    def prompt(self) -> str:
        """busybox sh's prompt for root (`\\w # `): the working directory, `~` for root's home."""
        return ("~" + self.cwd[5:] if (self.cwd + "/").startswith("/root/") else self.cwd) + " # "

    def line(self, text: str, now: float) -> Step:
        """Run one line typed at `now` (the node's wall clock, epoch seconds)."""
        run = _Run(now, self.status, fs=self._files if self.files else None, stdin=_TERMINAL, interactive=True)
        try:
            _execute(_parse(text), run)
        except _Unknown:  # what a shell would expand or pipe
            run.errors.append((0, 0.0, "sh: nanokube's simulated shell runs no expansions or pipes\n"))
            run.status = 2
        self.status = run.status
        if isinstance(run.fs, ContainerFS):
            self.cwd = run.fs.cwd
        return Step(tuple(run.program().writes()), run.now, run.exited)
