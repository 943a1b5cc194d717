"""A CEL parser that yields an abstract syntax tree for static analysis.

The `common-expression-language` engine compiles and evaluates expressions
but exposes no syntax tree, and Kubernetes needs one before anything runs:
to type-check a rule against its schema (a rule must be a bool), to report
undeclared references, and to estimate the worst-case cost. This parser
follows the CEL grammar (cel-spec's langdef) and expands the standard macros
(`has`, `all`, `exists`, `exists_one`, `map`, `filter`) the way cel-go does.
The engine remains the authority on evaluation; a syntax error found here is
reported first because its position and wording match cel-go's.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from typing import Any


#: cel-go's common.NoLocation: an issue about the whole expression, printed as `<input>:-1:0` without a snippet
NO_LOCATION = -1


class ParseError(Exception):
    def __init__(self, message: str, pos: int) -> None:
        super().__init__(message)
        self.pos = pos


@dataclass(slots=True, eq=False)
class Node:
    """One expression. kind: lit, ident, select, call, list, map, struct,
    comprehension; `name` is the identifier, field, function or macro name;
    `target` the receiver of a member call or selection; `args` operands.
    For literals `value` is the Python value and `name` its CEL type; for a
    comprehension `name` is the macro and `vars` its bound variable(s); a
    `bind` node is cel.bind(vars[0], args[0], args[1]). `optional` marks the
    optional selection `a.?f` (and `_[?_]` is the optional index)."""

    kind: str
    pos: int
    name: str = ""
    target: Node | None = None
    args: list[Node] = field(default_factory=list)
    value: Any = None
    vars: tuple[str, ...] = ()
    test_only: bool = False
    optional: bool = False


_TOKEN = re.compile(
    r"""(?P<ws>\s+|//[^\n]*)
    |(?P<str>[rR]?[bB]?[rR]?(?:'''(?:\\.|[^\\])*?'''|\"\"\"(?:\\.|[^\\])*?\"\"\"|'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*"))
    |(?P<num>0[xX][0-9a-fA-F]+[uU]?|(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?[uU]?)
    |(?P<id>[A-Za-z_][A-Za-z0-9_]*)
    |(?P<op>&&|\|\||==|!=|<=|>=|[-+*/%!<>?:.,()\[\]{}])""",
    re.X | re.S,
)
RESERVED = frozenset({
    "as", "break", "const", "continue", "else", "for", "function", "if", "import", "let", "loop",
    "package", "namespace", "return", "var", "void", "while"})
MACROS = {"all": (2, 3), "exists": (2, 3), "exists_one": (2, 3), "map": (2, 3), "filter": 2, "sortBy": 2,
          "transformList": (3, 4), "transformMap": (3, 4), "transformMapEntry": (3, 4), "optMap": 2, "optFlatMap": 2}
#: the optional types' macros: `o.optMap(v, e)` is e of o's value (none stays none), optFlatMap's e an optional
OPTIONAL_MACROS = frozenset({"optMap", "optFlatMap"})
_RELOPS = {"<": "_<_", "<=": "_<=_", ">": "_>_", ">=": "_>=_", "==": "_==_", "!=": "_!=_", "in": "@in"}
#: binary operator -> (precedence, function): relations, additions, multiplications
_BINARY = {**{op: (1, f) for op, f in _RELOPS.items()}, "+": (2, "_+_"), "-": (2, "_-_"),
           "*": (3, "_*_"), "/": (3, "_/_"), "%": (3, "_%_")}
_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
            "\\": "\\", "'": "'", '"': '"', "`": "`", "?": "?"}


def _tokenize(src: str) -> list[tuple[str, str, int]]:
    """(kind, text, offset) of each token, then two `eof` (so the parser may look one past the end)."""
    out, i = [], 0
    for m in _TOKEN.finditer(src):
        if m.start() != i:  # finditer skipped what no token matches
            break
        kind = m.lastgroup
        if kind != "ws":
            out.append((kind, m.group(), i))
        i = m.end()
    if i < len(src):
        raise ParseError(f"Syntax error: token recognition error at: '{src[i]}'", i)
    out += [("eof", "", len(src))] * 2
    return out


def _unescape(body: str, raw: bool, pos: int, as_bytes: bool = False) -> str | bytes:
    """A literal's text; `as_bytes`: a bytes literal's, where `\\xHH` and octal escapes are
    single bytes (b'\\xff' is one byte) and everything else is its UTF-8."""
    if raw:
        return body.encode("utf-8", "surrogateescape") if as_bytes else body
    out: list[str | bytes] = []
    i = 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        n = body[i + 1]
        if n in _ESCAPES:
            out.append(_ESCAPES[n])
            i += 2
        elif n in "xX":
            code = int(body[i + 2:i + 4], 16)
            out.append(bytes([code]) if as_bytes else chr(code))
            i += 4
        elif n == "u":
            out.append(chr(int(body[i + 2:i + 6], 16)))
            i += 6
        elif n == "U":
            out.append(chr(int(body[i + 2:i + 10], 16)))
            i += 10
        elif n in "0123":
            code = int(body[i + 1:i + 4], 8)
            out.append(bytes([code]) if as_bytes else chr(code))
            i += 4
        else:
            raise ParseError(f"Syntax error: invalid escape sequence '\\{n}'", pos)
    if as_bytes:
        return b"".join(x if isinstance(x, bytes) else x.encode("utf-8", "surrogateescape") for x in out)
    return "".join(out)


def _string_literal(tok: str, pos: int) -> Node:
    prefix = re.match(r"[rRbB]*", tok).group().lower()
    body = tok[len(prefix):]
    q = 3 if body[:3] in ("'''", '"""') else 1
    if "b" in prefix:
        return Node("lit", pos, "bytes", value=_unescape(body[q:-q], "r" in prefix, pos, as_bytes=True))
    return Node("lit", pos, "string", value=_unescape(body[q:-q], "r" in prefix, pos))


def _number_literal(tok: str, pos: int) -> Node:
    unsigned = tok[-1] in "uU"
    body = tok[:-1] if unsigned else tok
    if body[:2].lower() == "0x":
        v = int(body, 16)
    elif re.search(r"[.eE]", body):
        if unsigned:
            raise ParseError("Syntax error: mismatched input 'u'", pos)
        return Node("lit", pos, "double", value=float(body))
    else:
        v = int(body)
    if unsigned:
        if v >= 2**64:
            raise ParseError("error parsing uint: out of range", pos)
        return Node("lit", pos, "uint", value=v)
    if v >= 2**63:
        raise ParseError("error parsing int: out of range", pos)
    return Node("lit", pos, "int", value=v)


#: cel-go's parser recursion limit (parser.MaxRecursionDepth's default)
MAX_RECURSION_DEPTH = 250
#: what cel-go's parse-tree visitor counts towards the same limit, besides member calls: each
#: relation or arithmetic operator, conditional, selection and index nests one level deeper
#: (`&&` and `||` chains are balanced, and `!`, `-`, lists, maps and global calls are not counted)
_VISITOR_COUNTED = frozenset({
    "_<_", "_<=_", "_>_", "_>=_", "_==_", "_!=_", "@in", "_+_", "_-_", "_*_", "_/_", "_%_", "_?_:_", "_[_]", "_[?_]"})
# Each nesting level costs this parser about ten Python frames; make room for
# cel-go's 250 levels (and the checker's walk of them) above the default 1000.
sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * MAX_RECURSION_DEPTH + 1000))


class _Parser:
    def __init__(self, src: str) -> None:
        self.toks = _tokenize(src)
        self.i = 0
        self.depth = 0

    def peek(self, k: int = 0) -> tuple[str, str, int]:
        """The token k ahead (the end pads the list, so this never runs past it)."""
        return self.toks[self.i + k]

    def accept(self, text: str) -> tuple | None:
        t = self.toks[self.i]
        if t[0] in ("op", "id") and t[1] == text:
            self.i += 1
            return t
        return None

    def expect(self, text: str) -> tuple:
        t = self.accept(text)
        if t is None:
            kind, tok, pos = self.peek()
            shown = "<EOF>" if kind == "eof" else tok
            raise ParseError(f"Syntax error: mismatched input '{shown}' expecting '{text}'", pos)
        return t

    def parse(self) -> Node:
        e = self.expr()
        kind, tok, pos = self.peek()
        if kind != "eof":
            raise ParseError(f"Syntax error: extraneous input '{tok}' expecting <EOF>", pos)
        if _visitor_depth(e) > MAX_RECURSION_DEPTH:
            raise ParseError("max recursion depth exceeded", NO_LOCATION)
        return e

    def expr(self) -> Node:
        """One `expr` rule: cel-go's parse listener refuses nesting them deeper than the limit."""
        self.depth += 1
        try:
            if self.depth > MAX_RECURSION_DEPTH:
                raise ParseError(f"expression recursion limit exceeded: {MAX_RECURSION_DEPTH}", NO_LOCATION)
            return self._conditional()
        finally:
            self.depth -= 1

    def _conditional(self) -> Node:
        cond = self.or_()
        t = self.accept("?")
        if t is None:
            return cond
        then = self.or_()
        self.expect(":")
        other = self.expr()
        return Node("call", t[2], "_?_:_", args=[cond, then, other])

    def or_(self) -> Node:
        terms, ops = [self.and_()], []
        while (t := self.accept("||")) is not None:
            ops.append(t[2])
            terms.append(self.and_())
        return _balanced("_||_", terms, ops, 0, len(ops) - 1) if ops else terms[0]

    def and_(self) -> Node:
        terms, ops = [self.relation()], []
        while (t := self.accept("&&")) is not None:
            ops.append(t[2])
            terms.append(self.relation())
        return _balanced("_&&_", terms, ops, 0, len(ops) - 1) if ops else terms[0]

    def relation(self) -> Node:
        return self.binary(1)

    def binary(self, lowest: int) -> Node:
        """Relations, then additions, then multiplications (precedence climbing: an operator of
        `lowest` precedence or higher continues the chain, left-associative)."""
        e = self.unary()
        while True:
            kind, tok, pos = self.toks[self.i]
            op = _BINARY.get(tok) if kind == "op" or kind == "id" else None
            if op is None or op[0] < lowest:
                return e
            self.i += 1
            e = Node("call", pos, op[1], args=[e, self.binary(op[0] + 1)])

    def unary(self) -> Node:
        kind, tok, pos = self.peek()
        if kind == "op" and tok in ("!", "-"):
            run = 0  # a run of the same operator, as cel-go's `'!'+ member`: an even count cancels out
            while self.peek()[:2] == ("op", tok):
                run += 1
                self.i += 1
            if tok == "-" and self.peek()[0] == "num" and not self.peek()[1].lower().endswith("u"):
                n = self.peek()
                self.i += 1
                last = pos if run == 1 else self.toks[self.i - 2][2]
                operand = _number_literal("-" + n[1], last) if not n[1].lower().startswith("0x") else Node(
                    "lit", last, "int", value=-int(n[1], 16))
                operand = self.member(operand)
                run -= 1
            else:
                operand = self.unary()
            return Node("call", pos, "!_" if tok == "!" else "-_", args=[operand]) if run % 2 else operand
        return self.member(self.primary())

    def member(self, e: Node) -> Node:
        while True:
            kind, tok, pos = self.peek()
            if kind != "op":
                return e
            if tok == ".":
                self.i += 1
                optional = self.accept("?") is not None
                name_tok = self.peek()
                if name_tok[0] != "id":
                    raise ParseError(f"Syntax error: no viable alternative at input '.{name_tok[1]}'", name_tok[2])
                self.i += 1
                if not optional and self.accept("("):
                    args = self.exprs(")")
                    e = self.member_call(e, name_tok[1], args, name_tok[2])
                else:
                    e = Node("select", name_tok[2], name_tok[1], target=e, optional=optional)
            elif tok == "[":
                self.i += 1
                optional = self.accept("?") is not None
                idx = self.expr()
                self.expect("]")
                e = Node("call", pos, "_[?_]" if optional else "_[_]", args=[e, idx])
            elif tok == "{" and e.kind in ("ident", "select") and _qualified(e):
                self.i += 1
                e = Node("struct", pos, _qualified(e), args=self.field_inits())
            else:
                return e

    def member_call(self, target: Node, name: str, args: list[Node], pos: int) -> Node:
        if name == "bind" and target.kind == "ident" and target.name == "cel" and len(args) == 3:
            if args[0].kind != "ident":
                raise ParseError("cel.bind() variable name must be a simple identifier", args[0].pos)
            return Node("bind", pos, "bind", args=args[1:], vars=(args[0].name,))
        arity = MACROS.get(name)
        if arity is not None and len(args) in ((arity,) if isinstance(arity, int) else arity):
            # map(x, filter, transform) binds one variable; all(i, v, p) and the like two
            bound = 1 if name in ("map", "filter", "sortBy", *OPTIONAL_MACROS) or len(args) == 2 else 2
            for v in args[:bound]:
                if v.kind != "ident":
                    raise ParseError("argument must be a simple name", v.pos)
            return Node("comprehension", pos, name, target=target, args=args[bound:],
                        vars=tuple(v.name for v in args[:bound]))
        return Node("call", pos, name, target=target, args=args)

    def exprs(self, close: str) -> list[Node]:
        out: list[Node] = []
        if self.accept(close):
            return out
        while True:
            out.append(self.expr())
            if self.accept(close):
                return out
            self.expect(",")
            if self.accept(close):
                return out

    def field_inits(self) -> list[Node]:
        out: list[Node] = []
        while not self.accept("}"):
            kind, tok, pos = self.peek()
            if kind != "id":
                raise ParseError(f"Syntax error: mismatched input '{tok}' expecting IDENTIFIER", pos)
            self.i += 1
            self.expect(":")
            out.append(Node("select", pos, tok, args=[self.expr()]))
            if not self.accept(","):
                self.expect("}")
                return out
        return out

    def primary(self) -> Node:
        kind, tok, pos = self.peek()
        self.i += 1
        if kind == "num":
            return _number_literal(tok, pos)
        if kind == "str":
            return _string_literal(tok, pos)
        if kind == "id":
            if tok in ("true", "false"):
                return Node("lit", pos, "bool", value=tok == "true")
            if tok == "null":
                return Node("lit", pos, "null", value=None)
            if tok in RESERVED:
                raise ParseError(f"reserved identifier: {tok}", pos)
            if self.accept("("):
                args = self.exprs(")")
                if tok == "has":
                    if len(args) != 1 or args[0].kind != "select":
                        raise ParseError("invalid argument to has() macro", pos)
                    sel = args[0]
                    return Node("select", sel.pos, sel.name, target=sel.target, test_only=True)
                return Node("call", pos, tok, args=args)
            return Node("ident", pos, tok)
        if kind == "op":
            if tok == ".":
                return self.primary()
            if tok == "(":
                e = self.expr()
                self.expect(")")
                return e
            if tok == "[":
                return Node("list", pos, args=self.exprs("]"))
            if tok == "{":
                entries: list[Node] = []
                while not self.accept("}"):
                    k = self.expr()
                    self.expect(":")
                    entries.append(Node("call", k.pos, "entry", args=[k, self.expr()]))
                    if not self.accept(","):
                        self.expect("}")
                        break
                return Node("map", pos, args=entries)
        shown = "<EOF>" if kind == "eof" else tok
        raise ParseError(f"Syntax error: mismatched input '{shown}' expecting <expression>", pos)


def _balanced(function: str, terms: list[Node], ops: list[int], lo: int, hi: int) -> Node:
    """A chain of `&&` or `||` as cel-go's parser balances it: split at the middle operator,
    so the tree is as deep as the logarithm of its length."""
    mid = (lo + hi + 1) // 2
    left = terms[mid] if mid == lo else _balanced(function, terms, ops, lo, mid - 1)
    right = terms[mid + 1] if mid == hi else _balanced(function, terms, ops, mid + 1, hi)
    return Node("call", ops[mid], function, args=[left, right])


def _visitor_depth(root: Node) -> int:
    """How deep cel-go's parse-tree visitor recurses for this tree (the most counted nodes on
    one path from the root), walked without recursion; stops past the limit."""
    deepest, stack = 0, [(root, 0)]
    while stack:
        n, depth = stack.pop()
        if n.kind in ("select", "comprehension", "bind") or (
                n.kind == "call" and (n.target is not None or n.name in _VISITOR_COUNTED)):
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > MAX_RECURSION_DEPTH:
                    break
        if n.target is not None:
            stack.append((n.target, depth))
        if n.kind == "struct":  # field initializers: the values are the children
            stack.extend((f.args[0], depth) for f in n.args)
        else:
            stack.extend((a, depth) for a in n.args)
    return deepest


def _qualified(e: Node) -> str:
    if e.kind == "ident":
        return e.name
    if e.kind == "select" and not e.test_only and e.target is not None:
        inner = _qualified(e.target)
        return f"{inner}.{e.name}" if inner else ""
    return ""


def parse(src: str) -> Node:
    """The syntax tree of `src`; ParseError with cel-go's wording and the
    offset of the offending token."""
    return _Parser(src).parse()


def location(src: str, pos: int) -> tuple[str, str]:
    """cel-go's `ERROR: <input>:L:C: ` prefix context: the line and a caret (none for
    NO_LOCATION)."""
    if pos == NO_LOCATION:
        return "<input>:-1:0", ""
    line_no = src.count("\n", 0, pos) + 1
    start = src.rfind("\n", 0, pos) + 1
    end = src.find("\n", pos)
    line = src[start:] if end < 0 else src[start:end]
    col = pos - start
    return f"<input>:{line_no}:{col + 1}", f"\n | {line}\n | {'.' * col}^"


def format_error(src: str, pos: int, message: str) -> str:
    """An issue as cel-go prints it: `ERROR: <input>:1:6: <message>` and the
    source line with a caret under the column."""
    where, snippet = location(src, pos)
    return f"ERROR: {where}: {message}{snippet}"
