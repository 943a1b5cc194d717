"""The objectRef of a create or update that fails: upstream completes it from the body once decoded
(LogRequestObject), so a create refused as AlreadyExists or Invalid names the object asked for, and a
refused update carries the uid and resourceVersion it was sent with; its responseStatus keeps the
Status's details. A served server with a real audit log, driven by kubectl and the in-process
client, without a policy (the writes-only line) and with one (the general event)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from nanokube.apiserver.app import APIServer
from nanokube.apiserver.audit_policy import load
from nanokube.apiserver.loopback import LocalClient
from nanokube.machinery.errors import APIError
from nanokube.machinery.user import User
from nanokube.pki.ca import ensure_pki
from nanokube.pki.kubeconfig import write_kubeconfig
from nanokube.store.memory import MemoryStore

KUBECTL = str(Path(sys.executable).parent / "kubectl")
POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
rules:
  - level: Metadata
    resources: [{group: "", resources: ["configmaps"]}]
"""


@pytest.fixture
async def served(tmp_path, request):
    """A served server whose audit log is tmp_path/audit.log, with the policy the test names (None: the
    writes-only line), and a kubeconfig for it."""
    if request.param is not None:
        (tmp_path / "policy.yaml").write_text(request.param)
    pki = ensure_pki(str(tmp_path))
    server = APIServer(MemoryStore(), pki, port=0, audit_log_path=str(tmp_path / "audit.log"),
                       audit_policy=None if request.param is None else load(tmp_path / "policy.yaml"))
    await server.start()
    write_kubeconfig(str(tmp_path / "kubeconfig"), server.url, pki)
    yield server
    await server.stop()


@pytest.mark.parametrize("served", [None, POLICY], ids=["writes-only", "policy"], indirect=True)
async def test_a_failed_create_or_update_names_the_object_its_body_asked_for(tmp_path, served):
    log, server, policy = tmp_path / "audit.log", served, served.audit.policy
    (tmp_path / "stale.json").write_bytes(orjson.dumps({
        "apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "w"},
        "metadata": {"name": "c", "namespace": "default", "uid": "not-its-uid", "resourceVersion": "1"}}))
    kcm = LocalClient(server.rest, User("system:kube-controller-manager", ("system:authenticated",)))
    codes = []
    for args in (["create", "configmap", "c"], ["create", "configmap", "c"], ["create", "configmap", "Bad_Name"],
                 ["replace", "-f", str(tmp_path / "stale.json")], ["delete", "configmap", "c", "--wait=false"]):
        r = await asyncio.to_thread(subprocess.run, [KUBECTL, "--kubeconfig", str(tmp_path / "kubeconfig"), *args],
                                    capture_output=True, text=True, timeout=60)
        codes.append(r.returncode)
        if args[0] == "replace":
            with pytest.raises(APIError) as e:
                await kcm.resource("", "v1", "configmaps").create({"metadata": {"name": "c", "namespace": "default"}})
            assert e.value.code == 409
    assert codes == [0, 1, 1, 1, 0]
    events = [orjson.loads(line) for line in log.read_bytes().splitlines()]
    done = [e for e in events if e["stage"] == "ResponseComplete" and e.get("objectRef", {}).get("resource") == "configmaps"
            and e["verb"] in ("create", "update")]
    assert [(e["verb"], e["responseStatus"]["code"], e["objectRef"].get("name")) for e in done] == [
        ("create", 201, "c"), ("create", 409, "c"), ("create", 422, "Bad_Name"), ("update", 409, "c"),
        ("create", 409, "c")]
    # the Status answered, as LogResponseObject copies it: its details too
    assert done[1]["responseStatus"] == {"metadata": {}, "status": "Failure", "message": 'configmaps "c" already exists',
                                         "reason": "AlreadyExists", "details": {"name": "c", "kind": "configmaps"},
                                         "code": 409}
    assert done[2]["responseStatus"]["reason"] == "Invalid"
    assert done[2]["responseStatus"]["details"]["causes"][0]["field"] == "metadata.name"
    [deleted] = [e for e in events if e["stage"] == "ResponseComplete" and e["verb"] == "delete"]
    assert deleted["responseStatus"] == {"metadata": {}, "status": "Success", "code": 200, "details": {
        "name": "c", "kind": "configmaps", "uid": deleted["responseStatus"]["details"]["uid"]}}  # (what it deleted)
    assert done[1]["objectRef"] == {"resource": "configmaps", "namespace": "default", "name": "c", "apiVersion": "v1"}
    assert done[3]["objectRef"]["uid"] == "not-its-uid" and done[3]["objectRef"]["resourceVersion"] == "1"
    assert done[4]["user"]["username"] == "system:kube-controller-manager" and "uid" not in done[4]["objectRef"]
    if policy is not None:  # the stage before the body is read names nothing the URL does not
        received = [e for e in events if e["stage"] == "RequestReceived" and e["verb"] == "create"]
        assert received and all("name" not in e["objectRef"] for e in received)


@pytest.mark.parametrize("served", [None, *(POLICY.replace("Metadata", level) for level in (
    "Metadata", "Request", "RequestResponse"))], ids=["writes-only", "Metadata", "Request", "RequestResponse"],
    indirect=True)
async def test_a_successful_write_is_named_as_asked_never_as_answered(tmp_path, served):
    """kube-apiserver fills a write's objectRef from the request and the body sent, never from the object
    answered (LogRequestObject; kubernetes#100466): a generateName create names no object and logs no uid
    or resourceVersion, and an update logs the uid and resourceVersion the client sent, not the new
    ones; at every level, and for the in-process clients' writes alike. Read from the real log file."""
    kubeconfig = ["--kubeconfig", str(tmp_path / "kubeconfig")]

    async def kubectl(*args: str) -> dict:
        r = await asyncio.to_thread(subprocess.run, [KUBECTL, *kubeconfig, *args, "-o", "json"],
                                    capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        return orjson.loads(r.stdout)

    (tmp_path / "gen.json").write_bytes(orjson.dumps({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "gen-", "namespace": "default"}}))
    made = await kubectl("create", "-f", str(tmp_path / "gen.json"))
    (tmp_path / "made.json").write_bytes(orjson.dumps({**made, "data": {"k": "v"}}))
    replaced = await kubectl("replace", "-f", str(tmp_path / "made.json"))
    kcm = LocalClient(served.rest, User("system:kube-controller-manager", ("system:authenticated",))).resource(
        "", "v1", "configmaps")
    own = await kcm.create({"metadata": {"generateName": "kcm-", "namespace": "default"}})
    owned = await kcm.update({**own, "data": {"k": "v"}})
    assert made["metadata"]["name"].startswith("gen-") and replaced["metadata"]["resourceVersion"] != \
        made["metadata"]["resourceVersion"] and owned["metadata"]["resourceVersion"] != own["metadata"]["resourceVersion"]

    events = [orjson.loads(line) for line in (tmp_path / "audit.log").read_bytes().splitlines()]
    done = [e for e in events if e["stage"] == "ResponseComplete" and e.get("objectRef", {}).get("resource") == "configmaps"]
    assert [(e["verb"], e["user"]["username"]) for e in done] == [
        ("create", "kubernetes-super-admin"), ("update", "kubernetes-super-admin"),
        ("create", "system:kube-controller-manager"), ("update", "system:kube-controller-manager")]
    ref = {"resource": "configmaps", "namespace": "default", "apiVersion": "v1"}
    for create, update, sent in ((done[0], done[1], made), (done[2], done[3], own)):
        assert create["objectRef"] == ref and create["responseStatus"]["code"] == 201
        assert update["objectRef"] == {**ref, "name": sent["metadata"]["name"], "uid": sent["metadata"]["uid"],
                                       "resourceVersion": sent["metadata"]["resourceVersion"]}
    level = done[0]["level"]
    assert all(e["level"] == level for e in done)
    if level in ("Request", "RequestResponse"):  # the body as sent: the generated name is not in it either
        assert done[0]["requestObject"]["metadata"] == {"generateName": "gen-", "namespace": "default"}
    if level == "RequestResponse":  # the answer is logged as the answer, not as the objectRef
        assert done[0]["responseObject"]["metadata"]["name"] == made["metadata"]["name"]
    if served.audit.policy is not None:  # RequestReceived: before the body is read, the URL's name only
        received = [e for e in events if e["stage"] == "RequestReceived" and e["verb"] == "update"]
        assert [e["objectRef"] for e in received] == [{**ref, "name": made["metadata"]["name"]},
                                                      {**ref, "name": own["metadata"]["name"]}]
