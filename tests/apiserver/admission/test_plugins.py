"""kube-apiserver's in-tree admission plugins, over HTTP with the official client."""

from __future__ import annotations

import asyncio
import base64
import json

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.served import served


def csr(name: str, signer: str, orgs: tuple[str, ...], usages: list) -> dict:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
    req = x509.CertificateSigningRequestBuilder().subject_name(x509.Name(
        [*attrs, x509.NameAttribute(NameOID.COMMON_NAME, "system:node:n1")])).sign(
        ec.generate_private_key(ec.SECP256R1()), hashes.SHA256())
    return {"metadata": {"name": name}, "spec": {
        "request": base64.b64encode(req.public_bytes(serialization.Encoding.PEM)).decode(), "signerName": signer,
        "usages": usages}}


async def test_certificate_subject_restriction_refuses_a_masters_client_request(tmp_path):
    """CertificateSubjectRestriction: a kube-apiserver-client request may not name system:masters
    among its organizations; other signers' requests may (their signers have policies of their own)."""
    async with served(tmp_path) as (_, api_client):
        certs = client.CertificatesV1Api(api_client)
        with pytest.raises(ApiException) as e:
            await asyncio.to_thread(certs.create_certificate_signing_request, csr(
                "root", "kubernetes.io/kube-apiserver-client", ("dev", "system:masters"), ["client auth"]))
        made = [(await asyncio.to_thread(certs.create_certificate_signing_request, csr(name, signer, orgs, usages))).metadata.name
                for name, signer, orgs, usages in (
                    ("dev", "kubernetes.io/kube-apiserver-client", ("dev",), ["client auth"]),
                    ("node", "kubernetes.io/kube-apiserver-client-kubelet", ("system:masters",), ["client auth"]))]
    assert e.value.status == 403
    body = json.loads(e.value.body)
    assert (body["reason"], body["message"]) == ("Forbidden", 'certificatesigningrequests.certificates.k8s.io "root" is '
                                                 "forbidden: use of kubernetes.io/kube-apiserver-client signer with "
                                                 "system:masters group is not allowed")
    assert made == ["dev", "node"]


async def grant_user(rbac, user: str, name: str, rules: list) -> None:
    """A ClusterRole `name` with `rules`, bound to `user`."""
    await asyncio.to_thread(rbac.create_cluster_role, {"metadata": {"name": name}, "rules": rules})
    await asyncio.to_thread(rbac.create_cluster_role_binding, {
        "metadata": {"name": name}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]})


async def test_certificate_approval_and_signing_need_the_signers_verbs(tmp_path):
    """CertificateApproval: a write through /approval needs `approve` on signers/<signerName> (or
    <domain>/*); CertificateSigning: a /status write that changes the certificate or the conditions
    needs `sign`; one that changes neither needs nothing more than the update itself."""
    async with served(tmp_path) as (_, api_client):
        rbac = client.RbacAuthorizationV1Api(api_client)

        async def grant(name: str, rules: list) -> None:
            await grant_user(rbac, "carol", name, rules)
        await grant("csr-writer", [{"apiGroups": ["certificates.k8s.io"], "verbs": ["get", "update"], "resources": [
            "certificatesigningrequests", "certificatesigningrequests/approval", "certificatesigningrequests/status"]}])
        admin = client.CertificatesV1Api(api_client)
        await asyncio.to_thread(admin.create_certificate_signing_request, csr(
            "req", "kubernetes.io/kube-apiserver-client", ("dev",), ["client auth"]))
        carol_client = client.ApiClient(api_client.configuration)
        carol_client.set_default_header("Impersonate-User", "carol")
        carol = client.CertificatesV1Api(carol_client)

        async def approve() -> object:
            cur = await asyncio.to_thread(carol.read_certificate_signing_request, "req")
            cur.status.conditions = [client.V1CertificateSigningRequestCondition(
                type="Approved", status="True", reason="ByCarol", message="fine")]
            return await asyncio.to_thread(carol.replace_certificate_signing_request_approval, "req", cur)

        async def status(change: bool) -> object:
            cur = await asyncio.to_thread(carol.read_certificate_signing_request, "req")
            if change:
                cur.status.conditions = [*(cur.status.conditions or []), client.V1CertificateSigningRequestCondition(
                    type="Failed", status="True", reason="Nope", message="no")]
            return await asyncio.to_thread(carol.replace_certificate_signing_request_status, "req", cur)

        refused = []
        for attempt in (approve, lambda: status(True)):
            with pytest.raises(ApiException) as e:
                await attempt()
            refused.append((e.value.status, json.loads(e.value.body)["message"]))
        await grant("approver", [{"apiGroups": ["certificates.k8s.io"], "verbs": ["approve"], "resources": ["signers"],
                                  "resourceNames": ["kubernetes.io/*"]}])
        conditions = (await approve()).status.conditions
        unchanged = (await status(False)).status.conditions  # no sign needed to change nothing
        with pytest.raises(ApiException) as e:
            await status(True)
        await grant("signer", [{"apiGroups": ["certificates.k8s.io"], "verbs": ["sign"], "resources": ["signers"],
                                "resourceNames": ["kubernetes.io/kube-apiserver-client"]}])
        failed = (await status(True)).status.conditions
    prefix = 'certificatesigningrequests.certificates.k8s.io "req" is forbidden: user not permitted to '
    assert refused == [(403, prefix + 'approve requests with signerName "kubernetes.io/kube-apiserver-client"'),
                       (403, prefix + 'sign requests with signerName "kubernetes.io/kube-apiserver-client"')]
    assert [c.type for c in conditions] == [c.type for c in unchanged] == ["Approved"]
    assert e.value.status == 403
    assert [c.type for c in failed] == ["Approved", "Failed"]


async def test_namespace_lifecycle_keeps_the_immortal_namespaces(core):
    """NamespaceLifecycle refuses to delete default, kube-system and kube-public (dry run or not);
    kube-node-lease and other namespaces may go."""
    for name in ("default", "kube-system", "kube-public"):
        for dry_run in (None, "All"):
            with pytest.raises(ApiException) as e:
                await asyncio.to_thread(core.delete_namespace, name, dry_run=dry_run)
            status = json.loads(e.value.body)
            assert (e.value.status, status["reason"], status["message"]) == (
                403, "Forbidden", f'namespaces "{name}" is forbidden: this namespace may not be deleted')
            assert status["details"] == {"name": name, "kind": "namespaces"}
        assert (await asyncio.to_thread(core.read_namespace, name)).status.phase == "Active"
    lease = await asyncio.to_thread(core.delete_namespace, "kube-node-lease", dry_run="All")
    assert lease["metadata"]["name"] == "kube-node-lease"  # the namespace, which the client leaves a dict
    await asyncio.to_thread(core.create_namespace, {"metadata": {"name": "mortal"}})
    gone = await asyncio.to_thread(core.delete_namespace, "mortal")
    assert (gone["metadata"]["name"], gone["status"]["phase"]) == ("mortal", "Terminating")


async def test_pod_certificate_request_status_needs_sign_for_its_signer(tmp_path):
    """The PodCertificateRequest status strategy's check: a /status write that changes the status needs
    `sign` on signers/<signerName> (or <domain>/*), refused as Invalid on spec.signerName; a write that
    changes nothing needs only the update."""
    from tests.registry.test_certificates import pcr

    async with served(tmp_path) as (_, api_client):
        rbac = client.RbacAuthorizationV1Api(api_client)

        async def grant(name: str, rules: list) -> None:
            await grant_user(rbac, "dave", name, rules)
        await grant("pcr-writer", [{"apiGroups": ["certificates.k8s.io"], "verbs": ["get", "update"],
                                    "resources": ["podcertificaterequests", "podcertificaterequests/status"]}])
        await asyncio.to_thread(client.CustomObjectsApi(api_client).create_namespaced_custom_object,
                                "certificates.k8s.io", "v1", "default", "podcertificaterequests",
                                {"apiVersion": "certificates.k8s.io/v1", "kind": "PodCertificateRequest", **pcr()})
        dave_client = client.ApiClient(api_client.configuration)
        dave_client.set_default_header("Impersonate-User", "dave")
        dave = client.CustomObjectsApi(dave_client)

        async def status(deny: bool) -> dict:
            cur = await asyncio.to_thread(dave.get_namespaced_custom_object, "certificates.k8s.io", "v1", "default",
                                          "podcertificaterequests", "req-x7")
            if deny:
                cur["status"] = {"conditions": [{"type": "Denied", "status": "True", "reason": "Nope", "message": "no",
                                                 "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
            return await asyncio.to_thread(dave.replace_namespaced_custom_object_status, "certificates.k8s.io", "v1",
                                           "default", "podcertificaterequests", "req-x7", cur)

        unchanged = await status(False)
        with pytest.raises(ApiException) as e:
            await status(True)
        await grant("pcr-signer", [{"apiGroups": ["certificates.k8s.io"], "verbs": ["sign"], "resources": ["signers"],
                                    "resourceNames": ["example.com/*"]}])
        denied = await status(True)
    assert "status" not in unchanged or not unchanged["status"].get("conditions")
    body = json.loads(e.value.body)
    assert (e.value.status, body["reason"]) == (422, "Invalid")
    assert body["message"] == ('PodCertificateRequest.certificates.k8s.io "req-x7" is invalid: spec.signerName: '
                               'Forbidden: User "dave" is not permitted to "sign" for signer '
                               '"example.com/workload-identity"')
    assert body["details"]["causes"] == [{"reason": "FieldValueForbidden", "field": "spec.signerName", "message":
                                          'Forbidden: User "dave" is not permitted to "sign" for signer '
                                          '"example.com/workload-identity"'}]
    assert [c["type"] for c in denied["status"]["conditions"]] == ["Denied"]


async def test_priority_allows_one_global_default_priority_class(tmp_path):
    """Priority's validation (`kubectl create priorityclass b --global-default` while `a` is the
    default): a second default is Forbidden on create, and on an update making another one the
    default; the default itself may be updated, and a pod without a class still gets its value."""
    async with served(tmp_path) as (_, api_client):
        sched, core = client.SchedulingV1Api(api_client), client.CoreV1Api(api_client)

        def pc(name: str, value: int, default: bool) -> dict:
            return {"metadata": {"name": name}, "value": value, "globalDefault": default}

        await asyncio.to_thread(sched.create_priority_class, pc("a", 100, True))
        refusals = []
        for call, body in ((sched.create_priority_class, pc("b", 200, True)),
                           (sched.create_priority_class, pc("c", 300, False)),
                           (lambda body: sched.patch_priority_class("c", body), {"globalDefault": True})):
            try:
                await asyncio.to_thread(call, body)
            except ApiException as e:
                refusals.append((e.status, json.loads(e.body)["message"]))
        await asyncio.to_thread(sched.patch_priority_class, "a", {"description": "the default"})
        pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
        got = await asyncio.to_thread(core.create_namespaced_pod, "default", pod)
    why = "is forbidden: PriorityClass a is already marked as default. Only one default can exist"
    assert refusals == [(403, f'priorityclasses.scheduling.k8s.io "b" {why}'),
                        (403, f'priorityclasses.scheduling.k8s.io "c" {why}')]
    assert (got.spec.priority_class_name, got.spec.priority) == ("a", 100)


async def test_priority_refuses_a_pod_that_sets_its_own_priority_or_preemption_policy(tmp_path):
    """Priority admission (upstream's admitPod) computes spec.priority and spec.preemptionPolicy from
    the pod's PriorityClass, or 0 and PreemptLowerPriority without one: a create carrying other values
    is Forbidden, one carrying the computed ones is admitted, and an update keeps the priority the create
    set, also from a body without it."""
    async with served(tmp_path) as (_, api_client):
        sched, core = client.SchedulingV1Api(api_client), client.CoreV1Api(api_client)
        await asyncio.to_thread(sched.create_priority_class, {"metadata": {"name": "polite"}, "value": 1000,
                                                              "preemptionPolicy": "Never"})

        def pod(name: str, **spec) -> dict:
            meta = {"generateName": name} if name.endswith("-") else {"name": name}
            return {"metadata": meta, "spec": {"containers": [{"name": "c", "image": "busybox"}], **spec}}

        refusals = []
        for body in (pod("bare", priority=5), pod("classy", priorityClassName="polite", priority=7),
                     pod("eager", priorityClassName="polite", preemptionPolicy="PreemptLowerPriority"),
                     pod("gen-", priorityClassName="nope")):
            with pytest.raises(ApiException) as e:
                await asyncio.to_thread(core.create_namespaced_pod, "default", body)
            status = json.loads(e.value.body)
            refusals.append((e.value.status, status["reason"], status["message"], status["details"]))
        agreeing = await asyncio.to_thread(core.create_namespaced_pod, "default",
                                           pod("agreeing", priorityClassName="polite", priority=1000,
                                               preemptionPolicy="Never"))
        plain = await asyncio.to_thread(core.create_namespaced_pod, "default", pod("plain", priority=0))
        relabelled = await asyncio.to_thread(core.patch_namespaced_pod, "agreeing", "default",
                                             {"metadata": {"labels": {"a": "b"}}})
        body = api_client.sanitize_for_serialization(relabelled)
        del body["spec"]["priority"]  # a client that drops the field it may not set
        replaced = await asyncio.to_thread(core.replace_namespaced_pod, "agreeing", "default", body)
    computed = "priority admission controller computed {} from the given PriorityClass name"
    assert refusals == [
        (403, "Forbidden", 'pods "bare" is forbidden: the integer value of priority (5) must not be provided '
         "in pod spec; " + computed.format(0), {"name": "bare", "kind": "pods"}),
        (403, "Forbidden", 'pods "classy" is forbidden: the integer value of priority (7) must not be provided '
         "in pod spec; " + computed.format(1000), {"name": "classy", "kind": "pods"}),
        (403, "Forbidden", 'pods "eager" is forbidden: the string value of PreemptionPolicy (PreemptLowerPriority) '
         "must not be provided in pod spec; " + computed.format("Never"), {"name": "eager", "kind": "pods"}),
        (403, "Forbidden", 'pods "gen-" is forbidden: no PriorityClass with name nope was found',
         {"name": "gen-", "kind": "pods"})]
    assert (agreeing.spec.priority, agreeing.spec.preemption_policy) == (1000, "Never")
    assert (plain.spec.priority, plain.spec.preemption_policy, plain.spec.priority_class_name) == (
        0, "PreemptLowerPriority", None)
    assert (relabelled.spec.priority, relabelled.spec.preemption_policy) == (1000, "Never")
    assert replaced.spec.priority == 1000
