"""busybox's `find` for simulated_command's interpreter, on a simulated container's files
(simulated_fs): `find [PATH]... [EXPRESSION]` with the tests -name, -iname, -path, -type f|d|l,
-newer, -size, the options -maxdepth, -mindepth and -depth, the actions -print, -print0 and
-exec (`;` once a file, `+` once for all), joined by -a, -o, `!` (-and, -or, -not) and
parentheses. Each directory is listed after itself (or, with -depth, before), its entries in
the order the files list them; a link (a ConfigMap's file, its `..data`) is not followed, as
without -L (every one followed) or -H (a PATH that is one). Its errors are
busybox's: a PATH not there is said and the rest still searched (status 1); a bad expression
ends it at once (status 1). An option it does not simulate leaves the command uninterpreted
(`Unknown`)."""

from __future__ import annotations

import fnmatch
import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .simulated_applets import Unknown
from .simulated_fs import NOT_FOUND, ContainerFS, Dir, File

if TYPE_CHECKING:
    from .simulated_command import _Run

#: -size's units, as busybox's find_suffixes: 512-byte blocks without one
_UNITS = {"c": 1, "w": 2, "": 512, "b": 512, "k": 1024, "M": 1 << 20, "G": 1 << 30}


class _Fatal(Exception):
    """An expression busybox dies of (its message; status 1)."""


@dataclass
class _Found:
    """A file the search reached: its path as printed, what it is, where its link points (None
    for no link) and how deep below its PATH it is."""

    path: str
    node: File | Dir
    link: str | None
    depth: int

    @property
    def kind(self) -> str:
        return "l" if self.link is not None else "d" if isinstance(self.node, Dir) else "f"

    @property
    def size(self) -> int:
        """st_size: a link's is its target's length, a directory's one block (as `stat` shows)."""
        if self.link is not None:
            return len(self.link)
        return 4096 if isinstance(self.node, Dir) else len(self.node.data)


Test = Callable[[_Found], bool]


@dataclass
class _Expression:
    """The parsed expression and the options it set; `acted`: it has an action, so what matches
    it is not printed besides (busybox's need_print)."""

    run: _Run
    fs: ContainerFS
    words: list[str]
    at: int = 0
    maxdepth: int | None = None
    mindepth: int = 0
    depth_first: bool = False
    acted: bool = False
    #: each `-exec ... {} +`: its command and the files found for it
    batches: list[tuple[list[str], list[str]]] = field(default_factory=list)

    def parse(self) -> Test:
        test = self._or()
        if self.at < len(self.words):  # a `)` with no `(`
            raise Unknown
        return test

    def _or(self) -> Test:
        test = self._and()
        while self._peek() in ("-o", "-or"):
            self.at += 1
            left, right = test, self._and()
            test = (lambda a, b: lambda f: a(f) or b(f))(left, right)
        return test

    def _and(self) -> Test:
        test = self._not()
        while (word := self._peek()) is not None and word not in ("-o", "-or", ")"):
            if word in ("-a", "-and"):
                self.at += 1
            left, right = test, self._not()
            test = (lambda a, b: lambda f: a(f) and b(f))(left, right)
        return test

    def _not(self) -> Test:
        if self._peek() in ("!", "-not"):
            self.at += 1
            test = self._not()
            return lambda f: not test(f)
        if self._peek() == "(":
            self.at += 1
            if ")" not in self.words[self.at:]:
                raise _Fatal("unpaired '('")
            test = self._or()
            if self._peek() != ")":
                raise Unknown
            self.at += 1
            return test
        return self._primary()

    def _peek(self) -> str | None:
        return self.words[self.at] if self.at < len(self.words) else None

    def _argument(self, option: str) -> str:
        self.at += 1
        if self.at >= len(self.words):
            raise _Fatal(f"{option} requires an argument")
        return self.words[self.at]

    def _primary(self) -> Test:
        word = self._peek()
        if word is None:
            raise Unknown
        if word in ("-print", "-print0"):
            self.acted, end = True, "\n" if word == "-print" else "\0"
            self.at += 1
            return lambda f: self.run.out(f.path + end) or True
        if word == "-depth":
            self.depth_first = True
            self.at += 1
            return lambda f: True
        if word == "-exec":
            return self._exec()
        value = self._argument(word) if word in ("-maxdepth", "-mindepth", "-name", "-iname", "-path", "-ipath",
                                                 "-wholename", "-type", "-newer", "-size") else None
        self.at += 1
        if word in ("-maxdepth", "-mindepth"):
            if not value.isdigit():
                raise _Fatal(f"invalid number '{value}'")
            if word == "-maxdepth":
                self.maxdepth = int(value)
            else:
                self.mindepth = int(value)
            return lambda f: True
        if word in ("-name", "-iname", "-path", "-ipath", "-wholename"):
            return _pattern(value, whole=word != "-name" and word != "-iname", fold=word.startswith("-i"))
        if word == "-type":
            if value not in ("f", "d", "l"):
                if len(value) == 1 and value in "bcps":  # (no such files here)
                    return lambda f: False
                raise _Fatal(f"invalid argument '{value}' to '-type'")
            return lambda f: f.kind == value
        if word == "-newer":
            than = self.fs.lookup(value)
            if than is None:
                raise _Fatal(f"can't stat '{value}': {NOT_FOUND}")
            return lambda f: int(than.mtime) < int(f.node.mtime)
        if word == "-size":
            return _size(value)
        raise Unknown  # -mtime, -perm, -delete, -L...: not simulated

    def _exec(self) -> Test:
        start = self.at + 1
        end = next((i for i in range(start, len(self.words)) if self.words[i] in (";", "+")), None)
        if end is None or end == start:
            raise _Fatal("-exec requires an argument")
        command, self.at, self.acted = self.words[start:end], end + 1, True
        if self.words[end] == "+":
            if sum(w.count("{}") for w in command) != 1:
                raise _Fatal("only one '{}' allowed for -exec +")
            if command[-1] != "{}":
                raise Unknown
            batch: tuple[list[str], list[str]] = (command[:-1], [])
            self.batches.append(batch)
            return lambda f: batch[1].append(f.path) or True

        def once(f: _Found) -> bool:
            self.run.command([w.replace("{}", f.path) for w in command], in_shell=False)
            return self.run.status == 0
        return once


def _pattern(pattern: str, whole: bool, fold: bool) -> Test:
    """-name's fnmatch of the last part of the path (a PATH's trailing `/` aside), -path's of all of
    it; `*` matches a leading dot too, as busybox's (no FNM_PERIOD)."""
    if fold:
        pattern = pattern.lower()

    def test(f: _Found) -> bool:
        name = f.path if whole else posixpath.basename(f.path.rstrip("/")) or "/"
        return fnmatch.fnmatchcase(name.lower() if fold else name, pattern)
    return test


def _size(value: str) -> Test:
    """-size [+-]N[cwbkMG]: st_size more than, less than or exactly N units, as busybox compares it
    (bytes, not the blocks GNU's rounds up to)."""
    sign, number = (value[0], value[1:]) if value[:1] in ("+", "-") else ("", value)
    m = re.fullmatch(r"(\d+)([cwbkMG]?)", number)
    if m is None:
        raise _Fatal(f"invalid number '{number}'")
    size = int(m.group(1)) * _UNITS[m.group(2)]
    if sign == "+":
        return lambda f: f.size > size
    if sign == "-":
        return lambda f: f.size < size
    return lambda f: f.size == size


def _find(run: _Run, fs: ContainerFS, name: str, args: list[str]) -> int:
    follow = "P"  # -P: no link followed; -H: a PATH that is one; -L: every one
    while args and args[0] in ("-P", "-H", "-L"):
        follow, args = args[0][1], args[1:]
    first = next((i for i, a in enumerate(args) if a.startswith("-") or a in ("!", "(")), len(args))
    paths, expression = args[:first] or ["."], _Expression(run, fs, args[first:])
    try:
        test = expression.parse() if expression.words else (lambda f: True)
    except _Fatal as e:
        run.err(f"find: {e}\n")
        return 1
    status = 0

    def act(found: _Found) -> None:
        if found.depth >= expression.mindepth and test(found) and not expression.acted:
            run.out(found.path + "\n")

    def visit(path: str, depth: int) -> None:
        nonlocal status
        node = fs.lookup(path)
        if node is None:
            run.err(f"find: {path}: {NOT_FOUND}\n")
            status = 1
            return
        followed = follow == "L" or follow == "H" and depth == 0
        found = _Found(path, node, None if followed else fs.link(path), depth)
        if not expression.depth_first:
            act(found)
        if found.kind == "d" and (expression.maxdepth is None or depth < expression.maxdepth):
            if not isinstance(fs.lookup(path), Dir):  # what an -exec removed
                run.err(f"find: {path}: {NOT_FOUND}\n")
                status = 1
            else:
                for entry in fs.listdir(path):
                    visit(path + entry if path.endswith("/") else f"{path}/{entry}", depth + 1)
        if expression.depth_first:
            act(found)

    for path in paths:
        visit(path, 0)
    for command, files in expression.batches:
        if files:
            run.command([*command, *files], in_shell=False)
            status = status or (1 if run.status else 0)
    return status


APPLETS = {"find": _find}
