"""The logging flags every command takes, as component-base's logs options: `-v/--v`, `--vmodule`,
`--logging-format text|json` and `--log-flush-frequency` (validated, and nothing more: the handler
never buffers, each record is flushed as it is written), and the two output forms.

text (the default) is klog's header form, `Lmmdd hh:mm:ss.uuuuuu PID file:line] message`, L one of
I W E F; a record with structured values (`values`) quotes its message and follows it with
`key="value"` pairs, as klog's InfoS. json is component-base's JSON form: one object a line, `ts`
(seconds since the epoch), `caller`, `msg`, `v` for informational records (none for errors, which
carry `err`), then the structured values.

Verbosity and Python's levels. klog's V(n) is a Python level under INFO, DEBUG being V(4), the level
upstream's components log debugging detail at:

    Python level   klog
    CRITICAL       F (written, the process goes on)
    ERROR          E
    WARNING        W
    INFO (20)      I, V(0)
    17, 15, 12     I, V(1), V(2), V(3)
    DEBUG (10)     I, V(4)
    14 - n         I, V(n) for n = 5..13 (9 for V(5), down to 1 for V(13))

`-v=N` sets the root logger to V(N)'s level, so a disabled `log.debug(...)` or `log.log(level(5),
...)` costs Python's cached isEnabledFor check and nothing more. `--vmodule` (text only, as
upstream) raises the verbosity of the files its patterns name: the root logger opens to the highest
level asked for and the handler drops what a record's file was not granted.
"""

from __future__ import annotations

import argparse
import fnmatch
import logging
import os
import sys
import time

import orjson

from . import goduration, gofmt, strconv

FORMATS = ("text", "json")
#: V(0)..V(4)'s Python levels; V(n) beyond is 14 - n
_LEVELS = (logging.INFO, 17, 15, 12, logging.DEBUG)


def level(v: int) -> int:
    """The Python level of klog's V(v)."""
    if v <= 0:
        return logging.INFO
    return _LEVELS[v] if v < len(_LEVELS) else max(14 - v, 1)


def verbosity(levelno: int) -> int:
    """The V(n) a record at `levelno` (INFO or under) was logged at."""
    for v, at in enumerate(_LEVELS):
        if levelno >= at:
            return v
    return 14 - levelno


def values(**kv) -> dict:
    """`extra=` for a structured record, as klog's InfoS key/value pairs: `log.info(msg,
    extra=values(pod=obj(ns, name), node=n))`."""
    return {"kv": kv}


class obj:
    """klog.KObj: a namespaced object's reference, `ns/name` in text, {name, namespace} in JSON."""

    __slots__ = ("namespace", "name")

    def __init__(self, namespace: str | None, name: str) -> None:
        self.namespace, self.name = namespace or "", name

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    def json(self) -> dict:
        return {"name": self.name, "namespace": self.namespace} if self.namespace else {"name": self.name}


def add_arguments(parser) -> None:
    g = parser.add_argument_group("logging flags")
    g.add_argument("-v", "--v", type=_verbosity, default=0, metavar="Level", dest="v",
                   help="number for the log level verbosity (0: informational only; 4: debugging detail)")
    g.add_argument("--vmodule", default="", metavar="pattern=N,...",
                   help="comma-separated list of pattern=N settings for file-filtered logging (only works for the "
                        "text log format): a pattern matches a source file's name without .py, or its path when it "
                        "holds a slash")
    g.add_argument("--logging-format", default="text", metavar="FORMAT",
                   help="sets the log format: text (klog's header form, the default) or json")
    g.add_argument("--log-flush-frequency", default="5s", metavar="DURATION",
                   help="maximum time between log flushes (default 5s); ignored, as upstream ignores it for a "
                        "logging backend that does not buffer: each record is written and flushed as it comes")


def _verbosity(text: str) -> int:
    """-v's value: a VerbosityLevel, ParseUint's (decimal digits alone, under 2^31)."""
    try:
        return strconv.parse_uint(text, 31)
    except strconv.NumError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def parse_vmodule(text: str) -> list[tuple[str, int]]:
    """component-base's vmodule flag: (pattern, level) pairs, a level ParseUint's (decimal digits
    alone, under 2^31); ValueError in pflag's words for a malformed one."""
    out = []
    for part in filter(None, text.split(",")):
        pieces = part.split("=")
        if len(pieces) != 2 or not all(pieces):
            raise ValueError(f'invalid argument {gofmt.quote(text)} for "--vmodule" flag: '
                             f"{gofmt.quote(part)} does not have the pattern=N format")
        try:
            v = strconv.parse_uint(pieces[1], 31)
        except strconv.NumError as e:
            raise ValueError(f'invalid argument {gofmt.quote(text)} for "--vmodule" flag: '
                             f"parsing verbosity in {gofmt.quote(part)}: {e}") from None
        out.append((pieces[0].removesuffix(".py"), v))
    return out


def validate(args) -> None:
    """ValueError for logging flags upstream's ValidateAndApply refuses."""
    if args.logging_format not in FORMATS:
        raise ValueError(f"--logging-format: Unsupported log format {args.logging_format!r} "
                         f"(supported: {', '.join(FORMATS)})")
    if parse_vmodule(args.vmodule) and args.logging_format != "text":
        raise ValueError("--vmodule: Forbidden: only supported for text log format")
    if goduration.parse(args.log_flush_frequency, "--log-flush-frequency") <= 0:
        raise ValueError("--log-flush-frequency: must be greater than 0")


class _Files(logging.Filter):
    """--vmodule's per-file verbosity, over the root logger's level (opened to the highest asked)."""

    def __init__(self, v: int, modules: list[tuple[str, int]]) -> None:
        super().__init__()
        self.floor = level(v)
        self.modules = modules
        self._granted: dict[str, int] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= self.floor:
            return True
        path = record.pathname
        granted = self._granted.get(path)
        if granted is None:
            stem = path.removesuffix(".py")
            name = os.path.basename(stem)
            granted = self.floor
            for pattern, n in self.modules:
                if "/" not in pattern and fnmatch.fnmatchcase(name, pattern) or "/" in pattern and (
                        fnmatch.fnmatchcase(stem, pattern) or fnmatch.fnmatchcase(stem, "*/" + pattern)):
                    granted = level(n)
                    break
            self._granted[path] = granted
        return record.levelno >= granted


class TextFormatter(logging.Formatter):
    """klog's header form."""

    def __init__(self) -> None:
        super().__init__()
        self.pid = os.getpid()

    def format(self, record: logging.LogRecord) -> str:
        t = record.created
        lt = time.localtime(t)
        kv = getattr(record, "kv", None)
        msg = record.getMessage()
        if kv is not None:
            msg = orjson.dumps(msg).decode() + "".join(f" {k}={_text(v)}" for k, v in kv.items())
        head = (f"{_severity(record.levelno)}"
                f"{lt.tm_mon:02d}{lt.tm_mday:02d} {lt.tm_hour:02d}:{lt.tm_min:02d}:{lt.tm_sec:02d}."
                f"{int((t % 1) * 1e6):06d} {self.pid:7d} {record.filename}:{record.lineno}] {msg}")
        if record.exc_info:
            head += "\n" + self.formatException(record.exc_info)
        elif record.stack_info:
            head += "\n" + self.formatStack(record.stack_info)
        return head


def _severity(levelno: int) -> str:
    return "F" if levelno >= logging.CRITICAL else "E" if levelno >= logging.ERROR \
        else "W" if levelno >= logging.WARNING else "I"


def _text(value) -> str:
    """A value as klog's text form writes it: strings and references quoted, numbers bare."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return orjson.dumps(str(value)).decode()


def _json(value):
    return value.json() if isinstance(value, obj) else value


class JSONFormatter(logging.Formatter):
    """component-base's JSON form."""

    def format(self, record: logging.LogRecord) -> str:
        out = {"ts": record.created, "caller": f"{record.filename}:{record.lineno}", "msg": record.getMessage()}
        if record.levelno < logging.ERROR:
            out["v"] = verbosity(record.levelno)
        if record.exc_info:
            kind, exc, _ = record.exc_info
            out["err"] = f"{kind.__name__}: {exc}" if kind else ""
            out["stacktrace"] = self.formatException(record.exc_info)
        for k, v in (getattr(record, "kv", None) or {}).items():
            out[k] = _json(v)
        return orjson.dumps(out, default=str).decode()


_state = {"v": 0, "modules": [], "handler": None}


def configure(args) -> None:
    """Logging as the flags say, on stderr (validated already)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JSONFormatter() if args.logging_format == "json" else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    _state.update(handler=handler, modules=parse_vmodule(args.vmodule))
    set_verbosity(args.v)


def set_verbosity(v: int) -> None:
    """The root logger at V(v) (PUT /debug/flags/v), the --vmodule files at their own."""
    root = logging.getLogger()
    modules, handler = _state["modules"], _state["handler"]
    _state["v"] = v
    root.setLevel(min([level(v), *(level(n) for _, n in modules)]))
    if handler is not None:
        for f in list(handler.filters):
            handler.removeFilter(f)
        if modules:
            handler.addFilter(_Files(v, modules))


def worker_argv(args) -> list[str]:
    """The logging flags `up` hands each more API server worker (workers.py)."""
    return ["--v", str(args.v), "--vmodule", args.vmodule, "--logging-format", args.logging_format,
            "--log-flush-frequency", args.log_flush_frequency]
