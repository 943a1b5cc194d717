"""The shell's own commands (its builtins) for simulated_command's interpreter: `:`, `true`,
`false`, `echo [-neE]`, `printf`, `exit`, `break`, `continue`, `return`, `shift`, `local`, `set`, `exec`,
`read`, `trap`, `eval`, `ulimit` (simulated_limits), `export` and `unset`, `command -v`, with busybox's `env` and `printenv`, which read the
same variables, `xargs`, which runs commands as `env` does, and `which`. Each takes the running shell (simulated_command's
run: its variables, options, arguments, stdin and output), its name and its arguments, and gives
its exit status; one that ends the shell, a loop or a function raises `Exit`, `Jump` or
`Return`, one used in a way not simulated `Unknown`, as an applet does."""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Callable
from typing import TYPE_CHECKING

from .simulated_applets import WRITE_BUDGET, NoTerminal, Unknown
from .simulated_limits import ulimit
from .simulated_script import _NAME, Script, parse

if TYPE_CHECKING:
    from .simulated_command import _Run

#: what a command reads as stdin when it was sent nothing: an interactive shell's commands have a
#: terminal there, which is not simulated
TERMINAL = None


class Open(bytes):
    """Stdin that is still open: what it has held so far, more to come. A read past it waits
    (NoTerminal, as for a stdin still to come), as a real process blocks in read(2)."""
#: the commands that are the shell's own (no binary runs them, `exit` as a container's command is not found)
SHELL_ONLY = frozenset({"exit", "export", "unset", "break", "continue", "cd", "pwd", "set", "read", "exec",
                        "return", "local", "trap", "command", "shift", "eval", "ulimit"})


#: the shells a command line may name (`sh -c SCRIPT`)
SHELLS = frozenset({"sh", "ash", "bash", "dash"})


class Exit(Exception):
    """`exit`: the shell ends (its status is the run's)."""


class Replaced(Exit):
    """`exec sh -c SCRIPT [NAME ARG...]`: the shell ends, and another (`shell`: sh, bash...) takes
    its place running `script` with positional parameters `args` (where nothing runs it, as the
    shell ending): the shell, or the subshell it ran in (a pipe's command, `$(...)`), catching
    this, goes on as the new one (`_Run.replaced`)."""

    def __init__(self, script: Script, args: list[str], shell: str):
        super().__init__("exec")
        self.script, self.args, self.shell = script, args, shell


class Return(Exception):
    """`return`: the function running ends (its status is the run's)."""


class Jump(Exception):
    """`break` or `continue` out of `levels` loops."""

    def __init__(self, kind: str, levels: int):
        super().__init__(kind)
        self.kind, self.levels = kind, levels


def _true(run: _Run, name: str, args: list[str]) -> int:
    return 0


def _false(run: _Run, name: str, args: list[str]) -> int:
    return 1


def _echo(run: _Run, name: str, args: list[str]) -> int:
    """busybox's echo: -n leaves out the new line, -e reads escapes (`\\c` ends the output), -E not."""
    flags = set()
    while args and re.fullmatch(r"-[neE]+", args[0]):
        flags |= set(args.pop(0)[1:])
    text = " ".join(args) + ("" if "n" in flags else "\n")
    if "e" in flags and "E" not in flags:
        text, _, _ = escapes(text, octal=r"0[0-7]{0,3}").partition("\0\\c")
    run.output.append((run.now, text))
    return 0


def _printf(run: _Run, name: str, args: list[str]) -> int:
    """printf FORMAT [ARG...]: FORMAT's escapes and conversions (%s %b %c %d %i %u %o %x %X %f %e %g
    %%, with flags, width and precision), used again while arguments are left, as busybox's."""
    if not args:
        raise Unknown
    fmt, args = args[0], list(args[1:])
    if re.search(r"%(?![-+ #0]*\d*(?:\.\d*)?[diouxXfeEgGcsb])", fmt.replace("%%", "")):
        raise Unknown  # a conversion busybox has that is not simulated (%*d...)
    status, out = 0, ""
    while True:
        used = False

        def convert(m: re.Match) -> str:
            nonlocal status, used
            flags, width, precision, kind = m.groups()
            if kind == "%":
                return "%"
            if int(width or 0) > WRITE_BUDGET or int(precision[1:] or 0) > WRITE_BUDGET:
                raise Unknown  # padding past what a run may write (`%0999999999d`)
            used = True
            arg = args.pop(0) if args else ""
            if kind == "b":
                return escapes(arg, octal=r"0[0-7]{0,3}").partition("\0\\c")[0]
            if kind in "sc":
                return f"%{flags}{width}{precision}s" % (arg[:1] if kind == "c" else arg)
            try:
                value = float(arg or 0) if kind in "feEgG" else int(arg or 0, 0 if arg[:2].lower() == "0x" else 10)
            except ValueError:
                run.err(f"sh: invalid number '{arg}'\n")
                status, value = 1, 0
            return f"%{flags}{width}{precision}{'d' if kind in 'iu' else kind}" % value
        out += escapes(re.sub(r"%([-+ #0]*)(\d*)((?:\.\d*)?)([diouxXfeEgGcsb%])", convert,
                              fmt), octal=r"[0-7]{1,3}")
        if not args or not used:
            break
    run.out(out)
    return status


def _exit(run: _Run, name: str, args: list[str]) -> int:
    if len(args) > 1:
        raise Unknown
    if args:
        if not args[0].isdigit():
            raise Unknown
        run.status = int(args[0]) & 255
    raise Exit


def _jump(run: _Run, name: str, args: list[str]) -> int:
    """`break [N]` and `continue [N]`: out of N loops (as many as there are, at most)."""
    if len(args) > 1:
        raise Unknown
    levels = int(args[0]) if args and args[0].isdigit() and int(args[0]) > 0 else 1 if not args else 0
    if not levels:
        raise Unknown
    run.status = 0
    if run.loops:
        raise Jump(name, min(levels, run.loops))
    return 0


def _return(run: _Run, name: str, args: list[str]) -> int:
    """`return [N]`: out of the function running, with status N (else the last command's)."""
    if not (run.frames or run.sourcing) or len(args) > 1 or args and not args[0].isdigit():
        raise Unknown  # outside a function or a sourced file: not simulated
    if args:
        run.status = int(args[0]) & 255
    raise Return


def _eval(run: _Run, name: str, args: list[str]) -> int:
    """`eval ARG...`: its arguments joined by blanks, run as a script in this shell (what it sets
    stays set): its status the last command's, 0 for none. A launcher builds its command line in
    a variable (`CMD="torchrun --nproc $N"; eval "$CMD"`) or its variables (`eval "$(env.sh)"`)."""
    run.status = 0
    run.script(parse(" ".join(args)))
    return run.status


def _shift(run: _Run, name: str, args: list[str]) -> int:
    """`shift [N]`: the positional parameters from `$N+1` on become `$1...` (a launcher's loop over
    its options)."""
    n = int(args[0]) if len(args) == 1 and args[0].isdigit() else 1 if not args else -1
    if not 0 <= n < len(run.args):
        raise Unknown  # shifting more than there are: each shell's own answer, not simulated
    run.args[1:] = run.args[1 + n:]
    return 0


def _local(run: _Run, name: str, args: list[str]) -> int:
    """`local NAME[=value]...`: variables of the function running, given back their values as it returns."""
    if not run.frames:
        run.err("sh: local: not in a function\n")
        return 1
    for arg in args:
        if (assigned := _assignment(run, "local", arg)) is None:
            return 1
        var, value = assigned
        run.frames[-1].setdefault(var, run.vars.get(var))
        if value is not None:
            run.vars[var] = value
    return 0


def _assignment(run: _Run, builtin: str, arg: str) -> tuple[str, str | None] | None:
    """`NAME[=value]`, an argument of `local` or `export`: the name and the value given (None
    without `=`), or None once the shell has said the name is bad."""
    var, eq, value = arg.partition("=")
    if not _NAME.fullmatch(var):
        run.err(f"sh: {builtin}: bad variable name '{arg}'\n")
        return None
    return var, value if eq else None


#: the conditions `trap` takes, by the names and numbers it knows them by
_SIGNALS = {"EXIT": "EXIT", "0": "EXIT", "HUP": "HUP", "1": "HUP", "INT": "INT", "2": "INT", "QUIT": "QUIT",
            "3": "QUIT", "USR1": "USR1", "10": "USR1", "USR2": "USR2", "12": "USR2", "TERM": "TERM", "15": "TERM"}


def _trap(run: _Run, name: str, args: list[str]) -> int:
    """`trap [ACTION CONDITION...]`: ACTION (a script; `-`: the default again; empty: ignored) on
    each condition: EXIT's runs as the shell ends, TERM's as the kubelet's SIGTERM is taken (a
    container's command only); the other signals' are kept (no one sends them). With no
    arguments, the traps set, as the shell lists them."""
    if not args:
        order = list(dict.fromkeys(_SIGNALS.values()))
        run.out("".join("trap -- '" + run.traps[cond].replace("'", "'\\''") + f"' {cond}\n"
                        for cond in sorted(run.traps, key=order.index)))
        return 0
    action, conditions = (args[0], args[1:]) if len(args) > 1 else ("-", args)
    names = [_SIGNALS.get(c.upper().removeprefix("SIG")) for c in conditions]
    if None in names or action.startswith("-") and action != "-":
        raise Unknown  # another signal, `trap -p`...: not simulated
    for cond in names:
        if action == "-":
            run.traps.pop(cond, None)
        else:
            run.traps[cond] = action
            run.trapped.add(cond)
    return 0


def _set(run: _Run, name: str, args: list[str]) -> int:
    """`set [-+][euxo pipefail]... [-- ARG...]`: the shell's options, its positional parameters."""
    args = list(args)
    while args and args[0][:1] in "-+" and args[0] != "--":
        arg = args.pop(0)
        on = arg[0] == "-"
        for letter in arg[1:]:
            if letter == "o":
                if not args or args[0] != "pipefail":
                    raise Unknown
                option = args.pop(0)
            elif letter in "eux":
                option = letter
            else:
                raise Unknown
            (run.options.add if on else run.options.discard)(option)
    if args[:1] == ["--"]:
        run.args[1:] = args[1:]
    elif args:
        raise Unknown  # `set` printing the variables, `set word`
    return 0


def _exec(run: _Run, name: str, args: list[str]) -> int:
    """The command in the shell's place: the shell ends with it, its EXIT trap not run (the process
    is another program). A shell's `-c` script starts afresh: the exported variables alone, no
    functions, options nor traps, its own positional parameters (it ran forever: `sh` alone is
    no command run outside a shell)."""
    if not args:
        return 0
    if os.path.basename(args[0]) in SHELLS and args[1:2] == ["-c"] and len(args) >= 3:
        if run.redirected:  # (the new shell's output where a redirection sends it: not simulated)
            raise Unknown
        raise Replaced(parse(args[2]), args[3:] or args[:1], os.path.basename(args[0]))
    run.traps.clear()
    run.command(args, in_shell=False)
    raise Exit


#: the field separators where IFS is unset: blanks and new lines
DEFAULT_IFS = " \t\n"


def _delimiter(ifs: str) -> re.Pattern | None:
    """What separates two fields by `ifs`: one of its other characters with its white space around,
    or a run of its white space; None for an empty IFS (no splitting)."""
    ws, other = "".join(c for c in ifs if c in DEFAULT_IFS), "".join(c for c in ifs if c not in DEFAULT_IFS)
    around = f"[{re.escape(ws)}]*" if ws else ""
    alternatives = [f"{around}[{re.escape(other)}]{around}"] if other else []
    alternatives += [f"[{re.escape(ws)}]+"] if ws else []
    return re.compile("|".join(alternatives)) if alternatives else None


def split_fields(value: str, ifs: str) -> tuple[list[str], bool, bool]:
    """An unquoted expansion's value split at IFS's characters (POSIX field splitting): its fields
    (an empty one between two non-white separators; a last separator ends the last field), and
    whether a separator starts and ends it (ending the field before it, starting a new one after)."""
    delimiter = _delimiter(ifs)
    if delimiter is None or not value:
        return [value] if value else [], False, False
    core = value.strip("".join(c for c in ifs if c in DEFAULT_IFS))
    pieces = delimiter.split(core) if core else []
    if pieces and pieces[-1] == "":
        pieces.pop()
    return pieces, value[0] in ifs, value[-1] in ifs


def _read_fields(text: str, ifs: str, names: int) -> list[str]:
    """A line `read` splits among `names` names: at IFS's separators, its white space trimmed, the
    last name taking the rest (less a separator that only ends it: "b," of "a,b,")."""
    text = text.strip("".join(c for c in ifs if c in DEFAULT_IFS))
    delimiter = _delimiter(ifs)
    if delimiter is None:
        return [text]
    fields, at = [], 0
    for _ in range(names - 1):
        m = delimiter.search(text, at)
        if m is None:
            break
        fields.append(text[at:m.start()])
        at = m.end()
    rest = text[at:]
    ends = list(delimiter.finditer(rest))
    if len(ends) == 1 and ends[0].end() == len(rest):
        rest = rest[:ends[0].start()]
    return [*fields, rest]


def _read(run: _Run, name: str, args: list[str]) -> int:
    """`read [-r] [NAME...]`: one line of stdin into the names (split at IFS's separators, blanks
    where it is unset, the last taking the rest; REPLY without names); 1 at the end of stdin."""
    raw = args[:1] == ["-r"]
    names = args[1:] if raw else args
    if any(n.startswith("-") or not re.fullmatch(r"[A-Za-z_]\w*", n) for n in names):
        raise Unknown
    if run.stdin is TERMINAL or isinstance(run.stdin, Open) and b"\n" not in run.stdin:
        raise NoTerminal
    line, newline, rest = run.stdin.partition(b"\n")
    run.stdin = type(run.stdin)(rest)
    text = line.decode(errors="replace")
    if not raw:
        text = re.sub(r"\\(.)", r"\1", text)
    fields = _read_fields(text, run.vars.get("IFS", DEFAULT_IFS), len(names)) if names else [text.strip()]
    for i, n in enumerate(names or ["REPLY"]):
        run.vars[n] = fields[i] if i < len(fields) else ""
    return 0 if newline else 1


#: busybox ash's builtins among the commands simulated (`command -v` names them, not a path)
ASH_BUILTINS = frozenset({"echo", "printf", "true", "false", ":", "exit", "export", "unset", "break", "continue",
                          "return", "local", "set", "exec", "read", "trap", "wait", "cd", "pwd", "test", "[", "command",
                          "eval", "shift", "ulimit"})


def _command_v(run: _Run, name: str, args: list[str]) -> int:
    """`command -v NAME...`: how each would run, a builtin or function by its name, a command by
    its path (`run.located`); `which NAME...`: each command's path. Status 1 where one is not found."""
    names = args[1:] if name == "command" and args[:1] == ["-v"] else args if name == "which" else None
    if not names or any(n.startswith("-") for n in names):
        raise Unknown  # (`command NAME`, `command -V`, `which -a`: not simulated)
    status = 0
    for n in names:
        found = n if name == "command" and (n in ASH_BUILTINS or n in run.functions) else run.located(n)
        if found is None:
            status = 1
        else:
            run.out(found + "\n")
    return status


def _environment(run: _Run, name: str, args: list[str]) -> int:
    """The shell's `export` and `unset`, and busybox's `env` and `printenv`: the environment is
    the exported variables, in the order they were set."""
    if name == "export":
        if not args or args == ["-p"]:
            for var in sorted(run.exported & run.vars.keys()):
                run.out(f"export {var}='" + run.vars[var].replace("'", "'\\''") + "'\n")
            return 0
        for arg in args:
            if (assigned := _assignment(run, "export", arg)) is None:
                return 1
            var, value = assigned
            if value is not None:
                run.vars[var] = value
            run.exported.add(var)
        return 0
    if name == "unset":
        for var in args:
            run.vars.pop(var, None)
            run.exported.discard(var)
        return 0
    environ = {k: v for k, v in run.vars.items() if k in run.exported}
    if name == "env":
        args = list(args)
        while args and "=" in args[0] and not args[0].startswith("="):
            var, _, value = args.pop(0).partition("=")
            environ.pop(var, None)
            environ[var] = value
        if args:
            saved = run.vars, run.exported
            run.vars, run.exported = dict(environ), set(environ)
            try:
                run.command(args, in_shell=False)
            finally:
                run.vars, run.exported = saved
            return run.status
    if name == "env" or not args:
        run.out("".join(f"{k}={v}\n" for k, v in environ.items()))
        return 0
    status = 0
    for var in args:
        if var in environ:
            run.out(environ[var] + "\n")
        else:
            status = 1
    return status


def _xargs(run: _Run, name: str, args: list[str]) -> int:
    """busybox's xargs [-r] [-n N] [-I R] [COMMAND [ARG...]]: COMMAND (echo) run with the words of
    stdin (quotes read as a shell's) after its arguments, N at a time, or, with -I, once per line
    with R in its arguments replaced by the line; 123 if a run failed."""
    opts: dict[str, str] = {}
    args = list(args)
    while args and args[0].startswith("-") and len(args[0]) > 1:
        arg = args.pop(0)
        if arg == "--":
            break
        letter, value = arg[1], arg[2:]
        if letter == "r" and not value:
            opts["r"] = ""
        elif letter in "nI":
            opts[letter] = value or (args.pop(0) if args else "")
        else:
            raise Unknown  # -0, -t, -P...: not simulated
    if "n" in opts and not re.fullmatch(r"[1-9]\d*", opts["n"]) or opts.get("I") == "":
        raise Unknown
    command = args or ["echo"]
    data = run.read_stdin().decode(errors="replace")
    if "I" in opts:
        runs = [[a.replace(opts["I"], line) for a in command] for raw in data.splitlines() if (line := raw.strip())]
    else:
        try:
            words = shlex.split(data)
        except ValueError:
            run.err("xargs: unmatched quote\n")
            return 1
        size = int(opts.get("n", 0)) or max(len(words), 1)
        runs = [[*command, *words[i:i + size]] for i in range(0, len(words), size)]
        if not runs and "r" not in opts:
            runs = [command]
    status, saved = 0, run.stdin
    run.stdin = b""  # what it runs reads no input
    try:
        for argv in runs:
            run.command(argv, in_shell=False)
            if run.status:
                status = 123
    finally:
        run.stdin = saved
    return status


_ESCAPES = {"\\": "\\", "a": "\a", "b": "\b", "e": "\x1b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
            '"': '"', "c": "\0\\c"}


def escapes(text: str, octal: str) -> str:
    """printf's and `echo -e`'s backslash escapes (`\\c`, the end of output, as "\\0\\\\c")."""
    def one(m: re.Match) -> str:
        seq = m.group(1)
        if seq[0] in "01234567" and re.fullmatch(octal, seq):
            return chr(int(seq.lstrip("0") or "0", 8) & 255)
        if seq[0] == "x":
            return chr(int(seq[1:], 16))
        return _ESCAPES.get(seq, "\\" + seq)
    return re.sub(r"\\(" + octal + r"|x[0-9a-fA-F]{1,2}|.)", one, text, flags=re.S)


def _wait(run: _Run, name: str, args: list[str]) -> int:
    """`wait`: until every background job (`sleep N &`) has ended, 0; `wait PID...` until those
    jobs (`$!`) have, the last one's status (a job waited for before too), or 127 where the last PID is no job of the
    shell's (and nothing said, as ash). A SIGTERM the shell traps coming meanwhile ends it at once
    with 143 (128 + 15), its trap running then, as a shell's wait is interrupted where a foreground
    command is waited out. A job spec (`%1`) is not simulated."""
    if not all(a.isdigit() for a in args):
        raise Unknown
    pids = [int(a) for a in args] if args else list(run.jobs)
    end = max([run.now, *(run.jobs[p][0] for p in pids if p in run.jobs)])
    status = 0 if not args else run.jobs[pids[-1]][1] if pids[-1] in run.jobs else 127
    if run.signal is not None and not run.signal_taken and run.traps.get("TERM") and run.signal < end:
        run.now = max(run.now, run.signal)
        run.status = 143
        run._take_signal()  # (its trap runs now: its `exit` ends the shell)
        return 143
    run.now = max(run.now, end)
    return status


BUILTINS: dict[str, Callable[[_Run, str, list[str]], int]] = {
    "true": _true, ":": _true, "false": _false, "echo": _echo, "printf": _printf, "exit": _exit,
    "break": _jump, "continue": _jump, "return": _return, "shift": _shift, "local": _local, "set": _set, "exec": _exec, "read": _read,
    "trap": _trap, "eval": _eval, "ulimit": ulimit, "wait": _wait, "command": _command_v, "which": _command_v,
    **dict.fromkeys(("export", "unset", "env", "printenv"), _environment), "xargs": _xargs}
