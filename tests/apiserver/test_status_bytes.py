"""404, 409 and 422 Status bodies byte for byte as kube-apiserver encodes
them (a newline ends every JSON body, as Go's json.Encoder writes it):
metav1.Status's field order (kind, apiVersion, metadata, status,
message, reason, details, code), StatusDetails' (name, group, kind, uid,
causes) and StatusCause's (reason, message, field)."""

import asyncio

import pytest

from nanokube.apiserver.app import APIServer
from nanokube.store.memory import MemoryStore


@pytest.fixture
async def server():
    s = APIServer(MemoryStore(), None, port=0)
    await s.start()
    yield s
    await s.stop()


async def _request(port: int, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
                 f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
    raw = await reader.read()
    writer.close()
    head, _, payload = raw.partition(b"\r\n\r\n")
    return int(head.split()[1]), payload


async def test_not_found_bytes(server):
    code, body = await _request(server.port, "GET", "/api/v1/namespaces/default/configmaps/nope")
    assert code == 404
    assert body == (b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
                    b'"message":"configmaps \\"nope\\" not found","reason":"NotFound",'
                    b'"details":{"name":"nope","kind":"configmaps"},"code":404}\n')
    code, body = await _request(server.port, "GET", "/apis/apps/v1/namespaces/default/deployments/web")
    assert body == (b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
                    b'"message":"deployments.apps \\"web\\" not found","reason":"NotFound",'
                    b'"details":{"name":"web","group":"apps","kind":"deployments"},"code":404}\n')


async def test_already_exists_bytes(server):
    cm = b'{"metadata":{"name":"twice"}}'
    assert (await _request(server.port, "POST", "/api/v1/namespaces/default/configmaps", cm))[0] == 201
    code, body = await _request(server.port, "POST", "/api/v1/namespaces/default/configmaps", cm)
    assert code == 409
    assert body == (b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
                    b'"message":"configmaps \\"twice\\" already exists","reason":"AlreadyExists",'
                    b'"details":{"name":"twice","kind":"configmaps"},"code":409}\n')


async def test_invalid_bytes(server):
    code, body = await _request(server.port, "POST", "/api/v1/namespaces/default/configmaps",
                                b'{"metadata":{"name":"Bad_Name"}}')
    assert code == 422
    msg = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
           "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
           "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
    assert body == ('{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
                    '"message":"ConfigMap \\"Bad_Name\\" is invalid: metadata.name: Invalid value: \\"Bad_Name\\": '
                    + msg + '","reason":"Invalid","details":{"name":"Bad_Name","kind":"ConfigMap","causes":['
                    '{"reason":"FieldValueInvalid","message":"Invalid value: \\"Bad_Name\\": ' + msg
                    + '","field":"metadata.name"}]},"code":422}\n').encode()


async def test_invalid_message_names_a_repeated_error_once(server):
    """NewInvalid lists every cause, repeats too, but its message is ErrorList.ToAggregate's, which
    drops repeats: a ClusterIP Service given a loadBalancerClass on update is refused by
    validateLoadBalancerClassField and again by ValidateService."""
    import orjson
    path = "/api/v1/namespaces/default/services"
    code, body = await _request(server.port, "POST", path, b'{"metadata":{"name":"web"},"spec":{"ports":[{"port":80}]}}')
    assert code == 201
    svc = orjson.loads(body)
    svc["spec"]["loadBalancerClass"] = "example.com/lb"
    code, body = await _request(server.port, "PUT", f"{path}/web", orjson.dumps(svc))
    status = orjson.loads(body)
    forbidden = "Forbidden: may only be used when `type` is 'LoadBalancer'"
    assert code == 422 and status["message"] == f'Service "web" is invalid: spec.loadBalancerClass: {forbidden}'
    assert status["details"]["causes"] == [
        {"reason": "FieldValueForbidden", "message": forbidden, "field": "spec.loadBalancerClass"}] * 2
    svc["spec"]["allocateLoadBalancerNodePorts"] = True
    code, body = await _request(server.port, "PUT", f"{path}/web", orjson.dumps(svc))
    status = orjson.loads(body)
    assert len(status["details"]["causes"]) == 3 and status["message"] == (
        f'Service "web" is invalid: [spec.loadBalancerClass: {forbidden}, '
        f'spec.allocateLoadBalancerNodePorts: {forbidden}]')


async def test_objects_come_back_in_upstream_field_order(server):
    import orjson

    body = b'{"data":{"k":"v"},"metadata":{"labels":{"a":"b"},"name":"ordered"},"apiVersion":"v1","kind":"ConfigMap"}'
    code, created = await _request(server.port, "POST", "/api/v1/namespaces/default/configmaps", body)
    assert code == 201
    code, got = await _request(server.port, "GET", "/api/v1/namespaces/default/configmaps/ordered")
    for raw in (created, got):
        obj = orjson.loads(raw)
        assert list(obj) == ["kind", "apiVersion", "metadata", "data"]
        assert list(obj["metadata"]) == ["name", "namespace", "uid", "resourceVersion", "creationTimestamp", "labels",
                                         "managedFields"]
