"""The core/v1 recorder (client/record.py), as client-go's tools/record: a controller repeating
itself counts on one Event (as kubectl shows it), similar events combine after 10, the spam
filter drops what comes past 25 about one object, and an Event deleted under the recorder, or
expired by the API server's TTL, is written again while it keeps happening."""

from __future__ import annotations

import asyncio
import json
import os
import shutil

import aiohttp
import pytest

from nanokube.apiserver.app import APIServer
from nanokube.apiserver.loopback import LocalClient
from nanokube.client.events import MAX_QUEUED
from nanokube.client.record import (
    AGGREGATE_INTERVAL,
    AGGREGATE_MAX_EVENTS,
    CACHE_SIZE,
    COMBINED,
    MAX_TRIES,
    SPAM_BURST,
    CoreEventRecorder,
)
from nanokube.clock import VirtualClock
from nanokube.controllers.replicaset import ReplicaSetController
from nanokube.controllers.service_lb import ServiceLBController
from nanokube.pki.ca import ensure_pki
from nanokube.pki.kubeconfig import write_kubeconfig
from nanokube.store.memory import MemoryStore
from tests.client import expiring_events
from tests.controllers import eventually, make_stack

CM = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "default", "uid": "u1"}}


@pytest.fixture
async def env():
    """A recorder on a virtual clock over an in-process API server, and the Events' client."""
    s = await make_stack()
    clock = VirtualClock()
    yield clock, CoreEventRecorder(s.client, "tester", clock), s.client.resource("", "v1", "events")
    await s.close()


async def listed(clock, events, obj: dict = CM) -> list[dict]:
    """The Events about `obj` once the recorder's writer has written what it can (emit only queues
    the writes)."""
    await clock.advance(0)
    items, _ = await events.list("default", field_selector=f"involvedObject.name={obj['metadata']['name']}")
    return sorted(items, key=lambda e: e["metadata"]["name"])


def other(name: str) -> dict:
    return {**CM, "metadata": {**CM["metadata"], "name": name, "uid": name}}


async def test_a_controller_repeating_itself_counts_on_one_event_as_kubectl_shows_it(tmp_path):
    """A LoadBalancer Service waiting for an address is synced again at each change of it, and
    each sync reports EnsuringLoadBalancer: one Event, its count and lastTimestamp moving (its
    involvedObject stays the first report's), not one Event per sync."""
    if not shutil.which("kubectl"):
        pytest.skip("kubectl not on PATH")
    pki = ensure_pki(str(tmp_path))
    server = APIServer(MemoryStore(), pki, port=0)
    await server.start()
    kubeconfig = str(tmp_path / "kubeconfig")
    write_kubeconfig(kubeconfig, server.url, pki)
    client = LocalClient(server.rest)
    ctrl = ServiceLBController(client, pool="192.0.2.0/30")  # two addresses
    await ctrl.start()
    services, events = client.resource("", "v1", "services"), client.resource("", "v1", "events")

    async def addressed(name: str):
        return ((await services.get(name, "default")).get("status") or {}).get("loadBalancer", {}).get("ingress")
    try:
        for name in ("a", "b", "web"):  # web waits for an address
            await services.create({"metadata": {"name": name, "namespace": "default"},
                                   "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]}})
            if name != "web":
                await eventually(lambda name=name: addressed(name))

        async def ensuring(count: int):
            items, _ = await events.list("default",
                                         field_selector="involvedObject.name=web,reason=EnsuringLoadBalancer")
            return items if items and items[0].get("count") == count else None
        # web's first sync must have reported before the next change, or the two coalesce in the queue
        assert (await eventually(lambda: ensuring(1)))[0]["count"] == 1
        for n in range(2, 6):
            await services.patch("web", {"metadata": {"labels": {"sync": str(n)}}}, namespace="default")
            await eventually(lambda n=n: ensuring(n))
        proc = await asyncio.create_subprocess_exec(
            "kubectl", "--kubeconfig", kubeconfig, "get", "events", "-n", "default", "-o", "json",
            "--field-selector", "involvedObject.name=web",
            env=dict(os.environ, HOME=str(tmp_path)), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await proc.communicate()
        assert proc.returncode == 0, err.decode()
    finally:
        await ctrl.stop()
        await server.stop()
    got = [(e["reason"], e["count"]) for e in json.loads(out)["items"]]
    assert sorted(got) == [("EnsuringLoadBalancer", 5), ("SyncLoadBalancerFailed", 1)]


async def test_an_annotated_event_carries_its_annotations_and_a_repeat_keeps_them(env):
    """AnnotatedEventf: the annotations are the Event's own (the kubelet's Evicted event names what
    it reclaimed there); an event without any has none."""
    clock, rec, events = env
    notes = {"starved_resource": "memory", "offending_containers": ""}
    await rec.emit(CM, "Warning", "Evicted", "low on memory", annotations=notes)
    await rec.emit(CM, "Normal", "Plain", "no annotations")
    await rec.emit(CM, "Warning", "Evicted", "low on memory", annotations=notes)
    got = {e["reason"]: (e["count"], e["metadata"].get("annotations")) for e in await listed(clock, events)}
    assert got == {"Evicted": (2, notes), "Plain": (1, None)}


async def test_ten_similar_events_combine_into_one_counted_event(env):
    clock, rec, events = env
    for i in range(9):
        await rec.emit(CM, "Warning", "FailedSync", f"attempt {i}")
    assert len(await listed(clock, events)) == 9
    await rec.emit(CM, "Warning", "FailedSync", "attempt 9")
    *plain, combined = sorted(await listed(clock, events), key=lambda e: e["message"].startswith(COMBINED))
    assert len(plain) == 9 and combined["message"] == COMBINED + "attempt 9" and combined["count"] == 1
    await clock.advance(60)
    await rec.emit(CM, "Warning", "FailedSync", "attempt 10")
    await rec.emit(CM, "Normal", "FailedSync", "another type: not similar")
    got = {e["metadata"]["name"]: e for e in await listed(clock, events)}
    assert len(got) == 11
    again = got[combined["metadata"]["name"]]
    assert (again["count"], again["message"]) == (2, COMBINED + "attempt 10")
    assert again["lastTimestamp"] == clock.rfc3339() != again["firstTimestamp"]
    await clock.advance(AGGREGATE_INTERVAL + 1)  # no similar event for 10 minutes: the next one is new
    await rec.emit(CM, "Warning", "FailedSync", "attempt 11")
    assert sum(e["message"] == "attempt 11" for e in await listed(clock, events)) == 1


async def test_the_spam_filter_drops_past_25_events_about_one_object_and_refills_every_5_minutes(env):
    clock, rec, events = env
    for i in range(SPAM_BURST + 5):
        await rec.emit(CM, "Normal", f"Reason{i}", "distinct reasons: nothing combines")
    assert len(await listed(clock, events)) == SPAM_BURST
    await rec.emit(other("cm2"), "Normal", "Reason0", "another object has its own bucket")
    assert len(await listed(clock, events, other("cm2"))) == 1
    await clock.advance(299)
    await rec.emit(CM, "Normal", "Late", "still no token")
    await clock.advance(1)
    await rec.emit(CM, "Normal", "Later", "a token 5 minutes on")
    assert [e["reason"] for e in await listed(clock, events)].count("Later") == 1
    assert "Late" not in [e["reason"] for e in await listed(clock, events)]


async def test_the_refill_is_client_gos_float32_rate_so_a_token_due_now_is_there(env):
    """client-go passes the QPS as a float32: float32(1/300) is 2.4e-8 above 1/300, so 5 minutes
    refill a whole token a few microseconds early. With float64 1/300 the token due at an instant
    could be a rounding error short of it (a CronJob's event at the very instant went missing)."""
    clock, rec, events = env
    for i in range(SPAM_BURST):
        await rec.emit(CM, "Normal", f"Reason{i}", "empties the bucket")
    await clock.advance(300 - 5e-6)
    await rec.emit(CM, "Normal", "Due", "a token 5 minutes on, by client-go's rate")
    assert [e["reason"] for e in await listed(clock, events)].count("Due") == 1


async def test_a_dropped_repeat_still_counts_in_the_next_write(env):
    clock, rec, events = env
    for _ in range(SPAM_BURST + 5):
        await rec.emit(CM, "Warning", "BackOff", "same")
    [ev] = await listed(clock, events)
    assert ev["count"] == SPAM_BURST
    await clock.advance(300)
    await rec.emit(CM, "Warning", "BackOff", "same")
    [ev] = await listed(clock, events)
    assert ev["count"] == SPAM_BURST + 6  # upstream's eventLogger counts before the filter drops


async def test_an_event_deleted_under_the_recorder_is_created_again_with_its_count(env):
    clock, rec, events = env
    await rec.emit(CM, "Normal", "Synced", "done")
    [first] = await listed(clock, events)
    await events.delete(first["metadata"]["name"], "default")
    await clock.advance(10)
    await rec.emit(CM, "Normal", "Synced", "done")
    [again] = await listed(clock, events)
    assert again["metadata"]["name"] == first["metadata"]["name"]
    assert again["metadata"]["uid"] != first["metadata"]["uid"]
    assert (again["count"], again["firstTimestamp"]) == (2, first["firstTimestamp"])
    assert again["lastTimestamp"] == clock.rfc3339()


async def test_concurrent_repeats_are_written_in_order(env):
    clock, rec, events = env
    await asyncio.gather(*(rec.emit(CM, "Warning", "FailedCreate", "quota exceeded") for _ in range(6)))
    [ev] = await listed(clock, events)
    assert ev["count"] == 6


async def test_an_event_that_keeps_happening_outlives_the_ttl():
    """Every repeat is a write, so the API server's --event-ttl starts over; once the repeats
    stop, the Event expires an hour after the last."""
    clock = VirtualClock()
    async with expiring_events(clock) as client:
        rec, events = CoreEventRecorder(client, "tester", clock), client.resource("", "v1", "events")
        for _ in range(9):
            await rec.emit(CM, "Warning", "Unhealthy", "probe failed")
            await clock.advance(1200)
        [ev] = await listed(clock, events)
        assert ev["count"] == 9
        await clock.advance(3600)
        assert await listed(clock, events) == []


async def test_the_caches_keep_the_4096_keys_used_last(env):
    """An event about the object least recently reported of 4,097 is a new Event again."""
    clock, rec, events = env
    for i in range(CACHE_SIZE + 1):
        await rec.emit(other(f"cm{i}"), "Normal", "Synced", "done")
        await clock.advance(0)  # written before the next: 4,097 at once would overflow the queue
    await rec.emit(other(f"cm{CACHE_SIZE}"), "Normal", "Synced", "done")
    await rec.emit(other("cm0"), "Normal", "Synced", "done")
    assert [e["count"] for e in await listed(clock, events, other(f"cm{CACHE_SIZE}"))] == [2]
    assert [e["count"] for e in await listed(clock, events, other("cm0"))] == [1, 1]



class _Unreachable:
    """The Events client with the server out of reach while `down`: each call a transport error
    (counted in `tries`), as aiohttp raises it for a refused connection."""

    def __init__(self, client) -> None:
        self.events, self.down, self.tries = client.resource("", "v1", "events"), True, 0

    def resource(self, group: str, version: str, plural: str):
        return self

    async def _call(self, method: str, *args, **kwargs):
        self.tries += 1
        if self.down:
            raise aiohttp.ClientConnectionError("Cannot connect to host")
        return await getattr(self.events, method)(*args, **kwargs)

    async def create(self, *args, **kwargs):
        return await self._call("create", *args, **kwargs)

    async def patch(self, *args, **kwargs):
        return await self._call("patch", *args, **kwargs)


@pytest.fixture
async def away():
    """A recorder on a virtual clock whose server is out of reach at first (first wait: 2.5 s)."""
    s = await make_stack()
    clock, flaky = VirtualClock(), _Unreachable(s.client)
    rec = CoreEventRecorder(flaky, "tester", clock, rand=lambda: 0.25)
    yield clock, rec, flaky, s.client.resource("", "v1", "events")
    await rec.close()
    await s.close()


async def test_a_transport_error_is_tried_again_after_a_random_part_of_10s_then_every_10s(away):
    """recordToSink: the first wait is rand() x 10 s, the next ones 10 s, on the recorder's clock;
    the Event lands once the server answers again."""
    clock, rec, flaky, events = away
    await rec.emit(CM, "Warning", "FailedSync", "server away")
    assert flaky.tries == 0, "emit only queues the write"
    await clock.advance(0)
    assert flaky.tries == 1
    await clock.advance(2.4)
    assert flaky.tries == 1
    await clock.advance(0.1)  # the randomized first wait
    assert flaky.tries == 2
    await clock.advance(9.9)
    assert flaky.tries == 2
    flaky.down = False
    await clock.advance(0.1)
    assert flaky.tries == 3
    [ev] = await listed(clock, events)
    assert (ev["reason"], ev["count"]) == ("FailedSync", 1)
    await clock.advance(100)
    assert flaky.tries == 3


async def test_a_write_is_given_up_after_12_tries(away):
    clock, rec, flaky, events = away
    await rec.emit(CM, "Warning", "FailedSync", "server away")
    await clock.advance(2.5 + 10 * 10 - 0.1)
    assert flaky.tries == MAX_TRIES - 1
    await clock.advance(0.1)
    assert flaky.tries == MAX_TRIES
    flaky.down = False
    await clock.advance(3600)
    assert flaky.tries == MAX_TRIES and await listed(clock, events) == []


async def test_repeats_queue_behind_a_retrying_write_without_waiting_and_land_in_order(away):
    """A repeat of an Event whose write is retrying returns at once; once the server is back the
    first write creates the Event and the repeats patch it, in order."""
    clock, rec, flaky, events = away
    await rec.emit(CM, "Warning", "BackOff", "same")
    await clock.advance(0)
    for _ in range(3):
        repeat = asyncio.ensure_future(rec.emit(CM, "Warning", "BackOff", "same"))
        await clock.advance(0)  # what runs with no time passing
        assert repeat.done(), "a repeat does not wait for the retrying write"
    assert flaky.tries == 1
    flaky.down = False
    await clock.advance(2.5)
    [ev] = await listed(clock, events)
    assert ev["count"] == 4 and flaky.tries == 2 + 3  # the first write twice, then a patch per repeat


async def test_a_write_the_server_refused_is_not_tried_again(away):
    """An answer is final: here the namespace does not exist (404), upstream's StatusError case."""
    clock, rec, flaky, events = away
    flaky.down = False
    gone = {**CM, "metadata": {**CM["metadata"], "namespace": "nowhere"}}
    await rec.emit(gone, "Normal", "Synced", "done")
    await clock.advance(3600)
    assert flaky.tries == 1
    items, _ = await events.list()
    assert items == []


async def test_emit_never_waits_and_the_queue_holds_1000_writes_behind_a_retrying_one(away):
    """With the server away every emit returns at once; the writer retries the first write while
    MAX_QUEUED more wait behind it (upstream's recordToSink holds up its watcher as it sleeps), the
    one past them is dropped, and the queued ones land in order once the server is back."""
    clock, rec, flaky, events = away
    await rec.emit(other("cm0"), "Normal", "Synced", "done")
    await clock.advance(0)
    assert flaky.tries == 1
    for i in range(1, MAX_QUEUED + 2):
        await rec.emit(other(f"cm{i}"), "Normal", "Synced", "done")
    await clock.advance(0)
    assert flaky.tries == 1, "the first write is retrying; the rest wait behind it"
    flaky.down = False
    await clock.advance(2.5)
    items, _ = await events.list("default")
    assert len(items) == MAX_QUEUED + 1 and flaky.tries == 2 + MAX_QUEUED
    assert {e["involvedObject"]["name"] for e in items} == {f"cm{i}" for i in range(MAX_QUEUED + 1)}


async def test_close_drops_the_writes_still_queued_or_retrying(away):
    """The component stopping shuts the recorder down: the retrying write and those queued behind it
    are never tried again, as upstream's broadcaster Shutdown cancels its sink's writer."""
    clock, rec, flaky, events = away
    for i in range(3):
        await rec.emit(other(f"cm{i}"), "Normal", "Synced", "done")
    await clock.advance(0)
    await rec.close()
    await rec.emit(CM, "Normal", "Synced", "after close: dropped")
    flaky.down = False
    await clock.advance(3600)
    assert flaky.tries == 1
    items, _ = await events.list("default")
    assert items == []


class _HeldEvents:
    """A client whose Event writes hang (an API server that never answers them); every other
    resource is the real one."""

    def __init__(self, client) -> None:
        self.client, self.held = client, asyncio.Event()
        self.waiting = 0

    def __getattr__(self, name: str):
        return getattr(self.client, name)

    def resource(self, group: str, version: str, plural: str):
        if (group, plural) == ("", "events"):
            return self
        return self.client.resource(group, version, plural)

    async def _hang(self, *args, **kwargs):
        self.waiting += 1
        await self.held.wait()

    create = patch = _hang


async def test_a_replicaset_creates_its_pods_while_event_writes_hang():
    """The ReplicaSet controller reports SuccessfulCreate per pod; with the Event sink held it
    still creates all its pods and writes the ReplicaSet's status, as upstream's controller never
    waits for its recorder. Stopping it drops the writes left hanging."""
    s = await make_stack()
    held = _HeldEvents(s.client)
    ctrl = ReplicaSetController(held)
    await ctrl.start()
    try:
        rs = s.client.resource("apps", "v1", "replicasets")
        labels = {"app": "held"}
        await rs.create({"metadata": {"name": "held", "namespace": "default"}, "spec": {
            "replicas": 3, "selector": {"matchLabels": labels}, "template": {
                "metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "image": "img"}]}}}})

        async def created():
            got = await rs.get("held", "default")
            return (got.get("status") or {}).get("replicas") == 3
        await eventually(created)
        pods, _ = await s.client.resource("", "v1", "pods").list("default")
        assert len(pods) == 3
        assert held.waiting == 1, "the first SuccessfulCreate hangs; the others wait behind it"
    finally:
        await ctrl.stop()
        await s.close()


async def test_an_event_of_another_type_is_dropped_as_upstreams_validate_event_type_drops_it(env):
    clock, rec, events = env
    await rec.emit(CM, "Info", "Synced", "not a type the recorder writes")
    await rec.emit(CM, "Normal", "Synced", "done")
    assert [e["type"] for e in await listed(clock, events)] == ["Normal"]


async def test_similar_events_key_on_the_reporting_instance_not_on_the_field_path(env):
    """EventAggregatorByReasonFunc's key: source, involvedObject (not its fieldPath), type, reason,
    reportingController and reportingInstance; the message is what differs. Ten messages from one
    kubelet about a pod's containers combine; another kubelet's about the pod are counted apart."""
    clock, rec, events = env
    stack_client = rec.events
    ours = CoreEventRecorder(_Resources(stack_client), "kubelet", clock, host="node-a")
    theirs = CoreEventRecorder(_Resources(stack_client), "kubelet", clock, host="node-b")
    for i in range(AGGREGATE_MAX_EVENTS - 1):
        await ours.emit(CM, "Warning", "BackOff", f"back-off {i}", field_path=f"spec.containers{{c{i}}}")
        await theirs.emit(CM, "Warning", "BackOff", f"back-off {i + 100}")
    await ours.emit(CM, "Warning", "BackOff", "back-off 9", field_path="spec.containers{c9}")
    got = await listed(clock, events)
    combined = [e for e in got if e["message"].startswith(COMBINED)]
    assert [(e["source"]["host"], e["message"]) for e in combined] == [("node-a", COMBINED + "back-off 9")]
    assert len(got) == 2 * (AGGREGATE_MAX_EVENTS - 1) + 1


class _Resources:
    """A client handing out one resource client: the Events' of the stack."""

    def __init__(self, events) -> None:
        self.events = events

    def resource(self, group: str, version: str, plural: str):
        return self.events
