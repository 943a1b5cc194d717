"""The authentication config's JWT authenticators as the server runs them, reloaded when the file
changes (upstream's authentication config controller, config_reload.py): a new text that decodes
and validates (its `anonymous` section unchanged) replaces the authenticators.

Its metrics are upstream's: apiserver_authentication_config_controller_* (reloads by status, the
last reload's time, the applied file's hash) and apiserver_authentication_jwt_authenticator_jwks_fetch_*
(each issuer's last key fetch by result and its last key set's hash, the series of an issuer the file
no longer names dropped), labelled with the server's identity's hash."""

from __future__ import annotations

import asyncio
import hashlib
import logging

from prometheus_client import CollectorRegistry

from ...clock import REAL, Clock
from ...machinery.metrics import Family
from ...machinery.user import User
from .authentication_config import SERVICE_ACCOUNT_ISSUER, ConfigError, Configuration, config_hash, parse, reload_problem
from .config_reload import ReloadedConfig
from .oidc import JWTAuthenticators, TokenError, issuer_hash

log = logging.getLogger(__name__)


def id_hash(apiserver_id: str) -> str:
    return "sha256:" + hashlib.sha256(apiserver_id.encode()).hexdigest()


class AuthenticationMetrics:
    def __init__(self, apiserver_id: str) -> None:
        self.registry = CollectorRegistry()
        self.id = id_hash(apiserver_id)
        what = "automatic reloads of authentication configuration split by status and apiserver identity."
        self.reloads = Family("counter", "apiserver_authentication_config_controller_automatic_reloads_total",
                              f"[BETA] Total number of {what}", ["apiserver_id_hash", "status"], self.registry)
        self.reload_time = Family(
            "gauge", "apiserver_authentication_config_controller_automatic_reload_last_timestamp_seconds",
            "[BETA] Timestamp of the last automatic reload of authentication configuration split by status and "
            "apiserver identity.", ["apiserver_id_hash", "status"], self.registry)
        self.config_info = Family(
            "gauge", "apiserver_authentication_config_controller_last_config_info",
            "[ALPHA] Information about the last applied authentication configuration with hash as label, split by "
            "apiserver identity.", ["apiserver_id_hash", "hash"], self.registry)
        self.fetch_time = Family(
            "gauge", "apiserver_authentication_jwt_authenticator_jwks_fetch_last_timestamp_seconds",
            "[ALPHA] Timestamp of the last successful or failed JWKS fetch split by result, api server identity and "
            "jwt issuer for the JWT authenticator.", ["apiserver_id_hash", "jwt_issuer_hash", "result"], self.registry)
        self.key_set = Family(
            "gauge", "apiserver_authentication_jwt_authenticator_jwks_fetch_last_key_set_info",
            "[ALPHA] Information about the last JWKS fetched by the JWT authenticator with hash as label, split by "
            "api server identity and jwt issuer.", ["apiserver_id_hash", "hash", "jwt_issuer_hash"], self.registry)
        #: issuer hash -> the hash of the key set it last served (one series each); the issuers fetched from
        self.key_sets: dict[str, str] = {}
        self.fetching: set[str] = set()

    def fetched(self, issuer: str, ok: bool, raw: bytes, now: float) -> None:
        h = issuer_hash(issuer)
        self.fetching.add(h)
        self.fetch_time.labels(self.id, h, "success" if ok else "failure").set(now)
        if ok:
            self.key_set.remove(self.id, self.key_sets.get(h, ""), h)
            self.key_sets[h] = "sha256:" + hashlib.sha256(raw).hexdigest()
            self.key_set.labels(self.id, self.key_sets[h], h).set(1)

    def forget(self, issuers: list[str]) -> None:
        """Drop the fetch series of every issuer but `issuers` (a reload removed them)."""
        kept = {issuer_hash(i) for i in issuers}
        for h in set(self.key_sets) - kept:
            self.key_set.remove(self.id, self.key_sets.pop(h), h)
        for h in self.fetching - kept:
            for result in ("success", "failure"):
                self.fetch_time.remove(self.id, h, result)
        self.fetching &= kept

    def applied(self, text: str) -> None:
        self.config_info.reset()
        self.config_info.labels(self.id, config_hash(text)).set(1)

    def reloaded(self, ok: bool, now: float) -> None:
        status = "success" if ok else "failure"
        self.reloads.labels(self.id, status).inc()
        self.reload_time.labels(self.id, status).set(now)


class AuthenticationController(ReloadedConfig):
    """The JWT authenticators of --authentication-config, kept current with its file."""

    what = "authentication"

    def __init__(self, path: str, config: Configuration, clock: Clock = REAL, apiserver_id: str = "",
                 disallowed_issuers: tuple[str, ...] = (SERVICE_ACCOUNT_ISSUER,)) -> None:
        """`disallowed_issuers`: --service-account-issuer's, which a reloaded file may not name either."""
        self.disallowed_issuers = disallowed_issuers
        super().__init__(path, config.text, clock, AuthenticationMetrics(apiserver_id))
        self.config = config
        self.metrics.applied(config.text)
        self.authenticators = self._authenticators(config)

    def _authenticators(self, config: Configuration) -> JWTAuthenticators:
        return JWTAuthenticators(config.jwt, self.clock, self._fetched)

    def _fetched(self, issuer: str, ok: bool, raw: bytes) -> None:
        self.metrics.fetched(issuer, ok, raw, self.clock.now())

    async def authenticate(self, token: str) -> User | None:
        """The user a configured issuer's token stands for; None when it names none or fails."""
        try:
            return await self.authenticators.authenticate(token)
        except TokenError as e:
            log.debug("%s", e)
            return None

    def start(self) -> None:
        super().start()
        self._prefetch()

    def _prefetch(self) -> None:
        self._tasks = [t for t in self._tasks if not t.done()]
        self._tasks.append(asyncio.get_running_loop().create_task(self.authenticators.prefetch()))

    def build(self, text: str) -> Configuration:
        config = parse(text, self.disallowed_issuers)
        problem = reload_problem(self.config, config)
        if problem:
            raise ConfigError(problem)
        return config

    def apply(self, config: Configuration) -> None:
        self.config, self.authenticators = config, self._authenticators(config)
        self.metrics.forget([i.url for i in config.jwt])
        self._prefetch()
        self.metrics.applied(config.text)
