"""`nanokube controller-manager` in its own processes over HTTPS: with
`up --controllers=''` the external managers do the work, one at a time
through the kube-controller-manager Lease; when the leader stops, the
standby takes over. `nanokube metrics set/get` drive the metrics store."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import running_cluster, wait_for

#: the outcome depends on the store: this module runs again on etcd
pytestmark = pytest.mark.store


def manager(c, log: Path) -> subprocess.Popen:
    with open(log, "ab") as out:
        return subprocess.Popen([sys.executable, "-m", "nanokube.cli", "controller-manager", "--kubeconfig",
                                 c.kubeconfig, "--leader-elect-lease-duration", "4s", "--leader-elect-renew-deadline",
                                 "3s", "--leader-elect-retry-period", "500ms", "--secure-port", "0"],
                                stdout=out, stderr=out, stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def bare():
    with running_cluster("kcm", ("--controllers", "")) as c:
        yield c


def ready_replicas(c, name) -> int:
    return int(c.kubectl("get", "deployment", name, "-o", "jsonpath={.status.readyReplicas}").stdout or 0)


def lease(c) -> tuple[str, str]:
    """The lease's holder and last renewal ("", "" while there is none)."""
    r = c.kubectl("get", "lease", "-n", "kube-system", "kube-controller-manager", "-o",
                  "jsonpath={.spec.holderIdentity} {.spec.renewTime}", check=False)
    return tuple(r.stdout.split(" ")) if r.returncode == 0 else ("", "")


def identity(log: Path) -> str:
    """The identity a manager campaigns as, once it has said so."""
    found = re.search(r"attempting to acquire leader lease kube-system/kube-controller-manager as (\S+)",
                      log.read_text())
    return found.group(1) if found else ""


def test_external_managers_take_turns_through_the_lease(bare):
    c = bare
    c.kubectl("create", "deployment", "web", "--image=nginx", "--replicas=2")
    logs = [c.data_dir / "kcm-1.log", c.data_dir / "kcm-2.log"]
    procs = [manager(c, logs[0])]
    try:
        leader = wait_for(lambda: lease(c)[0])
        assert leader == identity(logs[0])
        wait_for(lambda: ready_replicas(c, "web") == 2)
        procs.append(manager(c, logs[1]))
        standby = wait_for(lambda: identity(logs[1]), 30, "the second manager campaigning")
        # it asks every 0.5 s from then on: while the leader renews twice more it would have
        # taken the lease, had it not stood by (and the leader's renewals would have stopped)
        renewals = set()

        def renewed_twice():
            holder, renewed = lease(c)
            assert holder == leader, "the second manager stands by"
            renewals.add(renewed)
            return len(renewals) >= 3
        wait_for(renewed_twice, what="the leader renewing")

        procs[0].terminate()
        assert procs[0].wait(20) == 0
        wait_for(lambda: lease(c)[0] == standby)
        c.kubectl("scale", "deployment", "web", "--replicas=3")
        wait_for(lambda: ready_replicas(c, "web") == 3)
        # the manager reports its controllers once every one's informers have synced
        wait_for(lambda: "controllers: " in logs[1].read_text(), 30, "second manager running")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    text = logs[1].read_text()
    running = re.search(r"running (\d+) controllers: (.*)", text)
    assert "became leader" in text and running, text
    names = running.group(2).split(", ")
    assert int(running.group(1)) == len(names) and {"deployment-controller", "replicaset-controller", "service-lb-controller"} <= set(names)
    # each controller has a client of its own, named as kube-controller-manager's client builder names it
    writes = [json.loads(line) for line in (c.data_dir / "audit.log").read_text().splitlines()]
    agents = {(e["verb"], e["objectRef"]["resource"]): e["userAgent"] for e in writes
              if e["userAgent"].startswith("kube-controller-manager/")}
    assert re.fullmatch(r"kube-controller-manager/v1\.37\.0 \(\w+/\w+\) kubernetes/0000000/replicaset-controller",
                        agents["create", "pods"]), agents
    assert agents["create", "replicasets"].endswith("/deployment-controller")
    assert agents["update", "leases"].endswith("/leader-election")
    # nothing acts without a controller manager: every pod and replica set was made by the external ones
    made = {(e["objectRef"]["resource"], e["userAgent"]) for e in writes
            if e["verb"] == "create" and e["objectRef"]["resource"] in ("pods", "replicasets")
            and "subresource" not in e["objectRef"]}
    assert all(re.fullmatch(r"kube-controller-manager/v1\.37\.0 \(\w+/\w+\) kubernetes/0000000/"
                            r"(replicaset|deployment)-controller", agent) for _, agent in made), made


def test_an_external_garbage_collector_collects_a_new_crds_objects_at_once(bare):
    """A CRD created after the external manager started: its garbage collector reads discovery at the
    CRD's event and monitors the new resource then, so a custom child goes with its custom parent in
    a background and in a foreground deletion within seconds, not at the collector's next 30 s look
    (upstream's Sync; each wait here is 10 s)."""
    c, log = bare, bare.data_dir / "kcm-gc.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "nanokube.cli", "controller-manager", "--kubeconfig", c.kubeconfig,
                                 "--leader-elect=false", "--controllers=garbagecollector", "--secure-port", "0"],
                                stdout=out, stderr=out, stdin=subprocess.DEVNULL)
    group = "late.example.com"
    try:
        wait_for(lambda: "controllers: " in log.read_text(), 30, "the manager running")
        c.kubectl("apply", "-f", "-", input=json.dumps({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"widgets.{group}"}, "spec": {
                "group": group, "scope": "Namespaced", "names": {"plural": "widgets", "kind": "Widget"},
                "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                    "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}))
        c.kubectl("wait", "--for", "condition=Established", f"crd/widgets.{group}", "--timeout=20s")
        for cascade in ("background", "foreground"):
            widget = {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "parent", "namespace": "default"}}
            c.kubectl("apply", "-f", "-", input=json.dumps(widget))
            uid = c.kubectl_json("get", f"widgets.{group}", "parent")["metadata"]["uid"]
            widget["metadata"] = {"name": "child", "namespace": "default", "ownerReferences": [{
                "apiVersion": f"{group}/v1", "kind": "Widget", "name": "parent", "uid": uid, "blockOwnerDeletion": True}]}
            c.kubectl("apply", "-f", "-", input=json.dumps(widget))
            owners = c.kubectl_json("get", f"widgets.{group}", "child")["metadata"]["ownerReferences"]
            assert [o["uid"] for o in owners] == [uid]
            c.kubectl("delete", f"widgets.{group}", "parent", f"--cascade={cascade}", "--wait=false")
            for name in ("child", "parent"):
                wait_for(lambda: c.kubectl("get", f"widgets.{group}", name, check=False).returncode != 0, 10,
                         f"{cascade} deletion: {name} gone")
        assert proc.poll() is None, log.read_text()[-2000:]  # (collected by the manager, still running)
    finally:
        proc.terminate()
        proc.wait(20)


def test_unknown_controller_is_refused(bare):
    r = subprocess.run([sys.executable, "-m", "nanokube.cli", "controller-manager", "--kubeconfig", bare.kubeconfig,
                        "--controllers", "*,nodeipam"], check=False, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert r.stderr.splitlines()[-1] == ('nanokube controller-manager: --controllers: '
                                         '"nodeipam" is not in the list of known controllers')


def test_a_client_limit_without_a_burst_is_refused(bare):
    """client-go's NewForConfig refuses a positive --kube-api-qps with no --kube-api-burst."""
    r = subprocess.run([sys.executable, "-m", "nanokube.cli", "controller-manager", "--kubeconfig", bare.kubeconfig,
                        "--kube-api-qps", "10", "--kube-api-burst", "0"], check=False, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2
    assert r.stderr.splitlines()[-1] == ("nanokube controller-manager: burst is required to be greater than 0 when "
                                         "RateLimiter is not set and QPS is set to greater than 0")


def test_metrics_cli_sets_series_the_metrics_api_serves(bare):
    """(On the module's cluster: the API server serves the metrics, with or without controllers.)"""
    def metrics(*args):
        r = subprocess.run([sys.executable, "-m", "nanokube.cli", "metrics", *args, "--kubeconfig", bare.kubeconfig],
                           check=False, capture_output=True, text=True, timeout=60)
        return r
    assert metrics("set", "queue_length", "12").returncode == 0
    assert metrics("set", "queue_length", "3", "--labels", "queue=gpu").returncode == 0
    out = metrics("get", "queue_length").stdout.splitlines()
    assert out[0].split() == ["LABELS", "VALUE"] and sorted(line.split() for line in out[1:]) == [
        ["<none>", "12"], ["queue=gpu", "3"]]
    assert metrics("get", "queue_length", "-l", "queue=gpu").stdout.splitlines()[1].split() == ["queue=gpu", "3"]
    bad = metrics("set", "queue_length", "lots")
    assert bad.returncode == 2 and "invalid quantity" in bad.stderr
