"""Who may use a standalone kubelet's endpoints (pkg/kubelet/server/auth.go, the kubelet's webhook
authentication and authorization): a client certificate its client CA signed names the user (the API
server's kubelet client certificate), else a bearer token does through a TokenReview; the request is
then a verb on the node's subresource of `nodes` (/stats: stats, /metrics: metrics, /logs: log,
/pods: pods, /healthz: healthz, /configz: configz, everything else, exec and containerLogs among
it: proxy), asked of the API server with a SubjectAccessReview; a fine-grained subresource refused
is asked again as proxy (KubeletFineGrainedAuthz). The always-allowed paths need neither. A
refusal is the kubelet's plain text (InstallAuthFilter): 401 `Unauthorized`, 403 `Forbidden
(user=..., verb=..., resource=nodes, subresource=...)`, which the API server hands on to kubectl."""

from __future__ import annotations

from aiohttp import web

from .apiserver.auth.authorizer import Attributes
from .component_server import DelegatedAuth
from .machinery.user import User, bearer_token, user_from_cert

_ANONYMOUS = User("system:anonymous", ("system:unauthenticated",))
#: the kubelet's verbs by HTTP method
_VERBS = {"post": "create", "get": "get", "head": "get", "put": "update", "patch": "patch", "delete": "delete"}
#: path prefix -> subresource, the first that matches
_SUBRESOURCES = (("/stats", "stats"), ("/metrics", "metrics"), ("/logs", "log"), ("/pods", "pods"),
                 ("/runningpods", "pods"), ("/healthz", "healthz"), ("/configz", "configz"))
#: those that fall back to proxy when refused
_FINE_GRAINED = frozenset(("pods", "healthz", "configz"))


def subresource(path: str) -> str:
    return next((sub for prefix, sub in _SUBRESOURCES if path == prefix or path.startswith(prefix + "/")), "proxy")


class KubeletAuth(DelegatedAuth):
    """The authentication and authorization of node `node`'s kubelet endpoints."""

    def __init__(self, client, node: str, always_allow_paths: str, anonymous: bool = True, token_webhook: bool = True,
                 mode: str = "Webhook"):
        """authentication.anonymous.enabled, authentication.webhook.enabled and authorization.mode
        (Webhook, or AlwaysAllow: any authenticated request may)."""
        super().__init__(client, always_allow_paths)
        self.node, self.anonymous, self.token_webhook, self.always_allow = node, anonymous, token_webhook, \
            mode == "AlwaysAllow"

    async def user(self, request: web.Request) -> User | None:
        tls = request.transport.get_extra_info("ssl_object") if request.transport is not None else None
        if tls is not None and (user := user_from_cert(tls.getpeercert())) is not None:
            return user
        token = bearer_token(request.headers.get("Authorization", "")) is not None
        if token and self.token_webhook:
            return await super().user(request)
        return _ANONYMOUS if self.anonymous else None

    def refusal(self, user: User | None, a: Attributes | None, reason: str) -> web.Response:
        if user is None:
            return web.Response(status=401, text="Unauthorized")
        return web.Response(status=403, text=f"Forbidden (user={user.name}, verb={_VERBS.get(a.verb, a.verb)}, "
                                             f"resource=nodes, subresource={subresource(a.path)})")

    async def decide(self, user: User, a: Attributes) -> tuple[bool, str]:
        if self.always_allow or self.always_allowed(a.path):
            return True, ""
        verb, sub = _VERBS.get(a.verb, a.verb), subresource(a.path)
        allowed, reason = await self._node(user, verb, sub)
        if not allowed and sub in _FINE_GRAINED:
            return await self._node(user, verb, "proxy")
        return allowed, reason

    async def _node(self, user: User, verb: str, sub: str) -> tuple[bool, str]:
        return await self.review(user, {"resourceAttributes": {
            "verb": verb, "version": "v1", "resource": "nodes", "subresource": sub, "name": self.node}})
