"""kube-apiserver's bootstrap roles for kube-controller-manager's controllers: a
`system:controller:<name>` ClusterRole per controller, bound to the kube-system/<name> service
account a controller acts as with --use-service-account-credentials (<name> is the client name
its client builder is asked for, controllers/manager CLIENT_NAMES). Only the controllers nanokube
runs, with upstream's rules (controller_policy.go)."""

from __future__ import annotations

_RO = ["get", "list", "watch"]
_APPS = ["apps", "extensions"]
_EVENTS = {"verbs": ["create", "update", "patch"], "apiGroups": ["", "events.k8s.io"], "resources": ["events"]}
_SIGNERS = ["kubernetes.io/legacy-unknown", "kubernetes.io/kube-apiserver-client",
            "kubernetes.io/kube-apiserver-client-kubelet", "kubernetes.io/kubelet-serving"]


def _r(verbs: list[str], groups: list[str] | str, *resources: str, names: list[str] | None = None) -> dict:
    rule = {"verbs": verbs, "apiGroups": [groups] if isinstance(groups, str) else groups, "resources": list(resources)}
    return rule | {"resourceNames": names} if names else rule


#: each controller's rules, by its service account's name (upstream's namespace, podgroup-protection
#: and storage-version-migrator roles have no events rule)
RULES: dict[str, list[dict]] = {
    "certificate-controller": [
        _r(["get", "list", "watch", "delete"], "certificates.k8s.io", "certificatesigningrequests"),
        _r(["update"], "certificates.k8s.io", "certificatesigningrequests/status", "certificatesigningrequests/approval"),
        _r(["approve"], "certificates.k8s.io", "signers", names=["kubernetes.io/kube-apiserver-client-kubelet"]),
        _r(["sign"], "certificates.k8s.io", "signers", names=_SIGNERS),
        _r(["create"], "authorization.k8s.io", "subjectaccessreviews"),
        _EVENTS,
    ],
    # full rights on ClusterRoles, as upstream's: it writes rules it need not hold itself
    "clusterrole-aggregation-controller": [
        _r(["escalate", "get", "list", "watch", "update", "patch"], "rbac.authorization.k8s.io", "clusterroles"),
    ],
    "cronjob-controller": [
        _r(["get", "list", "watch", "update"], "batch", "cronjobs"),
        _r(["get", "list", "watch", "create", "update", "delete", "patch"], "batch", "jobs"),
        _r(["update"], "batch", "cronjobs/status"),
        _r(["update"], "batch", "cronjobs/finalizers"),
        _r(["list", "watch", "delete"], "", "pods"),
        _EVENTS,
    ],
    "daemon-set-controller": [
        _r(_RO, _APPS, "daemonsets"),
        _r(["update"], _APPS, "daemonsets/status"),
        _r(["update"], _APPS, "daemonsets/finalizers"),
        _r(["list", "watch"], "", "nodes"),
        _r(["list", "watch", "create", "delete", "patch"], "", "pods"),
        _r(["create"], "", "pods/binding"),
        _r(["get", "list", "watch", "create", "delete", "update", "patch"], "apps", "controllerrevisions"),
        _EVENTS,
    ],
    "deployment-controller": [
        _r(["get", "list", "watch", "update"], _APPS, "deployments"),
        _r(["update"], _APPS, "deployments/status"),
        _r(["update"], _APPS, "deployments/finalizers"),
        _r(["get", "list", "watch", "create", "update", "patch", "delete"], ["apps", "extensions"], "replicasets"),
        _r(["get", "list", "watch", "update"], "", "pods"),
        _EVENTS,
    ],
    "device-taint-eviction-controller": [
        _r(["get", "list", "watch", "delete"], "", "pods"),
        _r(["update", "patch"], "", "pods/status"),
        _r(_RO, "resource.k8s.io", "resourceclaims"),
        _r(_RO, "resource.k8s.io", "resourceslices"),
        _r(_RO, "resource.k8s.io", "deviceclasses"),
        _r(_RO, "resource.k8s.io", "devicetaintrules"),
        _EVENTS,
    ],
    "disruption-controller": [
        _r(_RO, _APPS, "deployments"),
        _r(_RO, ["apps", "extensions"], "replicasets"),
        _r(_RO, "", "replicationcontrollers"),
        _r(_RO, "policy", "poddisruptionbudgets"),
        _r(_RO, "apps", "statefulsets"),
        _r(["update"], "policy", "poddisruptionbudgets/status"),
        _r(["patch", "update"], "", "pods/status"),
        _r(["get"], "*", "*/scale"),
        _EVENTS,
    ],
    "endpoint-controller": [
        _r(_RO, "", "services", "pods"),
        _r(["get", "list", "watch", "create", "update", "delete"], "", "endpoints"),
        _r(["create"], "", "endpoints/restricted"),
        _EVENTS,
    ],
    "endpointslice-controller": [
        _r(_RO, "", "services", "pods", "nodes"),
        _r(["update"], "", "services/finalizers"),
        _r(["get", "list", "watch", "create", "update", "delete"], "discovery.k8s.io", "endpointslices"),
        _EVENTS,
    ],
    "endpointslicemirroring-controller": [
        _r(_RO, "", "services", "endpoints"),
        _r(["update"], "", "services/finalizers", "endpoints/finalizers"),
        _r(["get", "list", "create", "update", "delete"], "discovery.k8s.io", "endpointslices"),
        _EVENTS,
    ],
    "ephemeral-volume-controller": [
        _r(_RO, "", "pods"),
        _r(["update"], "", "pods/finalizers"),
        _r(["get", "list", "watch", "create"], "", "persistentvolumeclaims"),
        _EVENTS,
    ],
    "generic-garbage-collector": [
        _r(["get", "list", "watch", "patch", "update", "delete"], "*", "*"),
        _EVENTS,
    ],
    "horizontal-pod-autoscaler": [
        _r(_RO, "autoscaling", "horizontalpodautoscalers"),
        _r(["update"], "autoscaling", "horizontalpodautoscalers/status"),
        _r(["get", "update"], "*", "*/scale"),
        _r(["list", "watch"], "", "pods"),
        _r(["list", "watch"], "metrics.k8s.io", "pods"),
        _r(_RO, "custom.metrics.k8s.io", "*"),
        _r(_RO, "external.metrics.k8s.io", "*"),
        _EVENTS,
    ],
    "job-controller": [
        _r(["get", "list", "watch", "update", "patch"], "batch", "jobs"),
        _r(["update"], "batch", "jobs/status"),
        _r(["update"], "batch", "jobs/finalizers"),
        _r(["list", "watch", "create", "delete", "patch"], "", "pods"),
        _EVENTS,
        # the gang-scheduled Job's Workload and PodGroup (upstream's EnableWorkloadWithJob rule)
        _r(["get", "list", "watch", "create", "update"], "scheduling.k8s.io", "workloads", "podgroups"),
    ],
    "namespace-controller": [
        _r(["get", "list", "watch", "delete"], "", "namespaces"),
        _r(["update"], "", "namespaces/finalize", "namespaces/status"),
        _r(["get", "list", "watch", "delete", "deletecollection"], "*", "*"),
    ],
    "attachdetach-controller": [
        _r(["list", "watch"], "", "persistentvolumes", "persistentvolumeclaims"),
        _r(_RO, "", "nodes"),
        _r(["patch", "update"], "", "nodes/status"),
        _r(["list", "watch"], "", "pods"),
        _EVENTS,
        _r(["get", "create", "delete", "list", "watch"], "storage.k8s.io", "volumeattachments"),
        _r(_RO, "storage.k8s.io", "csidrivers"),
        _r(_RO, "storage.k8s.io", "csinodes"),
    ],
    "expand-controller": [
        _r(["get", "list", "watch", "update", "patch"], "", "persistentvolumes"),
        _r(["update", "patch"], "", "persistentvolumeclaims/status"),
        _r(_RO, "", "persistentvolumeclaims"),
        _r(_RO, "storage.k8s.io", "storageclasses"),
        _r(["get"], "", "services", "endpoints"),
        _r(["get"], "", "secrets"),
        _EVENTS,
    ],
    "node-controller": [
        _r(["get", "list", "watch", "update", "delete", "patch"], "", "nodes"),
        _r(["patch", "update"], "", "nodes/status"),
        _r(["patch", "update"], "", "pods/status"),
        _r(["list", "watch", "get", "delete"], "", "pods"),
        _EVENTS,
    ],
    "persistent-volume-binder": [
        _r(["get", "list", "watch", "update", "create", "delete"], "", "persistentvolumes"),
        _r(["update"], "", "persistentvolumes/status"),
        _r(["get", "list", "watch", "update"], "", "persistentvolumeclaims"),
        _r(["update"], "", "persistentvolumeclaims/status"),
        _r(["list", "watch", "get", "create", "delete"], "", "pods"),
        _r(_RO, "storage.k8s.io", "storageclasses"),
        _r(["list", "watch"], "", "nodes"),
        _EVENTS,
        _r(["watch"], "", "events"),
        _r(["get"], "", "services"),
    ],
    "pod-garbage-collector": [
        _r(["list", "watch", "delete"], "", "pods"),
        _r(_RO, "", "nodes"),
        _r(["patch"], "", "pods/status"),
    ],
    "podgroup-protection-controller": [
        _r(["get", "list", "update", "watch"], "scheduling.k8s.io", "podgroups"),
        _r(_RO, "", "pods"),
    ],
    "pv-protection-controller": [
        _r(["get", "list", "watch", "update"], "", "persistentvolumes"),
        _EVENTS,
    ],
    "volumeattributesclass-protection-controller": [
        _r(_RO, "", "persistentvolumeclaims"),
        _r(_RO, "", "persistentvolumes"),
        _r(["get", "list", "watch", "update"], "storage.k8s.io", "volumeattributesclasses"),
        _EVENTS,
    ],
    "pvc-protection-controller": [
        _r(["get", "list", "watch", "update"], "", "persistentvolumeclaims"),
        _r(["list", "watch", "get"], "", "pods"),
        _EVENTS,
    ],
    "replicaset-controller": [
        _r(["get", "list", "watch", "update"], ["apps", "extensions"], "replicasets"),
        _r(["update"], ["apps", "extensions"], "replicasets/status"),
        _r(["update"], ["apps", "extensions"], "replicasets/finalizers"),
        _r(["list", "watch", "patch", "create", "delete"], "", "pods"),
        _EVENTS,
    ],
    "replication-controller": [
        _r(["get", "list", "watch", "update"], "", "replicationcontrollers"),
        _r(["update"], "", "replicationcontrollers/status"),
        _r(["update"], "", "replicationcontrollers/finalizers"),
        _r(["list", "watch", "patch", "create", "delete"], "", "pods"),
        _EVENTS,
    ],
    "resource-claim-controller": [
        _r(_RO, "", "pods"),
        _r(["update"], "", "pods/finalizers"),
        _r(["get", "list", "watch", "create", "delete"], "resource.k8s.io", "resourceclaims"),
        _r(["update", "patch"], "resource.k8s.io", "resourceclaims", "resourceclaims/status"),
        _r(["update", "patch"], "", "pods/status"),
        _EVENTS,
    ],
    # not among upstream's roles as far as its source here shows: what the controller reads, writes
    # and deletes (expired requests)
    "resourcepoolstatusrequest-controller": [
        _r(["get", "list", "watch", "delete"], "resource.k8s.io", "resourcepoolstatusrequests"),
        _r(["update"], "resource.k8s.io", "resourcepoolstatusrequests/status"),
        _r(_RO, "resource.k8s.io", "resourceslices", "resourceclaims", "devicetaintrules"),
        _EVENTS,
    ],
    "resourcequota-controller": [
        _r(["list", "watch"], "*", "*"),
        _r(["update"], "", "resourcequotas/status"),
        _EVENTS,
    ],
    "root-ca-cert-publisher": [
        _r(["create", "update"], "", "configmaps"),
        _EVENTS,
    ],
    "service-account-controller": [
        _r(["create"], "", "serviceaccounts"),
        _EVENTS,
    ],
    "service-cidrs-controller": [
        _r(["get", "list", "watch", "patch", "update"], "networking.k8s.io", "servicecidrs"),
        _r(["patch", "update"], "networking.k8s.io", "servicecidrs/finalizers"),
        _r(["patch", "update"], "networking.k8s.io", "servicecidrs/status"),
        _r(_RO, "networking.k8s.io", "ipaddresses"),
        _EVENTS,
    ],
    "service-controller": [
        _r(_RO, "", "services"),
        _r(["patch", "update"], "", "services/status"),
        _r(["list", "watch"], "", "nodes"),
        _EVENTS,
    ],
    "statefulset-controller": [
        _r(["list", "watch"], "", "pods"),
        _r(_RO, "apps", "statefulsets"),
        _r(["update"], "apps", "statefulsets/status"),
        _r(["update"], "apps", "statefulsets/finalizers"),
        _r(["get", "create", "delete", "update", "patch"], "", "pods"),
        _r(["get", "create", "delete", "update", "patch", "list", "watch"], "apps", "controllerrevisions"),
        _r(["get", "create", "list", "watch"], "", "persistentvolumeclaims"),
        _r(["update", "delete"], "", "persistentvolumeclaims"),
        _r(["update"], "", "pods/finalizers"),
        _EVENTS,
    ],
    "storage-version-migrator-controller": [
        _r(["list", "watch", "create", "patch"], "*", "*"),
        _r(["update"], "storagemigration.k8s.io", "storageversionmigrations/status"),
    ],
    "ttl-controller": [
        _r(["update", "patch", "list", "watch"], "", "nodes"),
        _EVENTS,
    ],
    "ttl-after-finished-controller": [
        _r(["get", "list", "watch", "delete"], "batch", "jobs"),
        _EVENTS,
    ],
    "validatingadmissionpolicy-status-controller": [
        _r(_RO, "admissionregistration.k8s.io", "validatingadmissionpolicies"),
        _r(["get", "patch", "update"], "admissionregistration.k8s.io", "validatingadmissionpolicies/status"),
        _EVENTS,
    ],
}
