"""API discovery: legacy (/api, /apis, per group and version) and aggregated
(apidiscovery.k8s.io/v2), both computed once from the registry."""

from __future__ import annotations

from typing import Any

from ..registry.base import Resource
from .rest import ResourceIndex

_SUBRESOURCE_VERBS = {
    "status": ["get", "patch", "update"],
    "scale": ["get", "patch", "update"],
    "binding": ["create"],
    "eviction": ["create"],
    "ephemeralcontainers": ["get", "patch", "update"],
    "resize": ["get", "patch", "update"],
    "log": ["get"],
    "exec": ["create", "get"],
    "attach": ["create", "get"],
    "portforward": ["create", "get"],
    "proxy": ["create", "delete", "get", "patch", "update"],
    "approval": ["get", "patch", "update"],
    "finalize": ["update"],
    "token": ["create"],
}


_STREAMING_KINDS = {"exec": "PodExecOptions", "attach": "PodAttachOptions", "portforward": "PodPortForwardOptions"}


def _subresource_kind(res: Resource, sub: str) -> tuple[str, str, str]:
    """(group, version, kind) a subresource speaks."""
    if sub == "scale":
        return ("autoscaling", "v1", "Scale")
    if sub == "binding":
        return ("", "v1", "Binding")
    if sub == "eviction":
        return ("policy", "v1", "Eviction")
    if sub == "token":
        return ("authentication.k8s.io", "v1", "TokenRequest")
    if sub in _STREAMING_KINDS:
        return ("", "v1", _STREAMING_KINDS[sub])
    if sub == "proxy":  # PodProxyOptions, ServiceProxyOptions, NodeProxyOptions
        return ("", "v1", f"{res.kind}ProxyOptions")
    return (res.group, "", res.kind)


def api_resource_list(index: ResourceIndex, group: str, version: str) -> dict[str, Any]:
    out = []
    for r in index.resources:
        if r.group != group or version not in r.versions:
            continue
        item: dict[str, Any] = {
            "name": r.plural,
            "singularName": r.singular,
            "namespaced": r.namespaced,
            "kind": r.kind,
            "verbs": list(r.verbs),
        }
        if r.short_names:
            item["shortNames"] = list(r.short_names)
        if r.categories:
            item["categories"] = list(r.categories)
        item["storageVersionHash"] = _hash(f"{r.group}/{r.storage_version}/{r.kind}")
        out.append(item)
        for sub in r.subresources:
            g, v, k = _subresource_kind(r, sub)
            s: dict[str, Any] = {"name": f"{r.plural}/{sub}", "singularName": "", "namespaced": r.namespaced,
                                 "kind": k, "verbs": _SUBRESOURCE_VERBS.get(sub, ["get"])}
            if g != r.group:
                s["group"], s["version"] = g, v
            out.append(s)
    gv = f"{group}/{version}" if group else version
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": out}


def _hash(s: str) -> str:
    import base64
    import hashlib

    return base64.b64encode(hashlib.sha256(s.encode()).digest()[:8]).decode()


def api_versions(external_address: str) -> dict[str, Any]:
    """/api: the legacy group's versions and where clients reach the server, upstream's DefaultAddresses:
    every client CIDR gets the external address (the advertised address and the secure port)."""
    return {"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": external_address}]}


def _group(group: str, versions: list[str]) -> dict[str, Any]:
    vs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"name": group, "versions": vs, "preferredVersion": vs[0]}


def api_group(index: ResourceIndex, group: str) -> dict[str, Any] | None:
    versions = index.group_versions().get(group)
    if not versions:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(group, versions)}


def _by_priority(group_versions: dict[str, list[str]]) -> list[tuple[str, list[str]]]:
    """Groups in the aggregator's order: apiregistration.k8s.io first, then by the
    highest groupPriorityMinimum of their APIServices (a CRD's is 1000), ties by name."""
    from .aggregator.priorities import CRD_GROUP_PRIORITY, priority

    def key(item: tuple[str, list[str]]) -> tuple:
        g, vs = item
        best = max((p[0] for v in vs if (p := priority(g, v)) is not None), default=CRD_GROUP_PRIORITY)
        return (g != "apiregistration.k8s.io", -best, g)
    return sorted(group_versions.items(), key=key)


def api_group_list(index: ResourceIndex) -> dict[str, Any]:
    groups = [_group(g, vs) for g, vs in _by_priority(index.group_versions()) if g]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def aggregated(index: ResourceIndex, legacy: bool) -> dict[str, Any]:
    """apidiscovery.k8s.io/v2 APIGroupDiscoveryList for /api (legacy) or /apis."""
    items = []
    for g, versions in _by_priority(index.group_versions()):
        if (g == "") != legacy:
            continue
        vitems = []
        for v in versions:
            resources = []
            for r in index.resources:
                if r.group != g or v not in r.versions:
                    continue
                rd: dict[str, Any] = {
                    "resource": r.plural,
                    "responseKind": {"group": g, "version": v, "kind": r.kind},
                    "scope": "Namespaced" if r.namespaced else "Cluster",
                    "singularResource": r.singular,
                    "verbs": list(r.verbs),
                }
                if r.short_names:
                    rd["shortNames"] = list(r.short_names)
                if r.categories:
                    rd["categories"] = list(r.categories)
                subs = []
                for sub in r.subresources:
                    sg, sv, sk = _subresource_kind(r, sub)
                    subs.append({"subresource": sub, "responseKind": {"group": sg, "version": sv or v, "kind": sk},
                                 "verbs": _SUBRESOURCE_VERBS.get(sub, ["get"])})
                if subs:
                    rd["subresources"] = subs
                resources.append(rd)
            vitems.append({"version": v, "resources": resources, "freshness": "Current"})
        # (ObjectMeta as 1.37 encodes it: the core group's empty name and the zero creationTimestamp omitted)
        items.append({"metadata": {"name": g} if g else {}, "versions": vitems})
    return {"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": items}


def with_extra_groups(group_list: dict[str, Any], extra: list[tuple[dict, dict]]) -> dict[str, Any]:
    """Add groups served by in-process adapters to an APIGroupList."""
    groups = group_list["groups"] + [{k: g[k] for k in ("name", "versions", "preferredVersion")} for g, _ in extra]
    return {**group_list, "groups": groups}


def with_extra_aggregated(disc: dict[str, Any], extra: list[tuple[dict, dict]]) -> dict[str, Any]:
    """Add adapter groups to an APIGroupDiscoveryList, as aggregated services appear."""
    items = list(disc["items"])
    for group, rl in extra:
        version = group["preferredVersion"]["version"]
        resources = []
        for r in rl["resources"]:
            if "/" in r["name"] and not r["name"].endswith("/*"):
                continue  # subresources of an adapter's resources are not listed on their own
            rd = {"resource": r["name"], "responseKind": {"group": group["name"], "version": version, "kind": r["kind"]},
                  "scope": "Namespaced" if r["namespaced"] else "Cluster", "singularResource": r.get("singularName", ""),
                  "verbs": r["verbs"]}
            rd.update({k: r[k] for k in ("shortNames", "categories") if r.get(k)})
            resources.append(rd)
        items.append({"metadata": {"name": group["name"]},
                      "versions": [{"version": version, "resources": resources, "freshness": "Current"}]})
    return {**disc, "items": items}
