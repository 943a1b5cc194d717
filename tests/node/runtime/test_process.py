"""The process runtime behind real node agents: containers are processes in
pod network namespaces; statuses, logs, probes and termination come from them."""

import asyncio
import contextlib
import os
import pwd
import secrets
import shutil
import time
from types import SimpleNamespace

import pytest
from multidict import CIMultiDict

from nanokube.apiserver.loopback import connector
from nanokube.machinery.errors import APIError
from nanokube.node.cluster import default_cluster
from nanokube.node.kubelet_server import KubeletServer
from nanokube.node.lifecycle import pulled_message
from nanokube.node.manager import NodeManager
from nanokube.node.runtime.netns import list_netns
from nanokube.node.runtime.process import ProcessRuntime
from nanokube.node.container_env import expand
from nanokube.node.streaming import log_options
from tests.controllers import becomes, eventually, make_stack



def test_variable_expansion_follows_kubernetes():
    assert expand("$(A)-$(B)-$$(A)-$(missing)", {"A": "1", "B": "2"}) == "1-2-$(A)-$(missing)"


@contextlib.asynccontextmanager
async def process_agents(tmp_path, pods_dir: str, **manager):
    """The default cluster's node agents on the process runtime (root and iproute2), real time:
    the API client, the runtime and the node manager (`manager`: more of its options); none of the
    runtime's network namespaces, nor its cgroup, left after. A failed sync is tried again after
    0.5 s, not 10."""
    if os.geteuid() != 0 or not shutil.which("ip"):
        pytest.skip("SKIPPED LOUDLY: the process runtime needs root and iproute2")
    s = await make_stack()
    await s.client.resource("", "v1", "namespaces").create({"metadata": {"name": "kube-node-lease"}})
    rt = ProcessRuntime(str(tmp_path / "runtime"), "u" + secrets.token_hex(3), backoff_initial=0.05)
    mgr = NodeManager(connector(s.rest), default_cluster(), runtime=rt, pods_dir=pods_dir, sync_retry=0.5, **manager)
    cgroup = None
    try:
        rt.start([(a.name, a.spec.index, a.host_ip, a.pod_cidr) for a in mgr.agents.values()])
        cgroup = rt.cgroups.root
        await mgr.start()
        yield s.client, rt, mgr
    finally:
        await mgr.stop()
        rt.close()
        await s.close()
        assert [n for n in list_netns() if n.startswith(rt.net.prefix)] == []
        assert cgroup is None or not os.path.exists(cgroup), f"cgroup left: {cgroup}"


@pytest.fixture
async def env(tmp_path):
    async with process_agents(tmp_path, str(tmp_path / "pods")) as (client, rt, _):
        yield client, rt, tmp_path


#: a long-running command that ends on SIGTERM as a server does (143): a bare `sleep` would be its
#: container's PID 1, which ignores a signal it has no handler for, and end by SIGKILL after the grace (137)
SERVE = ["sh", "-c", "trap 'exit 143' TERM; sleep 300 & wait"]


def pod(name, command, restart="Never", grace=None, **container):
    spec = {"nodeName": "gpu-0", "restartPolicy": restart,
            "containers": [{"name": "main", "image": "busybox:1.36", "command": command, **container}]}
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    return {"metadata": {"name": name, "namespace": "default"}, "spec": spec}


def status_of(pods, name, check):
    async def probe():
        try:
            p = await pods.get(name, "default")
        except APIError:
            return None
        return p if check(p.get("status") or {}) else None
    return probe


def phase(want):
    return lambda st: st.get("phase") == want


def host_pid(member: int, pid: int) -> int | None:
    """The host's PID of the process numbered `pid` in the PID namespace of process `member`."""
    ns = os.readlink(f"/proc/{member}/ns/pid")
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.readlink(f"/proc/{entry}/ns/pid") != ns:
                continue
            with open(f"/proc/{entry}/status") as f:
                nspid = next(line for line in f if line.startswith("NSpid:")).split()
        except OSError:
            continue
        if int(nspid[-1]) == pid:
            return int(entry)
    return None


async def read_log(rt, name, query):
    """pods/log as the node agent serves it (None for pods it does not run)."""
    w = rt.pods.get(("default", name))
    return None if w is None else await w.logs("main", log_options(query, time.time()))


async def log_of(rt, name, **query):
    data = await read_log(rt, name, query)
    if isinstance(data, bytes):
        return data
    return b"".join([chunk async for chunk in data])


async def test_container_gets_env_workdir_hostname_and_volumes(env):
    client, rt, tmp = env
    await client.resource("", "v1", "configmaps").create(
        {"metadata": {"name": "cfg", "namespace": "default"}, "data": {"motd": "from-configmap"}})
    target = str(tmp / "not-there" / "cfg")
    script = 'echo "$(GREETING) $POD_NAME"; pwd; hostname; cat ' + target + "/motd"
    p = pod("env", ["sh", "-c", script], workingDir=str(tmp), volumeMounts=[{"name": "cfg", "mountPath": target}],
            env=[{"name": "GREETING", "value": "hello"},
                 {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}])
    p["spec"]["volumes"] = [{"name": "cfg", "configMap": {"name": "cfg"}}]
    pods = client.resource("", "v1", "pods")
    await pods.create(p)
    done = await eventually(status_of(pods, "env", phase("Succeeded")))
    assert done["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
    lines = (await log_of(rt, "env")).decode().splitlines()
    assert lines == ["hello env", str(tmp), "env", "from-configmap"]

    async def target_removed():
        return not os.path.exists(os.path.dirname(target))
    await eventually(target_removed)  # what the runtime created for the mount goes with the pod


async def test_processes_run_as_the_security_contexts_user(env):
    """runAsUser, runAsGroup (the container's over the pod's), fsGroup and supplementalGroups are the
    identity of the container's processes and of what probes exec in it, HOME that user's ("/" for
    a uid the node's /etc/passwd lacks); without them, root's. An emptyDir is writable by that
    user and the fsGroup's (setgid), a Secret's files the fsGroup's, as the kubelet sets them up."""
    client, rt, _ = env
    # pytest's tmp is root's alone (0700): the user could not reach mounts there
    scratch, key = (f"/tmp/nk-{what}-{secrets.token_hex(4)}" for what in ("scratch", "key"))
    p = pod("nonroot", ["sh", "-c", f'id -u; id -g; id -G; echo "$HOME"; touch {scratch}/ckpt && '
                        f"stat -c '%u %g %a' {scratch} {scratch}/ckpt; cat {key}/token; echo; sleep 30"], restart="Always",
            securityContext={"runAsGroup": 3000}, volumeMounts=[{"name": "scratch", "mountPath": scratch},
                                                                {"name": "key", "mountPath": key}],
            readinessProbe={"exec": {"command": ["sh", "-c", "test $(id -u) = 1000"]}, "periodSeconds": 1})
    p["spec"]["securityContext"] = {"runAsUser": 1000, "runAsGroup": 5, "fsGroup": 2000, "supplementalGroups": [4000]}
    p["spec"]["volumes"] = [{"name": "scratch", "emptyDir": {}},
                            {"name": "key", "secret": {"secretName": "hf-token", "defaultMode": 0o440}}]
    await client.resource("", "v1", "secrets").create(
        {"metadata": {"name": "hf-token", "namespace": "default"}, "data": {"token": "aGY="}})
    p["spec"]["containers"].append({"name": "root", "image": "busybox:1.36", "command": ["sh", "-c", "id -u; sleep 30"],
                                    "securityContext": {"runAsUser": 0}})
    pods = client.resource("", "v1", "pods")
    await pods.create(p)
    await eventually(status_of(pods, "nonroot", lambda st: any(
        c.get("ready") for c in st.get("containerStatuses") or () if c["name"] == "main")))

    async def printed():
        return (await log_of(rt, "nonroot")).decode().count("\n") == 7
    await eventually(printed)
    try:
        home = pwd.getpwuid(1000).pw_dir
    except KeyError:
        home = "/"
    # the emptyDir is writable by the user, the fsGroup's and setgid: the checkpoint is the group's;
    # the 0440 Secret key is the fsGroup's, so the user reads it
    assert (await log_of(rt, "nonroot")).decode().splitlines() == [
        "1000", "3000", "3000 2000 4000", home, "0 2000 2777", "1000 2000 644", "hf"]
    root = await rt.pods[("default", "nonroot")].logs("root", log_options({}, time.time()))
    assert (root if isinstance(root, bytes) else b"".join([chunk async for chunk in root])) == b"0\n"


async def test_containers_get_the_kubelet_managed_hosts_file(env):
    """/etc/hosts names the pod's IP by its hostname, then spec.hostAliases, in upstream's layout:
    the pod's own name resolves from the file (a Python server's bind looks it up), not through a
    DNS server its namespace cannot reach. A container that mounts a volume at /etc/hosts keeps it."""
    client, rt, _ = env
    resolve = "import socket; print(socket.gethostbyname(socket.gethostname()), socket.getfqdn('0.0.0.0'))"
    p = pod("named", ["sh", "-c", f"cat /etc/hosts; python3 -c \"{resolve}\""])
    p["spec"]["hostAliases"] = [{"ip": "192.0.2.7", "hostnames": ["db.local", "db"]}]
    p["spec"]["containers"].append({"name": "own", "image": "busybox:1.36", "command": ["cat", "/etc/hosts"],
                                    "volumeMounts": [{"name": "hosts", "mountPath": "/etc/hosts",
                                                      "subPath": "hosts"}]})
    p["spec"]["volumes"] = [{"name": "hosts", "configMap": {"name": "own-hosts"}}]
    await client.resource("", "v1", "configmaps").create(
        {"metadata": {"name": "own-hosts", "namespace": "default"}, "data": {"hosts": "10.9.9.9 mine\n"}})
    pods = client.resource("", "v1", "pods")
    await pods.create(p)
    done = await eventually(status_of(pods, "named", phase("Succeeded")))
    ip = done["status"]["podIP"]
    assert (await log_of(rt, "named")).decode() == (
        "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
        "fe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n"
        f"{ip}\tnamed\n\n# Entries added by HostAliases.\n192.0.2.7\tdb.local\tdb\n{ip} named\n")
    own = await rt.pods[("default", "named")].logs("own", log_options({}, time.time()))
    assert (own if isinstance(own, bytes) else b"".join([chunk async for chunk in own])) == b"10.9.9.9 mine\n"


async def test_exit_codes_and_restarts_drive_container_statuses(env):
    client, rt, _ = env
    pods = client.resource("", "v1", "pods")
    await pods.create(pod("fails", ["sh", "-c", "exit 3"]))
    await pods.create(pod("retries", ["sh", "-c", "echo attempt; exit 4"], restart="OnFailure"))
    failed = await eventually(status_of(pods, "fails", phase("Failed")))
    t = failed["status"]["containerStatuses"][0]["state"]["terminated"]
    assert t["exitCode"] == 3 and t["reason"] == "Error"

    def restarted_twice(st):
        cs = (st.get("containerStatuses") or [{}])[0]
        return cs.get("restartCount", 0) >= 2 and cs["lastState"].get("terminated")
    p = await eventually(status_of(pods, "retries", restarted_twice))
    cs = p["status"]["containerStatuses"][0]
    assert cs["lastState"]["terminated"]["exitCode"] == 4 and p["status"]["phase"] == "Running"
    assert await log_of(rt, "retries", previous="true") == b"attempt\n"


async def test_a_crash_looping_container_restarts_at_once_then_backs_off_counted_as_it_starts_again(env):
    """As the simulated runtime (and kuberuntime's doBackOff): the first exit restarts at once, the
    next ones back off; a container waiting in CrashLoopBackOff reports the run that ended (its
    restartCount and containerID), one more only as the next starts. Every status write, from a watch."""
    client, _, _ = env
    pods = client.resource("", "v1", "pods")
    created = await pods.create(pod("crashy", ["sh", "-c", "exit 1"], restart="Always"))
    stream = await pods.watch("default", resource_version=created["metadata"]["resourceVersion"],
                              field_selector="metadata.name=crashy")
    seen: list[tuple[str, int, str | None, str | None]] = []
    async with asyncio.timeout(30):
        async for _, obj in stream:
            [cs] = obj["status"].get("containerStatuses") or [{"state": {}}]
            state = cs["state"].get("running") and "Running" or (cs["state"].get("waiting") or {}).get("reason")
            row = (state, cs.get("restartCount"), cs.get("containerID"),
                   cs.get("lastState", {}).get("terminated", {}).get("containerID"))
            if state in ("Running", "CrashLoopBackOff") and (not seen or seen[-1] != row):
                seen.append(row)
            if len(seen) == 6:
                break
    await stream.aclose()
    assert [(state, restarts) for state, restarts, _, _ in seen] == [
        ("Running", 0), ("Running", 1), ("CrashLoopBackOff", 1), ("Running", 2), ("CrashLoopBackOff", 2), ("Running", 3)]
    ids = [container_id for _, _, container_id, _ in seen]
    assert len({ids[0], ids[1], ids[3], ids[5]}) == 4, "each run its own container"
    assert seen[2][2:] == (ids[1], ids[1]) and seen[4][2:] == (ids[3], ids[3]), "waiting: the run that ended"
    assert seen[3][3] == ids[1] and seen[5][3] == ids[3]


async def test_a_containers_restart_rule_restarts_it_on_its_exit_code_alone(env):
    """KEP-5307: in a Never pod, a rule restarts the container on exit code 42; its next exit (1)
    matches no rule and its own Never policy ends the pod."""
    client, rt, tmp = env
    pods = client.resource("", "v1", "pods")
    marker = str(tmp / "ran-once")
    p = pod("ruled", ["sh", "-c", f"[ -e {marker} ] && exit 1; touch {marker}; exit 42"], restartPolicy="Never",
            restartPolicyRules=[{"action": "Restart", "exitCodes": {"operator": "In", "values": [42]}}])
    await pods.create(p)
    failed = await eventually(status_of(pods, "ruled", phase("Failed")))
    cs = failed["status"]["containerStatuses"][0]
    assert cs["restartCount"] == 1 and cs["state"]["terminated"]["exitCode"] == 1
    assert cs["lastState"]["terminated"]["exitCode"] == 42


async def test_deletion_sends_sigterm_then_sigkill_after_the_grace_period(env):
    """SIGTERM, then SIGKILL once the grace period is up: a shell whose trap handles SIGTERM ends
    with its own code; a bare `sleep` is its container's PID 1, which the kernel spares the
    signals it has no handler for, so it lives on to SIGKILL (137), as under containerd; the
    same `sleep` in the host's PID namespace (hostPID) is no PID 1 and dies of SIGTERM (143)."""
    client, rt, _ = env
    pods = client.resource("", "v1", "pods")
    await pods.create(pod("polite", ["sh", "-c", "trap 'exit 3' TERM; echo up; sleep 300 & wait"], grace=30))
    await pods.create(pod("pid-one", ["sleep", "300"], grace=1))
    host = pod("host-pid", ["sleep", "300"], grace=30)
    host["spec"]["hostPID"] = True
    await pods.create(host)
    names = ("polite", "pid-one", "host-pid")
    running = lambda st: st.get("phase") == "Running" and st["containerStatuses"][0]["state"].get("running")
    for n in names:
        await eventually(status_of(pods, n, running))
    workers = {n: rt.pods[("default", n)] for n in names}

    async def trapped():
        return await log_of(rt, "polite") == b"up\n"
    await eventually(trapped)
    for n in names:
        await pods.delete(n, "default")

    async def gone():
        for n in names:
            try:
                await pods.get(n, "default")
                return False
            except APIError:
                pass
        return True
    await eventually(gone)
    codes = {n: w.containers["main"].state["terminated"]["exitCode"] for n, w in workers.items()}
    assert codes == {"polite": 3, "pid-one": 137, "host-pid": 143}


async def test_readiness_probes_drive_ready(env):
    client, rt, tmp = env
    pods = client.resource("", "v1", "pods")
    mount = str(tmp / "flags")
    exec_pod = pod("exec-probe", SERVE, restart="Always", volumeMounts=[{"name": "f", "mountPath": mount}],
                   readinessProbe={"exec": {"command": ["test", "-f", f"{mount}/ok"]}, "periodSeconds": 1})
    exec_pod["spec"]["volumes"] = [{"name": "f", "emptyDir": {}}]
    server = "import socket, time; s = socket.socket(); s.bind(('0.0.0.0', 9000)); s.listen(); time.sleep(300)"
    tcp_pod = pod("tcp-probe", ["python3", "-c", server], restart="Always",
                  readinessProbe={"tcpSocket": {"port": 9000}, "periodSeconds": 1})
    await pods.create(exec_pod)
    await pods.create(tcp_pod)

    def ready(want):
        def check(st):
            conds = {c["type"]: c["status"] for c in st.get("conditions") or []}
            return st.get("phase") == "Running" and conds.get("Ready") == want
        return check
    await eventually(status_of(pods, "tcp-probe", ready("True")))
    p = await eventually(status_of(pods, "exec-probe", ready("False")))
    assert p["status"]["containerStatuses"][0]["ready"] is False
    agent = next(iter(rt.pods.values())).agent
    os.mknod(os.path.join(agent.volumes.volume_dir(p["metadata"]["uid"], "f"), "ok"))
    p = await eventually(status_of(pods, "exec-probe", ready("True")))
    assert p["status"]["containerStatuses"][0]["ready"] is True


async def test_logs_follow_tail_and_limit(env):
    client, rt, _ = env
    pods = client.resource("", "v1", "pods")
    await pods.create(pod("talker", ["sh", "-c", "echo one; echo two; sleep 1; echo three"]))
    await eventually(status_of(pods, "talker", lambda st: st.get("phase") == "Running"))
    assert await log_of(rt, "talker", follow="true") == b"one\ntwo\nthree\n"
    await eventually(status_of(pods, "talker", phase("Succeeded")))
    assert await log_of(rt, "talker", tailLines="1") == b"three\n"
    assert await log_of(rt, "talker", limitBytes="5") == b"one\nt"
    with pytest.raises(APIError) as e:
        await read_log(rt, "talker", {"previous": "true"})
    assert e.value.code == 400
    assert await read_log(rt, "someone-else", {}) is None


async def test_init_containers_run_in_order_before_the_app(env):
    client, rt, tmp = env
    pods = client.resource("", "v1", "pods")
    shared = str(tmp / "shared")
    mount = [{"name": "s", "mountPath": shared}]
    p = pod("inits", ["sh", "-c", f"cat {shared}/order"], volumeMounts=mount)
    p["spec"]["volumes"] = [{"name": "s", "emptyDir": {}}]
    p["spec"]["initContainers"] = [
        {"name": f"init-{i}", "image": "busybox", "command": ["sh", "-c", f"echo {i} >> {shared}/order"],
         "volumeMounts": mount} for i in (1, 2)]
    await pods.create(p)
    done = await eventually(status_of(pods, "inits", phase("Succeeded")))
    assert [s["state"]["terminated"]["exitCode"] for s in done["status"]["initContainerStatuses"]] == [0, 0]
    assert await log_of(rt, "inits") == b"1\n2\n"

    failing = pod("init-fails", ["sh", "-c", "echo never"])
    failing["spec"]["initContainers"] = [{"name": "setup", "image": "busybox", "command": ["sh", "-c", "exit 7"]}]
    await pods.create(failing)
    done = await eventually(status_of(pods, "init-fails", phase("Failed")))
    assert done["status"]["initContainerStatuses"][0]["state"]["terminated"]["exitCode"] == 7
    assert done["status"]["containerStatuses"][0]["state"] == {"waiting": {"reason": "PodInitializing"}}
    assert {c["type"]: c["status"] for c in done["status"]["conditions"]}["Initialized"] == "False"


async def test_a_sidecar_runs_beside_the_app_and_stops_after_it(env):
    client, _, _ = env
    pods = client.resource("", "v1", "pods")
    p = pod("with-sidecar", ["sh", "-c", "sleep 1"], grace=5)
    p["spec"]["initContainers"] = [{"name": "proxy", "image": "envoy", "restartPolicy": "Always",
                                    "command": SERVE}]
    await pods.create(p)

    def both_running(st):
        return st.get("phase") == "Running" and all(
            "running" in s["state"] for s in st.get("initContainerStatuses", []) + st.get("containerStatuses", []))
    await eventually(status_of(pods, "with-sidecar", both_running))
    done = await eventually(status_of(pods, "with-sidecar", phase("Succeeded")))
    assert done["status"]["initContainerStatuses"][0]["state"]["terminated"]["exitCode"] == 143


async def test_the_next_init_container_waits_for_its_sidecars_startup_probe(env):
    """KEP-753: the kubelet starts the init container after a sidecar only once the sidecar is
    started, past its startupProbe (before, it started at once: `setup` wrote first)."""
    client, rt, tmp = env
    pods = client.resource("", "v1", "pods")
    shared = str(tmp / "shared")
    mount = [{"name": "s", "mountPath": shared}]
    p = pod("gated-inits", ["sh", "-c", f"cat {shared}/order"], volumeMounts=mount)
    p["spec"]["volumes"] = [{"name": "s", "emptyDir": {}}]
    p["spec"]["initContainers"] = [
        {"name": "proxy", "image": "envoy", "restartPolicy": "Always", "volumeMounts": mount,
         "command": ["sh", "-c", f"trap 'exit 143' TERM; sleep 2; echo proxy up >> {shared}/order; sleep 300 & wait"],
         "startupProbe": {"exec": {"command": ["grep", "-q", "up", f"{shared}/order"]}, "periodSeconds": 1,
                          "failureThreshold": 30}},
        {"name": "setup", "image": "busybox", "volumeMounts": mount,
         "command": ["sh", "-c", f"echo setup >> {shared}/order"]}]
    await pods.create(p)
    done = await eventually(status_of(pods, "gated-inits", phase("Succeeded")))
    assert await log_of(rt, "gated-inits") == b"proxy up\nsetup\n"
    proxy, setup = done["status"]["initContainerStatuses"]
    assert setup["state"]["terminated"]["exitCode"] == 0 and proxy["restartCount"] == 0


async def test_liveness_failures_restart_and_startup_probes_gate_readiness(env):
    client, rt, tmp = env
    pods = client.resource("", "v1", "pods")
    flags = str(tmp / "flags")
    mount = [{"name": "f", "mountPath": flags}]
    live = pod("liveness", SERVE, restart="Always", grace=1, volumeMounts=mount,
               livenessProbe={"exec": {"command": ["test", "-f", f"{flags}/alive"]}, "periodSeconds": 1,
                              "failureThreshold": 1})
    live["spec"]["volumes"] = [{"name": "f", "emptyDir": {}}]
    await pods.create(live)
    restarted = await eventually(status_of(pods, "liveness", lambda st: (st.get("containerStatuses") or [{}])[0]
                                           .get("restartCount", 0) >= 1))
    assert restarted["status"]["containerStatuses"][0]["lastState"]["terminated"]["exitCode"] == 143

    gated = pod("startup", SERVE, restart="Always", volumeMounts=mount,
                startupProbe={"exec": {"command": ["test", "-f", f"{flags}/up"]}, "periodSeconds": 1,
                              "failureThreshold": 1000})
    gated["spec"]["volumes"] = [{"name": "f", "emptyDir": {}}]
    p = await pods.create(gated)

    def container(started):
        return lambda st: st.get("phase") == "Running" and st["containerStatuses"][0]["started"] is started
    waiting = await eventually(status_of(pods, "startup", container(False)))
    assert waiting["status"]["containerStatuses"][0]["ready"] is False
    agent = next(iter(rt.pods.values())).agent
    os.mknod(os.path.join(agent.volumes.volume_dir(p["metadata"]["uid"], "f"), "up"))
    up = await eventually(status_of(pods, "startup", container(True)))
    assert up["status"]["containerStatuses"][0]["ready"] is True


async def test_a_failed_probe_kills_with_its_own_termination_grace_period(env):
    """A startup or liveness probe that fails kills its container with that probe's
    terminationGracePeriodSeconds (1 s, so killContainer's minimal 2 s), not the pod's 60 s: the
    bare `sleep`, PID 1 deaf to SIGTERM, is SIGKILLed (137) and restarted within seconds."""
    client, rt, _ = env
    pods = client.resource("", "v1", "pods")
    failing = {"exec": {"command": ["false"]}, "periodSeconds": 1, "failureThreshold": 1,
               "terminationGracePeriodSeconds": 1}
    await pods.create(pod("startup", ["sleep", "300"], restart="Always", grace=60, startupProbe=failing))
    await pods.create(pod("liveness", ["sleep", "300"], restart="Always", grace=60, livenessProbe=failing))
    for name in ("startup", "liveness"):
        restarted = await eventually(status_of(pods, name, lambda st: (st.get("containerStatuses") or [{}])[0]
                                               .get("restartCount", 0) >= 1), timeout=15)
        assert restarted["status"]["containerStatuses"][0]["lastState"]["terminated"]["exitCode"] == 137


async def test_env_from_a_file_an_init_container_wrote(env):
    """env[].valueFrom.fileKeyRef: read from the emptyDir volume as the container starts, after the
    init container wrote the file (the reading container does not mount the volume): comments
    skipped, quotes removed, the last of a repeated key kept; a key the file lacks leaves an
    optional variable unset."""
    client, rt, _ = env
    write = "printf '# settings\\nDB_ADDRESS=db:0\\nMODE=\"fast mode\"\\nDB_ADDRESS=db:5432\\n' > /data/app.env"
    p = pod("envfile", ["sh", "-c", 'echo "$DB_ADDRESS|$MODE|${GONE-unset}"'], env=[
        {"name": "DB_ADDRESS", "valueFrom": {"fileKeyRef": {"volumeName": "data", "path": "app.env", "key": "DB_ADDRESS"}}},
        {"name": "MODE", "valueFrom": {"fileKeyRef": {"volumeName": "data", "path": "app.env", "key": "MODE"}}},
        {"name": "GONE", "valueFrom": {"fileKeyRef": {"volumeName": "data", "path": "app.env", "key": "GONE",
                                                      "optional": True}}}])
    p["spec"]["volumes"] = [{"name": "data", "emptyDir": {}}]
    p["spec"]["initContainers"] = [{"name": "setup", "image": "busybox:1.36", "command": ["sh", "-c", write],
                                    "volumeMounts": [{"name": "data", "mountPath": "/data"}]}]
    pods = client.resource("", "v1", "pods")
    await pods.create(p)
    await eventually(status_of(pods, "envfile", phase("Succeeded")))
    assert (await log_of(rt, "envfile")).decode().splitlines() == ["db:5432|fast mode|unset"]


async def kubelet_events(client, name):
    """(type, reason, fieldPath, message, count) of the kubelet's Events on pod `name`, in the order
    each was first written (a counted repeat patches the first one's Event, whose name says when)."""
    items, _ = await client.resource("", "v1", "events").list(namespace="default")
    mine = sorted((e for e in items if e["involvedObject"]["name"] == name and e["source"]["component"] == "kubelet"),
                  key=lambda e: int(e["metadata"]["name"].rsplit(".", 1)[1], 16))  # the first one's order
    return [(e["type"], e["reason"], e["involvedObject"].get("fieldPath", ""), e["message"], e["count"]) for e in mine]


async def test_container_events_and_an_unhealthy_event_for_each_failed_probe(env):
    """Pulling/Pulled, Created and Started as each process starts; every failed probe attempt records
    Unhealthy with the probe's output on the container's fieldPath (counted), and the liveness
    failure Killing."""
    client, _, _ = env
    pods = client.resource("", "v1", "pods")
    # timeoutSeconds well past the default 1 s: each exec probe starts a Python launcher, which a
    # loaded machine can take over a second to start, and a timed-out attempt reports a timeout
    # instead of the probe's output
    await pods.create(pod("sick", SERVE, restart="Always", grace=1,
                          readinessProbe={"exec": {"command": ["sh", "-c", "echo not ready yet; exit 1"]},
                                          "periodSeconds": 1, "timeoutSeconds": 30},
                          livenessProbe={"exec": {"command": ["sh", "-c", "echo dead >&2; exit 1"]}, "periodSeconds": 1,
                                         "failureThreshold": 2, "timeoutSeconds": 30}))
    path = "spec.containers{main}"

    async def killed():
        ev = await kubelet_events(client, "sick")
        return ev if any(r == "Killing" for _, r, _, _, _ in ev) and \
            any(r == "Unhealthy" and n >= 2 and "Readiness" in m for _, r, _, m, n in ev) else None
    ev = await eventually(killed)
    assert [e[:4] for e in ev[:4]] == [("Normal", "Pulling", path, 'Pulling image "busybox:1.36"'),
                                       ("Normal", "Pulled", path, pulled_message("busybox:1.36", 0)),
                                       ("Normal", "Created", path, "Container created"),
                                       ("Normal", "Started", path, "Container started")]
    assert ev[0][4] == ev[1][4] == 1  # pulled once (IfNotPresent), started again on each restart
    unhealthy = {m: n for _, r, f, m, n in ev if r == "Unhealthy" and f == path}
    assert unhealthy["Liveness probe failed: dead\n"] >= 2 and unhealthy["Readiness probe failed: not ready yet\n"] >= 2
    assert ("Normal", "Killing", path, "Container main failed liveness probe, will be restarted") in \
        [e[:4] for e in ev]


async def test_a_missing_pull_secret_is_told_once_a_sync_and_again_at_a_restart(env):
    """getPullSecretsForPod once a SyncPod: the init container's start is one sync, the two app
    containers' another (not one each), and the app container's restart a third."""
    client, _, _ = env
    pods = client.resource("", "v1", "pods")
    p = pod("private", SERVE, restart="Always", grace=0)
    p["spec"]["imagePullSecrets"] = [{"name": "regcred"}]
    p["spec"]["initContainers"] = [{"name": "setup", "image": "busybox:1.36", "command": ["true"]}]
    p["spec"]["containers"].append({"name": "once", "image": "busybox:1.36", "command": ["sh", "-c", "sleep 1"]})

    async def told():  # the app containers' starts (`once` restarts each second), and the Warning's count
        ev = await kubelet_events(client, "private")
        started = sum(n for _, r, f, _, n in ev if r == "Started" and f.startswith("spec.containers"))
        warned = sum(n for _, r, _, _, n in ev if r == "FailedToRetrieveImagePullSecret")
        return (started, warned) if started >= 3 and warned == started else None
    await pods.create(p)
    # 1 (the init container's sync) + 1 (the apps') + each restart: as many as the apps' Started
    assert await eventually(told)
    await pods.delete("private", "default")


async def test_a_refused_probe_says_what_go_would_and_deletion_kills(env):
    """A refused connection in Go's words; deleting the pod records Killing 'Stopping container'."""
    client, _, _ = env
    pods = client.resource("", "v1", "pods")
    await pods.create(pod("refused", SERVE, restart="Always",
                              readinessProbe={"httpGet": {"port": 8080, "path": "/healthz"}, "periodSeconds": 1},
                              startupProbe={"tcpSocket": {"port": 9}, "periodSeconds": 1, "failureThreshold": 100}))

    async def unhealthy():
        ev = await kubelet_events(client, "refused")
        return [m for _, r, _, m, _ in ev if r == "Unhealthy"] or None
    messages = await eventually(unhealthy)
    ip = (await pods.get("refused", "default"))["status"]["podIP"]
    assert messages == [f"Startup probe failed: dial tcp {ip}:9: connect: connection refused"]
    await pods.delete("refused", "default")  # (before the spam filter's 25 Events on the pod are spent)

    async def stopped():
        ev = await kubelet_events(client, "refused")
        return ev if ("Normal", "Killing", "spec.containers{main}", "Stopping container main") in \
            [e[:4] for e in ev] else None
    await eventually(stopped)


async def test_an_init_container_waiting_for_its_image_shows_why_and_a_deletion_starts_nothing(env):
    """The process runtime reports an image the kubelet cannot get (here: Never, and no pod pulled
    it to the node) in the waiting container's own status, an init container's too; deleting the
    pod while it waits removes it without starting any process."""
    client, rt, tmp = env
    pods = client.resource("", "v1", "pods")
    p = pod("no-image", ["sh", "-c", f"touch {tmp}/app-ran"])
    p["spec"]["initContainers"] = [{"name": "setup", "image": "registry.local/setup:dev", "imagePullPolicy": "Never",
                                    "command": ["sh", "-c", f"touch {tmp}/init-ran"]}]
    await pods.create(p)

    def waiting(st):
        return ((st.get("initContainerStatuses") or [{}])[0].get("state") or {}).get("waiting", {}).get(
            "reason") == "ErrImageNeverPull"
    st = (await eventually(status_of(pods, "no-image", waiting)))["status"]
    assert st["phase"] == "Pending" and st["initContainerStatuses"][0]["state"]["waiting"]["message"] == \
        'Container image "registry.local/setup:dev" is not present with pull policy of Never'
    assert {c["type"]: c["status"] for c in st["conditions"]}["Initialized"] == "False"
    await pods.delete("no-image", "default")

    async def gone():
        try:
            await pods.get("no-image", "default")
        except APIError as e:
            return e.code == 404
        return False
    assert await eventually(gone)
    assert not (tmp / "init-ran").exists() and not (tmp / "app-ran").exists()


async def test_each_probe_run_is_counted_on_the_kubelets_metrics_probes(env):
    """prober_probe_total, as nodes/proxy reads the kubelet's /metrics/probes: one series per probe
    type and result of each container, dropped with the pod."""
    client, rt, _ = env
    pods = client.resource("", "v1", "pods")
    p = pod("probed", SERVE, restart="Always",
            readinessProbe={"exec": {"command": ["true"]}, "periodSeconds": 1},
            livenessProbe={"exec": {"command": ["false"]}, "periodSeconds": 1, "failureThreshold": 100})
    await pods.create(p)
    agent = (await eventually(lambda: _worker(rt, "probed"))).agent
    server = KubeletServer(agent, time.time())
    uid = (await pods.get("probed", "default"))["metadata"]["uid"]
    labels = f'container="main",namespace="default",pod="probed",pod_uid="{uid}"'

    async def counted():
        text = (await server.serve(SimpleNamespace(method="GET", query={}, headers=CIMultiDict()), "/metrics/probes")).text
        series = {line.rsplit(" ", 1)[0]: int(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                  if line.startswith("prober_probe_total{")}
        want = [f'prober_probe_total{{{labels},probe_type="Readiness",result="successful"}}',
                f'prober_probe_total{{{labels},probe_type="Liveness",result="failed"}}']
        return series if all(series.get(k, 0) >= 2 for k in want) and len(series) == 2 else None
    await eventually(counted)
    await pods.delete("probed", "default", grace_period_seconds=0)

    async def dropped():
        text = (await server.serve(SimpleNamespace(method="GET", query={}, headers=CIMultiDict()), "/metrics/probes")).text
        return "prober_probe_total{" not in text
    assert await eventually(dropped)


async def _worker(rt, name):
    return rt.pods.get(("default", name))


async def test_a_pod_past_its_active_deadline_is_stopped_and_failed(env):
    """activeDeadlineSeconds in the process runtime: a running pod's processes get SIGTERM once it
    passes and the pod is Failed with reason DeadlineExceeded; one whose image is still being
    pulled then never starts, its container ending ContainerStatusUnknown."""
    client, rt, tmp = env
    pods = client.resource("", "v1", "pods")
    running = pod("capped", SERVE)
    pulling = pod("pulling", ["sh", "-c", f"touch {tmp}/pulled-ran"])
    pulling["metadata"]["annotations"] = {"sim.nanokube.io/pull-seconds": "600"}
    pulling["spec"]["containers"][0]["image"] = "registry.local/big:1"
    for p in (running, pulling):
        p["spec"]["activeDeadlineSeconds"] = 2
        await pods.create(p)
    for name in ("capped", "pulling"):
        st = (await eventually(status_of(pods, name, phase("Failed"))))["status"]
        assert (st["reason"], st["message"]) == ("DeadlineExceeded",
                                                 "Pod was active on the node longer than the specified deadline")
    term = (await pods.get("capped", "default"))["status"]["containerStatuses"][0]["state"]["terminated"]
    assert term["exitCode"] == 143  # its shell's trap ends it on SIGTERM
    term = (await pods.get("pulling", "default"))["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (term["exitCode"], term["reason"]) == (137, "ContainerStatusUnknown")
    assert not (tmp / "pulled-ran").exists()

    async def exceeded():  # written from the recorder's queue
        items, _ = await client.resource("", "v1", "events").list(namespace="default")
        return sorted(e["involvedObject"]["name"] for e in items if e["reason"] == "DeadlineExceeded")
    await becomes(exceeded, ["capped", "pulling"])


async def test_a_pod_deleted_while_its_image_is_pulled_ends_container_status_unknown(env):
    """Nothing ran, so nothing exited: the pod is Failed with its container as TerminatePod leaves
    it (ContainerStatusUnknown, 137), not Succeeded with a container still waiting."""
    client, rt, tmp = env
    pods = client.resource("", "v1", "pods")
    pulling = pod("pulling", ["sh", "-c", f"touch {tmp}/pulled-ran"])
    pulling["metadata"]["annotations"] = {"sim.nanokube.io/pull-seconds": "600"}
    pulling["metadata"]["finalizers"] = ["test.nanokube.io/keep"]
    pulling["spec"]["containers"][0]["image"] = "registry.local/big:1"
    await pods.create(pulling)
    await eventually(status_of(pods, "pulling", lambda st: st.get("containerStatuses")))
    await pods.delete("pulling", "default")
    st = (await eventually(status_of(pods, "pulling", phase("Failed"))))["status"]
    assert st["containerStatuses"][0]["state"] == {"terminated": {
        "exitCode": 137, "reason": "ContainerStatusUnknown",
        "message": "The container could not be located when the pod was terminated",
        "startedAt": None, "finishedAt": None}}  # zero times, served null
    assert not (tmp / "pulled-ran").exists()
    await pods.patch("pulling", {"metadata": {"finalizers": None}}, namespace="default")


async def test_ready_follows_the_readiness_gates_condition(env):
    client, rt, tmp = env
    pods = client.resource("", "v1", "pods")
    gated = pod("gated", SERVE)
    gated["spec"]["readinessGates"] = [{"conditionType": "example.com/lb-ready"}]
    await pods.create(gated)

    def ready(status, message):
        def check(st):
            c = next((c for c in st.get("conditions") or () if c["type"] == "Ready"), {})
            return (c.get("status"), c.get("message")) == (status, message)
        return check
    await eventually(status_of(pods, "gated", ready(
        "False", 'corresponding condition of pod readiness gate "example.com/lb-ready" does not exist.')))
    await pods.patch("gated", {"status": {"conditions": [{"type": "example.com/lb-ready", "status": "True"}]}},
                     "application/strategic-merge-patch+json", namespace="default", subresource="status")
    await eventually(status_of(pods, "gated", ready("True", None)))


async def test_an_image_volume_whose_pull_fails_holds_the_containers_until_the_pod_is_deleted(env):
    """KEP-4639 on the process runtime too: the image volume's pull fails before any container
    starts, its events on the pod (no fieldPath), the container waits ContainerCreating, nothing
    runs; deleted meanwhile, the pod goes without a container ever started."""
    client, _, _ = env
    pods, events = client.resource("", "v1", "pods"), client.resource("", "v1", "events")
    p = pod("artifact", SERVE, restart="Always")
    p["metadata"]["annotations"] = {"sim.nanokube.io/pull-error": "unauthorized"}
    p["spec"]["volumes"] = [{"name": "model", "image": {"reference": "quay.io/crio/artifact:v2"}}]
    p["spec"]["containers"][0]["volumeMounts"] = [{"name": "model", "mountPath": "/model"}]
    await pods.create(p)

    async def pulled_and_failed():
        items, _ = await events.list(namespace="default")
        seen = [(e["reason"], e["involvedObject"].get("fieldPath", ""), e["message"]) for e in items
                if e["involvedObject"]["name"] == "artifact" and e["source"]["component"] == "kubelet"]
        return seen if ("Failed", "", 'Failed to pull image "quay.io/crio/artifact:v2": unauthorized') in seen else None
    seen = await eventually(pulled_and_failed)
    assert ("Pulling", "", 'Pulling image "quay.io/crio/artifact:v2"') in seen
    assert not [r for r, path, _ in seen if path], "no container's event: none was started"
    st = (await pods.get("artifact", "default"))["status"]
    assert st["containerStatuses"][0]["state"] == {"waiting": {"reason": "ContainerCreating"}}
    await pods.delete("artifact", "default")

    async def gone():
        try:
            await pods.get("artifact", "default")
        except APIError as e:
            return e.code == 404
        return False
    assert await eventually(gone)


async def test_env_from_config_maps_and_secrets_and_a_missing_one_waits(env):
    """envFrom brings a ConfigMap's and a Secret's keys (with the prefix), env entries override them;
    a ConfigMap the environment names that does not exist keeps the container in
    CreateContainerConfigError (nothing runs) until it is created."""
    client, rt, tmp = env
    pods = client.resource("", "v1", "pods")
    await client.resource("", "v1", "secrets").create({"metadata": {"name": "creds", "namespace": "default"},
                                                       "data": {"TOKEN": "czNjcmV0"}})  # s3cret
    p = pod("env-from", ["sh", "-c", 'echo "$CFG_MODE $CFG_LEVEL $TOKEN"'])
    p["spec"]["containers"][0]["envFrom"] = [{"configMapRef": {"name": "settings"}, "prefix": "CFG_"},
                                             {"secretRef": {"name": "creds"}}]
    p["spec"]["containers"][0]["env"] = [{"name": "CFG_LEVEL", "value": "override"}]
    await pods.create(p)

    def config_error(st):
        state = (st.get("containerStatuses") or [{}])[0].get("state") or {}
        return state.get("waiting") == {"reason": "CreateContainerConfigError", "message": 'configmap "settings" not found'}
    waiting = (await eventually(status_of(pods, "env-from", config_error)))["status"]["containerStatuses"][0]
    assert (waiting["image"], waiting["imageID"]) == ("busybox:1.36", ""), "never created: as given, no image ID"
    await client.resource("", "v1", "configmaps").create({"metadata": {"name": "settings", "namespace": "default"},
                                                          "data": {"MODE": "fast", "LEVEL": "3"}})
    await eventually(status_of(pods, "env-from", phase("Succeeded")))
    assert (await log_of(rt, "env-from")) == b"fast override s3cret\n"


async def test_recursive_read_only_mounts_are_not_supported_so_enabled_fails_and_if_possible_is_disabled(env):
    """The process runtime's read-only bind is read-only at its top only, so its Node's handlers say
    recursiveReadOnlyMounts false; a mount asking for recursiveReadOnly Enabled keeps the container
    in CreateContainerConfigError (the kubelet's makeMounts), IfPossible runs it read-only with
    recursiveReadOnly Disabled in its status."""
    client, rt, tmp = env
    node = await client.resource("", "v1", "nodes").get("gpu-0")
    features = {"recursiveReadOnlyMounts": False, "userNamespaces": False}
    assert node["status"]["runtimeHandlers"] == [{"name": "runc", "features": features},
                                                 {"name": "", "features": features}]
    pods = client.resource("", "v1", "pods")
    for name, mode in (("rro-enabled", "Enabled"), ("rro-if-possible", "IfPossible")):
        p = pod(name, ["sh", "-c", "echo x > /ro-data/f || echo refused"], volumeMounts=[
            {"name": "data", "mountPath": "/ro-data", "readOnly": True, "recursiveReadOnly": mode}])
        p["spec"]["volumes"] = [{"name": "data", "emptyDir": {}}]
        await pods.create(p)

    def config_error(st):
        state = (st.get("containerStatuses") or [{}])[0].get("state") or {}
        return state.get("waiting") == {"reason": "CreateContainerConfigError", "message":
                                        'failed to resolve recursive read-only mode: volume "data" requested recursive '
                                        "read-only mode, but it is not supported by the runtime"}
    await eventually(status_of(pods, "rro-enabled", config_error))
    done = await eventually(status_of(pods, "rro-if-possible", phase("Succeeded")))
    assert done["status"]["containerStatuses"][0]["volumeMounts"] == [
        {"name": "data", "mountPath": "/ro-data", "readOnly": True, "recursiveReadOnly": "Disabled"}]
    # stdout's "refused" and sh's complaint on stderr reach the log through two pipes, in either order
    assert b"refused\n" in await log_of(rt, "rro-if-possible")


async def test_a_pod_without_host_users_never_gets_a_sandbox_as_the_runtime_has_no_user_namespaces(env):
    """The process runtime's handlers have no user namespaces: a `hostUsers: false` pod's sandbox is
    refused (the kubelet's userns manager), no process of it runs; it waits in ContainerCreating with a
    FailedCreatePodSandBox event, and goes when deleted."""
    client, rt, _ = env
    pods, events = client.resource("", "v1", "pods"), client.resource("", "v1", "events")
    p = pod("own-users", SERVE)
    p["spec"]["hostUsers"] = False
    await pods.create(p)

    async def refused():
        items, _ = await events.list(namespace="default")
        return [e for e in items if e["reason"] == "FailedCreatePodSandBox" and e["involvedObject"]["name"] == "own-users"]
    (ev,) = await eventually(refused)
    assert (ev["type"], ev["message"]) == ("Warning", "Failed to create pod sandbox: can't set `spec.hostUsers: "
                                                      "false`, runtime does not support user namespaces")
    st = (await pods.get("own-users", "default"))["status"]
    assert st["phase"] == "Pending" and not st.get("podIP")
    assert st["containerStatuses"][0]["state"] == {"waiting": {"reason": "ContainerCreating"}}
    assert ("default", "own-users") not in rt.pods  # no sandbox: the runtime runs nothing of it
    await pods.delete("own-users", "default", grace_period_seconds=0)

    async def gone():
        try:
            await pods.get("own-users", "default")
        except APIError:
            return True
        return False
    await eventually(gone)
