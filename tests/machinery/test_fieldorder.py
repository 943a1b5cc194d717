import itertools

import orjson

from nanokube.machinery.fieldorder import in_upstream_order


def _reordered(obj: dict, rv: str) -> dict:
    """The order every object is served in, built afresh (the function's general path)."""
    md = obj.get("metadata") or {}
    order = ("name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
             "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels", "annotations",
             "ownerReferences", "finalizers", "managedFields")
    meta = {k: ({**md, "resourceVersion": rv})[k] for k in order if k in md or k == "resourceVersion"}
    meta.update((k, v) for k, v in md.items() if k not in order)
    out = {k: obj[k] for k in ("kind", "apiVersion") if k in obj}
    out["metadata"] = meta
    out.update((k, v) for k, v in obj.items() if k not in ("kind", "apiVersion", "metadata", "status"))
    if "status" in obj:
        out["status"] = obj["status"]
    return out


def test_every_order_of_the_top_level_comes_out_in_upstreams():
    fields = {"kind": "Event", "apiVersion": "v1", "metadata": {"uid": "u", "name": "e", "zz": 1}, "reason": "R",
              "status": {}, "note": "n"}
    for n in range(1, len(fields) + 1):
        for keys in itertools.permutations(fields, n):
            obj = {k: fields[k] for k in keys}
            got = in_upstream_order(dict(obj), "7")
            assert orjson.dumps(got) == orjson.dumps(_reordered(obj, "7")), keys


def test_every_order_of_the_metadata_comes_out_in_upstreams_each_time():
    """The metadata's order is remembered by its fields' order: a second object of the same
    fields and order (resourceVersion there or not) gets the same, fresh values."""
    fields = {"name": "p", "resourceVersion": "3", "uid": "u", "labels": {"a": "b"}, "zz": 1,
              "managedFields": [], "aa": 2}
    for n in range(1, len(fields) + 1):
        for keys in itertools.permutations(fields, n):
            for round_ in range(2):
                md = {k: (fields[k], round_) for k in keys}
                obj = {"kind": "Pod", "apiVersion": "v1", "metadata": md, "spec": {}}
                got = in_upstream_order(dict(obj), "7")
                assert orjson.dumps(got) == orjson.dumps(_reordered(obj, "7")), keys
                assert got["metadata"] is not md and md == {k: (fields[k], round_) for k in keys}
