"""Resource limits on the process runtime, as the kubelet and runc set them in cgroups: a
container over its memory limit is OOM-killed by the kernel and reported OOMKilled (exit 137),
restarted per its restartPolicy; a cpu limit is a CFS quota that throttles; each pod's cgroup
sits below its QoS class's, and goes with the pod."""

import asyncio
import json
import os
import re
import resource
import sys
from types import SimpleNamespace

import pytest
from multidict import CIMultiDict

from nanokube.metrics.provider import MetricsProvider
from nanokube.node.runtime import limits, stdio
from nanokube.node.runtime.limits import Limits, Settings, qos_parent
from tests.controllers import eventually
from tests.node.runtime.test_process import SERVE, log_of, pod, process_agents, status_of
from tests.node.test_lifecycle import gone
from tests.node.test_simulated_io import session


@pytest.fixture
async def env(tmp_path):
    async with process_agents(tmp_path, str(tmp_path / "pods")) as (client, rt, _):
        roots = [h.root for h in rt.limits.hierarchies]
        yield client, rt
    assert [r for r in roots if os.path.exists(r)] == []


def controller(rt, name: str):
    """The hierarchy that limits with controller `name` (skipped loudly where this host has none)."""
    h = next((h for h in rt.limits.hierarchies if name in h.controllers), None)
    if h is None:
        pytest.skip(f"SKIPPED LOUDLY: no writable {name} cgroup controller here")
    return h


def read(h, *names: str) -> str:
    with open(os.path.join(h.root, *names)) as f:
        return f.read()


HOG = ["python3", "-c", "import time; b = b'x' * (256 << 20); time.sleep(300)"]


async def test_a_container_over_its_memory_limit_is_oom_killed_and_restarted(env):
    """Guaranteed (requests equal limits): the pod's cgroup is kubepods/pod<uid>, its container's
    holds the 64Mi limit; the container asks for 256Mi, the kernel kills it in its cgroup, and its
    status says so as upstream's: lastState terminated OOMKilled, 137, restartCount counted on."""
    client, rt = env
    h = controller(rt, "memory")
    pods = client.resource("", "v1", "pods")
    res = {"cpu": "500m", "memory": "64Mi"}
    created = await pods.create(pod("hog", HOG, restart="Always", resources={"requests": res, "limits": res}))
    assert created["status"]["qosClass"] == "Guaranteed"
    parent = f"kubepods/pod{created['metadata']['uid']}"
    assert qos_parent(created) == parent

    def oom_killed(st):
        cs = (st.get("containerStatuses") or [{}])[0]
        return cs.get("restartCount", 0) >= 1 and (cs.get("lastState") or {}).get("terminated", {}).get("reason")
    st = (await eventually(status_of(pods, "hog", oom_killed), timeout=30))["status"]
    ended = st["containerStatuses"][0]["lastState"]["terminated"]
    assert (ended["reason"], ended["exitCode"]) == ("OOMKilled", 137)
    limit = read(h, parent, "main", "memory.max" if h.version == 2 else "memory.limit_in_bytes").strip()
    assert limit == str(64 << 20)
    assert read(h, parent, "memory.max" if h.version == 2 else "memory.limit_in_bytes").strip() == str(64 << 20)
    await pods.delete("hog", "default")
    await eventually(gone(pods, "hog"))
    assert not os.path.exists(os.path.join(h.root, parent))


async def test_a_cpu_limit_throttles_and_each_qos_class_has_its_parent(env):
    """A Burstable container limited to 100m that spins is throttled by its CFS quota (10 ms each
    100 ms period); a BestEffort pod's cgroup is under kubepods/besteffort, with the least cpu
    shares; both go with their pods."""
    client, rt = env
    h = controller(rt, "cpu")
    pods = client.resource("", "v1", "pods")
    spin = await pods.create(pod("spin", ["sh", "-c", "while :; do :; done"], grace=0,
                                 resources={"requests": {"cpu": "50m"}, "limits": {"cpu": "100m"}}))
    # (a grace of 1 s: its shell, starved by the spinning one as BestEffort is, may not have set its trap yet)
    idle = await pods.create(pod("idle", SERVE, grace=1))
    assert (spin["status"]["qosClass"], idle["status"]["qosClass"]) == ("Burstable", "BestEffort")
    spin_dir = f"kubepods/burstable/pod{spin['metadata']['uid']}"
    idle_dir = f"kubepods/besteffort/pod{idle['metadata']['uid']}"
    for name in ("spin", "idle"):
        await eventually(status_of(pods, name, lambda st: st.get("phase") == "Running"))
    if h.version == 2:
        assert read(h, spin_dir, "main", "cpu.max").split() == ["10000", "100000"]
        assert read(h, idle_dir, "main", "cpu.weight").strip() == "1"
    else:
        assert read(h, spin_dir, "main", "cpu.cfs_quota_us").strip() == "10000"
        assert read(h, spin_dir, "main", "cpu.shares").strip() == "51"
        assert read(h, "kubepods/besteffort", "cpu.shares").strip() == "2"
        assert read(h, "kubepods", "cpu.shares").strip() == str((os.cpu_count() or 1) * 1024)

    async def throttled():
        stat = dict(line.split() for line in read(h, spin_dir, "main", "cpu.stat").splitlines())
        return int(stat["nr_throttled"]) > 0
    await eventually(throttled, timeout=10)
    for name in ("spin", "idle"):
        await pods.delete(name, "default")
        await eventually(gone(pods, name))

    async def removed():  # (a grace-0 deletion is gone from the API before the node tears the pod down)
        return not os.path.exists(os.path.join(h.root, spin_dir)) and not os.path.exists(os.path.join(h.root, idle_dir))
    await eventually(removed)


def test_settings_are_the_kubelets_conversions():
    """MilliCPUToShares, MilliCPUToQuota (100 ms period, 1 ms floor) and the v2 weight of those
    shares (the runtimes' log-scaled conversion: v1's default 1024 is v2's default 100)."""
    s = Settings(memory=128 << 20, cpu_limit=5, cpu_request=250)
    assert s.files(1, "cpu") == {"cpu.cfs_period_us": "100000", "cpu.shares": "256", "cpu.cfs_quota_us": "1000"}
    assert s.files(2, "cpu") == {"cpu.weight": "35", "cpu.max": "1000 100000"}
    assert [limits.weight(shares) for shares in (2, 1024, 262144)] == [1, 100, 10000]
    assert Settings().files(2, "memory") == {"memory.max": "max"}
    assert Settings().files(1, "memory") == {"memory.limit_in_bytes": "-1"}
    p = {"metadata": {"uid": "u"}, "spec": {"containers": [{"name": "a"}, {"name": "b"}]}}
    both = {"a": {"limits": {"memory": "1Mi", "cpu": "1"}}, "b": {"limits": {"memory": "2Mi"}}}
    assert limits.pod_settings(p, both) == Settings(memory=3 << 20, cpu_limit=None, cpu_request=0)
    # a pod-level resize: the pod cgroup takes the pod's allocation (inplace.POD), not its spec's
    p["spec"]["resources"] = {"limits": {"memory": "4Mi"}}
    assert limits.pod_settings(p, {}).memory == 4 << 20
    assert limits.pod_settings(p, {"": {"limits": {"memory": "8Mi", "cpu": "2"}}}) == Settings(
        memory=8 << 20, cpu_limit=2000, cpu_request=0)


def test_without_a_memory_controller_the_runtime_says_so(monkeypatch, caplog):
    """Where no hierarchy offers memory or cpu, the runtime logs what it falls back to."""
    monkeypatch.setattr(limits, "own_cgroup_dir", lambda _c: None)
    lim = Limits("t")
    lim.create(None)
    assert not lim.memory and lim.hierarchies == []
    told = " ".join(r.getMessage() for r in caplog.records)
    assert "once-a-second check of its resident memory" in told and "cpu limits are not enforced" in told


async def test_without_a_memory_controller_the_watchdog_kills_over_the_limit(tmp_path, monkeypatch):
    """No memory controller (none here stands for a host without one): the runtime's once-a-second
    check of resident memory kills the container over its limit, reported as the kernel's kill is."""
    monkeypatch.setattr(limits, "own_cgroup_dir", lambda _c: None)
    monkeypatch.setattr(limits, "v2_controllers", lambda _root: ())
    async with process_agents(tmp_path, str(tmp_path / "pods")) as (client, rt, _):
        assert not rt.limits.memory
        pods = client.resource("", "v1", "pods")
        await pods.create(pod("hog", HOG, restart="OnFailure", resources={"limits": {"memory": "64Mi"}}))

        def ended(st):
            cs = (st.get("containerStatuses") or [{}])[0]
            return (cs.get("lastState") or {}).get("terminated")
        st = (await eventually(status_of(pods, "hog", ended), timeout=30))["status"]
        ended = st["containerStatuses"][0]["lastState"]["terminated"]
        assert (ended["reason"], ended["exitCode"]) == ("OOMKilled", 137)
        await pods.delete("hog", "default")
        await eventually(gone(pods, "hog"))


async def test_a_launch_into_a_cgroup_that_is_gone_fails_leaking_no_descriptor(tmp_path):
    """A container's v1 cgroup removed with its pod as an exec starts: the launch fails, and neither
    its pipe nor a cgroup.procs it had opened before stays open."""
    (tmp_path / "cgroup.procs").write_text("")  # (a file standing for a cgroup it can open)
    before = set(os.listdir("/proc/self/fd"))
    with pytest.raises(FileNotFoundError):
        await stdio.launch([sys.executable, "-c", "pass"], None, [str(tmp_path), str(tmp_path / "gone")],
                           stdin=asyncio.subprocess.DEVNULL)
    assert set(os.listdir("/proc/self/fd")) == before


def test_a_cgroup_v2_tree_gets_its_files_and_controllers(tmp_path):
    """On a v2 hierarchy (a plain directory stands for one: none here offers controllers) each level
    enables the controllers for the next, the pod's and the container's cgroups get memory.max,
    cpu.max and cpu.weight, the container's memory.oom.group (one OOM kill takes it whole, as the
    kubelet sets it on v2), and the OOM count is read from memory.events; no v1 cgroup to join."""
    lim = Limits("t", [limits.Hierarchy(str(tmp_path), 2, ("memory", "cpu"))])
    parent = "kubepods/burstable/podu"
    lim.pod(parent, Settings(memory=3 << 20, cpu_limit=None, cpu_request=100))
    assert lim.container(parent, "main", Settings(memory=1 << 20, cpu_limit=250, cpu_request=100)) == []
    for level in ("", "kubepods", "kubepods/burstable", parent):
        assert (tmp_path / level / "cgroup.subtree_control").read_text() == "+memory +cpu"
    assert (tmp_path / "kubepods/besteffort").exists() is False
    assert (tmp_path / "kubepods/cpu.weight").read_text() == str(limits.weight((os.cpu_count() or 1) * 1024))
    pod_dir, main = tmp_path / parent, tmp_path / parent / "main"
    assert [(pod_dir / f).read_text() for f in ("memory.max", "cpu.max", "cpu.weight")] == [
        str(3 << 20), "max 100000", "17"]
    assert [(main / f).read_text() for f in ("memory.max", "cpu.max", "memory.oom.group")] == [
        str(1 << 20), "25000 100000", "1"]
    (main / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
    assert lim.oom_kills(parent, "main") == 1


async def test_a_cgroup_that_cannot_be_made_leaves_the_container_running_without_its_limits(tmp_path, caplog):
    """As cgroup.py runs a container outside a cgroup it cannot make, the limits' cgroups degrade:
    a hierarchy whose root is no directory (none can be made below it) leaves the pod and its
    container running without that hierarchy's limits, each said once, and no cgroup is joined."""
    async with process_agents(tmp_path, str(tmp_path / "pods")) as (client, rt, _):
        real, blocked = rt.limits.hierarchies, tmp_path / "not-a-directory"
        blocked.write_text("")
        rt.limits.hierarchies = [limits.Hierarchy(str(blocked), 1, ("memory", "cpu"))]
        try:
            pods = client.resource("", "v1", "pods")
            res = {"cpu": "100m", "memory": "64Mi"}
            created = await pods.create(pod("capped", SERVE, grace=0, resources={"requests": res, "limits": res}))
            await eventually(status_of(pods, "capped", lambda st: st.get("phase") == "Running"))
            worker = rt.pods[("default", "capped")]
            assert worker.containers["main"].joins == []
            parent = f"kubepods/pod{created['metadata']['uid']}"
            told = [r.getMessage() for r in caplog.records if "runs without" in r.getMessage()]
            assert [m.rsplit(": ", 1)[1] for m in told] == [
                f"pod {parent} runs without its memory and cpu limits",
                f"container main of {parent} runs without its memory and cpu limits"]
            await pods.delete("capped", "default")
            await eventually(gone(pods, "capped"))
        finally:
            rt.limits.hierarchies = real


async def test_a_memory_limit_lowered_below_usage_waits_with_the_resize_in_progress_and_its_error(env):
    """The kubelet's best effort against an OOM kill: a resize that lowers a container's memory limit
    below what it uses is not actuated; PodResizeInProgress says Error with the usage and the limit,
    the container keeps running with its old limit, and a resize that fits again completes."""
    client, rt = env
    pods = client.resource("", "v1", "pods")
    hold = ["python3", "-c", "import time; b = b'x' * (128 << 20); print('held', flush=True); time.sleep(300)"]
    big = {"requests": {"memory": "256Mi"}, "limits": {"memory": "256Mi"}}
    created = await pods.create(pod("hold", hold, grace=0, resources=big))

    async def holding():
        usage = rt.usage(await pods.get("hold", "default"))
        return usage and usage["main"].memory > 128 << 20
    await eventually(holding, timeout=30)

    async def resize(memory: str):
        await pods.patch("hold", {"spec": {"containers": [{"name": "main", "resources": {
            "requests": {"memory": memory}, "limits": {"memory": memory}}}]}},
            "application/strategic-merge-patch+json", namespace="default", subresource="resize")
    await resize("64Mi")

    def held_back(st):
        return next((c for c in st.get("conditions") or () if c["type"] == "PodResizeInProgress"
                     and c.get("reason") == "Error"), None)
    st = (await eventually(status_of(pods, "hold", held_back), timeout=30))["status"]
    message = held_back(st)["message"]
    # the kubelet's words: the pod's cgroup (its one container's limit) and the container's, aggregated
    assert re.fullmatch(rf"cannot decrease memory limits: \[attempting to set pod memory limit \({64 << 20}\) below "
                        rf"current usage \((\d+)\), attempting to set container \"main\" memory limit \({64 << 20}\) "
                        rf"below current usage \(\1\)\]", message), message
    [main] = st["containerStatuses"]
    assert "running" in main["state"] and main["restartCount"] == 0
    assert main["resources"]["limits"]["memory"] == "256Mi"
    h = next((h for h in rt.limits.hierarchies if "memory" in h.controllers), None)
    parent = qos_parent(created)
    if h is not None:
        assert read(h, parent, "main", "memory.max" if h.version == 2 else "memory.limit_in_bytes").strip() == \
            str(256 << 20)

    await resize("200Mi")

    def completed(st):
        [c] = st.get("containerStatuses") or [{}]
        return c.get("resources", {}).get("limits", {}).get("memory") == "200Mi" and not any(
            c["type"].startswith("PodResize") for c in st.get("conditions") or ())
    await eventually(status_of(pods, "hold", completed), timeout=30)
    if h is not None:
        assert read(h, parent, "main", "memory.max" if h.version == 2 else "memory.limit_in_bytes").strip() == \
            str(200 << 20)
    await pods.delete("hold", "default")
    await eventually(gone(pods, "hold"))


#: forks until the kernel refuses one (at most 100: bounded, whatever the limit), says how many it
#: made, and waits with its children, which sleep
FORKS = ["python3", "-c", """
import os, time
made = 0
try:
    for _ in range(100):
        if os.fork() == 0:
            time.sleep(300)
            os._exit(0)
        made += 1
    print(f"forked {made}", flush=True)
except OSError as e:
    print(f"forked {made}: {e.strerror}", flush=True)
time.sleep(300)
"""]


async def test_the_kubelets_pod_pids_limit_keeps_a_fork_bomb_in_its_pod(tmp_path):
    """podPidsLimit (the kubelet's --pod-max-pids) is the pod cgroup's pids.max: a container forking
    without end is refused its 17th process (EAGAIN) while a pod beside it still starts; the
    container's own cgroup has no limit of its own, as the CRI passes none."""
    async with process_agents(tmp_path, str(tmp_path / "pods"), pod_pids_limit=16) as (client, rt, _):
        h = controller(rt, "pids")
        pods = client.resource("", "v1", "pods")
        bomb = await pods.create(pod("bomb", FORKS, grace=0))
        await eventually(status_of(pods, "bomb", lambda st: st.get("phase") == "Running"))
        await eventually(lambda: log_of(rt, "bomb"), timeout=30)
        said = (await log_of(rt, "bomb")).decode()
        assert said == "forked 15: Resource temporarily unavailable\n", said
        parent = qos_parent(bomb)
        assert read(h, parent, "pids.max").strip() == "16"
        assert read(h, parent, "main", "pids.max").strip() == "max"
        assert int(read(h, parent, "pids.current")) == 16
        await pods.create(pod("beside", SERVE, grace=0))
        await eventually(status_of(pods, "beside", lambda st: st.get("phase") == "Running"))
        for name in ("bomb", "beside"):
            await pods.delete(name, "default")
            await eventually(gone(pods, name))
    assert not os.path.exists(h.root)


async def test_the_burstable_qos_cgroup_weighs_as_its_pods_requests(env):
    """The kubelet's QoS container manager: kubepods/burstable's cpu shares are its pods' cpu requests
    together (MilliCPUToShares), set again as one comes, is resized and goes (2 with none); a
    BestEffort or Guaranteed pod changes nothing there."""
    client, rt = env
    h = controller(rt, "cpu")
    pods = client.resource("", "v1", "pods")

    def shares():
        value = read(h, "kubepods/burstable", "cpu.weight" if h.version == 2 else "cpu.shares").strip()
        return int(value)

    def expect(millicpu):
        return limits.weight(max(millicpu * 1024 // 1000, 2)) if h.version == 2 else max(millicpu * 1024 // 1000, 2)
    for name, cpu in (("small", "100m"), ("large", "300m")):
        await pods.create(pod(name, SERVE, grace=0, resources={"requests": {"cpu": cpu}}))
    guaranteed = {"cpu": "1", "memory": "64Mi"}
    await pods.create(pod("fixed", SERVE, grace=0, resources={"requests": guaranteed, "limits": guaranteed}))
    for name in ("small", "large", "fixed"):
        await eventually(status_of(pods, name, lambda st: st.get("phase") == "Running"))
    assert shares() == expect(400)  # (409 shares on v1)
    await pods.patch("large", {"spec": {"containers": [{"name": "main", "resources": {"requests": {"cpu": "500m"}}}]}},
                     "application/strategic-merge-patch+json", namespace="default", subresource="resize")

    async def resized():
        return shares() == expect(600)
    await eventually(resized)
    await pods.delete("large", "default")
    await eventually(gone(pods, "large"))

    async def one_left():
        return shares() == expect(100)
    await eventually(one_left)
    for name in ("small", "fixed"):
        await pods.delete(name, "default")
        await eventually(gone(pods, name))

    async def none_left():
        return shares() == expect(0)
    await eventually(none_left)


async def test_a_container_sees_its_own_cgroups_read_only_at_sys_fs_cgroup(tmp_path):
    """As runc mounts them: an exec (the kubelet's, as `kubectl exec` reaches it) reads its
    container's limits at /sys/fs/cgroup (v1: a tmpfs with each controller's cgroup, the v2 one as
    `unified`; v2 only: its cgroup itself), and cannot write there."""
    async with process_agents(tmp_path, str(tmp_path / "pods")) as (client, rt, mgr):
        for name in ("memory", "cpu", "pids"):
            controller(rt, name)
        pods = client.resource("", "v1", "pods")
        created = await pods.create(pod("capped", SERVE, grace=0, resources={"limits": {"cpu": "1", "memory": "64Mi"}}))
        await eventually(status_of(pods, "capped", lambda st: st.get("phase") == "Running"))
        v1 = any(h.version == 1 for h in rt.limits.hierarchies)
        files = ("memory/memory.limit_in_bytes", "cpu/cpu.cfs_quota_us", "pids/pids.max") if v1 else \
            ("memory.max", "cpu.max", "pids.max")
        out: list[bytes] = []
        script = f"cd /sys/fs/cgroup; cat {' '.join(files)}; echo 1 > {files[0]}"
        code = await mgr.agents["gpu-0"].streaming.exec("default", "capped", created["metadata"]["uid"], "main",
                                                         ["sh", "-c", script], session(out))
        said = b"".join(out).decode()
        limits = f"{64 << 20}\n100000\nmax\n" if v1 else f"{64 << 20}\n100000 100000\nmax\n"
        assert code == 2 and said.startswith(limits) and said.endswith(": Read-only file system\n"), said
        await pods.delete("capped", "default")
        await eventually(gone(pods, "capped"))


async def test_a_container_has_containerds_open_files_limit(tmp_path):
    """containerd 2 sets no limits of its own: a container has those systemd gives its unit, open
    files 1024 (hard 524288, or this host's hard limit where root may not raise it) whatever the
    node agent's own process has; the container may raise its soft limit up to the hard one."""
    async with process_agents(tmp_path, str(tmp_path / "pods")) as (client, rt, mgr):
        pods = client.resource("", "v1", "pods")
        created = await pods.create(pod("files", SERVE, grace=0))
        await eventually(status_of(pods, "files", lambda st: st.get("phase") == "Running"))
        out: list[bytes] = []
        code = await mgr.agents["gpu-0"].streaming.exec("default", "files", created["metadata"]["uid"], "main",
                                                         ["sh", "-c", "ulimit -n; ulimit -Hn; ulimit -n 2048; ulimit -n"],
                                                         session(out))
        soft, hard, raised = b"".join(out).decode().split()
        assert (code, soft, raised) == (0, "1024", "2048")
        assert int(hard) == min(524288, resource.getrlimit(resource.RLIMIT_NOFILE)[1]) or int(hard) == 524288, hard
        await pods.delete("files", "default")
        await eventually(gone(pods, "files"))


async def test_the_summary_counts_each_containers_processes(tmp_path, monkeypatch):
    """The pod's process_stats and the node's rlimit (what pid.available observes) count the
    processes its containers run (their sessions'), not one per container: a shell with two
    background sleeps is three."""
    async with process_agents(tmp_path, str(tmp_path / "pods")) as (client, rt, mgr):
        monkeypatch.setattr(MetricsProvider, "usage_sources", (rt.usage,))  # as `nanokube up` measures them
        pods = client.resource("", "v1", "pods")
        await pods.create(pod("jobs", ["sh", "-c", "trap 'exit 143' TERM; sleep 300 & sleep 300 & wait"], grace=0))
        await eventually(status_of(pods, "jobs", lambda st: st.get("phase") == "Running"))
        kubelet = mgr.kubelet_for("gpu-0")

        async def summary():
            got = json.loads((await kubelet.serve(SimpleNamespace(method="GET", query={}, headers=CIMultiDict()),
                                                  "/stats/summary")).text)
            return got if got["pods"] and got["pods"][0]["process_stats"]["process_count"] == 3 else None
        got = await eventually(summary)
        assert got["node"]["rlimit"]["curproc"] == 3
        await pods.delete("jobs", "default")
        await eventually(gone(pods, "jobs"))
