"""CRDs with CEL validation rules and with a conversion webhook on a real
`nanokube up`, driven with kubectl and the `kubernetes` client: objects that break
a rule are refused with the rule's message and field path (422), a transition
rule compares with the stored object, a rule over upstream's cost limit is
refused when the CRD is written."""

from __future__ import annotations

import json

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from .conftest import wait_for

GROUP = "rules.example.com"


def _crd(plural: str, kind: str, versions: list[dict], **spec) -> dict:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{GROUP}"},
            "spec": {"group": GROUP, "scope": "Namespaced", "versions": versions,
                     "names": {"plural": plural, "singular": kind.lower(), "kind": kind, "listKind": f"{kind}List"},
                     **spec}}


WIDGET_SCHEMA = {"type": "object", "properties": {"spec": {
    "type": "object",
    "x-kubernetes-validations": [
        {"rule": "self.minReplicas <= self.replicas", "message": "replicas must be at least minReplicas",
         "fieldPath": ".replicas"},
        {"rule": "self.replicas >= oldSelf.replicas", "message": "replicas may not decrease",
         "reason": "FieldValueForbidden"}],
    "properties": {
        "replicas": {"type": "integer", "x-kubernetes-validations": [
            {"rule": "self <= 10", "messageExpression": "'replicas ' + string(self) + ' is above 10'"}]},
        "minReplicas": {"type": "integer", "default": 1},
        "endpoint": {"type": "string", "maxLength": 256, "x-kubernetes-validations": [
            {"rule": "isURL(self) && url(self).getScheme() == 'https'", "message": "must be an https URL"}]},
        "cpu": {"type": "string", "maxLength": 32, "x-kubernetes-validations": [
            {"rule": "quantity(self).isLessThan(quantity('8'))", "message": "at most 7.999 CPUs"}]}}}}}


def _install(cluster, crd: dict) -> client.ApiClient:
    """Apply `crd` and wait until it is Established: a client for its resources."""
    cluster.kubectl("apply", "-f", "-", input=json.dumps(crd))
    api = cluster.client()
    ext, name = client.ApiextensionsV1Api(api), crd["metadata"]["name"]

    def established() -> bool:
        conditions = ext.read_custom_resource_definition(name).status.conditions or []
        return any(c.type == "Established" and c.status == "True" for c in conditions)
    wait_for(established, timeout=60, what=f"{name} Established", every=0.05)
    return api


@pytest.fixture(scope="module")
def widgets(cluster):
    return _install(cluster, _crd("widgets", "Widget", [{"name": "v1", "served": True, "storage": True,
                                                          "schema": {"openAPIV3Schema": WIDGET_SCHEMA}}]))


def _widget(name: str, **spec) -> dict:
    return {"apiVersion": f"{GROUP}/v1", "kind": "Widget", "metadata": {"name": name, "namespace": "default"},
            "spec": spec}


def test_kubectl_shows_the_rule_message_and_field_path(cluster, widgets):
    r = cluster.kubectl("apply", "-f", "-", input=json.dumps(_widget("too-many", replicas=12)), check=False)
    assert r.returncode != 0
    assert 'The Widget "too-many" is invalid: spec.replicas: Invalid value: 12: replicas 12 is above 10' in r.stderr
    r = cluster.kubectl("create", "-f", "-", input=json.dumps(_widget("below-min", replicas=2, minReplicas=3)),
                        check=False)
    # the rule sits on spec (an object), so its value is not shown even with fieldPath
    assert r.stderr.strip() == ('The Widget "below-min" is invalid: spec.replicas: Invalid value: replicas must be at '
                                "least minReplicas")


def test_status_422_with_causes_and_several_rules(widgets):
    co = client.CustomObjectsApi(widgets)
    with pytest.raises(ApiException) as e:
        co.create_namespaced_custom_object(GROUP, "v1", "default", "widgets",
                                           _widget("bad", replicas=3, endpoint="http://x", cpu="16"))
    assert e.value.status == 422, e.value.body
    status = json.loads(e.value.body)
    assert status["reason"] == "Invalid"
    causes = {(c["field"], c["message"]) for c in status["details"]["causes"]}
    assert causes == {("spec.endpoint", 'Invalid value: "http://x": must be an https URL'),
                      ("spec.cpu", 'Invalid value: "16": at most 7.999 CPUs')}
    assert status["message"].startswith('Widget.rules.example.com "bad" is invalid: [')


def test_valid_object_is_stored_and_the_transition_rule_applies_on_update(cluster, widgets):
    co = client.CustomObjectsApi(widgets)
    created = co.create_namespaced_custom_object(GROUP, "v1", "default", "widgets",
                                                 _widget("ok", replicas=4, endpoint="https://example.com/a", cpu="500m"))
    assert created["spec"]["minReplicas"] == 1  # defaulted before the rules ran
    with pytest.raises(ApiException) as e:
        co.patch_namespaced_custom_object(GROUP, "v1", "default", "widgets", "ok", {"spec": {"replicas": 2}})
    assert e.value.status == 422
    assert json.loads(e.value.body)["details"]["causes"] == [
        {"reason": "FieldValueForbidden", "message": "Forbidden: replicas may not decrease", "field": "spec"}]
    patched = co.patch_namespaced_custom_object(GROUP, "v1", "default", "widgets", "ok", {"spec": {"replicas": 6}})
    assert patched["spec"]["replicas"] == 6


def test_rule_errors_refuse_the_crd(cluster, widgets):
    bad = _crd("gadgets", "Gadget", [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
        "type": "object", "properties": {"spec": {"type": "object", "properties": {
            "tags": {"type": "array", "items": {"type": "string"}}},
            "x-kubernetes-validations": [{"rule": "self.tags.all(t, t.contains('gpu'))"},
                                         {"rule": "self.nope == 1"}]}}}}}])
    r = cluster.kubectl("apply", "-f", "-", input=json.dumps(bad), check=False)
    assert r.returncode != 0
    base = "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations"  # one version: the spec's
    assert (f"{base}[0].rule: Forbidden: estimated rule cost exceeds budget by factor of more than 100x (try "
            "simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings "
            "are declared)") in r.stderr
    assert "undefined field 'nope'" in r.stderr


# -- conversion webhook ------------------------------------------------------

BOX_SCHEMAS = {
    "v1": {"type": "object", "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}},
    "v2": {"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "size": {"type": "object", "properties": {"value": {"type": "integer"}}}}}}},
}


def _to_version(obj: dict, desired: str) -> dict:
    """The test's conversion: v1 has spec.size as an int, v2 as spec.size.value."""
    spec = dict(obj.get("spec") or {})
    if desired.endswith("/v2") and not isinstance(spec.get("size"), dict):
        spec["size"] = {"value": spec.get("size", 0)}
    elif desired.endswith("/v1") and isinstance(spec.get("size"), dict):
        spec["size"] = spec["size"].get("value", 0)
    labels = {**(obj["metadata"].get("labels") or {}), "converted-to": desired.rpartition("/")[2]}
    return {**obj, "apiVersion": desired, "spec": spec, "metadata": {**obj["metadata"], "labels": labels}}


def _review(review: dict) -> dict:
    req = review["request"]
    return {"apiVersion": review["apiVersion"], "kind": "ConversionReview",
            "response": {"uid": req["uid"], "result": {"status": "Success"},
                         "convertedObjects": [_to_version(o, req["desiredAPIVersion"]) for o in req["objects"]]}}


def _box_crd(hook, storage: str, plural: str = "boxes", kind: str = "Box") -> dict:
    return _crd(plural, kind, [{"name": v, "served": True, "storage": v == storage,
                                "schema": {"openAPIV3Schema": BOX_SCHEMAS[v]}} for v in ("v1", "v2")],
                conversion={"strategy": "Webhook", "webhook": {
                    "conversionReviewVersions": ["v1"],
                    "clientConfig": {"url": hook.url("/convert"), "caBundle": hook.ca.bundle}}})


@pytest.fixture(scope="module")
def hook():
    from tests.apiserver.admission.server import WebhookServer

    s = WebhookServer().start()
    s.handlers["/convert"] = _review
    yield s
    s.stop()


@pytest.fixture(scope="module")
def boxes(cluster, hook):
    """Stored at v1 throughout (the storage-version test changes a CRD of its own)."""
    return _install(cluster, _box_crd(hook, "v1"))


@pytest.fixture(scope="module")
def crates(cluster, hook):
    """Boxes under another name, stored at v2 from the start."""
    return _install(cluster, _box_crd(hook, "v2", "crates", "Crate"))


def _box(version: str, name: str, size, kind: str = "Box") -> dict:
    return {"apiVersion": f"{GROUP}/{version}", "kind": kind, "metadata": {"name": name, "namespace": "default"},
            "spec": {"size": size}}


def test_written_at_one_version_read_at_the_other(cluster, hook, boxes):
    hook.calls.clear()
    cluster.kubectl("apply", "-f", "-", input=json.dumps(_box("v1", "small", 3)))
    co = client.CustomObjectsApi(boxes)
    got = co.get_namespaced_custom_object(GROUP, "v2", "default", "boxes", "small")
    assert got["apiVersion"] == f"{GROUP}/v2" and got["spec"] == {"size": {"value": 3}}
    assert got["metadata"]["labels"] == {"converted-to": "v2"}  # labels come from the webhook
    reviews = hook.calls_to("/convert")
    assert reviews and all(r["request"]["desiredAPIVersion"] == f"{GROUP}/v2" for r in reviews)

    cluster.kubectl("apply", "-f", "-", input=json.dumps(_box("v2", "large", {"value": 9})))
    as_v1 = cluster.kubectl_json("get", f"boxes.v1.{GROUP}", "large")
    assert as_v1["apiVersion"] == f"{GROUP}/v1" and as_v1["spec"] == {"size": 9}
    listed = co.list_namespaced_custom_object(GROUP, "v2", "default", "boxes")
    assert sorted((o["metadata"]["name"], o["spec"]["size"]["value"]) for o in listed["items"]) == [
        ("large", 9), ("small", 3)]


def test_storage_version_change_updates_stored_versions(cluster, hook):
    api = _install(cluster, _box_crd(hook, "v1", "bins", "Bin"))  # its own: other tests keep their storage
    ext = client.ApiextensionsV1Api(api)
    assert ext.read_custom_resource_definition(f"bins.{GROUP}").status.stored_versions == ["v1"]
    cluster.kubectl("apply", "-f", "-", input=json.dumps(_box_crd(hook, "v2", "bins", "Bin")))
    wait_for(lambda: ext.read_custom_resource_definition(f"bins.{GROUP}").status.stored_versions == ["v1", "v2"],
             timeout=60, what="storedVersions [v1, v2]", every=0.05)
    cluster.kubectl("apply", "-f", "-", input=json.dumps(_box("v1", "new", 4, "Bin")))
    co = client.CustomObjectsApi(api)
    assert co.get_namespaced_custom_object(GROUP, "v1", "default", "bins", "new")["spec"] == {"size": 4}
    assert co.get_namespaced_custom_object(GROUP, "v2", "default", "bins", "new")["spec"] == {"size": {"value": 4}}


def test_failing_webhook_fails_the_read_with_upstream_message(cluster, hook, crates):
    # written at the storage version (v2): no conversion on the way in
    cluster.kubectl("apply", "-f", "-", input=json.dumps(_box("v2", "fresh", {"value": 1}, "Crate")))
    hook.handlers["/convert"] = lambda review: {
        "apiVersion": review["apiVersion"], "kind": "ConversionReview",
        "response": {"uid": review["request"]["uid"], "result": {"status": "Failure", "message": "no way"}}}
    try:
        r = cluster.kubectl("get", f"crates.v1.{GROUP}", "fresh", check=False)
        # a delete reads the object at its version first (Store.Delete's Get): it fails alike
        gone = cluster.kubectl("delete", f"crates.v1.{GROUP}", "fresh", check=False)
    finally:
        hook.handlers["/convert"] = _review
    assert r.returncode != 0
    # kube-apiserver answers a failed conversion with a 500 Status without a reason
    assert r.stderr.strip() == f"Error from server: conversion webhook for {GROUP}/v2, Kind=Crate failed: no way"
    assert gone.stderr.strip() == r.stderr.strip()
    assert cluster.kubectl_json("get", f"crates.v1.{GROUP}", "fresh")["spec"] == {"size": 1}
