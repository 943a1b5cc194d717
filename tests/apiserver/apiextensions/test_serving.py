"""CRDs served in-process: the index follows the CRD at once, the naming controller
reports conflicts, deletion waits for the custom objects, and objects read at another
version or after a schema change are converted and defaulted."""

from __future__ import annotations

import copy
import json
from types import SimpleNamespace

import pytest
from kubernetes.client.rest import ApiException

from nanokube.apiserver.apiextensions.serving import CustomResources
from nanokube.apiserver.loopback import LocalClient
from nanokube.apiserver.rest import SYSTEM
from nanokube.clock import Clock
from nanokube.machinery.errors import APIError
from tests.apiserver.apiextensions.test_conversion_pruning import create_when_served
from tests.apiserver.test_rest_managedfields import call
from tests.controllers import eventually, make_stack
from tests.served import served

GROUP = "example.com"
SCHEMA = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
    "size": {"type": "integer", "minimum": 1}, "color": {"type": "string", "default": "blue"}}}}}


def crd(plural="widgets", kind="Widget", short=("wd",), versions=("v1",)) -> dict:
    return {"metadata": {"name": f"{plural}.{GROUP}"},
            "spec": {"group": GROUP, "scope": "Namespaced",
                     "names": {"plural": plural, "kind": kind, "shortNames": list(short)},
                     "versions": [{"name": v, "served": True, "storage": i == 0,
                                   "schema": {"openAPIV3Schema": copy.deepcopy(SCHEMA)}} for i, v in enumerate(versions)]}}


@pytest.fixture
async def env():
    stack = await make_stack()
    changes = []
    server = SimpleNamespace(index=stack.rest.index, cache=stack.cache, clock=Clock())
    serving = CustomResources(server, LocalClient(stack.rest, SYSTEM, "kube-apiextensions-apiserver"),
                              lambda: changes.append(1))
    await serving.start()
    yield SimpleNamespace(stack=stack, crds=stack.client.resource("apiextensions.k8s.io", "v1", "customresourcedefinitions"),
                          index=stack.rest.index, changes=changes)
    await serving.stop()
    await stack.close()


def condition(obj: dict, typ: str) -> tuple | None:
    c = next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == typ), None)
    return (c["status"], c["reason"], c["message"]) if c else None


async def established(env, name: str) -> dict:
    async def check():
        got = await env.crds.get(name)
        return got if condition(got, "Established") == ("True", "InitialNamesAccepted",
                                                         "the initial names have been accepted") else None
    return await eventually(check)


async def gone(env, name: str) -> None:
    """Until the CRD `name` is deleted (its finalizer done)."""
    async def check():
        try:
            await env.crds.get(name)
        except APIError as err:
            return err.code == 404
        return False
    await eventually(check)


async def test_crd_is_defaulted_established_and_served(env):
    created = await env.crds.create(crd(versions=("v1", "v1beta1")))
    assert created["spec"]["names"]["singular"] == "widget" and created["spec"]["names"]["listKind"] == "WidgetList"
    assert created["spec"]["conversion"] == {"strategy": "None"}
    assert created["status"]["storedVersions"] == ["v1"]
    got = await established(env, f"widgets.{GROUP}")
    assert condition(got, "NamesAccepted") == ("True", "NoConflicts", "no conflicts found")
    res = env.index.get(GROUP, "v1beta1", "widgets")
    assert res is not None and res.versions == ["v1", "v1beta1"] and res.short_names == ("wd",) and env.changes
    w = env.stack.client.resource(GROUP, "v1beta1", "widgets")
    obj = await w.create({"metadata": {"name": "a", "namespace": "default"}, "spec": {"size": 2}})
    assert obj["apiVersion"] == f"{GROUP}/v1beta1" and obj["spec"] == {"size": 2, "color": "blue"}
    stored = await env.stack.client.resource(GROUP, "v1", "widgets").get("a", "default")
    assert stored["apiVersion"] == f"{GROUP}/v1"
    with pytest.raises(APIError) as e:
        await w.create({"metadata": {"name": "b", "namespace": "default"}, "spec": {"size": 0}})
    assert e.value.code == 422
    assert e.value.message == (f'Widget.{GROUP} "b" is invalid: spec.size: Invalid value: 0: '
                               "spec.size in body should be greater than or equal to 1")


async def test_schema_change_applies_on_read_and_write(env):
    await env.crds.create(crd())
    await established(env, f"widgets.{GROUP}")
    w = env.stack.client.resource(GROUP, "v1", "widgets")
    await w.create({"metadata": {"name": "old", "namespace": "default"}, "spec": {"size": 1}})
    cur = await env.crds.get(f"widgets.{GROUP}")
    new = copy.deepcopy(cur)
    new["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["zone"] = {
        "type": "string", "default": "a"}
    await env.crds.update(new)
    got = await env.stack.client.resource(GROUP, "v1", "widgets").get("old", "default")
    assert got["spec"]["zone"] == "a"


async def test_conflicting_names_are_not_accepted(env):
    await env.crds.create(crd())
    await established(env, f"widgets.{GROUP}")
    await env.crds.create(crd(plural="gadgets", kind="Widget", short=("gd",)))

    async def refused():
        got = await env.crds.get(f"gadgets.{GROUP}")
        return condition(got, "NamesAccepted")

    assert await eventually(refused) == ("False", "ListKindConflict", '"WidgetList" is already in use')
    got = await env.crds.get(f"gadgets.{GROUP}")
    assert condition(got, "Established") == ("False", "NotAccepted", "not all names are accepted")
    assert env.index.get(GROUP, "v1", "gadgets") is None


async def test_deletion_removes_objects_then_the_crd(env):
    await env.crds.create(crd())
    await established(env, f"widgets.{GROUP}")
    w = env.stack.client.resource(GROUP, "v1", "widgets")
    held = {"metadata": {"name": "held", "namespace": "default", "finalizers": ["example.com/hold"]}, "spec": {"size": 1}}
    await w.create(held)
    marked = await env.crds.delete(f"widgets.{GROUP}")
    assert "customresourcecleanup.apiextensions.k8s.io" in marked["metadata"]["finalizers"]
    assert condition(marked, "Terminating")[1] == "InstanceDeletionPending"

    async def in_progress():
        got = await env.crds.get(f"widgets.{GROUP}")
        return condition(got, "Terminating") == ("True", "InstanceDeletionInProgress", "CustomResource deletion is in progress")

    await eventually(in_progress)
    w = env.stack.client.resource(GROUP, "v1", "widgets")  # the index now serves the terminating CRD's resource
    with pytest.raises(APIError) as e:
        await w.create({"metadata": {"name": "late", "namespace": "default"}, "spec": {"size": 1}})
    assert (e.value.code, e.value.reason, e.value.message) == (
        405, "MethodNotAllowed", "create not allowed while custom resource definition is terminating")
    await w.patch("held", {"metadata": {"finalizers": None}}, namespace="default")
    await gone(env, f"widgets.{GROUP}")
    assert env.index.get(GROUP, "v1", "widgets") is None


async def test_a_crd_whose_objects_wait_on_finalizers_holds_up_no_other_crds_deletion(env):
    await env.crds.create(crd())
    await env.crds.create(crd(plural="gadgets", kind="Gadget", short=("gd",)))
    await established(env, f"widgets.{GROUP}")
    await established(env, f"gadgets.{GROUP}")
    await env.stack.client.resource(GROUP, "v1", "widgets").create(
        {"metadata": {"name": "held", "namespace": "default", "finalizers": ["example.com/hold"]}, "spec": {"size": 1}})
    await env.stack.client.resource(GROUP, "v1", "gadgets").create(
        {"metadata": {"name": "free", "namespace": "default"}, "spec": {"size": 1}})
    await env.crds.delete(f"widgets.{GROUP}")

    async def waiting():
        got = await env.crds.get(f"widgets.{GROUP}")
        return condition(got, "Terminating")[1] == "InstanceDeletionInProgress"

    await eventually(waiting)  # the widgets' cleanup polls for up to a minute for "held" to go
    await env.crds.delete(f"gadgets.{GROUP}")
    await gone(env, f"gadgets.{GROUP}")  # well within that minute (eventually gives up after 30 s)
    assert condition(await env.crds.get(f"widgets.{GROUP}"), "Terminating")[1] == "InstanceDeletionInProgress"
    await env.stack.client.resource(GROUP, "v1", "widgets").patch("held", {"metadata": {"finalizers": None}},
                                                                  namespace="default")
    await gone(env, f"widgets.{GROUP}")


async def test_server_side_apply_follows_the_schemas_list_and_map_types(env):
    c = crd()
    props = c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    props["ports"] = {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                      "items": {"type": "object", "required": ["name"],
                                "properties": {"name": {"type": "string"}, "port": {"type": "integer"}}}}
    props["args"] = {"type": "array", "items": {"type": "string"}}
    props["selector"] = {"type": "object", "x-kubernetes-map-type": "atomic",
                         "additionalProperties": {"type": "string"}}
    await env.crds.create(c)
    await established(env, f"widgets.{GROUP}")
    w = env.stack.client.resource(GROUP, "v1", "widgets")

    async def apply(manager: str, spec: dict, force: bool = False) -> dict:
        body = {"apiVersion": f"{GROUP}/v1", "kind": "Widget", "metadata": {"name": "a", "namespace": "default"},
                "spec": spec}
        return await w.patch("a", body, "application/apply-patch+yaml", namespace="default", field_manager=manager,
                             force=force)

    await apply("one", {"size": 1, "ports": [{"name": "http", "port": 80}], "args": ["--a"], "selector": {"x": "1"}})
    second = {"ports": [{"name": "metrics", "port": 9090}], "args": ["--b"], "selector": {"y": "2"}}
    with pytest.raises(APIError) as e:  # atomic list and atomic map: owned as a whole by "one"
        await apply("two", second)
    assert e.value.code == 409
    assert e.value.message == 'Apply failed with 2 conflicts: conflicts with "one":\n- .spec.args\n- .spec.selector'
    got = await apply("two", second, force=True)
    # list-type map: both managers' items kept; the atomic fields: the forcing applier's value
    assert got["spec"]["ports"] == [{"name": "http", "port": 80}, {"name": "metrics", "port": 9090}]
    assert got["spec"]["args"] == ["--b"]
    assert got["spec"]["selector"] == {"y": "2"}


async def test_unknown_fields_in_metadata_and_spec_are_strict_errors(env):
    await env.crds.create(crd())
    await established(env, f"widgets.{GROUP}")
    w = env.stack.client.resource(GROUP, "v1", "widgets")
    with pytest.raises(APIError) as e:
        await w.create({"metadata": {"name": "x", "namespace": "default", "colour": "red"}, "spec": {"size": 1, "bogus": 2}})
    assert e.value.code == 400
    assert e.value.message == ('Widget in version "v1" cannot be handled as a Widget: strict decoding error: '
                               'unknown field "metadata.colour", unknown field "spec.bogus"')


async def test_a_crd_never_shadows_a_built_in_resource(env):
    shadow = crd(plural="podgroups", kind="PodGroup", short=())
    shadow["metadata"] = {"name": "podgroups.scheduling.k8s.io",
                          "annotations": {"api-approved.kubernetes.io": "unapproved, testing"}}
    shadow["spec"]["group"] = "scheduling.k8s.io"
    shadow["spec"]["versions"][0]["name"] = "v1beta1"
    built_in = env.index.get("scheduling.k8s.io", "v1beta1", "podgroups")
    await env.crds.create(shadow)
    await established(env, "podgroups.scheduling.k8s.io")
    assert env.index.get("scheduling.k8s.io", "v1beta1", "podgroups") is built_in


async def test_validation_ratchets_values_an_update_leaves_alone(env):
    await env.crds.create(crd())
    await established(env, f"widgets.{GROUP}")
    w = env.stack.client.resource(GROUP, "v1", "widgets")
    await w.create({"metadata": {"name": "big", "namespace": "default"}, "spec": {"size": 9}})
    cur = await env.crds.get(f"widgets.{GROUP}")
    tighter = copy.deepcopy(cur)
    tighter["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["size"]["maximum"] = 5
    await env.crds.update(tighter)
    w = env.stack.client.resource(GROUP, "v1", "widgets")
    # size 9 is now too big, but an update that leaves it alone is accepted
    got = await w.patch("big", {"spec": {"color": "red"}}, namespace="default")
    assert got["spec"] == {"size": 9, "color": "red"}
    with pytest.raises(APIError) as e:
        await w.patch("big", {"spec": {"size": 8}}, namespace="default")
    assert e.value.message.endswith("spec.size: Invalid value: 8: spec.size in body should be less than or equal to 5")


async def test_a_status_write_changes_only_status(env):
    c = crd()
    c["spec"]["versions"][0]["subresources"] = {"status": {}}
    c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"] = {
        "type": "object", "properties": {"ready": {"type": "boolean"}}}
    await env.crds.create(c)
    await established(env, f"widgets.{GROUP}")
    w = env.stack.client.resource(GROUP, "v1", "widgets")
    created = await w.create({"metadata": {"name": "s", "namespace": "default"}, "spec": {"size": 1},
                              "status": {"ready": True}})
    assert "status" not in created  # dropped on create when /status exists
    got = await w.patch("s", {"metadata": {"labels": {"a": "b"}}, "spec": {"size": 3}, "status": {"ready": True}},
                        namespace="default", subresource="status")
    assert got["status"] == {"ready": True} and got["spec"]["size"] == 1 and "labels" not in got["metadata"]
    assert got["metadata"]["generation"] == 1


async def test_an_invalid_conversion_ca_bundle_keeps_the_crd_from_being_established(env):
    c = crd(versions=("v1", "v2"))
    c["spec"]["conversion"] = {"strategy": "Webhook", "webhook": {
        "conversionReviewVersions": ["v1"],
        "clientConfig": {"url": "https://convert.example.com/convert", "caBundle": "bm90IGEgY2VydGlmaWNhdGU="}}}
    await env.crds.create(c)

    async def refused():
        got = await env.crds.get(f"widgets.{GROUP}")
        return condition(got, "Established") == ("False", "InvalidCABundle", "The conversion webhook CABundle is invalid")

    assert await eventually(refused)


async def test_a_protected_groups_crd_says_whether_its_api_is_approved(env):
    gated = crd(plural="gates", kind="Gate", short=())
    gated["metadata"] = {"name": "gates.networking.k8s.io",
                         "annotations": {"api-approved.kubernetes.io": "unapproved, experimental"}}
    gated["spec"]["group"] = "networking.k8s.io"
    await env.crds.create(gated)
    await env.crds.create(crd())
    approval = "KubernetesAPIApprovalPolicyConformant"

    async def conformance(want):
        got = await env.crds.get("gates.networking.k8s.io")
        return got if condition(got, approval) == want else None

    got = copy.deepcopy(await eventually(lambda: conformance(
        ("False", "UnapprovedAnnotation", 'not approved: "unapproved, experimental"'))))
    url = "https://github.com/kubernetes/enhancements/pull/1111"
    got["metadata"]["annotations"]["api-approved.kubernetes.io"] = url
    await env.crds.update(got)
    await eventually(lambda: conformance(("True", "ApprovedAnnotation", f"approved in {url}")))
    ours = await established(env, f"widgets.{GROUP}")
    assert condition(ours, approval) is None  # a group of its own: never the condition


def gates_crd() -> dict:
    """A CRD in the built-in networking.k8s.io group, at its v1 and at a v1alpha9 of its own."""
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "gates.networking.k8s.io",
                         "annotations": {"api-approved.kubernetes.io": "unapproved, testing"}},
            "spec": {"group": "networking.k8s.io", "scope": "Namespaced", "names": {"plural": "gates", "kind": "Gate"},
                     "versions": [{"name": v, "served": True, "storage": v == "v1",
                                   "schema": {"openAPIV3Schema": copy.deepcopy(SCHEMA)}} for v in ("v1", "v1alpha9")]}}


async def test_a_crd_version_at_a_built_in_group_version_is_neither_served_nor_discovered(tmp_path):
    """kube-apiserver claims every path of a group version it serves: a CRD's version there is a 404
    and missing from discovery (built-in first), while its other versions are served."""
    gates = gates_crd()
    async with served(tmp_path) as (_, c):
        await call(c, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", gates)
        made = await create_when_served(c, "/apis/networking.k8s.io/v1alpha9/namespaces/default/gates", {
            "apiVersion": "networking.k8s.io/v1alpha9", "kind": "Gate", "metadata": {"name": "g"}, "spec": {"size": 1}})
        assert made["spec"] == {"size": 1, "color": "blue"}
        with pytest.raises(ApiException) as e:
            await call(c, "GET", "/apis/networking.k8s.io/v1/namespaces/default/gates/g")
        assert e.value.status == 404 and json.loads(e.value.body)["message"] == (
            "the server could not find the requested resource")
        listed = await call(c, "GET", "/apis/networking.k8s.io/v1")
        assert "gates" not in [r["name"] for r in listed["resources"]] and "ingresses" in [
            r["name"] for r in listed["resources"]]
        assert [r["name"] for r in (await call(c, "GET", "/apis/networking.k8s.io/v1alpha9"))["resources"]] == ["gates"]


async def test_a_crd_version_added_to_a_built_in_group_becomes_its_preferred_version(tmp_path):
    """The crdregistration controller gives a CRD's group/version an APIService of versionPriority
    100, above every built-in one's (networking.k8s.io/v1: 15): the aggregator, ordering a group's
    versions by versionPriority, makes v1alpha9 the group's preferred version everywhere."""
    async with served(tmp_path) as (_, c):
        before = await call(c, "GET", "/apis/networking.k8s.io")
        assert before["preferredVersion"]["version"] == "v1"
        await call(c, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", gates_crd())
        await create_when_served(c, "/apis/networking.k8s.io/v1alpha9/namespaces/default/gates", {
            "apiVersion": "networking.k8s.io/v1alpha9", "kind": "Gate", "metadata": {"name": "g"}, "spec": {"size": 1}})
        group = await call(c, "GET", "/apis/networking.k8s.io")
        versions = [v["version"] for v in group["versions"]]
        assert versions == ["v1alpha9"] + [v["version"] for v in before["versions"]]
        assert group["preferredVersion"] == {"groupVersion": "networking.k8s.io/v1alpha9", "version": "v1alpha9"}
        [listed] = [g for g in (await call(c, "GET", "/apis"))["groups"] if g["name"] == "networking.k8s.io"]
        assert listed["preferredVersion"]["version"] == "v1alpha9"


async def test_the_served_group_versions_follow_a_crds_creation_and_deletion(env):
    """What discovery serves (`ResourceIndex.group_versions`, kept between changes of the served
    resources) gains a CRD's group version once it is established and loses it once it is gone."""
    assert GROUP not in env.index.group_versions()
    await env.crds.create(crd(versions=("v1", "v2beta1")))
    await established(env, f"widgets.{GROUP}")
    assert env.index.group_versions()[GROUP] == ["v1", "v2beta1"]
    await env.crds.delete(f"widgets.{GROUP}")
    await gone(env, f"widgets.{GROUP}")
    assert GROUP not in env.index.group_versions()


async def test_a_list_is_of_the_crds_accepted_list_kind(tmp_path):
    """kube-apiserver's list of a custom resource (and its deletecollection's answer, and the list's
    OpenAPI definition) is of the CRD's listKind, which need not be <kind>List."""
    named = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
             "metadata": {"name": f"racks.{GROUP}"},
             "spec": {"group": GROUP, "scope": "Namespaced",
                      "names": {"plural": "racks", "kind": "Rack", "listKind": "RackCollection"},
                      "versions": [{"name": "v1", "served": True, "storage": True,
                                    "schema": {"openAPIV3Schema": copy.deepcopy(SCHEMA)}}]}}
    racks = f"/apis/{GROUP}/v1/namespaces/default/racks"
    async with served(tmp_path) as (_, c):
        await call(c, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", named)
        await create_when_served(c, racks, {"apiVersion": f"{GROUP}/v1", "kind": "Rack", "metadata": {"name": "r"},
                                            "spec": {"size": 1}})
        listed = await call(c, "GET", racks)
        assert (listed["kind"], [i["metadata"]["name"] for i in listed["items"]]) == ("RackCollection", ["r"])
        doc = await call(c, "GET", f"/openapi/v3/apis/{GROUP}/v1")
        assert doc["components"]["schemas"]["com.example.v1.RackCollection"]["x-kubernetes-group-version-kind"] == [
            {"group": GROUP, "kind": "RackCollection", "version": "v1"}]
        assert (await call(c, "DELETE", racks))["kind"] == "RackCollection"
