"""kube-apiserver's --anonymous-auth and --authentication-config: an AuthenticationConfiguration
(apiserver.config.k8s.io/v1) file, decoded strictly and validated as upstream's
pkg/apis/apiserver/validation does, every error at once, so that a bad file stops the server
with the same lines kube-apiserver prints.

`anonymous` (GA in 1.34) says whether a request without credentials is system:anonymous's and,
with `conditions`, on which paths only; elsewhere it is a 401. It may not be set together with
the --anonymous-auth flag, and may not change when the file is reloaded."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ...machinery.validation import FieldError, forbidden, invalid

GROUP = "apiserver.config.k8s.io"
KIND = "AuthenticationConfiguration"
#: the versions the file may be written in (v1alpha1 and v1beta1 are still decoded)
VERSIONS = tuple(f"{GROUP}/{v}" for v in ("v1", "v1beta1", "v1alpha1"))


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
class Configuration:
    """A decoded file: `doc` the object, `text` what the file held (the reload compares it)."""

    doc: dict
    text: str
    anonymous: Anonymous | None = None
    jwt: list[dict] = field(default_factory=list)

    @property
    def hash(self) -> str:
        """The last_config_info metric's `hash` label: sha256 of the file's text."""
        return config_hash(self.text)


def config_hash(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


#: the fields each object of the file may hold (a nested dict: an object; a list of one dict: a list
#: of such objects; None: a value), as the strict decoder knows them
_CONDITION = {"path": None}
_ISSUER = {"url": None, "discoveryURL": None, "certificateAuthority": None, "audiences": None,
           "audienceMatchPolicy": None, "egressSelectorType": None}
_PREFIXED = {"claim": None, "prefix": None, "expression": None}
_JWT = {"issuer": _ISSUER,
        "claimValidationRules": [{"claim": None, "requiredValue": None, "expression": None, "message": None}],
        "claimMappings": {"username": _PREFIXED, "groups": _PREFIXED, "uid": {"claim": None, "expression": None},
                          "extra": [{"key": None, "valueExpression": None}]},
        "userValidationRules": [{"expression": None, "message": None}]}
_SCHEMA = {"apiVersion": None, "kind": None, "jwt": [_JWT],
           "anonymous": {"enabled": None, "conditions": [_CONDITION]}}


def unknown_fields(value: Any, schema: Any, path: str = "") -> list[str]:
    """The paths of the fields `value` holds that `schema` does not name, as the strict decoder
    reports them (`jwt[0].issuer.urll`)."""
    out: list[str] = []
    if isinstance(schema, dict) and isinstance(value, dict):
        for k, v in value.items():
            p = f"{path}.{k}" if path else str(k)
            if k not in schema:
                out.append(p)
            elif schema[k] is not None:
                out += unknown_fields(v, schema[k], p)
    elif isinstance(schema, list) and isinstance(value, list):
        for i, v in enumerate(value):
            out += unknown_fields(v, schema[0], f"{path}[{i}]")
    return out


def decode(text: str, schema: dict = _SCHEMA, kind: str = KIND) -> dict:
    """The object a configuration file holds (YAML or JSON): ConfigError where the decoder refuses it."""
    if not text:
        raise ConfigError("empty config data")
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError(f"error converting YAML to JSON: {e}") from None
    if not isinstance(doc, dict):
        raise ConfigError("couldn't get version/kind; json parse error: not an object")
    version, got = doc.get("apiVersion") or "", doc.get("kind") or ""
    if not got:
        raise ConfigError(f"Object 'Kind' is missing in '{text.strip()[:200]}'")
    if version not in VERSIONS or got != kind:
        raise ConfigError(f'no kind "{got}" is registered for version "{version}" in scheme "pkg/runtime/scheme.go:100"')
    unknown = unknown_fields(doc, schema)
    if unknown:
        raise ConfigError("strict decoding error: " + ", ".join(f'unknown field "{p}"' for p in unknown))
    return doc


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


def parse(text: str) -> Configuration:
    """A configuration from a file's text, validated (ConfigError: `invalid authentication
    configuration: ...`)."""
    doc = decode(text)
    anonymous, errs = _anonymous(doc)
    if errs:
        raise ConfigError(f"invalid authentication configuration: {aggregate(errs)}")
    return Configuration(doc, text, anonymous, list(doc.get("jwt") or []))


def read(path: str) -> Configuration:
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise ConfigError(f'failed to load authentication configuration from file "{path}": '
                          f'open {path}: {(e.strerror or str(e)).lower()}') from None
    try:
        return parse(text)
    except ConfigError as e:
        if str(e).startswith("invalid authentication configuration"):
            raise
        raise ConfigError(f'failed to load authentication configuration from file "{path}": {e}') from None


def load(path: str | None, anonymous_flag: bool | None) -> tuple[Configuration | None, Anonymous]:
    """--authentication-config's file (None without one) and who goes without credentials: the
    file's `anonymous`, else --anonymous-auth (true unless set false); both set is refused."""
    config = read(path) if path else None
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
