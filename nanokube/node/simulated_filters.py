"""The busybox filters a simulated container runs on a stream: `cat`, `tr`, `grep`, `head`, `wc`,
`sed`, `awk`, `cut` and `sort` (the forms people type: `sed 's/a/b/g'`, `sed -n '2p'`, `cut -d: -f1`;
awk's programs as simulated_awk runs them).

Each is a `Filter`: fed its input as it comes (`feed`, what it writes then: a line filter writes
each line once it has ended, `cat` and `tr` all they got at once), then ended at EOF (`end`: what
is left to write, and its exit status), or done on its own (`head` after its lines). So `kubectl
exec -i pod -- grep error` and a container running `cat` with `kubectl attach` answer each line
as it is sent, not only at EOF (simulated_io); and, fed all at once, they are applets of scripts
(`echo a b | awk '{print $2}'`, `grep x /file`) through `applet`. A use not simulated (an
option, a regular expression Python cannot read) is `Unknown`."""

from __future__ import annotations

import os
import re

from .simulated_applets import Process, Unknown
from .simulated_awk import Awk, awk_escapes
from .simulated_fs import ContainerFS, FsError


class Filter:
    """A command reading its stdin as it comes."""

    #: it exits on its own, before its input's end (head)
    done = False

    def feed(self, data: bytes) -> bytes:
        return data

    def end(self) -> tuple[bytes, int]:
        return b"", 0


class Chain(Filter):
    """Filters joined by pipes (`grep x | tr a b`): what each writes, the next one reads; one that
    is done (head) ends the input of those after it, and so the chain; its status is the last one's."""

    def __init__(self, filters: list[Filter]):
        self.filters = filters
        self.status = 0

    def feed(self, data: bytes) -> bytes:
        for i, f in enumerate(self.filters):
            data = f.feed(data) if data else b""
            if f.done:
                return self._after(i, data)
        return data

    def _after(self, i: int, data: bytes) -> bytes:
        """The filters after the i-th, done, read what it wrote to their input's end."""
        for f in self.filters[i + 1:]:
            fed = f.feed(data) if data else b""
            rest, self.status = f.end()
            data = fed + rest
        self.done = True
        return data

    def end(self) -> tuple[bytes, int]:
        if self.done:
            return b"", self.status
        data = b""
        for f in self.filters:
            fed = f.feed(data) if data else b""
            rest, self.status = f.end()
            data = fed + rest
        self.done = True
        return data, self.status


class _Lines(Filter):
    """A filter of whole lines: each line, once its new line came, is `line(text)`'s output; the
    last without a new line at EOF."""

    def __init__(self):
        self.partial = b""

    def feed(self, data: bytes) -> bytes:
        *lines, self.partial = (self.partial + data).split(b"\n")
        out = b""
        for raw in lines:
            if self.done:
                break
            out += self.line(raw, b"\n")
        return out

    def end(self) -> tuple[bytes, int]:
        out = self.line(self.partial, b"") if self.partial and not self.done else b""
        self.partial = b""
        return out, self.status()

    def line(self, text: bytes, newline: bytes) -> bytes:
        raise NotImplementedError

    def status(self) -> int:
        return 0


class _Grep(_Lines):
    def __init__(self, pattern: re.Pattern, invert: bool, count: bool, quiet: bool):
        super().__init__()
        self.pattern, self.invert, self.count, self.quiet = pattern, invert, count, quiet
        self.matched = 0

    def line(self, text: bytes, newline: bytes) -> bytes:
        if bool(self.pattern.search(text.decode(errors="replace"))) == self.invert:
            return b""
        self.matched += 1
        return b"" if self.count or self.quiet else text + b"\n"

    def end(self) -> tuple[bytes, int]:
        out, _ = super().end()
        if self.count:
            out += f"{self.matched}\n".encode()
        return out, self.status()

    def status(self) -> int:
        return 0 if self.matched else 1


class _Head(_Lines):
    def __init__(self, count: int):
        super().__init__()
        self.left = count
        self.done = count <= 0

    def line(self, text: bytes, newline: bytes) -> bytes:
        self.left -= 1
        self.done = self.left <= 0
        return text + newline


class _Sed(_Lines):
    """`sed [-n] 's/RE/REPL/[g]'`, `sed -n 'Np'`, `sed -n '/RE/p'`, `sed 'Nd'`, `sed '/RE/d'`."""

    def __init__(self, quiet: bool, script: str):
        super().__init__()
        self.quiet, self.number = quiet, 0
        self.substitute = self.address = None
        m = re.fullmatch(r"s(.)(.*?)\1(.*?)\1(g?)", script)
        if m:
            self.substitute = (_regex(m.group(2), extended=False), _replacement(m.group(3)), 0 if m.group(4) else 1)
            return
        m = re.fullmatch(r"(?:(\d+)|/(.*)/)([pd])", script)
        if not m:
            raise Unknown
        self.address = (int(m.group(1)) if m.group(1) else _regex(m.group(2), extended=False), m.group(3))

    def line(self, text: bytes, newline: bytes) -> bytes:
        self.number += 1
        s = text.decode(errors="replace")
        if self.substitute:
            pattern, repl, count = self.substitute
            s = pattern.sub(repl, s, count=count)
            return b"" if self.quiet else s.encode() + newline
        where, command = self.address
        hit = self.number == where if isinstance(where, int) else bool(where.search(s))
        if command == "d":
            return b"" if hit or self.quiet else text + newline
        return (text + newline) * (hit + (not self.quiet))


class _Awk(_Lines):
    """awk PROGRAM on each line as it comes (simulated_awk), END's output at the end; a program of
    BEGIN alone reads nothing (done at once)."""

    def __init__(self, program: str, separator: str | None, assigned: dict[str, str]):
        super().__init__()
        self.awk = Awk(program, separator, assigned)
        self.done = not (self.awk.main or self.awk.ends)

    def feed(self, data: bytes) -> bytes:
        return self.awk.taken().encode() + super().feed(data)  # (BEGIN's output first)

    def line(self, text: bytes, newline: bytes) -> bytes:
        return self.awk.record(text.decode(errors="replace")).encode()

    def end(self) -> tuple[bytes, int]:
        out, _ = super().end()
        text, code = self.awk.end()
        return out + text.encode(), code


class _Tr(Filter):
    def __init__(self, delete: bool, set1: str, set2: str):
        first, second = _tr_set(set1), _tr_set(set2)
        if delete:
            self.table = bytes.maketrans(b"", b""), bytes(first)
        else:
            if not second:
                raise Unknown
            second = second + second[-1:] * (len(first) - len(second))
            self.table = bytes.maketrans(bytes(first), bytes(second[:len(first)])), b""

    def feed(self, data: bytes) -> bytes:
        return data.translate(*self.table)


class _Wc(Filter):
    def __init__(self, flags: set[str]):
        self.flags = flags or {"l", "w", "c"}
        self.data = b""

    def feed(self, data: bytes) -> bytes:
        self.data += data
        return b""

    def end(self) -> tuple[bytes, int]:
        counts = {"l": self.data.count(b"\n"), "w": len(self.data.split()), "c": len(self.data)}
        return (" ".join(str(counts[f]) for f in "lwc" if f in self.flags) + "\n").encode(), 0


class _Sort(Filter):
    """`sort [-rnu] [-t SEP] [-k N[,N]]`: its lines in byte order (C's), or by the number each key
    starts with (-n: none is 0), equal keys by the whole line; reversed (-r); one of each key (-u).
    A key is field N (to the line's end, or N alone with `N,N`), fields split at SEP or blanks."""

    def __init__(self, reverse: bool, numeric: bool, unique: bool, separator: str | None, key: str | None):
        m = re.fullmatch(r"([1-9]\d*)(?:,([1-9]\d*))?", key or "1")
        if m is None or m.group(2) and m.group(2) != m.group(1) or separator is not None and len(separator) != 1:
            raise Unknown  # (character positions, key options, other ranges: not simulated)
        self.field, self.alone = int(m.group(1)), bool(m.group(2))
        self.reverse, self.numeric, self.unique, self.separator = reverse, numeric, unique, separator
        self.data = b""

    def feed(self, data: bytes) -> bytes:
        self.data += data
        return b""

    def _key(self, line: bytes):
        if self.field > 1 or self.alone:
            fields = line.split(self.separator.encode()) if self.separator else line.split()
            rest = fields[self.field - 1:self.field] if self.alone else fields[self.field - 1:]
            key = (self.separator.encode() if self.separator else b" ").join(rest)
        else:
            key = line
        if not self.numeric:
            return key
        m = re.match(rb"\s*(-?\d+(?:\.\d*)?|-?\.\d+)", key)
        return float(m.group(1)) if m else 0.0

    def end(self) -> tuple[bytes, int]:
        lines = self.data.split(b"\n")
        if lines[-1] == b"":
            lines.pop()
        ordered = sorted(lines, key=lambda line: (self._key(line), line), reverse=self.reverse)
        if self.unique:
            ordered = [line for i, line in enumerate(ordered) if i == 0 or self._key(line) != self._key(ordered[i - 1])]
        return b"".join(line + b"\n" for line in ordered), 0


def _regex(pattern: str, extended: bool) -> re.Pattern:
    """A grep/sed regular expression as Python's: a basic one's `\\(`, `\\)`, `\\{`, `\\}`, `\\|`, `\\+`,
    `\\?` are the extended one's operators, and those characters alone are themselves."""
    if not extended:
        out, i = "", 0
        while i < len(pattern):
            c = pattern[i]
            if c == "\\" and i + 1 < len(pattern):
                nxt = pattern[i + 1]
                out += nxt if nxt in "(){}|+?" else c + nxt
                i += 2
                continue
            out += "\\" + c if c in "(){}|+?" else c
            i += 1
        pattern = out
    try:
        return re.compile(pattern)
    except re.error:
        raise Unknown from None


def _replacement(text: str) -> str:
    """sed's replacement as re.sub's: `&` is the match, `\\N` a group."""
    out, i = "", 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            out += "\\" + text[i + 1] if text[i + 1].isdigit() else text[i + 1].replace("\\", "\\\\")
            i += 2
            continue
        out += "\\g<0>" if c == "&" else "\\\\" if c == "\\" else c
        i += 1
    return out


_CLASSES = {"[:upper:]": "A-Z", "[:lower:]": "a-z", "[:digit:]": "0-9", "[:space:]": " \t\n\r\f\v",
            "[:alpha:]": "a-zA-Z", "[:alnum:]": "a-zA-Z0-9"}


def _tr_set(text: str) -> list[int]:
    for name, chars in _CLASSES.items():
        text = text.replace(name, chars)
    text = text.replace("\\n", "\n").replace("\\t", "\t")
    out: list[int] = []
    i = 0
    while i < len(text):
        if i + 2 < len(text) and text[i + 1] == "-":
            out += range(ord(text[i]), ord(text[i + 2]) + 1)
            i += 3
        else:
            out.append(ord(text[i]))
            i += 1
    if any(c > 255 for c in out):
        raise Unknown
    return out


class _Cut(_Lines):
    """cut -f LIST [-d C] [-s], -c LIST or -b LIST: the fields (split at a tab, or C) or characters
    at LIST's positions (`2`, `1,3`, `2-4`, `3-`, `-2`), in order; with -f, a line without the
    delimiter is written whole (left out with -s)."""

    def __init__(self, ranges: list[tuple[int, int | None]], fields: bool, delimiter: str, only: bool):
        super().__init__()
        self.ranges, self.fields, self.delimiter, self.only = ranges, fields, delimiter, only

    def _keeps(self, n: int) -> bool:
        return any(lo <= n and (hi is None or n <= hi) for lo, hi in self.ranges)

    def line(self, text: bytes, newline: bytes) -> bytes:
        value = text.decode(errors="replace")
        if not self.fields:
            return "".join(c for i, c in enumerate(value, 1) if self._keeps(i)).encode() + b"\n"
        if self.delimiter not in value:
            return b"" if self.only else text + b"\n"
        parts = value.split(self.delimiter)
        return self.delimiter.join(f for i, f in enumerate(parts, 1) if self._keeps(i)).encode() + b"\n"


def _cut_list(spec: str) -> list[tuple[int, int | None]]:
    """cut's LIST: positions from 1, ranges `N-M`, `N-`, `-M`, separated by commas."""
    ranges: list[tuple[int, int | None]] = []
    for item in spec.split(","):
        m = re.fullmatch(r"(\d*)(-?)(\d*)", item)
        if not m or not (m.group(1) or m.group(3)) or (m.group(3) and not m.group(2)) or m.group(1) == "0":
            raise Unknown
        lo = int(m.group(1) or 1)
        hi = int(m.group(3)) if m.group(3) else (None if m.group(2) else lo)
        ranges.append((lo, hi))
    return ranges


def _options(args: list[str], allowed: str, valued: str = "") -> tuple[dict[str, str], list[str]]:
    """Single-letter options (`-vi`, `-n 5`, `-n5`, `-F:`) before the operands; Unknown for others."""
    opts: dict[str, str] = {}
    args = list(args)
    while args and args[0].startswith("-") and args[0] != "-":
        arg = args.pop(0)
        if arg == "--":
            break
        for j, letter in enumerate(arg[1:], 1):
            if letter in valued:
                value = arg[j + 1:] or (args.pop(0) if args else None)
                if value is None:
                    raise Unknown
                opts[letter] = value
                break
            if letter not in allowed:
                raise Unknown
            opts[letter] = ""
    return opts, args


def parse(argv: list[str]) -> tuple[Filter, list[str]] | None:
    """The filter `argv` runs and the files it reads (none: stdin), or None if it is none of these."""
    name, args = os.path.basename(argv[0]), list(argv[1:])
    if name == "cat":
        opts, files = _options(args, "")
        return Filter(), files
    if name == "tr":
        opts, sets = _options(args, "d")
        if not 1 <= len(sets) <= 2 or ("d" in opts) != (len(sets) == 1):
            raise Unknown
        return _Tr("d" in opts, sets[0], sets[1] if len(sets) > 1 else ""), []
    if name == "grep":
        opts, rest = _options(args, "viEFcqs", "e")
        pattern = opts.pop("e", None)
        if pattern is None:
            if not rest:
                raise Unknown
            pattern, rest = rest[0], rest[1:]
        if "F" in opts:
            pattern = re.escape(pattern)
        regex = _regex(pattern, extended="E" in opts or "F" in opts)
        if "i" in opts:
            regex = re.compile(regex.pattern, re.IGNORECASE)
        return _Grep(regex, "v" in opts, "c" in opts, "q" in opts), rest
    if name == "head":
        if args and re.fullmatch(r"-\d+", args[0]):
            args = ["-n", args[0][1:], *args[1:]]
        opts, files = _options(args, "", "n")
        if not re.fullmatch(r"\d+", opts.get("n", "10")):
            raise Unknown
        return _Head(int(opts.get("n", "10"))), files
    if name == "wc":
        opts, files = _options(args, "lwc")
        return _Wc(set(opts)), files
    if name == "sed":
        opts, rest = _options(args, "n", "e")
        script = opts.pop("e", None)
        if script is None:
            if not rest:
                raise Unknown
            script, rest = rest[0], rest[1:]
        return _Sed("n" in opts, script), rest
    if name == "cut":
        opts, files = _options(args, "s", "fcbd")
        kinds = [k for k in "fcb" if k in opts]
        if len(kinds) != 1 or len(opts.get("d", "\t")) != 1 or "d" in opts and kinds != ["f"]:
            raise Unknown
        return _Cut(_cut_list(opts[kinds[0]]), kinds == ["f"], opts.get("d", "\t"), "s" in opts), files
    if name == "sort":
        opts, files = _options(args, "rnu", "tk")
        return _Sort("r" in opts, "n" in opts, "u" in opts, opts.get("t"), opts.get("k")), files
    if name == "awk":
        separator, assigned = None, {}
        while args and args[0].startswith("-") and len(args[0]) > 1:
            arg = args.pop(0)
            if arg == "--":
                break
            if arg[1] not in "Fv" or len(arg) == 2 and not args:
                raise Unknown  # (-f FILE, another option: not simulated)
            value = awk_escapes(arg[2:] or args.pop(0))
            if arg[1] == "F":
                separator = "\t" if value == "t" else value
            elif re.fullmatch(r"[A-Za-z_]\w*=.*", value, re.S):
                assigned.__setitem__(*value.split("=", 1))
            else:
                raise Unknown
        if not args or any(re.fullmatch(r"[A-Za-z_]\w*=.*", a, re.S) for a in args[1:]):
            raise Unknown  # (no program; an assignment among the files)
        return _Awk(args[0], separator, assigned), args[1:]
    return None


def stream(argv: list[str]) -> Filter | None:
    """The filter `argv` runs on its stdin as it comes; None if it reads files or is none of these."""
    try:
        parsed = parse(argv) if argv else None
    except Unknown:
        return None
    if parsed is None or any(f != "-" for f in parsed[1]):
        return None
    return parsed[0]


def reads_stdin(argv: list[str]) -> bool:
    """Whether `argv` is one of these filters reading its stdin (given no file, or `-`)."""
    try:
        parsed = parse(argv) if argv else None
    except Unknown:
        return False
    return parsed is not None and (not parsed[1] or "-" in parsed[1])


def applet(run: Process, fs: ContainerFS, name: str, args: list[str]) -> int:
    """The filter run on its whole input at once, as a script's command: its files (`-`: stdin), or
    stdin, one after the other."""
    parsed = parse([name, *args])
    assert parsed is not None
    f, files = parsed
    status = 0
    for path in files or ["-"]:
        if f.done:
            break
        if path == "-":
            run.out(f.feed(run.read_stdin()))
            continue
        try:
            run.out(f.feed(fs.read(path)))
        except FsError as e:
            run.err(f"{name}: {path}: {e.reason}\n" if name != "cat" else f"cat: can't open '{path}': {e.reason}\n")
            status = 2 if name == "grep" else 1
    out, code = f.end()
    run.out(out)
    return status or code


#: the filters as applets of scripts (cat, head and wc are simulated_applets' own there)
APPLETS = {name: applet for name in ("tr", "grep", "sed", "awk", "cut", "sort")}
