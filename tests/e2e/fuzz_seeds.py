"""The fuzzer's seed objects (tests/e2e/fuzzing.py): one valid, stable object per fuzzed kind.

Stable means no controller acts on a seed in a way that changes what a refused
write is compared against: workloads select labels no Pod seed carries and run
nothing (replicas 0, a nodeSelector or schedulerName nobody serves, suspended),
storage names a class and driver nobody provisions, admission configuration
matches a resource nobody serves or binds a policy that does not exist. The
seed admission policies are bound and match only the fuzzer's probe (a dry-run
ConfigMap labelled PROBE), which runs their expressions after each accepted
change to them.
"""

from __future__ import annotations

from pathlib import Path

import yaml

#: a self-signed P-256 CA (ClusterTrustBundle) and a P-256 CSR for CN=fuzz (CertificateSigningRequest), made once
CA_PEM = (
    "-----BEGIN CERTIFICATE-----\n"
    "MIIBfDCCASGgAwIBAgIUBeejoTd4lH45hMNyVnIoqNxTCSwwCgYIKoZIzj0EAwIw\n"
    "EjEQMA4GA1UEAwwHZnV6ei1jYTAgFw0yNjEyMDMxMTEyMTlaGA8yMTI2MTEwOTEx\n"
    "MTIxOVowEjEQMA4GA1UEAwwHZnV6ei1jYTBZMBMGByqGSM49AgEGCCqGSM49AwEH\n"
    "A0IABL8/BJ7yzz+nWH/J7Md8LRFbyRnGS8w7GuHbdugigdIEx5HSjogfl5OpG9fZ\n"
    "Gaa7ptXdlQpm9crpxlw8uWYk7cujUzBRMB0GA1UdDgQWBBTYptFueNlD9baeLPw2\n"
    "q/J237iEiDAfBgNVHSMEGDAWgBTYptFueNlD9baeLPw2q/J237iEiDAPBgNVHRMB\n"
    "Af8EBTADAQH/MAoGCCqGSM49BAMCA0kAMEYCIQDeFtnxakPKznYKyggCCRpmk/o2\n"
    "uuBunNftopwTUyD8hwIhAJYEv24O5hnOJJs5Exk8rFbBwnuT6DVOEw6FNaCDkUl+\n"
    "-----END CERTIFICATE-----\n"
)
CSR_B64 = (
    "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURSBSRVFVRVNULS0tLS0KTUlIS01IRUNBUUF3RHpFTk1Bc0dBMVVFQXd3RVpuVjZlakJaTUJN"
    "R0J5cUdTTTQ5QWdFR0NDcUdTTTQ5QXdFSApBMElBQkEyWWE4ZHQzVXBFK3pkTGY3MXFxd0syN25iL3RZNzRQQUE5cEVPa0R0YWxY"
    "Y0dYNWRnNHFHOUFvazhKCkdDQ0hsLzAvN05OWjlmcFNhMjdmbnRrdzRlZWdBREFLQmdncWhrak9QUVFEQWdOSkFEQkdBaUVBdTBZ"
    "UmhrVjQKWjRLdC9aZitoQ3NCNkJCUmVMZlRzNVlNUXoxZkNLcW01Y01DSVFDOXBZYWFxY29DeE5NaEl3dStkR0Jpd2VaOQp6MEp6"
    "dEdZNlp1ZEh6cFU4MUE9PQotLS0tLUVORCBDRVJUSUZJQ0FURSBSRVFVRVNULS0tLS0K"
)

#: a DER PKCS#10 request with an empty subject and no extensions, signed by its P-256 key (PodCertificateRequest)
STUB_CSR_B64 = (
    "MIG7MGICAQAwADBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABKvkj9Wrf18QpDvjrViCDOEpDgbbxJxfApv6rQD9pgCmSZxxB537bPg2Mj4m"
    "rZA9Magqybw6XHDltyP+igm1EEagADAKBggqhkjOPQQDAgNJADBGAiEA8tNk9d4TWfDusO5r4WqWrwd/b2KiYsz+zogNaGuFse4CIQDBtduS"
    "7HV0PS/dIPEDljVT9pmKKJGUU4sXPSckv8l+qw=="
)

C = [{"name": "c", "image": "i"}]
NOBODY_POD = {"kind": "Pod", "namespace": "fuzz", "name": "fuzz-nobody", "uid": "00000000-0000-0000-0000-000000000001"}
SAR = {"resourceAttributes": {"namespace": "fuzz", "verb": "get", "resource": "configmaps"}}
NOBODY = {"apiGroups": ["fuzz.example.com"], "apiVersions": ["*"], "operations": ["CREATE"], "resources": ["nothings"]}
#: the label of the fuzzer's probe ConfigMap, the only object the seed admission policies match
PROBE = {"fuzz-probe": "cel"}
PROBED = {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                             "resources": ["configmaps"]}], "objectSelector": {"matchLabels": PROBE}}
WEBHOOK = {"clientConfig": {"url": "https://127.0.0.1:1/w"}, "rules": [NOBODY], "failurePolicy": "Ignore",
           "sideEffects": "None", "admissionReviewVersions": ["v1"], "timeoutSeconds": 1,
           "objectSelector": {"matchLabels": {"fuzz": "nobody"}}}


def _template(label: str, **spec) -> dict:
    return {"metadata": {"labels": {"fuzz": label}}, "spec": {"containers": C, **spec}}


def _selected(label: str, **spec) -> dict:
    return {"selector": {"matchLabels": {"fuzz": label}}, "template": _template(label, **spec)}


#: a small CRD whose schema uses what structural schemas allow (defaults, int-or-string, list types,
#: embedded and unknown fields, CEL rules, status and scale), installed before fuzzing its custom resources
WIDGETS = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.fuzz.example.com"},
    "spec": {"group": "fuzz.example.com", "scope": "Namespaced",
             "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas",
                                                                    "statusReplicasPath": ".status.replicas"}},
                           "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                               "spec": {"type": "object", "required": ["size"],
                                        "x-kubernetes-validations": [{"rule": "self.replicas <= 100", "message": "too many"}],
                                        "properties": {
                                            "replicas": {"type": "integer", "format": "int32", "default": 1, "minimum": 0},
                                            "size": {"type": "string", "enum": ["s", "m", "l"]},
                                            "port": {"x-kubernetes-int-or-string": True},
                                            "memory": {"type": "string", "pattern": "^[0-9]+(Mi|Gi)$", "maxLength": 10},
                                            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 8,
                                                     "x-kubernetes-list-type": "set"},
                                            "ports": {"type": "array", "x-kubernetes-list-type": "map",
                                                      "x-kubernetes-list-map-keys": ["name"],
                                                      "items": {"type": "object", "required": ["name"], "properties": {
                                                          "name": {"type": "string"}, "port": {"type": "integer"}}}},
                                            "labels": {"type": "object", "additionalProperties": {"type": "string"},
                                                       "maxProperties": 4},
                                            "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                                            "object": {"type": "object", "x-kubernetes-embedded-resource": True,
                                                       "x-kubernetes-preserve-unknown-fields": True},
                                            "ratio": {"type": "number", "nullable": True},
                                        }},
                               "status": {"type": "object", "properties": {"replicas": {"type": "integer"}}},
                           }}}}]},
}
def _deep(n: int) -> dict:
    """n objects nested in one another, each with a string and the innermost with a CEL rule."""
    node = {"type": "object", "properties": {"v": {"type": "string", "maxLength": 16}},
            "x-kubernetes-validations": [{"rule": "!has(self.v) || self.v != 'forbidden'", "message": "forbidden leaf"}]}
    for i in reversed(range(n)):
        node = {"type": "object", "properties": {"v": {"type": "string", "maxLength": 16}, f"l{i}": node}}
    return node
#: a CRD of odd schemas: objects nested 13 deep with rules at both ends, lists of maps keyed by two fields,
#: oneOf/anyOf/not, formats, CEL libraries (quantity, CIDR, URL, format), transition and optionalOldSelf rules,
#: messageExpression/fieldPath/reason, atomic maps, nullable defaults, unknown and embedded fields, scale
ODDITIES = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "oddities.fuzz.example.com"},
    "spec": {"group": "fuzz.example.com", "scope": "Namespaced",
             "names": {"plural": "oddities", "singular": "oddity", "kind": "Oddity", "listKind": "OddityList"},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.count",
                                                                    "statusReplicasPath": ".status.count",
                                                                    "labelSelectorPath": ".status.selector"}},
                           "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                               "spec": {"type": "object",
                                        "x-kubernetes-validations": [
                                            {"rule": "!has(self.deep) || !has(self.deep.l0) || !has(self.deep.l0.l1) || self.deep.l0.l1.v != 'x'",
                                             "message": "deep rule", "fieldPath": ".deep"},
                                            {"rule": "self.frozen == oldSelf.frozen", "message": "frozen is immutable"},
                                            {"rule": "!oldSelf.hasValue() || self.count >= 0", "optionalOldSelf": True,
                                             "messageExpression": "'count ' + string(self.count)", "reason": "FieldValueForbidden"}],
                                        "required": ["frozen"],
                                        "properties": {
                                            "count": {"type": "integer", "format": "int32", "default": 0, "maximum": 1000},
                                            "frozen": {"type": "string", "maxLength": 32},
                                            "deep": _deep(12),
                                            "mapOfLists": {"type": "object", "maxProperties": 4,
                                                           "x-kubernetes-validations": [{"rule": "self.all(k, size(self[k]) <= 3)"}],
                                                           "additionalProperties": {
                                                               "type": "array", "maxItems": 8, "x-kubernetes-list-type": "map",
                                                               "x-kubernetes-list-map-keys": ["a", "b"],
                                                               "items": {"type": "object", "required": ["a", "b"], "properties": {
                                                                   "a": {"type": "string", "maxLength": 8},
                                                                   "b": {"type": "integer"},
                                                                   "c": {"type": "string", "maxLength": 8}}}}},
                                            "choice": {"type": "object",
                                                       "properties": {"a": {"type": "string", "maxLength": 8},
                                                                      "b": {"type": "integer"}, "c": {"type": "boolean"}},
                                                       "oneOf": [{"required": ["a"]}, {"required": ["b"]}],
                                                       "not": {"required": ["c"]}},
                                            "pattern": {"type": "string", "maxLength": 64,
                                                        "anyOf": [{"pattern": "^[a-z]+$"}, {"pattern": "^[0-9]+$"}]},
                                            "stamp": {"type": "string", "format": "date-time"},
                                            "blob": {"type": "string", "format": "byte", "maxLength": 64},
                                            "quantity": {"x-kubernetes-int-or-string": True,
                                                         "x-kubernetes-validations": [
                                                             {"rule": "type(self) == int || isQuantity(self)", "message": "not a quantity"}]},
                                            "cidr": {"type": "string", "maxLength": 64,
                                                     "x-kubernetes-validations": [{"rule": "isCIDR(self)", "message": "not a cidr"}]},
                                            "url": {"type": "string", "maxLength": 128,
                                                    "x-kubernetes-validations": [{"rule": "isURL(self) && url(self).getScheme() == 'https'"}]},
                                            "name": {"type": "string", "maxLength": 63,
                                                     "x-kubernetes-validations": [{"rule": "!format.dns1123Label().validate(self).hasValue()",
                                                                                   "message": "not a label"}]},
                                            "atomic": {"type": "object", "x-kubernetes-map-type": "atomic",
                                                       "additionalProperties": {"type": "string", "maxLength": 8}, "maxProperties": 8},
                                            "ints": {"type": "array", "x-kubernetes-list-type": "set", "maxItems": 16,
                                                     "items": {"type": "integer"},
                                                     "x-kubernetes-validations": [{"rule": "self.all(x, x >= 0)", "message": "negative"}]},
                                            "nullableObj": {"type": "object", "nullable": True, "default": {"k": "d"},
                                                            "properties": {"k": {"type": "string", "maxLength": 8}}},
                                            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                                                     "properties": {"known": {"type": "integer"}}},
                                            "embedded": {"type": "object", "x-kubernetes-embedded-resource": True,
                                                         "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}},
                                        }},
                               "status": {"type": "object", "properties": {
                                   "count": {"type": "integer"}, "selector": {"type": "string"},
                                   "conditions": {"type": "array", "x-kubernetes-list-type": "map", "maxItems": 8,
                                                  "x-kubernetes-list-map-keys": ["type"],
                                                  "items": {"type": "object", "required": ["type", "status"], "properties": {
                                                      "type": {"type": "string", "maxLength": 32},
                                                      "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
                                                      "message": {"type": "string", "maxLength": 256}}}}},
                                   "x-kubernetes-validations": [{"rule": "!has(self.count) || self.count <= 1000"}]},
                           }}}}]}}
ODDITY_SEED = {"spec": {"frozen": "ice", "count": 0, "deep": {"l0": {"v": "a", "l1": {"v": "b", "l2": {"v": "c"}}}},
                 "mapOfLists": {"m": [{"a": "x", "b": 1, "c": "y"}]}, "choice": {"a": "x"}, "pattern": "abc",
                 "stamp": "2026-12-04T00:00:00Z", "blob": "AAEC", "quantity": "1Gi", "cidr": "10.0.0.0/8",
                 "url": "https://example.com/x", "name": "ok", "atomic": {"k": "v"}, "ints": [1, 2],
                 "nullableObj": {"k": "v"}, "free": {"known": 1, "x": {"y": [1, {"z": None}]}},
                 "embedded": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "e"}, "spec": {"a": 1}}},
        "status": {"count": 0, "conditions": [{"type": "Ready", "status": "True"}]}}


#: LeaderWorkerSet's published CRD (a 1.3 MB schema with embedded PodTemplateSpecs)
LWS_FILE = Path(__file__).resolve().parents[1] / "fixtures" / "crds" / "leaderworkerset.x-k8s.io_leaderworkersets.yaml"


def crds() -> list[dict]:
    """The CRDs installed before fuzzing (their custom resources are fuzzed; the CRDs are not). The
    1.3 MB LeaderWorkerSet CRD is read with libyaml's loader where there is one: seconds faster."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return [WIDGETS, ODDITIES, yaml.load(LWS_FILE.read_text(), Loader=loader)]


#: (group/version path, plural, kind, seed object) of each fuzzed kind
KINDS = [
    ("api/v1", "configmaps", "ConfigMap", {"data": {"a": "b"}, "binaryData": {"b": "AAEC"}}),
    ("api/v1", "secrets", "Secret", {"type": "Opaque", "stringData": {"a": "b"}}),
    ("api/v1", "pods", "Pod", {"spec": {"schedulerName": "fuzz-nobody", "containers": [
        {"name": "c", "image": "busybox", "ports": [{"containerPort": 80}],
         "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}, "volumeMounts": [{"name": "v", "mountPath": "/v"}]}],
        "volumes": [{"name": "v", "emptyDir": {"sizeLimit": "1Gi"}}]}}),
    ("api/v1", "services", "Service", {"spec": {"selector": {"app": "x"}, "ports": [{"name": "http", "port": 80}]}}),
    ("api/v1", "persistentvolumeclaims", "PersistentVolumeClaim", {"spec": {
        "accessModes": ["ReadWriteOnce"], "storageClassName": "fuzz-nobody", "resources": {"requests": {"storage": "1Gi"}}}}),
    ("api/v1", "persistentvolumes", "PersistentVolume", {"spec": {
        "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "persistentVolumeReclaimPolicy": "Retain",
        "storageClassName": "fuzz-none", "hostPath": {"path": "/tmp/fuzz"}}}),
    ("api/v1", "resourcequotas", "ResourceQuota", {"spec": {"hard": {"configmaps": "100k", "persistentvolumeclaims": "100k"}}}),
    ("api/v1", "limitranges", "LimitRange", {"spec": {"limits": [
        {"type": "PersistentVolumeClaim", "min": {"storage": "1Mi"}, "max": {"storage": "1Pi"}}]}}),
    ("api/v1", "namespaces", "Namespace", {}),
    ("api/v1", "serviceaccounts", "ServiceAccount", {"automountServiceAccountToken": False}),
    ("api/v1", "replicationcontrollers", "ReplicationController", {"spec": {
        "replicas": 0, "selector": {"fuzz": "rc"}, "template": _template("rc")}}),
    ("api/v1", "podtemplates", "PodTemplate", {"template": _template("pt")}),
    ("api/v1", "endpoints", "Endpoints", {"subsets": [{"addresses": [{"ip": "10.9.9.9"}], "ports": [{"port": 80}]}]}),
    # (not app=x: every seed carries that label, and a Deployment adopts the ReplicaSets it selects)
    ("apis/apps/v1", "deployments", "Deployment", {"spec": {"replicas": 0, **_selected("deploy")}}),
    ("apis/apps/v1", "statefulsets", "StatefulSet", {"spec": {
        "replicas": 0, "serviceName": "fuzz", **_selected("sts", schedulerName="fuzz-nobody"),
        "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]}}),
    ("apis/apps/v1", "daemonsets", "DaemonSet", {"spec": _selected("ds", nodeSelector={"fuzz": "nobody"})}),
    ("apis/apps/v1", "replicasets", "ReplicaSet", {"spec": {"replicas": 0, **_selected("rs", schedulerName="fuzz-nobody")}}),
    ("apis/apps/v1", "controllerrevisions", "ControllerRevision", {"revision": 1, "data": {"a": "b"}}),
    ("apis/batch/v1", "jobs", "Job", {"spec": {"suspend": True, "template": {"spec": {
        "restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}}}),
    ("apis/batch/v1", "cronjobs", "CronJob", {"spec": {"schedule": "*/5 * * * *", "suspend": True, "jobTemplate": {
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": C}}}}}}),
    ("apis/autoscaling/v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler", {"spec": {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "fuzz-nobody"},
        "minReplicas": 1, "maxReplicas": 3, "metrics": [{"type": "Resource", "resource": {
            "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}]}}),
    ("apis/coordination.k8s.io/v1", "leases", "Lease", {"spec": {"holderIdentity": "me", "leaseDurationSeconds": 10}}),
    ("apis/policy/v1", "poddisruptionbudgets", "PodDisruptionBudget", {"spec": {"minAvailable": 1,
                                                                                "selector": {"matchLabels": {"app": "x"}}}}),
    ("apis/networking.k8s.io/v1", "ingresses", "Ingress", {"spec": {"ingressClassName": "fuzz-nobody", "rules": [
        {"host": "a.example.com", "http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": {
            "service": {"name": "s", "port": {"number": 80}}}}]}}]}}),
    ("apis/networking.k8s.io/v1", "ingressclasses", "IngressClass", {"spec": {"controller": "fuzz.example.com/nobody"}}),
    ("apis/networking.k8s.io/v1", "networkpolicies", "NetworkPolicy", {"spec": {
        "podSelector": {"matchLabels": {"fuzz": "np"}}, "policyTypes": ["Ingress"], "ingress": [{
            "from": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}}], "ports": [{"protocol": "TCP", "port": 80}]}]}}),
    ("apis/discovery.k8s.io/v1", "endpointslices", "EndpointSlice", {
        "addressType": "IPv4", "endpoints": [{"addresses": ["10.9.9.9"], "conditions": {"ready": True}}],
        "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]}),
    ("apis/rbac.authorization.k8s.io/v1", "roles", "Role", {"rules": [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}),
    ("apis/rbac.authorization.k8s.io/v1", "rolebindings", "RoleBinding", {
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "fuzz-seed-roles"},
        "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "fuzz-nobody"}]}),
    ("apis/rbac.authorization.k8s.io/v1", "clusterroles", "ClusterRole", {"rules": [
        {"nonResourceURLs": ["/fuzz"], "verbs": ["get"]}]}),
    ("apis/rbac.authorization.k8s.io/v1", "clusterrolebindings", "ClusterRoleBinding", {
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "fuzz-seed-clusterroles"},
        "subjects": [{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "fuzz-nobody"}]}),
    ("apis/apiextensions.k8s.io/v1", "customresourcedefinitions", "CustomResourceDefinition", {"spec": {
        "group": "fuzz.example.com", "scope": "Namespaced",
        "names": {"plural": "fuzzseeds", "singular": "fuzzseed", "kind": "FuzzSeed", "listKind": "FuzzSeedList"},
        "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
            "type": "object", "properties": {"spec": {"type": "object", "properties": {
                "n": {"type": "integer", "default": 1}},
                "x-kubernetes-validations": [{"rule": "self.n >= 0", "messageExpression": "'n is ' + string(self.n)"}]}}}}}]}}),
    ("apis/fuzz.example.com/v1", "widgets", "Widget", {"spec": {
        "size": "m", "port": "http", "tags": ["a"], "ports": [{"name": "p", "port": 1}], "extra": {"k": [1]}}}),
    ("apis/fuzz.example.com/v1", "oddities", "Oddity", ODDITY_SEED),
    ("apis/leaderworkerset.x-k8s.io/v1", "leaderworkersets", "LeaderWorkerSet", {"spec": {
        "replicas": 0, "leaderWorkerTemplate": {"size": 2, "workerTemplate": _template("lws", schedulerName="fuzz-nobody")}}}),
    ("apis/admissionregistration.k8s.io/v1", "validatingadmissionpolicies", "ValidatingAdmissionPolicy", {"spec": {
        "failurePolicy": "Fail", "matchConstraints": PROBED,
        "variables": [{"name": "n", "expression": "object.metadata.name"}],
        "matchConditions": [{"name": "named", "expression": "has(object.metadata.name)"}],
        "validations": [{"expression": "variables.n != ''", "message": "m", "reason": "Invalid",
                         "messageExpression": "'named ' + variables.n"}],
        "auditAnnotations": [{"key": "n", "valueExpression": "string(variables.n)"}]}}),
    ("apis/admissionregistration.k8s.io/v1", "validatingadmissionpolicybindings", "ValidatingAdmissionPolicyBinding", {
        "spec": {"policyName": "fuzz-seed-validatingadmissionpolicies", "validationActions": ["Deny"]}}),
    ("apis/admissionregistration.k8s.io/v1", "mutatingadmissionpolicies", "MutatingAdmissionPolicy", {"spec": {
        "failurePolicy": "Fail", "reinvocationPolicy": "Never", "matchConstraints": PROBED,
        "mutations": [{"patchType": "JSONPatch", "jsonPatch": {
            "expression": '[JSONPatch{op: "add", path: "/metadata/labels/a", value: "b"}]'}}]}}),
    ("apis/admissionregistration.k8s.io/v1", "mutatingadmissionpolicybindings", "MutatingAdmissionPolicyBinding", {
        "spec": {"policyName": "fuzz-seed-mutatingadmissionpolicies"}}),
    ("apis/admissionregistration.k8s.io/v1", "validatingwebhookconfigurations", "ValidatingWebhookConfiguration", {
        "webhooks": [{"name": "v.fuzz.example.com", **WEBHOOK}]}),
    ("apis/admissionregistration.k8s.io/v1", "mutatingwebhookconfigurations", "MutatingWebhookConfiguration", {
        "webhooks": [{"name": "m.fuzz.example.com", "reinvocationPolicy": "Never", **WEBHOOK}]}),
    ("apis/scheduling.k8s.io/v1", "priorityclasses", "PriorityClass", {"value": 10}),
    ("apis/scheduling.k8s.io/v1beta1", "workloads", "Workload", {"spec": {"podGroupTemplates": [
        {"name": "g", "schedulingPolicy": {"gang": {"minCount": 2}}}]}}),
    ("apis/scheduling.k8s.io/v1beta1", "podgroups", "PodGroup", {"spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}}),
    ("apis/resource.k8s.io/v1", "deviceclasses", "DeviceClass", {"spec": {"selectors": [
        {"cel": {"expression": 'device.driver == "gpu.example.com"'}}]}}),
    ("apis/resource.k8s.io/v1", "resourceclaims", "ResourceClaim", {"spec": {"devices": {"requests": [
        {"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}),
    ("apis/resource.k8s.io/v1", "resourceclaimtemplates", "ResourceClaimTemplate", {"spec": {"spec": {"devices": {
        "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu", "count": 2}}]}}}}),
    ("apis/resource.k8s.io/v1", "resourceslices", "ResourceSlice", {"spec": {
        "driver": "fuzz.example.com", "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1}, "allNodes": True,
        "devices": [{"name": "d0", "attributes": {"model": {"string": "x"}}, "capacity": {"memory": {"value": "1Gi"}}}]}}),
    ("apis/resource.k8s.io/v1", "devicetaintrules", "DeviceTaintRule", {"spec": {
        "deviceSelector": {"driver": "fuzz.example.com"}, "taint": {"key": "fuzz.example.com/t", "value": "v",
                                                                    "effect": "NoSchedule"}}}),
    ("apis/certificates.k8s.io/v1", "clustertrustbundles", "ClusterTrustBundle", {"spec": {"trustBundle": CA_PEM}}),
    ("apis/certificates.k8s.io/v1", "certificatesigningrequests", "CertificateSigningRequest", {"spec": {
        "request": CSR_B64, "signerName": "fuzz.example.com/nobody", "usages": ["digital signature"]}}),
    ("apis/storage.k8s.io/v1", "storageclasses", "StorageClass", {
        "provisioner": "fuzz.example.com/nobody", "reclaimPolicy": "Retain", "volumeBindingMode": "WaitForFirstConsumer",
        "parameters": {"a": "b"}, "allowedTopologies": [{"matchLabelExpressions": [{"key": "fuzz", "values": ["x"]}]}]}),
    ("apis/storage.k8s.io/v1", "csidrivers", "CSIDriver", {"spec": {
        "attachRequired": False, "podInfoOnMount": True, "volumeLifecycleModes": ["Persistent"]}}),
    ("apis/storage.k8s.io/v1", "volumeattachments", "VolumeAttachment", {"spec": {
        "attacher": "fuzz.example.com", "nodeName": "fuzz-nobody", "source": {"persistentVolumeName": "fuzz-none"}}}),
    ("apis/storage.k8s.io/v1", "volumeattributesclasses", "VolumeAttributesClass", {
        "driverName": "fuzz.example.com", "parameters": {"iops": "100"}}),
    ("apis/storage.k8s.io/v1", "csistoragecapacities", "CSIStorageCapacity", {
        "storageClassName": "fuzz-nobody", "capacity": "1Gi", "nodeTopology": {"matchLabels": {"fuzz": "x"}}}),
    ("apis/node.k8s.io/v1", "runtimeclasses", "RuntimeClass", {
        "handler": "fuzz", "overhead": {"podFixed": {"cpu": "10m"}}, "scheduling": {"nodeSelector": {"fuzz": "x"}}}),
    # an IPAddress named by an address outside the Service CIDRs, not the allocator's (the repair leaves it)
    ("apis/networking.k8s.io/v1", "ipaddresses", "IPAddress", {"spec": {
        "parentRef": {"group": "", "resource": "services", "namespace": "fuzz", "name": "fuzz-nobody"}}}),
    ("apis/networking.k8s.io/v1", "servicecidrs", "ServiceCIDR", {"spec": {"cidrs": ["10.250.0.0/24"]}}),
    # a Node no kubelet runs, nothing is scheduled to (the node lifecycle controller taints it)
    ("api/v1", "nodes", "Node", {"spec": {"unschedulable": True, "taints": [
        {"key": "fuzz.example.com/nobody", "effect": "NoSchedule"}]}}),
    ("apis/storage.k8s.io/v1", "csinodes", "CSINode", {"spec": {"drivers": [
        {"name": "fuzz.example.com", "nodeID": "n1", "topologyKeys": ["fuzz.example.com/zone"], "allocatable": {"count": 4}}]}}),
    ("apis/coordination.k8s.io/v1beta1", "leasecandidates", "LeaseCandidate", {"spec": {
        "leaseName": "fuzz-nobody", "binaryVersion": "1.37.0", "emulationVersion": "1.37.0",
        "strategy": "OldestEmulationVersion"}}),
    # a local APIService (no service) of a group nothing serves
    ("apis/apiregistration.k8s.io/v1", "apiservices", "APIService", {"spec": {
        "group": "fuzzseed.example.com", "version": "v1", "groupPriorityMinimum": 100, "versionPriority": 10}}),
    ("apis/flowcontrol.apiserver.k8s.io/v1", "prioritylevelconfigurations", "PriorityLevelConfiguration", {"spec": {
        "type": "Limited", "limited": {"nominalConcurrencyShares": 5, "lendablePercent": 10, "limitResponse": {
            "type": "Queue", "queuing": {"queues": 16, "handSize": 4, "queueLengthLimit": 50}}}}}),
    ("apis/flowcontrol.apiserver.k8s.io/v1", "flowschemas", "FlowSchema", {"spec": {
        "priorityLevelConfiguration": {"name": "fuzz-seed-prioritylevelconfigurations"}, "matchingPrecedence": 9000,
        "distinguisherMethod": {"type": "ByUser"}, "rules": [{"subjects": [{"kind": "User", "user": {"name": "fuzz-nobody"}}],
                                                              "resourceRules": [{"verbs": ["get"], "apiGroups": [""],
                                                                                 "resources": ["configmaps"], "namespaces": ["fuzz"]}]}]}}),
    # a request for a pod that does not exist, to a signer nobody runs
    ("apis/certificates.k8s.io/v1", "podcertificaterequests", "PodCertificateRequest", {"spec": {
        "signerName": "fuzz.example.com/nobody", "podName": "fuzz-nobody", "podUID": NOBODY_POD["uid"],
        "serviceAccountName": "default", "serviceAccountUID": "00000000-0000-0000-0000-000000000002",
        "nodeName": "fuzz-nobody", "nodeUID": "00000000-0000-0000-0000-000000000003", "maxExpirationSeconds": 86400,
        "stubPKCS10Request": STUB_CSR_B64}}),
    # the storage version of a resource nobody serves (the API server publishes only its own)
    ("apis/internal.apiserver.k8s.io/v1alpha1", "storageversions", "StorageVersion", {"spec": {}}),
    # a migration of a resource nobody serves: the migrator fails it at once (status only)
    ("apis/storagemigration.k8s.io/v1", "storageversionmigrations", "StorageVersionMigration", {"spec": {
        "resource": {"group": "fuzz.example.com", "resource": "nothings"}}}),
    # a question about a driver no slice names, answered once (status only)
    ("apis/resource.k8s.io/v1alpha3", "resourcepoolstatusrequests", "ResourcePoolStatusRequest", {"spec": {
        "driver": "nobody.fuzz.example.com", "limit": 10}}),
    ("apis/scheduling.k8s.io/v1alpha3", "compositepodgroups", "CompositePodGroup", {"spec": {
        "workloadRef": {"workloadName": "fuzz-nobody", "templateName": "g"},
        "schedulingPolicy": {"gang": {"minGroupCount": 2}}}}),
    # the same stored Events through both APIs (seeds of their own names)
    ("api/v1", "events", "Event", {
        "involvedObject": NOBODY_POD, "reason": "Fuzzed", "message": "m", "type": "Normal", "count": 1,
        "source": {"component": "fuzz"}, "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:00:00Z"}),
    ("apis/events.k8s.io/v1", "events", "Event", {
        "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "fuzz.example.com/c",
        "reportingInstance": "fuzz", "action": "Fuzz", "reason": "Fuzzed", "regarding": NOBODY_POD, "note": "n",
        "type": "Normal"}),
    # create-only kinds (CREATE_ONLY: answered, not stored; no seed object)
    ("api/v1", "bindings", "Binding", {"target": {"kind": "Node", "name": "fuzz-nobody"}}),
    ("apis/authentication.k8s.io/v1", "tokenreviews", "TokenReview", {"spec": {"token": "x", "audiences": ["a"]}}),
    ("apis/authentication.k8s.io/v1", "selfsubjectreviews", "SelfSubjectReview", {}),
    ("apis/authorization.k8s.io/v1", "subjectaccessreviews", "SubjectAccessReview", {"spec": {
        "user": "fuzz-nobody", "groups": ["g"], "extra": {"k": ["v"]}, **SAR}}),
    ("apis/authorization.k8s.io/v1", "localsubjectaccessreviews", "LocalSubjectAccessReview", {"spec": {
        "user": "fuzz-nobody", **SAR}}),
    ("apis/authorization.k8s.io/v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview", {"spec": {
        "nonResourceAttributes": {"path": "/fuzz", "verb": "get"}}}),
    ("apis/authorization.k8s.io/v1", "selfsubjectrulesreviews", "SelfSubjectRulesReview", {"spec": {"namespace": "fuzz"}}),
]
CLUSTER_SCOPED = {"priorityclasses", "deviceclasses", "persistentvolumes", "namespaces", "ingressclasses", "clusterroles",
                  "clusterrolebindings", "customresourcedefinitions", "validatingadmissionpolicies",
                  "validatingadmissionpolicybindings", "mutatingadmissionpolicies", "mutatingadmissionpolicybindings",
                  "validatingwebhookconfigurations", "mutatingwebhookconfigurations", "resourceslices", "devicetaintrules",
                  "clustertrustbundles", "certificatesigningrequests", "storageclasses", "csidrivers", "volumeattachments",
                  "volumeattributesclasses", "runtimeclasses", "prioritylevelconfigurations", "flowschemas",
                  "ipaddresses", "servicecidrs", "nodes", "csinodes", "apiservices", "storageversions",
                  "storageversionmigrations", "resourcepoolstatusrequests", "tokenreviews", "selfsubjectreviews",
                  "subjectaccessreviews", "selfsubjectaccessreviews", "selfsubjectrulesreviews"}
#: kinds only ever created (answered, not stored): the fuzzer sends them nothing else
CREATE_ONLY = {"bindings", "tokenreviews", "selfsubjectreviews", "subjectaccessreviews", "localsubjectaccessreviews",
               "selfsubjectaccessreviews", "selfsubjectrulesreviews"}
#: kinds whose names have a form of their own: (seed name, fresh name for a create numbered n)
#: (an IPAddress is named by its address: n's first two digits; an APIService by version.group, which a
#: fresh name's version mostly does not match: such a create is refused; a StorageVersion by <group>.<resource>);
#: a key `group/plural` names one group's kind where two share a plural (events.k8s.io/v1's seed is not core/v1's)
NAMES = {"customresourcedefinitions": ("fuzzseeds.fuzz.example.com", "fuzz{n}s.fuzz.example.com"),
         "storageversions": ("fuzz.example.com.nothings", "fuzz.example.com.n{n}"),
         "events.k8s.io/events": ("fuzz-seed-events-v1", "fuzz-{n}"),
         "ipaddresses": ("192.0.2.200", "192.0.2.{n!s:.2}"),
         "apiservices": ("v1.fuzzseed.example.com", "v{n}.fuzzseed.example.com")}
