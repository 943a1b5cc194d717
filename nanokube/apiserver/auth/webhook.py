"""An authorization webhook of the authorization config (upstream's plugin/pkg/auth/authorizer/webhook):
a request's attributes as a SubjectAccessReview POSTed to the server a kubeconfig names; its
`allowed` allows, `denied` denies, anything else has no opinion. The webhook is asked only where
every matchCondition (CEL on `request`, the review's spec) holds; an answer is cached for
authorizedTTL or unauthorizedTTL; a webhook that fails or times out (or a matchCondition that
errs) is failurePolicy's: NoOpinion or Deny, with what failed as the decision's error.

The review is one blocking HTTPS round trip, which every caller runs in a thread (`decide_async`,
through authorization_config's authorize_async); `decide` blocks, for callers off the loop."""

from __future__ import annotations

import asyncio
import http.client
import logging
import random
import socket
import ssl
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import orjson

from ...cel import CELError, Program
from ...client import kubeconfig
from ...clock import REAL, Clock
from ...machinery.errors import APIError
from ...machinery.goduration import string as go_duration
from ...machinery.hostport import join_host_port
from ...machinery.selectors import field_requirements, parse_label_selector
from ..webhook.client import status_message, x509_reason
from .authorizer import Attributes

log = logging.getLogger(__name__)

ALLOW, DENY, NO_OPINION = "allow", "deny", "no-opinion"


#: DefaultAuthWebhookRetryBackoff: 5 tries, 0.5 s apart and 1.5 times longer each (20% jitter)
RETRY_STEPS, RETRY_PAUSE, RETRY_FACTOR, RETRY_JITTER = 5, 0.5, 1.5, 0.2


def _transient(e: Exception) -> bool:
    """DefaultShouldRetry: a connection reset, or an answer of 500, 504 or 429, or one with Retry-After."""
    if isinstance(e, urllib.error.HTTPError):
        return e.code in (500, 504, 429) or bool(e.headers and e.headers.get("Retry-After"))
    return isinstance(e, ConnectionResetError) or isinstance(getattr(e, "reason", None), ConnectionResetError)


def _post(request: urllib.request.Request, context, timeout: float) -> bytes:
    """The body of the answer to `request`, read within `timeout` seconds in all, as Go's
    http.Client.Timeout bounds the whole exchange: a webhook sending a byte at a time (each within
    the socket's timeout) is cut at the deadline, not waited on until it is done."""
    deadline = time.monotonic() + timeout
    with urllib.request.urlopen(request, context=context, timeout=timeout) as r:
        chunks = []
        try:
            while chunk := r.read1(1 << 16):
                chunks.append(chunk)
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the answer took longer than {timeout:g} s")
        except TimeoutError:
            raise BodyTimeout() from None
        if r.length:  # (read1 ends quietly where the connection does)
            raise http.client.IncompleteRead(b"".join(chunks), r.length)
        return b"".join(chunks)


class BodyTimeout(TimeoutError):
    """The deadline passed while the answer's body was read (its headers had come)."""


def go_error(e: Exception, url: str) -> str:
    """What failed, as client-go's REST client says it: a transport error as Go's url.Error
    (`Post "URL": cause`), a non-2xx answer by its Status or code, a body cut short or late as
    the read's error."""
    if isinstance(e, urllib.error.HTTPError):
        return status_message(e.code, e.read() if e.fp is not None else b"")
    if isinstance(e, (BodyTimeout, http.client.IncompleteRead)):
        cause = "context deadline exceeded" if isinstance(e, BodyTimeout) else "unexpected EOF"
        return f"unexpected error when reading response body. Please retry. Original error: {cause}"
    cause = getattr(e, "reason", e) if isinstance(e, urllib.error.URLError) else e
    host = urlsplit(url).hostname or ""
    if isinstance(cause, TimeoutError):
        why = "context deadline exceeded"
    elif isinstance(cause, ssl.SSLCertVerificationError):
        why = f"tls: failed to verify certificate: {x509_reason(cause, host)}"
    elif isinstance(cause, socket.gaierror):
        why = f"dial tcp: lookup {host}: no such host"
    elif isinstance(cause, ConnectionRefusedError):
        why = f"dial tcp {join_host_port(host, urlsplit(url).port or 443)}: connect: connection refused"
    elif isinstance(cause, ConnectionResetError):
        why = "read: connection reset by peer"
    elif isinstance(cause, OSError) and cause.strerror:
        why = cause.strerror.lower()
    else:
        return str(cause)
    return f'Post "{url}": {why}'


class WebhookConfigError(ValueError):
    """The webhook's kubeconfig cannot be used."""


@dataclass(slots=True)
class WebhookSpec:
    """A Webhook authorizer's settings, validated (durations in seconds)."""

    timeout: float
    authorized_ttl: float
    unauthorized_ttl: float
    cache_authorized: bool
    cache_unauthorized: bool
    version: str
    failure_policy: str
    kubeconfig: str
    conditions: list[Program] = field(default_factory=list)


_ATTRIBUTE_FIELDS = {"resourceAttributes": ("namespace", "verb", "group", "version", "resource", "subresource", "name"),
                     "nonResourceAttributes": ("path", "verb")}


def review_spec(user_name: str, groups, a: Attributes, uid: str = "", extra: dict | None = None) -> dict:
    """The SubjectAccessReview spec (v1) for a user and a request's attributes."""
    spec: dict[str, Any] = {"user": user_name, "groups": list(groups)}
    if uid:
        spec["uid"] = uid
    if extra:
        spec["extra"] = extra
    if a.resource_request:
        ra = {"namespace": a.namespace, "verb": a.verb, "group": a.group, "version": a.version,
              "resource": a.resource, "subresource": a.subresource, "name": a.name}
        spec["resourceAttributes"] = {k: v for k, v in ra.items() if v}
        if fields := _field_requirements(a.field_selector):
            spec["resourceAttributes"]["fieldSelector"] = {"requirements": fields}
        if labels := _label_requirements(a.label_selector):
            spec["resourceAttributes"]["labelSelector"] = {"requirements": labels}
    else:
        spec["nonResourceAttributes"] = {"path": a.path, "verb": a.verb}
    return spec


def _field_requirements(selector: str) -> list[dict]:
    """A request's fieldSelector as a SubjectAccessReview's requirements (AuthorizeWithSelectors): = as
    In and != as NotIn of the one value; a selector that does not parse tells nothing."""
    if not selector:
        return []
    try:
        terms = field_requirements(selector)
    except APIError:
        return []
    return [{"key": f, "operator": "In" if equal else "NotIn", "values": [v]} for f, equal, v in terms]


#: label selector operators as a SubjectAccessReview names them (gt and lt it cannot: left out)
_LABEL_OPS = {"=": "In", "in": "In", "!=": "NotIn", "notin": "NotIn", "exists": "Exists", "!": "DoesNotExist"}


def _label_requirements(selector: str) -> list[dict]:
    """A request's labelSelector as a SubjectAccessReview's requirements, by key, values sorted, as
    upstream's; one that does not parse tells nothing."""
    if not selector:
        return []
    try:
        terms = parse_label_selector(selector)
    except APIError:
        return []
    out = []
    for key, op, values in sorted(terms, key=lambda t: t[0]):
        if op in _LABEL_OPS:
            out.append({"key": key, "operator": _LABEL_OPS[op], **({"values": sorted(values)} if values else {})})
    return out


class WebhookAuthorizer:
    def __init__(self, name: str, spec: WebhookSpec, metrics, clock: Clock = REAL) -> None:
        self.name = name
        self.spec = spec
        self.metrics = metrics
        self.clock = clock
        try:
            creds = kubeconfig.load(spec.kubeconfig, env={})
        except kubeconfig.KubeconfigError as e:
            raise WebhookConfigError(f"authorizer {name}: invalid webhook kubeconfig: {e}") from None
        self.url, self._ssl, self._token = creds.server, creds.ssl, creds.token
        #: what is POSTed to, and errors name: the REST client sends its timeout along (`?timeout=3s`)
        self._post_url = f"{self.url}?timeout={go_duration(round(spec.timeout * 1e9))}"
        #: review spec (its JSON) -> (expires at, allowed, denied, reason)
        self._cache: dict[bytes, tuple[float, bool, bool, str]] = {}

    def matches(self, spec: dict) -> tuple[bool, bool]:
        """(every matchCondition holds, one of them erred). The conditions read the spec as the typed
        object upstream's do: a field the review's JSON leaves out is there, empty."""
        if not self.spec.conditions:
            return True, False
        typed = {"user": "", "groups": [], "uid": "", "extra": {}, **spec}
        for key, fields in _ATTRIBUTE_FIELDS.items():
            if key in typed:
                typed[key] = {**dict.fromkeys(fields, ""), **typed[key]}
        for program in self.spec.conditions:
            try:
                if program.evaluate({"request": typed}) is not True:
                    self.metrics.excluded("Webhook", self.name)
                    return False, False
            except CELError as e:
                log.warning("authorizer %s: a matchCondition failed: %s", self.name, e)
                self.metrics.condition_error("Webhook", self.name)
                return False, True
        return True, False

    def cached(self, spec: dict) -> tuple[bytes, tuple[str, str, str] | None]:
        key = orjson.dumps(spec, option=orjson.OPT_SORT_KEYS)
        hit = self._cache.get(key)
        if hit is not None and hit[0] > self.clock.monotonic():
            return key, _verdict(*hit[1:])
        return key, None

    def _known(self, spec: dict) -> tuple[tuple[str, str, str] | None, bytes]:
        """(the answer without asking: the matchConditions' or the cache's, or None; the cache key)."""
        matched, erred = self.matches(spec)
        if erred:
            return self._failed("matchCondition evaluation failed"), b""
        if not matched:
            return (NO_OPINION, "", ""), b""
        key, hit = self.cached(spec)
        return hit, key

    def decide(self, spec: dict) -> tuple[str, str, str]:
        """(verdict, reason, error) for a review spec, the webhook asked where needed (blocking)."""
        known, key = self._known(spec)
        return known if known is not None else self._ask(key, spec)

    async def decide_async(self, spec: dict) -> tuple[str, str, str]:
        """`decide`, the round trip in a thread."""
        known, key = self._known(spec)
        return known if known is not None else await asyncio.to_thread(self._ask, key, spec)

    def _failed(self, why: str) -> tuple[str, str, str]:
        """failurePolicy's verdict, without a reason: what failed is the decision's error."""
        return DENY if self.spec.failure_policy == "Deny" else NO_OPINION, "", why

    def _ask(self, key: bytes, spec: dict) -> tuple[str, str, str]:
        if self.spec.version == "v1beta1":
            body_spec = {("group" if k == "groups" else k): v for k, v in spec.items()}
        else:
            body_spec = spec
        body = orjson.dumps({"apiVersion": f"authorization.k8s.io/{self.spec.version}", "kind": "SubjectAccessReview",
                             "spec": body_spec})
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        started, pause, error = time.monotonic(), RETRY_PAUSE, None
        request = urllib.request.Request(self._post_url, data=body, headers=headers, method="POST")
        for attempt in range(RETRY_STEPS):  # (WithExponentialBackoff: transient failures tried again)
            if attempt:
                time.sleep(pause * (1 + RETRY_JITTER * random.random()))
                pause *= RETRY_FACTOR
            try:
                status = orjson.loads(_post(request, self._ssl, self.spec.timeout)).get("status") or {}
                if not isinstance(status, dict):  # (decoding the review fails, as upstream's would)
                    raise ValueError("the SubjectAccessReview's status is not an object")
                error = None
                break
            except (OSError, ValueError, orjson.JSONDecodeError, AttributeError, http.client.HTTPException) as e:
                error = e
                if not _transient(e):
                    break
        result = "success"
        if error is not None:
            timed_out = isinstance(error, TimeoutError) or isinstance(getattr(error, "reason", None), TimeoutError)
            result = "timeout" if timed_out else "error"
        self.metrics.webhook(self.name, result, time.monotonic() - started)
        if result != "success":
            why = go_error(error, self._post_url)
            log.error("Failed to make webhook authorizer request: %s", why)
            if self.spec.failure_policy != "Deny":
                self.metrics.fail_open(self.name, result)
            return self._failed(why)
        answer = status.get("allowed") is True, status.get("denied") is True, str(status.get("reason") or "")
        if answer[0]:
            ttl, keep = self.spec.authorized_ttl, self.spec.cache_authorized
        else:
            ttl, keep = self.spec.unauthorized_ttl, self.spec.cache_unauthorized
        if keep:
            if len(self._cache) >= 8192:
                self._cache.clear()
            self._cache[key] = (self.clock.monotonic() + ttl, *answer)
        return _verdict(*answer)


def _verdict(allowed: bool, denied: bool, reason: str) -> tuple[str, str, str]:
    """(verdict, reason, error) of a webhook's answer: denying and allowing at once is a denial with an error."""
    if denied and allowed:
        return DENY, reason, "webhook subject access review returned both allow and deny response"
    return (DENY if denied else ALLOW if allowed else NO_OPINION), reason, ""
