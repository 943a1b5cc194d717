"""Cluster DNS: what a pod's name lookups answer, and the resolv.conf that sends them there.

One implementation for both runtimes: a simulated container's nslookup, getent, wget and curl
(simulated_net) ask `answer` directly; a process-runtime pod's resolver asks the real server
(clusterdns) at kube-dns's ClusterIP, which answers with it. The answers are CoreDNS's
kubernetes plugin's under kubeadm's Corefile (`kubernetes cluster.local in-addr.arpa ip6.arpa`
with `pods insecure` and `ttl 30`), after the Kubernetes DNS-Based Service Discovery spec:

- `<svc>.<ns>.svc.<zone>`: A/AAAA, the Service's ClusterIPs; a headless one's ready endpoints'
  addresses (every endpoint's with publishNotReadyAddresses), NXDOMAIN where it has none; an
  ExternalName one's CNAME, followed where it names a name of the zone.
- `<endpoint>.<svc>.<ns>.svc.<zone>`: a ready endpoint's addresses, by its hostname, else by its
  dashed address (a ClusterIP Service's endpoints too).
- `_<port>._<proto>.<svc>.<ns>.svc.<zone>`: SRV for a named port: to the Service's name (ClusterIP),
  to each ready endpoint's name at the endpoint's port (headless), their addresses as additional
  records; priority 0, the weights 100 split evenly, as CoreDNS gives them.
- `<a-b-c-d>.<ns>.pod.<zone>`: A a.b.c.d, not checked against the pods (`pods insecure`).
- `dns-version.<zone>`: TXT, the schema version.
- `<d.c.b.a>.in-addr.arpa`: PTR, a ClusterIP's Service name, else the names of the ready endpoints
  with that address; NXDOMAIN for one no Service nor endpoint has.

A name that exists without a record of the type asked is NOERROR with no answer (NODATA), never
NXDOMAIN: resolvers ask A and AAAA together, and musl's gives the name up at either's NXDOMAIN.
A name outside the zone, and a reverse name the cluster has none for (the kubernetes plugin's
`fallthrough in-addr.arpa ip6.arpa`), kubeadm's Corefile forwards to the node's resolvers: the
process runtime's server does (dns_forward). `answer` has no resolver to ask, so it answers a name
outside the zone SERVFAIL, what the forward plugin answers when no upstream does (on it, a
resolver goes on to its next search domain), and an unknown reverse name NXDOMAIN: a simulated
pod's lookups, which have no way out of the cluster.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

ZONE = "cluster.local"
#: kube-dns's ClusterIP, as kubeadm gives it: the tenth address of the Service range (nanokube's is
#: 10.96.0.0/12, the `kubernetes` Service's 10.96.0.1 its first)
DNS_SERVER = "10.96.0.10"
#: the version of the Kubernetes DNS schema answered (CoreDNS's, at dns-version.<zone>)
SCHEMA_VERSION = "1.1.0"
#: the records' time to live: kubeadm's Corefile sets the kubernetes plugin's `ttl 30`
TTL = 30
#: where the process runtime's pods reach the node's resolvers (dnsPolicy Default, and a
#: hostNetwork pod's ClusterFirst): the host's own addresses are out of every pod's and node's
#: namespace, so the cluster DNS server listens at this one too and forwards every name asked
#: there to them, the cluster's names too (NodeLocal DNSCache's link-local address)
NODE_RESOLVER = "169.254.20.10"
NDOTS = 5
#: the most ndots a resolver takes (RES_MAXNDOTS)
RES_MAXNDOTS = 15
#: the most nameservers and search domains the kubelet writes (validation.MaxDNSNameservers,
#: MaxDNSSearchPaths): it leaves the rest out
MAX_NAMESERVERS, MAX_SEARCHES = 3, 32
#: the label an EndpointSlice names its Service with
SERVICE_NAME = "kubernetes.io/service-name"


class Cluster(Protocol):
    """What the names are answered from: the cluster's Services, EndpointSlices and Pods as they
    are now (simulated_cluster.WatchedCluster: watch-fed caches; `Listed`: lists)."""

    def service(self, namespace: str, name: str) -> dict | None: ...

    def service_at(self, ip: str) -> dict | None: ...

    def slices(self, namespace: str, service: str) -> list[dict]: ...

    def slices_with(self, ip: str) -> list[dict]: ...

    def pod_at(self, ip: str) -> dict | None: ...


@dataclass
class Listed:
    """A cluster given as lists of its Services, EndpointSlices and Pods."""

    services: list[dict]
    endpoint_slices: list[dict]
    pods: list[dict]

    def service(self, namespace: str, name: str) -> dict | None:
        return next((s for s in self.services if s["metadata"]["namespace"] == namespace
                     and s["metadata"]["name"] == name), None)

    def service_at(self, ip: str) -> dict | None:
        return next((s for s in self.services if ip in cluster_ips(s)), None)

    def slices(self, namespace: str, service: str) -> list[dict]:
        return [es for es in self.endpoint_slices if es["metadata"]["namespace"] == namespace
                and (es["metadata"].get("labels") or {}).get(SERVICE_NAME) == service]

    def slices_with(self, ip: str) -> list[dict]:
        return [es for es in self.endpoint_slices if ip in slice_addresses(es)]

    def pod_at(self, ip: str) -> dict | None:
        return next((p for p in self.pods if ip in pod_ips(p)), None)


def cluster_ips(svc: dict) -> tuple[str, ...]:
    """The Service's ClusterIPs (none for a headless one)."""
    spec = svc.get("spec") or {}
    return tuple(ip for ip in spec.get("clusterIPs") or [spec.get("clusterIP")] if ip and ip != "None")


def slice_addresses(es: dict) -> tuple[str, ...]:
    return tuple(dict.fromkeys(ip for ep in es.get("endpoints") or () for ip in ep.get("addresses") or ()))


def pod_ips(pod: dict) -> tuple[str, ...]:
    """The pod's IPs (its node's, for a pod on the node's network)."""
    status = pod.get("status") or {}
    return tuple(a["ip"] for a in status.get("podIPs") or () if a.get("ip")) or \
        ((status["podIP"],) if status.get("podIP") else ())


# --- answers -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Record:
    """One resource record: `data` is an address (A, AAAA), a name (CNAME, PTR, SRV's target) or
    a text (TXT); an SRV's port and weight (its priority is 0)."""

    name: str
    type: str
    data: str
    port: int = 0
    weight: int = 0


@dataclass
class Answer:
    """The server's answer to one question: its rcode, records, and additional records (an SRV
    target's addresses). `authoritative`: a name of the zones served (a negative answer carries
    the zone's SOA)."""

    rcode: str
    records: list[Record] = field(default_factory=list)
    additional: list[Record] = field(default_factory=list)
    authoritative: bool = True


def answer(cluster: Cluster, name: str, qtype: str) -> Answer:
    """The answer to a question for `name` of type `qtype` (A, AAAA, SRV, PTR, CNAME, TXT, ANY)."""
    name = name.lower().rstrip(".")
    if name.endswith(".in-addr.arpa"):
        names = reverse(cluster, reversed_address(name))
        if not names:
            return Answer("NXDOMAIN")
        return Answer("NOERROR", [Record(name, "PTR", n) for n in names if qtype in ("PTR", "ANY")])
    if not in_zone(name):
        return Answer("SERVFAIL", authoritative=False)
    found = _records(cluster, name)
    if found is None:
        return Answer("NXDOMAIN")
    records = [r for r in found if qtype in (r.type, "ANY") or r.type == "CNAME"]  # a CNAME answers any type
    if found and found[0].type == "CNAME" and qtype != "CNAME" and in_zone(found[0].data):
        # followed one step: the name it gives is of the zone, and an ExternalName names no Service's name
        records += [r for r in _records(cluster, found[0].data) or () if qtype in (r.type, "ANY")]
    additional = [a for r in records if r.type == "SRV" for a in _records(cluster, r.data) or ()
                  if a.type in ("A", "AAAA")]
    return Answer("NOERROR", records, additional)


def in_zone(name: str) -> bool:
    return name == ZONE or name.endswith("." + ZONE)


def reversed_address(name: str) -> str:
    """The IPv4 address an in-addr.arpa name is for ("" if none)."""
    octets = name.removesuffix(".in-addr.arpa").split(".")
    try:
        return str(ipaddress.IPv4Address(".".join(reversed(octets))))
    except ValueError:
        return ""


def reverse(cluster: Cluster, ip: str) -> list[str]:
    """The names a PTR query for `ip` answers: a Service's for its ClusterIP, else each ready
    endpoint's with that address (its hostname, else its dashed address, under its Service)."""
    if not ip:
        return []
    svc = cluster.service_at(ip)
    if svc is not None:
        return [f"{svc['metadata']['name']}.{svc['metadata']['namespace']}.svc.{ZONE}"]
    names = []
    for es in cluster.slices_with(ip):
        meta = es["metadata"]
        service = (meta.get("labels") or {}).get(SERVICE_NAME)
        if service and cluster.service(meta["namespace"], service) is not None:
            names += [f"{endpoint_name(ip, host)}.{service}.{meta['namespace']}.svc.{ZONE}"
                      for address, host in ready([es]) if address == ip]
    return list(dict.fromkeys(names))


def endpoint_name(ip: str, hostname: str) -> str:
    """An endpoint's name under its Service: its hostname, else its address dashed (CoreDNS's
    endpointHostname)."""
    return hostname or ip.replace(".", "-").replace(":", "-")


def ready(slices: list[dict], all_: bool = False) -> list[tuple[str, str]]:
    """The addresses (with their hostnames) of the slices' endpoints that are ready (`all_`: all)."""
    out = []
    for es in slices:
        for ep in es.get("endpoints") or ():
            if all_ or (ep.get("conditions") or {}).get("ready") is not False:
                out += [(ip, ep.get("hostname") or "") for ip in ep.get("addresses") or ()]
    return out


def _address(name: str, ip: str) -> Record:
    return Record(name, "AAAA" if ":" in ip else "A", ip)


def _records(cluster: Cluster, name: str) -> list[Record] | None:
    """Every record `name` has; None where there is no such name (NXDOMAIN)."""
    if name == ZONE:
        return []
    if name == f"dns-version.{ZONE}":
        return [Record(name, "TXT", SCHEMA_VERSION)]
    labels = name[:-len(ZONE) - 1].split(".")
    if len(labels) == 3 and labels[2] == "pod":
        try:
            return [Record(name, "A", str(ipaddress.IPv4Address(labels[0].replace("-", "."))))]
        except ValueError:
            return None
    if len(labels) < 3 or len(labels) > 5 or labels[-1] != "svc":
        return None
    svc = cluster.service(labels[-2], labels[-3])
    if svc is None:
        return None
    spec = svc.get("spec") or {}
    base = ".".join(labels[-3:]) + f".{ZONE}"
    if spec.get("type") == "ExternalName":
        return [Record(name, "CNAME", spec.get("externalName", "").lower().rstrip("."))] if len(labels) == 3 else None
    slices = cluster.slices(labels[-2], labels[-3])
    endpoints = ready(slices, all_=bool(spec.get("publishNotReadyAddresses")))
    if len(labels) == 3:
        ips = cluster_ips(svc) or tuple(ip for ip, _ in endpoints)
        return [_address(name, ip) for ip in ips] or None
    if len(labels) == 4:
        return [_address(name, ip) for ip, host in endpoints if endpoint_name(ip, host) == labels[0]] or None
    return _services(name, labels, spec, base, slices, endpoints)


def _services(name: str, labels: list[str], spec: dict, base: str, slices: list[dict],
              endpoints: list[tuple[str, str]]) -> list[Record] | None:
    """The SRV records of `_<port>._<proto>.<service>`: None where the Service has no such named port."""
    port_name, proto = labels[0], labels[1]
    if not (port_name.startswith("_") and proto.startswith("_")):
        return None
    port = next((p for p in spec.get("ports") or () if p.get("name") and p["name"].lower() == port_name[1:]
                 and p.get("protocol", "TCP").lower() == proto[1:]), None)
    if port is None:
        return None
    if spec.get("clusterIP") not in (None, "", "None"):
        return [Record(name, "SRV", base, port["port"], 100)]
    targets = [(f"{endpoint_name(ip, host)}.{base}", number) for ip, host in endpoints
               for number in _slice_ports(slices, ip, port)]
    return [Record(name, "SRV", target, number, 100 // len(targets)) for target, number in targets] or None


def _slice_ports(slices: list[dict], ip: str, port: dict) -> list[int]:
    """The port numbers the slices holding `ip` give the Service port `port` (by its name and protocol)."""
    return list(dict.fromkeys(p["port"] for es in slices if ip in slice_addresses(es) for p in es.get("ports") or ()
                              if (p.get("name") or "") == port["name"]
                              and p.get("protocol", "TCP") == port.get("protocol", "TCP") and p.get("port")))


# --- the kubelet's resolv.conf ----------------------------------------------------------------
RESOLV_CONF = "/etc/resolv.conf"


def mounted(container: dict) -> bool:
    """Whether the runtime binds the pod's resolv.conf over the container's: unless the container
    mounts a volume there itself (containerd's, as the kubelet's /etc/hosts)."""
    return all(vm.get("mountPath") != RESOLV_CONF for vm in container.get("volumeMounts") or ())


def parse_resolv_conf(text: str) -> tuple[list[str], list[str], list[str]]:
    """A resolv.conf's nameservers, search domains and options (the kubelet's parseResolvConf:
    the last `search` or `domain` line gives the search path)."""
    nameservers: list[str] = []
    search: list[str] = []
    options: list[str] = []
    for line in text.splitlines():
        words = re.split(r"[#;]", line, maxsplit=1)[0].split()
        if not words:
            continue
        if words[0] == "nameserver" and len(words) > 1:
            nameservers.append(words[1])
        elif words[0] in ("search", "domain"):
            search = [w for w in words[1:] if w != "."]
        elif words[0] == "options":
            options += words[1:]
    return nameservers, search, options


def with_nameservers(text: str, nameservers: Sequence[str]) -> str:
    """A resolv.conf with `nameservers` for its own (its search path and options kept)."""
    kept = [line for line in text.splitlines() if line.split()[:1] != ["nameserver"]]
    return "".join(f"{line}\n" for line in [*kept, *(f"nameserver {s}" for s in nameservers)])


def resolver(pod: dict, cluster_dns: Sequence[str] = (DNS_SERVER,), host: str = "") -> tuple[
        list[str], list[str], list[str]]:
    """The pod's nameservers, search path and options, as the kubelet works them out (GetPodDNS)
    of its dnsPolicy and dnsConfig: ClusterFirst: `cluster_dns` (the kubelet's clusterDNS; without
    one, as Default), the cluster's search path before the node's, ndots:5; Default (a hostNetwork
    pod's ClusterFirst too): the node's resolv.conf (`host`; a simulated node has none); None:
    nothing. dnsConfig's are added after these, an option of the same name replacing the
    kubelet's; past MAX_NAMESERVERS and MAX_SEARCHES the rest are left out."""
    spec = pod.get("spec") or {}
    ns = (pod.get("metadata") or {}).get("namespace") or "default"
    policy = spec.get("dnsPolicy") or "ClusterFirst"
    cluster = bool(cluster_dns) and (policy == "ClusterFirstWithHostNet" or
                                     (policy == "ClusterFirst" and not spec.get("hostNetwork")))
    host_servers, host_search, host_options = parse_resolv_conf(host) if policy != "None" else ([], [], [])
    if cluster:
        nameservers = list(cluster_dns)
        search = list(dict.fromkeys([f"{ns}.svc.{ZONE}", f"svc.{ZONE}", ZONE, *host_search]))
        options = {"ndots": str(NDOTS)}
    else:
        nameservers, search = host_servers, host_search
        options = {name: value for name, _, value in (o.partition(":") for o in host_options)}
    config = spec.get("dnsConfig") or {}
    nameservers += [s for s in config.get("nameservers") or () if s not in nameservers]
    search += [s for s in config.get("searches") or () if s not in search]
    for o in config.get("options") or ():  # the kubelet's mergeDNSOptions: one of the same name replaces it
        if o.get("name"):
            options[o["name"]] = o.get("value") or ""
    return (nameservers[:MAX_NAMESERVERS], search[:MAX_SEARCHES],
            [name + (f":{value}" if value else "") for name, value in options.items()])


def resolv_conf(pod: dict, cluster_dns: Sequence[str] = (DNS_SERVER,), host: str = "") -> str:
    """The pod's /etc/resolv.conf as the kubelet has the runtime write it (`resolver`)."""
    nameservers, search, options = resolver(pod, cluster_dns, host)
    return ((f"search {' '.join(search)}\n" if search else "")
            + "".join(f"nameserver {s}\n" for s in nameservers)
            + (f"options {' '.join(options)}\n" if options else ""))


def ndots(options: list[str]) -> int:
    """The resolver's ndots from resolv.conf's options (musl's and glibc's reading: the last one's
    leading digits, at most 15; 1 without one)."""
    found = 1
    for option in options:
        name, _, value = option.partition(":")
        if name == "ndots" and (digits := re.match(r"\d+", value)):
            found = min(int(digits.group()), RES_MAXNDOTS)
    return found
