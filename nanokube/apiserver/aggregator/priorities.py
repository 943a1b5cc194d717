"""Group and version priorities of the built-in group/versions, as
kube-apiserver's autoregistration table gives them (cmd/kube-apiserver/app/
aggregator.go and pkg/controlplane/apiserver/aggregator.go). They order
`/apis` discovery: groups by groupPriorityMinimum, versions by versionPriority.
The entries for group/versions added after the table we could read (the
1.30-era one: flowcontrol v1, coordination v1beta1/v1alpha2, scheduling
v1beta1/v1alpha3, resource.k8s.io v1-v1alpha3, storagemigration, lifecycle,
apiregistration) follow later releases as recalled and upstream's rule for
new groups (the lowest group priority minus 100, version 9); they may differ.
"""

from __future__ import annotations

#: (group, version) -> (groupPriorityMinimum, versionPriority)
PRIORITIES: dict[tuple[str, str], tuple[int, int]] = {
    ("", "v1"): (18000, 1),
    ("apps", "v1"): (17800, 15),
    ("events.k8s.io", "v1"): (17750, 15),
    ("authentication.k8s.io", "v1"): (17700, 15),
    ("authentication.k8s.io", "v1beta1"): (17700, 9),
    ("authentication.k8s.io", "v1alpha1"): (17700, 1),
    ("authorization.k8s.io", "v1"): (17600, 15),
    ("autoscaling", "v1"): (17500, 15),
    ("autoscaling", "v2"): (17500, 30),
    ("batch", "v1"): (17400, 15),
    ("certificates.k8s.io", "v1"): (17300, 15),
    ("certificates.k8s.io", "v1beta1"): (17300, 9),
    ("certificates.k8s.io", "v1alpha1"): (17300, 1),
    ("networking.k8s.io", "v1"): (17200, 15),
    ("networking.k8s.io", "v1beta1"): (17200, 9),
    ("policy", "v1"): (17100, 15),
    ("rbac.authorization.k8s.io", "v1"): (17000, 15),
    ("storage.k8s.io", "v1"): (16800, 15),
    ("storage.k8s.io", "v1beta1"): (16800, 9),
    ("storage.k8s.io", "v1alpha1"): (16800, 1),
    ("apiextensions.k8s.io", "v1"): (16700, 15),
    ("admissionregistration.k8s.io", "v1"): (16700, 15),
    ("admissionregistration.k8s.io", "v1beta1"): (16700, 12),
    ("admissionregistration.k8s.io", "v1alpha1"): (16700, 9),
    ("scheduling.k8s.io", "v1"): (16600, 15),
    ("scheduling.k8s.io", "v1beta1"): (16600, 12),
    ("scheduling.k8s.io", "v1alpha3"): (16600, 9),
    ("coordination.k8s.io", "v1"): (16500, 15),
    ("coordination.k8s.io", "v1beta1"): (16500, 13),
    ("coordination.k8s.io", "v1alpha2"): (16500, 12),
    ("node.k8s.io", "v1"): (16300, 15),
    ("discovery.k8s.io", "v1"): (16200, 15),
    ("flowcontrol.apiserver.k8s.io", "v1"): (16100, 21),
    ("internal.apiserver.k8s.io", "v1alpha1"): (16000, 9),
    ("resource.k8s.io", "v1"): (15900, 21),
    ("resource.k8s.io", "v1beta2"): (15900, 15),
    ("resource.k8s.io", "v1beta1"): (15900, 9),
    ("resource.k8s.io", "v1alpha3"): (15900, 1),
    ("storagemigration.k8s.io", "v1"): (15800, 15),
    ("storagemigration.k8s.io", "v1beta1"): (15800, 9),
    ("lifecycle.k8s.io", "v1alpha1"): (15700, 9),
    ("apiregistration.k8s.io", "v1"): (18000, 15),
}

#: metrics-server's and the metrics adapters' APIService manifests
ADAPTER_PRIORITY = (100, 100)
#: CustomResourceDefinitions' group/versions (crdregistration)
CRD_GROUP_PRIORITY, CRD_VERSION_PRIORITY = 1000, 100


def priority(group: str, version: str) -> tuple[int, int] | None:
    return PRIORITIES.get((group, version))
