"""The kubelet-managed /etc/hosts of a pod (kubelet_pods.go: makeHostsMount, managedHostsFileContent):
one file per pod, bound over /etc/hosts in each of its containers, that names the pod's own IP
by its hostname. Without it, a lookup of the pod's hostname (Python's socket.getfqdn, as
http.server's bind makes) goes to a DNS server the pod's network namespace cannot reach and
waits out the resolver's timeouts. A hostNetwork pod keeps its node's file (upstream copies it),
and a container that mounts something at /etc/hosts itself gets no managed file."""

from __future__ import annotations

PATH = "/etc/hosts"
HEADER = "# Kubernetes-managed hosts file.\n"
LOCALHOST = ("127.0.0.1\tlocalhost\n"
             "::1\tlocalhost ip6-localhost ip6-loopback\n"
             "fe00::0\tip6-localnet\n"
             "fe00::0\tip6-mcastprefix\n"
             "fe00::1\tip6-allnodes\n"
             "fe00::2\tip6-allrouters\n")


def domain(pod: dict, cluster_domain: str) -> str:
    """GeneratePodHostNameAndDomain's domain: `<subdomain>.<namespace>.svc.<cluster domain>` for a
    pod with spec.subdomain (a StatefulSet's serviceName) on a kubelet with a cluster domain (a
    simulated node's), else none."""
    sub = (pod.get("spec") or {}).get("subdomain")
    if not (sub and cluster_domain):
        return ""
    return f"{sub}.{(pod.get('metadata') or {}).get('namespace') or 'default'}.svc.{cluster_domain}"


def content(hostname: str, ips: list[str], aliases: list[dict] | None = None, domain: str = "") -> str:
    """managedHostsFileContent: localhost, each pod IP by `hostname` (by its FQDN first, where the
    pod has a `domain`: `hostname -f`, a StatefulSet pod's stable name), then spec.hostAliases."""
    names = f"{hostname}.{domain}\t{hostname}" if domain else hostname
    text = HEADER + LOCALHOST + "".join(f"{ip}\t{names}\n" for ip in ips)
    if aliases:
        text += "\n# Entries added by HostAliases.\n" + "".join(
            f"{a['ip']}\t{chr(9).join(a.get('hostnames') or ())}\n" for a in aliases)
    return text


def managed(pod: dict, container: dict) -> bool:
    """shouldMountHostsFile, per container: not for a hostNetwork pod, nor for a container that
    mounts a volume at /etc/hosts."""
    if (pod.get("spec") or {}).get("hostNetwork"):
        return False
    return all(vm.get("mountPath") != PATH for vm in container.get("volumeMounts") or ())
