"""kube-controller-manager's csrapproving: approves a kubelet's client certificate request
(signer `kubernetes.io/kube-apiserver-client-kubelet`, pki/csr.py's kubelet client checks) when a
SubjectAccessReview says its requester may `create` certificatesigningrequests/selfnodeclient
(a node renewing its own certificate: the requester is the request's CN) or /nodeclient (a
bootstrapper asking for a node's first certificate), in group certificates.k8s.io. Whoever may is
granted it by RBAC (kubeadm binds the bootstrap and node groups); nothing else is ever approved,
and nothing is denied. A recognized request that no review allows is retried with backoff, as
upstream's IgnorableError is, so a binding made later still approves it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..machinery.errors import APIError
from ..clock import REAL, Clock
from ..pki.csr import approval, common_name, kubelet_client_error, parse_request
from .base import Controller
from .csrsigning_options import KUBELET_CLIENT_SIGNER


@dataclass(frozen=True)
class Recognizer:
    #: the subresource the requester needs `create` on
    subresource: str
    #: whether the requester must be the node the request names
    self_node: bool
    message: str


#: tried in this order; the first whose review allows approves
RECOGNIZERS = (
    Recognizer("selfnodeclient", True, "Auto approving self kubelet client certificate after SubjectAccessReview."),
    Recognizer("nodeclient", False, "Auto approving kubelet client certificate after SubjectAccessReview."),
)


class NotApproved(Exception):
    """A recognized request its requester may not have approved (yet): retried with backoff."""


class CSRApprovingController(Controller):
    name = "certificatesigningrequest-approving-controller"
    aliases = ("csrapproving",)
    queue_name = "certificate"
    retriable = (NotApproved,)

    def __init__(self, client, clock: Clock = REAL, informers=None):
        super().__init__(client, clock, informers)
        self.csrs = client.resource("certificates.k8s.io", "v1", "certificatesigningrequests")
        self.reviews = client.resource("authorization.k8s.io", "v1", "subjectaccessreviews")
        self.inf = self.informer_factory.informer(self.csrs)
        self.inf.add_handlers(on_add=self._enqueue, on_update=lambda old, new: self._enqueue(new))

    def informers(self):
        return [self.inf]

    def _enqueue(self, obj: dict) -> None:
        if not (obj.get("status") or {}).get("certificate"):
            self.queue.add(obj["metadata"]["name"])

    async def sync(self, key: str) -> None:
        obj = self.inf.get(key)
        if obj is None or (obj.get("status") or {}).get("certificate") or any(approval(obj)):
            return
        request = parse_request(obj)
        spec = obj["spec"]
        if spec.get("signerName") != KUBELET_CLIENT_SIGNER or kubelet_client_error(request, spec.get("usages") or []):
            return
        tried = []
        for r in RECOGNIZERS:
            if r.self_node and spec.get("username") != common_name(request):
                continue
            tried.append(r.subresource)
            if await self._allowed(spec, r.subresource):
                await self._approve(obj, r.message)
                return
        raise NotApproved(f'recognized csr "{key}" as [{" ".join(tried)}] but subject access review was not approved')

    async def _allowed(self, spec: dict, subresource: str) -> bool:
        """Whether the requester may `create` certificatesigningrequests/<subresource>."""
        review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {
            "user": spec.get("username", ""), "uid": spec.get("uid", ""), "groups": spec.get("groups") or [],
            "extra": spec.get("extra") or {},
            "resourceAttributes": {"group": "certificates.k8s.io", "resource": "certificatesigningrequests",
                                   "verb": "create", "subresource": subresource}}}
        answer = await self.reviews.create(review)
        return bool((answer.get("status") or {}).get("allowed"))

    async def _approve(self, obj: dict, message: str) -> None:
        status = dict(obj.get("status") or {})
        status["conditions"] = [*(status.get("conditions") or []), {
            "type": "Approved", "status": "True", "reason": "AutoApproved", "message": message}]
        try:
            await self.csrs.update({**obj, "status": status}, subresource="approval")
        except APIError as e:
            if e.code != 404:
                raise

