"""The warnings a request gathers before it fails, as upstream's warning recorder
(k8s.io/apiserver/pkg/warning): the handler chain writes each Warning header as it is added, so an
error response still carries the unknown and duplicate fields its body was decoded with (kubectl
prints them above the error). A successful write hands its warnings back in its Result instead;
the recorder only serves the error path."""

from __future__ import annotations

import re
from contextvars import ContextVar, Token

#: upstream's recorder (filters/warning.go): the runes of warning text a response carries whole; past
#: them every text is cut to ITEM_RUNES runes, and none is added once the cut ones reach TOTAL_RUNES
TOTAL_RUNES = 4 * 1024
ITEM_RUNES = 256
#: one warning-value of a Warning header (RFC 7234): code, agent, quoted text; a header may hold several
_VALUE = re.compile(r'(\d{3}) (\S+) "((?:[^"\\]|\\.)*)"')
_ESCAPED = re.compile(r"\\(.)")
#: control characters (Go's unicode.IsControl) and lone surrogates (a str's invalid UTF-8):
#: NewWarningHeader refuses a text holding one, so the recorder drops that warning (a line break
#: included: aiohttp refuses to write one in a header, a 500)
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
#: a YAML strict decoding error (go-yaml's TypeError, bare or as sigs.k8s.io/yaml wraps it)
_YAML_ERRORS = ("yaml: unmarshal errors:\n", "error converting YAML to JSON: yaml: unmarshal errors:\n")

#: the request's warnings in the order they came, each once (a dict: a body of 100,000 unknown fields
#: warns as many times, and a list's membership test made that quadratic)
_RECORDED: ContextVar[dict[str, None] | None] = ContextVar("nanokube.apiserver.warnings", default=None)


def start() -> Token:
    """A new recorder for the request being served (its task's context); `stop` with the token."""
    return _RECORDED.set({})


def stop(token: Token) -> None:
    _RECORDED.reset(token)


def record(texts: list[str]) -> None:
    """Keeps `texts` for the request being served, each once (the recorder drops repeats); nothing
    outside a request (the in-process clients)."""
    recorded = _RECORDED.get()
    if recorded is not None:
        recorded.update(dict.fromkeys(texts))


def recorded() -> list[str]:
    return list(_RECORDED.get() or ())


def strict_decoding(texts: list[str]) -> list[str]:
    """Strict decoding errors as upstream warns of them (addStrictDecodingWarnings): a YAML one, which
    lists a line per repeated key, is a warning per line (`line 7: key "a" already set in map`), so
    none holds the line break the recorder would drop it for; any other is one warning as it is."""
    split: list[str] = []
    for text in texts:
        prefix = next((p for p in _YAML_ERRORS if text.startswith(p)), "")
        split += [line.strip() for line in text[len(prefix):].split("\n")] if prefix else [text]
    return split


def header(text: str, agent: str = "-") -> str:
    """A Warning header value (RFC 7234): code 299, agent "-", the text quoted with its quotes escaped.
    A text with a control character makes no valid header: `limit` drops it, as upstream's recorder
    drops the warning NewWarningHeader refuses."""
    return f'299 {agent} "' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def limit(headers) -> None:
    """Leaves a response's Warning headers (a multidict) as upstream's recorder writes them: each text
    once, the first time it came (whatever its agent), and once the texts would pass TOTAL_RUNES in
    all, every one, those before included, cut to ITEM_RUNES runes, and none added after the cut ones
    reach TOTAL_RUNES; a text holding a control character is dropped. Untouched when no text repeats
    and all fit."""
    values = headers.getall("Warning", ())
    if not values:
        return
    # (read as far as they are kept: the texts past the cut are never unquoted)
    warned = ((agent, _ESCAPED.sub(r"\1", quoted)) for v in values for _, agent, quoted in _VALUE.findall(v))
    kept, truncating, read = _kept(warned)
    if not truncating and len(kept) == read:
        return
    headers.popall("Warning")
    for agent, text in kept:
        headers.add("Warning", header(text[:ITEM_RUNES] if truncating else text, agent))


def texts(warnings: list[str]) -> list[str]:
    """`warnings` as `limit` would leave them, before any header is made of them: a webhook's 10,000
    warnings of 1 KiB made as many headers for `limit` to parse again (2.8 s of the loop a request),
    where upstream's recorder drops each past its budget as it is added."""
    kept, truncating, _ = _kept(("-", w) for w in warnings)
    return [t[:ITEM_RUNES] if truncating else t for _, t in kept]


def _kept(warned) -> tuple[list[tuple[str, str]], bool, int]:
    """The (agent, text) pairs the recorder keeps of `warned`, read only as far as it keeps any: the
    kept ones, whether they are cut, and how many were read."""
    kept: list[tuple[str, str]] = []
    seen: set[str] = set()
    written, truncating, read = 0, False, 0
    for agent, text in warned:
        if truncating and written >= TOTAL_RUNES:
            break
        read += 1
        if not text or text in seen or _CONTROL.search(text):
            continue
        seen.add(text)
        kept.append((agent, text))
        if truncating:
            written += len(text[:ITEM_RUNES])
        elif written + len(text) <= TOTAL_RUNES:
            written += len(text)
        else:  # replays what was written, each cut
            truncating = True
            written = sum(len(t[:ITEM_RUNES]) for _, t in kept)
    return kept, truncating, read
