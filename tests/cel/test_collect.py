"""map and filter build their lists through `collect` past a few elements (the engine's own are
quadratic in the list they build): the same values as the engine's, in linear time."""

import pytest

from nanokube.cel import CELError, Environment, collect
from nanokube.cel.types import DYN

ENV = Environment({"x": DYN})
N = collect.NATIVE_UP_TO + 40


def run(src: str, x: dict):
    return ENV.compile(src).evaluate({"x": x})


@pytest.mark.parametrize("n", [3, N])
def test_map_and_filter_answer_what_the_engine_does(n):
    x = {"l": list(range(n)), "m": {f"k{i}": i for i in range(n)}, "n": [list(range(n))] * n}
    assert run("x.l.map(i, i * 2)", x) == [i * 2 for i in range(n)]
    assert run("x.l.filter(i, i % 2 == 0)", x) == [i for i in range(n) if i % 2 == 0]
    assert run("x.l.map(i, i > 1, i * 10)", x) == [i * 10 for i in range(n) if i > 1]
    assert sorted(run("x.m.map(k, k)", x)) == sorted(x["m"])
    assert sorted(run("x.m.filter(k, x.m[k] > 1)", x)) == sorted(k for k, v in x["m"].items() if v > 1)
    assert run("x.n.map(l, l.filter(i, i > 0).map(i, i - 1))", x) == [list(range(n - 1))] * n
    assert run("x.l.transformList(i, v, v % 3 == 0, i + v)", x) == [2 * i for i in range(n) if i % 3 == 0]
    assert run("x.l.sortBy(i, -i)", x) == list(range(n - 1, -1, -1))
    assert run("x.l.map(i, {'v': i}).map(o, o.v) == x.l", x) is True


def test_a_long_list_is_built_by_collect_and_a_short_one_by_the_engine():
    """The printed form tests the size: the engine's own map up to NATIVE_UP_TO elements (quicker
    on a few), collect past it; a body holding a map of its own is not printed twice."""
    source = ENV.compile("x.l.map(i, i + 1)").program.source
    assert f"<= {collect.NATIVE_UP_TO} ?" in source and collect.PUSH in source
    nested = ENV.compile("x.n.map(l, l.map(i, i + 1))").program.source
    assert nested.count(collect.BEGIN) == 2 and nested.count("l.map(i") == 1


def test_an_error_inside_a_long_map_fails_it_and_leaves_nothing_open():
    x = {"l": list(range(N))}
    with pytest.raises(CELError, match="division by zero"):
        run("x.l.map(i, 10 / (i - 50))", x)
    assert run("x.l.map(i, 10 / (i - 50)).size() > 0 || true", x) is True
    assert run("x.l.map(i, i).size()", x) == N
    assert collect._stack() == []


def test_an_evaluation_drops_only_the_lists_it_opened():
    """An evaluation started while another's list is open (a function of ours evaluating CEL
    inside a map) leaves that list as it was, whether it fails or not."""
    outer = collect.RUNTIME[collect.BEGIN]()
    collect.RUNTIME[collect.PUSH](outer, "kept")
    x = {"l": list(range(N))}
    with pytest.raises(CELError):
        run("x.l.map(i, 10 / (i - 50))", x)
    assert run("x.l.map(i, i).size()", x) == N
    assert collect.RUNTIME[collect.COLLECT](outer, True) == ["kept"]
    assert collect._stack() == []
