"""What the server's CEL does, counted for tests instead of timed (the suite runs on loaded machines)."""

from __future__ import annotations

from types import SimpleNamespace

import cel
import pytest

from nanokube.cel import parser
from nanokube.cel.meter import Meter


def count_cel_work(monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    """From now until the test ends: `iterated`, the elements the meter let comprehensions range over
    (each is charged before it runs, so no more ran); `compiled`, the lengths of the texts given to
    the engine; `parsed`, those of the sources our parser read. The server under test is in-process."""
    done = SimpleNamespace(iterated=0, compiled=[], parsed=[])
    iterate, compile_, tokenize = Meter.iterate, cel.compile, parser._tokenize

    def counted_iterate(self, pos, size):
        done.iterated += size
        return iterate(self, pos, size)

    def counted_compile(source, *args, **kwargs):
        done.compiled.append(len(source))
        return compile_(source, *args, **kwargs)

    def counted_tokenize(source):
        done.parsed.append(len(source))
        return tokenize(source)

    monkeypatch.setattr(Meter, "iterate", counted_iterate)
    monkeypatch.setattr(cel, "compile", counted_compile)
    monkeypatch.setattr(parser, "_tokenize", counted_tokenize)
    return done
