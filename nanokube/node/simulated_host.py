"""A simulated node's own root filesystem: what its hostPath volumes are.

A real node's hostPath volume is a path on the node (`kubectl debug node/N`
mounts `/` at /host). A simulated node runs on no host of its own, so it gets
a small root directory beside its pods' (`<node dir>/rootfs`), made when a
hostPath volume first needs it: the directories of a Linux root, an
/etc/os-release naming the OS image the node reports (NodeSystemInfo.osImage),
/etc/hostname and the kubelet's /var/lib/kubelet and /var/log/pods. A pod's
hostPath is looked up in it, so what one pod writes there another on the same
node reads, and a type check (`Directory`, `File`...) fails for what is not
there, as on a real node. A node of the process runtime runs on this host, so
its root is the host's, and it reports the host's OS image and kernel
(`system_info`).
"""

from __future__ import annotations

import os
import posixpath

#: NodeSystemInfo of a simulated node, as its root's /etc/os-release and uname would give them
OS_IMAGE = "nanokube simulated node"
KERNEL_VERSION = "6.8.0-nanokube"
#: the kernel's build, as `uname -v` prints it
KERNEL_BUILD = "#1 SMP PREEMPT_DYNAMIC Mon Nov 30 00:00:00 UTC 2026"
#: /etc/os-release (os-release(5)); PRETTY_NAME is what the kubelet reports as osImage
OS_RELEASE = f'PRETTY_NAME="{OS_IMAGE}"\nNAME="nanokube"\nID=nanokube\nVERSION_ID="1.37"\n'
#: the directories of the root (the FHS ones a distribution's root has), and the kubelet's own
ROOT_DIRS = ("bin", "dev", "etc", "home", "opt", "proc", "root", "run", "sbin", "sys", "tmp", "usr", "var/lib/kubelet",
             "var/log/pods", "var/log/containers", "var/run")


def node_root(node_dir: str, node: str) -> str:
    """The simulated node's root directory, made with its files the first time."""
    root = os.path.join(node_dir, "rootfs")
    if os.path.isdir(root):
        return root
    for d in ROOT_DIRS:
        os.makedirs(os.path.join(root, d), exist_ok=True)
    os.chmod(os.path.join(root, "tmp"), 0o1777)
    for name, text in (("os-release", OS_RELEASE), ("hostname", f"{node}\n")):
        with open(os.path.join(root, "etc", name), "w") as f:
            f.write(text)
    return root


def on_node(root: str, path: str) -> str:
    """Where the node's `path` (absolute, as a pod's hostPath names it) is under its `root`;
    `..` cannot climb above the root, as it cannot above /."""
    return os.path.join(root, *[p for p in posixpath.normpath("/" + path).split("/") if p])


def system_info(on_this_host: bool) -> tuple[str, str]:
    """NodeSystemInfo's (osImage, kernelVersion): a simulated node's own, or, for a node whose
    containers run on this host, the host's: its /etc/os-release PRETTY_NAME (as cadvisor reads
    it; "Linux" without one) and its kernel's release."""
    if not on_this_host:
        return OS_IMAGE, KERNEL_VERSION
    image = "Linux"
    try:
        with open("/etc/os-release") as f:
            for line in f:
                key, _, value = line.strip().partition("=")
                if key == "PRETTY_NAME":
                    image = value.strip('"\'') or image
    except OSError:
        pass
    return image, os.uname().release


def apparmor_enabled(on_this_host: bool) -> bool:
    """Whether the node can enforce AppArmor profiles (runc's apparmor.IsEnabled): a simulated
    node can, as a distribution's kernel with the module loaded; a node whose containers run on
    this host, if the host's kernel has AppArmor enabled."""
    if not on_this_host:
        return True
    try:
        with open("/sys/module/apparmor/parameters/enabled", "rb") as f:
            return os.path.isdir("/sys/kernel/security/apparmor") and f.read(1) == b"Y"
    except OSError:
        return False
