"""The network a simulated container sees, for the commands people first reach a Service with:
`nslookup`, `getent hosts`, `wget`, `curl`, `ping -c N` and `nc` (simulated_command runs them as
busybox and curl do).

A simulated pod has no network namespace, so its view is worked out from the cluster as the node
agents' watches keep it (simulated_cluster: Services, EndpointSlices and Pods, watched from the
first command that names one of these applets), read when each command runs: a loop's later
pass sees a Service made since (simulated_command's `PASS`). The view is set for the interpreter
in `NETWORK`; without it (a command worked out where no cluster is at hand) the applets are not
interpreted, as before. An image known to lack one (`LACKING`: curl in busybox and alpine) has it
not found.

- Names resolve as in a pod with dnsPolicy ClusterFirst: its /etc/hosts first (the kubelet's,
  hosts_file), then the cluster's DNS server through the search path the kubelet writes into
  resolv.conf, a name with at least ndots dots asked as it is first, answered as the process
  runtime's pods have them answered by the real server (dns: CoreDNS's kubernetes plugin's
  answers), but outside the cluster domain: SERVFAIL, where the real server forwards the name to
  the host's resolvers (dns_forward), as no upstream answers a simulated pod. dnsPolicy Default
  has no cluster names at all.
  The container's /etc/resolv.conf and /etc/hosts say as much (`etc_files`).
- A connection goes as kube-proxy would send it: to a ClusterIP, on one of the Service's ports,
  to a ready endpoint it picks (a serving, terminating one when none is ready), at the port the
  EndpointSlice resolved the targetPort (a named one too) to, among those the endpoints' topology
  hints leave to the pod's node and its zone label (machinery/topology, kube-proxy's filter); with no
  endpoint, or to a port the Service does not have, it is refused (the nftables proxy's reject). A pod IP answers as
  port-forward and pods/proxy do (`listening`, `answer`): where its running containers' programs
  are known, the ports they listen on (`listened`: a server a command starts, a well-known server
  image's own: nginx's 80), else any port but one only containers not running declare, which refuses. Any other address (the internet, a
  node) is unreachable: the simulation gives a pod no real network. The runtime is the whole
  cluster's (`nanokube up --runtime`), so every pod reached is a simulated one; the process
  runtime's pods have real network namespaces, kube-proxy, tools and DNS server, and none of this.
"""

from __future__ import annotations

import functools
import ipaddress
import logging
import posixpath
import random
import re
import shlex
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from ..machinery.topology import ZONE_LABEL, available, hints_of, topology_mode
from . import dns, hosts_file
from .container_env import hostname as pod_hostname
from .simulated_applets import NotFound, Process, Unknown
from .simulated_fs import ContainerFS, FsError

log = logging.getLogger(__name__)

#: the applets here: a command naming one gets the network worked out before it runs
NAMES = ("nslookup", "getent", "wget", "curl", "ping", "nc")
_NAMED = re.compile(r"(?:^|[\s/;|&(`$'\"])(?:" + "|".join(NAMES) + r")(?=[\s;|&)'\"]|$)")
NETWORK: ContextVar[Network | None] = ContextVar("simulated_network", default=None)
#: which of these commands the images people first reach a Service from lack, by repository: busybox's
#: applets have wget, nslookup and ping but no curl, nor getent (a C library's tool); alpine adds
#: musl's getent; the distributions' base images have none of the network tools. An image not
#: named here (curlimages/curl, nicolaka/netshoot, an application's) has them all.
LACKING = {
    "busybox": frozenset({"curl", "getent"}),
    "alpine": frozenset({"curl"}),
    "ubuntu": frozenset({"curl", "wget", "nslookup", "ping", "nc"}),
    "debian": frozenset({"curl", "wget", "nslookup", "ping", "nc"}),
}


def repository(image: str) -> str:
    """An image reference's repository, without its registry, tag or digest (`docker.io/library/
    busybox:1.36` -> `busybox`)."""
    path = image.split("@", 1)[0]
    head, sep, tail = path.rpartition("/")
    path = head + sep + tail.split(":", 1)[0]
    first, _, rest = path.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        path = rest
    return path.removeprefix("library/")


def image_lacks(image: str) -> frozenset[str]:
    """The network commands image `image` does not have (`LACKING`)."""
    return LACKING.get(repository(image), frozenset())


def names_network(text: str) -> bool:
    """Whether a command line (or a script) runs one of the network applets."""
    return bool(_NAMED.search(text))


def answer(namespace: str, name: str, port: int) -> str:
    """What the simulated server behind a pod's port answers an HTTP request with (its body)."""
    return f"nanokube simulated pod {namespace}/{name} port {port}\n"


def response(namespace: str, name: str, port: int, head: bool = False) -> bytes:
    """The whole HTTP response the simulated server gives."""
    body = answer(namespace, name, port).encode()
    return (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: " + str(len(body)).encode()
            + b"\r\nConnection: close\r\n\r\n" + (b"" if head else body))


def declared(spec: dict, running, up: bool = True) -> set[int]:
    """The TCP containerPorts the containers of `spec` that are (`up`) or are not in `running` declare."""
    return {p.get("containerPort") for c in (spec.get("initContainers") or []) + (spec.get("containers") or [])
            if (c["name"] in running) == up for p in c.get("ports") or () if p.get("protocol", "TCP") == "TCP"}


#: a server a command starts, by its program's name (it names its port after -p, else nc as its last
#: number): the port it listens on where it names none
_SERVERS = {"nc": None, "ncat": None, "netcat": None, "httpd": 80}


def _servers(argv: tuple[str, ...]) -> set[int]:
    """The ports the servers a command line starts listen on, its `sh -c` script's commands too:
    `python -m http.server [PORT]` (8000), `nc -l [-p] PORT` (any option with l), busybox's `httpd
    [-p [ADDR:]PORT]` (80)."""
    ports: set[int] = set()
    script = len(argv) >= 3 and posixpath.basename(argv[0]) in ("sh", "ash", "bash", "dash") and \
        re.fullmatch(r"-\w*c\w*", argv[1])
    for segment in re.split(r"[;&|\n()]+", argv[2] if script else shlex.join(argv)):
        try:
            words = shlex.split(segment)
        except ValueError:
            continue
        while words and (words[0] in ("exec", "nohup", "busybox") or re.fullmatch(r"\w+=\S*", words[0])):
            words = words[1:]
        name = posixpath.basename(words[0]) if words else ""
        numbers = [w for w in words[1:] if w.isdigit()]
        if re.fullmatch(r"python[\d.]*", name) and "http.server" in words and "-m" in words:
            ports.add(int(next((w for w in words[words.index("http.server") + 1:] if w.isdigit()), 8000)))
        elif name in _SERVERS and (name == "httpd" or any(re.fullmatch(r"-\w*l\w*", w) for w in words[1:])):
            default = _SERVERS[name]
            given = next((words[i + 1] for i, w in enumerate(words[:-1]) if re.fullmatch(r"-\w*p", w)), None)
            port = (given or "").rpartition(":")[2] or (numbers[-1] if numbers and name != "httpd" else default)
            if port is not None and str(port).isdigit():
                ports.add(int(port))
    return ports


def _interprets(argv: list[str]) -> bool:
    """Whether the simulation interprets command line `argv`: simulated_command, which imports this
    module, puts its own answer here as it is imported."""
    return False


#: see `_interprets`
interprets: Callable[[list[str]], bool] = _interprets


@functools.lru_cache(maxsize=1024)
def _listened(argv: tuple[str, ...], ports: frozenset[int]) -> frozenset[int] | None:
    if servers := _servers(argv):
        return frozenset(servers)
    return ports if argv and interprets(list(argv)) else None


#: the TCP ports the server a well-known image runs by default (no command given) listens on, by repository
SERVING = {"nginx": (80,), "nginxinc/nginx-unprivileged": (8080,), "httpd": (80,), "caddy": (80, 443, 2019),
           "redis": (6379,), "postgres": (5432,), "mysql": (3306, 33060), "mariadb": (3306,), "mongo": (27017,),
           "memcached": (11211,), "registry": (5000,)}


def listened(c: dict) -> frozenset[int] | None:
    """The TCP ports container `c`'s program listens on, where that is known: those of the servers
    its command starts (`_servers`); for a command the simulation interprets (a shell script,
    `sleep`: none of them listens) its declared containerPorts, which stay open as a long-running
    image's would; for a well-known server image's own program (`SERVING`: nginx), its port and
    the declared ones (a server configured to listen there: nginx on a declared 8080); None for
    another program (an application image's own, `python train.py`): any port may."""
    ports = frozenset(p.get("containerPort") for p in c.get("ports") or () if p.get("protocol", "TCP") == "TCP")
    if not c.get("command") and (served := SERVING.get(repository(c.get("image") or ""))):
        return frozenset(served) | ports
    return _listened(tuple((c.get("command") or []) + (c.get("args") or [])) if c.get("command") else (), ports)


def answers(spec: dict, running, port: int) -> bool:
    """Whether a pod whose containers `running` run answers on TCP `port`: one of them listens there
    (`listened`). Where what a container's program listens on is not known, any port answers but
    one that only containers not running now declare (a finished init container's, a sidecar's hook
    to the app's port before the app starts); none does once no container runs."""
    closed = port in declared(spec, running, False) - declared(spec, running)
    for c in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        ports = listened(c) if c["name"] in running else frozenset()
        if port in (ports or ()) or ports is None and not closed:
            return True
    return False


def listening(pod: dict, port: int) -> bool:
    """Whether `pod` (as the API shows it) answers on TCP `port`: `answers`, from its container statuses."""
    status = pod.get("status") or {}
    running = {s["name"] for key in ("containerStatuses", "initContainerStatuses")
               for s in status.get(key) or () if "running" in (s.get("state") or {})}
    return answers(pod.get("spec") or {}, running, port)


class Refused(Exception):
    """The connection is refused (ECONNREFUSED)."""


class Unreachable(Exception):
    """No route to the address from a simulated pod (ENETUNREACH)."""


@dataclass
class Network:
    """What one pod's container can reach: the cluster as it is when asked (`cluster`), and the
    pod's resolver configuration and image."""

    namespace: str
    pod: dict
    node: str
    cluster: dns.Cluster
    hosts: str = ""
    nameservers: list[str] = field(default_factory=list)
    search: list[str] = field(default_factory=list)
    cluster_dns: bool = True
    ndots: int = 1
    #: the container's image: which of these commands it has (`has`)
    image: str = ""
    #: the node's topology.kubernetes.io/zone label, which topology hints are read for
    zone: str = ""
    #: whether a process of the pod itself listens on a port (SimulatedIO.listens), where known
    serves: Callable[[int], bool] | None = None

    def has(self, command: str) -> bool:
        """Whether the container's image has `command` (`image_lacks`)."""
        return command not in image_lacks(self.image)

    # --- DNS -----------------------------------------------------------------------------
    def candidates(self, name: str) -> list[str]:
        """The names the resolver asks for, in order (ndots and the search path)."""
        if name.endswith("."):
            return [name[:-1]]
        searched = [f"{name}.{domain}" for domain in self.search]
        return [name, *searched] if name.count(".") >= self.ndots else [*searched, name]

    def query(self, name: str) -> tuple[str, list[str]]:
        """The DNS server's answer to an A query for `name`: its rcode and addresses."""
        if not self.cluster_dns:
            return "SERVFAIL", []
        got = dns.answer(self.cluster, name, "A")
        return got.rcode, [r.data for r in got.records if r.type == "A"]

    def reverse(self, ip: str) -> list[str]:
        """The names a PTR query for `ip` answers (dns.reverse)."""
        return dns.reverse(self.cluster, ip)

    def _slices(self, svc: dict) -> list[dict]:
        return self.cluster.slices(svc["metadata"]["namespace"], svc["metadata"]["name"])

    def in_hosts(self, name: str) -> list[str]:
        """The addresses /etc/hosts gives `name`."""
        found = []
        for line in self.hosts.splitlines():
            words = line.split("#", 1)[0].split()
            if len(words) > 1 and name.lower() in (w.lower() for w in words[1:]):
                found.append(words[0])
        return found

    def resolve(self, name: str) -> tuple[str, str] | None:
        """getaddrinfo: the first IPv4 address `name` has (and the name that gave it), None if none."""
        try:
            return name, str(ipaddress.IPv4Address(name))
        except ValueError:
            pass
        if ips := [ip for ip in self.in_hosts(name) if ":" not in ip]:
            return name, ips[0]
        for candidate in self.candidates(name):
            rcode, ips = self.query(candidate)
            if rcode == "NOERROR" and ips:
                return candidate, ips[0]
        return None

    # --- connections ---------------------------------------------------------------------
    def connect(self, ip: str, port: int, rng: random.Random) -> tuple[dict, int]:
        """The pod (and its port) a TCP connection to ip:port reaches; Refused or Unreachable."""
        if ip.startswith("127.") or ip == self.pod_ip:
            if self.serves is not None and not self.serves(port):
                raise Refused
            return self._at_pod(self.pod, port)
        svc = self.cluster.service_at(ip)
        if svc is not None:
            return self._through(svc, port, rng)
        pod = self.cluster.pod_at(ip)
        if pod is None or (pod.get("spec") or {}).get("hostNetwork"):  # a node's address
            raise Unreachable
        return self._at_pod(pod, port)

    def echoes(self, ip: str) -> bool | None:
        """Whether an ICMP echo to `ip` is answered: by a pod, and the pod itself; not by a ClusterIP
        (kube-proxy's reject); None where there is no route (outside the cluster)."""
        if ip.startswith("127.") or ip == self.pod_ip:
            return True
        if self.cluster.service_at(ip) is not None:
            return False
        pod = self.cluster.pod_at(ip)
        return True if pod is not None and not (pod.get("spec") or {}).get("hostNetwork") else None

    @property
    def pod_ip(self) -> str:
        return (self.pod.get("status") or {}).get("podIP") or ""

    def _at_pod(self, pod: dict, port: int) -> tuple[dict, int]:
        if not listening(pod, port):
            raise Refused
        return pod, port

    def _through(self, svc: dict, port: int, rng: random.Random) -> tuple[dict, int]:
        """kube-proxy's choice for a connection to the Service's ClusterIP and `port`."""
        sp = next((p for p in (svc.get("spec") or {}).get("ports") or ()
                   if p.get("port") == port and p.get("protocol", "TCP") == "TCP"), None)
        if sp is None:
            raise Refused
        local = (svc.get("spec") or {}).get("internalTrafficPolicy") == "Local"
        ready, terminating = [], []
        for es in self._slices(svc):
            target = next((p.get("port") for p in es.get("ports") or () if (p.get("name") or "") == (sp.get("name") or "")
                           and p.get("protocol", "TCP") == "TCP"), None)
            for ep in es.get("endpoints") or () if target is not None else ():
                if local and ep.get("nodeName") != self.node:
                    continue
                cond = ep.get("conditions") or {}
                chosen = ready if cond.get("ready") is not False else \
                    terminating if cond.get("serving") and cond.get("terminating") else None
                if chosen is not None:
                    chosen += [(ip, target, hints_of(ep)) for ip in ep.get("addresses") or ()]
        if not local and (mode := topology_mode((h for _, _, h in ready), self.node, self.zone)):
            ready = [r for r in ready if available(r[2], mode, self.node, self.zone)]
        pool = ready or terminating
        if not pool:
            raise Refused
        ip, target, _ = pool[rng.randrange(len(pool))]
        pod = self.cluster.pod_at(ip)
        if pod is None:
            raise Refused
        return self._at_pod(pod, target)


def etc_files(pod: dict, container: dict, node: str, ip: str) -> dict[str, str]:
    """/etc/resolv.conf (as the kubelet writes it) and /etc/hosts (the kubelet-managed one,
    hosts_file) of a simulated container."""
    files = {"resolv.conf": dns.resolv_conf(pod)}
    if (hosts := hosts_file.simulated(pod, container, pod_hostname(pod, node), ip, dns.ZONE, node)) is not None:
        files["hosts"] = hosts
    return files


async def view(worker, text: str, image: str = "") -> Network | None:
    """The network for command line (or script) `text` about to be worked out in a container (of
    `image`) of pod `worker` (a PodWorker): the cluster as the node agent's watches keep it
    (simulated_cluster), read at each command. None where it runs none of these applets, or the
    watches have not listed the cluster (then they are not interpreted)."""
    if not names_network(text):
        return None
    cluster = worker.agent.watched_cluster()
    if not await cluster.ready():
        log.warning("the network of pod %s/%s: Services, EndpointSlices and Pods not listed yet",
                    worker.namespace, worker.name)
        return None
    pod = cluster.pods.get(f"{worker.namespace}/{worker.name}")  # its status as the server has it
    if pod is None or pod["metadata"].get("uid") != worker.uid:
        pod = worker.pod
    if worker.ip and not (pod.get("status") or {}).get("podIP"):
        pod = {**pod, "status": {**(pod.get("status") or {}), "podIP": worker.ip}}
    nameservers, search, options = dns.resolver(worker.pod)
    # names resolve through the /etc/hosts the container has (a hostNetwork pod's: the node's copy)
    hosts = hosts_file.simulated(worker.pod, {}, pod_hostname(worker.pod, worker.agent.name), worker.ip, dns.ZONE,
                                 worker.agent.name) or ""
    zone = (worker.agent.node["metadata"].get("labels") or {}).get(ZONE_LABEL, "")
    return Network(worker.namespace, pod, worker.agent.name, cluster, hosts, nameservers, search,
                   dns.DNS_SERVER in nameservers, dns.ndots(options), image, zone,
                   getattr(getattr(worker, "io", None), "listens", None))


def _net(command: str) -> Network:
    """The network, for `command` run in a container whose image has it (NotFound otherwise)."""
    net = NETWORK.get()
    if net is None:
        raise Unknown
    if not net.has(command):
        raise NotFound
    return net


def _rng(run: Process) -> random.Random:
    return getattr(run, "random", None) or random.Random(0)


# --- nslookup, getent ---------------------------------------------------------------------
def _nslookup(run: Process, fs: ContainerFS, name: str, args: list[str]) -> int:
    """busybox's nslookup (its own resolver, not libc's): the server, then each query's answer in
    the order they were sent: an A then an AAAA query for the name, a dotless one under each search
    domain instead (busybox's add_query_with_search: no ndots), or a PTR query for an address.
    Exit 1 where any query got an error (an NXDOMAIN under one of the search domains too)."""
    if not args or args[0].startswith("-") or len(args) > 2:
        raise Unknown
    net = _net(name)
    host = args[0]
    if len(args) == 2 and args[1] not in net.nameservers[:1]:
        raise Unknown  # another server: not simulated
    if not net.cluster_dns:  # the node's resolver, or one outside: the simulation has no network to them
        run.out(";; connection timed out; no servers could be reached\n\n")
        return 1
    server, status = net.nameservers[0], 0
    out = f"Server:\t\t{server}\nAddress:\t{server}:53\n\n"
    try:
        ip = ipaddress.IPv4Address(host)
    except ValueError:
        ip = None
    if ip is not None:
        arpa = ip.reverse_pointer
        names = net.reverse(str(ip))
        if not names:
            run.out(out + f"** server can't find {arpa}: NXDOMAIN\n\n")
            return 1
        run.out(out + "".join(f"{arpa}\tname = {n}\n" for n in names) + "\n")
        return 0
    names = [f"{host}.{d}" for d in net.search] if "." not in host and net.search else [host.rstrip(".")]
    for qtype in ("A", "AAAA"):
        for candidate in names:
            rcode, ips = net.query(candidate)
            if rcode != "NOERROR":
                out += f"** server can't find {candidate}: {rcode}\n\n"
                status = 1
            elif qtype == "A" and ips:
                out += "".join(f"Name:\t{candidate}\nAddress: {ip}\n" for ip in ips) + "\n"
            else:  # the cluster's addresses are IPv4 only
                out += f"*** Can't find {candidate}: No answer\n\n"
    run.out(out)
    return status


def _getent(run: Process, fs: ContainerFS, name: str, args: list[str]) -> int:
    """`getent hosts NAME...`: each name's address and canonical name; 2 if one is not found."""
    if len(args) < 2 or args[0] not in ("hosts", "ahostsv4"):
        raise Unknown
    net, status = _net(name), 0
    for host in args[1:]:
        found = net.resolve(host)
        if found is None:
            status = 2
            continue
        canonical, ip = found
        run.out(f"{ip:<15} {canonical}\n" if canonical == host else f"{ip:<15} {canonical}  {host}\n")
    return status


# --- wget, curl -----------------------------------------------------------------------------
def _options(args: list[str], flags: str, valued: str, long: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """Short options (combined: `-qO-`), the long ones mapped to short letters; Unknown for others."""
    opts: dict[str, str] = {}
    operands: list[str] = []
    it = iter(args)
    for arg in it:
        if arg.startswith("--") and len(arg) > 2:
            key, eq, value = arg[2:].partition("=")
            letter = long.get(key)
            if letter is None:
                raise Unknown
            if letter in valued and not eq:
                value = next(it, None)
                if value is None:
                    raise Unknown
            opts[letter] = value
        elif arg.startswith("-") and len(arg) > 1:
            i = 1
            while i < len(arg):
                c = arg[i]
                if c in valued:
                    value = arg[i + 1:] or next(it, None)
                    if value is None:
                        raise Unknown
                    opts[c] = value
                    break
                if c not in flags:
                    raise Unknown
                opts[c] = ""
                i += 1
        else:
            operands.append(arg)
    return opts, operands


@dataclass
class _Url:
    scheme: str
    host: str
    port: int
    path: str


def _url(text: str) -> _Url:
    parts = urlsplit(text if "://" in text else "http://" + text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise Unknown
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return _Url(parts.scheme, parts.hostname, port, parts.path or "/")


def _fetch(net: Network, run: Process, url: _Url) -> tuple[str, bytes, str] | str:
    """The connection's outcome: (ip, the server's response, ip:port) or why it failed: 'resolve',
    'refused', 'unreachable' or 'tls'."""
    found = net.resolve(url.host)
    if found is None:
        return "resolve"
    ip = found[1]
    try:
        pod, port = net.connect(ip, url.port, _rng(run))
    except Refused:
        return "refused"
    except Unreachable:
        return "unreachable"
    if url.scheme == "https":
        return "tls"  # the simulated server speaks plain HTTP only
    meta = pod["metadata"]
    return ip, response(meta.get("namespace", ""), meta["name"], port), f"{ip}:{url.port}"


def _split(resp: bytes) -> tuple[str, bytes, bytes]:
    head, _, body = resp.partition(b"\r\n\r\n")
    return head.split(b"\r\n", 1)[0].decode(), head + b"\r\n\r\n", body


def _write(run: Process, fs: ContainerFS, who: str, path: str, data: bytes, exclusive: bool = False) -> bool:
    try:
        if exclusive and fs.lookup(fs.normal(path)) is not None:
            raise FsError("File exists")
        fs.write(path, data)
    except FsError as e:
        run.err(f"{who}: can't open '{path}': {e.reason}\n" if who == "wget" else
                "curl: (23) Failure writing output to destination\n")
        return False
    return True


def _wget(run: Process, fs: ContainerFS, name: str, args: list[str]) -> int:
    """busybox's wget: -q, -O FILE (- for stdout), --spider (-s), -S, -T SEC; one URL."""
    opts, urls = _options(args, "qsS", "OTUY", {"quiet": "q", "spider": "s", "output-document": "O",
                                               "timeout": "T", "server-response": "S", "user-agent": "U"})
    if len(urls) != 1:
        raise Unknown
    net, url = _net(name), _url(urls[0])
    quiet = "q" in opts
    got = _fetch(net, run, url)
    if got == "resolve":
        run.err(f"wget: bad address '{url.host}'\n")
        return 1
    if got in ("refused", "unreachable"):
        ip = net.resolve(url.host)[1]
        run.err(f"wget: can't connect to remote host ({ip}): "
                f"{'Connection refused' if got == 'refused' else 'Network is unreachable'}\n")
        return 1
    if got == "tls":
        run.err("wget: error getting response: Connection reset by peer\n")
        return 1
    ip, resp, address = got
    status, head, body = _split(resp)
    if not quiet:
        run.err(f"Connecting to {url.host} ({address})\n")
    if "S" in opts:
        run.err("".join(f"  {line}\n" for line in head.decode().split("\r\n") if line))
    if "s" in opts:
        if not quiet:
            run.err("remote file exists\n")
        return 0
    out = opts.get("O")
    to_stdout = out == "-"
    target = out or posixpath.basename(url.path) or "index.html"
    if to_stdout:
        if not quiet:
            run.err("writing to stdout\n")
        run.out(body)
    else:  # opened before it says so; without -O, a file already there is not overwritten (O_EXCL)
        if not _write(run, fs, "wget", target, body, exclusive=out is None):
            return 1
        if not quiet:
            run.err(f"saving to '{target}'\n")
    if not quiet:
        shown = "-" if to_stdout else posixpath.basename(target)
        run.err(f"{shown:<20.20} 100% |{'*' * 32}| {len(body):>5}  0:00:00 ETA\n"
                + ("written to stdout\n" if to_stdout else f"'{target}' saved\n"))
    return 0


_CURL_METER = ("  % Total    % Received % Xferd  Average Speed   Time    Time     Time  Current\n"
               "                                 Dload  Upload   Total   Spent    Left  Speed\n")


#: the curl the simulated images ship (curlimages/curl's), as its User-Agent says
CURL_VERSION = "8.10.1"


def _curl(run: Process, fs: ContainerFS, name: str, args: list[str]) -> int:
    """curl: -s, -S, -f, -I, -i, -L, -k, -v, -o FILE, -w FORMAT, -m/--connect-timeout SEC, -X, -H, -d, -A."""
    opts, urls = _options(args, "sSfIiLkv4", "owmXHdA", {
        "silent": "s", "show-error": "S", "fail": "f", "head": "I", "include": "i", "location": "L",
        "insecure": "k", "verbose": "v", "output": "o", "write-out": "w", "max-time": "m", "connect-timeout": "m",
        "request": "X", "header": "H", "data": "d", "user-agent": "A"})
    if len(urls) != 1:
        raise Unknown
    net, url = _net(name), _url(urls[0])
    silent, show = "s" in opts, "S" in opts or "s" not in opts
    got = _fetch(net, run, url)
    if "v" in opts:
        run.err(_curl_verbose(net, run, url, got, args, opts))
    code, error = "000", None
    if got == "resolve":
        error = 6, f"Could not resolve host: {url.host}"
    elif got in ("refused", "unreachable"):
        error = 7, f"Failed to connect to {url.host} port {url.port} after 0 ms: Could not connect to server"
    elif got == "tls":
        error = 35, "OpenSSL/3.3.2: error:0A00010B:SSL routines::wrong version number"
    body = b""
    if error is None:
        ip, resp, _ = got
        status, head, body = _split(resp)
        code = status.split()[1]
        if "f" in opts and int(code) >= 400:
            error = 22, f"The requested URL returned error: {code}"
            body = b""
        elif "I" in opts:
            body = head
        elif "i" in opts:
            body = head + body
    meter = not silent and (opts.get("o") or run.out_terminal is None)
    if meter:
        n = len(body)
        run.err(_CURL_METER + f"{'100' if n else '  0'} {n:>5}  {'100' if n else '  0'} {n:>5}    0     0      0"
                "      0 --:--:-- --:--:-- --:--:--     0\n")
    if body:
        if opts.get("o"):
            if not _write(run, fs, "curl", opts["o"], body):
                return 23
        else:
            run.out(body)
    if "w" in opts:
        head = _split(got[1])[1] if isinstance(got, tuple) else b""
        method = opts.get("X") or ("HEAD" if "I" in opts else "POST" if "d" in opts else "GET")
        _write_out(run, opts["w"], {
            "http_code": code, "response_code": code, "size_download": str(len(body) if "I" not in opts else 0),
            "size_header": str(len(head)), "content_type": "text/plain" if head else "",
            "remote_ip": got[0] if isinstance(got, tuple) else "",
            "remote_port": str(url.port) if isinstance(got, tuple) else "0",
            "local_ip": net.pod_ip if isinstance(got, tuple) else "", "num_connects": "1" if got != "resolve" else "0",
            "http_version": "1.1" if head else "0", "method": method, "scheme": url.scheme.upper(),
            "url": urls[0], "url_effective": f"{url.scheme}://{url.host}{'' if url.port in (80, 443) else f':{url.port}'}"
                                            f"{url.path}",
            "exitcode": str(error[0] if error else 0), "errormsg": error[1] if error else "",
            **{f"time_{t}": "0.000000" for t in ("namelookup", "connect", "appconnect", "pretransfer",
                                                 "starttransfer", "redirect", "total")}})
    if error is not None:
        if show:
            run.err(f"curl: ({error[0]}) {error[1]}\n")
        return error[0]
    return 0


def _curl_verbose(net: Network, run: Process, url: _Url, got, args: list[str], opts: dict[str, str]) -> str:
    """What `curl -v` says of the connection on stderr: the name resolved, the connection tried,
    the request sent (`> `) and the response's head (`< `), or where it failed."""
    lines = []
    found = net.resolve(url.host)
    literal = found is not None and found[1] == url.host
    if found is not None and not literal:
        lines += [f"* Host {url.host}:{url.port} was resolved.", "* IPv6: (none)", f"* IPv4: {found[1]}"]
    if got == "resolve":
        return "".join(f"{line}\n" for line in [f"* Could not resolve host: {url.host}",
                                                "* shutting down connection #0"])
    ip = found[1]
    lines.append(f"*   Trying {ip}:{url.port}...")
    if got in ("refused", "unreachable"):
        lines += [f"* connect to {ip} port {url.port} from {net.pod_ip or '0.0.0.0'} port "
                  f"{_rng(run).randrange(32768, 61000)} failed: Connection refused" if got == "refused" else
                  f"* Immediate connect fail for {ip}: Network is unreachable",
                  f"* Failed to connect to {url.host} port {url.port} after 0 ms: Could not connect to server",
                  "* closing connection #0"]
        return "".join(f"{line}\n" for line in lines)
    lines.append(f"* Connected to {url.host} ({ip}) port {url.port}")
    if got == "tls":
        lines += ["* ALPN: curl offers h2,http/1.1", "* TLSv1.3 (OUT), TLS handshake, Client hello (1):",
                  "* OpenSSL/3.3.2: error:0A00010B:SSL routines::wrong version number", "* closing connection #0"]
        return "".join(f"{line}\n" for line in lines)
    method = opts.get("X") or ("HEAD" if "I" in opts else "POST" if "d" in opts else "GET")
    headers = [args[i + 1] for i, a in enumerate(args[:-1]) if a in ("-H", "--header")]
    given = {h.split(":", 1)[0].strip().lower() for h in headers}
    request = [f"{method} {url.path} HTTP/1.1", f"Host: {url.host}" + (f":{url.port}" if url.port != 80 else "")]
    request += [f"User-Agent: {opts.get('A', f'curl/{CURL_VERSION}')}"] if "user-agent" not in given else []
    request += ["Accept: */*"] if "accept" not in given else []
    request += headers
    if "d" in opts:
        request += [f"Content-Length: {len(opts['d'].encode())}"]
        if "content-type" not in given:
            request += ["Content-Type: application/x-www-form-urlencoded"]
    lines += ["* using HTTP/1.x", *(f"> {line}" for line in request), "> ", "* Request completely sent off"]
    status, head, body = _split(got[1])
    lines += [f"< {line}" for line in head.decode().split("\r\n")[:-2]] + ["< "]
    if body and method != "HEAD" and run.out_terminal is None:
        lines.append(f"{{ [{len(body)} bytes data]")
    lines.append("* shutting down connection #0")
    return "".join(f"{line}\n" for line in lines)


def _write_out(run: Process, fmt: str, values: dict[str, str]) -> None:
    """curl's --write-out: `%{variable}` replaced (the times are all 0: the simulation takes none),
    `%%` a percent sign, \\n, \\t and \\r; an unknown variable is warned of and left out."""
    def variable(m: re.Match) -> str:
        if m.group(0) == "%%":
            return "%"
        if m.group(1) not in values:
            run.err(f"curl: unknown --write-out variable: '{m.group(1)}'\n")
            return ""
        return values[m.group(1)]
    text = re.sub(r"%%|%\{(\w+)\}", variable, fmt)
    run.out(text.replace("\\n", "\n").replace("\\t", "\t").replace("\\r", "\r"))


#: busybox ping's wait for replies once its -c packets are sent, without -W (MAXWAIT)
PING_WAIT = 10


def _ping(run: Process, fs: ContainerFS, name: str, args: list[str]) -> int:
    """busybox's `ping -c N [-q] [-W SEC] HOST`, one packet a second: a pod answers; a ClusterIP
    does not (kube-proxy rejects what is no Service port: no echo reply, so ping waits -W and
    counts the loss); an address outside the cluster is unreachable. Without -c it would run until
    interrupted: not simulated."""
    opts, hosts = _options(args, "q4", "cW", {})
    if len(hosts) != 1 or not opts.get("c", "").isdigit() or not opts.get("W", "1").isdigit() or not int(opts["c"]):
        raise Unknown
    net, host, count = _net(name), hosts[0], int(opts["c"])
    found = net.resolve(host)
    if found is None:
        run.err(f"ping: bad address '{host}'\n")
        return 1
    ip = found[1]
    run.out(f"PING {host} ({ip}): 56 data bytes\n")
    answers = net.echoes(ip)
    if answers is None:
        run.err("ping: sendto: Network is unreachable\n")
        return 1
    for seq in range(count):
        if answers and "q" not in opts:
            run.out(f"64 bytes from {ip}: seq={seq} ttl=64 time=0.080 ms\n")
        if seq < count - 1:
            run.now += 1  # the next packet, a second later
    if not answers:
        run.now += int(opts.get("W", PING_WAIT))
    received = count if answers else 0
    run.out(f"\n--- {host} ping statistics ---\n{count} packets transmitted, {received} packets received, "
            f"{100 - received * 100 // count}% packet loss\n"
            + ("round-trip min/avg/max = 0.080/0.080/0.080 ms\n" if received else ""))
    return 0 if received else 1


def _in_image(applet):
    """`applet`, where the container's image has it: a command it lacks is not found (`sh: curl: not
    found`, 127), whatever its options."""
    def run(process: Process, fs: ContainerFS, name: str, args: list[str]) -> int:
        _net(name)
        return applet(process, fs, name, args)
    return run


#: the methods an HTTP request the simulated server answers starts with
_METHODS = (b"GET", b"HEAD", b"POST", b"PUT", b"DELETE", b"PATCH", b"OPTIONS")
#: the service names busybox's nc takes for a port (bb_lookup_port, /etc/services)
_SERVICES = {"http": 80, "https": 443, "ssh": 22, "domain": 53, "postgresql": 5432, "mysql": 3306,
             "redis": 6379}


def _nc(run: Process, fs: ContainerFS, name: str, args: list[str]) -> int:
    """busybox's nc (netcat 1.10's, nc_bloaty) connecting out: `nc -z HOST PORT` tells whether the
    port is open by its exit status, `-v` says `HOST (IP:PORT) open` (a refusal only at `-vv`);
    without -z it sends its stdin and writes what the server answers: the simulated HTTP server's
    response to a request, an echo of anything else. `-w SEC` is taken, `-n` too."""
    opts, operands = _options(args, "zvn", "w", {})
    verbose = sum(1 for a in args if a.startswith("-") and not a.startswith("--") for c in a[1:] if c == "v")
    if len(operands) != 2 or not opts.get("w", "1").isdigit():
        raise Unknown
    host, service = operands
    port = int(service) if service.isdigit() else _SERVICES.get(service)
    if port is None or not 0 < port < 65536:
        raise Unknown
    net = _net(name)
    found = net.resolve(host)
    if found is None:
        run.err(f"nc: bad address '{host}'\n")
        return 1
    ip = found[1]
    try:
        pod, target = net.connect(ip, port, _rng(run))
    except (Refused, Unreachable) as e:
        if verbose > 1 or verbose and isinstance(e, Unreachable):
            reason = "Connection refused" if isinstance(e, Refused) else "Network is unreachable"
            run.err(f"nc: {host} ({ip}:{port}): {reason}\n")
        return 1
    if verbose:
        run.err(f"{host} ({ip}:{port}) open\n")
    if "z" in opts:
        return 0
    sent = run.read_stdin()
    if sent.split(b" ", 1)[0] in _METHODS:
        meta = pod["metadata"]
        run.out(response(meta.get("namespace", ""), meta["name"], target, head=sent.startswith(b"HEAD")))
    else:
        run.out(sent)
    return 0


APPLETS = {name: _in_image(applet) for name, applet in {
    "nslookup": _nslookup, "getent": _getent, "wget": _wget, "curl": _curl, "ping": _ping, "nc": _nc}.items()}
