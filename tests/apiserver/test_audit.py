"""The audit log backend: one audit.k8s.io/v1 Event per write, refused ones too."""

import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from nanokube.apiserver.audit import ANNOTATIONS, AuditLog
from nanokube.machinery.user import User


@pytest.fixture
async def http(tmp_path):
    audit = AuditLog(str(tmp_path / "audit.log"))

    @web.middleware
    async def authn(request, handler):
        if request.headers.get("X-User"):
            request["user"] = User(request.headers["X-User"], ("devs", "system:authenticated"))
            allowed = request.headers["X-User"] != "mallory"
            request[ANNOTATIONS] = {"authorization.k8s.io/decision": "allow" if allowed else "forbid"}
            if not allowed:
                return web.json_response({"kind": "Status", "status": "Failure", "reason": "Forbidden",
                                          "message": "nope", "code": 403}, status=403)
        return await handler(request)

    async def create(request):
        return web.json_response({"kind": "ConfigMap", "metadata": {"name": "cm", "uid": "u1",
                                                                   "resourceVersion": "7"}}, status=201)

    async def get(request):
        return web.json_response({"kind": "ConfigMap"})

    app = web.Application(middlewares=[audit.middleware, authn])
    app.router.add_post("/api/v1/namespaces/{ns}/configmaps", create)
    app.router.add_get("/api/v1/namespaces/{ns}/configmaps/{name}", get)
    client = TestClient(TestServer(app))
    await client.start_server()
    yield client, tmp_path / "audit.log"
    await client.close()
    audit.close()


def events(path):
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


async def test_writes_are_logged_with_user_object_and_status(http):
    client, path = http
    assert (await client.post("/api/v1/namespaces/team/configmaps", json={}, headers={"X-User": "alice"})).status == 201
    assert (await client.get("/api/v1/namespaces/team/configmaps/cm", headers={"X-User": "alice"})).status == 200
    (ev,) = events(path)
    assert ev["apiVersion"] == "audit.k8s.io/v1" and ev["kind"] == "Event"
    assert ev["level"] == "Metadata" and ev["stage"] == "ResponseComplete" and ev["verb"] == "create"
    assert ev["user"] == {"username": "alice", "groups": ["devs", "system:authenticated"]}
    assert ev["objectRef"] == {"resource": "configmaps", "namespace": "team", "name": "cm", "apiVersion": "v1",
                               "uid": "u1", "resourceVersion": "7"}
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
