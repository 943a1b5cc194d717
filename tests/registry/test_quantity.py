from fractions import Fraction

import pytest

from nanokube.machinery.quantity import (
    FORMAT_WRONG,
    NUMERIC,
    SUFFIX,
    QuantityError,
    canonical,
    format_quantity,
    nano_value,
    parse,
    parse_quantity,
)


@pytest.mark.parametrize(
    "text,value",
    [
        ("100m", Fraction(1, 10)),
        ("1", Fraction(1)),
        ("1.5Gi", Fraction(3 * 2**29)),
        ("1Ki", Fraction(1024)),
        ("2k", Fraction(2000)),
        ("1e3", Fraction(1000)),
        ("1E-3", Fraction(1, 1000)),
        ("-1.5", Fraction(-3, 2)),
        (".5", Fraction(1, 2)),
        ("1.", Fraction(1)),
        ("5n", Fraction(5, 10**9)),
        ("3u", Fraction(3, 10**6)),
        ("1E", Fraction(10**18)),
    ],
)
def test_parse_values(text, value):
    assert parse_quantity(text) == value
    assert nano_value(text) == value * 10**9 and type(nano_value(text)) is int


@pytest.mark.parametrize(
    "text,canon",
    [
        ("1000m", "1"),
        ("100m", "100m"),
        ("1.5Gi", "1536Mi"),
        ("0.5Gi", "512Mi"),
        ("2048Ki", "2Mi"),
        ("0.1Ki", "102400m"),  # below 1024, binary falls back to decimal SI
        ("1.1", "1100m"),
        ("1e3", "1e3"),
        ("1500e0", "1500"),
        ("12e6", "12e6"),
        ("1.5e-3", "1500e-6"),
        ("1E3", "1e3"),
        ("-1.5", "-1500m"),
        ("0", "0"),
        ("-0", "0"),
        ("1536Ki", "1536Ki"),
        ("1M", "1M"),
        ("1000k", "1M"),
    ],
)
def test_canonical(text, canon):
    assert canonical(text) == canon


def test_rounds_up_to_nano():
    assert parse_quantity("0.0000000001") == Fraction(1, 10**9)
    assert canonical("0.0000000001") == "1n"
    assert parse_quantity("-0.0000000001") == Fraction(-1, 10**9)


def test_binary_values_are_capped_at_int64():
    assert parse_quantity("10Ei") == 2**63 - 1


@pytest.mark.parametrize(
    "text,message",
    [
        ("abc", FORMAT_WRONG),
        ("", FORMAT_WRONG),
        ("1.2.3", FORMAT_WRONG),
        ("1 Gi", FORMAT_WRONG),
        (".", NUMERIC),
        ("1e", SUFFIX),
        ("1k5", SUFFIX),
        ("1Kim", SUFFIX),
        ("1ee3", SUFFIX),
    ],
)
def test_errors(text, message):
    with pytest.raises(QuantityError) as e:
        parse(text)
    assert str(e.value) == message


def test_error_message_is_upstreams():
    assert FORMAT_WRONG == (
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    )


def test_format_and_rounding_helpers():
    q = parse("1500m")
    assert q.ceil() == 2
    assert q.milli() == 1500
    assert format_quantity(Fraction(3 * 2**30), "BinarySI") == "3Gi"
    assert format_quantity(Fraction(1, 3), "DecimalSI") == "333333334n"
    assert str(parse("2Gi")) == "2Gi"


@pytest.mark.parametrize("text", [None, 5, ["1"]])
def test_non_strings_are_not_quantities(text):
    for fn in (parse, canonical, nano_value):
        with pytest.raises(QuantityError) as e:
            fn(text)
        assert str(e.value) == FORMAT_WRONG


def test_repeated_parses_agree_and_errors_repeat():
    assert parse("64Mi") is parse("64Mi")
    assert canonical("1000m") == canonical("1000m") == "1"
    for _ in range(2):
        with pytest.raises(QuantityError):
            parse("1Kim")


@pytest.mark.parametrize("text", ["1e9999999999", "1e2147483648", "1e-2147483648", "1e" + "9" * 100000])
def test_exponents_beyond_int32_are_suffix_errors(text):
    """Upstream rejects exponents outside [-MaxInt32, MaxInt32] in interpret()."""
    with pytest.raises(QuantityError) as e:
        parse(text)
    assert str(e.value) == SUFFIX


@pytest.mark.parametrize(
    "text,canon",
    [
        ("1e100000", "10e99999"),
        ("1e2147483647", "10e2147483646"),
        ("1000e2147483647", "10000e2147483646"),  # the exponent stays within int32
        ("-1e100000", "-10e99999"),
        ("1e-2147483647", "1e-9"),
        ("0e-2147483647", "0"),
        ("1" + "0" * 5000, "100e4998"),
        ("0." + "0" * 5000 + "1", "1n"),
    ],
)
def test_extreme_but_valid_quantities_cost_memory_linear_in_their_text(text, canon):
    """The value is kept as digits and a power of ten until it is small enough to be a number. Building
    10^exponent instead held 186 KB at its peak for 1e100000 (5 s of CPU) and never finished for
    1e2147483647; the peak is measured (tracemalloc), not timed."""
    import tracemalloc

    from nanokube.machinery import quantity

    quantity._canonical.cache_clear()
    quantity._parse.cache_clear()  # parsed here, not remembered from an earlier test
    tracemalloc.start()
    try:
        assert canonical(text) == canon
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * len(text) + 8192, peak


def test_huge_values_compare_above_any_capacity():
    assert parse_quantity("1e100000") > parse_quantity("1e999") > 2**63
    assert parse_quantity("1" + "0" * 2000 + "Ki") == 2**63 - 1
    assert parse_quantity("1." + "3" * 5000 + "Ki") == Fraction(1365333333334, 10**9)


@pytest.mark.parametrize("text", ["1\n", "1Gi\n", "\n1"])
def test_a_trailing_newline_is_not_a_quantity(text):
    with pytest.raises(QuantityError) as e:
        parse(text)
    assert str(e.value) == FORMAT_WRONG


@pytest.mark.parametrize("text", ["1.0000000001", "0.1Ki", "-1n", "1e100000", "1" + "0" * 2000 + "Ki", "1.3333333333Mi"])
def test_nano_values_are_the_exact_values_in_billionths(text):
    """Every parsed value is a whole number of billionths (rounded up, capped or saturated)."""
    assert nano_value(text) == parse_quantity(text) * 10**9


@pytest.mark.parametrize("text,message", [(".", NUMERIC), ("1.2.3", FORMAT_WRONG), ("1e", SUFFIX)])
def test_nano_value_errors_are_parse_errors(text, message):
    with pytest.raises(QuantityError) as e:
        nano_value(text)
    assert str(e.value) == message
