"""The network applets a simulated container runs (simulated_net): nslookup, getent, wget and curl,
on a cluster given as the API lists it, their output and exit codes as busybox's and curl's."""

from __future__ import annotations

import pytest

from nanokube.clock import Clock
from nanokube.node import dns, hosts_file
from nanokube.node import simulated_net as sn
from nanokube.node.simulated_command import interpret
from nanokube.node.simulated_fs import PodFiles

CLIENT = {"metadata": {"name": "client", "namespace": "default", "uid": "c"},
          "spec": {"containers": [{"name": "main"}]}}
SEARCH = ["default.svc.cluster.local", "svc.cluster.local", "cluster.local"]


def _pod(name: str, ip: str, running: bool = True, ports=({"name": "http", "containerPort": 8080},), **spec) -> dict:
    return {"metadata": {"name": name, "namespace": "default", "uid": name},
            "spec": {"containers": [{"name": "c", "ports": list(ports)}], **spec},
            "status": {"podIP": ip, "podIPs": [{"ip": ip}],
                       "containerStatuses": [{"name": "c", "state": {"running": {}} if running else
                                              {"waiting": {"reason": "ContainerCreating"}}}]}}


def _service(name: str, ip: str, port: int = 80, target="http", **spec) -> dict:
    return {"metadata": {"name": name, "namespace": "default"},
            "spec": {"clusterIP": ip, "clusterIPs": [ip], "ports": [{"port": port, "targetPort": target}], **spec}}


def _slice(service: str, port: int, *endpoints: tuple[str, bool], hostname: str = "") -> dict:
    return {"metadata": {"name": f"{service}-x", "namespace": "default",
                         "labels": {"kubernetes.io/service-name": service}},
            "ports": [{"name": "", "port": port, "protocol": "TCP"}],
            "endpoints": [{"addresses": [ip], "conditions": {"ready": ready}, **({"hostname": hostname} if hostname else {})}
                          for ip, ready in endpoints]}


@pytest.fixture
def network():
    pods = [_pod("web-1", "10.244.0.5"), _pod("slow-1", "10.244.0.6"), _pod("db-0", "10.244.0.7", subdomain="db"),
            _pod("down", "10.244.0.8", running=False), {**CLIENT, "status": {"podIP": "10.244.0.9"}}]
    services = [_service("kubernetes", "10.96.0.1", 443, 6443), _service("web", "10.96.0.50"),
                _service("slow", "10.96.0.60", target=8080), _service("db", "None", 5432, 5432)]
    slices = [_slice("web", 8080, ("10.244.0.5", True)), _slice("slow", 8080, ("10.244.0.6", False)),
              _slice("db", 5432, ("10.244.0.7", True), hostname="db-0")]
    net = sn.Network("default", pods[-1], "n1", dns.Listed(services, slices, pods),
                     "127.0.0.1\tlocalhost\n10.244.0.9\tclient\n", [dns.DNS_SERVER], SEARCH, ndots=5)
    token = sn.NETWORK.set(net)
    yield net
    sn.NETWORK.reset(token)


@pytest.fixture
def files(tmp_path):
    pod_files = PodFiles(CLIENT, lambda name: str(tmp_path / name), Clock())
    return lambda: pod_files.draft("main", CLIENT, False)


def run(argv: list[str], files) -> tuple[int, str, str]:
    program = interpret(argv, 0.0, files)
    assert program is not None
    text = {"stdout": "", "stderr": ""}
    for _, stream, data in program.writes():
        text[stream] += data if isinstance(data, str) else data.decode()
    return program.exit_code, text["stdout"], text["stderr"]


WEB = "nanokube simulated pod default/web-1 port 8080\n"


HEADER = "Server:\t\t10.96.0.10\nAddress:\t10.96.0.10:53\n\n"


def test_nslookup_asks_as_busybox_does_a_and_aaaa_under_each_search_domain(network, files):
    web = "Name:\tweb.default.svc.cluster.local\nAddress: 10.96.0.50\n\n"
    assert run(["nslookup", "web.default.svc.cluster.local"], files) == (
        0, HEADER + web + "*** Can't find web.default.svc.cluster.local: No answer\n\n", "")
    misses = "".join(f"** server can't find web.{d}: NXDOMAIN\n\n" for d in SEARCH[1:])
    assert run(["nslookup", "web"], files) == (  # a dotless name under each domain; any NXDOMAIN fails it
        1, HEADER + web + misses + "*** Can't find web.default.svc.cluster.local: No answer\n\n" + misses, "")


def test_nslookup_of_a_name_no_one_has_is_nxdomain_and_exits_1(network, files):
    assert run(["nslookup", "nope.default.svc.cluster.local"], files) == (
        1, HEADER + "** server can't find nope.default.svc.cluster.local: NXDOMAIN\n\n" * 2, "")
    # dotted: asked as it is, no search (busybox's), so outside the cluster's zone: forwarded upstream
    assert run(["nslookup", "web.default"], files) == (1, HEADER + "** server can't find web.default: SERVFAIL\n\n" * 2, "")
    code, out, _ = run(["nslookup", "example.com"], files)  # forwarded upstream, which the simulation has not
    assert code == 1 and out.endswith("** server can't find example.com: SERVFAIL\n\n")


def test_nslookup_of_an_address_asks_for_its_pointer(network, files):
    assert run(["nslookup", "10.96.0.50"], files) == (
        0, HEADER + "50.0.96.10.in-addr.arpa\tname = web.default.svc.cluster.local\n\n", "")
    assert run(["nslookup", "10.244.0.7"], files)[1].endswith("name = db-0.db.default.svc.cluster.local\n\n")
    assert run(["nslookup", "10.1.2.3"], files) == (1, HEADER + "** server can't find 3.2.1.10.in-addr.arpa: NXDOMAIN\n\n", "")


def test_a_headless_service_answers_with_its_ready_endpoints_and_their_hostnames(network, files):
    assert "Name:\tdb.default.svc.cluster.local\nAddress: 10.244.0.7\n" in run(["nslookup", "db.default.svc.cluster.local."], files)[1]
    assert run(["getent", "hosts", "db-0.db"], files) == (
        0, "10.244.0.7      db-0.db.default.svc.cluster.local  db-0.db\n", "")
    assert run(["getent", "hosts", "10-244-0-5.default.pod.cluster.local"], files)[1].startswith("10.244.0.5 ")
    assert run(["getent", "hosts", "client"], files) == (0, "10.244.0.9      client\n", "")  # /etc/hosts
    assert run(["getent", "hosts", "nope"], files) == (2, "", "")


def test_wget_and_curl_reach_a_ready_endpoint_through_the_named_target_port(network, files):
    assert run(["wget", "-qO-", "http://web"], files) == (0, WEB, "")
    assert run(["wget", "-q", "-O", "-", "10.96.0.50:80"], files) == (0, WEB, "")
    assert run(["curl", "-s", "web.default.svc.cluster.local"], files) == (0, WEB, "")
    assert run(["curl", "-s", "http://10.244.0.5:9000/"], files) == (
        0, "nanokube simulated pod default/web-1 port 9000\n", "")  # any port of a running pod answers
    assert run(["curl", "-so", "/dev/null", "-w", "%{http_code} %{remote_ip}\\n", "web"], files) == (
        0, "200 10.96.0.50\n", "")
    code, out, _ = run(["curl", "-sI", "web"], files)
    assert out.startswith("HTTP/1.1 200 OK\r\n") and f"Content-Length: {len(WEB)}\r\n" in out and WEB not in out


def test_wget_without_q_reports_as_busybox_and_saves_the_file(network, files):
    code, out, err = run(["sh", "-c", "wget web && cat index.html && wget web"], files)
    assert (code, out) == (1, WEB)
    assert err.startswith("Connecting to web (10.96.0.50:80)\nsaving to 'index.html'\nindex.html           100% |")
    assert err.endswith("'index.html' saved\nConnecting to web (10.96.0.50:80)\n"
                        "wget: can't open 'index.html': File exists\n")
    assert run(["wget", "--spider", "web"], files) == (0, "", "Connecting to web (10.96.0.50:80)\nremote file exists\n")


@pytest.mark.parametrize("url, reason", [
    ("http://slow", "Connection refused"),            # its only endpoint is not ready
    ("http://web:8080", "Connection refused"),        # a port the Service does not have
    ("http://10.244.0.8:8080", "Connection refused"),  # a pod whose container does not run
    ("http://1.2.3.4", "Network is unreachable"),     # outside the cluster
])
def test_what_nothing_answers_fails_in_busyboxs_and_curls_words(network, files, url, reason):
    ip = url.split("//")[1].split(":")[0]
    ip = {"slow": "10.96.0.60", "web": "10.96.0.50"}.get(ip, ip)
    assert run(["wget", "-qO-", url], files) == (1, "", f"wget: can't connect to remote host ({ip}): {reason}\n")
    host, _, port = url.split("//")[1].partition(":")
    assert run(["curl", "-sS", url], files) == (
        7, "", f"curl: (7) Failed to connect to {host} port {port or 80} after 0 ms: Could not connect to server\n")
    assert run(["curl", "-s", "-w", "%{http_code}", url], files) == (7, "000", "")


def test_unknown_names_and_the_dns_policy(network, files):
    assert run(["wget", "-qO-", "nope"], files) == (1, "", "wget: bad address 'nope'\n")
    assert run(["curl", "-sS", "nope"], files) == (6, "", "curl: (6) Could not resolve host: nope\n")
    network.cluster_dns, network.nameservers, network.search = False, [], []  # dnsPolicy Default
    assert run(["wget", "-qO-", "web"], files) == (1, "", "wget: bad address 'web'\n")


def test_kube_proxy_prefers_ready_endpoints_and_honours_the_local_traffic_policy(network, files):
    network.cluster.endpoint_slices[0]["endpoints"].append({"addresses": ["10.244.0.6"], "nodeName": "n2",
                                           "conditions": {"ready": False, "serving": True, "terminating": True}})
    assert {run(["wget", "-qO-", "web"], files)[1] for _ in range(10)} == {WEB}
    network.cluster.services[1]["spec"]["internalTrafficPolicy"] = "Local"
    assert run(["wget", "-qO-", "web"], files)[2] == "wget: can't connect to remote host (10.96.0.50): " \
                                                     "Connection refused\n"  # its endpoint is on another node


def test_connections_follow_the_topology_hints_for_the_nodes_zone(network, files):
    """As kube-proxy's rules (machinery/topology): the endpoints hinted for the node's zone, all of
    them where no ready one is hinted for it or one lacks a hint, and hints ignored by a Local
    internalTrafficPolicy. Found by topo56: a pod in zone-a reached zone-b's endpoints."""
    eps = network.cluster.endpoint_slices[0]["endpoints"]
    eps[0]["hints"] = {"forZones": [{"name": "zone-a"}]}
    eps.append({"addresses": ["10.244.0.6"], "nodeName": "n1", "conditions": {"ready": True},
                "hints": {"forZones": [{"name": "zone-b"}]}})
    slow = "nanokube simulated pod default/slow-1 port 8080\n"

    def reached(zone):  # one shell's passes, which draw from one generator
        network.zone = zone
        out = run(["sh", "-c", "for i in 1 2 3 4 5 6 7 8 9 10 11 12; do wget -qO- web; done"], files)[1]
        return set(out.splitlines(keepends=True))
    assert reached("zone-a") == {WEB}
    assert reached("zone-b") == {slow}
    assert reached("zone-c") == reached("") == {WEB, slow}  # no endpoint for the zone, or no zone: all
    network.cluster.services[1]["spec"]["internalTrafficPolicy"] = "Local"
    assert reached("zone-a") == {slow}  # the node's endpoint, hinted for another zone
    network.cluster.services[1]["spec"]["internalTrafficPolicy"] = "Cluster"
    del eps[1]["hints"]
    assert reached("zone-a") == {WEB, slow}  # a ready endpoint without hints: all of them


def test_without_a_network_or_with_options_not_simulated_the_command_is_not_interpreted(network, files):
    assert interpret(["wget", "--no-check-certificate", "web"], 0.0, files) is None
    assert interpret(["curl", "--trace", "-", "web"], 0.0, files) is None
    sn.NETWORK.set(None)
    assert interpret(["wget", "-qO-", "web"], 0.0, files) is None


def test_which_commands_need_the_network():
    assert sn.names_network("wget -qO- web") and sn.names_network("sh -c 'x=1; /usr/bin/curl -s web'")
    assert not sn.names_network("echo wgetting") and not sn.names_network("cat /etc/curlrc")
    assert sn.names_network('sh -c if "wget" -q web; then :; fi') and sn.names_network("x=$(ping -c1 web)")


def test_the_listening_rule_follows_the_pods_container_statuses():
    pod = _pod("p", "10.0.0.1", ports=[{"containerPort": 80}])
    assert sn.listening(pod, 80) and sn.listening(pod, 81)
    pod["spec"]["initContainers"] = [{"name": "init", "ports": [{"containerPort": 9000}]}]
    assert not sn.listening(pod, 9000)  # only a container not running declares it
    assert not sn.listening(_pod("q", "10.0.0.2", running=False), 80)


def test_resolv_conf_and_hosts_are_the_kubelets():
    pod = {"metadata": {"name": "p", "namespace": "ml"}, "spec": {"hostname": "h", "hostAliases": [
        {"ip": "10.1.1.1", "hostnames": ["db.local"]}]}}
    etc = sn.etc_files(pod, {"name": "c"}, "n1", "10.244.1.4")
    assert etc["resolv.conf"] == ("search ml.svc.cluster.local svc.cluster.local cluster.local\n"
                                  "nameserver 10.96.0.10\noptions ndots:5\n")
    assert "10.244.1.4\th\n" in etc["hosts"] and etc["hosts"].endswith("10.1.1.1\tdb.local\n")
    none = {**pod, "spec": {"dnsPolicy": "None", "dnsConfig": {
        "nameservers": ["1.1.1.1"], "searches": ["corp.example"], "options": [{"name": "ndots", "value": "2"}]}}}
    assert sn.etc_files(none, {}, "n1", "")["resolv.conf"] == \
        "search corp.example\nnameserver 1.1.1.1\noptions ndots:2\n"
    host_net = {**pod, "spec": {"hostNetwork": True}}  # dnsPolicy ClusterFirst falls back to Default
    # and its hosts file is the kubelet's copy of the node's (a simulated node's: localhost, its own name)
    assert sn.etc_files(host_net, {}, "n1", "10.0.0.3") == {"resolv.conf": "", "hosts": (
        "# Kubernetes-managed hosts file (host network).\n" + hosts_file.LOCALHOST + "10.0.0.3\tn1\n")}


def test_a_simulated_containers_files_hold_its_resolv_conf(tmp_path):
    pod = {**CLIENT, "spec": {"containers": [{"name": "main"}], "subdomain": "x"}}
    pod_files = PodFiles(pod, lambda name: str(tmp_path / name), Clock(),
                         etc=lambda c: sn.etc_files(pod, c, "n1", "10.244.0.9"))
    assert run(["cat", "/etc/resolv.conf"], lambda: pod_files.draft("main", pod, False))[1].startswith(
        "search default.svc.cluster.local ")
    # spec.subdomain names the pod's FQDN first, as the kubelet's cluster domain (resolv.conf's) makes it
    assert run(["cat", "/etc/hosts"], lambda: pod_files.draft("main", pod, False))[1].endswith(
        "10.244.0.9\tclient.x.default.svc.cluster.local\tclient\n")


def test_hostname_f_d_and_i_read_the_pods_names_in_its_hosts_file(tmp_path):
    """A StatefulSet pod's `hostname -f` (ZooKeeper's and etcd's start scripts) is its stable FQDN."""
    pod = {"metadata": {"name": "db-5", "namespace": "shop", "uid": "d"},
           "spec": {"hostname": "db-5", "subdomain": "db", "containers": [{"name": "main"}]}}
    pod_files = PodFiles(pod, lambda name: str(tmp_path / name), Clock(),
                         etc=lambda c: sn.etc_files(pod, c, "n1", "10.244.0.4"))
    assert run(["sh", "-c", "hostname; hostname -f; hostname -d; hostname -i; hostname -s"],
               lambda: pod_files.draft("main", pod, False)) == (
        0, "db-5\ndb-5.db.shop.svc.cluster.local\ndb.shop.svc.cluster.local\n10.244.0.4 \ndb-5\n", "")
    plain = {**pod, "spec": {"containers": [{"name": "main"}]}}
    pod_files = PodFiles(plain, lambda name: str(tmp_path / name), Clock(),
                         etc=lambda c: sn.etc_files(plain, c, "n1", "10.244.0.4"))
    assert run(["sh", "-c", "hostname -f; hostname -d"], lambda: pod_files.draft("main", plain, False)) == (
        0, "db-5\n", "")


def test_a_background_ping_is_a_job_only_where_it_writes_all_at_its_start(network, files):
    """`ping -c 1 POD &` writes all it does as it starts, and `wait $!` has its status; `ping -c 2`
    writes a second later, in among what the shell goes on with: not simulated."""
    once = interpret(["sh", "-c", "ping -q -c 1 10.244.0.5 & echo started; wait $!; echo $?"], 0.0, files)
    assert [text for _, text in once.output][-2:] == ["started\n", "0\n"] and once.seconds == 0
    assert interpret(["sh", "-c", "ping -c 2 10.244.0.5 & wait"], 0.0, files) is None


def test_without_a_cluster_nameserver_nslookup_times_out(network, files):
    network.cluster_dns, network.nameservers, network.search = False, [], []
    assert run(["nslookup", "web"], files) == (1, ";; connection timed out; no servers could be reached\n\n", "")


def test_ping_gets_a_pods_echo_but_not_a_cluster_ips(network, files):
    program = interpret(["ping", "-c", "2", "web-0.x"], 0.0, files)
    assert program is not None and program.exit_code == 1  # no such name
    assert run(["ping", "-c", "2", "10.244.0.5"], files) == (0, (
        "PING 10.244.0.5 (10.244.0.5): 56 data bytes\n"
        "64 bytes from 10.244.0.5: seq=0 ttl=64 time=0.080 ms\n64 bytes from 10.244.0.5: seq=1 ttl=64 time=0.080 ms\n"
        "\n--- 10.244.0.5 ping statistics ---\n2 packets transmitted, 2 packets received, 0% packet loss\n"
        "round-trip min/avg/max = 0.080/0.080/0.080 ms\n"), "")
    assert interpret(["ping", "-c", "2", "10.244.0.5"], 0.0, files).seconds == 1  # one packet a second
    lost = interpret(["ping", "-c1", "web"], 0.0, files)  # kube-proxy rejects ICMP to a ClusterIP
    assert (lost.exit_code, lost.seconds) == (1, sn.PING_WAIT)
    assert lost.output[-1][1].endswith("1 packets transmitted, 0 packets received, 100% packet loss\n")
    assert run(["ping", "-c1", "1.1.1.1"], files) == (
        1, "PING 1.1.1.1 (1.1.1.1): 56 data bytes\n", "ping: sendto: Network is unreachable\n")
    assert interpret(["ping", "web"], 0.0, files) is None  # until interrupted: not simulated


def test_dns_config_options_merge_into_the_kubelets_and_ndots_orders_the_search():
    pod = {"metadata": {"name": "p", "namespace": "ml"}, "spec": {"dnsConfig": {"options": [
        {"name": "ndots", "value": "2"}, {"name": "edns0"}, {"name": "timeout", "value": "1"}]}}}
    _, _, options = dns.resolver(pod)  # mergeDNSOptions: the pod's ndots replaces the kubelet's 5
    assert options == ["ndots:2", "edns0", "timeout:1"] and dns.ndots(options) == 2
    assert sn.etc_files(pod, {}, "n1", "")["resolv.conf"].endswith("options ndots:2 edns0 timeout:1\n")
    assert dns.ndots(["ndots:5"]) == 5 and dns.ndots([]) == 1 and dns.ndots(["ndots:99"]) == 15
    net = sn.Network("ml", pod, "n1", dns.Listed([], [], []), search=["ml.svc.cluster.local"], ndots=2)
    assert net.candidates("web.ml") == ["web.ml.ml.svc.cluster.local", "web.ml"]  # fewer dots: the search first
    assert net.candidates("web.ml.svc") == ["web.ml.svc", "web.ml.svc.ml.svc.cluster.local"]  # as it is first
    net.ndots = 5
    assert net.candidates("web.ml.svc")[0] == "web.ml.svc.ml.svc.cluster.local"


@pytest.mark.parametrize("image, curl, getent", [
    ("busybox", False, False), ("docker.io/library/busybox:1.36", False, False), ("alpine:3.20", False, True),
    ("curlimages/curl:8.10.1", True, True), ("registry.local:5000/team/app@sha256:ab", True, True),
])
def test_which_images_have_curl_and_getent(network, files, image, curl, getent):
    network.image = image
    assert run(["sh", "-c", "curl -s web; echo $?"], files)[:2] == ((0, WEB + "0\n") if curl else (0, "127\n"))
    assert run(["sh", "-c", "getent hosts client"], files) == (
        (0, "10.244.0.9      client\n", "") if getent else (127, "", "sh: getent: not found\n"))
    assert run(["wget", "-qO-", "web"], files) == (0, WEB, "")  # busybox's applet, in all of these
    if not curl:  # run by itself: not interpreted (exec answers as for a binary the image lacks)
        assert interpret(["curl", "-s", "web"], 0.0, files) is None
        assert run(["sh", "-c", "curl -v web"], files)[2] == "sh: curl: not found\n"


def test_busybox_nc_checks_a_port_and_speaks_to_the_simulated_server(network, files):
    assert run(["nc", "-z", "web", "80"], files) == (0, "", "")
    assert run(["nc", "-zv", "web", "http"], files) == (0, "", "web (10.96.0.50:80) open\n")
    assert run(["nc", "-zv", "slow", "80"], files) == (1, "", "")  # a refusal is said only at -vv
    assert run(["nc", "-z", "-vv", "slow", "80"], files) == (1, "", "nc: slow (10.96.0.60:80): Connection refused\n")
    assert run(["nc", "-zv", "1.2.3.4", "80"], files) == (1, "", "nc: 1.2.3.4 (1.2.3.4:80): Network is unreachable\n")
    assert run(["nc", "-z", "nope", "80"], files) == (1, "", "nc: bad address 'nope'\n")
    code, out, _ = run(["sh", "-c", r"printf 'GET / HTTP/1.0\r\n\r\n' | nc web 80"], files)
    assert code == 0 and out.startswith("HTTP/1.1 200 OK\r\n") and out.endswith("\r\n\r\n" + WEB)
    assert run(["sh", "-c", "echo hi | nc -w 1 10.244.0.5 7000"], files) == (0, "hi\n", "")  # not HTTP: echoed
    assert interpret(["nc", "-l", "-p", "80"], 0.0, files) is None  # listening: not simulated


def test_curl_v_shows_the_request_and_the_response_head(network, files):
    code, out, err = run(["curl", "-sv", "-H", "X-Trace: 1", "web"], files)
    assert (code, out) == (0, WEB)
    assert err == ("* Host web:80 was resolved.\n* IPv6: (none)\n* IPv4: 10.96.0.50\n*   Trying 10.96.0.50:80...\n"
                   "* Connected to web (10.96.0.50) port 80\n* using HTTP/1.x\n> GET / HTTP/1.1\n> Host: web\n"
                   f"> User-Agent: curl/{sn.CURL_VERSION}\n> Accept: */*\n> X-Trace: 1\n> \n"
                   "* Request completely sent off\n< HTTP/1.1 200 OK\n< Content-Type: text/plain\n"
                   f"< Content-Length: {len(WEB)}\n< Connection: close\n< \n{{ [{len(WEB)} bytes data]\n"
                   "* shutting down connection #0\n")
    code, _, err = run(["curl", "-sSv", "http://slow"], files)
    assert code == 7 and "* connect to 10.96.0.60 port 80 from 10.244.0.9 port " in err
    assert err.endswith("failed: Connection refused\n* Failed to connect to slow port 80 after 0 ms: Could not connect"
                        " to server\n* closing connection #0\ncurl: (7) Failed to connect to slow port 80 after 0 ms:"
                        " Could not connect to server\n")
    assert run(["curl", "-sv", "nope"], files) == (
        6, "", "* Could not resolve host: nope\n* shutting down connection #0\n")
    code, out, err = run(["curl", "-sIv", "-o", "/dev/null", "-w", "%{http_code}", "10.96.0.50"], files)
    assert (code, out) == (0, "200") and "> HEAD / HTTP/1.1\n> Host: 10.96.0.50\n" in err and "bytes data" not in err


def test_a_command_after_a_sleep_sees_the_cluster_as_it_is_then(network, files):
    """`sleep 5; wget -qO- late` is left to run when its time comes (a Wait), not worked out at the start:
    a Service made in those 5 s is reached."""
    program = interpret(["sh", "-c", "echo start; sleep 5; wget -qO- late; echo $?"], 0.0, files)
    assert (program.output, program.wait.at) == (((0, "start\n"),), 5)
    network.cluster.services.append(_service("late", "10.96.0.70"))
    network.cluster.endpoint_slices.append(_slice("late", 8080, ("10.244.0.5", True)))
    later = program.wait.resume(files(), 5.0)
    assert (later.output, later.exit_code, later.wait) == (((0, WEB.encode()), (0, "0\n")), 0, None)
    # an endless loop's later passes, each worked out when its time comes, see it go again
    loop = interpret(["sh", "-c", "while true; do wget -qO- late; sleep 1; done"], 0.0, files)
    passes = loop.timeline()
    assert [next(passes) for _ in range(3)] == [(0, "stdout", WEB.encode()), (1, "pass", None),
                                                (1, "stdout", WEB.encode())]
    network.cluster.services.pop()
    assert [next(passes) for _ in range(2)] == [(2, "pass", None), (2, "stderr", "wget: bad address 'late'\n")]


def test_a_loop_that_ends_runs_each_later_pass_when_its_time_comes(network, files):
    """A `for` loop (and a counted `while`) reaching the network, its passes taking time, leaves each
    later pass for its time (a Wait at no period): a pass sees a Service made since, and the loop
    goes on with its remaining items, then what follows it."""
    program = interpret(["sh", "-c", "for i in 1 2 3; do wget -qO- late || echo no $i; sleep 2; done; echo done $i"],
                        0.0, files)
    assert (program.output, program.wait.at, program.wait.period) == (((0, "no 1\n"),), 2, 0)
    network.cluster.services.append(_service("late", "10.96.0.70"))
    network.cluster.endpoint_slices.append(_slice("late", 8080, ("10.244.0.5", True)))
    second = program.wait.resume(files(), 2.0)
    assert (second.output, second.wait.at) == (((0, WEB.encode()),), 2)
    network.cluster.services.pop()
    third = second.wait.resume(files(), 4.0)
    assert (third.output, third.wait) == (((0, "no 3\n"), (2, "done 3\n")), None)
    assert third.seconds == 2 and third.exit_code == 0

    counted = interpret(["sh", "-c", "n=0; while [ $n -lt 2 ]; do n=$((n+1)); wget -qO- late || echo no $n; "
                         "sleep 1; done"], 0.0, files)
    assert (counted.output, counted.wait.at) == (((0, "no 1\n"),), 1)
    network.cluster.services.append(_service("late", "10.96.0.70"))
    later = counted.wait.resume(files(), 1.0)
    assert (later.output, later.wait.at) == (((0, WEB.encode()),), 1)
    last = later.wait.resume(files(), 2.0)  # its condition, read then, ends it
    assert (last.output, last.wait, last.seconds) == ((), None, 0)


def test_a_loop_without_the_network_or_nested_is_worked_out_at_its_start(network, files):
    """Passes that reach no network, and a loop nested in a function, are still worked out ahead."""
    program = interpret(["sh", "-c", "for i in 1 2; do echo $i; sleep 1; done"], 0.0, files)
    assert (program.output, program.wait, program.seconds) == (((0, "1\n"), (1, "2\n")), None, 2)
    nested = interpret(["sh", "-c", "f() { for i in 1 2; do wget -qO- web; sleep 1; done; }; f"], 0.0, files)
    assert (nested.output, nested.wait) == (((0, WEB.encode()), (1, WEB.encode())), None)


def test_curl_write_out_variables(network, files):
    fmt = "%{http_code} %{content_type} %{size_download} %{url_effective} %{remote_port} %{exitcode} 100%%\\n"
    assert run(["curl", "-so", "/dev/null", "-w", fmt, "web"], files) == (
        0, f"200 text/plain {len(WEB)} http://web/ 80 0 100%\n", "")
    assert run(["curl", "-s", "-w", "%{http_code} %{exitcode} %{errormsg}", "http://slow"], files) == (
        7, "000 7 Failed to connect to slow port 80 after 0 ms: Could not connect to server", "")
    assert run(["curl", "-so", "/dev/null", "-w", "%{nope}%{time_total}", "web"], files) == (
        0, "0.000000", "curl: unknown --write-out variable: 'nope'\n")
