"""kube-apiserver's --anonymous-auth and --authentication-config: an AuthenticationConfiguration
(apiserver.config.k8s.io/v1) file, decoded strictly and validated as upstream's
pkg/apis/apiserver/validation does, every error at once, so that a bad file stops the server
with the same lines kube-apiserver prints.

`jwt` names issuers whose tokens authenticate (oidc.py): each issuer's URL, audiences and CA, CEL
claimValidationRules, claimMappings (username, groups, uid, extra) and userValidationRules, compiled
here once on the shared CEL library (nanokube.cel), their compile errors as upstream words them.

`anonymous` (GA in 1.34) says whether a request without credentials is system:anonymous's and,
with `conditions`, on which paths only; elsewhere it is a 401. It may not be set together with
the --anonymous-auth flag, and may not change when the file is reloaded."""

from __future__ import annotations

import hashlib
import re
import ssl
import urllib.parse
from dataclasses import dataclass, field

from ...cel import CELError, Environment, Program
from ...cel.types import DYN, STRING, map_of
from ...machinery import configfile
from ...machinery.configfile import Kind, Struct
from ...machinery.validation import FieldError, duplicate, forbidden, invalid, not_supported, required, too_many
from .. import serializer
from .config_reload import read_text
from .serviceaccount import ISSUER as SERVICE_ACCOUNT_ISSUER

GROUP = "apiserver.config.k8s.io"
KIND = "AuthenticationConfiguration"
#: the versions the file may be written in (v1alpha1 and v1beta1 are still decoded)
VERSIONS = tuple(f"{GROUP}/{v}" for v in ("v1", "v1beta1", "v1alpha1"))
#: the name kube-apiserver's scheme for these files gives itself in a kind error
SCHEME = "pkg/runtime/scheme.go:100"


class ConfigError(ValueError):
    """A file that cannot be read, decoded or validated: `up` stops with its text."""


@dataclass(frozen=True, slots=True)
class Anonymous:
    """Who may go without credentials: nobody (`enabled` false), everyone (no `paths`), or
    requests for exactly one of `paths` (AnonymousAuthCondition's path)."""

    enabled: bool = True
    paths: frozenset[str] | None = None

    def allows(self, path: str) -> bool:
        return self.enabled and (self.paths is None or path in self.paths)


ALLOW_ALL = Anonymous()


@dataclass(slots=True)
class ClaimMapping:
    """username or groups: a claim (with its prefix), or an expression."""

    claim: str = ""
    prefix: str = ""
    expression: Program | None = None


@dataclass(slots=True)
class Issuer:
    """One `jwt` entry, its expressions compiled: (program, message) for the rules, key -> program for extra."""

    url: str
    discovery_url: str
    audiences: frozenset[str]
    ca: str
    claim_rules: list[tuple[str, str]] = field(default_factory=list)  # (claim, requiredValue)
    claim_expressions: list[tuple[Program, str]] = field(default_factory=list)
    username: ClaimMapping = field(default_factory=ClaimMapping)
    groups: ClaimMapping = field(default_factory=ClaimMapping)
    uid: ClaimMapping = field(default_factory=ClaimMapping)
    extra: dict[str, Program] = field(default_factory=dict)
    user_rules: list[tuple[Program, str]] = field(default_factory=list)


@dataclass(slots=True)
class Configuration:
    """A decoded file: `doc` the object, `text` what the file held (the reload compares it)."""

    doc: dict
    text: str
    anonymous: Anonymous | None = None
    jwt: list[Issuer] = field(default_factory=list)

    @property
    def hash(self) -> str:
        """The last_config_info metric's `hash` label: sha256 of the file's text."""
        return config_hash(self.text)


def config_hash(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def _schema(v: str) -> Struct:
    """AuthenticationConfiguration's fields and Go types in package `v` (v1, v1beta1, v1alpha1)."""
    prefixed = Struct(f"{v}.PrefixedClaimOrExpression", {"claim": str, "prefix": str, "expression": str})
    jwt = Struct(f"{v}.JWTAuthenticator", {
        "issuer": Struct(f"{v}.Issuer", {
            "url": str, "discoveryURL": str, "certificateAuthority": str, "audiences": [str],
            "audienceMatchPolicy": f"{v}.AudienceMatchPolicyType", "egressSelectorType": f"{v}.EgressSelectorType"}),
        "claimValidationRules": [Struct(f"{v}.ClaimValidationRule", {
            "claim": str, "requiredValue": str, "expression": str, "message": str})],
        "claimMappings": Struct(f"{v}.ClaimMappings", {
            "username": prefixed, "groups": prefixed,
            "uid": Struct(f"{v}.ClaimOrExpression", {"claim": str, "expression": str}),
            "extra": [Struct(f"{v}.ExtraMapping", {"key": str, "valueExpression": str})]}),
        "userValidationRules": [Struct(f"{v}.UserValidationRule", {"expression": str, "message": str})]})
    return Struct(f"{v}.{KIND}", {
        "apiVersion": str, "kind": str, "jwt": [jwt],
        "anonymous": Struct(f"{v}.AnonymousAuthConfig", {
            "enabled": bool, "conditions": [Struct(f"{v}.AnonymousAuthCondition", {"path": str})]})})


#: the file kind as kube-apiserver's scheme for it decodes it
FILE = Kind(VERSIONS, KIND, SCHEME, _schema)
#: the bytes of a file that are not UTF-8, as read_text keeps them
_NOT_UTF8 = re.compile("[\udc80-\udcff]")


def decode(text: str, kind: Kind = FILE) -> dict:
    """The object a configuration file holds (YAML or JSON) as the strict codec decodes it (read
    bounded as a request body is): ConfigError in its words where it refuses it."""
    if not text:
        raise ConfigError("empty config data")
    if _NOT_UTF8.search(text):
        raise ConfigError("error converting YAML to JSON: yaml: invalid leading UTF-8 octet")
    try:
        doc = serializer.loads_config_yaml(text)
        return configfile.decode_object(doc, configfile.duplicates(text), text, kind)[0]
    except ValueError as e:  # (configfile.DecodeError among them)
        raise ConfigError(str(e)) from None


def aggregate(errs: list[FieldError]) -> str:
    """field.ErrorList.ToAggregate's text: the one error, or all of them in brackets."""
    texts = list(dict.fromkeys(str(e) for e in errs))
    return texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"


def _anonymous(doc: dict) -> tuple[Anonymous | None, list[FieldError]]:
    anon = doc.get("anonymous")
    if anon is None:
        return None, []
    enabled = anon.get("enabled") is True
    conditions = anon.get("conditions") or []
    errs = []
    if not enabled and conditions:
        errs.append(invalid("anonymous.conditions", conditions, "enabled should be set to true when conditions are defined"))
    paths = frozenset(str(c.get("path") or "") for c in conditions) if conditions else None
    return Anonymous(enabled, paths), errs


#: the variables of claim expressions (`claims`, the token's payload) and of user validation rules
#: (`user`, a UserInfo: username, uid, groups, extra)
CLAIMS_ENV = Environment({"claims": map_of(STRING, DYN)})
USER_ENV = Environment({"user": map_of(STRING, DYN)})
#: upstream's limit on `jwt` entries
MAX_ISSUERS = 64


def compile_expression(env: Environment, expression: str, path: str, errs: list[FieldError], boolean: bool = False) -> Program | None:
    try:
        program = env.compile(expression)
    except CELError as e:
        errs.append(invalid(path, expression, f"compilation failed: {e}"))
        return None
    if boolean and not program.may_be("bool"):
        errs.append(invalid(path, expression, "must evaluate to bool"))
        return None
    return program


def compile_conditions(env: Environment, items: list[dict], path: str, errs: list[FieldError]) -> list[tuple[Program, dict]]:
    """Each item's boolean `expression` compiled, with the item: an empty or repeated one is an error."""
    out, seen = [], set()
    for i, item in enumerate(items):
        q, expression = f"{path}[{i}].expression", str(item.get("expression") or "")
        if not expression.strip():
            errs.append(required(q))
        elif expression in seen:
            errs.append(duplicate(q, expression))
        else:
            seen.add(expression)
            program = compile_expression(env, expression, q, errs, boolean=True)
            if program is not None:
                out.append((program, item))
    return out


def _url_errors(url: str, path: str) -> list[FieldError]:
    """validateURL: https, and no user, query or fragment."""
    try:
        u = urllib.parse.urlsplit(url)
    except ValueError as e:
        return [invalid(path, url, str(e))]
    errs = []
    if u.scheme != "https":
        errs.append(invalid(path, url, "URL scheme must be https"))
    if u.username is not None or "@" in u.netloc:
        errs.append(invalid(path, url, "URL must not contain a username or password"))
    if u.query:
        errs.append(invalid(path, url, "URL must not contain a query"))
    if u.fragment:
        errs.append(invalid(path, url, "URL must not contain a fragment"))
    return errs


def _issuer(spec: dict, path: str, errs: list[FieldError]) -> tuple[str, str, list[str], str]:
    url, discovery = str(spec.get("url") or ""), str(spec.get("discoveryURL") or "")
    if not url:
        errs.append(required(f"{path}.url"))
    else:
        errs += _url_errors(url, f"{path}.url")
    if discovery:
        if url and url.rstrip("/") == discovery.rstrip("/"):
            errs.append(invalid(f"{path}.discoveryURL", discovery, "discoveryURL must be different from URL"))
        errs += _url_errors(discovery, f"{path}.discoveryURL")
    audiences = [str(a or "") for a in spec.get("audiences") or []]
    policy = spec.get("audienceMatchPolicy") or ""
    if not audiences:
        errs.append(required(f"{path}.audiences", f"at least one {path}.audiences is required"))
    seen: set[str] = set()
    for i, a in enumerate(audiences):
        if not a:
            errs.append(required(f"{path}.audiences[{i}]"))
        if a in seen:
            errs.append(duplicate(f"{path}.audiences[{i}]", a))
        seen.add(a)
    if len(audiences) > 1 and policy != "MatchAny":
        errs.append(invalid(f"{path}.audienceMatchPolicy", policy, "audienceMatchPolicy must be MatchAny for multiple audiences"))
    if len(audiences) == 1 and policy not in ("", "MatchAny"):
        errs.append(invalid(f"{path}.audienceMatchPolicy", policy, "audienceMatchPolicy must be empty or MatchAny for single audience"))
    ca = str(spec.get("certificateAuthority") or "")
    if ca:
        try:
            ssl.create_default_context(cadata=ca)
        except (ssl.SSLError, ValueError):
            errs.append(invalid(f"{path}.certificateAuthority", "<omitted>", "data does not contain any valid RSA or ECDSA certificates"))
    selector = spec.get("egressSelectorType")
    if selector:
        errs.append(not_supported(f"{path}.egressSelectorType", selector, ()))
    return url, discovery, audiences, ca


def _prefixed(m: dict, path: str, errs: list[FieldError], needed: bool) -> ClaimMapping:
    claim, expression = str(m.get("claim") or ""), str(m.get("expression") or "")
    if claim and expression:
        errs.append(invalid(path, "", "claim and expression can't both be set"))
    elif needed and not claim and not expression:
        errs.append(required(path, "claim or expression is required"))
    elif expression:
        if "prefix" in m and m["prefix"] is not None:
            errs.append(invalid(f"{path}.prefix", m["prefix"], "may not be specified when expression is set"))
        return ClaimMapping(expression=compile_expression(CLAIMS_ENV, expression, f"{path}.expression", errs))
    elif claim and m.get("prefix") is None:
        errs.append(required(f"{path}.prefix", "prefix is required when claim is set. It can be set to an empty string "
                                               "to disable prefixing"))
    return ClaimMapping(claim, str(m.get("prefix") or ""))


_DOMAIN_PREFIXED = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/.+$")


def _extra_key_errors(key: str, path: str) -> list[FieldError]:
    """IsDomainPrefixedPath, lowercase, and not a Kubernetes domain."""
    if not key:
        return [required(path)]
    errs = []
    if not _DOMAIN_PREFIXED.match(key.lower()):
        errs.append(invalid(path, key, "must be a domain-prefixed path (such as \"acme.io/foo\")"))
    if key != key.lower():
        errs.append(invalid(path, key, "must be lowercase"))
    domain = key.split("/", 1)[0] if "/" in key else ""
    if domain in ("kubernetes.io", "k8s.io") or domain.endswith((".kubernetes.io", ".k8s.io")):
        errs.append(invalid(path, key, "k8s.io, kubernetes.io and their subdomains are reserved for Kubernetes use"))
    return errs


def _jwt(spec: dict, path: str, errs: list[FieldError]) -> Issuer:
    url, discovery, audiences, ca = _issuer(spec.get("issuer") or {}, f"{path}.issuer", errs)
    issuer = Issuer(url, discovery, frozenset(audiences), ca)
    seen_claims: set[str] = set()
    seen_expressions: set[str] = set()
    for i, rule in enumerate(spec.get("claimValidationRules") or []):
        p = f"{path}.claimValidationRules[{i}]"
        claim, expression = str(rule.get("claim") or ""), str(rule.get("expression") or "")
        if claim and expression:
            errs.append(invalid(p, claim, "claim and expression can't both be set"))
        elif not claim and not expression:
            errs.append(required(p, "claim or expression is required"))
        elif claim:
            if rule.get("message"):
                errs.append(invalid(f"{p}.message", rule["message"], "may not be specified when claim is set"))
            if claim in seen_claims:
                errs.append(duplicate(f"{p}.claim", claim))
            seen_claims.add(claim)
            issuer.claim_rules.append((claim, str(rule.get("requiredValue") or "")))
        else:
            if rule.get("requiredValue"):
                errs.append(invalid(f"{p}.requiredValue", rule["requiredValue"], "may not be specified when expression is set"))
            if expression in seen_expressions:
                errs.append(duplicate(f"{p}.expression", expression))
                continue
            seen_expressions.add(expression)
            program = compile_expression(CLAIMS_ENV, expression, f"{p}.expression", errs, boolean=True)
            if program is not None:
                issuer.claim_expressions.append((program, str(rule.get("message") or "")))
    mappings = spec.get("claimMappings") or {}
    p = f"{path}.claimMappings"
    issuer.username = _prefixed(mappings.get("username") or {}, f"{p}.username", errs, True)
    issuer.groups = _prefixed(mappings.get("groups") or {}, f"{p}.groups", errs, False)
    uid = mappings.get("uid") or {}
    if uid.get("claim") and uid.get("expression"):
        errs.append(invalid(f"{p}.uid", "", "claim and expression can't both be set"))
    elif uid.get("expression"):
        issuer.uid = ClaimMapping(expression=compile_expression(CLAIMS_ENV, str(uid["expression"]), f"{p}.uid.expression", errs))
    else:
        issuer.uid = ClaimMapping(str(uid.get("claim") or ""))
    for i, extra in enumerate(mappings.get("extra") or []):
        key, q = str(extra.get("key") or ""), f"{p}.extra[{i}]"
        errs += _extra_key_errors(key, f"{q}.key")
        if key in issuer.extra:
            errs.append(duplicate(f"{q}.key", key))
            continue
        if not extra.get("valueExpression"):
            errs.append(required(f"{q}.valueExpression"))
            continue
        program = compile_expression(CLAIMS_ENV, str(extra["valueExpression"]), f"{q}.valueExpression", errs)
        if program is not None:
            issuer.extra[key] = program
    username = issuer.username.expression
    if username is not None and _selects(username.source, "email") and not any(
            _selects(e.source, "email_verified") for e in (username, *issuer.extra.values(),
                                                           *(e for e, _ in issuer.claim_expressions))):
        errs.append(invalid(f"{p}.username.expression", username.source, EMAIL_UNVERIFIED))
    issuer.user_rules = [(program, str(rule.get("message") or "")) for program, rule in
                         compile_conditions(USER_ENV, spec.get("userValidationRules") or [],
                                            f"{path}.userValidationRules", errs)]
    return issuer


EMAIL_UNVERIFIED = ("claims.email_verified must be used in claimMappings.username.expression or "
                    "claimMappings.extra[*].valueExpression or claimValidationRules[*].expression when claims.email "
                    "is used in claimMappings.username.expression")


def _selects(source: str, claim: str) -> bool:
    """Does an expression select `claims.<claim>` (or `claims.?<claim>`), as upstream's AST walk finds it?"""
    return re.search(rf"\bclaims\s*\.\??\s*{claim}\b", source) is not None


def _issuers(doc: dict) -> tuple[list[Issuer], list[FieldError]]:
    specs = doc.get("jwt") or []
    if len(specs) > MAX_ISSUERS:
        return [], [too_many("jwt", len(specs), MAX_ISSUERS)]
    errs: list[FieldError] = []
    issuers, urls, discoveries = [], set(), set()
    for i, spec in enumerate(specs):
        issuer = _jwt(spec, f"jwt[{i}]", errs)
        if issuer.url in urls:
            errs.append(duplicate(f"jwt[{i}].issuer.url", issuer.url))
        urls.add(issuer.url)
        if issuer.discovery_url:
            if issuer.discovery_url in discoveries:
                errs.append(duplicate(f"jwt[{i}].issuer.discoveryURL", issuer.discovery_url))
            discoveries.add(issuer.discovery_url)
        issuers.append(issuer)
    return issuers, errs


def parse(text: str, disallowed_issuers: tuple[str, ...] = (SERVICE_ACCOUNT_ISSUER,)) -> Configuration:
    """A configuration from a file's text, validated (ConfigError: `invalid authentication
    configuration: ...`). `disallowed_issuers`: the service-account token issuers, which no `jwt`
    entry may name."""
    doc = decode(text)
    issuers, errs = _issuers(doc)
    for i, issuer in enumerate(issuers):
        if issuer.url in disallowed_issuers:
            errs.insert(0, invalid(f"jwt[{i}].issuer.url", issuer.url,
                                   f"URL must not overlap with disallowed issuers: [{' '.join(sorted(disallowed_issuers))}]"))
    anonymous, anonymous_errs = _anonymous(doc)
    errs += anonymous_errs
    if errs:
        raise ConfigError(f"invalid authentication configuration: {aggregate(errs)}")
    return Configuration(doc, text, anonymous, issuers)


def read(path: str, disallowed_issuers: tuple[str, ...] = (SERVICE_ACCOUNT_ISSUER,)) -> Configuration:
    try:
        text = read_text(path)
    except OSError as e:
        raise ConfigError(f'failed to load authentication configuration from file "{path}": '
                          f'open {path}: {(e.strerror or str(e)).lower()}') from None
    try:
        return parse(text, disallowed_issuers)
    except ConfigError as e:
        if str(e).startswith("invalid authentication configuration"):
            raise
        raise ConfigError(f'failed to load authentication configuration from file "{path}": {e}') from None


def load(path: str | None, anonymous_flag: bool | None,
         disallowed_issuers: tuple[str, ...] = (SERVICE_ACCOUNT_ISSUER,)) -> tuple[Configuration | None, Anonymous]:
    """--authentication-config's file (None without one) and who goes without credentials: the
    file's `anonymous`, else --anonymous-auth (true unless set false); both set is refused.
    `disallowed_issuers`: --service-account-issuer's, which no `jwt` entry may name."""
    config = read(path, disallowed_issuers) if path else None
    if config is not None and config.anonymous is not None:
        if anonymous_flag is not None:
            raise ConfigError(str(forbidden("anonymous", "--anonymous-auth flag cannot be set when anonymous field is "
                                                         "configured in authentication configuration file")))
        return config, config.anonymous
    return config, ALLOW_ALL if anonymous_flag is not False else Anonymous(enabled=False)


def reload_problem(old: Configuration, new: Configuration) -> str | None:
    """Why a reloaded file is refused though valid: its anonymous section changed."""
    if old.doc.get("anonymous") != new.doc.get("anonymous"):
        return f"invalid authentication configuration: {forbidden('anonymous', 'changed from initial configuration file')}"
    return None
