"""--admission-control-config-file: kube-apiserver's AdmissionConfiguration
(apiserver.config.k8s.io/v1), which gives admission plugins their configuration, each embedded
under `configuration` or in a file of its own under `path` (relative to this one's directory)."""

from __future__ import annotations

from pathlib import Path

import yaml

from ...machinery import configfile
from .pod_security import Config, go_typed
from .resource_quota import parse_configuration

KINDS = (("apiserver.config.k8s.io/v1", "AdmissionConfiguration"),
         ("apiserver.config.k8s.io/v1alpha1", "AdmissionConfiguration"),
         ("apiserver.k8s.io/v1alpha1", "AdmissionConfiguration"))


def _read(path: Path) -> tuple[dict, list[str]]:
    """A file's document and the strict decoder's errors for the keys it repeats."""
    try:
        doc, repeated = configfile.load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise ValueError(f'failed to read plugin config file "{path}": {e}') from None
    if not isinstance(doc, dict):
        raise ValueError(f'failed to read plugin config file "{path}": not an object')
    return doc, repeated


def load(path: str | Path) -> dict[str, tuple[dict, list[str]]]:
    """Each plugin's configuration document by plugin name, with the keys its own file repeats (a
    strict plugin's codec refuses them; the AdmissionConfiguration's codec, ResourceQuota's and the
    webhooks' are lenient, the later key winning, and so is an embedded `configuration`, whose
    repeated keys the AdmissionConfiguration's lenient decoding already dropped); ValueError says
    what is wrong."""
    path = Path(path)
    doc, _ = _read(path)
    if (doc.get("apiVersion"), doc.get("kind")) not in KINDS:
        raise ValueError(f'failed to read plugin config file "{path}": no kind "{doc.get("kind")}" is registered for '
                         f'version "{doc.get("apiVersion")}"')
    out: dict[str, tuple[dict, list[str]]] = {}
    for name, configuration, file in _plugins(doc, path):
        if configuration is not None:
            out[name] = configuration, []
        elif file:
            out[name] = _read(path.parent / file)
    return out


def _plugins(doc: dict, path: Path) -> list[tuple[str, object, str | None]]:
    """Each plugin's name, configuration and path, refused as the decoder refuses a field of another JSON type."""
    try:
        plugins = go_typed(doc.get("plugins"), list, "AdmissionConfiguration.plugins", "[]v1.AdmissionPluginConfiguration")
        out = []
        for plugin in plugins or ():
            plugin = go_typed(plugin, dict, "AdmissionConfiguration.plugins", "v1.AdmissionPluginConfiguration") or {}
            name = go_typed(plugin.get("name"), str, "AdmissionConfiguration.plugins.name", "string")
            if not name:
                raise ValueError("a plugin without a name")
            out.append((name, plugin.get("configuration"),
                        go_typed(plugin.get("path"), str, "AdmissionConfiguration.plugins.path", "string")))
    except ValueError as e:
        raise ValueError(f'plugin config file "{path}": {e}') from None
    return out


def plugin_configs(path: str | Path) -> dict[str, object]:
    """The configurations nanokube's plugins take, parsed (PodSecurity's Config, ResourceQuota's
    limitedResources)."""
    docs = load(path)
    out: dict[str, object] = {}
    if "PodSecurity" in docs:  # (pod-security-admission's codec is strict)
        out["PodSecurity"] = Config.parse(*docs["PodSecurity"])
    if "ResourceQuota" in docs:
        out["ResourceQuota"] = parse_configuration(docs["ResourceQuota"][0])
    return out
