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


@pytest.mark.parametrize("policy", [None, POLICY], ids=["writes-only", "policy"])
async def test_a_failed_create_or_update_names_the_object_its_body_asked_for(tmp_path, policy):
    log = tmp_path / "audit.log"
    if policy is not None:
        (tmp_path / "policy.yaml").write_text(policy)
    pki = ensure_pki(str(tmp_path))
    server = APIServer(MemoryStore(), pki, port=0, audit_log_path=str(log),
                       audit_policy=None if policy is None else load(tmp_path / "policy.yaml"))
    await server.start()
    try:
        write_kubeconfig(str(tmp_path / "kubeconfig"), server.url, pki)
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
    finally:
        await server.stop()
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
