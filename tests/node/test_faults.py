"""The fault annotation's grammar and timing, and a node agent following
timed and flapping faults on a hand-driven clock."""

import pytest

from nanokube.apiserver.loopback import connector
from nanokube.machinery import errors
from nanokube.clock import REAL
from nanokube.node.cluster import default_cluster
from nanokube.node.faults import ANNOTATION, Faults, Timing, edit, parse, token
from nanokube.node.manager import NodeManager
from tests.controllers import make_stack
from tests.node import ManualClock

T0 = 1_800_000_000.0


def at(t: float) -> str:
    return REAL.rfc3339_micro(t)


def test_plain_faults_are_always_on():
    plan = parse("lease-stop, gpu:gpu-3:ecc")
    assert plan.at(T0) == Faults(lease_stop=True, devices=frozenset({("gpu-3", "ecc")}))
    assert plan.next_change(T0) is None


def test_until_heals_at_that_time():
    plan = parse(f"not-ready;until={at(T0 + 30)}")
    assert plan.at(T0 + 29.9).not_ready and not plan.at(T0 + 30).not_ready
    assert plan.next_change(T0) == T0 + 30 and plan.next_change(T0 + 30) is None


def test_flap_toggles_every_period_from_since_and_stops_at_until():
    timing = Timing(until=T0 + 25, flap=10, since=T0)
    assert [timing.active(T0 + s) for s in (-1, 0, 9.9, 10, 19.9, 20, 24.9, 25, 31)] == [
        False, True, True, False, False, True, True, False, False]
    assert [timing.next_change(T0 + s) for s in (-5, 0, 10, 20)] == [T0, T0 + 10, T0 + 20, T0 + 25]
    assert timing.next_change(T0 + 25) is None


@pytest.mark.parametrize("value, message", [
    ("reboot", "expected lease-stop, not-ready"),
    ("gpu:gpu-0:melt", "expected lease-stop"),
    ("not-ready;until=yesterday", "Invalid isoformat"),
    ("not-ready;flap=5", "flap needs a positive number of seconds and a since time"),
    (f"not-ready;flap=-1;since={at(T0)}", "flap needs a positive"),
    (f"not-ready;since={at(T0)}", "since is only meaningful with flap"),
    ("not-ready;for=30", "unknown or repeated option"),
])
def test_malformed_tokens_are_refused_with_the_token(value, message):
    with pytest.raises(ValueError, match=message):
        parse(value)


def test_token_and_edit_replace_a_fault_with_its_new_timing():
    timed = token("not-ready", T0, duration=30)
    assert timed == f"not-ready;until={at(T0 + 30)}"
    assert token("gpu:gpu-1:xid", T0, flap=2.5) == f"gpu:gpu-1:xid;flap=2.5;since={at(T0)}"
    value = edit("lease-stop,not-ready", add=(timed,))
    assert value == f"lease-stop,{timed}"
    assert edit(value, remove=lambda f: f == "not-ready") == "lease-stop"


@pytest.fixture
async def env():
    s = await make_stack()
    await s.client.resource("", "v1", "namespaces").create({"metadata": {"name": "kube-node-lease"}})
    clock = ManualClock(T0)
    mgr = NodeManager(connector(s.rest), default_cluster(), clock)
    await mgr.start()
    yield s.client, clock, mgr.agents["gpu-0"]
    await mgr.stop()
    await s.close()


async def _ready(client) -> dict:
    node = await client.resource("", "v1", "nodes").get("gpu-0")
    return next(c for c in node["status"]["conditions"] if c["type"] == "Ready")


async def _taints(client, device: str) -> list[dict]:
    s = await client.resource("resource.k8s.io", "v1", "resourceslices").get("gpu-0-gpu.nanokube.io-0")
    return next(d for d in s["spec"]["devices"] if d["name"] == device).get("taints") or []


async def test_a_timed_not_ready_heals_by_itself(env):
    client, clock, agent = env
    await agent.apply_faults(token("not-ready", clock.now(), duration=30))
    down = await _ready(client)
    assert down["status"] == "False" and down["reason"] == "KubeletNotReady"
    await clock.advance(29)
    assert (await _ready(client))["status"] == "False"
    await clock.advance(1)
    up = await _ready(client)
    assert up["status"] == "True" and up["lastTransitionTime"] == clock.rfc3339(T0 + 30)


async def test_a_timed_not_ready_that_runs_out_while_it_is_posted_still_heals(env):
    """The loop is busy past `until` between working out NotReady and the timer's first turn."""
    client, clock, agent = env
    post = agent.post_status

    async def busy(full: bool = False) -> None:
        clock.t += 2
        agent.post_status = post
        await post(full)

    agent.post_status = busy
    await agent.apply_faults(token("not-ready", clock.now(), duration=1))
    assert (await _ready(client))["status"] == "False"
    await clock.advance(0)
    up = await _ready(client)
    assert up["status"] == "True" and up["lastTransitionTime"] == clock.rfc3339(T0 + 2)


async def test_a_heal_whose_post_fails_is_posted_by_the_next_heartbeat(env):
    client, clock, agent = env
    await agent.apply_faults(token("not-ready", clock.now(), duration=5))
    patch = agent.nodes.patch

    async def failing(*args, **kwargs):
        agent.nodes.patch = patch
        raise errors.internal("etcdserver: request timed out")

    agent.nodes.patch = failing
    await clock.advance(5)
    assert (await _ready(client))["status"] == "False"
    await clock.advance(10)
    up = await _ready(client)
    assert up["status"] == "True" and up["lastTransitionTime"] == clock.rfc3339(T0 + 5)


@pytest.mark.parametrize("failure, level, traceback", [
    (errors.conflict("", "nodes", "gpu-0", "the object has been modified"), "WARNING", False),
    (TimeoutError(), "WARNING", False),
    (KeyError("status"), "ERROR", True),  # a bug: its traceback, for the fuzzer's log scan
])
async def test_a_failed_status_post_is_a_warning_when_expected_and_an_error_with_traceback_otherwise(
        env, caplog, failure, level, traceback):
    client, clock, agent = env
    patch = agent.nodes.patch

    async def failing(*args, **kwargs):
        agent.nodes.patch = patch
        raise failure

    agent.nodes.patch = failing
    with caplog.at_level("WARNING", logger="nanokube.node.agent"):
        await agent.apply_faults(token("not-ready", clock.now()))
    [record] = [r for r in caplog.records if "status post failed" in r.getMessage()]
    assert (record.levelname, record.exc_info is not None) == (level, traceback)
    await clock.advance(10)  # posted by the next heartbeat all the same
    assert (await _ready(client))["status"] == "False"


@pytest.mark.parametrize("failure, level, traceback", [
    (TimeoutError(), "WARNING", False),
    (KeyError("spec"), "ERROR", True),
])
async def test_a_failed_heartbeat_is_a_warning_when_expected_and_an_error_with_traceback_otherwise(
        env, caplog, failure, level, traceback):
    _, clock, agent = env
    update = agent.leases.update

    async def failing(*args, **kwargs):
        agent.leases.update = update
        raise failure

    agent.leases.update = failing
    with caplog.at_level("WARNING", logger="nanokube.node.agent"):
        await clock.advance(10)
    [record] = [r for r in caplog.records if "heartbeat failed" in r.getMessage()]
    assert (record.levelname, record.exc_info is not None) == (level, traceback)


async def test_a_flapping_gpu_fault_taints_and_heals_each_period_with_time_added(env):
    client, clock, agent = env
    await agent.apply_faults(token("gpu:gpu-2:xid", clock.now(), duration=35, flap=10))
    seen = []
    for _ in range(4):
        taints = await _taints(client, "gpu-2")
        seen.append([(t["key"], t["effect"], t["timeAdded"]) for t in taints])
        await clock.advance(10)
    assert seen == [[("gpu.nanokube.io/xid", "NoExecute", clock.rfc3339(T0))], [],
                    [("gpu.nanokube.io/xid", "NoExecute", clock.rfc3339(T0 + 20))], []]
    assert await _taints(client, "gpu-2") == [] and agent.faults == Faults()


async def test_a_new_annotation_replaces_the_timers_of_the_old_one(env):
    client, clock, agent = env
    await agent.apply_faults(token("not-ready", clock.now(), flap=5))
    await agent.apply_faults("gpu:gpu-0:ecc")
    await clock.advance(12)
    assert agent.faults == Faults(devices=frozenset({("gpu-0", "ecc")}))
    assert (await _ready(client))["status"] == "True"


async def test_the_manager_hands_annotation_changes_to_the_agent(env):
    client, clock, agent = env
    nodes = client.resource("", "v1", "nodes")
    await nodes.patch("gpu-0", {"metadata": {"annotations": {ANNOTATION: "gpu:gpu-0:ecc"}}})
    for _ in range(50):
        await clock.advance(0)
        if agent.faults.devices:
            break
    assert [(t["key"], t["effect"]) for t in await _taints(client, "gpu-0")] == [("gpu.nanokube.io/ecc", "NoSchedule")]


def _args(*argv: str):
    import argparse

    from nanokube import cli_fault

    p = argparse.ArgumentParser()
    cli_fault.add_parser(p.add_subparsers(dest="command"))
    return p.parse_args(["fault", *argv])


def test_cli_durations_and_timed_edits():
    from nanokube.cli_fault import _edit, duration

    assert [duration(t) for t in ("30s", "1.5m", "500ms", "2h", "7")] == [30, 90, 0.5, 7200, 7]
    for bad in ("0s", "-3s", "3x", ""):
        with pytest.raises(Exception, match="invalid duration"):
            duration(bad)
    value = _edit(_args("node", "n", "--not-ready", "--for", "30s"), "lease-stop", T0)
    assert value == f"lease-stop,not-ready;until={at(T0 + 30)}"
    flapping = _edit(_args("gpu", "n", "gpu-1", "--kind", "ecc", "--flap", "2s"), value, T0)
    assert flapping.endswith(f",gpu:gpu-1:ecc;flap=2;since={at(T0)}")
    assert _edit(_args("gpu", "n", "gpu-1", "--clear"), flapping, T0) == value
    assert _edit(_args("node", "n", "--clear"), value, T0) == ""
    pressed = _edit(_args("node", "n", "--memory-pressure", "--for", "30s"), value, T0)
    assert pressed == f"{value},memory-pressure;until={at(T0 + 30)}"
    assert parse(pressed).at(T0).pressure == {"MemoryPressure"} and not parse(pressed).at(T0 + 30).pressure
    assert _edit(_args("node", "n", "--clear"), pressed, T0) == ""
    assert _edit(_args("node", "n", "--shutdown"), None, T0) == "shutdown" and parse("shutdown").at(T0).shutdown


async def test_a_pressure_fault_sets_its_condition_as_the_kubelet_reports_it_until_healed(env):
    client, clock, agent = env
    events = client.resource("", "v1", "events")

    async def conditions() -> dict[str, tuple[str, str, str]]:
        node = await client.resource("", "v1", "nodes").get("gpu-0")
        return {c["type"]: (c["status"], c["reason"], c["message"]) for c in node["status"]["conditions"]}
    await agent.apply_faults("disk-pressure,memory-pressure")
    got = await conditions()
    assert got["MemoryPressure"] == ("True", "KubeletHasInsufficientMemory", "kubelet has insufficient memory available")
    assert got["DiskPressure"] == ("True", "KubeletHasDiskPressure", "kubelet has disk pressure")
    assert got["PIDPressure"][0] == "False" and agent.pressure() == ["MemoryPressure", "DiskPressure"]
    await agent.apply_faults(None)
    got = await conditions()
    assert got["MemoryPressure"] == ("False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available")
    assert got["DiskPressure"] == ("False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure")
    items, _ = await events.list("default")
    told = [e["reason"] for e in items if e["involvedObject"]["kind"] == "Node"]
    assert {"NodeHasInsufficientMemory", "NodeHasDiskPressure", "NodeHasSufficientMemory",
            "NodeHasNoDiskPressure"} <= set(told)


async def _mark_unknown(client) -> None:
    await client.resource("", "v1", "nodes").patch("gpu-0", {"status": {"conditions": [
        {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown"}]}},
        "application/strategic-merge-patch+json", subresource="status")


async def test_a_not_ready_node_marked_unknown_is_posted_not_ready_again(env):
    client, clock, agent = env
    await agent.apply_faults("not-ready")
    await _mark_unknown(client)
    await clock.advance(10)
    ready = await _ready(client)
    assert (ready["status"], ready["reason"]) == ("False", "KubeletNotReady")


async def test_a_silent_node_leaves_unknown_alone_until_its_lease_stop_ends(env):
    client, clock, agent = env
    await agent.apply_faults("lease-stop")
    await _mark_unknown(client)
    await clock.advance(30)
    assert (await _ready(client))["status"] == "Unknown"
    await agent.apply_faults(None)
    ready = await _ready(client)
    assert ready["status"] == "True" and ready["lastTransitionTime"] == clock.rfc3339()
