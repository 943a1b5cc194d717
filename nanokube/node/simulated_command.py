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
run too, as busybox's do: `cat`, `ls [-1aAl]`, `mkdir [-p]`, `rm [-rf]`,
`touch`, `test`/`[` (-e -f -d -s -n -z, =, !=, !), `tar` (c, x, t; `f -`
for stdin or stdout, `-C DIR`; real archives, through tarfile), `wc`,
`md5sum`, `sha256sum`, `head`/`tail` (-n, -c, tail's +N: `kubectl cp
--retries` resumes with `tar cf - SRC | tail -c+N`), `hostname`, and a
script's `>`, `>>` and `<`. A command reading stdin gets what the exec client
sent (read to its end first). A container's own command runs them on a draft
of its files (simulated_fs.PodFiles.draft), the changes made as it starts;
exec's as it is interpreted; the output either way on the node's clock, as
above. Without files these commands are not interpreted.

It is not a shell: nothing is expanded, and no other command is recognised.
A shell started without `-c` (`kubectl exec -it pod -- sh`) reads its stdin
line by line (`Shell`): each line runs as such a script, and a command not
interpreted answers as busybox's sh does for one not in the image
(`sh: X: not found`, status 127), so the session goes on.
"""

from __future__ import annotations

import hashlib
import io
import math
import os
import re
import shlex
import tarfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone

from .simulated_fs import NOT_FOUND, ContainerFS, Dir, FsError

SHELLS = frozenset({"sh", "ash", "bash", "dash"})
#: images whose default command is a shell (`kubectl debug -it pod --image=busybox` runs it)
SHELL_IMAGES = frozenset({"busybox", "alpine", "ubuntu", "debian"})
#: what the script may not hold anywhere: what a shell expands, globs (`[` is the test command only
#: as a word of its own), and a numbered descriptor's redirection (`2>`, which the lexer cannot tell
#: from `2 >`)
_EXPANDS = re.compile(r"[$`*?]|\[(?=\S)|(^|\s)~|\d[<>]")
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
    container's files, the changes it makes to them (done when the container starts)."""

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


class _Unknown(Exception):
    """The command is not one this module interprets."""


class _NoTerminal(_Unknown):
    """A command at an interactive shell reads its stdin, the terminal, which is not simulated."""


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
        return any(_reads_data(words) and not any(kind == "<" for kind, _ in redirects)
                   for _, [(words, redirects), *_] in commands)  # a pipe feeds the others
    except (_Unknown, IndexError):
        return False


def _reads_data(words: list[str]) -> bool:
    name, args = os.path.basename(words[0]), words[1:]
    if name == "cat":
        return not args or "-" in args
    if name == "tar":
        opts = _tar_options(args)
        return opts.mode in ("x", "t") and opts.file == "-"
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
        changes = tuple(self.fs.journal or ()) if isinstance(self.fs, ContainerFS) else ()
        return Program(tuple(self.output), self.now, self.status, tuple(self.errors), changes)

    def _err(self, text: str) -> None:
        self.errors.append((len(self.output), self.now, text))

    def _out(self, data: str | bytes) -> None:
        if data:
            self.output.append((self.now, data))

    def _files(self) -> ContainerFS:
        if self.fs is None:
            raise _Unknown
        if callable(self.fs):
            self.fs = self.fs()
        self.fs.now = self.started + self.now
        return self.fs

    def _read_stdin(self) -> bytes:
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
                self._err(f"sh: can't {opening} {target}: {reason}\n")
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
                self._err(f"sh: can't create {into[0]}: {e.reason}\n")
        if any(kind == "<" for kind, _ in redirects):
            self.stdin = saved
        return None

    def _command_or_not_found(self, words: list[str]) -> None:
        try:
            self.command(words, in_shell=True)
        except _NoTerminal:
            self._err(f"sh: {words[0]}: nanokube's simulated shell gives a command no terminal to read\n")
            self.status = 1
        except _Unknown:
            if not self.interactive:
                raise
            self._err(f"sh: {words[0]}: not found\n")
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
        elif name in _FILE_COMMANDS:
            self.status = _FILE_COMMANDS[name](self, self._files(), name, args)
        else:
            raise _Unknown


def _seconds(arg: str) -> float:
    if arg in ("inf", "infinity"):
        return math.inf
    m = _SLEEP.fullmatch(arg)
    if not m:
        raise _Unknown
    return float(m.group(1)) * _UNITS[m.group(2)]


# --- the file commands, as busybox's word their output and errors: each gives its exit status ---

def _flags(args: list[str], allowed: str) -> tuple[set[str], list[str]]:
    """The single-letter options before the operands (`-rf`), and the operands; _Unknown for others."""
    flags: set[str] = set()
    while args and args[0].startswith("-") and args[0] != "-":
        if args[0] == "--":
            return flags, args[1:]
        if not set(args[0][1:]) <= set(allowed):
            raise _Unknown
        flags |= set(args[0][1:])
        args = args[1:]
    return flags, args


def _cat(run: _Run, fs: ContainerFS, name: str, args: list[str]) -> int:
    _, files = _flags(args, "")
    status = 0
    for path in files or ["-"]:
        if path == "-":
            run._out(run._read_stdin())
            continue
        try:
            run._out(fs.read(path))
        except FsError as e:
            run._err(f"cat: read error: {e.reason}\n" if e.reason == "Is a directory"
                     else f"cat: can't open '{path}': {e.reason}\n")
            status = 1
    return status


def _ls(run: _Run, fs: ContainerFS, name: str, args: list[str]) -> int:
    flags, paths = _flags(args, "1aAl")
    status, listed = 0, []
    files, dirs = [], []
    for path in paths or ["."]:
        node = fs.lookup(path)
        if node is None:
            run._err(f"ls: {path}: {NOT_FOUND}\n")
            status = 1
        elif isinstance(node, Dir):
            dirs.append((path, node))
        else:
            files.append((path, node))
    for path, node in files:
        listed.append(_ls_line(path, node, "l" in flags))
    if files and dirs:
        listed.append("")
    for i, (path, node) in enumerate(dirs):
        if len(paths) > 1:
            listed.append(("" if i == 0 else "\n") + f"{path}:")
        names = sorted(node.entries)
        if "a" in flags:
            names = [".", "..", *names]
        elif "A" not in flags:
            names = [n for n in names if not n.startswith(".")]
        if "l" in flags:
            listed.append(f"total {sum(1 for _ in names)}")
        listed.extend(_ls_line(n, node.entries.get(n, node), "l" in flags) for n in names)
    run._out("".join(line + "\n" for line in listed))
    return status


def _ls_line(name: str, node, long: bool) -> str:
    if not long:
        return name
    kind = "d" if isinstance(node, Dir) else "-"
    bits = "".join(c if node.mode & (1 << (8 - i)) else "-" for i, c in enumerate("rwxrwxrwx"))
    if node.mode & 0o1000:
        bits = bits[:8] + ("t" if bits[8] == "x" else "T")
    size = 4096 if isinstance(node, Dir) else len(node.data)
    d = datetime.fromtimestamp(node.mtime, timezone.utc)
    return f"{kind}{bits}    1 root     root     {size:>9} {d:%b} {d.day:2d} {d:%H:%M} {name}"


def _mkdir(run: _Run, fs: ContainerFS, name: str, args: list[str]) -> int:
    flags, paths = _flags(args, "p")
    status = 0
    for path in paths:
        try:
            fs.mkdir(path, parents="p" in flags)
        except FsError as e:
            run._err(f"mkdir: can't create directory '{path}': {e.reason}\n")
            status = 1
    return status


def _rm(run: _Run, fs: ContainerFS, name: str, args: list[str]) -> int:
    flags, paths = _flags(args, "rRf")
    status = 0
    for path in paths:
        node = fs.lookup(path)
        if node is None:
            if "f" not in flags:
                run._err(f"rm: can't remove '{path}': {NOT_FOUND}\n")
                status = 1
            continue
        if isinstance(node, Dir) and not flags & {"r", "R"}:
            run._err(f"rm: '{path}' is a directory\n")
            status = 1
            continue
        try:
            fs.remove(path, recursive=True)
        except FsError as e:
            run._err(f"rm: can't remove '{path}': {e.reason}\n")
            status = 1
    return status


def _touch(run: _Run, fs: ContainerFS, name: str, args: list[str]) -> int:
    _, paths = _flags(args, "c")
    status = 0
    for path in paths:
        node = fs.lookup(path)
        try:
            if node is None:
                fs.write(path, b"")
            elif fs.lookup(path) is not None and not isinstance(node, Dir):
                fs.write(path, node.data)
        except FsError as e:
            run._err(f"touch: {path}: {e.reason}\n")
            status = 1
    return status


def _test(run: _Run, fs: ContainerFS, name: str, args: list[str]) -> int:
    if name == "[":
        if not args or args[-1] != "]":
            run._err("sh: [: missing ]\n")
            return 2
        args = args[:-1]
    negate = False
    if args[:1] == ["!"]:
        negate, args = True, args[1:]
    if len(args) == 2 and args[0] in ("-e", "-f", "-d", "-s"):
        node = fs.lookup(args[1])
        ok = node is not None and {"-e": True, "-f": not isinstance(node, Dir), "-d": isinstance(node, Dir),
                                   "-s": isinstance(node, Dir) or bool(getattr(node, "data", b""))}[args[0]]
    elif len(args) == 2 and args[0] in ("-n", "-z"):
        ok = bool(args[1]) == (args[0] == "-n")
    elif len(args) == 3 and args[1] in ("=", "==", "!="):
        ok = (args[0] == args[2]) == (args[1] != "!=")
    elif len(args) <= 1:
        ok = bool(args and args[0])
    else:
        raise _Unknown
    return 0 if ok != negate else 1


@dataclass
class _TarOptions:
    mode: str | None = None  # c, x or t
    file: str = "-"
    directory: str | None = None
    verbose: bool = False
    touch: bool = False  # m: extracted files get the time they are extracted
    names: tuple[str, ...] = ()


#: options tar takes and ignores here: who owns what, permissions (always root's own here)
_TAR_IGNORED = frozenset({"--no-same-permissions", "--no-same-owner", "--same-owner", "--same-permissions",
                          "--numeric-owner"})


def _tar_options(args: list[str]) -> _TarOptions:
    """tar's options: bundled the old way (`cf -`, each letter that takes a value taking the next
    word) or with dashes (`-xmf - -C /dir`); _Unknown for one not simulated (compression too)."""
    opts, names = _TarOptions(), []
    args = list(args)
    old_style = bool(args) and not args[0].startswith("-")
    if old_style:
        args[0] = "-" + args[0]
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--":
            names += args[i:]
            break
        if arg in _TAR_IGNORED:
            continue
        if arg.startswith("--directory=") or arg.startswith("--file="):
            key, _, value = arg[2:].partition("=")
            setattr(opts, key, value)
            continue
        if arg.startswith("--"):
            raise _Unknown
        if not arg.startswith("-") or arg == "-":
            names.append(arg)
            continue
        letters, old = arg[1:], old_style and i == 1  # old: each value is the next word
        for j, letter in enumerate(letters):
            if letter in "cxt":
                if opts.mode not in (None, letter):
                    raise _Unknown
                opts.mode = letter
            elif letter in "fC":
                inline = "" if old else letters[j + 1:]  # `-f-`, `-C/dir`
                if inline:
                    value = inline
                elif i < len(args):
                    value, i = args[i], i + 1
                else:
                    raise _Unknown
                setattr(opts, "file" if letter == "f" else "directory", value)
                if inline:
                    break
            elif letter == "v":
                opts.verbose = True
            elif letter == "m":
                opts.touch = True
            elif letter not in "op":
                raise _Unknown
    opts.names = tuple(names)
    return opts


def _tar(run: _Run, fs: ContainerFS, name: str, args: list[str]) -> int:
    opts = _tar_options(args)
    if opts.mode is None:
        run._err("tar: need to specify one of -c/-x/-t\n")
        return 1
    base = opts.directory or "/"
    if not isinstance(fs.lookup(base), Dir):
        run._err(f"tar: can't change directory to '{base}': {NOT_FOUND}\n")
        return 1
    if opts.mode == "c":
        return _tar_create(run, fs, opts, base)
    data = run._read_stdin() if opts.file == "-" else None
    if data is None:
        try:
            data = fs.read(fs.normal(opts.file, base))
        except FsError as e:
            run._err(f"tar: can't open '{opts.file}': {e.reason}\n")
            return 1
    if not data:
        run._err("tar: short read\n")
        return 1
    try:
        archive = tarfile.open(fileobj=io.BytesIO(data), mode="r:")
        members = archive.getmembers()
    except tarfile.TarError:
        run._err("tar: invalid tar magic\n")
        return 1
    status, warned = 0, False
    for member in members:
        if opts.mode == "t" or opts.verbose:
            run._out(member.name + ("/" if member.isdir() else "") + "\n")
        if opts.mode == "t":
            continue
        rel = member.name
        if rel.startswith("/"):
            rel = rel.lstrip("/")
            if not warned:
                run._err("tar: removing leading '/' from member names\n")
                warned = True
        target = fs.normal(rel, base)
        try:
            if member.isdir():
                fs.mkdir(target, parents=True)
            elif member.isfile():
                fs.mkdir(os.path.dirname(target), parents=True)
                content = archive.extractfile(member).read()
                fs.write(target, content, mode=member.mode & 0o7777, mtime=None if opts.touch else member.mtime)
            else:
                run._err(f"tar: {member.name}: nanokube's simulated files hold no links or devices: skipped\n")
        except FsError as e:
            run._err(f"tar: can't open '{rel}': {e.reason}\n")
            status = 1
    return status


def _tar_create(run: _Run, fs: ContainerFS, opts: _TarOptions, base: str) -> int:
    """An archive of `opts.names` (relative to `base`), as GNU-format tar writes it, to stdout or
    a file."""
    if not opts.names:
        run._err("tar: empty archive\n")
        return 1
    buf = io.BytesIO()
    failed, warned = False, False
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as archive:
        for path in opts.names:
            node = fs.lookup(fs.normal(path, base))
            if node is None:
                run._err(f"tar: {path}: {NOT_FOUND}\n")
                failed = True
                continue
            member = path
            if member.startswith("/"):
                member = member.lstrip("/") or "."
                if not warned:
                    run._err("tar: removing leading '/' from member names\n")
                    warned = True
            _tar_add(archive, member.rstrip("/") or ".", node, opts.verbose and run)
    if failed:
        run._err("tar: error exit delayed from previous errors\n")
    if opts.file == "-":
        run._out(buf.getvalue())
    else:
        try:
            fs.write(fs.normal(opts.file, base), buf.getvalue())
        except FsError as e:
            run._err(f"tar: can't open '{opts.file}': {e.reason}\n")
            return 1
    return 1 if failed else 0


def _tar_add(archive: tarfile.TarFile, member: str, node, verbose) -> None:
    info = tarfile.TarInfo(member)
    info.mode, info.mtime = node.mode, int(node.mtime)
    info.uname = info.gname = "root"
    if verbose:
        verbose._err(member + ("/" if isinstance(node, Dir) else "") + "\n")
    if isinstance(node, Dir):
        info.type = tarfile.DIRTYPE
        archive.addfile(info)
        for child in sorted(node.entries):
            _tar_add(archive, f"{member}/{child}", node.entries[child], verbose)
        return
    info.size = len(node.data)
    archive.addfile(info, io.BytesIO(node.data))


def _inputs(run: _Run, fs: ContainerFS, name: str, files: list[str]):
    """(name, data) of each file (`-` or none: stdin), an error said for each that cannot be read;
    the last is the exit status (0, or 1 when one could not be read)."""
    status = 0
    for path in files or ["-"]:
        if path == "-":
            yield "-", run._read_stdin()
            continue
        try:
            yield path, fs.read(path)
        except FsError as e:
            run._err(f"{name}: can't open '{path}': {e.reason}\n")
            status = 1
    yield None, status


def _wc(run: _Run, fs: ContainerFS, name: str, args: list[str]) -> int:
    flags, files = _flags(args, "clw")
    flags = flags or {"l", "w", "c"}
    for path, data in _inputs(run, fs, name, files):
        if path is None:
            return data
        counts = {"l": data.count(b"\n"), "w": len(data.split()), "c": len(data)}
        line = " ".join(str(counts[f]) for f in "lwc" if f in flags)
        run._out(line + ("" if path == "-" else f" {path}") + "\n")
    return 0


def _digest(run: _Run, fs: ContainerFS, name: str, args: list[str]) -> int:
    _, files = _flags(args, "")
    algorithm = name[:-3]  # md5sum -> md5
    for path, data in _inputs(run, fs, name, files):
        if path is None:
            return data
        run._out(f"{hashlib.new(algorithm, data).hexdigest()}  {path}\n")
    return 0


_COUNT = re.compile(r"-(?:([nc])(\+?\d+)?|(\d+))")


def _head_tail(run: _Run, fs: ContainerFS, name: str, args: list[str]) -> int:
    """head and tail: `-n N` (`-N`) lines or `-c N` bytes; tail's `+N` counts from the start
    (`tail -c+N`, which `kubectl cp --retries` resumes with)."""
    unit, count, files = "n", "10", []
    i = 0
    while i < len(args):
        m = _COUNT.fullmatch(args[i])
        i += 1
        if m is None:
            if args[i - 1].startswith("-") and args[i - 1] != "-":
                raise _Unknown
            files.append(args[i - 1])
        elif m.group(3):
            count = m.group(3)
        else:
            unit, count = m.group(1), m.group(2)
            if count is None:
                if i >= len(args):
                    raise _Unknown
                count, i = args[i], i + 1
    if not re.fullmatch(r"\+?\d+", count):
        raise _Unknown
    n, plus = int(count), count.startswith("+") and name == "tail"
    for path, data in _inputs(run, fs, name, files):
        if path is None:
            return data
        if len(files) > 1:
            run._out(f"==> {path} <==\n")
        parts = data if unit == "c" else data.splitlines(keepends=True)
        kept = parts[:n] if name == "head" else parts[max(n - 1, 0):] if plus else parts[len(parts) - n:] if n \
            else parts[:0]
        run._out(kept if unit == "c" else b"".join(kept))
    return 0


def _hostname(run: _Run, fs: ContainerFS, name: str, args: list[str]) -> int:
    if args:
        raise _Unknown
    run._out(fs.read("/etc/hostname"))
    return 0


_FILE_COMMANDS: dict[str, Callable[[_Run, ContainerFS, str, list[str]], int]] = {
    "cat": _cat, "ls": _ls, "mkdir": _mkdir, "rm": _rm, "touch": _touch, "test": _test, "[": _test, "tar": _tar,
    "wc": _wc, "md5sum": _digest, "sha256sum": _digest, "head": _head_tail, "tail": _head_tail,
    "hostname": _hostname}


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
    `files()`, where given, is the container's files, for the file commands."""

    def __init__(self, files: Callable[[], ContainerFS] | None = None):
        self.status = 0
        self.files = files

    def line(self, text: str, now: float) -> Step:
        """Run one line typed at `now` (the node's wall clock, epoch seconds)."""
        run = _Run(now, self.status, fs=self.files, stdin=_TERMINAL, interactive=True)
        try:
            _execute(_parse(text), run)
        except _Unknown:  # what a shell would expand or pipe
            run.errors.append((0, 0.0, "sh: nanokube's simulated shell runs no expansions or pipes\n"))
            run.status = 2
        self.status = run.status
        return Step(tuple(run.program().writes()), run.now, run.exited)
