import copy

from nanokube.registry.base import all_resources

RES = next(r for r in all_resources() if r.group == "discovery.k8s.io")
S = RES.strategy


def eps(address_type="IPv4", addresses=("10.0.0.1",), ports=None):
    obj = {"metadata": {"name": "web-abc", "namespace": "default", "labels": {"kubernetes.io/service-name": "web"}},
           "addressType": address_type, "endpoints": [{"addresses": list(addresses)}],
           "ports": ports if ports is not None else [{"port": 80}]}
    S.default(obj, "v1")
    return obj


def fields(errs):
    return [(e.reason, e.field) for e in errs]


def test_registration_and_defaults():
    assert (RES.plural, RES.namespaced, RES.versions) == ("endpointslices", True, ["v1"])
    assert eps()["ports"] == [{"port": 80, "name": "", "protocol": "TCP"}]


def test_valid():
    assert RES.validate_create(eps()) == []
    assert S.validate(eps("FQDN", ["web.example.com"])) == []
    assert S.validate(eps("IPv6", ["2001:db8::1"])) == []


def test_address_type():
    assert fields(S.validate(eps(""))) == [("FieldValueRequired", "addressType")]
    assert fields(S.validate(eps("IPX"))) == [("FieldValueNotSupported", "addressType")]


def test_addresses_per_type():
    """An address is a legacy IP (strict: no leading zeros, no IPv4-mapped IPv6), of the slice's
    family, outside ValidateEndpointIP's ranges."""
    errs = S.validate(eps("IPv4", ["2001:db8::1", "127.0.0.1", "web", "10.0.0.010", "::ffff:10.0.0.1"]))
    assert [(e.field, e.detail) for e in errs] == [
        ("endpoints[0].addresses[0]", "must be an IPv4 address"),
        ("endpoints[0].addresses[1]", "may not be in the loopback range (127.0.0.0/8, ::1/128)"),
        ("endpoints[0].addresses[2]", "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"),
        ("endpoints[0].addresses[3]", "must not have leading 0s"),
        ("endpoints[0].addresses[4]", "must not be an IPv4-mapped IPv6 address")]
    errs = S.validate(eps("FQDN", ["localhost"]))
    assert [e.detail for e in errs] == ["should be a domain with at least two segments separated by dots"]
    obj = eps()
    obj["endpoints"].append({"addresses": []})
    assert [(e.field, e.detail) for e in S.validate(obj)] == [("endpoints[1].addresses", "must contain at least 1 address")]


def test_limits():
    obj = eps()
    obj["endpoints"] = [{"addresses": ["10.0.0.1"]}] * 1001
    assert fields(S.validate(obj)) == [("FieldValueTooMany", "endpoints")]


def test_ports():
    errs = S.validate(eps(ports=[{"name": "http", "protocol": "TCP"}, {"name": "http", "protocol": "ICMP"},
                                 {"name": "Bad_Name", "protocol": "UDP", "appProtocol": "a/b/c"}]))
    assert fields(errs) == [("FieldValueDuplicate", "ports[1].name"), ("FieldValueNotSupported", "ports[1].protocol"),
                            ("FieldValueInvalid", "ports[2].name"), ("FieldValueInvalid", "ports[2].appProtocol")]


def test_address_type_immutable():
    old = eps()
    new = eps("IPv6", ["2001:db8::1"])
    assert ("FieldValueInvalid", "addressType") in fields(S.validate_update(new, old))


def test_label_change_bumps_generation():
    old = eps()
    old["metadata"]["generation"] = 3
    new = copy.deepcopy(old)
    new["metadata"]["labels"]["x"] = "y"
    S.prepare_for_update(new, old)
    assert new["metadata"]["generation"] == 4


def test_columns():
    obj = eps(addresses=["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"],
              ports=[{"port": 80}, {"name": "metrics"}, {}, {"port": 9}])
    cells = [c.fn(obj) for c in S.columns if c.name != "Age"]
    assert cells == ["web-abc", "IPv4", "80,metrics, + 1 more...", "10.0.0.1,10.0.0.2,10.0.0.3 + 1 more..."]
    assert S.columns[2].fn(eps(ports=[])) == "<unset>"
