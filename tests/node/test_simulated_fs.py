"""A simulated container's files (its in-memory root, its pod's volumes) and the file commands the
simulated runtime interprets on them, as busybox words their output and errors."""

import hashlib
import io
import os
import tarfile

import pytest

from nanokube.clock import Clock
from nanokube.node.simulated_applets import Terminal
from nanokube.node.simulated_command import Shell, interpret, wants_stdin
from nanokube.node.simulated_fs import PodFiles

T0 = 1_800_000_000.0


class _Clock(Clock):
    def now(self) -> float:
        return T0


@pytest.fixture
def pod_files(tmp_path):
    """A pod whose `main` mounts an emptyDir at /data and a ConfigMap's files (as the kubelet's
    AtomicWriter lays them out, with a link that leads out of the volume) at /etc/app, and whose
    `side` mounts the emptyDir at /shared and a subPath of it read-only at /ro."""
    cfg = tmp_path / "config"
    (cfg / "..2026_01").mkdir(parents=True)
    (cfg / "..2026_01" / "mode").write_text("fast")
    os.symlink("..2026_01", cfg / "..data")
    os.symlink("..data/mode", cfg / "mode")
    os.symlink("/etc/passwd", cfg / "escape")
    pod = {"metadata": {"name": "web-0"}, "spec": {
        "volumes": [{"name": "scratch", "emptyDir": {}}, {"name": "config", "configMap": {"name": "app"}}],
        "containers": [
            {"name": "main", "volumeMounts": [{"name": "scratch", "mountPath": "/data"},
                                              {"name": "config", "mountPath": "/etc/app"}]},
            {"name": "side", "volumeMounts": [{"name": "scratch", "mountPath": "/shared"},
                                              {"name": "scratch", "mountPath": "/ro", "subPath": "out",
                                               "readOnly": True}]}]}}
    return PodFiles(pod, lambda name: str(tmp_path / name), _Clock())


def run(fs, *argv, stdin=b""):
    """(exit code, stdout, stderr) of `argv` run in the container `fs`."""
    program = interpret(list(argv), T0, fs, stdin)
    assert program is not None, argv
    out = [(stream, x if isinstance(x, bytes) else x.encode()) for _, stream, x in program.writes()]
    return (program.exit_code, b"".join(x for s, x in out if s == "stdout"),
            "".join(x.decode() for s, x in out if s == "stderr"))


def test_a_fresh_root_holds_an_images_directories_and_the_mount_points(pod_files):
    main = pod_files.container("main")
    assert run(main, "ls", "/") == (0, b"bin\ndata\ndev\netc\nhome\nproc\nroot\nsys\ntmp\nusr\nvar\n", "")
    assert run(main, "cat", "/etc/hostname")[1] == b"web-0\n"
    assert run(main, "ls", "-l", "/tmp")[1] == b"total 0\n"


def test_an_empty_dir_is_shared_and_kept_while_each_new_instance_gets_a_fresh_root(pod_files):
    main = pod_files.container("main")
    assert run(main, "sh", "-c", "echo one > /data/f; echo two >> /data/f; echo mine > /tmp/own") == (0, b"", "")
    assert run(pod_files.container("side"), "cat", "/shared/f") == (0, b"one\ntwo\n", "")
    pod_files.restarted("main")
    main = pod_files.container("main")
    assert run(main, "cat", "/data/f")[1] == b"one\ntwo\n"
    assert run(main, "cat", "/tmp/own") == (1, b"", "cat: can't open '/tmp/own': No such file or directory\n")


def test_a_config_map_shows_its_files_read_only_and_no_link_out_of_its_volume(pod_files):
    main = pod_files.container("main")
    assert run(main, "cat", "/etc/app/mode") == (0, b"fast", "")
    assert run(main, "ls", "/etc/app") == (0, b"mode\n", "")
    assert run(main, "cat", "/etc/app/escape")[0] == 1
    assert run(main, "sh", "-c", "echo slow > /etc/app/mode") == (
        1, b"", "sh: can't create /etc/app/mode: Read-only file system\n")
    assert run(main, "rm", "/etc/app/mode") == (1, b"", "rm: can't remove '/etc/app/mode': Read-only file system\n")


def test_a_sub_path_mount_read_only(pod_files):
    side = pod_files.container("side")
    run(side, "sh", "-c", "echo report > /shared/out/r.txt")
    assert run(side, "cat", "/ro/r.txt")[1] == b"report\n"
    assert run(side, "touch", "/ro/x") == (1, b"", "touch: /ro/x: Read-only file system\n")


def test_mkdir_rm_test_and_their_errors(pod_files):
    fs = pod_files.container("main")
    assert run(fs, "mkdir", "/a/b") == (1, b"", "mkdir: can't create directory '/a/b': No such file or directory\n")
    assert run(fs, "mkdir", "-p", "/a/b/c")[0] == 0
    assert run(fs, "mkdir", "/a") == (1, b"", "mkdir: can't create directory '/a': File exists\n")
    assert run(fs, "test", "-d", "/a/b")[0] == 0 and run(fs, "test", "-f", "/a/b")[0] == 1
    assert run(fs, "sh", "-c", "[ -e /a/b/c ] && echo there || echo gone")[1] == b"there\n"
    assert run(fs, "rm", "/a") == (1, b"", "rm: '/a' is a directory\n")
    assert run(fs, "rm", "-rf", "/a", "/not-here") == (0, b"", "")
    assert run(fs, "ls", "/a") == (1, b"", "ls: /a: No such file or directory\n")
    assert run(fs, "cat", "/tmp") == (1, b"", "cat: read error: Is a directory\n")
    assert run(fs, "sh", "-c", "[ -f /tmp") == (2, b"", "sh: [: missing ]\n")


def test_redirections_and_stdin(pod_files):
    fs = pod_files.container("main")
    assert run(fs, "sh", "-c", "cat > /tmp/in; cat /tmp/in /tmp/in", stdin=b"sent\n") == (0, b"sent\nsent\n", "")
    assert run(fs, "sh", "-c", "cat < /tmp/in > /dev/null; cat < /tmp/in") == (0, b"sent\n", "")
    assert run(fs, "sh", "-c", "echo x > /nope/f") == (1, b"", "sh: can't create /nope/f: nonexistent directory\n")
    assert run(fs, "sh", "-c", "cat < /nope") == (1, b"", "sh: can't open /nope: no such file\n")
    assert interpret(["sh", "-c", "echo x 3>/dev/null"], T0, fs) is None  # a descriptor past stderr
    assert run(fs, "sh", "-c", "echo v1>/tmp/v; cat /tmp/v") == (0, b"v1\n", "")  # a word ending in a digit
    assert interpret(["sh", "-c", "echo x > /tmp/f"]) is None  # no files: a container's own command


def _archive(entries: dict[str, bytes | None]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in entries.items():
            info = tarfile.TarInfo(name)
            if data is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size, info.mode = len(data), 0o600
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_tar_extracts_what_kubectl_cp_sends_and_archives_it_back(pod_files):
    fs = pod_files.container("main")
    sent = _archive({"site": None, "site/index.html": b"<h1>hi</h1>\n", "site/css/main.css": b"\x00\xff"})
    assert wants_stdin(["tar", "-xmf", "-", "-C", "/data"]) and not wants_stdin(["tar", "cf", "-", "/data"])
    assert run(fs, "tar", "-xmf", "-", "-C", "/data", stdin=sent) == (0, b"", "")
    # `kubectl cp --no-preserve`
    assert run(fs, "tar", "--no-same-permissions", "--no-same-owner", "-xmf", "-", "-C", "/tmp", stdin=sent)[0] == 0
    assert run(fs, "cat", "/tmp/site/index.html")[1] == b"<h1>hi</h1>\n"
    assert run(fs, "ls", "/data/site") == (0, b"css\nindex.html\n", "")
    code, out, err = run(fs, "tar", "cf", "-", "/data/site")
    assert (code, err) == (0, "tar: removing leading '/' from member names\n")
    with tarfile.open(fileobj=io.BytesIO(out)) as tar:
        assert tar.getnames() == ["data/site", "data/site/css", "data/site/css/main.css", "data/site/index.html"]
        member = tar.getmember("data/site/css/main.css")
        assert (tar.extractfile(member).read(), member.mode, member.uname) == (b"\x00\xff", 0o600, "root")
    assert run(fs, "tar", "tf", "-", stdin=out)[1] == b"data/site/\ndata/site/css/\ndata/site/css/main.css\n" \
                                                      b"data/site/index.html\n"


def test_tar_errors(pod_files):
    fs = pod_files.container("main")
    code, out, err = run(fs, "tar", "cf", "-", "/nope")
    assert (code, err) == (1, "tar: /nope: No such file or directory\ntar: error exit delayed from previous errors\n")
    assert tarfile.open(fileobj=io.BytesIO(out)).getnames() == []  # the archive is still ended
    assert run(fs, "tar", "xmf", "-", "-C", "/nope", stdin=_archive({"f": b""})) == (
        1, b"", "tar: can't change directory to '/nope': No such file or directory\n")
    assert run(fs, "tar", "xf", "-", stdin=b"not an archive" * 100) == (1, b"", "tar: invalid tar magic\n")
    assert run(fs, "tar", "xf", "-") == (1, b"", "tar: short read\n")
    assert run(fs, "tar", "-xf", "-", "-C", "/etc/app", stdin=_archive({"f": b"x"})) == (
        1, b"", "tar: can't open 'f': Read-only file system\n")
    assert interpret(["tar", "czf", "-", "/data"], T0, fs) is None  # compression is not simulated


def test_tar_in_an_image_built_on_debian_is_gnu_tar(pod_files):
    """nginx, python, debian, an application's image: GNU tar's words and its exit status 2 (the
    leading slash warned of before the name is looked up); Alpine's tar is busybox's."""
    pod_files.pod["spec"]["containers"][0]["image"] = "nginx:1.27"
    fs = pod_files.container("main")
    code, out, err = run(fs, "tar", "cf", "-", "/nope")
    assert (code, err) == (2, "tar: Removing leading `/' from member names\n"
                              "tar: /nope: Cannot stat: No such file or directory\n"
                              "tar: Exiting with failure status due to previous errors\n")
    assert tarfile.open(fileobj=io.BytesIO(out)).getnames() == []
    assert run(fs, "tar", "xmf", "-", "-C", "/nope", stdin=_archive({"f": b""})) == (
        2, b"", "tar: /nope: Cannot open: No such file or directory\ntar: Error is not recoverable: exiting now\n")
    assert run(fs, "tar", "-xf", "-", "-C", "/etc/app", stdin=_archive({"f": b"x"})) == (
        2, b"", "tar: f: Cannot open: Read-only file system\n"
                "tar: Exiting with failure status due to previous errors\n")
    pod_files.pod["spec"]["containers"][0]["image"] = "nginx:1.27-alpine"
    assert run(pod_files.container("main"), "tar", "cf", "-", "/nope")[::2] == (
        1, "tar: /nope: No such file or directory\ntar: error exit delayed from previous errors\n")


def test_links_made_with_ln_are_followed_listed_and_removed_as_links(pod_files):
    fs = pod_files.container("main")
    assert run(fs, "sh", "-c", "mkdir -p /data/v1; echo one > /data/v1/app.txt; cd /data; ln -s v1 current; "
                               "ln -s /data/current/app.txt /tmp/app; ln -s /nowhere /tmp/dangling; "
                               "cat /tmp/app; echo two >> current/app.txt; cat v1/app.txt") == (0, b"one\none\ntwo\n", "")
    assert run(fs, "readlink", "/tmp/app") == (0, b"/data/current/app.txt\n", "")
    assert run(fs, "readlink", "-f", "/tmp/app") == (0, b"/data/v1/app.txt\n", "")
    code, out, _ = run(fs, "ls", "-l", "/data")
    assert code == 0 and out.splitlines()[1].startswith(b"lrwxrwxrwx    1 root     root             2 ")
    assert out.splitlines()[1].endswith(b" current -> v1")
    assert run(fs, "stat", "-c", "%F %s", "/data/current") == (0, b"symbolic link 2\n", "")
    assert run(fs, "ls", "/data/current") == (0, b"app.txt\n", "")
    assert run(fs, "sh", "-c", "ln -s v2 /data/current; ls /data/v1") == (0, b"app.txt\nv2\n", "")  # into the directory
    assert run(fs, "ln", "-s", "v2", "/tmp/app") == (
        1, b"", "ln: can't create symlink '/tmp/app' to 'v2': File exists\n")
    assert run(fs, "sh", "-c", "ln -sfn v2 /data/current; readlink /data/current") == (0, b"v2\n", "")
    assert run(fs, "cat", "/tmp/dangling") == (1, b"", "cat: can't open '/tmp/dangling': No such file or directory\n")
    assert run(fs, "sh", "-c", "[ -L /tmp/dangling ] && [ ! -e /tmp/dangling ] && [ ! -h /data/v1 ] && "
                               "[ -h /data/current ]") == (0, b"", "")
    assert run(fs, "sh", "-c", "ln -s /tmp/loop /tmp/loop; cat /tmp/loop") == (
        1, b"", "cat: can't open '/tmp/loop': Too many levels of symbolic links\n")
    assert run(fs, "ln", "-s", "/data", "/etc/app/data") == (
        1, b"", "ln: can't create symlink '/etc/app/data' to '/data': Read-only file system\n")
    # rm takes a link away, not what it leads to; cp -r and mv copy links as links, plain cp follows one
    assert run(fs, "sh", "-c", "rm /tmp/app /tmp/dangling; ls /tmp; cat /data/v1/app.txt") == (
        0, b"loop\none\ntwo\n", "")
    assert run(fs, "sh", "-c", "ln -s v1/app.txt /data/app; cp -r /data /tmp/copy; readlink /tmp/copy/app; "
                               "cp /data/app /tmp/plain; readlink /tmp/plain; mv /tmp/copy/app /tmp/moved; "
                               "readlink /tmp/moved") == (0, b"v1/app.txt\nv1/app.txt\n", "")


def test_tar_archives_links_as_links_and_extracts_them(pod_files, tmp_path):
    """As GNU tar and busybox's: a link (a dangling one too) goes into the archive as itself, and one
    in an archive is made as a link, replacing what was there, in memory or in a claim on the node."""
    fs = pod_files.container("main")
    run(fs, "sh", "-c", "mkdir /data/v1; echo one > /data/v1/app.txt; ln -s v1 /data/current; ln -s /gone /data/old")
    code, out, err = run(fs, "tar", "cf", "-", "-C", "/data", ".")
    assert (code, err) == (0, "")
    with tarfile.open(fileobj=io.BytesIO(out)) as tar:
        links = {m.name: (m.linkname, m.mode, m.mtime) for m in tar.getmembers() if m.issym()}
    assert links == {"./current": ("v1", 0o777, T0), "./old": ("/gone", 0o777, T0)}
    code, out_dir, _ = run(fs, "tar", "cf", "-", "-C", "/data", "current/")  # a slash after it: where it leads
    with tarfile.open(fileobj=io.BytesIO(out_dir)) as tar:
        assert [(m.name, m.type) for m in tar.getmembers()] == [("current", tarfile.DIRTYPE),
                                                                  ("current/app.txt", tarfile.REGTYPE)]
    fresh = pod_files.container("side")
    assert run(fresh, "sh", "-c", "echo stale > /tmp/current") == (0, b"", "")
    assert run(fresh, "tar", "xf", "-", "-C", "/tmp", stdin=out) == (0, b"", "")
    assert run(fresh, "sh", "-c", "readlink /tmp/current; readlink /tmp/old; cat /tmp/current/app.txt") == (
        0, b"v1\n/gone\none\n", "")
    assert run(fresh, "tar", "xf", "-", "-C", "/tmp", stdin=out)[0] == 0  # again: each link replaced
    assert run(fresh, "ls", "-a", "/tmp") == (0, b".\n..\ncurrent\nold\nv1\n", "")

    (tmp_path / "pv").mkdir()
    os.symlink(tmp_path / "pv", tmp_path / "ckpt")
    pod = {"metadata": {"name": "w"}, "spec": {
        "volumes": [{"name": "ckpt", "persistentVolumeClaim": {"claimName": "c"}}],
        "containers": [{"name": "main", "volumeMounts": [{"name": "ckpt", "mountPath": "/ckpt"}]}]}}
    claim = PodFiles(pod, lambda name: str(tmp_path / name), _Clock()).container("main")
    assert run(claim, "tar", "xf", "-", "-C", "/ckpt", stdin=out) == (0, b"", "")
    assert os.readlink(tmp_path / "pv" / "current") == "v1" and os.readlink(tmp_path / "pv" / "old") == "/gone"
    assert run(claim, "sh", "-c", "cat /ckpt/current/app.txt; readlink /ckpt/old") == (0, b"one\n/gone\n", "")


def test_an_interactive_shell_works_on_the_files_and_gives_no_terminal_to_read(pod_files):
    shell = Shell(lambda: pod_files.container("main"))
    step = shell.line("echo hi > /tmp/f; cat /tmp/f", T0)
    assert step.output == ((0, "stdout", b"hi\n"),) and shell.status == 0
    step = shell.line("cat", T0)
    assert step.output == ((0, "stderr", "sh: cat: nanokube's simulated shell gives a command no terminal to read\n"),)
    assert shell.status == 1


def test_a_containers_own_command_works_on_a_draft_and_its_changes_are_made_once(pod_files):
    """The kubelet's sync works a container's command out more than once; only the instance that
    starts makes its changes, once (`>>` adds one line), on a fresh root and the shared volume."""
    argv = ["sh", "-c", "echo up >> /data/log; mkdir /tmp/work; cat /data/log"]
    programs = [interpret(argv, T0, pod_files.draft("main")) for _ in range(3)]
    assert {p.output for p in programs} == {((0, b"up\n"),)} and programs[0].exit_code == 0
    main = pod_files.container("main")
    assert run(main, "ls", "/data") == (0, b"", "")
    main.replay(programs[0].changes)
    assert run(main, "cat", "/data/log")[1] == b"up\n" and run(main, "test", "-d", "/tmp/work")[0] == 0
    again = interpret(argv, T0, pod_files.draft("main"))  # the next instance: a fresh root, the volume kept
    assert again.output == ((0, b"up\nup\n"),) and again.exit_code == 0


def test_a_change_a_command_makes_after_cd_is_made_where_it_made_it(pod_files):
    """A draft's changes are made again on the container's own files, whose working directory is
    not the script's: a relative path after `cd` is the directory's (before, `echo b > b` after
    `cd /data/s` wrote /b)."""
    argv = ["sh", "-c", "mkdir -p /data/s && cd /data/s && echo b > b; touch t gone; rm gone; cd /tmp; echo y > y"]
    program = interpret(argv, T0, pod_files.draft("main"))
    main = pod_files.container("main")
    main.replay(program.changes)
    assert run(main, "ls", "/data/s", "/tmp") == (0, b"/data/s:\nb\nt\n\n/tmp:\ny\n", "")
    assert run(main, "cat", "/data/s/b", "/tmp/y")[1] == b"b\ny\n"
    assert run(main, "ls", "/")[1].split() == [b"bin", b"data", b"dev", b"etc", b"home", b"proc", b"root", b"sys",
                                                b"tmp", b"usr", b"var"]


def test_pipes_and_the_commands_people_check_a_copy_with(pod_files):
    fs = pod_files.container("main")
    run(fs, "sh", "-c", "echo hello world > /tmp/f; echo a+b >> /tmp/f")
    assert run(fs, "sh", "-c", "wc -c /tmp/f; wc -l < /tmp/f; cat /tmp/f | wc -w") == (0, b"16 /tmp/f\n2\n3\n", "")
    assert run(fs, "md5sum", "/tmp/f")[1] == hashlib.md5(b"hello world\na+b\n").hexdigest().encode() + b"  /tmp/f\n"
    assert run(fs, "sh", "-c", "head -n 1 /tmp/f; tail -1 /tmp/f; head -c 5 /tmp/f | sha256sum") == (
        0, b"hello world\na+b\n" + hashlib.sha256(b"hello").hexdigest().encode() + b"  -\n", "")
    assert run(fs, "sh", "-c", "wc -c /nope | cat") == (0, b"", "wc: can't open '/nope': No such file or directory\n")
    # `kubectl cp --retries` resumes with `tar cf - SRC | tail -c+N`
    whole = run(fs, "tar", "cf", "-", "/tmp/f")[1]
    assert run(fs, "sh", "-c", "tar cf - /tmp/f | tail -c+0")[1] == whole
    assert run(fs, "sh", "-c", "tar cf - /tmp/f | tail -c+513")[1] == whole[512:]
    assert not wants_stdin(["sh", "-c", "tar cf - /tmp/f | tail -c+0"]) and wants_stdin(["sh", "-c", "cat | wc -c"])
    assert run(fs, "hostname") == (0, b"web-0\n", "")


def test_tar_of_a_directory_holds_the_volumes_mounted_below_it(pod_files):
    """`kubectl cp pod:/etc ./etc` brings the ConfigMap mounted at /etc/app along: its timestamped
    directory's files, and its links (`..data`, the file's) as links, which kubectl skips."""
    code, out, _ = run(pod_files.container("main"), "tar", "cf", "-", "/etc")
    with tarfile.open(fileobj=io.BytesIO(out)) as tar:
        assert code == 0 and tar.extractfile("etc/app/..2026_01/mode").read() == b"fast"
        assert sorted(tar.getnames()) == ["etc", "etc/app", "etc/app/..2026_01", "etc/app/..2026_01/mode",
                                          "etc/app/..data", "etc/app/mode", "etc/hostname"]
        assert [(m.issym(), m.linkname) for m in (tar.getmember("etc/app/..data"), tar.getmember("etc/app/mode"))] == [
            (True, "..2026_01"), (True, "..data/mode")]


def test_cd_and_relative_paths_carry_over_an_interactive_shells_lines_and_set_its_prompt(pod_files):
    shell = Shell(lambda: pod_files.container("main"))
    assert shell.prompt() == "/ # "
    assert shell.line("cd /tmp; echo x > f; pwd; cat /tmp/f", T0).output == (
        (0, "stdout", "/tmp\n"), (0, "stdout", b"x\n"))
    assert shell.prompt() == "/tmp # " and shell.line("cat f", T0).output == ((0, "stdout", b"x\n"),)
    step = shell.line("cd /nope", T0)
    assert step.output == ((0, "stderr", "sh: cd: can't cd to /nope: No such file or directory\n"),)
    assert shell.status == 2 and shell.prompt() == "/tmp # "
    shell.line("cd", T0)
    assert shell.prompt() == "~ # "


def test_a_containers_working_directory_is_made_and_relative_paths_start_there(pod_files):
    pod_files.pod["spec"]["containers"][0]["workingDir"] = "/srv/app"
    fs = pod_files.container("main")
    assert run(fs, "sh", "-c", "pwd; echo hi > out.txt; cat /srv/app/out.txt") == (0, b"/srv/app\nhi\n", "")
    sent = _archive({"rel/f": b"1"})
    assert run(fs, "tar", "xf", "-", "-C", "../app", stdin=sent)[0] == 0
    assert run(fs, "cat", "/srv/app/rel/f")[1] == b"1"


def test_a_claim_is_its_directory_on_the_node_and_a_draft_leaves_that_as_it_is(tmp_path):
    """A persistentVolumeClaim mount reads and writes the volume's directory the kubelet linked
    (a subPath made there); a container's own command works on a copy and writes the directory
    only when its changes are made; a claim taken read-only refuses writes."""
    (tmp_path / "pv").mkdir()
    (tmp_path / "pv" / "latest").write_text("step-1\n")
    os.symlink(tmp_path / "pv", tmp_path / "ckpt")
    pod = {"metadata": {"name": "w"}, "spec": {
        "volumes": [{"name": "ckpt", "persistentVolumeClaim": {"claimName": "c"}}],
        "containers": [{"name": "main", "volumeMounts": [{"name": "ckpt", "mountPath": "/data"},
                                                         {"name": "ckpt", "mountPath": "/run", "subPath": "run"}]},
                       {"name": "ro", "volumeMounts": [{"name": "ckpt", "mountPath": "/data", "readOnly": True}]}]}}
    files = PodFiles(pod, lambda name: str(tmp_path / name), _Clock())
    main = files.container("main")
    assert run(main, "sh", "-c", "cat /data/latest; echo step-2 > /data/latest; echo x > /run/f") == (0, b"step-1\n", "")
    assert (tmp_path / "pv" / "latest").read_text() == "step-2\n" and (tmp_path / "pv" / "run" / "f").is_file()
    program = interpret(["sh", "-c", "echo step-3 >> /data/latest"], T0, files.draft("main"))
    assert (tmp_path / "pv" / "latest").read_text() == "step-2\n"
    files.container("main").replay(program.changes)
    assert (tmp_path / "pv" / "latest").read_text() == "step-2\nstep-3\n"
    code, _, err = run(files.container("ro"), "rm", "/data/latest")
    assert code == 1 and "Read-only file system" in err and (tmp_path / "pv" / "latest").exists()


def test_ls_on_a_terminal_lays_out_columns_and_colours_as_busybox_does(pod_files):
    """With stdout a terminal, busybox ls fills columns down first (each as wide as the longest name
    and two more, as many as fit one less than the terminal's width) and colours each name by its
    type; through a pipe, into a file or `$(...)` it writes one plain name a line."""
    fs = pod_files.container("main")
    fs.write("/tmp/run.sh", b"", mode=0o755)
    fs.write("/tmp/notes", b"")

    def shown(script: str, columns: int = 40) -> str:
        program = interpret(["sh", "-c", script], T0, fs, b"", None, Terminal(rows=24, columns=columns))
        return "".join(x if isinstance(x, str) else x.decode() for _, x in program.output)

    def row(*names: str) -> str:  # directories, bold blue, in columns 6 wide ("home" and two)
        return "".join(f"\x1b[1;34m{n}\x1b[m" + " " * (6 - len(n)) for n in names).rstrip() + "\n"
    # 11 names in 39 columns: 6 columns, 2 rows, filled down
    assert shown("ls /") == row("bin", "dev", "home", "root", "tmp", "var") + row("data", "etc", "proc", "sys", "usr")
    assert shown("ls /tmp", columns=0) == "\x1b[0;0mnotes\x1b[m   \x1b[1;32mrun.sh\x1b[m\n"  # unsized: 80 wide
    assert shown("ls -1 /tmp") == "\x1b[0;0mnotes\x1b[m\n\x1b[1;32mrun.sh\x1b[m\n"
    assert shown("ls /tmp | cat; echo $(ls /tmp); ls /tmp > /tmp/list; cat /tmp/list") == \
        "notes\nrun.sh\nnotes run.sh\nlist\nnotes\nrun.sh\n"  # the shell makes the file before ls runs


def test_a_host_path_of_a_file_is_mounted_as_that_file(tmp_path):
    """A hostPath volume whose path is a file (the kubelet links the volume to it) is that file at
    its mount point: read and written there, on a draft only once its changes are made, and
    refused where the mount is read-only."""
    (tmp_path / "node").mkdir()
    (tmp_path / "node" / "app.sock").write_text("one\n")
    os.symlink(tmp_path / "node" / "app.sock", tmp_path / "sock")
    pod = {"metadata": {"name": "w"}, "spec": {
        "volumes": [{"name": "sock", "hostPath": {"path": "/run/app.sock", "type": "File"}}],
        "containers": [{"name": "main", "volumeMounts": [{"name": "sock", "mountPath": "/app.sock"}]},
                       {"name": "ro", "volumeMounts": [{"name": "sock", "mountPath": "/app.sock", "readOnly": True}]}]}}
    files = PodFiles(pod, lambda name: str(tmp_path / name), _Clock())
    assert run(files.container("main"), "sh", "-c", "cat /app.sock; echo two >> /app.sock") == (0, b"one\n", "")
    assert (tmp_path / "node" / "app.sock").read_text() == "one\ntwo\n"
    program = interpret(["sh", "-c", "cat /app.sock; echo three > /app.sock"], T0, files.draft("main"))
    assert program.output == ((0, b"one\ntwo\n"),) and (tmp_path / "node" / "app.sock").read_text() == "one\ntwo\n"
    files.container("main").replay(program.changes)
    assert (tmp_path / "node" / "app.sock").read_text() == "three\n"
    assert run(files.container("ro"), "sh", "-c", "echo x > /app.sock") == (
        1, b"", "sh: can't create /app.sock: Read-only file system\n")


def test_a_block_claims_device_is_at_its_device_path(tmp_path):
    """A Block claim's volume links to its device file (the kubelet's map): the container reads
    and writes it at its volumeDevices' devicePath, through to the node."""
    (tmp_path / "disk").mkdir()
    (tmp_path / "disk" / "block").write_bytes(b"")
    os.symlink(tmp_path / "disk" / "block", tmp_path / "raw")
    pod = {"metadata": {"name": "db"}, "spec": {
        "volumes": [{"name": "raw", "persistentVolumeClaim": {"claimName": "raw"}}],
        "containers": [{"name": "main", "volumeDevices": [{"name": "raw", "devicePath": "/dev/xvda"}]}]}}
    main = PodFiles(pod, lambda name: str(tmp_path / name), _Clock()).container("main")
    assert run(main, "sh", "-c", "echo sector > /dev/xvda; cat /dev/xvda") == (0, b"sector\n", "")
    assert (tmp_path / "disk" / "block").read_bytes() == b"sector\n"


@pytest.mark.parametrize("script, out, code", [
    ("echo 'a b c' | awk '{print $2}'", b"b\n", 0),
    ("rev /etc/hostname; echo 'k=1 v' | awk -F= '{print $2, $1}'", None, None),  # rev: not simulated
    ("cut -c1 /etc/hostname", b"w\n", 0),  # web-0
    ("echo 'k=1 v' | awk -F= '{print $2, $1}'", b"1 v k\n", 0),
    ("echo 'one two' | awk '{print $NF $1}'", b"twoone\n", 0),
    ("echo hello | tr a-z A-Z; echo hello | tr -d l", b"HELLO\nheo\n", 0),
    ("seq 1 5 | grep -v 3 | head -n 3", b"1\n2\n4\n", 0),
    ("seq 1 3 | grep 7; echo $?", b"1\n", 0),
    ("echo 'a.b' > /data/f; grep -c 'a\\.b' /data/f /nope", b"1\n", 2),
    ("seq 1 5 | sed -n '2p'; echo abc | sed 's/b/[&]/g'; seq 1 3 | sed '/2/d'", b"2\na[b]c\n1\n3\n", 0),
    ("seq 1 4 | sed -n '/[13]/p' | wc -l", b"2\n", 0),
])
def test_the_filters_of_scripts(pod_files, script, out, code):
    program = interpret(["sh", "-c", script], T0, pod_files.draft("main"))
    if out is None:
        assert program is None
        return
    assert b"".join(x if isinstance(x, bytes) else x.encode() for _, x in program.output) == out
    assert program.exit_code == code


def test_which_filters_read_stdin():
    assert wants_stdin(["grep", "x"]) and wants_stdin(["sh", "-c", "awk '{print $1}' | tr a b"])
    assert not wants_stdin(["grep", "x", "/f"]) and not wants_stdin(["sed", "-n", "1p", "/etc/hostname"])


@pytest.mark.parametrize("script, out, err", [
    ("ls /nope 2>&1", b"ls: /nope: No such file or directory\n", ""),
    ("ls /nope 2>/dev/null; echo $?", b"1\n", ""),
    ("echo oops >&2; echo fine 1>&2 2>/dev/null", b"", "oops\nfine\n"),
    ("ls /nope /data > /tmp/o 2>&1; cat /tmp/o", b"ls: /nope: No such file or directory\n/data:\n", ""),
    ("ls /nope 2>&1 >/dev/null", b"ls: /nope: No such file or directory\n", ""),  # in order: 2 is where 1 was
    ("for i in 1 2; do echo $i; done > /tmp/l; { cat /tmp/l; ls /x; } 2>>/tmp/l; cat /tmp/l",
     b"1\n2\n1\n2\nls: /x: No such file or directory\n", ""),
])
def test_descriptors_are_redirected_in_order(pod_files, script, out, err):
    assert run(pod_files.container("main"), "sh", "-c", script)[1:] == (out, err)


@pytest.mark.parametrize("script, out", [
    ("echo -e 'a\\tb\\nc'; echo -n x; echo -E '\\n'", b"a\tb\nc\nx\\n\n"),
    ("printf '%s=%03d\\n' a 1 b 2; printf '%-4s|%.2f|%x|100%%\\n' ab 3.14159 255", b"a=001\nb=002\nab  |3.14|ff|100%\n"),
    ("basename /ckpt/step-10.pt .pt; dirname /ckpt/step-10.pt; dirname step", b"step-10\n/ckpt\n.\n"),
    ("echo step 1 | tee /tmp/log; echo step 2 | tee -a /tmp/log > /dev/null; cat /tmp/log",
     b"step 1\nstep 1\nstep 2\n"),
])
def test_printing_commands(pod_files, script, out):
    assert run(pod_files.container("main"), "sh", "-c", script) == (0, out, "")


def test_cp_and_mv(pod_files):
    fs = pod_files.container("main")
    assert run(fs, "sh", "-c", "mkdir -p /tmp/src/sub; echo a > /tmp/src/a; echo b > /tmp/src/sub/b; "
                               "cp /tmp/src/a /data/; cp -r /tmp/src /data/copy; cat /data/a /data/copy/sub/b") == (
        0, b"a\nb\n", "")
    assert run(fs, "sh", "-c", "mv /data/a /data/moved; ls /data; cat /data/moved") == (0, b"copy\nmoved\na\n", "")
    assert run(fs, "cp", "/tmp/src", "/data/x") == (1, b"", "cp: omitting directory '/tmp/src'\n")
    assert run(fs, "cp", "/nope", "/data/") == (1, b"", "cp: can't stat '/nope': No such file or directory\n")
    assert run(fs, "sh", "-c", "cp /tmp/src/a /tmp/src/sub/b /data/moved") == (
        1, b"", "cp: '/data/moved' is not a directory\n")


def test_find_walks_each_directory_after_itself_and_words_its_errors_as_busybox(pod_files):
    """busybox find: each directory, then its entries in the order the files list them (dot files
    too); -name, -type, -maxdepth/-mindepth, -size in bytes, -newer, `!`, -o and parentheses; -exec
    once a file (`;`) or once for all (`+`); a ConfigMap's file is a link, not followed; a PATH not
    there is said and the others searched (1); a bad expression ends it (1)."""
    fs = pod_files.container("main")
    setup = "mkdir -p /data/a/b; echo hi > /data/a/x.txt; echo hello > /data/a/b/y.txt; touch /data/.seen; "
    assert run(fs, "sh", "-c", setup + "find /data") == (
        0, b"/data\n/data/.seen\n/data/a\n/data/a/b\n/data/a/b/y.txt\n/data/a/x.txt\n", "")
    assert run(fs, "find", "/data/", "-type", "d", "-maxdepth", "1") == (0, b"/data/\n/data/a\n", "")
    assert run(fs, "sh", "-c", "cd /data/a; find . -mindepth 1 -depth -print") == (
        0, b"./b/y.txt\n./b\n./x.txt\n", "")
    assert run(fs, "sh", "-c", "find /data -name '*.txt' -exec cat {} \\;; find /data -name '*.txt' -exec echo {} +") \
        == (0, b"hello\nhi\n/data/a/b/y.txt /data/a/x.txt\n", "")
    assert run(fs, "sh", "-c", "find /data -type f -size -3c; find /data -size +5c -type f") == (
        0, b"/data/.seen\n/data/a/b/y.txt\n", "")
    assert run(fs, "sh", "-c", "find /data ! -name '*.txt' \\( -type f -o -name b \\)") == (
        0, b"/data/.seen\n/data/a/b\n", "")
    assert run(fs, "sh", "-c", "touch /data/old; sleep 2; touch /data/a/new; find /data/a -newer /data/old") == (
        0, b"/data/a\n/data/a/new\n", "")
    # the kubelet's AtomicWriter layout: links through `..data` to its timestamped directory, followed with -L only
    assert run(fs, "find", "/etc/app", "-type", "l") == (0, b"/etc/app/..data\n/etc/app/mode\n", "")
    assert run(fs, "find", "/etc/app", "-type", "f") == (0, b"/etc/app/..2026_01/mode\n", "")
    assert run(fs, "find", "-L", "/etc/app", "-type", "f") == (
        0, b"/etc/app/..2026_01/mode\n/etc/app/..data/mode\n/etc/app/mode\n", "")
    assert run(fs, "find", "-H", "/etc/app/..data", "/etc/app/mode") == (
        0, b"/etc/app/..data\n/etc/app/..data/mode\n/etc/app/mode\n", "")
    assert run(fs, "find", "/nope", "/data/a/b") == (
        1, b"/data/a/b\n/data/a/b/y.txt\n", "find: /nope: No such file or directory\n")
    assert run(fs, "sh", "-c", "find /data -type d -name b -exec rm -r {} \\;") == (
        1, b"", "find: /data/a/b: No such file or directory\n")
    for args, error in ((["-type", "x"], "invalid argument 'x' to '-type'"), (["-name"], "-name requires an argument"),
                        (["-exec", "echo"], "-exec requires an argument"), (["-size", "1x"], "invalid number '1x'"),
                        (["-newer", "/nope"], "can't stat '/nope': No such file or directory"),
                        (["(", "-type", "f"], "unpaired '('"),
                        (["-exec", "echo", "{}", "{}", "+"], "only one '{}' allowed for -exec +")):
        assert run(fs, "find", "/data", *args) == (1, b"", f"find: {error}\n")


def test_dd_and_fallocate_fill_a_volume_with_zeros_that_cost_no_memory(pod_files):
    """What a container writes to fill its disk: dd from /dev/zero (records on stderr, as busybox
    prints them) and fallocate; 4Gi of zeros is a calloc'd buffer, not 4Gi of this process's memory."""
    main = pod_files.container("main")
    assert run(main, "dd", "if=/dev/zero", "of=/data/blob", "bs=1M", "count=3") == (
        0, b"", "3+0 records in\n3+0 records out\n3145728 bytes (3.0MB) copied, 0.000000 seconds, 0B/s\n")
    assert run(main, "sh", "-c", "dd if=/dev/zero of=/tmp/z bs=1000 count=3 status=none; wc -c /tmp/z") == (
        0, b"3000 /tmp/z\n", "")
    assert run(main, "sh", "-c", "echo hello > /tmp/in; dd if=/tmp/in bs=4 status=noxfer") == (
        0, b"hello\n", "1+1 records in\n1+1 records out\n")
    assert run(main, "fallocate", "-l", "4G", "/data/big") == (0, b"", "")
    assert len(pod_files.volumes["scratch"].entries["big"].data) == 4 << 30
    assert run(main, "fallocate", "-o", "1K", "-l", "1", "/data/blob") == (0, b"", "")
    assert run(main, "wc", "-c", "/data/blob")[1] == b"3145728 /data/blob\n"  # already longer: kept
    assert run(main, "dd", "if=/dev/zero", "of=/etc/app/x", "count=1")[2] == \
        "dd: can't open '/etc/app/x': Read-only file system\n"
    assert run(main, "fallocate", "-l", "1M", "/nope/f") == (
        1, b"", "fallocate: can't open '/nope/f': No such file or directory\n")
    assert interpret(["dd", "if=/dev/zero", "of=/data/f"], T0, main) is None  # until the disk is full


def test_a_memory_emptydirs_size_counts_what_every_container_sharing_it_wrote(tmp_path):
    """A tmpfs of 4 pages shared by two containers: `main` fills 3 with a loop of writes (its
    count of the pages kept from write to write, not walked again), `side` takes the last, and
    `main`'s next write gets ENOSPC; once `side` removes its file, `main` writes again."""
    pod = {"metadata": {"name": "ram"}, "spec": {
        "volumes": [{"name": "cache", "emptyDir": {"medium": "Memory"}}],
        "containers": [{"name": n, "volumeMounts": [{"name": "cache", "mountPath": "/cache"}]} for n in ("main", "side")]}}
    files = PodFiles(pod, lambda name: str(tmp_path / name), _Clock(), tmpfs_size=lambda vol: 4 * 4096)
    main, side = files.container("main"), files.container("side")
    assert run(main, "sh", "-c", "for f in a b c; do echo $f > /cache/$f; done") == (0, b"", "")
    assert run(side, "sh", "-c", "echo d > /cache/d") == (0, b"", "")
    assert run(main, "sh", "-c", "echo e > /cache/e") == (1, b"", "sh: write error: No space left on device\n")
    assert run(side, "rm", "/cache/d")[0] == 0
    assert run(main, "sh", "-c", "echo e > /cache/e; cat /cache/a /cache/e") == (0, b"a\ne\n", "")


def test_what_a_user_makes_in_an_fsgroup_empty_dir_is_its_own_and_the_groups(tmp_path):
    """With the pod's fsGroup an emptyDir is that group's and setgid (a Memory one sticky too, 3777),
    so what runAsUser makes there is the user's and the group's; elsewhere its own group's."""
    pod = {"metadata": {"name": "p"}, "spec": {
        "securityContext": {"runAsUser": 1000, "runAsGroup": 3000, "fsGroup": 2000},
        "volumes": [{"name": "d", "emptyDir": {}}, {"name": "m", "emptyDir": {"medium": "Memory"}}],
        "containers": [{"name": "main", "image": "busybox", "volumeMounts": [
            {"name": "d", "mountPath": "/d"}, {"name": "m", "mountPath": "/m"}]}]}}
    fs = PodFiles(pod, lambda name: str(tmp_path / name), _Clock()).container("main")
    script = "mkdir /d/sub; touch /d/sub/f /m/f /tmp/f; stat -c '%n %a %u %g' /d /d/sub /d/sub/f /m /m/f /tmp/f"
    assert run(fs, "sh", "-c", script) == (0, b"/d 2777 0 2000\n/d/sub 2755 1000 2000\n/d/sub/f 644 1000 2000\n"
                                              b"/m 3777 0 2000\n/m/f 644 1000 2000\n/tmp/f 644 1000 3000\n", "")
    assert run(fs, "ls", "-ln", "/d")[1].startswith(b"total 4\ndrwxr-sr-x    2 1000     2000          4096 ")


def test_chroot_into_the_nodes_root_runs_a_command_there(tmp_path):
    """`kubectl debug node/N -- chroot /host cat /etc/os-release`: the debugging pod mounts the
    node's / at /host (hostPath); chroot runs the command with its root there (relative paths from
    that root), what it writes lands on the node, on a draft only once its changes are made (at
    the paths the container sees); a NEWROOT that is not a directory is busybox chroot's error.
    `chroot /host` alone at an interactive shell starts a shell there, until its `exit`."""
    node = tmp_path / "rootfs"
    (node / "etc").mkdir(parents=True)
    (node / "tmp").mkdir()
    (node / "etc" / "os-release").write_text('PRETTY_NAME="node"\n')
    os.symlink(node, tmp_path / "host")
    pod = {"metadata": {"name": "node-debugger"}, "spec": {
        "volumes": [{"name": "host", "hostPath": {"path": "/"}}],
        "containers": [{"name": "debugger", "volumeMounts": [{"name": "host", "mountPath": "/host"}]}]}}
    files = PodFiles(pod, lambda name: str(tmp_path / name), _Clock())
    assert run(files.container("debugger"), "chroot", "/host", "cat", "/etc/os-release") == (
        0, b'PRETTY_NAME="node"\n', "")
    assert run(files.container("debugger"), "sh", "-c", "chroot /host/etc cat os-release; chroot /host sh -c "
               "'ls /; echo hi > /tmp/note'; cat /host/tmp/note") == (0, b'PRETTY_NAME="node"\netc\ntmp\nhi\n', "")
    assert (node / "tmp" / "note").read_text() == "hi\n"
    program = interpret(["chroot", "/host", "sh", "-c", "echo later > /tmp/draft"], T0, files.draft("debugger"))
    assert program.exit_code == 0 and not (node / "tmp" / "draft").exists()
    files.container("debugger").replay(program.changes)
    assert (node / "tmp" / "draft").read_text() == "later\n"
    assert run(files.container("debugger"), "chroot", "/nowhere", "ls") == (
        1, b"", "chroot: can't change root directory to '/nowhere': No such file or directory\n")
    # typed at `kubectl debug -it node/N`'s shell: a shell in /host reads the next lines, its
    # `exit` goes back to the debugger's own
    shell = Shell(lambda: files.container("debugger"))
    assert shell.line("chroot /host", T0).output == () and shell.prompt() == "/ # "
    assert shell.line("cat /etc/os-release; ls", T0).output == (
        (0, "stdout", b'PRETTY_NAME="node"\n'), (0, "stdout", "etc\ntmp\n"))
    step = shell.line("exit 3", T0)
    assert not step.exited and shell.status == 3
    assert shell.line("ls /host/etc", T0).output == ((0, "stdout", "os-release\n"),)
    assert shell.line("exit", T0).exited


def test_a_write_through_a_link_out_of_a_volume_on_the_node_reaches_no_file_of_the_node(tmp_path):
    """A link a container makes in a claim on the node may name any path: read or written, one that
    leads out of the volume leads nowhere, the node's own file untouched; one within it is followed."""
    (tmp_path / "pv").mkdir()
    os.symlink(tmp_path / "pv", tmp_path / "ckpt")
    (node_file := tmp_path / "node.txt").write_text("the node's\n")
    pod = {"metadata": {"name": "w"}, "spec": {
        "volumes": [{"name": "ckpt", "persistentVolumeClaim": {"claimName": "c"}}],
        "containers": [{"name": "main", "volumeMounts": [{"name": "ckpt", "mountPath": "/ckpt"}]}]}}
    claim = PodFiles(pod, lambda name: str(tmp_path / name), _Clock()).container("main")
    code, _, err = run(claim, "sh", "-c", f"ln -s {node_file} /ckpt/out; echo mine > /ckpt/out")
    assert (code, err) == (1, "sh: can't create /ckpt/out: nonexistent directory\n")  # (ash's ENOENT)
    assert node_file.read_text() == "the node's\n"
    assert run(claim, "sh", "-c", "ln -s new /ckpt/in; echo mine > /ckpt/in; cat /ckpt/new") == (0, b"mine\n", "")
