"""Service load-balancer controller: LoadBalancer Services get an address
from the pool in status.loadBalancer.ingress, never one already held (also
after a restart), a requested free one, and lose it when they stop being
LoadBalancers or are deleted; a classed Service is another controller's."""

import pytest

from nanokube.controllers.manager import build_controllers, enabled
from nanokube.controllers.service_lb import ServiceLBController, parse_pool
from nanokube.registry.core_services import external_ip
from tests.controllers import becomes, eventually, make_stack

POOL = "192.0.2.0/30"  # two usable addresses: .1 and .2


@pytest.fixture
async def env():
    s = await make_stack()
    ctrl = ServiceLBController(s.client, pool=POOL)
    await ctrl.start()
    yield s.client, ctrl
    await ctrl.stop()
    await s.close()


def lb(name, **spec):
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": "default"},
            "spec": {"type": "LoadBalancer", "selector": {"app": name}, "ports": [{"port": 80}], **spec}}


async def ingress(client, name):
    svc = await client.resource("", "v1", "services").get(name, "default")
    return svc["status"].get("loadBalancer", {}).get("ingress")


async def events(client, name):
    items, _ = await client.resource("", "v1", "events").list("default")
    return [(e["type"], e["reason"], e["message"]) for e in items if e["involvedObject"]["name"] == name]


async def got_ip(client, name):
    ing = await ingress(client, name)
    return ing and ing[0]["ip"]


def test_the_pool_must_be_an_ipv4_cidr():
    assert str(parse_pool("172.19.0.0/24")) == "172.19.0.0/24"
    for bad in ("fd00::/120", "nonsense"):
        with pytest.raises(ValueError, match="--load-balancer-pool"):
            parse_pool(bad)


async def test_registered_under_its_upstream_name():
    s = await make_stack()
    try:
        every = build_controllers(s.client, load_balancer_pool=POOL)
        assert [(c.name, str(c.pool)) for c in enabled(every, "service-lb")] == [("service-lb-controller", POOL)]
        assert "service-lb-controller" not in [c.name for c in enabled(every, "*,-service-lb-controller")]
    finally:
        await s.close()


async def test_allocation_status_events_and_kubectl_column(env):
    client, _ = env
    services = client.resource("", "v1", "services")
    await services.create(lb("web"))
    assert await eventually(lambda: got_ip(client, "web")) == "192.0.2.1"
    svc = await services.get("web", "default")
    assert svc["status"]["loadBalancer"]["ingress"] == [{"ip": "192.0.2.1", "ipMode": "VIP"}]
    assert external_ip(svc) == "192.0.2.1"
    await becomes(lambda: events(client, "web"), [("Normal", "EnsuringLoadBalancer", "Ensuring load balancer"),
                                                  ("Normal", "EnsuredLoadBalancer", "Ensured load balancer")])
    await services.create({**lb("plain"), "spec": {"selector": {"app": "x"}, "ports": [{"port": 80}]}})
    await services.create(lb("wanted", loadBalancerIP="192.0.2.2"))
    assert await eventually(lambda: got_ip(client, "wanted")) == "192.0.2.2"
    assert await ingress(client, "plain") is None


async def test_exhaustion_warns_once_and_a_release_serves_the_waiting_service(env):
    client, _ = env
    services = client.resource("", "v1", "services")
    for name in ("a", "b", "c"):
        await services.create(lb(name))
        if name != "c":
            await eventually(lambda name=name: got_ip(client, name))

    async def warned():
        return [e for e in await events(client, "c") if e[0] == "Warning"]
    message = "Error syncing load balancer: failed to ensure load balancer: no IPv4 address left in the load " \
              "balancer pool 192.0.2.0/30"
    assert await eventually(warned) == [("Warning", "SyncLoadBalancerFailed", message)]
    a_ip = await got_ip(client, "a")
    await services.delete("a", "default")
    assert await eventually(lambda: got_ip(client, "c")) == a_ip
    assert len(await warned()) == 1

    b = await services.get("b", "default")
    b_ip = b["status"]["loadBalancer"]["ingress"][0]["ip"]
    spec = {k: v for k, v in b["spec"].items() if k not in ("externalTrafficPolicy", "allocateLoadBalancerNodePorts")}
    await services.update({**b, "spec": {**spec, "type": "ClusterIP", "ports": [{"port": 80}]}})

    async def released():
        return await ingress(client, "b") is None
    assert await eventually(released)

    async def reported():  # the Event is written after the status write it reports
        return ("Normal", "DeletedLoadBalancer", "Deleted load balancer") in await events(client, "b")
    assert await eventually(reported)
    await services.create(lb("d"))
    assert await eventually(lambda: got_ip(client, "d")) == b_ip


async def test_a_restarted_controller_hands_out_no_address_twice():
    s = await make_stack()
    services = s.client.resource("", "v1", "services")
    try:
        first = ServiceLBController(s.client, pool=POOL)
        await first.start()
        await services.create(lb("a"))
        assert await eventually(lambda: got_ip(s.client, "a")) == "192.0.2.1"
        await services.create(lb("b"))
        assert await eventually(lambda: got_ip(s.client, "b")) == "192.0.2.2"
        await first.stop()
        await services.delete("a", "default")
        await services.create(lb("late"))
        await services.create(lb("taken", loadBalancerIP="192.0.2.2"))
        second = ServiceLBController(s.client, pool=POOL)
        await second.start()
        assert await eventually(lambda: got_ip(s.client, "late")) == "192.0.2.1"  # a's, not b's

        async def refused():
            return [e[2] for e in await events(s.client, "taken") if e[0] == "Warning"]
        assert (await eventually(refused))[0].endswith("requested loadBalancerIP 192.0.2.2 is already allocated")
        assert await got_ip(s.client, "b") == "192.0.2.2" and await ingress(s.client, "taken") is None
        await second.stop()
    finally:
        await s.close()


async def test_load_balancer_class_and_requests_outside_the_pool(env):
    client, _ = env
    services = client.resource("", "v1", "services")
    await services.create(lb("classed", loadBalancerClass="example.com/lb"))
    await services.create(lb("outside", loadBalancerIP="198.51.100.9"))

    async def refused():
        return [e[2] for e in await events(client, "outside") if e[0] == "Warning"]
    assert "198.51.100.9 is not in the load balancer pool" in (await eventually(refused))[0]
    await services.create(lb("after"))
    assert await eventually(lambda: got_ip(client, "after")) == "192.0.2.1"
    assert await ingress(client, "classed") is None and await events(client, "classed") == []


def test_the_standalone_controller_manager_refuses_a_bad_pool_before_connecting(capsys):
    import argparse

    from nanokube import cli_controller_manager

    parser = argparse.ArgumentParser()
    cli_controller_manager.add_parser(parser.add_subparsers())
    args = parser.parse_args(["controller-manager", "--kubeconfig", "/nonexistent", "--load-balancer-pool", "nope"])
    assert cli_controller_manager.run(args) == 2
    assert "--load-balancer-pool: 'nope' is not a CIDR" in capsys.readouterr().err
