"""kube-apiserver's --authorization-config: an AuthorizationConfiguration (apiserver.config.k8s.io/v1)
whose `authorizers` are asked in order, the first to allow or deny deciding (upstream's union);
none deciding is a refusal. Types: Node, RBAC, Webhook (webhook.py; several, by name),
AlwaysAllow and AlwaysDeny. system:masters is allowed before any of them, as upstream's
privileged-group authorizer always is. AlwaysDeny has no opinion ("Everything is forbidden."),
as upstream's, and neither has the Node authorizer where it does not allow a node: a later
authorizer (RBAC, with what an admin bound the node) may still allow. A webhook that cannot be
asked gives its failurePolicy's verdict and an error, which a refused request answers as a 500.

The file is decoded strictly and validated as pkg/apis/apiserver/validation does (its paths
and words: a webhook's fields read `authorizers[i].timeout`, as upstream's do), defaulted as v1
is (authorizedTTL 5m, unauthorizedTTL 30s, both cached), and reloaded when it changes; a bad
one stops `up`, or on reload is logged and counted while the last good one stays.

Without the flag the server's own chain (Node, then RBAC) runs as before, synchronously; with
it, a request, a review, impersonation, an exec's upgrade, admission's RBAC and signer checks and
CEL's `authorizer` (evaluated in a worker, each check handed back to the loop) are decided by
`authorize_async` (authorizer.decide), whose webhooks' round trips run in threads.
SelfSubjectRulesReview lists RBAC's rules, incomplete where a Webhook (or, for a node, Node) is
in the chain."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

from prometheus_client import CollectorRegistry

from ...cel import Environment
from ...cel.types import DYN, STRING, map_of
from ...clock import REAL, Clock
from ...machinery import goduration
from ...machinery.configfile import DURATION, Kind, Struct
from ...machinery.metrics import Family
from ...machinery.user import User
from ...machinery.validation import FieldError, dns1123_subdomain, duplicate, invalid, not_supported, required
from ...machinery.validation import too_many
from .authentication_config import SCHEME, VERSIONS, ConfigError, aggregate, compile_conditions, decode
from .authentication_controller import id_hash
from .config_reload import ReloadedConfig, read_text
from .authorizer import Attributes, Decision
from .node import NOT_LISTED, NodeAuthorizer, node_of
from .webhook import ALLOW, DENY, NO_OPINION, WebhookAuthorizer, WebhookSpec, review_spec

log = logging.getLogger(__name__)

KIND = "AuthorizationConfiguration"
TYPES = ("ABAC", "AlwaysAllow", "AlwaysDeny", "Node", "RBAC", "Webhook")
MASTERS = "system:masters"



def _schema(v: str) -> Struct:
    """AuthorizationConfiguration's fields and Go types in package `v` (v1, v1beta1, v1alpha1)."""
    webhook = Struct(f"{v}.WebhookConfiguration", {
        "timeout": DURATION, "authorizedTTL": DURATION, "unauthorizedTTL": DURATION, "cacheAuthorizedRequests": bool,
        "cacheUnauthorizedRequests": bool, "subjectAccessReviewVersion": str,
        "matchConditionSubjectAccessReviewVersion": str, "failurePolicy": str,
        "connectionInfo": Struct(f"{v}.WebhookConnectionInfo", {"type": str, "kubeConfigFile": str}),
        "matchConditions": [Struct(f"{v}.WebhookMatchCondition", {"expression": str})]})
    return Struct(f"{v}.{KIND}", {"apiVersion": str, "kind": str, "authorizers": [Struct(
        f"{v}.AuthorizerConfiguration", {"type": f"{v}.AuthorizerType", "name": str, "webhook": webhook})]})


#: the file kind as kube-apiserver's scheme for it decodes it
FILE = Kind(VERSIONS, KIND, SCHEME, _schema)
#: matchConditions' variable: the SubjectAccessReview's spec
REQUEST_ENV = Environment({"request": map_of(STRING, DYN)})


@dataclass(slots=True)
class AuthorizerSpec:
    type: str
    name: str
    webhook: WebhookSpec | None = None


def _duration(w: dict, key: str, default: float = 0.0) -> float:
    """A webhook's metav1.Duration (the decoding parsed it), `default` where unset."""
    text = w.get(key)
    return goduration.parse(text) if text else default


def _webhook(w: dict, path: str, errs: list[FieldError]) -> WebhookSpec:
    timeout = _duration(w, "timeout")
    if timeout == 0:
        errs.append(required(f"{path}.timeout"))
    elif timeout > 30 or timeout < 0:
        errs.append(invalid(f"{path}.timeout", w.get("timeout"), "must be > 0s and <= 30s"))
    ttls = []
    for key, default in (("authorizedTTL", 300.0), ("unauthorizedTTL", 30.0)):
        ttl = _duration(w, key, default)
        if ttl < 0:
            errs.append(invalid(f"{path}.{key}", w.get(key), "must be > 0s"))
        ttls.append(ttl)
    version = w.get("subjectAccessReviewVersion") or ""
    if not version:
        errs.append(required(f"{path}.subjectAccessReviewVersion"))
    elif version not in ("v1", "v1beta1"):
        errs.append(not_supported(f"{path}.subjectAccessReviewVersion", version, ["v1", "v1beta1"]))
    conditions = w.get("matchConditions") or []
    mc_version = w.get("matchConditionSubjectAccessReviewVersion") or ""
    if not mc_version and conditions:
        errs.append(required(f"{path}.matchConditionSubjectAccessReviewVersion", "required if match conditions are specified"))
    elif mc_version and mc_version != "v1":
        errs.append(not_supported(f"{path}.matchConditionSubjectAccessReviewVersion", mc_version, ["v1"]))
    policy = w.get("failurePolicy") or ""
    if not policy:
        errs.append(required(f"{path}.failurePolicy"))
    elif policy not in ("NoOpinion", "Deny"):
        errs.append(not_supported(f"{path}.failurePolicy", policy, ["NoOpinion", "Deny"]))
    info = w.get("connectionInfo") or {}
    kind, kubeconfig = info.get("type") or "", info.get("kubeConfigFile")
    p = f"{path}.connectionInfo"
    if not kind:
        errs.append(required(f"{p}.type"))
    elif kind == "InClusterConfig":
        if kubeconfig is not None:
            errs.append(invalid(f"{p}.kubeConfigFile", kubeconfig, "can only be set when type=KubeConfigFile"))
        else:  # (the server runs outside any cluster: there is no in-cluster config to read)
            errs.append(not_supported(f"{p}.type", kind, ["KubeConfigFile"]))
    elif kind == "KubeConfigFile":
        if not kubeconfig:
            errs.append(required(f"{p}.kubeConfigFile"))
        elif not os.path.isabs(kubeconfig):
            errs.append(invalid(f"{p}.kubeConfigFile", kubeconfig, "must be an absolute path"))
        elif not os.path.exists(kubeconfig):
            errs.append(invalid(f"{p}.kubeConfigFile", kubeconfig,
                                f"error loading file: stat {kubeconfig}: no such file or directory"))
        elif not os.path.isfile(kubeconfig):
            errs.append(invalid(f"{p}.kubeConfigFile", kubeconfig, "must be a regular file"))
    else:
        errs.append(not_supported(f"{p}.type", info, ["InClusterConfig", "KubeConfigFile"]))
    if len(conditions) > 64:
        errs.append(too_many(f"{path}.matchConditions", len(conditions), 64))
        conditions = []
    programs = [program for program, _ in compile_conditions(REQUEST_ENV, conditions, f"{path}.matchConditions", errs)]
    return WebhookSpec(timeout, ttls[0], ttls[1], w.get("cacheAuthorizedRequests", True) is not False,
                       w.get("cacheUnauthorizedRequests", True) is not False, version, policy, kubeconfig or "", programs)


def parse(text: str) -> list[AuthorizerSpec]:
    """The authorizers of a file's text, validated: ConfigError with upstream's errors."""
    try:
        doc = decode(text, FILE)
    except ConfigError as e:
        raise ConfigError(f"failed to load AuthorizationConfiguration from file: {e}") from None
    errs: list[FieldError] = []
    authorizers = doc.get("authorizers") or []
    if not authorizers:
        errs.append(required("authorizers", "at least one authorization mode must be defined"))
    out, types, names = [], set(), set()
    for i, a in enumerate(authorizers):
        path, kind, name = f"authorizers[{i}]", str(a.get("type") or ""), str(a.get("name") or "")
        if not kind:
            errs.append(required(f"{path}.type"))
            continue
        if kind not in TYPES:
            errs.append(not_supported(f"{path}.type", kind, TYPES))
            continue
        if kind in types and kind != "Webhook":
            errs.append(duplicate(f"{path}.type", kind))
            continue
        types.add(kind)
        if not name:
            errs.append(required(f"{path}.name"))
        elif name in names:
            errs.append(duplicate(f"{path}.name", name))
        elif problems := dns1123_subdomain(name):
            errs.append(invalid(f"{path}.name", name, f"authorizer name is invalid: {', '.join(problems)}"))
        names.add(name)
        spec = AuthorizerSpec(kind, name)
        if kind == "Webhook":
            if a.get("webhook") is None:
                errs.append(required(f"{path}.webhook", "required when type=Webhook"))
                continue
            spec.webhook = _webhook(a["webhook"], path, errs)
        elif a.get("webhook") is not None:
            errs.append(invalid(f"{path}.webhook", "non-null", "may only be specified when type=Webhook"))
        if kind == "ABAC":  # (valid upstream with --authorization-policy-file, which nanokube has not)
            errs.append(not_supported(f"{path}.type", kind, [t for t in TYPES if t != "ABAC"]))
        out.append(spec)
    if errs:
        raise ConfigError(aggregate(errs))
    return out


def read(path: str) -> tuple[str, list[AuthorizerSpec]]:
    try:
        text = read_text(path)
    except OSError as e:
        raise ConfigError(f"open {path}: {(e.strerror or str(e)).lower()}") from None
    return text, parse(text)


class AuthorizationMetrics:
    """upstream's apiserver_authorization_* families (k8s.io/apiserver/pkg/authorization/metrics)."""

    def __init__(self, apiserver_id: str) -> None:
        r = self.registry = CollectorRegistry()
        self.id = id_hash(apiserver_id)
        self.decisions = Family("counter", "apiserver_authorization_decisions_total",
                                "[ALPHA] Total number of terminal decisions made by an authorizer split by authorizer "
                                "type, name, and decision.", ["type", "name", "decision"], r)
        self.evaluations = Family("counter", "apiserver_authorization_webhook_evaluations_total",
                                  "[ALPHA] Round-trips to authorization webhooks.", ["name", "result"], r)
        self.duration = Family("histogram", "apiserver_authorization_webhook_duration_seconds",
                               "[ALPHA] Request latency in seconds.", ["name", "result"], r,
                               buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0))
        self.fail_opens = Family("counter", "apiserver_authorization_webhook_evaluations_fail_open_total",
                                 "[ALPHA] NoOpinion results due to webhook timeout or error.", ["name", "result"], r)
        self.condition_errors = Family("counter", "apiserver_authorization_match_condition_evaluation_errors_total",
                                       "[ALPHA] Total number of errors when an authorization webhook encounters a match "
                                       "condition error split by authorizer type and name.", ["type", "name"], r)
        self.exclusions = Family("counter", "apiserver_authorization_match_condition_exclusions_total",
                                 "[ALPHA] Total number of exclusions when an authorization webhook is skipped because "
                                 "match conditions exclude it.", ["type", "name"], r)
        what = "automatic reloads of authorization configuration split by status and apiserver identity."
        self.reloads = Family("counter", "apiserver_authorization_config_controller_automatic_reloads_total",
                              f"[BETA] Total number of {what}", ["apiserver_id_hash", "status"], r)
        self.reload_time = Family(
            "gauge", "apiserver_authorization_config_controller_automatic_reload_last_timestamp_seconds",
            "[BETA] Timestamp of the last automatic reload of authorization configuration split by status and "
            "apiserver identity.", ["apiserver_id_hash", "status"], r)

    def decided(self, kind: str, name: str, verdict: str) -> None:
        self.decisions.labels(kind, name, "allowed" if verdict == ALLOW else "denied").inc()

    def webhook(self, name: str, result: str, seconds: float) -> None:
        self.evaluations.labels(name, result).inc()
        self.duration.labels(name, result).observe(seconds)

    def fail_open(self, name: str, result: str) -> None:
        self.fail_opens.labels(name, result).inc()

    def condition_error(self, kind: str, name: str) -> None:
        self.condition_errors.labels(kind, name).inc()

    def excluded(self, kind: str, name: str) -> None:
        self.exclusions.labels(kind, name).inc()

    def reloaded(self, ok: bool, now: float) -> None:
        status = "success" if ok else "failure"
        self.reloads.labels(self.id, status).inc()
        self.reload_time.labels(self.id, status).set(now)


class ConfiguredAuthorizer:
    """The authorizers of a configuration, in order (`authorize_async` makes a webhook's round trip
    off the loop; `authorize` blocks for it, which no caller on the loop asks once it asks_webhooks)."""

    def __init__(self, specs: list[AuthorizerSpec], node: NodeAuthorizer, rbac, metrics: AuthorizationMetrics,
                 clock: Clock = REAL) -> None:
        self.metrics = metrics
        self.chain: list[tuple[str, str, object]] = []
        for s in specs:
            impl = {"Node": node, "RBAC": rbac}.get(s.type)
            if s.type == "Webhook":
                impl = WebhookAuthorizer(s.name, s.webhook, metrics, clock)
            self.chain.append((s.type, s.name, impl))
        self.rbac = rbac
        #: whether a decision may wait on a webhook's round trip (callers that cannot await go to a worker)
        self.asks_webhooks = any(kind == "Webhook" for kind, _, _ in self.chain)

    def _static(self, kind: str, impl, user_name: str, groups, a: Attributes) -> tuple[str, str, str]:
        if kind == "AlwaysAllow":
            return ALLOW, "", ""
        if kind == "AlwaysDeny":  # (upstream's has no opinion: a later authorizer may still allow)
            return NO_OPINION, "Everything is forbidden.", ""
        d = impl.authorize(user_name, groups, a)
        if d is None:  # the Node authorizer: not a node's request, or no reason to give
            return NO_OPINION, "", ""
        return (ALLOW if d.allowed else NO_OPINION), d.reason, ""

    def authorize(self, user_name: str, groups: tuple[str, ...], a: Attributes) -> Decision:
        if MASTERS in groups:
            return Decision(True)
        union = _Union(self.metrics)
        for kind, name, impl in self.chain:
            answer = impl.decide(review_spec(user_name, groups, a)) if kind == "Webhook" else \
                self._static(kind, impl, user_name, groups, a)
            if (decided := union.add(kind, name, answer)) is not None:
                return decided
        return union.none()

    async def authorize_async(self, user: User, a: Attributes) -> Decision:
        if MASTERS in user.groups:
            return Decision(True)
        union = _Union(self.metrics)
        for kind, name, impl in self.chain:
            answer = await impl.decide_async(review_spec(user.name, user.groups, a, user.uid, user.extra)) \
                if kind == "Webhook" else self._static(kind, impl, user.name, user.groups, a)
            if (decided := union.add(kind, name, answer)) is not None:
                return decided
        return union.none()


class _Union:
    """Upstream's union of authorizers, asked in order: the first to allow or deny decides, with its
    reason and error; none deciding is no opinion, with every reason (one a line) and every error
    (aggregated)."""

    __slots__ = ("metrics", "reasons", "errors")

    def __init__(self, metrics: AuthorizationMetrics) -> None:
        self.metrics = metrics
        self.reasons: list[str] = []
        self.errors: list[str] = []

    def add(self, kind: str, name: str, answer: tuple[str, str, str]) -> Decision | None:
        verdict, reason, error = answer
        if verdict != NO_OPINION:
            self.metrics.decided(kind, name, verdict)
            return Decision(verdict == ALLOW, reason, verdict == DENY, error)
        if reason:
            self.reasons.append(reason)
        if error:
            self.errors.append(error)
        return None

    def none(self) -> Decision:
        return Decision(False, "\n".join(self.reasons), error=aggregate(self.errors) if self.errors else "")


class AuthorizationController(ReloadedConfig):
    """The server's authorizer built from --authorization-config, rebuilt when the file changes."""

    what = "authorization"

    def __init__(self, path: str, text: str, specs: list[AuthorizerSpec], node: NodeAuthorizer, rbac,
                 clock: Clock = REAL, apiserver_id: str = "") -> None:
        super().__init__(path, text, clock, AuthorizationMetrics(apiserver_id))
        self.node, self.rbac = node, rbac
        self.authorizer = ConfiguredAuthorizer(specs, node, rbac, self.metrics, clock)

    def authorize(self, user_name: str, groups: tuple[str, ...], a: Attributes) -> Decision:
        return self.authorizer.authorize(user_name, groups, a)

    async def authorize_async(self, user: User, a: Attributes) -> Decision:
        return await self.authorizer.authorize_async(user, a)

    @property
    def asks_webhooks(self) -> bool:
        return self.authorizer.asks_webhooks

    def rules_for(self, user_name: str, groups: tuple[str, ...], namespace: str,
                  unresolved: list[str] | None = None) -> tuple[list[dict], list[dict]]:
        """What SelfSubjectRulesReview lists, as upstream's union of the chain's rule resolvers: RBAC's
        rules only where RBAC is in the chain, everything for AlwaysAllow; AlwaysDeny lists none, and
        neither the Node authorizer's nor a webhook's rules are enumerable (`unlisted` says so)."""
        resource: list[dict] = []
        non_resource: list[dict] = []
        for kind, _, _ in self.authorizer.chain:
            if kind == "RBAC":
                r, n = self.rbac.rules_for(user_name, groups, namespace, unresolved)
                resource += r
                non_resource += n
            elif kind == "AlwaysAllow":
                resource.append({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]})
                non_resource.append({"verbs": ["*"], "nonResourceURLs": ["*"]})
        return resource, non_resource

    def unlisted(self, user_name: str, groups: tuple[str, ...], rbac: list[str]) -> tuple[bool, list[str]]:
        """(whether the rules listed for a user may be incomplete, the rule resolvers' errors), as
        upstream's union of the chain's rule resolvers gives them, in its order: a webhook's rules
        are never known, a node's come from the Node authorizer's graph, RBAC's errors (`rbac`, a
        binding's role not found) leave the rules complete."""
        incomplete, why = False, []
        for kind, _, _ in self.authorizer.chain:
            if kind == "Webhook":
                incomplete = True
                why.append("webhook authorizer does not support user rule resolution")
            elif kind == "Node" and node_of(user_name, groups):
                incomplete = True
                why.append(NOT_LISTED)
            elif kind == "RBAC":
                why += rbac
        return incomplete, why

    def build(self, text: str) -> ConfiguredAuthorizer:
        return ConfiguredAuthorizer(parse(text), self.node, self.rbac, self.metrics, self.clock)

    def apply(self, authorizer: ConfiguredAuthorizer) -> None:
        self.authorizer = authorizer
