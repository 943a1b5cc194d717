"""User-supplied regular expressions (CRD schema patterns, CEL's find and findAll) matched by RE2 (google-re2),
as Go's regexp (RE2) matches them upstream.

Python's `re` backtracks: `^(a+)+$` against thirty a's and a '!' takes minutes, and the API server's
one event loop with it; RE2 is linear in the text. RE2's default options are Go's: UTF-8, leftmost-first,
Perl classes, `^`/`$` at the ends of the text only, `\\p{Greek}` and `[[:alpha:]]`. A refused pattern's
error reads as Go's `error parsing regexp: <ErrorCode>: `<expr>``, RE2's wording mapped to Go's codes.
"""

from __future__ import annotations

import functools

import re2

_OPTIONS = re2.Options()  # RE2's defaults are Go's regexp.Compile
_OPTIONS.log_errors = False

# RE2's RegexpStatus code texts -> Go's regexp/syntax ErrorCode strings
_GO_CODES = {
    "unexpected error": "regexp/syntax: internal error",
    "invalid escape sequence": "invalid escape sequence",
    "invalid character class": "invalid character class",
    "invalid character class range": "invalid character class range",
    "missing ]": "missing closing ]",
    "missing )": "missing closing )",
    "unexpected )": "unexpected )",
    "trailing \\": "trailing backslash at end of expression",
    "no argument for repetition operator": "missing argument to repetition operator",
    "invalid repetition size": "invalid repeat count",
    "bad repetition operator": "invalid nested repetition operator",
    "invalid perl operator": "invalid or unsupported Perl syntax",
    "invalid UTF-8": "invalid UTF-8",
    "invalid named capture group": "invalid named capture",
}


class PatternError(ValueError):
    """The pattern is not a valid Go regexp; str() reads as Go's `error parsing regexp: ...`."""


def utf8(text: str) -> bytes:
    """The text as Go holds it: UTF-8, a lone surrogate (JSON's `\\ud800`) read as U+FFFD as encoding/json does."""
    try:
        return text.encode()
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace").encode()


@functools.lru_cache(maxsize=512)
def compile_pattern(pattern: str):
    """The compiled pattern (a google-re2 regexp); raises PatternError where Go's regexp.Compile fails."""
    _refuse_byte_escape(pattern)
    try:
        return re2.compile(utf8(pattern), _OPTIONS)
    except re2.error as e:
        raise PatternError(_go_error(e, pattern)) from None


def search(pattern: str, text: str) -> bool:
    """Go's regexp.MatchString: an unanchored search. Raises PatternError for an invalid pattern."""
    return compile_pattern(pattern).search(utf8(text)) is not None


def _go_error(e: re2.error, pattern: str) -> str:
    msg = e.args[0].decode("utf-8", "replace") if isinstance(e.args[0], bytes) else str(e.args[0])
    if msg.startswith("pattern too large"):  # RE2's max_mem; Go's own limit is ErrLarge
        return f"error parsing regexp: expression too large: `{pattern}`"
    code, _, expr = msg.partition(": ")
    return f"error parsing regexp: {_GO_CODES.get(code, code)}: `{expr}`"


def _refuse_byte_escape(pattern: str) -> None:
    """`\\C` (any byte) is RE2's, not Go's: Go refuses it as an invalid escape."""
    i = 0
    while (i := pattern.find("\\", i)) >= 0:
        nxt = pattern[i + 1:i + 2]
        if nxt == "Q":
            end = pattern.find("\\E", i + 2)
            if end < 0:
                return
            i = end + 2
            continue
        if nxt == "C":
            raise PatternError("error parsing regexp: invalid escape sequence: `\\C`")
        i += 2
