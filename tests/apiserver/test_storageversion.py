"""The API server's identity Lease and StorageVersions are written from copies: the update sets
the body's metadata, and a body built on the cached object changed what every informer holds."""

import copy
from types import SimpleNamespace

from nanokube.apiserver.storageversion import APIServerIdentity
from tests.controllers import make_stack
from tests.node import ManualClock


async def test_renewing_the_identity_lease_leaves_the_cached_lease_as_it_was():
    s = await make_stack()
    try:
        await s.client.resource("", "v1", "namespaces").create({"metadata": {"name": "kube-system"}})
        clock = ManualClock()
        s.rest.clock = clock
        ident = APIServerIdentity(SimpleNamespace(rest=s.rest, index=s.rest.index, clock=clock), "host")
        await ident._renew()
        leases = s.client.resource("coordination.k8s.io", "v1", "leases")
        before = await leases.get(ident.id, "kube-system")
        snapshot = copy.deepcopy(before)
        clock.t += 10
        await ident._renew()
        after = await leases.get(ident.id, "kube-system")
        assert after["spec"]["renewTime"] != snapshot["spec"]["renewTime"]
        assert before == snapshot
    finally:
        await s.close()
