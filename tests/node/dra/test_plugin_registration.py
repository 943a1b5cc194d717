"""External DRA drivers on a simulated node: a kubelet plugin registers
through a socket in the node's plugins_registry directory (upstream's plugin
watcher and DRAPluginManager), the node agent prepares claims of its driver
by calling it over gRPC, and unprepares them when the pod is gone."""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile

import pytest

from nanokube.apiserver.loopback import connector
from nanokube.node.cluster import default_cluster
from nanokube.node.dra import cdi
from nanokube.node.dra.plugin_manager import WIPING_DELAY
from nanokube.node.manager import NodeManager
from tests.controllers import audited, eventually, make_stack
from tests.node import ManualClock
from tests.node.dra.plugin_driver import PluginDriver
from tests.node.dra.test_prepare import phase
from tests.node.test_lifecycle import node_agents

DRIVER = "gpu.example.com"
NODE = "gpu-0"


@pytest.fixture
async def env():
    clock = ManualClock()
    async with node_agents(clock) as (s, mgr):
        drivers: list[PluginDriver] = []

        def driver(name=DRIVER, **kw) -> PluginDriver:
            a = mgr.agents[NODE]
            d = PluginDriver(name, a.plugins_registry, f"{mgr.pods_dir}/{NODE}/plugins", a.cdi_dir,
                             kw.pop("results", lambda ns, n: [("gpu", NODE, "gpu-0")]), **kw)
            drivers.append(d)
            return d.start()

        yield s.client, clock, mgr, driver
        for d in drivers:
            d.stop()


def ticking(clock, check):
    """`check` polled while the node's clock moves a second a time (the watcher polls on it)."""
    async def tick():
        await clock.advance(1)
        return await check() if callable(check) else check
    return tick


async def registered(clock, mgr, driver):
    """The plugin was told it is registered and the node's connection to it is up: the driver's
    plugin the node serves from is this one (another instance's, connected already, serves until
    this one's connection is up). One tick lets the watcher's poll find the socket; the gRPC calls
    then take real time, during which the node's clock stands still (a ticking clock would run past
    a grace period meanwhile)."""
    async def check():
        plugin = mgr.agents[NODE].dra_plugins.get(driver.driver)
        return plugin is not None and plugin.endpoint == driver.endpoint and plugin.connected and driver.statuses
    await clock.advance(1)
    await eventually(check)


async def test_a_plugin_that_serves_v1_registers_and_is_told_so(env):
    client, clock, mgr, driver = env
    d = driver()
    await registered(clock, mgr, d)
    assert d.statuses == [(True, "")]
    plugin = mgr.agents[NODE].dra_plugins.get(DRIVER)
    assert (plugin.endpoint, plugin.service) == (d.endpoint, "v1.DRAPlugin")
    assert mgr.agents["gpu-1"].dra_plugins.get(DRIVER) is None  # another node's registry


async def test_a_v1beta1_only_plugin_gets_v1beta1(env):
    client, clock, mgr, driver = env
    d = driver(versions=("v1beta1.DRAPlugin",))
    await registered(clock, mgr, d)
    assert mgr.agents[NODE].dra_plugins.get(DRIVER).service == "v1beta1.DRAPlugin"


@pytest.mark.parametrize("versions, why", [
    (("v2.DRAPlugin",), 'none of services supported by the plugin (["v2.DRAPlugin"]) are supported by the '
                        'kubelet (["v1.DRAPlugin" "v1beta1.DRAPlugin"])'),
    ((), "empty list of supported gRPC services (aka supported versions)"),
])
async def test_unsupported_versions_are_refused_with_upstreams_error(env, versions, why):
    client, clock, mgr, driver = env
    d = driver(versions=versions)
    await eventually(ticking(clock, lambda: _true(d.statuses)))
    assert d.statuses[0] == (False, f"RegisterPlugin error -- plugin validation failed with err: invalid supported "
                                    f"gRPC versions of DRA driver plugin {DRIVER} at endpoint {d.endpoint}: {why}")
    assert mgr.agents[NODE].dra_plugins.get(DRIVER) is None
    # the kubelet tries again, backing off, and tells the plugin each time
    await eventually(ticking(clock, lambda: _true(len(d.statuses) >= 2)))
    assert d.statuses[1][0] is False


async def test_a_plugin_of_another_type_has_no_handler(env):
    client, clock, mgr, driver = env
    d = driver(plugin_type="CSIPlugin")
    await eventually(ticking(clock, lambda: _true(d.statuses)))
    assert d.statuses[0] == (False, f"RegisterPlugin error -- no handler registered for plugin type: CSIPlugin at "
                                    f"socket {d.registration_socket}")


async def _true(v):
    return v


async def _slices(client):
    items, _ = await client.resource("resource.k8s.io", "v1", "resourceslices").list(
        field_selector=f"spec.nodeName={NODE},spec.driver={DRIVER}")
    return items


async def _publish(client):
    await client.resource("resource.k8s.io", "v1", "resourceslices").create({
        "metadata": {"name": f"{NODE}-{DRIVER}"}, "spec": {
            "driver": DRIVER, "nodeName": NODE, "pool": {"name": NODE, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0"}]}})


async def test_a_driver_gone_past_the_grace_period_loses_its_slices(env, tmp_path):
    """In one DeleteCollection, as upstream's kubelet wipes them: the driver's slices of this node only."""
    client, clock, mgr, driver = env
    d = driver()
    await registered(clock, mgr, d)
    await _publish(client)
    slices = client.resource("resource.k8s.io", "v1", "resourceslices")
    await slices.create({"metadata": {"name": f"gpu-1-{DRIVER}"}, "spec": {
        "driver": DRIVER, "nodeName": "gpu-1", "pool": {"name": "gpu-1", "generation": 1, "resourceSliceCount": 1},
        "devices": [{"name": "gpu-0"}]}})
    d.stop()
    await eventually(ticking(clock, lambda: _true(mgr.agents[NODE].dra_plugins.get(DRIVER) is None)))
    assert await _slices(client)  # not before the grace period
    log = tmp_path / "audit.log"
    with audited(client, log):
        await clock.advance(WIPING_DELAY)
        await eventually(ticking(clock, lambda: _none(_slices(client))))
    writes = [e["verb"] for e in map(json.loads, log.read_text().splitlines())
              if e["objectRef"]["resource"] == "resourceslices"]
    assert writes == ["deletecollection"]
    items, _ = await slices.list(field_selector=f"spec.driver={DRIVER}")
    assert [i["spec"]["nodeName"] for i in items] == ["gpu-1"]


async def _none(coro):
    return not await coro


async def test_a_driver_back_within_the_grace_period_keeps_its_slices(env):
    client, clock, mgr, driver = env
    d = driver()
    await registered(clock, mgr, d)
    await _publish(client)
    d.stop()
    await eventually(ticking(clock, lambda: _true(mgr.agents[NODE].dra_plugins.get(DRIVER) is None)))
    d2 = driver()
    await registered(clock, mgr, d2)
    await clock.advance(WIPING_DELAY + 5)
    assert await _slices(client)
    assert not mgr.agents[NODE].dra_plugins.wipes


def _claim(name):
    return {"metadata": {"name": name, "namespace": "default"}, "spec": {"devices": {"requests": [
        {"name": "gpu", "exactly": {"deviceClassName": "example"}}]}}}


def _pod(name, claim):
    return {"metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": NODE, "resourceClaims": [{"name": "acc", "resourceClaimName": claim}],
                     "containers": [{"name": "app", "image": "busybox", "resources": {"claims": [{"name": "acc"}]}},
                                    {"name": "side", "image": "busybox"}]}}


async def _allocate(claims, name, pod):
    c = {**await claims.get(name, "default")}
    c["status"] = {"allocation": {"devices": {"results": [
        {"request": "gpu", "driver": DRIVER, "pool": NODE, "device": "gpu-0"}]}},
        "reservedFor": [{"resource": "pods", "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]}]}
    return await claims.update(c, subresource="status")


async def _claimed_pod(client, name: str, claim: str, fail: tuple[dict, str] | None = None):
    """Claim `claim` and pod `name` using it, the claim allocated on NODE's gpu-0 and reserved for
    the pod; `fail` (the driver's failures, a message) is set under the claim's UID before the pod
    exists. Returns the allocated claim, the pod and the pods resource."""
    claims = client.resource("resource.k8s.io", "v1", "resourceclaims")
    pods = client.resource("", "v1", "pods")
    c = await claims.create(_claim(claim))
    if fail:
        fail[0][c["metadata"]["uid"]] = fail[1]
    pod = await pods.create(_pod(name, claim))
    return await _allocate(claims, claim, pod), pod, pods


async def test_the_kubelet_prepares_through_the_plugin_and_unprepares_when_the_pod_goes(env):
    client, clock, mgr, driver = env
    d = driver()
    await registered(clock, mgr, d)
    claim, pod, pods = await _claimed_pod(client, "trainer", "train")
    await eventually(phase(pods, "trainer", "Running", clock))
    ref = {"namespace": "default", "uid": claim["metadata"]["uid"], "name": "train"}
    assert d.called("NodePrepareResources") == [{"claims": [ref]}]
    a = mgr.agents[NODE]
    assert a.claims.cdi_devices(pod, "app") == [f"{DRIVER}/device=gpu-0"]
    assert a.claims.cdi_devices(pod, "side") == []
    assert a.claims.cdi_environment(pod, "app") == {"DRIVER": DRIVER, "DEVICE_0": "gpu-0"}
    assert not d.called("NodeUnprepareResources")

    await pods.delete("trainer", "default", grace_period_seconds=0)
    await eventually(ticking(clock, lambda: _true(d.called("NodeUnprepareResources"))))
    assert d.called("NodeUnprepareResources") == [{"claims": [ref]}]
    assert not a.claims.is_prepared("default", "train")


async def _events(client, reason):
    items, _ = await client.resource("", "v1", "events").list("default")
    return [e for e in items if e["reason"] == reason]


async def test_a_plugin_error_keeps_the_pod_creating_and_is_retried(env):
    client, clock, mgr, driver = env
    d = driver()
    await registered(clock, mgr, d)
    c, pod, pods = await _claimed_pod(client, "waits", "broken", fail=(d.fail, "device gpu-0 is busy"))
    [ev] = await eventually(ticking(clock, lambda: _events(client, "FailedPrepareDynamicResources")))
    assert ev["type"] == "Warning"
    assert ev["message"] == ("Failed to prepare dynamic resources: prepare dynamic resources: NodePrepareResources "
                             "failed for ResourceClaim broken: device gpu-0 is busy")
    p = await pods.get("waits", "default")
    assert p["status"]["phase"] == "Pending"
    assert all(s["state"]["waiting"]["reason"] == "ContainerCreating" for s in p["status"]["containerStatuses"])
    del d.fail[c["metadata"]["uid"]]
    await eventually(phase(pods, "waits", "Running", clock))
    assert len(d.called("NodePrepareResources")) >= 2


async def test_a_claim_the_plugin_leaves_out_of_its_answer_is_not_prepared(env):
    """A NodePrepareResources answer without the claim neither prepares nor fails it: the kubelet
    says how many the driver skipped, and asks again; one with a result for a claim it did not ask
    for (keyed by the claim's name, not its UID) is refused naming that key."""
    client, clock, mgr, driver = env
    d = driver()
    await registered(clock, mgr, d)
    claims, pods = client.resource("resource.k8s.io", "v1", "resourceclaims"), client.resource("", "v1", "pods")
    d.skip.add((await claims.create(_claim("skipped")))["metadata"]["uid"])
    await _allocate(claims, "skipped", await pods.create(_pod("skipped", "skipped")))
    [ev] = await eventually(ticking(clock, lambda: _events(client, "FailedPrepareDynamicResources")))
    assert ev["message"] == ("Failed to prepare dynamic resources: prepare dynamic resources: NodePrepareResources "
                             "skipped 1 ResourceClaims")
    assert not mgr.agents[NODE].claims.is_prepared("default", "skipped")
    # a driver that keys its answer by the claim's name: a result for a claim the kubelet did not ask for
    d.skip.clear()
    d.key_by_name = True

    async def unknown_uid():
        return [e for e in await _events(client, "FailedPrepareDynamicResources") if "unknown" in e["message"]]
    [ev] = await eventually(ticking(clock, unknown_uid))
    assert ev["message"] == ("Failed to prepare dynamic resources: prepare dynamic resources: NodePrepareResources "
                             "returned result for unknown claim UID skipped")
    assert not mgr.agents[NODE].claims.is_prepared("default", "skipped")
    d.key_by_name = False
    await eventually(phase(pods, "skipped", "Running", clock))


async def test_a_claim_of_an_unregistered_driver_waits_for_it(env):
    client, clock, mgr, driver = env
    _, pod, pods = await _claimed_pod(client, "early", "early")
    [ev] = await eventually(ticking(clock, lambda: _events(client, "FailedPrepareDynamicResources")))
    assert ev["message"].endswith(f"DRA driver {DRIVER} is not registered")
    d = driver()
    await eventually(phase(pods, "early", "Running", clock))
    assert len(d.called("NodePrepareResources")) == 1


def test_cdi_resolves_env_spec_wide_then_per_device(tmp_path):
    (tmp_path / "vendor.yaml").write_text(
        "cdiVersion: 0.6.0\nkind: vendor.com/gpu\ncontainerEdits:\n  env: [VENDOR=1, MODE=shared]\n"
        "devices:\n- name: g0\n  containerEdits:\n    env: [GPU=g0, MODE=exclusive]\n- name: g1\n"
        "  containerEdits:\n    env: [GPU1=g1]\n")
    assert cdi.environment([str(tmp_path)], ["vendor.com/gpu=g0", "vendor.com/gpu=g1"]) == {
        "VENDOR": "1", "MODE": "exclusive", "GPU": "g0", "GPU1": "g1"}
    with pytest.raises(cdi.CDIError, match="unresolvable CDI devices vendor.com/gpu=g9, bad"):
        cdi.environment([str(tmp_path)], ["vendor.com/gpu=g9", "bad"])


async def test_a_plugin_that_streams_health_sets_the_containers_allocated_resources_status(env):
    client, clock, mgr, driver = env
    d = driver(versions=("v1.DRAPlugin", "v1.DRAResourceHealth"))
    await registered(clock, mgr, d)
    _, pod, pods = await _claimed_pod(client, "watched", "watched")
    await eventually(phase(pods, "watched", "Running", clock))

    async def health(want):
        async def check():
            p = await pods.get("watched", "default")
            st = {s["name"]: s.get("allocatedResourcesStatus") for s in p["status"]["containerStatuses"]}
            return st if st["app"] == [{"name": "claim:acc", "resources": [
                {"resourceID": f"{DRIVER}/{NODE}/gpu-0", "health": want}]}] else None
        return await eventually(ticking(clock, check))

    st = await health("Unknown")  # nothing reported yet
    assert st["side"] is None  # a container that names no claim
    d.set_health(NODE, "gpu-0", "UNHEALTHY")
    await health("Unhealthy")
    d.set_health(NODE, "gpu-0", "HEALTHY")
    await health("Healthy")
    assert d.called("NodeWatchResources")


async def test_a_health_not_reported_again_within_its_timeout_is_unknown(env):
    """A device's reported health holds for its health_check_timeout_seconds: a plugin that stops
    reporting is not believed past it (upstream's healthInfoCache), until it reports again."""
    client, clock, mgr, driver = env
    d = driver(versions=("v1.DRAPlugin", "v1.DRAResourceHealth"), resend=None)
    await registered(clock, mgr, d)
    _, pod, pods = await _claimed_pod(client, "stale", "stale")
    await eventually(phase(pods, "stale", "Running", clock))

    def app_health(want):
        async def check():
            p = await pods.get("stale", "default")
            [res] = next(s for s in p["status"]["containerStatuses"] if s["name"] == "app")["allocatedResourcesStatus"]
            return res["resources"][0]["health"] == want
        return check

    d.set_health(NODE, "gpu-0", "HEALTHY", timeout=20)
    await eventually(app_health("Healthy"))
    await clock.advance(19)
    assert await app_health("Healthy")()
    await clock.advance(2)  # past the timeout, nothing reported since
    await eventually(app_health("Unknown"))
    d.set_health(NODE, "gpu-0", "HEALTHY")  # reported again (the default timeout, 30 s)
    await eventually(app_health("Healthy"))


async def test_a_plugin_without_a_health_service_leaves_allocated_resources_status_unset(env):
    client, clock, mgr, driver = env
    d = driver()
    await registered(clock, mgr, d)
    _, pod, pods = await _claimed_pod(client, "plain", "plain")
    p = await eventually(phase(pods, "plain", "Running", clock))
    assert all("allocatedResourcesStatus" not in s for s in p["status"]["containerStatuses"])
    assert not d.called("NodeWatchResources")


async def test_a_socket_nobody_answers_on_holds_up_no_other_plugin(env, caplog):
    """A plugin that died without removing its socket: the kubelet keeps dialing it (10 s) while
    another plugin registers."""
    client, clock, mgr, driver = env
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(f"{mgr.agents[NODE].plugins_registry}/dead.example.com-reg.sock")  # bound, never listening
    try:
        await clock.advance(1)  # the watcher starts dialing it
        d = driver()
        await registered(clock, mgr, d)
        assert "dial failed" not in caplog.text
    finally:
        stale.close()


async def test_a_failed_unprepare_is_retried_until_the_driver_succeeds(env):
    client, clock, mgr, driver = env
    d = driver()
    await registered(clock, mgr, d)
    c, pod, pods = await _claimed_pod(client, "sticky", "sticky")
    await eventually(phase(pods, "sticky", "Running", clock))
    d.fail_unprepare[c["metadata"]["uid"]] = "device gpu-0 is still in use"
    await pods.delete("sticky", "default", grace_period_seconds=0)
    await eventually(ticking(clock, lambda: _true(len(d.called("NodeUnprepareResources")) >= 2)))
    del d.fail_unprepare[c["metadata"]["uid"]]
    calls = len(await eventually(ticking(clock, lambda: _true(
        not mgr.agents[NODE].claims.unpreparing and d.called("NodeUnprepareResources")))))
    await clock.advance(60)
    assert len(d.called("NodeUnprepareResources")) == calls  # none after it succeeded


async def test_an_unprepare_answer_for_a_claim_not_asked_about_is_a_failure_retried(env, caplog):
    """NodeUnprepareResources answered under a key that is not the claim's UID (the claim's name
    here) leaves the claim unprepared: the kubelet logs the unknown UID and asks again, backing off."""
    client, clock, mgr, driver = env
    d = driver()
    await registered(clock, mgr, d)
    c, pod, pods = await _claimed_pod(client, "named", "named")
    await eventually(phase(pods, "named", "Running", clock))
    d.key_by_name = True
    await pods.delete("named", "default", grace_period_seconds=0)
    await eventually(ticking(clock, lambda: _true(len(d.called("NodeUnprepareResources")) >= 2)))
    assert "unprepare claim default/named: NodeUnprepareResources returned result for unknown claim UID named" \
        in caplog.text
    assert c["metadata"]["uid"] in mgr.agents[NODE].claims.unpreparing
    d.key_by_name = False
    await eventually(ticking(clock, lambda: _true(not mgr.agents[NODE].claims.unpreparing)))
    assert not mgr.agents[NODE].claims.unprepare_left


async def test_a_driver_whose_process_died_loses_its_slices_though_its_sockets_remain(env):
    """SIGKILL leaves both sockets behind, so nothing deregisters: the connection going down
    makes the driver unusable, and its slices go after the grace period."""
    client, clock, mgr, driver = env
    a = mgr.agents[NODE]
    proc = subprocess.Popen([sys.executable, "-m", "tests.node.dra.plugin_driver", DRIVER, a.plugins_registry,
                             f"{mgr.pods_dir}/{NODE}/plugins", a.cdi_dir, NODE], stdout=subprocess.PIPE)
    try:
        assert proc.stdout.readline() == b"serving\n"
        # registered: connected, and the plugin told so (killed before that, its registration fails and is undone)
        await eventually(ticking(clock, lambda: _true(
            a.dra_plugins.get(DRIVER) is not None and a.dra_plugins.get(DRIVER).connected
            and any(r.name == DRIVER for r in a.plugin_watcher.registered.values()))))
        await _publish(client)
        await clock.advance(WIPING_DELAY + 5)
        assert await _slices(client)  # connected: kept
    finally:
        proc.kill()
        proc.wait()
    assert os.path.exists(f"{a.plugins_registry}/{DRIVER}-reg.sock")
    await eventually(ticking(clock, lambda: _true(not a.dra_plugins.get(DRIVER).connected)))
    assert a.dra_plugins.get(DRIVER) is not None  # still registered
    await clock.advance(WIPING_DELAY)
    await eventually(ticking(clock, lambda: _none(_slices(client))))


async def test_a_rolling_update_hands_over_without_losing_the_slices(env):
    """Two instances of one driver at once (kubeletplugin's RollingUpdate): the newest serves;
    the old one going leaves the driver usable, so its slices stay."""
    client, clock, mgr, driver = env
    old = driver(instance="a")
    await registered(clock, mgr, old)
    await _publish(client)
    new = driver(instance="b")
    await registered(clock, mgr, new)
    plugins = mgr.agents[NODE].dra_plugins
    assert plugins.get(DRIVER).endpoint == new.endpoint
    old.stop()
    await eventually(ticking(clock, lambda: _true(len(plugins.store[DRIVER]) == 1)))
    await clock.advance(WIPING_DELAY + 5)
    assert await _slices(client)
    assert plugins.get(DRIVER).endpoint == new.endpoint


async def test_a_claim_whose_preparation_failed_is_unprepared_when_the_pod_goes(env):
    """The driver may hold part of a preparation it failed: the kubelet unprepares every claim it
    asked a driver to prepare."""
    client, clock, mgr, driver = env
    d = driver()
    await registered(clock, mgr, d)
    c, pod, pods = await _claimed_pod(client, "half", "half", fail=(d.fail, "out of memory"))
    await eventually(ticking(clock, lambda: _true(d.called("NodePrepareResources"))))
    assert not d.called("NodeUnprepareResources")
    await pods.delete("half", "default", grace_period_seconds=0)
    unprepared = await eventually(ticking(clock, lambda: _true(d.called("NodeUnprepareResources"))))
    assert unprepared == [{"claims": [{"namespace": "default", "uid": c["metadata"]["uid"], "name": "half"}]}]


async def test_a_starting_node_deletes_the_slices_of_drivers_not_registered_yet():
    """As a kubelet starts: an external driver's slices left from before are deleted (a driver
    still running publishes them again once registered); the built-in drivers' are kept."""
    s = await make_stack()
    try:
        await s.client.resource("", "v1", "namespaces").create({"metadata": {"name": "kube-node-lease"}})
        await _publish(s.client)
        mgr = NodeManager(connector(s.rest), default_cluster(), ManualClock())
        await mgr.start()
        try:
            assert await _slices(s.client) == []
            items, _ = await s.client.resource("resource.k8s.io", "v1", "resourceslices").list(
                field_selector=f"spec.nodeName={NODE}")
            assert {i["spec"]["driver"] for i in items} == {"gpu.nanokube.io", "nic.nanokube.io"}
        finally:
            await mgr.stop()
    finally:
        await s.close()


_RESTART = """
import sys, time
from nanokube.node.dra.grpc_api import DRA_METHODS, DRA_SERVICES, stub, target  # the node's side, first
import grpc
from nanokube.node.dra.proto import dra_pb2
from tests.node.dra.plugin_driver import PluginDriver

d = PluginDriver("gpu.example.com", *sys.argv[1:4], lambda ns, n: []).start()
call = stub(grpc.insecure_channel(target(d.endpoint)), DRA_SERVICES["v1.DRAPlugin"], DRA_METHODS)
call["NodePrepareResources"](dra_pb2.NodePrepareResourcesRequest(), timeout=10)
d.stop()  # the plugin restarts: its server closes the node's connection
time.sleep(0.5)
d.start()
call["NodePrepareResources"](dra_pb2.NodePrepareResourcesRequest(), wait_for_ready=True, timeout=10)
d.stop()
print("reconnected")
"""


def test_a_restarting_plugin_makes_the_node_print_no_grpc_noise():
    """gRPC's core prints a closed connection's GOAWAY at INFO ("Got goaway"); the node connects
    again, and only gRPC's errors reach its stderr."""
    # a unix socket's path has at most 105 bytes for gRPC: tmp_path's plugins/<driver>/dra.sock can be longer
    base = tempfile.mkdtemp(prefix="nk-", dir="/tmp")
    try:
        dirs = [os.path.join(base, d) for d in ("registry", "plugins", "cdi")]
        os.makedirs(dirs[0])
        env = {k: v for k, v in os.environ.items() if k != "GRPC_VERBOSITY"}
        r = subprocess.run([sys.executable, "-c", _RESTART, *dirs], capture_output=True, text=True, timeout=60,
                           env=env, cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__)))))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    assert r.returncode == 0 and r.stdout == "reconnected\n", r.stderr
    assert "goaway" not in r.stderr.lower(), r.stderr



@pytest.fixture
async def restartable():
    """Node agents on a node directory that outlives them, the plugin registered: yields the
    client, the clock, the plugin and `restart(between)`, which stops the agents, awaits
    `between()` (the node down) and starts new ones on the same directory (a restarted kubelet),
    returning them once the plugin registered with them."""
    base = tempfile.mkdtemp(prefix="nk-", dir="/tmp")  # a socket's path: at most 105 bytes for gRPC
    s = await make_stack()
    await s.client.resource("", "v1", "namespaces").create({"metadata": {"name": "kube-node-lease"}})
    clock = ManualClock()
    s.rest.clock = clock
    mgrs = [NodeManager(connector(s.rest), default_cluster(), clock, pods_dir=base)]
    d = None
    try:
        await mgrs[0].start()
        a = mgrs[0].agents[NODE]
        d = PluginDriver(DRIVER, a.plugins_registry, f"{base}/{NODE}/plugins", a.cdi_dir,
                         lambda ns, n: [("gpu", NODE, "gpu-0")]).start()
        await registered(clock, mgrs[0], d)

        async def restart(between):
            await mgrs[-1].stop()
            await between()
            mgrs.append(NodeManager(connector(s.rest), default_cluster(), clock, pods_dir=base))
            await mgrs[-1].start()
            await registered(clock, mgrs[-1], d)
            return mgrs[-1]

        yield s.client, clock, d, restart
    finally:
        await mgrs[-1].stop()
        await s.close()
        if d is not None:
            d.stop()
        shutil.rmtree(base, ignore_errors=True)


async def test_a_restarted_kubelet_keeps_its_prepared_claims_from_its_checkpoint(restartable):
    """As upstream's DRA manager checkpoints its claim cache (dra_manager_state): a node agent
    restarted under a running pod adopts it without a second NodePrepareResources, its containers
    keep their CDI devices, and the pod's deletion still unprepares the claim through the driver;
    the claim of a pod deleted while the node was down is unprepared once it is back."""
    client, clock, d, restart = restartable
    claim, pod, pods = await _claimed_pod(client, "kept", "kept")
    gone, _, _ = await _claimed_pod(client, "gone", "gone")
    await eventually(phase(pods, "kept", "Running", clock))
    await eventually(phase(pods, "gone", "Running", clock))
    # the driver runs on: the new agent registers it again and adopts the pod; no kubelet runs
    # meanwhile, so the pod deleted then is gone at once
    mgr = await restart(lambda: pods.delete("gone", "default", grace_period_seconds=0))
    assert d.statuses == [(True, ""), (True, "")]
    a = mgr.agents[NODE]
    assert a.claims.cdi_devices(pod, "app") == [f"{DRIVER}/device=gpu-0"]
    assert a.claims.cdi_environment(pod, "app") == {"DRIVER": DRIVER, "DEVICE_0": "gpu-0"}
    ref = {"namespace": "default", "uid": claim["metadata"]["uid"], "name": "kept"}
    gone_ref = {"namespace": "default", "uid": gone["metadata"]["uid"], "name": "gone"}
    # the gone pod's claim: unprepared once the driver is back (its first try found it not registered)
    await eventually(ticking(clock, lambda: _true(d.called("NodeUnprepareResources"))))
    assert d.called("NodeUnprepareResources") == [{"claims": [gone_ref]}]
    assert a.claims.claims_in_use() == {"<any>": 1, DRIVER: 1}
    assert sorted(r["claims"][0]["name"] for r in d.called("NodePrepareResources")) == ["gone", "kept"]

    await pods.delete("kept", "default", grace_period_seconds=0)
    await eventually(ticking(clock, lambda: _true(len(d.called("NodeUnprepareResources")) == 2)))
    assert d.called("NodeUnprepareResources")[1] == {"claims": [ref]}
    assert a.claims.claims_in_use() == {"<any>": 0}
    assert len(d.called("NodePrepareResources")) == 2


async def test_a_claim_the_driver_failed_to_unprepare_is_asked_again_after_a_restart(restartable):
    """A claim whose NodeUnprepareResources failed stays in the checkpoint until the driver
    succeeds: a node restarted meanwhile asks the driver again, as upstream's DRA manager keeps
    such a claim in its cache."""
    client, clock, d, restart = restartable
    claim, _, pods = await _claimed_pod(client, "stuck", "stuck", fail=(d.fail_unprepare, "device gpu-0 is busy"))
    await eventually(phase(pods, "stuck", "Running", clock))
    await pods.delete("stuck", "default", grace_period_seconds=0)
    await eventually(ticking(clock, lambda: _true(d.called("NodeUnprepareResources"))))
    tries = []

    async def recovers():  # the node down before its retry; the driver can unprepare the claim now
        tries.append(len(d.called("NodeUnprepareResources")))
        del d.fail_unprepare[claim["metadata"]["uid"]]
    mgr = await restart(recovers)
    ref = {"namespace": "default", "uid": claim["metadata"]["uid"], "name": "stuck"}
    await eventually(ticking(clock, lambda: _true(len(d.called("NodeUnprepareResources")) > tries[0])))
    assert d.called("NodeUnprepareResources")[-1] == {"claims": [ref]}
    await eventually(ticking(clock, lambda: _true(not mgr.agents[NODE].claims.unpreparing)))
    assert len(d.called("NodeUnprepareResources")) == tries[0] + 1  # it succeeded: not asked again


async def test_a_claim_the_driver_failed_to_prepare_is_unprepared_when_its_pod_went_while_the_node_was_down(
        restartable):
    """Upstream checkpoints a claim before calling its drivers: one whose NodePrepareResources
    failed is unprepared once its pod is gone, also when the pod went while the node was down."""
    client, clock, d, restart = restartable
    claim, _, pods = await _claimed_pod(client, "failing", "failing", fail=(d.fail, "device gpu-0 is busy"))
    await eventually(ticking(clock, lambda: _events(client, "FailedPrepareDynamicResources")))
    await restart(lambda: pods.delete("failing", "default", grace_period_seconds=0))
    unprepared = await eventually(ticking(clock, lambda: _true(d.called("NodeUnprepareResources"))))
    assert unprepared == [{"claims": [{"namespace": "default", "uid": claim["metadata"]["uid"], "name": "failing"}]}]
