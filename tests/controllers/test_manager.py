"""The controller manager: `--controllers` selection and leading only while
holding the kube-controller-manager Lease."""

import asyncio

import pytest

from nanokube.controllers.manager import ControllerManager, build_controllers, enabled
from nanokube.metrics.provider import MetricsUnavailable
from tests.controllers import eventually, make_stack
from tests.node import ManualClock


@pytest.fixture
async def stack():
    s = await make_stack()
    await s.client.resource("", "v1", "namespaces").create({"metadata": {"name": "kube-system"}})
    yield s
    await s.close()


async def test_controllers_flag_selects_like_kube_controller_manager(stack):
    every = build_controllers(stack.client)
    # `*` leaves out those off by default (kubeadm names them: `*,bootstrapsigner,tokencleaner`)
    assert [c.name for c in every if c not in enabled(every, "*")] == ["bootstrap-signer-controller",
                                                                      "token-cleaner-controller"]
    assert len(enabled(every, "*,bootstrapsigner,tokencleaner")) == len(every)
    assert [c.name for c in enabled(every, "replicaset,deployment-controller")] == [
        "replicaset-controller", "deployment-controller"]
    left = [c.name for c in enabled(every, "*,-garbage-collector,-job-controller")]
    assert "garbage-collector-controller" not in left and "job-controller" not in left
    assert len(left) == len(every) - 4
    assert enabled(every, "") == []
    with pytest.raises(ValueError) as refused:
        enabled(every, "*,nodeipam,-nosuch")
    assert str(refused.value) == ('--controllers: "nodeipam" is not in the list of known controllers, '
                                  '"nosuch" is not in the list of known controllers')


async def test_controllers_go_by_upstream_names_and_aliases(stack):
    """cmd/kube-controller-manager/names, and the aliases its ControllerDescriptors keep."""
    every = build_controllers(stack.client)
    names = {c.name for c in every}
    assert {"deployment-controller", "replicationcontroller-controller", "garbage-collector-controller",
            "horizontal-pod-autoscaler-controller", "persistentvolumeclaim-protection-controller",
            "persistentvolume-protection-controller", "validatingadmissionpolicy-status-controller",
            "resourceclaim-controller", "endpointslice-controller"} <= names
    picked = enabled(every, "garbagecollector,horizontalpodautoscaling,pvc-protection,pv-protection,"
                            "resource-claim-controller,nodelifecycle,persistentvolume-binder")
    assert [c.name for c in picked] == [
        "garbage-collector-controller", "resourceclaim-controller", "persistentvolume-binder-controller",
        "persistentvolumeclaim-protection-controller", "persistentvolume-protection-controller",
        "horizontal-pod-autoscaler-controller", "node-lifecycle-controller"]
    assert "garbage-collector-controller" not in [c.name for c in enabled(every, "*,-garbagecollector")]


async def test_controller_queues_are_metered_under_upstream_queue_names(stack):
    """client-go's workqueue_* metrics, one `name` per controller queue as upstream names it."""
    manager = ControllerManager(stack.client, controllers="replicaset,deployment,endpointslice")
    assert {c.name: c.queue_name for c in manager.controllers} == {
        "endpointslice-controller": "endpoint_slice", "replicaset-controller": "replicaset",
        "deployment-controller": "deployment"}
    await manager.start()
    try:
        await stack.client.resource("apps", "v1", "replicasets").create(replicaset("web"))

        def sample(metric, queue):
            return manager.metrics.registry.get_sample_value(metric, {"name": queue}) or 0

        async def worked():
            return sample("workqueue_work_duration_seconds_count", "replicaset") >= 1
        await eventually(worked)
        assert sample("workqueue_adds_total", "replicaset") >= 1
        assert manager.metrics.registry.get_sample_value("workqueue_depth", {"name": "deployment"}) == 0
    finally:
        await manager.stop()


async def test_each_controller_has_a_client_named_as_upstream_names_it(stack):
    """kube-controller-manager's client builder: one client per controller, its user agent ending in the
    controller's client (service account) name; informers list and watch through 'shared-informers'."""
    manager = ControllerManager(stack.client, controllers="replicaset,garbagecollector,nodelifecycle,"
                                                          "taint-eviction-controller,horizontalpodautoscaling,daemonset")
    agents = {c.name: c.client.user_agent for c in manager.controllers}
    assert agents == {
        "replicaset-controller": "kube-controller-manager/replicaset-controller",
        "garbage-collector-controller": "kube-controller-manager/generic-garbage-collector",
        "daemonset-controller": "kube-controller-manager/daemon-set-controller",
        "horizontal-pod-autoscaler-controller": "kube-controller-manager/horizontal-pod-autoscaler",
        "node-lifecycle-controller": "kube-controller-manager/node-controller",
        "taint-eviction-controller": "kube-controller-manager/node-controller"}
    assert manager.informers.client.user_agent == "kube-controller-manager/shared-informers"
    assert stack.client.user_agent == "kube-controller-manager", "the manager's own client keeps its name"


async def test_custom_resource_informers_list_through_a_client_and_bucket_of_their_own(stack):
    """kube-controller-manager's metadata informers (ObjectOrMetadataInformerFactory): the informers of
    resources client-go has no typed informer for (the garbage collector's monitors of custom resources
    and CRDs, the quota controller's of custom resources) read through '.../metadata-informers', a
    clientset of its own: with the shared informers' burst spent on a clock that stands, theirs is whole."""
    clock = ManualClock()
    manager = ControllerManager(stack.client, clock, controllers="garbagecollector", client_limit=(2.0, 3))
    monitors = {inf.rc.res.group_resource: inf.rc for inf in manager.controllers[0].informers()}
    crds, pods = monitors["customresourcedefinitions.apiextensions.k8s.io"], monitors["pods"]
    assert crds.owner.user_agent == "kube-controller-manager/metadata-informers"
    assert pods.owner.user_agent == "kube-controller-manager/shared-informers"
    for _ in range(3):
        await pods.list()
    assert pods.owner.bucket.reserve() > 0, "the shared informers' burst is spent: a fourth request waits"
    assert crds.owner.bucket.reserve() == 0, "the metadata informers' request goes at once"


def replicaset(name):
    labels = {"app": name}
    return {"metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": 2, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}}


async def test_only_the_lease_holder_acts_and_a_standby_takes_over(stack):
    clock = ManualClock()
    clock.t = stack.rest.clock.now()
    a = ControllerManager.elected(stack.client, "a", clock, controllers="replicaset")
    b = ControllerManager.elected(stack.client, "b", clock, controllers="replicaset")
    await a.start()
    await asyncio.wait_for(a.started.wait(), 5)
    await b.start()
    for _ in range(3):
        await clock.advance(2)
    assert not b.started.is_set(), "the standby waits while a renews"
    lease = await stack.client.resource("coordination.k8s.io", "v1", "leases").get("kube-controller-manager",
                                                                                   "kube-system")
    assert lease["spec"]["holderIdentity"] == "a"

    pods = stack.client.resource("", "v1", "pods")
    await stack.client.resource("apps", "v1", "replicasets").create(replicaset("web"))

    async def two_pods():
        items, _ = await pods.list("default")
        return len(items) == 2
    await eventually(two_pods)

    await a.stop()
    for _ in range(3):
        await clock.advance(2)
    await asyncio.wait_for(b.started.wait(), 5)
    await stack.client.resource("apps", "v1", "replicasets").patch("web", {"spec": {"replicas": 3}},
                                                                  namespace="default")

    async def three_pods():
        items, _ = await pods.list("default")
        return len(items) == 3
    await eventually(three_pods)
    await b.stop()


async def test_controllers_share_one_pod_watch_and_stop_it_with_the_term(stack, monkeypatch):
    """kube-controller-manager's shared informers: six controllers that watch pods open one pod watch."""
    from nanokube.apiserver.loopback import ResourceClient
    watches: list[str] = []
    watch = ResourceClient.watch

    async def counted(self, *a, **kw):
        watches.append(self.res.plural)
        return await watch(self, *a, **kw)
    monkeypatch.setattr(ResourceClient, "watch", counted)
    manager = ControllerManager(stack.client, controllers="replicaset,job,statefulset,daemonset,disruption,endpointslice")
    await manager.start()
    assert watches.count("pods") == 1
    assert len(watches) == len(set(watches)), "one watch per resource"
    await stack.client.resource("apps", "v1", "replicasets").create(replicaset("web"))

    async def two_pods():
        items, _ = await stack.client.resource("", "v1", "pods").list("default")
        return len(items) == 2
    await eventually(two_pods)
    running = stack.cache.watcher_count
    await manager.stop()
    assert stack.cache.watcher_count == running - len(watches), "the manager stops the shared informers"


async def test_a_term_cut_short_while_its_controllers_start_stops_those_started(stack):
    """Stopping a leader while its controllers are still starting stops the ones already running and
    the shared informers (the stop sat after the start in `_lead`, so a cancelled start skipped it)."""
    clock = ManualClock()
    clock.t = stack.rest.clock.now()
    manager = ControllerManager.elected(stack.client, "a", clock, controllers="replicaset,deployment")
    first, second = manager.controllers
    starting = asyncio.Event()

    async def hang():
        starting.set()
        await asyncio.Event().wait()
    second.start = hang
    watchers = stack.cache.watcher_count
    await manager.start()
    await asyncio.wait_for(starting.wait(), 5)
    assert first._tasks and stack.cache.watcher_count > watchers, "the first controller runs"
    await manager.stop()
    assert all(t.done() for t in first._tasks), "its workers are stopped"
    assert stack.cache.watcher_count == watchers, "and the term's informers"
    assert not manager.started.is_set()


async def test_the_hpas_metrics_apis_are_read_through_a_clientset_and_bucket_each(stack):
    """startHPAControllerWithRESTClient builds the resource, custom and external metrics clientsets from
    the HPA's client config, each a token bucket of its own at the manager's limit: a burst of
    resource metrics reads leaves an External metric's read free to go."""
    clock = ManualClock()
    clock.t = stack.rest.clock.now()
    hpa = ControllerManager(stack.client, clock, controllers="horizontal-pod-autoscaler-controller",
                            client_limit=(2.0, 3)).controllers[0]
    m = hpa.metrics_client
    apis = (m.resource_api, m.custom_api, m.external_api)
    assert len({id(c.bucket) for c in (*apis, hpa.client)}) == 4
    assert {(c.bucket.qps, c.bucket.burst, c.user_agent) for c in apis} == {
        (2.0, 3, "kube-controller-manager/horizontal-pod-autoscaler")}
    for _ in range(3):
        with pytest.raises(MetricsUnavailable):  # no pods' metrics, but the read is made
            await m.resource_metric("default", "app=web", "cpu")
    assert m.resource_api.bucket.reserve() > 0, "the resource metrics clientset's burst is spent"
    assert m.external_api.bucket.reserve() == 0, "the external one's is its own"


async def test_each_controllers_client_waits_for_its_own_token_bucket(stack):
    """--kube-api-qps/--kube-api-burst: each controller's client is a clientset of its own with a token
    bucket on the manager's clock (client-go's), so a ReplicaSet of ten creates its pods no faster than
    the limit lets its controller; the other controllers' and the shared informers' buckets are others."""
    clock = ManualClock()
    clock.t = stack.rest.clock.now()
    # the namespace controller's own: 20 times the qps, 100 times the burst (startNamespaceController), for
    # its typed clientset and for the metadata client that lists and deletes the contents, each a bucket
    ns = ControllerManager(stack.client, clock, controllers="namespace", client_limit=(2.0, 3)).controllers[0]
    contents = dict(ns._namespaced())["pods."].owner
    assert (ns.client.bucket.qps, ns.client.bucket.burst) == (contents.bucket.qps, contents.bucket.burst) == (40.0, 300)
    assert contents.bucket is not ns.client.bucket and contents.user_agent == ns.client.user_agent
    # the garbage collector's twice the qps (each collection two requests: startGarbageCollectorController);
    # its Events through a clientset at the manager's limit, as its recorder's upstream
    gc = ControllerManager(stack.client, clock, controllers="garbagecollector", client_limit=(2.0, 3)).controllers[0]
    assert (gc.client.bucket.qps, gc.client.bucket.burst) == (4.0, 3)
    events = gc.recorder.events.owner
    assert (events.bucket.qps, events.bucket.burst) == (2.0, 3)
    assert events.user_agent == gc.client.user_agent == "kube-controller-manager/generic-garbage-collector"
    manager = ControllerManager(stack.client, clock, controllers="replicaset,deployment", client_limit=(2.0, 3))
    buckets = [c.client.bucket for c in manager.controllers]
    assert len({id(b) for b in [*buckets, manager.informers.client.bucket]}) == 3
    await manager.start()
    pods = stack.client.resource("", "v1", "pods")
    await stack.client.resource("apps", "v1", "replicasets").create({**replicaset("web"), "spec": {
        **replicaset("web")["spec"], "replicas": 10}})

    async def created_at_least(n):
        return await created() >= n

    async def created():
        items, _ = await pods.list("default")
        return len(items)
    # the burst of three (a request or two of the sync's besides its creates); then none while the clock stands
    await eventually(lambda: created_at_least(2))
    await asyncio.sleep(0.2)
    assert await created() <= 3, "no token, no request, however long the frozen clock waits"
    # then two a second of the manager's clock: ten creates take 3.5 s at least
    elapsed = 0.0
    while (n := await created()) < 10 and elapsed < 30:
        assert n <= 3 + 2 * elapsed, (n, elapsed)
        await clock.advance(0.5)
        elapsed += 0.5
        await asyncio.sleep(0.02)
    assert n == 10 and elapsed >= 3.5, (n, elapsed)
    await manager.stop()
