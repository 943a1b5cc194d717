"""kube-controller-manager's --use-service-account-credentials: each controller's client acts as
the kube-system service account of its client name (SAControllerClientBuilder), so the API
server's RBAC holds each controller to its own `system:controller:<name>` role. The root client
(the kubeconfig's identity) creates the account if it is missing and asks TokenRequest for an
hour's token; a client renews its token once a fifth of the hour is left."""

from __future__ import annotations

import asyncio
import logging

from ..clock import REAL, Clock, parse_time
from ..machinery.errors import APIError

log = logging.getLogger(__name__)

NAMESPACE = "kube-system"
#: the tokens' lifetime and the part of it left when they are renewed (upstream's defaults)
EXPIRATION_SECONDS = 3600
LEEWAY_PERCENT = 20
#: the waits between failed tries before a token request gives up (wait.Backoff 0.5 s, doubling, 4 steps)
BACKOFF = (0.5, 1.0, 2.0)


class ServiceAccountTokens:
    """tokenSourceImpl: the bearer token of kube-system/<name>, renewed before it expires."""

    def __init__(self, root, name: str, clock: Clock = REAL):
        self.root, self.name, self.clock = root, name, clock
        self._token = ""
        self._renew_at = 0.0
        self._lock = asyncio.Lock()

    async def __call__(self) -> str:
        if self._token and self.clock.now() < self._renew_at:
            return self._token
        async with self._lock:
            if not self._token or self.clock.now() >= self._renew_at:
                await self._request()
        return self._token

    async def _request(self) -> None:
        accounts = self.root.resource("", "v1", "serviceaccounts")
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                "spec": {"expirationSeconds": EXPIRATION_SECONDS}}
        for wait in (*BACKOFF, None):
            try:
                await self._ensure_account(accounts)
                review = await accounts.create_subresource(self.name, "token", body, NAMESPACE)
                break
            except (APIError, OSError) as e:
                if wait is None:
                    raise
                log.warning("token for %s/%s failed: %s", NAMESPACE, self.name, e)
                await self.clock.sleep(wait)
        self._token = review["status"]["token"]
        lifetime = review["spec"].get("expirationSeconds") or EXPIRATION_SECONDS
        self._renew_at = parse_time(review["status"]["expirationTimestamp"]) - lifetime * LEEWAY_PERCENT / 100

    async def _ensure_account(self, accounts) -> None:
        """getOrCreateServiceAccount: the account, created (with kube-system) when missing."""
        try:
            await accounts.get(self.name, NAMESPACE)
            return
        except APIError as e:
            if e.code != 404:
                raise
        for resource, obj in (
                (self.root.resource("", "v1", "namespaces"), {"metadata": {"name": NAMESPACE}}),
                (accounts, {"metadata": {"name": self.name, "namespace": NAMESPACE}})):
            try:
                await resource.create(obj)
            except APIError as e:
                if e.code != 409:
                    raise


class ServiceAccountClients:
    """The client builder: `named(name)` is the root client named `name` acting as service
    account kube-system/<name> (one client and token per name)."""

    def __init__(self, root, clock: Clock = REAL):
        self.root, self.clock = root, clock
        self._clients: dict[str, object] = {}

    def named(self, name: str):
        if name not in self._clients:
            self._clients[name] = self.root.with_token(name, ServiceAccountTokens(self.root, name, self.clock))
        return self._clients[name]
