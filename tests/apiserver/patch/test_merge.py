"""JSON merge patch (RFC 7386) as kube-apiserver applies it."""

import copy

import pytest

from nanokube.apiserver.patch import PatchError
from nanokube.apiserver.patch.merge import apply


def deployment():
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"app": "web", "tier": "front"}, "annotations": {"note": "x"}},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx:1", "env": [{"name": "A", "value": "1"}]}]},
            },
        },
    }


def test_objects_merge_recursively_and_scalars_replace():
    out = apply(deployment(), {"metadata": {"labels": {"env": "prod"}}, "spec": {"replicas": 5}})
    assert out["metadata"]["labels"] == {"app": "web", "tier": "front", "env": "prod"}
    assert out["spec"]["replicas"] == 5
    assert out["spec"]["selector"] == {"matchLabels": {"app": "web"}}


def test_null_deletes_and_deleting_absent_key_is_harmless():
    out = apply(deployment(), {"metadata": {"labels": {"tier": None}, "annotations": None, "absent": None}})
    assert out["metadata"] == {"name": "web", "labels": {"app": "web"}}


def test_lists_are_replaced_wholesale():
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "web", "image": "nginx:2"}]}}}}
    out = apply(deployment(), patch)
    assert out["spec"]["template"]["spec"]["containers"] == [{"name": "web", "image": "nginx:2"}]


def test_nulls_are_pruned_from_inserted_values():
    patch = {
        "spec": {
            "strategy": {"type": "Recreate", "rollingUpdate": None},
            "template": {"spec": {"tolerations": [{"key": "k", "value": None}, None]}},
        }
    }
    out = apply(deployment(), patch)
    assert out["spec"]["strategy"] == {"type": "Recreate"}
    assert out["spec"]["template"]["spec"]["tolerations"] == [{"key": "k"}]


def test_null_current_value_is_treated_as_absent():
    doc = {"metadata": {"name": "x", "creationTimestamp": None}}
    out = apply(doc, {"metadata": {"creationTimestamp": {"a": None, "b": 1}}})
    assert out["metadata"]["creationTimestamp"] == {"b": 1}


def test_object_replaced_by_scalar_and_scalar_by_object():
    out = apply({"a": {"b": 1}, "c": "s"}, {"a": "flat", "c": {"d": None, "e": 2}})
    assert out == {"a": "flat", "c": {"e": 2}}


def test_inputs_are_not_mutated():
    doc, patch = (
        deployment(),
        {"metadata": {"labels": {"app": None, "new": "1"}}, "spec": {"template": {"spec": {"containers": []}}}},
    )
    before_doc, before_patch = copy.deepcopy(doc), copy.deepcopy(patch)
    out = apply(doc, patch)
    out["metadata"]["labels"]["mutated"] = "yes"
    assert doc == before_doc and patch == before_patch


@pytest.mark.parametrize("patch", [None, ["a"], "x", 3])
def test_non_object_patch_is_bad_request(patch):
    with pytest.raises(PatchError) as e:
        apply(deployment(), patch)
    assert e.value.code == 400 and str(e.value) == "Invalid JSON Patch"


def test_kubectl_patch_type_merge_annotation_and_replicas():
    out = apply(
        deployment(), {"metadata": {"annotations": {"kubernetes.io/change-cause": "scaled"}}, "spec": {"replicas": 0}}
    )
    assert out["metadata"]["annotations"] == {"note": "x", "kubernetes.io/change-cause": "scaled"}
    assert out["spec"]["replicas"] == 0
