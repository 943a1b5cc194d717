"""Writes a schema-driven sweep found answered with a 500 (type-correct hostile values at every path of a
kind, sent as dry-run creates and updates): each is upstream's 4xx over HTTP, and nothing is written."""

from __future__ import annotations

import http.client
import json

import pytest

from tests.served import send as _send
from tests.served import sent as _sent
from tests.served import served

SVCS = "/api/v1/namespaces/default/services"


@pytest.fixture
async def api(tmp_path):
    async with served(tmp_path) as (_, api_client):
        yield api_client


def _service(name: str, **spec) -> dict:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"selector": {"app": "x"}, "ports": [{"port": 80}], **spec}}


@pytest.mark.parametrize("ip", ["x", "1Gi", "999.999.999.999"])
async def test_an_update_that_sends_a_bad_cluster_ip_without_cluster_ips(api, ip):
    """A Service updated with a clusterIP that is no IP and no clusterIPs (a client that knows only the
    singular field) was a 500 ('NoneType' object has no attribute 'version': the allocator read the
    clusterIP's family). Upstream's patchAllocatedValues gives the new Service the old clusterIPs, which
    normalizeClusterIPs then makes [clusterIP], so the allocator's check refuses it."""
    code, svc = await _send(api, "POST", SVCS, _service("web"))
    assert code == 201
    for query in ("?dryRun=All", ""):
        code, status = await _send(api, "PUT", f"{SVCS}/web{query}", _service("web", clusterIP=ip))
        assert (code, status["reason"], status["details"]["causes"]) == (422, "Invalid", [{
            "reason": "FieldValueInvalid", "field": "spec.clusterIPs[0]",
            "message": f'Invalid value: "{ip}": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)'}])
    code, same = await _send(api, "PUT", f"{SVCS}/web", _service("web", clusterIP=svc["spec"]["clusterIP"]))
    assert code == 200 and same["spec"]["clusterIPs"] == svc["spec"]["clusterIPs"]


async def test_a_dry_run_create_of_a_name_taken_is_its_conflict(api):
    """A dry-run create answers what the create would (DryRunnableStorage.Create reads the key first):
    a name taken is the 409 AlreadyExists, one held by an object being deleted says so; it was a 201.
    An invalid body is still its 422 first, as validation comes before the store."""
    cms = "/api/v1/namespaces/default/configmaps"
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "taken", "finalizers": ["example.com/hold"]}}
    assert (await _send(api, "POST", cms, cm))[0] == 201
    code, status = await _send(api, "POST", f"{cms}?dryRun=All", cm)
    assert (code, status["reason"], status["message"], status["details"]) == (
        409, "AlreadyExists", 'configmaps "taken" already exists', {"name": "taken", "kind": "configmaps"})
    code, status = await _send(api, "POST", f"{cms}?dryRun=All", {**cm, "data": {"a": 1}})
    assert code == 400
    assert (await _send(api, "DELETE", f"{cms}/taken"))[0] == 200
    code, status = await _send(api, "POST", f"{cms}?dryRun=All", cm)
    assert (code, status["message"]) == (409, 'object is being deleted: configmaps "taken" already exists')
    code, _ = await _send(api, "POST", f"{cms}?dryRun=All", {**cm, "metadata": {"name": "free"}})
    assert code == 201 and (await _send(api, "GET", f"{cms}/free"))[0] == 404


@pytest.mark.timeout(120)
async def test_a_body_of_many_unknown_fields_is_answered_in_linear_time(api, monkeypatch):
    """Each unknown field is a warning, and the request's recorder kept them in a list it searched for
    each new one: 150,000 unknown fields (a 2 MB body) held the server's loop for minutes (quadratic;
    16,000 took 4.7 s). Its answer carries upstream's truncated Warning headers, the first 4 KiB of text."""
    monkeypatch.setattr(http.client, "_MAXHEADERS", 1000)  # (the client reads 100 headers at most)
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "wide"}, **{f"u{i}": 1 for i in range(150_000)}}
    code, _, warned = await _sent(api, "POST", "/api/v1/namespaces/default/configmaps?dryRun=All", body)
    assert code == 201
    assert warned[:2] == ['299 - "unknown field \\"u0\\""', '299 - "unknown field \\"u1\\""'] and len(warned) == 211


@pytest.mark.timeout(120)
async def test_a_pod_of_thousands_of_containers_on_one_port_is_answered_in_time(api):
    """Every pair of ports alike warns (upstream's warningsForPod does too): 5,000 containers on port 80
    made 12.5 million warnings, generated and quoted for headers that keep the first 4 KiB (over a minute
    with the loop held). Those past what any answer carries are no longer made; the answer's are the same."""
    containers = [{"name": f"c{i}", "image": "busybox", "ports": [{"containerPort": 80}]} for i in range(5000)]
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "ports"}, "spec": {"containers": containers}}
    code, _, warned = await _sent(api, "POST", "/api/v1/namespaces/default/pods?dryRun=All", body)
    assert code == 201 and len(warned) == 48
    assert warned[0] == '299 - "spec.containers[1].ports[0]: duplicate port definition with spec.containers[0].ports[0]"'
    assert warned[-1] == '299 - "spec.containers[10].ports[0]: duplicate port definition with spec.containers[2].ports[0]"'



async def test_a_quota_of_many_unsupported_scopes_is_refused_once_per_scope(api):
    """validateResourceQuotaScopes refuses each unsupported scope with the whole list as the value (found
    by the sweep's lists of 3,000 items: a minute for a 26 KB ResourceQuota, each error printing the list
    again; tests/machinery/test_field_error_sharing.py holds that). The answer is upstream's: a cause per
    scope, the message saying it once (ToAggregate drops repeats)."""
    scopes = [f"x{i}" for i in range(1000)]
    body = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q"}, "spec": {"scopes": scopes}}
    code, status = await _send(api, "POST", "/api/v1/namespaces/default/resourcequotas?dryRun=All", body)
    causes = status["details"]["causes"]
    assert code == 422 and len(causes) == 1000 and len({c["message"] for c in causes}) == 1
    assert causes[0] == {"reason": "FieldValueInvalid", "field": "spec.scopes",
                         "message": f"Invalid value: {json.dumps(scopes, separators=(',', ':'))}: unsupported scope"}
    assert status["message"] == f'ResourceQuota "q" is invalid: spec.scopes: {causes[0]["message"]}'
