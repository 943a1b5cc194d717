"""The Node authorizer and the admission checks for node identities and
trust-bundle attestation, over plain dict fixtures."""

import asyncio

import pytest

from nanokube.apiserver.auth.authorizer import Attributes, Decision, attributes_for
from nanokube.apiserver.auth.node import ChainAuthorizer, NodeAuthorizer, node_of, referenced
from nanokube.apiserver.auth.restriction import attest as attest_async, node_deletion, node_restriction
from nanokube.machinery.errors import APIError
from nanokube.machinery.user import User

NODE = User("system:node:gpu-0", ("system:nodes", "system:authenticated"))
AGENTS = User("system:node-agents", ("system:nodes", "system:authenticated"))

PODS = [
    {"metadata": {"name": "web", "namespace": "default", "uid": "p1"}, "status": {"phase": "Running"},
     "spec": {"nodeName": "gpu-0", "serviceAccountName": "builder",
              "volumes": [{"name": "v", "secret": {"secretName": "web-tls"}},
                          {"name": "p", "projected": {"sources": [{"configMap": {"name": "web-conf"}}]}}]}},
    {"metadata": {"name": "db", "namespace": "default", "uid": "p2"},
     "spec": {"nodeName": "gpu-1", "volumes": [{"name": "v", "secret": {"secretName": "db-pass"}}]}},
]
OBJECTS = {("", "pods", "default", p["metadata"]["name"]): p for p in PODS} | {
    ("", "serviceaccounts", "default", "builder"): {"metadata": {"name": "builder", "uid": "sa1"}},
    ("", "nodes", "", "gpu-0"): {"metadata": {"name": "gpu-0", "uid": "n0"}},
    ("certificates.k8s.io", "podcertificaterequests", "default", "req-a"): {"spec": {"nodeName": "gpu-1"}},
    ("resource.k8s.io", "resourceslices", "", "gpu-0-gpu"): {"spec": {"nodeName": "gpu-0"}},
    ("resource.k8s.io", "resourceslices", "", "gpu-1-gpu"): {"spec": {"nodeName": "gpu-1"}},
}


def get(group, plural, namespace, name):
    return OBJECTS.get((group, plural, namespace, name))


class AllowAll:
    def authorize(self, user_name, groups, a):
        return Decision(True, "rbac")


class AllowNone:
    """RBAC binding a node nothing (the default system:node binding names nobody)."""

    def authorize(self, user_name, groups, a):
        return Decision(False)


def decide(user, method, path, rbac=AllowNone(), **query):
    chain = ChainAuthorizer(NodeAuthorizer(get, lambda ns: [p for p in PODS if ns in (None, p["metadata"]["namespace"])]),
                            rbac)
    return chain.authorize(user.name, user.groups, attributes_for(method, path, query))


def test_node_identity_needs_the_group():
    assert node_of("system:node:gpu-0", ("system:nodes",)) == "gpu-0"
    assert node_of("system:node:gpu-0", ("system:authenticated",)) == ""
    assert node_of("system:node-agents", ("system:nodes",)) == ""


@pytest.mark.parametrize("method,path,query,allowed", [
    ("GET", "/api/v1/namespaces/default/pods/web", {}, True),
    ("GET", "/api/v1/namespaces/default/pods/db", {}, False),
    ("GET", "/api/v1/pods", {"fieldSelector": "spec.nodeName=gpu-0"}, True),
    ("GET", "/api/v1/pods", {"fieldSelector": "spec.nodeName=gpu-1"}, False),
    ("GET", "/api/v1/pods", {"fieldSelector": "status.phase!=x,spec.nodeName==gpu-0"}, True),
    ("GET", "/api/v1/pods", {"fieldSelector": "spec.nodeName=gpu-0 "}, False),  # values are not trimmed
    ("GET", "/api/v1/pods", {"fieldSelector": "spec.nodeName=gpu-0,bad"}, False),  # nor judged if it does not parse
    ("GET", "/api/v1/pods", {}, False),
    # a status write, a delete or an eviction is NodeRestriction's to confine to the node's own pods
    ("PATCH", "/api/v1/namespaces/default/pods/db/status", {}, True),
    ("DELETE", "/api/v1/namespaces/default/pods/db", {}, True),
    ("POST", "/api/v1/namespaces/default/pods/db/eviction", {}, True),
    ("PATCH", "/api/v1/namespaces/default/pods/web", {}, False),  # nor a pod's spec, even its own's
    ("GET", "/api/v1/namespaces/default/pods/web/log", {}, False),
    ("GET", "/api/v1/namespaces/default/pods", {"fieldSelector": "metadata.name=web"}, True),
    ("GET", "/api/v1/namespaces/default/pods", {"fieldSelector": "metadata.name=db"}, False),
    ("GET", "/api/v1/namespaces/default/secrets/web-tls", {}, True),
    ("GET", "/api/v1/namespaces/default/secrets/db-pass", {}, False),
    ("GET", "/api/v1/namespaces/default/secrets", {}, False),
    # a list or watch of one object by its name is a read of it (the kubelet's watch of a volume's object)
    ("GET", "/api/v1/namespaces/default/secrets", {"fieldSelector": "metadata.name=web-tls"}, True),
    ("GET", "/api/v1/namespaces/default/configmaps", {"fieldSelector": "metadata.name=web-conf", "watch": "true"}, True),
    ("GET", "/api/v1/namespaces/default/secrets", {"fieldSelector": "metadata.name=db-pass"}, False),
    ("GET", "/api/v1/namespaces/default/secrets", {"fieldSelector": "metadata.name=web-tls,type=x"}, True),
    ("GET", "/api/v1/namespaces/default/secrets", {"fieldSelector": "metadata.name!=db-pass"}, False),
    ("GET", "/api/v1/namespaces/default/configmaps/web-conf", {}, True),
    ("POST", "/api/v1/namespaces/default/serviceaccounts/builder/token", {}, True),
    ("POST", "/api/v1/namespaces/default/serviceaccounts/default/token", {}, False),
    ("GET", "/api/v1/namespaces/default/serviceaccounts/builder", {}, True),
    ("GET", "/api/v1/namespaces/default/serviceaccounts/default", {}, False),
    ("GET", "/api/v1/namespaces/default/serviceaccounts", {}, False),
    ("PUT", "/api/v1/nodes/gpu-0/status", {}, True),
    ("PATCH", "/api/v1/nodes/gpu-1/status", {}, True),  # NodeRestriction refuses it
    ("DELETE", "/api/v1/nodes/gpu-0", {}, False),
    ("GET", "/api/v1/nodes/gpu-0", {}, True),
    ("GET", "/api/v1/nodes/gpu-1", {}, False),
    ("GET", "/api/v1/nodes", {"fieldSelector": "metadata.name=gpu-0", "watch": "1"}, True),
    ("PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/gpu-1", {}, False),
    ("PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/gpu-0", {}, True),
    ("POST", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", {}, True),
    ("GET", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", {}, False),
    ("GET", "/apis/coordination.k8s.io/v1/namespaces/default/leases/gpu-0", {}, False),
    ("GET", "/apis/storage.k8s.io/v1/csinodes/gpu-0", {}, True),
    ("GET", "/apis/storage.k8s.io/v1/csinodes/gpu-1", {}, False),
    ("GET", "/apis/storage.k8s.io/v1/csinodes", {}, False),
    ("POST", "/apis/resource.k8s.io/v1/resourceslices", {}, True),
    ("PUT", "/apis/resource.k8s.io/v1/resourceslices/gpu-0-gpu", {}, True),
    ("DELETE", "/apis/resource.k8s.io/v1/resourceslices/gpu-1-gpu", {}, False),
    ("GET", "/apis/resource.k8s.io/v1/resourceslices", {"fieldSelector": "spec.nodeName=gpu-0"}, True),
    ("DELETE", "/apis/resource.k8s.io/v1/resourceslices", {"fieldSelector": "spec.nodeName=gpu-0"}, True),
    ("GET", "/apis/resource.k8s.io/v1/resourceslices", {}, False),
    ("DELETE", "/apis/resource.k8s.io/v1/resourceslices", {"fieldSelector": "spec.nodeName=gpu-1"}, False),
    ("GET", "/apis/certificates.k8s.io/v1/namespaces/default/podcertificaterequests/req-a", {}, False),
    ("PUT", "/apis/certificates.k8s.io/v1/namespaces/default/podcertificaterequests/req-a/status", {}, False),
    ("GET", "/api/v1/nodes", {}, False),
    ("DELETE", "/api/v1/namespaces/default/services/web", {}, False),  # beyond the system:node role's rules
])
def test_node_confined_to_its_pods(method, path, query, allowed):
    assert decide(NODE, method, path, **query).allowed is allowed
    assert not decide(AGENTS, method, path, **query).allowed, "non-node members of system:nodes are left to RBAC"
    assert decide(AGENTS, method, path, AllowAll(), **query).allowed


def test_rbac_grants_a_node_what_the_node_authorizer_does_not():
    """The Node authorizer's refusal is no opinion: what an admin bound the node still applies."""
    refused = decide(NODE, "GET", "/api/v1/namespaces/default/secrets/db-pass")
    assert not refused.allowed and refused.reason == "no relationship found between node 'gpu-0' and this object"
    assert decide(NODE, "GET", "/api/v1/namespaces/default/secrets/db-pass", AllowAll()).reason == "rbac"


def test_refusal_reasons():
    assert decide(NODE, "GET", "/api/v1/namespaces/default/pods/db").reason == \
        "no relationship found between node 'gpu-0' and this object"
    assert decide(NODE, "GET", "/api/v1/pods").reason == "can only list/watch pods with spec.nodeName field selector"
    assert decide(NODE, "PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/gpu-1").reason == \
        "can only access node lease with the same name as the requesting node"


def pcr(**spec):
    return {"metadata": {"generateName": "req-", "namespace": "default"}, "spec": {
        "podName": "web", "podUID": "p1", "serviceAccountName": "builder", "serviceAccountUID": "sa1",
        "nodeName": "gpu-0", "nodeUID": "n0", **spec}}


@pytest.mark.parametrize("spec,message", [
    ({}, None),
    ({"nodeName": "gpu-1"}, 'PodCertificateRequest.Spec.NodeName="gpu-1", which is not the requesting node "gpu-0"'),
    ({"podName": "db", "podUID": "p2"}, 'pod "db" is not bound to node "gpu-0"'),
    ({"podName": "gone"}, 'PodCertificateRequest.Spec.PodName="gone", which does not exist'),
    ({"podUID": "other"}, 'PodCertificateRequest.Spec.PodUID="other", which does not match the UID of pod "web"'),
    ({"serviceAccountUID": "x"}, ('PodCertificateRequest.Spec.ServiceAccountUID="x", which does not match the UID '
                                 'of service account "builder"')),
    ({"nodeUID": "x"}, 'PodCertificateRequest.Spec.NodeUID="x", which does not match the UID of node "gpu-0"'),
])
def test_node_restriction_on_pod_certificate_requests(spec, message):
    body = pcr(**spec)
    if message is None:
        node_restriction(get, "certificates.k8s.io", "podcertificaterequests", "CREATE", body, None, NODE)
        return
    with pytest.raises(APIError) as e:
        node_restriction(get, "certificates.k8s.io", "podcertificaterequests", "CREATE", body, None, NODE)
    assert e.value.code == 403
    assert e.value.message == f"podcertificaterequests.certificates.k8s.io is forbidden: {message}"
    node_restriction(get, "certificates.k8s.io", "podcertificaterequests", "CREATE", body, None, AGENTS)


def test_node_restriction_on_nodes_and_pods():
    with pytest.raises(APIError) as e:
        node_restriction(get, "", "nodes", "UPDATE", {"metadata": {"name": "gpu-1"}}, {}, NODE)
    assert e.value.message == 'nodes "gpu-1" is forbidden: node "gpu-0" is not allowed to modify node "gpu-1"'
    with pytest.raises(APIError, match="can only create mirror pods"):
        node_restriction(get, "", "pods", "CREATE", {"metadata": {"name": "x"}, "spec": {"nodeName": "gpu-0"}}, None, NODE)
    with pytest.raises(APIError, match="can only update pod status for pods with spec.nodeName set to itself"):
        node_restriction(get, "", "pods", "UPDATE", PODS[1], PODS[1], NODE, "status")
    node_restriction(get, "", "pods", "UPDATE", PODS[0], PODS[0], NODE, "status")
    relabelled = {**PODS[0], "metadata": {**PODS[0]["metadata"], "labels": {"role": "admin"}}}
    with pytest.raises(APIError) as e:
        node_restriction(get, "", "pods", "UPDATE", relabelled, PODS[0], NODE, "status")
    assert e.value.message == 'pods "web" is forbidden: node "gpu-0" cannot update labels through pod status'
    with pytest.raises(APIError) as e:
        node_restriction(get, "", "pods", "UPDATE", PODS[0], PODS[0], NODE)
    assert e.value.message == ('pods "web" is forbidden: unexpected operation "UPDATE", node "gpu-0" can only create '
                               "and delete mirror pods")
    with pytest.raises(APIError) as e:
        node_deletion(get, "", "pods", PODS[1], NODE)
    assert e.value.message == 'pods "db" is forbidden: node "gpu-0" can only delete pods with spec.nodeName set to itself'
    node_deletion(get, "", "pods", PODS[0], NODE)


def _mirror(**md):
    return {"metadata": {"name": "static-web", "namespace": "default",
                         "annotations": {"kubernetes.io/config.mirror": "hash"},
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "gpu-0", "uid": "n0",
                                              "controller": True}], **md},
            "spec": {"nodeName": "gpu-0", "containers": [{"name": "c", "image": "busybox"}]}}


@pytest.mark.parametrize("pod,message", [
    (_mirror(), None),
    (_mirror(ownerReferences=[]), 'node "gpu-0" can only create pods with an owner reference set to itself'),
    (_mirror(ownerReferences=[{"apiVersion": "v1", "kind": "Node", "name": "gpu-0", "uid": "n0"}]),
     'node "gpu-0" can only create pods with a controller owner reference set to itself'),
    (_mirror(ownerReferences=[{"apiVersion": "v1", "kind": "Node", "name": "gpu-0", "uid": "stale", "controller": True}]),
     "node gpu-0 UID mismatch: expected stale got n0"),
    ({**_mirror(), "spec": {"nodeName": "gpu-0", "volumes": [{"name": "s", "secret": {"secretName": "db-pass"}}]}},
     'node "gpu-0" can not create pods that reference secrets'),
    ({**_mirror(), "spec": {"nodeName": "gpu-0", "serviceAccountName": "builder"}},
     'node "gpu-0" can not create pods that reference a service account'),
])
def test_node_creates_only_mirror_pods_it_owns_that_reference_nothing(pod, message):
    if message is None:
        node_restriction(get, "", "pods", "CREATE", pod, None, NODE)
        return
    with pytest.raises(APIError) as e:
        node_restriction(get, "", "pods", "CREATE", pod, None, NODE)
    assert (e.value.code, e.value.message) == (403, f'pods "static-web" is forbidden: {message}')


def test_node_may_not_steer_workloads_to_itself():
    """Its own taints, node-restriction.kubernetes.io labels and the kubernetes.io labels kubelets do
    not set stay as they are; the labels kubelets set, and any of other domains, it may change."""
    old = {"metadata": {"name": "gpu-0", "labels": {"kubernetes.io/hostname": "gpu-0"}},
           "spec": {"taints": [{"key": "gpu", "effect": "NoSchedule"}]}}

    def update(labels=None, taints=None):
        node_restriction(get, "", "nodes", "UPDATE", {"metadata": {"name": "gpu-0", "labels": labels or old["metadata"]["labels"]},
                                                      "spec": {"taints": old["spec"]["taints"] if taints is None else taints}},
                         old, NODE, "status")

    update({"kubernetes.io/hostname": "gpu-0", "node.kubernetes.io/instance-type": "h100", "example.com/x": "y"})
    with pytest.raises(APIError) as e:
        update(taints=[])
    assert e.value.message == 'nodes "gpu-0" is forbidden: node "gpu-0" is not allowed to modify taints'
    with pytest.raises(APIError) as e:
        update({"node-restriction.kubernetes.io/trusted": "yes", "node-role.kubernetes.io/control-plane": ""})
    assert e.value.message == ('nodes "gpu-0" is forbidden: is not allowed to modify labels: '  # (hostname's a kubelet's)
                               "node-restriction.kubernetes.io/trusted, node-role.kubernetes.io/control-plane")
    with pytest.raises(APIError) as e:
        node_restriction(get, "", "nodes", "CREATE", {"metadata": {"name": "gpu-0", "labels": {"a.k8s.io/b": "c"}}},
                         None, NODE)
    assert e.value.message == 'nodes "gpu-0" is forbidden: node "gpu-0" is not allowed to set the following labels: a.k8s.io/b'


def test_node_writes_only_its_own_resource_slices_and_lease():
    with pytest.raises(APIError) as e:
        node_restriction(get, "resource.k8s.io", "resourceslices", "CREATE",
                         {"metadata": {"name": "s"}, "spec": {"nodeName": "gpu-1"}}, None, NODE)
    assert e.value.message == ('resourceslices.resource.k8s.io "s" is forbidden: can only create ResourceSlice with '
                               "the same NodeName as the requesting node")
    node_restriction(get, "resource.k8s.io", "resourceslices", "CREATE",
                     {"metadata": {"name": "s"}, "spec": {"nodeName": "gpu-0"}}, None, NODE)
    with pytest.raises(APIError, match="can only delete ResourceSlice with the same NodeName as the requesting node"):
        node_deletion(get, "resource.k8s.io", "resourceslices", {"metadata": {"name": "t"}, "spec": {"nodeName": "gpu-1"}},
                      NODE)
    with pytest.raises(APIError) as e:
        node_restriction(get, "coordination.k8s.io", "leases", "CREATE",
                         {"metadata": {"name": "gpu-0", "namespace": "default"}}, None, NODE)
    assert e.value.message == ('leases.coordination.k8s.io "gpu-0" is forbidden: can only access leases in the '
                               '"kube-node-lease" system namespace')


class Signers:
    """RBAC stand-in: `attest` granted on the listed signer names only."""

    def __init__(self, *names):
        self.names = names

    def authorize(self, user_name, groups, a: Attributes):
        return Decision(a.verb == "attest" and a.resource == "signers" and a.name in self.names)


def bundle(signer="example.com/foo", pem="PEM"):
    return {"metadata": {"name": "example.com:foo:abc"}, "spec": {"signerName": signer, "trustBundle": pem}}


def attest(*args):
    asyncio.run(attest_async(*args))


def test_attest_permission():
    alice = User("alice", ("system:authenticated",))
    attest(Signers("example.com/foo"), bundle(), None, alice)
    attest(Signers("example.com/*"), bundle(), None, alice)
    attest(Signers(), {"metadata": {"name": "plain"}, "spec": {"trustBundle": "PEM"}}, None, alice)
    attest(Signers(), bundle(), bundle(), alice)  # an update changing nothing that matters
    with pytest.raises(APIError) as e:
        attest(Signers("example.com/bar"), bundle(pem="NEW"), bundle(), alice)
    assert e.value.code == 403
    assert e.value.message == ('clustertrustbundles.certificates.k8s.io "example.com:foo:abc" is forbidden: '
                               'user not permitted to attest for signerName "example.com/foo"')


def test_referenced_names_by_kind():
    pod = {"spec": {
        "volumes": [{"name": "a", "secret": {"secretName": "s1"}}, {"name": "b", "persistentVolumeClaim": {"claimName": "c1"}},
                    {"name": "p", "projected": {"sources": [{"secret": {"name": "s2"}}, {"configMap": {"name": "m1"}}]}}],
        "containers": [{"name": "x", "env": [{"name": "E", "valueFrom": {"configMapKeyRef": {"name": "m2", "key": "k"}}}],
                        "envFrom": [{"secretRef": {"name": "s3"}}]}],
        "imagePullSecrets": [{"name": "pull"}], "resourceClaims": [{"name": "gpu", "resourceClaimName": "rc1"}]},
        "status": {"resourceClaimStatuses": [{"name": "t", "resourceClaimName": "rc2"}]}}
    assert referenced(pod, "secrets") == {"s1", "s2", "s3", "pull"}
    assert referenced(pod, "configmaps") == {"m1", "m2"}
    assert referenced(pod, "persistentvolumeclaims") == {"c1"}
    assert referenced(pod, "resourceclaims") == {"rc1", "rc2"}


def test_node_reads_the_volumes_of_its_pods_claims():
    pods = [{"metadata": {"name": "train", "namespace": "ml", "uid": "p3"}, "spec": {"nodeName": "gpu-0", "volumes": [
        {"name": "data", "persistentVolumeClaim": {"claimName": "data"}}, {"name": "tmp", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]}}]
    objects = {("", "persistentvolumeclaims", "ml", "data"): {"spec": {"volumeName": "pv-data"}},
               ("", "persistentvolumeclaims", "ml", "train-tmp"): {"spec": {"volumeName": "pv-tmp"}}}
    node = NodeAuthorizer(lambda g, p, ns, n: objects.get((g, p, ns, n)), lambda ns: pods)
    chain = ChainAuthorizer(node, AllowNone())

    def allowed(path):
        return chain.authorize(NODE.name, NODE.groups, attributes_for("GET", path, {})).allowed

    assert referenced(pods[0], "persistentvolumeclaims") == {"data", "train-tmp"}
    assert allowed("/api/v1/persistentvolumes/pv-data") and allowed("/api/v1/persistentvolumes/pv-tmp")
    assert not allowed("/api/v1/persistentvolumes/pv-other")
    assert allowed("/api/v1/namespaces/ml/persistentvolumeclaims/train-tmp")
