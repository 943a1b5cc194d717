"""ImageLocality: nodes already holding a pod's images score higher, by the
images' sizes scaled by how many nodes hold them (upstream's
pkg/scheduler/framework/plugins/imagelocality)."""

from types import SimpleNamespace

import pytest

from nanokube import configz
from nanokube.client.leaderelection import LeaderElectionConfig
from nanokube.scheduler.cache import Cache, Snapshot
from nanokube.scheduler.framework import CycleState
from nanokube.scheduler.plugins.image_locality import ImageLocality, calculate_priority, normalized_image_name
from tests.controllers import eventually
from tests.scheduler import info, node, pod
from tests.scheduler.test_scheduler import add_node, bound, strip_uid

MB = 1024 * 1024


def imaged(name: str, *images: tuple[list[str], int]) -> dict:
    n = node(name)
    n["status"]["images"] = [{"names": names, "sizeBytes": size} for names, size in images]
    return n


def with_images(p: dict, *images: str, init: tuple[str, ...] = ()) -> dict:
    p["spec"]["containers"] = [{"name": f"c{i}", "image": im} for i, im in enumerate(images)]
    if init:
        p["spec"]["initContainers"] = [{"name": f"i{i}", "image": im} for i, im in enumerate(init)]
    return p


def snapshot(*nodes: dict) -> Snapshot:
    cache, snap = Cache(), Snapshot()
    for n in nodes:
        cache.add_node(n)
    cache.update_snapshot(snap)
    return snap


def scores(snap: Snapshot, p: dict, handle=None) -> list[int]:
    state = CycleState()
    state.snapshot = snap
    return ImageLocality({}, handle).score_nodes(state, info(p), snap.nodes)


@pytest.mark.parametrize("name,want", [
    ("nginx", "nginx:latest"),
    ("nginx:1.27", "nginx:1.27"),
    ("docker.io/library/nginx", "docker.io/library/nginx:latest"),
    ("localhost:5000/app", "localhost:5000/app:latest"),  # a registry's port is no tag
    ("localhost:5000/app:v2", "localhost:5000/app:v2"),
    ("repo/app@sha256:abc", "repo/app@sha256:abc"),
])
def test_normalized_image_name_adds_latest_only_without_a_tag(name, want):
    assert normalized_image_name(name) == want


@pytest.mark.parametrize("total,containers,want", [
    (0, 1, 0),
    (23 * MB, 1, 0),  # the minimum threshold scores nothing
    (1000 * MB, 1, 100),
    (5000 * MB, 1, 100),  # clamped at the maximum
    (125 * MB, 2, 5),  # 100 * (125 - 23) // (2000 - 23): the maximum grows with the containers
    (1000 * MB, 2, 49),
])
def test_calculate_priority_clamps_and_scales(total, containers, want):
    assert calculate_priority(total, containers) == want


def test_score_scales_each_image_by_its_spread_and_counts_init_containers():
    snap = snapshot(imaged("n0", (["gcr.io/big:latest", "gcr.io/big:v1"], 1200 * MB), (["gcr.io/small:latest"], 40 * MB)),
                    imaged("n1", (["gcr.io/small:latest"], 40 * MB), (["gcr.io/init:latest"], 800 * MB)),
                    node("n2"))
    # big: held by one node of three, 1200 MB * 1/3 = 400 MB; small: 40 MB * 2/3 = 26 MB
    p = with_images(pod("a"), "gcr.io/big", "gcr.io/small:latest")
    assert scores(snap, p) == [100 * (400 * MB + int(40 * MB * 2 / 3) - 23 * MB) // (2000 * MB - 23 * MB),
                               100 * (int(40 * MB * 2 / 3) - 23 * MB) // (2000 * MB - 23 * MB), 0] == [20, 0, 0]
    # another name of the same image counts; an init container's image counts, and so does the container
    p = with_images(pod("b"), "gcr.io/big:v1", init=("gcr.io/init",))
    assert scores(snap, p) == [100 * (400 * MB - 23 * MB) // (2000 * MB - 23 * MB),
                               100 * (int(800 * MB / 3) - 23 * MB) // (2000 * MB - 23 * MB), 0] == [19, 12, 0]


def test_an_image_every_node_holds_ranks_no_node_above_another():
    snap = snapshot(imaged("n0", (["app:1"], 900 * MB)), imaged("n1", (["app:1"], 900 * MB)))
    assert scores(snap, with_images(pod("a"), "app:1")) == [89, 89]
    assert scores(snap, with_images(pod("a"), "other:1")) == [0, 0]


def test_snapshot_counts_nodes_per_image_as_nodes_change():
    cache, snap = Cache(), Snapshot()
    cache.add_node(imaged("n0", (["app:1", "app@sha256:1"], MB)))
    cache.add_node(imaged("n1", (["app:1"], MB), (["db:1"], MB)))
    cache.update_snapshot(snap)
    assert snap.image_nodes == {"app:1": 2, "app@sha256:1": 1, "db:1": 1}
    cache.add_pod(info(pod("p")), "n1")  # a pod changes no node's images
    cache.update_snapshot(snap)
    assert snap.image_nodes == {"app:1": 2, "app@sha256:1": 1, "db:1": 1}
    held = cache.infos["n1"].images
    cache.update_node(imaged("n1", (["app:1"], MB), (["db:1"], MB)))  # a status post listing the same
    assert cache.infos["n1"].images is held
    cache.update_node(imaged("n1", (["db:1"], MB)))
    cache.remove_node("n0")
    cache.update_snapshot(snap)
    assert snap.image_nodes == {"db:1": 1}
    p = with_images(pod("q"), "db:1")
    assert scores(snap, p) == [0]  # 1 MB is below the minimum threshold


def test_a_view_of_some_nodes_spreads_over_the_schedulers_snapshot():
    """A workload placement searches a view of some nodes; the spread is still over every node."""
    snap = snapshot(imaged("n0", (["app:1"], 900 * MB)), node("n1"), node("n2"))
    view = Snapshot()
    view.nodes = snap.nodes[:2]
    p = with_images(pod("a"), "app:1")
    assert scores(view, p, handle=SimpleNamespace(snapshot=snap)) == [100 * (300 * MB - 23 * MB) // (977 * MB), 0] == [28, 0]
    assert scores(view, p) == [43, 0]  # without a scheduler the view is all there is: 900 MB / 2


def test_default_profile_enables_it_with_weight_1_in_configz():
    multi = configz.scheduler(None, LeaderElectionConfig(resource_name="kube-scheduler"), "/k")["componentconfig"]["Profiles"][0]["Plugins"]["MultiPoint"]
    assert {"Name": "ImageLocality", "Weight": 1} in multi["Enabled"]


async def test_pods_land_on_the_node_holding_their_image(stack):
    """Two nodes alike but for n-cached listing the pods' image: every pod lands there, though
    without ImageLocality the second goes to the emptier node (LeastAllocated)."""
    client, sched = stack
    await add_node(client, node("n-empty"))
    await add_node(client, imaged("n-cached", (["registry.example/app@sha256:0a1b", "registry.example/app:1.0"], 900 * MB)))
    await sched.start()
    pods = client.resource("", "v1", "pods")
    for name in ("a", "b", "c"):
        await pods.create(strip_uid(with_images(pod(name, "100m", "200Mi"), "registry.example/app:1.0")))
        assert await eventually(bound(pods, name)) == "n-cached"
