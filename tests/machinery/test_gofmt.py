"""machinery.gofmt: Go's %q, %v of a float64 and json.Marshal, as field.Error prints bad values."""

import pytest

from nanokube.machinery.gofmt import Struct, format_float, marshal, quote


@pytest.mark.parametrize(("text", "quoted"), [
    ("plain-ascii text", '"plain-ascii text"'),
    ('a"b\\c', '"a\\"b\\\\c"'),
    ("\a\b\f\n\r\t\v", '"\\a\\b\\f\\n\\r\\t\\v"'),
    ("\x01\x1f\x7f", '"\\x01\\x1f\\x7f"'),
    ("é漢字😀", '"é漢字😀"'),  # printable runes stay as they are
    ("\u00a0\u00ad\u200b\u2028", '"\\u00a0\\u00ad\\u200b\\u2028"'),  # spaces and format runes are escaped
    ("\U000e0001", '"\\U000e0001"'),
])
def test_quote_is_strconv_quote(text, quoted):
    assert quote(text) == quoted


@pytest.mark.parametrize(("value", "printed"), [
    (1.0, "1"), (1.5, "1.5"), (-2.25, "-2.25"), (100.0, "100"), (999999.0, "999999"),
    (1e6, "1e+06"), (1234567.0, "1.234567e+06"), (0.0001, "0.0001"), (0.00001, "1e-05"),
    (1e21, "1e+21"), (0.1, "0.1"), (0.0, "0"), (-0.0, "-0"),
])
def test_format_float_is_percent_v(value, printed):
    assert format_float(value) == printed


@pytest.mark.parametrize(("value", "printed"), [
    (1.0, "1"), (1e6, "1000000"), (1e20, "100000000000000000000"), (1e21, "1e+21"),
    (0.000001, "0.000001"), (1e-7, "1e-7"), (2.5e-10, "2.5e-10"),
])
def test_marshal_floats_as_encoding_json(value, printed):
    assert marshal(value) == printed


def test_marshal_sorts_maps_keeps_structs_and_escapes_html():
    assert marshal({"b": 1, "a": [True, None, "x<y>&z"], "c": {"z": 1, "y": 2}}) == \
        '{"a":[true,null,"x\\u003cy\\u003e\\u0026z"],"b":1,"c":{"y":2,"z":1}}'
    assert marshal([Struct(type="Ready", status="True")]) == '[{"type":"Ready","status":"True"}]'
    assert marshal("line\u2028sep\n\x01") == '"line\\u2028sep\\n\\u0001"'
    assert marshal([]) == "[]" and marshal({}) == "{}"
