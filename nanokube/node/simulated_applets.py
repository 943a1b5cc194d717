"""The busybox applets a simulated container runs on its files (simulated_fs), for
simulated_command's interpreter: `cat`, `ls`, `mkdir`, `rm`, `touch`, `test`/`[`,
`tar` (real archives through tarfile, as `kubectl cp` sends and reads them, links as links), `wc`,
`md5sum`, `sha256sum`, `head`, `tail`, `tee`, `cp`, `mv`, `ln -s`, `hostname`, `readlink`, `stat -c`, and `dd` and
`fallocate`
(which write zeros that take no memory: a container filling its disk), their output and errors worded as
busybox's (tar's as GNU tar's in an image built on Debian: `_tar_words`), and `tty` and `stty size`, which read the command's terminal (`Terminal`), if it has one. Each takes the running command (`Process`: its stdout, stderr and stdin),
the container's files, its name and its arguments, and gives its exit status; `Unknown`
for a use it does not simulate (an option, compression), which leaves the whole command
uninterpreted, as an unknown command does.
"""

from __future__ import annotations

import hashlib
import io
import os
import posixpath
import re
import tarfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Protocol

from .simulated_accounts import image_family, image_of, names
from .simulated_fs import NOT_FOUND, ContainerFS, Dir, File, FsError, NoSpace


#: how many bytes one run writes (captures included) and one command's words hold at most: a run
#: past it (`seq 1 100000000`, `x="$x$x"` in a loop) is not interpreted, rather than the node agent
#: holding what a real container's memory limit would have stopped
WRITE_BUDGET = 64 << 20


class Unknown(Exception):
    """The command is not one simulated_command interprets."""


class NotFound(Unknown):
    """The command is known not to be in the container's image (curl in busybox's): a shell says
    so (`sh: curl: not found`, 127); run by itself it is not interpreted, as an unknown one."""


class NoTerminal(Unknown):
    """A command at an interactive shell reads its stdin, the terminal, which is not simulated."""


@dataclass
class Terminal:
    """The pseudo-terminal a command runs on (`kubectl exec -t`, a `tty: true` container): its
    device, and its size as the client last sent it on the resize channel (0 0 before it has, as
    a new pty's is)."""

    device: str = "/dev/pts/0"
    rows: int = 0
    columns: int = 0

    def resized(self, width: int, height: int) -> None:
        self.columns, self.rows = width, height


class Process(Protocol):
    """The running command, as an applet sees it: `terminal` is None without one, and
    `out_terminal` the terminal its stdout is, None where that is a pipe, a file or none;
    `started + now` the clock's time."""

    terminal: Terminal | None
    started: float
    now: float

    @property
    def out_terminal(self) -> Terminal | None: ...

    def out(self, data: str | bytes) -> None: ...

    def err(self, text: str) -> None: ...

    def read_stdin(self, enough: Callable[[bytes], bool] | None = None) -> bytes: ...


def reads_data(words: list[str]) -> bool:
    """Whether the command reads the data on its stdin (`cat`, `tar xf -`), not a terminal's lines."""
    name, args = os.path.basename(words[0]), words[1:]
    if name == "cat":
        return not args or "-" in args
    if name == "tee":
        return True
    if name == "nc":  # sends what it reads, unless it only checks the port (-z)
        return not any(a.startswith("-") and not a.startswith("--") and "z" in a for a in args)
    if name == "tar":
        opts = _tar_options(args)
        return opts.mode in ("x", "t") and opts.file == "-"
    return False


def _flags(args: list[str], allowed: str) -> tuple[set[str], list[str]]:
    """The single-letter options before the operands (`-rf`), and the operands; Unknown for others."""
    flags: set[str] = set()
    while args and args[0].startswith("-") and args[0] != "-":
        if args[0] == "--":
            return flags, args[1:]
        if not set(args[0][1:]) <= set(allowed):
            raise Unknown
        flags |= set(args[0][1:])
        args = args[1:]
    return flags, args


def _cat(run: Process, fs: ContainerFS, name: str, args: list[str]) -> int:
    _, files = _flags(args, "")
    status = 0
    for path in files or ["-"]:
        if path == "-":
            run.out(run.read_stdin())
            continue
        try:
            run.out(fs.read(path))
        except FsError as e:
            run.err(f"cat: read error: {e.reason}\n" if e.reason == "Is a directory"
                     else f"cat: can't open '{path}': {e.reason}\n")
            status = 1
    return status


def _ls(run: Process, fs: ContainerFS, name: str, args: list[str]) -> int:
    """busybox ls: one name a line, or, with stdout a terminal, in columns as wide as the terminal
    (`-1`: one a line still) and coloured by type, as its LS_COLOR_IS_DEFAULT build does. `-R`
    lists each subdirectory after its parent, every directory under a `path:` line, as
    scan_and_display_dirs_recur does."""
    flags, paths = _flags(args, "1aAlnR")
    status, listed = 0, []
    terminal = run.out_terminal
    if "n" in flags:
        flags.add("l")
    owners = names(fs.pod, fs.container) if "l" in flags and "n" not in flags else ({}, {})

    def group(entries: list[tuple[str, File | Dir]]) -> list[str]:
        if "l" in flags:
            return [_ls_line(n, node, owners, terminal is not None) for n, node in entries]
        if terminal is None:
            return [n for n, _ in entries]
        return [_coloured(n, node) for n, node in entries] if "1" in flags else _columns(entries, terminal)

    def directory(path: str, node: Dir, first: bool) -> None:
        if len(paths) > 1 or "R" in flags:
            listed.extend([f"{path}:"] if first else ["", f"{path}:"])
        names = sorted(node.entries)
        if "a" in flags:
            names = [".", "..", *names]
        elif "A" not in flags:
            names = [n for n in names if not n.startswith(".")]
        # `.` and `..`: directories, whatever link led here
        dots = {".": replace(node, link=None), "..": replace(fs.lookup(fs.normal(path + "/..")) or node, link=None)}
        if "l" in flags:  # busybox's calculate_blocks: 512-byte blocks, in 1K, rounded up
            blocks = sum(_blocks(fs, path.rstrip("/") + "/" + n, node.entries.get(n) or dots[n]) for n in names)
            listed.append(f"total {(blocks + 1) // 2}")
        listed.extend(group([(n, node.entries.get(n) or dots[n]) for n in names]))
        if "R" in flags:
            for n in names:
                if n not in (".", "..") and isinstance(node.entries[n], Dir) and node.entries[n].link is None:
                    directory(path.rstrip("/") + "/" + n, node.entries[n], False)

    files, dirs = [], []
    for path in paths or ["."]:
        node = fs.lookup(path)
        if node is None:
            run.err(f"ls: {path}: {NOT_FOUND}\n")
            status = 1
        elif isinstance(node, Dir):
            dirs.append((path, node))
        else:
            files.append((path, node))
    listed.extend(group(files))
    for i, (path, node) in enumerate(dirs):
        directory(path, node, i == 0 and not files)
    run.out("".join(line + "\n" for line in listed))
    return status


def _coloured(name: str, node: File | Dir, itself: bool = True) -> str:
    """The name in busybox ls's colour for its type: a link bold cyan (`itself`: the link, not its
    target), a directory bold blue, an executable bold green, any other file plain (its `0;0`),
    each reset after."""
    if itself and node.link is not None:
        code = "1;36"
    elif isinstance(node, Dir):
        code = "1;34"
    else:
        code = "1;32" if node.mode & 0o111 else "0;0"
    return f"\x1b[{code}m{name}\x1b[m"


def _columns(entries: list[tuple[str, File | Dir]], terminal: Terminal) -> list[str]:
    """busybox ls's columns: each as wide as the longest name and two more, as many as fit one
    less than the terminal's width (80 where it has none), filled down first."""
    if not entries:
        return []
    width = (terminal.columns if 1 < terminal.columns < 30000 else 80) - 1
    column_width = max(len(n) for n, _ in entries) + 2
    ncols = max(width // column_width, 1)
    nrows = -(-len(entries) // ncols)
    lines = []
    for row in range(nrows):
        line, column, nexttab = "", 0, 0
        for nc in range(ncols):
            i = nc * nrows + row
            if i >= len(entries):
                continue
            if column > 0:
                line += " " * (nexttab - column)
                column = nexttab
            nexttab = column + column_width
            line += _coloured(*entries[i])
            column += len(entries[i][0])
        lines.append(line)
    return lines


def _ls_line(name: str, node, owners: tuple[dict[int, str], dict[int, str]], colour: bool = False) -> str:
    """busybox's `ls -l` line: mode, links, owner and group (by name where the image has one, `-n`
    none), size, time and name; a link's size is its target's length, shown after ` -> `."""
    mode = "lrwxrwxrwx" if node.link is not None else _mode_string(node)
    size = len(node.link) if node.link is not None else 4096 if isinstance(node, Dir) else len(node.data)
    if colour:
        name = _coloured(name, node)
    if node.link is not None:
        name += " -> " + (_coloured(node.link, node, itself=False) if colour else node.link)
    user, group = owners[0].get(node.uid, str(node.uid)), owners[1].get(node.gid, str(node.gid))
    d = datetime.fromtimestamp(node.mtime, timezone.utc)
    return f"{mode} {_links(node):>4} {user:<8.8} {group:<8.8} {size:>9} {d:%b} {d.day:2d} {d:%H:%M} {name}"


def _mkdir(run: Process, fs: ContainerFS, name: str, args: list[str]) -> int:
    flags, paths = _flags(args, "p")
    status = 0
    for path in paths:
        try:
            fs.mkdir(path, parents="p" in flags)
        except FsError as e:
            run.err(f"mkdir: can't create directory '{path}': {e.reason}\n")
            status = 1
    return status


def _rm(run: Process, fs: ContainerFS, name: str, args: list[str]) -> int:
    flags, paths = _flags(args, "rRf")
    status = 0
    for path in paths:
        node = fs.lookup(path, follow=False)
        if node is None:
            if "f" not in flags:
                run.err(f"rm: can't remove '{path}': {NOT_FOUND}\n")
                status = 1
            continue
        if isinstance(node, Dir) and not flags & {"r", "R"}:
            run.err(f"rm: '{path}' is a directory\n")
            status = 1
            continue
        try:
            fs.remove(path, recursive=True)
        except FsError as e:
            run.err(f"rm: can't remove '{path}': {e.reason}\n")
            status = 1
    return status


def _touch(run: Process, fs: ContainerFS, name: str, args: list[str]) -> int:
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
            run.err(f"touch: {path}: {e.reason}\n")
            status = 1
    return status


#: test's comparisons of integers
_INTEGER_TESTS = {"-eq": int.__eq__, "-ne": int.__ne__, "-lt": int.__lt__, "-le": int.__le__, "-gt": int.__gt__,
                  "-ge": int.__ge__}


def _test(run: Process, fs: ContainerFS, name: str, args: list[str]) -> int:
    if name == "[":
        if not args or args[-1] != "]":
            run.err("sh: [: missing ]\n")
            return 2
        args = args[:-1]
    negate = False
    if args[:1] == ["!"]:
        negate, args = True, args[1:]
    if len(args) == 2 and args[0] in ("-e", "-f", "-d", "-s"):
        node = fs.lookup(args[1])
        ok = node is not None and {"-e": True, "-f": not isinstance(node, Dir), "-d": isinstance(node, Dir),
                                   "-s": isinstance(node, Dir) or bool(getattr(node, "data", b""))}[args[0]]
    elif len(args) == 2 and args[0] in ("-L", "-h"):  # a link, whether or not it leads anywhere
        ok = fs.link(args[1]) is not None
    elif len(args) == 2 and args[0] in ("-n", "-z"):
        ok = bool(args[1]) == (args[0] == "-n")
    elif len(args) == 3 and args[1] in ("=", "==", "!="):
        ok = (args[0] == args[2]) == (args[1] != "!=")
    elif len(args) == 3 and args[1] in _INTEGER_TESTS:
        for arg in (args[0], args[2]):
            if not re.fullmatch(r"\s*[-+]?\d+\s*", arg):
                run.err(f"sh: invalid number '{arg}'\n")
                return 2
        ok = _INTEGER_TESTS[args[1]](int(args[0]), int(args[2]))
    elif len(args) <= 1:
        ok = bool(args and args[0])
    else:
        raise Unknown
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


@dataclass(frozen=True)
class _TarWords:
    """How a tar words its errors, and the status it exits with after one."""

    failed: int
    no_mode: str
    chdir: str
    open_archive: str
    leading: str
    missing: str
    delayed: str
    empty: str
    not_archive: str
    short: str
    open_member: str
    symlink: str


_BUSYBOX_TAR = _TarWords(
    1, "tar: need to specify one of -c/-x/-t\n", f"tar: can't change directory to '{{}}': {NOT_FOUND}\n",
    "tar: can't open '{}': {}\n", "tar: removing leading '/' from member names\n", f"tar: {{}}: {NOT_FOUND}\n",
    "tar: error exit delayed from previous errors\n", "tar: empty archive\n", "tar: invalid tar magic\n",
    "tar: short read\n", "tar: can't open '{}': {}\n", "tar: can't create symlink '{}' to '{}': {}\n")
_GNU_FATAL, _GNU_USAGE = "tar: Error is not recoverable: exiting now\n", \
    "Try 'tar --help' or 'tar --usage' for more information.\n"
_GNU_DELAYED = "tar: Exiting with failure status due to previous errors\n"
_GNU_TAR = _TarWords(
    2, "tar: You must specify one of the '-Acdtrux', '--delete' or '--test-label' options\n" + _GNU_USAGE,
    f"tar: {{}}: Cannot open: {NOT_FOUND}\n" + _GNU_FATAL, "tar: {}: Cannot open: {}\n" + _GNU_FATAL,
    "tar: Removing leading `/' from member names\n", f"tar: {{}}: Cannot stat: {NOT_FOUND}\n", _GNU_DELAYED,
    "tar: Cowardly refusing to create an empty archive\n" + _GNU_USAGE,
    "tar: This does not look like a tar archive\ntar: Skipping to next header\n" + _GNU_DELAYED,
    "tar: This does not look like a tar archive\n" + _GNU_DELAYED, "tar: {}: Cannot open: {}\n",
    "tar: {}: Cannot create symlink to '{}': {}\n")


def _tar_words(fs: ContainerFS) -> _TarWords:
    """The container's tar: GNU tar in an image built on Debian or Ubuntu (nginx, python, most
    applications': image_family's "debian"), busybox's in busybox and Alpine ones (and where the
    container names no image)."""
    image = image_of(fs.pod, fs.container)
    return _GNU_TAR if image and image_family(image) == "debian" else _BUSYBOX_TAR


def _tar_options(args: list[str]) -> _TarOptions:
    """tar's options: bundled the old way (`cf -`, each letter that takes a value taking the next
    word) or with dashes (`-xmf - -C /dir`); Unknown for one not simulated (compression too)."""
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
            raise Unknown
        if not arg.startswith("-") or arg == "-":
            names.append(arg)
            continue
        letters, old = arg[1:], old_style and i == 1  # old: each value is the next word
        for j, letter in enumerate(letters):
            if letter in "cxt":
                if opts.mode not in (None, letter):
                    raise Unknown
                opts.mode = letter
            elif letter in "fC":
                inline = "" if old else letters[j + 1:]  # `-f-`, `-C/dir`
                if inline:
                    value = inline
                elif i < len(args):
                    value, i = args[i], i + 1
                else:
                    raise Unknown
                setattr(opts, "file" if letter == "f" else "directory", value)
                if inline:
                    break
            elif letter == "v":
                opts.verbose = True
            elif letter == "m":
                opts.touch = True
            elif letter not in "op":
                raise Unknown
    opts.names = tuple(names)
    return opts


def _tar(run: Process, fs: ContainerFS, name: str, args: list[str]) -> int:
    opts, words = _tar_options(args), _tar_words(fs)
    if opts.mode is None:
        run.err(words.no_mode)
        return words.failed
    base = fs.normal(opts.directory or ".")
    if not isinstance(fs.lookup(base), Dir):
        run.err(words.chdir.format(opts.directory))
        return words.failed
    if opts.mode == "c":
        return _tar_create(run, fs, opts, base, words)
    data = run.read_stdin() if opts.file == "-" else None
    if data is None:
        try:
            data = fs.read(fs.normal(opts.file, base))
        except FsError as e:
            run.err(words.open_archive.format(opts.file, e.reason))
            return words.failed
    if not data:
        run.err(words.short)
        return words.failed
    try:
        archive = tarfile.open(fileobj=io.BytesIO(data), mode="r:")
        members = archive.getmembers()
    except tarfile.TarError:
        run.err(words.not_archive)
        return words.failed
    status, warned = 0, False
    for member in members:
        if opts.mode == "t" or opts.verbose:
            run.out(member.name + ("/" if member.isdir() else "") + "\n")
        if opts.mode == "t":
            continue
        rel = member.name
        if rel.startswith("/"):
            rel = rel.lstrip("/")
            if not warned:
                run.err(words.leading)
                warned = True
        target, mtime = fs.normal(rel, base), None if opts.touch else member.mtime
        try:
            if member.isdir():
                fs.mkdir(target, parents=True)
            elif member.isfile() or member.issym():
                fs.mkdir(os.path.dirname(target), parents=True)
                if not isinstance(fs.lookup(target, follow=False), Dir | None) and (
                        member.issym() or fs.link(target) is not None):
                    fs.remove(target)  # (a link, or a file where a link comes, is replaced: not written through)
                if member.isfile():
                    fs.write(target, archive.extractfile(member).read(), mode=member.mode & 0o7777, mtime=mtime)
            else:
                run.err(f"tar: {member.name}: nanokube's simulated files hold no hard links or devices: skipped\n")
        except FsError as e:
            run.err(words.open_member.format(rel, e.reason))
            status = words.failed
            continue
        if member.issym():  # its target as the archive names it, unchecked: it may lead nowhere (yet)
            try:
                fs.symlink(target, member.linkname, mtime=mtime)
            except FsError as e:
                run.err(words.symlink.format(rel, member.linkname, e.reason))
                status = words.failed
    if status and words is _GNU_TAR:
        run.err(words.delayed)
    return status


def _tar_create(run: Process, fs: ContainerFS, opts: _TarOptions, base: str, words: _TarWords) -> int:
    """An archive of `opts.names` (relative to `base`), as GNU-format tar writes it, to stdout or
    a file, ended (its end blocks written) even where no name was found. GNU tar warns of a
    leading slash before it looks the name up; busybox's, of one it archives."""
    if not opts.names:
        run.err(words.empty)
        return words.failed
    buf = io.BytesIO()
    failed, warned = False, False
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as archive:
        for path in opts.names:
            follow = path.endswith("/")  # (`current/`: the directory a link leads to, as path resolution gives it)
            node = fs.lookup(fs.normal(path, base), follow=follow)
            if path.startswith("/") and not warned and (node is not None or words is _GNU_TAR):
                run.err(words.leading)
                warned = True
            if node is None:
                run.err(words.missing.format(path))
                failed = True
                continue
            member = path
            if member.startswith("/"):
                member = member.lstrip("/") or "."
            _tar_add(archive, fs, fs.normal(path, base), member.rstrip("/") or ".", opts.verbose and run, follow)
    if failed:
        run.err(words.delayed)
    if opts.file == "-":
        run.out(buf.getvalue())
    else:
        try:
            fs.write(fs.normal(opts.file, base), buf.getvalue())
        except FsError as e:
            run.err(words.open_archive.format(opts.file, e.reason))
            return words.failed
    return words.failed if failed else 0


def _tar_add(archive: tarfile.TarFile, fs: ContainerFS, path: str, member: str, verbose, follow: bool = False) -> None:
    """`path` as `member`, and what a directory holds, through the mounts below it; a link (one
    made with `ln -s`, a ConfigMap's file, its `..data`) as a link, its own time, as tar keeps one
    without -h, whether or not its target is there; `follow`: not `path` itself (named with a slash after it)."""
    node = fs.lookup(path, follow=follow)
    if follow:
        node = replace(node, link=None)
    info = tarfile.TarInfo(member)
    info.mode, info.mtime = node.mode, int(node.mtime)
    info.uname = info.gname = "root"
    if verbose:
        verbose.err(member + ("/" if isinstance(node, Dir) and node.link is None else "") + "\n")
    if node.link is not None:
        info.type, info.linkname, info.mode = tarfile.SYMTYPE, node.link, 0o777
        archive.addfile(info)
        return
    if isinstance(node, Dir):
        info.type = tarfile.DIRTYPE
        archive.addfile(info)
        for child in fs.listdir(path):
            _tar_add(archive, fs, posixpath.join(path, child), f"{member}/{child}", verbose)
        return
    info.size = len(node.data)
    archive.addfile(info, io.BytesIO(node.data))


def _inputs(run: Process, fs: ContainerFS, name: str, files: list[str],
            enough: Callable[[bytes], bool] | None = None):
    """(name, data) of each file (`-` or none: stdin, read to its EOF unless what came is `enough`),
    an error said for each that cannot be read; the last is the exit status (0, or 1 when one could
    not be read)."""
    status = 0
    for path in files or ["-"]:
        if path == "-":
            yield "-", run.read_stdin(enough)
            continue
        try:
            yield path, fs.read(path)
        except FsError as e:
            run.err(f"{name}: can't open '{path}': {e.reason}\n")
            status = 1
    yield None, status


def _wc(run: Process, fs: ContainerFS, name: str, args: list[str]) -> int:
    flags, files = _flags(args, "clw")
    flags = flags or {"l", "w", "c"}
    for path, data in _inputs(run, fs, name, files):
        if path is None:
            return data
        counts = {"l": data.count(b"\n"), "w": len(data.split()), "c": len(data)}
        line = " ".join(str(counts[f]) for f in "lwc" if f in flags)
        run.out(line + ("" if path == "-" else f" {path}") + "\n")
    return 0


def _digest(run: Process, fs: ContainerFS, name: str, args: list[str]) -> int:
    _, files = _flags(args, "")
    algorithm = name[:-3]  # md5sum -> md5
    for path, data in _inputs(run, fs, name, files):
        if path is None:
            return data
        run.out(f"{hashlib.new(algorithm, data).hexdigest()}  {path}\n")
    return 0


_COUNT = re.compile(r"-(?:([nc])(\+?\d+)?|(\d+))")


def _head_tail(run: Process, fs: ContainerFS, name: str, args: list[str]) -> int:
    """head and tail: `-n N` (`-N`) lines or `-c N` bytes; tail's `+N` counts from the start
    (`tail -c+N`, which `kubectl cp --retries` resumes with). head reading a stdin still open ends
    once it has its lines (or bytes), not at the EOF."""
    unit, count, files = "n", "10", []
    i = 0
    while i < len(args):
        m = _COUNT.fullmatch(args[i])
        i += 1
        if m is None:
            if args[i - 1].startswith("-") and args[i - 1] != "-":
                raise Unknown
            files.append(args[i - 1])
        elif m.group(3):
            count = m.group(3)
        else:
            unit, count = m.group(1), m.group(2)
            if count is None:
                if i >= len(args):
                    raise Unknown
                count, i = args[i], i + 1
    if not re.fullmatch(r"\+?\d+", count):
        raise Unknown
    n, plus = int(count), count.startswith("+") and name == "tail"

    def enough(data: bytes) -> bool:
        return name == "head" and (len(data) if unit == "c" else data.count(b"\n")) >= n
    for path, data in _inputs(run, fs, name, files, enough):
        if path is None:
            return data
        if len(files) > 1:
            run.out(f"==> {path} <==\n")
        parts = data if unit == "c" else data.splitlines(keepends=True)
        kept = parts[:n] if name == "head" else parts[max(n - 1, 0):] if plus else parts[len(parts) - n:] if n \
            else parts[:0]
        run.out(kept if unit == "c" else b"".join(kept))
    return 0


#: busybox dd's size suffixes (dd_suffixes) and fallocate's (kmg_i_suffixes)
_DD_SUFFIXES = {"": 1, "c": 1, "w": 2, "b": 512, "kB": 1000, "kD": 1000, "k": 1024, "K": 1024, "MB": 10**6,
                "MD": 10**6, "M": 1 << 20, "GB": 10**9, "GD": 10**9, "G": 1 << 30}
_KMG_SUFFIXES = {"": 1, **{f"{c}{tail}": 1 << (10 * (i + 1)) for i, u in enumerate("KMGT")
                           for c in (u, u.lower()) for tail in ("", "iB")}}


def _size(text: str, suffixes: dict[str, int]) -> int:
    m = re.fullmatch(r"(\d+)([A-Za-z]*)", text)
    if m is None or m.group(2) not in suffixes:
        raise Unknown
    return int(m.group(1)) * suffixes[m.group(2)]


def _human(size: int) -> str:
    """make_human_readable_str(size, 1, 0): whole bytes below 1K, else one decimal and a unit."""
    if size < 1024:
        return str(size)
    value, unit = float(size), ""
    for unit in "KMGTPE":
        value /= 1024
        if value < 1024:
            break
    return f"{value:.1f}{unit}"


def _dd(run: Process, fs: ContainerFS, name: str, args: list[str]) -> int:
    """dd if=FILE of=FILE bs=N count=N [status=none|noxfer]: `count` blocks of `bs` bytes from the
    input (/dev/zero: zeros, as many as asked; stdin or a file: what it holds) to the output file
    (replaced) or stdout; its records and bytes on stderr, as busybox's. The zeros take no memory
    until read (a calloc'd bytes), so `dd if=/dev/zero of=/cache/blob bs=1M count=2048` fills an
    emptyDir or the writable layer with 2Gi at no cost: what the kubelet's storage limits
    measure. The copy takes no time on the node's clock (0.000000 seconds)."""
    ops: dict[str, str] = {}
    for arg in args:
        key, eq, value = arg.partition("=")
        if not eq or key not in ("if", "of", "bs", "count", "status") or key in ops:
            raise Unknown
        ops[key] = value
    bs = _size(ops.get("bs", "512"), _DD_SUFFIXES)
    count = _size(ops["count"], _DD_SUFFIXES) if "count" in ops else None
    if bs == 0 or ops.get("status", "none") not in ("none", "noxfer", "progress"):
        raise Unknown
    source = ops.get("if", "-")
    if fs.normal(source) == "/dev/zero" and source != "-":
        if count is None:  # until the disk is full
            raise Unknown
        data = bytes(bs * count)
    else:
        try:
            data = run.read_stdin() if source == "-" else fs.read(source)
        except FsError as e:
            run.err(f"dd: can't open '{source}': {e.reason}\n")
            return 1
        if count is not None:
            data = data[:bs * count]
    code, copied = 0, len(data)
    if "of" in ops:
        try:
            fs.write(ops["of"], data)
        except NoSpace as e:  # a tmpfs filled: the records it took, then the one that failed (read, not written)
            run.err(f"dd: error writing '{ops['of']}': {e.reason}\n")
            code, copied = 1, e.written
        except FsError as e:
            run.err(f"dd: can't open '{ops['of']}': {e.reason}\n")
            return 1
    else:
        run.out(data)
    status = ops.get("status")
    if status != "none":
        full, part = divmod(copied, bs)
        read = f"{full + 1}+0" if code else f"{full}+{1 if part else 0}"
        run.err(f"{read} records in\n{full}+{1 if part else 0} records out\n")
        if status != "noxfer":
            run.err(f"{copied} bytes ({_human(copied)}B) copied, 0.000000 seconds, 0B/s\n")
    return code


def _fallocate(run: Process, fs: ContainerFS, name: str, args: list[str]) -> int:
    """fallocate [-o OFFSET] -l LENGTH FILE: the file (made if missing) holds at least OFFSET+LENGTH
    bytes, the added ones zeros that take no memory until read (as `dd if=/dev/zero`), unless the
    file held data already: that is copied into the longer buffer, which then takes its size."""
    opts: dict[str, int] = {}
    i = 0
    while i < len(args) - 1 and args[i] in ("-o", "-l") and args[i] not in opts:
        opts[args[i]] = _size(args[i + 1], _KMG_SUFFIXES)
        i += 2
    if "-l" not in opts or len(args) != i + 1 or opts["-l"] == 0:
        raise Unknown
    path = args[i]
    node = fs.lookup(path)
    if isinstance(node, Dir):
        run.err(f"fallocate: can't open '{path}': Is a directory\n")
        return 1
    data = node.data if isinstance(node, File) else b""
    want = opts.get("-o", 0) + opts["-l"]
    try:
        fs.write(path, data + bytes(want - len(data)) if want > len(data) else data)
    except FsError as e:
        run.err(f"fallocate: can't open '{path}': {e.reason}\n")
        return 1
    return 0


def _copy(fs: ContainerFS, source: str, target: str, keep: bool, links: bool) -> None:
    """`source` (a file, or a directory and all below it) copied to `target` (kept: its mode and time).
    A link (one made with `ln -s`, a ConfigMap's and its `..data`) is copied as a link where `links`
    (busybox's cp -R and -a, and mv), else followed; one below a directory always as a link."""
    if links and (link := fs.link(source)) is not None:
        fs.symlink(target, link, mtime=fs.lookup(source, follow=False).mtime if keep else None)
        return
    node = fs.lookup(source)
    if isinstance(node, Dir):
        if fs.lookup(target) is None:
            fs.mkdir(target, mode=node.mode & 0o7777 if keep else 0o755)
        for child in fs.listdir(source):
            _copy(fs, posixpath.join(source, child), posixpath.join(target, child), keep, True)
        return
    fs.write(target, node.data, mode=node.mode & 0o7777, mtime=node.mtime if keep else None)


def _cp_mv(run: Process, fs: ContainerFS, name: str, args: list[str]) -> int:
    """cp [-rRap] and mv: sources into a directory (or to one name), a directory only with -r (cp)."""
    flags, paths = _flags(args, "rRapf" if name == "cp" else "f")
    if len(paths) < 2:
        raise Unknown
    *sources, dest = paths
    into = isinstance(fs.lookup(dest), Dir)
    if len(sources) > 1 and not into:
        run.err(f"{name}: '{dest}' is not a directory\n")
        return 1
    status = 0
    links = name == "mv" or bool(flags & set("rRa"))
    for source in sources:
        node = fs.lookup(source, follow=not links)
        target = fs.normal(posixpath.join(dest, posixpath.basename(source.rstrip("/")))) if into else fs.normal(dest)
        if node is None:
            run.err(f"cp: can't stat '{source}': {NOT_FOUND}\n" if name == "cp"
                    else f"mv: can't rename '{source}': {NOT_FOUND}\n")
            status = 1
            continue
        if name == "cp" and isinstance(node, Dir) and not flags & set("rRa"):
            run.err(f"cp: omitting directory '{source}'\n")
            status = 1
            continue
        if fs.normal(source) == target or target.startswith(fs.normal(source).rstrip("/") + "/"):
            run.err(f"{name}: can't copy a directory into itself\n" if target != fs.normal(source)
                    else f"{name}: '{source}' and '{dest}' are the same file\n")
            status = 1
            continue
        try:
            _copy(fs, fs.normal(source), target, name == "mv" or bool(flags & set("ap")), links)
            if name == "mv":
                fs.remove(source, recursive=True)
        except FsError as e:
            run.err(f"{name}: can't create '{target}': {e.reason}\n")
            status = 1
    return status


def _ln(run: Process, fs: ContainerFS, name: str, args: list[str]) -> int:
    """busybox ln -s [-fn] TARGET... LINK|DIR: a symbolic link to each TARGET, named LINK, or in DIR
    (the last operand a directory, not a link to one with -n) under TARGET's last name, in the
    working directory where only TARGET is given; -f replaces what is there (not a directory).
    Hard links (no -s) are not simulated."""
    flags, paths = _flags(args, "sfn")
    if "s" not in flags or not paths:
        raise Unknown
    if len(paths) == 1:
        paths.append(".")
    *targets, dest = paths
    into = isinstance(fs.lookup(dest, follow="n" not in flags), Dir)
    if len(targets) > 1 and not into:
        run.err(f"ln: '{dest}' is not a directory\n")
        return 1
    status = 0
    for target in targets:
        link = posixpath.join(dest, posixpath.basename(target.rstrip("/"))) if into else dest
        try:
            if "f" in flags and not isinstance(fs.lookup(link, follow=False), Dir | None):
                fs.remove(link)
            fs.symlink(link, target)
        except FsError as e:
            run.err(f"ln: can't create symlink '{link}' to '{target}': {e.reason}\n")
            status = 1
    return status


def _tee(run: Process, fs: ContainerFS, name: str, args: list[str]) -> int:
    """stdin to stdout and to each file (emptied first, or added to with -a)."""
    flags, paths = _flags(args, "a")
    data, status = run.read_stdin(), 0
    run.out(data)
    for path in paths:
        try:
            fs.write(path, data, append="a" in flags)
        except FsError as e:
            run.err(f"tee: {path}: {e.reason}\n")
            status = 1
    return status


def _hostname(run: Process, fs: ContainerFS, name: str, args: list[str]) -> int:
    """busybox hostname: the name (/etc/hostname), its first label (-s); or, looked up in /etc/hosts
    (the kubelet's names a StatefulSet pod's FQDN first) as gethostbyname does, its canonical name
    (-f), the domain after that name's first dot (-d) or its address (-i, a space after it)."""
    flags, rest = _flags(args, "sfdi")
    if rest or len(flags) > 1:
        raise Unknown
    host = fs.read("/etc/hostname").decode().strip()
    if not flags & {"f", "d", "i"}:
        run.out((host.split(".")[0] if "s" in flags else host) + "\n")
        return 0
    try:
        hosts = fs.read("/etc/hosts").decode(errors="replace")
    except FsError:
        raise Unknown from None
    entry = next((words for line in hosts.splitlines() if (words := line.split("#")[0].split()) and host in words[1:]),
                 None)
    if entry is None:
        raise Unknown
    run.out(f"{entry[0]} \n" if "i" in flags else entry[1] + "\n" if "f" in flags else
            (entry[1].partition(".")[2] + "\n" if "." in entry[1] else ""))
    return 0


def _readlink(run: Process, fs: ContainerFS, name: str, args: list[str]) -> int:
    """busybox readlink [-fn] FILE: where link FILE points; -f: FILE's canonical path, through its
    links (`ContainerFS.resolved`), its last part need not be there. Status 1, silent, where there
    is none (FILE no link, or a directory on its way missing)."""
    flags, rest = _flags(args, "fn")
    if len(rest) != 1:
        raise Unknown
    found = fs.resolved(rest[0]) if "f" in flags else fs.link(rest[0])
    if found is None:
        return 1
    run.out(found + ("" if "n" in flags else "\n"))
    return 0


def _mode_string(node: File | Dir) -> str:
    """The mode as `ls -l` and `stat -c %A` show it (`drwxrwxrwt`)."""
    mode, out = node.mode, "d" if isinstance(node, Dir) else "-"
    for shift, special, letter in ((6, 0o4000, "s"), (3, 0o2000, "s"), (0, 0o1000, "t")):
        bits = mode >> shift & 7
        x = "x" if bits & 1 else "-"
        if mode & special:
            x = letter if bits & 1 else letter.upper()
        out += ("r" if bits & 4 else "-") + ("w" if bits & 2 else "-") + x
    return out


def _stat(run: Process, fs: ContainerFS, name: str, args: list[str]) -> int:
    """busybox stat [-L] [-c FORMAT] FILE...: for each FILE, FORMAT's %n (its name), %s (size), %a and
    %A (its mode in octal and as ls shows it), %F (its type), %h (links), %u %g and %U %G (its owner
    and group, by id and by the image's names: UNKNOWN where it has none), %x %y %z and %X %Y %Z
    (its time, as the simulation keeps one), %%; a link (a ConfigMap's file) itself, unless -L
    follows it. Without -c, busybox's default layout (`_default_stat`). The rest is not
    simulated. A FILE not there: busybox's error, 1."""
    follow = args[:1] == ["-L"]
    args = args[follow:]
    if args[:1] in (["-c"], ["--format"]):
        if len(args) < 3 or "\n" in args[1]:
            raise Unknown
        fmt, paths = args[1], args[2:]
        if re.search(r"%[^nsaAFhuUgGxyzXYZ%]", fmt.replace("%%", "")):
            raise Unknown
    elif args and not any(a.startswith("-") for a in args):
        fmt, paths = None, args
    else:
        raise Unknown
    status = 0
    users, groups = names(fs.pod, fs.container)
    for path in paths:
        node, target = fs.lookup(path), None if follow else fs.link(path)
        if target is not None:  # (its time: the volume's last update, its files')
            node = File(target.encode(), 0o777, *((node.mtime, node.uid, node.gid) if node else ()))
        if node is None:
            run.err(f"stat: can't stat '{path}': {NOT_FOUND}\n")
            status = 1
            continue
        when = datetime.fromtimestamp(node.mtime, timezone.utc)
        shown = f"{when:%Y-%m-%d %H:%M:%S}.{round(node.mtime % 1 * 1e9):09d} +0000"
        kind = "directory" if isinstance(node, Dir) else "symbolic link" if target is not None else \
            "regular file" if node.data else "regular empty file"
        fields = {"n": path, "s": str(4096 if isinstance(node, Dir) else len(node.data)), "a": f"{node.mode & 0o7777:o}",
                  "A": ("l" if target is not None else "") + _mode_string(node)[target is not None:], "F": kind,
                  "h": str(_links(node)), "%": "%", "u": str(node.uid), "g": str(node.gid),
                  "U": users.get(node.uid, "UNKNOWN"), "G": groups.get(node.gid, "UNKNOWN"),
                  **dict.fromkeys("xyz", shown), **dict.fromkeys("XYZ", str(int(node.mtime)))}
        if fmt is None:
            run.out(_default_stat(fs, path, node, target, fields))
        else:
            run.out(re.sub(r"%(.)", lambda m: fields[m.group(1)], fmt) + "\n")
    return status


def _links(node: File | Dir) -> int:
    """Its hard links: a directory's `.`, its parent's entry and each subdirectory's `..`; a file one."""
    if not isinstance(node, Dir) or node.link is not None:
        return 1
    return 2 + sum(isinstance(n, Dir) and n.link is None for n in node.entries.values())


def _blocks(fs: ContainerFS, path: str, node: File | Dir) -> int:
    """Its st_blocks (512 bytes): a file's size in whole 4K pages, a directory one page on disk and
    none on a tmpfs, a link none (its target fits in its inode)."""
    if node.link is not None:
        return 0
    if isinstance(node, Dir):
        mount, _ = fs._mount(fs.normal(path))
        return 0 if mount is not None and (mount.limit or mount.size) else 8
    return -(-len(node.data) // 4096) * 8


#: the st_dev of a bind of the node's disk (/dev/sda1, 8:1), and of the overlay root (an
#: anonymous device; each tmpfs the next)
_DISK_DEV, _OVERLAY_DEV = 0x801, 0x2B


def _default_stat(fs: ContainerFS, path: str, node: File | Dir, target: str | None, fields: dict[str, str]) -> str:
    """busybox stat's default layout (its `%N`, `%-10s`, `%-10b`... format): the name (a link's as
    `'name' -> 'target'`), size, 512-byte blocks (whole 4K pages; none for a link), the device of
    the mount it is on, an inode number (stable for its path: the simulation keeps none), links,
    mode, owner and times."""
    mount, _ = fs._mount(fs.normal(path))
    if mount is None or not mount.kind:
        dev = _OVERLAY_DEV
    elif mount.limit or mount.size:
        dev = _OVERLAY_DEV + 1 + [m for m in fs.mounts if m.limit or m.size].index(mount)
    else:
        dev = _DISK_DEV
    size, blocks = int(fields["s"]), 0 if target is not None else _blocks(fs, path, node)
    inode = zlib.crc32(fs.normal(path).encode()) % 1_000_000 + 1000
    shown = f"'{path}' -> '{target}'" if target is not None else path
    return (f"  File: {shown}\n  Size: {size:<10}\tBlocks: {blocks:<10} IO Block: {4096:<6} {fields['F']}\n"
            f"Device: {dev:x}h/{dev}d\tInode: {inode:<10}  Links: {fields['h']}\n"
            f"Access: ({int(fields['a'], 8):04o}/{fields['A']:10.10})  Uid: ({node.uid:5}/{fields['U']:>8})"
            f"   Gid: ({node.gid:5}/{fields['G']:>8})\n"
            f"Access: {fields['x']}\nModify: {fields['y']}\nChange: {fields['z']}\n")


def _cd(run: Process, fs: ContainerFS, name: str, args: list[str]) -> int:
    """The shell's `cd` (to root's home without a directory), the working directory kept for the
    script's (or interactive shell's) next commands."""
    if len(args) > 1:
        raise Unknown
    target = fs.normal(args[0] if args else "/root")
    node = fs.lookup(target)
    if not isinstance(node, Dir):
        run.err(f"sh: cd: can't cd to {args[0] if args else '/root'}: {NOT_FOUND if node is None else 'Not a directory'}\n")
        return 2
    fs.cwd = target
    return 0


def _pwd(run: Process, fs: ContainerFS, name: str, args: list[str]) -> int:
    run.out(fs.cwd + "\n")
    return 0


def _tty(run: Process, name: str, args: list[str]) -> int:
    """busybox tty: the terminal's device, or `not a tty` (status 1); `-s` only sets the status."""
    flags, rest = _flags(args, "s")
    if rest:
        raise Unknown
    if "s" not in flags:
        run.out(f"{run.terminal.device}\n" if run.terminal else "not a tty\n")
    return 0 if run.terminal else 1


def _stty(run: Process, name: str, args: list[str]) -> int:
    """busybox stty's `size`: the terminal's rows and columns; on stdin that is no terminal its
    failing ioctl, as glibc words it (status 1)."""
    if args != ["size"]:
        raise Unknown
    if run.terminal is None:
        run.err("stty: standard input: Inappropriate ioctl for device\n")
        return 1
    run.out(f"{run.terminal.rows} {run.terminal.columns}\n")
    return 0


#: applets that read the command's terminal, not its files
TERMINAL_APPLETS: dict[str, Callable[[Process, str, list[str]], int]] = {"tty": _tty, "stty": _stty}

APPLETS: dict[str, Callable[[Process, ContainerFS, str, list[str]], int]] = {
    "cat": _cat, "ls": _ls, "mkdir": _mkdir, "rm": _rm, "touch": _touch, "test": _test, "[": _test, "tar": _tar,
    "wc": _wc, "md5sum": _digest, "sha256sum": _digest, "head": _head_tail, "tail": _head_tail,
    "hostname": _hostname, "cd": _cd, "pwd": _pwd, "tee": _tee, "cp": _cp_mv, "mv": _cp_mv, "dd": _dd,
    "fallocate": _fallocate, "readlink": _readlink, "stat": _stat, "ln": _ln}
