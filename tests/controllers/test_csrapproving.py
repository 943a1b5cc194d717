"""csrapproving over HTTP: kubelet client requests are approved when a SubjectAccessReview lets their
requester create certificatesigningrequests/selfnodeclient (a node renewing its own) or /nodeclient
(a bootstrapper), with upstream's reason and messages; anything else is never approved."""

from __future__ import annotations

import asyncio
import base64

import pytest
from kubernetes import client

from nanokube.apiserver.loopback import LocalClient
from nanokube.client.http import HTTPClient
from nanokube.controllers.csrapproving import CSRApprovingController, NotApproved
from nanokube.controllers.manager import CERTIFICATE_CONTROLLER_USER
from tests.controllers import eventually
from tests.controllers.test_csrsigning import csr_pem, node_request
from tests.served import served

KUBELET = "kubernetes.io/kube-apiserver-client-kubelet"
CLIENT_USAGES = ["digital signature", "client auth"]
SELF = "Auto approving self kubelet client certificate after SubjectAccessReview."
BOOTSTRAP = "Auto approving kubelet client certificate after SubjectAccessReview."


def body(name: str, pem: bytes, signer: str = KUBELET, usages=CLIENT_USAGES) -> dict:
    return {"metadata": {"name": name}, "spec": {"request": base64.b64encode(pem).decode(), "signerName": signer,
                                                  "usages": usages}}


async def bind(rbac: client.RbacAuthorizationV1Api, role: str, group: str) -> None:
    """Bind one of the API server's default ClusterRoles to `group`, as kubeadm does."""
    await asyncio.to_thread(rbac.create_cluster_role_binding, {"metadata": {"name": f"{role}:{group}"}, "roleRef": {
        "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}]})


async def allow(rbac: client.RbacAuthorizationV1Api, subresource: str, group: str) -> None:
    """Let `group` create certificatesigningrequests/<subresource> through upstream's default role."""
    await bind(rbac, f"system:certificates.k8s.io:certificatesigningrequests:{subresource}", group)


@pytest.fixture(params=["loopback", "https"])
async def env(request, tmp_path):
    """The approver in-process (loopback client as its service account, as in `up`) or over HTTPS
    (`nanokube controller-manager`): its SubjectAccessReviews are answered either way, never stored."""
    async with served(tmp_path) as (server, api_client):
        http = HTTPClient.from_kubeconfig(str(tmp_path / "kubeconfig")) if request.param == "https" else None
        if http is not None:
            await http.start()
        ctrl = CSRApprovingController(http or LocalClient(server.rest, CERTIFICATE_CONTROLLER_USER))
        await ctrl.start()
        try:
            yield server, api_client, ctrl
        finally:
            await ctrl.stop()
            if http is not None:
                await http.close()


def as_user(api_client: client.ApiClient, user: str, group: str) -> client.CertificatesV1Api:
    """The API as `user` in `group`, impersonated by the admin."""
    other = client.ApiClient(api_client.configuration)
    other.set_default_header("Impersonate-User", user)
    other.set_default_header("Impersonate-Group", group)
    return client.CertificatesV1Api(other)


async def approved(certs: client.CertificatesV1Api, name: str) -> dict:
    async def check():
        got = (await asyncio.to_thread(certs.read_certificate_signing_request, name)).to_dict()
        return [c for c in (got["status"] or {}).get("conditions") or [] if c["type"] == "Approved"]
    (cond,) = await eventually(check)
    return cond


async def test_a_node_renewing_its_own_client_certificate_is_approved(env):
    _, api_client, _ = env
    await allow(client.RbacAuthorizationV1Api(api_client), "selfnodeclient", "system:nodes")
    pem, _ = node_request("system:node:n1")
    await asyncio.to_thread(as_user(api_client, "system:node:n1", "system:nodes").create_certificate_signing_request,
                            body("renew-n1", pem))
    cond = await approved(client.CertificatesV1Api(api_client), "renew-n1")
    assert (cond["status"], cond["reason"], cond["message"]) == ("True", "AutoApproved", SELF)
    # stamped by the API server, as the approver sends neither time
    assert cond["last_update_time"] is not None and cond["last_transition_time"] == cond["last_update_time"]


async def test_a_bootstrapper_asking_for_a_node_is_approved_as_nodeclient(env):
    _, api_client, _ = env
    rbac = client.RbacAuthorizationV1Api(api_client)
    await bind(rbac, "system:node-bootstrapper", "system:bootstrappers")
    await allow(rbac, "nodeclient", "system:bootstrappers")
    pem, _ = node_request("system:node:n2")
    certs = as_user(api_client, "system:bootstrap:abcdef", "system:bootstrappers")
    await asyncio.to_thread(certs.create_certificate_signing_request, body("join-n2", pem))
    cond = await approved(client.CertificatesV1Api(api_client), "join-n2")
    assert (cond["reason"], cond["message"]) == ("AutoApproved", BOOTSTRAP)


async def test_a_request_no_review_allows_is_retried_until_a_binding_allows_it(env):
    _, api_client, ctrl = env
    rbac = client.RbacAuthorizationV1Api(api_client)
    await bind(rbac, "system:node-bootstrapper", "system:bootstrappers")
    pem, _ = node_request("system:node:n4")
    # a bootstrapper asking for a node's certificate before it may create nodeclient (a node may not ask
    # for another's at all: NodeRestriction refuses it, CN=system:node:<itself> only)
    await asyncio.to_thread(as_user(api_client, "system:bootstrap:abcdef", "system:bootstrappers")
                            .create_certificate_signing_request, body("join-n4", pem))
    await eventually(lambda: asyncio.sleep(0, ctrl.inf.get("join-n4")))
    with pytest.raises(NotApproved) as e:
        await ctrl.sync("join-n4")
    assert str(e.value) == 'recognized csr "join-n4" as [nodeclient] but subject access review was not approved'
    certs = client.CertificatesV1Api(api_client)
    got = (await asyncio.to_thread(certs.read_certificate_signing_request, "join-n4")).to_dict()
    assert not (got["status"] or {}).get("conditions")
    await allow(rbac, "nodeclient", "system:bootstrappers")
    cond = await approved(certs, "join-n4")
    assert cond["message"] == BOOTSTRAP


async def test_other_requests_are_never_approved(env):
    _, api_client, ctrl = env
    certs = client.CertificatesV1Api(api_client)  # the admin (system:masters) may create anything
    user_pem, _ = csr_pem("alice", "dev")
    node_pem, _ = node_request("system:node:n5")
    serving_pem, _ = node_request("system:node:n5", dns=("n5.example.com",))
    for name, pem, signer, usages in (
            ("alice", user_pem, "kubernetes.io/kube-apiserver-client", ["client auth"]),
            ("n5-wrong-usages", node_pem, KUBELET, ["client auth", "server auth"]),
            ("n5-serving", serving_pem, "kubernetes.io/kubelet-serving", ["digital signature", "server auth"])):
        await asyncio.to_thread(certs.create_certificate_signing_request, body(name, pem, signer, usages))
        await eventually(lambda: asyncio.sleep(0, ctrl.inf.get(name)))
        assert await ctrl.sync(name) is None
        got = (await asyncio.to_thread(certs.read_certificate_signing_request, name)).to_dict()
        assert not (got["status"] or {}).get("conditions"), name
