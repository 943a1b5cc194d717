"""The actual cost of one evaluation, tracked while it runs.

The engine cannot be interrupted and reports no cost, so a program whose
worst case the estimate cannot bound under the per-call limit runs in a
metered form (see `desugar.Printer(metered=True)`): `all` and `exists`, which
stop at the first element that decides them, report each iteration as it
starts; any other comprehension how many elements it is about to range over;
every size-dependent library call implemented in Python its price on the
actual values (`cost.actual_call_cost`); the engine's `contains`, `startsWith`,
`endsWith` and `matches`, and its operators on `dyn` operands (concatenation,
comparison, `in`), theirs. The meter adds those to the estimate of the rest
and stops the evaluation (a CELError from inside the engine) as soon as the
total passes the limit, as cel-go's cost tracker cancels it; nothing
expensive runs first, since an iteration or a call is charged before it runs
(flatten, priced on its result, after).

The estimate of the rest, and each comprehension's cost per iteration, use
the types' size bounds; the first time they would pass the limit they are
redone with the sizes of the actual values (`refine`), which are tighter.
"""

from __future__ import annotations

import threading
from typing import Callable

from .cost import operator_cost, regex_cost, string_test_cost
from .errors import COST_LIMIT_ERROR, CELError

#: the function a metered program calls before a comprehension, or before each iteration of `all` and
#: `exists`: (source position, iterations) -> true
ITERATE = "__nk_iterate__"
#: what a metered program calls for the engine's string tests, which price them on the receiver's length
STRING_TESTS = {"contains": "__nk_contains__", "startsWith": "__nk_starts_with__", "endsWith": "__nk_ends_with__"}
#: what a metered program calls before the engine's `matches`: (text, pattern) -> true
MATCHES = "__nk_matches__"
#: what a metered program calls before an operator of the engine's whose operands' sizes the estimate
#: cannot tell (cost.priced_at_runtime): (operator, left, right) -> true, a list or map operand given
#: as [its size]
OPERANDS = "__nk_operands__"

_LOCAL = threading.local()


class Meter:
    """One evaluation's cost: `base` (the estimate without comprehension iterations and
    runtime-priced calls), plus size * per_iteration[pos] for each comprehension run, plus
    the calls' prices. `refine()` -> (base, per_iteration) for the actual values."""

    __slots__ = ("base", "per_iteration", "limit", "refine", "iterations", "calls", "total", "exceeded")

    def __init__(self, base: int, per_iteration: dict[int, int], limit: int,
                 refine: Callable[[], tuple[int, dict[int, int]]] | None = None) -> None:
        self.base, self.per_iteration, self.limit, self.refine = base, per_iteration, limit, refine
        self.iterations: dict[int, int] = {}
        self.calls = 0
        self.total = base
        self.exceeded = False

    def iterate(self, pos: int, size: int) -> bool:
        """Charge `size` iterations of the comprehension at `pos` (called at every step of
        `all` and `exists`: the check is made only past the limit)."""
        self.iterations[pos] = self.iterations.get(pos, 0) + size
        self.total += size * self.per_iteration.get(pos, 1)
        if self.total > self.limit:
            self._check()
        return True

    def charge(self, cost: int) -> None:
        self.calls += cost
        self.total += cost
        self._check()

    def _check(self) -> None:
        if self.total <= self.limit:
            return
        if self.refine is not None:
            self.base, self.per_iteration = self.refine()
            self.refine = None
            self.total = self.base + self.calls + sum(
                n * self.per_iteration.get(pos, 1) for pos, n in self.iterations.items())
            if self.total <= self.limit:
                return
        self.exceeded = True
        raise CELError(COST_LIMIT_ERROR)


class running:
    """`with running(meter):` the evaluation on this thread reports to `meter`."""

    __slots__ = ("meter", "outer")

    def __init__(self, meter: Meter) -> None:
        self.meter = meter

    def __enter__(self) -> Meter:
        self.outer = getattr(_LOCAL, "meter", None)
        _LOCAL.meter = self.meter
        return self.meter

    def __exit__(self, *exc: object) -> None:
        _LOCAL.meter = self.outer


def active() -> Meter | None:
    """The meter of the evaluation running on this thread, if it is metered."""
    return getattr(_LOCAL, "meter", None)


def report_range(pos: int, size: int) -> bool:
    """ITERATE: a comprehension at `pos` is about to range over `size` elements."""
    m = active()
    return True if m is None else m.iterate(pos, size)


def _string_test(name: str, test: Callable[[str, str], bool]) -> Callable[[str, str], bool]:
    def run(s: str, t: str) -> bool:
        if not isinstance(s, str) or not isinstance(t, str):
            raise CELError("no such overload")
        m = active()
        if m is not None:
            m.charge(string_test_cost(name, len(s), len(t)))
        return test(s, t)

    return run


def report_operands(name: str, left: object, right: object) -> bool:
    """OPERANDS: the operator `name` is about to run on these operands."""
    m = active()
    if m is not None:
        m.charge(operator_cost(name, left, right))
    return True


def report_match(text: object, pattern: object) -> bool:
    """MATCHES: a regex is about to run over a text, priced as cel-go's tracker prices it."""
    m = active()
    if m is not None and isinstance(text, str) and isinstance(pattern, str):
        m.charge(regex_cost(len(text), len(pattern)))
    return True


#: the functions a metered program calls, by name
RUNTIME = {ITERATE: report_range, OPERANDS: report_operands, MATCHES: report_match,
           STRING_TESTS["contains"]: _string_test("contains", lambda s, t: t in s),
           STRING_TESTS["startsWith"]: _string_test("startsWith", str.startswith),
           STRING_TESTS["endsWith"]: _string_test("endsWith", str.endswith)}
