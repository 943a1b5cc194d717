"""An apply configuration is typed as structured-merge-diff's ObjectToTyped types it: wrong value
types and undeclared fields, of built-in kinds and custom resources, are refused with the merge
library's messages and paths (list items by their keys), all of them, as a 400 (upstream's 500,
kubernetes#139253, with the same text), and nothing is written."""

from __future__ import annotations


from tests.apiserver.apiextensions import install
from tests.apiserver.test_rest_managedfields import call, refused
from tests.served import served

DEPLOYS = "/apis/apps/v1/namespaces/default/deployments"
APPLY = "application/apply-patch+yaml"
HEAD = "failed to create typed patch object (default/web; apps/v1, Kind=Deployment): "


def deployment(spec: dict | None = None, container: dict | None = None) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "app", "image": "nginx", **(container or {})}]}},
                     **(spec or {})}}


async def test_wrong_types_and_undeclared_fields_of_a_built_in_kind(tmp_path):
    async with served(tmp_path) as (_, api):
        cases = [
            (deployment({"replicas": "three"}), ".spec.replicas: expected numeric (int or float), got string"),
            (deployment({"replicas": True}), ".spec.replicas: expected numeric (int or float), got bool"),
            (deployment({"paused": "yes"}), ".spec.paused: expected boolean, got &{yes}"),
            (deployment({"selector": "app=web"}), ".spec.selector: expected map, got &{app=web}"),
            (deployment(container={"image": 7}),
             '.spec.template.spec.containers[name="app"].image: expected string, got &value.valueUnstructured{Value:7}'),
            (deployment(container={"args": {"a": 1}}),
             '.spec.template.spec.containers[name="app"].args: expected list, got &{map[a:1]}'),
            (deployment(container={"ports": [{"containerPort": 80, "protocol": "TCP", "hostPort": "x"}]}),
             '.spec.template.spec.containers[name="app"].ports[containerPort=80,protocol="TCP"].hostPort: '
             "expected numeric (int or float), got string"),
            (deployment({"strategy": {"rollingUpdate": {"maxSurge": [1]}}}),
             ".spec.strategy.rollingUpdate.maxSurge: expected any scalar, got &{[1]}"),
            (deployment({"foo": 1}), ".spec.foo: field not declared in schema"),
            (deployment(container={"imag": "nginx"}),
             '.spec.template.spec.containers[name="app"].imag: field not declared in schema'),
            # list items that have no path: the rest of the list is not looked at
            (deployment(container={"ports": [{"name": "http", "image": 1}]}),
             '.spec.template.spec.containers[name="app"].ports: element 0: associative list with keys has an '
             'element that omits key field "containerPort" (and doesn\'t have default value)'),
            (deployment({"template": {"spec": {"containers": [{"name": "a"}, None]}}}),
             ".spec.template.spec.containers: element 1: associative list with keys may not have a null element"),
            ({**deployment(), "metadata": {"name": "web", "namespace": "default", "finalizers": ["a/b", {"c": 1}]}},
             ".metadata.finalizers: element 1: associative list without keys has an element that's a map type"),
        ]
        for body, detail in cases:
            assert await refused(api, "PATCH", f"{DEPLOYS}/web", body, "m", content_type=APPLY) == (400, HEAD + detail)
        # every error at once, as the library's ValidationErrors print them
        body = deployment({"replicas": "3", "foo": 1}, {"image": ["x"]})
        assert await refused(api, "PATCH", f"{DEPLOYS}/web", body, "m", content_type=APPLY) == (400, HEAD + (
            "errors:\n  .spec.replicas: expected numeric (int or float), got string\n"
            '  .spec.template.spec.containers[name="app"].image: expected string, got '
            '&value.valueUnstructured{Value:[]interface {}{"x"}}\n'
            "  .spec.foo: field not declared in schema"))
        # whatever fieldValidation says, and nothing was created
        assert (await refused(api, "GET", f"{DEPLOYS}/web"))[0] == 404
        # a value only the decoder refuses keeps the decoder's message
        status, message = await refused(api, "PATCH", f"{DEPLOYS}/web", deployment({"replicas": 2**31}), "m",
                                        content_type=APPLY)
        assert (status, message) == (400, 'Deployment in version "v1" cannot be handled as a Deployment: json: '
                                          "cannot unmarshal number 2147483648 into Go struct field "
                                          "DeploymentSpec.spec.replicas of type int32")
        # the field manager's first check: the configuration is of the endpoint's kind
        for api_version, kind, gvk in [("apps/v1beta1", "Deployment", "apps/v1beta1, Kind=Deployment"),
                                       ("apps/v1", "StatefulSet", "apps/v1, Kind=StatefulSet"),
                                       ("apps/v1", None, "apps/v1, Kind="), ("v1", "Deployment", "/v1, Kind=Deployment"),
                                       ("a/b/c", "Deployment", "/, Kind=")]:
            body = {**deployment({"replicas": "x"}), "apiVersion": api_version, "kind": kind}
            assert await refused(api, "PATCH", f"{DEPLOYS}/web", body, "m", content_type=APPLY) == (
                400, f"invalid object type: {gvk}")
        body = deployment({"replicas": "x"})
        body["metadata"]["managedFields"] = []
        assert await refused(api, "PATCH", f"{DEPLOYS}/web", body, "m", content_type=APPLY) == (
            400, "metadata.managedFields must be nil")
        created = await call(api, "PATCH", f"{DEPLOYS}/web", deployment(), "m", content_type=APPLY)
        assert created["spec"]["replicas"] == 1


async def test_wrong_types_in_a_custom_resource(tmp_path):
    group = "typed.example.com"
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": f"gadgets.{group}"},
           "spec": {"group": group, "scope": "Namespaced", "names": {"plural": "gadgets", "kind": "Gadget"},
                    "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                        "type": "object", "properties": {"spec": {
                            "type": "object", "anyOf": [{"required": ["size"]}, {"required": ["ratio"]}], "properties": {
                            "size": {"type": "integer"}, "ratio": {"type": "number"}, "on": {"type": "boolean"},
                            "template": {"type": "object", "x-kubernetes-embedded-resource": True,
                                         "x-kubernetes-preserve-unknown-fields": True},
                            "port": {"x-kubernetes-int-or-string": True},
                            "items": {"type": "array", "x-kubernetes-list-type": "map",
                                      "x-kubernetes-list-map-keys": ["name"],
                                      "items": {"type": "object", "required": ["name"], "properties": {
                                          "name": {"type": "string"}, "weight": {"type": "integer"}}}},
                            "open": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}}}}]}}
    path = f"/apis/{group}/v1/namespaces/default/gadgets"
    async with served(tmp_path) as (_, api):
        await install(api, crd, path)
        head = "failed to create typed patch object (default/g; typed.example.com/v1, Kind=Gadget): "

        def gadget(spec: dict) -> dict:
            return {"apiVersion": f"{group}/v1", "kind": "Gadget", "metadata": {"name": "g", "namespace": "default"},
                    "spec": spec}
        cases = [
            ({"size": "big"}, ".spec.size: expected numeric (int or float), got string"),
            ({"ratio": {"x": 1}}, ".spec.ratio: expected numeric (int or float), got map[string]interface {}"),
            ({"on": 1.5}, ".spec.on: expected boolean, got &{1.5}"),
            ({"port": {"n": 80}}, ".spec.port: expected any scalar, got &{map[n:80]}"),
            ({"items": [{"name": "a", "weight": "heavy"}]},
             '.spec.items[name="a"].weight: expected numeric (int or float), got string'),
            ({"items": "a"}, ".spec.items: expected list, got &{a}"),
        ]
        for spec, detail in cases:
            assert await refused(api, "PATCH", f"{path}/g", gadget(spec), "m", content_type=APPLY) == (400, head + detail)
        spec = {"size": 1, "port": "http", "open": {"any": [1, {}]},
                "template": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "b"}}}
        applied = await call(api, "PATCH", f"{path}/g", gadget(spec), "m", content_type=APPLY)
        assert applied["spec"] == spec


async def test_field_sets_of_an_apply(tmp_path):
    """The applier's FieldsV1 as structured-merge-diff's ToFieldSet builds it: set items by value,
    map-list items by all their keys, atomic maps and structs as one field, and a struct's field
    applied as `{}` or null is owned (`f:strategy: {}`), not skipped."""
    group = "sets.example.com"
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": f"routers.{group}"},
           "spec": {"group": group, "scope": "Namespaced", "names": {"plural": "routers", "kind": "Router"},
                    "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                        "type": "object", "properties": {"spec": {"type": "object", "properties": {
                            "ports": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "integer"}},
                            "labels": {"type": "object", "x-kubernetes-map-type": "atomic",
                                       "additionalProperties": {"type": "string"}},
                            "limits": {"type": "object", "x-kubernetes-map-type": "atomic",
                                       "properties": {"cpu": {"type": "string"}, "memory": {"type": "string"}}},
                            "routes": {"type": "array", "x-kubernetes-list-type": "map",
                                       "x-kubernetes-list-map-keys": ["port", "host"],
                                       "items": {"type": "object", "required": ["host"], "properties": {
                                           "host": {"type": "string"}, "port": {"type": "integer", "default": 443},
                                           "weight": {"type": "integer"}}}},
                            "tags": {"type": "object", "additionalProperties": {"type": "string"}},
                            "args": {"type": "array", "items": {"type": "string"}},
                            "extra": {"type": "object", "properties": {"a": {"type": "string"}}},
                            "gone": {"type": "object", "nullable": True, "properties": {"a": {"type": "string"}}}}}}}}}]}}
    path = f"/apis/{group}/v1/namespaces/default/routers"
    async with served(tmp_path) as (_, api):
        await install(api, crd, path)
        router = {"apiVersion": f"{group}/v1", "kind": "Router", "metadata": {"name": "r", "namespace": "default"},
                  "spec": {"ports": [80, 443], "labels": {"a": "b"}, "limits": {"cpu": "1"},
                           "routes": [{"host": "a", "port": 80, "weight": 1}, {"host": "b"}], "tags": {"x": "1"},
                           "args": ["-v"],
                           "extra": {}, "gone": None}}
        got = await call(api, "PATCH", f"{path}/r", router, "m", content_type=APPLY)
        assert got["metadata"]["managedFields"][0]["fieldsV1"] == {"f:spec": {
            "f:ports": {"v:80": {}, "v:443": {}}, "f:labels": {}, "f:limits": {},
            "f:routes": {'k:{"host":"a","port":80}': {".": {}, "f:host": {}, "f:port": {}, "f:weight": {}},
                         'k:{"host":"b","port":443}': {".": {}, "f:host": {}}},
            "f:tags": {"f:x": {}}, "f:args": {}, "f:extra": {}, "f:gone": {}}}
        # a custom resource's merged object keeps the null (nullable here; else validation refuses it)
        assert got["spec"]["gone"] is None and got["spec"]["extra"] == {}
        # a key field left out is keyed by its default (the CRD's), which the stored item gets
        assert got["spec"]["routes"][1] == {"host": "b", "port": 443}

        web = deployment({"strategy": {}}, {"resources": {}, "ports": [{"containerPort": 80}]})
        web["metadata"]["finalizers"] = ["example.com/a"]
        web["spec"]["template"]["spec"].update(securityContext={}, nodeSelector={"disk": "ssd"})
        got = await call(api, "PATCH", f"{DEPLOYS}/web", web, "m", content_type=APPLY)
        fields = got["metadata"]["managedFields"][0]["fieldsV1"]
        assert fields["f:metadata"] == {"f:finalizers": {'v:"example.com/a"': {}}}
        assert fields["f:spec"]["f:strategy"] == {} and fields["f:spec"]["f:selector"] == {}
        pod = fields["f:spec"]["f:template"]["f:spec"]
        assert pod["f:securityContext"] == {} and pod["f:nodeSelector"] == {}
        assert pod["f:containers"]['k:{"name":"app"}'] == {
            ".": {}, "f:name": {}, "f:image": {}, "f:resources": {},
            "f:ports": {'k:{"containerPort":80,"protocol":"TCP"}': {".": {}, "f:containerPort": {}}}}
