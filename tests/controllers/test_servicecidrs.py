"""The service-cidr-controller's deletion rule and the allocator's extra ranges."""

import pytest

from nanokube.controllers.servicecidrs import can_delete
from nanokube.registry.core_services import AllocationError, ServiceIPAllocator


def cidr(name, *cidrs):
    return {"metadata": {"name": name}, "spec": {"cidrs": list(cidrs)}}


def ip(addr, managed=True):
    labels = {"ipaddress.kubernetes.io/managed-by": "ipallocator.k8s.io"} if managed else {}
    return {"metadata": {"name": addr, "labels": labels}}


def test_can_delete():
    extra, default = cidr("extra", "10.200.0.0/24"), cidr("kubernetes", "10.96.0.0/12")
    assert can_delete(extra, [default, extra], [ip("10.96.0.5")])
    assert not can_delete(extra, [default, extra], [ip("10.200.0.5")])
    assert can_delete(extra, [default, extra], [ip("10.200.0.5", managed=False)])
    wider = cidr("wider", "10.200.0.0/16")
    assert can_delete(extra, [default, extra, wider], [ip("10.200.0.5")])


def test_allocator_extra_ranges():
    a = ServiceIPAllocator("10.96.0.0/30")  # two usable addresses
    assert {a.allocate("a"), a.allocate("b")} == {"10.96.0.1", "10.96.0.2"}
    with pytest.raises(AllocationError, match="range is full"):
        a.allocate("c")
    assert a.check("x", "10.200.0.9") == ("the provided IP (10.200.0.9) is not in the valid range. "
                                          "The range of valid IPs is 10.96.0.0/30")
    assert a.set_extra_ranges({"extra": ["10.200.0.0/29"]}) == ["extra/10.200.0.0/29"]
    dynamic = a.allocate("c")
    assert dynamic.startswith("10.200.0.")
    assert a.allocate("d", "10.200.0.2") == "10.200.0.2"
    assert a.check("e", dynamic) == "provided IP is already allocated"
    assert a.set_extra_ranges({}) == [] and a.owner("10.200.0.2") is None
