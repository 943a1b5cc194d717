"""The kubelet's DRA metrics on a node's /metrics (the endpoint nodes/proxy reaches), read as a
Prometheus scrape reads them: dra_operations_duration_seconds for each pod's PrepareResources
and UnprepareResources, dra_grpc_operations_duration_seconds for each call to a driver's
plugin (a real one over gRPC, or a built-in simulated driver's stand-in), and
dra_resource_claims_in_use while claims are prepared."""

from __future__ import annotations

import re
from types import SimpleNamespace

import grpc
from multidict import CIMultiDict

from tests.controllers import eventually
from tests.node.dra.test_plugin_registration import (DRIVER, NODE, _claimed_pod, _events, _true, env, registered,
                                                     ticking)
from tests.node.dra.test_prepare import phase, running_trainer

__all__ = ["env"]  # the fixture, shared with the plugin registration tests

GET = SimpleNamespace(method="GET", query={}, headers=CIMultiDict())
V1 = "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin"
_SAMPLE = re.compile(r"([a-z_]+)(?:\{(.*)\})? (\S+)")


async def scrape(mgr, node: str = NODE) -> dict[tuple[str, frozenset], float]:
    """The node's /metrics as (series name, labels) -> value."""
    resp = await mgr.kubelet_for(node).serve(GET, "/metrics")
    out = {}
    for line in resp.text.splitlines():
        if line.startswith("#"):
            continue
        name, labels, value = _SAMPLE.fullmatch(line).groups()
        pairs = frozenset(tuple(p.split("=", 1)) for p in re.findall(r'[a-z_]+="[^"]*"', labels or ""))
        out[(name, frozenset((k, v.strip('"')) for k, v in pairs))] = float(value)
    return out


def value(samples, name: str, **labels) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


async def test_an_external_drivers_calls_and_claims_in_use_are_counted(env):
    client, clock, mgr, driver = env
    before = await scrape(mgr)
    assert value(before, "dra_resource_claims_in_use", driver_name="<any>") == 0
    d = driver()
    await registered(clock, mgr, d)
    _, _, pods = await _claimed_pod(client, "trainer", "train")
    await eventually(phase(pods, "trainer", "Running", clock))

    running = await scrape(mgr)
    prepare = dict(driver_name=DRIVER, method_name=V1 + "/NodePrepareResources", grpc_status_code="OK")
    assert value(running, "dra_grpc_operations_duration_seconds_count", **prepare) == 1
    assert value(running, "dra_grpc_operations_duration_seconds_bucket", le="+Inf", **prepare) == 1
    assert value(running, "dra_operations_duration_seconds_count", operation_name="PrepareResources",
                 is_error="false") >= 1
    assert value(running, "dra_resource_claims_in_use", driver_name=DRIVER) == 1
    assert value(running, "dra_resource_claims_in_use", driver_name="<any>") == 1
    buckets = [dict(k[1])["le"] for k in running if k[0] == "dra_operations_duration_seconds_bucket"
               and ("operation_name", "PrepareResources") in k[1] and ("is_error", "false") in k[1]]
    assert buckets == ["0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10", "+Inf"]

    await pods.delete("trainer", "default", grace_period_seconds=0)
    await eventually(ticking(clock, lambda: _true(d.called("NodeUnprepareResources"))))

    async def released():
        s = await scrape(mgr)
        return s if value(s, "dra_operations_duration_seconds_count", operation_name="UnprepareResources",
                          is_error="false") == 1 else None
    gone = await eventually(released)
    assert value(gone, "dra_grpc_operations_duration_seconds_count", driver_name=DRIVER,
                 method_name=V1 + "/NodeUnprepareResources", grpc_status_code="OK") == 1
    assert value(gone, "dra_resource_claims_in_use", driver_name="<any>") == 0
    assert ("dra_resource_claims_in_use", frozenset({("driver_name", DRIVER)})) not in gone


async def test_a_failed_prepare_is_an_error_and_a_failed_call_has_its_grpc_code(env):
    client, clock, mgr, driver = env
    d = driver(versions=("v1beta1.DRAPlugin",))
    await registered(clock, mgr, d)
    d.abort["NodePrepareResources"] = (grpc.StatusCode.UNAVAILABLE, "driver is restarting")
    await _claimed_pod(client, "waits", "waits")
    [ev] = await eventually(ticking(clock, lambda: _events(client, "FailedPrepareDynamicResources")))
    # the kubelet's words: the gRPC status as Go prints it, after the method's name
    assert ev["message"] == ("Failed to prepare dynamic resources: prepare dynamic resources: NodePrepareResources: "
                             "rpc error: code = Unavailable desc = driver is restarting")
    s = await scrape(mgr)
    assert value(s, "dra_grpc_operations_duration_seconds_count", driver_name=DRIVER,
                 method_name="/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/NodePrepareResources",
                 grpc_status_code="Unavailable") >= 1
    assert value(s, "dra_operations_duration_seconds_count", operation_name="PrepareResources", is_error="true") >= 1
    assert value(s, "dra_resource_claims_in_use", driver_name="<any>") == 0


async def test_a_built_in_drivers_preparation_counts_as_its_plugins_calls(env):
    client, clock, mgr, _ = env
    await running_trainer(client, clock)
    s = await scrape(mgr)
    for built_in in ("gpu.nanokube.io", "nic.nanokube.io"):
        assert value(s, "dra_grpc_operations_duration_seconds_count", driver_name=built_in,
                     method_name=V1 + "/NodePrepareResources", grpc_status_code="OK") == 1
        assert value(s, "dra_resource_claims_in_use", driver_name=built_in) == 1
    assert value(s, "dra_resource_claims_in_use", driver_name="<any>") == 1, "one claim, two drivers"


async def test_the_plugin_manager_counts_each_socket_desired_and_each_registered_plugin(env):
    client, clock, mgr, driver = env
    good = driver()
    await registered(clock, mgr, good)
    refused = driver("refused.example.com", versions=("v2.DRAPlugin",))
    await eventually(ticking(clock, lambda: _true(refused.statuses)))

    s = await scrape(mgr)
    assert value(s, "plugin_manager_total_plugins", socket_path=good.registration_socket,
                 state="actual_state_of_world") == 1
    assert value(s, "plugin_manager_total_plugins", socket_path=good.registration_socket,
                 state="desired_state_of_world") == 1
    assert value(s, "plugin_manager_total_plugins", socket_path=refused.registration_socket,
                 state="desired_state_of_world") == 1
    assert ("plugin_manager_total_plugins", frozenset({("socket_path", refused.registration_socket),
                                                       ("state", "actual_state_of_world")})) not in s
    resp = await mgr.kubelet_for(NODE).serve(GET, "/metrics")
    families = [line.split()[2] for line in resp.text.splitlines() if line.startswith("# TYPE ")]
    assert families == sorted(families), "families by name, as client_golang gathers them"

    good.stop()
    refused.stop()

    async def gone():
        return not any(k[0] == "plugin_manager_total_plugins" for k in await scrape(mgr))
    await eventually(ticking(clock, gone))
