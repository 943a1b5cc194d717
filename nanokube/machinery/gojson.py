"""Go's encoding/json errors for bytes it is asked to decode into a map[string]interface{}, as
upstream's messages carry them (a dockercfg Secret's `.dockercfg` that is not a JSON object).

The syntax check walks the input as Go's scanner does (checkValid runs before decoding), so the
first bad byte is reported with the scanner's words for the place it was found in.
"""

from __future__ import annotations

from . import gofmt

_SPACE = b" \t\r\n"
_DIGITS = b"0123456789"
_HEX = b"0123456789abcdefABCDEF"
_ESCAPES = b'bfnrt\\/"'
_LITERALS = {ord("t"): b"true", ord("f"): b"false", ord("n"): b"null"}
#: encoding/json's maxNestingDepth: the scanner refuses the bracket that opens level 10,001
MAX_DEPTH = 10_000


class _Syntax(Exception):
    pass


def value_kind(v: object, literal: bool = False) -> str:
    """How Go's decoder names a decoded JSON value it cannot unmarshal into the field's type (an
    UnmarshalTypeError's Value): a number with its literal where the decoder has it."""
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return f"number {v}" if literal else "number"
    if isinstance(v, str):
        return "string"
    return "array" if isinstance(v, list) else "object"


def _char(c: int) -> str:
    """quoteChar: the byte as a Go character literal."""
    if c == ord("'"):
        return "'\\''"
    if c == ord('"'):
        return "'\"'"
    return "'" + gofmt.quote(chr(c))[1:-1] + "'"


class _Scanner:
    def __init__(self, data: bytes):
        self.data = data
        self.i = 0

    def peek(self) -> int:
        if self.i >= len(self.data):
            raise _Syntax("unexpected end of JSON input")
        return self.data[self.i]

    def bad(self, context: str) -> _Syntax:
        return _Syntax(f"invalid character {_char(self.data[self.i])} {context}")

    def space(self) -> int:
        while self.peek() in _SPACE:
            self.i += 1
        return self.data[self.i]

    def value(self) -> str:
        """Scan one value; its kind as UnmarshalTypeError names it. Containers are kept on an explicit
        stack, as Go's scanner keeps its parse states, so any depth up to Go's limit is scanned."""
        stack = bytearray()  # the open containers' closing bytes
        kind = None
        while True:
            c = self.space()
            if c in b"{[":
                stack.append(ord("}") if c == ord("{") else ord("]"))
                if len(stack) > MAX_DEPTH:
                    raise self.bad("exceeded max depth")
                kind = kind or ("object" if c == ord("{") else "array")
                self.i += 1
                if self.space() == stack[-1]:
                    self.i += 1
                    stack.pop()
                elif c == ord("{"):
                    self.key()
                    continue
                else:
                    continue
            else:
                scalar = self.scalar(c)
                kind = kind or scalar
            while stack:  # after a value: the next element, or the end of its container
                c = self.space()
                if c == stack[-1]:
                    self.i += 1
                    stack.pop()
                elif c == ord(","):
                    self.i += 1
                    if stack[-1] == ord("}"):
                        self.key()
                    break
                else:
                    raise self.bad("after object key:value pair" if stack[-1] == ord("}") else "after array element")
            if not stack:
                return kind

    def key(self) -> None:
        """An object's key and its colon."""
        if self.space() != ord('"'):
            raise self.bad("looking for beginning of object key string")
        self.i += 1
        self.string()
        if self.space() != ord(":"):
            raise self.bad("after object key")
        self.i += 1

    def scalar(self, c: int) -> str:
        if c == ord('"'):
            self.i += 1
            self.string()
            return "string"
        if c == ord("-") or c in _DIGITS:
            self.number()
            return "number"
        if c in _LITERALS:
            word = _LITERALS[c]
            self.i += 1
            for want in word[1:]:
                if self.peek() != want:
                    raise self.bad(f"in literal {word.decode()} (expecting {_char(want)})")
                self.i += 1
            return "null" if c == ord("n") else "bool"
        raise self.bad("looking for beginning of value")

    def string(self) -> None:
        while True:
            c = self.peek()
            if c == ord('"'):
                self.i += 1
                return
            if c < 0x20:
                raise self.bad("in string literal")
            self.i += 1
            if c == ord("\\"):
                e = self.peek()
                if e == ord("u"):
                    self.i += 1
                    for _ in range(4):
                        if self.peek() not in _HEX:
                            raise self.bad("in \\u hexadecimal character escape")
                        self.i += 1
                elif e in _ESCAPES:
                    self.i += 1
                else:
                    raise self.bad("in string escape code")

    def digits(self) -> None:
        while self.i < len(self.data) and self.data[self.i] in _DIGITS:
            self.i += 1

    def number(self) -> None:
        """A number ends at the first byte that cannot continue it (its parent judges that byte);
        only a number that cannot end there is an error of its own."""
        if self.data[self.i] == ord("-"):
            self.i += 1
            if self.peek() not in _DIGITS:
                raise self.bad("in numeric literal")
        if self.data[self.i] == ord("0"):
            self.i += 1
        else:
            self.digits()
        if self.i < len(self.data) and self.data[self.i] == ord("."):
            self.i += 1
            if self.peek() not in _DIGITS:
                raise self.bad("after decimal point in numeric literal")
            self.digits()
        if self.i < len(self.data) and self.data[self.i] in b"eE":
            self.i += 1
            if self.peek() in b"+-":
                self.i += 1
            if self.peek() not in _DIGITS:
                raise self.bad("in exponent of numeric literal")
            self.digits()


def check_valid(data: bytes) -> tuple[str | None, str]:
    """checkValid: the syntax error json.Unmarshal reports first (None when the text is valid), and
    the kind of the top-level value (as UnmarshalTypeError names it) when it is."""
    scanner = _Scanner(data)
    try:
        kind = scanner.value()
        while scanner.i < len(data):
            if data[scanner.i] not in _SPACE:
                raise scanner.bad("after top-level value")
            scanner.i += 1
    except _Syntax as e:
        return str(e), ""
    return None, kind


def map_decode_error(data: bytes) -> str | None:
    """json.Unmarshal(data, &map[string]interface{}{})'s error text, or None when it decodes."""
    syntax, kind = check_valid(data)
    if syntax is not None:
        return syntax
    if kind in ("object", "null"):
        return None
    return f"json: cannot unmarshal {kind} into Go value of type map[string]interface {{}}"


class OutOfRange(float):
    """A JSON number past float64's range (1e400) as decoded leniently: Go's struct decoder skips
    one in a field its type lacks (an unknown field is only warned of) and refuses one anywhere
    else, naming its text ("cannot unmarshal number 1e400 into ..."). Its float value is infinite."""

    text: str

    def __new__(cls, text: str) -> "OutOfRange":
        number = super().__new__(cls, text)
        number.text = text
        return number

    def __repr__(self) -> str:
        return self.text

    __str__ = __repr__


def float_or_out_of_range(text: str) -> float:
    """json.loads' parse_float: the number, or an OutOfRange where float64 cannot hold it."""
    number = float(text)
    return number if number not in (float("inf"), float("-inf")) else OutOfRange(text)


def find_out_of_range(value: object) -> OutOfRange | None:
    """The first OutOfRange number left in a decoded value, in document order, the one Go's decoder
    names (an explicit stack: any depth)."""
    stack = [value]
    while stack:
        v = stack.pop()
        if type(v) is dict:
            stack.extend(reversed(v.values()))
        elif type(v) is list:
            stack.extend(reversed(v))
        elif type(v) is OutOfRange:
            return v
    return None


def summarize(data: bytes, limit: int = 30) -> str:
    """summarizeData: the start of a body an error message quotes, as text when it opens an object
    and in hex otherwise."""
    if not data:
        return "<empty>"
    more = " ..." if len(data) > limit else ""
    if data[0] == ord("{"):
        return data[:limit].decode(errors="replace") + more
    return data[:limit].hex() + more


def unrecognized(kind: str, data: bytes) -> str | None:
    """transformDecodeError's text for a body whose JSON does not parse (None when Go reads it): the
    serializer fails on the body's syntax before it knows a kind, so the error names the kind the
    endpoint decodes into and quotes the start of the body."""
    syntax, _ = check_valid(data)
    if syntax is None:
        return None
    return (f"the object provided is unrecognized (must be of type {kind}): couldn't get version/kind; "
            f"json parse error: {syntax} ({summarize(data)})")


def patch_syntax_error(data: bytes, strategic: bool, json_patch: bool, field_validation: str) -> str | None:
    """A json, merge or strategic merge patch's text when its JSON does not parse (None when Go
    reads it). Under Strict or Warn applyJSPatch decodes a json or merge patch strictly first
    ("error decoding patch: ..."); under Ignore a json patch fails in DecodePatch (the bare error) and
    a merge patch in MergePatch (ErrBadJSONPatch); strategicPatchObject reports the bare error."""
    syntax, _ = check_valid(data)
    if syntax is None:
        return None
    if strategic:
        return syntax
    if field_validation in ("Strict", "Warn"):
        return f"error decoding patch: {syntax}"
    return syntax if json_patch else "Invalid JSON Patch"
