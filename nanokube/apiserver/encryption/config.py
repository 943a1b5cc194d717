"""--encryption-provider-config: an EncryptionConfiguration (apiserver.config.k8s.io/v1) read,
defaulted and validated in upstream's words (apis/apiserver/validation's), then turned into one
transformer per group-resource (encryptionconfig/config.go): each resource list's providers in
order, the first of them writing, any of them reading.

A resource is named group-qualified ("secrets", "deployments.apps"); "*.apps" is every resource
of a group, "*." every core one, "*.*" every resource. A value's transformer is its resource's
own, else its group's wildcard, else "*.*", else none: those stay plaintext (and encrypted bytes
there are refused, as upstream's identity check refuses them)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from ...machinery import configfile, featuregates, goduration, gofmt
from ...machinery.configfile import DURATION, Kind, Struct
from ...machinery.validation import FieldError, Stringer, invalid, required
from .. import serializer
from ..auth.authentication_config import SCHEME
from .value import (AESCBC, AESCBC_PREFIX, AESGCM, AESGCM_PREFIX, IDENTITY, KMSV2_PREFIX, SECRETBOX_PREFIX, Identity,
                    PrefixTransformers, Prefixed, Secretbox)

GROUP_VERSION = "apiserver.config.k8s.io/v1"
KIND = "EncryptionConfiguration"
#: the providers of one list element, in ProviderConfiguration's field order
PROVIDERS = ("aesgcm", "aescbc", "secretbox", "identity", "kms")
_AES_SIZES = (16, 24, 32)
_SECRETBOX_SIZES = (32,)
_KMS_V1_CACHE = 1000
_KEYS = [Struct("v1.Key", {"name": str, "secret": str})]
#: the file kind: its fields and Go types, as kube-apiserver's scheme for it decodes it
FILE = Kind(GROUP_VERSION, KIND, SCHEME, Struct("v1.EncryptionConfiguration", {
    "apiVersion": str, "kind": str, "resources": [Struct("v1.ResourceConfiguration", {
        "resources": [str], "providers": [Struct("v1.ProviderConfiguration", {
            "aesgcm": Struct("v1.AESConfiguration", {"keys": _KEYS}), "aescbc": Struct("v1.AESConfiguration", {"keys": _KEYS}),
            "secretbox": Struct("v1.SecretboxConfiguration", {"keys": _KEYS}),
            "identity": Struct("v1.IdentityConfiguration", {}),
            "kms": Struct("v1.KMSConfiguration", {"apiVersion": str, "name": str, "endpoint": str, "cachesize": int,
                                                  "timeout": DURATION})})]})]}))

KMSV1_DISABLED = ("KMSv1 is deprecated and will only receive security updates going forward. Use KMSv2 instead.  "
                  "Set --feature-gates=KMSv1=true to use the deprecated KMSv1 feature.")
#: the answer with the gate on: upstream would talk to a v1beta1 plugin, which nanokube does not
KMSV1_NOT_IMPLEMENTED = "KMSv1 is deprecated and nanokube does not implement its plugins: use a KMS v2 provider (apiVersion: v2)"


class ConfigError(ValueError):
    """A file that does not load; the text is kube-apiserver's."""


@dataclass
class Resources:
    """The transformers of a loaded configuration, by group-resource ("secrets", "*.apps", "*.*")."""

    transformers: dict[str, PrefixTransformers]
    #: the KMS v2 envelopes (kmsv2.Envelope), in the file's order: the health checks' kms-provider-N
    kms: list = field(default_factory=list)
    #: sha256 of the file's bytes: what a reload compares (apiserver_encryption_config_controller_last_config_info)
    digest: str = ""

    def for_resource(self, segment: str) -> PrefixTransformers | Identity:
        """The transformer of a store key's resource segment ("secrets", "deployments.apps")."""
        t = self.transformers
        if segment in t:
            return t[segment]
        group = segment.partition(".")[2]
        return t.get("*." + group) or t.get("*.*") or IDENTITY

    def close(self) -> None:
        for k in self.kms:
            k.close()


def load(path: str, reload: bool = False, observe: Callable | None = None, kms_factory: Callable | None = None) -> Resources:
    """The file at `path` loaded; ConfigError where it does not, in LoadEncryptionConfig's words:
    what went wrong under `error while parsing file: ` (reading it: `error while loading file: `,
    decoding it: `error decoding encryption provider configuration file "<path>": `) or
    `error while building transformers: `. `reload`: the file may be read again
    (--encryption-provider-config-automatic-reload), under which every KMS provider name must be
    unique. `observe`: the transformation metrics' recorder. `kms_factory(name, endpoint, timeout)`
    makes a KMS v2 envelope (kmsv2.Envelope's by default)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ConfigError(f"error while parsing file: error while loading file: error reading encryption provider "
                          f"configuration file {gofmt.quote(path)}: open {path}: {(e.strerror or str(e)).lower()}") from None
    if not data:
        raise ConfigError(f"error while parsing file: error while loading file: encryption provider configuration file "
                          f"{gofmt.quote(path)} is empty")
    return from_data(data, path, reload, observe, kms_factory)


def from_data(data: bytes, path: str, reload: bool = False, observe: Callable | None = None,
              kms_factory: Callable | None = None) -> Resources:
    """The transformers of the file at `path` whose bytes are `data` (`load`'s errors)."""
    try:
        config = parse(data, path, reload)
    except ConfigError as e:
        raise ConfigError(f"error while parsing file: {e}") from None
    try:
        return build(config, hashlib.sha256(data).hexdigest(), observe, kms_factory)
    except ConfigError as e:
        raise ConfigError(f"error while building transformers: {e}") from None


def parse(data: bytes, path: str, reload: bool = False) -> dict:
    """The configuration of the file at `path`, decoded, defaulted and validated (ConfigError
    otherwise; what the decoder refuses names the file)."""
    try:
        doc = decode(data)
    except ConfigError as e:
        raise ConfigError(f"error decoding encryption provider configuration file {gofmt.quote(path)}: {e}") from None
    resources = doc.get("resources") or []
    for rc in resources:
        for p in (rc or {}).get("providers") or []:
            kms = (p or {}).get("kms")
            if isinstance(kms, dict):
                kms.setdefault("apiVersion", "v1")
                if kms.get("timeout") is None:  # (a *metav1.Duration: null is unset)
                    kms["timeout"] = "3s"
                if kms["apiVersion"] == "v1":
                    kms.setdefault("cachesize", _KMS_V1_CACHE)
    errs = validate(doc, reload)
    if errs:
        raise ConfigError(aggregate(errs))
    return doc


def decode(data: bytes) -> dict:
    """The document as the strict codec decodes it (ConfigError in its words otherwise)."""
    try:
        doc = serializer.loads_config_yaml(data)
        doc = configfile.decode_object(doc, configfile.duplicates(data), data.decode(errors="replace"), FILE)[0]
    except ValueError as e:  # (configfile.DecodeError among them)
        raise ConfigError(str(e)) from None
    return doc


def aggregate(errs: list) -> str:
    """ErrorList.ToAggregate().Error(): one error as it is, more in brackets."""
    texts = list(dict.fromkeys(str(e) for e in errs))
    return texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"


# --- validation (validation_encryption.go) ------------------------------------------------------

_NON_REST = ("apiserveripinfo", "serviceipallocations", "servicenodeportallocations")


def group_resource(name: str) -> tuple[str, str]:
    """schema.ParseGroupResource: (group, resource) of "resource.group"."""
    resource, _, group = name.partition(".")
    return group, resource


def validate(doc: dict, reload: bool) -> list[FieldError]:
    resources = doc.get("resources")
    if not resources:
        return [required("resources", "at least one resources is required")]
    errs: list[FieldError] = []
    kms_names: set[str] = set()
    for i, rc in enumerate(resources):
        rc = rc or {}
        r, p = f"resources[{i}].resources", f"resources[{i}].providers"
        names = rc.get("resources") or []
        if not names:
            errs.append(required(r, f"at least one {r} is required"))
        errs += _overlap(names, r)
        errs += _names(names, r)
        providers = rc.get("providers") or []
        if not providers:
            errs.append(required(p, f"at least one {p} is required"))
        for j, prov in enumerate(providers):
            path = f"{p}[{j}]"
            prov = prov or {}
            present = [k for k in PROVIDERS if prov.get(k) is not None]
            if not present:
                errs.append(invalid(path, _provider_value(prov), "provider does not contain any of the expected "
                                    "providers: KMS, AESGCM, AESCBC, Secretbox, Identity"))
                continue
            if len(present) > 1:
                errs.append(invalid(path, _provider_value(prov), "more than one provider specified in a single "
                                    "element, should split into different list elements"))
                continue
            kind = present[0]
            if kind == "kms":
                errs += _kms(prov["kms"], f"{path}.kms", kms_names, reload)
                kms_names.add(prov["kms"].get("name") or "")
            elif kind != "identity":
                sizes = _SECRETBOX_SIZES if kind == "secretbox" else _AES_SIZES
                errs += _keys((prov[kind] or {}).get("keys") or [], f"{path}.{kind}.keys", sizes)
    return errs


def _provider_value(prov: dict) -> gofmt.Struct:
    """The element as field.Invalid prints it: ProviderConfiguration's fields in order, no key's secret."""
    def redacted(v):
        if isinstance(v, dict):
            return {k: "REDACTED" if k == "secret" else redacted(x) for k, x in v.items()}
        return [redacted(x) for x in v] if isinstance(v, list) else v

    return gofmt.Struct((k, redacted(prov.get(k))) for k in PROVIDERS)


def _overlap(names: list[str], path: str) -> list[FieldError]:
    if len(names) < 2:
        return []
    grs = [group_resource(n) for n in names]
    duplicate = overlap = False
    for i, a in enumerate(grs):
        for j, b in enumerate(grs):
            if i == j:
                continue
            if a == b and not duplicate:
                duplicate = True
                continue
            if overlap:
                continue
            if a == ("*", "*") or (a[0] == b[0] and "*" in (a[1], b[1])):
                overlap = True
    errs = []
    if duplicate:
        errs.append(invalid(path, names, "the same resource cannot be specified multiple times"))
    if overlap:
        errs.append(invalid(path, names, "using overlapping resources such as 'secrets' and '*.' in the same "
                                         "resource list is not allowed as they will be masked"))
    return errs


def _names(names: list[str], path: str) -> list[FieldError]:
    errs = []
    for j, name in enumerate(names):
        at = f"{path}[{j}]"
        group, resource = group_resource(name)
        if name.lower() != name:
            errs.append(invalid(at, name, "resource name should not contain capital letters"))
        elif name == "*":
            errs.append(invalid(at, name, "use '*.' to encrypt all the resources from core API group or *.* to "
                                          "encrypt all resources"))
        elif name in _NON_REST:
            errs.append(invalid(at, name, "resources which do not have REST API/s cannot be encrypted"))
        elif group == "events.k8s.io":
            errs.append(invalid(at, name, "'*.events.k8s.io' objects are stored using the 'events' API group in "
                                          "etcd. Use 'events' instead in the config file"))
        elif group == "extensions":
            errs.append(invalid(at, name, "'extensions' group has been removed and cannot be used for encryption"))
        elif group == "*" and resource != "*":
            errs.append(invalid(at, name, "encrypting the same resource across groups is not supported"))
    return errs


def _keys(keys: list, path: str, sizes: tuple[int, ...]) -> list[FieldError]:
    if not keys:
        return [required(path, "at least one keys is required")]
    errs = []
    for i, key in enumerate(keys):
        at = f"{path}[{i}]"
        key = key or {}
        if not key.get("name"):
            errs.append(required(f"{at}.name", "name is a mandatory field for a key"))
        secret = key.get("secret") or ""
        if not secret:
            errs.append(required(f"{at}.secret", "secret is a mandatory field for a key"))
            continue
        raw = _secret(secret)
        if raw is None:
            errs.append(invalid(f"{at}.secret", "REDACTED", "secrets must be base64 encoded"))
        elif len(raw) not in sizes:
            errs.append(invalid(f"{at}.secret", "REDACTED", f"secret is not of the expected length, got {len(raw)}, "
                                                            f"expected one of [{' '.join(map(str, sizes))}]"))
    return errs


def _secret(text: str) -> bytes | None:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None


def _timeout(kms: dict) -> float:
    """The KMS timeout in seconds (the decoder has refused one that does not parse)."""
    return goduration.parse(kms["timeout"])


_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")
_PORT = re.compile(r"(:[0-9]*)?")


def _url_scheme(url: str) -> tuple[str, str]:
    """(scheme, why Go's url.Parse refuses `url` or ""): upstream's validation accepts what that
    parser takes (its scheme lower-cased), leaving an empty or overlong socket path to the dial."""
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in url):
        return "", "net/url: invalid control character in URL"
    if url.startswith(":"):
        return "", "missing protocol scheme"
    match = _SCHEME.match(url)
    scheme, rest = (match.group(0)[:-1].lower(), url[match.end():]) if match else ("", url)
    rest, _, fragment = rest.partition("#")
    rest = rest.partition("?")[0]
    if not rest.startswith("/"):
        if scheme:  # (opaque, `unix:x`: kept as written, not unescaped)
            rest = ""
        elif ":" in rest.partition("/")[0]:
            return "", "first path segment in URL cannot contain colon"
    elif rest.startswith("//"):
        host = rest[2:].partition("/")[0].rpartition("@")[2]
        end = host.rfind("]") if host.startswith("[") else None
        if end == -1:
            return "", "missing ']' in host"
        port = host[end + 1:] if end is not None else host[host.rfind(":"):] if ":" in host else ""
        if not _PORT.fullmatch(port):
            return "", f"invalid port {gofmt.quote(port)} after host"
    for part in (rest, fragment):
        if bad := _BAD_ESCAPE.search(part):
            return "", f"invalid URL escape {gofmt.quote(part[bad.start():bad.start() + 3])}"
    return scheme, ""


def _kms(kms: dict, path: str, names: set[str], reload: bool) -> list[FieldError]:
    errs = []
    name, version = kms.get("name") or "", kms.get("apiVersion")
    if not name:
        errs.append(required(f"{path}.name", "name is a mandatory field for a provider"))
    if version != "v1" and ":" in name:
        errs.append(invalid(f"{path}.name", name, f"invalid KMS provider name {name}, must not contain ':'"))
    if (reload or version != "v1") and name in names:
        errs.append(invalid(f"{path}.name", name, f"duplicate KMS provider name {name}, names must be unique"))
    if _timeout(kms) <= 0:
        errs.append(invalid(f"{path}.timeout", Stringer(str(kms.get("timeout"))), "timeout should be a positive value"))
    endpoint = kms.get("endpoint") or ""
    if not endpoint:
        errs.append(invalid(f"{path}.endpoint", "", "endpoint is a mandatory field for a kms"))
    else:
        scheme, why = _url_scheme(endpoint)
        if why:
            errs.append(invalid(f"{path}.endpoint", endpoint, f"invalid endpoint for kms provider, error: parse "
                                                              f"{gofmt.quote(endpoint)}: {why}"))
        elif scheme != "unix":
            errs.append(invalid(f"{path}.endpoint", endpoint,
                                f'unsupported scheme "{scheme}" for KMS provider, only unix is supported'))
    cache = kms.get("cachesize")
    if version != "v1" and cache is not None:
        errs.append(invalid(f"{path}.cachesize", cache, "cachesize is not supported in v2"))
    if version == "v1" and cache == 0:
        errs.append(invalid(f"{path}.cachesize", cache, "cachesize should be a positive value, or negative to disable"))
    if version not in ("v1", "v2"):
        errs.append(invalid(f"{path}.apiVersion", version or "", "unsupported apiVersion apiVersion for KMS provider, "
                                                                 "only v1 and v2 are supported"))
    return errs


# --- transformers ---------------------------------------------------------------------------------

def build(config: dict, digest: str = "", observe: Callable | None = None, kms_factory: Callable | None = None) -> Resources:
    """The transformers of a validated configuration (ConfigError for a KMS provider that cannot be set up)."""
    lists: dict[str, list[Prefixed]] = {}
    kms: list = []
    try:
        for rc in config["resources"]:
            items = [_provider(p, kms, kms_factory) for p in rc["providers"]]
            for name in rc["resources"]:
                lists.setdefault(name, []).extend(items)
    except ConfigError:
        for k in kms:
            k.close()
        raise
    transformers = {name: PrefixTransformers("no matching prefix found", items, observe) for name, items in lists.items()}
    return Resources(transformers, kms, digest)


def _provider(p: dict, kms: list, kms_factory: Callable | None) -> Prefixed:
    if p.get("identity") is not None:
        return Prefixed(b"", IDENTITY)
    if p.get("kms") is not None:
        conf = p["kms"]
        name = conf["name"]
        if conf["apiVersion"] == "v1":
            raise ConfigError(KMSV1_NOT_IMPLEMENTED if featuregates.enabled("KMSv1") else KMSV1_DISABLED)
        if kms_factory is None:
            from .kmsv2 import Envelope as kms_factory
        try:
            envelope = kms_factory(name, conf["endpoint"], _timeout(conf))
        except (OSError, ValueError) as e:
            raise ConfigError(f"could not configure KMSv2-Plugin's probe {gofmt.quote(name)}, error: {e}") from None
        kms.append(envelope)
        return Prefixed(KMSV2_PREFIX + name.encode() + b":", envelope)
    kind = next(k for k in ("aesgcm", "aescbc", "secretbox") if p.get(k) is not None)
    make, prefix, what = {"aesgcm": (AESGCM, AESGCM_PREFIX, "AES"), "aescbc": (AESCBC, AESCBC_PREFIX, "AES"),
                          "secretbox": (Secretbox, SECRETBOX_PREFIX, "Secretbox")}[kind]
    keys = [Prefixed(k["name"].encode() + b":", make(base64.b64decode(k["secret"]))) for k in p[kind]["keys"]]
    return Prefixed(prefix, PrefixTransformers(f"no matching key was found for the provided {what} transformer", keys))
