"""`nproc`, `free`, `df`, `du` and `uptime` in a pod on the default cluster (64 CPUs, 512Gi of memory, 1Ti of
ephemeral storage per node), through the kubelet's exec: busybox's formats, for the node's
machine, as a container sees it whatever its limits."""

from __future__ import annotations

import re

import pytest

from tests.controllers import eventually
from tests.node.dra.test_prepare import env, phase
from tests.node.test_simulated_gpu import exec_

__all__ = ["env"]  # the fixture: an API server and the default cluster's node agents


@pytest.fixture
async def small(env):
    """A pod limited to 1.5 CPUs and 1Gi on node gpu-0, running: the node's agents."""
    client, clock, mgr = env
    pods = client.resource("", "v1", "pods")
    await pods.create({"metadata": {"name": "small", "namespace": "default"}, "spec": {
        "nodeName": "gpu-0", "containers": [{"name": "app", "image": "busybox", "command": ["sleep", "infinity"],
                                             "resources": {"limits": {"cpu": "1500m", "memory": "1Gi"}}}]}})
    await eventually(phase(pods, "small", "Running", clock))
    return mgr


async def test_nproc_counts_the_nodes_cpus_which_a_cpu_limit_does_not_narrow(small):
    """A CPU limit is a CFS quota, not a cpuset: nproc (sched_getaffinity) still sees all 64."""
    assert await exec_(small, "small", ["nproc"]) == (0, "64\n")
    assert await exec_(small, "small", ["sh", "-c", "nproc --ignore=4"]) == (0, "60\n")


async def test_free_reads_the_nodes_memory_not_the_containers_limit(small):
    header = "              total        used        free      shared  buff/cache   available\n"
    assert await exec_(small, "small", ["free"]) == (0, header + (
        "Mem:      536870912    16777216   486539264           0    33554432   520093696\n"
        "Swap:             0           0           0\n"))
    code, out = await exec_(small, "small", ["sh", "-c", "free -m | grep Mem"])
    assert (code, out.split()) == (0, ["Mem:", "524288", "16384", "475136", "0", "32768", "507904"])


async def test_df_lists_the_overlay_root_the_runtimes_tmpfs_and_the_kubelets_files(small):
    code, out = await exec_(small, "small", ["df"])
    assert code == 0
    assert out.splitlines()[:4] == [
        "Filesystem           1K-blocks      Used Available Use% Mounted on",
        "overlay              1073741824 107374182 966367642  10% /",
        "tmpfs                    65536         0     65536   0% /dev",
        "shm                      65536         0     65536   0% /dev/shm"]
    assert [line.split()[-1] for line in out.splitlines()[4:]] == [
        "/etc/hosts", "/dev/termination-log", "/etc/hostname", "/etc/resolv.conf"]


async def test_df_h_shows_a_checkpoint_claim_a_secret_and_a_tmpfs_by_path(env, tmp_path):
    """An inference server's first look at its checkpoint volume (`df -h /models`): a claim on a
    hostPath PersistentVolume is a bind mount of the node's disk; a secret's volume is the
    kubelet's tmpfs (the pod's 2Gi memory limit), a memory-backed emptyDir its own; `-h` is
    busybox's human units; a missing path is refused as busybox refuses it."""
    client, clock, mgr = env
    core = lambda kind: client.resource("", "v1", kind)  # noqa: E731
    await core("persistentvolumes").create({"metadata": {"name": "ckpt"}, "spec": {
        "capacity": {"storage": "50Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": str(tmp_path)},
        "claimRef": {"namespace": "default", "name": "ckpt"}}})
    claim = await core("persistentvolumeclaims").create({"metadata": {"name": "ckpt", "namespace": "default"}, "spec": {
        "accessModes": ["ReadWriteOnce"], "volumeName": "ckpt", "resources": {"requests": {"storage": "50Gi"}}}})
    await core("persistentvolumeclaims").update({**claim, "status": {"phase": "Bound"}}, subresource="status")
    await core("secrets").create({"metadata": {"name": "hf-token", "namespace": "default"}, "data": {"token": "aGY="}})
    await core("pods").create({"metadata": {"name": "infer", "namespace": "default"}, "spec": {
        "nodeName": "gpu-0", "volumes": [
            {"name": "models", "persistentVolumeClaim": {"claimName": "ckpt"}},
            {"name": "token", "secret": {"secretName": "hf-token"}},
            {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}}],
        "containers": [{"name": "app", "image": "busybox", "command": ["sleep", "infinity"],
                        "resources": {"limits": {"memory": "2Gi"}},
                        "volumeMounts": [{"name": "models", "mountPath": "/models"},
                                         {"name": "token", "mountPath": "/var/run/hf"},
                                         {"name": "shm", "mountPath": "/cache"}]}]}})
    await eventually(phase(core("pods"), "infer", "Running", clock))
    code, out = await exec_(mgr, "infer", ["df", "-h"])
    assert code == 0
    lines = out.splitlines()
    assert lines[:2] == ["Filesystem                Size      Used Available Use% Mounted on",
                         "overlay                   1.0T    102.4G    921.6G  10% /"]
    assert lines[4:7] == ["tmpfs                     1.0G         0      1.0G   0% /cache",
                          "/dev/sda1                 1.0T    102.4G    921.6G  10% /models",
                          "tmpfs                     2.0G      4.0K      2.0G   0% /var/run/hf"]
    code, out = await exec_(mgr, "infer", ["sh", "-c", "df -h /models/step-100 /models; df -m /cache; df /nope"])
    assert out.splitlines() == [
        "Filesystem                Size      Used Available Use% Mounted on",
        "df: /models/step-100: can't find mount point",
        "/dev/sda1                 1.0T    102.4G    921.6G  10% /models",
        "Filesystem           1M-blocks      Used Available Use% Mounted on",
        "tmpfs                     1024         0      1024   0% /cache",
        "Filesystem           1K-blocks      Used Available Use% Mounted on",
        "df: /nope: can't find mount point"]
    assert code == 1


async def test_du_sums_whole_blocks_and_leaves_links_and_a_tmpfs_directory_out(env):
    """`du -sh /cache` before a checkpoint is kept: busybox's du counts each file in whole 4K blocks
    and each directory one block on disk, none on a tmpfs (a Memory emptyDir); a ConfigMap's links
    take none, its timestamped directory's files do; -s, -a, -c, -d and -h as busybox has them."""
    client, clock, mgr = env
    await client.resource("", "v1", "configmaps").create(
        {"metadata": {"name": "cfg", "namespace": "default"}, "data": {"a": "x" * 5000}})
    pods = client.resource("", "v1", "pods")
    await pods.create({"metadata": {"name": "job", "namespace": "default"}, "spec": {
        "nodeName": "gpu-0", "volumes": [{"name": "cfg", "configMap": {"name": "cfg"}},
                                         {"name": "shm", "emptyDir": {"medium": "Memory"}}],
        "containers": [{"name": "app", "image": "busybox", "command": ["sleep", "infinity"], "volumeMounts": [
            {"name": "cfg", "mountPath": "/cfg"}, {"name": "shm", "mountPath": "/cache"}]}]}})
    await eventually(phase(pods, "job", "Running", clock))
    script = ("mkdir -p /tmp/ck/s1 /cache/d; dd if=/dev/zero of=/tmp/ck/s1/w bs=1000 count=10 2>/dev/null; "
              "echo hi > /tmp/ck/note; echo hi > /cache/d/f\n"
              "du /tmp/ck; du -sh /tmp/ck /nope; du -a -c /cache; du -d 0 -s /cfg")
    code, out = await exec_(mgr, "job", ["sh", "-c", script])
    assert (code, out) == (0, "16\t/tmp/ck/s1\n24\t/tmp/ck\n24.0K\t/tmp/ck\ndu: /nope: No such file or directory\n"
                              "4\t/cache/d/f\n4\t/cache/d\n4\t/cache\n4\ttotal\n16\t/cfg\n")


async def test_ulimit_shows_containerds_limits_and_raises_a_hard_one_only_with_sys_resource(small, env):
    """A container inherits containerd 2's limits (open files 1024, hard 524288; locked memory 8192
    KiB): `ulimit` shows them, lowers either and raises the soft one, the change kept for the
    shell and the commands it runs; raising a hard one (NCCL's `ulimit -l unlimited`) takes
    CAP_SYS_RESOURCE: refused in the words of busybox's sh, passing in a privileged container."""
    script = ('ulimit; ulimit -n; ulimit -Hn; ulimit -l; ulimit -n 65536; echo "n $? $(ulimit -n) $(ulimit -Hn)"\n'
              'ulimit -l unlimited; echo "l $?"; ulimit -Sn 999999; echo "soft $?"; sh -c "ulimit -n"')
    assert await exec_(small, "small", ["sh", "-c", script]) == (0, (
        "unlimited\n1024\n524288\n8192\nn 0 65536 65536\nsh: error setting limit: Operation not permitted\nl 1\n"
        "sh: error setting limit: Invalid argument\nsoft 1\n65536\n"))
    assert (await exec_(small, "small", ["sh", "-c", "ulimit -a"]))[1].splitlines()[7] == \
        "open files                      (-n) 1024"
    client, clock, mgr = env
    pods = client.resource("", "v1", "pods")
    await pods.create({"metadata": {"name": "nccl", "namespace": "default"}, "spec": {
        "nodeName": "gpu-0", "containers": [{"name": "app", "image": "ubuntu", "command": ["sleep", "infinity"],
                                             "securityContext": {"privileged": True}}]}})
    await eventually(phase(pods, "nccl", "Running", clock))
    assert await exec_(mgr, "nccl", ["bash", "-c", "ulimit -l unlimited && ulimit -l; ulimit -a | head -n 2"]) == (
        0, "unlimited\nreal-time non-blocking time  (microseconds, -R) unlimited\n"
           "core file size              (blocks, -c) unlimited\n")
    assert await exec_(mgr, "nccl", ["dash", "-c", "ulimit -a | head -n 2; ulimit -n 5; ulimit -Hn 6; echo $?"]) == (
        0, "time(seconds)        unlimited\nfile(blocks)         unlimited\n0\n")


async def test_uptime_is_the_nodes_with_the_load_its_pods_keep_busy(small):
    """/proc/uptime and /proc/loadavg are no namespace's: the node's uptime since its agent
    started, no users, and a load of its system's 100m and the pod's 750m (half its 1500m limit,
    what `kubectl top` shows) in cores; past an hour busybox shows `H:MM`."""
    code, out = await exec_(small, "small", ["uptime"])
    assert code == 0 and re.fullmatch(r" \d\d:\d\d:\d\d up \d+ min,  0 users,  load average: 0.85, 0.85, 0.85\n", out), out
    await small.clock.advance(3600 + 5 * 60)
    code, out = await exec_(small, "small", ["sh", "-c", "uptime | cut -d, -f1"])
    assert code == 0 and re.fullmatch(r" \d\d:\d\d:\d\d up  1:0[56]\n", out), out


async def test_mount_lists_what_runc_mounts_in_its_order(env):
    """`mount` is /proc/mounts: the overlay root (read-only here), containerd's spec mounts (a
    read-only sysfs and cgroup2), then the pod's in a stable order by depth (a node-disk
    emptyDir, the kubelet's files, a read-only ConfigMap bind, a Memory emptyDir's tmpfs at
    /dev/shm in place of the runtime's), then runc's read-only and masked /proc and /sys paths."""
    client, clock, mgr = env
    core = lambda kind: client.resource("", "v1", kind)  # noqa: E731
    await core("configmaps").create({"metadata": {"name": "app", "namespace": "default"}, "data": {"a": "1"}})
    await core("pods").create({"metadata": {"name": "mounts", "namespace": "default"}, "spec": {
        "nodeName": "gpu-0", "automountServiceAccountToken": False, "volumes": [
            {"name": "cfg", "configMap": {"name": "app"}}, {"name": "data", "emptyDir": {}},
            {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}}],
        "containers": [{"name": "app", "image": "busybox", "command": ["sleep", "infinity"],
                        "securityContext": {"readOnlyRootFilesystem": True},
                        "volumeMounts": [{"name": "cfg", "mountPath": "/etc/app"}, {"name": "data", "mountPath": "/data"},
                                         {"name": "shm", "mountPath": "/dev/shm"}]}]}})
    await eventually(phase(core("pods"), "mounts", "Running", clock))
    code, out = await exec_(env[2], "mounts", ["mount"])
    lines = out.splitlines()
    assert code == 0 and lines[0].startswith("overlay on / type overlay (ro,relatime,lowerdir="), out
    assert lines[1:] == [
        "proc on /proc type proc (rw,nosuid,nodev,noexec,relatime)",
        "tmpfs on /dev type tmpfs (rw,nosuid,size=65536k,mode=755,inode64)",
        "devpts on /dev/pts type devpts (rw,nosuid,noexec,relatime,gid=5,mode=620,ptmxmode=666)",
        "mqueue on /dev/mqueue type mqueue (rw,nosuid,nodev,noexec,relatime)",
        "sysfs on /sys type sysfs (ro,nosuid,nodev,noexec,relatime)",
        "cgroup on /sys/fs/cgroup type cgroup2 (ro,nosuid,nodev,noexec,relatime,nsdelegate,memory_recursiveprot)",
        "/dev/sda1 on /data type ext4 (rw,relatime)",
        "/dev/sda1 on /etc/app type ext4 (ro,relatime)",
        "tmpfs on /dev/shm type tmpfs (rw,relatime,size=1048576k,inode64)",
        "/dev/sda1 on /etc/hosts type ext4 (rw,relatime)",
        "/dev/sda1 on /dev/termination-log type ext4 (rw,relatime)",
        "/dev/sda1 on /etc/hostname type ext4 (rw,relatime)",
        "/dev/sda1 on /etc/resolv.conf type ext4 (rw,relatime)",
        *(f"proc on /proc/{p} type proc (ro,nosuid,nodev,noexec,relatime)" for p in ("bus", "fs", "irq", "sys", "sysrq-trigger")),
        "tmpfs on /proc/acpi type tmpfs (ro,relatime,inode64)",
        *(f"tmpfs on /proc/{p} type tmpfs (rw,nosuid,size=65536k,mode=755,inode64)" for p in ("kcore", "keys", "timer_list")),
        *(f"tmpfs on {p} type tmpfs (ro,relatime,inode64)" for p in ("/sys/firmware", "/sys/devices/virtual/powercap", "/proc/scsi"))]


async def test_top_shows_the_nodes_header_and_the_containers_processes(small):
    """`top -bn1`: the node's memory (as `free`), its CPU split and load (the 100m system and the
    pod's 750m over 64 CPUs: 1% busy), then the container's processes: its main process as big as
    the working set `kubectl top` shows (512Mi, half its 1Gi limit), busy with 750m (1% of the
    node's CPU time), and top itself."""
    code, out = await exec_(small, "small", ["top", "-bn1"])
    assert code == 0, out
    assert out.splitlines() == [
        "Mem: 50331648K used, 486539264K free, 0K shrd, 0K buff, 33554432K cached",
        "CPU:   1% usr   0% sys   0% nic  98% idle   0% io   0% irq   0% sirq",
        "Load average: 0.85 0.85 0.85 1/183 7",
        "  PID  PPID USER     STAT   VSZ %VSZ CPU %CPU COMMAND",
        "    1     0 root     S     512m   0%   1   1% sleep infinity",
        "    7     0 root     R     1304   0%   7   0% top -bn1"]
    code, out = await exec_(small, "small", ["sh", "-c", "top -b -n 1 | tail -n 2 | cut -c1-40"])
    assert (code, out.splitlines()[1]) == (0, "    7     0 root     R     1304   0%   7")
