"""APIService validation and columns, autoregistration and the proxy's identity headers."""

from nanokube.apiserver.aggregator.autoregister import desired
from nanokube.apiserver.aggregator.proxy import identity_headers
from nanokube.machinery.user import User
from nanokube.registry.base import all_resources

RES = next(r for r in all_resources() if r.plural == "apiservices")


def apiservice(name, **spec):
    return {"metadata": {"name": name}, "spec": {"groupPriorityMinimum": 1000, "versionPriority": 15, **spec}}


def test_validation():
    ok = apiservice("v1alpha1.wardle.example.com", group="wardle.example.com", version="v1alpha1",
                    service={"namespace": "wardle", "name": "api", "port": 443}, insecureSkipTLSVerify=True)
    assert RES.validate_create(ok) == []
    assert RES.validate_create(apiservice("v1.", version="v1")) == []
    bad = apiservice("v2.wardle.example.com", group="wardle.example.com", version="v1", groupPriorityMinimum=0,
                     caBundle="Zm9v")
    assert [(e.field, e.detail) for e in RES.validate_create(bad)] == [
        ("metadata.name", 'must be `spec.version+"."+spec.group`: "v1.wardle.example.com"'),
        ("spec.groupPriorityMinimum", "must be positive and less than 20000"),
        ("spec.caBundle", "local APIServices may not have a caBundle"),
    ]
    remote = apiservice("v1.x.io", group="x.io", version="v1", service={"namespace": "ns"},
                        insecureSkipTLSVerify=True, caBundle="Zm9v")
    assert [e.field for e in RES.validate_create(remote)] == ["spec.service.name", "spec.insecureSkipTLSVerify"]


def test_defaults_and_columns():
    a = apiservice("v1.x.io", group="x.io", version="v1", service={"namespace": "ns", "name": "api"})
    RES.strategy.default(a, "v1")
    assert a["spec"]["service"]["port"] == 443
    a["status"] = {"conditions": [{"type": "Available", "status": "False", "reason": "MissingEndpoints"}]}
    assert [c.fn(a) for c in RES.strategy.columns[:3]] == ["v1.x.io", "ns/api", "False (MissingEndpoints)"]
    local = apiservice("v1.apps", group="apps", version="v1")
    local["status"] = {"conditions": [{"type": "Available", "status": "True", "reason": "Local"}]}
    assert [c.fn(local) for c in RES.strategy.columns[:3]] == ["v1.apps", "Local", "True"]


def test_autoregister_desired_set():
    want = desired({"": ["v1"], "apps": ["v1"], "example.com": ["v1"]}, {"metrics.k8s.io": "v1beta1"})
    assert sorted(want) == ["v1.", "v1.apps", "v1beta1.metrics.k8s.io"]  # no priority known: not registered
    assert want["v1."]["spec"] == {"group": "", "version": "v1", "groupPriorityMinimum": 18000, "versionPriority": 1}
    assert want["v1beta1.metrics.k8s.io"]["spec"]["groupPriorityMinimum"] == 100
    assert want["v1.apps"]["metadata"]["labels"] == {"kube-aggregator.kubernetes.io/automanaged": "onstart"}


def test_identity_headers():
    user = User("alice", ("devs", "system:authenticated"), "u-1", {"acme.com/project": ["a b"], "scopes": ["x", "y"]})
    assert identity_headers(user) == [
        ("X-Remote-User", "alice"), ("X-Remote-Group", "devs"), ("X-Remote-Group", "system:authenticated"),
        ("X-Remote-Extra-acme.com%2Fproject", "a b"), ("X-Remote-Extra-scopes", "x"), ("X-Remote-Extra-scopes", "y"),
        ("X-Remote-Uid", "u-1")]


def test_apis_lists_groups_in_the_aggregators_order():
    from nanokube.apiserver import discovery
    from nanokube.apiserver.rest import ResourceIndex

    names = [g["name"] for g in discovery.api_group_list(ResourceIndex(all_resources()))["groups"]]
    assert names[:6] == ["apiregistration.k8s.io", "apps", "events.k8s.io", "authentication.k8s.io",
                         "authorization.k8s.io", "autoscaling"]
    assert names.index("networking.k8s.io") < names.index("storage.k8s.io") < names.index("scheduling.k8s.io")


def test_kubernetes_service_objects():
    from nanokube.apiserver.kubernetes_service import (advertise_address, default_advertise_address, first_address,
                                                       host_address, service)

    assert first_address("10.96.0.0/12") == "10.96.0.1"
    assert advertise_address("127.0.0.1") is None and advertise_address("192.0.2.7") == "192.0.2.7"
    # kube-apiserver's default --advertise-address: a loopback listener advertises the host's address
    assert default_advertise_address("192.0.2.7") == "192.0.2.7"
    assert default_advertise_address("127.0.0.1") == default_advertise_address("0.0.0.0") == host_address()
    svc = service("10.96.0.1", 6443)
    assert svc["spec"]["ports"] == [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}]


async def test_a_remote_groups_versions_of_one_priority_are_in_kubernetes_version_order(tmp_path):
    """ByVersionPriority breaks a versionPriority tie with CompareKubeAwareVersionStrings: v1beta1
    is preferred to v1alpha1 (by name v1alpha1 came first)."""
    from kubernetes.client.rest import ApiException

    from tests.apiserver.test_rest_managedfields import call
    from tests.controllers import eventually
    from tests.served import served

    async with served(tmp_path) as (_, c):
        for v in ("v1alpha1", "v1beta1"):
            await call(c, "POST", "/apis/apiregistration.k8s.io/v1/apiservices", {
                "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
                **apiservice(f"{v}.ties.example.com", group="ties.example.com", version=v,
                             service={"namespace": "default", "name": "ties"}, insecureSkipTLSVerify=True)})
        async def both():  # once the aggregator's informer has seen the two
            try:
                group = await call(c, "GET", "/apis/ties.example.com")
            except ApiException:
                return None
            return group if len(group["versions"]) == 2 else None
        group = await eventually(both)
        assert [v["version"] for v in group["versions"]] == ["v1beta1", "v1alpha1"]
        assert group["preferredVersion"]["version"] == "v1beta1"
