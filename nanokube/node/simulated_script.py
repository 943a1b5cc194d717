"""The syntax of the shell scripts a simulated container interprets (simulated_command runs
them): POSIX sh's words, quotes and parameter expansions, and the commands training and serving
manifests are made of.

A script is a list of and-or lists (`;`, `&&`, `||`, new lines) of pipelines (`|`, `!`) of
commands: a simple command (`NAME=value` assignments, words, `>`, `>>`, `<`), or `while`/`until
...; do ...; done`, `for NAME [in WORD...]; do ...; done`, `if ...; then ...; [elif ...; then ...;]
[else ...;] fi`, `case WORD in [(]PATTERN[|PATTERN]...) ...;; esac`, `{ ...; }`, or a function's
definition, `NAME() { ...; }` (or another compound command). A word is made of parts: literal
text (quoted or not), `$NAME`, `${NAME}`, `${NAME:-word}` (and `-`, `:+`, `+`, `:=`, `=`, `:?`, `?`),
`${NAME%pattern}` (and `%%`, `#`, `##`), `${#NAME}`, the special parameters `$?`, `$#`,
`$0`...`$9`, `$@`, `$*`, `$!`, `$((arithmetic))`, `$(command)`, and the patterns `*`, `?`, `[...]`
(case's, those of `${NAME%pattern}`, and a command's word's, which matches filenames). A command,
simple or compound, may redirect its descriptors 0 to 2: `<`, `>`, `>>`, `N>&M` (`2>&1`, `>&2`), and
read a here-document (`<<WORD`, `<<-WORD`: the lines after its own up to WORD's).
A command may run in the background (`&`: a `Background` list; the interpreter runs a simple
command there, `sleep N &` or one that writes nothing once started, for `wait`). Anything else a shell would do (`~`, backquotes, subshells, `$$`, other
descriptors) is `Unknown`: the script is not interpreted. A script that ends inside a compound command or
after an operator is `Incomplete` (an interactive shell asks for more)."""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field

from .simulated_applets import Unknown


class Incomplete(Unknown):
    """The script ends where more is needed (`while true; do`, `a &&`)."""


#: a part of a word: ("lit", text, quoted), ("var", name, op, arg parts, quoted), ("arith", text, quoted),
#: ("cmd", script, quoted), ("glob", `*`, `?` or `[...]`)
Part = tuple
Word = tuple  # of parts

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SPECIAL = "?#@*!0123456789"
_OPERATORS = ("&&", "||", ">>", ";;", "<<-", "<<", ">&", "<&", ";", "&", "|", "<", ">", "(", ")")
_BRACE_OPS = ("%%", "##", ":-", ":+", ":=", ":?", "%", "#", "-", "+", "=", "?")
#: the operators whose word is a pattern (`${path##*/}`): its unquoted text matches as a glob
PATTERN_OPS = frozenset({"%", "%%", "#", "##"})
_PLAIN = re.compile(r"[^\s;&|<>()'\"\\$`*?\[~#]+")
KEYWORDS = frozenset({"if", "then", "elif", "else", "fi", "while", "until", "do", "done", "for", "in", "{", "}", "!",
                      "case", "esac"})


@dataclass(frozen=True)
class Op:
    """An operator token (`;`, `&&`, `|`, `>`, a new line as "\\n")."""
    text: str


#: a redirection: the descriptor, the operator (`<`, `>`, `>>`, `>&`) and its target
Redirect = tuple[int, str, Word]


@dataclass
class Simple:
    assigns: list[tuple[str, Word]]
    words: list[Word]
    redirects: list[Redirect]
    #: the script's line it starts on (bash and dash name it in an error)
    line: int = field(default=1, compare=False)


@dataclass
class Background:
    """An and-or list run in the background (`sleep 300 &`)."""
    items: list


@dataclass
class Redirected:
    """A compound command with redirections (`done > log`, `{ ...; } 2>&1`)."""
    node: object
    redirects: list[Redirect]


@dataclass
class Pipeline:
    commands: list
    negate: bool = False


@dataclass
class Loop:
    """`while` (or `until`) COND; do BODY; done."""
    until: bool
    cond: list
    body: list


@dataclass
class For:
    name: str
    items: list[Word] | None  # None: "$@"
    body: list


@dataclass
class If:
    branches: list[tuple[list, list]]
    otherwise: list | None = None


@dataclass
class Group:
    body: list


@dataclass
class Function:
    """`NAME() COMPOUND-COMMAND`: defines a function, which runs the command with its arguments."""
    name: str
    body: object


@dataclass
class Case:
    """`case WORD in PATTERN[|PATTERN]...) LIST ;; ... esac`."""
    word: Word
    items: list[tuple[list[Word], list]]


#: a list: its and-or lists, each [(operator before it: ";", "&&" or "||", Pipeline), ...]
Script = list


def literal(word: Word) -> str | None:
    """The word's text when it is one unquoted literal (a keyword or a name can be), else None."""
    if len(word) == 1 and word[0][0] == "lit" and not word[0][2]:
        return word[0][1]
    return None


def lex(script: str) -> tuple[list, list[int]]:
    """The tokens of `script` (Op, or a word: a tuple of parts), and the line each starts on."""
    tokens: list = []
    starts: list[int] = []  # where each token starts
    parts: list | None = None
    start = 0  # where the word being read started
    heredocs: list[int] = []  # the `<<` operators whose here-documents start after this line
    i, n = 0, len(script)
    while i < n:
        c = script[i]
        if c == "\\" and script.startswith("\\\n", i):
            i += 2
            continue
        if c in " \t\r\n" or c in ";&|<>()":
            if parts is not None:
                if c in "<>" and len(parts) == 1 and parts[0][0] == "lit" and not parts[0][2] and \
                        parts[0][1].isdigit():  # a descriptor's redirection (`2>`, `2>&1`)
                    if parts[0][1] not in "012":
                        raise Unknown
                    op = next(o for o in (">>", ">&", "<&", ">", "<") if script.startswith(o, i))
                    tokens.append(Op(parts[0][1] + op))
                    starts.append(start)
                    parts = None
                    i += len(op)
                    continue
                tokens.append(tuple(parts))
                starts.append(start)
                parts = None
            if c == "\n":
                tokens.append(Op("\n"))
                starts.append(i)
                if heredocs:  # their bodies: the lines after this one
                    i = _here_documents(script, i + 1, tokens, heredocs)
                    heredocs = []
                    continue
            elif c not in " \t\r":
                op = next(o for o in _OPERATORS if script.startswith(o, i))
                if op.startswith("<<"):
                    heredocs.append(len(tokens))
                tokens.append(Op(op))
                starts.append(i)
                i += len(op)
                continue
            i += 1
            continue
        if c == "#" and parts is None:
            end = script.find("\n", i)
            i = n if end < 0 else end
            continue
        if parts is None:
            parts, start = [], i
        if c == "`" or (c == "~" and not parts):
            raise Unknown  # a command's substitution the old way, a home directory
        if c in "*?" or c == "[" and (m := re.match(r"\[!?\]?[^\s\]]*\]", script[i:])):
            glob = c if c in "*?" else m.group(0)
            parts.append(("glob", glob))  # a pattern: case's, or a glob matching filenames
            i += len(glob)
            continue
        if c == "'":
            end = script.find("'", i + 1)
            if end < 0:
                raise Incomplete
            parts.append(("lit", script[i + 1:end], True))
            i = end + 1
        elif c == '"':
            i = _double_quoted(script, i + 1, parts)
        elif c == "\\":
            if i + 1 >= n:
                raise Incomplete
            parts.append(("lit", script[i + 1], True))
            i += 2
        elif c == "$":
            i = dollar(script, i, parts, quoted=False)
        else:
            m = _PLAIN.match(script, i)
            text = m.group(0) if m else c
            parts.append(("lit", text, False))
            i += len(text)
    if parts is not None:
        tokens.append(tuple(parts))
        starts.append(start)
    if heredocs:
        raise Incomplete  # (a here-document with no line after its command's)
    newlines = [m.start() for m in re.finditer("\n", script)]
    return tokens, [bisect.bisect_left(newlines, at) + 1 for at in starts]


def _here_documents(script: str, i: int, tokens: list, operators: list[int]) -> int:
    """The bodies of the here-documents the `<<` operators at `operators` (in `tokens`) start, each
    from `i` to its delimiter's line (`<<-`: its lines' leading tabs removed), put in the place of
    their delimiter word: quoted (`<<'EOF'`), the body as it is; else its `$` expansions made, as
    in double quotes but for the quotes themselves. Where the last one ends."""
    for k in operators:
        word = tokens[k + 1] if k + 1 < len(tokens) else None
        if not isinstance(word, tuple) or any(p[0] != "lit" for p in word):
            raise Unknown  # (a delimiter with an expansion in it, or none)
        delimiter, quoted = "".join(p[1] for p in word), any(p[2] for p in word)
        lines = []
        while True:
            if i >= len(script):
                raise Incomplete
            end = script.find("\n", i) % (len(script) + 1)  # (the script's end ends its last line)
            line = script[i:end].lstrip("\t") if tokens[k].text == "<<-" else script[i:end]
            i = end + 1
            if line == delimiter:
                break
            lines.append(line + "\n")
        body = "".join(lines)
        parts: list = []
        if quoted:
            parts.append(("lit", body, True))
        else:
            _double_quoted(body, 0, parts, closing=None)
        tokens[k + 1] = tuple(parts)
    return i


def _double_quoted(script: str, i: int, parts: list, closing: str | None = '"') -> int:
    """The parts of a double-quoted string from `i` (past its `"`); where it ends. With no
    `closing`, all the rest of `script`, a `"` in it itself (a here-document's body)."""
    text = ""
    escaped = '$`"\\\n' if closing else '$`\\\n'
    while True:
        if i >= len(script):
            if closing is None:
                break
            raise Incomplete
        c = script[i]
        if c == closing:
            break
        if c == "\\" and i + 1 < len(script) and script[i + 1] in escaped:
            text += "" if script[i + 1] == "\n" else script[i + 1]
            i += 2
        elif c == "$":
            if text:
                parts.append(("lit", text, True))
                text = ""
            i = dollar(script, i, parts, quoted=True)
        elif c == "`":
            raise Unknown
        else:
            text += c
            i += 1
    parts.append(("lit", text, True))
    return i + 1


def expansions(text: str) -> Word:
    """`text` as a word whose `$` expansions are made as in double quotes: what `$((text))`
    expands before its arithmetic is worked out (`$n`, `${n:-1}`, `$(nproc)`)."""
    parts: list = []
    _double_quoted(text, 0, parts, closing=None)
    return tuple(parts)


def _closing(script: str, i: int, opening: str, closing: str) -> int:
    """Where the `closing` that matches an `opening` before `i` is, quotes skipped."""
    depth = 1
    while i < len(script):
        c = script[i]
        if c == "\\":
            i += 2
            continue
        if c == "'":
            end = script.find("'", i + 1)
            if end < 0:
                raise Incomplete
            i = end + 1
            continue
        if script.startswith(opening, i):
            depth += 1
            i += len(opening)
            continue
        if script.startswith(closing, i):
            depth -= 1
            if depth == 0:
                return i
            i += len(closing)
            continue
        i += 1
    raise Incomplete


def dollar(script: str, i: int, parts: list, quoted: bool) -> int:
    """The expansion at `i` (a `$`) as a part; where it ends. A `$` that starts none is itself."""
    rest = script[i + 1:i + 3]
    if rest.startswith("(("):
        end = _closing(script, i + 3, "(", ")")
        if not script.startswith("))", end):
            raise Unknown
        parts.append(("arith", script[i + 3:end], quoted))
        return end + 2
    if rest.startswith("("):
        end = _closing(script, i + 2, "(", ")")
        parts.append(("cmd", script[i + 2:end], quoted))
        return end + 1
    if rest.startswith("{"):
        end = _closing(script, i + 2, "{", "}")
        inner = script[i + 2:end]
        if inner.startswith("#") and _NAME.fullmatch(inner[1:]):
            parts.append(("var", inner[1:], "length", (), quoted))
            return end + 1
        m = _NAME.match(inner) or (re.match(r"[?#@*0-9]", inner) if inner else None)
        if m is None:
            raise Unknown
        op = next((o for o in _BRACE_OPS if inner.startswith(o, m.end())), "")
        if not op and m.end() != len(inner):
            raise Unknown  # ${x/y/z}, ${x:1:2}: not simulated
        arg: list = []
        word = inner[m.end() + len(op):]
        plain = False if op in PATTERN_OPS else quoted  # a pattern's quotes, not the word's, make it literal
        j = 0
        while j < len(word):  # the word: its quotes and expansions, as in double quotes
            if word[j] == "$":
                j = dollar(word, j, arg, quoted)
            elif word[j] in "'\"":
                end_q = word.find(word[j], j + 1)
                if end_q < 0:
                    raise Unknown
                arg.append(("lit", word[j + 1:end_q], True))
                j = end_q + 1
            else:
                k = j
                while k < len(word) and word[k] not in "$'\"":
                    k += 1
                arg.append(("lit", word[j:k], plain))
                j = k
        parts.append(("var", m.group(0), op, tuple(arg), quoted))
        return end + 1
    m = _NAME.match(script, i + 1)
    if m:
        parts.append(("var", m.group(0), "", (), quoted))
        return m.end()
    if rest[:1] and rest[0] in _SPECIAL:
        parts.append(("var", rest[0], "", (), quoted))
        return i + 2
    if rest[:1] == "$":
        parts.append(("var", "$", "", (), quoted))  # the shell's PID
        return i + 2
    if rest[:1] == "-":
        raise Unknown  # the shell's options
    parts.append(("lit", "$", quoted))
    return i + 1


@dataclass
class _Parser:
    tokens: list
    lines: list[int]
    i: int = 0
    stops: list = field(default_factory=list)

    def peek(self):
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def keyword(self) -> str | None:
        token = self.peek()
        return literal(token) if isinstance(token, tuple) else None

    def skip_newlines(self) -> None:
        while self.peek() == Op("\n"):
            self.i += 1

    def expect(self, word: str) -> None:
        self.skip_newlines()
        if self.keyword() != word:
            raise Incomplete if self.peek() is None else Unknown
        self.i += 1

    def script(self, until: frozenset = frozenset()) -> Script:
        """And-or lists up to one of the keywords `until` (or `;;`, when there, or the end)."""
        lists: Script = []
        while True:
            while self.peek() in (Op("\n"), Op(";")):
                self.i += 1
            token = self.peek()
            if token is None:
                if until:
                    raise Incomplete
                return lists
            if self.keyword() in until or token == Op(";;") and ";;" in until:
                return lists
            lists.append(self.and_or())
            token = self.peek()
            if token == Op("&"):  # (a separator too: what follows is the next list)
                lists[-1] = Background(lists[-1])
                self.i += 1
                continue
            if token is not None and token not in (Op("\n"), Op(";")) and self.keyword() not in until and \
                    not (token == Op(";;") and ";;" in until):
                raise Unknown  # `&`, `)`, or a keyword out of place

    def and_or(self) -> list:
        items = [(";", self.pipeline())]
        while self.peek() in (Op("&&"), Op("||")):
            op = self.peek().text
            self.i += 1
            self.skip_newlines()
            if self.peek() is None:
                raise Incomplete
            items.append((op, self.pipeline()))
        return items

    def pipeline(self) -> Pipeline:
        negate = False
        if self.keyword() == "!":
            negate = True
            self.i += 1
        commands = [self.command()]
        while self.peek() == Op("|"):
            self.i += 1
            self.skip_newlines()
            if self.peek() is None:
                raise Incomplete
            commands.append(self.command())
        return Pipeline(commands, negate)

    def command(self):
        word = self.keyword()
        if word in ("while", "until"):
            self.i += 1
            cond = self.script(frozenset({"do"}))
            self.expect("do")
            body = self.script(frozenset({"done"}))
            self.expect("done")
            return self._no_redirect(Loop(word == "until", cond, body))
        if word == "for":
            self.i += 1
            name = literal(self.peek()) if isinstance(self.peek(), tuple) else None
            if name is None or not _NAME.fullmatch(name):
                raise Incomplete if self.peek() is None else Unknown
            self.i += 1
            items = None
            if self.keyword() == "in":
                self.i += 1
                items = []
                while isinstance(self.peek(), tuple):
                    items.append(self.peek())
                    self.i += 1
            if self.peek() == Op(";"):
                self.i += 1
            self.expect("do")
            body = self.script(frozenset({"done"}))
            self.expect("done")
            return self._no_redirect(For(name, items, body))
        if word == "if":
            self.i += 1
            branches, otherwise = [], None
            while True:
                cond = self.script(frozenset({"then"}))
                self.expect("then")
                branches.append((cond, self.script(frozenset({"elif", "else", "fi"}))))
                self.skip_newlines()
                kw = self.keyword()
                self.i += 1
                if kw == "elif":
                    continue
                if kw == "else":
                    otherwise = self.script(frozenset({"fi"}))
                    self.expect("fi")
                break
            return self._no_redirect(If(branches, otherwise))
        if word == "{":
            self.i += 1
            body = self.script(frozenset({"}"}))
            self.expect("}")
            return self._no_redirect(Group(body))
        if word == "case":
            return self._no_redirect(self.case())
        if word in KEYWORDS:
            raise Unknown  # `do`, `fi`... out of place
        if word and _NAME.fullmatch(word) and self.tokens[self.i + 1:self.i + 3] == [Op("("), Op(")")]:
            self.i += 3
            self.skip_newlines()
            if self.peek() is None:
                raise Incomplete
            body = self.command()
            if isinstance(body, Simple):
                raise Unknown  # a function's body is a compound command
            return Function(word, body)
        return self.simple()

    def case(self) -> Case:
        self.i += 1
        subject = self.peek()
        if not isinstance(subject, tuple):
            raise Incomplete if subject is None else Unknown
        self.i += 1
        self.expect("in")
        items = []
        while True:
            self.skip_newlines()
            if self.keyword() == "esac":
                self.i += 1
                return Case(subject, items)
            if self.peek() == Op("("):
                self.i += 1
            patterns = []
            while True:
                token = self.peek()
                if not isinstance(token, tuple):
                    raise Incomplete if token is None else Unknown
                patterns.append(token)
                self.i += 1
                if self.peek() != Op("|"):
                    break
                self.i += 1
            if self.peek() != Op(")"):
                raise Incomplete if self.peek() is None else Unknown
            self.i += 1
            body = self.script(frozenset({"esac", ";;"}))
            items.append((patterns, body))
            if self.peek() == Op(";;"):
                self.i += 1

    def _no_redirect(self, node):
        redirects = []
        while (redirect := self.redirect()) is not None:
            redirects.append(redirect)
        return Redirected(node, redirects) if redirects else node

    def redirect(self) -> Redirect | None:
        """The redirection at the cursor, if there is one."""
        token = self.peek()
        m = re.fullmatch(r"([012]?)(<<-|<<|>>|>&|<&|>|<)", token.text) if isinstance(token, Op) else None
        if m is None:
            return None
        self.i += 1
        target = self.peek()
        if not isinstance(target, tuple):
            raise Incomplete if target is None else Unknown
        self.i += 1
        op = m.group(2)
        if op == "<&" or op == ">&" and literal(target) not in ("0", "1", "2"):
            raise Unknown  # `<&`, `>&-`, `>&file`: not simulated
        return int(m.group(1) or (0 if op.startswith("<") else 1)), op, target

    def simple(self) -> Simple:
        assigns: list[tuple[str, Word]] = []
        words: list[Word] = []
        redirects: list[Redirect] = []
        line = self.lines[self.i] if self.i < len(self.lines) else 1
        while True:
            token = self.peek()
            if isinstance(token, tuple):
                self.i += 1
                first = token[0]
                if not words and first[0] == "lit" and not first[2] and \
                        (m := re.match(r"([A-Za-z_][A-Za-z0-9_]*)=", first[1])):
                    rest = first[1][m.end():]
                    assigns.append((m.group(1), ((("lit", rest, False),) if rest else ()) + token[1:]))
                    continue
                words.append(token)
                continue
            if (redirect := self.redirect()) is not None:
                redirects.append(redirect)
                continue
            break
        if not (assigns or words or redirects):
            raise Incomplete if self.peek() is None else Unknown  # `&& true`, `|` with nothing before it
        return Simple(assigns, words, redirects, line)


def parse(script: str) -> Script:
    """The commands of `script`; Unknown for what is not simulated, Incomplete where it ends too soon."""
    parser = _Parser(*lex(script))
    try:
        return parser.script()
    except RecursionError:  # nested deeper than Python's stack goes (`$(` 300 times)
        raise Unknown from None
