"""Server-side apply: merging, ownership, conflicts and pruning on real kinds."""

import copy

import orjson
import pytest

from nanokube import schema
from nanokube.apiserver.patch import PatchError
from nanokube.apiserver.patch.apply import ApplyConflict, apply, update_managed_fields

DEPLOYMENT = schema.kind_schema("apps", "v1", "Deployment")
CONFIGMAP = schema.kind_schema("", "v1", "ConfigMap")
T0, T1, T2 = "2024-05-01T10:00:00Z", "2024-05-01T10:01:00Z", "2024-05-01T10:02:00Z"


def deployment(replicas=3, **container):
    c = {
        "name": "nginx",
        "image": "nginx:1.25",
        "ports": [{"containerPort": 80}],
        **container,
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [c]},
            },
        },
    }


def applied(live, cfg, manager="kubectl", force=False, now=T1, **kw):
    return apply(
        live,
        cfg,
        manager,
        force,
        kw.pop("schema", DEPLOYMENT),
        now,
        kw.pop("api_version", "apps/v1"),
        **kw,
    )


def entries(obj):
    return {
        (e["manager"], e["operation"], e.get("subresource", "")): e
        for e in obj["metadata"]["managedFields"]
    }


def containers(obj):
    return obj["spec"]["template"]["spec"]["containers"]


def test_create_by_apply_records_upstream_fieldsv1():
    obj = applied(None, deployment(), now=T0)
    (entry,) = obj["metadata"]["managedFields"]
    assert {
        k: entry[k]
        for k in ("manager", "operation", "apiVersion", "time", "fieldsType")
    } == {
        "manager": "kubectl",
        "operation": "Apply",
        "apiVersion": "apps/v1",
        "time": T0,
        "fieldsType": "FieldsV1",
    }
    # Byte for byte what kube-apiserver stores for this configuration: the
    # selector is an atomic map, containers and ports are list maps (the port
    # keyed with its defaulted protocol), name/namespace are nobody's.
    assert orjson.dumps(entry["fieldsV1"]) == (
        b'{"f:spec":{"f:replicas":{},"f:selector":{},"f:template":{"f:metadata":{"f:labels":{"f:app":{}}},'
        b'"f:spec":{"f:containers":{"k:{\\"name\\":\\"nginx\\"}":{".":{},"f:image":{},"f:name":{},'
        b'"f:ports":{"k:{\\"containerPort\\":80,\\"protocol\\":\\"TCP\\"}":{".":{},"f:containerPort":{}}}}}}}}}'
    )
    assert (
        obj["spec"]["replicas"] == 3 and "managedFields" not in deployment()["metadata"]
    )


def test_configmap_apply_fieldsv1_matches_upstream_docs():
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "test-cm",
            "namespace": "default",
            "labels": {"test-label": "test"},
        },
        "data": {"key": "some value"},
    }
    obj = apply(None, cm, "kubectl", False, CONFIGMAP, T0, "v1")
    assert obj["metadata"]["managedFields"][0]["fieldsV1"] == {
        "f:data": {"f:key": {}},
        "f:metadata": {"f:labels": {"f:test-label": {}}},
    }


def test_second_manager_merges_and_shares_the_object():
    live = applied(None, deployment(), now=T0)
    sidecar = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"team": "infra"}},
        "spec": {
            "template": {
                "spec": {"containers": [{"name": "proxy", "image": "envoy:1.30"}]}
            }
        },
    }
    obj = applied(live, sidecar, manager="mesh-injector", now=T1)
    assert [c["name"] for c in containers(obj)] == ["nginx", "proxy"]
    assert (
        obj["metadata"]["labels"] == {"team": "infra"} and obj["spec"]["replicas"] == 3
    )
    mesh = entries(obj)[("mesh-injector", "Apply", "")]
    assert mesh["fieldsV1"]["f:spec"]["f:template"]["f:spec"]["f:containers"] == {
        'k:{"name":"proxy"}': {".": {}, "f:image": {}, "f:name": {}}
    }
    # The first applier re-applies its own intent: the sidecar survives.
    again = applied(obj, deployment(image="nginx:1.26"), now=T2)
    assert [(c["name"], c["image"]) for c in containers(again)] == [
        ("nginx", "nginx:1.26"),
        ("proxy", "envoy:1.30"),
    ]


def scaled(live, replicas, now=T1):
    """`kubectl scale`: an Update through the scale subresource."""
    new = copy.deepcopy(live)
    new["spec"]["replicas"] = replicas
    return update_managed_fields(
        live, new, "kubectl", "Update", DEPLOYMENT, now, "apps/v1", subresource="scale"
    )


def test_conflict_after_kubectl_scale():
    live = scaled(applied(None, deployment(), now=T0), 5)
    assert entries(live)[("kubectl", "Update", "scale")]["fieldsV1"] == {
        "f:spec": {"f:replicas": {}}
    }
    assert (
        "f:replicas"
        not in entries(live)[("kubectl", "Apply", "")]["fieldsV1"]["f:spec"]
    )

    with pytest.raises(ApplyConflict) as err:
        applied(live, deployment(replicas=3), now=T2)
    e = err.value
    assert e.code == 409 and e.reason == "Conflict"
    assert str(e) == (
        'Apply failed with 1 conflict: conflict with "kubectl" with subresource "scale" using apps/v1: .spec.replicas'
    )
    assert e.conflicts == [
        ('"kubectl" with subresource "scale" using apps/v1', ".spec.replicas")
    ]
    assert e.details["causes"] == [
        {
            "reason": "FieldManagerConflict",
            "message": 'conflict with "kubectl" with subresource "scale" using apps/v1',
            "field": ".spec.replicas",
        }
    ]


def test_same_value_is_shared_not_a_conflict():
    live = scaled(applied(None, deployment(), now=T0), 5)
    obj = applied(live, deployment(replicas=5), now=T2)
    e = entries(obj)
    assert "f:replicas" in e[("kubectl", "Apply", "")]["fieldsV1"]["f:spec"]
    assert e[("kubectl", "Update", "scale")]["fieldsV1"] == {
        "f:spec": {"f:replicas": {}}
    }


def test_force_takes_ownership_and_drops_emptied_manager():
    live = scaled(applied(None, deployment(), now=T0), 5)
    obj = applied(live, deployment(replicas=3), force=True, now=T2)
    assert obj["spec"]["replicas"] == 3
    assert list(entries(obj)) == [("kubectl", "Apply", "")]
    assert entries(obj)[("kubectl", "Apply", "")]["time"] == T2


def test_conflict_with_update_manager_on_main_resource():
    live = applied(None, deployment(), now=T0)
    edited = copy.deepcopy(live)
    containers(edited)[0]["image"] = "nginx:edited"
    live = update_managed_fields(
        live, edited, "kubectl-edit", "Update", DEPLOYMENT, T1, "apps/v1"
    )
    with pytest.raises(ApplyConflict) as err:
        applied(live, deployment(replicas=4, image="nginx:1.27"), manager="ci", now=T2)
    assert str(err.value) == (
        "Apply failed with 2 conflicts: "
        'conflicts with "kubectl":\n- .spec.replicas\n'
        'conflicts with "kubectl-edit" using apps/v1:\n'
        '- .spec.template.spec.containers[name="nginx"].image'
    )
    assert [c[1] for c in err.value.conflicts] == [
        ".spec.replicas",
        '.spec.template.spec.containers[name="nginx"].image',
    ]


def test_omitting_a_field_removes_it_unless_someone_else_owns_it():
    cfg = deployment()
    cfg["metadata"]["labels"] = {"tier": "frontend", "app": "web"}
    live = applied(None, cfg, now=T0)
    obj = applied(live, deployment(), now=T1)
    assert "labels" not in obj["metadata"]
    assert "f:labels" not in entries(obj)[("kubectl", "Apply", "")]["fieldsV1"].get(
        "f:metadata", {}
    )

    other = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"tier": "frontend"}},
    }
    shared = applied(live, other, manager="labeler", now=T1)
    obj = applied(shared, deployment(), now=T2)
    assert obj["metadata"]["labels"] == {"tier": "frontend"}


def test_omitting_a_container_removes_only_that_item():
    two = deployment()
    containers(two).append({"name": "log", "image": "busybox"})
    live = applied(None, two, now=T0)
    obj = applied(live, deployment(), now=T1)
    assert [c["name"] for c in containers(obj)] == ["nginx"]


def test_unowned_fields_survive_pruning():
    live = applied(None, deployment(), now=T0)
    live["spec"]["template"]["spec"]["restartPolicy"] = (
        "Always"  # defaulted by the server, owned by no one
    )
    live["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] = (
        "IfNotPresent"
    )
    cfg = deployment()
    del containers(cfg)[0]["ports"]
    obj = applied(live, cfg, now=T1)
    c = containers(obj)[0]
    assert "ports" not in c and c["imagePullPolicy"] == "IfNotPresent"
    assert obj["spec"]["template"]["spec"]["restartPolicy"] == "Always"


def test_ports_merge_by_port_and_defaulted_protocol():
    live = applied(None, deployment(), now=T0)
    containers(live)[0]["ports"][0]["protocol"] = "TCP"  # defaulting
    cfg = deployment(
        ports=[
            {"containerPort": 80, "name": "http"},
            {"containerPort": 53, "protocol": "UDP"},
        ]
    )
    obj = applied(live, cfg, now=T1)
    assert containers(obj)[0]["ports"] == [
        {"containerPort": 80, "protocol": "TCP", "name": "http"},
        {"containerPort": 53, "protocol": "UDP"},
    ]
    ports = entries(obj)[("kubectl", "Apply", "")]["fieldsV1"]["f:spec"]["f:template"][
        "f:spec"
    ]["f:containers"]['k:{"name":"nginx"}']["f:ports"]
    assert list(ports) == [
        'k:{"containerPort":53,"protocol":"UDP"}',
        'k:{"containerPort":80,"protocol":"TCP"}',
    ]


def test_finalizers_are_a_set():
    base = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
    a = copy.deepcopy(base)
    a["metadata"]["finalizers"] = ["example.com/a"]
    b = copy.deepcopy(base)
    b["metadata"]["finalizers"] = ["example.com/b"]
    live = apply(None, a, "ctrl-a", False, CONFIGMAP, T0, "v1")
    obj = apply(live, b, "ctrl-b", False, CONFIGMAP, T1, "v1")
    assert obj["metadata"]["finalizers"] == ["example.com/a", "example.com/b"]
    e = entries(obj)
    assert e[("ctrl-b", "Apply", "")]["fieldsV1"] == {
        "f:metadata": {"f:finalizers": {'v:"example.com/b"': {}}}
    }
    # ctrl-a drops its finalizer; ctrl-b's stays.
    obj = apply(obj, base, "ctrl-a", False, CONFIGMAP, T2, "v1")
    assert obj["metadata"]["finalizers"] == ["example.com/b"]
    assert list(entries(obj)) == [("ctrl-b", "Apply", "")]


def test_atomic_list_is_replaced_whole_and_owned_whole():
    live = applied(None, deployment(args=["--a", "--b"]), now=T0)
    assert (
        "f:args"
        in entries(live)[("kubectl", "Apply", "")]["fieldsV1"]["f:spec"]["f:template"][
            "f:spec"
        ]["f:containers"]['k:{"name":"nginx"}']
    )
    obj = applied(live, deployment(args=["--c"]), now=T1)
    assert containers(obj)[0]["args"] == ["--c"]
    with pytest.raises(ApplyConflict) as err:
        applied(obj, deployment(args=["--d"]), manager="other", now=T2)
    assert '.spec.template.spec.containers[name="nginx"].args' in [
        c[1] for c in err.value.conflicts
    ]


def test_atomic_selector_conflicts_as_a_whole():
    live = applied(None, deployment(), now=T0)
    cfg = deployment()
    cfg["spec"]["selector"] = {"matchLabels": {"app": "web", "x": "y"}}
    with pytest.raises(ApplyConflict) as err:
        applied(live, cfg, manager="other", now=T1)
    assert ".spec.selector" in [c[1] for c in err.value.conflicts]


def test_noop_reapply_keeps_timestamps():
    live = applied(None, deployment(), now=T0)
    again = applied(live, deployment(), now=T2)
    assert again == live


def test_status_is_not_owned_when_reset_by_the_resource():
    cfg = deployment()
    cfg["status"] = {"replicas": 9}
    obj = applied(None, cfg, now=T0, ignore_status=True)
    assert "f:status" not in obj["metadata"]["managedFields"][0]["fieldsV1"]


def test_rejects_managed_fields_and_wrong_version():
    cfg = deployment()
    cfg["metadata"]["managedFields"] = []
    with pytest.raises(PatchError) as err:
        applied(None, cfg)
    assert (
        err.value.code == 400 and str(err.value) == "metadata.managedFields must be nil"
    )
    cfg = deployment()
    cfg["apiVersion"] = "apps/v1beta1"
    with pytest.raises(PatchError) as err:
        applied(None, cfg)
    assert str(err.value) == (
        "Incorrect version specified in apply patch. Specified patch version: apps/v1beta1, expected: apps/v1"
    )


def test_duplicate_keys_in_configuration_are_rejected():
    cfg = deployment()
    containers(cfg).append({"name": "nginx", "image": "other"})
    with pytest.raises(PatchError) as err:
        applied(applied(None, deployment(), now=T0), cfg)
    assert err.value.code == 400 and 'duplicate entries for key [name="nginx"]' in str(
        err.value
    )


def test_duplicate_keys_are_rejected_on_create_and_in_lists_the_live_object_lacks():
    """structured-merge-diff types the whole configuration before it merges: duplicates in a list only the
    configuration has (a container's env), or in any list of a create, were accepted (found by fuzz45:
    `kubectl apply --server-side` of a pod whose env named A twice created it)."""
    cfg = deployment()
    containers(cfg)[0]["env"] = [{"name": "A", "value": "1"}, {"name": "A", "value": "2"}]
    for live in (None, applied(None, deployment(), now=T0)):
        with pytest.raises(PatchError) as err:
            applied(live, cfg)
        assert err.value.code == 400 and 'duplicate entries for key [name="A"]' in str(err.value)
    containers(cfg)[0]["env"] = [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]
    assert [e["name"] for e in containers(applied(None, cfg))[0]["env"]] == ["A", "B"]


def test_untyped_object_applies_with_deduced_maps():
    cr = {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w"},
        "spec": {"size": 1, "tags": ["a"]},
    }
    obj = apply(None, cr, "kubectl", False, None, T0, "example.com/v1")
    assert obj["metadata"]["managedFields"][0]["fieldsV1"] == {
        "f:spec": {".": {}, "f:size": {}, "f:tags": {}}
    }
    cr2 = copy.deepcopy(cr)
    cr2["spec"]["tags"] = ["b"]
    with pytest.raises(ApplyConflict):
        apply(obj, cr2, "other", False, None, T1, "example.com/v1")


def test_schemas_built_per_call_are_each_walked_by_their_own_list_type():
    from nanokube.apiserver.patch import fieldpath as fp
    from nanokube.apiserver.patch.apply import field_set

    value = {"xs": [{"name": "a"}]}
    for list_type, item in (("map", fp.key({"name": "a"})), ("atomic", None), ("map", fp.key({"name": "a"}))):
        raw = {"properties": {"xs": {"type": "array", "items": {"type": "object"},
                                     "x-kubernetes-list-type": list_type, "x-kubernetes-list-map-keys": ["name"]}}}
        expected = {fp.make_path("xs")} if item is None else {(fp.field("xs"), item), (fp.field("xs"), item, fp.field("name"))}
        assert field_set(value, raw) == expected
