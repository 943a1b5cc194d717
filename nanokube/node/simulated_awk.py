"""busybox's awk for simulated_filters: the programs scripts feed command output through
(`nvidia-smi ... | awk -F', ' 'NR>1 {printf "%s %d\\n", $1, $2}'`, `awk '{s += $2} END {print s}'`,
`awk '{c[$1]++} END {for (k in c) print k, c[k]}'`).

A program is pattern-action items: `BEGIN {...}`, `END {...}`, `PATTERN {...}`, `PATTERN` alone
(print the record) or `{...}`, a pattern an expression or `/RE/`. Its statements: `print`
(`,` joins by OFS), `printf`, assignments (`=`, `+=`...), `++`/`--`, `if`/`else`, `while`,
`for (;;)`, `for (KEY in ARRAY)`, `delete`, `next`, `exit`, and `{ }` blocks; its expressions:
numbers, strings, `$N` (fields split at blanks or -F's separator, a field assigned rebuilding the
record), variables (NR, NF, FS, OFS, and `-v NAME=VALUE`'s), arrays (`a[k]`, `k in a`), `+ - * /
% ^`, comparisons (numeric where both sides look numeric, else as strings), `~` and `!~`, `!`,
`&&`, `||`, `?:`, concatenation, and length, substr, index, split, sub, gsub, tolower, toupper,
int, sprintf. Anything else (getline, functions of the program's own, output redirections) is
`Unknown`. Numbers print as integers where they are whole, else as `%.6g` (OFMT)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from .simulated_applets import Unknown

_TOKEN = re.compile(r"""
    (?P<space>[ \t]+|\\\n|\#[^\n]*) |
    (?P<newline>\n) |
    (?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?) |
    (?P<string>"(?:[^"\\\n]|\\.)*") |
    (?P<name>[A-Za-z_]\w*) |
    (?P<op>\+\+|--|\+=|-=|\*=|/=|%=|\^=|==|<=|>=|!=|!~|&&|\|\||>>|[-+*/%^!<>|?:~$=(){}\[\];,])
""", re.X)
_BUILTINS = frozenset({"length", "substr", "index", "split", "sub", "gsub", "tolower", "toupper", "int", "sprintf"})
_KEYWORDS = frozenset({"BEGIN", "END", "if", "else", "while", "for", "in", "delete", "next", "exit", "print", "printf",
                       "getline", "function", "do", "return", "break", "continue"})
#: the POSIX classes of a bracket expression, as Python's regular expressions spell them
_CLASSES = {"[:digit:]": "0-9", "[:alpha:]": "A-Za-z", "[:alnum:]": "0-9A-Za-z", "[:upper:]": "A-Z",
            "[:lower:]": "a-z", "[:space:]": " \\t\\n\\r\\f\\v", "[:blank:]": " \\t", "[:xdigit:]": "0-9A-Fa-f"}
_NUMERIC = re.compile(r"\s*[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?\s*")
#: the work a run may do (statements and expressions, a unit per 64 characters of a string it builds,
#: prints or stores, one per field it makes) before it is taken for a loop without end: it runs in the
#: agent's event loop, where `while (1) x = x x` or `$1e9 = 1` would stall or exhaust the whole process
STEPS = 1_000_000
_ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", '"': '"', "/": "/", "r": "\r", "a": "\a", "b": "\b", "f": "\f",
            "v": "\v"}


class _Next(Exception):
    """`next`: on to the next record."""


class _Exit(Exception):
    """`exit`: END's actions, then the end."""


class _Jump(Exception):
    """`break` or `continue` (its kind) out of the innermost loop's pass."""


class _Unset(str):
    """A variable or element never set: "" and 0 at once (it compares as a number with a number)."""


UNSET = _Unset("")


def awk_escapes(text: str) -> str:
    """A string's backslash escapes as awk reads them (in its program, -v's and -F's values)."""
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), "\\" + m.group(1)), text)


def _lex(program: str) -> list[tuple[str, str]]:
    """The tokens: (kind, text); a `/` where an operand is due starts a regular expression."""
    tokens: list[tuple[str, str]] = []
    i = 0
    while i < len(program):
        operand_due = not tokens or tokens[-1][0] in ("newline", "op", "keyword") and tokens[-1][1] not in (")", "]", "$")
        if program[i] == "/" and operand_due:
            end = i + 1
            while end < len(program) and program[end] != "/":
                end += 2 if program[end] == "\\" else 1
            if end >= len(program):
                raise Unknown
            tokens.append(("regex", program[i + 1:end].replace("\\/", "/")))
            i = end + 1
            continue
        m = _TOKEN.match(program, i)
        if m is None:
            raise Unknown
        kind = m.lastgroup
        if kind == "name" and m.group() in _KEYWORDS:
            kind = "keyword"
        if kind != "space":
            tokens.append((kind, m.group()))
        i = m.end()
    return tokens


@dataclass
class _Parser:
    tokens: list[tuple[str, str]]
    i: int = 0

    def peek(self, ahead: int = 0) -> tuple[str, str]:
        return self.tokens[self.i + ahead] if self.i + ahead < len(self.tokens) else ("end", "")

    def take(self, text: str | None = None) -> tuple[str, str]:
        token = self.peek()
        if text is not None and token[1] != text or token[0] == "end":
            raise Unknown
        self.i += 1
        return token

    def at(self, *texts: str) -> bool:
        kind, text = self.peek()
        return kind in ("op", "keyword") and text in texts

    def newlines(self) -> None:
        while self.peek()[0] == "newline":
            self.i += 1

    def program(self) -> list[tuple]:
        items = []
        while True:
            while self.peek()[0] == "newline" or self.at(";"):
                self.i += 1
            if self.peek()[0] == "end":
                return items
            if self.at("BEGIN", "END"):
                items.append((self.take()[1], self.block()))
                continue
            if self.at("function"):
                raise Unknown
            pattern = None if self.at("{") else self.expr()
            items.append(("", pattern, self.block() if self.at("{") else [("print", [], None)]))

    def block(self) -> list:
        self.take("{")
        body = self.statements("}")
        self.take("}")
        return body

    def statements(self, closing: str) -> list:
        body = []
        while True:
            while self.peek()[0] == "newline" or self.at(";"):
                self.i += 1
            if self.at(closing):
                return body
            body.append(self.statement())

    def simple_end(self) -> None:
        if self.peek()[0] == "newline" or self.at(";"):
            self.i += 1
        elif not self.at("}") and self.peek()[0] != "end":
            raise Unknown

    def statement(self):
        if self.at("{"):
            return ("block", self.block())
        if self.at("if"):
            cond = self._condition()
            then = self.statement()
            k = self.i
            while self.peek()[0] == "newline" or self.at(";"):
                self.i += 1
            if self.at("else"):
                self.take()
                self.newlines()
                return ("if", cond, then, self.statement())
            self.i = k
            return ("if", cond, then, None)
        if self.at("while"):
            return ("while", self._condition(), self.statement())
        if self.at("for"):
            self.take()
            self.take("(")
            if self.peek()[0] == "name" and self.peek(1) == ("keyword", "in") and self.peek(3) == ("op", ")"):
                var, _, (_, array), _ = self.take(), self.take(), self.take(), self.take(")")
                self.newlines()
                return ("forin", var[1], array, self.statement())
            init = None if self.at(";") else self.expr()
            self.take(";")
            cond = None if self.at(";") else self.expr()
            self.take(";")
            step = None if self.at(")") else self.expr()
            self.take(")")
            self.newlines()
            return ("for", init, cond, step, self.statement())
        kind, text = self.peek()
        if kind == "keyword" and text in ("break", "continue"):
            self.take()
            self.simple_end()
            return (text,)
        if kind == "keyword" and text in ("next", "exit"):
            self.take()
            code = None if text == "next" or self.at(";", "}") or self.peek()[0] in ("newline", "end") else self.expr()
            self.simple_end()
            return (text, code)
        if kind == "keyword" and text == "delete":
            self.take()
            name = self.take()[1]
            key = self.subscript() if self.at("[") else None
            self.simple_end()
            return ("delete", name, key)
        if kind == "keyword" and text in ("print", "printf"):
            self.take()
            parenthesised = self.at("(") and self._closes_list()
            if parenthesised:
                self.take("(")
            args = [] if self.at(";", "}") or self.peek()[0] in ("newline", "end") else \
                self.expr_list(no_gt=not parenthesised)
            if parenthesised:
                self.take(")")
            if self.at(">", ">>", "|"):
                raise Unknown  # (output into a file or a command: not simulated)
            self.simple_end()
            if text == "printf" and not args:
                raise Unknown
            return (text, args, None)
        if kind == "keyword":
            raise Unknown  # (getline, do, return...)
        expression = self.expr()
        self.simple_end()
        return ("expr", expression)

    def _condition(self):
        """`if`'s or `while`'s `(EXPR)` after its keyword, and the new lines before its statement."""
        self.take()
        self.take("(")
        cond = self.expr()
        self.take(")")
        self.newlines()
        return cond

    def _closes_list(self) -> bool:
        """Whether the `(` at the cursor encloses print's whole list (`print("a", b)`)."""
        depth = 0
        for j in range(self.i, len(self.tokens)):
            text = self.tokens[j][1] if self.tokens[j][0] == "op" else ""
            depth += text in ("(", "[") and 1 or -(text in (")", "]"))
            if depth == 0:
                after = self.tokens[j + 1] if j + 1 < len(self.tokens) else ("end", "")
                return after[0] in ("newline", "end") or after[1] in (";", "}", ">", ">>", "|")
        return False

    def expr_list(self, no_gt: bool = False) -> list:
        items = [self.expr(no_gt)]
        while self.at(","):
            self.take()
            self.newlines()
            items.append(self.expr(no_gt))
        return items

    def subscript(self):
        self.take("[")
        keys = self.expr_list()
        self.take("]")
        return keys

    def expr(self, no_gt: bool = False):
        return self.ternary(no_gt)

    def ternary(self, no_gt):
        cond = self.or_(no_gt)
        if self.at("?"):
            self.take()
            yes = self.ternary(no_gt)
            self.take(":")
            return ("?", cond, yes, self.ternary(no_gt))
        if self.at("=", "+=", "-=", "*=", "/=", "%=", "^=") and cond[0] in ("var", "field", "index"):
            op = self.take()[1]
            self.newlines()
            return ("assign", op, cond, self.ternary(no_gt))
        return cond

    def _left(self, ops: tuple[str, ...], operand, node) -> tuple:
        """Operands joined left to right by one of `ops` (`operand()` each), as `node(op, left, right)`;
        a new line may follow `&&` and `||`."""
        left = operand()
        while self.at(*ops):
            op = self.take()[1]
            if op in ("&&", "||"):
                self.newlines()
            left = node(op, left, operand())
        return left

    def or_(self, no_gt):
        return self._left(("||",), lambda: self.and_(no_gt), lambda op, a, b: (op, a, b))

    def and_(self, no_gt):
        return self._left(("&&",), lambda: self.in_(no_gt), lambda op, a, b: (op, a, b))

    def in_(self, no_gt):
        left = self.match(no_gt)
        while self.at("in"):
            self.take()
            left = ("in", [left], self.take()[1])
        return left

    def match(self, no_gt):
        return self._left(("~", "!~"), lambda: self.compare(no_gt), lambda op, a, b: (op, a, b))

    def compare(self, no_gt):
        left = self.concat(no_gt)
        if self.at("<", "<=", "==", "!=", ">=") or self.at(">") and not no_gt:
            op = self.take()[1]
            return ("cmp", op, left, self.concat(no_gt))
        return left

    def concat(self, no_gt):
        left = self.additive()
        while True:
            kind, text = self.peek()
            if kind in ("number", "string", "regex", "name") or kind == "op" and text in ("$", "("):
                left = ("concat", left, self.additive())
            else:
                return left

    def additive(self):
        return self._left(("+", "-"), self.multiplicative, lambda op, a, b: ("arith", op, a, b))

    def multiplicative(self):
        return self._left(("*", "/", "%"), self.unary, lambda op, a, b: ("arith", op, a, b))

    def unary(self):
        if self.at("!"):
            self.take()
            return ("!", self.unary())
        if self.at("-", "+"):
            op = self.take()[1]
            return ("arith", op, ("num", 0.0), self.unary())
        return self.power()

    def power(self):
        base = self.postfix()
        if self.at("^"):
            self.take()
            return ("arith", "^", base, self.unary())
        return base

    def postfix(self):
        if self.at("++", "--"):
            op = self.take()[1]
            return ("incr", op, self.postfix(), True)
        target = self.primary()
        if self.at("++", "--") and target[0] in ("var", "field", "index"):
            return ("incr", self.take()[1], target, False)
        return target

    def primary(self):
        kind, text = self.take()
        if kind == "number":
            return ("num", float(text))
        if kind == "string":
            return ("str", awk_escapes(text[1:-1]))
        if kind == "regex":
            return ("regex", text)
        if text == "$":
            return ("field", self.postfix_operand())
        if text == "(":
            inner = self.expr_list()
            self.take(")")
            if len(inner) > 1:
                if not self.at("in"):
                    raise Unknown
                self.take()
                return ("in", inner, self.take()[1])
            return ("group", inner[0])
        if kind == "name" and text in _BUILTINS:
            if not self.at("("):
                if text != "length":
                    raise Unknown
                return ("call", "length", [])
            self.take("(")
            args = [] if self.at(")") else self.expr_list()
            self.take(")")
            return ("call", text, args)
        if kind == "name":
            if self.at("["):
                return ("index", text, self.subscript())
            return ("var", text)
        raise Unknown

    def postfix_operand(self):
        if self.at("++", "--", "(") or self.peek()[0] in ("number", "name"):
            if self.at("("):
                self.take()
                inner = self.expr()
                self.take(")")
                return inner
            return self.postfix() if self.at("++", "--") else self.primary()
        if self.at("-"):
            self.take()
            return ("arith", "-", ("num", 0.0), self.primary())
        raise Unknown


def _number(value) -> float:
    if isinstance(value, float):
        return value
    m = re.match(r"\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)", value)
    return float(m.group(1)) if m else 0.0


def _string(value, fmt: str = "%.6g") -> str:
    if isinstance(value, str):
        return value
    if value == int(value) and abs(value) < 1e16:
        return str(int(value))
    return fmt % value


def _looks_numeric(value) -> bool:
    return isinstance(value, (float, _Unset)) or bool(_NUMERIC.fullmatch(value))


def _true(value) -> bool:
    return value != 0.0 if isinstance(value, float) else value != ""


@dataclass
class Awk:
    """One run of an awk program over records fed one at a time (`record`), then `end`."""

    program: str
    separator: str | None = None
    assigned: dict[str, str] = field(default_factory=dict)

    def __post_init__(self):
        items = _Parser(_lex(self.program)).program()
        self.begin = [body for kind, body in (i for i in items if len(i) == 2) if kind == "BEGIN"]
        self.ends = [body for kind, body in (i for i in items if len(i) == 2) if kind == "END"]
        self.main = [(pattern, body) for _, pattern, body in (i for i in items if len(i) == 3)]
        self.vars: dict[str, object] = {"NR": 0.0, "NF": 0.0, "FS": self.separator or " ", "OFS": " ", "ORS": "\n",
                                        "SUBSEP": "\x1c", "RSTART": 0.0, "RLENGTH": -1.0, **self.assigned}
        self.arrays: dict[str, dict[str, object]] = {}
        self.fields: list[str] = [""]
        self.out: list[str] = []
        self.exit_code: int | None = None
        self.steps = 0
        self._actions(self.begin)

    # --- records -------------------------------------------------------------------------
    def record(self, text: str) -> str:
        """What the program writes for one record (nothing once it has exited)."""
        if self.exit_code is not None:
            return ""
        self.vars["NR"] = _number(self.vars["NR"]) + 1
        self._set_record(text)
        try:
            for pattern, body in self.main:
                if pattern is None or _true(self.eval(pattern)):
                    self.run(body)
        except (_Next, _Exit):
            pass
        except _Jump:
            raise Unknown from None  # (break outside a loop)
        return self.taken()

    def end(self) -> tuple[str, int]:
        """END's output (it runs after an `exit` too, but one of its own), and the status (`exit N`'s)."""
        code, self.exit_code = self.exit_code, None
        self._actions(self.ends)
        return self.taken(), int(self.exit_code if self.exit_code is not None else code or 0)

    def _actions(self, bodies: list) -> None:
        try:
            for body in bodies:
                self.run(body)
        except (_Next, _Jump):
            raise Unknown from None
        except _Exit:
            pass

    def taken(self) -> str:
        """What the program has written since last asked."""
        out, self.out = "".join(self.out), []
        return out

    def _split(self, text: str, separator: str) -> list[str]:
        if separator == " ":
            return text.split()
        if len(separator) == 1 and separator != "\\":
            return text.split(separator) if text else []
        try:
            return re.split(separator, text) if text else []
        except re.error:
            raise Unknown from None

    def _set_record(self, text: str) -> None:
        self.fields = [text, *self._split(text, _string(self.vars["FS"]))]
        self.vars["NF"] = float(len(self.fields) - 1)

    def _field(self, n: int) -> str:
        if n < 0:
            raise Unknown
        return self.fields[n] if n < len(self.fields) else ""

    def _set_field(self, n: int, value: str) -> None:
        if n == 0:
            self._set_record(value)
            return
        self._spend(max(n + 1 - len(self.fields), 0))
        while len(self.fields) <= n:
            self.fields.append("")
        self.fields[n] = value
        self.vars["NF"] = float(len(self.fields) - 1)
        self.fields[0] = _string(self.vars["OFS"]).join(self.fields[1:])

    # --- statements ----------------------------------------------------------------------
    def run(self, body: list) -> None:
        for statement in body:
            self.statement(statement)

    def _spend(self, steps: int) -> None:
        """Count `steps` of work (STEPS): past the budget the program is not simulated."""
        self.steps += steps
        if self.steps > STEPS:
            raise Unknown  # (a loop without end, or ever longer strings or more fields)

    def _built(self, text: str) -> str:
        """`text`, a string the program made, its length counted as work."""
        self._spend(len(text) >> 6)
        return text

    def statement(self, s) -> None:
        self._spend(1)
        kind = s[0]
        if kind == "block":
            self.run(s[1])
        elif kind == "expr":
            self.eval(s[1])
        elif kind == "print":
            values = [self.eval(a) for a in s[1]] or [self.fields[0]]
            self.out.append(self._built(_string(self.vars["OFS"]).join(_string(v) for v in values)
                                        + _string(self.vars["ORS"])))
        elif kind == "printf":
            self.out.append(self._built(self._format([self.eval(a) for a in s[1]])))
        elif kind == "if":
            if _true(self.eval(s[1])):
                self.statement(s[2])
            elif s[3] is not None:
                self.statement(s[3])
        elif kind == "while":
            while _true(self.eval(s[1])) and self._pass(s[2]):
                pass
        elif kind == "for":
            if s[1] is not None:
                self.eval(s[1])
            while (s[2] is None or _true(self.eval(s[2]))) and self._pass(s[4]):
                if s[3] is not None:
                    self.eval(s[3])
        elif kind == "forin":
            for key in list(self.arrays.get(s[2], {})):
                self.vars[s[1]] = key
                if not self._pass(s[3]):
                    break
        elif kind in ("break", "continue"):
            raise _Jump(kind)
        elif kind == "delete":
            array = self.arrays.setdefault(s[1], {})
            if s[2] is None:
                array.clear()
            else:
                array.pop(self._key(s[2]), None)
        elif kind == "next":
            raise _Next
        elif kind == "exit":
            self.exit_code = int(_number(self.eval(s[1]))) if s[1] is not None else (self.exit_code or 0)
            raise _Exit

    def _pass(self, body) -> bool:
        """One pass of a loop's body: whether the loop goes on (no `break`)."""
        try:
            self.statement(body)
        except _Jump as jump:
            return str(jump) == "continue"
        return True

    def _key(self, keys: list) -> str:
        return _string(self.vars["SUBSEP"]).join(_string(self.eval(k)) for k in keys)

    def _format(self, values: list) -> str:
        """printf's and sprintf's: FORMAT's %c %d %i %o %x %X %u %e %f %g %s, flags, width and precision."""
        fmt, args = _string(values[0]), values[1:]

        def convert(m: re.Match) -> str:
            spec, kind = m.group(1), m.group(2)
            if kind == "%":
                return "%"
            if "*" in spec:
                raise Unknown
            self._spend(sum(int(n) for n in re.findall(r"\d+", spec)) >> 6)  # (before a width's padding is made)
            value = args.pop(0) if args else ""
            if kind == "s":
                return ("%" + spec + "s") % _string(value)
            if kind == "c":
                return ("%" + spec + "s") % (chr(int(value)) if isinstance(value, float) else value[:1])
            number = _number(value)
            if kind in "diouxX":
                if math.isinf(number) or math.isnan(number):
                    raise Unknown
                return ("%" + spec + ("d" if kind in "iu" else kind)) % int(number)
            return ("%" + spec + kind) % number
        try:
            return re.sub(r"%([-+ #0]*\d*\*?(?:\.\d*)?)([cdiouxXeEfgGs%])", convert, fmt)
        except (TypeError, ValueError, OverflowError):
            raise Unknown from None

    # --- expressions ---------------------------------------------------------------------
    def eval(self, e):
        self.steps += 1  # (an expression's work counts too: `while (1) print x x x x` is all expressions)
        kind = e[0]
        if kind == "num":
            return e[1]
        if kind == "str":
            return e[1]
        if kind == "group":
            return self.eval(e[1])
        if kind == "regex":
            return float(bool(self._regex(e[1]).search(self.fields[0])))
        if kind == "var":
            if e[1] in self.arrays:
                raise Unknown
            return self.vars.get(e[1], UNSET)
        if kind == "field":
            return self._field(int(_number(self.eval(e[1]))))
        if kind == "index":
            return self.arrays.setdefault(e[1], {}).setdefault(self._key(e[2]), UNSET)
        if kind == "in":
            return float(self._key(e[1]) in self.arrays.get(e[2], {}))
        if kind == "assign":
            value = self.eval(e[3])
            if e[1] != "=":
                value = self._arith(e[1][0], self.eval(e[2]), value)
            return self._store(e[2], value)
        if kind == "incr":
            old = _number(self.eval(e[2]))
            new = self._store(e[2], old + (1 if e[1] == "++" else -1))
            return new if e[3] else old
        if kind == "arith":
            return self._arith(e[1], self.eval(e[2]), self.eval(e[3]))
        if kind == "concat":
            return self._built(_string(self.eval(e[1])) + _string(self.eval(e[2])))
        if kind == "cmp":
            left, right = self.eval(e[2]), self.eval(e[3])
            if _looks_numeric(left) and _looks_numeric(right):
                left, right = _number(left), _number(right)
            else:
                left, right = _string(left), _string(right)
            return float({"<": left < right, "<=": left <= right, "==": left == right, "!=": left != right,
                          ">=": left >= right, ">": left > right}[e[1]])
        if kind in ("~", "!~"):
            pattern = e[2][1] if e[2][0] == "regex" else _string(self.eval(e[2]))
            found = bool(self._regex(pattern).search(_string(self.eval(e[1]))))
            return float(found != (kind == "!~"))
        if kind == "!":
            return float(not _true(self.eval(e[1])))
        if kind == "&&":
            return float(_true(self.eval(e[1])) and _true(self.eval(e[2])))
        if kind == "||":
            return float(_true(self.eval(e[1])) or _true(self.eval(e[2])))
        if kind == "?":
            return self.eval(e[2]) if _true(self.eval(e[1])) else self.eval(e[3])
        if kind == "call":
            return self._call(e[1], e[2])
        raise Unknown

    def _store(self, target, value):
        if isinstance(value, str):
            self._built(value)
        if target[0] == "var":
            if target[1] in self.arrays:
                raise Unknown
            self.vars[target[1]] = value
            if target[1] == "NF":
                n = int(_number(value))
                self._spend(max(n + 1 - len(self.fields), 0))
                self.fields = self.fields[:n + 1] + [""] * (n + 1 - len(self.fields))
                self.fields[0] = _string(self.vars["OFS"]).join(self.fields[1:])
        elif target[0] == "field":
            self._set_field(int(_number(self.eval(target[1]))), _string(value))
        else:
            self.arrays.setdefault(target[1], {})[self._key(target[2])] = value
        return value

    @staticmethod
    def _arith(op: str, left, right) -> float:
        a, b = _number(left), _number(right)
        if op in "/%" and b == 0:
            raise Unknown  # (awk's fatal "division by zero": not simulated)
        try:
            return {"+": a + b, "-": a - b, "*": a * b}[op] if op in "+-*" else \
                a / b if op == "/" else math.fmod(a, b) if op == "%" else float(a ** b)
        except (OverflowError, ZeroDivisionError):
            raise Unknown from None

    @staticmethod
    def _regex(pattern: str) -> re.Pattern:
        for posix, python in _CLASSES.items():
            pattern = pattern.replace(posix, python)
        try:
            return re.compile(pattern)
        except re.error:
            raise Unknown from None

    def _call(self, name: str, args: list):
        if name == "length":
            if args and args[0][0] == "var" and args[0][1] in self.arrays:
                return float(len(self.arrays[args[0][1]]))
            return float(len((_string(self.eval(args[0])) if args else self.fields[0]).encode()))  # (bytes, as busybox's)
        if name == "split":
            if len(args) not in (2, 3) or args[1][0] != "var":
                raise Unknown
            pieces = self._split(_string(self.eval(args[0])),
                                 _string(self.eval(args[2]) if len(args) == 3 else self.vars["FS"]))
            self.vars.pop(args[1][1], None)
            self.arrays[args[1][1]] = {str(i): p for i, p in enumerate(pieces, 1)}
            return float(len(pieces))
        if name in ("sub", "gsub"):
            if len(args) not in (2, 3):
                raise Unknown
            pattern = args[0][1] if args[0][0] == "regex" else _string(self.eval(args[0]))
            target = args[2] if len(args) == 3 else ("field", ("num", 0.0))
            pieces = re.split(r"(\\&|&)", _string(self.eval(args[1])))  # (`&` the match, `\&` itself)

            def repl(m: re.Match) -> str:
                return "".join("&" if p == "\\&" else m.group(0) if p == "&" else p for p in pieces)
            text, count = self._regex(pattern).subn(repl, _string(self.eval(target)), count=0 if name == "gsub" else 1)
            if count:
                self._store(target, text)
            return float(count)
        values = [self.eval(a) for a in args]
        if name == "sprintf":
            if not values:
                raise Unknown
            return self._format(values)
        if len(values) < 1:
            raise Unknown
        text = _string(values[0])
        if name == "substr":
            start = round(_number(values[1])) if len(values) > 1 else 1
            length = round(_number(values[2])) if len(values) > 2 else len(text)
            begin, stop = max(start, 1), min(start + length, len(text) + 1)
            return text[begin - 1:stop - 1] if stop > begin else ""
        if name == "index":
            return float(text.find(_string(values[1])) + 1)
        if name == "tolower":
            return text.lower()
        if name == "toupper":
            return text.upper()
        if name == "int":
            return float(math.trunc(_number(values[0])))
        raise Unknown
