"""The API requests behind the console's views, over HTTP as the page makes them: every read the
page makes is one examples/console/viewer.yaml grants (the informers' lists and watches, a
workload's owner chain, pods/log); a token without pods/log gets upstream's 403 Status, whose
message the log view shows; and an object's events are those whose involvedObject.uid is its uid,
in its namespace or (a node's) across all; a CRD's workloads are read once discovery lists them."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import yaml
from kubernetes import client, utils

from nanokube.ui.serving import STATIC
from tests.served import send, served
from tests.ui.test_serving import get

VIEWER = Path(__file__).resolve().parents[2] / "examples" / "console" / "viewer.yaml"
CONSOLE = "system:serviceaccount:kube-system:console"


def _page_reads() -> list[tuple[str, str, str, str]]:
    """(verb, group, resource, subresource) of each read console.js makes, found in its source."""
    js = (STATIC / "console.js").read_text()
    informers = re.findall(r'new Informer\("([^"]*)", "[^"]+", "([^"]+)"', js)
    owners = re.findall(r'"/apis/([^/]+)/v1/namespaces/NS/([a-z]+)"', js)
    assert len(informers) >= 12 and len(owners) == 3, (informers, owners)
    reads = [(verb, group, plural, "") for group, plural in informers + owners for verb in ("list", "watch")]
    return reads + [("get", "", "pods", ""), ("get", "", "pods", "log")]


async def _allowed(api, user: str, verb: str, group: str, resource: str, subresource: str) -> bool:
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {
        "user": user, "groups": ["system:serviceaccounts", "system:authenticated"],
        "resourceAttributes": {"verb": verb, "group": group, "resource": resource, "subresource": subresource,
                               "namespace": "default"}}}
    code, body = await send(api, "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", review)
    assert code == 201, body
    return body["status"]["allowed"]


async def test_the_viewer_role_grants_every_read_the_page_makes(tmp_path):
    async with served(tmp_path) as (_, api):
        for doc in yaml.safe_load_all(VIEWER.read_text()):
            await asyncio.to_thread(utils.create_from_dict, api, doc)
        reads = _page_reads()
        denied = [r for r in reads if not await _allowed(api, CONSOLE, *r)]
        assert denied == [], denied
        assert not await _allowed(api, CONSOLE, "delete", "", "pods", "")  # and nothing but reads


async def _token(api, rules: list[dict]) -> str:
    """A ServiceAccount's token in `default`, bound to a Role of `rules` there."""
    core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
    await asyncio.to_thread(core.create_namespaced_service_account, "default", {"metadata": {"name": "reader"}})
    await asyncio.to_thread(rbac.create_namespaced_role, "default", {"metadata": {"name": "reader"}, "rules": rules})
    await asyncio.to_thread(rbac.create_namespaced_role_binding, "default", {
        "metadata": {"name": "reader"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": "default"}]})
    return (await asyncio.to_thread(core.create_namespaced_service_account_token, "reader", "default",
                                    {"spec": {}})).status.token


async def test_a_token_without_pods_log_is_told_so_in_upstreams_words(tmp_path):
    async with served(tmp_path) as (server, api):
        token = await _token(api, [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}])
        bearer = {"Authorization": f"Bearer {token}"}
        for _ in range(100):  # the authorizer reads the binding from the watch cache
            if (await get(server, "/api/v1/namespaces/default/pods", bearer))[0] == 200:
                break
            await asyncio.sleep(0.05)
        code, headers, body = await get(
            server, "/api/v1/namespaces/default/pods/trainer/log?container=main&tailLines=1000&follow=true", bearer)
        status = json.loads(body)
        assert (code, headers["Content-Type"], status["kind"], status["reason"]) == (
            403, "application/json", "Status", "Forbidden")
        assert status["message"] == ('pods "trainer" is forbidden: User "system:serviceaccount:default:reader" cannot '
                                     'get resource "pods/log" in API group "" in the namespace "default"')


def _event(name: str, namespace: str, involved: dict) -> dict:
    return {"metadata": {"name": name, "namespace": namespace}, "involvedObject": involved, "reason": name,
            "message": name, "type": "Normal", "source": {"component": "test"}}


async def test_an_objects_events_are_found_by_its_uid(tmp_path):
    """A pod or node recreated under its name has a new uid: its predecessor's events are not its own.
    A node's events are read across namespaces, as the page reads a cluster-scoped object's."""
    async with served(tmp_path) as (_, api):
        core = client.CoreV1Api(api)
        pod = {"kind": "Pod", "name": "trainer", "namespace": "default"}
        for name, involved, ns in [("mine", {**pod, "uid": "u-2"}, "default"), ("before", {**pod, "uid": "u-1"}, "default"),
                                   ("node-mine", {"kind": "Node", "name": "gpu-0", "uid": "n-1"}, "default"),
                                   ("node-before", {"kind": "Node", "name": "gpu-0", "uid": "n-0"}, "default")]:
            await asyncio.to_thread(core.create_namespaced_event, ns, _event(name, ns, involved))
        code, body = await send(api, "GET", "/api/v1/namespaces/default/events?fieldSelector=involvedObject.uid%3Du-2")
        assert code == 200 and [e["reason"] for e in body["items"]] == ["mine"]
        code, body = await send(api, "GET", "/api/v1/events?fieldSelector=involvedObject.uid%3Dn-1&limit=500")
        assert code == 200 and [e["reason"] for e in body["items"]] == ["node-mine"]


async def test_a_crds_workloads_are_read_once_discovery_lists_their_group_version(tmp_path):
    """The Apps section reads JobSets and LeaderWorkerSets only while /apis lists their group version
    (a poll of an absent CRD would be a 404 each time): absent before the CRD, listed after it."""
    crd = yaml.safe_load((Path(__file__).resolve().parents[1] / "fixtures" / "crds" /
                          "leaderworkerset.x-k8s.io_leaderworkersets.yaml").read_text())

    def served_versions(groups: dict) -> list[str]:
        return [v["version"] for g in groups["groups"] if g["name"] == "leaderworkerset.x-k8s.io" for v in g["versions"]]

    async with served(tmp_path) as (_, api):
        assert served_versions((await send(api, "GET", "/apis"))[1]) == []
        await asyncio.to_thread(utils.create_from_dict, api, crd)
        for _ in range(100):
            if served_versions((await send(api, "GET", "/apis"))[1]):
                break
            await asyncio.sleep(0.05)
        assert "v1" in served_versions((await send(api, "GET", "/apis"))[1])
        code, body = await send(api, "GET", "/apis/leaderworkerset.x-k8s.io/v1/namespaces/default/leaderworkersets?limit=500")
        assert (code, body["items"]) == (200, [])


async def test_a_references_kind_is_resolved_by_its_group_versions_discovery(tmp_path):
    """An owner's or an event's link names a kind; the view it opens (openRef) reads the group version's
    APIResourceList and takes the kind's resource from it: Endpoints is `endpoints` and a CRD's kind
    its own plural, which no English plural rule gives."""
    js = (STATIC / "console.js").read_text()
    assert "ref: openRef" in js and "list.resources" in js and "pluralOf" not in js
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "cacti.example.com"},
           "spec": {"group": "example.com", "scope": "Namespaced",
                    "names": {"plural": "cacti", "singular": "cactus", "kind": "Cactus", "listKind": "CactusList"},
                    "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                        "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}

    def kinds(body: dict) -> dict[str, str]:
        return {r["kind"]: r["name"] for r in body.get("resources", []) if "/" not in r["name"]}

    async with served(tmp_path) as (_, api):
        code, body = await send(api, "GET", "/api/v1")
        assert code == 200 and kinds(body)["Endpoints"] == "endpoints" and kinds(body)["Pod"] == "pods"
        await asyncio.to_thread(utils.create_from_dict, api, crd)
        for _ in range(100):
            code, body = await send(api, "GET", "/apis/example.com/v1")
            if code == 200 and "Cactus" in kinds(body):
                break
            await asyncio.sleep(0.05)
        assert kinds(body)["Cactus"] == "cacti"
        code, _ = await send(api, "POST", "/apis/example.com/v1/namespaces/default/cacti",
                             {"apiVersion": "example.com/v1", "kind": "Cactus", "metadata": {"name": "saguaro"}})
        assert code == 201
        code, obj = await send(api, "GET", "/apis/example.com/v1/namespaces/default/cacti/saguaro")
        assert code == 200 and obj["metadata"]["name"] == "saguaro"
