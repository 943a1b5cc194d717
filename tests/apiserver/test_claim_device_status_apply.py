"""A DRA driver reports its devices' status by server-side apply of the claim's /status, naming
each device by driver, pool and device only (dranet's and the NVIDIA driver's way; upstream's
integration test does the same): status.devices is a map list keyed also by shareID, which an
allocation without shares leaves out. The typed apply refused every such entry ("omits key field
shareID"); a key neither required nor defaulted may be left out, as structured-merge-diff's
optional map keys, and the entry is keyed by the others."""

from __future__ import annotations

import pytest
from kubernetes.client.rest import ApiException

from tests.apiserver.test_rest_managedfields import call
from tests.served import served

CLAIMS = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims"
APPLY = "application/apply-patch+yaml"


def _status(*devices: dict) -> dict:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "c", "namespace": "default"}, "status": {"devices": list(devices)}}


def _device(driver: str, interface: str) -> dict:
    return {"driver": driver, "pool": "global", "device": "dev", "networkData": {"interfaceName": interface}}


def _stored(driver: str, interface: str) -> dict:
    """As served: conditions has no omitempty in the Go type, so a nil list is a null."""
    return {**_device(driver, interface), "conditions": None}


async def test_drivers_apply_device_status_without_a_share_id(tmp_path):
    async with served(tmp_path) as (_, c):
        claim = await call(c, "POST", CLAIMS, {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                                               "metadata": {"name": "c"}, "spec": {"devices": {"requests": [
                                                   {"name": "r", "exactly": {"deviceClassName": "x"}}]}}})
        claim["status"] = {"allocation": {"devices": {"results": [
            {"request": "r", "driver": d, "pool": "global", "device": "dev"} for d in ("one.example.com", "two.example.com")]}}}
        await call(c, "PUT", f"{CLAIMS}/c/status", claim)

        await call(c, "PATCH", f"{CLAIMS}/c/status", _status(_device("one.example.com", "net-1")),
                   "driver-one", APPLY, force=True)
        out = await call(c, "PATCH", f"{CLAIMS}/c/status", _status(_device("two.example.com", "net-2")),
                         "driver-two", APPLY, force=True)
        assert out["status"]["devices"] == [_stored("one.example.com", "net-1"), _stored("two.example.com", "net-2")]
        owned = {m["manager"]: m["fieldsV1"] for m in out["metadata"]["managedFields"] if m["operation"] == "Apply"}
        assert owned["driver-two"] == {"f:status": {"f:devices": {
            'k:{"device":"dev","driver":"two.example.com","pool":"global"}': {
                ".": {}, "f:device": {}, "f:driver": {}, "f:networkData": {"f:interfaceName": {}},
                "f:pool": {}}}}}

        # one driver updates its entry, the other withdraws its own
        await call(c, "PATCH", f"{CLAIMS}/c/status", _status(_device("one.example.com", "net-9")),
                   "driver-one", APPLY, force=True)
        out = await call(c, "PATCH", f"{CLAIMS}/c/status", _status(), "driver-two", APPLY, force=True)
        assert out["status"]["devices"] == [_stored("one.example.com", "net-9")]

        # a required key still may not be left out
        with pytest.raises(ApiException) as e:
            await call(c, "PATCH", f"{CLAIMS}/c/status",
                       _status({"driver": "one.example.com", "device": "dev"}), "driver-one", APPLY, force=True)
        assert e.value.status == 400
        assert 'omits key field \\"pool\\"' in e.value.body
