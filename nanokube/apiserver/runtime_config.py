"""--runtime-config: which group/versions (and resources of them) the API server serves, merged over
its default as kube-apiserver's resourceconfig.MergeAPIResourceConfigs does. A version left out is
not served at all: no discovery, no OpenAPI, 404 on its paths, its stored objects never read.

Upstream's default serves GA versions only (beta APIs are off by default since 1.24). nanokube's
default (`NANOKUBE_DEFAULT`, which `up` prints) serves every version it implements: each alpha or
beta one is a feature nanokube exists to show or runs itself (Workload and PodGroup, DRA's older and
alpha versions, LeaseCandidates for coordinated leader election, StorageVersions)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import replace

from ..machinery.featuregates import BOOLS, bool_error
from ..registry.base import Resource

_MATCHERS: dict[str, Callable[[str], bool]] = {
    "api/all": lambda version: True,
    "api/ga": re.compile(r"v\d+").fullmatch,
    "api/beta": re.compile(r"v\d+beta\d+").fullmatch,
    "api/alpha": re.compile(r"v\d+alpha\d+").fullmatch,
}

#: what nanokube serves by default, on top of upstream's GA-only default
NANOKUBE_DEFAULT = "api/all=true"


def parse(value: str) -> dict[str, str]:
    """cliflag.ConfigurationMap: `key=value` items, a bare key meaning an empty value."""
    out: dict[str, str] = {}
    for item in value.split(","):
        if item:
            key, _, raw = item.partition("=")
            out[key.strip()] = raw.strip()
    return out


class ResourceConfig:
    """serverstorage.ResourceConfig: on/off by group/version, and by group/version/resource, which wins."""

    def __init__(self, versions: dict[tuple[str, str], bool] | None = None) -> None:
        self.versions = dict(versions or {})
        self.resources: dict[tuple[str, str, str], bool] = {}

    def set_versions(self, on: bool, matches: Callable[[tuple[str, str]], bool]) -> None:
        """Turn the matching versions on or off, forgetting what was said of their resources."""
        for gv in self.versions:
            if matches(gv):
                self.versions[gv] = on
        self.resources = {gvr: v for gvr, v in self.resources.items() if not matches(gvr[:2])}

    def enabled(self, group: str, version: str, plural: str) -> bool:
        said = self.resources.get((group, version, plural))
        return self.versions.get((group, version), False) if said is None else said

    def served(self, resources: Iterable[Resource]) -> list[Resource]:
        """`resources` as served: each with its enabled versions only, none left out entirely."""
        out = []
        for r in resources:
            versions = [v for v in r.versions if self.enabled(r.group, v, r.plural)]
            if versions:
                out.append(r if versions == r.versions else replace(r, versions=versions))
        return out


def upstream_default(resources: Iterable[Resource]) -> ResourceConfig:
    """kube-apiserver's DefaultAPIResourceConfigSource over `resources`' versions: GA ones on."""
    return ResourceConfig({(r.group, v): bool(_MATCHERS["api/ga"](v)) for r in resources for v in r.versions})


def merge(config: ResourceConfig, overrides: dict[str, str]) -> None:
    """MergeAPIResourceConfigs: api/all, api/ga, api/beta, api/alpha in that order, then each
    group/version, then each group/version/resource; a ValueError as upstream's for what it refuses.
    A group nanokube has no version of is skipped, as upstream skips a group it did not register."""
    for key, matcher in _MATCHERS.items():
        if key in overrides:
            if overrides[key] not in ("true", "false"):
                raise ValueError(f"invalid value {key}={overrides[key]}")
            config.set_versions(overrides[key] == "true", lambda gv, m=matcher: bool(m(gv[1])))
    groups = {g for g, _ in config.versions}
    by_version, by_resource = [], []
    for key, raw in overrides.items():
        tokens = key.split("/")
        if key in _MATCHERS or not 2 <= len(tokens) <= 3 or tokens[0] not in groups:
            continue
        gv = (tokens[0], tokens[1])
        if gv not in config.versions:
            raise ValueError(f"group version {tokens[0]}/{tokens[1]} that has not been registered")
        on = _bool(key, raw)
        if len(tokens) == 2:
            by_version.append((gv, on))
        elif tokens[2].lower() != tokens[2]:
            raise ValueError(f"invalid key {key}: group/version/resource and resource is always lowercase plural, "
                             f'not "{tokens[2]}"')
        else:
            by_resource.append(((*gv, tokens[2]), on))
    for gv, on in by_version:
        config.set_versions(on, lambda other, gv=gv: other == gv)
    for gvr, on in by_resource:
        config.resources[gvr] = on


def _bool(key: str, raw: str) -> bool:
    """getRuntimeConfigValue: empty is true, else what strconv.ParseBool takes."""
    if raw == "":
        return True
    if raw not in BOOLS:
        raise ValueError(f"invalid value of {key}: {raw}, err: {bool_error(raw)}")
    return BOOLS[raw]


#: what nanokube's components read while a gate is on: a --runtime-config turning it off needs the gate off too
NEEDED_BY_GATE = {
    "GenericWorkload": (("scheduling.k8s.io", "v1beta1", "podgroups"), ("scheduling.k8s.io", "v1beta1", "workloads")),
    "WorkloadWithJob": (("scheduling.k8s.io", "v1beta1", "podgroups"), ("scheduling.k8s.io", "v1beta1", "workloads")),
    "CompositePodGroup": (("scheduling.k8s.io", "v1alpha3", "compositepodgroups"),),
    "DRAResourcePoolStatus": (("resource.k8s.io", "v1alpha3", "resourcepoolstatusrequests"),),
}


#: what the API server itself reads as it starts and runs: its bootstrap (namespaces, the kubernetes
#: Service and its endpoints, the default ServiceCIDR, RBAC's roles), admission, its leases, the
#: aggregator's APIServices, the CRDs it serves, the built-in metrics adapter's pods and ConfigMaps
#: and the ComponentStatuses it keeps
SERVER_READS = (("", "v1", "namespaces"), ("", "v1", "services"), ("", "v1", "endpoints"), ("", "v1", "pods"),
                ("", "v1", "configmaps"), ("", "v1", "componentstatuses"),
                ("discovery.k8s.io", "v1", "endpointslices"), ("networking.k8s.io", "v1", "servicecidrs"),
                ("networking.k8s.io", "v1", "ipaddresses"), ("coordination.k8s.io", "v1", "leases"),
                ("apiregistration.k8s.io", "v1", "apiservices"),
                ("apiextensions.k8s.io", "v1", "customresourcedefinitions"),
                *(("rbac.authorization.k8s.io", "v1", p) for p in ("clusterroles", "clusterrolebindings", "roles",
                                                                    "rolebindings")))


def apf_conflict(value: str) -> str | None:
    """validateAPIPriorityAndFairness: APF's controller reads flowcontrol v1, so the first of these
    keys the flag's sorted `key=value` pairs turn off (before one turning it on) is refused."""
    said = ",".join(sorted(f"{k}={v}" for k, v in parse(value).items()))
    for key in ("flowcontrol.apiserver.k8s.io/v1", "api/ga", "api/all"):
        if f"{key}=false" in said:
            return f"--runtime-config={key}=false conflicts with --enable-priority-and-fairness=true"
        if f"{key}=true" in said:
            return None
    return None


def unserved_needs(config: ResourceConfig, enabled: Callable[[str], bool]) -> str | None:
    """Why `config` cannot run with the gates `enabled` says: the API server itself, or a component of
    a gate that is on, reads a resource it does not serve (kube-apiserver leaves that to the
    components, which then fail)."""
    off = [f"{g or 'core'}/{v}/{p}" for g, v, p in SERVER_READS if not config.enabled(g, v, p)]
    if off:
        return f"the API server itself reads what it turns off ({', '.join(off)})"
    for gate, needed in NEEDED_BY_GATE.items():
        off = [f"{g}/{v}/{p}" for g, v, p in needed if not config.enabled(g, v, p)]
        if off and enabled(gate):
            return f"{', '.join(off)} not served while feature gate {gate} is on: --feature-gates {gate}=false too"
    return None


def from_flag(value: str, resources: Iterable[Resource]) -> ResourceConfig:
    """What `--runtime-config value` serves: upstream's default, nanokube's on top, then `value`."""
    resources = list(resources)
    config = upstream_default(resources)
    merge(config, parse(NANOKUBE_DEFAULT))
    merge(config, parse(value))
    return config
