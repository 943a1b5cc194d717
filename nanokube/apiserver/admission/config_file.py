"""--admission-control-config-file: kube-apiserver's AdmissionConfiguration
(apiserver.config.k8s.io/v1), which gives admission plugins their configuration, each embedded
under `configuration` or in a file of its own under `path` (relative to this one's directory)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import yaml

from ...machinery import configfile, gofmt
from ...machinery.configfile import ANY, Kind, Struct
from ..auth.authentication_config import SCHEME
from .pod_security import Config
from .resource_quota import parse_configuration

#: an AdmissionConfiguration as kube-apiserver decodes it: leniently (its codec is not strict: unknown
#: fields and repeated keys pass), in apiserver.config.k8s.io v1 or v1alpha1, or apiserver.k8s.io/v1alpha1
FILE = Kind(("apiserver.config.k8s.io/v1", "apiserver.config.k8s.io/v1alpha1", "apiserver.k8s.io/v1alpha1"),
            "AdmissionConfiguration", SCHEME, lambda v: Struct(f"{v}.AdmissionConfiguration", {
                "apiVersion": str, "kind": str, "plugins": [Struct(f"{v}.AdmissionPluginConfiguration", {
                    "name": str, "path": str, "configuration": ANY})]}))
#: how kube-apiserver words a configuration file it cannot read
FAILED = "failed to read plugin config: "


def _read(path: Path) -> tuple[Any, list[str], str]:
    """A file's document, the strict decoder's errors for the keys it repeats, and its text."""
    try:
        text = path.read_text()
    except OSError as e:
        raise ValueError(f"{FAILED}unable to read admission control configuration from {gofmt.quote(str(path))} "
                         f"[open {path}: {(e.strerror or str(e)).lower()}]") from None
    try:
        doc, repeated = configfile.load(text)
    except yaml.YAMLError as e:
        raise ValueError(f"{FAILED}{e}") from None
    return doc, repeated, text


def load(path: str | Path) -> dict[str, tuple[Any, list[str], str]]:
    """Each plugin's configuration document by plugin name, with the keys its own file repeats (a
    strict plugin's codec refuses them; an embedded `configuration`'s repeated keys the
    AdmissionConfiguration's lenient decoding already dropped) and its text; ValueError says what
    is wrong, as kube-apiserver does."""
    path = Path(path)
    doc, _, text = _read(path)
    try:
        doc, _ = configfile.decode_object(doc, [], text, FILE, lenient=True)
    except configfile.DecodeError as e:
        raise ValueError(f"{FAILED}{e}") from None
    out: dict[str, tuple[Any, list[str], str]] = {}
    for plugin in doc.get("plugins") or ():
        name, configuration, file = plugin.get("name"), plugin.get("configuration"), plugin.get("path")
        if configuration is not None:
            out[name] = configuration, [], orjson.dumps(configuration, option=orjson.OPT_SORT_KEYS).decode()
        elif file:
            out[name] = _read(path.parent / file)
    return out


def plugin_configs(path: str | Path) -> dict[str, object]:
    """The configurations nanokube's plugins take, parsed (PodSecurity's Config, ResourceQuota's
    limitedResources)."""
    docs = load(path)
    out: dict[str, object] = {}
    if "PodSecurity" in docs:  # (pod-security-admission's codec is strict)
        out["PodSecurity"] = Config.parse(*docs["PodSecurity"])
    if "ResourceQuota" in docs:
        doc, _, text = docs["ResourceQuota"]
        out["ResourceQuota"] = parse_configuration(doc, text)
    return out
