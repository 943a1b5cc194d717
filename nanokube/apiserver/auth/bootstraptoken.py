"""kube-apiserver's bootstrap token authenticator (--enable-bootstrap-token-auth): a bearer token
`<id>.<secret>` is user system:bootstrap:<id> in system:bootstrappers and the Secret's extra groups
while kube-system/bootstrap-token-<id> is a live bootstrap.kubernetes.io/token Secret holding that
secret and marked for authentication. Any other token is left to the other authenticators; a
bootstrap token that fails a check authenticates nobody (a 401), the reason only logged, as
upstream's. It stands first of the API server's `authentication` (the authenticators after
ServiceAccount tokens), the JWT issuers of --authentication-config after it, as kube-apiserver
orders its token authenticators."""

from __future__ import annotations

import hmac
import logging
from collections.abc import Callable

from ...machinery import bootstraptoken as bt
from ...machinery.user import User

log = logging.getLogger(__name__)


class BootstrapTokenAuthenticator:
    def __init__(self, lookup: Callable[[str, str, str], dict | None], now: Callable[[], float], after=None):
        """`lookup(plural, namespace, name)` reads a core/v1 object from the watch cache; `after`
        (the JWT issuers' controller, or None) is asked for any other token, and started and stopped
        with this."""
        self.lookup = lookup
        self.now = now
        self.after = after

    def start(self) -> None:
        if self.after is not None:
            self.after.start()

    async def stop(self) -> None:
        if self.after is not None:
            await self.after.stop()

    async def authenticate(self, token: str) -> User | None:
        parsed = bt.parse_token(token)
        if parsed is None:
            return await self.after.authenticate(token) if self.after is not None else None
        return self.bootstrap_user(*parsed)

    def bootstrap_user(self, token_id: str, token_secret: str) -> User | None:
        secret = self.lookup("secrets", bt.NAMESPACE, bt.SECRET_PREFIX + token_id)
        why = self._refusal(secret, token_id, token_secret) if secret is not None else "not found"
        if why is None:
            try:
                return User(bt.USER_PREFIX + token_id, (*bt.groups(secret), "system:authenticated"))
            except ValueError as e:
                why = f"has invalid value for key {bt.EXTRA_GROUPS_KEY}: {e}"
        log.info("bootstrap token %s/%s%s: %s", bt.NAMESPACE, bt.SECRET_PREFIX, token_id, why)
        return None

    def _refusal(self, secret: dict, token_id: str, token_secret: str) -> str | None:
        """Why the Secret does not let the token in, or None."""
        if secret["metadata"].get("deletionTimestamp"):
            return "is deleted and awaiting removal"
        if secret.get("type") != bt.SECRET_TYPE or not secret.get("data"):
            return f"has invalid type, expected {bt.SECRET_TYPE}"
        if not hmac.compare_digest(bt.data(secret, bt.SECRET_KEY).encode(), token_secret.encode()):
            return f"has invalid value for key {bt.SECRET_KEY}"
        if bt.data(secret, bt.ID_KEY) != token_id:
            return f"has invalid value for key {bt.ID_KEY}"
        if bt.expired(secret, self.now()):
            return "has expired"
        if bt.data(secret, bt.USAGE_AUTHENTICATION) != "true":
            return f"not marked {bt.USAGE_AUTHENTICATION}=true"
        return None
