"""One multi-document manifest mixing networking, flowcontrol, coordination
and apiregistration kinds goes in through `kubernetes.utils.create_from_yaml`,
comes back through the typed APIs, and `kubectl explain`/`describe` know them."""

from __future__ import annotations

import tempfile

import pytest
from kubernetes import client, utils

from .conftest import wait_for

MANIFEST = """
apiVersion: v1
kind: Namespace
metadata: {name: mixed}
---
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: mixed}
spec: {controller: example.com/ingress}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web, namespace: mixed}
spec:
  defaultBackend: {service: {name: web, port: {name: http}}}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: db, namespace: mixed}
spec:
  podSelector: {matchLabels: {app: db}}
  egress: [{to: [{ipBlock: {cidr: 10.0.0.0/8}}]}]
---
apiVersion: networking.k8s.io/v1
kind: ServiceCIDR
metadata: {name: extra}
spec: {cidrs: [10.200.0.0/24]}
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata: {name: batch}
spec: {type: Limited, limited: {limitResponse: {type: Reject}}}
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {name: batch}
spec:
  priorityLevelConfiguration: {name: batch}
  matchingPrecedence: 5000
  distinguisherMethod: {type: ByUser}
  rules:
  - subjects: [{kind: Group, group: {name: batch-users}}]
    resourceRules: [{verbs: [list], apiGroups: [batch], resources: [jobs], namespaces: ["*"]}]
---
apiVersion: coordination.k8s.io/v1beta1
kind: LeaseCandidate
metadata: {name: trainer-0, namespace: mixed}
spec: {leaseName: trainer, binaryVersion: 1.37.0, emulationVersion: 1.37.0, strategy: OldestEmulationVersion}
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1.mixed.example.com}
spec: {group: mixed.example.com, version: v1, groupPriorityMinimum: 500, versionPriority: 10,
       service: {namespace: mixed, name: api}, insecureSkipTLSVerify: true}
"""


@pytest.fixture(scope="module")
def cluster(session_cluster):
    """The session's cluster (conftest.session_cluster): this module deletes what it made, and
    waits for its APIService's group to leave discovery."""
    return session_cluster


@pytest.fixture
def removed_after(cluster):
    """The manifest's objects deleted after the test, passed or not, its APIService's group gone from
    discovery before the next module of the shared cluster reads it."""
    yield cluster
    cluster.kubectl("delete", "-f", "-", "--wait=false", "--ignore-not-found", input=MANIFEST)
    wait_for(lambda: "mixed.example.com/v1" not in cluster.kubectl("api-versions").stdout.split(), 30,
             "mixed.example.com gone from discovery")


def test_mixed_manifest_round_trips(removed_after):
    cluster = removed_after
    api = cluster.client()
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
        f.write(MANIFEST)
        f.flush()
        utils.create_from_yaml(api, f.name)
    net = client.NetworkingV1Api(api)
    assert net.read_ingress_class("mixed").spec.controller == "example.com/ingress"
    assert net.read_namespaced_ingress("web", "mixed").spec.default_backend.service.port.name == "http"
    assert net.read_namespaced_network_policy("db", "mixed").spec.policy_types == ["Ingress", "Egress"]
    assert net.read_service_cidr("extra").spec.cidrs == ["10.200.0.0/24"]
    fc = client.FlowcontrolApiserverV1Api(api)
    assert fc.read_priority_level_configuration("batch").spec.limited.nominal_concurrency_shares == 30
    assert fc.read_flow_schema("batch").spec.matching_precedence == 5000
    lc = client.CoordinationV1beta1Api(api).read_namespaced_lease_candidate("trainer-0", "mixed")
    assert lc.spec.strategy == "OldestEmulationVersion"
    svc = client.ApiregistrationV1Api(api).read_api_service("v1.mixed.example.com")
    assert svc.spec.service.port == 443

    explained = cluster.kubectl("explain", "apiservice.spec.service").stdout
    assert "port" in explained and "namespace" in explained
    assert "matchingPrecedence" in cluster.kubectl("explain", "flowschema.spec").stdout
    described = cluster.kubectl("describe", "networkpolicy", "db", "-n", "mixed").stdout
    assert "PodSelector:     app=db" in described and "10.0.0.0/8" in described
