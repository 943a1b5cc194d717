from nanokube.registry.base import all_resources

RES = {r.plural: r for r in all_resources() if r.group == "networking.k8s.io"}


def errs(plural, obj):
    return [(e.field, e.detail) for e in RES[plural].validate_create(obj)]


def netpol(**spec):
    return {"metadata": {"name": "p", "namespace": "default"}, "spec": {"podSelector": {}, **spec}}


def test_registration():
    assert sorted(RES) == ["ingressclasses", "ingresses", "ipaddresses", "networkpolicies", "servicecidrs"]
    assert RES["networkpolicies"].short_names == ("netpol",)
    assert RES["ingresses"].short_names == ("ing",) and RES["ingresses"].subresources == ("status",)
    assert not RES["ipaddresses"].namespaced and RES["ipaddresses"].short_names == ("ip",)


def test_network_policy_defaults():
    p = netpol(egress=[{"ports": [{"port": 53}]}])
    RES["networkpolicies"].strategy.default(p, "v1")
    assert p["spec"]["policyTypes"] == ["Ingress", "Egress"]
    assert p["spec"]["egress"][0]["ports"][0]["protocol"] == "TCP"
    q = netpol(ingress=[])
    RES["networkpolicies"].strategy.default(q, "v1")
    assert q["spec"]["policyTypes"] == ["Ingress"]


def test_network_policy_peers_and_ports():
    p = netpol(ingress=[{"from": [{}, {"ipBlock": {"cidr": "10.0.0.0/8", "except": ["11.0.0.0/16"]},
                                      "podSelector": {}}],
                         "ports": [{"port": "http", "endPort": 90}, {"port": 90, "endPort": 80},
                                   {"protocol": "ICMP"}]}])
    assert errs("networkpolicies", p) == [
        ("spec.ingress[0].ports[0].endPort", "may not be specified when `port` is non-numeric"),
        ("spec.ingress[0].ports[1].endPort", "must be greater than or equal to `port`"),
        ("spec.ingress[0].ports[2].protocol", 'supported values: "SCTP", "TCP", "UDP"'),
        ("spec.ingress[0].from[0]", "must specify a peer"),
        ("spec.ingress[0].from[1].ipBlock.except[0]", "must be a strict subset of `cidr`"),
        ("spec.ingress[0].from[1]", "may not specify both ipBlock and another peer"),
    ]
    assert errs("networkpolicies", netpol(ingress=[{"from": [{"namespaceSelector": {"matchLabels": {"a": "b"}},
                                                              "podSelector": {}}]}])) == []


def test_network_policy_column():
    p = netpol()
    p["spec"]["podSelector"] = {"matchLabels": {"app": "web"}}
    assert [c.fn(p) for c in RES["networkpolicies"].strategy.columns[:2]] == ["p", "app=web"]
    assert RES["networkpolicies"].strategy.columns[1].fn(netpol()) == "<none>"


def ingress(**spec):
    return {"metadata": {"name": "i", "namespace": "default"}, "spec": spec}


def test_ingress_validation():
    assert errs("ingresses", ingress()) == [("spec.rules", "either `defaultBackend` or `rules` must be specified")]
    rule = {"host": "10.0.0.1", "http": {"paths": [
        {"path": "a", "pathType": "Prefix", "backend": {"service": {"name": "web", "port": {"number": 80}}}},
        {"path": "/x", "backend": {"service": {"name": "web"}}},
        {"path": "/y", "pathType": "Exact", "backend": {}}]}}
    assert errs("ingresses", ingress(rules=[rule])) == [
        ("spec.rules[0].host", "must be a DNS name, not an IP address"),
        ("spec.rules[0].http.paths[0].path", "must be an absolute path"),
        ("spec.rules[0].http.paths[1].pathType", "pathType must be specified"),
        ("spec.rules[0].http.paths[1].backend.service.port", "port name or number is required"),
        ("spec.rules[0].http.paths[2].backend", "resource or service backend is required"),
    ]
    ok = ingress(ingressClassName="nginx", rules=[{"host": "*.example.com", "http": {"paths": [
        {"path": "/", "pathType": "Prefix", "backend": {"service": {"name": "web", "port": {"name": "http"}}}}]}}])
    assert errs("ingresses", ok) == []
    cols = RES["ingresses"].strategy.columns
    assert [c.fn(ok) for c in cols[:5]] == ["i", "nginx", "*.example.com", "", "80"]


def test_ingress_class():
    ic = {"metadata": {"name": "nginx"}, "spec": {"controller": "nginx"}}
    assert errs("ingressclasses", ic) == [("spec.controller", 'must be a domain-prefixed path (such as "acme.io/foo")')]
    ic["spec"] = {"controller": "k8s.io/ingress-nginx", "parameters": {"kind": "Params", "name": "p", "scope": "Namespace"}}
    assert errs("ingressclasses", ic) == [("spec.parameters.namespace", "`parameters.scope` is set to 'Namespace'")]
    new = {"metadata": {"name": "nginx"}, "spec": {"controller": "example.com/other"}}
    assert ("spec.controller", "field is immutable") in [
        (e.field, e.detail) for e in RES["ingressclasses"].strategy.validate_update(new, ic)]


def test_service_cidr():
    sc = {"metadata": {"name": "extra"}, "spec": {"cidrs": ["10.0.0.1/24"]}}
    assert errs("servicecidrs", sc) == [("spec.cidrs[0]", 'must be in canonical form ("10.0.0.0/24")')]
    sc["spec"]["cidrs"] = ["10.0.0.0/24", "10.1.0.0/24"]
    assert errs("servicecidrs", sc)[0][0] == "spec.cidrs"
    old = {"metadata": {"name": "extra"}, "spec": {"cidrs": ["10.0.0.0/24"]}}
    dual = {"metadata": {"name": "extra"}, "spec": {"cidrs": ["10.0.0.0/24", "fd00::/108"]}}
    assert RES["servicecidrs"].strategy.validate_update(dual, old) == []
    moved = {"metadata": {"name": "extra"}, "spec": {"cidrs": ["10.9.0.0/24"]}}
    assert [e.field for e in RES["servicecidrs"].strategy.validate_update(moved, old)] == ["spec.cidrs"]


def test_ip_address():
    ip = {"metadata": {"name": "10.96.0.010"}, "spec": {"parentRef": {"resource": "services", "name": "a", "namespace": "default"}}}
    assert [f for f, _ in errs("ipaddresses", ip)] == ["metadata.name"]
    ip["metadata"]["name"] = "10.96.0.10"
    assert errs("ipaddresses", ip) == []
    assert RES["ipaddresses"].strategy.columns[1].fn(ip) == "services/default/a"
    del ip["spec"]["parentRef"]
    assert errs("ipaddresses", ip) == [("spec.parentRef", "")]


def test_default_ingress_class_choice():
    from nanokube.apiserver.admission.default_ingress_class import default_class

    def ic(name, created, default=True):
        ann = {"ingressclass.kubernetes.io/is-default-class": "true"} if default else {}
        return {"metadata": {"name": name, "creationTimestamp": created, "annotations": ann}}
    assert default_class([ic("a", "2026-01-01T00:00:00Z", False)]) is None
    assert default_class([ic("old", "2026-01-01T00:00:00Z"), ic("new", "2026-02-01T00:00:00Z")])["metadata"]["name"] == "new"
    assert default_class([ic("b", "2026-01-01T00:00:00Z"), ic("a", "2026-01-01T00:00:00Z")])["metadata"]["name"] == "a"
