"""The admission configuration read once and kept until one of its objects changes."""

import orjson

from nanokube.apiserver.admission.source import ConfigSource
from nanokube.apiserver.cache import WatchCache
from nanokube.apiserver.rest import GenericREST, ResourceIndex
from nanokube.clock import Clock
from nanokube.registry.base import all_resources
from nanokube.store.memory import MemoryStore

PREFIX = "/registry/validatingadmissionpolicies.admissionregistration.k8s.io/"


async def test_configuration_is_rebuilt_only_after_a_change_or_a_relist():
    store = MemoryStore()
    cache = WatchCache(store)
    await store.start()
    await cache.start()
    try:
        source = ConfigSource(GenericREST(store, cache, ResourceIndex(all_resources()), Clock()))
        builds = []

        def names():
            builds.append(1)
            return [o["metadata"]["name"] for o in source.objects("validatingadmissionpolicies")]

        assert source.derived("names", names) == [] and source.derived("names", names) == []
        assert len(builds) == 1
        assert not source.configured()
        obj = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
               "metadata": {"name": "p"}, "spec": {}}
        kv = await store.create(PREFIX + "p", orjson.dumps(obj))
        await cache.wait_for(kv.mod_revision)
        assert source.derived("names", names) == ["p"] and source.derived("names", names) == ["p"]
        assert len(builds) == 2
        assert source.configured(), "a policy, even unbound, is configuration: dispatch runs again"
        await cache._relist()  # what the cache does when the store's history is compacted under it
        assert source.derived("names", names) == ["p"] and len(builds) == 3
        other = await store.create("/registry/configmaps/default/c", b'{"metadata":{"name":"c"}}')
        await cache.wait_for(other.mod_revision)  # other resources' writes leave the configuration alone
        assert source.derived("names", names) == ["p"] and len(builds) == 3
        kv = await store.create(PREFIX + "q", orjson.dumps({**obj, "metadata": {"name": "q"}}))
        await cache.wait_for(kv.mod_revision)  # and after a relist, changes are seen again
        assert source.derived("names", names) == ["p", "q"]
    finally:
        await cache.stop()
        await store.close()
