"""An Update's field manager reads built-in objects as decoded Go structs: omitempty value fields
at their zero value are no fields, at any depth (protobuf_fields.json's "o" flag); pointers' zeros
are values. The comparison leaves the zeros out as it walks; objects are never changed."""

import copy

from nanokube import schema as sch
from nanokube.apiserver.patch import apply as ssa
from nanokube.apiserver.patch.value_fields import omitted

POD = sch.kind_schema("", "v1", "Pod")
NOW = "2026-01-01T00:00:00Z"


def pod(**spec) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "generateName": ""},
            "spec": {"containers": [{"name": "c", "image": "x", "stdin": False, "ports": [{"containerPort": 80,
                                                                                         "hostPort": 0}]}], **spec},
            "status": {"phase": "", "hostIP": ""}}


def fields(entries: list | None, manager: str) -> dict:
    return next(e["fieldsV1"] for e in entries or () if e["manager"] == manager)


def test_omitted_names_a_builtin_definitions_value_fields_only():
    defs = sch.builtin_definitions()
    assert {"stdin", "image", "terminationMessagePath"} <= set(omitted(defs["io.k8s.api.core.v1.Container"]))
    assert "hostNetwork" in omitted(defs["io.k8s.api.core.v1.PodSpec"])
    assert "automountServiceAccountToken" not in omitted(defs["io.k8s.api.core.v1.PodSpec"])  # a pointer
    assert omitted(copy.deepcopy(defs["io.k8s.api.core.v1.PodSpec"])) == ()  # not the built-in one: a custom schema


def test_a_decoded_create_leaves_out_zeros_of_value_fields_only():
    new = pod(hostNetwork=False, automountServiceAccountToken=False, priority=0, nodeName="")
    spec = fields(ssa.create_managed_fields(new, "m", POD, NOW, "v1", True, decoded=True), "m")["f:spec"]
    assert spec.keys() == {"f:containers", "f:automountServiceAccountToken", "f:priority"}  # pointers keep theirs
    assert spec["f:containers"]['k:{"name":"c"}'].keys() == {".", "f:name", "f:image", "f:ports"}
    assert new["spec"]["hostNetwork"] is False  # the object itself is left alone
    plain = fields(ssa.create_managed_fields(new, "m", POD, NOW, "v1", True), "m")["f:spec"]
    assert "f:hostNetwork" in plain  # not decoded (an apply's configuration): a zero is a value


def test_creates_of_one_shape_differing_in_a_zero_are_tracked_apart():
    """Creates of one shape share their managedFields: a zero where the other holds a value is
    another shape."""
    first = fields(ssa.create_managed_fields(pod(hostNetwork=True), "z", POD, NOW, "v1", True, decoded=True), "z")
    second = fields(ssa.create_managed_fields(pod(hostNetwork=False), "z", POD, NOW, "v1", True, decoded=True), "z")
    assert "f:hostNetwork" in first["f:spec"] and "f:hostNetwork" not in second["f:spec"]


def test_a_decoded_update_owns_a_change_to_a_zero_as_a_removal():
    old, new = pod(hostNetwork=True), pod(hostNetwork=False, hostname="h")
    old["metadata"]["managedFields"] = ssa.create_managed_fields(old, "a", POD, NOW, "v1", True, decoded=True)
    out = ssa.update_managed_fields(old, new, "b", "Update", POD, NOW, "v1", ignore_status=True, decoded=True)
    entries = out["metadata"]["managedFields"]
    assert fields(entries, "b") == {"f:spec": {"f:hostname": {}}}
    assert "f:hostNetwork" not in fields(entries, "a")["f:spec"]  # taken away, nobody's


def test_a_zero_list_key_field_reads_as_unset_and_atomic_values_compare_decoded():
    old = pod(tolerations=[{"key": "", "operator": "Exists"}])
    new = pod(tolerations=[{"operator": "Exists"}])
    new["spec"]["containers"][0]["ports"][0]["protocol"] = ""  # the key's default (TCP) stands for it
    old_mf = ssa.create_managed_fields(old, "a", POD, NOW, "v1", True, decoded=True)
    assert 'k:{"containerPort":80,"protocol":"TCP"}' in str(old_mf)
    old["metadata"]["managedFields"] = old_mf
    out = ssa.update_managed_fields(old, new, "b", "Update", POD, NOW, "v1", ignore_status=True, decoded=True)
    assert [e["manager"] for e in out["metadata"]["managedFields"]] == ["a"]  # nothing changed as decoded
    plain = ssa.update_managed_fields(old, new, "b", "Update", POD, NOW, "v1", ignore_status=True)
    assert fields(plain["metadata"]["managedFields"], "b")["f:spec"].keys() == {"f:containers", "f:tolerations"}
