from fractions import Fraction

import pytest

from nanokube.scheduler.dra.cel import (
    COST_LIMIT_ERROR,
    CELError,
    DeviceInput,
    compile_selector,
    quantity_value,
    semver_value,
)

D = "gpu.example.com"
DEV = DeviceInput(D, {D: {"model": "a100", "index": 3, "fw": semver_value("1.4.0"), "ok": True}},
                  {D: {"memory": quantity_value(Fraction(80 * 2**30))}}, False)


@pytest.mark.parametrize("expr,want", [
    (f'device.driver == "{D}"', True),
    (f'device.attributes["{D}"].model == "a100"', True),
    (f'device.attributes["{D}"]["index"] > 2', True),
    (f'device.attributes["{D}"].ok', True),
    (f'device.capacity["{D}"].memory.compareTo(quantity("40Gi")) > 0', True),
    (f'device.capacity["{D}"].memory.isLessThan(quantity("40Gi"))', False),
    (f'device.capacity["{D}"].memory == quantity("80Gi")', True),
    ('quantity("2Ki").asInteger() == 2048 && quantity("1.5").isInteger() == false', True),
    ('quantity("1").add(quantity("500m")).isGreaterThan(quantity("1.2"))', True),
    (f'device.attributes["{D}"].fw.isGreaterThan(semver("1.4.0-rc.1"))', True),
    (f'device.attributes["{D}"].fw.major() == 1 && device.attributes["{D}"].fw.minor() == 4', True),
    ('isSemver("1.2.3") && !isSemver("v1.2") && isSemver("v1.2", true)', True),
    ('semver("1.10.0").isGreaterThan(semver("1.9.0"))', True),
    ('"other.example.com" in device.attributes', False),
    (f'"{D}" in device.attributes', True),
    (f'device.attributes["{D}"].model.upperAscii() == "A100"', True),
    (f'device.attributes["{D}"].model.startsWith("a")', True),
    ('device.allowMultipleAllocations', False),
])
def test_selectors(expr, want):
    assert compile_selector(expr).matches(DEV) is want


@pytest.mark.parametrize("expr,err", [
    (f'device.attributes["{D}"].missing == 1', "no such key: missing"),
    ('device.attributes["other.example.com"].x == 1', "no such key: x"),  # unknown domain reads as {}
    ("1", "must evaluate to bool or the unknown type, not int"),
    ('quantity("1.5").asInteger() == 1', "cannot convert value to integer"),
    ('quantity("bogus").sign() == 1', "quantities must match the regular expression"),
])
def test_runtime_errors(expr, err):
    with pytest.raises(CELError, match=err):
        compile_selector(expr).matches(DEV)


def test_compile_error_is_cached_and_reported():
    with pytest.raises(CELError, match="compilation failed: .*Syntax error"):
        compile_selector("device.driver ==")
    with pytest.raises(CELError, match="Syntax error"):
        compile_selector("device.driver ==")


def test_compile_once_per_expression():
    assert compile_selector("device.driver != ''") is compile_selector("device.driver != ''")


def test_cost_limit_exceeded():
    attrs = {D: {f"a{i}": "x" * 40 for i in range(200)}}
    big = DeviceInput(D, attrs, {}, False)
    expr = f'device.attributes["{D}"].all(a, device.attributes["{D}"].all(b, device.attributes["{D}"].exists(c, a + b == c)))'
    sel = compile_selector(expr)
    with pytest.raises(CELError, match=COST_LIMIT_ERROR):
        sel.matches(big)
    small = DeviceInput(D, {D: {"a": "x"}}, {}, False)
    assert sel.matches(small) is False
    assert sel.estimated_cost > compile_selector("device.driver == 'x'").estimated_cost
