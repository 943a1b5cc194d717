"""ResourcePoolStatusRequest answers from slices, claims and taint rules, and its registry rules."""

import pytest

from nanokube.controllers.resourcepoolstatusrequest import IncompletePools, pool_status
from nanokube.registry.base import all_resources

NOW = "2026-01-01T00:00:00Z"
RES = next(r for r in all_resources() if r.plural == "resourcepoolstatusrequests")


def rslice(pool, node, devices, generation=1, count=1, driver="gpu.example.com"):
    return {"spec": {"driver": driver, "nodeName": node, "pool": {"name": pool, "generation": generation,
                                                                  "resourceSliceCount": count},
                     "devices": [{"name": d, **({"taints": [{"key": "k", "effect": "NoSchedule"}]} if d.endswith("!") else {})}
                                 for d in devices]}}


def claim(pool, device, admin=False, driver="gpu.example.com"):
    return {"status": {"allocation": {"devices": {"results": [
        {"driver": driver, "pool": pool, "device": device, "request": "r", **({"adminAccess": True} if admin else {})}]}}}}


def test_counts_per_pool():
    slices = [rslice("node-a", "node-a", ["g0", "g1", "g2!"]), rslice("node-b", "node-b", ["g0", "g1"], generation=1),
              rslice("node-b", "node-b", ["g0", "g1", "g2", "g3"], generation=2),
              rslice("other", "node-c", ["x"], driver="nic.example.com")]
    claims = [claim("node-a", "g0"), claim("node-a", "g0"), claim("node-a", "g1", admin=True)]
    rules = [{"spec": {"deviceSelector": {"driver": "gpu.example.com", "pool": "node-b", "device": "g3"},
                       "taint": {"key": "k", "effect": "NoExecute"}}}]
    status = pool_status({"driver": "gpu.example.com", "limit": 100}, slices, claims, rules, NOW)
    assert status["poolCount"] == 2
    assert status["pools"] == [
        {"driver": "gpu.example.com", "poolName": "node-a", "generation": 1, "nodeName": "node-a", "resourceSliceCount": 1,
         "totalDevices": 3, "allocatedDevices": 1, "availableDevices": 1, "unavailableDevices": 1},
        {"driver": "gpu.example.com", "poolName": "node-b", "generation": 2, "nodeName": "node-b", "resourceSliceCount": 1,
         "totalDevices": 4, "allocatedDevices": 0, "availableDevices": 3, "unavailableDevices": 1}]
    assert status["conditions"][0]["message"] == "Calculated status for 2 pools"
    one = pool_status({"driver": "gpu.example.com", "limit": 1}, slices, [], [], NOW)
    assert one["poolCount"] == 2 and [p["poolName"] for p in one["pools"]] == ["node-a"]


def test_incomplete_pool_is_retried():
    with pytest.raises(IncompletePools, match="PoolIncomplete: pool gpu.example.com/p is incomplete: observed 1/2"):
        pool_status({"driver": "gpu.example.com"}, [rslice("p", "n", ["a"], count=2)], [], [], NOW)


def test_request_validation():
    req = {"metadata": {"name": "q"}, "spec": {"driver": "gpu.example.com"}}
    RES.strategy.default(req, "v1alpha3")
    assert req["spec"]["limit"] == 100 and RES.validate_create(req) == []
    bad = {"metadata": {"name": "q"}, "spec": {"driver": "GPU", "limit": 5000, "poolName": "a//b"}}
    assert [e.field for e in RES.validate_create(bad)] == ["spec.driver", "spec.poolName", "spec.limit"]
    answered = {**req, "status": {"poolCount": 0}}
    assert [e.field for e in RES.strategy.validate_status_update({**req, "status": {"poolCount": 1}}, answered)] == ["status"]
