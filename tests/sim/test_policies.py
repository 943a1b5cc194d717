"""The GPU policies through the whole stack: configurations load like any
KubeSchedulerConfiguration, and FGD puts a second half-GPU task on the GPU
the first one half-used, where LeastAllocated spreads it to the idle node."""

from __future__ import annotations

import glob

from nanokube.node.cluster import parse_cluster
from nanokube.scheduler.config import load
from nanokube.sim.driver import run
from nanokube.sim.openb import _template
from nanokube.sim.trace import Trace, TraceEvent

CLUSTER = parse_cluster("""\
pools:
  - name: gpu
    count: 2
    capacity: {cpu: "32", memory: 128Gi}
    gpus: {count: 2, model: T4, memory: 16Gi, architecture: Turing, driverVersion: "535.1", cudaVersion: "12.2",
           computeCapability: "7.5", sharing: true}
""")


def test_example_configurations_load():
    names = {}
    for path in sorted(glob.glob("examples/simulate/*.yaml")):
        [prof] = load(path).profiles
        names[path.rsplit("/", 1)[1]] = prof
    assert "GPUFragmentationGradient" in names["fgd.yaml"].points["score"]
    assert names["fgd.yaml"].points["score"] == ["GPUFragmentationGradient"]
    assert names["most-allocated.yaml"].args["NodeResourcesFit"]["scoringStrategy"]["type"] == "MostAllocated"


def _claim_pod(name: str, template: str) -> dict:
    """A one-CPU pod whose container uses a claim from the ResourceClaimTemplate `template`."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
                     "containers": [{"name": "c", "image": "x", "resources": {
                         "requests": {"cpu": "1"}, "claims": [{"name": "gpu"}]}}]}}


def _trace() -> Trace:
    events = [TraceEvent(0, 0, "create", _template("half", 1, 500, ""))]
    for i in range(2):
        events.append(TraceEvent(1 + i, 1 + i, "create", _claim_pod(f"half-{i}", "half")))
    return Trace(events, [((1, 1000, 1000), 0.5), ((1, 500, 1000), 0.5)], {"default/half-0": 500, "default/half-1": 500})


async def test_fgd_fills_the_half_used_gpu_least_allocated_spreads():
    fgd_cfg = load("examples/simulate/fgd.yaml")
    from nanokube.cli_simulate import _fill_workload

    trace = _trace()
    _fill_workload(fgd_cfg, trace)
    assert fgd_cfg.profiles[0].args["GPUFragmentationGradient"]["workload"][1] == {"count": 1, "milli": 500, "cpu": 1000,
                                                                                  "weight": 0.5}
    fgd = await run("fgd", CLUSTER, trace, fgd_cfg, seed=1, until=10, progress=False)
    spread = await run("least", CLUSTER, _trace(), load("examples/simulate/least-allocated.yaml"), seed=1, until=10,
                       progress=False)
    assert fgd.metrics["scheduled"] == spread.metrics["scheduled"] == 2
    assert fgd.placements["default/half-0"] == fgd.placements["default/half-1"]
    assert spread.placements["default/half-0"] != spread.placements["default/half-1"]
    # both shares on one GPU: nothing left that a whole-GPU task cannot use
    assert fgd.metrics["series"]["fragmentation_ratio"][-1] == 0


def test_fgd_workload_args_are_validated(tmp_path):
    import pytest

    from nanokube.scheduler.config import ConfigError

    bad = tmp_path / "bad.yaml"
    bad.write_text("""\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - pluginConfig:
      - name: GPUFragmentationGradient
        args: {workload: [{count: 2, milli: 500, weight: 1}]}
""")
    with pytest.raises(ConfigError, match=r"workload\[0\]\.milli: Invalid value: 500"):
        load(str(bad))


async def test_fgd_on_whole_gpus_that_are_not_shared():
    """Devices without allowMultipleAllocations: Filter only counts free GPUs
    (no device search to read), so FGD places by the paper's choice of GPU."""
    cluster = parse_cluster("""\
pools:
  - name: gpu
    count: 2
    capacity: {cpu: "32", memory: 128Gi}
    gpus: {count: 4, model: T4, memory: 16Gi, architecture: Turing, driverVersion: "535.1", cudaVersion: "12.2",
           computeCapability: "7.5"}
""")
    events = [TraceEvent(0, 0, "create", _template("two", 2, 1000, ""))]
    for i in range(3):
        events.append(TraceEvent(1 + i, 1 + i, "create", _claim_pod(f"two-{i}", "two")))
    trace = Trace(events, [((2, 1000, 1000), 1.0)], {f"default/two-{i}": 2000 for i in range(3)})
    cfg = load("examples/simulate/fgd.yaml")
    from nanokube.cli_simulate import _fill_workload

    _fill_workload(cfg, trace)
    result = await run("fgd", cluster, trace, cfg, seed=1, until=10, progress=False)
    assert result.metrics["scheduled"] == 3
    assert result.placements["default/two-0"] == result.placements["default/two-1"], "packed onto one node"
