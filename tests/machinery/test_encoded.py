from collections import OrderedDict

import orjson

from nanokube.apiserver import cache
from nanokube.apiserver.cache import stored_json, stored_value
from nanokube.machinery import encoded
from nanokube.machinery.fieldorder import in_upstream_order


def test_a_remembered_json_is_found_by_identity_only():
    v = {"f:status": {".": {}}}
    assert encoded.known(v) is None and encoded.known_fragment(v) is None
    encoded.fragment(v)
    assert encoded.known(v) == orjson.dumps(v)
    assert encoded.known({"f:status": {".": {}}}) is None  # equal, but another object


def test_stored_bytes_with_remembered_parts_are_the_object_s_own():
    # a FieldsV1 big enough to be put in as its JSON (cache._FRAMED_LEAST), and a small one
    fields = {"f:metadata": {"f:labels": {".": {}, **{f"f:label-{i:03d}": {} for i in range(40)}}}}
    small = {"f:spec": {"f:replicas": {}}}
    entries = [{"manager": "m", "operation": "Update", "apiVersion": "v1", "time": "2026-12-03T08:00:00Z",
                "fieldsType": "FieldsV1", "fieldsV1": fields},
               {"manager": "n", "operation": "Update", "apiVersion": "v1", "time": "2026-12-03T08:00:00Z",
                "fieldsType": "FieldsV1", "fieldsV1": small}]
    status = {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False"}]}
    pod = {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "p", "labels": {"app": "a"},
                                                           "managedFields": entries},
           "spec": {"containers": [{"name": "c"}]}, "status": status}
    plain = stored_value(in_upstream_order(dict(pod), ""))
    assert stored_json(pod)[0] == plain  # the FieldsV1 object is remembered now
    assert encoded.known(fields) == orjson.dumps(fields) and encoded.known(small) == orjson.dumps(small)
    assert len(encoded.known(fields)) >= cache._FRAMED_LEAST > len(encoded.known(small))
    encoded.fragment(status)
    encoded.fragment(entries)
    assert stored_json(pod)[0] == plain
    # a changed copy is not served the remembered JSON of what it was copied from
    other = {**pod, "status": {**status, "phase": "Running"}}
    assert b'"phase":"Running"' in stored_json(other)[0]


def test_the_remembered_json_stays_within_its_bounds(monkeypatch):
    monkeypatch.setattr(encoded, "_KNOWN", OrderedDict())
    monkeypatch.setattr(encoded, "_size", 0)
    monkeypatch.setattr(encoded, "_SIZE_MAX", 1600)
    values = [{"v": "x" * 90} for _ in range(40)]  # 100 bytes of JSON each
    for v in values:
        encoded.fragment(v)
    assert encoded._size <= 1600 and len(encoded._KNOWN) == 16
    assert encoded.known(values[-1]) is not None and encoded.known(values[0]) is None  # the oldest went
    big = {"v": "x" * 200}  # more than a sixteenth of the bound: encoded, not kept
    assert orjson.dumps({"a": encoded.fragment(big)}) == orjson.dumps({"a": big}) and encoded.known(big) is None
    encoded.alias(values[-1], same := {"v": "x" * 90})
    assert encoded.known(same) == encoded.known(values[-1])
