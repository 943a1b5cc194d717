"""Faults driven by `nanokube fault` (a separate process, over HTTPS) against
`nanokube up`, observed through kubectl and through watches whose event
arrival times (not sleeps) carry the timing assertions."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import urllib.request

import pytest

from nanokube.cli_fault import _API
from nanokube.client import kubeconfig
from nanokube.clock import parse_time
from nanokube.node.faults import ANNOTATION
from tests.e2e.conftest import FAST_HEARTBEATS, running_cluster


@pytest.fixture(scope="module")
def cluster():
    """A cluster whose nodes renew their leases every 0.5s, whose node lifecycle controller
    waits 3s, not 50s, for a heartbeat, and whose pod garbage collector runs every second, not
    every 20 s (half its quarantine, shortened to 2 s)."""
    with running_cluster("faults", env={**FAST_HEARTBEATS, "NANOKUBE_POD_GC_QUARANTINE": "2"}) as c:
        yield c


def fault(c, *args: str) -> str:
    r = subprocess.run([sys.executable, "-m", "nanokube.cli", "fault", *args, "--kubeconfig", c.kubeconfig],
                       check=False, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return r.stdout


def wait_for(check, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got or time.monotonic() > deadline:
            return got
        time.sleep(0.2)


def _node(c, name: str) -> tuple[str, set]:
    n = c.kubectl_json("get", "node", name)
    ready = next(x["status"] for x in n["status"]["conditions"] if x["type"] == "Ready")
    return ready, {(t["key"], t["effect"]) for t in n["spec"].get("taints") or []}


def _running_pod(cluster, name: str) -> dict | None:
    """The pod, while it is Running and not being deleted."""
    r = cluster.kubectl("get", "pod", name, "-o", "json", check=False)
    pod = json.loads(r.stdout) if r.returncode == 0 else None
    return pod if pod and pod["status"].get("phase") == "Running" and \
        not pod["metadata"].get("deletionTimestamp") else None

def test_a_node_that_loses_its_lease_goes_unknown_and_unreachable(cluster):
    assert "lease-stop" in fault(cluster, "node", "gpu-0", "--lease-stop")
    got = wait_for(lambda: (s := _node(cluster, "gpu-0"))[0] == "Unknown" and s)
    assert got, _node(cluster, "gpu-0")
    assert ("node.kubernetes.io/unreachable", "NoExecute") in got[1]
    assert cluster.kubectl("get", "node", "gpu-0", "--no-headers").stdout.split()[1] == "NotReady"
    assert _node(cluster, "gpu-1")[0] == "True"
    fault(cluster, "node", "gpu-0", "--clear")
    assert wait_for(lambda: _node(cluster, "gpu-0") == ("True", set())), _node(cluster, "gpu-0")


def _device_taints(c, node: str, device: str) -> list[dict] | None:
    for s in c.kubectl_json("get", "resourceslices")["items"]:
        if s["spec"].get("nodeName") == node:
            for d in s["spec"].get("devices") or []:
                if d["name"] == device:
                    return d.get("taints") or []
    return None


class Recorder:
    """A watch of one collection over HTTPS, read by a thread that stamps
    each event with its arrival time; the server ends it after a minute."""

    def __init__(self, c, path: str):
        creds = kubeconfig.load(c.kubeconfig)
        rv = _API(creds).request("GET", path)["metadata"]["resourceVersion"]
        self._resp = urllib.request.urlopen(f"{creds.server}{path}?watch=1&resourceVersion={rv}&timeoutSeconds=60",
                                            context=creds.ssl, timeout=90)
        self.events: list[tuple[float, dict]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        try:
            for line in self._resp:
                self.events.append((time.monotonic(), json.loads(line)["object"]))
        except (OSError, ValueError):
            return

    def first(self, match, after: float = 0.0, timeout: float = 30.0) -> tuple[float, dict]:
        """The first event since `after` whose object `match`es, waiting up to `timeout` for it."""
        found = wait_for(lambda: next(((t, o) for t, o in list(self.events) if t >= after and match(o)), None), timeout)
        assert found, f"no matching event in {len(self.events)} seen"
        return found


def _taints_in(obj: dict, node: str, device: str) -> list[dict] | None:
    if obj["spec"].get("nodeName") != node:
        return None
    return next((d.get("taints") or [] for d in obj["spec"].get("devices") or [] if d["name"] == device), None)


def _gpu(c, node: str, index: int) -> str:
    slices = c.kubectl_json("get", "resourceslices")["items"]
    return [d["name"] for s in slices if s["spec"]["driver"] == "gpu.nanokube.io" and s["spec"].get("nodeName") == node
            for d in s["spec"].get("devices") or []][index]


#: how late (seconds) an agent may act on what its Node's watch or its fault plan's timer told it: it acts at
#: once, but on a loaded machine (CI's two workers on two cores) its loop may get to it seconds later
LATE = 5


def test_a_gpu_fault_taints_the_device_at_once_and_recovery_removes_it(cluster):
    device = _gpu(cluster, "gpu-1", 0)
    nodes, slices = Recorder(cluster, "/api/v1/nodes"), Recorder(cluster, "/apis/resource.k8s.io/v1/resourceslices")
    fault(cluster, "gpu", "gpu-1", device, "--kind", "xid")
    _, node = nodes.first(lambda o: f"gpu:{device}:xid" in (o["metadata"].get("annotations") or {}).get(
        ANNOTATION, ""))
    tainted, obj = slices.first(lambda o: bool(_taints_in(o, "gpu-1", device)))
    taints = _taints_in(obj, "gpu-1", device)
    assert [(t["key"], t["effect"]) for t in taints] == [("gpu.nanokube.io/xid", "NoExecute")]
    # on the server's clock: the fault's write, then the taint added (the watch events' arrival in this
    # process adds its own delays on a loaded machine)
    written = max(parse_time(m["time"]) for m in node["metadata"]["managedFields"])
    assert 0 <= parse_time(taints[0]["timeAdded"]) - written <= LATE
    assert _device_taints(cluster, "gpu-1", device) == taints
    fault(cluster, "gpu", "gpu-1", device, "--clear")
    cleared, _ = nodes.first(lambda o: o["metadata"]["name"] == "gpu-1" and ANNOTATION not in (
        o["metadata"].get("annotations") or {}), after=tainted)
    healed, _ = slices.first(lambda o: _taints_in(o, "gpu-1", device) == [], after=tainted)
    assert healed - cleared <= LATE


def _ready(node: dict) -> dict:
    return next(c for c in node["status"]["conditions"] if c["type"] == "Ready")


def test_a_timed_not_ready_heals_by_itself(cluster):
    nodes = Recorder(cluster, "/api/v1/nodes")
    fault(cluster, "node", "gpu-1", "--not-ready", "--for", "2s")
    went, down = nodes.first(lambda o: o["metadata"]["name"] == "gpu-1" and _ready(o)["status"] == "False")
    _, up = nodes.first(lambda o: o["metadata"]["name"] == "gpu-1" and _ready(o)["status"] == "True"
                        and _ready(o)["lastTransitionTime"] >= _ready(down)["lastTransitionTime"], after=went,
                        timeout=30)
    # Ready again at the fault's end (the annotation's until=, to the microsecond), not before; the
    # transition's time is whole seconds
    until = parse_time(down["metadata"]["annotations"][ANNOTATION].split(";until=")[1])
    healed = parse_time(_ready(up)["lastTransitionTime"])
    assert int(until) <= healed <= until + LATE, (until, healed)
    assert cluster.kubectl("get", "node", "gpu-1", "--no-headers").stdout.split()[1] == "Ready"


def test_a_flapping_gpu_fault_toggles_the_taint_until_it_runs_out(cluster):
    device = _gpu(cluster, "gpu-1", 1)
    slices = Recorder(cluster, "/apis/resource.k8s.io/v1/resourceslices")

    def states() -> list[bool]:
        seen = [bool(t) for _, o in list(slices.events) if (t := _taints_in(o, "gpu-1", device)) is not None]
        return [x for i, x in enumerate(seen) if i == 0 or x != seen[i - 1]]

    # on for [0, 2), [4, 6) and [8, 9): an agent that wakes over 2 s late (1 s for the last) skips one, as
    # the plan says what is in effect now, so periods of 2 s leave a loaded machine that much to spare
    fault(cluster, "gpu", "gpu-1", device, "--kind", "ecc", "--flap", "2s", "--for", "9s")
    ended = time.monotonic() + 9  # or before: the command took its since before it returned
    assert wait_for(lambda: time.monotonic() > ended and states()[-1:] == [False] and
                    _device_taints(cluster, "gpu-1", device) == [], timeout=30), states()
    assert 2 <= states().count(True) <= 3 and states()[0] is True, states()


STATEFULSET = """
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  serviceName: db
  replicas: 1
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      terminationGracePeriodSeconds: 5
      containers: [{name: db, image: postgres:16}]
"""

CONTROL_POD = """
apiVersion: v1
kind: Pod
metadata: {{name: db-control}}
spec:
  nodeName: {node}
  terminationGracePeriodSeconds: 5
  containers: [{{name: db, image: postgres:16}}]
"""


def test_a_silenced_kubelet_leaves_its_deleted_pod_terminating_until_it_returns(cluster):
    """Upstream's pods on a node whose kubelet is gone stay Terminating (deletionTimestamp set,
    not removed) until the kubelet returns: no replacement for the StatefulSet's ordinal meanwhile,
    its at-most-one-pod-per-ordinal guarantee. A lease-stopped node writes nothing, then resumes."""
    cluster.kubectl("apply", "-f", "-", input=STATEFULSET)
    pod = wait_for(lambda: _running_pod(cluster, "db-0"), 30)
    assert pod, "db-0 never ran"
    node, uid = pod["spec"]["nodeName"], pod["metadata"]["uid"]
    # the same pod on a live kubelet, deleted together with db-0: its kubelet's deletion finishing
    # is the time the silent one had to finish db-0's
    other = next(n for n in ("gpu-0", "gpu-1") if n != node)
    cluster.kubectl("apply", "-f", "-", input=CONTROL_POD.format(node=other))
    assert wait_for(lambda: _running_pod(cluster, "db-control"), 30), "db-control never ran"
    fault(cluster, "node", node, "--lease-stop")
    try:
        cluster.kubectl("delete", "pod", "db-0", "db-control", "--wait=false")
        assert wait_for(lambda: cluster.kubectl("get", "pod", "db-control", check=False).returncode != 0, 30), \
            "the live kubelet never finished its pod's deletion"
        held = cluster.kubectl_json("get", "pod", "db-0")
        assert held["metadata"]["uid"] == uid and held["metadata"].get("deletionTimestamp")
        assert held["status"]["phase"] == "Running", "the silent kubelet wrote the pod's status"
        assert len(cluster.kubectl_json("get", "pods", "-l", "app=db")["items"]) == 1
    finally:
        fault(cluster, "node", node, "--clear")
    replaced = wait_for(lambda: (p := _running_pod(cluster, "db-0")) and p["metadata"]["uid"] != uid and p, 30)
    assert replaced, cluster.kubectl("get", "pods", "-l", "app=db", "-o", "wide").stdout
    cluster.kubectl("delete", "statefulset", "db")


def test_an_out_of_service_taint_lets_the_silenced_nodes_terminating_pod_go(cluster):
    """The way out upstream gives for a node that will not return (non-graceful node shutdown):
    tainted node.kubernetes.io/out-of-service while NotReady, its Terminating pods are
    force-deleted by the pod garbage collector, and the StatefulSet makes the ordinal again
    elsewhere, while the node's kubelet still says nothing."""
    cluster.kubectl("apply", "-f", "-", input=STATEFULSET.replace("db", "queue"))
    pod = wait_for(lambda: _running_pod(cluster, "queue-0"), 30)
    assert pod, "queue-0 never ran"
    node, uid = pod["spec"]["nodeName"], pod["metadata"]["uid"]
    taint = "node.kubernetes.io/out-of-service=nodeshutdown:NoExecute"
    fault(cluster, "node", node, "--lease-stop")
    try:
        assert wait_for(lambda: _node(cluster, node)[0] == "Unknown"), _node(cluster, node)
        cluster.kubectl("delete", "pod", "queue-0", "--wait=false")
        assert cluster.kubectl_json("get", "pod", "queue-0")["metadata"]["uid"] == uid
        cluster.kubectl("taint", "node", node, taint)
        # the pod garbage collector runs every second here
        replaced = wait_for(lambda: (p := _running_pod(cluster, "queue-0")) and p["metadata"]["uid"] != uid and p, 60)
        assert replaced, cluster.kubectl("get", "pods", "-l", "app=queue", "-o", "wide").stdout
        assert replaced["spec"]["nodeName"] != node
    finally:
        cluster.kubectl("taint", "node", node, f"{taint}-", check=False)
        fault(cluster, "node", node, "--clear")
    cluster.kubectl("delete", "statefulset", "queue")
    assert wait_for(lambda: _node(cluster, node)[0] == "True"), _node(cluster, node)


def test_a_node_under_memory_pressure_refuses_a_best_effort_pod_bound_to_it(cluster):
    """`nanokube fault node --memory-pressure`: the kubelet reports MemoryPressure (the node
    lifecycle controller taints the node for it), and a best-effort pod bound to it by name is
    refused by the kubelet's eviction manager: Failed, Evicted, with a Warning event."""
    fault(cluster, "node", "gpu-1", "--memory-pressure")
    try:
        assert wait_for(lambda: ("node.kubernetes.io/memory-pressure", "NoSchedule") in _node(cluster, "gpu-1")[1])
        cluster.kubectl("run", "squeezed", "--image=busybox:1.36", "--restart=Never",
                        '--overrides={"spec": {"nodeName": "gpu-1"}}', "--", "sleep", "300")
        message = "The node had condition: [MemoryPressure]. "
        got = wait_for(lambda: (p := cluster.kubectl_json("get", "pod", "squeezed"))["status"].get("phase") == "Failed"
                       and p["status"])
        assert got and (got["reason"], got["message"]) == ("Evicted", "Pod was rejected: " + message), got
        events = cluster.kubectl_json("get", "events", "--field-selector", "involvedObject.name=squeezed")["items"]
        assert [(e["type"], e["reason"], e["message"]) for e in events] == [("Warning", "Evicted", message)]
    finally:
        fault(cluster, "node", "gpu-1", "--clear")
        cluster.kubectl("delete", "pod", "squeezed", "--ignore-not-found", "--wait=false")
    assert wait_for(lambda: _node(cluster, "gpu-1") == ("True", set())), _node(cluster, "gpu-1")


def test_a_node_shutting_down_terminates_its_pods_and_refuses_new_ones(cluster):
    """`nanokube fault node --shutdown`: the node goes NotReady ("node is shutting down"), its pod
    ends Failed as Terminated, a pod bound to it then is refused (NodeShutdown); --clear cancels."""
    bound = '{"spec": {"nodeName": "gpu-1", "terminationGracePeriodSeconds": 0}}'
    cluster.kubectl("run", "doomed", "--image=busybox:1.36", "--restart=Never", f"--overrides={bound}",
                    "--", "sleep", "300")
    assert wait_for(lambda: _running_pod(cluster, "doomed"))
    fault(cluster, "node", "gpu-1", "--shutdown")
    try:
        def phase(name: str, want: str):
            return lambda: (p := cluster.kubectl_json("get", "pod", name))["status"].get("phase") == want and p["status"]
        got = wait_for(phase("doomed", "Failed"))
        assert got and (got["reason"], got["message"]) == (
            "Terminated", "Pod was terminated in response to imminent node shutdown."), got
        ready = next(c for c in cluster.kubectl_json("get", "node", "gpu-1")["status"]["conditions"]
                     if c["type"] == "Ready")
        assert (ready["status"], ready["message"]) == ("False", "node is shutting down")
        cluster.kubectl("run", "refused", "--image=busybox:1.36", "--restart=Never", f"--overrides={bound}",
                        "--", "sleep", "300")
        got = wait_for(phase("refused", "Failed"))
        assert got and got["reason"] == "NodeShutdown", got
    finally:
        fault(cluster, "node", "gpu-1", "--clear")
        cluster.kubectl("delete", "pod", "doomed", "refused", "--ignore-not-found", "--wait=false")
    assert wait_for(lambda: _node(cluster, "gpu-1")[0] == "True"), _node(cluster, "gpu-1")
