"""Token controller (kube-controller-manager's serviceaccount-token): a Secret of
type kubernetes.io/service-account-token naming a ServiceAccount in its
`kubernetes.io/service-account.name` annotation gets `token`, `ca.crt` and
`namespace` filled in, and the account's uid annotated, as the documented
"long-lived API token for a ServiceAccount" expects. The token is a legacy
JWT (issuer kubernetes/serviceaccount, no expiry) signed with the API
server's service-account key; the API server accepts it while the Secret
holds it and the account, by uid, exists. A Secret whose account does not
exist (or has another uid) is deleted, and so are an account's Secrets when
the account goes."""

from __future__ import annotations

import base64

from ..client.informer import InformerFactory, key_of
from ..clock import REAL, Clock
from ..machinery.errors import APIError
from ..pki.jwt import LEGACY_ISSUER, sign
from .base import Controller

TOKEN_TYPE = "kubernetes.io/service-account-token"
NAME_ANNOTATION = "kubernetes.io/service-account.name"
UID_ANNOTATION = "kubernetes.io/service-account.uid"


def legacy_claims(sa: dict, secret: dict) -> dict:
    """serviceaccount.LegacyClaims with the legacy issuer."""
    md = sa["metadata"]
    return {"iss": LEGACY_ISSUER,
            "kubernetes.io/serviceaccount/namespace": md["namespace"],
            "kubernetes.io/serviceaccount/secret.name": secret["metadata"]["name"],
            "kubernetes.io/serviceaccount/service-account.name": md["name"],
            "kubernetes.io/serviceaccount/service-account.uid": md["uid"],
            "sub": f"system:serviceaccount:{md['namespace']}:{md['name']}"}


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


class TokensController(Controller):
    name = "serviceaccount-token-controller"
    aliases = ("serviceaccount-token",)
    queue_name = "serviceaccount_tokens_secret"

    def __init__(self, client, key, root_ca: bytes = b"", clock: Clock = REAL,
                 informers: InformerFactory | None = None):
        """`key`: the service-account signing key (the API server's DIR/pki/sa.key); `root_ca`: the
        cluster CA written as ca.crt."""
        super().__init__(client, clock, informers)
        self.key = key
        self.root_ca = root_ca
        self.secrets_api = client.resource("", "v1", "secrets")
        self.sa_api = client.resource("", "v1", "serviceaccounts")
        self.secrets = self.informer_factory.informer(self.secrets_api, field_selector=f"type={TOKEN_TYPE}")
        self.accounts = self.informer_factory.informer(self.sa_api)
        self.secrets.add_handlers(self._enqueue, lambda _o, n: self._enqueue(n))
        self.accounts.add_handlers(on_delete=self._account_deleted)

    def informers(self):
        return [self.secrets, self.accounts]

    def _enqueue(self, secret: dict) -> None:
        self.queue.add(key_of(secret))

    def _account_deleted(self, sa: dict) -> None:
        """syncServiceAccount of a deleted account: its token Secrets are synced, and so deleted."""
        md = sa["metadata"]
        for secret in self.secrets.list_namespace(md["namespace"]):
            if (secret["metadata"].get("annotations") or {}).get(NAME_ANNOTATION) == md["name"]:
                self._enqueue(secret)

    async def _account(self, namespace: str, name: str, uid: str) -> dict | None:
        """getServiceAccount: from the cache, else a GET; one of another uid counts as none."""
        sa = self.accounts.get(f"{namespace}/{name}")
        if sa is None:
            try:
                sa = await self.sa_api.get(name, namespace)
            except APIError as e:
                if e.code != 404:
                    raise
                return None
        return sa if not uid or sa["metadata"].get("uid") == uid else None

    async def sync(self, key: str) -> None:
        secret = self.secrets.get(key)
        if secret is None or secret.get("type") != TOKEN_TYPE:
            return
        md = secret["metadata"]
        annotations = md.get("annotations") or {}
        sa = await self._account(md["namespace"], annotations.get(NAME_ANNOTATION, ""), annotations.get(UID_ANNOTATION, ""))
        if sa is None:
            try:
                await self.secrets_api.delete(md["name"], md["namespace"], preconditions={"uid": md["uid"]})
            except APIError as e:
                if e.code not in (404, 409):
                    raise
            return
        if not self._needs_update(secret):
            return
        live = await self.secrets_api.get(md["name"], md["namespace"])
        if live["metadata"].get("resourceVersion") != md.get("resourceVersion") or not self._needs_update(live):
            return  # our view is behind: the update event brings it back
        data = dict(live.get("data") or {})
        if self.root_ca and data.get("ca.crt") != _b64(self.root_ca):
            data["ca.crt"] = _b64(self.root_ca)
        if not data.get("namespace"):
            data["namespace"] = _b64(md["namespace"].encode())
        if not data.get("token"):
            data["token"] = _b64(sign(self.key, legacy_claims(sa, live)).encode())
        live_md = live["metadata"]
        await self.secrets_api.update({**live, "data": data, "metadata": {**live_md, "annotations": {
            **(live_md.get("annotations") or {}), NAME_ANNOTATION: sa["metadata"]["name"],
            UID_ANNOTATION: sa["metadata"]["uid"]}}})

    def _needs_update(self, secret: dict) -> bool:
        """secretUpdateNeeded: the CA differs, or the namespace or the token is missing."""
        data = secret.get("data") or {}
        return bool(self.root_ca and data.get("ca.crt") != _b64(self.root_ca)) or not data.get("namespace") \
            or not data.get("token")
