"""Cluster DNS in `nanokube up --runtime process`: a pod's own process resolves names as in a kubeadm
cluster, through the resolv.conf the kubelet binds over its /etc/resolv.conf and kube-dns's
ClusterIP, which kube-proxy's rules carry to the cluster's DNS server (clusterdns) in the cluster
namespace: a Service's name, a headless Service's pod by its hostname, NXDOMAIN for a name no one
has, over UDP (libc's resolver) and TCP; a name outside the cluster as the host's resolvers answer
it, which the server forwards it to, as a pod with dnsPolicy Default asks them every name.

Skipped (loudly) only without root, `ip` or `nft`, as the other process-runtime tests."""

from __future__ import annotations

import json
import socket
import sys

import pytest

from tests.e2e.conftest import PROCESS_RUNTIME, process_cluster, wait_for

CLUSTER_FILE = "examples/clusters/process-3cpu.yaml"

pytestmark = PROCESS_RUNTIME

#: run in the client pod by this Python (which has dnslib): libc's answers for each name, then the
#: server's own rcodes, asked over UDP and TCP at kube-dns's ClusterIP
LOOKUP = """
import socket, sys
from dnslib import RCODE, DNSRecord
for name in sys.argv[1:]:
    try:
        print(name, socket.getaddrinfo(name, 80, socket.AF_INET, socket.SOCK_STREAM)[0][4][0])
    except socket.gaierror as e:
        print(name, "error", e.errno)
for name, tcp in (("nope.default.svc.cluster.local", False), ("web.default.svc.cluster.local", True)):
    reply = DNSRecord.parse(DNSRecord.question(name).send("10.96.0.10", 53, tcp=tcp, timeout=5))
    print(name, "tcp" if tcp else "udp", RCODE[reply.header.rcode], *(str(r.rdata) for r in reply.rr))
"""
#: what libc answers for each name: its sorted addresses, or the error's number
RESOLVE = """
import socket, sys
for name in sys.argv[1:]:
    try:
        print(name, *sorted({a[4][0] for a in socket.getaddrinfo(name, 80, socket.AF_INET, socket.SOCK_STREAM)}))
    except socket.gaierror as e:
        print(name, "error", e.errno)
"""
#: names outside the cluster (a trailing dot: asked as they are, not down the search path), and one in it
OUTSIDE = ("pypi.org.", "nope.invalid.")
KUBERNETES = "kubernetes.default.svc.cluster.local."


@pytest.fixture(scope="module")
def dns_cluster(store_url):
    with process_cluster(store_url, "dns", ("--cluster", CLUSTER_FILE)) as c:
        yield c


def _pod(name: str, app: str, **spec) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default", "labels": {"app": app}},
            "spec": {"terminationGracePeriodSeconds": 1, "containers": [{"name": "main", "image": "python:3.11"}],
                     **spec}}


def _service(name: str, **spec) -> dict:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": "default"},
            "spec": {"selector": {"app": name}, "ports": [{"name": "http", "port": 80}], **spec}}


def test_a_pods_process_resolves_services_and_pods_through_kube_dns(dns_cluster):
    c = dns_cluster
    kube_dns = c.kubectl_json("get", "svc", "kube-dns", "-n", "kube-system")
    assert kube_dns["spec"]["clusterIP"] == "10.96.0.10"
    c.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        _service("web"), _service("db", clusterIP="None"), _pod("db-0", "db", hostname="db-0", subdomain="db"),
        _pod("client", "client", subdomain="db", setHostnameAsFQDN=True)]}))
    c.kubectl("wait", "--for=condition=Ready", "pod/client", "pod/db-0", "--timeout=90s", timeout=100)
    resolv = c.kubectl("exec", "client", "--", "cat", "/etc/resolv.conf").stdout
    assert resolv.startswith("search default.svc.cluster.local svc.cluster.local cluster.local")
    assert "nameserver 10.96.0.10\n" in resolv and resolv.endswith("options ndots:5\n")
    # the kubelet's /etc/hosts names a pod with a subdomain by its FQDN (an Indexed Job's rank, a StatefulSet's pod)
    assert c.kubectl("exec", "db-0", "--", "hostname", "-f").stdout == "db-0.db.default.svc.cluster.local\n"
    # setHostnameAsFQDN: the kernel's hostname and HOSTNAME are the FQDN
    assert c.kubectl("exec", "client", "--", "sh", "-c", 'hostname; echo "$HOSTNAME"').stdout == \
        "client.db.default.svc.cluster.local\n" * 2
    web = c.kubectl_json("get", "svc", "web")["spec"]["clusterIP"]
    db = c.kubectl_json("get", "pod", "db-0")["status"]["podIP"]

    last = []

    def lookup() -> str | None:
        r = c.kubectl("exec", "client", "--", sys.executable, "-c", LOOKUP, "web", "db-0.db",
                      "nope.default.svc.cluster.local.", check=False, timeout=60)
        last[:] = [r.stdout + r.stderr]
        return r.stdout if f"web {web}\n" in r.stdout and f"db-0.db {db}\n" in r.stdout else None
    try:
        out = wait_for(lookup, 60, "the client's process resolving web and db-0.db")
    except AssertionError as e:
        raise AssertionError(f"{e}; it last printed:\n{last[0] if last else ''}") from None
    assert "nope.default.svc.cluster.local. error -2\n" in out  # EAI_NONAME: the name does not exist
    assert "nope.default.svc.cluster.local udp NXDOMAIN\n" in out
    assert f"web.default.svc.cluster.local tcp NOERROR {web}\n" in out


def test_names_outside_the_cluster_are_the_host_resolvers_answers(dns_cluster):
    """Forwarded by the cluster's server (ClusterFirst), or asked at the node's resolvers' address
    (Default), which answers no cluster name of its own: as the host (this test's process) has them."""
    c = dns_cluster
    c.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        _pod("asker", "asker"), _pod("plain", "plain", dnsPolicy="Default")]}))
    c.kubectl("wait", "--for=condition=Ready", "pod/asker", "pod/plain", "--timeout=90s", timeout=100)
    host = _resolve((*OUTSIDE, KUBERNETES))
    asked = c.kubectl("exec", "asker", "--", sys.executable, "-c", RESOLVE, *OUTSIDE, timeout=60).stdout
    assert asked.splitlines() == host[:2]
    resolv = c.kubectl("exec", "plain", "--", "cat", "/etc/resolv.conf").stdout
    assert "nameserver 169.254.20.10\n" in resolv and "cluster.local" not in resolv
    plain = c.kubectl("exec", "plain", "--", sys.executable, "-c", RESOLVE, *OUTSIDE, KUBERNETES, timeout=60).stdout
    assert plain.splitlines() == host and f"{KUBERNETES} 10.96.0.1\n" not in plain


def _resolve(names: tuple[str, ...]) -> list[str]:
    """RESOLVE's lines for `names`, as the host answers them."""
    lines = []
    for name in names:
        try:
            found = sorted({a[4][0] for a in socket.getaddrinfo(name, 80, socket.AF_INET, socket.SOCK_STREAM)})
            lines.append(" ".join((name, *found)))
        except socket.gaierror as e:
            lines.append(f"{name} error {e.errno}")
    return lines
