"""What ML engineers' launch scripts do in a GPU pod's simulated shell, through the kubelet's exec
(what `kubectl exec` reaches): nvidia-smi's topology and monitors, the GPUs' device nodes, and
what the scripts ask of the shell itself, each as bash, dash or busybox's sh answers it."""

from __future__ import annotations

import asyncio
import re

import pytest

from tests.controllers import eventually
from nanokube.clock import parse_time
from nanokube.machinery.streaming import LogOptions, StreamFailed
from tests.node.dra.test_prepare import allocate, claim_body, env, phase, pod_body, running_trainer
from tests.node.test_simulated_gpu import exec_, mig_worker, run_smi

__all__ = ["env"]  # the fixture: an API server and the default cluster's node agents
#: an image each shell is in: busybox's sh, the distributions' bash and dash
IMAGE = {"sh": "busybox", "bash": "ubuntu", "dash": "debian"}


async def exec_over(mgr, clock, command: list[str]) -> tuple[int, str]:
    """`exec_` in pod trainer, the node's clock moved on a second at a time until the command ends."""
    task = asyncio.ensure_future(exec_(mgr, "trainer", command))
    for _ in range(600):
        if task.done():
            break
        await clock.advance(1)
    return await task


@pytest.mark.parametrize("shell, error, after, code", [
    ("sh", "sh: divide by zero\n", "", 2),
    ("bash", 'bash: line {}: {} / 0: division by 0 (error token is "0")\n', "next 1\n", 0),
    ("dash", 'dash: {}: arithmetic expression: division by zero: "{} / 0"\n', "", 2),
])
async def test_a_division_by_zero_is_the_shells_error(env, shell, error, after, code):
    """A launcher working out the processes per node with NNODES unset: the shell's own error, each
    in its words (naming the line and the expression as expanded); busybox's sh and dash end there,
    bash drops the rest of that line and goes on (status 1). In a command's substitution it ends
    that subshell only."""
    client, clock, mgr = env
    await running_trainer(client, clock, IMAGE[shell])
    script = "WORLD_SIZE=$(nvidia-smi -L | wc -l)\nPER_NODE=$(($WORLD_SIZE / ${NNODES:-0})); echo same\necho next $?"
    assert await exec_(mgr, "trainer", [shell, "-c", script]) == (code, error.format(2, 2) + after)
    script = "n=$(echo $((WORLD / 0))); echo after $? ${n:-empty}"
    assert await exec_(mgr, "trainer", [shell, "-c", script]) == (
        0, error.format(1, "WORLD") + f"after {1 if shell == 'bash' else 2} empty\n")


async def test_topo_m_lists_the_nodes_rdma_nics_beside_the_gpus(env):
    """`nvidia-smi topo -m` before an NCCL run: the node's eight ConnectX-7s as NIC0-7 (each on its
    GPU's PCIe root: PIX; NODE within that NUMA node, SYS across), NIC rows with no affinity, and
    the NIC legend a script turns into NCCL_IB_HCA."""
    client, clock, mgr = env
    await running_trainer(client, clock, "ubuntu")
    code, out = await exec_(mgr, "trainer", ["nvidia-smi", "topo", "-m"])
    lines = out.splitlines()
    nics = "".join(f"NIC{i}\t" for i in range(8))
    assert code == 0 and lines[:4] == [
        f"\tGPU0\tGPU1\t{nics}CPU Affinity\tNUMA Affinity\tGPU NUMA ID",
        "GPU0\t X \tNV18\tPIX\tNODE\tNODE\tNODE\tSYS\tSYS\tSYS\tSYS\t0-31\t0\t\tN/A",
        "GPU1\tNV18\t X \tNODE\tPIX\tNODE\tNODE\tSYS\tSYS\tSYS\tSYS\t0-31\t0\t\tN/A",
        "NIC0\tPIX\tNODE\t X \tNODE\tNODE\tNODE\tSYS\tSYS\tSYS\tSYS"]
    assert lines[8] == "NIC5\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tNODE\t X \tNODE\tNODE"
    assert out.endswith("  NV#  = Connection traversing a bonded set of # NVLinks\n\nNIC Legend:\n\n"
                        "  NIC0: mlx5_0\n  NIC1: mlx5_1\n  NIC2: mlx5_2\n  NIC3: mlx5_3\n  NIC4: mlx5_4\n"
                        "  NIC5: mlx5_5\n  NIC6: mlx5_6\n  NIC7: mlx5_7\n\n")
    script = ("HCAS=$(nvidia-smi topo -m | grep -E '^  NIC[0-9]+:' | awk '{print $2}' | tr '\\n' ',')\n"
              'export NCCL_IB_HCA="${HCAS%,}"; echo "$NCCL_IB_HCA"')
    assert await exec_(mgr, "trainer", ["bash", "-c", script]) == (
        0, "mlx5_0,mlx5_1,mlx5_2,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_7\n")


async def test_the_runtime_gives_the_container_its_gpus_device_nodes(env):
    """The NVIDIA runtime's CDI edits: the device nodes of the container's two GPUs (their minor
    numbers on the node) and the driver's control nodes, in /dev beside the runtime's shm; none in a
    container without GPUs."""
    client, clock, mgr = env
    await running_trainer(client, clock)
    assert await exec_(mgr, "trainer", ["ls", "/dev"]) == (
        0, "nvidia-modeset\nnvidia-uvm\nnvidia-uvm-tools\nnvidia0\nnvidia1\nnvidiactl\nshm\n")
    pods = client.resource("", "v1", "pods")
    await pods.create({"metadata": {"name": "cpu", "namespace": "default"}, "spec": {
        "nodeName": "gpu-0", "containers": [{"name": "app", "image": "busybox", "command": ["sleep", "infinity"]}]}})
    await eventually(phase(pods, "cpu", "Running", clock))
    assert await exec_(mgr, "cpu", ["ls", "/dev"]) == (0, "shm\n")


async def test_globs_match_the_containers_files_the_gpus_device_nodes_among_them(env):
    """`ls /dev/nvidia[0-9]*`, a launcher's GPU count before NVML: the runtime gave the container
    its two GPUs' device nodes (the node's minor numbers) and the driver's; a glob matches the
    container's files, sorted, and one matching nothing stays as it is written (ls fails on it)."""
    client, clock, mgr = env
    await running_trainer(client, clock)
    assert await exec_(mgr, "trainer", ["sh", "-c", "ls /dev/nvidia[0-9]*"]) == (0, "/dev/nvidia0\n/dev/nvidia1\n")
    script = ('NGPUS=$(ls -1 /dev/nvidia[0-9]* | wc -l); echo "gpus: $NGPUS"; echo /dev/nvidia*\n'
              "mkdir -p /ckpt && touch /ckpt/step-20.pt /ckpt/step-100.pt /ckpt/.tmp.pt\n"
              'for f in /ckpt/*.pt; do echo "found ${f##*/}"; done; ls /ckpt/*.bin; echo "ls: $?"; echo "*.pt"')
    assert await exec_(mgr, "trainer", ["sh", "-c", script]) == (0, (
        "gpus: 2\n/dev/nvidia-modeset /dev/nvidia-uvm /dev/nvidia-uvm-tools /dev/nvidia0 /dev/nvidia1 /dev/nvidiactl\n"
        "found step-100.pt\nfound step-20.pt\nls: /ckpt/*.bin: No such file or directory\nls: 1\n*.pt\n"))


async def test_dmon_samples_the_gpus_on_the_commands_clock(env):
    """`nvidia-smi dmon -c N`, as a run logs its GPUs: the two header lines, then each GPU idle,
    `-d` seconds apart; a script picks a column out of it."""
    client, clock, mgr = env
    await running_trainer(client, clock)
    header = ("# gpu    pwr  gtemp  mtemp     sm    mem    enc    dec    jpg    ofa   mclk   pclk \n"
              "# Idx      W      C      C      %      %      %      %      %      %    MHz    MHz \n")
    sample = "".join(f"    {i}     70     30      -      0      0      0      0      0      0   2619    345 \n"
                     for i in (0, 1))
    assert await exec_over(mgr, clock, ["nvidia-smi", "dmon", "-c", "2"]) == (0, header + sample * 2)
    script = "date +%s; nvidia-smi dmon -c 3 -d 5 -s p > /dev/null; nvidia-smi dmon -c 1 -s u | sed 's/#//' | " \
             "awk '{print $2}' | tail -n 1; date +%s"
    code, out = await exec_over(mgr, clock, ["sh", "-c", script])
    started, util, ended = out.split()
    assert (code, util, int(ended) - int(started)) == (0, "0", 10)


async def test_mig_lgi_lists_the_gpu_instances_of_the_containers_mig_devices():
    """`nvidia-smi mig -lgi` in a container given two MIG devices of GPU 0 (and GPU 1 whole): each
    GPU instance with its profile's name and ID, its instance ID and placement (start:slices)."""
    io = mig_worker()
    io.started({"main": "busybox"})
    rule = "+" + "-" * 55 + "+"
    assert await run_smi(io, "mig", "-lgi") == (0, "\n".join([
        rule, "| GPU instances:                                        |",
        "| GPU   Name             Profile  Instance   Placement  |",
        "|                          ID       ID       Start:Size |", "|" + "=" * 55 + "|",
        "|   0  MIG 3g.40gb          9        1          0:4     |", rule,
        "|   0  MIG 1g.10gb         19        2          6:1     |", rule]) + "\n")
    io.stop()


async def test_exec_of_a_shell_in_a_loop_a_function_or_a_pipe(env):
    """A wrapper that waits for its GPUs, then `exec`s the launcher's shell from inside its loop
    (or a function): the new shell runs with the exported variables alone and the wrapper never
    goes on; in a pipe's command (a subshell) it replaces that command only."""
    client, clock, mgr = env
    await running_trainer(client, clock)
    script = ("export RANK=0; LOCAL=x\nlaunch() { exec sh -c 'echo \"rank $RANK [$LOCAL] $0: $(nvidia-smi -L | wc -l) GPUs\"; "
              "exit 3' \"$1\"; }\nfor try in 1 2 3; do\n  if [ -e /dev/nvidia1 ]; then launch try$try; fi\n  sleep 1\ndone\n"
              "echo never")
    assert await exec_(mgr, "trainer", ["sh", "-c", script]) == (3, "rank 0 [] try1: 2 GPUs\n")
    script = "exec bash -c 'nvidia-smi -L; exit 4' | wc -l; echo \"status $?\"; v=$(exec sh -c 'echo sub'); echo $v"
    assert await exec_(mgr, "trainer", ["sh", "-c", script]) == (0, "2\nstatus 0\nsub\n")


@pytest.mark.parametrize("shell, error, code", [
    ("sh", "sh: MASTER_ADDR: set MASTER_ADDR to the rank-0 pod\n", 2),
    ("bash", "bash: line 4: MASTER_ADDR: set MASTER_ADDR to the rank-0 pod\n", 127),
    ("dash", "dash: 4: MASTER_ADDR: set MASTER_ADDR to the rank-0 pod\n", 2),
])
async def test_a_required_variable_unset_ends_the_launcher(env, shell, error, code):
    """`: "${MASTER_ADDR:?...}"`, a multi-node launcher's check: the script goes on where the
    variable is set; unset (or empty, for `:?`), the shell says the message (or its own words)
    and ends."""
    client, clock, mgr = env
    await running_trainer(client, clock, IMAGE[shell])
    script = ('NNODES="${NNODES:-1}"\n: "${NODE_RANK:?}"\n: "${MASTER_ADDR:?set MASTER_ADDR to the rank-0 pod}"\n'
              'echo "torchrun --nnodes=$NNODES --node_rank=$NODE_RANK --master_addr=$MASTER_ADDR"')
    assert await exec_(mgr, "trainer", [shell, "-c", "export NODE_RANK=0 MASTER_ADDR=trainer-0\n" + script]) == (
        0, "torchrun --nnodes=1 --node_rank=0 --master_addr=trainer-0\n")
    assert await exec_(mgr, "trainer", [shell, "-c", "export NODE_RANK=0\n" + script]) == (code, error)
    bare = {"sh": "sh: NODE_RANK: parameter not set or null\n", "dash": "dash: 3: NODE_RANK: parameter not set or null\n",
            "bash": "bash: line 3: NODE_RANK: parameter null or not set\n"}[shell]
    assert await exec_(mgr, "trainer", [shell, "-c", "export NODE_RANK=\n" + script]) == (code, bare)


async def test_command_v_and_which_find_what_the_image_and_the_runtime_hold(env):
    """A launcher's `command -v nvidia-smi`: the NVIDIA runtime's binary in a GPU container, busybox's
    applets in /bin, the shell's builtins and functions by name; torchrun is not in a busybox image."""
    client, clock, mgr = env
    await running_trainer(client, clock)
    script = ("if command -v nvidia-smi >/dev/null 2>&1; then GPUS=$(nvidia-smi -L | wc -l); else GPUS=1; fi\n"
              "echo \"gpus=$GPUS\"; f() { :; }; command -v nvidia-smi echo f ls; command -v torchrun || echo none $?\n"
              "which awk nvidia-smi")
    assert await exec_(mgr, "trainer", ["sh", "-c", script]) == (0, (
        "gpus=2\n/usr/bin/nvidia-smi\necho\nf\n/bin/ls\nnone 1\n/bin/awk\n/usr/bin/nvidia-smi\n"))


async def test_a_here_document_is_the_commands_stdin(env):
    """A launcher writing its DeepSpeed config and hostfile with here-documents: `<<EOF` expands its
    body (quotes in it are text), `<<'EOF'` keeps it as written, `<<-` drops the lines' tabs."""
    client, clock, mgr = env
    await running_trainer(client, clock)
    script = ("GPUS=$(nvidia-smi -L | wc -l)\ncat > /tmp/ds.json <<EOF\n"
              '{"train_batch_size": $((GPUS * 16)), "note": "per \\$GPU"}\nEOF\n'
              "cat /tmp/ds.json; cat <<'RAW'\nkeep $GPUS\nRAW\n"
              "while read host slots; do\n\techo \"$host has ${slots#slots=}\"\ndone <<-HOSTS\n"
              "\tworker-0 slots=$GPUS\n\tworker-1 slots=$GPUS\n\tHOSTS\necho end")
    assert await exec_(mgr, "trainer", ["sh", "-c", script]) == (0, (
        '{"train_batch_size": 32, "note": "per $GPU"}\nkeep $GPUS\nworker-0 has 2\nworker-1 has 2\nend\n'))


async def test_ifs_splits_what_read_and_unquoted_expansions_give(env):
    """Parsing `--format=csv,noheader,nounits` in shell: `IFS=', ' read -r idx total used` splits at
    the commas and the blanks around them (the variables it reads stay set, IFS alone is as it was);
    an IFS of commas splits CUDA_VISIBLE_DEVICES in a `for`, an empty field between two commas kept."""
    client, clock, mgr = env
    await running_trainer(client, clock)
    script = ("nvidia-smi --query-gpu=index,memory.total,memory.used --format=csv,noheader,nounits |\n"
              "while IFS=', ' read -r idx total used; do echo \"GPU $idx: $((total - used)) MiB free\"; done\n"
              "echo \"last: [$idx] IFS: [$IFS]\"; echo 'a,b,' | { IFS=, read x y; echo \"[$x][$y]\"; }\n"
              "IFS=,; DEVICES=0,1,,3; for d in $DEVICES; do printf '<%s>' \"$d\"; done; echo")
    assert await exec_(mgr, "trainer", ["sh", "-c", script]) == (0, (
        "GPU 0: 81919 MiB free\nGPU 1: 81919 MiB free\nlast: [] IFS: [ \t\n]\n[a][b]\n<0><1><><3>\n"))


async def test_sort_as_an_nccl_check_uses_it(env):
    """An NCCL environment check's `env | grep ^NCCL_ | sort`, and `sort -t, -k2 -n -u` of a CSV,
    as busybox's sort prints them."""
    client, clock, mgr = env
    await running_trainer(client, clock)
    script = ("export NCCL_SOCKET_IFNAME=eth0 NCCL_DEBUG=INFO NCCL_IB_HCA=mlx5_0; env | grep '^NCCL_' | sort\n"
              "printf 'b,10\\na,9\\nc,100\\na,9\\n' | sort -t, -k2 -n -u")
    assert await exec_(mgr, "trainer", ["sh", "-c", script]) == (
        0, "NCCL_DEBUG=INFO\nNCCL_IB_HCA=mlx5_0\nNCCL_SOCKET_IFNAME=eth0\na,9\nb,10\nc,100\n")


async def test_seq_s_and_w_build_a_device_list(env):
    """`CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((N - 1)))` and zero-padded rank names, as busybox's seq
    prints them."""
    client, clock, mgr = env
    await running_trainer(client, clock)
    script = ("N=$(nvidia-smi -L | wc -l); echo \"CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((N - 1)))\"\n"
              "for r in $(seq -w 9 10); do echo \"worker-$r\"; done")
    assert await exec_(mgr, "trainer", ["sh", "-c", script]) == (
        0, "CUDA_VISIBLE_DEVICES=0,1\nworker-09\nworker-10\n")


async def test_a_script_the_shell_cannot_run_says_so_not_that_there_is_no_shell(env):
    """A launcher using what the simulated shell does not run (a bash array): the exec's shell says
    it cannot run the script (status 2), as a line typed at its interactive shell does, where the
    image has that shell; where it has not (bash in busybox, any shell in a distroless image) the
    runtime cannot start it, whatever its script, as containerd says."""
    client, clock, mgr = env
    await running_trainer(client, clock, "ubuntu")
    for shell in ("sh", "bash"):
        assert await exec_(mgr, "trainer", [shell, "-c", "GPUS=($(nvidia-smi -L)); echo ${#GPUS[@]}"]) == (
            2, f"{shell}: nanokube's simulated shell cannot run this script\n")
    pods = client.resource("", "v1", "pods")
    for name, app in (("cpu", {"image": "busybox:1.36", "command": ["sleep", "infinity"]}),
                      ("static", {"image": "gcr.io/distroless/static-debian12"})):
        await pods.create({"metadata": {"name": name, "namespace": "default"}, "spec": {
            "nodeName": "gpu-0", "containers": [{"name": "app", **app}]}})
        await eventually(phase(pods, name, "Running", clock))
    for pod, command in (("cpu", ["bash", "-c", "echo hi"]), ("cpu", ["/bin/bash", "-c", "a=(1); echo $a"]),
                         ("static", ["sh", "-c", "echo hi"])):
        with pytest.raises(StreamFailed, match=f'exec: "{command[0]}": executable file not found in \\$PATH'):
            await exec_(mgr, pod, command)
    assert await exec_(mgr, "cpu", ["sh", "-c", "echo hi"]) == (0, "hi\n")


async def test_awk_sums_a_column_and_picks_a_record(env):
    """`awk '{s+=$1} END {print s}'` summing the GPUs' memory, and `awk 'NR==2 {print $2}'`, as
    launchers size their batches: awk's sum (an integer printed as one) and the second record."""
    client, clock, mgr = env
    await running_trainer(client, clock)
    script = ("nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | awk '{s+=$1} END {print s}'\n"
              "nvidia-smi --query-gpu=index,power.draw --format=csv,noheader,nounits | awk -F, '{ w += $2 } END { print w }'\n"
              "nvidia-smi -L | awk 'NR==2 {print $2}'")
    assert await exec_(mgr, "trainer", ["sh", "-c", script]) == (0, "163840\n140\n1:\n")



async def test_a_launcher_given_in_a_variable_sees_the_gpus_its_container_was_given(env):
    """`sh -c "$(LAUNCH)"`, the launch script kept in the pod's env (from a ConfigMap): it sees the
    container's GPUs and their device nodes though its command line names neither (what the
    container was given decides, not what it runs); the same in a container given no GPU finds no
    nvidia-smi and no device nodes."""
    client, clock, mgr = env
    claims, pods = client.resource("resource.k8s.io", "v1", "resourceclaims"), client.resource("", "v1", "pods")
    launch = {"command": ["sh", "-c", "$(LAUNCH)"], "env": [{"name": "LAUNCH", "value": (
        "nvidia-smi -L | wc -l; ls /dev/nvidia* | wc -l; echo status $?; sleep 3600")}]}
    await claims.create(claim_body("train"))
    body = pod_body("trainer", "train")
    body["spec"]["containers"][0].update(launch)
    await allocate(claims, "train", await pods.create(body))
    await pods.create({"metadata": {"name": "cpu", "namespace": "default"}, "spec": {
        "nodeName": "gpu-0", "containers": [{"name": "app", "image": "busybox", **launch}]}})
    for name in ("trainer", "cpu"):
        await eventually(phase(pods, name, "Running", clock))
    agent = mgr.agents["gpu-0"]

    def log(pod: str) -> str:
        return next(w for w in agent.workers.values() if w.name == pod).io.serve_log("app", LogOptions()).decode()
    assert log("trainer") == "2\n6\nstatus 0\n"
    assert log("cpu") == "sh: nvidia-smi: not found\n0\nls: /dev/nvidia*: No such file or directory\n0\nstatus 0\n"


async def test_nc_z_waits_for_a_port_a_process_of_the_pod_listens_on(env):
    """A worker's wait-for-master loop, `until nc -z HOST 29500`: in a pod whose container runs a
    script (`sleep`, listening on nothing) localhost's port is closed (nc -z: 1, `-vv` says it is
    refused); the master's, declared by its running container, is open at its address and on its
    own localhost. (Through a Service's name: test_simulated_net.)"""
    client, clock, mgr = env
    pods = client.resource("", "v1", "pods")
    for name, ports in (("worker", []), ("master", [{"containerPort": 29500}])):
        await pods.create({"metadata": {"name": name, "namespace": "default"}, "spec": {
            "nodeName": "gpu-0", "containers": [{"name": "app", "image": "busybox", "command": ["sleep", "3600"],
                                                 "ports": ports}]}})
        await eventually(phase(pods, name, "Running", clock))
    ips = {w.name: w.ip for w in mgr.agents["gpu-0"].workers.values()}
    script = "nc -z localhost 29500; echo $?; nc -z -vv 127.0.0.1 29500; nc -z {} 29500 || echo closed"
    assert await exec_(mgr, "worker", ["sh", "-c", script.format(ips["worker"])]) == (
        0, "1\nnc: 127.0.0.1 (127.0.0.1:29500): Connection refused\nclosed\n")

    async def open_() -> bool:
        return await exec_(mgr, "worker", ["sh", "-c", f"nc -z {ips['master']} 29500 && echo open"]) == (0, "open\n")
    await eventually(open_)
    assert await exec_(mgr, "master", ["nc", "-z", "localhost", "29500"]) == (0, "")


async def test_df_shows_dev_shm_the_runtimes_or_a_memory_emptydirs(env):
    """`df -h /dev/shm`, as a PyTorch DataLoader's workers are sized: the runtime's 64M shm, or where
    an emptyDir of medium Memory is mounted there (the usual fix for its bus errors) a tmpfs of its
    sizeLimit in its place."""
    client, clock, mgr = env
    pods = client.resource("", "v1", "pods")
    for name, shm in (("plain", {}), ("torch", {
            "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}}]})):
        mounts = [{"name": "dshm", "mountPath": "/dev/shm"}] if shm else []
        await pods.create({"metadata": {"name": name, "namespace": "default"}, "spec": {
            "nodeName": "gpu-0", **shm,
            "containers": [{"name": "app", "image": "busybox", "command": ["sleep", "3600"], "volumeMounts": mounts}]}})
        await eventually(phase(pods, name, "Running", clock))
    header = "Filesystem                Size      Used Available Use% Mounted on\n"
    assert await exec_(mgr, "plain", ["df", "-h", "/dev/shm"]) == (
        0, header + "shm                      64.0M         0     64.0M   0% /dev/shm\n")
    code, out = await exec_(mgr, "torch", ["sh", "-c", "df -h /dev/shm; df | grep -c shm"])
    assert (code, out) == (0, header + "tmpfs                     8.0G         0      8.0G   0% /dev/shm\n1\n")


async def test_dollar_dollar_is_the_shells_pid(env):
    """`echo $$ > /tmp/launcher.pid`, a launcher's PID file: a container's own shell is its PID 1, an
    exec'd one the next process after the container's main one (as `ps` numbers them); a command
    substitution's subshell gives its shell's, and a background job's PID (`$!`) comes after it."""
    client, clock, mgr = env
    pods = client.resource("", "v1", "pods")
    script = 'echo "pid $$$$"; sleep 1 & echo "job $!"; wait; sleep 3600'  # ($$: the kubelet's escaped $)
    await pods.create({"metadata": {"name": "launcher", "namespace": "default"}, "spec": {
        "nodeName": "gpu-0", "containers": [{"name": "app", "image": "busybox", "command": ["sh", "-c", script]}]}})
    await eventually(phase(pods, "launcher", "Running", clock))
    worker = next(w for w in mgr.agents["gpu-0"].workers.values() if w.name == "launcher")
    assert worker.io.serve_log("app", LogOptions()) == b"pid 1\njob 7\n"
    script = 'echo $$ > /tmp/launcher.pid; read p < /tmp/launcher.pid; sleep 5 & echo "$p $(echo $$) $!"'
    assert await exec_(mgr, "launcher", ["sh", "-c", script]) == (0, "7 7 13\n")


LAUNCH = """#!/bin/sh
. /scripts/env.sh
echo "$0 [$#] $@: rank $RANK of $WORLD, $(nvidia-smi -L | wc -l) GPUs"
[ -n "$1" ] && shift && echo "then $1"
exit 3
"""
SCRIPTS = {"launch.sh": LAUNCH, "env.sh": "RANK=0\nWORLD=${NNODES:-1}\nreturn\necho never\n",
           "run.sh": "#!/usr/bin/env bash\necho \"bash: $0 $1\"\n", "plain.sh": "echo plain\n",
           "strict.sh": '#!/bin/bash -e\necho "in [$#] $1"\nfalse\necho after\n', "args.sh": 'echo "sourced [$#] $1"\n',
           "train.py": "#!/usr/bin/env python3\nprint(1)\n", "direct.py": "#!/usr/bin/python3\nprint(1)\n",
           "opts.sh": "#!/usr/bin/env bash -e\necho never\n",
           "wait.sh": '#!/bin/sh\ncd /tmp\nuntil [ -f ready ]; do sleep 1; done\necho "ready: $(cat ready) in $(pwd)"\nexit 3\n',
           "waited.sh": 'until [ -f /tmp/ready ]; do sleep 1; done\nV=set; cd /tmp\necho "sourced $1"\nreturn 4\necho never\n'}


async def scripts_pod(client, clock, command: list[str] | None = None, image: str = "busybox",
                      want: str = "Running", **spec) -> dict:
    """Pod `trainer` given the node's GPUs, its launch scripts mounted at /scripts from ConfigMap
    `launch` (defaultMode 0755, plain.sh 0644 as its item's mode says), running `command` (not
    restarted) until its phase is `want`; `spec`: more of the pod's spec."""
    await client.resource("", "v1", "configmaps").create(
        {"metadata": {"name": "launch", "namespace": "default"}, "data": SCRIPTS})
    claims, pods = client.resource("resource.k8s.io", "v1", "resourceclaims"), client.resource("", "v1", "pods")
    await claims.create(claim_body("train"))
    items = [{"key": k, "path": k, **({"mode": 0o644} if k == "plain.sh" else {})} for k in SCRIPTS]
    body = pod_body("trainer", "train", image=image, restartPolicy="Never", volumes=[
        {"name": "scripts", "configMap": {"name": "launch", "defaultMode": 0o755, "items": items}}], **spec)
    body["spec"]["containers"][0]["volumeMounts"] = [{"name": "scripts", "mountPath": "/scripts"}]
    if command:
        body["spec"]["containers"][0]["command"] = command
    await allocate(claims, "train", await pods.create(body))
    return await eventually(phase(pods, "trainer", want, clock))


@pytest.mark.parametrize("shell", ["sh", "bash"])
async def test_a_launch_script_from_a_configmap_runs_as_a_file(env, shell):
    """`sh /scripts/launch.sh ARGS`, `/scripts/launch.sh` by its `#!` line, `./run.sh`: the file read
    from the ConfigMap's volume, `$0`, `$#`, `$@` its command line's; `. env.sh` sets variables in
    the shell that sources it (`return` ends it); the script's exit status is the command's."""
    client, clock, mgr = env
    await scripts_pod(client, clock, image="ubuntu")
    script = (f"export NNODES=2; {shell} /scripts/launch.sh a b; echo \"status $? rank [$RANK]\"\n"
              "cd /scripts && ./run.sh x; /scripts/launch.sh; . ./env.sh; echo \"sourced $RANK $WORLD\"")
    assert await exec_(mgr, "trainer", [shell, "-c", script]) == (0, (
        "/scripts/launch.sh [2] a b: rank 0 of 2, 2 GPUs\nthen b\nstatus 3 rank []\nbash: ./run.sh x\n"
        "/scripts/launch.sh [0] : rank 0 of 2, 2 GPUs\nsourced 0 2\n"))
    assert await exec_(mgr, "trainer", [shell, "/scripts/launch.sh", "one"]) == (
        3, "/scripts/launch.sh [1] one: rank 0 of 1, 2 GPUs\nthen \n")


@pytest.mark.parametrize("shell, missing, code", [
    ("sh", "sh: can't open '/x.sh': No such file or directory\n", 2),
    ("bash", "bash: /x.sh: No such file or directory\n", 127),
    ("dash", "dash: 0: cannot open /x.sh: No such file\n", 2),
])
async def test_a_script_file_missing_or_not_executable_is_the_shells_error(env, shell, missing, code):
    """A script file that is not there: the shell that was to run it says so, in its words and
    status; one without the exec bit (its item's mode 0644) run by its path cannot be (126)."""
    client, clock, mgr = env
    await scripts_pod(client, clock, image=IMAGE[shell])
    assert await exec_(mgr, "trainer", [shell, "/x.sh"]) == (code, missing)
    where = {"bash": "line 1: ", "dash": "1: "}.get(shell, "")
    assert await exec_(mgr, "trainer", [shell, "-c", f"{shell} /x.sh; echo $?; /scripts/plain.sh; echo $?"]) == (
        0, f"{missing}{code}\n{shell}: {where}/scripts/plain.sh: Permission denied\n126\n")


async def test_bash_scripts_in_an_image_without_bash_are_not_found(env):
    """In busybox's image (no bash): `bash FILE` is not found, and so is a `#!/usr/bin/env bash`
    script run by its path (its interpreter is not there), as busybox's sh says."""
    client, clock, mgr = env
    await scripts_pod(client, clock)
    assert await exec_(mgr, "trainer", ["sh", "-c", "bash /scripts/run.sh; echo $?; /scripts/run.sh; sh /scripts/run.sh"]) == (
        0, "sh: bash: not found\n127\nsh: /scripts/run.sh: not found\nbash: /scripts/run.sh \n")


@pytest.mark.parametrize("command, want, code, log", [
    (["sh", "/scripts/launch.sh", "--epochs=1"], "Failed", 3, "/scripts/launch.sh [1] --epochs=1: rank 0 of 1, 2 GPUs\nthen \n"),
    (["/scripts/run.sh", "--epochs=1"], "Succeeded", 0, "bash: /scripts/run.sh --epochs=1\n"),
])
async def test_a_containers_command_runs_its_launch_script(env, command, want, code, log):
    """A container whose command is its launch script (`sh FILE ARG`, or the file itself by its
    `#!/usr/bin/env bash` line), as ML jobs mount theirs: its log is what the script writes, its
    exit code the script's."""
    client, clock, mgr = env
    pod = await scripts_pod(client, clock, command, image="ubuntu", want=want)
    assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == code
    worker = next(w for w in mgr.agents["gpu-0"].workers.values() if w.name == "trainer")
    assert worker.io.serve_log("app", LogOptions()).decode() == log


EVAL = ('N=2; CMD="echo torchrun --nproc $N"; eval "$CMD"; eval "$(echo RANK=3; echo WORLD=8)"; echo "$RANK/$WORLD"\n'
        'eval; echo "empty $?"; f() { eval "return 4"; }; f; echo "f $?"; for i in 1 2; do eval break; done; echo "i $i"\n'
        'eval false; echo "st $?"; command -v eval; eval "exit 5"; echo never')


@pytest.mark.parametrize("shell", ["sh", "bash", "dash"])
async def test_eval_runs_its_arguments_as_a_script_in_the_shell(env, shell):
    """A launcher's command line built in a variable, variables set from a command's output: `eval`
    runs its arguments joined as a script in this shell (what it sets stays set, its `return`,
    `break` and `exit` act on the shell's function, loop and the shell), its status the last
    command's, 0 for none; as busybox's sh, bash and dash run it."""
    client, clock, mgr = env
    await running_trainer(client, clock, IMAGE[shell])
    assert await exec_(mgr, "trainer", [shell, "-c", EVAL]) == (
        5, "torchrun --nproc 2\n3/8\nempty 0\nf 4\ni 1\nst 1\neval\n")


async def test_case_patterns_match_as_globs_an_unquoted_expansions_value_too(env):
    """case's patterns are globs as `${x%pattern}`'s are: an unquoted expansion's value in one
    matches as a pattern (`$p` with `a*` in it), a quoted one as itself; `[...]`, `[!...]` and a
    backslash's character as the shells match them."""
    client, clock, mgr = env
    await running_trainer(client, clock)
    script = ('p="a*"; case abc in $p) echo glob;; *) echo lit;; esac; case abc in "$p") echo no;; *) echo quoted;; esac\n'
              'case "x[y" in x[y) echo bracket;; esac; case "a\\b" in a\\\\b) echo backslash;; esac\n'
              'case ab in [!x]b) echo negated;; esac; case "${HOSTNAME%%-*}" in tr?in*) echo host;; esac')
    assert await exec_(mgr, "trainer", ["sh", "-c", script]) == (
        0, "glob\nquoted\nbracket\nbackslash\nnegated\nhost\n")


@pytest.mark.parametrize("shell", ["sh", "bash", "dash"])
async def test_a_shells_options_before_its_script_or_file_are_set(env, shell):
    """`sh -e FILE ARGS`, `bash -ex FILE`, `sh -ec SCRIPT`, `bash -lc SCRIPT`, as a container's command
    or a command of a script: the options are set as the script starts (`-e` ends it at `false`,
    `-x` traces), the file's ARGs its positional parameters; as busybox's sh, bash and dash run them."""
    client, clock, mgr = env
    await scripts_pod(client, clock, image=IMAGE[shell])
    assert await exec_(mgr, "trainer", [shell, "-e", "/scripts/strict.sh", "a", "b"]) == (1, "in [2] a\n")
    assert await exec_(mgr, "trainer", [shell, "/scripts/strict.sh", "a"]) == (0, "in [1] a\nafter\n")
    traced = "+ echo 'in [1] a'" if shell != "dash" else "+ echo in [1] a"
    assert await exec_(mgr, "trainer", ["sh", "-c", f"{shell} -ex -- /scripts/strict.sh a; echo $?"]) == (
        0, f"{traced}\nin [1] a\n+ false\n1\n")
    assert await exec_(mgr, "trainer", [shell, "-ec", "false; echo no"]) == (1, "")
    assert await exec_(mgr, "trainer", [shell, "-lc", 'echo "login $0 $1"', "name", "one"]) == (0, "login name one\n")


@pytest.mark.parametrize("shell, sourced", [("sh", "sourced [2] p"), ("bash", "sourced [2] p"),
                                            ("dash", "sourced [2] x")])
async def test_a_sourced_files_arguments_are_its_positional_parameters_while_it_runs(env, shell, sourced):
    """`. FILE ARGS`: busybox's sh and bash give the file ARGS as `$1...` while it runs, the shell's
    own after; dash ignores them."""
    client, clock, mgr = env
    await scripts_pod(client, clock, image=IMAGE[shell])
    script = 'set -- x y; . /scripts/args.sh p q; echo "back [$#] $1"; . /scripts/args.sh; echo "again [$#] $1"'
    assert await exec_(mgr, "trainer", [shell, "-c", script]) == (
        0, f"{sourced}\nback [2] x\nsourced [2] x\nagain [2] x\n")


@pytest.mark.parametrize("image, python, options", [
    ("ubuntu", "/usr/bin/env: 'python3': No such file or directory\n",
     "/usr/bin/env: 'bash -e': No such file or directory\n/usr/bin/env: use -[v]S to pass options in shebang lines\n"),
    ("alpine", "env: can't execute 'python3': No such file or directory\n",
     "env: can't execute 'bash -e': No such file or directory\n"),
])
async def test_a_scripts_interpreter_line_runs_it_with_its_option_or_fails_as_real(env, image, python, options):
    """`#!/bin/bash -e`: bash runs the file with `-e` (where the image has bash); `#!/usr/bin/env
    python3` in an image without python: env says it cannot run it (GNU's words in Ubuntu's, busybox's
    in Alpine's), 127; `#!/usr/bin/env bash -e` asks env for a program named `bash -e`; `#!/usr/bin/python3`
    is not found, as the kernel finds no interpreter."""
    client, clock, mgr = env
    await scripts_pod(client, clock, image=image)
    script = "/scripts/strict.sh a; echo $?; /scripts/train.py; echo $?; /scripts/opts.sh; echo $?; /scripts/direct.py"
    strict = "in [1] a\n1\n" if image == "ubuntu" else "sh: /scripts/strict.sh: not found\n127\n"
    assert await exec_(mgr, "trainer", ["sh", "-c", script]) == (
        127, f"{strict}{python}127\n{options}127\nsh: /scripts/direct.py: not found\n")


async def test_readlink_and_stat_see_a_configmaps_files_as_links_through_its_data_directory(env):
    """A ConfigMap's file is a link through `..data` to the kubelet's timestamped directory:
    busybox's `readlink` shows the link, `readlink -f` the file it ends at (a path whose last part
    is missing too, not one whose directory is: status 1), `stat -c` the link itself (-L: its
    file, with its item's mode) and a directory."""
    client, clock, mgr = env
    await scripts_pod(client, clock)
    code, out = await exec_(mgr, "trainer", ["sh", "-c", "readlink -f /scripts/launch.sh; readlink /scripts/launch.sh"])
    real, link = out.splitlines()
    assert code == 0 and re.fullmatch(r"/scripts/\.\.[^/.][^/]*/launch\.sh", real) and link == "..data/launch.sh"
    script = ("cd /tmp; readlink -f ../tmp/./new; readlink -f /nope/x; echo $?; readlink /tmp; echo $?\n"
              "stat -c '%n %a %A %F %s' /scripts/plain.sh; stat -L -c '%a %A %F %s %h' /scripts/plain.sh /tmp\n"
              "stat -c %n /nope; echo $?")
    assert await exec_(mgr, "trainer", ["sh", "-c", script]) == (0, (
        "/tmp/new\n1\n1\n/scripts/plain.sh 777 lrwxrwxrwx symbolic link 15\n644 -rw-r--r-- regular file 11 1\n"
        "1777 drwxrwxrwt directory 4096 2\nstat: can't stat '/nope': No such file or directory\n1\n"))


async def test_a_configmaps_volume_is_laid_out_as_the_kubelets_atomic_writer_leaves_it(env):
    """`ls -la` in a ConfigMap's volume: the kubelet's timestamped directory (`..` and the UTC time,
    then a number), the `..data` link to it and each file a link through `..data`, the pod's
    fsGroup's; `find` lists the links without following them (-L: through them), `stat` the owners
    by id and name (ones the image does not name: UNKNOWN); a file the container's user makes in
    /tmp is its own."""
    client, clock, mgr = env
    await scripts_pod(client, clock, securityContext={"runAsUser": 1000, "fsGroup": 2000})
    code, out = await exec_(mgr, "trainer", ["ls", "-la", "/scripts"])
    lines = out.splitlines()
    stamp = re.fullmatch(r"drwxr-sr-x    2 root     2000          4096 \w{3} [ \d]\d \d\d:\d\d (\.\.\d{4}(_\d\d){5}\.\d+)",
                         lines[3])
    assert code == 0 and stamp, lines[3]
    assert re.fullmatch(rf"lrwxrwxrwx    1 root     2000     {len(stamp[1]):>9} .* \.\.data -> {re.escape(stamp[1])}",
                        lines[4]), lines[4]
    assert re.fullmatch(r"lrwxrwxrwx    1 root     2000            16 .* launch\.sh -> \.\.data/launch\.sh", lines[8]), out
    assert re.match(r"drwxr-xr-x +\d+ root     root          4096 ", lines[2]) and lines[2].endswith(" .."), out
    code, out = await exec_(mgr, "trainer", ["sh", "-c", "find /scripts -name 'p*'; find -L /scripts -name 'p*'"])
    assert code == 0 and out == (f"/scripts/{stamp[1]}/plain.sh\n/scripts/plain.sh\n"
                                 f"/scripts/{stamp[1]}/plain.sh\n/scripts/..data/plain.sh\n/scripts/plain.sh\n")
    script = "touch /tmp/mine; stat -c '%n %u:%g %U:%G %a' /scripts /scripts/plain.sh /tmp/mine; stat -L -c %a /scripts/plain.sh"
    assert await exec_(mgr, "trainer", ["sh", "-c", script]) == (0, (
        "/scripts 0:2000 root:UNKNOWN 2777\n/scripts/plain.sh 0:2000 root:UNKNOWN 777\n"
        "/tmp/mine 1000:0 UNKNOWN:root 644\n644\n"))


@pytest.mark.parametrize("image, timed_out, missing", [
    ("busybox", 143, "timeout: can't execute 'nosuch': No such file or directory\n"),
    ("ubuntu", 124, "timeout: failed to run command 'nosuch': No such file or directory\n"),
])
async def test_timeout_ends_a_program_at_its_deadline(env, image, timed_out, missing):
    """`timeout SECONDS PROGRAM`: a program still running at the deadline is ended there, what it
    would write later never written: busybox's timeout execs it, so the shell sees it killed by
    TERM (143; -s KILL: 137), GNU's says 124; one ending first has its own status; a program not
    there is timeout's error (127)."""
    client, clock, mgr = env
    await running_trainer(client, clock, image)
    script = ("timeout 3 sh -c 'while true; do echo tick; sleep 1; done'; echo $?; timeout 10 sh -c 'exit 4'; echo $?\n"
              "timeout -s KILL 2 sleep 9; echo $?; timeout 2 sh -c 'echo a; sleep 5; echo b'; echo $?; timeout 1 nosuch\n"
              "echo $?")
    assert await exec_over(mgr, clock, ["sh", "-c", script]) == (0, (
        f"tick\ntick\ntick\n{timed_out}\n4\n137\na\n{timed_out}\n{missing}127\n"))


@pytest.mark.parametrize("image, ignored", [("busybox", 0), ("ubuntu", 124)])
async def test_timeout_k_kills_a_program_that_ignores_term(env, image, ignored):
    """A script that ignores TERM (`trap '' TERM`, inherited by what it runs) outlives timeout's
    signal: with `-k SECONDS` the KILL that much later ends it (137 from either timeout); without,
    it runs to its end (busybox's timeout has exec'd it: its own status; GNU's still says 124). One
    that takes TERM ends at the deadline whatever -k says."""
    client, clock, mgr = env
    await running_trainer(client, clock, image)
    script = ("timeout -k 2 3 sh -c 'trap \"\" TERM; while true; do echo tick; sleep 1; done'; echo $?\n"
              "timeout 1 sh -c 'trap \"\" TERM; sleep 2; echo done'; echo $?\n"
              "timeout -k 5s 1 sh -c 'sleep 3; echo never'; echo $?")
    term = 143 if image == "busybox" else 124
    assert await exec_over(mgr, clock, ["sh", "-c", script]) == (
        0, f"tick\ntick\ntick\ntick\ntick\n137\ndone\n{ignored}\n{term}\n")


async def test_dmon_without_a_count_samples_until_stopped(env):
    """`nvidia-smi dmon` with no `-c`, as a container's sidecar or an exec watching the GPUs: a
    sample each `-d` seconds on the node's clock until it is stopped (here by `timeout`: its
    samples before the deadline); piped or in the background, it is not simulated."""
    client, clock, mgr = env
    await running_trainer(client, clock)
    code, out = await exec_over(mgr, clock, ["sh", "-c", "timeout 7 nvidia-smi dmon -s u -d 2; echo $?"])
    assert code == 0 and out.splitlines() == [
        "# gpu     sm    mem    enc    dec    jpg    ofa ", "# Idx      %      %      %      %      %      % ",
        *["    0      0      0      0      0      0      0 ", "    1      0      0      0      0      0      0 "] * 4,
        "143"]
    assert (await exec_(mgr, "trainer", ["sh", "-c", "nvidia-smi dmon | head -n 1"]))[0] == 2


async def test_awk_programs_launchers_feed_nvidia_smi_through(env):
    """awk beyond sums, as busybox's runs it (checked against busybox 1.35): -F, NR/NF, printf,
    BEGIN/END, arrays and `for (k in a)`, `split`, field assignment, `next`, `-v`, `!seen[$1]++`."""
    client, clock, mgr = env
    await running_trainer(client, clock)
    query = "nvidia-smi --query-gpu=index,name,memory.total --format=csv"
    script = (f"{query} | awk -F', ' 'NR > 1 {{split($3, m, \" \"); total += m[1]; printf \"gpu%d %s\\n\", $1, $2}}\n"
              "  END {printf \"%d GPUs, %d MiB\\n\", NR - 1, total}'\n"
              f"{query} | awk -F', ' -v want=1 'BEGIN {{OFS = \"|\"}} NR == 1 {{next}} $1 == want {{$2 = \"picked\"; print; print NF}}'\n"
              "printf 'a 1\\nb 2\\na 3\\n' | awk '{s[$1] += $2} !seen[$1]++ {order = order $1} END {for (k in s) n++; "
              "print n, order, s[\"a\"], length(order)}'")
    assert await exec_(mgr, "trainer", ["sh", "-c", script]) == (0, (
        "gpu0 NVIDIA H100 80GB HBM3\ngpu1 NVIDIA H100 80GB HBM3\n2 GPUs, 163840 MiB\n1|picked|81920 MiB\n3\n"
        "2 ab 4 2\n"))


async def test_a_script_run_by_the_containers_script_waits_for_its_file_then_goes_back(env):
    """A loop waiting for a file in a script the container's script runs (`sh wait.sh && ...`,
    `/scripts/wait.sh`) waits, as one at the top level does: the file an exec makes later ends it,
    the rest of that script runs, then the rest of the script that ran it, with its status and its
    own variables and directory."""
    command = ["sh", "-c", 'X=outer; echo start; sh /scripts/wait.sh && echo never || echo "wait.sh said $? $X $(pwd)"\n'
               '/scripts/wait.sh; echo "again $?"']
    assert await _released_log(env, command, "echo go > /tmp/ready") == (
        "start\nready: go in /tmp\nwait.sh said 3 outer /\nready: go in /tmp\nagain 3\n")


async def _released_log(env, command: list[str], release: str) -> str:
    """The trainer pod runs `command`, waiting for a file; 5 s on an exec runs `release` (making it);
    the pod succeeds: its log."""
    client, clock, mgr = env
    await scripts_pod(client, clock, command)
    await clock.advance(5)
    assert await exec_(mgr, "trainer", ["sh", "-c", release]) == (0, "")
    pod = await eventually(phase(client.resource("", "v1", "pods"), "trainer", "Succeeded", clock))
    assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
    worker = next(w for w in mgr.agents["gpu-0"].workers.values() if w.name == "trainer")
    return worker.io.serve_log("app", LogOptions()).decode()


async def test_a_sourced_file_waits_for_its_file_then_the_shell_goes_on_with_what_it_set(env):
    """`. waited.sh ARG` whose loop waits for a file: it waits as the script's own loop would; once
    an exec makes the file, the rest of the sourced file runs in the same shell (its `return`
    ending it), then the shell goes on with what the file set, its own arguments again."""
    command = ["sh", "-c", 'set -- x; . /scripts/waited.sh a; echo "back $? $V $1 $(pwd)"']
    assert await _released_log(env, command, "touch /tmp/ready") == "sourced a\nback 4 set x /tmp\n"


async def limited_trainer(env):
    """Pod `trainer` on gpu-0 requesting 500m and 1Gi, limited to 2 CPUs and 1Gi, running: its pods."""
    client, clock, _ = env
    pods = client.resource("", "v1", "pods")
    res = {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "1Gi"}}
    await pods.create({"metadata": {"name": "trainer", "namespace": "default"}, "spec": {
        "nodeName": "gpu-0",
        "containers": [{"name": "app", "image": "busybox", "command": ["sleep", "infinity"], "resources": res}]}})
    await eventually(phase(pods, "trainer", "Running", clock))
    return pods


async def test_a_container_reads_its_limits_from_its_cgroup(env):
    """What a launch script reads to size its workers: /proc/self/cgroup is its cgroup namespace's
    root (`0::/`), /sys/fs/cgroup its own cgroup v2, read-only, with its limits as runc sets them
    (cpu.max the CFS quota, cpu.weight from its requests, memory.max) and no pids limit of its own;
    a resize shows there once the kubelet has actuated it."""
    client, clock, mgr = env
    pods = await limited_trainer(env)
    script = ("cat /proc/self/cgroup; cd /sys/fs/cgroup; cat cpu.max cpu.weight memory.max pids.max\n"
              "echo $(( $(cut -d' ' -f1 cpu.max) / $(cut -d' ' -f2 cpu.max) )) threads; echo 1 > memory.max")
    assert await exec_(mgr, "trainer", ["sh", "-c", script]) == (1, (
        "0::/\n200000 100000\n59\n1073741824\nmax\n2 threads\nsh: can't create memory.max: Read-only file system\n"))
    await pods.patch("trainer", {"spec": {"containers": [{"name": "app", "resources": {"limits": {"cpu": "4"}}}]}},
                     "application/strategic-merge-patch+json", namespace="default", subresource="resize")

    async def resized():
        await clock.advance(1)
        return (await exec_(mgr, "trainer", ["cat", "/sys/fs/cgroup/cpu.max"]))[1] == "400000 100000\n"
    await eventually(resized)


async def test_a_containers_cgroup_reports_what_kubectl_top_shows_it_using(env):
    """memory.current and cpu.stat are the usage model's (what `kubectl top` reads through the
    kubelet): half its requests, 512Mi, and 250m of CPU for each second since the container
    started, counted in 100ms CFS periods under its quota; both read-only, as the kernel's."""
    client, clock, mgr = env
    pods = await limited_trainer(env)
    await clock.advance(10)
    started = (await pods.get("trainer", namespace="default"))["status"]["containerStatuses"][0]["state"]
    seconds = clock.now() - parse_time(started["running"]["startedAt"])
    code, out = await exec_(mgr, "trainer", ["sh", "-c", "cd /sys/fs/cgroup; cat memory.current cpu.stat; ls -l cpu.stat"])
    assert code == 0
    lines = out.splitlines()
    assert lines[:2] == ["536870912", f"usage_usec {int(250 * seconds * 1000)}"]
    assert lines[2:9] == [f"user_usec {int(250 * seconds * 1000)}", "system_usec 0", f"nr_periods {int(seconds * 10)}",
                          "nr_throttled 0", "throttled_usec 0", "nr_bursts 0", "burst_usec 0"]
    assert lines[9].startswith("-r--r--r--")


async def test_stat_and_ls_l_count_links_and_blocks_as_busybox_does(env):
    """`stat FILE` without -c is busybox's default layout (a link as `'name' -> 'target'`, its
    blocks none; the mount's device: the node's disk for a ConfigMap's volume, the overlay for
    the root); `ls -l` counts a directory's links (2 and one for each subdirectory) and gives
    `total` in 1K blocks: each file's whole 4K pages, each directory's one."""
    client, clock, mgr = env
    await scripts_pod(client, clock)
    script = ("mkdir -p /w/a/x /w/b; printf hi > /w/f; dd if=/dev/zero of=/w/g bs=5000 count=1 status=none; "
              "ls -l /w | cut -c1-15; stat /w/f /scripts/plain.sh")
    code, out = await exec_(mgr, "trainer", ["sh", "-c", script])
    assert code == 0, out
    lines = out.splitlines()
    assert lines[:5] == ["total 20", "drwxr-xr-x    3", "drwxr-xr-x    2", "-rw-r--r--    1", "-rw-r--r--    1"]
    assert lines[5:7] == ["  File: /w/f", "  Size: 2         \tBlocks: 8          IO Block: 4096   regular file"]
    assert re.fullmatch(r"Device: 2bh/43d\tInode: \d{4,7} *  Links: 1", lines[7]), lines[7]
    assert lines[8] == "Access: (0644/-rw-r--r--)  Uid: (    0/    root)   Gid: (    0/    root)"
    assert [line[:8] for line in lines[9:12]] == ["Access: ", "Modify: ", "Change: "]
    assert re.fullmatch(r"Modify: \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{9} \+0000", lines[10]), lines[10]
    assert lines[12:14] == ["  File: '/scripts/plain.sh' -> '..data/plain.sh'",
                            "  Size: 15        \tBlocks: 0          IO Block: 4096   symbolic link"]
    assert lines[14].startswith("Device: 801h/2049d\t") and lines[15].startswith("Access: (0777/lrwxrwxrwx)")
