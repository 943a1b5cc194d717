import orjson
import pytest

from nanokube.apiserver import serializer
from nanokube.machinery import errors


@pytest.mark.parametrize("raw, found", [
    (b'{"a":1,"b":"x:y"}', []),
    (b'{"a":1,"a":2}', ['duplicate field "a"']),
    (b'{"a":{"x":1},"a":{"y":2}}', ['duplicate field "a"']),
    # an escaped ':' decodes to one the body does not show; it must not hide the repeated "a"
    (b'{"a":1,"a":2,"b":"\\u003a"}', ['duplicate field "a"']),
    (b'{"b":"\\u003a:","c":[{"d":1,"d":2}]}', ['duplicate field "c[0].d"']),
])
def test_duplicate_fields_are_found_with_or_without_the_decoded_body(raw, found):
    assert serializer.duplicates(raw, False) == found
    assert serializer.duplicates(raw, False, orjson.loads(raw)) == found


def test_a_body_deeper_than_orjson_writes_is_counted_the_slow_way():
    raw = b'{"a":' * 300 + b"1" + b"}" * 300
    assert serializer.duplicates(raw, False) == []


def test_depth_is_refused_past_the_limit_whatever_the_bracket_count():
    assert serializer.loads_json(b"[" * serializer.MAX_DEPTH + b"]" * serializer.MAX_DEPTH)
    with pytest.raises(errors.APIError):
        serializer.loads_json(b"[" * (serializer.MAX_DEPTH + 1) + b"]" * (serializer.MAX_DEPTH + 1))
    with pytest.raises(errors.APIError):
        serializer.loads_json(("[" * (serializer.MAX_DEPTH + 1) + "]" * (serializer.MAX_DEPTH + 1)))
