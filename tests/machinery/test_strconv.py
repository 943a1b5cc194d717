"""Go's strconv.ParseInt and ParseUint in base 10: what they take, what they refuse and in which words."""

from __future__ import annotations

import pytest

from nanokube.machinery.strconv import NumError, parse_int, parse_uint


def test_ranges_signs_and_leading_zeros():
    assert [parse_int(t, 32) for t in ("0", "-0", "+7", "-2147483648", "2147483647", "000042", "-" + "0" * 5000 + "9")] \
        == [0, 0, 7, -2 ** 31, 2 ** 31 - 1, 42, -9]
    assert [parse_uint(t) for t in ("0", "18446744073709551615", "0" * 5000 + "1")] == [0, 2 ** 64 - 1, 1]
    assert parse_uint("2147483647", 31) == 2 ** 31 - 1


@pytest.mark.parametrize("parse, bits, text, said", [
    (parse_int, 32, "2147483648", 'strconv.ParseInt: parsing "2147483648": value out of range'),
    (parse_int, 32, "-2147483649", 'strconv.ParseInt: parsing "-2147483649": value out of range'),
    (parse_int, 64, "9" * 5000, f'strconv.ParseInt: parsing "{"9" * 5000}": value out of range'),  # (int() refuses it)
    (parse_int, 64, "1_0", 'strconv.ParseInt: parsing "1_0": invalid syntax'),  # (int() takes these three)
    (parse_int, 64, " 1", 'strconv.ParseInt: parsing " 1": invalid syntax'),
    (parse_int, 64, "\u0661", 'strconv.ParseInt: parsing "\u0661": invalid syntax'),
    (parse_int, 64, "+", 'strconv.ParseInt: parsing "+": invalid syntax'),
    (parse_int, 64, "4\n", 'strconv.ParseInt: parsing "4\\n": invalid syntax'),
    (parse_uint, 64, "-1", 'strconv.ParseUint: parsing "-1": invalid syntax'),
    (parse_uint, 64, "+1", 'strconv.ParseUint: parsing "+1": invalid syntax'),
    (parse_uint, 64, "", 'strconv.ParseUint: parsing "": invalid syntax'),
    (parse_uint, 31, "2147483648", 'strconv.ParseUint: parsing "2147483648": value out of range'),
])
def test_refusals_in_strconvs_words(parse, bits, text, said):
    with pytest.raises(NumError) as e:
        parse(text, bits)
    assert str(e.value) == said
