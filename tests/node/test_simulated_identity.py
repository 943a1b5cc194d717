"""`id`, `whoami` and `uname` in simulated containers, as `kubectl exec` and a shell run them: the
first commands people type in a new pod, answered `sh: id: not found` before."""

import asyncio

from nanokube.machinery.streaming import LogOptions
from nanokube.node.simulated_io import SimulatedIO
from tests.node.test_simulated_io import session, settle, typed, worker


async def exec_(io: SimulatedIO, command: str) -> tuple[int, bytes]:
    out = []
    code = await io.exec("main", ["sh", "-c", command], session(out))
    return code, b"".join(out)


async def test_the_security_context_docs_pod_runs_as_its_user_group_and_fs_group():
    """The docs' security-context-demo (runAsUser 1000, runAsGroup 3000, fsGroup 2000, supplementalGroups
    [4000]): `id` shows them, the groups sorted as the kernel keeps them; no account names uid 1000."""
    w = worker()
    w.pod["spec"]["securityContext"] = {"runAsUser": 1000, "runAsGroup": 3000, "fsGroup": 2000,
                                        "supplementalGroups": [4000]}
    io = SimulatedIO(w)
    io.started({"main": "busybox:1.28"})
    assert await exec_(io, "id") == (0, b"uid=1000 gid=3000 groups=2000,3000,4000\n")
    assert await exec_(io, "id -u; id -G") == (0, b"1000\n2000 3000 4000\n")
    assert await exec_(io, "whoami") == (1, b"whoami: unknown uid 1000\n")
    assert await exec_(io, "id -un") == (1, b"id: unknown ID 1000\n1000\n")
    io.stop()


async def test_a_containers_own_security_context_wins_and_root_is_named():
    w = worker(securityContext={"runAsUser": 0})
    w.pod["spec"]["securityContext"] = {"runAsUser": 1000}
    io = SimulatedIO(w)
    io.started({"main": "busybox"})
    assert await exec_(io, "id; whoami; id -gn") == (0, b"uid=0(root) gid=0(root) groups=0(root)\nroot\nroot\n")
    io.stop()


async def test_names_come_from_the_containers_own_images_accounts():
    """`id`, `whoami` and `ps` name users and groups as the image's /etc/passwd and /etc/group do:
    distroless's nonroot (65532, its debug images' busybox), nobody's group nogroup in busybox but
    nobody in Alpine; an image without the account shows the number."""
    for image, want in (
            ("gcr.io/distroless/static:debug-nonroot", b"uid=65532(nonroot) gid=65532(nonroot) groups=65532(nonroot)\nnonroot\n"),
            ("busybox:1.36", b"uid=65532 gid=65534(nogroup) groups=65534(nogroup)\n"),
            ("alpine:3.20", b"uid=65532 gid=65534(nobody) groups=65534(nobody)\n")):
        gid = 65532 if "distroless" in image else 65534
        io = SimulatedIO(worker(image=image, securityContext={"runAsUser": 65532, "runAsGroup": gid}))
        io.started({"main": image})
        out = (await exec_(io, "id; whoami"))[1]
        assert out.startswith(want), (image, out)
        io.stop()
    io = SimulatedIO(worker(image="gcr.io/distroless/base:debug", securityContext={"runAsUser": 65532}))
    io.started({"main": "gcr.io/distroless/base:debug"})
    assert (await exec_(io, "ps"))[1].splitlines()[1:] == [b"    1 nonroot   0:00 base", b"    7 nonroot   0:00 ps"]
    io.stop()


async def test_uname_answers_for_the_simulated_nodes_kernel_and_the_pods_hostname():
    io = SimulatedIO(worker())
    io.started({"main": "busybox"})
    assert await exec_(io, "uname") == (0, b"Linux\n")
    code, out = await exec_(io, "uname -a")
    assert code == 0 and out.startswith(b"Linux p 6.8.0-nanokube #1 SMP") and out.endswith(b" x86_64 GNU/Linux\n")
    assert await exec_(io, "uname -rm") == (0, b"6.8.0-nanokube x86_64\n")
    io.stop()


async def test_an_interactive_shell_runs_them_instead_of_not_finding_them():
    """`kubectl run -i --rm tmp --image=busybox -- sh` typed `id` and `uname -s`."""
    w = worker(stdin=True, stdinOnce=True, command=["sh"])
    io = SimulatedIO(w)
    io.started({"main": "busybox"})
    attached = await typed(io, b"id\nuname -s\nexit\n")
    log = io.serve_log("main", LogOptions())
    assert b"uid=0(root) gid=0(root) groups=0(root)\nLinux\n" in log and b"not found" not in log
    attached.cancel()


async def test_ps_lists_the_containers_pid_namespace_then_itself():
    """Its own main process alone; with shareProcessNamespace the pause and each running container
    (a sidecar's user its own); an ephemeral container with a target sees the target's."""
    w = worker(image="nginx:1.27")
    w.pod["spec"]["initContainers"] = [{"name": "side", "image": "busybox", "restartPolicy": "Always",
                                        "command": ["sleep", "3600"], "securityContext": {"runAsUser": 101}}]
    w.pod["spec"]["ephemeralContainers"] = [{"name": "dbg", "image": "busybox", "targetContainerName": "main"}]
    w.pod["status"] = {"containerStatuses": [{"name": "main", "state": {"running": {}}}],
                       "initContainerStatuses": [{"name": "side", "state": {"running": {}}}]}
    io = SimulatedIO(w)
    io.started({"main": "nginx:1.27"})
    assert await exec_(io, "ps") == (0, b"PID   USER     TIME  COMMAND\n"
                                        b"    1 root      0:00 nginx\n"
                                        b"    7 root      0:00 ps\n")
    io.start_ephemeral("dbg", "busybox")
    out = []
    assert await io.exec("dbg", ["ps", "aux"], session(out)) == 0
    assert b"".join(out).splitlines()[1:] == [b"    1 root      0:00 nginx", b"    7 root      0:00 sh",
                                              b"   13 root      0:00 ps aux"]
    w.pod["spec"]["shareProcessNamespace"] = True
    code, out = await exec_(io, "ps -ef")
    assert code == 0 and out.splitlines()[1:] == [b"    1 root      0:00 /pause", b"    7 101       0:00 sleep 3600",
                                                  b"   13 root      0:00 nginx", b"   19 root      0:00 ps -ef"]
    io.stop()


async def test_a_shell_on_a_terminal_prompts_with_dollar_for_a_user_other_than_root():
    """`kubectl run -it --rm nonroot --image=busybox --overrides=<runAsUser: 1000>`: ash's `\\w \\$ `."""
    w = worker(stdin=True, tty=True, securityContext={"runAsUser": 1000})
    io = SimulatedIO(w)
    io.started({"main": "busybox"})
    out = []
    s = session(out, stdin=True, tty=True)
    attached = asyncio.ensure_future(io.attach("main", s))
    s.stdin_data.put_nowait(b"id -u\r")
    await settle()
    assert out == [b"id -u\r\n", b"1000\r\n", b"/ $ "]
    s.stdin_data.put_nowait(b"\x04")
    await settle()
    io.exited(0)
    assert await asyncio.wait_for(attached, 5) == 0


async def test_home_is_the_users_home_in_its_images_passwd_unless_the_container_sets_it():
    """runc sets HOME from the image's /etc/passwd: root's /root in every image, nobody's /home in
    busybox's, / in Alpine's, /nonexistent in Debian's (python, pytorch...), "/" for a uid the
    image lacks; the container's own HOME wins, and its command's $(HOME) sees the same."""
    for image, want in (("busybox:1.36", b"/home\n"), ("python:3.12-alpine", b"/\n"), ("python:3.12", b"/nonexistent\n"),
                        ("gcr.io/distroless/base:debug", b"/nonexistent\n")):
        w = worker(image=image, securityContext={"runAsUser": 65534})
        w.pod["spec"]["securityContext"] = {"runAsUser": 1000}
        io = SimulatedIO(w)
        io.started({"main": image})
        assert io.environment("main")["HOME"] == want.decode().strip(), image
        assert await exec_(io, "echo $HOME") == (0, want), image
        io.stop()
    for image in ("busybox", "pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime"):
        io = SimulatedIO(worker(image=image))
        io.started({"main": image})
        assert await exec_(io, "echo $HOME") == (0, b"/root\n"), image
        io.stop()
    w = worker(image="busybox")
    w.pod["spec"]["securityContext"] = {"runAsUser": 1000}
    io = SimulatedIO(w)
    io.started({"main": "busybox"})
    assert await exec_(io, "echo $HOME") == (0, b"/\n")
    io.stop()
    w = worker(image="busybox", securityContext={"runAsUser": 1000}, env=[{"name": "HOME", "value": "/data"}])
    io = SimulatedIO(w)
    io.started({"main": "busybox"})
    assert await exec_(io, "echo $HOME; id -u") == (0, b"/data\n1000\n")
    io.stop()


async def test_set_hostname_as_fqdn_names_the_container_by_its_fqdn():
    """setHostnameAsFQDN: the kubelet gives the sandbox the pod's FQDN as its hostname, so `hostname`
    and $HOSTNAME are the FQDN (as under the process runtime), `hostname -s` its first label;
    without it, or without a subdomain to make an FQDN of, the short name."""
    w = worker()
    w.pod["spec"] |= {"hostname": "db-5", "subdomain": "db", "setHostnameAsFQDN": True}
    io = SimulatedIO(w)
    io.started({"main": "busybox"})
    fqdn = b"db-5.db.ns.svc.cluster.local"
    assert await exec_(io, "hostname; hostname -s; hostname -f; echo $HOSTNAME; cat /etc/hostname") == (
        0, b"\n".join([fqdn, b"db-5", fqdn, fqdn, fqdn, b""]))
    io.stop()
    for spec in ({"hostname": "db-5", "subdomain": "db"}, {"hostname": "db-5", "setHostnameAsFQDN": True}):
        w = worker()
        w.pod["spec"] |= spec
        io = SimulatedIO(w)
        io.started({"main": "busybox"})
        assert await exec_(io, "hostname; echo $HOSTNAME") == (0, b"db-5\ndb-5\n")
        io.stop()
