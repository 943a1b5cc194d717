import pytest

from nanokube.machinery.shape import signature

EVENT = {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "p.1", "namespace": "q"},
         "eventTime": "2026-12-03T10:00:00.000001Z", "series": None, "count": 1,
         "regarding": {"kind": "Pod", "name": "p", "uid": "u"}, "tags": ["a", 1]}


def _with(path, value):
    """EVENT with the value at `path` (keys) replaced, or removed when value is ...; the same order otherwise."""
    def at(d, keys):
        out = dict(d)
        if len(keys) == 1:
            if value is ...:
                del out[keys[0]]
            else:
                out[keys[0]] = value
        else:
            out[keys[0]] = at(d[keys[0]], keys[1:])
        return out
    return at(EVENT, path)


def test_maps_differing_only_in_scalar_values_of_the_same_types_share_a_signature():
    other = _with(("metadata", "name"), "p.2")
    other = {**other, "eventTime": "2027-01-01T00:00:00Z", "count": 7, "regarding": {**EVENT["regarding"], "uid": "v"}}
    assert signature(other) == signature(EVENT)
    assert hash(signature(other)) == hash(signature(EVENT))


@pytest.mark.parametrize("changed", [
    _with(("count",), "1"),                      # a number becomes a string
    _with(("count",), True),                     # ... a bool (an int in Python's eyes, not here)
    _with(("count",), 1.0),                      # ... a float
    _with(("series",), "x"),                     # a null becomes a string
    _with(("series",), {}),                      # ... a map
    _with(("regarding", "name"), None),          # a nested string becomes null
    _with(("regarding", "name"), ...),           # a nested field goes
    _with(("regarding", "fieldPath"), ""),       # ... or comes
    _with(("tags",), ["a", 2]),                  # a list's contents differ
    _with(("tags",), ["a", 1.0]),                # ... by type only
    _with(("tags",), [{"a": 1}]),                # ... by what it holds
    {k: EVENT[k] for k in reversed(EVENT)},      # the same fields in another order
    _with(("metadata",), {"namespace": "q", "name": "p.1"}),  # ... a nested map's
])
def test_maps_of_another_shape_have_another_signature(changed):
    assert signature(changed) != signature(EVENT)


@pytest.mark.parametrize("value", [("a",), {"a"}, b"a", object(), [2**70], {"x": [1, object()]}])
def test_a_value_that_is_not_json_has_no_signature(value):
    assert signature({"a": {"b": value}}) is None
