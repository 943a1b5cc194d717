import pytest

from nanokube.scheduler.dra.allocator import AllocatedDevices, AllocationError, Allocator, SearchLimitExceeded
from nanokube.scheduler.dra.pools import PoolIndex

GPU, NIC = "gpu.example.com", "nic.example.com"
NODE = {"metadata": {"name": "n1", "labels": {"zone": "a"}}}


def cls(name, driver, config=None):
    spec = {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]}
    if config:
        spec["config"] = [{"opaque": {"driver": driver, "parameters": config}}]
    return {"metadata": {"name": name}, "spec": spec}


CLASSES = {"gpu": cls("gpu", GPU, {"mode": "x"}), "nic": cls("nic", NIC)}


def dev(name, **attrs):
    out = {"name": name, "attributes": {k: v for k, v in attrs.items() if not k.startswith("_")}}
    for k in ("_capacity", "_taints", "_counters", "_multi"):
        if k in attrs:
            out[{"_capacity": "capacity", "_taints": "taints", "_counters": "consumesCounters",
                 "_multi": "allowMultipleAllocations"}[k]] = attrs[k]
    return out


def rslice(driver, devices, pool="p1", gen=1, count=1, node="n1", **extra):
    spec = {"driver": driver, "pool": {"name": pool, "generation": gen, "resourceSliceCount": count},
            "devices": devices, **extra}
    if node and "nodeSelector" not in extra and "allNodes" not in extra:
        spec["nodeName"] = node
    return {"metadata": {"name": f"{driver}-{pool}-{gen}-{len(devices)}"}, "spec": spec}


def claim(*requests, constraints=(), config=()):
    return {"metadata": {"namespace": "default", "name": "c"},
            "spec": {"devices": {"requests": list(requests), "constraints": list(constraints), "config": list(config)}}}


def exactly(name, cls_name="gpu", **kw):
    return {"name": name, "exactly": {"deviceClassName": cls_name, **kw}}


def cel(expr):
    return {"cel": {"expression": expr}}


def run(slices, claims, rules=(), allocated=None, classes=CLASSES, **kw):
    a = Allocator(classes, PoolIndex(slices, list(rules)), allocated or AllocatedDevices(),
                  new_share_id=lambda: "share-1", **kw)
    return a.allocate(NODE, claims)


def picked(result):
    return [(r["request"], r["device"]) for r in result["devices"]["results"]]


GPUS = [dev(f"gpu-{i}", model={"string": "a100" if i < 2 else "h100"}, pcieRoot={"string": f"pci-{i % 2}"})
        for i in range(4)]
NICS = [dev("nic-0", pcieRoot={"string": "pci-1"}), dev("nic-1", pcieRoot={"string": "pci-3"})]


@pytest.mark.parametrize("name,requests,want", [
    ("exact-count", [exactly("g", count=2)], [("g", "gpu-0"), ("g", "gpu-1")]),
    ("request-selector", [exactly("g", selectors=[cel(f'device.attributes["{GPU}"].model == "h100"')])],
     [("g", "gpu-2")]),
    ("all-mode", [exactly("g", allocationMode="All")], [("g", f"gpu-{i}") for i in range(4)]),
    ("first-available-fallback", [{"name": "g", "firstAvailable": [
        {"name": "big", "deviceClassName": "gpu", "count": 5},
        {"name": "small", "deviceClassName": "gpu", "count": 1}]}], [("g/small", "gpu-0")]),
    ("too-many", [exactly("g", count=5)], None),
])
def test_requests(name, requests, want):
    out = run([rslice(GPU, GPUS)], [claim(*requests)])
    assert (picked(out[0]) if out else None) == want


def test_match_attribute_forces_gpu_nic_on_same_pcie_root():
    c = claim(exactly("g"), exactly("n", "nic"),
              constraints=[{"requests": ["g", "n"], "matchAttribute": f"{GPU}/pcieRoot"}])
    # the NIC attribute is in its own driver's domain, so pcieRoot must be qualified identically
    nics = [dev("nic-0", **{f"{GPU}/pcieRoot": {"string": "pci-1"}})]
    out = run([rslice(GPU, GPUS), rslice(NIC, nics)], [c])
    assert picked(out[0]) == [("g", "gpu-1"), ("n", "nic-0")]


def test_match_attribute_without_solution_and_distinct():
    c = claim(exactly("g", count=3), constraints=[{"matchAttribute": f"{GPU}/model"}])
    assert run([rslice(GPU, GPUS)], [c]) is None
    c = claim(exactly("g", count=2), constraints=[{"distinctAttribute": f"{GPU}/pcieRoot"}])
    assert picked(run([rslice(GPU, GPUS)], [c])[0]) == [("g", "gpu-0"), ("g", "gpu-1")]
    c = claim(exactly("g", count=2), constraints=[{"matchAttribute": f"{GPU}/model"},
                                                  {"distinctAttribute": f"{GPU}/pcieRoot"}])
    assert picked(run([rslice(GPU, GPUS[1:])], [c])[0]) == [("g", "gpu-2"), ("g", "gpu-3")]


def test_allocated_devices_are_unavailable_and_all_mode_fails_on_them():
    taken = AllocatedDevices({(GPU, "p1", "gpu-0"): 1})
    assert picked(run([rslice(GPU, GPUS)], [claim(exactly("g"))], allocated=taken)[0]) == [("g", "gpu-1")]
    assert run([rslice(GPU, GPUS)], [claim(exactly("g", allocationMode="All"))], allocated=taken) is None
    admin = run([rslice(GPU, GPUS)], [claim(exactly("g", adminAccess=True))], allocated=taken)
    assert admin[0]["devices"]["results"][0] == {"request": "g", "driver": GPU, "pool": "p1", "device": "gpu-0",
                                                 "adminAccess": True}


def test_latest_generation_and_incomplete_pool():
    old = rslice(GPU, GPUS, gen=1)
    new = rslice(GPU, [dev("gpu-9")], gen=2, count=2)
    out = run([old, new], [claim(exactly("g"))])
    assert picked(out[0]) == [("g", "gpu-9")]  # ExactCount may use an incomplete pool
    with pytest.raises(AllocationError, match=f"asks for all devices, but resource pool {GPU}/p1 is currently being updated"):
        run([old, new], [claim(exactly("g", allocationMode="All"))])
    dup = rslice(GPU, [dev("gpu-0"), dev("gpu-0")])
    with pytest.raises(AllocationError, match="is currently invalid"):
        run([dup], [claim(exactly("g", allocationMode="All"))])
    assert run([dup], [claim(exactly("g"))]) is None


def test_node_selection_and_allocation_node_selector():
    sel = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}
    other = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}]}
    out = run([rslice(GPU, [dev("g0")], node=None, nodeSelector=sel)], [claim(exactly("g"))])
    assert out[0]["nodeSelector"] == sel
    out = run([rslice(GPU, [dev("g0")], node=None, allNodes=True)], [claim(exactly("g"))])
    assert "nodeSelector" not in out[0]
    out = run([rslice(GPU, GPUS)], [claim(exactly("g"))])
    assert out[0]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"] == ["n1"]
    assert run([rslice(GPU, [dev("g0")], node=None, nodeSelector=other)], [claim(exactly("g"))]) is None
    assert run([rslice(GPU, [dev("g0")], node="n2")], [claim(exactly("g"))]) is None
    per = {**dev("g1"), "nodeName": "n1"}
    out = run([rslice(GPU, [{**dev("g0"), "nodeName": "n2"}, per], node=None, perDeviceNodeSelection=True)],
              [claim(exactly("g"))])
    assert picked(out[0]) == [("g", "g1")]


TAINT = {"key": "broken", "value": "yes"}


@pytest.mark.parametrize("effect,tolerations,usable", [
    ("NoSchedule", [], False),
    ("NoExecute", [], False),
    ("None", [], True),
    ("NoSchedule", [{"key": "broken", "operator": "Exists"}], True),
    ("NoExecute", [{"key": "broken", "value": "yes", "effect": "NoExecute"}], True),
    ("NoSchedule", [{"key": "broken", "operator": "Exists", "effect": "NoExecute"}], False),
    ("NoExecute", [{"key": "broken", "value": "no"}], False),
])
def test_taints(effect, tolerations, usable):
    devices = [dev("gpu-0", _taints=[{**TAINT, "effect": effect}])]
    req = exactly("g", tolerations=tolerations) if tolerations else exactly("g")
    out = run([rslice(GPU, devices)], [claim(req)])
    assert (out is not None) == usable
    if out and tolerations:
        assert out[0]["devices"]["results"][0]["tolerations"] == tolerations


def test_device_taint_rule_taints_whole_pool():
    rule = {"spec": {"deviceSelector": {"driver": GPU, "pool": "p1"}, "taint": {**TAINT, "effect": "NoSchedule"}}}
    assert run([rslice(GPU, GPUS)], [claim(exactly("g"))], rules=[rule]) is None
    rule_other = {"spec": {"deviceSelector": {"pool": "p2"}, "taint": {**TAINT, "effect": "NoSchedule"}}}
    assert run([rslice(GPU, GPUS)], [claim(exactly("g"))], rules=[rule_other]) is not None
    nil_selector = {"spec": {"taint": {**TAINT, "effect": "NoExecute"}}}
    assert run([rslice(GPU, GPUS)], [claim(exactly("g"))], rules=[nil_selector]) is not None


def mig_slices():
    counters = {"name": "gpu-0-mem", "counters": {"memory": {"value": "40Gi"}}}
    parts = [dev("whole", kind={"string": "whole"}, _counters=[{"counterSet": "gpu-0-mem", "counters": {"memory": {"value": "40Gi"}}}]),
             *[dev(f"half-{i}", _counters=[{"counterSet": "gpu-0-mem", "counters": {"memory": {"value": "20Gi"}}}])
               for i in range(2)]]
    return [rslice(GPU, [], count=2, sharedCounters=[counters]) | {"metadata": {"name": "counters"}},
            rslice(GPU, parts, count=2)]


def test_shared_counters_partitions():
    out = run(mig_slices(), [claim(exactly("g", count=2))])
    assert picked(out[0]) == [("g", "half-0"), ("g", "half-1")]
    assert run(mig_slices(), [claim(exactly("g", count=3))]) is None
    is_whole = [cel('"kind" in device.attributes["gpu.example.com"]')]
    out = run(mig_slices(), [claim(exactly("w", selectors=is_whole))])
    assert picked(out[0]) == [("w", "whole")]
    # the whole GPU and a half together would need 60Gi of 40Gi
    assert run(mig_slices(), [claim(exactly("w", selectors=is_whole), exactly("h"))]) is None
    taken = AllocatedDevices({(GPU, "p1", "half-0"): 1})
    assert picked(run(mig_slices(), [claim(exactly("g"))], allocated=taken)[0]) == [("g", "half-1")]
    assert run(mig_slices(), [claim(exactly("w", selectors=is_whole))], allocated=taken) is None


def test_consumable_capacity_shares_a_device():
    nic = dev("nic-0", _multi=True, _capacity={"bandwidth": {"value": "10G", "requestPolicy": {
        "default": "1G", "validRange": {"min": "1G", "step": "1G", "max": "10G"}}}})
    req = exactly("n", "nic", capacity={"requests": {"bandwidth": "2500M"}})
    out = run([rslice(NIC, [nic])], [claim(req)])
    r = out[0]["devices"]["results"][0]
    assert r["consumedCapacity"] == {"bandwidth": "3G"} and r["shareID"] == "share-1"
    prior = AllocatedDevices()
    prior.add({"devices": {"results": [{"driver": NIC, "pool": "p1", "device": "nic-0", "shareID": "x",
                                        "consumedCapacity": {"bandwidth": "8G"}}]}})
    assert run([rslice(NIC, [nic])], [claim(req)], allocated=prior) is None
    two = run([rslice(NIC, [nic])], [claim(exactly("a", "nic"), exactly("b", "nic"))])
    assert [r["consumedCapacity"] for r in two[0]["devices"]["results"]] == [{"bandwidth": "1G"}] * 2


def test_config_copied_from_class_then_claim():
    c = claim(exactly("g"), config=[{"requests": ["g"], "opaque": {"driver": GPU, "parameters": {"a": 1}}}])
    out = run([rslice(GPU, GPUS)], [c])
    assert out[0]["devices"]["config"] == [
        {"source": "FromClass", "requests": ["g"], "opaque": {"driver": GPU, "parameters": {"mode": "x"}}},
        {"source": "FromClaim", "requests": ["g"], "opaque": {"driver": GPU, "parameters": {"a": 1}}}]


def test_several_claims_do_not_share_devices():
    out = run([rslice(GPU, GPUS[:2])], [claim(exactly("g")), claim(exactly("g"))])
    assert [picked(o) for o in out] == [[("g", "gpu-0")], [("g", "gpu-1")]]
    assert run([rslice(GPU, GPUS[:1])], [claim(exactly("g")), claim(exactly("g"))]) is None


@pytest.mark.parametrize("requests,err", [
    ([exactly("g", "missing")], 'claim default/c, request g: could not retrieve device class missing: '
                                'deviceclass.resource.k8s.io "missing" not found'),
    ([exactly("g", selectors=[cel('device.attributes["gpu.example.com"].nope == 1')])],
     "claim default/c, request g: selector #0: CEL runtime error: no such key: nope"),
    ([exactly("g", selectors=[cel("device.driver")])], "must evaluate to bool"),
    ([exactly("g", selectors=[cel("device.driver ==")])], "selector #0: CEL compile error: compilation failed"),
])
def test_errors(requests, err):
    with pytest.raises(AllocationError, match=err.replace(".", r"\.").replace('"', '"')):
        run([rslice(GPU, GPUS)], [claim(*requests)])


def test_cost_limit_error_reported():
    many = [dev("gpu-0", **{f"a{i}": {"string": "x" * 40} for i in range(500)})]
    expr = f'device.attributes["{GPU}"].all(a, device.attributes["{GPU}"].all(b, a != b || true))'
    with pytest.raises(AllocationError, match="actual cost limit exceeded"):
        run([rslice(GPU, many)], [claim(exactly("g", selectors=[cel(expr)]))])


def test_search_is_bounded():
    devices = [dev(f"gpu-{i}", v={"int": i}) for i in range(30)]
    c = claim(exactly("g", count=3), constraints=[{"matchAttribute": f"{GPU}/v"}])
    with pytest.raises(SearchLimitExceeded):
        run([rslice(GPU, devices)], [c], max_steps=50)
    assert run([rslice(GPU, devices)], [c]) is None


def test_allocated_devices_counts_each_allocation_and_removes_it_again():
    gpu = {"devices": {"results": [{"driver": GPU, "pool": "p1", "device": "gpu-0"}]}}
    nic = {"devices": {"results": [{"driver": NIC, "pool": "p1", "device": "nic-0", "shareID": "x",
                                    "consumedCapacity": {"bandwidth": "2G"}}]}}
    held = AllocatedDevices()
    for alloc in (gpu, gpu, nic, nic):
        held.add(alloc)
    held.remove(gpu)
    held.remove(nic)
    assert (GPU, "p1", "gpu-0") in held.exclusive
    assert held.consumed[(NIC, "p1", "nic-0")] == {f"{NIC}/bandwidth": 2 * 10**9}
    held.remove(gpu)
    held.remove(nic)
    assert held == AllocatedDevices()


def test_a_simple_claim_fit_is_counted_and_searched_only_for_its_results():
    """One claim with one plain request: Filter's answer counts free
    candidates (no search on every node); Reserve's results search once and
    pick what the search always picked, the first free devices."""
    taken = AllocatedDevices({(GPU, "p1", "gpu-0"): 1, (GPU, "p1", "gpu-1"): 1})
    a = Allocator(CLASSES, PoolIndex([rslice(GPU, GPUS)], []), taken)
    found = a.find(NODE, [claim(exactly("g", count=2))])
    assert found is not None and found.search is None
    assert picked(a.results(found)[0]) == [("g", "gpu-2"), ("g", "gpu-3")]
    assert a.find(NODE, [claim(exactly("g", count=3))]) is None
    constrained = claim(exactly("g"), constraints=[{"matchAttribute": f"{GPU}/model"}])
    assert a.find(NODE, [constrained]).search is not None
    with pytest.raises(AllocationError, match="could not retrieve device class"):
        a.find(NODE, [claim(exactly("g", cls_name="missing"))])
