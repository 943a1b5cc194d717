"""The cache's per-node index of pods with inter-pod terms, and the reuse
of an assumed pod's PodInfo once its binding is seen."""

from nanokube.scheduler.cache import Cache
from nanokube.scheduler.framework import PodInfo
from tests.scheduler import info, node, node_info, pod

ANTI = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "zone"}]}}
PREFERRED = {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
    {"weight": 1, "podAffinityTerm": {"labelSelector": {}, "topologyKey": "zone"}}]}}


def test_node_info_indexes_pods_with_affinity_terms():
    ni = node_info(node("n"), pod("plain"), pod("anti", affinity=ANTI), pod("pref", affinity=PREFERRED))
    assert set(ni.affinity_pods) == {"uid-anti", "uid-pref"}
    assert set(ni.anti_affinity_pods) == {"uid-anti"}
    copy = ni.clone()
    ni.remove_pod("uid-anti")
    assert set(ni.affinity_pods) == {"uid-pref"} and not ni.anti_affinity_pods
    assert set(copy.anti_affinity_pods) == {"uid-anti"}


def test_binding_seen_reuses_the_assumed_pod_info_unless_requests_changed():
    cache = Cache()
    cache.add_node(node("n"))
    assumed = info(pod("p", "1", "1Gi"))
    cache.assume(assumed, "n")
    assert cache.assumed_info("uid-p") is assumed
    bound = pod("p", "1", "1Gi", nodeName="n")
    assert assumed.same_requests(bound)
    resized = pod("p", "2", "1Gi", nodeName="n")
    assert not assumed.same_requests(resized)
    other = info(pod("p", "1", "1Gi"))
    other.update(resized)
    assert other.requests.milli_cpu == 2000
    cache.add_pod(PodInfo(bound, 0.0), "n")
    assert cache.assumed_info("uid-p") is None and cache.infos["n"].requested.milli_cpu == 1000
