"""JWT authenticators of the authentication config (upstream's plugin/pkg/auth/authenticator/token/oidc):
a bearer token whose `iss` names a configured issuer is verified against the keys the issuer
publishes (its OpenID discovery document's jwks_uri, fetched over HTTPS trusting the entry's
certificateAuthority), its audience, expiry and claim rules checked, and its claims mapped to a
user by claim or CEL expression, which the userValidationRules then judge.

A token naming no configured issuer is not this authenticator's (None); one naming an issuer but
failing any check is an error, which fails the request (401) as upstream's union does. Keys are
fetched as go-oidc's RemoteKeySet fetches them: once at the start, and again whenever no key held
verifies a token (its kid unknown, or the key under that kid replaced), with no schedule and no
limit but one fetch at a time, which every token waiting on it shares; the discovery document is read
until it has answered once, its jwks_uri kept from then on. Each fetch runs in a thread, so the event
loop never waits on the issuer."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import logging
import ssl
import urllib.request
from typing import Any

import orjson
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from ...cel import CELError
from ...clock import REAL, Clock
from ...machinery.user import User
from ...pki.jwt import verify_signature
from .authentication_config import ClaimMapping, Issuer

log = logging.getLogger(__name__)

#: go-oidc's allowed clock skew for `nbf`
NOT_BEFORE_LEEWAY = 300.0
FETCH_TIMEOUT = 10.0
_CURVES = {"P-256": (ec.SECP256R1, 32), "P-384": (ec.SECP384R1, 48), "P-521": (ec.SECP521R1, 66)}


class TokenError(Exception):
    """A token for a configured issuer that does not authenticate: the request is a 401."""


def _unb64(s: str) -> bytes:
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def _int(s: str) -> int:
    return int.from_bytes(_unb64(s), "big")


def public_key(jwk: dict) -> Any:
    """A JWK's public key (RSA or EC), or None for one of another type."""
    if jwk.get("kty") == "RSA":
        return rsa.RSAPublicNumbers(_int(jwk["e"]), _int(jwk["n"])).public_key()
    if jwk.get("kty") == "EC" and jwk.get("crv") in _CURVES:
        return ec.EllipticCurvePublicNumbers(_int(jwk["x"]), _int(jwk["y"]), _CURVES[jwk["crv"]][0]()).public_key()
    return None


def unverified_issuer(token: str) -> str | None:
    """The `iss` of a token's payload, read before any check (which authenticator is it for?)."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        claims = orjson.loads(_unb64(parts[1]))
    except (ValueError, orjson.JSONDecodeError):
        return None
    iss = claims.get("iss") if isinstance(claims, dict) else None
    return iss if isinstance(iss, str) else None


class JWTAuthenticator:
    """One `jwt` entry of the configuration."""

    def __init__(self, issuer: Issuer, clock: Clock = REAL, on_fetch=None) -> None:
        """`on_fetch(issuer_url, ok, jwks_bytes)`: told of every fetch of the keys (the metrics)."""
        self.issuer = issuer
        self.clock = clock
        self.on_fetch = on_fetch
        self.keys: dict[str, Any] = {}  # kid -> public key ("" for keys without one)
        self._jwks_uri = ""  # the discovery document's, once it answered
        self._fetching: asyncio.Future | None = None
        self._ssl = ssl.create_default_context(cadata=issuer.ca) if issuer.ca else ssl.create_default_context()

    # --- keys ---------------------------------------------------------------

    def _get(self, url: str) -> bytes:
        with urllib.request.urlopen(url, context=self._ssl, timeout=FETCH_TIMEOUT) as r:
            return r.read()

    def _fetch_keys(self) -> tuple[dict[str, Any], bytes]:
        """The key set, after the discovery document where it has not answered yet (blocking: run in
        a thread)."""
        if not self._jwks_uri:
            discovery = self.issuer.discovery_url or self.issuer.url.rstrip("/") + "/.well-known/openid-configuration"
            doc = orjson.loads(self._get(discovery))
            if doc.get("issuer") != self.issuer.url:
                raise ValueError(f"oidc: issuer did not match the issuer returned by provider, expected "
                                 f"{self.issuer.url!r} got {doc.get('issuer')!r}")
            self._jwks_uri = str(doc["jwks_uri"])
        raw = self._get(self._jwks_uri)
        keys = {}
        for jwk in orjson.loads(raw).get("keys") or []:
            if jwk.get("use", "sig") == "sig" and (key := public_key(jwk)) is not None:
                keys[str(jwk.get("kid", ""))] = key
        return keys, raw

    async def refresh(self) -> None:
        """Fetch the keys (callers waiting on a fetch in flight share it); a failed fetch keeps the keys held."""
        if self._fetching is not None:
            await asyncio.shield(self._fetching)
            return
        self._fetching = asyncio.get_running_loop().create_future()
        try:
            self.keys, raw = await asyncio.to_thread(self._fetch_keys)
            if self.on_fetch is not None:
                self.on_fetch(self.issuer.url, True, raw)
        except (OSError, ValueError, KeyError, TypeError, AttributeError, orjson.JSONDecodeError) as e:
            log.warning("fetching the keys of JWT issuer %s: %s", self.issuer.url, e)
            if self.on_fetch is not None:
                self.on_fetch(self.issuer.url, False, b"")
        finally:
            self._fetching.set_result(None)
            self._fetching = None

    # --- tokens -------------------------------------------------------------

    def _verifies(self, kid: str, alg: str, signed: bytes, signature: bytes) -> bool:
        """Whether a key held verifies the signature: the one under the token's kid, any without one."""
        candidates = [self.keys[kid]] if kid in self.keys else list(self.keys.values()) if not kid else []
        return any(verify_signature(k, alg, signed, signature) for k in candidates)

    async def claims(self, token: str) -> dict:
        """The payload of a token this issuer signed, for its audiences, current: else TokenError."""
        head, payload, sig = token.split(".")
        try:
            header, claims, signature = orjson.loads(_unb64(head)), orjson.loads(_unb64(payload)), _unb64(sig)
        except (ValueError, orjson.JSONDecodeError):
            raise TokenError("oidc: malformed jwt") from None
        if not isinstance(header, dict) or not isinstance(claims, dict):
            raise TokenError("oidc: malformed jwt")
        kid, alg = str(header.get("kid", "")), str(header.get("alg", ""))
        signed = f"{head}.{payload}".encode()
        if not self._verifies(kid, alg, signed, signature):
            await self.refresh()
            if not self._verifies(kid, alg, signed, signature):
                raise TokenError("oidc: verify token: failed to verify signature")
        aud = claims.get("aud")
        aud = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
        if not all(isinstance(a, str) for a in aud):  # (go-oidc's audience: a string or an array of strings)
            raise TokenError("oidc: failed to unmarshal claims: json: cannot unmarshal aud into Go value of type []string")
        if not self.issuer.audiences & set(aud):
            raise TokenError(f"oidc: expected audience in {sorted(self.issuer.audiences)} got {aud}")
        now, exp, nbf = self.clock.now(), claims.get("exp"), claims.get("nbf")
        if not isinstance(exp, (int, float)) or isinstance(exp, bool):
            raise TokenError("oidc: verify token: oidc: failed to unmarshal claims: missing exp")
        if now > exp:
            raise TokenError("oidc: verify token: oidc: token is expired")
        if isinstance(nbf, (int, float)) and now + NOT_BEFORE_LEEWAY < nbf:
            raise TokenError("oidc: verify token: oidc: current time before the nbf (not before) time")
        return claims

    async def authenticate(self, token: str) -> User:
        claims = await self.claims(token)
        issuer = self.issuer
        for claim, want in issuer.claim_rules:
            if claim not in claims:
                raise TokenError(f"oidc: required claim {claim} not found in token")
            if claims[claim] != want:
                raise TokenError(f"oidc: required claim {claim} value does not match. Got = {claims[claim]}, want = {want}")
        variables = {"claims": claims}
        for program, message in issuer.claim_expressions:
            if _evaluate(program, variables, "claim validation expression") is not True:
                raise TokenError(f"oidc: error evaluating claim validation expression: "
                                 f"{message or f'expression {program.source!r} resulted in error'}")
        name = _username(issuer.username, claims)
        groups = _strings(issuer.groups, claims, "groups")
        uid = _string(issuer.uid, claims, "uid") if (issuer.uid.claim or issuer.uid.expression) else ""
        extra = {}
        for key, program in issuer.extra.items():
            values = _as_strings(_evaluate(program, variables, "extra mapping expression"), key)
            if values:
                extra[key] = values
        user = User(name, (*groups, "system:authenticated"), uid, extra)
        info = {"username": name, "uid": uid, "groups": list(groups), "extra": extra}
        for program, message in issuer.user_rules:
            if _evaluate(program, {"user": info}, "user validation rule") is not True:
                raise TokenError(f"oidc: error evaluating user info validation rule: "
                                 f"{message or f'validation expression {program.source!r} failed'}")
        return user


def _evaluate(program, variables: dict, what: str) -> Any:
    try:
        return program.evaluate(variables)
    except CELError as e:
        raise TokenError(f"oidc: error evaluating {what}: {e}") from None


def _username(m: ClaimMapping, claims: dict) -> str:
    if m.expression is not None:
        name = _evaluate(m.expression, {"claims": claims}, "username claim expression")
        if not isinstance(name, str):
            raise TokenError("oidc: error evaluating username claim expression: result must be a string")
        if not name:
            raise TokenError("oidc: empty username via CEL expression is not allowed")
        return name
    name = claims.get(m.claim)
    if not isinstance(name, str):
        raise TokenError(f"oidc: parse username claims {m.claim!r}: claim not present" if name is None
                         else f"oidc: parse username claims {m.claim!r}: not a string")
    if m.claim == "email" and claims.get("email_verified", True) is not True:
        raise TokenError("oidc: email not verified")
    return m.prefix + name


def _as_strings(value: Any, what: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value] if value else []
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return [v for v in value if v]
    raise TokenError(f"oidc: {what}: expected a string or a list of strings")


def _strings(m: ClaimMapping, claims: dict, what: str) -> list[str]:
    if m.expression is not None:
        return _as_strings(_evaluate(m.expression, {"claims": claims}, f"{what} claim expression"), what)
    if not m.claim:
        return []
    return [m.prefix + v for v in _as_strings(claims.get(m.claim), f"parse {what} claim {m.claim!r}")]


def _string(m: ClaimMapping, claims: dict, what: str) -> str:
    value = _evaluate(m.expression, {"claims": claims}, f"{what} claim expression") if m.expression is not None \
        else claims.get(m.claim, "")
    if not isinstance(value, str):
        raise TokenError(f"oidc: {what}: expected a string")
    return value


class JWTAuthenticators:
    """The configured issuers, by URL: a token names its own in `iss`."""

    def __init__(self, issuers: list[Issuer], clock: Clock = REAL, on_fetch=None) -> None:
        self.by_issuer = {i.url: JWTAuthenticator(i, clock, on_fetch) for i in issuers}

    async def authenticate(self, token: str) -> User | None:
        """The user, None when no configured issuer names the token; TokenError when it fails."""
        iss = unverified_issuer(token)
        authenticator = self.by_issuer.get(iss) if iss is not None else None
        if authenticator is None:
            return None
        return await authenticator.authenticate(token)

    async def prefetch(self) -> None:
        """Every issuer's keys fetched once, each in its own task (the server need not wait)."""
        await asyncio.gather(*(a.refresh() for a in self.by_issuer.values()))


def issuer_hash(url: str) -> str:
    return "sha256:" + hashlib.sha256(url.encode()).hexdigest()
