"""Component failures in a `nanokube up` log, which the fuzzer's HTTP contract cannot see: a
controller, the scheduler or a node agent that hits a bug logs a traceback (or an ERROR line)
and goes on, while every answer the client got was fine.

A failure is a record at ERROR or CRITICAL, or any record or stray stderr block (an uncaught
thread exception) that carries a traceback. Alike failures count once: a traceback by its final
exception's type and innermost frame, an ERROR line by its logger and message with its numbers
(and hexadecimal names, as events') blanked.
"""

from __future__ import annotations

import collections
import re
from dataclasses import dataclass

#: the record header of `nanokube up`'s logging format (klog's text header, nanokube/machinery/logs.py): the
#: severity letter, then the caller (file:line), which stands for the logger
HEADER = re.compile(r"^(?P<level>[IWEF])\d{4} \d\d:\d\d:\d\d\.\d{6} +\d+ (?P<logger>[^\s\]]+)\] (?P<msg>.*)$")
#: the severity letters' levels
LEVELS = {"I": "INFO", "W": "WARNING", "E": "ERROR", "F": "CRITICAL"}
FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>.+)$')
TRACEBACK = "Traceback (most recent call last):"
FAILING_LEVELS = ("ERROR", "CRITICAL")


@dataclass
class Failure:
    signature: str
    count: int
    #: the first such record, as logged
    example: str


def records(log: str) -> list[tuple[str | None, str, list[str]]]:
    """(level, logger, lines) of each record: a header line and the lines under it; stderr
    written outside a record (before the first header) is a record of level None."""
    out: list[tuple[str | None, str, list[str]]] = []
    for line in log.splitlines():
        m = HEADER.match(line)
        if m:
            out.append((LEVELS[m["level"]], m["logger"], [line]))
        elif out:
            out[-1][2].append(line)
        else:
            out.append((None, "stderr", [line]))
    return out


def _frame(m: re.Match) -> str:
    path = m["file"]
    if "/nanokube/" in path:
        path = path[path.rindex("/nanokube/") + 1:]
    else:
        path = re.sub(r".*/(site-packages|python3\.\d+)/", "", path)
    return f"{path}:{m['line']} in {m['func']}"


def signature(level: str | None, logger: str, lines: list[str]) -> str | None:
    """What alike failures share, or None when the record is no failure."""
    if TRACEBACK in lines:
        last = len(lines) - 1 - lines[::-1].index(TRACEBACK)  # a chained exception's final block
        frames, exc = [], "?"
        for line in lines[last + 1:]:
            m = FRAME.match(line)
            if m:
                frames.append(m)
            elif frames and line and not line[0].isspace():
                exc = line
                break
        kind = re.match(r"[\w.]+", exc)
        where = _frame(frames[-1]) if frames else "?"
        ours = [f for f in frames if _frame(f).startswith("nanokube/")]
        via = f" (via {_frame(ours[-1])})" if ours and ours[-1] is not frames[-1] else ""
        return f"{kind[0] if kind else exc} at {where}{via}"
    if level in FAILING_LEVELS:
        msg = HEADER.match(lines[0])["msg"]
        return f"{level} {logger}: " + re.sub(r"\b[0-9a-f]*[0-9][0-9a-f]*\b", "N", msg)[:160]
    return None


def component_failures(log: str) -> list[Failure]:
    """The log's failures, alike ones counted once, most frequent first."""
    counts: collections.Counter = collections.Counter()
    examples: dict[str, str] = {}
    for level, logger, lines in records(log):
        sig = signature(level, logger, lines)
        if sig is not None:
            counts[sig] += 1
            examples.setdefault(sig, "\n".join(lines)[:4000])
    return [Failure(sig, n, examples[sig]) for sig, n in counts.most_common()]


def read_from(path, offset: int) -> str:
    """The log written at `path` since byte `offset` (a run's part of a log appended to)."""
    with open(path, "rb") as f:
        f.seek(offset)
        return f.read().decode(errors="replace")
