import pytest

from nanokube.machinery import goduration


def test_go_durations():
    assert goduration.parse("8760h") == 8760 * 3600
    assert goduration.parse("1h30m") == 5400
    assert goduration.parse("1.5s") == 1.5
    assert goduration.parse("-2m") == -120
    assert goduration.parse("0") == 0
    assert goduration.parse("2562047h47m16s") == 2562047 * 3600 + 47 * 60 + 16  # (time.Duration's largest hours)
    for bad, why in (("1y", 'unknown unit "y" in duration "1y"'), ("", 'invalid duration ""'),
                     (".s", 'invalid duration ".s"'), ("1..5s", 'missing unit in duration "1..5s"'),
                     ("a year", 'invalid duration "a year"'), ("2562048h", 'invalid duration "2562048h"'),
                     ("99999999999h", 'invalid duration "99999999999h"')):
        with pytest.raises(ValueError) as e:
            goduration.parse(bad)
        assert str(e.value) == f"time: {why}"
    with pytest.raises(ValueError) as e:
        goduration.parse("10", "--cluster-signing-duration")
    assert str(e.value) == 'invalid argument "10" for "--cluster-signing-duration" flag: time: missing unit in duration "10"'


def test_durations_print_as_go_prints_them():
    assert goduration.string(0) == "0s"
    assert goduration.string(1_500_000) == "1.5ms"
    assert goduration.string(90 * 60 * 10**9) == "1h30m0s"
    assert goduration.string(61_500_000_000) == "1m1.5s"
    assert goduration.string(-2_000) == "-2µs"
