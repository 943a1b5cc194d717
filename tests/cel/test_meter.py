"""The metered form of a program: the same values as the program, and the cost of what it ran."""

import logging

import cel
import pytest

from nanokube.cel import CELError, Environment, collect, desugar
from nanokube.cel.library import runtime_functions
from nanokube.cel.meter import Meter, running
from nanokube.cel.types import DYN

ENV = Environment({"x": DYN})
CONTEXT = cel.Context()
for _name, _fn in {**runtime_functions(), **desugar.RUNTIME}.items():
    CONTEXT.add_function(_name, _fn)


@pytest.fixture(autouse=True)
def _release_open_lists():
    """These tests execute metered programs directly, without the release that Program.run and Program.evaluate
    do after a stop inside a map: drop what a stopped one left open on this thread."""
    opened = collect.mark()
    yield
    collect.release(opened)


X = {"l": [1, 2, 3], "m": {"a": 1, "b": 2}, "s": "abcdef", "nested": [[1, 2], [3]], "o": {"f": "v"}}


def metered(src: str, limit: int = 10**12) -> tuple[object, Meter]:
    m = ENV.compile(src).metered()
    meter = Meter(m.base, m.per_iteration, limit)
    CONTEXT.add_variable("x", X)
    with running(meter):
        return m.program.execute(CONTEXT), meter


@pytest.mark.parametrize("src", [
    "x.l.all(i, i > 0) && x.l.exists(i, i == 2) && x.l.exists_one(i, i == 3)",
    "x.l.map(i, i * 2) == [2, 4, 6] && x.l.filter(i, i > 1) == [2, 3] && x.l.map(i, i > 1, i) == [2, 3]",
    "x.m.all(k, v, v > 0) && x.l.exists(i, v, i == 1 && v == 2)",
    "x.l.transformList(i, v, v * i) == [0, 2, 6] && x.m.transformMap(k, v, v + 1) == {'a': 2, 'b': 3}",
    "x.l.sortBy(i, -i) == [3, 2, 1]",
    "cel.bind(y, x.l.map(i, i + 1), y.all(j, j > 1))",
    "x.nested.flatten() == [1, 2, 3] && x.nested.all(l, l.all(i, i < 4))",
    "x.s.contains('cd') && x.s.startsWith('ab') && x.s.endsWith('ef') && !x.s.contains('z')",
    "x.?o.?f.orValue('none') == 'v' && x.l[?5].orValue(0) == 0",
    "x.m.map(k, k).size() == 2 && 'a' in x.m.map(k, k) && dyn(x.l).all(i, i > 0)",
    "x.s + x.s == 'abcdefabcdef' && x.l + x.l == [1, 2, 3, 1, 2, 3] && x.l == x.l && x.s < x.o.f && 2 in x.l",
    "'a' in x.m && !('c' in x.m) && x.m != x.o && x.l.map(i, i + i) == [2, 4, 6] && x.s + 'g' > x.s",
])
def test_the_metered_form_answers_what_the_program_does(src):
    program = ENV.compile(src)
    assert program.evaluate({"x": X}) is True
    assert metered(src)[0] is True


def test_comprehensions_report_what_they_range_over():
    """x.nested.all: 2 iterations of 3 + the inner all's range (`l`, 1); the inner all runs
    over 2 and then 1 elements at 3 + (`i < 4`: 2) each."""
    value, meter = metered("x.nested.all(l, l.all(i, i < 4))")
    assert value is True
    assert sorted(meter.iterations.values()) == [2, 3]
    assert meter.total == meter.base + 2 * 4 + 3 * 5


def test_calls_are_priced_on_their_values():
    """`contains` costs a tenth of the receiver's length, flatten the elements it returns."""
    base = metered("x.s.contains('z')")[1]
    assert base.calls == 1  # ceil(6 / 10)
    assert metered("x.nested.flatten().size() == 3")[1].calls == 3


def test_a_run_over_the_limit_is_stopped():
    with pytest.raises(Exception, match="operation cancelled: actual cost limit exceeded"):
        metered("lists.range(1000).all(i, lists.range(1000).all(j, true))", limit=100_000)
    with pytest.raises(CELError):
        Meter(0, {}, 10).charge(11)


def test_a_long_chain_prints_without_nesting():
    """The printed (metered) form parenthesizes only where precedence needs it: a chain of 120
    additions beside a comprehension nested 120 deep in parentheses, past the engine's 96."""
    src = " + ".join(["size(x.s)"] * 120) + " == 720 && x.l.all(i, i > 0)"
    assert ENV.compile(src).evaluate({"x": X}) is True
    assert metered(src)[0] is True
    assert metered("1 - (2 - 3) == 2 && (1 - 2) - 3 == -4 && 2 * (3 + 4) == 14 && !(true && false)")[0] is True


def test_a_long_selection_chain_prints_without_nesting():
    """Receivers are parenthesized only when an operator or a number needs it: 100 selections
    were 100 nested parentheses."""
    deep = {"a": None}
    for _ in range(99):
        deep = {"a": deep}
    src = "x.d" + ".a" * 100 + " == null && x.l.all(i, i > 0)"
    CONTEXT.add_variable("x", {**X, "d": deep})
    m = ENV.compile(src).metered()
    with running(Meter(m.base, m.per_iteration, 10**12)):
        assert m.program.execute(CONTEXT) is True


def test_exists_and_all_are_charged_the_iterations_they_run():
    """cel-go charges a comprehension what it runs: `exists` stops at its first true element,
    `all` at its first false one (both were charged their whole range before they started)."""
    for src, want, ran in (("x.l.exists(i, i == 1)", True, 1), ("x.l.exists(i, i == 3)", True, 3),
                           ("x.l.all(i, i > 1)", False, 1), ("x.m.exists(k, v, v > 0)", True, 1),
                           ("x.l.exists(i, i > 5)", False, 3)):
        value, meter = metered(src)
        assert value is want, src
        assert list(meter.iterations.values()) == [ran], src
        [per_iteration] = meter.per_iteration.values()
        assert meter.total == meter.base + ran * per_iteration, src


def test_a_stop_inside_exists_ends_its_loop():
    """The meter's stop is an error the loop cannot absorb (in `step && body` the engine took it
    for false where the body was false, and went on over the rest, failing at each step)."""
    m = ENV.compile("lists.range(100000).exists(i, i < 0)").metered()
    meter = Meter(m.base, m.per_iteration, 200_000)
    with pytest.raises(Exception, match="operation cancelled: actual cost limit exceeded"), running(meter):
        m.program.execute(CONTEXT)
    assert meter.exceeded and sum(meter.iterations.values()) < 50_000


def test_a_metered_stop_is_logged_at_debug_not_as_the_engines_warning(caplog):
    """The engine logs a WARNING (logger `cel`) for every exception a function of ours raises in
    it: a metered stop did so on every refused request. It is this package's debug record now."""
    caplog.set_level(logging.DEBUG)
    with pytest.raises(Exception, match="operation cancelled: actual cost limit exceeded"):
        metered("lists.range(1000).all(i, lists.range(1000).all(j, true))", limit=100_000)
    assert [(r.name, r.levelname) for r in caplog.records if r.levelno >= logging.WARNING] == []
    [record] = [r for r in caplog.records if r.name.startswith("nanokube.cel")]
    assert record.levelno == logging.DEBUG and "actual cost limit exceeded" in record.getMessage()


@pytest.mark.parametrize("src,cost", [
    # cel-go's lists library (v3): a list built costs an element each, plus a call and a list's creation
    ("lists.range(3000)", 3000 + 1 + 10),
    ("lists.range(3000).map(x, lists.range(3000))", 3011 + 3000 * (12 + 3011)),
    ("[1, 2, 3, 4].slice(1, 3)", 10 + 4 + 11),  # sized as its receiver
    ("[1, 2, 3].reverse()", 10 + 3 + 11),
    # sort and distinct compare every pair twice (a tenth more for strings); sortBy sorts its keys so
    ("[3, 1, 2].sort()", 10 + 2 * 9 + 11),
    ("['b', 'a'].distinct()", 10 + 9 + 11),
    ("[3, 1, 2].sortBy(x, -x)", 10 + 3 * (12 + 2) + 2 * 9 + 11),
    # the sets library: the product of the sizes (equivalent: both ways), and a call
    ("sets.contains([1, 2], [1, 2, 3])", 10 + 10 + 6 + 1),
    ("sets.equivalent([1, 2], [1, 2, 3])", 10 + 10 + 12 + 1),
    # split: the traversal and the result's construction; regexes: a quarter per pattern character
    ("'a,b,c,d,e,f'.split(',')", 3),
    ("'abc'.findAll('[a-z]')", 1 * 2),
    ("'abc'.matches('^[a-z]+$')", 1 * 2),
    # contains: a tenth of the text times a tenth of what it looks for; the others a tenth of the text
    ("'abcdefghijklmnopqrstu'.contains('abcdefghijk') && 'abc'.startsWith('abcd')", 3 * 2 + 1),
    # comparisons a tenth of the smaller operand, lists too; a concatenation a tenth of both
    ("[1, 2, 3] == [1, 2, 3]", 10 + 10 + 1),
    ("[1] + [2, 3]", 10 + 10 + 1),
    # a named format's validate: its regex (upstream prices it at 128 characters) over the string
    ("format.dns1123Label().validate('my-name')", 1 + 1 * 32),
])
def test_functions_that_build_or_compare_lists_cost_what_upstream_charges(src, cost):
    assert ENV.compile(src).max_cost == cost


def test_find_all_is_priced_on_the_text_and_the_pattern():
    """cel-go's runtime price of findAll: a tenth of the text's length plus one, times a quarter of the
    pattern's; every character of 100,000 found is 10,001, a hundredth of the per-call limit."""
    program = ENV.compile("x.t.findAll('.')").metered()
    meter = Meter(program.base, program.per_iteration, 10**12)
    CONTEXT.add_variable("x", {"t": "é" * 100_000})
    with running(meter):
        found = program.program.execute(CONTEXT)
    assert found == ["é"] * 100_000 and meter.calls == 10_001


def test_contains_is_priced_on_both_strings():
    """cel-go charges the product of a tenth of each: 1,000 tests for a 1,000-character part of a
    1,000,000-character value are 10^7, not 10^5."""
    value, meter = metered("x.s.contains(x.s + x.s)")
    assert value is False and meter.calls == 2 + 1 * 2  # the concatenation (a tenth of 12), then the test
    program = ENV.compile("lists.range(1000).all(i, !x.s.contains(x.p))").metered()
    meter = Meter(program.base, program.per_iteration, 1_000_000)
    CONTEXT.add_variable("x", {"s": "x" * 1_000_000, "p": "y" * 1000})
    with pytest.raises(Exception, match="operation cancelled: actual cost limit exceeded"), running(meter):
        program.program.execute(CONTEXT)
    assert meter.calls == 1011 + 100_000 * 100  # the range, then the first test, which is not run


def test_matches_is_priced_on_its_text_as_it_runs():
    """A regex over a dyn text was priced on the values' largest collection: 3,000 matches over a
    1,000,000-character value (5.5 s) were admitted; cel-go's 100,001 each stops the tenth."""
    value, meter = metered("x.s.matches('c.e') && matches(x.s, x.o.f) == false")
    assert value is True and meter.calls == 1 * 1 + 1 * 1
    program = ENV.compile("lists.range(3000).all(i, !x.s.matches('x+y'))").metered()
    meter = Meter(program.base, program.per_iteration, 1_000_000)
    CONTEXT.add_variable("x", {"s": "x" * 1_000_000})
    with pytest.raises(Exception, match="operation cancelled: actual cost limit exceeded"), running(meter):
        program.program.execute(CONTEXT)
    assert meter.calls == 3011 + 10 * 100_001


def test_validate_is_priced_on_the_string_it_checks():
    """It was priced on its receiver, the format (1)."""
    value, meter = metered("format.dns1123Label().validate(x.s).hasValue()")
    assert value is False and meter.calls == 1 * 32  # a tenth of 7 (the string and one), times 128 / 4


def test_a_list_built_in_each_iteration_is_charged_its_size():
    """lists.range(n) was charged 1 whatever it built: 3,000 ranges of 3,000 (9 M integers, 4 s,
    900 MB) cost 39,003 and ran. Each is charged before it is built now, and the 333rd stops it."""
    program = ENV.compile("lists.range(3000).map(x, lists.range(3000)).size() > 0").metered()
    meter = Meter(program.base, program.per_iteration, 1_000_000)
    with pytest.raises(Exception, match="operation cancelled: actual cost limit exceeded"), running(meter):
        program.program.execute(CONTEXT)
    assert meter.exceeded and meter.calls <= 1_000_000 + 3011
    assert metered("lists.range(10).map(x, lists.range(10)).size() == 10")[1].calls == 11 * 21


def test_pairwise_work_is_charged_before_it_runs():
    """sets.equivalent of two 100,000-element lists (10^10 comparisons: it ran past 40 s) and a sort
    of 100,000 elements are charged before they start, and stopped."""
    for src, charged in (("sets.equivalent(lists.range(100000), lists.range(100000))", 2 * 10**10 + 1),
                         ("lists.range(100000).sort().size() > 0", 2 * 10**10 + 11)):
        program = ENV.compile(src).metered()
        meter = Meter(program.base, program.per_iteration, 1_000_000)
        with pytest.raises(Exception, match="operation cancelled: actual cost limit exceeded"), running(meter):
            program.program.execute(CONTEXT)
        assert meter.calls >= charged, src


def test_what_rewrites_and_sortBy_run_is_charged_as_upstream_charges_it():
    """A two-variable comprehension ranges over the list's indices, which cel-go does not build:
    not charged as a lists.range. sortBy's sort is charged as cel-go charges its keys' sort."""
    assert metered("x.l.all(i, v, v > 0)")[1].calls == 0
    value, meter = metered("x.l.sortBy(i, -i) == [3, 2, 1]")
    assert value is True and meter.calls == 2 * 9 + 11


def test_operators_on_dyn_values_are_charged_on_the_values():
    """`+`, comparisons and `in` on `dyn` operands are priced on what they turn out to be, as
    cel-go's tracker prices them: 300 copies of two 1,000,000-character strings (1.1 GB, 4.4 s)
    were charged 1 each and ran."""
    value, meter = metered("x.s + x.s == 'abcdefabcdef' && x.l + x.l == [1, 2, 3, 1, 2, 3] && 2 in x.l")
    assert value is True and meter.calls == 2 + 1 + 3  # tenths of 12 and 6 characters, a 3-element list
    big = {"s": "x" * 1_000_000, "l": list(range(3000))}
    for src in ("lists.range(300).map(i, x.s + x.s).size() > 0", "lists.range(3000).all(i, x.s == x.s)",
                "lists.range(3000).all(i, !(-1 in x.l))", "x.l.map(i, x.l + x.l).size() > 0"):
        program = ENV.compile(src).metered()
        meter = Meter(program.base, program.per_iteration, 1_000_000)
        CONTEXT.add_variable("x", big)
        with pytest.raises(Exception, match="operation cancelled: actual cost limit exceeded"), running(meter):
            program.program.execute(CONTEXT)
        assert meter.calls <= 1_000_000 + 200_000, src
