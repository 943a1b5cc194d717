"""The kubelet's container lifecycle Events from the simulated runtime: Pulling/Pulled by
imagePullPolicy and the images the node holds, Created, Started, Killing, on each container's
fieldPath, in the order a real kubelet records them."""

from nanokube.apiserver.loopback import connector
from nanokube.node.cluster import parse_cluster
from nanokube.node.lifecycle import image_size, pulled_message
from nanokube.node.manager import NodeManager
from tests.controllers import becomes, eventually, make_stack
from tests.node import ManualClock
from tests.node.test_lifecycle import cond, conds, env, gone, phase_is, pod  # noqa: F401 (env is a fixture)

PRESENT = 'Container image "{}" already present on machine and can be accessed by the pod'


async def pod_events(pods, name):
    """(type, reason, fieldPath, message, count) of the kubelet's Events on pod `name`, in the order
    each was first written (a counted repeat patches the first one's Event, whose name says when)."""
    items, _ = await pods.c.resource("", "v1", "events").list(namespace="default")
    mine = [e for e in items if e["involvedObject"]["name"] == name and e["source"]["component"] == "kubelet"]
    mine.sort(key=lambda e: int(e["metadata"]["name"].rsplit(".", 1)[1], 16))
    return [(e["type"], e["reason"], e["involvedObject"].get("fieldPath", ""), e["message"], e["count"])
            for e in mine]


def reasons_are(pods, name, n):
    async def check():
        ev = await pod_events(pods, name)
        return ev if len(ev) >= n else None
    return check


def test_the_pulled_message_prints_durations_and_size_as_go_does():
    assert pulled_message("nginx:1.27", 2.5) == (
        f'Successfully pulled image "nginx:1.27" in 2.5s (2.5s including waiting). '
        f"Image size: {image_size('nginx:1.27')} bytes.")
    assert " in 161ms (161ms " in pulled_message("x", 0.161)
    assert " in 1m2s (1m2s " in pulled_message("x", 62)
    assert image_size("nginx") == image_size("docker.io/library/nginx:latest") and image_size("nginx") > 2_000_000


async def test_a_starting_pod_pulls_its_image_once_then_creates_and_starts_each_container(env):  # noqa: F811
    pods, clock = env
    p = pod("web", annotations={"sim.nanokube.io/pull-seconds": "2.5"})
    p["spec"]["initContainers"] = [{"name": "setup", "image": "busybox:1.36"}]
    await pods.create(p)
    await eventually(reasons_are(pods, "web", 1))
    assert (await pods.get("web", "default"))["status"]["phase"] == "Pending"  # pulling: ContainerCreating
    await clock.advance(2.5)
    await eventually(phase_is(pods, "web", "Running"))
    ev = await eventually(reasons_are(pods, "web", 7))
    init, app = "spec.initContainers{setup}", "spec.containers{app}"
    assert ev == [
        ("Normal", "Pulling", init, 'Pulling image "busybox:1.36"', 1),
        ("Normal", "Pulled", init, pulled_message("busybox:1.36", 2.5), 1),
        ("Normal", "Created", init, "Container created", 1),
        ("Normal", "Started", init, "Container started", 1),
        ("Normal", "Pulled", app, PRESENT.format("busybox:1.36"), 1),
        ("Normal", "Created", app, "Container created", 1),
        ("Normal", "Started", app, "Container started", 1),
    ]
    # another pod on the node: IfNotPresent finds the image; Always (a :latest image) pulls again
    q = pod("other", containers=("a", "b"))
    q["spec"]["containers"][1]["image"] = "busybox"
    await pods.create(q)
    await eventually(phase_is(pods, "other", "Running"))
    ev = await eventually(reasons_are(pods, "other", 7))
    assert [(r, f, m) for _, r, f, m, _ in ev] == [
        ("Pulled", "spec.containers{a}", PRESENT.format("busybox:1.36")),
        ("Created", "spec.containers{a}", "Container created"),
        ("Started", "spec.containers{a}", "Container started"),
        ("Pulling", "spec.containers{b}", 'Pulling image "busybox"'),
        ("Pulled", "spec.containers{b}", pulled_message("busybox", 0)),
        ("Created", "spec.containers{b}", "Container created"),
        ("Started", "spec.containers{b}", "Container started"),
    ]


async def test_a_restarted_container_is_started_again_and_counted(env):  # noqa: F811
    pods, clock = env
    await pods.create(pod("loop", annotations={"sim.nanokube.io/run-seconds": "5", "sim.nanokube.io/exit-code": "1"}))
    await eventually(phase_is(pods, "loop", "Running"))
    await clock.advance(5)
    await clock.advance(10)  # the back-off

    async def counted():  # the recorder writes them from its queue, a repeat's count too
        return sorted((r, m, n) for _, r, _, m, n in await pod_events(pods, "loop"))
    uid = (await pods.get("loop", "default"))["metadata"]["uid"]
    # the same message counted on one Event (kubectl: "x2 over ..."); the pull only the first time
    assert await becomes(counted, sorted([
        ("Pulling", 'Pulling image "busybox:1.36"', 1), ("Pulled", pulled_message("busybox:1.36", 0), 1),
        ("Pulled", PRESENT.format("busybox:1.36"), 1), ("Created", "Container created", 2),
        ("Started", "Container started", 2),
        ("BackOff", f"Back-off restarting failed container app in pod loop_default({uid})", 1)]))


async def test_deleting_a_running_pod_kills_each_container(env):  # noqa: F811
    pods, clock = env
    p = pod("web", containers=("app", "log"), annotations={"sim.nanokube.io/stop-seconds": "1"}, grace=30)
    p["spec"]["initContainers"] = [{"name": "proxy", "image": "envoy:1", "restartPolicy": "Always"},
                                   {"name": "setup", "image": "busybox:1.36"}]
    await pods.create(p)
    await eventually(phase_is(pods, "web", "Running"))
    await pods.delete("web", "default")
    ev = await eventually(reasons_are(pods, "web", 17))  # 14 to start them
    # the app containers first, then the sidecars (in reverse order), the ended init container never
    assert [(r, f, m) for _, r, f, m, _ in ev if r == "Killing"] == [
        ("Killing", "spec.containers{app}", "Stopping container app"),
        ("Killing", "spec.containers{log}", "Stopping container log"),
        ("Killing", "spec.initContainers{proxy}", "Stopping container proxy"),
    ]
    await clock.advance(1)  # the app containers stopped; the sidecar's SIGTERM comes only now (KEP-753)
    assert (await pods.get("web", "default"))["metadata"]["name"] == "web"
    await clock.advance(1)
    assert await eventually(gone(pods, "web"))


async def test_a_pod_deleted_while_it_waits_out_its_back_off_kills_nothing(env):  # noqa: F811
    pods, clock = env
    await pods.create(pod("loop", annotations={"sim.nanokube.io/run-seconds": "5", "sim.nanokube.io/exit-code": "1"}))
    await eventually(phase_is(pods, "loop", "Running"))
    await clock.advance(5)  # the first exit restarts at once, the second backs off

    async def restarted():
        c = (await pods.get("loop", "default"))["status"]["containerStatuses"][0]
        return c["restartCount"] == 1 and "running" in c["state"]
    await eventually(restarted)
    await clock.advance(5)

    async def backing_off():
        return "BackOff" in [r for _, r, _, _, _ in await pod_events(pods, "loop")]
    await eventually(backing_off)
    await pods.delete("loop", "default")
    assert await eventually(gone(pods, "loop"))
    assert "Killing" not in [r for _, r, _, _, _ in await pod_events(pods, "loop")]


async def test_a_failing_pull_backs_off_until_the_image_can_be_pulled(env):  # noqa: F811
    pods, clock = env
    await pods.create(pod("bad", annotations={"sim.nanokube.io/pull-error": "not-found"}))
    ref = "docker.io/library/busybox:1.36"
    error = (f'rpc error: code = NotFound desc = failed to pull and unpack image "{ref}": failed to resolve reference '
             f'"{ref}": {ref}: not found')

    def waiting(reason):
        async def check():
            st = (await pods.get("bad", "default"))["status"]
            w = ((st.get("containerStatuses") or [{}])[0].get("state") or {}).get("waiting") or {}
            return (st, w) if w.get("reason") == reason else None
        return check
    st, w = await eventually(waiting("ErrImagePull"))
    assert st["phase"] == "Pending" and w["message"] == error
    never_created = st["containerStatuses"][0]  # no runtime status: the spec's image as given, no ID
    assert (never_created["image"], never_created["imageID"]) == ("busybox:1.36", "")
    assert "containerID" not in never_created
    path = "spec.containers{app}"

    async def reported():  # written from the recorder's queue
        return [e[:4] for e in await pod_events(pods, "bad")]
    await becomes(reported, [
        ("Normal", "Pulling", path, 'Pulling image "busybox:1.36"'),
        ("Warning", "Failed", path, f'Failed to pull image "busybox:1.36": {error}'),
        ("Warning", "Failed", path, "Error: ErrImagePull")])
    await clock.advance(1)  # the next sync: backing off
    _, w = await eventually(waiting("ImagePullBackOff"))
    assert w["message"] == f'Back-off pulling image "busybox:1.36": ErrImagePull: {error}'
    ev = await eventually(reasons_are(pods, "bad", 5))
    assert [e[:4] for e in ev[3:]] == [("Normal", "BackOff", path, 'Back-off pulling image "busybox:1.36"'),
                                       ("Warning", "Failed", path, "Error: ImagePullBackOff")]
    await clock.advance(8.5)
    assert (await pod_events(pods, "bad"))[0][4] == 1  # not pulled again yet
    await clock.advance(0.5)  # 10 s after the failure: tried again, and backing off 20 s

    async def pulled_twice():
        ev = await pod_events(pods, "bad")
        return ev if ev[0][4] == 2 and ev[2][4] == 2 else None
    await eventually(pulled_twice)
    await pods.patch("bad", {"metadata": {"annotations": {"sim.nanokube.io/pull-error": None}}},
                     "application/merge-patch+json", namespace="default")
    await clock.advance(19)
    assert (await pods.get("bad", "default"))["status"]["phase"] == "Pending"
    await clock.advance(1)
    running = (await eventually(phase_is(pods, "bad", "Running")))["status"]["containerStatuses"][0]
    assert running["image"] == ref and running["imageID"].startswith("docker.io/library/busybox@sha256:")

    async def pulled():  # written from the recorder's queue
        return [(r, n) for _, r, _, m, n in await pod_events(pods, "bad") if r in ("Pulling", "Pulled", "Started")]
    await becomes(pulled, [("Pulling", 3), ("Pulled", 1), ("Started", 1)])
    assert [m for _, r, _, m, _ in await pod_events(pods, "bad") if r == "Pulled"] == [pulled_message("busybox:1.36", 0)]


async def test_a_pull_secret_the_node_cannot_read_is_warned_of_and_the_pull_goes_on(env):  # noqa: F811
    """getPullSecretsForPod: of the pod's imagePullSecrets, those missing are named in a Warning
    FailedToRetrieveImagePullSecret on the pod (no fieldPath), told again as the failed pull is
    tried again; the pull is tried anyway, and once it works the pod runs."""
    pods, clock = env
    await pods.c.resource("", "v1", "secrets").create({"metadata": {"name": "present", "namespace": "default"},
                                                       "type": "kubernetes.io/dockerconfigjson",
                                                       "data": {".dockerconfigjson": "e30="}})
    p = pod("private", annotations={"sim.nanokube.io/pull-error": "unauthorized"})
    p["spec"]["imagePullSecrets"] = [{"name": "regcred"}, {"name": "present"}, {"name": "other"}]
    await pods.create(p)
    warning = ("Warning", "FailedToRetrieveImagePullSecret", "",
               "Unable to retrieve some image pull secrets (regcred, other); attempting to pull the image may not "
               "succeed.")

    async def told(times: int):
        ev = await pod_events(pods, "private")
        return ev if any(e[:4] == warning and e[4] == times for e in ev) else None
    ev = await eventually(lambda: told(1))
    assert ("Normal", "Pulling", "spec.containers{app}", 'Pulling image "busybox:1.36"') in [e[:4] for e in ev]
    await clock.advance(10)  # the pull's back-off: the next sync reads the secrets again
    await eventually(lambda: told(2))
    await pods.patch("private", {"metadata": {"annotations": {"sim.nanokube.io/pull-error": None}}},
                     "application/merge-patch+json", namespace="default")
    await clock.advance(20)
    await eventually(phase_is(pods, "private", "Running"))


async def test_a_missing_pull_secret_is_told_once_a_sync_not_once_an_image(env):  # noqa: F811
    """getPullSecretsForPod runs once at the top of SyncPod, before any image is ensured: the sync
    that pulls the image volume and starts the init container tells the missing secret once, the
    one that starts both app containers once more; the Warning's count is 2, not one per image (4)."""
    pods, clock = env
    p = pod("several", containers=("app", "side"))
    p["spec"]["imagePullSecrets"] = [{"name": "regcred"}]
    p["spec"]["initContainers"] = [{"name": "setup", "image": "busybox:1.36"}]
    p["spec"]["volumes"] = [{"name": "model", "image": {"reference": "quay.io/crio/artifact:v2"}}]
    await pods.create(p)
    await eventually(phase_is(pods, "several", "Running"))

    async def told():
        ev = await pod_events(pods, "several")
        started = [f for _, r, f, _, _ in ev if r == "Started"]
        return [(r, n) for _, r, _, _, n in ev if r == "FailedToRetrieveImagePullSecret"] if len(started) == 3 else None
    assert await eventually(told) == [("FailedToRetrieveImagePullSecret", 2)]


async def test_an_image_volume_that_fails_to_pull_holds_every_container_in_container_creating(env):  # noqa: F811
    """getImageVolumes (KEP-4639) as the sandbox is made: the image volume's pull is the image
    manager's, its events on the pod (no fieldPath, no container's "Error: ..."), and while it fails
    no container starts (ContainerCreating); tried again after its back-off, it runs once it works."""
    pods, clock = env
    p = pod("artifact", annotations={"sim.nanokube.io/pull-error": "not-found"})
    p["spec"]["volumes"] = [{"name": "model", "image": {"reference": "quay.io/crio/artifact:v2"}}]
    p["spec"]["containers"][0]["volumeMounts"] = [{"name": "model", "mountPath": "/model"}]
    await pods.create(p)
    ref = "quay.io/crio/artifact:v2"
    error = (f'rpc error: code = NotFound desc = failed to pull and unpack image "{ref}": failed to resolve reference '
             f'"{ref}": {ref}: not found')
    ev = await eventually(reasons_are(pods, "artifact", 2))
    assert [e[:4] for e in ev] == [("Normal", "Pulling", "", f'Pulling image "{ref}"'),
                                   ("Warning", "Failed", "", f'Failed to pull image "{ref}": {error}')]
    await clock.advance(1)  # the next sync: backing off
    ev = await eventually(reasons_are(pods, "artifact", 3))
    assert ev[2][:4] == ("Normal", "BackOff", "", f'Back-off pulling image "{ref}"')
    st = (await pods.get("artifact", "default"))["status"]
    assert st["phase"] == "Pending" and st["containerStatuses"][0]["state"] == {"waiting": {"reason": "ContainerCreating"}}
    await pods.patch("artifact", {"metadata": {"annotations": {"sim.nanokube.io/pull-error": None}}},
                     "application/merge-patch+json", namespace="default")
    await clock.advance(10)
    await eventually(phase_is(pods, "artifact", "Running"))
    assert not [e for e in await pod_events(pods, "artifact") if e[3].startswith("Error: ")]


async def test_an_ephemeral_container_records_its_start_on_its_field_path(env):  # noqa: F811
    pods, _ = env
    await pods.create(pod("web"))
    await eventually(phase_is(pods, "web", "Running"))
    await pods.patch("web", {"spec": {"ephemeralContainers": [{"name": "debugger", "image": "busybox:1.36",
                                                               "targetContainerName": "app"}]}},
                     "application/strategic-merge-patch+json", namespace="default", subresource="ephemeralcontainers")
    ev = await eventually(reasons_are(pods, "web", 7))
    path = "spec.ephemeralContainers{debugger}"
    assert [e[:4] for e in ev[4:]] == [("Normal", "Pulled", path, PRESENT.format("busybox:1.36")),
                                       ("Normal", "Created", path, "Container created"),
                                       ("Normal", "Started", path, "Container started")]


async def test_a_never_pull_image_the_node_lacks_fails_until_a_pull_brings_it(env):  # noqa: F811
    """The image manager's ErrImageNeverPull: a Never policy names an image no pod pulled to the
    node; the sync is tried again after the pod workers' back-off, and starts the pod once the
    image is there."""
    pods, clock = env
    p = pod("local")
    p["spec"]["containers"][0].update(image="registry.local/app:dev", imagePullPolicy="Never")
    await pods.create(p)
    message = 'Container image "registry.local/app:dev" is not present with pull policy of Never'

    async def never_pull():
        st = (await pods.get("local", "default"))["status"]
        w = ((st.get("containerStatuses") or [{}])[0].get("state") or {}).get("waiting") or {}
        return (st, w) if w.get("reason") == "ErrImageNeverPull" else None
    st, w = await eventually(never_pull)
    assert st["phase"] == "Pending" and w["message"] == message
    path = "spec.containers{app}"
    assert [e[:4] for e in await eventually(reasons_are(pods, "local", 2))] == [
        ("Warning", "ErrImageNeverPull", path, message), ("Warning", "Failed", path, "Error: ErrImageNeverPull")]
    await clock.advance(10)  # synced again: still missing, the same Events counted

    async def counted_twice():
        ev = await pod_events(pods, "local")
        return ev if [n for *_, n in ev] == [2, 2] else None
    await eventually(counted_twice)
    puller = pod("puller")
    puller["spec"]["containers"][0]["image"] = "registry.local/app:dev"
    await pods.create(puller)
    await eventually(phase_is(pods, "puller", "Running"))
    await clock.advance(10)
    await eventually(phase_is(pods, "local", "Running"))

    async def started():  # written from the recorder's queue
        return [e[1:4] for e in (await pod_events(pods, "local"))[2:]]
    await becomes(started, [("Pulled", path, PRESENT.format("registry.local/app:dev")),
                            ("Created", path, "Container created"), ("Started", path, "Container started")])


async def test_an_init_container_whose_pull_fails_reports_it_in_its_own_status(env):  # noqa: F811
    """A failed pull of an init container's image: its status waits in ErrImagePull, then
    ImagePullBackOff (kubectl: Init:ErrImagePull), the app containers wait PodInitializing, and
    the pod is Pending and not Initialized; once the pull succeeds it runs."""
    pods, clock = env
    p = pod("init", annotations={"sim.nanokube.io/pull-error": "unauthorized"})
    p["spec"]["initContainers"] = [{"name": "setup", "image": "busybox:1.36"}]
    await pods.create(p)

    def init_waiting(reason):
        async def check():
            st = (await pods.get("init", "default"))["status"]
            w = ((st.get("initContainerStatuses") or [{}])[0].get("state") or {}).get("waiting") or {}
            return st if w.get("reason") == reason else None
        return check
    st = await eventually(init_waiting("ErrImagePull"))
    assert st["phase"] == "Pending"
    assert st["initContainerStatuses"][0]["state"]["waiting"]["message"] == "unauthorized"
    assert [c["state"] for c in st["containerStatuses"]] == [{"waiting": {"reason": "PodInitializing"}}]
    initialized = cond({"status": st}, "Initialized")
    assert (initialized["status"], initialized["reason"]) == ("False", "ContainersNotInitialized")
    assert conds({"status": st})["Ready"] == "False"
    await clock.advance(1)
    st = await eventually(init_waiting("ImagePullBackOff"))
    assert st["initContainerStatuses"][0]["state"]["waiting"]["message"] == \
        'Back-off pulling image "busybox:1.36": ErrImagePull: unauthorized'
    await pods.patch("init", {"metadata": {"annotations": {"sim.nanokube.io/pull-error": None}}},
                     "application/merge-patch+json", namespace="default")
    await clock.advance(9)
    st = (await eventually(phase_is(pods, "init", "Running")))["status"]
    assert "terminated" in st["initContainerStatuses"][0]["state"] and conds({"status": st})["Initialized"] == "True"


async def test_a_pod_with_init_containers_starts_not_initialized(env):  # noqa: F811
    """Before its init containers ran (here: while the first one's image is pulled) every container
    waits PodInitializing and the pod is not Initialized (kubectl: Init:0/1)."""
    pods, clock = env
    p = pod("slow", annotations={"sim.nanokube.io/pull-seconds": "5"})
    p["spec"]["initContainers"] = [{"name": "setup", "image": "busybox:1.36"}]
    await pods.create(p)
    await eventually(reasons_are(pods, "slow", 1))  # Pulling
    st = (await pods.get("slow", "default"))["status"]
    assert [c["state"] for c in st["initContainerStatuses"] + st["containerStatuses"]] == [
        {"waiting": {"reason": "PodInitializing"}}] * 2
    assert conds({"status": st})["Initialized"] == "False"
    await clock.advance(5)
    await eventually(phase_is(pods, "slow", "Running"))


async def test_a_pools_preloaded_image_is_present_for_a_never_pull_policy():
    """A cluster file's `images:` are on the pool's nodes from the start, as a kind node's image
    carries preloaded ones: Never finds them, IfNotPresent does not pull them."""
    s = await make_stack()
    await s.client.resource("", "v1", "namespaces").create({"metadata": {"name": "kube-node-lease"}})
    cluster = parse_cluster("pools:\n  - name: dev\n    count: 1\n    capacity: {cpu: 8, memory: 16Gi}\n"
                            "    images: [registry.local/app:dev]\n")
    mgr = NodeManager(connector(s.rest), cluster, ManualClock())
    await mgr.start()
    try:
        pods = s.client.resource("", "v1", "pods")
        p = pod("local", node="dev-0", containers=("never", "ifnotpresent"))
        p["spec"]["containers"][0].update(image="registry.local/app:dev", imagePullPolicy="Never")
        p["spec"]["containers"][1]["image"] = "registry.local/app:dev"
        await pods.create(p)
        await eventually(phase_is(pods, "local", "Running"))
        ev = await eventually(reasons_are(pods, "local", 6))
        assert [(r, m) for _, r, _, m, _ in ev if r == "Pulled"] == [
            ("Pulled", PRESENT.format("registry.local/app:dev"))] * 2
    finally:
        await mgr.stop()
        await s.close()


async def test_while_an_app_image_is_pulled_after_the_init_containers_the_pod_is_initialized(env):  # noqa: F811
    """kubectl: Init:0/1 while the init container's image is pulled, then PodInitializing while the
    app container's is: the init container completed, the pod Initialized, the app container waiting."""
    pods, clock = env
    p = pod("two-pulls", annotations={"sim.nanokube.io/pull-seconds": "5"})
    p["spec"]["initContainers"] = [{"name": "setup", "image": "alpine:3.20"}]
    p["spec"]["containers"][0]["image"] = "nginx:1.27"
    await pods.create(p)
    await eventually(reasons_are(pods, "two-pulls", 1))
    await clock.advance(5)  # the init container's image pulled, it ran; the app's is pulled next

    async def initialized():
        st = (await pods.get("two-pulls", "default"))["status"]
        return st if conds({"status": st})["Initialized"] == "True" else None
    st = await eventually(initialized)
    assert st["phase"] == "Pending"
    assert st["initContainerStatuses"][0]["state"]["terminated"]["reason"] == "Completed"
    assert st["containerStatuses"][0]["state"] == {"waiting": {"reason": "PodInitializing"}}
    await clock.advance(5)
    await eventually(phase_is(pods, "two-pulls", "Running"))
