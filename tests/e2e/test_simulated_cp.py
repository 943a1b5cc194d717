"""`kubectl cp` and the file commands people exec, on the default simulated
runtime: kubectl runs `tar cf -` and `tar xmf -` in the container over exec,
and the container's small in-memory filesystem (its root, an emptyDir its
pod's containers share, the files of a ConfigMap volume) answers them as
busybox would, with 1.37's websockets and 1.32's SPDY alike."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess

import pytest

from tests.e2e.conftest import KUBECTL, wait_for

KUBECTL_132 = shutil.which("kubectl")

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "files", "namespace": "default"}, "spec": {
    "volumes": [{"name": "shared", "emptyDir": {}}, {"name": "config", "configMap": {"name": "app"}}],
    "containers": [
        {"name": "main", "image": "busybox", "command": ["sleep", "infinity"],
         "volumeMounts": [{"name": "shared", "mountPath": "/data"}, {"name": "config", "mountPath": "/etc/app"}]},
        {"name": "side", "image": "busybox", "command": ["sleep", "infinity"],
         "volumeMounts": [{"name": "shared", "mountPath": "/shared"}]},
        {"name": "locked", "image": "busybox", "command": ["sleep", "infinity"],
         "securityContext": {"readOnlyRootFilesystem": True},
         "volumeMounts": [{"name": "shared", "mountPath": "/data"},
                          {"name": "shared", "mountPath": "/seen", "readOnly": True}]}]}}


@pytest.fixture(scope="module")
def pod(cluster):
    cluster.kubectl("create", "configmap", "app", "--from-literal=mode=fast")
    cluster.kubectl("apply", "-f", "-", input=json.dumps(POD))
    wait_for(lambda: cluster.kubectl_json("get", "pod", "files")["status"].get("phase") == "Running", 60,
             "files Running")
    return cluster


def _exec(c, *command: str, container: str = "main") -> subprocess.CompletedProcess:
    return c.kubectl("exec", "files", "-c", container, "--", *command, check=False)


def test_cp_a_file_in_cat_it_and_cp_it_back_out(pod, tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("first line\nsecond line\n")
    pod.kubectl("cp", str(text), "files:/tmp/notes.txt", "-c", "main")
    r = _exec(pod, "cat", "/tmp/notes.txt")
    assert (r.returncode, r.stdout) == (0, "first line\nsecond line\n"), r.stderr
    blob = tmp_path / "blob.bin"
    blob.write_bytes(os.urandom(70_000) + b"\x00\n\r\n")
    pod.kubectl("cp", str(blob), "files:/tmp", "-c", "main")  # into a directory: under its own name
    back = tmp_path / "back.bin"
    r = pod.kubectl("cp", "files:/tmp/blob.bin", str(back), "-c", "main")
    assert back.read_bytes() == blob.read_bytes()
    assert "tar: removing leading '/' from member names" in r.stdout + r.stderr
    digest = _exec(pod, "md5sum", "/tmp/blob.bin").stdout
    assert digest == f"{hashlib.md5(blob.read_bytes()).hexdigest()}  /tmp/blob.bin\n"
    resumable = tmp_path / "resumable.bin"  # --retries: `sh -c 'tar cf - SRC | tail -c+N'`
    pod.kubectl("cp", "--retries=2", "files:/tmp/blob.bin", str(resumable), "-c", "main")
    assert resumable.read_bytes() == blob.read_bytes()


def test_cp_a_directory_in_and_out(pod, tmp_path):
    src = tmp_path / "site"
    (src / "css").mkdir(parents=True)
    (src / "index.html").write_text("<h1>hi</h1>\n")
    (src / "css" / "main.css").write_text("h1 { color: red }\n")
    pod.kubectl("cp", str(src), "files:/data/site", "-c", "main")
    assert _exec(pod, "ls", "/data/site").stdout == "css\nindex.html\n"
    out = tmp_path / "out"
    pod.kubectl("cp", "files:/data/site", str(out), "-c", "main")
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*")) == ["css", "css/main.css", "index.html"]
    assert (out / "css" / "main.css").read_text() == "h1 { color: red }\n"
    # the emptyDir is the pod's: the other container sees what was copied, at its own mount path
    assert _exec(pod, "cat", "/shared/site/index.html", container="side").stdout == "<h1>hi</h1>\n"


def test_cp_carries_links_as_links_both_ways(pod, tmp_path):
    """Into the pod, kubectl's archive holds a local link as a link and tar there makes it (a dangling
    one too); out of it, tar archives a link as a link, which kubectl then skips with its warning."""
    src = tmp_path / "release"
    (src / "v1").mkdir(parents=True)
    (src / "v1" / "app.txt").write_text("one\n")
    os.symlink("v1", src / "current")
    os.symlink("/opt/gone", src / "old")
    pod.kubectl("cp", str(src), "files:/data/release", "-c", "main")
    r = _exec(pod, "sh", "-c", "readlink /data/release/current; readlink /data/release/old; "
                               "cat /data/release/current/app.txt; ls -l /data/release")
    assert r.stdout.startswith("v1\n/opt/gone\none\ntotal "), r.stderr
    assert " current -> v1\n" in r.stdout and " old -> /opt/gone\n" in r.stdout
    assert _exec(pod, "sh", "-c", "ln -s current/app.txt /data/release/app").returncode == 0
    out = tmp_path / "back"
    r = pod.kubectl("cp", "files:/data/release", str(out), "-c", "main")
    warned = sorted(line.split(" (consider")[0] for line in r.stderr.splitlines() if line.startswith("warning:"))
    assert warned == [f'warning: skipping symlink: "{out}/{name}" -> "{target}"'
                      for name, target in (("app", "current/app.txt"), ("current", "v1"), ("old", "/opt/gone"))]
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*")) == ["v1", "v1/app.txt"]

def test_a_missing_path_fails_as_tar_does(pod, tmp_path):
    """From the pod, tar still ends its (empty) archive, which kubectl reads to its end and exits 0,
    before it sees tar's exit code or, at times, prints tar's errors (kubernetes/kubectl#980, open),
    as against a real node; tar itself fails. Into a missing directory, tar's exit code is kubectl's."""
    r = pod.kubectl("cp", "files:/no/such/file", str(tmp_path / "x"), "-c", "main", check=False)
    assert r.returncode == 0 and not (tmp_path / "x").exists()
    r = _exec(pod, "tar", "cf", "-", "/no/such/file")
    assert r.returncode == 1
    assert r.stderr.startswith("tar: /no/such/file: No such file or directory\n"
                               "tar: error exit delayed from previous errors\n")
    local = tmp_path / "f.txt"
    local.write_text("x\n")
    r = pod.kubectl("cp", str(local), "files:/no/such/dir/f.txt", "-c", "main", check=False)
    assert r.returncode == 1
    assert "tar: can't change directory to '/no/such/dir': No such file or directory" in r.stdout + r.stderr


def test_a_missing_path_in_an_image_built_on_debian_fails_as_gnu_tar_does(pod, tmp_path):
    """nginx's tar is Debian's GNU tar: its words (kubectl cp prints them on its stdout) and its
    exit code 2, which kubectl cp, having read the ended archive, still does not wait for."""
    web = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "gnu-tar"},
           "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}}
    pod.kubectl("apply", "-f", "-", input=json.dumps(web))
    wait_for(lambda: cluster_phase(pod, "gnu-tar") == "Running", 60, "gnu-tar Running")
    gnu = ("tar: Removing leading `/' from member names\n"
           "tar: /no/such/path: Cannot stat: No such file or directory\n"
           "tar: Exiting with failure status due to previous errors\n")
    r = pod.kubectl("exec", "gnu-tar", "--", "tar", "cf", "-", "/no/such/path", check=False)
    assert (r.returncode, r.stderr) == (2, gnu + "command terminated with exit code 2\n")
    r = pod.kubectl("cp", "gnu-tar:/no/such/path", str(tmp_path / "x"), check=False)
    assert r.returncode == 0 and not (tmp_path / "x").exists()
    assert r.stdout in (gnu, "")  # (at times kubectl exits before it prints them: kubernetes/kubectl#980)


def test_shell_redirection_test_and_a_configmap_mount(pod):
    r = _exec(pod, "sh", "-c", "echo one > /data/log; echo two >> /data/log; [ -f /data/log ] && cat /data/log")
    assert (r.returncode, r.stdout) == (0, "one\ntwo\n"), r.stderr
    assert _exec(pod, "cat", "/shared/log", container="side").stdout == "one\ntwo\n"
    assert _exec(pod, "cat", "/etc/app/mode").stdout == "fast"
    r = _exec(pod, "sh", "-c", "echo slow > /etc/app/mode")
    assert r.returncode == 1 and "sh: can't create /etc/app/mode: Read-only file system" in r.stderr
    assert _exec(pod, "test", "-d", "/etc/app").returncode == 0
    assert _exec(pod, "test", "-e", "/etc/app/other").returncode == 1
    r = _exec(pod, "cat", "/nope")
    assert r.returncode == 1 and "cat: can't open '/nope': No such file or directory" in r.stderr
    r = pod.kubectl("exec", "-i", "files", "-c", "main", "--", "sh", "-c", "cat > /tmp/piped; cat /tmp/piped",
                    input="through stdin\n")
    assert r.stdout == "through stdin\n"


def test_a_read_only_root_filesystem_fails_writes_but_to_its_writable_mounts(pod, tmp_path):
    """readOnlyRootFilesystem: the root is mounted read-only (EROFS, in busybox's words, and tar's
    for kubectl cp), while an emptyDir mounted read-write takes writes, and the same volume mounted
    readOnly does not; /dev (runc's tmpfs, /dev/shm in it) stays writable."""
    for path in ("/x", "/tmp/x", "/etc/hostname", "/seen/x"):
        r = _exec(pod, "touch", path, container="locked")
        assert (r.returncode, r.stderr) == (1, f"touch: {path}: Read-only file system\n"
                                               "command terminated with exit code 1\n"), path
    r = _exec(pod, "sh", "-c", "echo kept > /data/locked.txt && touch /dev/shm/lock && cat /seen/locked.txt",
              container="locked")
    assert (r.returncode, r.stdout) == (0, "kept\n"), r.stderr
    assert _exec(pod, "cat", "/data/locked.txt").stdout == "kept\n"
    local = tmp_path / "in.txt"
    local.write_text("x\n")
    r = pod.kubectl("cp", str(local), "files:/tmp/in.txt", "-c", "locked", check=False)
    assert r.returncode == 1
    assert "tar: can't open 'in.txt': Read-only file system" in r.stdout + r.stderr
    assert _exec(pod, "test", "-e", "/tmp/in.txt", container="locked").returncode == 1
    pod.kubectl("cp", str(local), "files:/data/in.txt", "-c", "locked")
    assert _exec(pod, "cat", "/data/in.txt", container="locked").stdout == "x\n"


@pytest.mark.skipif(KUBECTL_132 is None or KUBECTL_132 == KUBECTL, reason="no second kubectl on PATH")
def test_cp_with_kubectl_132_over_spdy(pod, tmp_path):
    env = {**os.environ, "KUBECONFIG": pod.kubeconfig, "KUBECTL_REMOTE_COMMAND_WEBSOCKETS": "false"}
    src = tmp_path / "old.bin"
    src.write_bytes(os.urandom(30_000))
    for args in (["cp", str(src), "files:/tmp/old.bin", "-c", "main"],
                 ["cp", "files:/tmp/old.bin", str(tmp_path / "old-back.bin"), "-c", "main"]):
        r = subprocess.run([KUBECTL_132, *args], capture_output=True, env=env, timeout=60)
        assert r.returncode == 0, r.stderr
    assert (tmp_path / "old-back.bin").read_bytes() == src.read_bytes()


def test_a_containers_own_command_works_on_its_files(pod):
    """The docs' first examples: a ConfigMap volume listed and read by the container's command
    (its log), and one container writing into an emptyDir that the other serves (seen by exec)."""
    listing = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "lister"}, "spec": {
        "restartPolicy": "Never", "volumes": [{"name": "config", "configMap": {"name": "app"}}],
        "containers": [{"name": "c", "image": "busybox", "command": ["/bin/sh", "-c", "ls /etc/config/; cat /etc/config/mode; "
                                                                     "echo; cat /etc/config/none"],
                        "volumeMounts": [{"name": "config", "mountPath": "/etc/config"}]}]}}
    two = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "two-containers"}, "spec": {
        "restartPolicy": "Never", "volumes": [{"name": "shared-data", "emptyDir": {}}],
        "containers": [
            {"name": "nginx-container", "image": "nginx",
             "volumeMounts": [{"name": "shared-data", "mountPath": "/usr/share/nginx/html"}]},
            {"name": "debian-container", "image": "debian", "command": ["/bin/sh"],
             "args": ["-c", "echo Hello from the debian container > /pod-data/index.html"],
             "volumeMounts": [{"name": "shared-data", "mountPath": "/pod-data"}]}]}}
    for manifest in (listing, two):
        pod.kubectl("apply", "-f", "-", input=json.dumps(manifest))
    wait_for(lambda: cluster_phase(pod, "lister") == "Failed", 60, "lister Failed")  # cat's exit code 1
    r = pod.kubectl("logs", "lister")
    assert r.stdout == "mode\nfast\ncat: can't open '/etc/config/none': No such file or directory\n"
    wait_for(lambda: "terminated" in (next(s for s in pod.kubectl_json("get", "pod", "two-containers")["status"]
                                           .get("containerStatuses") or [] if s["name"] == "debian-container")
                                      .get("state") or {}), 60, "debian-container terminated")
    r = pod.kubectl("exec", "two-containers", "-c", "nginx-container", "--", "cat", "/usr/share/nginx/html/index.html")
    assert r.stdout == "Hello from the debian container\n"


def cluster_phase(c, name: str) -> str:
    return c.kubectl_json("get", "pod", name)["status"].get("phase", "")
