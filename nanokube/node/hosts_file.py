"""The kubelet-managed /etc/hosts of a pod (kubelet_pods.go: makeHostsMount, managedHostsFileContent):
one file per pod, bound over /etc/hosts in each of its containers, that names the pod's own IP
by its hostname. Without it, a lookup of the pod's hostname (Python's socket.getfqdn, as
http.server's bind makes) would go to the cluster's DNS server, which has no name for it (a
pod's hostname is a name only under a headless Service, as `hostname.subdomain`). A hostNetwork pod's file is a copy of its node's
(nodeHostsFileContent: its own header, then spec.hostAliases); on the process runtime it keeps the
node's own. A container that mounts something at /etc/hosts itself gets no managed file."""

from __future__ import annotations

PATH = "/etc/hosts"
HEADER = "# Kubernetes-managed hosts file.\n"
HOST_NETWORK_HEADER = "# Kubernetes-managed hosts file (host network).\n"
LOCALHOST = ("127.0.0.1\tlocalhost\n"
             "::1\tlocalhost ip6-localhost ip6-loopback\n"
             "fe00::0\tip6-localnet\n"
             "fe00::0\tip6-mcastprefix\n"
             "fe00::1\tip6-allnodes\n"
             "fe00::2\tip6-allrouters\n")


def domain(pod: dict, cluster_domain: str) -> str:
    """GeneratePodHostNameAndDomain's domain: `<subdomain>.<namespace>.svc.<cluster domain>` for a
    pod with spec.subdomain (a StatefulSet's serviceName) on a kubelet with a cluster domain (every
    node's, of either runtime, is `cluster.local` as under kubeadm), else none."""
    sub = (pod.get("spec") or {}).get("subdomain")
    if not (sub and cluster_domain):
        return ""
    return f"{sub}.{(pod.get('metadata') or {}).get('namespace') or 'default'}.svc.{cluster_domain}"


def content(hostname: str, ips: list[str], aliases: list[dict] | None = None, domain: str = "") -> str:
    """managedHostsFileContent: localhost, each pod IP by `hostname` (by its FQDN first, where the
    pod has a `domain`: `hostname -f`, a StatefulSet pod's stable name), then spec.hostAliases."""
    names = f"{hostname}.{domain}\t{hostname}" if domain else hostname
    return HEADER + LOCALHOST + "".join(f"{ip}\t{names}\n" for ip in ips) + _aliases(aliases)


def node_content(node_hosts: str, aliases: list[dict] | None = None) -> str:
    """nodeHostsFileContent: a hostNetwork pod's file, its node's /etc/hosts (`node_hosts`) under
    the host-network header, then spec.hostAliases."""
    return HOST_NETWORK_HEADER + node_hosts + _aliases(aliases)


def _aliases(aliases: list[dict] | None) -> str:
    """hostsEntriesFromHostAliases: spec.hostAliases' lines, under their own header."""
    return "\n# Entries added by HostAliases.\n" + "".join(
        f"{a['ip']}\t{chr(9).join(a.get('hostnames') or ())}\n" for a in aliases) if aliases else ""


def simulated(pod: dict, container: dict, hostname: str, ip: str, cluster_domain: str, node: str) -> str | None:
    """A simulated container's /etc/hosts as the kubelet mounts it: the managed file (`content`),
    for a hostNetwork pod the copy of its node's (`node_content`: a simulated node's holds
    localhost and its own name at `ip`, the pod's as the node's); None where the container mounts
    its own at /etc/hosts."""
    if not mounted(container):
        return None
    spec = pod.get("spec") or {}
    if spec.get("hostNetwork"):
        return node_content(LOCALHOST + (f"{ip}\t{node}\n" if ip else ""), spec.get("hostAliases"))
    return content(hostname, [ip] if ip else [], spec.get("hostAliases"), domain(pod, cluster_domain))


def managed(pod: dict, container: dict) -> bool:
    """Whether the process runtime mounts its managed file (`content`) over the container's
    /etc/hosts: not for a hostNetwork pod, whose processes see the node's own, nor for a
    container that mounts one itself (`mounted`)."""
    return not (pod.get("spec") or {}).get("hostNetwork") and mounted(container)


def mounted(container: dict) -> bool:
    """shouldMountHostsFile, per container: the kubelet mounts the pod's file unless the container
    mounts a volume at /etc/hosts."""
    return all(vm.get("mountPath") != PATH for vm in container.get("volumeMounts") or ())
