"""The Service allocators' shares: API server workers that pick dynamically at the same moment
never pick one value, and each still takes any value of its range by name. What a restart (or a
worker following the others' Services) rebuilds from stored Services."""

from __future__ import annotations

import ipaddress

import pytest

from nanokube.registry.core_services import AllocationError, NodePortAllocator, ServiceIPAllocator, ServiceStrategy


def test_two_shares_of_the_ip_ranges_pick_disjoint_addresses():
    workers = [ServiceIPAllocator("10.0.0.0/30") for _ in range(2)]
    for i, a in enumerate(workers):
        a.share(2, i)
        a.set_extra_ranges({"more": ["10.1.0.0/24"]})  # a range added after the share is shared too
    picked = [[a.allocate(f"w{i}-{n}") for n in range(50)] for i, a in enumerate(workers)]
    assert not set(picked[0]) & set(picked[1])
    assert all(int(ipaddress.ip_address(ip)) % 2 == i for i, ips in enumerate(picked) for ip in ips)
    assert {ip.rsplit(".", 2)[0] for ips in picked for ip in ips} == {"10.0", "10.1"}
    # by name, a worker takes an address of the other's share
    assert workers[0].allocate("named", picked[1][-1]) == picked[1][-1]


def test_two_shares_of_the_node_port_range_pick_disjoint_ports():
    workers = [NodePortAllocator("30000-30099") for _ in range(2)]
    for i, a in enumerate(workers):
        a.share(2, i)
    picked = [[a.allocate(f"w{i}-{n}") for n in range(50)] for i, a in enumerate(workers)]
    assert sorted(picked[0] + picked[1]) == list(range(30000, 30100))
    assert all(p % 2 == i for i, ports in enumerate(picked) for p in ports)
    assert workers[1].allocate("named", 30000) == 30000


def test_a_full_share_takes_the_others_values_before_the_range_is_full():
    ports = NodePortAllocator("30000-30009")
    ports.share(2, 1)
    picked = [ports.allocate(f"s{n}") for n in range(10)]
    assert [p % 2 for p in picked] == [1] * 5 + [0] * 5 and sorted(picked) == list(range(30000, 30010))
    with pytest.raises(AllocationError, match="range is full"):
        ports.allocate("one-more")
    ips = ServiceIPAllocator("10.0.0.0/29")  # .1 to .6
    ips.share(2, 0)
    ips.set_extra_ranges({"more": ["10.1.0.0/30"]})  # .1, .2
    picked = [ips.allocate(f"s{n}") for n in range(8)]
    # every range's own share first, then the others' values
    assert sorted(picked[:4]) == ["10.0.0.2", "10.0.0.4", "10.0.0.6", "10.1.0.2"]
    assert sorted(picked[4:]) == ["10.0.0.1", "10.0.0.3", "10.0.0.5", "10.1.0.1"]
    with pytest.raises(AllocationError, match="range is full"):
        ips.allocate("one-more")


def test_restore_takes_every_node_port_a_service_holds_its_health_checks_too():
    svc = {"metadata": {"name": "lb", "namespace": "default", "uid": "u1"},
           "spec": {"type": "LoadBalancer", "externalTrafficPolicy": "Local", "clusterIP": "10.96.0.10",
                    "ports": [{"port": 80, "nodePort": 30010}], "healthCheckNodePort": 30011}}
    strategy = ServiceStrategy()
    strategy.restore([svc])
    assert [strategy.node_ports.owner(p) for p in (30010, 30011)] == ["u1", "u1"]
    strategy.release(svc)
    assert [strategy.node_ports.owner(p) for p in (30010, 30011)] == [None, None]
