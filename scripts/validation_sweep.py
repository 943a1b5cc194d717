"""Send built-in kinds invalid objects and print the 422 causes nanokube answers with.

A checking aid for validation work: read each cause against the kind's upstream validation
(pkg/apis/<group>/validation, apimachinery's field errors): messages, paths, values as
field.Error prints them, order. An in-process server on a memory store; nothing is kept.

    .venv/bin/python scripts/validation_sweep.py [PATH-SUBSTRING ...]
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.served import served  # noqa: E402

CASES: list[tuple[str, dict]] = json.loads("""[
    ["/api/v1/namespaces/default/pods", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}}],
    ["/api/v1/namespaces/default/pods", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "P_1"}, "spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "2", "memory": "-1"}, "limits": {"cpu": "1"}}, "imagePullPolicy": "Sometimes", "ports": [{"containerPort": 0, "protocol": "XTP"}]}], "restartPolicy": "Maybe", "dnsPolicy": "Bad"}}],
    ["/api/v1/namespaces/default/services", {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {"type": "Weird", "ports": [{"port": 0, "protocol": "XTP", "targetPort": "bad_name!"}], "sessionAffinity": "Sticky"}}],
    ["/api/v1/namespaces/default/configmaps", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}, "data": {"bad key": "x"}}],
    ["/api/v1/namespaces/default/secrets", {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "type": "kubernetes.io/tls", "data": {}}],
    ["/api/v1/namespaces/default/persistentvolumeclaims", {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "c"}, "spec": {"accessModes": ["ReadWriteSometimes"], "resources": {"requests": {"storage": "0"}}, "volumeMode": "Odd"}}],
    ["/api/v1/persistentvolumes", {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "v"}, "spec": {"capacity": {"storage": "1x"}, "accessModes": [], "persistentVolumeReclaimPolicy": "Keep"}}],
    ["/api/v1/namespaces/default/resourcequotas", {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q"}, "spec": {"hard": {"cpu": "-1", "foo": "1"}, "scopes": ["Weird"]}}],
    ["/api/v1/namespaces/default/limitranges", {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "l"}, "spec": {"limits": [{"type": "Node", "max": {"cpu": "1"}, "min": {"cpu": "2"}}]}}],
    ["/api/v1/namespaces/default/serviceaccounts", {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "Bad_SA"}}],
    ["/api/v1/namespaces/default/endpoints", {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "e"}, "subsets": [{"addresses": [{"ip": "not-an-ip"}], "ports": [{"port": 0, "protocol": "XTP"}]}]}],
    ["/api/v1/namespaces/default/replicationcontrollers", {"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "r"}, "spec": {"replicas": -1, "selector": {"a": "b"}, "template": {"metadata": {"labels": {"a": "c"}}, "spec": {"containers": []}}}}],
    ["/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}, "spec": {"taints": [{"key": "k", "effect": "Sometimes"}], "podCIDRs": ["x"]}}],
    ["/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "Bad.NS"}}],
    ["/apis/apps/v1/namespaces/default/deployments", {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"replicas": -1, "selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "c"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}, "strategy": {"type": "Bounce"}, "revisionHistoryLimit": -2, "progressDeadlineSeconds": 0}}],
    ["/apis/apps/v1/namespaces/default/statefulsets", {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "s"}, "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}, "podManagementPolicy": "Eager", "updateStrategy": {"type": "Jump"}}}],
    ["/apis/apps/v1/namespaces/default/daemonsets", {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}}}],
    ["/apis/batch/v1/namespaces/default/jobs", {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": {"parallelism": -1, "completions": -1, "backoffLimit": -1, "completionMode": "Some", "template": {"spec": {"restartPolicy": "Always", "containers": [{"name": "c", "image": "i"}]}}}}],
    ["/apis/batch/v1/namespaces/default/cronjobs", {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c"}, "spec": {"schedule": "bad", "concurrencyPolicy": "Maybe", "timeZone": "Mars/Base", "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "OnFailure", "containers": [{"name": "c", "image": "i"}]}}}}}}],
    ["/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers", {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "h"}, "spec": {"scaleTargetRef": {"kind": "", "name": ""}, "minReplicas": 0, "maxReplicas": 0, "metrics": [{"type": "Bogus"}]}}],
    ["/apis/policy/v1/namespaces/default/poddisruptionbudgets", {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "p"}, "spec": {"minAvailable": "120%", "maxUnavailable": 1, "unhealthyPodEvictionPolicy": "Never"}}],
    ["/apis/networking.k8s.io/v1/namespaces/default/ingresses", {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "i"}, "spec": {"rules": [{"host": "*.*.x", "http": {"paths": [{"path": "a", "pathType": "Odd", "backend": {}}]}}]}}],
    ["/apis/networking.k8s.io/v1/namespaces/default/networkpolicies", {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "n"}, "spec": {"podSelector": {}, "policyTypes": ["Sideways"], "ingress": [{"ports": [{"protocol": "XTP", "port": 0}], "from": [{"ipBlock": {"cidr": "x"}}]}]}}],
    ["/apis/rbac.authorization.k8s.io/v1/clusterroles", {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "c"}, "rules": [{"verbs": [], "apiGroups": [""], "resources": ["pods"]}]}],
    ["/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings", {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "r"}, "roleRef": {"apiGroup": "x", "kind": "Thing", "name": ""}, "subjects": [{"kind": "Robot", "name": ""}]}],
    ["/apis/storage.k8s.io/v1/storageclasses", {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "s"}, "provisioner": "", "reclaimPolicy": "Keep", "volumeBindingMode": "Soon"}],
    ["/apis/scheduling.k8s.io/v1/priorityclasses", {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "system-x"}, "value": 2000000000, "preemptionPolicy": "Sometimes"}],
    ["/apis/coordination.k8s.io/v1/namespaces/default/leases", {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"}, "spec": {"leaseDurationSeconds": 0, "leaseTransitions": -1}}],
    ["/apis/node.k8s.io/v1/runtimeclasses", {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "r"}, "handler": "Bad_H", "overhead": {"podFixed": {"cpu": "-1"}}}],
    ["/apis/discovery.k8s.io/v1/namespaces/default/endpointslices", {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "metadata": {"name": "e"}, "addressType": "IPv5", "endpoints": [{"addresses": []}], "ports": [{"port": 0, "protocol": "XTP"}]}],
    ["/apis/flowcontrol.apiserver.k8s.io/v1/prioritylevelconfigurations", {"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration", "metadata": {"name": "p"}, "spec": {"type": "Sometimes"}}],
    ["/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations", {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration", "metadata": {"name": "v"}, "webhooks": [{"name": "nodots", "clientConfig": {}, "sideEffects": "Maybe", "admissionReviewVersions": ["v9"], "failurePolicy": "Sometimes", "timeoutSeconds": 31}]}],
    ["/apis/certificates.k8s.io/v1/certificatesigningrequests", {"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest", "metadata": {"name": "c"}, "spec": {"request": "", "signerName": "bad", "usages": ["eat"]}}],
    ["/apis/events.k8s.io/v1/namespaces/default/events", {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e"}, "type": "Odd", "reason": "", "action": ""}],
    ["/apis/resource.k8s.io/v1/deviceclasses", {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "d"}, "spec": {"selectors": [{"cel": {"expression": "device.x +"}}]}}],
    ["/apis/batch/v1/namespaces/default/jobs", {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": {"template": {"spec": {"restartPolicy": "Sometimes", "containers": [{"name": "c", "image": "i"}]}}}}],
    ["/apis/batch/v1/namespaces/default/jobs", {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": {"podFailurePolicy": {"rules": []}, "template": {"spec": {"restartPolicy": "OnFailure", "containers": [{"name": "c", "image": "i"}]}}}}],
    ["/api/v1/namespaces/default/pods", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": ""}, {"name": "BAD", "image": "i"}, {"name": "d", "image": " x"}]}}],
    ["/api/v1/namespaces/default/services", {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {"type": "ExternalName", "ports": [{"port": 80}]}}],
    ["/api/v1/namespaces/default/services", {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s2"}, "spec": {"clusterIP": "10.0.0.999", "ports": [{"port": 80, "name": "a"}, {"port": 81, "name": "a"}]}}],
    ["/api/v1/namespaces/default/services", {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s3"}, "spec": {}}],
    ["/api/v1/persistentvolumes", {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "v"}, "spec": {}}],
    ["/api/v1/namespaces/default/persistentvolumeclaims", {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "c"}, "spec": {}}],
    ["/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn"}}],
    ["/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "Bad_Node"}}],
    ["/apis/apps/v1/namespaces/default/deployments", {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}}],
    ["/apis/apps/v1/namespaces/default/replicasets", {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "r"}, "spec": {"selector": {"matchLabels": {}}, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}}],
    ["/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers", {"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "h"}, "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "d"}, "minReplicas": 0, "maxReplicas": 1, "targetCPUUtilizationPercentage": -1}}],
    ["/apis/policy/v1/namespaces/default/poddisruptionbudgets", {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "p"}, "spec": {"minAvailable": -1, "selector": {"matchExpressions": [{"key": "a", "operator": "In"}]}}}],
    ["/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles", {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "r"}, "rules": [{"verbs": ["get"], "nonResourceURLs": ["/x"]}, {"verbs": ["get"]}]}],
    ["/apis/storage.k8s.io/v1/csidrivers", {"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": "Bad"}, "spec": {"fsGroupPolicy": "Some", "volumeLifecycleModes": ["Never"]}}],
    ["/apis/storage.k8s.io/v1/volumeattachments", {"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment", "metadata": {"name": "v"}, "spec": {"attacher": "", "source": {}, "nodeName": ""}}],
    ["/apis/coordination.k8s.io/v1/namespaces/default/leases", {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"}, "spec": {"strategy": "Random", "preferredHolder": "x"}}],
    ["/apis/networking.k8s.io/v1/ipaddresses", {"apiVersion": "networking.k8s.io/v1", "kind": "IPAddress", "metadata": {"name": "10.0.0.1"}, "spec": {"parentRef": {"resource": "", "name": ""}}}],
    ["/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies", {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": {"name": "p"}, "spec": {"failurePolicy": "Maybe", "validations": [{"expression": ""}]}}],
    ["/api/v1/namespaces/default/podtemplates", {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t"}, "template": {"spec": {"containers": [{"name": "c", "image": "i"}], "restartPolicy": "Always", "terminationGracePeriodSeconds": -5, "activeDeadlineSeconds": 0}}}],
    ["/api/v1/namespaces/default/configmaps", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "x"}, "binaryData": {"a": "eA==", "..": "eA=="}}],
    ["/api/v1/namespaces/default/limitranges", {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "l"}, "spec": {"limits": [{"type": "Container", "default": {"cpu": "2"}, "max": {"cpu": "1"}, "defaultRequest": {"cpu": "3"}, "maxLimitRequestRatio": {"cpu": "0.5"}}, {"type": "PersistentVolumeClaim", "min": {"cpu": "1"}}]}}],
    ["/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas", {"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema", "metadata": {"name": "f"}, "spec": {"priorityLevelConfiguration": {"name": ""}, "matchingPrecedence": 0, "distinguisherMethod": {"type": "ByNothing"}, "rules": [{"subjects": [{"kind": "Robot"}], "resourceRules": [{"verbs": [], "apiGroups": [], "resources": []}]}]}}],
    ["/apis/flowcontrol.apiserver.k8s.io/v1/prioritylevelconfigurations", {"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration", "metadata": {"name": "p"}, "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": -1, "limitResponse": {"type": "Queue", "queuing": {"queues": 0, "handSize": 0, "queueLengthLimit": 0}}, "lendablePercent": 101}}}],
    ["/apis/networking.k8s.io/v1/servicecidrs", {"apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR", "metadata": {"name": "s"}, "spec": {"cidrs": ["10.0.0.0/24", "10.1.0.0/24", "fd00::/64"]}}],
    ["/apis/storage.k8s.io/v1/csinodes", {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": "n"}, "spec": {"drivers": [{"name": "d.example.com", "nodeID": "", "topologyKeys": ["bad key!"]}, {"name": "d.example.com", "nodeID": "x"}]}}],
    ["/apis/coordination.k8s.io/v1beta1/namespaces/default/leasecandidates", {"apiVersion": "coordination.k8s.io/v1beta1", "kind": "LeaseCandidate", "metadata": {"name": "l"}, "spec": {"leaseName": "", "binaryVersion": "x", "emulationVersion": "2", "strategy": ""}}],
    ["/apis/resource.k8s.io/v1/namespaces/default/resourceclaims", {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c"}, "spec": {"devices": {"requests": [{"name": "Bad", "exactly": {"deviceClassName": "", "allocationMode": "Some"}}, {"name": "Bad", "exactly": {"deviceClassName": "c", "count": 0}}], "constraints": [{"requests": ["nope"], "matchAttribute": "bad"}]}}}],
    ["/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings", {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": "b"}, "spec": {"policyName": "", "validationActions": ["Shout", "Deny", "Deny"]}}],
    ["/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations", {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration", "metadata": {"name": "m"}, "webhooks": [{"name": "a.b.c", "clientConfig": {"url": "http://x"}, "sideEffects": "None", "admissionReviewVersions": ["v1"], "reinvocationPolicy": "Sometimes", "rules": [{"operations": ["EAT"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["pods/*/*"]}]}]}],
    ["/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers", {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "h"}, "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "d", "apiVersion": "a/b/c"}, "minReplicas": 5, "maxReplicas": 2, "behavior": {"scaleUp": {"selectPolicy": "Most", "stabilizationWindowSeconds": 3601, "policies": [{"type": "Bogus", "value": 0, "periodSeconds": 0}]}}}}],
    ["/apis/batch/v1/namespaces/default/cronjobs", {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"}, "spec": {"schedule": "TZ=UTC * * * * *", "startingDeadlineSeconds": -1, "successfulJobsHistoryLimit": -1, "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}}}}}],
    ["/api/v1/namespaces/default/pods", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i", "livenessProbe": {"periodSeconds": 0}, "env": [{"name": "1=bad"}, {"name": "A", "value": "x", "valueFrom": {"fieldRef": {"fieldPath": "spec.x"}}}], "volumeMounts": [{"name": "missing", "mountPath": "/m"}, {"name": "v", "mountPath": "rel"}], "ports": [{"containerPort": 80, "name": "TooLongPortName1"}]}, {"name": "c", "image": "i"}], "volumes": [{"name": "v", "emptyDir": {"medium": "Disk"}}, {"name": "v", "hostPath": {"path": "/x", "type": "Weird"}}], "tolerations": [{"key": "k", "operator": "Maybe", "effect": "NoSchedule"}, {"operator": "Equal", "value": "v"}], "nodeSelector": {"bad key!": "v"}, "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "Near", "values": ["a"]}]}]}}}, "priority": 5, "hostname": "Bad_Host", "subdomain": "x", "dnsPolicy": "None"}}],
    ["/api/v1/namespaces/default/pods", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i", "securityContext": {"runAsUser": -1, "capabilities": {"add": ["bad cap"]}, "privileged": true, "allowPrivilegeEscalation": false, "seccompProfile": {"type": "Weird"}, "procMount": "Odd"}, "volumeMounts": [{"name": "v", "mountPath": ""}, {"name": "v", "mountPath": "/a", "subPath": "../x", "mountPropagation": "Sideways"}], "resources": {"limits": {"cpu": "1", "foo": "1"}, "requests": {"hugepages-2Mi": "1Mi"}}}], "volumes": [{"name": "v", "emptyDir": {}}], "securityContext": {"runAsGroup": -1, "fsGroupChangePolicy": "Sometimes", "sysctls": [{"name": "bad sysctl", "value": "1"}], "supplementalGroupsPolicy": "Odd"}, "topologySpreadConstraints": [{"maxSkew": 0, "topologyKey": "", "whenUnsatisfiable": "Maybe"}], "readinessGates": [{"conditionType": "bad type!"}], "serviceAccountName": "Bad_SA", "nodeName": "Bad_Node", "schedulerName": "Bad Sched"}}],
    ["/api/v1/namespaces/default/pods", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i", "resources": {"limits": {"hugepages-2Mi": "2Mi"}, "requests": {"hugepages-2Mi": "2Mi"}}}], "securityContext": {"sysctls": [{"name": "bad sysctl!", "value": "1"}, {"name": "net.core.somaxconn", "value": "1"}, {"name": "net.core.somaxconn", "value": "2"}]}, "imagePullSecrets": [{"name": ""}], "hostAliases": [{"ip": "10.0.0.1"}], "dnsPolicy": "ClusterFirst", "dnsConfig": {"options": [{"name": ""}]}}}],
    ["/api/v1/namespaces/default/services", {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s2"}, "spec": {"ports": [{"port": 80, "name": "a"}, {"port": 81, "name": "a"}, {"port": 82}]}}],
    ["/api/v1/namespaces/default/services", {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s3"}, "spec": {"clusterIP": "10.0.0.999", "ports": [{"port": 80, "name": "a"}, {"port": 81, "name": "a"}]}}],
    ["/apis/discovery.k8s.io/v1/namespaces/default/endpointslices", {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "metadata": {"name": "e"}, "addressType": "IPv4", "endpoints": [{"addresses": ["10.0.0.1"]}], "ports": [{"port": 70000, "name": "x"}, {"port": 1, "name": "x"}]}],
    ["/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "b"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"}, "subjects": [{"kind": "ServiceAccount", "name": "sa"}, {"kind": "User", "name": "u", "apiGroup": "x"}]}],
    ["/apis/networking.k8s.io/v1/ingressclasses", {"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass", "metadata": {"name": "i"}, "spec": {"controller": "bad", "parameters": {"kind": "", "name": "", "scope": "Sometimes"}}}],
    ["/apis/apps/v1/namespaces/default/controllerrevisions", {"apiVersion": "apps/v1", "kind": "ControllerRevision", "metadata": {"name": "c"}, "revision": -1}],
    ["/apis/certificates.k8s.io/v1beta1/clustertrustbundles", {"apiVersion": "certificates.k8s.io/v1beta1", "kind": "ClusterTrustBundle", "metadata": {"name": "x"}, "spec": {"signerName": "example.com/s", "trustBundle": "nope"}}],
    ["/apis/resource.k8s.io/v1/resourceslices", {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"}, "spec": {"driver": "Bad_Driver", "pool": {"name": "", "resourceSliceCount": 0}, "devices": [{"name": "BadDev"}]}}],
    ["/apis/resource.k8s.io/v1/namespaces/default/resourceclaimtemplates", {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "t"}, "spec": {"metadata": {"name": "x"}, "spec": {"devices": {"requests": [{"name": "r"}]}}}}],
    ["/apis/resource.k8s.io/v1/devicetaintrules", {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": "d"}, "spec": {"taint": {"key": "bad key", "effect": "Sometimes"}}}],
    ["/apis/storage.k8s.io/v1/namespaces/default/csistoragecapacities", {"apiVersion": "storage.k8s.io/v1", "kind": "CSIStorageCapacity", "metadata": {"name": "c"}, "storageClassName": "Bad_SC", "capacity": "-1"}],
    ["/apis/storage.k8s.io/v1/volumeattributesclasses", {"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttributesClass", "metadata": {"name": "v"}, "driverName": "", "parameters": {}}],
    ["/apis/apiregistration.k8s.io/v1/apiservices", {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": "bad"}, "spec": {"group": "x.io", "version": "v1", "groupPriorityMinimum": 0, "versionPriority": 0}}],
    ["/apis/storagemigration.k8s.io/v1beta1/storageversionmigrations", {"apiVersion": "storagemigration.k8s.io/v1beta1", "kind": "StorageVersionMigration", "metadata": {"name": "m"}, "spec": {"resource": {"group": "", "resource": ""}}}],
    ["/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies", {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy", "metadata": {"name": "m"}, "spec": {"failurePolicy": "Maybe", "reinvocationPolicy": "Sometimes", "mutations": [{"patchType": "Odd"}]}}],
    ["/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicybindings", {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicyBinding", "metadata": {"name": "b"}, "spec": {"policyName": ""}}],
    ["/apis/certificates.k8s.io/v1/namespaces/default/podcertificaterequests", {"apiVersion": "certificates.k8s.io/v1", "kind": "PodCertificateRequest", "metadata": {"name": "p"}, "spec": {"signerName": "bad", "podName": "", "podUID": "", "serviceAccountName": "", "serviceAccountUID": "", "nodeName": "", "nodeUID": "", "pkixPublicKey": "", "proofOfPossession": ""}}],
    ["/apis/scheduling.k8s.io/v1beta1/namespaces/default/workloads", {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "Workload", "metadata": {"name": "w"}, "spec": {}}],
    ["/apis/scheduling.k8s.io/v1beta1/namespaces/default/podgroups", {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": {"name": "g"}, "spec": {}}],
    ["/apis/authorization.k8s.io/v1/subjectaccessreviews", {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "metadata": {}, "spec": {}}],
    ["/apis/authorization.k8s.io/v1/namespaces/default/localsubjectaccessreviews", {"apiVersion": "authorization.k8s.io/v1", "kind": "LocalSubjectAccessReview", "metadata": {}, "spec": {"user": "u", "resourceAttributes": {"namespace": "other"}}}],
    ["/apis/apiextensions.k8s.io/v1/customresourcedefinitions", {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "x"}, "spec": {"group": "example", "scope": "Global", "names": {"plural": "Xs", "kind": "x"}, "versions": [{"name": "V1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object", "id": "x"}}}]}}]
]""")


async def main(only: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        async with served(Path(tmp)) as (_, api):
            for path, body in CASES:
                if only and not any(o in path for o in only):
                    continue
                request = api.param_serialize("POST", path, body=body, header_params={
                    "Content-Type": "application/json", "Accept": "application/json"})
                response = await asyncio.to_thread(api.call_api, *request[:4])
                await asyncio.to_thread(response.read)
                status = json.loads(response.data)
                print(f"== {body['kind']} {body['metadata'].get('name', '')[:40]} {response.status}")
                if response.status >= 400:
                    for cause in (status.get("details") or {}).get("causes") or [{"message": status.get("message")}]:
                        print("   ", cause.get("field"), "|", cause.get("message"))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
