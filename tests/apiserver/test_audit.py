"""The audit log backend: one audit.k8s.io/v1 Event per write, refused ones too."""

import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from nanokube.apiserver.audit import ANNOTATIONS, ASKED, REQUESTER, RESPONSE_OBJECT, AuditLog, asked, event_dict
from nanokube.apiserver.auth.authorizer import USER
from nanokube.machinery.user import User


def _app(audit: AuditLog) -> web.Application:
    """Configmap create, get and update behind `audit`; X-User authenticates, mallory is forbidden,
    X-Fail makes an update a 409."""

    @web.middleware
    async def authn(request, handler):
        if request.headers.get("X-User"):
            request[USER] = User(request.headers["X-User"], ("devs", "system:authenticated"))
            allowed = request.headers["X-User"] != "mallory"
            request[ANNOTATIONS] = {"authorization.k8s.io/decision": "allow" if allowed else "forbid"}
            if not allowed:
                return web.json_response({"kind": "Status", "status": "Failure", "reason": "Forbidden",
                                          "message": "nope", "code": 403}, status=403)
            if (whom := request.headers.get("X-As")) is not None:  # impersonation; a blank name is refused
                request[REQUESTER] = request[USER]
                if not whom.strip():
                    del request[USER]
                    return web.json_response({"kind": "Status", "status": "Failure", "reason": "Forbidden",
                                              "message": "blank", "code": 403}, status=403)
                request[USER] = User(whom, ("system:authenticated",))
        return await handler(request)

    async def create(request):
        return web.json_response({"kind": "ConfigMap", "metadata": {"name": "cm", "uid": "u1",
                                                                   "resourceVersion": "7"}}, status=201)

    async def get(request):
        return web.json_response({"kind": "ConfigMap"})

    async def update(request):
        """A handler that leaves what its decoded body named and the object it answered with."""
        request[ASKED] = asked(await request.json())
        request[RESPONSE_OBJECT] = {"kind": "ConfigMap", "metadata": {"name": "cm", "uid": "u2", "resourceVersion": "9"}}
        if request.headers.get("X-Fail"):
            return web.json_response({"kind": "Status", "status": "Failure", "reason": "Conflict", "message": "stale",
                                      "code": 409}, status=409)
        return web.Response(body=b"not read", status=200)

    app = web.Application(middlewares=[audit.middleware, authn])
    app.router.add_post("/api/v1/namespaces/{ns}/configmaps", create)
    app.router.add_get("/api/v1/namespaces/{ns}/configmaps/{name}", get)
    app.router.add_put("/api/v1/namespaces/{ns}/configmaps/{name}", update)
    return app


@pytest.fixture
async def http(tmp_path):
    audit = AuditLog(str(tmp_path / "audit.log"))
    client = TestClient(TestServer(_app(audit)))
    await client.start_server()
    yield client, tmp_path / "audit.log"
    await client.close()
    audit.close()


def events(path):
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


async def test_writes_are_logged_with_user_object_and_status(http):
    """The objectRef is the request's (LogRequestObject), never the answer's: this handler records no
    body, so the create's names neither the name, uid nor resourceVersion it answered with."""
    client, path = http
    assert (await client.post("/api/v1/namespaces/team/configmaps", json={}, headers={"X-User": "alice"})).status == 201
    assert (await client.get("/api/v1/namespaces/team/configmaps/cm", headers={"X-User": "alice"})).status == 200
    (ev,) = events(path)
    assert ev["apiVersion"] == "audit.k8s.io/v1" and ev["kind"] == "Event"
    assert ev["level"] == "Metadata" and ev["stage"] == "ResponseComplete" and ev["verb"] == "create"
    assert ev["user"] == {"username": "alice", "groups": ["devs", "system:authenticated"]}
    assert ev["objectRef"] == {"resource": "configmaps", "namespace": "team", "apiVersion": "v1"}
    assert ev["responseStatus"] == {"metadata": {}, "code": 201}
    assert ev["annotations"] == {"authorization.k8s.io/decision": "allow"}
    assert ev["requestReceivedTimestamp"] <= ev["stageTimestamp"] and ev["auditID"]


async def test_refused_writes_are_logged_too(http):
    client, path = http
    await client.post("/api/v1/namespaces/team/configmaps", json={}, headers={"X-User": "mallory"})
    await client.post("/api/v1/namespaces/team/configmaps", json={})
    forbidden, anonymous = events(path)
    assert forbidden["responseStatus"] == {"metadata": {}, "code": 403, "status": "Failure", "message": "nope",
                                           "reason": "Forbidden"}
    assert forbidden["annotations"] == {"authorization.k8s.io/decision": "forbid"}
    assert "name" not in forbidden["objectRef"]
    assert anonymous["user"] == {"username": "system:anonymous", "groups": ["system:unauthenticated"]}


async def test_an_update_names_the_uid_and_version_it_was_sent_with_not_those_answered(http):
    """Upstream's objectRef takes an update's uid and resourceVersion from the body sent
    (kubernetes#100466), whether the write succeeds or not; the new ones answered are never logged."""
    client, path = http
    sent = {"metadata": {"name": "cm", "uid": "u1", "resourceVersion": "8"}}
    await client.put("/api/v1/namespaces/team/configmaps/cm", json=sent, headers={"X-User": "alice"})
    await client.put("/api/v1/namespaces/team/configmaps/cm", json=sent, headers={"X-User": "alice", "X-Fail": "1"})
    await client.put("/api/v1/namespaces/team/configmaps/cm", json={}, headers={"X-User": "alice"})
    ok, failed, bare = events(path)
    ref = {"resource": "configmaps", "namespace": "team", "name": "cm", "apiVersion": "v1", "uid": "u1",
           "resourceVersion": "8"}
    assert ok["objectRef"] == ref and failed["objectRef"] == ref
    assert ok["responseStatus"] == {"metadata": {}, "code": 200}
    assert failed["responseStatus"] == {"metadata": {}, "code": 409, "status": "Failure", "message": "stale",
                                        "reason": "Conflict"}
    assert bare["objectRef"] == {"resource": "configmaps", "namespace": "team", "name": "cm", "apiVersion": "v1"}


@pytest.mark.parametrize("headers,source_ips", [
    ({}, ["127.0.0.1"]),
    # a proxy chain, client first, invalid entries dropped; X-Real-Ip after it; the connection last
    ({"X-Forwarded-For": "10.244.1.5, bogus, 2001:DB8::1", "X-Real-Ip": "192.0.2.7"},
     ["10.244.1.5", "2001:db8::1", "192.0.2.7", "127.0.0.1"]),
    # X-Real-Ip already in the chain is not repeated; leading zeros read as Go's ParseIPSloppy does
    ({"X-Forwarded-For": "010.0.0.1,192.0.2.7", "X-Real-Ip": "192.0.2.7"}, ["10.0.0.1", "192.0.2.7", "127.0.0.1"]),
    # the connection's address is not repeated after the chain's last; an IPv4-mapped one is its IPv4 one
    ({"X-Forwarded-For": "10.0.0.1, ::ffff:127.0.0.1"}, ["10.0.0.1", "127.0.0.1"]),
    ({"X-Real-Ip": "127.0.0.1"}, ["127.0.0.1"]),
    ({"X-Real-Ip": "not-an-ip", "X-Forwarded-For": ""}, ["127.0.0.1"]),
])
async def test_source_ips_list_forwarded_addresses_before_the_connections(http, headers, source_ips):
    client, path = http
    await client.post("/api/v1/namespaces/team/configmaps", json={}, headers={"X-User": "alice", **headers})
    (ev,) = events(path)
    assert ev["sourceIPs"] == source_ips


class _FixedClock:
    def now(self):
        return 1796241600.000001

    def rfc3339_micro(self):
        return "2026-12-02T20:00:00.000001Z"


@pytest.mark.parametrize("verb,group,plural,namespace,name,subresource,code,body", [
    ("patch", "", "pods", "team", "p", "status", 200,
     {"kind": "Pod", "metadata": {"name": "p", "uid": "u3", "resourceVersion": "11"}}),
    ("create", "events.k8s.io", "events", "team", "", "", 201,
     {"kind": "Event", "metadata": {"name": "p.1a", "namespace": "team", "uid": "u4", "resourceVersion": "12"}}),
    ("create", "", "nodes", None, "", "", 201, {"kind": "Node", "metadata": {"name": "n1", "uid": "u5"}}),
    ("update", "", "namespaces", "team", "team", "finalize", 200, {"kind": "Namespace", "metadata": {}}),
    ("patch", "", "pods", "team", "p", "status", 409,
     {"kind": "Status", "status": "Failure", "message": "stale", "reason": "Conflict", "code": 409}),
    ("delete", "apps", "deployments", "team", "web", "", 404,
     {"kind": "Status", "status": "Failure", "message": "", "reason": "NotFound", "code": 404}),
    ("create", "", "pods", "team", "", "", 201, {}),
])
def test_a_loopback_write_is_logged_as_the_http_path_logs_it(tmp_path, monkeypatch, verb, group, plural, namespace,
                                                               name, subresource, code, body):
    """The loopback's event is built in one pass; it must stay the line `event_dict` makes for the request."""
    from nanokube.registry.base import all_resources

    monkeypatch.setattr("nanokube.apiserver.audit.new_uid", lambda: "id-1")
    res = next(r for r in all_resources() if r.group == group and r.plural == plural)
    user = User("system:kube-scheduler", ("system:authenticated",))
    audit = AuditLog(str(tmp_path / "loopback.log"), _FixedClock())
    audit.loopback(verb, user, res, "v1", namespace, name, subresource, code, body, "2026-12-02T19:59:59.999999Z",
                   "kube-scheduler")
    audit.close()
    general = AuditLog(str(tmp_path / "emit.log"), _FixedClock())
    path = (f"/apis/{group}/v1" if group else "/api/v1") + (f"/namespaces/{namespace}" if namespace and res.namespaced
                                                           else "") + f"/{plural}"
    path += (f"/{name}" if name else "") + (f"/{subresource}" if subresource else "")
    ref = {"resource": plural, "namespace": namespace if res.namespaced else "", "name": name, "apiGroup": group,
           "apiVersion": "v1", "subresource": subresource}
    general._append(event_dict(
        level="Metadata", stage="ResponseComplete", verb=verb, uri=path, user=user, ref=ref, code=code, body=body,
        received="2026-12-02T19:59:59.999999Z", stamp=_FixedClock().rfc3339_micro(), audit_id="id-1",
        source_ips=["127.0.0.1"], user_agent="kube-scheduler",
        annotations={"authorization.k8s.io/decision": "allow",
                     "authorization.k8s.io/reason": "loopback: a component of the API server"}))
    general.close()
    assert (tmp_path / "loopback.log").read_bytes() == (tmp_path / "emit.log").read_bytes()


class _ShortWrites:
    """A file that takes at most 40 bytes per write, as write(2) may on a full pipe or a signal."""

    def __init__(self):
        self.data, self.calls = b"", 0

    def write(self, b):
        self.calls += 1
        self.data += bytes(b[:40])
        return min(len(b), 40)


def test_a_line_the_file_takes_in_parts_is_written_whole(tmp_path):
    audit = AuditLog(str(tmp_path / "audit.log"))
    audit.close()
    audit._file.raw = short = _ShortWrites()
    audit._append({"kind": "Event", "note": "x" * 100})
    line = orjson.dumps({"kind": "Event", "note": "x" * 100}) + b"\n"
    assert short.data == line
    assert short.calls == -(-len(line) // 40)


@pytest.mark.parametrize("method, path, headers", [
    ("POST", "/api/v1/namespaces/team/configmaps", {"X-User": "alice"}),
    ("PUT", "/api/v1/namespaces/team/configmaps/cm", {"X-User": "alice"}),
    ("PUT", "/api/v1/namespaces/team/configmaps/cm", {"X-User": "alice", "X-Fail": "1"}),
    ("POST", "/api/v1/namespaces/team/configmaps", {"X-User": "mallory", "X-Forwarded-For": "10.0.0.9"}),
    ("POST", "/api/v1/namespaces/team/configmaps", {}),
    ("PUT", "/api/v1/namespaces/team/configmaps/cm", {"X-User": "alice", "X-As": "bob"}),
    ("PUT", "/api/v1/namespaces/team/configmaps/cm", {"X-User": "alice", "X-As": " "}),
])
async def test_a_write_without_a_policy_is_logged_as_a_metadata_policy_logs_it(tmp_path, monkeypatch, method, path,
                                                                               headers):
    """Without a policy a write's one event is built in one pass; it must stay the ResponseComplete
    line that a policy auditing everything at Metadata (RequestReceived omitted) makes for it."""
    from nanokube.apiserver import audit_policy

    monkeypatch.setattr("nanokube.apiserver.audit.new_uid", lambda: "id-1")
    policy = audit_policy.parse({"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "omitStages": ["RequestReceived"],
                                 "rules": [{"level": "Metadata"}]})
    lines = []
    for name, given in (("default.log", None), ("policy.log", policy)):
        audit = AuditLog(str(tmp_path / name), _FixedClock(), policy=given)
        async with TestClient(TestServer(_app(audit))) as client:
            await (await client.request(method, path, json={}, headers=headers)).read()
        audit.close()
        lines.append((tmp_path / name).read_bytes())
    assert lines[0].count(b"\n") == 1
    assert b'"stage":"ResponseComplete"' in lines[0]
    assert lines[0] == lines[1]
