import base64
import os

import pytest

from nanokube.apiserver.loopback import connector
from nanokube.node.cluster import default_cluster
from nanokube.node.manager import NodeManager
from nanokube.node.volumes import tmpfs
from nanokube.node.volumes.manager import VolumeManager
from tests.controllers import eventually, make_stack
from tests.node import ManualClock
from tests.node.test_lifecycle import gone, phase_is


@pytest.fixture
async def env(tmp_path):
    s = await make_stack()
    await s.client.resource("", "v1", "namespaces").create({"metadata": {"name": "kube-node-lease"}})
    clock = ManualClock()
    s.rest.clock = clock
    mgr = NodeManager(connector(s.rest), default_cluster(), clock, pods_dir=str(tmp_path))
    await mgr.start()
    yield s.client, clock, tmp_path
    await mgr.stop()
    await s.close()


def pod_with_volumes(name):
    return {"metadata": {"name": name, "namespace": "default"}, "spec": {
        "nodeName": "gpu-0", "containers": [{"name": "app", "image": "busybox"}],
        "volumes": [{"name": "conf", "configMap": {"name": "settings", "items": [{"key": "a", "path": "dir/a.txt"}]}},
                    {"name": "creds", "secret": {"secretName": "creds", "defaultMode": 0o400}},
                    {"name": "scratch", "emptyDir": {}}]}}


async def test_pod_waits_for_its_config_map_then_gets_the_files(env):
    client, clock, root = env
    pods = client.resource("", "v1", "pods")
    await client.resource("", "v1", "secrets").create({"metadata": {"name": "creds", "namespace": "default"},
                                                       "data": {"token": base64.b64encode(b"s3cret").decode()}})
    p = await pods.create(pod_with_volumes("web"))
    uid = p["metadata"]["uid"]
    events = client.resource("", "v1", "events")

    async def failed_mount():
        items, _ = await events.list(namespace="default")
        return [e for e in items if e["reason"] == "FailedMount"]
    ev = await eventually(failed_mount)
    assert ev[0]["message"] == 'MountVolume.SetUp failed for volume "conf" : configmap "settings" not found'
    assert ev[0]["type"] == "Warning" and ev[0]["involvedObject"]["name"] == "web"
    assert (await pods.get("web", "default"))["status"]["phase"] == "Pending"

    await client.resource("", "v1", "configmaps").create({"metadata": {"name": "settings", "namespace": "default"},
                                                          "data": {"a": "alpha", "b": "beta"}})
    await clock.advance(2)
    await eventually(phase_is(pods, "web", "Running"))
    vol = root / "gpu-0" / uid / "volumes"
    assert (vol / "conf" / "dir" / "a.txt").read_text() == "alpha"
    assert not (vol / "conf" / "b").exists(), "items select only the listed keys"
    assert (vol / "creds" / "token").read_bytes() == b"s3cret"
    assert oct(os.stat(vol / "creds" / "token").st_mode & 0o777) == oct(0o400)
    assert (vol / "scratch").is_dir()

    await pods.delete("web", "default", grace_period_seconds=0)
    await eventually(gone(pods, "web"))

    async def removed():
        return not (root / "gpu-0" / uid).exists()
    assert await eventually(removed)


async def test_a_mount_refused_again_and_again_is_one_event_with_a_count(env):
    """Each failed try is reported, as the kubelet's volume manager does; the recorder folds the
    repeats into one FailedMount Event whose count grows (`kubectl describe pod`: "(x3 over 3s)")."""
    client, clock, _ = env
    await client.resource("", "v1", "pods").create({"metadata": {"name": "wait", "namespace": "default"}, "spec": {
        "nodeName": "gpu-0", "containers": [{"name": "app", "image": "busybox"}],
        "volumes": [{"name": "conf", "configMap": {"name": "absent"}}]}})
    events = client.resource("", "v1", "events")

    async def failed_mount(count):
        items, _ = await events.list(namespace="default")
        got = [e for e in items if e["reason"] == "FailedMount"]
        return got if got and got[0]["count"] >= count else None
    await eventually(lambda: failed_mount(1))
    await clock.advance(1)
    await eventually(lambda: failed_mount(2))
    await clock.advance(2)
    [ev] = await eventually(lambda: failed_mount(3))
    assert ev["count"] == 3
    assert ev["message"] == 'MountVolume.SetUp failed for volume "conf" : configmap "absent" not found'


async def test_an_items_own_mode_wins_over_the_volumes_default_mode(env):
    """Found by fuzz54: every file of a configMap, secret, downwardAPI or projected volume took the
    volume's defaultMode, its item's own `mode` ignored; upstream's KeyToPath and
    DownwardAPIVolumeFile modes win (a script item of 0755 in a 0644 volume is executable)."""
    client, _, root = env
    await client.resource("", "v1", "configmaps").create({"metadata": {"name": "scripts", "namespace": "default"},
                                                          "data": {"run.sh": "echo hi", "conf": "x"}})
    p = await client.resource("", "v1", "pods").create({"metadata": {"name": "moded", "namespace": "default"}, "spec": {
        "nodeName": "gpu-0", "containers": [{"name": "app", "image": "busybox"}],
        "volumes": [{"name": "cm", "configMap": {"name": "scripts", "defaultMode": 0o644, "items": [
                        {"key": "run.sh", "path": "run.sh", "mode": 0o755}, {"key": "conf", "path": "conf"}]}},
                    {"name": "down", "downwardAPI": {"defaultMode": 0o644, "items": [
                        {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}, "mode": 0o400}]}},
                    {"name": "proj", "projected": {"defaultMode": 0o644, "sources": [{"configMap": {
                        "name": "scripts", "items": [{"key": "run.sh", "path": "bin/run.sh", "mode": 0o700}]}}]}}]}})
    vol = root / "gpu-0" / p["metadata"]["uid"] / "volumes"

    async def written():
        return (vol / "proj" / "bin" / "run.sh").exists() and (vol / "down" / "name").exists()
    await eventually(written)
    modes = {f: oct(os.stat(vol / f).st_mode & 0o777) for f in
             ("cm/run.sh", "cm/conf", "down/name", "proj/bin/run.sh")}
    assert modes == {"cm/run.sh": oct(0o755), "cm/conf": oct(0o644), "down/name": oct(0o400),
                     "proj/bin/run.sh": oct(0o700)}


async def test_a_volumes_directory_has_the_mode_of_the_empty_dir_its_plugin_wraps(env):
    """Each kubelet plugin sets its volume up in an emptyDir it wraps: a ConfigMap's on disk (0777,
    as setupDir makes it), a Secret's, projected and downwardAPI volume's in memory (a tmpfs root,
    1777), so any container user may list them; the timestamped data directory is 0755."""
    client, _, root = env
    await client.resource("", "v1", "configmaps").create({"metadata": {"name": "settings", "namespace": "default"},
                                                          "data": {"a": "alpha"}})
    await client.resource("", "v1", "secrets").create({"metadata": {"name": "creds", "namespace": "default"},
                                                       "data": {"token": base64.b64encode(b"s3cret").decode()}})
    p = await client.resource("", "v1", "pods").create({"metadata": {"name": "modes", "namespace": "default"}, "spec": {
        "nodeName": "gpu-0", "containers": [{"name": "app", "image": "busybox"}],
        "volumes": [{"name": "cm", "configMap": {"name": "settings"}},
                    {"name": "sec", "secret": {"secretName": "creds"}},
                    {"name": "down", "downwardAPI": {"items": [{"path": "name", "fieldRef": {"fieldPath": "metadata.name"}}]}},
                    {"name": "proj", "projected": {"sources": [{"configMap": {"name": "settings"}}]}},
                    {"name": "scratch", "emptyDir": {}}]}})
    vol = root / "gpu-0" / p["metadata"]["uid"] / "volumes"

    async def written():
        return all((vol / f).exists() for f in ("cm/a", "sec/token", "down/name", "proj/a"))
    await eventually(written)
    modes = {d: oct(os.stat(vol / d).st_mode & 0o7777) for d in ("cm", "sec", "down", "proj", "scratch")}
    assert modes == {"cm": oct(0o777), "sec": oct(0o1777), "down": oct(0o1777), "proj": oct(0o1777),
                     "scratch": oct(0o777)}
    assert oct(os.stat(vol / "cm" / "..data").st_mode & 0o7777) == oct(0o755)


async def test_a_volumes_timestamped_directory_is_named_for_the_node_agents_clock(env):
    """The AtomicWriter names the directory `..data` points at for the time it writes it: the kubelet's
    clock, so under `nanokube simulate` a container's `ls -a` shows the simulated time."""
    client, clock, root = env
    clock.t = 1_900_000_000.5  # 2030-03-17 17:46:40 UTC, which no machine running the test reads
    await client.resource("", "v1", "configmaps").create({"metadata": {"name": "settings", "namespace": "default"},
                                                          "data": {"a": "alpha"}})
    p = await client.resource("", "v1", "pods").create({"metadata": {"name": "stamped", "namespace": "default"},
                                                        "spec": {"nodeName": "gpu-0", "containers": [
                                                            {"name": "app", "image": "busybox"}],
                                                            "volumes": [{"name": "cm", "configMap": {"name": "settings"}}]}})
    data = root / "gpu-0" / p["metadata"]["uid"] / "volumes" / "cm" / "..data"

    async def written():
        return os.path.islink(data)
    await eventually(written)
    assert os.readlink(data).startswith("..2030_03_17_17_46_40.")


async def test_a_tmpfs_that_cannot_be_mounted_is_tried_and_warned_of_once(tmp_path, monkeypatch, caplog):
    """Where the runtime may not mount (not root) a Secret's memory-backed volume stays a directory on
    disk: its files are written at each setup, but the mount is tried, and warned of, only once."""
    tries = []

    class Refusing:
        def mount(self, *args):
            tries.append(args[1])
            return -1

    monkeypatch.setattr(tmpfs, "_libc", Refusing())
    s = await make_stack()
    mgr = VolumeManager(s.client, "gpu-0", str(tmp_path / "pods"), ManualClock())
    mgr.host_paths = True  # the process runtime's
    try:
        await s.client.resource("", "v1", "secrets").create({"metadata": {"name": "creds", "namespace": "default"},
                                                             "data": {"token": base64.b64encode(b"s3cret").decode()}})
        p = await s.client.resource("", "v1", "pods").create({"metadata": {"name": "web", "namespace": "default"},
                                                              "spec": {"nodeName": "gpu-0", "containers": [
                                                                  {"name": "app", "image": "busybox"}],
                                                                  "volumes": [{"name": "creds", "secret": {
                                                                      "secretName": "creds"}}]}})
        for _ in range(3):  # each resync sets the volume up again
            dirs = await mgr.mount(p)
        assert open(os.path.join(dirs["creds"], "token"), "rb").read() == b"s3cret"
        assert tries == [dirs["creds"].encode()]
        assert len([r for r in caplog.records if "left on disk" in r.getMessage()]) == 1
    finally:
        mgr.unmount(p["metadata"]["uid"])
        await mgr.close()
        await s.close()
