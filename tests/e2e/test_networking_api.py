"""networking.k8s.io/v1 through kubectl and the typed client: Ingress,
IngressClass, NetworkPolicy, and the ClusterIP allocator's ServiceCIDR and
IPAddress objects."""

from __future__ import annotations

import json
import shutil
import signal
import tempfile
import time
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from .conftest import fresh_store, running_cluster, start_cluster, wait_for


@pytest.fixture(scope="module")
def cluster():
    """This module's cluster releases a deleted ServiceCIDR after 1 s instead of 10 s, and
    advertises a documentation address (not the host's) for the kubernetes Service."""
    with running_cluster("networking", ("--advertise-address", "192.0.2.10"),
                         env={"NANOKUBE_SERVICECIDR_DELETION_GRACE": "1"}) as c:
        yield c


def test_default_service_cidr_and_ip_addresses(cluster):
    net = client.NetworkingV1Api(cluster.client())
    cidr = net.read_service_cidr("kubernetes")
    assert cidr.spec.cidrs == ["10.96.0.0/12"]
    assert [(c.type, c.status) for c in cidr.status.conditions] == [("Ready", "True")]
    wait_for(lambda: net.read_service_cidr("kubernetes").metadata.finalizers == ["networking.k8s.io/service-cidr-finalizer"],
             60, "the service-cidr-controller's finalizer")
    core = client.CoreV1Api(cluster.client())
    svc = core.create_namespaced_service("default", {"metadata": {"name": "ipa"},
                                                     "spec": {"ports": [{"port": 80}], "selector": {"app": "x"}}})
    ip = svc.spec.cluster_ip
    addr = wait_for(lambda: _read_ip(net, ip), 60, f"IPAddress {ip}")
    # the core group is "", which parentRef.group's omitempty leaves out, as kube-apiserver serves it
    assert addr.spec.parent_ref.to_dict() == {"group": None, "resource": "services", "namespace": "default", "name": "ipa"}
    assert addr.metadata.labels == {"ipaddress.kubernetes.io/ip-family": "IPv4",
                                    "ipaddress.kubernetes.io/managed-by": "ipallocator.k8s.io"}
    out = cluster.kubectl("get", "ipaddress", ip).stdout.split()
    assert out[:4] == ["NAME", "PARENTREF", ip, "services/default/ipa"]
    core.delete_namespaced_service("ipa", "default")
    wait_for(lambda: _read_ip(net, ip) is None, 60, f"IPAddress {ip} removed")
    out = cluster.kubectl("get", "servicecidr").stdout
    assert out.split()[:5] == ["NAME", "CIDRS", "AGE", "kubernetes", "10.96.0.0/12"]


def _read_ip(net, ip):
    try:
        return net.read_ip_address(ip)
    except ApiException as e:
        if e.status == 404:
            return None
        raise


def test_network_policy_round_trip(cluster):
    net = client.NetworkingV1Api(cluster.client())
    body = {"metadata": {"name": "deny"}, "spec": {"podSelector": {"matchLabels": {"app": "db"}},
                                                  "ingress": [{"from": [{"namespaceSelector": {}}],
                                                               "ports": [{"port": 5432}]}]}}
    p = net.create_namespaced_network_policy("default", body)
    assert p.spec.policy_types == ["Ingress"] and p.spec.ingress[0].ports[0].protocol == "TCP"
    assert cluster.kubectl("get", "netpol", "deny").stdout.split()[3:5] == ["deny", "app=db"]
    bad = {"metadata": {"name": "bad"}, "spec": {"podSelector": {}, "ingress": [{"from": [{}]}]}}
    with pytest.raises(ApiException) as e:
        net.create_namespaced_network_policy("default", bad)
    status = json.loads(e.value.body)
    assert e.value.status == 422
    assert status["message"] == 'NetworkPolicy.networking.k8s.io "bad" is invalid: spec.ingress[0].from[0]: Required value: must specify a peer'
    assert "NetworkPolicySpec" in cluster.kubectl("explain", "networkpolicy.spec").stdout
    net.delete_namespaced_network_policy("deny", "default")


def test_ingress_and_class_through_kubectl(cluster):
    manifest = """
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: nginx}
spec: {controller: k8s.io/ingress-nginx}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web, namespace: default}
spec:
  ingressClassName: nginx
  tls: [{hosts: [a.example.com], secretName: tls}]
  rules:
  - host: a.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
"""
    cluster.kubectl("apply", "-f", "-", input=manifest)
    assert cluster.kubectl("get", "ingressclass", "nginx", "--no-headers").stdout.split()[:3] == [
        "nginx", "k8s.io/ingress-nginx", "<none>"]
    assert cluster.kubectl("get", "ing", "web", "--no-headers").stdout.split()[:5] == [
        "web", "nginx", "a.example.com", "80,", "443"]
    net = client.NetworkingV1Api(cluster.client())
    ing = net.read_namespaced_ingress("web", "default")
    ing.status = {"loadBalancer": {"ingress": [{"ip": "172.19.0.9"}]}}
    net.replace_namespaced_ingress_status("web", "default", ing)
    assert cluster.kubectl("get", "ing", "web", "--no-headers").stdout.split()[3] == "172.19.0.9"
    described = cluster.kubectl("describe", "ingress", "web").stdout
    assert "a.example.com" in described and "web:80" in described
    r = cluster.kubectl("create", "ingress", "nohost", "--rule=/p=web:80", check=False)
    assert r.returncode == 0, r.stderr
    cluster.kubectl("delete", "ingress", "web", "nohost")
    cluster.kubectl("delete", "ingressclass", "nginx")


def test_extra_service_cidr_extends_the_cluster_ip_range(cluster):
    net = client.NetworkingV1Api(cluster.client())
    core = client.CoreV1Api(cluster.client())
    svc = {"metadata": {"name": "extra-ip"}, "spec": {"clusterIP": "10.200.0.10", "ports": [{"port": 80}]}}
    with pytest.raises(ApiException) as e:
        core.create_namespaced_service("default", svc)
    assert e.value.status == 422 and "is not in the valid range" in json.loads(e.value.body)["message"]
    net.create_service_cidr({"metadata": {"name": "extra"}, "spec": {"cidrs": ["10.200.0.0/24"]}})
    ready = wait_for(lambda: (c := net.read_service_cidr("extra")).status and c.status.conditions and c, 60, "extra Ready")
    assert [(c.type, c.status, c.message) for c in ready.status.conditions] == [
        ("Ready", "True", "Kubernetes Service CIDR is ready")]
    got = wait_for(lambda: _create(core, svc), 60, "a ClusterIP from the new ServiceCIDR")
    assert got.spec.cluster_ip == "10.200.0.10"
    assert wait_for(lambda: _read_ip(net, "10.200.0.10"), 60, "its IPAddress").spec.parent_ref.name == "extra-ip"

    net.delete_service_cidr("extra")
    held = wait_for(lambda: (c := net.read_service_cidr("extra")).status.conditions[0].status == "False" and c, 60,
                    "extra Terminating")
    assert (held.status.conditions[0].reason, held.status.conditions[0].message) == (
        "Terminating", "There are still IPAddresses referencing the ServiceCIDR, please remove them or create a new ServiceCIDR")
    core.delete_namespaced_service("extra-ip", "default")
    wait_for(lambda: "extra" not in {c.metadata.name for c in net.list_service_cidr().items}, 30,
             "extra removed after the grace period")


def _create(core, svc):
    try:
        return core.create_namespaced_service("default", svc)
    except ApiException as e:
        if e.status == 422:
            return None
        raise


def test_an_ip_address_object_reserves_its_address(cluster):
    net = client.NetworkingV1Api(cluster.client())
    core = client.CoreV1Api(cluster.client())
    net.create_ip_address({"metadata": {"name": "10.96.0.77"}, "spec": {"parentRef": {
        "group": "gateway.networking.k8s.io", "resource": "gateways", "namespace": "default", "name": "gw"}}})
    svc = {"metadata": {"name": "wants-77"}, "spec": {"clusterIP": "10.96.0.77", "ports": [{"port": 80}]}}

    def refused():
        try:
            core.create_namespaced_service("default", svc)
        except ApiException as e:
            return e.status == 422 and json.loads(e.body)["message"]
        core.delete_namespaced_service("wants-77", "default")
        return None
    message = wait_for(refused, 60, "the reserved address refused")
    assert message.endswith("failed to allocate IP 10.96.0.77: provided IP is already allocated")
    assert net.read_ip_address("10.96.0.77").spec.parent_ref.resource == "gateways"  # not the allocator's to remove
    net.delete_ip_address("10.96.0.77")
    assert wait_for(lambda: _create(core, svc), 60, "the address free again").spec.cluster_ip == "10.96.0.77"
    core.delete_namespaced_service("wants-77", "default")


def test_the_kubernetes_service(cluster):
    core = client.CoreV1Api(cluster.client())
    svc = wait_for(lambda: _read_service(core), 60, "the kubernetes Service")
    assert svc.spec.cluster_ip == "10.96.0.1" and svc.metadata.labels == {"component": "apiserver", "provider": "kubernetes"}
    port = svc.spec.ports[0]
    assert (port.name, port.port, port.target_port) == ("https", 443, int(cluster.url.rsplit(":", 1)[1]))
    net = client.NetworkingV1Api(cluster.client())
    addr = wait_for(lambda: _read_ip(net, "10.96.0.1"), 60, "its IPAddress")
    assert addr.spec.parent_ref.name == "kubernetes"
    row = cluster.kubectl("get", "svc", "kubernetes", "--no-headers").stdout.split()
    assert row[:5] == ["kubernetes", "ClusterIP", "10.96.0.1", "<none>", "443/TCP"]


def test_the_kubernetes_service_endpoints(cluster):
    """The API server's endpoint reconciler: Endpoints and EndpointSlice `kubernetes` name the
    advertise address and the server's port, as `kubectl get` and `kubectl describe` show."""
    port = cluster.url.rsplit(":", 1)[1]
    row = wait_for(lambda: cluster.kubectl("get", "endpoints", "kubernetes", "--no-headers", check=False).stdout.split(),
                   20, "the kubernetes Endpoints")
    assert row[:2] == ["kubernetes", f"192.0.2.10:{port}"]
    ep = cluster.kubectl_json("get", "endpoints", "kubernetes")
    assert ep["metadata"]["labels"] == {"endpointslice.kubernetes.io/skip-mirror": "true"}
    [sl] = cluster.kubectl_json("get", "endpointslices", "-l", "kubernetes.io/service-name=kubernetes")["items"]
    assert (sl["metadata"]["name"], sl["addressType"], sl["endpoints"]) == (
        "kubernetes", "IPv4", [{"addresses": ["192.0.2.10"], "conditions": {"ready": True}}])
    assert sl["ports"] == [{"name": "https", "port": int(port), "protocol": "TCP"}]
    described = cluster.kubectl("describe", "svc", "kubernetes").stdout
    assert [line.split() for line in described.splitlines() if line.startswith("Endpoints:")] == [
        ["Endpoints:", f"192.0.2.10:{port}"]]


#: the endpoint reconciler's interval (and with it its leases' TTL, one and a half intervals)
LEASES_ENV = {"NANOKUBE_ENDPOINT_RECONCILER_INTERVAL": "3"}


def test_a_killed_servers_address_goes_when_its_lease_expires():
    """The lease endpoint reconciler: a server killed without removing its address keeps it listed
    until its lease expires, beside the other server's; one stopped cleanly takes it away. The
    servers reconcile every 3 s instead of 10, so a lease lives 4.5 s unrenewed instead of 15.
    Both servers run on one store before the first is killed (on SQLite each as a group of two
    API workers, the mode in which several processes share one database, each with its own data
    dir), so the second sees the lease however long it took to start."""
    dirs = [Path(tempfile.mkdtemp(prefix=f"nanokube-e2e-leases-{i}-")) for i in range(3)]
    with fresh_store() as store:
        shared = ("--api-workers", "2") if store == "sqlite" else ()
        url = f"sqlite://{dirs[0] / 'state.db'}" if store == "sqlite" else store
        try:
            first = start_cluster(dirs[0], url, ("--advertise-address", "192.0.2.21", *shared), env=LEASES_ENV)
            try:
                second = start_cluster(dirs[1], url, ("--advertise-address", "192.0.2.22", *shared), env=LEASES_ENV)
                try:
                    wait_for(lambda: _addresses(second) == ["192.0.2.21", "192.0.2.22"], 40, "both addresses")
                    first.stop(signal.SIGKILL)
                    killed_at = time.monotonic()  # its lease was renewed about 3 s before at most, for 4.5 s
                    wait_for(lambda: _addresses(second) == ["192.0.2.22"], 40, "the killed server's lease to expire")
                    assert time.monotonic() - killed_at > 1  # the lease, not the kill, took it away
                finally:
                    second.stop()
            finally:
                first.stop()
            third = start_cluster(dirs[2], url, ("--advertise-address", "192.0.2.23"), env=LEASES_ENV)
            try:  # the second stopped cleanly: its lease went with it, so the third's first write lists it alone
                listed = wait_for(lambda: (a := _addresses(third)) and "192.0.2.23" in a and a, 20, "the third's address")
                assert listed == ["192.0.2.23"]
            finally:
                third.stop()
        finally:
            for d in dirs:
                shutil.rmtree(d, ignore_errors=True)


def _addresses(cluster) -> list[str]:
    """The kubernetes EndpointSlice's addresses, as kubectl shows them ([] while there is none)."""
    r = cluster.kubectl("get", "endpointslice", "kubernetes", "-o", "json", check=False)
    return [a for e in json.loads(r.stdout).get("endpoints") or [] for a in e["addresses"]] if r.returncode == 0 else []


def _read_service(core):
    try:
        return core.read_namespaced_service("kubernetes", "default")
    except ApiException:
        return None


def test_default_ingress_class_is_set_on_create(cluster):
    net = client.NetworkingV1Api(cluster.client())
    net.create_ingress_class({"metadata": {"name": "house", "annotations": {
        "ingressclass.kubernetes.io/is-default-class": "true"}}, "spec": {"controller": "example.com/house"}})
    backend = {"service": {"name": "web", "port": {"number": 80}}}
    got = net.create_namespaced_ingress("default", {"metadata": {"name": "plain"}, "spec": {"defaultBackend": backend}})
    assert got.spec.ingress_class_name == "house"
    legacy = net.create_namespaced_ingress("default", {"metadata": {"name": "legacy", "annotations": {
        "kubernetes.io/ingress.class": "nginx"}}, "spec": {"defaultBackend": backend}})
    assert legacy.spec.ingress_class_name is None
    for name in ("plain", "legacy"):
        net.delete_namespaced_ingress(name, "default")
    net.delete_ingress_class("house")
