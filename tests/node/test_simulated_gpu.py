"""`nvidia-smi` in a GPU pod on the default cluster, through the kubelet's exec (what the exec
subresource reaches) and the container's own command: the GPUs its claim or NVIDIA_VISIBLE_DEVICES
gave it, as the real tool prints them; none (and no binary) without any."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

from nanokube.machinery.streaming import LogOptions, StreamFailed
from nanokube.node.devices import Device
from nanokube.node.simulated_command import interpret
from nanokube.node.simulated_io import SimulatedIO
from tests.controllers import eventually
from tests.node.dra.test_prepare import allocate, claim_body, env, phase, pod_body, running_trainer
from tests.node.test_simulated_io import session, typed, worker

__all__ = ["env"]  # the fixture: an API server and the default cluster's node agents
QUERY = "--query-gpu=index,name,uuid,memory.total,memory.used,utilization.gpu"


async def exec_(mgr, pod: str, command: list[str]) -> tuple[int, str]:
    agent = mgr.agents["gpu-0"]
    uid = next(u for u, w in agent.workers.items() if w.name == pod)
    out: list[bytes] = []
    code = await agent.streaming.exec("default", pod, uid, "app", command, session(out))
    return code, b"".join(out).decode()


def node_gpus(mgr, *names: str) -> list:
    return [next(d for d in mgr.agents["gpu-0"].spec.devices if d.name == n) for n in names]


async def test_nvidia_smi_prints_the_table_of_the_gpus_the_claim_gave_the_container(env):
    """The claim's two H100s (gpu-0, gpu-1 of the node's eight): the header with the cluster file's
    driver and CUDA versions, a block per GPU (bus id, idle memory of its total, 0% busy), and an
    empty processes table; exit 0."""
    client, clock, mgr = env
    await running_trainer(client, clock)
    code, out = await exec_(mgr, "trainer", ["nvidia-smi"])
    assert code == 0
    lines = out.splitlines()
    assert re.fullmatch(r"\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4} +", lines[0])
    assert lines[2] == ("| NVIDIA-SMI 550.54.15              Driver Version: 550.54.15      "
                        "CUDA Version: 12.4     |")
    rows = [line for line in lines if re.match(r"\|\s+\d  NVIDIA", line)]
    assert rows == ["|   0  NVIDIA H100 80GB HBM3          On  |   00000000:10:00.0 Off |                    0 |",
                    "|   1  NVIDIA H100 80GB HBM3          On  |   00000000:11:00.0 Off |                    0 |"]
    assert out.count("|       1MiB /  81920MiB |      0%      Default |") == 2
    assert "|  No running processes found" in out and lines[-1] == "+" + "-" * 89 + "+"
    assert {len(line) for line in lines[1:]} == {91}, "every line of the boxes is as wide as the real one's"


async def test_list_and_query_name_the_claims_gpus_by_their_published_uuids(env):
    client, clock, mgr = env
    await running_trainer(client, clock)
    g0, g1 = (d.attributes["uuid"] for d in node_gpus(mgr, "gpu-0", "gpu-1"))
    assert await exec_(mgr, "trainer", ["nvidia-smi", "-L"]) == (
        0, f"GPU 0: NVIDIA H100 80GB HBM3 (UUID: {g0})\nGPU 1: NVIDIA H100 80GB HBM3 (UUID: {g1})\n")
    assert await exec_(mgr, "trainer", ["nvidia-smi", QUERY, "--format=csv"]) == (0, (
        "index, name, uuid, memory.total [MiB], memory.used [MiB], utilization.gpu [%]\n"
        f"0, NVIDIA H100 80GB HBM3, {g0}, 81920 MiB, 1 MiB, 0 %\n"
        f"1, NVIDIA H100 80GB HBM3, {g1}, 81920 MiB, 1 MiB, 0 %\n"))
    # as scripts read it: in a shell, no header, no units
    assert await exec_(mgr, "trainer", ["sh", "-c", "nvidia-smi --query-gpu=uuid,memory.total "
                                        "--format=csv,noheader,nounits | grep -c 81920"]) == (0, "2\n")
    assert await exec_(mgr, "trainer", ["nvidia-smi", "--query-gpu=index,memory.used", "--format=csv,nounits"]) == (
        0, "index, memory.used [MiB]\n0, 1\n1, 1\n")  # the header keeps its units
    assert await exec_(mgr, "trainer", ["nvidia-smi", "--query-gpu=bogus", "--format=csv"]) == (
        2, 'Field "bogus" is not a valid field to query.\n\n')


async def test_a_container_running_nvidia_smi_prints_its_table_and_succeeds(env):
    """The ML engineer's first pod: `command: [nvidia-smi]` ends (exit 0, the pod Succeeded) with the
    table in its log, instead of running forever."""
    client, clock, mgr = env
    claims, pods = client.resource("resource.k8s.io", "v1", "resourceclaims"), client.resource("", "v1", "pods")
    await claims.create(claim_body("smi"))
    body = pod_body("smi", "smi", restartPolicy="Never")
    body["spec"]["containers"][0]["command"] = ["nvidia-smi"]
    await allocate(claims, "smi", await pods.create(body))
    await eventually(phase(pods, "smi", "Succeeded", clock))
    p = await pods.get("smi", "default")
    assert p["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
    agent = mgr.agents["gpu-0"]
    log = (await agent.streaming.logs("default", "smi", p["metadata"]["uid"], "app", LogOptions())).decode()
    assert "| NVIDIA-SMI 550.54.15" in log and log.count("NVIDIA H100 80GB HBM3") == 2


async def test_a_container_without_gpus_has_no_nvidia_smi(env):
    """The NVIDIA runtime mounts nvidia-smi in only for a container it gives GPUs: exec finds no
    such executable, a shell says `not found`."""
    client, clock, mgr = env
    pods = client.resource("", "v1", "pods")
    await pods.create({"metadata": {"name": "cpu", "namespace": "default"}, "spec": {
        "nodeName": "gpu-0", "containers": [{"name": "app", "image": "busybox", "command": ["sleep", "infinity"]}]}})
    await eventually(phase(pods, "cpu", "Running", clock))
    with pytest.raises(StreamFailed, match='exec: "nvidia-smi": executable file not found in \\$PATH'):
        await exec_(mgr, "cpu", ["nvidia-smi"])
    assert await exec_(mgr, "cpu", ["sh", "-c", "nvidia-smi -L"]) == (127, "sh: nvidia-smi: not found\n")


async def test_nvidia_visible_devices_picks_the_gpus_numbered_in_pci_bus_order(env):
    """The device plugin's Allocate names the GPUs by UUID in NVIDIA_VISIBLE_DEVICES (here the
    container's own env sets it, as the runtime reads it alike); `all` is every GPU of the node."""
    client, clock, mgr = env
    pods = client.resource("", "v1", "pods")
    g5, g2 = (d.attributes["uuid"] for d in node_gpus(mgr, "gpu-5", "gpu-2"))
    for name, value in (("two", f"{g5},{g2}"), ("all", "all")):
        await pods.create({"metadata": {"name": name, "namespace": "default"}, "spec": {
            "nodeName": "gpu-0", "containers": [{"name": "app", "image": "busybox", "command": ["sleep", "infinity"],
                                                 "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": value}]}]}})
        await eventually(phase(pods, name, "Running", clock))
    assert await exec_(mgr, "two", ["nvidia-smi", "--query-gpu=index,uuid,pci.bus_id", "--format=csv,noheader"]) == (
        0, f"0, {g2}, 00000000:12:00.0\n1, {g5}, 00000000:15:00.0\n")
    code, out = await exec_(mgr, "all", ["nvidia-smi", "-L"])
    assert code == 0 and out.count("GPU ") == 8


async def test_a_shell_on_a_node_without_gpus_finds_no_nvidia_smi():
    """A node with no GPUs (nor claims): `nvidia-smi` is a command the shell does not find, and the
    script goes on with its status."""
    w = worker()
    w.agent.claims.container_devices = lambda pod, container: None
    io = SimulatedIO(w)
    io.started({"main": "busybox"})
    out: list[bytes] = []
    assert await io.exec("main", ["sh", "-c", "nvidia-smi || echo $?"], session(out)) == 0
    assert b"".join(out) == b"sh: nvidia-smi: not found\n127\n"
    io.stop()


async def test_a_shell_typed_into_by_attach_runs_nvidia_smi_and_nproc():
    """`kubectl run -it --image=busybox -- sh` on a GPU node, its container given GPU 3 by the
    device plugin: the lines typed are worked out in the attach's task, with the node at hand."""
    w = worker(stdin=True, stdinOnce=True, command=["sh"],
               env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "GPU-3"}])
    w.agent.claims.container_devices = lambda pod, container: None
    w.agent.spec = SimpleNamespace(capacity={"cpu": "16", "memory": "64Gi"}, devices=[
        Device("gpu", f"gpu-{i}", {"model": "L4", "uuid": f"GPU-{i}", "index": i, "driverVersion": "550.54.15",
                                   "cudaVersion": "12.4"}, {"memory": "23034Mi"}) for i in range(4)])
    io = SimulatedIO(w)
    io.started({"main": "busybox"})
    attached = await typed(io, b"nvidia-smi -L\nnproc\nexit\n")
    log = io.serve_log("main", LogOptions())
    assert log == b"GPU 0: NVIDIA L4 (UUID: GPU-3)\n16\n"
    attached.cancel()


def mig_worker(**main):
    """A container on an H100 node of the NVIDIA personality, given two MIG devices of GPU 0 by its
    claim and GPU 1 whole by NVIDIA_VISIBLE_DEVICES."""
    w = worker(env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "GPU-1"}], **main)
    migs = [{"type": "mig", "uuid": f"MIG-{p}", "parentUUID": "GPU-0", "productName": "NVIDIA H100 80GB HBM3",
             "profile": p, "device": d} for p, d in (("3g.40gb", "gpu-0-mig-3g40gb-9-0"), ("1g.10gb", "gpu-0-mig-1g10gb-19-6"))]
    w.agent.claims.container_devices = lambda pod, container: migs
    w.agent.claims.prepared_devices = lambda pod, container: [
        (None, "gpu.nvidia.com", SimpleNamespace(device=d)) for d in ("gpu-0-mig-3g40gb-9-0", "gpu-0-mig-1g10gb-19-6")]
    w.agent.spec = SimpleNamespace(capacity={"cpu": "16", "memory": "64Gi"}, devices=[
        Device("gpu", f"gpu-{i}", {"model": "H100-SXM5-80GB", "uuid": f"GPU-{i}", "index": i, "architecture": "Hopper",
                                   "driverVersion": "570.124.06", "cudaVersion": "12.8"}, {"memory": "80Gi"})
        for i in range(4)])
    return SimulatedIO(w)


async def run_smi(io, *args: str) -> tuple[int, str]:
    out: list[bytes] = []
    code = await io.exec("main", ["nvidia-smi", *args], session(out))
    return code, b"".join(out).decode()


async def test_nvidia_smi_lists_mig_devices_and_picks_gpus_with_i():
    """The forms ML engineers script: `-L` lists each GPU by its NVML product name with its MIG
    devices under it; `-i` picks GPUs by index, UUID or bus id, keeping their numbers, and one it
    does not see is "No devices were found" (exit 6); --query-gpu says which GPU is in MIG mode."""
    io = mig_worker()
    io.started({"main": "busybox"})
    assert await run_smi(io, "-L") == (0, (
        "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)\n  MIG 3g.40gb     Device  0: (UUID: MIG-3g.40gb)\n"
        "  MIG 1g.10gb     Device  1: (UUID: MIG-1g.10gb)\nGPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n"))
    assert await run_smi(io, "-i", "1", "-L") == (0, "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n")
    assert await run_smi(io, "--query-gpu=index,uuid,mig.mode.current,count", "--format=csv,noheader", "-i",
                         "GPU-1,0000:10:00.0") == (0, "0, GPU-0, Enabled, 2\n1, GPU-1, Disabled, 2\n")
    assert await run_smi(io, "-i", "3") == (6, "No devices were found\n")
    io.stop()


async def test_a_script_not_interpreted_logs_the_same_listing_as_nvidia_smi_l():
    """A container whose script the simulator cannot run (its model trainer) logs what its first
    `nvidia-smi -L` prints as one it runs does: the GPU the device plugin gave it as well as the
    claim's MIG devices (a second path listed the claim's devices only)."""
    script = ["sh", "-c", "nvidia-smi -L; exec python train.py"]
    assert interpret(script) is None
    io = mig_worker(command=script)
    await io.prepare(io.worker.pod["spec"]["containers"][0])
    io.started({"main": "busybox"})
    _, listed = await run_smi(io, "-L")
    assert io.serve_log("main", LogOptions()).decode() == (
        "nanokube: container main started (image busybox)\nnanokube: container main is ready\n" + listed)
    assert listed.count("GPU ") == 2
    io.stop()


async def test_nvidia_smi_table_and_report_show_the_mig_devices():
    """The summary table gains a MIG devices table (GPU, GI, CI and device numbers, the profile's
    memory, multiprocessors and engines; the GPU's own row in MIG mode); `-q` reports each GPU
    (`-i` one of them) with its MIG devices, keys padded to the real report's colon column."""
    io = mig_worker()
    io.started({"main": "busybox"})
    code, table = await run_smi(io)
    lines = table.splitlines()
    assert code == 0 and {len(line) for line in lines[1:]} == {91}
    assert "| MIG devices:" in table and lines.count(
        "|  0    1   0   0  |                 1MiB / 40448MiB  | 60      0 |  3   0    3    0    3 |") == 1
    assert "|  0    2   0   1  |                  1MiB / 9984MiB  | 16      0 |  1   0    1    0    1 |" in lines
    assert "|                                         |                        |              Enabled |" in lines
    code, report = await run_smi(io, "-q", "-i", "0")
    assert code == 0 and report.startswith("\n==============NVSMI LOG==============\n\n")
    assert "Attached GPUs                             : 2\nGPU 00000000:10:00.0\n" in report
    assert "    Product Name                          : NVIDIA H100 80GB HBM3\n" in report
    assert "    MIG Mode\n        Current                           : Enabled\n" in report
    assert "                    Multiprocessor count  : 60\n" in report
    assert report.count("        MIG Device\n") == 2 and "GPU 00000000:11:00.0" not in report
    io.stop()


async def test_nvidia_smi_shows_each_products_power_limit():
    """Pwr:Usage/Cap is the board's: an A100 SXM4's 400 W (an H100 SXM's 700 W), its idle draw
    beside it; --query-gpu's power.draw and power.limit say the same in watts."""
    w = worker(env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "GPU-0"}])
    w.agent.spec = SimpleNamespace(capacity={"cpu": "16", "memory": "64Gi"}, devices=[
        Device("gpu", "gpu-0", {"model": "A100-SXM4-40GB", "uuid": "GPU-0", "index": 0, "architecture": "Ampere",
                                "driverVersion": "570.124.06", "cudaVersion": "12.8"}, {"memory": "40Gi"})])
    io = SimulatedIO(w)
    io.started({"main": "busybox"})
    code, table = await run_smi(io)
    assert code == 0 and "| N/A   30C    P0             52W /  400W |       1MiB /  40960MiB |" in table
    assert {len(line) for line in table.splitlines()[1:]} == {91}
    assert await run_smi(io, "--query-gpu=name,power.draw,power.limit", "--format=csv") == (0, (
        "name, power.draw [W], power.limit [W]\nNVIDIA A100-SXM4-40GB, 52.00 W, 400.00 W\n"))
    io.stop()
    io = mig_worker()
    io.started({"main": "busybox"})
    assert "| N/A   30C    P0             70W /  700W |" in (await run_smi(io))[1]
    io.stop()


def _node_of(model: str, count: int = 4) -> SimulatedIO:
    """A container given every GPU (NVIDIA_VISIBLE_DEVICES=all) of a 16-CPU node whose `count` GPUs
    of `model` sit two NUMA nodes apart, half on each, one PCIe root each."""
    w = worker(env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}])
    w.agent.spec = SimpleNamespace(capacity={"cpu": "16", "memory": "64Gi"}, devices=[
        Device("gpu", f"gpu-{i}", {"model": model, "uuid": f"GPU-{i}", "index": i, "numaNode": i * 2 // count,
                                   "pcieRoot": f"pci0000:{0x10 + i:02x}"}, {"memory": "24Gi"})
        for i in range(count)])
    io = SimulatedIO(w)
    io.started({"main": "busybox"})
    return io


async def test_nvidia_smi_topo_m_shows_nvlinks_between_sxm_boards_and_numa_affinity():
    """`nvidia-smi topo -m`, what a distributed-training user checks before NCCL runs: H100 SXM
    boards reach each other over 18 bonded NVLinks, each GPU's CPUs are its NUMA node's half of
    the node's 16; L4 PCIe cards go through a NUMA node's host bridges (NODE) or across the
    sockets (SYS); `-i` keeps the GPUs it names."""
    io = _node_of("H100-SXM5-80GB")
    code, out = await run_smi(io, "topo", "-m")
    assert code == 0
    lines = out.splitlines()
    assert lines[:5] == ["\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID",
                         "GPU0\t X \tNV18\tNV18\tNV18\t0-7\t0\t\tN/A",
                         "GPU1\tNV18\t X \tNV18\tNV18\t0-7\t0\t\tN/A",
                         "GPU2\tNV18\tNV18\t X \tNV18\t8-15\t1\t\tN/A",
                         "GPU3\tNV18\tNV18\tNV18\t X \t8-15\t1\t\tN/A"]
    assert "Legend:" in lines and "  NV#  = Connection traversing a bonded set of # NVLinks" in lines
    io.stop()
    io = _node_of("L4")
    assert (await run_smi(io, "topo", "-m", "-i", "1,2"))[1].splitlines()[:3] == [
        "\tGPU1\tGPU2\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID",
        "GPU1\t X \tSYS\t0-7\t0\t\tN/A",
        "GPU2\tSYS\t X \t8-15\t1\t\tN/A"]
    assert (await run_smi(io, "topo", "-m"))[1].splitlines()[1] == "GPU0\t X \tNODE\tSYS\tSYS\t0-7\t0\t\tN/A"
    io.stop()


VECTOR_ADD = "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0"


async def test_the_cuda_vectoradd_sample_passes_on_a_gpu_and_fails_without_one(env):
    """NVIDIA's smoke test, the sample image with no command: given a GPU it prints the sample's
    run and `Test PASSED` and the pod Succeeds (it ran forever); given none, the CUDA runtime
    finds no driver and it fails, exit 1, as it does on a node the NVIDIA runtime gave nothing."""
    client, clock, mgr = env
    claims, pods = client.resource("resource.k8s.io", "v1", "resourceclaims"), client.resource("", "v1", "pods")
    await claims.create(claim_body("va"))
    body = pod_body("va", "va", restartPolicy="Never")
    body["spec"]["containers"][0]["image"] = VECTOR_ADD
    del body["spec"]["containers"][0]["command"]  # the sample's own
    await allocate(claims, "va", await pods.create(body))
    await pods.create({"metadata": {"name": "no-gpu", "namespace": "default"}, "spec": {
        "nodeName": "gpu-0", "restartPolicy": "Never", "containers": [{"name": "app", "image": VECTOR_ADD}]}})
    await eventually(phase(pods, "va", "Succeeded", clock))
    await eventually(phase(pods, "no-gpu", "Failed", clock))
    agent = mgr.agents["gpu-0"]
    logs = {}
    for name in ("va", "no-gpu"):
        p = await pods.get(name, "default")
        logs[name] = (p["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"],
                      (await agent.streaming.logs("default", name, p["metadata"]["uid"], "app", LogOptions())).decode())
    assert logs["va"] == (0, "[Vector addition of 50000 elements]\nCopy input data from the host memory to the CUDA "
                             "device\nCUDA kernel launch with 196 blocks of 256 threads\nCopy output data from the CUDA "
                             "device to the host memory\nTest PASSED\nDone\n")
    assert logs["no-gpu"] == (1, "[Vector addition of 50000 elements]\nFailed to allocate device vector A (error code "
                                 "CUDA driver version is insufficient for CUDA runtime version)!\n")
