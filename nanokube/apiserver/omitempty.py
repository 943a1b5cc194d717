"""Which fields of a built-in type decode as unset when sent as their zero (json `omitempty`).

kube-apiserver decodes a body into Go structs and encodes them back: a value scalar tagged
`omitempty` holding its zero (`""`, `0`, `false`) is the same as one never sent, so a client's
`paused: false` is neither stored nor served. A pointer keeps its zero (`replicas: 0`), and so does
a field without `omitempty` (a PodDisruptionBudget's `disruptionsAllowed: 0`, a condition's
`status`).

Which fields are omitempty is a json tag that no shipped data carries, so it is approximated and
corrected: a candidate is a scalar protobuf_fields.json flags "o" (a non-nullable generated.proto
field the OpenAPI schema does not require); NOT_OMITEMPTY takes out the optional ones upstream's
types.go tags without `omitempty`, each checked against the upstream json tag. The OpenAPI
required lists are not exact enough to go without that list (apps/v1 conditions and
PodDisruptionBudgetStatus carry none), so only the types the kinds in ROOTS are made of, whose
tags were reviewed, are normalized; other kinds keep the zeros they are sent.

Empty lists and maps are not dropped here: Go decodes `[]` as a non-nil slice, which validation
tells from an absent one (validateWindows forbids `supplementalGroups: []`), and only the encoding
for storage leaves it out; dropping it on decode would change validation.
"""

from __future__ import annotations

import functools
from typing import Any

from nanokube import schema as k8s

#: kinds whose types (and all they refer to) are normalized
ROOTS = (
    "core.v1.Pod", "core.v1.PodTemplate", "core.v1.ReplicationController", "core.v1.Service",
    "core.v1.ConfigMap", "core.v1.Secret", "core.v1.ServiceAccount", "core.v1.Namespace",
    "apps.v1.Deployment", "apps.v1.ReplicaSet", "apps.v1.StatefulSet", "apps.v1.DaemonSet",
    "apps.v1.ControllerRevision", "batch.v1.Job", "batch.v1.CronJob", "policy.v1.PodDisruptionBudget",
    "autoscaling.v1.HorizontalPodAutoscaler", "autoscaling.v2.HorizontalPodAutoscaler",
    "core.v1.Node", "core.v1.PersistentVolume", "core.v1.PersistentVolumeClaim", "core.v1.Endpoints",
    "core.v1.LimitRange", "core.v1.ResourceQuota", "discovery.v1.EndpointSlice", "networking.v1.Ingress",
    "networking.v1.IngressClass", "networking.v1.NetworkPolicy", "rbac.v1.Role", "rbac.v1.ClusterRole",
    "rbac.v1.RoleBinding", "rbac.v1.ClusterRoleBinding", "scheduling.v1.PriorityClass",
    "certificates.v1.CertificateSigningRequest", "coordination.v1.Lease", "storage.v1.StorageClass",
)

_CONDITION = frozenset({"type", "status"})
#: optional fields (by definition) that upstream tags without omitempty: their zero is kept
NOT_OMITEMPTY: dict[str, frozenset[str]] = {
    "io.k8s.api.apps.v1.DeploymentCondition": _CONDITION,
    "io.k8s.api.apps.v1.ReplicaSetCondition": _CONDITION,
    "io.k8s.api.apps.v1.StatefulSetCondition": _CONDITION,
    "io.k8s.api.apps.v1.DaemonSetCondition": _CONDITION,
    "io.k8s.api.apps.v1.ControllerRevision": frozenset({"revision"}),
    "io.k8s.api.apps.v1.StatefulSetStatus": frozenset({"availableReplicas"}),
    "io.k8s.api.apps.v1.StatefulSetOrdinals": frozenset({"start"}),
    "io.k8s.api.policy.v1.PodDisruptionBudgetStatus": frozenset(
        {"disruptionsAllowed", "currentHealthy", "desiredHealthy", "expectedPods"}),
    "io.k8s.api.batch.v1.PodFailurePolicyOnPodConditionsPattern": frozenset({"status"}),
    "io.k8s.api.rbac.v1.RoleRef": frozenset({"apiGroup"}),
    "io.k8s.api.scheduling.v1.PriorityClass": frozenset({"value"}),
    # the default runtime handler is the one named "": a node reports `name: ""`
    "io.k8s.api.core.v1.NodeRuntimeHandler": frozenset({"name"}),
}


def fields(name: str) -> frozenset[str]:
    """The omitempty value scalars of built-in definition `name`; none outside the reviewed types."""
    return _fields().get(name, frozenset())


@functools.cache
def _fields() -> dict[str, frozenset[str]]:
    from .protobuf import TABLE

    out = {}
    for name in _scope():
        table = TABLE.get("k8s.io." + name.removeprefix("io.k8s."))
        if not table:
            continue
        omit = frozenset(json_name for json_name, _type, flags in table.values() if flags == "o")
        out[name] = omit - NOT_OMITEMPTY.get(name, frozenset())
    return out


def _scope() -> frozenset[str]:
    """The ROOTS definitions and those they refer to, directly or not."""
    defs = k8s.definitions()
    seen: set[str] = set()
    todo = ["io.k8s.api." + root for root in ROOTS]
    while todo:
        name = todo.pop()
        if name in seen or name not in defs:
            continue
        seen.add(name)
        stack: list[Any] = [defs[name]]
        while stack:
            node = stack.pop()
            if isinstance(node, dict):
                if "$ref" in node:
                    todo.append(node["$ref"][len(k8s.REF_PREFIX):])
                stack.extend(node.values())
            elif isinstance(node, list):
                stack.extend(node)
    return frozenset(seen)
