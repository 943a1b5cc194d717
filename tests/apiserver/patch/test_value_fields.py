"""The field manager's view of built-in objects: omitempty value fields at their zero value are
left out at any depth (protobuf_fields.json's "o" flag), pointers' zeros and unchanged parts kept."""

from nanokube.apiserver.patch.value_fields import typed_views

POD = "io.k8s.api.core.v1.Pod"


def pod(**spec) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "generateName": ""},
            "spec": {"containers": [{"name": "c", "image": "x", "stdin": False, "ports": [{"containerPort": 80,
                                                                                         "hostPort": 0}]}], **spec},
            "status": {"phase": "", "hostIP": ""}}


def test_a_create_leaves_out_zeros_of_value_fields_only():
    new = pod(hostNetwork=False, automountServiceAccountToken=False, priority=0, nodeName="")
    _, view = typed_views(None, new, POD, "status")
    assert view["metadata"] == {"name": "p"}
    assert view["spec"] == {"containers": [{"name": "c", "image": "x", "ports": [{"containerPort": 80}]}],
                            "automountServiceAccountToken": False, "priority": 0}  # pointers keep theirs
    assert view["status"] is new["status"]  # a main-resource write does not own status: not walked
    assert new["spec"]["hostNetwork"] is False  # the object itself is left alone


def test_an_update_views_both_sides_and_leaves_equal_parts_alone():
    old, new = pod(hostNetwork=True), pod(hostNetwork=False)
    new["spec"]["containers"] = old["spec"]["containers"]
    old_view, new_view = typed_views(old, new, POD, "status")
    assert old_view["spec"]["hostNetwork"] is True and "hostNetwork" not in new_view["spec"]
    assert new_view["spec"]["containers"] is old["spec"]["containers"]  # equal on both sides: as it is
    status_old, status_new = typed_views(old, {**new, "status": {"phase": "Running", "hostIP": ""}}, POD, "spec")
    assert status_old["status"] == {} and status_new["status"] == {"phase": "Running"}
    assert status_new["spec"] is new["spec"]


def test_a_kind_without_value_fields_in_the_table_is_itself():
    obj = {"apiVersion": "v1", "kind": "X", "spec": {"a": 0}}
    assert typed_views(None, obj, None)[1] is obj


def test_an_update_views_fields_only_one_side_holds():
    old = pod(initContainers=[{"name": "i", "image": "y", "tty": False}])
    new = pod(volumes=[{"name": "v", "emptyDir": {"medium": ""}}], nodeSelector={"a": ""})
    old_view, new_view = typed_views(old, new, POD, "status")
    assert old_view["spec"]["initContainers"] == [{"name": "i", "image": "y"}]  # dropped by the update
    assert new_view["spec"]["volumes"] == [{"name": "v", "emptyDir": {}}]  # added by it
    assert new_view["spec"]["nodeSelector"] == {"a": ""}  # a map of strings: no value fields
    assert old_view["metadata"] is old["metadata"]  # equal on both sides
    assert old["spec"]["initContainers"][0]["tty"] is False and new["spec"]["volumes"][0]["emptyDir"] == {"medium": ""}
