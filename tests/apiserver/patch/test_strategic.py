"""Strategic merge patch as kube-apiserver applies it, driven by the release-1.37 schema."""

import copy

import pytest

from nanokube import schema
from nanokube.apiserver.patch import PatchError
from nanokube.apiserver.patch.strategic import apply

POD = schema.kind_schema("", "v1", "Pod")
DEPLOYMENT = schema.kind_schema("apps", "v1", "Deployment")
PDB = schema.kind_schema("policy", "v1", "PodDisruptionBudget")


def pod():
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "web",
            "namespace": "default",
            "labels": {"app": "web", "tier": "front"},
            "finalizers": ["a.example.com/x", "b.example.com/y"],
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u1"}],
        },
        "spec": {
            "containers": [
                {
                    "name": "nginx",
                    "image": "nginx:1.25",
                    "ports": [{"containerPort": 80, "protocol": "TCP"}, {"containerPort": 443, "protocol": "TCP"}],
                    "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                    "args": ["--a", "--b"],
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                },
                {"name": "sidecar", "image": "busybox"},
            ],
            "volumes": [{"name": "data", "emptyDir": {}}, {"name": "cfg", "configMap": {"name": "cfg"}}],
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}],
            "nodeSelector": {"disk": "ssd"},
        },
    }


def deployment():
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx:1", "env": [{"name": "A", "value": "1"}]}]},
            },
        },
    }


def container(doc, name):
    return next(c for c in doc["spec"]["containers"] if c["name"] == name)


def failure(doc, patch, s=POD):
    with pytest.raises(PatchError) as e:
        apply(doc, patch, s)
    return e.value


# --- merging by key and replacing ------------------------------------------------------------------


def test_containers_merge_by_name_and_nested_lists_merge_by_their_keys():
    patch = {
        "spec": {
            "containers": [
                {
                    "name": "nginx",
                    "image": "nginx:1.27",
                    "env": [{"name": "B", "value": "two"}, {"name": "C", "value": "3"}],
                    "ports": [{"containerPort": 8080}],
                }
            ]
        }
    }
    out = apply(pod(), patch, POD)
    nginx = container(out, "nginx")
    assert nginx["image"] == "nginx:1.27"
    assert nginx["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "two"}, {"name": "C", "value": "3"}]
    assert [p["containerPort"] for p in nginx["ports"]] == [8080, 80, 443]
    assert nginx["volumeMounts"] == [{"name": "data", "mountPath": "/data"}]
    assert container(out, "sidecar") == {"name": "sidecar", "image": "busybox"}


def test_without_set_element_order_new_items_come_before_live_ones():
    # upstream's mergeSortedSlice: items the live list lacks are emitted first
    out = apply(pod(), {"spec": {"containers": [{"name": "logger", "image": "fluentd"}]}}, POD)
    assert [c["name"] for c in out["spec"]["containers"]] == ["logger", "nginx", "sidecar"]
    out = apply(pod(), {"spec": {"containers": [{"name": "sidecar", "image": "b:2"}, {"name": "logger"}]}}, POD)
    assert [c["name"] for c in out["spec"]["containers"]] == ["nginx", "sidecar", "logger"]


def test_atomic_and_strategy_less_lists_are_replaced():
    toleration = {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}
    out = apply(pod(), {"spec": {"tolerations": [toleration], "containers": [{"name": "nginx", "args": ["--c"]}]}}, POD)
    assert out["spec"]["tolerations"] == [toleration]
    assert container(out, "nginx")["args"] == ["--c"]


def test_primitive_merge_list_is_a_union():
    out = apply(pod(), {"metadata": {"finalizers": ["b.example.com/y", "c.example.com/z"]}}, POD)
    assert sorted(out["metadata"]["finalizers"]) == ["a.example.com/x", "b.example.com/y", "c.example.com/z"]
    assert len(out["metadata"]["finalizers"]) == 3


def test_labels_merge_and_null_deletes():
    out = apply(pod(), {"metadata": {"labels": {"tier": None, "env": "prod"}, "ownerReferences": None}}, POD)
    assert out["metadata"]["labels"] == {"app": "web", "env": "prod"}
    assert "ownerReferences" not in out["metadata"]


def test_null_for_absent_key_is_ignored_and_nulls_in_new_values_are_discarded():
    out = apply(pod(), {"spec": {"hostname": None, "securityContext": {"runAsUser": 1000, "runAsGroup": None}}}, POD)
    assert "hostname" not in out["spec"]
    assert out["spec"]["securityContext"] == {"runAsUser": 1000}


def test_replace_strategy_map_is_replaced():
    doc = {
        "kind": "PodDisruptionBudget",
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web", "tier": "front"}}},
    }
    out = apply(doc, {"spec": {"selector": {"matchLabels": {"app": "api"}}}}, PDB)
    assert out["spec"]["selector"] == {"matchLabels": {"app": "api"}}
    assert out["spec"]["minAvailable"] == 1


def test_type_change_replaces_value():
    doc = deployment()
    out = apply(doc, {"spec": {"strategy": {"rollingUpdate": {"maxSurge": 1}}}}, DEPLOYMENT)
    assert out["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": "25%"}


def test_deployment_template_change_merges_deep_into_pod_template():
    patch = {
        "spec": {
            "replicas": 4,
            "template": {
                "metadata": {"annotations": {"kubectl.kubernetes.io/restartedAt": "2025-01-01T00:00:00Z"}},
                "spec": {"containers": [{"name": "web", "env": [{"name": "B", "value": "2"}]}]},
            },
        }
    }
    out = apply(deployment(), patch, DEPLOYMENT)
    template = out["spec"]["template"]
    assert out["spec"]["replicas"] == 4
    assert template["metadata"] == {
        "labels": {"app": "web"},
        "annotations": {"kubectl.kubernetes.io/restartedAt": "2025-01-01T00:00:00Z"},
    }
    assert template["spec"]["containers"] == [
        {"name": "web", "image": "nginx:1", "env": [{"name": "B", "value": "2"}, {"name": "A", "value": "1"}]}
    ]


def test_inputs_are_not_mutated():
    doc = pod()
    patch = {
        "metadata": {"labels": {"app": None}},
        "spec": {
            "$setElementOrder/containers": [{"name": "sidecar"}, {"name": "nginx"}],
            "containers": [{"name": "nginx", "image": "x", "$retainKeys": ["name", "image"]}],
        },
    }
    before_doc, before_patch = copy.deepcopy(doc), copy.deepcopy(patch)
    out = apply(doc, patch, POD)
    out["spec"]["containers"][0]["mutated"] = True
    assert doc == before_doc and patch == before_patch


# --- directives -----------------------------------------------------------------------------------


def test_patch_delete_on_list_element_removes_it_by_merge_key():
    patch = {
        "spec": {
            "containers": [
                {"name": "sidecar", "$patch": "delete"},
                {"name": "nginx", "env": [{"name": "A", "$patch": "delete"}]},
            ]
        }
    }
    out = apply(pod(), patch, POD)
    assert [c["name"] for c in out["spec"]["containers"]] == ["nginx"]
    assert container(out, "nginx")["env"] == [{"name": "B", "value": "2"}]


def test_patch_replace_on_list_element_replaces_the_whole_list():
    patch = {"spec": {"volumes": [{"name": "only", "secret": {"secretName": "s"}}, {"$patch": "replace"}]}}
    out = apply(pod(), patch, POD)
    assert out["spec"]["volumes"] == [{"name": "only", "secret": {"secretName": "s"}}]


def test_patch_replace_on_map_replaces_it():
    out = apply(pod(), {"spec": {"nodeSelector": {"$patch": "replace", "zone": "a"}}}, POD)
    assert out["spec"]["nodeSelector"] == {"zone": "a"}


def test_patch_delete_on_map_empties_it():
    out = apply(pod(), {"metadata": {"labels": {"$patch": "delete"}}}, POD)
    assert out["metadata"]["labels"] == {}


def test_directive_maps_in_new_values_are_dropped():
    out = apply(
        pod(),
        {
            "spec": {
                "affinity": {"$patch": "replace", "nodeAffinity": {}},
                "dnsConfig": {"options": [{"name": "ndots"}, {"$patch": "delete", "name": "x"}]},
            }
        },
        POD,
    )
    assert "affinity" not in out["spec"]
    assert out["spec"]["dnsConfig"] == {"options": [{"name": "ndots"}]}


def test_patch_merge_is_rejected_like_upstream():
    err = failure(pod(), {"spec": {"containers": [{"name": "nginx", "$patch": "merge"}]}})
    assert (err.code, str(err)) == (400, "merging lists cannot yet be specified in the patch")
    err = failure(pod(), {"spec": {"nodeSelector": {"$patch": "merge"}}})
    assert (err.code, str(err)) == (400, "unknown patch type: merge in map: map[$patch:merge]")


def test_delete_from_primitive_list():
    patch = {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a.example.com/x", "not-there"]}}
    out = apply(pod(), patch, POD)
    assert out["metadata"]["finalizers"] == ["b.example.com/y"]


def test_delete_from_primitive_list_for_absent_field_adds_nothing():
    out = apply(pod(), {"spec": {"containers": [{"name": "sidecar", "$deleteFromPrimitiveList/args": ["x"]}]}}, POD)
    assert container(out, "sidecar") == {"name": "sidecar", "image": "busybox"}


def test_retain_keys_on_volume_switches_its_source():
    patch = {"spec": {"volumes": [{"name": "data", "$retainKeys": ["name", "hostPath"], "hostPath": {"path": "/mnt"}}]}}
    out = apply(pod(), patch, POD)
    assert out["spec"]["volumes"][0] == {"name": "data", "hostPath": {"path": "/mnt"}}
    assert out["spec"]["volumes"][1] == {"name": "cfg", "configMap": {"name": "cfg"}}


def test_retain_keys_on_deployment_strategy():
    patch = {"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate", "rollingUpdate": None}}}
    out = apply(deployment(), patch, DEPLOYMENT)
    assert out["spec"]["strategy"] == {"type": "Recreate"}


def test_retain_keys_must_cover_patched_fields():
    err = failure(
        deployment(), {"spec": {"strategy": {"$retainKeys": ["type"], "rollingUpdate": {"maxSurge": 1}}}}, DEPLOYMENT
    )
    assert (err.code, err.reason, str(err)) == (400, "BadRequest", "invalid patch format of retainKeys")
    err = failure(deployment(), {"spec": {"strategy": {"$retainKeys": "type"}}}, DEPLOYMENT)
    assert err.code == 400


def test_set_element_order_orders_the_merged_list():
    patch = {"spec": {"$setElementOrder/containers": [{"name": "sidecar"}, {"name": "nginx"}]}}
    out = apply(pod(), patch, POD)
    assert [c["name"] for c in out["spec"]["containers"]] == ["sidecar", "nginx"]
    assert container(out, "nginx") == container(pod(), "nginx")


def test_set_element_order_with_changes_and_server_only_items():
    patch = {
        "spec": {
            "containers": [
                {
                    "name": "nginx",
                    "$setElementOrder/env": [{"name": "C"}, {"name": "A"}],
                    "env": [{"name": "C", "value": "3"}, {"name": "A", "value": "one"}],
                }
            ]
        }
    }
    out = apply(pod(), patch, POD)
    assert container(out, "nginx")["env"] == [
        {"name": "C", "value": "3"},
        {"name": "A", "value": "one"},
        {"name": "B", "value": "2"},
    ]


def test_set_element_order_for_primitive_list():
    patch = {
        "metadata": {
            "$setElementOrder/finalizers": ["b.example.com/y", "new/f", "a.example.com/x"],
            "finalizers": ["new/f"],
        }
    }
    out = apply(pod(), patch, POD)
    assert out["metadata"]["finalizers"] == ["b.example.com/y", "new/f", "a.example.com/x"]


def test_set_element_order_that_contradicts_patch_is_rejected():
    patch = {
        "spec": {"$setElementOrder/containers": [{"name": "nginx"}], "containers": [{"name": "sidecar", "image": "x"}]}
    }
    err = failure(pod(), patch)
    assert err.code == 400
    assert str(err) == (
        "the order in patch list:\n[map[image:x name:sidecar]]\n doesn't match $setElementOrder list:\n[map[name:nginx]]"
    )


@pytest.mark.parametrize(
    "patch,message",
    [
        ({"metadata": {"$deleteFromPrimitiveList": ["x"]}}, "invalid patch format of primitive list"),
        ({"metadata": {"$setElementOrderfinalizers": ["x"]}}, "invalid patch format of setElementOrder list"),
    ],
)
def test_malformed_directive_keys_are_bad_request(patch, message):
    err = failure(pod(), patch)
    assert (err.code, str(err)) == (400, message)


def test_missing_merge_key_is_a_server_error_with_upstream_message():
    err = failure(pod(), {"spec": {"containers": [{"image": "nginx"}]}})
    assert (err.code, err.reason) == (400, "BadRequest")
    assert str(err) == "map: map[image:nginx] does not contain declared merge key: name"


def test_list_of_lists_is_unprocessable():
    err = failure({"metadata": {"finalizers": [["a"]]}}, {"metadata": {"finalizers": [["b"]]}})
    assert (err.code, str(err)) == (422, "lists of lists are not supported")
    assert (err.status_message, err.details) == ("the server rejected our request due to an error in our request", {})


def test_mixed_element_types_are_rejected():
    err = failure(pod(), {"metadata": {"finalizers": [1]}})
    assert err.code == 400 and str(err).startswith("list element types are not identical: ")


def test_merge_keys_compare_with_go_types():
    doc = {"spec": {"containers": [{"name": "c", "ports": [{"containerPort": 80, "name": "http"}]}]}}
    out = apply(
        doc, {"spec": {"containers": [{"name": "c", "ports": [{"containerPort": 80.0, "name": "float"}]}]}}, POD
    )
    assert sorted(p["name"] for p in out["spec"]["containers"][0]["ports"]) == ["float", "http"]


# --- whole requests as kubectl sends them ---------------------------------------------------------


def test_kubectl_apply_three_way_patch():
    last_applied = '{"apiVersion":"apps/v1","kind":"Deployment"}'
    patch = {
        "metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": last_applied}},
        "spec": {
            "replicas": 3,
            "strategy": {"$retainKeys": ["type"], "type": "Recreate", "rollingUpdate": None},
            "template": {
                "spec": {
                    "$setElementOrder/containers": [{"name": "web"}, {"name": "metrics"}],
                    "containers": [
                        {
                            "name": "web",
                            "image": "nginx:2",
                            "$setElementOrder/env": [{"name": "B"}],
                            "env": [{"name": "B", "value": "2"}, {"name": "A", "$patch": "delete"}],
                        },
                        {"name": "metrics", "image": "prom/exporter"},
                    ],
                }
            },
        },
    }
    out = apply(deployment(), patch, DEPLOYMENT)
    assert out["metadata"]["annotations"] == {"kubectl.kubernetes.io/last-applied-configuration": last_applied}
    assert out["spec"]["replicas"] == 3
    assert out["spec"]["strategy"] == {"type": "Recreate"}
    assert out["spec"]["template"]["spec"]["containers"] == [
        {"name": "web", "image": "nginx:2", "env": [{"name": "B", "value": "2"}]},
        {"name": "metrics", "image": "prom/exporter"},
    ]


def test_kubectl_patch_strategic_adds_toleration_and_volume():
    patch = {
        "spec": {
            "tolerations": [{"key": "gpu", "operator": "Exists"}],
            "volumes": [{"name": "cache", "emptyDir": {"medium": "Memory"}}],
            "containers": [{"name": "nginx", "volumeMounts": [{"name": "cache", "mountPath": "/cache"}]}],
        }
    }
    out = apply(pod(), patch, POD)
    assert out["spec"]["tolerations"] == [{"key": "gpu", "operator": "Exists"}]
    assert [v["name"] for v in out["spec"]["volumes"]] == ["cache", "data", "cfg"]
    assert [m["mountPath"] for m in container(out, "nginx")["volumeMounts"]] == ["/cache", "/data"]


def test_owner_references_merge_by_uid():
    ref = {"apiVersion": "v1", "kind": "Node", "name": "n", "uid": "u2"}
    out = apply(pod(), {"metadata": {"ownerReferences": [ref, {"uid": "u1", "controller": True}]}}, POD)
    assert [r["uid"] for r in out["metadata"]["ownerReferences"]] == ["u2", "u1"]
    assert out["metadata"]["ownerReferences"][1] == {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "name": "rs",
        "uid": "u1",
        "controller": True,
    }


def test_root_patch_replace_and_null_patch():
    assert apply(pod(), {"$patch": "replace", "kind": "Pod"}, POD) == {"kind": "Pod"}
    assert apply(pod(), None, POD) == pod()


def test_non_object_patch_is_bad_request():
    err = failure(pod(), ["x"])
    assert (err.code, str(err)) == (400, "json: cannot unmarshal array into Go value of type map[string]interface {}")


# --- kinds without a schema -------------------------------------------------------------------------


def test_without_schema_falls_back_to_json_merge_patch():
    widget = {"apiVersion": "example.com/v1", "kind": "Widget", "spec": {"items": [{"name": "a", "v": 1}], "size": 1}}
    out = apply(widget, {"spec": {"items": [{"name": "b"}], "size": None}}, None)
    assert out["spec"] == {"items": [{"name": "b"}]}


def test_managed_fields_are_shared_unless_the_patch_names_them():
    live = pod()
    live["metadata"]["managedFields"] = [
        {"manager": "a", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}},
        {"manager": "b", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {}}},
    ]
    before = copy.deepcopy(live)
    out = apply(live, {"metadata": {"labels": {"x": "y"}}}, POD)
    assert out["metadata"]["managedFields"] is live["metadata"]["managedFields"]
    assert list(out["metadata"])[:len(live["metadata"])] == list(live["metadata"]), "managedFields keep their place"
    # a patch that names them works on a copy of its own; the live object is untouched either way
    out = apply(live, {"metadata": {"managedFields": [{"manager": "a", "operation": "Apply"}]}}, POD)
    assert out["metadata"]["managedFields"] is not live["metadata"]["managedFields"]
    assert live == before


async def test_over_http_a_long_list_merges_with_work_linear_in_its_length(tmp_path, monkeypatch):
    """Items found by their merge key through an index, not a scan per item: 8,000 containers with their
    $setElementOrder took ~9 s (4,000: 2.2 s; 50,000 minutes), 8,000 finalizers likewise. Those scans
    compared items one by one (strategic._is), so doubling the lists quadrupled the comparisons; counted
    here instead of timed."""
    import asyncio

    from kubernetes import client

    from nanokube.apiserver.patch import strategic
    from tests.served import served

    compared = 0
    same = strategic._is

    def counted(a, b):
        nonlocal compared
        compared += 1
        return same(a, b)

    monkeypatch.setattr(strategic, "_is", counted)
    comparisons = {}
    async with served(tmp_path) as (_, api_client):
        core = client.CoreV1Api(api_client)
        await asyncio.to_thread(core.create_namespaced_pod_template, "default", {
            "metadata": {"name": "p", "finalizers": ["example.com/x"]},
            "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}})
        for n in (2000, 4000):
            patch = {"metadata": {"$setElementOrder/finalizers": [f"example.com/f{i}" for i in range(n)],
                                  "finalizers": [f"example.com/f{i}" for i in range(n)]},
                     "template": {"spec": {"$setElementOrder/containers": [{"name": f"c{i}"} for i in range(n)],
                                           "containers": [{"name": f"c{i}", "image": "i"} for i in range(n)]}}}
            compared = 0
            got = await asyncio.to_thread(core.patch_namespaced_pod_template, "p", "default", patch, dry_run="All")
            comparisons[n] = compared
            assert [c.name for c in got.template.spec.containers] == [f"c{i}" for i in range(n)] + ["c"]
            assert got.metadata.finalizers == [f"example.com/f{i}" for i in range(n)] + ["example.com/x"]
    assert comparisons[4000] <= 2 * comparisons[2000] + 100, comparisons
