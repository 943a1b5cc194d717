"""--audit-log-truncate-enabled / --audit-webhook-truncate-enabled: kube-apiserver's truncate plugin.
An event longer than the max event size loses its request and response objects and is annotated
audit.k8s.io/truncated; one still too long (or at a level without objects) is dropped and counted;
the webhook's batches are split to the max batch size."""

from __future__ import annotations

import orjson

from nanokube.apiserver.audit_file import LogOptions
from nanokube.apiserver.audit_truncate import Truncate
from nanokube.apiserver.audit_webhook import WebhookBackend
from tests.apiserver.test_audit_authentication import CONFIGMAPS, served
from tests.apiserver.test_audit_webhook import _served, kubectl, sink  # noqa: F401 - the fixture

BODIES = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: RequestResponse
    resources: [{group: "", resources: ["configmaps"]}]
  - level: Metadata
    resources: [{group: "", resources: ["secrets"]}]
"""


async def test_an_event_too_large_loses_its_objects_or_is_dropped(tmp_path):
    log = tmp_path / "audit.log"
    async with served(tmp_path, str(log), LogOptions(truncate=Truncate(max_batch=3000, max_event=3000)),
                      BODIES) as (_, admin):
        for path, name, size, agent in ((CONFIGMAPS, "small", 10, "test"), (CONFIGMAPS, "large", 5000, "test"),
                                        ("/api/v1/namespaces/default/secrets", "s", 0, "u" * 4000)):
            async with admin.post(path, json={"metadata": {"name": name}, "data": {"k": "v" * size}},
                                  headers={"User-Agent": agent}) as r:
                assert r.status == 201, await r.text()
        async with admin.get("/metrics") as r:
            assert 'apiserver_audit_error_total{plugin="truncate"} 1' in (await r.text()).splitlines()
    events = {e["objectRef"]["name"]: e for e in map(orjson.loads, log.read_bytes().splitlines())
              if e["user"]["username"] == "kubernetes-super-admin"}
    assert set(events) == {"small", "large"}  # the secret's Metadata event, too large with nothing to take out: dropped
    assert events["small"]["requestObject"]["data"] == {"k": "v" * 10} and "audit.k8s.io/truncated" not in \
        events["small"]["annotations"]
    large = events["large"]
    assert "requestObject" not in large and "responseObject" not in large
    assert large["annotations"]["audit.k8s.io/truncated"] == "true"
    assert large["responseStatus"]["code"] == 201 and large["level"] == "RequestResponse"


async def test_the_webhooks_batches_are_split_to_the_max_batch_size(tmp_path, sink):  # noqa: F811
    webhook = WebhookBackend(str(tmp_path / "webhook.yaml"), "batch", max_batch=400, max_wait=3600,
                             truncate=Truncate(max_batch=1, max_event=100_000))
    server = await _served(tmp_path, webhook)
    try:
        await kubectl(tmp_path, "create", "configmap", "a")
        await kubectl(tmp_path, "create", "configmap", "b")
    finally:
        await server.stop()  # what is pending, sent at shutdown: one batch of 400 at most, split
    lists = [[e["objectRef"]["name"] for e in lst["items"] if e["user"]["username"] == "kubernetes-super-admin"]
             for lst in sink.lists]
    assert [names for names in lists if names] == [["a"], ["b"]]
    assert all(len(lst["items"]) == 1 for lst in sink.lists)
