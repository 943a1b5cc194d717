import asyncio
import json

import pytest
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from nanokube.apiserver.app import APIServer
from nanokube.pki.ca import ensure_pki
from nanokube.pki.kubeconfig import write_kubeconfig
from nanokube.registry.base import all_resources
from nanokube.store.memory import MemoryStore

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
    assert errs("ingresses", ingress()) == [("spec", "either `defaultBackend` or `rules` must be specified")]
    rule = {"host": "10.0.0.1", "http": {"paths": [
        {"path": "a", "pathType": "Prefix", "backend": {"service": {"name": "web", "port": {"number": 80}}}},
        {"path": "/x", "backend": {"service": {"name": "web"}}},
        {"path": "/y", "pathType": "Exact", "backend": {}}]}}
    assert errs("ingresses", ingress(rules=[rule])) == [
        ("spec.rules[0].host", "must be a DNS name, not an IP address"),
        ("spec.rules[0].http.paths[0].path", "must be an absolute path"),
        ("spec.rules[0].http.paths[1].pathType", "pathType must be specified"),  # and nothing more of it
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
    """validateServiceCIDRSpec with IsValidCIDR's strict messages, ValidateServiceCIDRUpdate per CIDR."""
    def spec_errs(*cidrs):
        return [str(e) for e in RES["servicecidrs"].validate_create({"metadata": {"name": "x"}, "spec": {"cidrs": list(cidrs)}})]
    p = "spec.cidrs[0]: Invalid value:"
    assert spec_errs("10.0.0.1/24") == [f'{p} "10.0.0.1/24": must not have bits set beyond the prefix length']
    assert spec_errs("010.0.0.0/24") == [f'{p} "010.0.0.0/24": must not have leading 0s in IP or prefix length']
    assert spec_errs("10.0.0.0/024") == [f'{p} "10.0.0.0/024": must not have leading 0s in IP or prefix length']
    assert spec_errs("::ffff:10.0.0.0/104") == [f'{p} "::ffff:10.0.0.0/104": must not have an IPv4-mapped IPv6 address']
    assert spec_errs("2001:DB8::/64") == [f'{p} "2001:DB8::/64": must be in canonical form ("2001:db8::/64")']
    assert spec_errs("10.0.0.0/33") == [f'{p} "10.0.0.0/33": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)']
    assert spec_errs("10.0.0.0/24", "10.1.0.0/24") == [
        'spec.cidrs: Invalid value: ["10.0.0.0/24","10.1.0.0/24"]: may specify no more than one IP for each IP family, '
        "i.e 192.168.0.0/24 and 2001:db8::/64"]
    assert spec_errs("10.0.0.0/24", "fd00::/108", "10.1.0.0/24") == [
        'spec.cidrs: Invalid value: {"CIDRs":["10.0.0.0/24","fd00::/108","10.1.0.0/24"]}: '
        "may only hold up to 2 values"]
    old = {"metadata": {"name": "extra"}, "spec": {"cidrs": ["10.0.0.0/24"]}}
    dual = {"metadata": {"name": "extra"}, "spec": {"cidrs": ["10.0.0.0/24", "fd00::/108"]}}
    assert RES["servicecidrs"].strategy.validate_update(dual, old) == []
    moved = {"metadata": {"name": "extra"}, "spec": {"cidrs": ["10.9.0.0/24"]}}
    assert [str(e) for e in RES["servicecidrs"].strategy.validate_update(moved, old)] == [
        'spec.cidrs[0]: Invalid value: "10.9.0.0/24": field is immutable']
    assert [str(e) for e in RES["servicecidrs"].strategy.validate_update(old, dual)] == [
        'spec.cidrs: Invalid value: ["10.0.0.0/24"]: field is immutable']


def test_ip_address():
    ip = {"metadata": {"name": "10.96.0.010"}, "spec": {"parentRef": {"resource": "services", "name": "a", "namespace": "default"}}}
    assert errs("ipaddresses", ip) == [("metadata.name", "must not have leading 0s")]  # IsValidIP (strict)
    ip["metadata"]["name"] = "::ffff:10.96.0.10"
    assert errs("ipaddresses", ip) == [("metadata.name", "must not be an IPv4-mapped IPv6 address")]
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


async def test_service_cidr_refusals_through_the_api(tmp_path):
    """The 422s kube-apiserver gives for a ServiceCIDR, through the official client."""
    pki = ensure_pki(str(tmp_path))
    server = APIServer(MemoryStore(), pki, port=0)
    await server.start()
    try:
        write_kubeconfig(str(tmp_path / "kubeconfig"), server.url, pki)
        api = client.NetworkingV1Api(config.new_client_from_config(config_file=str(tmp_path / "kubeconfig")))

        async def refused(*cidrs) -> str:
            body = {"metadata": {"name": "extra"}, "spec": {"cidrs": list(cidrs)}}
            with pytest.raises(ApiException) as e:
                await asyncio.to_thread(api.create_service_cidr, body)
            assert e.value.status == 422
            return json.loads(e.value.body)["message"]
        assert await refused("10.200.0.1/24") == ('ServiceCIDR.networking.k8s.io "extra" is invalid: spec.cidrs[0]: '
                                                  'Invalid value: "10.200.0.1/24": must not have bits set beyond the prefix length')
        assert await refused("10.200.0.0/24", "fd00::/108", "10.201.0.0/24") == (
            'ServiceCIDR.networking.k8s.io "extra" is invalid: spec.cidrs: Invalid value: '
            '{"CIDRs":["10.200.0.0/24","fd00::/108","10.201.0.0/24"]}: may only hold up to 2 values')
        api.api_client.close()
    finally:
        await server.stop()


async def test_over_http_ingress_hosts_backends_and_parameters_in_upstreams_words(tmp_path):
    """ValidateIngressSpec: the missing rules are reported at spec with the rules' value; a host
    with a '*' anywhere gets IsWildcardDNS1123Subdomain's words, an IP rule host also its
    subdomain check, and a TLS host no IP check; a port number of 0 is no number; a resource
    backend and IngressClass parameters are typed local references (path segment kind and name)."""
    import asyncio
    import json

    from kubernetes import client
    from kubernetes.client.rest import ApiException

    from tests.served import served

    svc = {"service": {"name": "web", "port": {"number": 80}}}
    body = {"metadata": {"name": "i"}, "spec": {
        "rules": [{"host": "foo.*.com", "http": {"paths": [
                      {"path": "/", "pathType": "Prefix", "backend": {"service": {"name": "web", "port": {"number": 0}}}},
                      {"path": "/r", "pathType": "Prefix", "backend": {"resource": {"apiGroup": "Bad_Group", "kind": "a/b",
                                                                                    "name": ".."}}}]}},
                  {"host": "::1", "http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": svc}]}}],
        "tls": [{"hosts": ["10.0.0.1", "*.ok.example"]}]}}
    wildcard = ("a wildcard DNS-1123 subdomain must start with '*.', followed by a valid DNS subdomain, which must "
                "consist of lower case alphanumeric characters, '-' or '.' and end with an alphanumeric character "
                "(e.g. '*.example.com', regex used for validation is "
                "'\\*\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
    subdomain = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and "
                 "must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation "
                 "is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
    p = "spec.rules[0].http.paths"
    async with served(tmp_path) as (_, api_client):
        net = client.NetworkingV1Api(api_client)
        with pytest.raises(ApiException) as e:
            await asyncio.to_thread(net.create_namespaced_ingress, "default", body)
        assert [(c["field"], c["message"]) for c in json.loads(e.value.body)["details"]["causes"]] == [
            ("spec.rules[0].host", f'Invalid value: "foo.*.com": {wildcard}'),
            (f"{p}[0].backend", "Required value: port name or number is required"),
            (f"{p}[1].backend.resource.apiGroup", f'Invalid value: "Bad_Group": {subdomain}'),
            (f"{p}[1].backend.resource.kind", "Invalid value: \"a/b\": may not contain '/'"),
            (f"{p}[1].backend.resource.name", "Invalid value: \"..\": may not be '..'"),
            ("spec.rules[1].host", 'Invalid value: "::1": must be a DNS name, not an IP address'),
            ("spec.rules[1].host", f'Invalid value: "::1": {subdomain}')]
        with pytest.raises(ApiException) as e:
            await asyncio.to_thread(net.create_namespaced_ingress, "default", {"metadata": {"name": "j"},
                                                                              "spec": {"rules": []}})
        assert [(c["field"], c["message"]) for c in json.loads(e.value.body)["details"]["causes"]] == [
            ("spec", "Invalid value: []: either `defaultBackend` or `rules` must be specified")]
        body["spec"]["rules"] = [{"http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": svc}]}}]
        made = await asyncio.to_thread(net.create_namespaced_ingress, "default", body)
        assert made.spec.tls[0].hosts == ["10.0.0.1", "*.ok.example"]
        with pytest.raises(ApiException) as e:
            await asyncio.to_thread(net.create_ingress_class, {"metadata": {"name": "c"}, "spec": {
                "controller": "example.com/c", "parameters": {"kind": "%", "name": "."}}})
        assert [(c["field"], c["message"]) for c in json.loads(e.value.body)["details"]["causes"]] == [
            ("spec.parameters.kind", "Invalid value: \"%\": may not contain '%'"),
            ("spec.parameters.name", "Invalid value: \".\": may not be '.'")]
