"""The openb importers: nodes as pools with GPU models, tasks as pods with
ResourceClaimTemplates (whole GPUs by count, shares as consumable capacity,
allowed models as CEL)."""

from nanokube.node.dra.driver import gpu_entries
from nanokube.sim.openb import MODEL_LABEL, load_nodes, load_pods
from nanokube.sim.trace import inflate

NODES = """sn,cpu_milli,memory_mib,gpu,model
openb-node-0000,32000,262144,0,
openb-node-0001,96000,786432,8,V100M32
openb-node-0002,96000,786432,8,V100M32
openb-node-0003,64000,262144,2,T4
"""
PODS = """name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
openb-pod-0000,12000,16384,1,1000,,LS,Running,0,100,0
openb-pod-0001,6000,12288,1,460,T4|P100,LS,Running,10,50,10
openb-pod-0002,8000,8192,4,1000,,BE,Running,20,20,20
openb-pod-0003,4000,4096,0,0,,BE,Running,30,90,30
"""


def test_nodes_become_pools_with_shared_gpus_of_their_model(tmp_path):
    (tmp_path / "n.csv").write_text(NODES)
    cluster = load_nodes(str(tmp_path / "n.csv"))
    nodes = {n.name: n for n in cluster.nodes()}
    assert sorted(nodes) == ["cpu-32c-256g-0", "t4-2g-64c-256g-0", "v100m32-8g-96c-768g-0", "v100m32-8g-96c-768g-1"]
    v100 = nodes["v100m32-8g-96c-768g-1"]
    assert v100.capacity == {"cpu": "96", "memory": "786432Mi", "pods": "256"} and v100.labels == {MODEL_LABEL: "V100M32"}
    devices, _ = gpu_entries([d for d in v100.devices if d.kind == "gpu"])
    assert len(devices) == 8 and devices[0]["allowMultipleAllocations"] is True
    assert devices[0]["capacity"] == {"memory": {"value": "32Gi"}, "milli": {"value": "1000"}}
    assert devices[0]["attributes"]["model"] == {"string": "V100M32"}
    assert nodes["cpu-32c-256g-0"].devices == []


def test_pods_claim_whole_gpus_by_count_and_shares_by_capacity(tmp_path):
    (tmp_path / "p.csv").write_text(PODS)
    trace = load_pods(str(tmp_path / "p.csv"))
    templates = {e.obj["metadata"]["name"]: e.obj for e in trace.events if e.obj["kind"] == "ResourceClaimTemplate"}
    assert trace.events[0].obj["kind"] == "ResourceClaimTemplate"
    whole = templates["gpu-1x1000"]["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    assert whole == {"deviceClassName": "gpu.nanokube.io", "count": 1}
    [share_name] = [n for n in templates if n.startswith("gpu-1x460")]
    share = templates[share_name]["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    assert share["capacity"]["requests"]["milli"] == "460"
    assert share["selectors"] == [{"cel": {"expression": "device.attributes['gpu.nanokube.io'].model in ['T4', 'P100']"}}]
    verbs = [(e.time, e.verb, e.obj["metadata"]["name"]) for e in trace.events if e.obj["kind"] == "Pod"]
    # a task deleted when created (openb-pod-7285 of the default trace) lived no time: created, then deleted
    assert verbs == [(0, "create", "openb-pod-0000"), (10, "create", "openb-pod-0001"), (20, "create", "openb-pod-0002"),
                     (20, "delete", "openb-pod-0002"), (30, "create", "openb-pod-0003"), (50, "delete", "openb-pod-0001"),
                     (90, "delete", "openb-pod-0003"), (100, "delete", "openb-pod-0000")]
    assert trace.gpu_milli == {"default/openb-pod-0000": 1000, "default/openb-pod-0001": 460, "default/openb-pod-0002": 4000}
    assert dict(trace.task_sizes) == {(1, 1000, 12000): 1 / 3, (1, 460, 6000): 1 / 3, (4, 1000, 8000): 1 / 3}


def test_inflation_samples_never_ending_pods_until_the_gpus_asked_reach_the_factor(tmp_path):
    (tmp_path / "p.csv").write_text(PODS)
    trace = load_pods(str(tmp_path / "p.csv"))
    a, b = inflate(trace, 10_000, 1.3, seed=7), inflate(trace, 10_000, 1.3, seed=7)
    assert [e.obj["metadata"]["name"] for e in a.events] == [e.obj["metadata"]["name"] for e in b.events]
    assert all(e.verb == "create" for e in a.events)
    asked = sum(a.gpu_milli.values())
    assert asked >= 13_000 and asked - max(a.gpu_milli.values()) < 13_000


async def test_inflation_placements_do_not_depend_on_the_arrival_gap(tmp_path):
    """A minute between arrivals spans the scheduler's 5-minute requeue of the
    pods that did not fit (they are tried again, and still do not fit);
    10 ms does not: the placements and the allocation curve are the same."""
    from nanokube.sim.driver import run

    (tmp_path / "n.csv").write_text(NODES)
    (tmp_path / "p.csv").write_text(PODS)
    cluster, trace = load_nodes(str(tmp_path / "n.csv")), load_pods(str(tmp_path / "p.csv"))
    runs = []
    for gap in (60.0, 0.01):
        inflated = inflate(trace, 18_000, 1.3, seed=3, interval=gap)
        runs.append(await run(f"gap {gap}", cluster, inflated, None, seed=3, controllers="resourceclaim", progress=False))
    slow, fast = runs
    assert slow.virtual_s > 600 and slow.metrics["unscheduled"] > 0, "some pods waited through the 5-minute requeue"
    assert slow.placements == fast.placements
    assert slow.metrics["by_arrival"] == fast.metrics["by_arrival"]
