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


def test_counters_are_ints_where_integral_and_exact_where_not():
    """A search takes the counters of every device other claims hold on its node: integral values are ints
    (C-level arithmetic), the others keep their exact value (two halves of a counter of 1 fill it)."""
    [pool] = [p for p in PoolIndex(mig_slices(), []).pools if p.devices]
    assert {type(v) for v in pool.counters["gpu-0-mem"].values()} == {int}
    assert {type(v) for d in pool.devices for _, c in d.consumes for v in c.values()} == {int}
    one = {"name": "c", "counters": {"x": {"value": "1"}}}
    halves = [dev(f"h-{i}", _counters=[{"counterSet": "c", "counters": {"x": {"value": "500m"}}}]) for i in range(3)]
    slices = [rslice(GPU, [], count=2, sharedCounters=[one]) | {"metadata": {"name": "counters"}},
              rslice(GPU, halves, count=2)]
    assert picked(run(slices, [claim(exactly("g", count=2))])[0]) == [("g", "h-0"), ("g", "h-1")]
    assert run(slices, [claim(exactly("g", count=3))]) is None
    taken = AllocatedDevices({(GPU, "p1", "h-0"): 1})
    assert picked(run(slices, [claim(exactly("g"))], allocated=taken)[0]) == [("g", "h-1")]
    assert run(slices, [claim(exactly("g", count=2))], allocated=taken) is None


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
     "claim default/c: selector #0: CEL runtime error: no such key: nope"),
    ([exactly("g", selectors=[cel("device.driver")])], "must evaluate to bool"),
    ([exactly("g", selectors=[cel("device.driver ==")])], "selector #0: CEL compile error: compilation failed"),
])
def test_errors(requests, err):
    with pytest.raises(AllocationError, match=err.replace(".", r"\.").replace('"', '"')):
        run([rslice(GPU, GPUS)], [claim(*requests)])


def test_a_class_selectors_error_names_the_class():
    broken = {"metadata": {"name": "gpu"}, "spec": {"selectors": [
        {"cel": {"expression": f'device.driver == "{GPU}"'}}, {"cel": {"expression": "device.attributes['x'].y"}}]}}
    with pytest.raises(AllocationError) as e:
        run([rslice(GPU, GPUS)], [claim(exactly("g"))], classes={"gpu": broken})
    assert str(e.value) == "class gpu: selector #1: CEL runtime error: no such key: y"


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


def test_allocated_devices_stamp_the_pool_of_each_change():
    held = AllocatedDevices()
    gpu = {"devices": {"results": [{"driver": GPU, "pool": "p1", "device": "gpu-0"}]}}
    held.add(gpu)
    first = held.stamps[(GPU, "p1")]
    held.remove(gpu)
    assert held.stamps[(GPU, "p1")] > first and (NIC, "p1") not in held.stamps
    assert held == AllocatedDevices()  # stamps are not state
    given = AllocatedDevices({(GPU, "p2", "gpu-0"): 1})
    assert given.stamps[(GPU, "p2")] > held.stamps[(GPU, "p1")]


def shared_gpu(name, milli="1000", memory="16Gi", **attrs):
    return dev(name, _multi=True, _capacity={"milli": {"value": milli}, "memory": {"value": memory}}, **attrs)


def share(milli, count=None, **kw):
    req = {"requests": {"milli": str(milli), "memory": f"{milli * 16}Mi"}} if milli else None
    return exactly("g", **({"capacity": req} if req else {}), **({"count": count} if count else {}), **kw)


def full_search(a, claims, node=NODE):
    return a._search(node, claims, a.index.for_node(node), node["metadata"]["name"])


def test_a_simple_claim_on_shared_devices_takes_what_the_search_takes():
    """One plain request over GPUs several claims share by capacity: Filter
    reads the free devices kept per node and request shape (no search), and
    gets the search's verdict and devices as claims come and go."""
    slices = [rslice(GPU, [shared_gpu(f"gpu-{i}", model={"string": "a" if i % 2 else "b"}) for i in range(4)])]
    held = AllocatedDevices()
    a = Allocator(CLASSES, PoolIndex(slices, []), held, new_share_id=lambda: "s")
    shapes = [share(600), share(300), share(0), share(0, count=3),
              share(500, selectors=[cel(f'device.attributes["{GPU}"].model == "a"')])]
    allocations = []
    for step in range(40):
        for shape in shapes:
            c = [claim(shape)]
            fast, slow = a.find(NODE, c), full_search(a, c)
            assert (fast is None) == (slow is None)
            if fast is not None:
                assert fast.search is None
                assert fast.taken == slow.taken
        # allocate through the search the Reserve would run, or free the oldest claim
        c = [claim(shapes[step % len(shapes)])]
        found = a.find(NODE, c)
        if found is not None and step % 3:
            alloc = a.results(found)[0]
            assert picked(alloc) == [("g", d.id[2]) for d, _ in found.taken]
            held.add(alloc)
            allocations.append(alloc)
        elif allocations:
            held.remove(allocations.pop(0))
    assert allocations  # the loop filled devices up and freed them again


def test_a_shared_device_is_refused_exactly_when_its_capacity_is_spent():
    slices = [rslice(GPU, [shared_gpu("gpu-0")])]
    held = AllocatedDevices()
    a = Allocator(CLASSES, PoolIndex(slices, []), held, new_share_id=lambda: "s")
    took = {"devices": {"results": [{"driver": GPU, "pool": "p1", "device": "gpu-0", "shareID": "x",
                                     "consumedCapacity": {"milli": "700", "memory": "11200Mi"}}]}}
    held.add(took)
    assert [d.id[2] for d, _ in a.find(NODE, [claim(share(300))]).taken] == ["gpu-0"]
    assert a.find(NODE, [claim(share(301))]) is None
    assert a.find(NODE, [claim(share(0))]) is None  # a whole-GPU claim takes all the capacity
    held.remove(took)  # the claim was deleted
    assert a.find(NODE, [claim(share(0))]).taken[0][1] == {f"{GPU}/milli": 1000, f"{GPU}/memory": 16 * 2**30}
    held.add({"devices": {"results": [{"driver": GPU, "pool": "p1", "device": "gpu-0"}]}})  # held outright
    assert a.find(NODE, [claim(share(1))]) is None


class Info:
    """What find_each reads of the scheduler's NodeInfo."""

    def __init__(self, name):
        self.name, self.node = name, {"metadata": {"name": name}}


def test_find_each_answers_as_find_on_each_node():
    nodes = [Info(f"n{i}") for i in range(4)]
    slices = [rslice(GPU, [shared_gpu(f"gpu-{j}") for j in range(i)], pool=f"p{i}", node=f"n{i}") for i in range(1, 4)]
    held = AllocatedDevices({(GPU, "p2", "gpu-0"): 1})
    a = Allocator(CLASSES, PoolIndex(slices, []), held)
    for c in ([claim(share(500, count=2))], [claim(share(0, count=2))], [claim(exactly("g", "missing"))],
              [claim(share(500), share(500) | {"name": "h"})]):
        each = a.find_each(nodes, c)
        # the caller looks for errors only where find_each says it answered some node with one
        assert a.failed == any(isinstance(got, AllocationError) for got in each)
        for node, got in zip(nodes, each):
            try:
                want = a.find(node.node, c)
            except AllocationError as e:
                assert isinstance(got, AllocationError) and got.args == e.args
                continue
            assert (got is None) == (want is None) and (got is None or got.taken == want.taken)
    assert [f is not None for f in a.find_each(nodes, [claim(share(500, count=2))])] == [False, False, False, True]


@pytest.mark.parametrize("kept", [8192, 2])
def test_find_each_keeps_answers_until_the_nodes_pool_changes(monkeypatch, kept):
    """Answers of nodes whose pools no allocation touched are reused; a change answers its node
    afresh (and one who missed changes the log no longer holds answers every node afresh)."""
    monkeypatch.setattr("nanokube.scheduler.dra.allocator.CHANGES_KEPT", kept)
    nodes = [Info(f"n{i}") for i in range(1, 4)]
    slices = [rslice(GPU, [shared_gpu("gpu-0")], pool=f"p{i}", node=f"n{i}") for i in range(1, 4)]
    held = AllocatedDevices()
    index = PoolIndex(slices, [])
    c = [claim(share(600))]
    first = Allocator(CLASSES, index, held).find_each(nodes, c)
    assert all(f is not None for f in first)
    again = Allocator(CLASSES, index, held).find_each(nodes, c)
    assert all(a is f for a, f in zip(again, first))
    took = {"devices": {"results": [{"driver": GPU, "pool": "p2", "device": "gpu-0", "shareID": "x",
                                     "consumedCapacity": {"milli": "600"}}]}}
    for _ in range(3):  # more changes than a log of 2 keeps
        held.add(took)
        held.remove(took)
    held.add(took)
    after = Allocator(CLASSES, index, held).find_each(nodes, c)
    assert after[1] is None and after[0] is not None and after[2] is not None
    assert after[0] is first[0]  # p1 is unchanged: the same answer, kept or counted again
    held.remove(took)
    freed = Allocator(CLASSES, index, held).find_each(nodes, c)
    assert freed[1] is not None and [d.id[2] for d, _ in freed[1].taken] == ["gpu-0"]


def outcome(fn):
    try:
        found = fn()
    except SearchLimitExceeded:
        return "gave up"
    return None if found is None else [d.id[2] for d, _ in found.taken]


@pytest.mark.parametrize("max_steps", range(1, 40, 3))
def test_counted_fit_gives_up_where_the_search_would(max_steps):
    """The search's step budget holds for counted fits too: where it could run out, the search decides."""
    devices = [shared_gpu(f"gpu-{i}") for i in range(8)]
    spent = {"devices": {"results": [{"driver": GPU, "pool": "p1", "device": f"gpu-{i}", "shareID": "x",
                                      "consumedCapacity": {"milli": "800"}} for i in (1, 4, 6, 7)]}}
    taken = AllocatedDevices()
    taken.add(spent)
    a = Allocator(CLASSES, PoolIndex([rslice(GPU, devices)], []), taken, max_steps=max_steps)
    for count in (1, 3, 4, 5):
        c = [claim(share(300, count=count))]
        assert outcome(lambda: a.find(NODE, c)) == outcome(lambda: full_search(a, c))
        [each] = a.find_each([Info(NODE["metadata"]["name"])], c)  # Filter's path: the same, and flagged
        assert a.failed == isinstance(each, SearchLimitExceeded)
        got = "gave up" if isinstance(each, SearchLimitExceeded) else outcome(lambda: each)
        assert got == outcome(lambda: a.find(NODE, c))


def test_pools_named_by_node_and_pools_matched_by_selector_keep_their_order():
    sel = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}
    index = PoolIndex([rslice(GPU, [dev("a")], pool="p3"), rslice(GPU, [dev("b")], pool="p1", node=None, nodeSelector=sel),
                       rslice(GPU, [dev("c")], pool="p2", node="n2"), rslice(NIC, [], pool="p0")])
    assert [p.name for p, _ in index.for_node(NODE)] == ["p1", "p3", "p0"]  # by driver, then pool
    assert [p.name for p, _ in index.for_node({"metadata": {"name": "n2"}})] == ["p2"]


def test_a_counted_answer_is_kept_for_every_pod_until_its_pool_changes():
    held = AllocatedDevices()
    index = PoolIndex([rslice(GPU, [shared_gpu("gpu-0"), shared_gpu("gpu-1")])], [])
    first = Allocator(CLASSES, index, held).find(NODE, [claim(share(600))])
    mine = claim(share(600), config=[{"requests": ["g"], "opaque": {"driver": GPU, "parameters": {"pod": 2}}}])
    second = Allocator(CLASSES, index, held)
    found = second.find(NODE, [mine])
    assert found is first and found.claims is None  # a later pod of the shape: the same answer
    [alloc] = second.results(found)  # written out for the claims this allocator counted
    assert alloc["devices"]["config"][-1]["opaque"]["parameters"] == {"pod": 2}
    held.add(alloc)
    third = Allocator(CLASSES, index, held).find(NODE, [claim(share(600))])
    assert third is not first and [d.id[2] for d, _ in third.taken] == ["gpu-1"]


def test_find_each_keeps_the_answer_of_a_node_without_the_devices_and_of_one_with_several_pools(monkeypatch):
    """Nodes without a pool (CPU-only ones) and nodes with several are answered once per pool change
    too, not counted again for every pod of the shape."""
    nodes = [Info("n0"), Info("n1")]
    slices = [rslice(GPU, [shared_gpu("gpu-0")], pool=p, node="n1") for p in ("p1", "p2")]
    held = AllocatedDevices()
    index = PoolIndex(slices, [])
    c = [claim(share(600, count=2))]
    first = Allocator(CLASSES, index, held).find_each(nodes, c)
    assert first[0] is None and [d.id[1] for d, _ in first[1].taken] == ["p1", "p2"]

    def counted(*args):
        raise AssertionError("counted again")
    monkeypatch.setattr(Allocator, "_count", counted)
    again = Allocator(CLASSES, index, held).find_each(nodes, c)
    assert again[0] is None and again[1] is first[1]
    monkeypatch.undo()
    held.add({"devices": {"results": [{"driver": GPU, "pool": "p2", "device": "gpu-0", "shareID": "x",
                                       "consumedCapacity": {"milli": "600"}}]}})
    assert Allocator(CLASSES, index, held).find_each(nodes, c) == [None, None]


def node_mig_slices(node):
    """mig_slices() published by `node`, in a pool named after it."""
    out = mig_slices()
    for s in out:
        s["spec"]["nodeName"] = s["spec"]["pool"]["name"] = node
        s["metadata"]["name"] = f"{node}-{s['metadata']['name']}"
    return out


def test_find_each_keeps_the_searchs_verdict_for_devices_that_consume_counters(monkeypatch):
    """Partitions over shared counters are searched, not counted; the verdict is kept per node until one
    of its pools changes, and Reserve's `results` searches the chosen node for the pod's own claims."""
    nodes = [Info("n1"), Info("n2")]
    held = AllocatedDevices()
    index = PoolIndex([*node_mig_slices("n1"), *node_mig_slices("n2")], [])
    c = [claim(exactly("g", count=2))]
    first = Allocator(CLASSES, index, held).find_each(nodes, c)
    assert [[d.id[2] for d, _ in f.taken] for f in first] == [["half-0", "half-1"]] * 2

    def searched(*args):
        raise AssertionError("searched again")
    monkeypatch.setattr(Allocator, "_search", searched)
    again = Allocator(CLASSES, index, held).find_each(nodes, c)
    assert [[d.id[2] for d, _ in f.taken] for f in again] == [["half-0", "half-1"]] * 2
    assert again[0].claims is None and again[0].search is None  # kept for every pod of the shape
    monkeypatch.undo()
    mine = claim(exactly("g", count=2)) | {"metadata": {"namespace": "default", "name": "mine"}}
    a = Allocator(CLASSES, index, held)
    [kept, _] = a.find_each(nodes, [mine])
    [alloc] = a.results(kept)  # searched now, for this pod's claim
    assert [r["device"] for r in alloc["devices"]["results"]] == ["half-0", "half-1"]
    held.add(alloc)  # n1's pool changes: n1 is searched again (its counters are spent), n2 is not
    calls = []
    real = Allocator._search
    monkeypatch.setattr(Allocator, "_search", lambda self, node, *rest: calls.append(node["metadata"]["name"])
                        or real(self, node, *rest))
    after = Allocator(CLASSES, index, held).find_each(nodes, c)
    assert calls == ["n1"] and after[0] is None and after[1] is again[1]
