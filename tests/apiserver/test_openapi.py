import asyncio
import hashlib
import os
import shutil
import threading

import orjson
import pytest
from aiohttp import web

from nanokube.apiserver import openapi
from nanokube.registry.base import Resource
from tests.controllers import tries
from tests.served import send, served

RESOURCES = [
    Resource("", "pods", "Pod", ["v1"], True, subresources=("status", "binding", "eviction", "log")),
    Resource("apps", "deployments", "Deployment", ["v1"], True, subresources=("status", "scale")),
    Resource("scheduling.k8s.io", "podgroups", "PodGroup", ["v1beta1"], True, subresources=("status",)),
    Resource("resource.k8s.io", "resourceclaims", "ResourceClaim", ["v1"], True, subresources=("status",)),
    Resource("scheduling.k8s.io", "priorityclasses", "PriorityClass", ["v1"], False),
]
GVK = "x-kubernetes-group-version-kind"


def v2() -> dict:
    return orjson.loads(openapi.build_v2(RESOURCES))


def v3(group: str, version: str) -> dict:
    return orjson.loads(openapi.v3_document(RESOURCES, group, version)[0])


def test_v2_header_and_cached_bytes():
    doc = v2()
    assert doc["swagger"] == "2.0"
    assert doc["info"] == {"title": "Kubernetes", "version": "v1.37.0"}
    assert openapi.build_v2(RESOURCES) is openapi.build_v2(list(RESOURCES))


def test_v2_definitions_are_openapi_not_json_schema():
    defs = v2()["definitions"]
    pod = defs["io.k8s.api.core.v1.Pod"]
    assert pod["type"] == "object"
    assert pod["properties"]["spec"]["$ref"] == "#/definitions/io.k8s.api.core.v1.PodSpec"
    assert "enum" not in pod["properties"]["apiVersion"]
    assert pod[GVK] == [{"group": "", "kind": "Pod", "version": "v1"}]
    containers = defs["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"]
    assert containers["type"] == "array"
    assert containers["x-kubernetes-patch-merge-key"] == "name"
    assert containers["items"] == {"$ref": "#/definitions/io.k8s.api.core.v1.Container"}
    assert defs["io.k8s.api.core.v1.Container"]["required"] == ["name"]
    assert defs["io.k8s.apimachinery.pkg.util.intstr.IntOrString"]["format"] == "int-or-string"
    assert defs["io.k8s.apimachinery.pkg.api.resource.Quantity"]["type"] == "string"
    assert "$defs" not in openapi.build_v2(RESOURCES).decode()


def test_v2_definitions_are_the_reachable_closure():
    defs = v2()["definitions"]
    assert "io.k8s.api.apps.v1.DeploymentList" in defs
    assert "io.k8s.api.autoscaling.v1.Scale" in defs
    assert "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta" in defs
    assert "io.k8s.api.batch.v1.Job" not in defs
    text = openapi.build_v2(RESOURCES).decode()
    for ref in {s.split('"')[0] for s in text.split('"$ref":"#/definitions/')[1:]}:
        assert ref in defs


def test_v2_paths_and_operations():
    paths = v2()["paths"]
    item = paths["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]
    assert set(item) == {"get", "put", "patch", "delete", "parameters"}
    assert item["patch"]["x-kubernetes-action"] == "patch"
    assert item["patch"][GVK] == {"group": "apps", "kind": "Deployment", "version": "v1"}
    assert item["patch"]["operationId"] == "patchAppsV1NamespacedDeployment"
    assert "application/strategic-merge-patch+json" in item["patch"]["consumes"]
    names = {p["name"] for p in item["patch"]["parameters"]}
    assert {"body", "fieldValidation", "fieldManager", "dryRun", "force"} <= names
    scale = paths["/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale"]
    assert scale["put"][GVK] == {"group": "autoscaling", "kind": "Scale", "version": "v1"}
    assert paths["/api/v1/pods"]["get"]["operationId"] == "listCoreV1PodForAllNamespaces"
    assert paths["/api/v1/namespaces/{namespace}/pods/{name}/binding"]["post"][GVK]["kind"] == "Binding"
    assert "/apis/scheduling.k8s.io/v1/priorityclasses/{name}" in paths
    assert paths["/apis/scheduling.k8s.io/v1/watch/priorityclasses"]["get"]["x-kubernetes-action"] == "watchlist"


def test_v2_path_parameters_name_the_kind_each_operation_serves():
    """As upstream's (and the clients generated from it: "name of the PodExecOptions")."""
    rs = RESOURCES + [Resource("", "pods", "Pod", ["v1"], True, subresources=("exec", "proxy"))]
    paths = orjson.loads(openapi.build_v2(rs))["paths"]

    def described(path: str) -> dict[str, str]:
        return {p["name"]: p["description"] for p in paths[path]["parameters"] if p["in"] == "path"}

    pod = "/api/v1/namespaces/{namespace}/pods/{name}"
    assert described(pod) == {"name": "name of the Pod",
                              "namespace": "object name and auth scope, such as for teams and projects"}
    assert described("/api/v1/watch/namespaces/{namespace}/pods/{name}")["name"] == "name of the Pod"
    assert described(pod + "/log")["name"] == "name of the Pod"
    assert described(pod + "/eviction")["name"] == "name of the Eviction"
    assert described(pod + "/exec")["name"] == "name of the PodExecOptions"
    assert described(pod + "/proxy/{path}") == {**described(pod + "/proxy"), "path": "path to the resource"}
    assert described(pod + "/proxy")["name"] == "name of the PodProxyOptions"
    assert described("/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale")["name"] == "name of the Scale"
    assert described("/apis/scheduling.k8s.io/v1/priorityclasses/{name}") == {"name": "name of the PriorityClass"}


def test_v2_honours_verbs():
    rs = [Resource("", "bindings", "Binding", ["v1"], True, verbs=("create",))]
    paths = orjson.loads(openapi.build_v2(rs))["paths"]
    assert set(paths) == {"/api/v1/namespaces/{namespace}/bindings"}
    assert set(paths["/api/v1/namespaces/{namespace}/bindings"]) == {"post", "parameters"}


def test_v3_index_points_at_each_group_version_with_its_hash():
    index = orjson.loads(openapi.build_v3_index(RESOURCES))["paths"]
    assert set(index) == {"api/v1", "apis/apps/v1", "apis/scheduling.k8s.io/v1beta1",
                          "apis/scheduling.k8s.io/v1", "apis/resource.k8s.io/v1"}
    url = index["apis/apps/v1"]["serverRelativeURL"]
    body, digest = openapi.v3_documents(RESOURCES)["apis/apps/v1"]
    assert url == f"/openapi/v3/apis/apps/v1?hash={digest}"
    assert openapi.v3_document(RESOURCES, "apps", "v1") == (body, digest)
    assert digest == hashlib.sha512(body).hexdigest().upper()
    assert openapi.v3_document(RESOURCES, "batch", "v1") is None


def test_v3_doc_schemas_and_paths():
    doc = v3("scheduling.k8s.io", "v1beta1")
    assert doc["openapi"].startswith("3.0")
    schemas = doc["components"]["schemas"]
    pg = schemas["io.k8s.api.scheduling.v1beta1.PodGroup"]
    assert pg[GVK] == [{"group": "scheduling.k8s.io", "kind": "PodGroup", "version": "v1beta1"}]
    # a described reference in allOf, as upstream's v3 (a `$ref`'s siblings are ignored there): kubectl
    # explain podgroup.spec prints the field's description, then PodGroupSpec's
    spec = pg["properties"]["spec"]
    assert spec["allOf"] == [{"$ref": "#/components/schemas/io.k8s.api.scheduling.v1beta1.PodGroupSpec"}]
    assert spec["description"] and "$ref" not in spec
    spec_v2 = openapi.definition_openapi("io.k8s.api.scheduling.v1beta1.PodGroup", openapi.V2_PREFIX, False)
    assert spec_v2["properties"]["spec"]["$ref"] == "#/definitions/io.k8s.api.scheduling.v1beta1.PodGroupSpec"
    assert "io.k8s.api.core.v1.Pod" not in schemas
    patch = doc["paths"]["/apis/scheduling.k8s.io/v1beta1/namespaces/{namespace}/podgroups/{name}"]["patch"]
    assert {"name": "fieldValidation", "in": "query"}.items() <= patch["parameters"][2].items()
    assert "application/apply-patch+yaml" in patch["requestBody"]["content"]
    assert "/apis/scheduling.k8s.io/v1beta1/namespaces/{namespace}/podgroups/{name}/status" in doc["paths"]


def test_v3_int_or_string_and_quantity():
    schemas = v3("apps", "v1")["components"]["schemas"]
    ios = schemas["io.k8s.apimachinery.pkg.util.intstr.IntOrString"]
    assert ios["x-kubernetes-int-or-string"] is True and ios["format"] == "int-or-string"
    assert ios["oneOf"] == [{"type": "integer"}, {"type": "string"}] and "type" not in ios
    assert schemas["io.k8s.apimachinery.pkg.api.resource.Quantity"]["oneOf"] == [{"type": "string"}, {"type": "number"}]


def test_enum_typed_fields_carry_their_values_in_v2_and_v3():
    """kubernetes-validate's definitions have no enums; fields of a `+enum` Go type get them, a list's on its
    items, and (not a list's) kube-openapi's "Possible enum values:" paragraph after their description."""
    pod_spec = v3("", "v1")["components"]["schemas"]["io.k8s.api.core.v1.PodSpec"]["properties"]
    assert pod_spec["restartPolicy"]["enum"] == ["Always", "Never", "OnFailure"]
    assert pod_spec["restartPolicy"]["description"].endswith(
        "#restart-policy\n\nPossible enum values:\n - `\"Always\"`\n - `\"Never\"`\n - `\"OnFailure\"`")
    assert "Possible enum values" not in pod_spec["hostname"]["description"]
    assert "enum" not in pod_spec["hostname"]
    claim = v2()["definitions"]["io.k8s.api.core.v1.PersistentVolumeClaimSpec"]["properties"]
    assert claim["volumeMode"]["enum"] == ["Block", "Filesystem"]
    ephemeral = v2()["definitions"]["io.k8s.api.core.v1.EphemeralContainer"]["properties"]  # (an embedded struct's)
    assert ephemeral["imagePullPolicy"]["enum"] == ["Always", "IfNotPresent", "Never"]
    services = orjson.loads(openapi.build_v2([Resource("", "services", "Service", ["v1"], True)]))["definitions"]
    families = services["io.k8s.api.core.v1.ServiceSpec"]["properties"]["ipFamilies"]
    assert "enum" not in families and families["items"]["enum"] == ["", "IPv4", "IPv6"]
    assert "Possible enum values" not in families["description"]
    hostpath = v2()["definitions"]["io.k8s.api.core.v1.HostPathVolumeSource"]["properties"]["type"]
    assert hostpath["description"].endswith('\n\nPossible enum values:\n - `""`\n - `"BlockDevice"`\n - `"CharDevice"`'
                                            '\n - `"Directory"`\n - `"DirectoryOrCreate"`\n - `"File"`\n - `"FileOrCreate"`'
                                            '\n - `"Socket"`')
    assert "enum" not in services["io.k8s.api.core.v1.ServiceSpec"]["properties"]["clusterIP"]


# --- real kubectl against a minimal server serving the documents ----------------


def _discovery_app() -> web.Application:
    gvs: dict[str, list[Resource]] = {}
    for r in RESOURCES:
        for v in r.versions:
            gvs.setdefault(r.api_version(v), []).append(r)

    def resource_list(gv: str) -> dict:
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": [
            {"name": r.plural, "singularName": r.singular, "namespaced": r.namespaced, "kind": r.kind,
             "verbs": list(r.verbs)} for r in gvs[gv]]}

    async def handle(req: web.Request) -> web.Response:
        path = req.path.strip("/")
        if path == "api":
            body = {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}
        elif path == "apis":
            groups: dict[str, list[str]] = {}
            for gv in gvs:
                if "/" in gv:
                    g, v = gv.split("/")
                    groups.setdefault(g, []).append(v)
            body = {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
                {"name": g, "versions": [{"groupVersion": f"{g}/{v}", "version": v} for v in vs],
                 "preferredVersion": {"groupVersion": f"{g}/{vs[0]}", "version": vs[0]}} for g, vs in groups.items()]}
        elif path in ("api/v1",) or path.startswith("apis/") and path[5:] in gvs:
            body = resource_list(path[4:] if path.startswith("api/") else path[5:])
        elif path == "openapi/v2":
            return web.Response(body=openapi.build_v2(RESOURCES), content_type="application/json")
        elif path == "openapi/v3":
            return web.Response(body=openapi.build_v3_index(RESOURCES), content_type="application/json")
        elif path.startswith("openapi/v3/"):
            entry = openapi.v3_documents(RESOURCES).get(path[len("openapi/v3/"):])
            if entry is None:
                raise web.HTTPNotFound()
            return web.Response(body=entry[0], content_type="application/json")
        else:
            raise web.HTTPNotFound()
        return web.Response(body=orjson.dumps(body), content_type="application/json")

    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", handle)
    return app


@pytest.fixture
async def kubectl(tmp_path):
    if not shutil.which("kubectl"):
        pytest.skip("kubectl not on PATH")
    runner = web.AppRunner(_discovery_app())
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    cfg = tmp_path / "kubeconfig"
    cfg.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: t\n"
        f"clusters: [{{name: t, cluster: {{server: 'http://127.0.0.1:{port}'}}}}]\n"
        "contexts: [{name: t, context: {cluster: t, user: u}}]\nusers: [{name: u, user: {}}]\n")
    env = dict(os.environ, KUBECONFIG=str(cfg), HOME=str(tmp_path))

    async def run(*args: str) -> tuple[int, str]:
        proc = await asyncio.create_subprocess_exec(
            "kubectl", "--cache-dir", str(tmp_path / "cache"), *args, env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        out, _ = await proc.communicate()
        return proc.returncode, out.decode()

    yield run
    await runner.cleanup()


async def test_kubectl_explain_podgroup_spec_via_v3(kubectl):
    rc, out = await kubectl("explain", "podgroup.spec")
    assert rc == 0, out
    assert "GROUP:      scheduling.k8s.io" in out
    assert "KIND:       PodGroup" in out
    assert "VERSION:    v1beta1" in out
    assert "FIELD: spec <PodGroupSpec>" in out
    assert "schedulingPolicy" in out


async def test_kubectl_explain_nested_field_and_recursive(kubectl):
    rc, out = await kubectl("explain", "deployment.spec.strategy.rollingUpdate.maxSurge")
    assert rc == 0, out
    assert "FIELD: maxSurge <IntOrString>" in out
    # the field's own description, then its type's (allOf): it printed IntOrString's alone
    assert "DESCRIPTION:\n    The maximum number of pods that can be scheduled above the desired number of\n" in out
    assert "IntOrString is a type that can hold an int32 or a string." in out
    rc, out = await kubectl("explain", "pods.spec.containers", "--recursive")
    assert rc == 0, out
    assert "resources\t<ResourceRequirements>" in out


async def test_kubectl_explain_prints_enums_and_the_quantity_format(kubectl):
    rc, out = await kubectl("explain", "deployment.spec.strategy")
    assert rc == 0, out
    assert "  type\t<string>\n  enum: Recreate, RollingUpdate\n    Type of deployment." in out
    rc, out = await kubectl("explain", "pods.spec.restartPolicy")
    assert rc == 0, out
    assert "FIELD: restartPolicy <string>\nENUM:\n    Always\n    Never\n    OnFailure\n\nDESCRIPTION:\n" in out
    # kube-openapi's paragraph for a `+enum` type, as upstream's document ends the description with it
    assert "    Default to Always. More info:\n" in out and out.endswith(
        "#restart-policy\n    \n    Possible enum values:\n     - `\"Always\"`\n     - `\"Never\"`\n"
        "     - `\"OnFailure\"`\n    \n\n")
    # Quantity's description says how a quantity is written, as upstream's does (it was one sentence)
    rc, out = await kubectl("explain", "pods.spec.containers.resources.limits")
    assert rc == 0, out
    assert "FIELD: limits <map[string]Quantity>" in out
    assert "<binarySI> ::= Ki | Mi | Gi | Ti | Pi | Ei" in out and '1.5Gi\n    "1536Mi"' in out



async def test_the_v3_index_is_built_off_the_event_loop(tmp_path, monkeypatch):
    """The index hashes every group-version's document, each version of each CRD's: built on the loop, a CRD
    of 841 versions held it 0.6 CPU s at each rebuild (found by fuzzing CRDs with very many versions). It is
    built in a worker, as the documents are, and still lists every version."""
    threads = []
    build = openapi.build_v3_index

    def recorded(resources):
        threads.append(threading.current_thread())
        return build(resources)
    monkeypatch.setattr(openapi, "build_v3_index", recorded)
    schema = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
    versions = [{"name": f"v{i}", "served": True, "storage": i == 1, "schema": schema} for i in range(1, 31)]
    async with served(tmp_path) as (_, c):
        code, got = await send(c, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", {
            "metadata": {"name": "manies.example.com"}, "spec": {"group": "example.com", "scope": "Namespaced",
                                                                 "names": {"plural": "manies", "kind": "Many"}, "versions": versions}})
        assert code == 201, got
        for _ in tries():
            code, index = await send(c, "GET", "/openapi/v3")
            if "apis/example.com/v30" in index["paths"]:
                break
            await asyncio.sleep(0.05)
        else:
            pytest.fail("the CRD's versions were never published")
    assert {f"apis/example.com/v{i}" for i in range(1, 31)} <= set(index["paths"])
    assert threads and threading.main_thread() not in threads


async def test_the_external_metrics_document_holds_the_adapters_route(tmp_path):
    """/openapi/v3's external.metrics.k8s.io/v1beta1 document has the path a custom-metrics adapter's installer
    registers (it had none): one GET per namespace and metric name, listing ExternalMetricValues with
    ListOptions' query parameters, its operation outside any resource's REST (no x-kubernetes-action)."""
    async with served(tmp_path) as (_, c):
        code, index = await send(c, "GET", "/openapi/v3")
        assert code == 200
        code, doc = await send(c, "GET", index["paths"]["apis/external.metrics.k8s.io/v1beta1"]["serverRelativeURL"])
        assert code == 200
    root = "/apis/external.metrics.k8s.io/v1beta1"
    assert list(doc["paths"]) == [f"{root}/namespaces/{{namespace}}/{{resource}}"]
    route = doc["paths"][f"{root}/namespaces/{{namespace}}/{{resource}}"]
    assert [(p["name"], p["in"]) for p in route["parameters"]] == [("namespace", "path"), ("name", "path"),
                                                                    ("pretty", "query")]
    op = route["get"]
    assert (op["operationId"], op["description"]) == ("listExternalMetricValue", "list external metrics")
    assert {"labelSelector", "fieldSelector", "limit", "continue", "watch"} <= {p["name"] for p in op["parameters"]}
    assert "x-kubernetes-action" not in op and "x-kubernetes-group-version-kind" not in op
    listed = op["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
    assert listed == "io.k8s.metrics.pkg.apis.external_metrics.v1beta1.ExternalMetricValueList"
    assert listed in doc["components"]["schemas"]
