"""FGD's fragmentation measure and within-node placement (the paper's Fig. 7 cases)."""

import random
from types import SimpleNamespace

from nanokube.scheduler.dra.allocator import AllocatedDevices, Placement
from nanokube.scheduler.dra.pools import PoolIndex
from nanokube.scheduler.framework import CycleState
from nanokube.scheduler.plugins.gpu_baselines import GPUBestFit, GPUDotProduct, GPUPacking, RandomScore
from nanokube.scheduler.plugins.gpu_fragmentation import (DRA_CYCLE, FragmentationModel, FreeGPUs,
                                                          GPUFragmentationGradient, node_fragmentation, place, scaled,
                                                          task_fragment)
from tests.scheduler import info, node, node_info, pod
from tests.scheduler.dra.test_allocator import rslice, shared_gpu


def test_a_share_smaller_than_the_task_is_fragment_but_a_node_that_cannot_host_it_is_all_fragment():
    free = [1000, 300, 0]
    assert task_fragment(free, 1, 500) == 300  # fits on GPU 0; GPU 1's 300 is unusable for a 500 share
    assert task_fragment(free, 1, 200) == 0
    assert task_fragment(free, 2, 1000) == 1300  # two whole GPUs do not fit: everything free is fragment
    assert task_fragment(free, 1, 1000) == 300
    workload = [((1, 500, 0), 0.5), ((2, 1000, 0), 0.5)]
    assert node_fragmentation(free, workload) == 0.5 * 300 + 0.5 * 1300
    assert task_fragment(free, 1, 200, cpu=4000, cpu_free=2000) == 1300, "no CPU for the task: all of it is fragment"
    assert node_fragmentation(free, [((1, 500, 8000), 1.0)], cpu_free=4000) == 1300


def test_place_puts_a_share_on_the_fullest_gpu_it_fits_and_whole_gpus_on_free_ones():
    assert place([1000, 600, 300], 1, 500) == [1000, 100, 300]
    assert place([1000, 600, 1000], 2, 1000) == [0, 600, 0]
    assert place([600, 300], 1, 1000) is None


def test_fgd_prefers_the_node_whose_fragmentation_grows_least():
    """A 500 share: on a node with a half-used GPU it fills that GPU (no new
    fragment); on an idle node it would leave a 500 share that a whole-GPU
    task cannot use."""
    workload = [((1, 1000, 0), 0.5), ((1, 500, 0), 0.5)]
    half_used, idle = [500, 1000], [1000, 1000]
    grow = [node_fragmentation(place(f, 1, 500), workload) - node_fragmentation(f, workload) for f in (half_used, idle)]
    assert grow[0] < grow[1]
    assert scaled(grow, best_low=True) == [100, 0]


def test_the_grouped_model_computes_the_same_fragmentation():
    rng = random.Random(4)
    workload = [((c, 1000 if c > 1 else rng.choice([250, 500, 1000]), rng.randrange(0, 32000, 1000)), rng.random())
                for c in (1, 1, 1, 2, 4, 8) for _ in range(5)]
    model = FragmentationModel(workload)
    for _ in range(200):
        free = [rng.choice([0, 100, 300, 500, 1000]) for _ in range(rng.choice([1, 2, 4, 8]))]
        cpu_free = rng.randrange(0, 40000, 500)
        assert abs(model.node(free, cpu_free) - node_fragmentation(free, workload, cpu_free)) < 1e-6


def test_free_cpu_amounts_that_starve_the_same_tasks_share_one_remembered_value():
    workload = [((1, 500, 4000), 0.25), ((1, 500, 8000), 0.25), ((2, 1000, 8000), 0.25), ((1, 1000, 16000), 0.25)]
    model = FragmentationModel(workload)
    free = [1000, 500, 1000]
    for cpu_free in (-1000, 0, 3999, 4000, 4500, 7999.5, 8000, 12000, 15999, 16000, 64000, float("inf")):
        assert model.node(free, cpu_free) == node_fragmentation(free, workload, cpu_free)
    assert len(model._cache) == 4, "one value per band: below 4000, 4000-7999, 8000-15999, 16000 and more"


class _DRA:
    """What FreeGPUs reads of DynamicResources' shared state."""

    def __init__(self, slices):
        self.allocated, self.free_gpus, self._index = AllocatedDevices(), None, PoolIndex(slices, [])

    def index(self):
        return self._index


def test_free_gpu_shares_follow_allocations_of_the_nodes_pool():
    driver = "gpu.nanokube.io"
    dra = _DRA([rslice(driver, [shared_gpu(f"gpu-{i}") for i in range(2)], pool=f"p{n}", node=f"n{n}") for n in (1, 2)])
    n1, n2 = ({"metadata": {"name": f"n{n}"}} for n in (1, 2))

    def free(node):
        return FreeGPUs.of(dra).node(node, node["metadata"]["name"])

    assert free(n1).values == [1000, 1000]
    took = {"devices": {"results": [{"driver": driver, "pool": "p1", "device": "gpu-1", "shareID": "x",
                                     "consumedCapacity": {"milli": "300"}}]}}
    before_n2 = free(n2)
    dra.allocated.add(took)
    assert free(n1).values == [1000, 700]
    assert free(n2) is before_n2  # its pool did not change: kept
    dra.allocated.add({"devices": {"results": [{"driver": driver, "pool": "p2", "device": "gpu-0"}]}})
    assert free(n2).values == [0, 1000]
    dra.allocated.remove(took)
    assert free(n1).values == [1000, 1000]
    dra._index = PoolIndex([rslice(driver, [shared_gpu("gpu-0")], pool="p1", node="n1")], [])
    assert free(n1).values == [1000]  # new pools: every node afresh


def test_gpu_policies_keep_a_nodes_score_until_its_gpus_or_cpu_change():
    driver = "gpu.nanokube.io"
    dra = _DRA([rslice(driver, [shared_gpu(f"gpu-{i}") for i in range(2)], pool=f"p{n}", node=f"n{n}") for n in (1, 2, 3)])
    claims = {"half": {"spec": {"devices": {"requests": [{"name": "g", "exactly": {
        "deviceClassName": "gpu.nanokube.io", "capacity": {"requests": {"milli": "500"}}}}]}}},
              "whole": {"spec": {"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "gpu.nanokube.io"}}]}}}}
    dra.claim = lambda ns, name: claims[name]
    handle = SimpleNamespace(shared={"DynamicResources": dra})
    nodes = [node_info(node(f"n{n}", cpu=str(8 * n))) for n in (1, 2, 3)]
    pods = [info(pod(name, cpu="2", resourceClaims=[{"name": "gpu", "resourceClaimName": name}]))
            for name in ("half", "whole")]
    # the devices DynamicResources' Filter found for the half-GPU pod: the second GPU of each node
    found = {n.name: Placement(n.node, None, None, [(dra.index().for_node(n.node)[0][1][1], {f"{driver}/milli": 500})])
             for n in nodes}

    def state(p):
        st = CycleState()
        st[DRA_CYCLE] = SimpleNamespace(found=found if p is pods[0] else {})
        return st

    fgd_args = {"workload": [{"count": 1, "milli": 500, "cpu": 2000, "weight": 1}, {"count": 1, "milli": 1000, "weight": 1}]}
    for cls in (GPUFragmentationGradient, GPUBestFit, GPUDotProduct, GPUPacking, RandomScore):
        args = fgd_args if cls is GPUFragmentationGradient else {}
        kept, calls = cls(args, handle), []
        score_gpu = kept.score_gpu
        kept.score_gpu = lambda free, demand, n, after, f=score_gpu: calls.append(n.name) or f(free, demand, n, after)

        def scores(p, kept=kept, cls=cls, args=args):
            calls.clear()
            out = kept.score_nodes(state(p), p, nodes)
            if cls is not RandomScore:
                assert out == cls(args, handle).score_nodes(state(p), p, nodes), "as computed from scratch"
            return calls[:]

        assert scores(pods[0]) == scores(pods[1]) == ["n1", "n2", "n3"]
        kept_calls = [] if cls is not RandomScore else ["n1", "n2", "n3"]
        assert scores(pods[0]) == scores(pods[1]) == kept_calls
        nodes[1].add_pod(info(pod(f"cpu-{cls.name}", cpu="1")))
        changed = ["n2"] if cls is not RandomScore else ["n1", "n2", "n3"]
        assert scores(pods[0]) == scores(pods[1]) == changed, "the node's CPU changed"
        took = {"devices": {"results": [{"driver": driver, "pool": "p3", "device": "gpu-0", "shareID": cls.name,
                                         "consumedCapacity": {"milli": "300"}}]}}
        dra.allocated.add(took)
        assert scores(pods[1]) == (["n3"] if cls is not RandomScore else ["n1", "n2", "n3"]), "its GPUs changed"
        dra.allocated.remove(took)
        found["n1"] = Placement(nodes[0].node, None, None, found["n1"].counted)  # equal, but Filter's answer of another cycle
        assert scores(pods[0]) == (["n1", "n3"] if cls is not RandomScore else ["n1", "n2", "n3"])
