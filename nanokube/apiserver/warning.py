"""The warnings a request gathers before it fails, as upstream's warning recorder
(k8s.io/apiserver/pkg/warning): the handler chain writes each Warning header as it is added, so an
error response still carries the unknown and duplicate fields its body was decoded with (kubectl
prints them above the error). A successful write hands its warnings back in its Result instead;
the recorder only serves the error path."""

from __future__ import annotations

from contextvars import ContextVar, Token

_RECORDED: ContextVar[list[str] | None] = ContextVar("nanokube.apiserver.warnings", default=None)


def start() -> Token:
    """A new recorder for the request being served (its task's context); `stop` with the token."""
    return _RECORDED.set([])


def stop(token: Token) -> None:
    _RECORDED.reset(token)


def record(texts: list[str]) -> None:
    """Keeps `texts` for the request being served, each once (the recorder drops repeats); nothing
    outside a request (the in-process clients)."""
    recorded = _RECORDED.get()
    if recorded is not None:
        recorded.extend(t for t in texts if t not in recorded)


def recorded() -> list[str]:
    return list(_RECORDED.get() or ())


def header(text: str) -> str:
    """A Warning header value (RFC 7234): code 299, agent "-", the text quoted with its quotes escaped;
    a line break is a space, as Go's header writer makes it."""
    text = text.replace("\n", " ").replace("\r", " ")
    return '299 - "' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
