"""Quota resource names and scopes (core/v1 ResourceName constants and the
helpers in pkg/apis/core/helper)."""

from __future__ import annotations

#: object counts with legacy names (count/<resource> is the general form)
OBJECT_COUNTS = {"pods": ("", "pods"), "services": ("", "services"), "replicationcontrollers": ("", "replicationcontrollers"),
                 "resourcequotas": ("", "resourcequotas"), "secrets": ("", "secrets"), "configmaps": ("", "configmaps"),
                 "persistentvolumeclaims": ("", "persistentvolumeclaims")}
POD_COMPUTE = ("cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory")
POD_OBJECT_COUNT = ("pods", "count/pods")
PVC_RESOURCES = ("persistentvolumeclaims", "count/persistentvolumeclaims", "requests.storage")
STANDARD_QUOTA = {
    "pods", "services", "replicationcontrollers", "resourcequotas", "secrets", "configmaps", "persistentvolumeclaims",
    "services.nodeports", "services.loadbalancers", "cpu", "memory", "ephemeral-storage", "requests.cpu",
    "requests.memory", "requests.storage", "requests.ephemeral-storage", "limits.cpu", "limits.memory",
    "limits.ephemeral-storage",
}
STANDARD = STANDARD_QUOTA | {"storage"}
INTEGER = {"pods", "services", "replicationcontrollers", "resourcequotas", "secrets", "configmaps",
           "persistentvolumeclaims", "services.nodeports", "services.loadbalancers"}
SCOPES = ("Terminating", "NotTerminating", "BestEffort", "NotBestEffort", "PriorityClass",
          "CrossNamespacePodAffinity", "VolumeAttributesClass")
#: scopes a pod is checked against; VolumeAttributesClass is the claims'
POD_SCOPES = SCOPES[:6]
DEVICE_CLASS_SUFFIX = ".deviceclass.resource.k8s.io/devices"
#: DRAExtendedResource: every DeviceClass is also the extended resource `deviceclass.resource.kubernetes.io/<class>`
IMPLICIT_DEVICE_CLASS_PREFIX = "deviceclass.resource.kubernetes.io/"
STORAGE_CLASS_SUFFIX = ".storageclass.storage.k8s.io/"
#: what an `All` device request charges (resource.k8s.io AllocationResultsMaxSize)
ALLOCATION_RESULTS_MAX = 32


def is_standard_resource(name: str) -> bool:
    return name in STANDARD or name.startswith(("hugepages-", "requests.hugepages-"))


def is_standard_quota_resource(name: str) -> bool:
    return name in STANDARD_QUOTA or name.startswith("requests.hugepages-")


def is_native(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


def is_extended(name: str) -> bool:
    """IsExtendedResourceName: a domain-qualified name outside kubernetes.io, not a quota name."""
    return not is_native(name) and not name.startswith("requests.")


def is_integer_resource(name: str) -> bool:
    return name in INTEGER or is_extended(name) or name.startswith("count/")


def _valid_for(scope: str, resource: str) -> bool:
    if scope == "BestEffort" or scope == "CrossNamespacePodAffinity":
        return resource in POD_OBJECT_COUNT
    if scope in ("Terminating", "NotTerminating", "NotBestEffort", "PriorityClass"):
        return resource in POD_OBJECT_COUNT or resource in POD_COMPUTE
    if scope == "VolumeAttributesClass":
        return resource in PVC_RESOURCES
    return True


def scope_errors(scopes: list[str], hard: list[str]) -> list[str]:
    """validateResourceQuotaScopes' messages (each on spec.scopes)."""
    out = []
    for s in scopes:
        if s not in SCOPES:
            out.append("unsupported scope")
        out += ["unsupported scope applied to resource" for k in sorted(hard)
                if is_standard_quota_resource(k) and not _valid_for(s, k)]
    have = set(scopes)
    for pair in (("BestEffort", "NotBestEffort"), ("Terminating", "NotTerminating")):
        if have.issuperset(pair):
            out.append("conflicting scopes")
    return out


def device_class_resource(class_name: str) -> str:
    return f"{class_name}{DEVICE_CLASS_SUFFIX}"


def count_resource(group: str, plural: str) -> str:
    return f"count/{plural}.{group}" if group else f"count/{plural}"
