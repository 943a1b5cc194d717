"""Leader election over a Lease: one leader at a time, takeover only after
expiry (or at once after a release), leadership lost when renewals fail."""

import asyncio

from nanokube.client.leaderelection import LeaderElector
from tests.controllers import make_stack
from tests.node import ManualClock


async def settle():
    for _ in range(20):
        await asyncio.sleep(0)


async def test_one_leader_then_takeover_after_expiry_and_after_release():
    s = await make_stack()
    await s.client.resource("", "v1", "namespaces").create({"metadata": {"name": "kube-system"}})
    clock = ManualClock()
    leases = s.client.resource("coordination.k8s.io", "v1", "leases")
    a = LeaderElector(s.client, "kube-controller-manager", "a", clock=clock)
    b = LeaderElector(s.client, "kube-controller-manager", "b", clock=clock)
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew(), "a fresh lease held by another is not taken"
    lease = (await leases.get("kube-controller-manager", "kube-system"))["spec"]
    assert lease["holderIdentity"] == "a" and lease["leaseDurationSeconds"] == 15 and lease["leaseTransitions"] == 0

    await clock.advance(16)
    assert await b.try_acquire_or_renew(), "an expired lease is taken over"
    lease = (await leases.get("kube-controller-manager", "kube-system"))["spec"]
    assert lease["holderIdentity"] == "b" and lease["leaseTransitions"] == 1
    assert not await a.try_acquire_or_renew()

    await b.release()
    assert await a.try_acquire_or_renew(), "a released lease is free at once"
    lease = (await leases.get("kube-controller-manager", "kube-system"))["spec"]
    assert lease["holderIdentity"] == "a" and lease["leaseTransitions"] == 2, "a handover counts as a transition"
    assert await a.try_acquire_or_renew()
    assert (await leases.get("kube-controller-manager", "kube-system"))["spec"]["leaseTransitions"] == 2
    await s.close()


async def test_leader_runs_until_renewals_fail_for_the_renew_deadline():
    s = await make_stack()
    await s.client.resource("", "v1", "namespaces").create({"metadata": {"name": "kube-system"}})
    clock = ManualClock()
    a = LeaderElector(s.client, "sched", "a", clock=clock)
    b = LeaderElector(s.client, "sched", "b", clock=clock)
    running = {"a": False, "b": False}

    def lead(who):
        async def work():
            running[who] = True
            try:
                await asyncio.Event().wait()
            finally:
                running[who] = False
        return work

    ta = asyncio.create_task(a.run(lead("a")))
    await settle()
    tb = asyncio.create_task(b.run(lead("b")))
    for _ in range(10):
        await clock.advance(2)
        await settle()
    assert running == {"a": True, "b": False}, "renewals keep a the only leader"

    async def refuse(*_args, **_kw):
        from nanokube.machinery.errors import APIError
        raise APIError(500, "InternalError", "etcd is down")
    a.leases.update = refuse
    for _ in range(6):
        await clock.advance(2)
        await settle()
    assert ta.done() and not running["a"], "a gives up after the renew deadline"
    for _ in range(5):
        await clock.advance(2)
        await settle()
    assert running["b"] and b.leading
    tb.cancel()
    await asyncio.gather(tb, return_exceptions=True)
    await s.close()


async def test_health_check_fails_a_leader_whose_renewals_stopped():
    """client-go's HealthzAdaptor: only a leader past its lease duration plus the tolerance is unhealthy."""
    s = await make_stack()
    await s.client.resource("", "v1", "namespaces").create({"metadata": {"name": "kube-system"}})
    clock = ManualClock()
    a = LeaderElector(s.client, "kube-scheduler", "a", clock=clock)
    assert a.check() is None, "a standby is healthy"
    assert await a.try_acquire_or_renew()
    a.leading = True
    await clock.advance(34)
    assert a.check() is None, "15s lease + 20s tolerance not yet passed"
    await clock.advance(2)
    assert a.check() == "failed election to renew leadership on lease kube-scheduler"
    a.leading = False
    assert a.check() is None
    await s.close()


async def leading_a_and_standby_b():
    """A stack and two electors on one manual clock, `a` already leading (its task running `lead`)."""
    s = await make_stack()
    await s.client.resource("", "v1", "namespaces").create({"metadata": {"name": "kube-system"}})
    clock = ManualClock()
    a = LeaderElector(s.client, "sched", "a", clock=clock)
    b = LeaderElector(s.client, "sched", "b", clock=clock)
    running = asyncio.Event()

    async def lead():
        running.set()
        await asyncio.Event().wait()

    ta = asyncio.create_task(a.run(lead))
    await settle()
    assert running.is_set() and a.leading
    return s, clock, a, b, ta, lead


async def test_an_api_server_that_does_not_answer_fails_attempts_without_ending_leader_or_standby():
    """A restart of the API server (connections refused for a few seconds) is a failed renewal, not
    a lost lease, and a standby keeps campaigning through it."""
    import aiohttp

    s, clock, a, b, ta, lead = await leading_a_and_standby_b()
    tb = asyncio.create_task(b.run(lead))
    await settle()

    async def refused(*_args, **_kw):
        raise aiohttp.ClientConnectionError("Cannot connect to host 127.0.0.1:6443: Connection refused")
    get = a.leases.get
    a.leases.get = b.leases.get = refused
    for _ in range(3):  # 6 s down: under the renew deadline
        await clock.advance(2)
        await settle()
    assert not ta.done() and a.leading, "a leader keeps leading through a short outage"
    assert not tb.done() and not b.leading, "a standby keeps campaigning"
    a.leases.get = b.leases.get = get
    await clock.advance(2)
    await settle()
    assert a.leading and not tb.done()
    for t in (ta, tb):
        t.cancel()
    await asyncio.gather(ta, tb, return_exceptions=True)
    await s.close()


async def test_an_api_server_that_never_answers_fails_the_attempt_at_the_renew_deadline():
    """A renewal the API server never answers (stopped, its packets dropped) is given up at the renew
    deadline, as client-go's leader-election client times out: the leader stops leading before the
    lease the others see expires, rather than wait on it for ever; a standby campaigns on."""
    s, clock, a, b, ta, lead = await leading_a_and_standby_b()

    async def hangs(*_args, **_kw):
        await asyncio.Event().wait()
    a.leases.get = b.leases.get = hangs
    tb = asyncio.create_task(b.run(lead))
    for _ in range(5):  # the renewal at 2 s hangs: 10 s on, the attempt still waits
        await clock.advance(2)
        await settle()
    assert a.leading and not ta.done()
    await clock.advance(2)  # 12 s: the attempt failed at its deadline, 12 s past the last renewal
    await settle()
    assert ta.done() and not a.leading, "the leader stopped leading before its lease expired (15 s)"
    assert not tb.done() and not b.leading, "the standby's hung attempts fail too; it campaigns on"
    tb.cancel()
    await asyncio.gather(tb, return_exceptions=True)
    assert clock.next_due() is None, "no deadline timer is left behind"
    await s.close()
