"""A memory-backed emptyDir on the process runtime: a tmpfs of its size at the volume's directory,
as the kubelet's emptyDir plugin mounts it, gone with the pod."""

import json
import os
import time
from types import SimpleNamespace

import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from multidict import CIMultiDict

from nanokube.apiserver.auth.serviceaccount import ServiceAccountTokens

from nanokube.node.streaming import log_options
from tests.controllers import eventually
from tests.node.runtime.test_process import phase, pod, process_agents, status_of


@pytest.fixture
async def env(tmp_path):
    async with process_agents(tmp_path, str(tmp_path / "pods")) as (client, rt, mgr):
        yield client, rt, mgr, tmp_path


def mounted(path: str) -> bool:
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == path for line in f)


async def test_a_memory_emptydir_is_a_tmpfs_of_its_size_limit_and_a_write_past_it_fails(env):
    """dd past the 1Mi sizeLimit gets ENOSPC with 1 MiB written; the summary measures the volume
    as the tmpfs it is (its capacity the sizeLimit) and charges its pages to the container's
    memory; the mount goes when the pod does."""
    client, rt, mgr, tmp = env
    target = str(tmp / "cache")
    script = (f"dd if=/dev/zero of={target}/blob bs=1M count=2 2>&1 | head -1; wc -c < {target}/blob; "
              f"echo ready; sleep 300")
    p = pod("ram", ["sh", "-c", script], grace=1, volumeMounts=[{"name": "cache", "mountPath": target}])
    p["spec"]["volumes"] = [{"name": "cache", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}}]
    pods = client.resource("", "v1", "pods")
    created = await pods.create(p)
    await eventually(status_of(pods, "ram", phase("Running")))
    worker = rt.pods[("default", "ram")]

    async def written():
        data = await worker.logs("main", log_options({}, time.time()))
        return data if isinstance(data, bytes) and data.endswith(b"ready\n") else None
    log = (await eventually(written)).decode().splitlines()
    assert "No space left on device" in log[0] and log[1:] == ["1048576", "ready"]
    volume = worker.agent.volumes.volume_dir(created["metadata"]["uid"], "cache")
    assert mounted(volume)
    summary = json.loads((await mgr.kubelet_for("gpu-0").serve(
        SimpleNamespace(method="GET", query={}, headers=CIMultiDict()), "/stats/summary")).text)
    [ram] = [s for s in summary["pods"] if s["podRef"]["name"] == "ram"]
    [cache] = ram["volume"]
    assert (cache["capacityBytes"], cache["usedBytes"]) == (2**20, 2**20)
    assert ram["containers"][0]["memory"]["workingSetBytes"] >= 2**20
    await pods.delete("ram", "default")

    async def unmounted():
        return not mounted(volume)
    await eventually(unmounted)



async def test_volume_modes_are_the_kubelets(env):
    """A Memory emptyDir is sticky as the tmpfs root the kubelet mounts (1777), a disk one 0777;
    with an fsGroup both are its setgid too (3777, 2777), and a projected token is 0600 before the
    group's read bit (0640) where a downwardAPI file keeps its 0644."""
    client, rt, _, tmp = env
    rest = client.rest

    def lookup(plural, namespace, name):
        e = rest.cache.get(rest.index.get("", "v1", plural).key(namespace, name))
        return e.obj if e else None
    rest.tokens = ServiceAccountTokens(ec.generate_private_key(ec.SECP256R1()), lookup)
    await client.resource("", "v1", "serviceaccounts").create({"metadata": {"name": "runner", "namespace": "default"}})
    pods = client.resource("", "v1", "pods")
    for name, group in (("plain", None), ("grouped", 2000)):
        where = tmp / name
        script = (f"stat -c %a {where}/mem {where}/disk; stat -Lc '%a %g' {where}/proj/token {where}/proj/name; "
                  "echo ready; sleep 300")
        p = pod(name, ["sh", "-c", script], grace=1, volumeMounts=[
            {"name": v, "mountPath": f"{where}/{v}"} for v in ("mem", "disk", "proj")])
        p["spec"]["serviceAccountName"] = "runner"
        if group:
            p["spec"]["securityContext"] = {"fsGroup": group}
        p["spec"]["volumes"] = [
            {"name": "mem", "emptyDir": {"medium": "Memory"}}, {"name": "disk", "emptyDir": {}},
            {"name": "proj", "projected": {"sources": [
                {"serviceAccountToken": {"path": "token"}},
                {"downwardAPI": {"items": [{"path": "name", "fieldRef": {"fieldPath": "metadata.name"}}]}}]}}]
        await pods.create(p)
    expected = {"plain": ["1777", "777", "644 0", "644 0"], "grouped": ["3777", "2777", "640 2000", "644 2000"]}
    for name, lines in expected.items():
        await eventually(status_of(pods, name, phase("Running")))
        worker = rt.pods[("default", name)]

        async def written():
            data = await worker.logs("main", log_options({}, time.time()))
            return data if isinstance(data, bytes) and data.endswith(b"ready\n") else None
        assert (await eventually(written)).decode().splitlines() == [*lines, "ready"]


async def test_secret_and_projected_volumes_are_a_tmpfs_of_the_pods_memory_limit(env):
    """The secret and projected plugins wrap a Memory emptyDir without a sizeLimit: their files go
    to a tmpfs (never the node's disk) sized by the pod's memory limit, unmounted with the pod."""
    client, rt, _, tmp = env
    await client.resource("", "v1", "secrets").create(
        {"metadata": {"name": "hf", "namespace": "default"}, "data": {"token": "aGY="}})
    script = f"cat {tmp}/hf/token; echo; cat {tmp}/info/name; echo; echo ready; sleep 300"
    p = pod("reader", ["sh", "-c", script], grace=1, resources={"limits": {"memory": "64Mi"}},
            volumeMounts=[{"name": v, "mountPath": f"{tmp}/{v}"} for v in ("hf", "info")])
    p["spec"]["volumes"] = [{"name": "hf", "secret": {"secretName": "hf"}}, {"name": "info", "projected": {"sources": [
        {"downwardAPI": {"items": [{"path": "name", "fieldRef": {"fieldPath": "metadata.name"}}]}}]}}]
    pods = client.resource("", "v1", "pods")
    created = await pods.create(p)
    await eventually(status_of(pods, "reader", phase("Running")))
    worker = rt.pods[("default", "reader")]

    async def written():
        data = await worker.logs("main", log_options({}, time.time()))
        return data if isinstance(data, bytes) and data.endswith(b"ready\n") else None
    assert (await eventually(written)).decode().splitlines() == ["hf", "reader", "ready"]
    volumes = [worker.agent.volumes.volume_dir(created["metadata"]["uid"], v) for v in ("hf", "info")]
    for volume in volumes:
        assert mounted(volume)
        st = os.statvfs(volume)
        assert st.f_blocks * st.f_frsize == 64 * 2**20
    await pods.delete("reader", "default")

    async def unmounted():
        return not any(mounted(v) for v in volumes)
    await eventually(unmounted)
