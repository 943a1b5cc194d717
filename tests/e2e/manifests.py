"""Realistic manifests for the end-to-end tests: one object of every kind
the control plane serves, with real keys, CSRs and CA certificates."""

from __future__ import annotations

import base64
import datetime as dt

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def _ca_pem() -> str:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "e2e-ca")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now).not_valid_after(now + dt.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def _csr(cn: str | None) -> bytes:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)] if cn else [])
    return x509.CertificateSigningRequestBuilder().subject_name(subject).sign(key, hashes.SHA256())


def all_kinds(ns: str) -> list[dict]:
    csr_pem = _csr("e2e-user").public_bytes(serialization.Encoding.PEM)
    stub = _csr(None).public_bytes(serialization.Encoding.DER)
    pod_labels = {"app": "web"}
    template = {"metadata": {"labels": pod_labels},
                "spec": {"containers": [{"name": "web", "image": "nginx:1.27", "ports": [{"containerPort": 80}]}]}}
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": {"e2e": "true"}}},
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"{ns}-node", "labels": {"kubernetes.io/hostname": f"{ns}-node"}},
         "spec": {"podCIDR": "10.244.9.0/24"}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "namespace": ns}, "data": {"mode": "fast"}},
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "token", "namespace": ns}, "type": "Opaque",
         "data": {"token": base64.b64encode(b"s3cret").decode()}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "trainer", "namespace": ns}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-0", "namespace": ns, "labels": pod_labels},
         "spec": {"containers": [{"name": "web", "image": "nginx:1.27", "ports": [{"containerPort": 80}],
                                  "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}],
                  "schedulingGroup": {"podGroupName": "trainers"}}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": ns},
         "spec": {"selector": pod_labels, "ports": [{"name": "http", "port": 80, "targetPort": 80}]}},
        {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "legacy", "namespace": ns},
         "subsets": [{"addresses": [{"ip": "10.244.9.5"}], "ports": [{"port": 80, "protocol": "TCP"}]}]},
        {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "web-0.start", "namespace": ns},
         "involvedObject": {"kind": "Pod", "name": "web-0", "namespace": ns}, "reason": "Started",
         "message": "Started container web", "type": "Normal", "source": {"component": "e2e"}},
        {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "web-0.scheduled", "namespace": ns},
         "eventTime": "2026-11-30T10:00:00.000000Z", "reportingController": "e2e.nanokube.io/test",
         "reportingInstance": "e2e-1", "action": "Binding", "reason": "Scheduled", "type": "Normal",
         "regarding": {"kind": "Pod", "name": "web-0", "namespace": ns}, "note": "Successfully assigned"},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": ns},
         "spec": {"replicas": 2, "selector": {"matchLabels": pod_labels}, "template": template}},
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "cache", "namespace": ns},
         "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "cache"}},
                  "template": {"metadata": {"labels": {"app": "cache"}},
                               "spec": {"containers": [{"name": "redis", "image": "redis:7"}]}}}},
        {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "namespace": ns},
         "spec": {"parallelism": 2, "completions": 2, "template": {"spec": {
             "restartPolicy": "Never", "containers": [{"name": "train", "image": "pytorch/pytorch:2.5"}]}}}},
        {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "leader", "namespace": ns},
         "spec": {"holderIdentity": "e2e", "leaseDurationSeconds": 15}},
        {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
         "metadata": {"name": "web-abc", "namespace": ns, "labels": {"kubernetes.io/service-name": "web"}},
         "addressType": "IPv4", "endpoints": [{"addresses": ["10.244.9.5"], "conditions": {"ready": True}}],
         "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]},
        {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web", "namespace": ns},
         "spec": {"minAvailable": 1, "selector": {"matchLabels": pod_labels}}},
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": f"{ns}-high"},
         "value": 1000, "description": "e2e high priority"},
        {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "Workload", "metadata": {"name": "training", "namespace": ns},
         "spec": {"podGroupTemplates": [{"name": "workers", "schedulingPolicy": {"gang": {"minCount": 4}},
                                         "schedulingConstraints": {"topology": [{"key": "topology.kubernetes.io/rack"}]}}]}},
        {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": {"name": "trainers", "namespace": ns},
         "spec": {"workloadRef": {"workloadName": "training", "templateName": "workers"},
                  "schedulingPolicy": {"gang": {"minCount": 4}}}},
        {"apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "CompositePodGroup", "metadata": {"name": "fleet", "namespace": ns},
         "spec": {"workloadRef": {"workloadName": "training", "templateName": "workers"},
                  "schedulingPolicy": {"gang": {"minGroupCount": 1}}}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": f"{ns}-gpu"},
         "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.nanokube.io"'}}]}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{ns}-node-gpu"},
         "spec": {"driver": "gpu.nanokube.io", "nodeName": f"{ns}-node",
                  "pool": {"name": f"{ns}-node", "generation": 1, "resourceSliceCount": 1},
                  "devices": [{"name": "gpu-0", "attributes": {"model": {"string": "H100"}},
                               "capacity": {"memory": {"value": "80Gi"}}}]}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "gpu", "namespace": ns},
         "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": f"{ns}-gpu"}}]}}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "gpu-tmpl", "namespace": ns},
         "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": f"{ns}-gpu", "count": 2}}]}}}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": f"{ns}-maint"},
         "spec": {"deviceSelector": {"driver": "gpu.nanokube.io"},
                  "taint": {"key": "maintenance", "value": "planned", "effect": "NoSchedule"}}},
        {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "web", "namespace": ns},
         "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                  "minReplicas": 1, "maxReplicas": 5,
                  "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}}}]}},
        {"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest", "metadata": {"name": f"{ns}-user"},
         "spec": {"request": base64.b64encode(csr_pem).decode(), "signerName": "kubernetes.io/kube-apiserver-client",
                  "usages": ["client auth"]}},
        {"apiVersion": "certificates.k8s.io/v1", "kind": "PodCertificateRequest", "metadata": {"name": "web-0-cert", "namespace": ns},
         "spec": {"signerName": "example.com/mesh", "podName": "web-0", "podUID": "6c3c1a8e-6a55-4a0c-9f3a-5c0f7c1d2e01",
                  "serviceAccountName": "default", "serviceAccountUID": "0b6f5d8e-1f2a-4c3b-8d9e-0a1b2c3d4e5f",
                  "nodeName": f"{ns}-node", "nodeUID": "9a8b7c6d-5e4f-4a3b-2c1d-0e9f8a7b6c5d",
                  "stubPKCS10Request": base64.b64encode(stub).decode()}},
        {"apiVersion": "certificates.k8s.io/v1", "kind": "ClusterTrustBundle", "metadata": {"name": f"example.com:mesh:{ns}"},
         "spec": {"signerName": "example.com/mesh", "trustBundle": _ca_pem()}},
    ]


def to_yaml(docs: list[dict]) -> str:
    return yaml.safe_dump_all(docs, sort_keys=False)
