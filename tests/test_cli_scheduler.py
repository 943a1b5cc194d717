"""ElectedScheduler: schedules only while holding the kube-scheduler Lease;
a standby has synced its informers already, and a clean stop hands it the Lease."""

from nanokube.cli_scheduler import LEASE_NAME, ElectedScheduler
from nanokube.client.leaderelection import LeaderElector
from nanokube.scheduler.scheduler import Scheduler
from tests.controllers import eventually, make_stack
from tests.scheduler import node, pod
from tests.scheduler.test_scheduler import add_node


def elected(client, identity: str) -> ElectedScheduler:
    elector = LeaderElector(client, LEASE_NAME, identity, lease_duration=15, renew_deadline=10, retry_period=0.01)
    return ElectedScheduler(lambda metrics: Scheduler(client, metrics=metrics, seed=1), elector)


def leading(sched: ElectedScheduler):
    async def check():
        return sched.started.is_set()
    return check


async def bound_to(pods, name: str):
    async def check():
        return (await pods.get(name, "default"))["spec"].get("nodeName")
    return await eventually(check)


async def new_pod(pods, name: str) -> None:
    p = pod(name)
    del p["metadata"]["uid"]
    await pods.create(p)


async def test_the_standby_takes_over_when_the_leader_stops():
    s = await make_stack()
    await s.client.resource("", "v1", "namespaces").create({"metadata": {"name": "kube-system"}})
    await add_node(s.client, node("n1", "4", "8Gi"))
    pods = s.client.resource("", "v1", "pods")
    leases = s.client.resource("coordination.k8s.io", "v1", "leases")
    first, second = elected(s.client, "first"), elected(s.client, "second")
    try:
        await first.start()
        await eventually(leading(first))
        await second.start()
        await new_pod(pods, "a")
        assert await bound_to(pods, "a") == "n1"
        assert (await leases.get(LEASE_NAME, "kube-system"))["spec"]["holderIdentity"] == "first"
        # (its sync runs in its campaign's task: the first may bind the pod before it is done)
        async def synced():
            return second.synced.is_set()
        await eventually(synced)
        assert not second.started.is_set(), "the standby's informers have synced before it campaigns; it does not schedule"

        await first.stop()
        assert first.scheduler is None and not first.started.is_set()
        await eventually(leading(second))
        await new_pod(pods, "b")
        assert await bound_to(pods, "b") == "n1"
        assert (await leases.get(LEASE_NAME, "kube-system"))["spec"]["holderIdentity"] == "second"
    finally:
        await first.stop()
        await second.stop()
        await s.close()


async def test_without_an_elector_it_schedules_at_once():
    s = await make_stack()
    await add_node(s.client, node("n1", "4", "8Gi"))
    pods = s.client.resource("", "v1", "pods")
    sched = ElectedScheduler(lambda metrics: Scheduler(s.client, metrics=metrics, seed=1))
    try:
        await sched.start()
        assert sched.started.is_set() and sched.scheduler.metrics is sched.metrics
        await new_pod(pods, "a")
        assert await bound_to(pods, "a") == "n1"
    finally:
        await sched.stop()
        await s.close()
    items, _ = await s.client.resource("coordination.k8s.io", "v1", "leases").list("kube-system")
    assert items == []


def test_flags_set_explicitly_override_the_configuration_file_and_unset_ones_leave_it():
    import argparse

    from nanokube.cli_scheduler import add_parser
    from nanokube.client.leaderelection import from_arguments
    from nanokube.scheduler.config import parse

    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers())
    file = parse({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                  "leaderElection": {"leaseDuration": "30s", "renewDeadline": "20s", "resourceName": "mine"}})

    class Client:
        def resource(self, *_):
            return None

    e = from_arguments(Client(), parser.parse_args(["scheduler"]), LEASE_NAME, file.leader_election)
    assert (e.name, e.lease_duration, e.renew_deadline, e.retry_period) == ("mine", 30.0, 20.0, 2.0)
    e = from_arguments(Client(), parser.parse_args(["scheduler", "--leader-elect-lease-duration", "40s"]), LEASE_NAME,
                       file.leader_election)
    assert (e.lease_duration, e.renew_deadline) == (40.0, 20.0)
    assert from_arguments(Client(), parser.parse_args(["scheduler", "--leader-elect=false"]), LEASE_NAME,
                          file.leader_election) is None
    e = from_arguments(Client(), parser.parse_args(["scheduler"]), LEASE_NAME)
    assert (e.name, e.namespace, e.lease_duration) == (LEASE_NAME, "kube-system", 15.0)


def test_leader_election_flags_are_go_durations_and_flagz_prints_them_as_go_does(capsys):
    """Upstream's --leader-elect-* take time.Duration ("2s", "1m30s"); a bare number is refused in
    ParseDuration's words; /flagz prints the durations in effect as Go does (15s, 1m30s, 500ms)."""
    import argparse

    import pytest

    from nanokube import zpages
    from nanokube.cli_scheduler import add_parser
    from nanokube.client.leaderelection import config_from_arguments
    from nanokube.scheduler.config import parse

    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers())
    args = parser.parse_args(["scheduler", "--leader-elect-retry-period=2s", "--leader-elect-lease-duration", "90s"])
    cfg = config_from_arguments(args, LEASE_NAME)
    assert (cfg.lease_duration, cfg.renew_deadline, cfg.retry_period) == (90.0, 10.0, 2.0)
    flags = zpages.flags(args)
    assert (flags["leader-elect"], flags["leader-elect-lease-duration"], flags["leader-elect-renew-deadline"],
            flags["leader-elect-retry-period"]) == ("true", "1m30s", "10s", "2s")
    file = parse({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                  "leaderElection": {"retryPeriod": "500ms"}})
    args = parser.parse_args(["scheduler"])
    assert config_from_arguments(args, LEASE_NAME, file.leader_election).retry_period == 0.5
    assert zpages.flags(args)["leader-elect-retry-period"] == "500ms", "the file's value, as it is in effect"
    with pytest.raises(SystemExit):
        parser.parse_args(["scheduler", "--leader-elect-retry-period=2"])
    assert 'time: missing unit in duration "2"' in capsys.readouterr().err


def test_a_refused_configuration_is_judged_before_the_scheduler_and_its_controllers_are_imported(tmp_path):
    """`nanokube scheduler --config` with a file it refuses answers 2 with the reason, having imported
    neither the scheduler nor the component configuration's controllers (0.2 of a refusal's 0.65 CPU-s)."""
    import subprocess
    import sys

    bad = tmp_path / "config.yaml"
    bad.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: Nope\n")
    script = ("import sys; from nanokube import cli; rc = cli.main(['scheduler', '--config', sys.argv[1]]); "
              "print(rc, sorted(m for m in ('nanokube.configz', 'nanokube.scheduler.scheduler', "
              "'nanokube.client.http') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", script, str(bad)], capture_output=True, text=True, timeout=60)
    assert done.stdout.split("\n")[0] == "2 []"
    assert 'no kind "Nope" is registered' in done.stderr
