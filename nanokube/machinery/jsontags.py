"""What upstream's Go json tags say about built-in fields where no shipped data says it.

kube-apiserver decodes a body into Go structs and encodes them back with encoding/json, so a
field's `omitempty` decides what is served: an omitempty value scalar at its zero (`""`, `0`,
`false`) and an omitempty list or map that is empty are left out, while a field tagged without it
is always written. The tag is in no schema nanokube ships. For k8s.io/api the protobuf table is
read from kubectl 1.37's Go type data, tags included (scripts/kubectl_go_types.py): its "o" flag
is exactly a value scalar tagged omitempty. The tables below say the rest: which optional value
scalars, lists and maps are tagged without omitempty (what the field manager and the decoder's
nulls need), and the tags of kinds outside k8s.io/api, read from their types.go.
tests/machinery/test_jsontags.py checks the k8s.io/api entries against kubectl's tags.
apiserver/omitempty.py turns them into what the decoder and the field manager use.
"""

from __future__ import annotations

#: kinds whose types (and all they refer to) were reviewed; other kinds keep what they are sent.
#: A name without the `io.k8s.` prefix is under io.k8s.api.
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
    "core.v1.Event", "events.v1.Event", "autoscaling.v1.Scale", "scheduling.v1beta1.PriorityClass",
    "resource.v1.ResourceClaim", "resource.v1.ResourceClaimTemplate", "resource.v1.ResourceSlice",
    "resource.v1.DeviceClass", "resource.v1beta2.ResourceClaim", "resource.v1beta2.ResourceClaimTemplate",
    "resource.v1beta2.ResourceSlice", "resource.v1beta2.DeviceClass", "resource.v1beta1.ResourceClaim",
    "resource.v1beta1.ResourceClaimTemplate", "resource.v1beta1.ResourceSlice", "resource.v1beta1.DeviceClass",
    "resource.v1.DeviceTaintRule", "resource.v1beta2.DeviceTaintRule", "resource.v1alpha3.DeviceTaintRule",
    "admissionregistration.v1.ValidatingWebhookConfiguration", "admissionregistration.v1.MutatingWebhookConfiguration",
    "admissionregistration.v1.ValidatingAdmissionPolicy", "admissionregistration.v1.ValidatingAdmissionPolicyBinding",
    "admissionregistration.v1.MutatingAdmissionPolicy", "admissionregistration.v1.MutatingAdmissionPolicyBinding",
    "flowcontrol.v1.FlowSchema", "flowcontrol.v1.PriorityLevelConfiguration",
    "storage.v1.CSIDriver", "storage.v1.CSINode", "storage.v1.VolumeAttachment", "storage.v1.VolumeAttributesClass",
    "storage.v1.CSIStorageCapacity", "coordination.v1beta1.LeaseCandidate",
    "certificates.v1beta1.ClusterTrustBundle", "certificates.v1beta1.PodCertificateRequest",
    "scheduling.v1beta1.Workload", "scheduling.v1beta1.PodGroup",
    "scheduling.v1alpha3.Workload", "scheduling.v1alpha3.PodGroup", "scheduling.v1alpha3.CompositePodGroup",
    "admissionregistration.v1beta1.MutatingAdmissionPolicy", "admissionregistration.v1beta1.MutatingAdmissionPolicyBinding",
    "admissionregistration.v1alpha1.MutatingAdmissionPolicy",
    "admissionregistration.v1alpha1.MutatingAdmissionPolicyBinding",
    "node.v1.RuntimeClass", "networking.v1.IPAddress", "networking.v1.ServiceCIDR",
    "apiserverinternal.v1alpha1.StorageVersion", "certificates.v1.ClusterTrustBundle",
    "certificates.v1.PodCertificateRequest", "coordination.v1alpha2.LeaseCandidate",
    "storagemigration.v1.StorageVersionMigration", "storagemigration.v1beta1.StorageVersionMigration",
    "resource.v1alpha3.ResourcePoolStatusRequest", "core.v1.Binding", "core.v1.ComponentStatus",
    "authentication.v1.TokenReview", "authentication.v1.SelfSubjectReview",
    "authorization.v1.SubjectAccessReview", "authorization.v1.LocalSubjectAccessReview",
    "authorization.v1.SelfSubjectAccessReview", "authorization.v1.SelfSubjectRulesReview",
    # outside k8s.io/api: their full definition names
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition",
    "io.k8s.kube-aggregator.pkg.apis.apiregistration.v1.APIService",
)

_CONDITION = frozenset({"type", "status"})
#: optional value scalars upstream tags without omitempty: their zero is encoded, so it is kept
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
    "io.k8s.api.scheduling.v1beta1.PriorityClass": frozenset({"value"}),
    # the default runtime handler is the one named "": a node reports `name: ""`
    "io.k8s.api.core.v1.NodeRuntimeHandler": frozenset({"name"}),
    "io.k8s.api.core.v1.Event": frozenset({"reportingComponent", "reportingInstance"}),
    "io.k8s.api.apps.v1.StatefulSetSpec": frozenset({"serviceName"}),
    "io.k8s.api.resource.v1beta1.DeviceRequest": frozenset({"deviceClassName"}),
    "io.k8s.api.flowcontrol.v1.FlowSchemaSpec": frozenset({"matchingPrecedence"}),
    "io.k8s.api.flowcontrol.v1.QueuingConfiguration": frozenset({"queues", "handSize", "queueLengthLimit"}),
}

#: the omitempty value scalars of reviewed types outside k8s.io/api, which the protobuf table
#: (read from kubectl's types) does not cover: apiextensions-apiserver's and kube-aggregator's
#: types.go (their other optional scalars are pointers: deprecationWarning, labelSelectorPath,
#: x-kubernetes-preserve-unknown-fields, a service's path and port, ...)
_CRD = "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1."
_AGGREGATOR = "io.k8s.kube-aggregator.pkg.apis.apiregistration.v1."
OMITEMPTY_SCALARS: dict[str, frozenset[str]] = {
    _CRD + "CustomResourceDefinitionSpec": frozenset({"preserveUnknownFields"}),
    _CRD + "CustomResourceDefinitionNames": frozenset({"singular", "listKind"}),
    _CRD + "CustomResourceDefinitionVersion": frozenset({"deprecated"}),
    _CRD + "CustomResourceColumnDefinition": frozenset({"format", "description", "priority"}),
    _CRD + "CustomResourceDefinitionStatus": frozenset({"observedGeneration"}),
    _CRD + "CustomResourceDefinitionCondition": frozenset({"reason", "message", "observedGeneration"}),
    _CRD + "ValidationRule": frozenset({"message", "messageExpression", "fieldPath"}),
    _CRD + "ExternalDocumentation": frozenset({"description", "url"}),
    _CRD + "JSONSchemaProps": frozenset({
        "id", "$schema", "description", "type", "format", "title", "pattern", "exclusiveMaximum",
        "exclusiveMinimum", "uniqueItems", "nullable", "x-kubernetes-embedded-resource",
        "x-kubernetes-int-or-string"}),
    _AGGREGATOR + "APIServiceSpec": frozenset({"group", "version", "insecureSkipTLSVerify"}),
    _AGGREGATOR + "ServiceReference": frozenset({"namespace", "name"}),
    _AGGREGATOR + "APIServiceCondition": frozenset({"reason", "message"}),
}

#: optional lists, maps and byte strings upstream tags without omitempty (every other optional one
#: of a reviewed type is omitempty: an empty one is left out). Such a list or map is always encoded,
#: as `null` when nil; and etcd's protobuf keeps no empty repeated field or map, so one sent empty
#: is nil once stored: left out or sent empty, it is served as `null` (an EndpointSlice's
#: `endpoints: null`). A byte string keeps its "".
KEEP_EMPTY: dict[str, frozenset[str]] = {
    "io.k8s.api.certificates.v1beta1.PodCertificateRequestSpec": frozenset({"pkixPublicKey", "proofOfPossession"}),
    "io.k8s.api.rbac.v1.Role": frozenset({"rules"}),
    "io.k8s.api.rbac.v1.ClusterRole": frozenset({"rules"}),
    "io.k8s.api.discovery.v1.EndpointSlice": frozenset({"endpoints", "ports"}),
    "io.k8s.api.core.v1.ContainerImage": frozenset({"names"}),
    "io.k8s.api.core.v1.ProjectedVolumeSource": frozenset({"sources"}),
    "io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerStatus": frozenset({"currentMetrics"}),
    "io.k8s.api.flowcontrol.v1.ResourcePolicyRule": frozenset({"namespaces"}),
    "io.k8s.api.storage.v1.CSINodeDriver": frozenset({"topologyKeys"}),
    **{f"io.k8s.api.resource.{v}.DeviceClaim": frozenset({"requests"}) for v in ("v1", "v1beta2", "v1beta1")},
    **{f"io.k8s.api.resource.{v}.AllocatedDeviceStatus": frozenset({"conditions"})
       for v in ("v1", "v1beta2", "v1beta1")},
    **{f"io.k8s.api.scheduling.{v}.WorkloadSpec": frozenset({"podGroupTemplates"}) for v in ("v1beta1", "v1alpha3")},
    # a CRD's status before the naming controller has seen it: `conditions: null`
    _CRD + "CustomResourceDefinitionStatus": frozenset({"conditions", "storedVersions"}),
}

#: required lists and maps upstream tags omitempty: left out, one stays out (every other required
#: one is tagged without it, so one left out is served `null` where validation lets it be: a
#: LimitRange's `limits: null`)
REQUIRED_OMITEMPTY: dict[str, frozenset[str]] = {
    "io.k8s.api.apiserverinternal.v1alpha1.ServerStorageVersion": frozenset({"decodableVersions"}),
    "io.k8s.api.admissionregistration.v1.ValidatingAdmissionPolicyBindingSpec": frozenset({"validationActions"}),
    **{f"io.k8s.api.resource.{v}.{kind}": frozenset({"counters"})
       for v in ("v1", "v1beta2", "v1beta1") for kind in ("CounterSet", "DeviceCounterConsumption")},
}

#: optional pointers upstream tags without omitempty and no defaulting fills: encoded `null` when
#: nil, so one left out is served as `null` (a sent value, zero or `{}` included, is kept). The
#: other such pointers are required, or defaulted when nil (GRPCAction.service "",
#: LimitedPriorityLevelConfiguration.nominalConcurrencyShares 30, IngressClass parameters' scope
#: "Cluster"): never served null
NIL_POINTERS: dict[str, frozenset[str]] = {
    "io.k8s.api.core.v1.TypedLocalObjectReference": frozenset({"apiGroup"}),
    "io.k8s.api.core.v1.TypedObjectReference": frozenset({"apiGroup"}),
    "io.k8s.api.core.v1.AzureFilePersistentVolumeSource": frozenset({"secretNamespace"}),
    **{f"io.k8s.api.resource.{v}.CapacityRequestPolicy": frozenset({"default"}) for v in ("v1", "v1beta2", "v1beta1")},
    **{f"io.k8s.api.scheduling.{v}.PodGroupTemplate": frozenset({"schedulingConstraints"})
       for v in ("v1beta1", "v1alpha3")},
    # a local APIService (v1.apps) has no service: `service: null`
    _AGGREGATOR + "APIServiceSpec": frozenset({"service"}),
}

#: omitempty lists whose emptiness upstream's validation of a create reads (it runs on the decoded
#: struct, where `[]` is not nil): they are left for it and dropped after it
VALIDATED_EMPTY: dict[str, frozenset[str]] = {
    # validateWindows forbids `supplementalGroups: []` on a windows pod
    "io.k8s.api.core.v1.PodSecurityContext": frozenset({"supplementalGroups"}),
    # ValidateIngressSpec prints the rules it finds empty: `Invalid value: []`
    "io.k8s.api.networking.v1.IngressSpec": frozenset({"rules"}),
    # copyHPAScalingRules keeps a non-nil `policies: []`, which validateScalingRules refuses
    "io.k8s.api.autoscaling.v2.HPAScalingRules": frozenset({"policies"}),
    # ValidateResourceQuotaUpdate prints the new scopes it finds changed: `Invalid value: []`
    "io.k8s.api.core.v1.ResourceQuotaSpec": frozenset({"scopes"}),
}
