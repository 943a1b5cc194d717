"""The resource limits a simulated container's commands run under, as the shell's `ulimit`
shows and sets them (a builtin of simulated_command's interpreter).

A container's limits are containerd 2's: it sets none itself, so the container inherits the
runtime's, which systemd's defaults and containerd's unit make: open files 1024 (hard 524288),
locked memory 8192 KiB, stack 8192 KiB (hard unlimited), the rest unlimited but real-time
priority and pending signals. A shell may lower either limit and raise the soft one to the hard
one; raising a hard one takes CAP_SYS_RESOURCE (a privileged container, or one adding it).
What the shell set is kept among its variables (`KEY`, never exported, a subshell's own), so it
is inherited and given back as variables are."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from .simulated_applets import Unknown

if TYPE_CHECKING:
    from .simulated_command import _Run

#: where the shell keeps the limits it set: a name no variable can have
KEY = "\0ulimit"
UNLIMITED = math.inf
#: each limit by ulimit's letter, in busybox's order: (its description and unit as busybox's `ulimit
#: -a` lists it, the soft and hard values in that unit); pending signals as the kernel sizes them
#: for the default cluster's nodes (512Gi: half its max_threads)
LIMITS: dict[str, tuple[str, str, float, float]] = {
    "c": ("core file size", "blocks", UNLIMITED, UNLIMITED),
    "d": ("data seg size", "kb", UNLIMITED, UNLIMITED),
    "e": ("scheduling priority", "", 0, 0),
    "f": ("file size", "blocks", UNLIMITED, UNLIMITED),
    "i": ("pending signals", "", 2097152, 2097152),
    "l": ("max locked memory", "kb", 8192, 8192),
    "m": ("max memory size", "kb", UNLIMITED, UNLIMITED),
    "n": ("open files", "", 1024, 524288),
    "q": ("POSIX message queues", "bytes", 819200, 819200),
    "r": ("real-time priority", "", 0, 0),
    "s": ("stack size", "kb", 8192, UNLIMITED),
    "t": ("cpu time", "seconds", UNLIMITED, UNLIMITED),
    "u": ("max user processes", "", UNLIMITED, UNLIMITED),
    "v": ("virtual memory", "kb", UNLIMITED, UNLIMITED),
    "x": ("file locks", "", UNLIMITED, UNLIMITED),
}
#: bash's words for the units busybox's list names, and the limits only its `ulimit -a` lists
_BASH_UNITS = {"kb": "kbytes"}
_BASH_ONLY = {"R": ("real-time non-blocking time", "microseconds", "unlimited"), "p": ("pipe size", "512 bytes", "8")}
#: dash's letters (it has no -e, -i, -q; its locks are -w, not -x) and its words for each, in its order
_DASH = {"t": "time(seconds)", "f": "file(blocks)", "d": "data(kbytes)", "s": "stack(kbytes)",
         "c": "coredump(blocks)", "m": "memory(kbytes)", "l": "locked memory(kbytes)", "u": "process",
         "n": "nofiles", "v": "vmemory(kbytes)", "x": "locks", "r": "rtprio"}


def _shown(value: float) -> str:
    return "unlimited" if math.isinf(value) else str(int(value))


def _limits(run: _Run) -> dict[str, list[float]]:
    """The shell's limits now: the container's, changed by what it set."""
    limits = {letter: [soft, hard] for letter, (_, _, soft, hard) in LIMITS.items()}
    for item in run.vars.get(KEY, "").split():
        letter, soft, hard = item.split(":")
        limits[letter] = [float(soft), float(hard)]
    return limits


def _may_raise(run: _Run) -> bool:
    """Whether the container holds CAP_SYS_RESOURCE (privileged, or added)."""
    fs = run._files()
    spec = fs.pod.get("spec") or {}
    c = next((c for key in ("containers", "initContainers", "ephemeralContainers") for c in spec.get(key) or ()
              if c.get("name") == fs.container), {})
    context = c.get("securityContext") or {}
    added = {a.upper().removeprefix("CAP_") for a in (context.get("capabilities") or {}).get("add") or ()}
    return bool(context.get("privileged")) or "SYS_RESOURCE" in added or "ALL" in added


def ulimit(run: _Run, name: str, args: list[str]) -> int:
    """`ulimit [-SH] [-a | -LETTER [VALUE]]`: a limit (-f by default; the soft one, or -H's hard one)
    or all of them (-a, as each shell lists them); with VALUE (a number in the limit's unit, or
    `unlimited`) both, or the one -S or -H names, set. A value past the hard limit without
    CAP_SYS_RESOURCE, or a soft one past the hard one, is the shell's error (status 1, dash's 2)."""
    kinds, letter, show_all, value = set(), None, False, None
    for i, arg in enumerate(args):
        if arg.startswith("-") and len(arg) > 1 and value is None:
            for c in arg[1:]:
                if c in "SH":
                    kinds.add(c)
                elif c == "a":
                    show_all = True
                elif c in LIMITS and (run.shell != "dash" or c in _DASH and c != "x") and letter is None:
                    letter = c
                else:
                    raise Unknown  # (another option, two limits at once: not simulated)
        elif value is None and (arg == "unlimited" or arg.isdigit()) and i == len(args) - 1:
            value = UNLIMITED if arg == "unlimited" else float(arg)
        else:
            raise Unknown
    limits = _limits(run)
    hard = kinds == {"H"}
    if show_all:
        if letter or value is not None:
            raise Unknown
        if run.shell == "bash":  # (its format: the description, then "(unit, -c) " right-aligned)
            rows = {c: (words, _BASH_UNITS.get(unit, unit), _shown(limits[c][hard])) for c, (words, unit, _, _)
                    in LIMITS.items()}
            for c in sorted({**rows, **_BASH_ONLY}, key=lambda c: (c != "R", c.lower())):
                words, unit, shown = {**rows, **_BASH_ONLY}[c]
                run.out(f"{words:<20} {f'({unit}, -{c}) ' if unit else f'(-{c}) ':>20}{shown}\n")
            return 0
        for c, (words, unit, _, _) in LIMITS.items() if run.shell != "dash" else ():
            run.out(f"{f'{words} ({unit})' if unit else words:<32}(-{c}) {_shown(limits[c][hard])}\n")
        for c, words in _DASH.items() if run.shell == "dash" else ():
            run.out(f"{words:<20} {_shown(limits[c][hard])}\n")
        return 0
    letter = letter or "f"
    if value is None:
        run.out(_shown(limits[letter][hard]) + "\n")
        return 0
    soft_hard = [value if "H" not in kinds or "S" in kinds else limits[letter][0],
                 value if "S" not in kinds or "H" in kinds else limits[letter][1]]
    reason = "Operation not permitted" if soft_hard[1] > limits[letter][1] and not _may_raise(run) else \
        "Invalid argument" if soft_hard[0] > soft_hard[1] else ""
    if reason:
        where = {"bash": f"line {run.line}: ", "dash": f"{run.line}: "}.get(run.shell, "")
        run.err({"bash": f"bash: {where}ulimit: {LIMITS[letter][0]}: cannot modify limit: {reason}\n",
                 "dash": f"dash: {where}ulimit: error setting limit ({reason})\n"}.get(
            run.shell, f"{run.shell}: error setting limit: {reason}\n"))
        return 2 if run.shell == "dash" else 1
    limits[letter] = soft_hard
    run.vars[KEY] = " ".join(f"{c}:{s}:{h}" for c, (s, h) in limits.items()
                             if (s, h) != (LIMITS[c][2], LIMITS[c][3]))
    return 0
