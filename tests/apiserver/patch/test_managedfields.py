"""FieldsV1 encoding and managedFields bookkeeping for non-apply writes."""

import copy

import orjson
import pytest

from nanokube import schema
from nanokube.apiserver.patch import fieldpath as fp
from nanokube.apiserver.patch.apply import apply, create_managed_fields, update_managed_fields

DEPLOYMENT = schema.kind_schema("apps", "v1", "Deployment")
CONFIGMAP = schema.kind_schema("", "v1", "ConfigMap")
T0, T1, T2 = "2024-05-01T10:00:00Z", "2024-05-01T10:01:00Z", "2024-05-01T10:02:00Z"


def configmap(**data):
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "test-cm",
            "namespace": "default",
            "labels": {"test-label": "test"},
        },
        "data": data,
    }


def update(old, new, manager, now, schema=CONFIGMAP, api_version="v1", **kw):
    return update_managed_fields(
        old, new, manager, "Update", schema, now, api_version, **kw
    )


def test_fieldsv1_roundtrip_sorts_like_upstream():
    raw = {
        "f:spec": {
            "f:ports": {
                'k:{"protocol":"TCP","port":80}': {".": {}, "f:port": {}},
                ".": {},
            },
            "f:finalizers": {'v:"b"': {}, 'v:"a"': {}},
        },
        "f:metadata": {"f:labels": {"f:z": {}, ".": {}, "f:a": {}}},
    }
    paths = fp.from_fields_v1(raw)
    assert fp.make_path("spec", "ports") in paths and fp.make_path("spec") not in paths
    assert orjson.dumps(fp.to_fields_v1(paths)) == (
        b'{"f:metadata":{"f:labels":{".":{},"f:a":{},"f:z":{}}},'
        b'"f:spec":{"f:finalizers":{"v:\\"a\\"":{},"v:\\"b\\"":{}},'
        b'"f:ports":{".":{},"k:{\\"port\\":80,\\"protocol\\":\\"TCP\\"}":{".":{},"f:port":{}}}}}'
    )
    assert fp.to_fields_v1(set()) == {}


def test_field_sets_and_their_fieldsv1_objects_are_shared_between_writes():
    """Equal sets encode to one FieldsV1 object (it goes into stored objects, never changed),
    whose decoding is the set again; from_fields_v1 hands out a copy of its own."""
    paths = {fp.make_path("spec", "a"), fp.make_path("spec", "b")}
    obj = fp.to_fields_v1(set(paths))
    assert fp.to_fields_v1(set(paths)) is obj
    assert fp.decode_fields_v1(obj) == (paths, True)
    equal = orjson.loads(orjson.dumps(obj))
    assert fp.decode_fields_v1(equal) == (paths, True)
    mine = fp.from_fields_v1(obj)
    mine.add(fp.make_path("spec", "c"))
    assert fp.decode_fields_v1(obj)[0] == paths and fp.from_fields_v1(obj) == paths


def test_element_order_and_path_strings():
    elements = [
        fp.index(0),
        fp.value("x"),
        fp.key({"name": "b"}),
        fp.key({"a": 1, "b": 2}),
        fp.field("z"),
    ]
    assert sorted(elements, key=fp.element_order) == [
        fp.field("z"),
        fp.key({"name": "b"}),
        fp.key({"a": 1, "b": 2}),
        fp.value("x"),
        fp.index(0),
    ]
    path = fp.make_path("spec", "ports") + (
        fp.key({"protocol": "TCP", "port": 80}),
        fp.field("name"),
    )
    assert fp.path_string(path) == '.spec.ports[port=80,protocol="TCP"].name'
    assert (
        fp.path_string(fp.make_path("metadata", "finalizers") + (fp.value("a/b"),))
        == '.metadata.finalizers[="a/b"]'
    )
    with pytest.raises(ValueError):
        fp.from_fields_v1({"x:y": {}})


def test_create_configmap_records_map_nodes():
    obj = update(None, configmap(key="some value"), "kubectl-create", T0)
    assert obj["metadata"]["managedFields"] == [
        {
            "manager": "kubectl-create",
            "operation": "Update",
            "apiVersion": "v1",
            "time": T0,
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:data": {".": {}, "f:key": {}},
                "f:metadata": {"f:labels": {".": {}, "f:test-label": {}}},
            },
        }
    ]


def test_create_deployment_matches_kube_apiserver():
    d = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "nginx",
            "namespace": "default",
            "labels": {"app": "nginx"},
            "uid": "u1",
            "generation": 1,
        },
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "nginx"}},
            "template": {
                "metadata": {"labels": {"app": "nginx"}},
                "spec": {
                    "containers": [
                        {
                            "name": "nginx",
                            "image": "nginx",
                            "resources": {},
                            "ports": [{"containerPort": 80, "protocol": "TCP"}],
                        }
                    ]
                },
            },
        },
        "status": {},
    }
    obj = update(
        None, d, "kubectl-create", T0, DEPLOYMENT, "apps/v1", ignore_status=True
    )
    # Struct fields the Go zero value already holds (spec, template, the
    # required containers list) are not owned as nodes; maps and list items are.
    assert orjson.dumps(obj["metadata"]["managedFields"][0]["fieldsV1"]) == (
        b'{"f:metadata":{"f:labels":{".":{},"f:app":{}}},"f:spec":{"f:replicas":{},"f:selector":{},'
        b'"f:template":{"f:metadata":{"f:labels":{".":{},"f:app":{}}},"f:spec":{"f:containers":'
        b'{"k:{\\"name\\":\\"nginx\\"}":{".":{},"f:image":{},"f:name":{},"f:ports":{".":{},'
        b'"k:{\\"containerPort\\":80,\\"protocol\\":\\"TCP\\"}":{".":{},"f:containerPort":{},"f:protocol":{}}},'
        b'"f:resources":{}}}}}}}'
    )


def test_update_takes_changed_fields_and_drops_emptied_managers():
    live = update(None, configmap(key="v1"), "creator", T0)
    changed = copy.deepcopy(live)
    changed["data"]["key"] = "v2"
    changed["metadata"]["labels"]["test-label"] = "other"
    obj = update(live, changed, "editor", T1)
    creator, editor = obj["metadata"]["managedFields"]
    # Only the changed leaves moved; the creator keeps the map nodes it added.
    assert (
        creator["fieldsV1"] == {"f:data": {}, "f:metadata": {"f:labels": {}}}
        and creator["time"] == T0
    )
    assert editor["fieldsV1"] == {
        "f:data": {"f:key": {}},
        "f:metadata": {"f:labels": {"f:test-label": {}}},
    }
    again = copy.deepcopy(obj)
    again["data"]["key"] = "v3"
    again["metadata"]["labels"]["test-label"] = "third"
    final = update(obj, again, "finisher", T2)
    assert [e["manager"] for e in final["metadata"]["managedFields"]] == [
        "creator",
        "finisher",
    ]


def test_unchanged_write_keeps_entries_and_times():
    live = update(None, configmap(key="v"), "creator", T0)
    again = update(live, copy.deepcopy(live), "someone", T1)
    assert again["metadata"]["managedFields"] == live["metadata"]["managedFields"]


def test_removed_fields_leave_every_manager():
    live = update(None, configmap(a="1", b="2"), "creator", T0)
    new = copy.deepcopy(live)
    del new["data"]["a"]
    obj = update(live, new, "editor", T1)
    assert [e["manager"] for e in obj["metadata"]["managedFields"]] == ["creator"]
    assert "f:a" not in obj["metadata"]["managedFields"][0]["fieldsV1"]["f:data"]


def test_status_subresource_write_is_recorded_separately():
    live = update(
        None,
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "d"},
            "spec": {"replicas": 1},
        },
        "kubectl",
        T0,
        DEPLOYMENT,
        "apps/v1",
        ignore_status=True,
    )
    new = copy.deepcopy(live)
    new["status"] = {"replicas": 1, "readyReplicas": 1}
    obj = update(
        live,
        new,
        "kube-controller-manager",
        T1,
        DEPLOYMENT,
        "apps/v1",
        subresource="status",
        ignore_status=True,
    )
    status = obj["metadata"]["managedFields"][1]
    assert (
        status["subresource"] == "status"
        and status["manager"] == "kube-controller-manager"
    )
    assert status["fieldsV1"] == {
        "f:status": {".": {}, "f:readyReplicas": {}, "f:replicas": {}}
    }
    # A main-resource write does not own status.
    main = update(live, new, "sneaky", T1, DEPLOYMENT, "apps/v1", ignore_status=True)
    assert [e["manager"] for e in main["metadata"]["managedFields"]] == ["kubectl"]


def test_entries_sorted_apply_first_then_by_time_and_manager():
    live = apply(None, configmap(a="1"), "zeta-applier", False, CONFIGMAP, T2, "v1")
    for manager, key, now in (
        ("late", "c", T2),
        ("early", "b", T0),
        ("alpha", "d", T2),
    ):
        new = copy.deepcopy(live)
        new["data"][key] = "x"
        live = update(live, new, manager, now)
    assert [
        (e["operation"], e["manager"]) for e in live["metadata"]["managedFields"]
    ] == [
        ("Apply", "zeta-applier"),
        ("Update", "early"),
        ("Update", "alpha"),
        ("Update", "late"),
    ]


def test_client_sent_managed_fields():
    """As upstream's decodeLiveOrNew: an empty list or a single empty entry resets them
    (TestResetManagedFieldsEmptyList), entries its DecodeManagedFields refuses stand for the stored ones."""
    live = update(None, configmap(key="v"), "creator", T0)
    stored = live["metadata"]["managedFields"]

    for reset in ([], [{}], [None], [{"manager": "", "fieldsV1": None}]):
        cleared = copy.deepcopy(live)
        cleared["metadata"]["managedFields"] = reset
        assert "managedFields" not in update(live, cleared, "x", T1)["metadata"], reset

    entry = {"manager": "importer", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:data": {"f:key": {}}}}
    for bad in ({"operation": "Bogus"}, {"operation": ""}, {"apiVersion": ""}, {"fieldsType": ""},
                {"fieldsType": "FieldsV2"}, {"fieldsV1": {"x:key": {}}}):
        refused = copy.deepcopy(live)
        refused["metadata"]["managedFields"] = [{**entry, **bad}]
        assert update(live, refused, "x", T1)["metadata"]["managedFields"] == stored, bad
        created = update(None, {**configmap(key="v"), "metadata": {**configmap(key="v")["metadata"],
                                                                     "managedFields": [{**entry, **bad}]}}, "creator", T0)
        assert [e["manager"] for e in created["metadata"]["managedFields"]] == ["creator"], bad

    replaced = copy.deepcopy(live)
    replaced["metadata"]["managedFields"] = [
        {
            "manager": "importer",
            "operation": "Update",
            "apiVersion": "v1",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:data": {"f:key": {}}},
        }
    ]
    assert [
        e["manager"]
        for e in update(live, replaced, "x", T1)["metadata"]["managedFields"]
    ] == ["importer"]


def test_untyped_update_owns_deduced_map_entries():
    cr = {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w", "labels": {"a": "b"}},
        "spec": {"size": 1, "nested": {"x": True}},
    }
    obj = update(None, cr, "ctrl", T0, None, "example.com/v1")
    assert obj["metadata"]["managedFields"][0]["fieldsV1"] == {
        "f:metadata": {"f:labels": {".": {}, "f:a": {}}},
        "f:spec": {".": {}, "f:nested": {".": {}, "f:x": {}}, "f:size": {}},
    }


def test_fieldsv1_orders_mixed_elements_by_kind_then_value():
    paths = {(fp.value(2),), (fp.field("b"),), (fp.key({"n": "x"}),), (fp.field("a"),), (fp.index(1),)}
    assert list(fp.to_fields_v1(paths)) == ["f:a", "f:b", 'k:{"n":"x"}', "v:2", "i:1"]


def test_without_prefixes_drops_paths_at_or_below_any_prefix():
    spec, status = fp.make_path("spec"), fp.make_path("status")
    deep = fp.make_path("metadata", "labels", "a")
    paths = {spec, spec + (fp.field("x"),), status, deep, fp.make_path("metadata", "name")}
    assert fp.without_prefixes(paths, {spec, fp.make_path("metadata", "labels")}) == {status, fp.make_path("metadata", "name")}
    assert fp.without_prefixes(paths, set()) == paths
    assert fp.without_prefixes(paths, {deep + (fp.field("b"),)}) == paths


def test_list_map_keys_keep_their_json_types():
    assert fp.key({"port": 80, "protocol": "TCP"}) == ("k", '{"port":80,"protocol":"TCP"}')
    assert fp.key({"protocol": "TCP", "port": 80}) == fp.key({"port": 80, "protocol": "TCP"})
    assert fp.key({"port": True}) == ("k", '{"port":true}')
    assert fp.key({"port": 1}) == ("k", '{"port":1}')
    assert fp.key({"port": 1.5}) == ("k", '{"port":1.5}')
    assert fp.key({"name": "<a>"}) == ("k", '{"name":"\\u003ca\\u003e"}')


def test_creates_of_one_shape_share_their_field_set_but_not_their_time():
    first = update(None, configmap(a="1"), "kubectl", T0)
    other = configmap(a="2")
    other["metadata"]["name"] = "second"
    second = update(None, other, "kubectl", T1)
    (e1,), (e2,) = first["metadata"]["managedFields"], second["metadata"]["managedFields"]
    assert e1["fieldsV1"] == e2["fieldsV1"] and (e1["time"], e2["time"]) == (T0, T1)
    assert e1 is not e2 and e1["fieldsV1"] is e2["fieldsV1"], "one FieldsV1 object, an entry each"
    assert second["metadata"]["name"] == "second" and second["data"] == {"a": "2"}
    assert "managedFields" not in other["metadata"], "the caller's object is not changed"

    third = update(None, configmap(b="1"), "kubectl", T2)
    assert "f:b" in third["metadata"]["managedFields"][0]["fieldsV1"]["f:data"]
    assert "f:a" not in third["metadata"]["managedFields"][0]["fieldsV1"]["f:data"]
    by_other = update(None, configmap(a="1"), "helm", T2)["metadata"]["managedFields"][0]
    assert by_other["manager"] == "helm"


POD = schema.kind_schema("", "v1", "Pod")


def pod(name, container, image, port, env=("LOG", "info"), args=("--v=2",), **spec):
    c = {"name": container, "image": image, "ports": [{"containerPort": port}], "env": [{"name": env[0], "value": env[1]}],
         "args": list(args)}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default", "labels": {"app": name}},
            "spec": {"containers": [c], "priority": 0, "enableServiceLinks": True, "nodeName": "", **spec}}


SAME_SHAPE = [
    pod("b", "app", "nginx:2", 80),                   # scalars differ
    pod("e", "app", "nginx:1", 80, env=("LOG", "debug")),  # a scalar inside a list-map item differs
    pod("f", "app", "nginx:1", 80, args=("--v=4", "-x")),  # an atomic list's items differ
]
OTHER_SHAPE = [
    pod("c", "sidecar", "nginx:1", 80),               # list-map key differs
    pod("d", "app", "nginx:1", 8080),                 # list-map key inside a nested list differs
    pod("g", "app", "nginx:1", 80, env=("LEVEL", "info")),  # list-map key of env differs
    pod("h", "app", "nginx:1", 80, args=()),          # an atomic list becomes empty
    pod("i", "app", "nginx:1", 80, imagePullSecrets=[]),   # an empty list where there was none
    pod("j", "app", "nginx:1", 80, tolerations=[{"key": "a", "operator": "Exists"}]),  # an atomic list appears
    pod("k", "app", "nginx:1", 80, priority=5),       # a scalar's zero becomes a value
    pod("l", "app", "nginx:1", 80, nodeSelector={"zone": ""}),  # a map of an empty value appears
]


@pytest.mark.parametrize("variant", SAME_SHAPE + OTHER_SHAPE)
def test_creates_sharing_a_cached_field_set_get_what_they_would_compute_alone(variant):
    from nanokube.apiserver.patch import apply as apply_mod

    apply_mod._CREATES.clear()
    alone = update(None, variant, "kubelet", T0, schema=POD)["metadata"]["managedFields"]
    apply_mod._CREATES.clear()
    update(None, pod("a", "app", "nginx:1", 80), "kubelet", T0, schema=POD)
    assert update(None, variant, "kubelet", T0, schema=POD)["metadata"]["managedFields"] == alone
    # a miss of the plain shape adds it; a miss of the schema-aware one too
    assert len(apply_mod._CREATES) == (3 if variant in SAME_SHAPE else 4)


@pytest.mark.parametrize("variant", SAME_SHAPE + OTHER_SHAPE)
def test_a_create_remembered_by_shape_gets_what_update_managed_fields_records(variant):
    from nanokube.apiserver.patch import apply as apply_mod

    apply_mod._CREATES.clear()
    alone = update(None, variant, "kubelet", T0, schema=POD)["metadata"]["managedFields"]
    sent = copy.deepcopy(variant)
    for warm in (False, True):  # the first computes them (the memo cleared), the second remembers them
        apply_mod._CREATES.clear()
        create_managed_fields(pod("a", "app", "nginx:1", 80), "kubelet", POD, T0, "v1")
        if warm:
            create_managed_fields(copy.deepcopy(variant), "kubelet", POD, T2, "v1")
        got = create_managed_fields(variant, "kubelet", POD, T1, "v1")
        assert got == [{**e, "time": T1} for e in alone]
        assert variant == sent, "the created object is left alone"
    again = create_managed_fields(variant, "kubelet", POD, T2, "v1")
    assert again[0] is not got[0] and again[0]["fieldsV1"] is got[0]["fieldsV1"], "an entry each, one FieldsV1"


def test_creates_whose_signatures_never_repeat_are_remembered_by_their_schema_aware_shape():
    from nanokube.apiserver.patch import apply as apply_mod

    apply_mod._CREATES.clear()
    apply_mod._PLAIN_MISSES.clear()
    apply_mod._TYPED_MISSES.clear()
    alone = update(None, pod("a", "app", "nginx:0", 80), "kubelet", T0, schema=POD)["metadata"]["managedFields"]
    apply_mod._CREATES.clear()
    n = 3 * apply_mod._PLAIN_TRIES
    for i in range(n):  # each image new: the plain signature never hits again
        got = create_managed_fields(pod("a", "app", f"nginx:{i}", 80), "kubelet", POD, T1, "v1")
        assert got == [{**e, "time": T1} for e in alone]
    plain = [k for k in apply_mod._CREATES if not (type(k[-1]) is bytes and k[-1].startswith(b"typed:"))]
    assert apply_mod._PLAIN_TRIES <= len(plain) < n, "signatures taken until they kept missing, then once in a while"
    again = pod("a", "app", "nginx:0", 80)
    for _ in range(apply_mod._PLAIN_TRIES):  # one repeated create: its signature is tried again, and hits
        assert create_managed_fields(copy.deepcopy(again), "kubelet", POD, T2, "v1") == [{**e, "time": T2} for e in alone]
    assert apply_mod._PLAIN_MISSES[next(iter(apply_mod._PLAIN_MISSES))] < apply_mod._PLAIN_TRIES


def test_a_create_sending_managed_fields_or_another_manager_is_not_given_remembered_ones():
    created = configmap(a="1")
    assert create_managed_fields(created, "kubectl", CONFIGMAP, T0, "v1")[0]["manager"] == "kubectl"
    assert create_managed_fields(created, "helm", CONFIGMAP, T0, "v1")[0]["manager"] == "helm"
    assert create_managed_fields(created, "helm", CONFIGMAP, T0, "v2")[0]["apiVersion"] == "v2"
    sent = {**created, "metadata": {**created["metadata"], "managedFields": [
        {"manager": "old", "operation": "Update", "apiVersion": "v1", "time": T0, "fieldsType": "FieldsV1",
         "fieldsV1": {"f:data": {"f:gone": {}}}}]}}
    assert create_managed_fields(sent, "kubectl", CONFIGMAP, T1, "v1") == \
        update(None, sent, "kubectl", T1)["metadata"]["managedFields"]
    assert [e["manager"] for e in create_managed_fields(sent, "kubectl", CONFIGMAP, T1, "v1")] == ["old", "kubectl"]


def test_update_leaves_the_written_object_alone():
    live = update(None, configmap(key="v1"), "creator", T0)
    changed = copy.deepcopy(live)
    changed["data"]["key"] = "v2"
    sent = copy.deepcopy(changed)
    obj = update(live, changed, "editor", T1)
    assert [e["manager"] for e in obj["metadata"]["managedFields"]] == ["creator", "editor"]
    assert changed == sent, "the written object keeps the managedFields it came with"
    without = copy.deepcopy(changed)
    del without["metadata"]["managedFields"]
    update(live, without, "editor", T1)
    assert "managedFields" not in without["metadata"]


def test_an_untouched_canonical_entry_is_carried_over_and_a_non_canonical_one_rewritten():
    old = update(None, configmap(a="1"), "alice", T0)
    new = update(old, {**configmap(a="1", b="2"), "metadata": {**old["metadata"]}}, "bob", T1)
    alice_old, alice_new = (next(e for e in o["metadata"]["managedFields"] if e["manager"] == "alice") for o in (old, new))
    assert alice_new["fieldsV1"] is alice_old["fieldsV1"]
    # the same set written with its members out of upstream's order comes back in that order
    scrambled = copy.deepcopy(old)
    labels = scrambled["metadata"]["managedFields"][0]["fieldsV1"]["f:metadata"]["f:labels"]
    scrambled["metadata"]["managedFields"][0]["fieldsV1"]["f:metadata"]["f:labels"] = dict(reversed(labels.items()))
    data = scrambled["metadata"]["managedFields"][0]["fieldsV1"]["f:data"]
    scrambled["metadata"]["managedFields"][0]["fieldsV1"]["f:data"] = dict(reversed(data.items()))
    rewritten = update(scrambled, {**configmap(a="1", b="2"), "metadata": {**scrambled["metadata"]}}, "bob", T1)
    alice = next(e for e in rewritten["metadata"]["managedFields"] if e["manager"] == "alice")
    assert orjson.dumps(alice["fieldsV1"]) == orjson.dumps(alice_old["fieldsV1"])
    assert alice["fieldsV1"] is not scrambled["metadata"]["managedFields"][0]["fieldsV1"]


def test_creates_whose_schema_aware_shape_never_repeats_stop_computing_it():
    from nanokube.apiserver.patch import apply as apply_mod

    apply_mod._CREATES.clear()
    apply_mod._TYPED_MISSES.clear()
    tries = apply_mod._TYPED_TRIES
    for i in range(2 * tries + 1):  # a list-map key of its own each: both shapes miss
        update(None, pod("p", f"c{i}", "nginx:1", 80), "kubelet", T0, schema=POD)
    # both keys for the first `tries` and the retries at `tries` and 2 * `tries` misses; the plain key otherwise
    assert len(apply_mod._CREATES) == (2 * tries + 1) + (tries + 2)
    # up to the next retry, with the schema-aware shape of the first create (args are an atomic list)
    for j in range(tries - 1):
        update(None, pod("p", "c0", "nginx:1", 80, args=(f"--x={j}",)), "kubelet", T0, schema=POD)
    assert list(apply_mod._TYPED_MISSES.values()) == [3 * tries]
    update(None, pod("p", "c0", "nginx:1", 80, args=("-x",)), "kubelet", T0, schema=POD)
    assert list(apply_mod._TYPED_MISSES.values()) == [0], "the retry hits: the count starts over"


def _unschedulable(created, now):
    """A scheduler's PodScheduled=False status write on a created pod."""
    new = {**created, "metadata": {**created["metadata"]}, "status": {
        "phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                            "message": "0/3 nodes are available", "lastTransitionTime": now}]}}
    return update(created, new, "default-scheduler", now, schema=POD, subresource="status", ignore_status=True)


def test_status_writes_of_one_shape_share_their_tracking_and_get_what_they_would_compute_alone():
    from nanokube.apiserver.patch import apply as apply_mod

    created = [update(None, {**pod(n, "app", "nginx:1", 80), "status": {"phase": "Pending"}}, "kubelet", T0, schema=POD)
               for n in ("a", "b")]
    apply_mod._STATUS_WRITES.clear()
    alone = _unschedulable(created[1], T1)["metadata"]["managedFields"]
    apply_mod._STATUS_WRITES.clear()
    first = _unschedulable(created[0], T1)
    assert len(apply_mod._STATUS_WRITES) == 1
    second = _unschedulable(created[1], T1)  # the first pod's key: the same entries and statuses
    assert len(apply_mod._STATUS_WRITES) == 1
    assert second["metadata"]["managedFields"] == alone and second["metadata"]["name"] == "b"
    assert second["metadata"]["managedFields"][1] is not first["metadata"]["managedFields"][1], "an entry each"
    assert [e["manager"] for e in alone] == ["kubelet", "default-scheduler"]
    assert _unschedulable(created[1], T2)["metadata"]["managedFields"][1]["time"] == T2  # another second: its own
    # a status write that also changes a label is tracked as a whole, labels included
    relabelled = {**created[1], "metadata": {**created[1]["metadata"], "labels": {"app": "b", "x": "y"}},
                  "status": {"phase": "Running"}}
    obj = update(created[1], relabelled, "kubelet", T1, schema=POD, subresource="status", ignore_status=True)
    status_entry = obj["metadata"]["managedFields"][1]
    assert "f:metadata" in status_entry["fieldsV1"] and "f:status" in status_entry["fieldsV1"]


def test_status_writes_whose_keys_never_repeat_stop_building_them():
    from nanokube.apiserver.patch import apply as apply_mod

    created = update(None, {**pod("a", "app", "nginx:1", 80), "status": {"phase": "Pending"}}, "kubelet", T0, schema=POD)
    apply_mod._STATUS_WRITES.clear()
    apply_mod._STATUS_MISSES.clear()
    tries = apply_mod._TYPED_TRIES
    for i in range(2 * tries + 1):  # a pod IP of its own each
        new = {**created, "status": {"phase": "Running", "podIP": f"10.0.0.{i}"}}
        update(created, new, "kubelet", T1, schema=POD, subresource="status", ignore_status=True)
    # the first `tries` and the retries at `tries` and 2 * `tries` misses
    assert len(apply_mod._STATUS_WRITES) == tries + 2
    assert list(apply_mod._STATUS_MISSES.values()) == [2 * tries + 1]


def test_encodings_share_the_subtrees_their_sets_have_in_common():
    """Two pods' kubelet sets differ in the pod's IP: the conditions' subtree is encoded once."""
    conditions = {fp.make_path("status", "conditions") + (fp.key({"type": t}), fp.field(f))
                  for t in ("Ready", "PodScheduled") for f in ("type", "status")}

    def ips(ip):
        item = fp.make_path("status", "podIPs") + (fp.key({"ip": ip}),)
        return {fp.make_path("status", "podIPs"), item, item + (fp.field("ip"),)}

    a = fp.to_fields_v1(conditions | ips("10.1.0.1") | {fp.make_path("status", "phase")})
    b = fp.to_fields_v1(conditions | ips("10.1.0.2"))
    assert a["f:status"]["f:conditions"] is b["f:status"]["f:conditions"]
    assert orjson.dumps(b) == (
        b'{"f:status":{"f:conditions":{"k:{\\"type\\":\\"PodScheduled\\"}":{"f:status":{},"f:type":{}},'
        b'"k:{\\"type\\":\\"Ready\\"}":{"f:status":{},"f:type":{}}},'
        b'"f:podIPs":{".":{},"k:{\\"ip\\":\\"10.1.0.2\\"}":{".":{},"f:ip":{}}}}}'
    )
    assert fp.decode_fields_v1(orjson.loads(orjson.dumps(a)))[0] == conditions | ips("10.1.0.1") | {
        fp.make_path("status", "phase")}


@pytest.mark.parametrize("value, text", [
    ({"name": "a<b>&c"}, '{"name":"a\\u003cb\\u003e\\u0026c"}'),
    ({"z": 1, "a": "\u2028\x01\n\"é𝄞"}, '{"a":"\\u2028\\u0001\\n\\"é𝄞","z":1}'),
    ({"port": 2**64}, '{"port":18446744073709551616}'),  # beyond 64 bits: json's text, as before
    ({"s": "\ud800"}, '{"s":"\ud800"}'),  # a lone surrogate, which orjson refuses
    ({"f": 1e16}, '{"f":1e+16}'),
    ("x", '"x"'),
])
def test_keys_and_values_encode_as_json_with_go_html_escaping(value, text):
    assert fp.encode_json(value) == text


def test_an_update_sending_back_the_stored_entries_keeps_their_fieldsv1_objects():
    """A client updating what it read sends copies of the stored entries: they count as sent, and
    the untouched entry's FieldsV1 is the stored object, whose decoding later writes find by
    identity, not the request's copy."""
    old = update(None, configmap(a="1"), "alice", T0)
    sent = copy.deepcopy(old)
    sent["data"]["b"] = "2"
    new = update(old, sent, "bob", T1)
    alice, bob = new["metadata"]["managedFields"]
    assert alice["fieldsV1"] is old["metadata"]["managedFields"][0]["fieldsV1"]
    assert alice["fieldsV1"] == {"f:data": {".": {}, "f:a": {}}, "f:metadata": {"f:labels": {".": {}, "f:test-label": {}}}}
    assert (bob["manager"], bob["fieldsV1"]) == ("bob", {"f:data": {"f:b": {}}})


def test_managers_of_other_versions_see_a_write_in_their_own_names():
    """Upstream's Updater.update compares the objects as each manager's version shows them: a v1 write of
    `a` takes `b`, its name at x/v2, from a manager recorded there, and a manager whose version no longer
    shows the kind (the converter gives None) is dropped."""
    def convert(obj, api_version):
        if api_version != "x/v2":
            return None
        return None, {("b" if k == "a" else k): v for k, v in obj.items()}

    def entry(manager, api_version, fields):
        return {"manager": manager, "operation": "Update", "apiVersion": api_version, "time": T0,
                "fieldsType": "FieldsV1", "fieldsV1": fields}
    old = {"apiVersion": "x/v1", "kind": "K", "a": "1", "c": "1", "metadata": {"name": "n", "managedFields": [
        entry("other", "x/v2", {"f:b": {}, "f:c": {}}), entry("gone", "x/v0", {"f:c": {}})]}}
    new = {**old, "a": "2", "metadata": {"name": "n"}}
    tracked = update_managed_fields(old, new, "writer", "Update", None, T1, "x/v1", convert=convert)
    assert [(e["manager"], e["apiVersion"], e["fieldsV1"]) for e in tracked["metadata"]["managedFields"]] == [
        ("other", "x/v2", {"f:c": {}}), ("writer", "x/v1", {"f:a": {}})]
