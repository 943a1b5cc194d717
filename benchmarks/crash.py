"""Crash and restart: `kill -9` of `nanokube up` under a mixed write load, then a restart on
the same data dir and checks that nothing acknowledged was lost and nothing is half there.

    .venv/bin/python -m benchmarks.crash --cycles 20 [--store etcd] [--seed 1]

Each cycle starts the server, runs a few writers (ConfigMap creates/updates/deletes,
server-side apply, Services with ClusterIPs and node ports, pods held by a finalizer with
status patches, CRDs and their objects, namespaces, Deployment/StatefulSet scaling, Jobs)
and a watcher, kills the server at a random moment, restarts it and checks: every write
answered 2xx is there with its resourceVersion (an unanswered one may or may not be);
every object has its managedFields; the IPAddresses equal the Services' ClusterIPs and new
Services get values no Service holds; every CRD is Established and served; revisions go on
past the last one seen; a watch from the last one seen resumes in order or answers 410;
namespaces being deleted go; then the controllers converge (a Deployment's pods, a
StatefulSet's ordinals, a Job's completions), running containers keep their start time and
restart count, and the leader leases are renewed. Startup times after a crash and after a
clean stop are printed.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import shutil
import signal
import tempfile
import threading
import time
from pathlib import Path

from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from tests.e2e.conftest import start_cluster

NS = "crash"
FINALIZER = "crash.test/hold"
GROUP = "crash.test"


class Ledger:
    """Per object: the last write answered 2xx ('present', rv) or ('absent', None); an object
    with a write in flight at the kill is uncertain until the next cycle reads it back."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.known: dict[tuple[str, str], tuple[str, str | None]] = {}
        self.uncertain: set[tuple[str, str]] = set()
        self.max_rv = 0

    def ack(self, key, state, rv=None):
        with self.lock:
            self.known[key] = (state, rv)
            self.uncertain.discard(key)
            if rv:
                self.max_rv = max(self.max_rv, int(rv))

    def inflight(self, key):
        with self.lock:
            self.uncertain.add(key)


def api(c):
    """A client of its own (the kubernetes client's pools are not shared between threads)."""
    ac = c.client()
    ac.configuration.retries = False
    return ac


def writer(stop, ac, ledger, kind, rnd, errors, tag=0):
    core, custom = client.CoreV1Api(ac), client.CustomObjectsApi(ac)
    n = 0
    while not stop.is_set():
        n += 1
        name = f"{kind}-{tag}-{rnd.randrange(12)}"
        key = (kind, name)
        state = ledger.known.get(key, ("absent", None))[0] if key not in ledger.uncertain else None
        ledger.inflight(key)
        try:
            if kind == "cm":
                if state == "absent":
                    o = core.create_namespaced_config_map(NS, {"metadata": {"name": name}, "data": {"n": str(n)}})
                elif rnd.random() < 0.3:
                    core.delete_namespaced_config_map(name, NS)
                    ledger.ack(key, "absent")
                    continue
                else:
                    o = core.patch_namespaced_config_map(name, NS, {"data": {"n": str(n)}})
            elif kind == "ssa":
                body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": NS},
                        "data": {f"k{n % 3}": str(n)}}
                o = core.patch_namespaced_config_map(name, NS, body, field_manager="crash", force=True,
                                                     _content_type="application/apply-patch+yaml")
            elif kind == "svc":
                if state == "absent":
                    typ = rnd.choice(["ClusterIP", "NodePort"])
                    o = core.create_namespaced_service(NS, {"metadata": {"name": name}, "spec": {
                        "type": typ, "selector": {"app": name}, "ports": [{"port": 80}]}})
                else:
                    core.delete_namespaced_service(name, NS)
                    ledger.ack(key, "absent")
                    continue
            elif kind == "pod":
                if state == "absent":
                    o = core.create_namespaced_pod(NS, {"metadata": {"name": name, "finalizers": [FINALIZER]}, "spec": {
                        "schedulerName": "nobody", "containers": [{"name": "c", "image": "busybox"}]}})
                else:
                    cur = core.read_namespaced_pod(name, NS)
                    if cur.metadata.deletion_timestamp:
                        o = core.patch_namespaced_pod(name, NS, {"metadata": {"finalizers": None}})
                        ledger.ack(key, "absent")
                        continue
                    if rnd.random() < 0.5:
                        o = core.patch_namespaced_pod_status(name, NS, {"status": {"conditions": [
                            {"type": "crash.test/Seen", "status": "True", "reason": f"N{n}"}]}})
                    else:
                        o = core.delete_namespaced_pod(name, NS)
                        ledger.ack(key, "deleting", o.metadata.resource_version)
                        continue
            elif kind == "cr":
                if state == "absent":
                    o = custom.create_namespaced_custom_object(GROUP, "v1", NS, "widgets", {
                        "apiVersion": f"{GROUP}/v1", "kind": "Widget", "metadata": {"name": name}, "spec": {"n": n}})
                elif rnd.random() < 0.3:
                    custom.delete_namespaced_custom_object(GROUP, "v1", NS, "widgets", name)
                    ledger.ack(key, "absent")
                    continue
                else:
                    o = custom.patch_namespaced_custom_object(GROUP, "v1", NS, "widgets", name, {"spec": {"n": n}})
                ledger.ack(key, "present", o["metadata"]["resourceVersion"])
                continue
            ledger.ack(key, "present", o.metadata.resource_version)
        except ApiException as e:
            if e.status in (404, 409):  # a race with our own earlier uncertain write: read back next cycle
                continue
            if e.status in (500, 503, 504, 0) or stop.is_set():
                return
            errors.append(f"{kind} {name}: {e.status} {e.body[:200] if e.body else ''}")
            return
        except Exception:
            return


def churn(stop, ac, ledger, rnd, cycle):
    """CRDs, namespaces and scaling: what the controllers and the apiextensions server act on."""
    apps, ext, core, batch = (client.AppsV1Api(ac), client.ApiextensionsV1Api(ac), client.CoreV1Api(ac),
                              client.BatchV1Api(ac))
    try:
        batch.create_namespaced_job(NS, {"metadata": {"name": f"job-{cycle}"}, "spec": {
            "completions": 3, "parallelism": 2, "template": {
                "metadata": {"annotations": {"sim.nanokube.io/run-seconds": "1"}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}})
        apps.create_namespaced_deployment(NS, {"metadata": {"name": f"fg-{cycle}"}, "spec": {
            "replicas": 2, "selector": {"matchLabels": {"app": f"fg-{cycle}"}}, "template": {
                "metadata": {"labels": {"app": f"fg-{cycle}"}},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}})
        k = 0
        while not stop.is_set():
            k += 1
            if k == 3:  # foreground deletion (the GC's finalizer) and a CRD's deletion with its objects
                apps.delete_namespaced_deployment(f"fg-{cycle}", NS, propagation_policy="Foreground")
                with contextlib.suppress(ApiException):
                    client.CustomObjectsApi(ac).create_namespaced_custom_object(
                        GROUP, "v1", NS, f"g{cycle}x1", {"apiVersion": f"{GROUP}/v1", "kind": f"G{cycle}x1",
                                                         "metadata": {"name": "x"}})
                ext.delete_custom_resource_definition(f"g{cycle}x1.{GROUP}")
            apps.patch_namespaced_deployment_scale("web", NS, {"spec": {"replicas": rnd.randint(1, 4)}})
            apps.patch_namespaced_stateful_set_scale("db", NS, {"spec": {"replicas": rnd.randint(1, 3)}})
            if k <= 2:
                ext.create_custom_resource_definition(crd(f"g{cycle}x{k}"))
            core.create_namespace({"metadata": {"name": f"ns-{cycle}-{k}"}})
            core.create_namespaced_config_map(f"ns-{cycle}-{k}", {"metadata": {"name": "x"}})
            core.delete_namespace(f"ns-{cycle}-{k}")
            time.sleep(0.2)
    except Exception:
        return


def crd(plural, group=GROUP, kind=None):
    kind = kind or plural.capitalize()
    return {"metadata": {"name": f"{plural}.{group}"}, "spec": {
        "group": group, "scope": "Namespaced",
        "names": {"plural": plural, "singular": plural, "kind": kind, "listKind": kind + "List"},
        "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
            "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}


def watcher(stop, ac, seen):
    """Watches the namespace's ConfigMaps, keeping the last resourceVersion seen."""
    core = client.CoreV1Api(ac)
    try:
        for ev in watch.Watch().stream(core.list_namespaced_config_map, NS, _request_timeout=60,
                                       resource_version=seen.get("rv") or None, allow_watch_bookmarks=False):
            seen["rv"] = ev["object"].metadata.resource_version
            if stop.is_set():
                return
    except Exception:
        return


def setup(ac):
    core, apps, ext = client.CoreV1Api(ac), client.AppsV1Api(ac), client.ApiextensionsV1Api(ac)
    core.create_namespace({"metadata": {"name": NS}})
    ext.create_custom_resource_definition(crd("widgets", kind="Widget"))
    tmpl = {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    apps.create_namespaced_deployment(NS, {"metadata": {"name": "web"}, "spec": {
        "replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "template": tmpl}})
    stmpl = {"metadata": {"labels": {"app": "db"}}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    apps.create_namespaced_stateful_set(NS, {"metadata": {"name": "db"}, "spec": {
        "replicas": 2, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}}, "template": stmpl}})
    wait(lambda: _served(ac, "widgets"), 30, "widgets served")


def _served(ac, plural):
    try:
        client.CustomObjectsApi(ac).list_namespaced_custom_object(GROUP, "v1", NS, plural)
        return True
    except ApiException:
        return False


def wait(check, timeout, what):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            got = check()
        except Exception as e:  # noqa: BLE001 (reported if it never settles)
            got, last = None, e
        if got:
            return got
        time.sleep(0.3)
    raise AssertionError(f"{what} never held ({last})")


def check(ac, ledger, seen, before, problems):
    core, custom, ext, net = (client.CoreV1Api(ac), client.CustomObjectsApi(ac), client.ApiextensionsV1Api(ac),
                              client.NetworkingV1Api(ac))
    cms = {o.metadata.name: o for o in core.list_namespaced_config_map(NS).items}
    pods = {o.metadata.name: o for o in core.list_namespaced_pod(NS).items}
    svcs = {o.metadata.name: o for o in core.list_namespaced_service(NS).items}
    crs = {o["metadata"]["name"]: o for o in custom.list_namespaced_custom_object(GROUP, "v1", NS, "widgets")["items"]}
    tables = {"cm": cms, "ssa": cms, "svc": svcs, "pod": pods, "cr": crs}
    for (kind, name), (state, rv) in list(ledger.known.items()):
        if (kind, name) in ledger.uncertain:
            continue
        obj = tables[kind].get(name)
        got_rv = (obj["metadata"]["resourceVersion"] if isinstance(obj, dict) else obj.metadata.resource_version) if obj else None
        if state == "absent" and obj is not None:
            problems.append(f"{kind}/{name}: deleted (acknowledged) but present at {got_rv}")
        elif state in ("present", "deleting") and obj is None:
            problems.append(f"{kind}/{name}: acknowledged at {rv} but lost")
        elif state == "present" and got_rv != rv or state == "deleting" and int(got_rv) < int(rv):
            problems.append(f"{kind}/{name}: acknowledged at {rv}, found at {got_rv}")
    # read back what was in flight (and what the pod GC wrote to terminating unscheduled pods)
    for kind, name in set(ledger.known) | ledger.uncertain:
        obj = tables[kind].get(name)
        if obj is None:
            ledger.ack((kind, name), "absent")
        elif kind == "cr":
            ledger.ack((kind, name), "present", obj["metadata"]["resourceVersion"])
        else:
            ledger.ack((kind, name), "deleting" if obj.metadata.deletion_timestamp else "present",
                       obj.metadata.resource_version)
    for table in (cms, pods, svcs):
        for o in table.values():
            if not o.metadata.managed_fields:
                problems.append(f"{o.kind if hasattr(o, 'kind') else ''} {o.metadata.name}: no managedFields")
    for o in crs.values():
        if not o["metadata"].get("managedFields"):
            problems.append(f"widget {o['metadata']['name']}: no managedFields")
    # revisions go on; a watch from the last revision seen resumes in order or is told 410
    fresh = core.create_namespaced_config_map(NS, {"metadata": {"generateName": "probe-"}})
    if int(fresh.metadata.resource_version) <= ledger.max_rv:
        problems.append(f"revision went back: {fresh.metadata.resource_version} <= {ledger.max_rv}")
    if seen.get("rv"):
        last = int(seen["rv"])
        try:
            for ev in watch.Watch().stream(core.list_namespaced_config_map, NS, resource_version=seen["rv"],
                                           timeout_seconds=2, _request_timeout=10):
                rv = int(ev["object"].metadata.resource_version)
                if ev["type"] == "ERROR":
                    break
                if rv <= last:
                    problems.append(f"watch from {seen['rv']}: event at {rv} out of order after {last}")
                last = rv
        except ApiException as e:
            if e.status != 410:
                problems.append(f"watch from {seen['rv']}: {e.status}")
    core.delete_namespaced_config_map(fresh.metadata.name, NS)
    # allocations: IPAddresses equal the ClusterIPs; new Services collide with none
    def ips_agree():
        svc_ips = {ip for s in core.list_service_for_all_namespaces().items for ip in (s.spec.cluster_ips or [])
                   if ip != "None"}
        held = {a.metadata.name for a in net.list_ip_address().items}
        return (svc_ips == held) or None
    try:
        wait(ips_agree, 20, "IPAddresses equal the ClusterIPs")
    except AssertionError as e:
        problems.append(str(e))
    all_svcs = core.list_service_for_all_namespaces().items
    ips = [ip for s in all_svcs for ip in (s.spec.cluster_ips or []) if ip != "None"]
    ports = [p.node_port for s in all_svcs for p in s.spec.ports or [] if p.node_port]
    if len(ips) != len(set(ips)) or len(ports) != len(set(ports)):
        problems.append(f"duplicate ClusterIPs or node ports: {sorted(ips)} {sorted(ports)}")
    for i in range(3):
        s = core.create_namespaced_service(NS, {"metadata": {"generateName": "probe-"}, "spec": {
            "type": "NodePort", "ports": [{"port": 80}]}})
        if s.spec.cluster_ip in ips or s.spec.ports[0].node_port in ports:
            problems.append(f"new Service {s.metadata.name} got a held value {s.spec.cluster_ip} {s.spec.ports[0].node_port}")
        core.delete_namespaced_service(s.metadata.name, NS)
    # namespaces being deleted go
    try:
        wait(lambda: not [n for n in core.list_namespace().items if n.status.phase == "Terminating"], 60,
             "Terminating namespaces gone")
    except AssertionError as e:
        problems.append(str(e) + str([n.metadata.name for n in core.list_namespace().items if n.status.phase == "Terminating"]))
    # nothing stays half deleted: foreground deletions, CRDs and their objects
    def stuck():
        left = [f"deployment/{d.metadata.name}" for d in client.AppsV1Api(ac).list_namespaced_deployment(NS).items
                if d.metadata.deletion_timestamp]
        left += [f"replicaset/{r.metadata.name}" for r in client.AppsV1Api(ac).list_namespaced_replica_set(NS).items
                 if r.metadata.deletion_timestamp]
        left += [f"crd/{c.metadata.name}" for c in ext.list_custom_resource_definition().items if c.metadata.deletion_timestamp]
        left += [f"pod/{p.metadata.name}" for p in core.list_namespaced_pod(NS).items
                 if p.metadata.deletion_timestamp and FINALIZER not in (p.metadata.finalizers or [])]
        return left
    try:
        wait(lambda: not stuck(), 60, "graceful, foreground and CRD deletions done")
    except AssertionError as e:
        problems.append(f"{e}: {stuck()}")
    # CRDs established and served
    for c in ext.list_custom_resource_definition().items:
        try:
            wait(lambda c=c: any(x.type == "Established" and x.status == "True" for x in
                                 ext.read_custom_resource_definition(c.metadata.name).status.conditions or []),
                 15, f"CRD {c.metadata.name} Established")
            wait(lambda c=c: _served(ac, c.spec.names.plural), 15, f"CRD {c.metadata.name} served")
        except AssertionError as e:
            problems.append(str(e))
    converge(ac, before, problems)


def converge(ac, before, problems):
    core, apps, batch, coord = (client.CoreV1Api(ac), client.AppsV1Api(ac), client.BatchV1Api(ac),
                                client.CoordinationV1Api(ac))

    def deploy_ok():
        d = apps.read_namespaced_deployment("web", NS)
        pods = [p for p in core.list_namespaced_pod(NS, label_selector="app=web").items
                if not p.metadata.deletion_timestamp]
        return len(pods) == d.spec.replicas and (d.status.ready_replicas or 0) == d.spec.replicas
    def sts_ok():
        s = apps.read_namespaced_stateful_set("db", NS)
        names = sorted(p.metadata.name for p in core.list_namespaced_pod(NS, label_selector="app=db").items
                       if not p.metadata.deletion_timestamp)
        return names == [f"db-{i}" for i in range(s.spec.replicas)] and (s.status.ready_replicas or 0) == s.spec.replicas
    for what, fn in (("Deployment web converged", deploy_ok), ("StatefulSet db ordinals", sts_ok)):
        try:
            wait(fn, 40, what)
        except AssertionError as e:
            problems.append(str(e))
    for j in batch.list_namespaced_job(NS).items:
        try:
            wait(lambda j=j: (batch.read_namespaced_job(j.metadata.name, NS).status.succeeded or 0) >= 3, 40,
                 f"Job {j.metadata.name} complete")
        except AssertionError as e:
            problems.append(str(e))
        done = [p for p in core.list_namespaced_pod(NS, label_selector=f"job-name={j.metadata.name}").items
                if p.status.phase == "Succeeded"]
        if len(done) > 3:
            problems.append(f"Job {j.metadata.name}: {len(done)} pods succeeded for 3 completions")
    # running containers re-adopted: same start, same restart count
    now = {p.metadata.uid: p for p in core.list_namespaced_pod(NS).items}
    for uid, (name, started, restarts) in before.items():
        p = now.get(uid)
        if p is None or p.metadata.deletion_timestamp or not p.status.container_statuses:
            continue
        cs = p.status.container_statuses[0]
        st = cs.state.running.started_at if cs.state and cs.state.running else None
        if cs.restart_count != restarts or (st and st != started):
            problems.append(f"pod {name}: container restarted over the crash ({restarts}->{cs.restart_count}, {started}->{st})")
    t0 = time.time()
    for lease in ("kube-scheduler", "kube-controller-manager"):
        try:
            wait(lambda lease=lease: (lambda le: le.spec.renew_time and le.spec.renew_time.timestamp() > t0)(
                coord.read_namespaced_lease(lease, "kube-system")), 30, f"lease {lease} renewed")
        except AssertionError as e:
            problems.append(str(e))


def log_errors(c) -> dict[str, int]:
    """The ERROR lines and tracebacks of the server's log since its start, by message, counted."""
    with open(c.log_path, "rb") as f:
        f.seek(c.log_start)
        lines = f.read().decode(errors="replace").splitlines()
    found: dict[str, int] = {}
    for i, line in enumerate(lines):
        if " ERROR " in line or line.startswith("Traceback"):
            what = line.split(" ERROR ", 1)[-1][:120] if " ERROR " in line else "Traceback: " + lines[min(i + 1, len(lines) - 1)][:100]
            found[what] = found.get(what, 0) + 1
    return found


def running(ac):
    out = {}
    for p in client.CoreV1Api(ac).list_namespaced_pod(NS).items:
        for cs in p.status.container_statuses or []:
            if cs.state and cs.state.running:
                out[p.metadata.uid] = (p.metadata.name, cs.state.running.started_at, cs.restart_count)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cycles", type=int, default=10)
    ap.add_argument("--store", default="sqlite")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--writers", type=int, default=1, help="writers of each kind")
    ap.add_argument("--api-workers", type=int, default=1, help="`up --api-workers N` (kill -9 hits worker 0)")
    ap.add_argument("--clients", action="store_true", help="only the clients' check (one kill)")
    ap.add_argument("--startup", type=int, default=0, help="only kills during start-up, this many rounds")
    ap.add_argument("--max-load", type=float, default=4.0, help="longest load before the kill (s)")
    args = ap.parse_args()
    rnd = random.Random(args.seed)
    d = Path(tempfile.mkdtemp(prefix="nanokube-crash-"))
    etcd = None
    if args.store == "etcd":
        from tests.conftest import EtcdServer, etcd_binary

        (d / "etcd").mkdir()
        etcd = EtcdServer(etcd_binary(), d / "etcd")
        etcd.start()
        args.store = f"etcd://{etcd.endpoint}"
    if args.clients or args.startup:
        try:
            found = clients(args.store) if args.clients else startup(args.store, args.startup, rnd)
        finally:
            if etcd:
                etcd.stop()
            shutil.rmtree(d, ignore_errors=True)
        print(f"{len(found)} problems", *found, sep="\n")
        return
    ledger, seen = Ledger(), {}
    extra = ("--api-workers", str(args.api_workers))
    total = []
    t = time.monotonic()
    c = start_cluster(d, args.store, extra)
    print(f"first start {time.monotonic() - t:.1f}s, data dir {d}", flush=True)
    try:
        setup(api(c))
        wait(lambda: running(api(c)), 40, "pods running")
        for cycle in range(args.cycles):
            ac = api(c)
            stop = threading.Event()
            errors: list[str] = []
            threads = [threading.Thread(target=writer, args=(stop, api(c), ledger, k, random.Random(rnd.random()), errors, t))
                       for k in ("cm", "ssa", "svc", "pod", "cr") for t in range(args.writers)]
            threads.append(threading.Thread(target=churn, args=(stop, api(c), ledger, random.Random(rnd.random()), cycle)))
            threads.append(threading.Thread(target=watcher, args=(stop, api(c), seen)))
            for th in threads:
                th.start()
            time.sleep(rnd.uniform(0.3, args.max_load))
            before = running(ac)
            c.proc.send_signal(signal.SIGKILL)
            c.proc.wait()
            stop.set()
            for th in threads:
                th.join(30)
            t = time.monotonic()
            c = start_cluster(d, args.store, extra)
            took = time.monotonic() - t
            problems = list(errors)
            check(api(c), ledger, seen, before, problems)
            total += problems
            print(f"cycle {cycle}: restart {took:.1f}s, {len(ledger.known)} objects, max rv {ledger.max_rv}, "
                  f"{len(problems)} problems; the log's errors: {log_errors(c)}", flush=True)
            for p in problems:
                print("   ", p, flush=True)
        c.stop()
        t = time.monotonic()
        c = start_cluster(d, args.store, extra)
        print(f"restart after a clean stop {time.monotonic() - t:.1f}s", flush=True)
    finally:
        c.stop()
        if etcd:
            etcd.stop()
        print(f"log: {d}/nanokube.log; {len(total)} problems in all", flush=True)
        if not total:
            shutil.rmtree(d, ignore_errors=True)



def clients(store: str) -> list[str]:
    """One kill with clients in other processes: an external scheduler's informers, `kubectl get -w`
    restarted when it ends, and the kubernetes client's watch resumed from its last resourceVersion."""
    import subprocess
    import sys

    from benchmarks.restart import _free_port
    from tests.e2e.conftest import KUBECTL

    d = Path(tempfile.mkdtemp(prefix="nanokube-crash-clients-"))
    port = str(_free_port())
    extra = ("--port", port, "--scheduler", "none")
    c = None
    problems: list[str] = []
    procs = []
    try:
        c = start_cluster(d, store, extra)
        env = {**os.environ, "KUBECONFIG": c.kubeconfig}
        sched = subprocess.Popen([sys.executable, "-m", "nanokube.cli", "scheduler", "--kubeconfig", c.kubeconfig],
                                 stdout=open(d / "sched.log", "wb"), stderr=subprocess.STDOUT)
        procs.append(sched)
        kubectl_out = open(d / "kubectl.out", "wb")
        loop = subprocess.Popen(["bash", "-c", f"while true; do {KUBECTL} get pods -n default -w "
                                 "--output-watch-events -o name; echo RESTART; sleep 0.5; done"],
                                stdout=kubectl_out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        procs.append(loop)
        core = client.CoreV1Api(api(c))
        seen: list[tuple[str, str, int]] = []

        def py_watch():
            rv = None
            while len(seen) < 1000:
                try:
                    ac = client.CoreV1Api(api(_current[0]))
                    resumed = rv is not None
                    for ev in watch.Watch().stream(ac.list_namespaced_pod, "default", resource_version=rv,
                                                   _request_timeout=30, timeout_seconds=20):
                        o = ev["object"]
                        rv = o.metadata.resource_version
                        seen.append((ev["type"] if resumed else "INITIAL", o.metadata.name, int(rv)))
                except ApiException as e:
                    if e.status == 410:
                        seen.append(("GONE", "", 0))
                        rv = None
                    time.sleep(0.2)
                except Exception:
                    time.sleep(0.2)
        _current = [c]
        threading.Thread(target=py_watch, daemon=True).start()
        mk = lambda n: core.create_namespaced_pod("default", {"metadata": {"name": n}, "spec": {  # noqa: E731
            "containers": [{"name": "c", "image": "busybox"}]}})
        for i in range(3):
            mk(f"before-{i}")
        wait(lambda: all(p.spec.node_name for p in core.list_namespaced_pod("default").items), 30, "scheduled before")
        time.sleep(1)
        c.proc.send_signal(signal.SIGKILL)
        c.proc.wait()
        c = start_cluster(d, store, extra)
        _current[0] = c
        core = client.CoreV1Api(api(c))
        for i in range(3):
            mk(f"after-{i}")
        try:
            wait(lambda: all(p.spec.node_name for p in core.list_namespaced_pod("default").items), 60,
                 "the external scheduler schedules pods created after the restart")
        except AssertionError as e:
            problems.append(str(e))
        try:
            wait(lambda: {f"after-{i}" for i in range(3)} <= {n for _, n, _ in seen}, 30,
                 "the resumed python watch sees the new pods")
        except AssertionError as e:
            problems.append(str(e))
        revs = [rv for t, _, rv in seen if t not in ("GONE", "INITIAL")]
        if any(b < a for a, b in zip(revs, revs[1:])):
            problems.append(f"python watch events out of order: {seen}")
        try:
            wait(lambda: b"after-2" in (d / "kubectl.out").read_bytes(), 30, "kubectl get -w (restarted) sees the new pods")
        except AssertionError as e:
            problems.append(str(e))
        print("python watch:", [(t, n) for t, n, _ in seen], flush=True)
        print("kubectl:", (d / "kubectl.out").read_text().replace("\n", " | ")[:1500], flush=True)
        print("scheduler log:", (d / "sched.log").read_text()[-1500:], flush=True)
    finally:
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGTERM) if p is procs[-1] else p.terminate()
            except ProcessLookupError:
                pass
            p.wait()
        if c:
            c.stop()
        shutil.rmtree(d, ignore_errors=True)
    return problems


def startup(store: str, rounds: int, rnd: random.Random) -> list[str]:
    """`kill -9` during start-up (bootstrap, PKI, the first writes), twice on one data dir, then a
    start that must give a working cluster: nodes Ready, the kubernetes Service with its IPAddress,
    the default ServiceAccount and root CA ConfigMap, a pod that runs."""
    import subprocess
    import sys

    problems: list[str] = []
    for r in range(rounds):
        d = Path(tempfile.mkdtemp(prefix="nanokube-crash-startup-"))
        c = None
        try:
            for _ in range(2):
                with open(d / "nanokube.log", "ab") as log:
                    p = subprocess.Popen([sys.executable, "-m", "nanokube.cli", "up", "--data-dir", str(d), "--port", "0",
                                          "--store", store], stdout=subprocess.DEVNULL, stderr=log, stdin=subprocess.DEVNULL)
                time.sleep(rnd.uniform(0.3, 4.0))
                p.kill()
                p.wait()
            c = start_cluster(d, store)
            ac = api(c)
            core, net = client.CoreV1Api(ac), client.NetworkingV1Api(ac)
            checks = [
                ("nodes Ready", lambda: len([n for n in core.list_node().items if any(
                    x.type == "Ready" and x.status == "True" for x in n.status.conditions or [])]) == 2),
                ("kubernetes Service and its IPAddress", lambda: net.read_ip_address(
                    core.read_namespaced_service("kubernetes", "default").spec.cluster_ip)),
                ("default ServiceAccount", lambda: core.read_namespaced_service_account("default", "default")),
                ("kube-root-ca.crt", lambda: core.read_namespaced_config_map("kube-root-ca.crt", "default")),
            ]
            for what, fn in checks:
                try:
                    wait(fn, 30, what)
                except AssertionError as e:
                    problems.append(f"round {r}: {e}")
            core.create_namespaced_pod("default", {"metadata": {"name": "p"}, "spec": {
                "containers": [{"name": "c", "image": "busybox"}]}})
            try:
                wait(lambda: core.read_namespaced_pod("p", "default").status.phase == "Running", 60, "a pod runs")
            except AssertionError as e:
                problems.append(f"round {r}: {e}")
            errors = [line for line in (d / "nanokube.log").read_text(errors="replace").splitlines()
                      if "Traceback" in line or " ERROR " in line]
            print(f"round {r}: {len(problems)} problems so far; log errors: {errors[:5]}", flush=True)
        finally:
            if c:
                c.stop()
            shutil.rmtree(d, ignore_errors=True)
    return problems


if __name__ == "__main__":
    main()
