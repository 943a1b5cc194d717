"""--audit-policy-file: an audit.k8s.io/v1 Policy decides, rule by rule, the level and stages at which
each request (reads and non-resource URLs too) is audited, driven by kubectl and raw HTTP against
a real server as kube-apiserver's audit tests drive theirs (test/integration/apiserver/audit)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import aiohttp
import orjson
import pytest

from nanokube.apiserver.app import APIServer
from nanokube.apiserver.audit_policy import PolicyError, load
from nanokube.apiserver.rest import SYSTEM, WriteOptions
from nanokube.pki.ca import ensure_pki
from nanokube.pki.kubeconfig import write_kubeconfig
from nanokube.store.memory import MemoryStore
from tests.apiserver.test_longrunning_requests import EchoNode, _log
from tests.apiserver.test_request_body import admin_context

KUBECTL = str(Path(sys.executable).parent / "kubectl")

POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitManagedFields: true
rules:
  - level: None
    users: ["system:anonymous"]
    nonResourceURLs: ["/version"]
  - level: Metadata
    resources: [{group: "", resources: ["secrets"]}]
  - level: RequestResponse
    resources: [{group: "", resources: ["configmaps"]}]
    omitStages: ["RequestReceived"]
  - level: Request
    resources: [{group: "", resources: ["pods/*"], resourceNames: ["one"]}]
    omitManagedFields: false
  - level: Metadata
    nonResourceURLs: ["/healthz*", "/version"]
  - level: None
    users: ["alice"]
  - level: Metadata
    users: ["kubernetes-super-admin"]
    resources: [{group: "", resources: ["serviceaccounts"]}]
"""


class Cluster:
    def __init__(self, tmp_path: Path, server: APIServer):
        self.tmp_path, self.server, self.log = tmp_path, server, tmp_path / "audit.log"
        self.kubeconfig = tmp_path / "kubeconfig"

    async def kubectl(self, *args: str) -> str:
        r = await asyncio.to_thread(subprocess.run, [KUBECTL, "--kubeconfig", str(self.kubeconfig), *args],
                                    capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        return r.stdout

    def events(self, **match) -> list[dict]:
        """The admin's events (the in-process components write too) whose fields equal `match`."""
        out = []
        for line in self.log.read_bytes().splitlines():
            ev = orjson.loads(line)
            if ev["user"]["username"] in ("kubernetes-super-admin", "system:anonymous") and \
                    all(ev.get(k) == v for k, v in match.items()):
                out.append(ev)
        return out

    def by_resource(self, resource: str) -> list[dict]:
        return [e for e in self.events() if e.get("objectRef", {}).get("resource") == resource]


@pytest.fixture
async def cluster(tmp_path):
    (tmp_path / "policy.yaml").write_text(POLICY)
    pki = ensure_pki(str(tmp_path))
    server = APIServer(MemoryStore(), pki, port=0, audit_log_path=str(tmp_path / "audit.log"),
                       audit_policy=load(tmp_path / "policy.yaml"))
    server.rest.admission.disable("ServiceAccount")
    await server.start()
    node = EchoNode()
    server.handlers.streams.node_servers.append(lambda name: node if name == "n1" else None)

    async def logs(namespace, name, container, query):
        if query.get("previous"):
            raise RuntimeError("a bug")  # (what the Panic stage reports)
        return await _log(node, namespace, name, container, query)
    server.handlers.sub.log_readers.append(logs)
    for name in ("one", "two"):
        await server.rest.create(server.index.get("", "v1", "pods"), "v1", "default", {
            "metadata": {"name": name}, "spec": {"nodeName": "n1", "containers": [{"name": "app", "image": "x"}]}},
            WriteOptions(user=SYSTEM))
    write_kubeconfig(str(tmp_path / "kubeconfig"), server.url, pki)
    c = Cluster(tmp_path, server)
    c.node = node
    yield c
    await server.stop()


async def test_a_configmap_rule_at_request_response_logs_bodies_and_omits_its_stage(cluster):
    await cluster.kubectl("create", "configmap", "c", "--from-literal=k=v")
    await cluster.kubectl("patch", "configmap", "c", "-p", '{"data":{"k":"w"}}')
    await cluster.kubectl("get", "configmap", "c", "-o", "json")
    await cluster.kubectl("get", "configmaps", "-o", "json")
    events = cluster.by_resource("configmaps")
    assert [(e["verb"], e["stage"], e["level"]) for e in events] == [
        ("create", "ResponseComplete", "RequestResponse"), ("get", "ResponseComplete", "RequestResponse"),
        ("patch", "ResponseComplete", "RequestResponse"), ("get", "ResponseComplete", "RequestResponse"),
        ("list", "ResponseComplete", "RequestResponse")]  # (kubectl patch gets the object first)
    create, _, patch, get, listed = events
    assert create["requestObject"]["data"] == {"k": "v"} and create["requestObject"]["kind"] == "ConfigMap"
    # the objectRef is the request's: a create's body carries no uid, and upstream logs none (kubernetes#100466)
    assert create["responseObject"]["metadata"]["uid"] and "uid" not in create["objectRef"]
    assert patch["requestObject"] == {"data": {"k": "w"}}  # the patch, as sent
    assert patch["responseObject"]["data"] == {"k": "w"}
    assert get["responseObject"]["metadata"]["name"] == "c" and "requestObject" not in get
    assert [i["metadata"]["name"] for i in listed["responseObject"]["items"]] == ["c"]
    for e in (create, patch, get):  # omitManagedFields
        assert "managedFields" not in e["responseObject"]["metadata"]
    assert "managedFields" not in listed["responseObject"]["items"][0]["metadata"]
    assert "managedFields" in (await cluster.kubectl("get", "cm", "c", "-o", "json", "--show-managed-fields"))


async def test_a_secret_rule_at_metadata_logs_no_bodies_and_every_stage(cluster):
    await cluster.kubectl("create", "secret", "generic", "s", "--from-literal=password=hunter2")
    await cluster.kubectl("get", "secret", "s", "-o", "yaml")
    events = cluster.by_resource("secrets")
    assert [(e["verb"], e["stage"]) for e in events] == [
        ("create", "RequestReceived"), ("create", "ResponseComplete"), ("get", "RequestReceived"),
        ("get", "ResponseComplete")]
    assert events[0]["auditID"] == events[1]["auditID"] != events[2]["auditID"]
    assert "responseStatus" not in events[0] and events[1]["responseStatus"] == {"metadata": {}, "code": 201}
    assert events[0]["requestReceivedTimestamp"] == events[0]["stageTimestamp"] == events[1]["requestReceivedTimestamp"]
    assert events[1]["objectRef"]["name"] == "s" and "uid" not in events[0]["objectRef"]
    assert not any("requestObject" in e or "responseObject" in e for e in events)
    assert b"hunter2" not in cluster.log.read_bytes() and b"aHVudGVyMg" not in cluster.log.read_bytes()


async def test_what_no_rule_matches_is_not_audited(cluster):
    await cluster.kubectl("get", "pods")
    await cluster.kubectl("get", "pod", "two")
    await cluster.kubectl("create", "namespace", "other")
    assert cluster.by_resource("pods") == [] and cluster.by_resource("namespaces") == []


async def test_non_resource_urls_and_a_user_a_none_rule_excludes(cluster):
    await cluster.kubectl("get", "--raw", "/healthz")
    await cluster.kubectl("get", "--raw", "/healthz/ping")
    await cluster.kubectl("get", "--raw", "/version")
    await cluster.kubectl("get", "--raw", "/readyz")
    async with aiohttp.ClientSession() as http:  # no client certificate: system:anonymous
        async with http.get(f"{cluster.server.url}/version", ssl=False) as r:
            assert r.status == 200
        async with http.get(f"{cluster.server.url}/healthz", ssl=False) as r:
            assert r.status == 200
    done = cluster.events(stage="ResponseComplete")
    assert [(e["user"]["username"], e["requestURI"], e["verb"]) for e in done] == [
        ("kubernetes-super-admin", "/healthz", "get"), ("kubernetes-super-admin", "/healthz/ping", "get"),
        ("kubernetes-super-admin", "/version", "get"), ("system:anonymous", "/healthz", "get")]
    assert all("objectRef" not in e and e["level"] == "Metadata" and e["responseStatus"]["code"] == 200 for e in done)


async def test_an_impersonating_request_is_audited_as_its_requester_with_whom_it_impersonates(cluster):
    """The policy matches the authenticated user, as upstream's audit filter runs before impersonation's:
    alice's `level: None` does not hide what the admin does as alice."""
    await cluster.kubectl("get", "serviceaccounts", "--as", "alice", "--as-group", "system:masters")
    received, ev = cluster.by_resource("serviceaccounts")
    assert received["stage"] == "RequestReceived" and "impersonatedUser" not in received  # (not yet known upstream)
    assert ev["user"] == received["user"] == {"username": "kubernetes-super-admin",
                                              "groups": ["system:masters", "system:authenticated"]}
    assert ev["impersonatedUser"] == {"username": "alice", "groups": ["system:masters", "system:authenticated"]}
    assert ev["verb"] == "list" and ev["stage"] == "ResponseComplete"


async def test_a_watch_and_an_exec_have_a_response_started_stage(cluster):
    await cluster.kubectl("create", "configmap", "w")
    ctx = admin_context(cluster.server.pki, cluster.tmp_path)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx)) as http:
        async with http.get(f"{cluster.server.url}/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=1") as r:
            assert r.status == 200 and b"ADDED" in await r.read()
        url = f"{cluster.server.url}/api/v1/namespaces/default/pods/one/exec?command=cat&stdin=true&stdout=true"
        async with http.ws_connect(url.replace("https:", "wss:"), protocols=("v5.channel.k8s.io",)) as ws:
            await ws.send_bytes(b"\x00ping")
            while (await ws.receive_bytes()) != b"\x01ping":
                pass
            await ws.send_bytes(bytes([255, 0]))
            _ = [m async for m in ws]
        async with http.get(f"{cluster.server.url}/api/v1/namespaces/default/pods/two/log") as r:
            assert r.status == 200  # pods/* of another pod than resourceNames' "one": not audited
        cluster.node.done.set()
    for _ in range(100):  # the exec's last event is written once its handler returns
        if cluster.events(verb="get", stage="ResponseComplete", level="Request"):
            break
        await asyncio.sleep(0.01)
    watch = [e for e in cluster.by_resource("configmaps") if e["verb"] == "watch"]
    assert [e["stage"] for e in watch] == ["ResponseStarted", "ResponseComplete"]
    assert watch[0]["responseStatus"]["code"] == 200 and watch[0]["auditID"] == watch[1]["auditID"]
    assert "responseObject" not in watch[1]
    execs = [e for e in cluster.by_resource("pods")]
    assert [(e["stage"], e["objectRef"].get("subresource"), e["objectRef"]["name"]) for e in execs] == [
        ("RequestReceived", "exec", "one"), ("ResponseStarted", "exec", "one"), ("ResponseComplete", "exec", "one")]
    assert execs[1]["responseStatus"]["code"] == 101 and len({e["auditID"] for e in execs}) == 1


async def test_a_log_read_that_does_not_follow_is_long_running_too(cluster):
    """kube-apiserver's LongRunningFunc names the log subresource whatever the query says: a plain read has
    its ResponseStarted event as its headers go out, before its ResponseComplete."""
    ctx = admin_context(cluster.server.pki, cluster.tmp_path)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx)) as http:
        async with http.get(f"{cluster.server.url}/api/v1/namespaces/default/pods/one/log") as r:
            assert r.status == 200, await r.text()
    for _ in range(100):
        if cluster.events(verb="get", stage="ResponseComplete"):
            break
        await asyncio.sleep(0.01)
    logs = cluster.by_resource("pods")
    assert [(e["stage"], e["objectRef"].get("subresource")) for e in logs] == [
        ("RequestReceived", "log"), ("ResponseStarted", "log"), ("ResponseComplete", "log")]
    assert logs[1]["responseStatus"]["code"] == 200 and len({e["auditID"] for e in logs}) == 1


async def test_a_legacy_tokens_warning_is_not_on_an_execs_protocol_switch(cluster):
    """Upstream relays the kubelet's 101, which has no Warning of the API server's; a plain read has it."""
    from tests.apiserver.auth.test_legacy_token_tracking import AUTO_WARNING
    from tests.apiserver.test_audit_authentication import auto_generated_token, without_certificate

    server = cluster.server
    admin_ctx = admin_context(server.pki, cluster.tmp_path)
    async with aiohttp.ClientSession(server.url, connector=aiohttp.TCPConnector(ssl=admin_ctx)) as admin:
        token = await auto_generated_token(server, admin, "edit")
    async with without_certificate(server, {"Authorization": f"Bearer {token}"}) as robot:
        async with robot.get("/api/v1/namespaces/default/pods") as r:
            assert r.status == 200 and r.headers.getall("Warning", []) == [AUTO_WARNING]
        upgrade = {"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
                   "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Protocol": "v5.channel.k8s.io"}
        async with robot.get("/api/v1/namespaces/default/pods/one/exec?command=cat&stdin=true&stdout=true",
                             headers=upgrade) as r:
            assert r.status == 101 and r.headers.getall("Warning", []) == []
        cluster.node.done.set()


async def test_an_in_process_components_writes_are_audited_by_the_policy(cluster):
    """The controllers' loopback client: its writes never cross HTTP, yet are audited as any client's."""
    from nanokube.apiserver.loopback import LocalClient
    from nanokube.machinery.user import User

    kcm = LocalClient(cluster.server.rest, User("system:kube-controller-manager", ("system:authenticated",)))
    cms = kcm.resource("", "v1", "configmaps")
    await cms.create({"metadata": {"name": "by-kcm", "namespace": "default"}, "data": {"a": "1"}})
    await cms.patch("by-kcm", {"data": {"a": "2"}}, namespace="default")
    await kcm.resource("", "v1", "secrets").create({"metadata": {"name": "s", "namespace": "default"}})
    await kcm.resource("", "v1", "pods").patch("two", {"metadata": {"labels": {"x": "y"}}}, namespace="default")
    mine = [orjson.loads(line) for line in cluster.log.read_bytes().splitlines()]
    mine = [e for e in mine if e["user"]["username"] == "system:kube-controller-manager"]
    assert [(e["verb"], e["objectRef"]["resource"], e["stage"], e["level"]) for e in mine] == [
        ("create", "configmaps", "ResponseComplete", "RequestResponse"),
        ("patch", "configmaps", "ResponseComplete", "RequestResponse"),
        ("create", "secrets", "RequestReceived", "Metadata"), ("create", "secrets", "ResponseComplete", "Metadata")]
    create, patch = mine[:2]
    assert create["requestObject"] == {"metadata": {"name": "by-kcm", "namespace": "default"}, "data": {"a": "1"}}
    assert create["responseObject"]["metadata"]["uid"] and "managedFields" not in create["responseObject"]["metadata"]
    assert patch["requestObject"] == {"data": {"a": "2"}} and patch["responseObject"]["data"] == {"a": "2"}
    assert patch["requestURI"] == "/api/v1/namespaces/default/configmaps/by-kcm"
    assert "requestObject" not in mine[3] and "responseObject" not in mine[3]
    assert "name" not in mine[2]["objectRef"] and mine[3]["objectRef"]["name"] == "s"  # (a create names none)


async def test_an_unhandled_exception_is_a_panic_event(cluster):
    ctx = admin_context(cluster.server.pki, cluster.tmp_path)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx)) as http:
        async with http.get(f"{cluster.server.url}/api/v1/namespaces/default/pods/one/log?previous=true") as r:
            assert r.status == 500
    events = cluster.by_resource("pods")
    assert [(e["stage"], e["verb"], e["objectRef"]["subresource"]) for e in events] == [
        ("RequestReceived", "get", "log"), ("Panic", "get", "log")]
    assert events[1]["responseStatus"] == {"metadata": {}, "code": 500, "status": "Failure", "reason": "InternalError",
                                           "message": "APIServer panic'd: a bug"}


@pytest.mark.parametrize(("policy", "error"), [
    ("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Loud\n- {}\n",
     '[rules[0].level: Unsupported value: "Loud": supported values: "None", "Metadata", "Request", '
     '"RequestResponse", rules[1].level: Required value]'),
    ("apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [Done]\nrules:\n- level: Metadata\n"
     "  nonResourceURLs: [healthz, /a*b]\n  namespaces: [default]\n",
     '[omitStages[0]: Invalid value: "Done": allowed stages are RequestReceived,ResponseStarted,ResponseComplete,Panic, '
     "rules[0].nonResourceURLs[0]: Invalid value: \"healthz\": non-resource URL rules must begin with a '/' character, "
     "rules[0].nonResourceURLs[1]: Invalid value: \"/a*b\": non-resource URL wildcards '*' must be the final character "
     'of the rule, rules[0].nonResourceURLs: Invalid value: ["healthz","/a*b"]: rules cannot apply to both regular '
     "resources and non-resource URLs]"),
    ("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n  resources: [{group: Apps, "
     "resourceNames: [x]}]\n",
     '[rules[0].resources.group: Invalid value: "Apps": a lowercase RFC 1123 subdomain must consist of lower case '
     "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. "
     "'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*'), "
     'rules[0].resources.resourceNames: Invalid value: ["x"]: using resourceNames requires at least one resource]'),
    ("apiVersion: audit.k8s.io/v1beta1\nkind: Policy\nrules: [{level: None}]\n",
     'failed decoding: no kind "Policy" is registered for version "audit.k8s.io/v1beta1" in scheme '
     '"pkg/audit/scheme.go:30": from file '),
    ("apiVersion: audit.k8s.io/v1\nkind: Policy\n", "loaded illegal policy with 0 rules"),
    # (fuzz62: a value of another JSON type was a TypeError out of the validation, a traceback from `up`)
    ("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n  verbs: get\n",
     "failed decoding: json: cannot unmarshal string into Go struct field PolicyRule.rules.verbs of type []string"),
    ("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n  resources: [{group: [apps]}]\n",
     "failed decoding: json: cannot unmarshal array into Go struct field GroupResources.rules.resources.group of type "
     "string"),
])
def test_an_invalid_policy_stops_up_with_upstreams_errors(tmp_path, policy, error):
    (tmp_path / "policy.yaml").write_text(policy)
    with pytest.raises(PolicyError) as e:
        load(tmp_path / "policy.yaml")
    assert error in str(e.value)
    r = subprocess.run([sys.executable, "-m", "nanokube.cli", "up", "--data-dir", str(tmp_path / "data"),
                        "--audit-policy-file", str(tmp_path / "policy.yaml")], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2 and f"nanokube: --audit-policy-file: {e.value}" in r.stderr
    assert not (tmp_path / "data" / "audit.log").exists()


def test_nulls_in_a_policy_are_gos_zero_values(tmp_path):
    """A null field is unset, a null list item its type's zero value (a resources entry of no group
    and no resources: every resource of the core group); metadata is any ObjectMeta."""
    (tmp_path / "policy.yaml").write_text("apiVersion: audit.k8s.io/v1\nkind: Policy\nmetadata: {name: p, labels: {a: b}}\n"
                                          "omitStages: null\nrules:\n- level: Request\n  verbs: null\n  resources: [null]\n")
    policy = load(tmp_path / "policy.yaml")
    assert policy.decide(None, "get", True, "", "pods", "", "default", "p").level == "Request"
    assert policy.decide(None, "get", True, "apps", "deployments", "", "default", "d").level == "None"


def test_a_json_policy_is_read_too(tmp_path):
    (tmp_path / "policy.json").write_text('{"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "omitStages": '
                                          '["RequestReceived"], "rules": [{"level": "Request", "verbs": ["get"]}]}')
    policy = load(tmp_path / "policy.json")
    d = policy.decide(None, "get", True, "", "pods", "", "default", "p")
    assert (d.level, d.omit_stages) == ("Request", frozenset({"RequestReceived"}))
    assert policy.decide(None, "list", True).level == "None"


def test_a_policy_the_strict_decoder_refuses_is_read_leniently_with_a_warning(tmp_path, caplog):
    """Upstream tries its strict decoder first and, where only that refuses the file, decodes it
    leniently and warns: a repeated key keeps the later value, an unknown field is dropped."""
    (tmp_path / "policy.yaml").write_text("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: None\n"
                                          "  level: Request\n  verb: [get]\n  resources: [{group: '', resource: [x]}]\n")
    with caplog.at_level("WARNING", logger="nanokube.apiserver.audit_policy"):
        policy = load(tmp_path / "policy.yaml")
    assert policy.decide(None, "list", True, "", "pods", "", "default", "p").level == "Request"
    assert [r.getMessage() for r in caplog.records] == [
        "Audit policy contains errors, falling back to lenient decoding: strict decoding error: error converting YAML "
        'to JSON: yaml: unmarshal errors:\n  line 5: key "level" already set in map, unknown field "rules[0].verb", '
        'unknown field "rules[0].resources[0].resource"']
