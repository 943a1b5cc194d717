"""Field errors that hold one value print it once (validation.py's _render): validateResourceQuotaScopes
refuses each unsupported scope with the whole list, and printing it again for each of 3,000 scopes (9
million items) held the API server's loop for a minute (found by a fuzz sweep of lists of 3,000 items)."""

from nanokube.machinery import gofmt
from nanokube.machinery.validation import invalid


def test_errors_sharing_a_value_print_it_once(monkeypatch):
    printed = []
    marshal = gofmt.marshal
    monkeypatch.setattr(gofmt, "marshal", lambda v: (isinstance(v, list) and printed.append(v)) or marshal(v))
    scopes = ["x0", "x1", "x2"]
    errs = [invalid("spec.scopes", scopes, "unsupported scope") for _ in scopes]
    assert {str(e) for e in errs} == {'spec.scopes: Invalid value: ["x0","x1","x2"]: unsupported scope'}
    assert [e.message for e in errs][0] == 'Invalid value: ["x0","x1","x2"]: unsupported scope'
    assert printed == [scopes]
    other = ["x0", "x1", "x2"]  # an equal list is another value: printed for itself
    assert invalid("f", other, "d").message == 'Invalid value: ["x0","x1","x2"]: d' and printed == [scopes, other]
