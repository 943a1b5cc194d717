"""The kubelet endpoints a node agent answers for nodes/proxy, on a virtual clock: the pods'
usage (the model `kubectl top` reads) integrated into cumulative CPU seconds, the node's
system share added, and the kubelet's answers for what it does not serve."""

import gzip
from types import SimpleNamespace

import orjson
from multidict import CIMultiDict, MultiDict

from nanokube.clock import VirtualClock
from nanokube.node.devicemanager.manager import DeviceManager
from nanokube.node.dra.metrics import DRAMetrics
from nanokube.node.eviction import PID_MAX, EvictionManager
from nanokube.node.faults import Faults
from nanokube.node.kubelet_server import KubeletServer
from nanokube.node.simulated_fs import Dir, File

START = 1_800_000_000.0


class Client:
    def resource(self, *args):
        return None


def agent(clock):
    pod = {"metadata": {"name": "train", "namespace": "ml", "uid": "u1"},
           "spec": {"containers": [{"name": "main", "image": "trainer:1",
                                    "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}}]},
           "status": {"phase": "Running", "startTime": clock.rfc3339(START),
                      "containerStatuses": [{"name": "main", "image": "docker.io/library/trainer:1",
                                             "containerID": "containerd://abc",
                                             "state": {"running": {"startedAt": clock.rfc3339(START)}}}]}}
    pending = {"metadata": {"name": "wait", "namespace": "ml", "uid": "u2"},
               "spec": {"containers": [{"name": "main"}]}, "status": {"phase": "Pending"}}
    spec = SimpleNamespace(capacity={"cpu": "8", "memory": "16Gi", "pods": "110", "ephemeral-storage": "1Gi"})
    # main wrote 5000 bytes to its writable layer (two blocks); the runtime's /etc files are not its own;
    # its log files (the current instance's and the last one's) take three blocks, the etc-hosts file one
    root = Dir({"etc": Dir({"hosts": File(b"127.0.0.1 localhost\n")}), "tmp": Dir({"out": File(bytes(5000))})})
    info = {"bootID": "b", "machineID": "m", "systemUUID": "s"}
    fake = SimpleNamespace(client=Client(), clock=clock, name="n1", spec=spec, pod_cidr="10.244.0.0/24",
                           renew_interval=10.0, status_interval=300.0, lease_duration=40,
                           max_container_restart_period=None, rotate_certificates=False, server_tls_bootstrap=False,
                           runtime=SimpleNamespace(name="simulated", cluster_dns=("10.96.0.10",)),
                           api_limit=None, event_limit=None, pod_pids_limit=-1,
                           status=lambda: {"nodeInfo": info}, volumes=SimpleNamespace(claims={}, host_paths=False, state={}),
                           claims=SimpleNamespace(metrics=DRAMetrics(clock, lambda: {"<any>": 0})), pod_resources=None,
                           devices=DeviceManager(),
                           workers={"u1": SimpleNamespace(pod=pod, container_root=lambda name: root,
                                                          log_sizes=lambda name: [5000, 100],
                                                          etc_hosts=lambda: "127.0.0.1\tlocalhost\n"),
                                    "u2": SimpleNamespace(pod=pending)},
                           lifecycle_http_fallbacks=0, lifecycle_sleeps_cut=0,
                           admission_rejections={}, preemptions={}, sync_loop_at=None,
                           faults=Faults())
    fake.eviction = EvictionManager(fake)
    fake.worker = fake.workers.get  # (no static pods: a worker is found by its pod's UID)
    return fake


GET = SimpleNamespace(method="GET", query=MultiDict(), headers=CIMultiDict())


async def body(server, path, request=GET):
    resp = await server.serve(request, path)
    return resp.status, resp.body.decode() if isinstance(resp.body, bytes) else resp.text


def sample(text: str, series: str) -> float:
    return float(next(line for line in text.splitlines() if line.startswith(series + " ")).split()[1])


async def test_cpu_seconds_are_the_usage_integrated_since_each_start():
    clock = VirtualClock(start=START)
    server = KubeletServer(agent(clock), START)
    await clock.advance(10)
    _, text = await body(server, "/metrics/resource")
    # half the 2-CPU request for 10 s; the node adds the system's 100m over the 10 s since it started
    assert sample(text, 'container_cpu_usage_seconds_total{container="main",namespace="ml",pod="train"}') == 10
    assert sample(text, "node_cpu_usage_seconds_total") == 11
    assert "\nnode_cpu_usage_seconds_total 11 " in text, "client_golang's numbers: 11, not 11.0"
    assert sample(text, 'pod_memory_working_set_bytes{namespace="ml",pod="train"}') == 512 * 2**20
    status, out = await body(server, "/stats/summary")
    summary = orjson.loads(out)
    assert [p["podRef"]["name"] for p in summary["pods"]] == ["train"], "running pods only"
    assert summary["pods"][0]["cpu"] == {"time": clock.rfc3339(), "usageNanoCores": 1_000_000_000,
                                         "usageCoreNanoSeconds": 10_000_000_000}
    assert summary["node"]["memory"]["availableBytes"] == 16 * 2**30 - 512 * 2**20 - 512 * 2**20
    assert summary["pods"][0]["containers"][0]["rootfs"] == {"time": clock.rfc3339(), "usedBytes": 8192}
    assert summary["pods"][0]["containers"][0]["logs"] == {"time": clock.rfc3339(), "usedBytes": 12288}
    assert summary["pods"][0]["ephemeral-storage"] == {"time": clock.rfc3339(), "usedBytes": 8192 + 12288 + 4096}
    assert summary["pods"][0]["process_stats"] == {"process_count": 1}  # a simulated container's one process
    # the node's filesystem (the images' too: a simulated image takes no disk), its inodes (one per
    # 16 KiB of it) less the pod's files: /tmp/out, two log files, etc-hosts; and its processes
    fs = {"time": clock.rfc3339(), "capacityBytes": 2**30, "availableBytes": 2**30 - 24576, "usedBytes": 24576,
          "inodes": 65536, "inodesFree": 65536 - 4, "inodesUsed": 4}
    assert (summary["node"]["fs"], summary["node"]["runtime"]["imageFs"]) == (
        fs, {**fs, "usedBytes": 0, "inodesUsed": 0})
    assert summary["node"]["rlimit"] == {"time": clock.rfc3339(), "maxpid": PID_MAX, "curproc": 1}
    _, text = await body(server, "/metrics/cadvisor")
    assert sample(text, 'container_cpu_usage_seconds_total{container="main",cpu="total",id="/kubepods/podu1/abc",'
                        'image="docker.io/library/trainer:1",name="abc",namespace="ml",pod="train"}') == 10
    assert sample(text, 'machine_cpu_cores{boot_id="b",machine_id="m",system_uuid="s"}') == 8
    prometheus3 = SimpleNamespace(method="GET", query={}, headers=CIMultiDict({
        "Accept": "text/plain;version=1.0.0;escaping=allow-utf-8;q=0.3,text/plain;version=0.0.4;q=0.2",
        "Accept-Encoding": "gzip"}))
    for path in ("/metrics", "/metrics/resource", "/metrics/cadvisor"):  # promhttp's answers
        plain, scraped = await server.serve(GET, path), await server.serve(prometheus3, path)
        assert plain.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8; escaping=underscores"
        assert scraped.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8; escaping=allow-utf-8"
        # gzipped for a scrape that accepts it (Prometheus's does), Vary on both either way
        assert "Content-Encoding" not in plain.headers and scraped.headers["Content-Encoding"] == "gzip"
        assert plain.headers.getall("Vary") == scraped.headers.getall("Vary") == ["Accept", "Accept-Encoding"]
        assert gzip.decompress(scraped.body) == plain.body
    _, text = await body(server, "/metrics")
    assert "\nkubelet_running_pods 1\n" in text and 'kubelet_running_containers{container_state="running"} 1' in text
    # families by name: the DRA claims gauge (no claims in use) before the kubelet_* ones; the
    # lifecycle hooks' fallback counter, registered unconditionally, at 0
    assert text.startswith("# HELP dra_resource_claims_in_use [ALPHA] ") and \
        '\ndra_resource_claims_in_use{driver_name="<any>"} 0\n# HELP kubelet_lifecycle_handler_http_fallbacks_total ' \
        in text and "\nkubelet_lifecycle_handler_http_fallbacks_total 0\n# HELP kubelet_node_name " in text
    # the build, as the kubelet's main registers it (after the kubelet_* families, by name)
    assert "\nkubelet_sleep_action_terminated_early_total 0\n# HELP kubernetes_build_info [ALPHA] " in text
    assert '\nkubernetes_build_info{build_date="2026-11-30T00:00:00Z",compiler="gc",git_commit="' + "0" * 40 + \
        '",git_tree_state="clean",git_version="v1.37.0-nanokube",go_version="go1.25.0",major="1",minor="37",' \
        'platform="linux/amd64"} 1\n' in text


async def test_a_memory_pressure_faults_leak_is_in_the_nodes_working_set():
    """What the eviction manager observes of a memory-pressure fault (half its 100Mi threshold
    left) is what the summary, /metrics/resource and cAdvisor's root cgroup report."""
    clock = VirtualClock(start=START)
    node = agent(clock)
    node.faults = Faults(pressure=frozenset({"MemoryPressure"}))
    server = KubeletServer(node, START)
    leaked = 16 * 2**30 - 50 * 2**20
    summary = orjson.loads((await body(server, "/stats/summary"))[1])
    assert (summary["node"]["memory"]["workingSetBytes"], summary["node"]["memory"]["availableBytes"]) == \
        (leaked, 50 * 2**20)
    assert sample((await body(server, "/metrics/resource"))[1], "node_memory_working_set_bytes") == leaked
    root = 'container_memory_working_set_bytes{container="",id="/",image="",name="",namespace="",pod=""}'
    assert sample((await body(server, "/metrics/cadvisor"))[1], root) == leaked
    # the pods' own usage is theirs alone
    assert summary["pods"][0]["memory"]["workingSetBytes"] == 512 * 2**20


async def test_healthz_lists_excludes_and_serves_each_check():
    clock = VirtualClock(start=START)
    node = agent(clock)
    server = KubeletServer(node, START)
    verbose = SimpleNamespace(method="GET", query=MultiDict(verbose=""), headers=CIMultiDict())
    assert await body(server, "/healthz", verbose) == (200, "[+]ping ok\n[+]log ok\n[+]syncloop ok\nhealthz check passed\n")
    excluded = SimpleNamespace(method="GET", query=MultiDict([("verbose", "1"), ("exclude", "log"), ("exclude", "nope")]),
                               headers=CIMultiDict())
    assert await body(server, "/healthz", excluded) == (200, '[+]ping ok\n[+]log excluded: ok\n[+]syncloop ok\n'
                                                             'warn: some health checks cannot be excluded: no matches '
                                                             'for "nope"\nhealthz check passed\n')
    assert (await server.serve(GET, "/healthz")).headers["X-Content-Type-Options"] == "nosniff"
    for check in ("ping", "log", "syncloop"):
        assert await body(server, f"/healthz/{check}") == (200, "ok")
    assert await body(server, "/healthz/other") == (404, "404 page not found\n")
    # the heartbeat loop last went round 5 minutes ago, and a moment more: the sync loop is stuck
    node.sync_loop_at = clock.monotonic()
    await clock.advance(300)
    assert await body(server, "/healthz") == (200, "ok")
    await clock.advance(1)
    assert await body(server, "/healthz/syncloop") == (500, "internal server error: sync Loop took longer than expected\n")
    assert await body(server, "/healthz") == (500, "[+]ping ok\n[+]log ok\n[-]syncloop failed: reason withheld\n"
                                                   "healthz check failed\n")
    excluded = SimpleNamespace(method="GET", query=MultiDict(exclude="syncloop"), headers=CIMultiDict())
    assert await body(server, "/healthz", excluded) == (200, "ok")


async def test_what_the_kubelet_does_not_serve():
    server = KubeletServer(agent(VirtualClock(start=START)), START)
    assert await body(server, "/spec") == (404, "404 page not found\n")
    assert await body(server, "/healthz", SimpleNamespace(method="POST", query={})) == (405, "405: Method Not Allowed")
    assert await body(server, "/containerLogs/ml/gone/main") == (404, 'pod "gone" does not exist\n')
    assert await body(server, "/containerLogs/ml/train/other") == (404, 'container "other" not found in pod "train"\n')
    assert await body(server, "/healthz") == (200, "ok")
    config = orjson.loads((await body(server, "/configz"))[1])["kubeletconfig"]
    assert (config["nodeStatusUpdateFrequency"], config["nodeStatusReportFrequency"], config["maxPods"]) == (
        "10s", "5m0s", 110)
    assert config["podPidsLimit"] == -1, "upstream's default: no limit of a pod's own"
    assert config["crashLoopBackOff"] == {}, "no maxContainerRestartPeriod set"
    # the cluster domain its pods' resolv.conf searches and /etc/hosts names FQDNs in (tools read it here)
    assert (config["clusterDomain"], config["clusterDNS"]) == ("cluster.local", ["10.96.0.10"])


async def test_json_answers_are_written_as_the_kubelet_writes_them():
    """Go's encoding, compact and HTML-escaped, under `Content-Type: application/json`: /pods and
    /runningpods/ through a runtime codec (a trailing newline), /stats/summary and /configz through
    json.Marshal (none); a running pod's metadata without a null creationTimestamp (omitzero)."""
    clock = VirtualClock(start=START)
    a = agent(clock)
    a.workers["u1"].pod["metadata"]["annotations"] = {"note": "a<b&c"}
    a.workers["u1"].name, a.workers["u1"].namespace, a.workers["u1"].uid = "train", "ml", "u1"
    a.workers["u2"].name, a.workers["u2"].namespace, a.workers["u2"].uid = "wait", "ml", "u2"
    server = KubeletServer(a, START)
    for path, end in (("/pods", b"\n"), ("/runningpods/", b"\n"), ("/stats/summary", b"}"), ("/configz", b"}")):
        resp = await server.serve(GET, path)
        assert resp.headers["Content-Type"] == "application/json", path
        assert resp.body.startswith(b'{"') and b'", "' not in resp.body and resp.body.endswith(end), path
    pods = (await server.serve(GET, "/pods")).body
    assert b'"note":"a\\u003cb\\u0026c"' in pods
    running = orjson.loads((await server.serve(GET, "/runningpods/")).body)
    assert running["items"][0]["metadata"] == {"name": "train", "namespace": "ml", "uid": "u1"}
    assert (await server.serve(GET, "/configz")).headers["X-Content-Type-Options"] == "nosniff"
