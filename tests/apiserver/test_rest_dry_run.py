"""A dry run answers the object its write would have stored, encoded as that write's answer is: kube-apiserver
encodes the same Go struct either way, so the fields come in struct order (kind, apiVersion, metadata in
ObjectMeta's order, ..., status last) whatever order the request sent them in. Checked over HTTP against the
answer of the same write made for real."""

from __future__ import annotations

from tests.served import send, served

CMS = "/api/v1/namespaces/default/configmaps"
PODS = "/api/v1/namespaces/default/pods"


def shape(v):
    """The keys of every map in `v`, in the order they were sent, without the values."""
    if isinstance(v, dict):
        return [(k, shape(x)) for k, x in v.items()]
    if isinstance(v, list):
        return [shape(x) for x in v]
    return None


def reversed_fields(v):
    """`v` with every map's keys in reverse order, as a client may send them."""
    if isinstance(v, dict):
        return {k: reversed_fields(v[k]) for k in reversed(list(v))}
    if isinstance(v, list):
        return [reversed_fields(x) for x in v]
    return v


async def test_a_dry_run_create_and_update_answer_in_the_order_a_write_does(tmp_path):
    async with served(tmp_path) as (_, api):
        cm = reversed_fields({"apiVersion": "v1", "kind": "ConfigMap",
                              "metadata": {"name": "c", "namespace": "default", "labels": {"app": "x"}},
                              "data": {"a": "1"}})
        code, dry = await send(api, "POST", f"{CMS}?dryRun=All", cm)
        assert code == 201 and "resourceVersion" not in dry["metadata"], dry
        code, made = await send(api, "POST", CMS, cm)
        assert code == 201
        assert [k for k, _ in shape(dry)] == ["kind", "apiVersion", "metadata", "data"]
        assert shape(dry["metadata"]) == [x for x in shape(made["metadata"]) if x[0] != "resourceVersion"]

        changed = reversed_fields({**made, "data": {"a": "2"}})
        code, dry = await send(api, "PUT", f"{CMS}/c?dryRun=All", changed)
        assert code == 200 and dry["data"] == {"a": "2"}, dry
        code, updated = await send(api, "PUT", f"{CMS}/c", changed)
        assert code == 200
        assert shape(dry) == shape(updated)
        assert dry["metadata"]["resourceVersion"] == made["metadata"]["resourceVersion"]

        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
               "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
        code, made = await send(api, "POST", PODS, pod)
        assert code == 201
        labelled = reversed_fields({**made, "metadata": {**made["metadata"], "labels": {"tier": "web"}}})
        code, dry = await send(api, "PUT", f"{PODS}/p?dryRun=All", labelled)
        assert code == 200 and dry["metadata"]["labels"] == {"tier": "web"}, dry
        code, updated = await send(api, "PUT", f"{PODS}/p", labelled)
        assert code == 200
        assert [k for k, _ in shape(dry)] == ["kind", "apiVersion", "metadata", "spec", "status"]
        assert shape(dry) == shape(updated)
