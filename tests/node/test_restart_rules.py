"""A container's own restartPolicy and restartPolicyRules (KEP-5307) and the RestartAllContainers
action (KEP-5532), as a simulated node carries them out, seen through the pods' API."""

from nanokube.apiserver.loopback import connector
from nanokube.node.cluster import default_cluster
from nanokube.node.manager import NodeManager
from tests.controllers import becomes, eventually, make_stack
from tests.node import ManualClock
from tests.node.test_lifecycle import cond, env, phase_is, pod  # noqa: F401 (env is a fixture)

RUN = "sim.nanokube.io/run-seconds"
EXIT = "sim.nanokube.io/exit-code"


def with_rules(p, rules, policy="Never", container=0):
    c = p["spec"]["containers"][container]
    c["restartPolicy"] = policy
    c["restartPolicyRules"] = [{"action": action, "exitCodes": {"operator": op, "values": values}}
                               for action, op, values in rules]
    return p


def status(p, name):
    return next(c for c in p["status"]["containerStatuses"] + p["status"].get("initContainerStatuses", [])
                if c["name"] == name)


def state_is(pods, name, container, state, reason="", restarts=None):
    async def check():
        p = await pods.get(name, "default")
        s = status(p, container)["state"]
        again = restarts is None or status(p, container)["restartCount"] == restarts
        return p if again and state in s and (not reason or s[state].get("reason") == reason) else None
    return check


async def test_a_rule_restarts_a_container_of_a_never_pod_on_its_exit_code(env):  # noqa: F811
    pods, clock = env
    await pods.create(with_rules(pod("job", restart="Never", annotations={RUN: "5", EXIT: "42,1"}),
                                 [("Restart", "In", [42])]))
    await eventually(phase_is(pods, "job", "Running"))
    await clock.advance(5)  # the first exit restarts at once (no back-off yet)
    p = await eventually(state_is(pods, "job", "app", "running", restarts=1))
    app = status(p, "app")
    assert p["status"]["phase"] == "Running"
    assert app["restartCount"] == 1 and app["lastState"]["terminated"]["exitCode"] == 42
    await clock.advance(5)  # the second run exits 1: no rule matches, the container's Never holds
    p = await eventually(phase_is(pods, "job", "Failed"))
    app = status(p, "app")
    assert app["restartCount"] == 1 and app["state"]["terminated"]["exitCode"] == 1
    assert app["lastState"]["terminated"]["exitCode"] == 42


async def test_without_rules_the_pods_policy_applies_and_a_containers_own_overrides_it(env):  # noqa: F811
    pods, clock = env
    await pods.create(pod("plain", restart="Never", annotations={RUN: "5", EXIT: "42,1"}))
    own = pod("own", restart="OnFailure", annotations={RUN: "5", EXIT: "3"})
    own["spec"]["containers"][0]["restartPolicy"] = "Never"
    await pods.create(own)
    await pods.create(pod("onfailure", restart="OnFailure", annotations={RUN: "5", EXIT: "3,0"}))
    for name in ("plain", "own", "onfailure"):
        await eventually(phase_is(pods, name, "Running"))
    await clock.advance(5)
    plain = await eventually(phase_is(pods, "plain", "Failed"))
    assert status(plain, "app")["restartCount"] == 0 and status(plain, "app")["state"]["terminated"]["exitCode"] == 42
    own = await eventually(phase_is(pods, "own", "Failed"))
    assert status(own, "app")["restartCount"] == 0
    await eventually(state_is(pods, "onfailure", "app", "running", restarts=1))  # at once
    await clock.advance(5)  # its second run exits 0
    done = await eventually(phase_is(pods, "onfailure", "Succeeded"))
    assert status(done, "app")["restartCount"] == 1


async def test_a_container_that_exits_for_good_stays_terminated_while_another_restarts(env):  # noqa: F811
    pods, clock = env
    p = with_rules(pod("mixed", restart="Never", containers=("worker", "helper"), annotations={RUN: "5", EXIT: "42,1"}),
                   [("Restart", "In", [42])])
    await pods.create(p)
    await eventually(phase_is(pods, "mixed", "Running"))
    await clock.advance(5)
    p = await eventually(state_is(pods, "mixed", "worker", "running", restarts=1))
    helper = status(p, "helper")
    assert helper["state"]["terminated"]["exitCode"] == 42 and helper["restartCount"] == 0
    assert p["status"]["phase"] == "Running" and cond(p, "Ready")["status"] == "False"
    assert "terminated" in status(p, "helper")["state"]
    await clock.advance(5)
    p = await eventually(phase_is(pods, "mixed", "Failed"))
    assert [(c["name"], c["restartCount"], c["state"]["terminated"]["exitCode"])
            for c in p["status"]["containerStatuses"]] == [("worker", 1, 1), ("helper", 0, 42)]


async def test_restart_all_containers_reruns_the_init_containers_in_place(env):  # noqa: F811
    pods, clock = env
    p = with_rules(pod("gang", restart="Never", annotations={RUN: "5", EXIT: "42,0"}),
                   [("RestartAllContainers", "In", [42])])
    p["spec"]["initContainers"] = [{"name": "setup", "image": "busybox:1.36"}]
    await pods.create(p)
    first = await eventually(phase_is(pods, "gang", "Running"))
    restarting = cond(first, "AllContainersRestarting")
    assert restarting["status"] == "False" and "reason" not in restarting
    stream = await pods.watch("default", resource_version=first["metadata"]["resourceVersion"],
                              field_selector="metadata.name=gang")
    await clock.advance(5)
    seen = []
    async for _, obj in stream:
        c = cond(obj, "AllContainersRestarting")
        seen.append((obj["status"]["phase"], c["status"], c.get("reason"), c.get("message")))
        if obj["status"]["phase"] == "Pending":
            break
    await stream.aclose()
    assert seen == [("Running", "True", "RestartAllContainersStarted", "container exited with restart policy rule"),
                    ("Pending", "False", None, None)]

    pending = await pods.get("gang", "default")
    setup, app = status(pending, "setup"), status(pending, "app")
    assert setup["restartCount"] == 1 and setup["lastState"]["terminated"]["reason"] == "Completed"
    assert app["restartCount"] == 1 and app["lastState"]["terminated"]["exitCode"] == 42
    assert "waiting" in setup["state"] and "waiting" in app["state"]
    await clock.advance(10)
    again = await eventually(state_is(pods, "gang", "app", "running"))
    assert again["metadata"]["uid"] == first["metadata"]["uid"] and again["status"]["podIP"] == first["status"]["podIP"]
    setup = status(again, "setup")
    assert setup["restartCount"] == 1 and setup["state"]["terminated"]["reason"] == "Completed"

    async def setup_starts():  # "the init container ran again": its Started counted twice, from the recorder's queue
        events, _ = await pods.c.resource("", "v1", "events").list(namespace="default")
        return [e["count"] for e in events if e["reason"] == "Started"
                and e["involvedObject"]["fieldPath"] == "spec.initContainers{setup}"]
    await becomes(setup_starts, [2])
    await clock.advance(5)  # the second run exits 0: the container's Never ends the pod
    done = await eventually(phase_is(pods, "gang", "Succeeded"))
    assert (cond(done, "AllContainersRestarting")["status"], cond(done, "AllContainersRestarting")["reason"]) == \
        ("False", "PodCompleted")


async def test_a_restarted_node_agent_keeps_a_container_that_ended_for_good_as_it_ended():
    s = await make_stack()
    await s.client.resource("", "v1", "namespaces").create({"metadata": {"name": "kube-node-lease"}})
    clock = ManualClock()
    s.rest.clock = clock
    pods = s.client.resource("", "v1", "pods")
    mgr = NodeManager(connector(s.rest), default_cluster(), clock)
    await mgr.start()
    try:
        await pods.create(with_rules(pod("mixed", restart="Never", containers=("worker", "helper"),
                                         annotations={RUN: "5", EXIT: "42"}), [("Restart", "In", [42])]))
        await eventually(phase_is(pods, "mixed", "Running"))
        await clock.advance(5)
        ended = status(await eventually(state_is(pods, "mixed", "worker", "running", restarts=1)), "helper")
        await mgr.stop()
        mgr = NodeManager(connector(s.rest), default_cluster(), clock)
        await mgr.start()  # the new agent adopts the running pod
        # the worker exits 42 again: the new agent has no back-off for it (as a restarted kubelet), so it
        # restarts at once, then backs off 10 s; the helper is not touched
        await clock.advance(5)
        await eventually(state_is(pods, "mixed", "worker", "running", restarts=2))
        await clock.advance(5)
        p = await eventually(state_is(pods, "mixed", "worker", "waiting", "CrashLoopBackOff"))
        assert status(p, "worker")["restartCount"] == 2 and p["status"]["phase"] == "Running"  # (until it starts again)
        assert "back-off 10s" in status(p, "worker")["state"]["waiting"]["message"]
        assert status(p, "helper") == ended
    finally:
        await mgr.stop()
        await s.close()


async def test_a_restarted_node_agent_keeps_each_containers_own_restart_count():
    """Containers restart on their own (each its own lifetime): an agent adopting the running pod
    keeps each one's restartCount and lastState, not the most restarted one's for all."""
    s = await make_stack()
    await s.client.resource("", "v1", "namespaces").create({"metadata": {"name": "kube-node-lease"}})
    clock = ManualClock()
    s.rest.clock = clock
    pods = s.client.resource("", "v1", "pods")
    mgr = NodeManager(connector(s.rest), default_cluster(), clock)
    await mgr.start()
    try:
        p = pod("pair", containers=("flaky", "steady"))
        p["spec"]["containers"][0]["command"] = ["sh", "-c", "sleep 5; exit 2"]
        await pods.create(p)
        await eventually(phase_is(pods, "pair", "Running"))
        await clock.advance(5)
        before = await eventually(state_is(pods, "pair", "flaky", "running", restarts=1))
        assert (status(before, "flaky")["restartCount"], status(before, "steady")["restartCount"]) == (1, 0)
        await mgr.stop()
        mgr = NodeManager(connector(s.rest), default_cluster(), clock)
        await mgr.start()  # the new agent adopts the running pod
        await clock.advance(5)  # flaky exits 2 again: restarted at once (the new agent has no back-off for it)
        await eventually(state_is(pods, "pair", "flaky", "running", restarts=2))
        await clock.advance(5)  # and again: it backs off; steady runs on
        p = await eventually(state_is(pods, "pair", "flaky", "waiting", "CrashLoopBackOff"))
        assert status(p, "flaky")["restartCount"] == 2 and status(p, "flaky")["lastState"]["terminated"]["exitCode"] == 2
        assert status(p, "steady")["restartCount"] == 0 and "running" in status(p, "steady")["state"]
        assert status(p, "steady")["lastState"] == {}
    finally:
        await mgr.stop()
        await s.close()


async def test_a_restarted_node_agent_gives_an_adopted_containers_command_its_environment():
    """The adopted container's command runs again in its whole environment (its env), not only the
    image's PATH, HOME and HOSTNAME: `exit $CODE` exits 3, not with the status 0 an empty CODE gives."""
    s = await make_stack()
    await s.client.resource("", "v1", "namespaces").create({"metadata": {"name": "kube-node-lease"}})
    clock = ManualClock()
    s.rest.clock = clock
    pods = s.client.resource("", "v1", "pods")
    mgr = NodeManager(connector(s.rest), default_cluster(), clock)
    await mgr.start()
    try:
        p = pod("envd", restart="Never")
        p["spec"]["containers"][0].update(command=["sh", "-c", "sleep 5; exit $CODE"],
                                          env=[{"name": "CODE", "value": "3"}])
        await pods.create(p)
        await eventually(phase_is(pods, "envd", "Running"))
        await mgr.stop()
        mgr = NodeManager(connector(s.rest), default_cluster(), clock)
        await mgr.start()  # the new agent adopts the running pod
        await clock.advance(5)
        done = await eventually(phase_is(pods, "envd", "Failed"))
        assert status(done, "app")["state"]["terminated"]["exitCode"] == 3
    finally:
        await mgr.stop()
        await s.close()
