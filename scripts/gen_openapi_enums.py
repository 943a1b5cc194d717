"""Generate nanokube/apiserver/openapi_enums.json: the `enum` of each built-in field whose Go type is an enum.

Usage: gen_openapi_enums.py [KUBECTL] [OUT]   (KUBECTL defaults to .venv/bin/kubectl, v1.37)

kube-openapi gives every field of a Go string type marked `+enum` the type's constants as its
OpenAPI `enum` (a list field: its items), which `kubectl explain` prints. kubernetes-validate's
release-1.37 definitions, the schema nanokube serves, drop them, and no pinned package carries
them; but kubectl's Go type data (read as scripts/kubectl_go_types.py reads it) names each
field's Go type, so only the enum types' values below are written by hand, once per type, not
per field. A type that a new release adds or changes is a new line here and a rerun.
The output maps a definition name to {json field: values}.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from kubectl_go_types import POINTER, SLICE, STRUCT, Binary, all_types, tag

from nanokube import schema

#: (API group's package under k8s.io/api, Go type) -> its constants' values, in kube-openapi's order (sorted):
#: the types k8s.io/api's types.go marks `+enum` (not every named string type: LimitType, FSGroupPolicy,
#: VolumeLifecycleMode or MetricTargetType, for instance, are unmarked, their fields without an enum)
ENUMS: dict[tuple[str, str], list[str]] = {
    ("core", "AppArmorProfileType"): ["Localhost", "RuntimeDefault", "Unconfined"],
    ("core", "AzureDataDiskCachingMode"): ["None", "ReadOnly", "ReadWrite"],
    ("core", "AzureDataDiskKind"): ["Dedicated", "Managed", "Shared"],
    ("core", "DNSPolicy"): ["ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"],
    ("core", "HostPathType"): ["", "BlockDevice", "CharDevice", "Directory", "DirectoryOrCreate", "File",
                               "FileOrCreate", "Socket"],
    ("core", "IPFamily"): ["", "IPv4", "IPv6"],
    ("core", "IPFamilyPolicy"): ["PreferDualStack", "RequireDualStack", "SingleStack"],
    ("core", "MountPropagationMode"): ["Bidirectional", "HostToContainer", "None"],
    ("core", "NamespacePhase"): ["Active", "Terminating"],
    ("core", "NodeInclusionPolicy"): ["Honor", "Ignore"],
    ("core", "NodePhase"): ["Pending", "Running", "Terminated"],
    ("core", "NodeSelectorOperator"): ["DoesNotExist", "Exists", "Gt", "In", "Lt", "NotIn"],
    ("core", "PersistentVolumeClaimPhase"): ["Bound", "Lost", "Pending"],
    ("core", "PersistentVolumeMode"): ["Block", "Filesystem"],
    ("core", "PersistentVolumePhase"): ["Available", "Bound", "Failed", "Pending", "Released"],
    ("core", "PersistentVolumeReclaimPolicy"): ["Delete", "Recycle", "Retain"],
    ("core", "PodFSGroupChangePolicy"): ["Always", "OnRootMismatch"],
    ("core", "PodPhase"): ["Failed", "Pending", "Running", "Succeeded", "Unknown"],
    ("core", "PodQOSClass"): ["BestEffort", "Burstable", "Guaranteed"],
    ("core", "PreemptionPolicy"): ["Never", "PreemptLowerPriority"],
    ("core", "Protocol"): ["SCTP", "TCP", "UDP"],
    ("core", "PullPolicy"): ["Always", "IfNotPresent", "Never"],
    ("core", "RestartPolicy"): ["Always", "Never", "OnFailure"],
    ("core", "SeccompProfileType"): ["Localhost", "RuntimeDefault", "Unconfined"],
    ("core", "ServiceAffinity"): ["ClientIP", "None"],
    ("core", "ServiceExternalTrafficPolicy"): ["Cluster", "Local"],
    ("core", "ServiceInternalTrafficPolicy"): ["Cluster", "Local"],
    ("core", "ServiceType"): ["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"],
    ("core", "TaintEffect"): ["NoExecute", "NoSchedule", "PreferNoSchedule"],
    ("core", "TerminationMessagePolicy"): ["FallbackToLogsOnError", "File"],
    ("core", "TolerationOperator"): ["Equal", "Exists", "Gt", "Lt"],
    ("core", "URIScheme"): ["HTTP", "HTTPS"],
    ("core", "UnsatisfiableConstraintAction"): ["DoNotSchedule", "ScheduleAnyway"],
    ("apps", "DaemonSetUpdateStrategyType"): ["OnDelete", "RollingUpdate"],
    ("apps", "DeploymentStrategyType"): ["Recreate", "RollingUpdate"],
    ("apps", "PodManagementPolicyType"): ["OrderedReady", "Parallel"],
    ("apps", "StatefulSetUpdateStrategyType"): ["OnDelete", "RollingUpdate"],
    ("batch", "CompletionMode"): ["Indexed", "NonIndexed"],
    ("batch", "ConcurrencyPolicy"): ["Allow", "Forbid", "Replace"],
    ("batch", "PodFailurePolicyAction"): ["Count", "FailIndex", "FailJob", "Ignore"],
    ("batch", "PodFailurePolicyOnExitCodesOperator"): ["In", "NotIn"],
    ("batch", "PodReplacementPolicy"): ["Failed", "TerminatingOrFailed"],
    ("autoscaling", "MetricSourceType"): ["ContainerResource", "External", "Object", "Pods", "Resource"],
    ("discovery", "AddressType"): ["FQDN", "IPv4", "IPv6"],
    ("networking", "PathType"): ["Exact", "ImplementationSpecific", "Prefix"],
    ("networking", "PolicyType"): ["Egress", "Ingress"],
    ("policy", "UnhealthyPodEvictionPolicyType"): ["AlwaysAllow", "IfHealthyBudget"],
    ("storage", "VolumeBindingMode"): ["Immediate", "WaitForFirstConsumer"],
}

API = "k8s.io/api/"


def _fields(types: dict, t) -> list[tuple[str, int]]:
    """(json name, Go type) of a struct's fields, an embedded struct's inlined as encoding/json does."""
    out = []
    for _fname, tags, embedded, typ in t.fields:
        json_name = (tag(tags, "json") or "").split(",")[0]
        if embedded and not json_name:
            out += _fields(types, types[typ])
        elif json_name and json_name != "-":
            out.append((json_name, typ))
    return out


def build(types: dict, definitions: dict) -> dict[str, dict[str, list[str]]]:
    """{definition: {field: values}} of the definitions nanokube serves."""
    out: dict[str, dict[str, list[str]]] = {}
    for t in types.values():
        if t.kind != STRUCT or not t.pkg.startswith(API) or t.name.startswith("*"):
            continue
        name = "io.k8s." + t.full.removeprefix("k8s.io.")  # k8s.io.api.core.v1.PodSpec -> io.k8s.api.core.v1.PodSpec
        if name not in definitions:
            continue
        for json_name, typ in _fields(types, t):
            ft = types[typ]
            if ft.kind in (POINTER, SLICE):  # a list's items are the enum's
                ft = types[ft.elem]
            values = ENUMS.get((ft.pkg[len(API):].split("/")[0], ft.name.rpartition(".")[2])) \
                if ft.pkg.startswith(API) else None
            if values and json_name in definitions[name].get("properties", {}):
                out.setdefault(name, {})[json_name] = values
    return out


def main() -> None:
    root = Path(__file__).resolve().parent.parent
    kubectl = Path(sys.argv[1]) if len(sys.argv) > 1 else root / ".venv/bin/kubectl"
    out = Path(sys.argv[2]) if len(sys.argv) > 2 else root / "nanokube/apiserver/openapi_enums.json"
    table = build(all_types(Binary(kubectl.read_bytes())), schema.builtin_definitions())
    lines = [f"{json.dumps(k)}:{json.dumps(v, separators=(',', ':'), sort_keys=True)}" for k, v in sorted(table.items())]
    out.write_text("{\n" + ",\n".join(lines) + "\n}\n")
    print(f"{sum(map(len, table.values()))} fields of {len(table)} definitions -> {out}")


if __name__ == "__main__":
    main()
