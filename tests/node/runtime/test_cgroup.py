"""Cgroups on the process runtime, as runc gives each container one: a kill reaches every process
a container or an exec started, those that left its process group and session too, and an exec
probe that times out is killed with all it started while its container runs on."""

import asyncio
import json
import os
import secrets
import shutil
import sys

import pytest

from nanokube.node.runtime import cgroup, stdio
from nanokube.node.runtime.cgroup import Cgroups
from nanokube.node.runtime.worker import LAUNCHER
from tests.controllers import eventually
from tests.node.runtime.test_pid_namespaces import run, started
from tests.node.runtime.test_process import kubelet_events, pod, process_agents, status_of
from tests.node.test_lifecycle import gone


@pytest.fixture
async def env(tmp_path):
    async with process_agents(tmp_path, str(tmp_path / "pods")) as (client, rt, _):
        root = rt.cgroups.root
        if root is None:
            pytest.skip("SKIPPED LOUDLY: no writable cgroup v2 hierarchy with cgroup.kill here")
        yield client, rt, tmp_path
    assert not os.path.exists(root)


def alive(pid: int) -> bool:
    """Whether process `pid` runs (a zombie does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def pids(path) -> list[list[int]]:
    """The lines of PIDs the test's commands wrote to `path` (none yet: [])."""
    try:
        return [[int(p) for p in line.split()] for line in path.read_text().splitlines() if line.strip()]
    except FileNotFoundError:
        return []


async def written(path, lines: int = 1) -> list[list[int]]:
    """Once the test's commands wrote `lines` lines of PIDs to `path`: those."""
    async def check():
        got = pids(path)
        return got if len(got) >= lines and path.read_text().endswith("\n") else None
    return await eventually(check)


async def test_killing_a_container_kills_what_left_its_process_group(env):
    """hostPID and hostNetwork (no namespace ends with the pod to take everything in it along): a
    process that made a session of its own is in the container's cgroup, and goes when its first
    process ends, where a kill of the process group missed it."""
    client, rt, tmp = env
    pods = client.resource("", "v1", "pods")
    record = tmp / "escaped"
    p = pod("escape", ["sh", "-c", f"setsid sleep 4711 & echo $! > {record}; trap 'exit 143' TERM; sleep 300 & wait"],
            grace=30)
    p["spec"]["hostPID"] = p["spec"]["hostNetwork"] = True  # (a pod network namespace's removal kills all in it)
    created = await pods.create(p)
    await eventually(status_of(pods, "escape", lambda st: st.get("phase") == "Running"))
    [[escaped]] = await written(record)
    with open(f"/proc/{escaped}/cgroup") as f:
        own = next(line for line in f if line.startswith("0::"))
        assert own.strip().endswith(f"/nanokube-{rt.net.tag}/kubepods/besteffort/pod{created['metadata']['uid']}/main")

    async def own_session():
        return os.getsid(escaped) == escaped
    await eventually(own_session)
    await pods.delete("escape", "default")
    await eventually(gone(pods, "escape"))
    assert not alive(escaped)


async def test_an_exec_probe_that_times_out_is_killed_with_all_it_started(env):
    """Each attempt of the probe outlives its timeoutSeconds: it fails (`timed out`) and is killed,
    the process it left in a session of its own too, before the next attempt starts; the container
    runs on."""
    client, rt, tmp = env
    pods = client.resource("", "v1", "pods")
    record = tmp / "attempts"
    p = pod("slow-probe", ["sleep", "300"], restart="Always",
            readinessProbe={"exec": {"command": ["sh", "-c", f"setsid sleep 4721 & echo $$ $! >> {record}; wait"]},
                            "periodSeconds": 1, "timeoutSeconds": 1})
    p["spec"]["hostPID"] = True  # the PIDs written are the host's
    await pods.create(p)
    first = (await written(record, 2))[0]
    assert not any(alive(pid) for pid in first)

    async def timed_out():
        return [m for _, r, _, m, _ in await kubelet_events(client, "slow-probe") if r == "Unhealthy"]
    message = f'Readiness probe failed: command "sh -c setsid sleep 4721 & echo $$ $! >> {record}; wait" timed out'
    assert message in await eventually(timed_out)
    w = rt.pods[("default", "slow-probe")]
    assert w.containers["main"].proc.returncode is None and w.containers["main"].restarts == 0


async def test_a_cancelled_exec_is_killed_with_all_it_started(tmp_path):
    """An exec collected to its end (a hook's, a probe's) whose caller gives up: it is killed with
    the process it left in a session of its own, and its cgroup removed."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("SKIPPED LOUDLY: launching needs root and unshare")
    cgroups = Cgroups("t" + secrets.token_hex(3))
    cgroups.create()
    root = cgroups.root
    if root is None:
        pytest.skip("SKIPPED LOUDLY: no writable cgroup v2 hierarchy with cgroup.kill here")
    record = tmp_path / "pids"
    try:
        spec = {"hostname": "cancel", "pid": None, "env": {"PATH": os.environ["PATH"]}, "workdir": "/",
                "argv": ["sh", "-c", f"setsid sleep 4731 & echo $$ $! > {record}; wait"]}
        argv = ["unshare", "--mount", "--propagation", "private", sys.executable, "-I", LAUNCHER, json.dumps(spec)]
        cgroup = cgroups.exec_path(cgroups.path("pod", "main"))
        run = asyncio.ensure_future(stdio.run_to_end(argv, cgroup, None, stdout=asyncio.subprocess.PIPE))
        [started] = await written(record)
        assert all(alive(pid) for pid in started)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        assert not any(alive(pid) for pid in started)
        assert not os.path.exists(cgroup)
    finally:
        cgroups.close()
    assert not os.path.exists(root)


async def test_what_an_exec_started_goes_with_its_container(env):
    """`kubectl exec` runs in its container's cgroup (hostPID and hostNetwork: no namespace ends
    with the pod to take it along): a process it left in a session of its own is killed with the
    container, as a container's exec processes go with it under runc."""
    client, rt, tmp = env
    pods = client.resource("", "v1", "pods")
    p = pod("exec-left", ["sh", "-c", "trap 'exit 143' TERM; sleep 300 & wait"], grace=30)
    p["spec"]["hostPID"] = p["spec"]["hostNetwork"] = True  # (a pod network namespace's removal kills all in it)
    _, server = await started(pods, rt, p)
    script = "setsid sleep 4741 </dev/null >/dev/null 2>&1 & echo $!".replace(" ", "\t")  # (/run splits at spaces)
    left = int(await run(server, "exec-left", "main", f"sh -c {script}"))
    assert alive(left)
    await pods.delete("exec-left", "default")
    await eventually(gone(pods, "exec-left"))
    assert not alive(left)


async def test_without_a_cgroup2_hierarchy_the_runtime_says_so_and_its_pods_run_as_before(tmp_path, monkeypatch,
                                                                                         caplog):
    """Where no cgroup2 with cgroup.kill is to be had (cgroup v1, an old kernel; here a plain
    directory stands for it), the runtime logs why and runs its containers without cgroups: a pod
    starts, its exec probe passes, `kubectl exec` runs, and its deletion still kills its processes
    (their process group)."""
    monkeypatch.setattr(cgroup, "own_cgroup_dir", lambda: str(tmp_path))
    async with process_agents(tmp_path, str(tmp_path / "pods")) as (client, rt, _):
        assert rt.cgroups.root is None and not os.path.exists(tmp_path / f"nanokube-{rt.net.tag}")
        assert any("lacks cgroup.kill: kills reach process groups only" in r.getMessage() for r in caplog.records)
        pods = client.resource("", "v1", "pods")
        record = tmp_path / "child"
        p = pod("plain", ["sh", "-c", f"sleep 4731 & echo $! > {record}; trap 'exit 143' TERM; wait"], grace=30,
                readinessProbe={"exec": {"command": ["true"]}, "periodSeconds": 1})
        p["spec"]["hostPID"] = p["spec"]["hostNetwork"] = True  # no namespace ends with the pod to take it along
        w, server = await started(pods, rt, p)
        await eventually(status_of(pods, "plain", lambda st: st["containerStatuses"][0]["ready"]))
        assert (await run(server, "plain", "main", "echo exec")).strip() == "exec"
        [[child]] = await written(record)
        with open(f"/proc/{child}/cgroup") as f:  # (a cgroup v1 controller's limits.py may still use; a host
            # with no cgroup2 mounted has no 0:: line at all)
            assert "nanokube-" not in next((line for line in f if line.startswith("0::")), "")
        await pods.delete("plain", "default")
        await eventually(gone(pods, "plain"))
        assert not alive(child)


def test_a_directory_no_process_can_join_is_told_from_a_cgroup(tmp_path):
    """The runtime tries once that a process can join a cgroup below its own before it relies on
    cgroups: a directory that is no cgroup (as a hierarchy that withholds cgroup.procs) is refused
    with why, this host's cgroup2 taken, and the probe leaves nothing behind either way."""
    assert cgroup.refuses_processes(str(tmp_path)) == "it has no cgroup.procs"
    assert os.listdir(tmp_path) == []
    cgroups = Cgroups("t" + secrets.token_hex(3))
    cgroups.create()
    if cgroups.root is None:
        pytest.skip("SKIPPED LOUDLY: no writable cgroup v2 hierarchy with cgroup.kill here")
    try:
        assert cgroup.refuses_processes(cgroups.root) is None
        assert not os.path.exists(os.path.join(cgroups.root, "probe"))
    finally:
        cgroups.close()
