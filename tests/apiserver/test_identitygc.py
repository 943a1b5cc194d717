"""The identity Lease garbage collector: an API server that died (kill -9, a host gone) leaves its
`apiserver-<hash>` Lease behind; the servers left delete it once it expired, at start and hourly,
and keep the Leases still renewed and every Lease without the identity label."""

from types import SimpleNamespace

from nanokube.apiserver.identitygc import GC_PERIOD, IdentityLeaseGC
from tests.node import api_on_manual_clock

IDENTITY = {"apiserver.kubernetes.io/identity": "kube-apiserver"}


def lease(name: str, clock, renewed_ago: float | None, duration: int = 3600, labels: dict = IDENTITY) -> dict:
    spec = {"holderIdentity": f"{name}_holder", "leaseDurationSeconds": duration}
    if renewed_ago is not None:
        spec["renewTime"] = clock.rfc3339_micro(clock.now() - renewed_ago)
    return {"metadata": {"name": name, "namespace": "kube-system", "labels": labels}, "spec": spec}


async def test_expired_identity_leases_are_deleted_at_start_and_every_hour():
    async with api_on_manual_clock() as (s, clock):
        await s.client.resource("", "v1", "namespaces").create({"metadata": {"name": "kube-system"}})
        leases = s.client.resource("coordination.k8s.io", "v1", "leases")
        for body in (lease("apiserver-dead", clock, renewed_ago=3601),
                     lease("apiserver-unrenewed", clock, renewed_ago=None),
                     lease("apiserver-live", clock, renewed_ago=5),
                     lease("apiserver-later", clock, renewed_ago=1800),
                     lease("kube-scheduler", clock, renewed_ago=3601, duration=15, labels={})):
            await leases.create(body, "kube-system")
        gc = IdentityLeaseGC(SimpleNamespace(rest=s.rest, index=s.rest.index, clock=clock))
        await gc.start()
        try:
            await clock.advance(0)
            names = {item["metadata"]["name"] for item in (await leases.list("kube-system"))[0]}
            assert names == {"apiserver-live", "apiserver-later", "kube-scheduler"}
            await clock.advance(GC_PERIOD - 60)  # apiserver-live's server renews it; apiserver-later's is gone
            await leases.patch("apiserver-live", {"spec": {"renewTime": clock.rfc3339_micro()}}, namespace="kube-system")
            await clock.advance(60)
            names = {item["metadata"]["name"] for item in (await leases.list("kube-system"))[0]}
            assert names == {"apiserver-live", "kube-scheduler"}
        finally:
            await gc.stop()
