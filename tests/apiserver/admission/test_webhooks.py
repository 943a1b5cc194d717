"""Admission webhooks through the API's REST layer: configuration defaults
and validation, matching, AdmissionReview contents, patches, denials,
failure policies, reinvocation, warnings, dry run and DELETE."""

from __future__ import annotations

import copy

import socket
import threading

import pytest

from nanokube.apiserver.rest import WriteOptions
from nanokube.apiserver.subresources import Subresources
from nanokube.machinery.errors import APIError
from nanokube.machinery.user import User
from tests.apiserver.admission.server import WebhookServer, allow, deny, json_patch
from tests.controllers import make_stack

G = "admissionregistration.k8s.io"


@pytest.fixture(scope="module")
def server():
    s = WebhookServer().start()
    yield s
    s.stop()


@pytest.fixture
async def stack(server):
    server.handlers.clear()
    server.calls.clear()
    s = await make_stack()
    s.rest_subresources = Subresources(s.rest)
    yield s
    await s.close()


def hook(server, name, path, mutating=False, **extra):
    w = {"name": name, "clientConfig": {"url": server.url(path), "caBundle": server.ca.bundle},
         "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"],
                    "resources": ["configmaps"]}],
         "sideEffects": "None", "admissionReviewVersions": ["v1"]}
    w.update(extra)
    return w


async def configure(stack, kind, name, *webhooks):
    plural = "mutatingwebhookconfigurations" if kind == "mutating" else "validatingwebhookconfigurations"
    return await stack.client.resource(G, "v1", plural).create({"metadata": {"name": name}, "webhooks": list(webhooks)})


def cm(name, labels=None):
    return {"metadata": {"name": name, "namespace": "default", **({"labels": labels} if labels else {})},
            "data": {"k": "v"}}


async def test_defaults_and_validation(stack, server):
    created = await configure(stack, "validating", "cfg", hook(server, "a.example.com", "/v"))
    w = created["webhooks"][0]
    assert (w["failurePolicy"], w["matchPolicy"], w["timeoutSeconds"], w["namespaceSelector"], w["objectSelector"]) == \
        ("Fail", "Equivalent", 10, {}, {})
    assert w["rules"][0]["scope"] == "*"
    bad = hook(server, "short.name", "/v", sideEffects=None, timeoutSeconds=31, admissionReviewVersions=[])
    del bad["sideEffects"]
    with pytest.raises(APIError) as e:
        await configure(stack, "validating", "bad", bad)
    assert e.value.code == 422
    assert e.value.message == (
        'ValidatingWebhookConfiguration.admissionregistration.k8s.io "bad" is invalid: ['
        'webhooks[0].name: Invalid value: "short.name": should be a domain with at least three segments separated by dots, '
        "webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun, "
        "webhooks[0].timeoutSeconds: Invalid value: 31: the timeout value must be between 1 and 30 seconds, "
        "webhooks[0].admissionReviewVersions: Required value: must specify one of v1, v1beta1]")
    with pytest.raises(APIError) as e:
        await configure(stack, "mutating", "cel", hook(server, "b.example.com", "/m", mutating=True,
                                                       matchConditions=[{"name": "x", "expression": "object.a =="}]))
    assert "webhooks[0].matchConditions[0].expression: Invalid value: \"object.a ==\": compilation failed: ERROR: <input>:1:12:" \
        in e.value.message


async def test_mutation_is_stored_and_request_is_upstreams(stack, server):
    server.handlers["/m"] = lambda r: json_patch(r, [{"op": "add", "path": "/metadata/labels", "value": {"mutated": "yes"}}],
                                                 warnings=["careful"], auditAnnotations={"k": "v"})
    await configure(stack, "mutating", "m", hook(server, "m.example.com", "/m"))
    r = await stack.rest.create(stack.rest.index.get("", "v1", "configmaps"), "v1", "default", cm("a"),
                                WriteOptions(field_manager="me", user=User("alice", ("devs",), "u-1")))
    assert r.obj["metadata"]["labels"] == {"mutated": "yes"}
    assert r.warnings == ["careful"]
    stored = await stack.client.resource("", "v1", "configmaps").get("a", "default")
    assert stored["metadata"]["labels"] == {"mutated": "yes"}
    req = server.calls_to("/m")[0]["request"]
    assert req["kind"] == {"group": "", "version": "v1", "kind": "ConfigMap"}
    assert req["resource"] == req["requestResource"] == {"group": "", "version": "v1", "resource": "configmaps"}
    assert (req["operation"], req["namespace"], req["name"], req["dryRun"]) == ("CREATE", "default", "a", False)
    assert req["userInfo"] == {"username": "alice", "uid": "u-1", "groups": ["devs"]}
    assert req["options"] == {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1", "fieldManager": "me"}
    assert req["oldObject"] is None and "uid" not in req["object"]["metadata"]
    assert server.calls[0][1] == "timeout=10s"


async def test_denial_reads_as_upstream(stack, server):
    server.handlers["/v"] = lambda r: deny(r, "no configmaps today", code=403)
    await configure(stack, "validating", "v", hook(server, "deny.example.com", "/v"))
    with pytest.raises(APIError) as e:
        await stack.client.resource("", "v1", "configmaps").create(cm("a"))
    assert (e.value.code, e.value.message) == (403, 'admission webhook "deny.example.com" denied the request: no configmaps today')
    server.handlers["/v"] = lambda r: allow(r, allowed=False)
    with pytest.raises(APIError) as e:
        await stack.client.resource("", "v1", "configmaps").create(cm("b"))
    assert (e.value.code, e.value.message) == (400, 'admission webhook "deny.example.com" denied the request without explanation')


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_failure_policies(stack, server):
    port = closed_port()
    down = {"url": f"https://127.0.0.1:{port}/v", "caBundle": server.ca.bundle}
    await configure(stack, "validating", "v", hook(server, "down.example.com", "/v", clientConfig=down))
    with pytest.raises(APIError) as e:
        await stack.client.resource("", "v1", "configmaps").create(cm("a"))
    assert e.value.code == 500
    assert e.value.message == ('Internal error occurred: failed calling webhook "down.example.com": failed to call webhook: '
                               f'Post "https://127.0.0.1:{port}/v?timeout=10s": dial tcp 127.0.0.1:{port}: connect: connection refused')
    cfgs = stack.client.resource(G, "v1", "validatingwebhookconfigurations")
    cfg = copy.deepcopy(await cfgs.get("v"))
    cfg["webhooks"][0]["failurePolicy"] = "Ignore"
    await cfgs.update(cfg)
    await stack.client.resource("", "v1", "configmaps").create(cm("a"))


@pytest.mark.parametrize("host", ["a" * 64 + ".example.com", "a..example.com"])
async def test_a_host_no_resolver_takes_fails_the_call_under_its_failure_policy(stack, server, host):
    """A url whose host has a label past 63 bytes or an empty one is valid configuration (ValidateWebhookURL
    asks only for a host) but cannot be looked up: Go's resolver answers "no such host", and the failure
    policy decides. The IDNA encoding's UnicodeError escaped the client, a 500 even under Ignore (found by
    fuzzing webhook clientConfigs)."""
    down = {"url": f"https://{host}/v", "caBundle": server.ca.bundle}
    await configure(stack, "validating", "v", hook(server, "bad-host.example.com", "/v", clientConfig=down, timeoutSeconds=2))
    with pytest.raises(APIError) as e:
        await stack.client.resource("", "v1", "configmaps").create(cm("a"))
    assert (e.value.code, e.value.message) == (500, 'Internal error occurred: failed calling webhook "bad-host.example.com": '
                                                    f'failed to call webhook: Post "https://{host}/v?timeout=2s": dial tcp: '
                                                    f"lookup {host}: no such host")
    cfgs = stack.client.resource(G, "v1", "validatingwebhookconfigurations")
    cfg = copy.deepcopy(await cfgs.get("v"))
    cfg["webhooks"][0]["failurePolicy"] = "Ignore"
    await cfgs.update(cfg)
    created = await stack.client.resource("", "v1", "configmaps").create(cm("a"))
    assert created["metadata"]["name"] == "a"


async def test_selectors_and_match_conditions_skip(stack, server):
    server.handlers["/v"] = lambda r: deny(r, "denied")
    await configure(stack, "validating", "v", hook(
        server, "sel.example.com", "/v", objectSelector={"matchLabels": {"checked": "yes"}},
        matchConditions=[{"name": "not-skipped", "expression": "!has(object.metadata.annotations) || "
                          "!('skip' in object.metadata.annotations)"}]))
    cms = stack.client.resource("", "v1", "configmaps")
    await cms.create(cm("unlabelled"))
    with pytest.raises(APIError):
        await cms.create(cm("labelled", {"checked": "yes"}))
    skipped = cm("annotated", {"checked": "yes"})
    skipped["metadata"]["annotations"] = {"skip": "1"}
    await cms.create(skipped)
    assert len(server.calls_to("/v")) == 1


async def test_match_condition_error_fails_closed(stack, server):
    server.handlers["/v"] = lambda r: allow(r)
    await configure(stack, "validating", "v", hook(
        server, "mc.example.com", "/v", matchConditions=[{"name": "bad", "expression": "object.data.missing == 'x'"}]))
    with pytest.raises(APIError) as e:
        await stack.client.resource("", "v1", "configmaps").create(cm("a"))
    assert (e.value.code, e.value.message) == (
        403, "configmaps \"a\" is forbidden: expression 'object.data.missing == 'x'' resulted in error: no such key: missing")


async def test_subresource_rules(stack, server):
    server.handlers["/v"] = lambda r: deny(r, "status is frozen")
    rules = [{"operations": ["UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["namespaces/status"]}]
    await configure(stack, "validating", "v", hook(server, "st.example.com", "/v", rules=rules))
    nss = stack.client.resource("", "v1", "namespaces")
    ns = copy.deepcopy(await nss.get("default"))
    ns["metadata"]["labels"] = {"a": "b"}
    await nss.update(ns)
    ns = await nss.get("default")
    with pytest.raises(APIError) as e:
        await nss.update(ns, subresource="status")
    assert "status is frozen" in e.value.message
    req = server.calls_to("/v")[0]["request"]
    assert (req["subResource"], req["namespace"], req["name"]) == ("status", "default", "default")


async def test_reinvocation_if_needed(stack, server):
    server.handlers["/first"] = lambda r: json_patch(r, [{"op": "add", "path": "/data/first", "value": str(len(r["request"]["object"]["data"]))}])
    server.handlers["/second"] = lambda r: json_patch(r, [{"op": "add", "path": "/data/second", "value": "2"}])
    await configure(stack, "mutating", "a", hook(server, "first.example.com", "/first", reinvocationPolicy="IfNeeded"))
    await configure(stack, "mutating", "b", hook(server, "second.example.com", "/second"))
    created = await stack.client.resource("", "v1", "configmaps").create(cm("x"))
    assert len(server.calls_to("/first")) == 2 and len(server.calls_to("/second")) == 1
    assert created["data"] == {"k": "v", "first": "3", "second": "2"}


async def test_dry_run_and_delete(stack, server):
    server.handlers["/v"] = lambda r: deny(r, "keep it") if r["request"]["operation"] == "DELETE" else allow(r)
    rules = [{"operations": ["*"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]
    await configure(stack, "validating", "v", hook(server, "del.example.com", "/v", rules=rules))
    res = stack.rest.index.get("", "v1", "configmaps")
    await stack.rest.create(res, "v1", "default", cm("d"), WriteOptions(dry_run=True))
    assert server.calls_to("/v")[-1]["request"]["dryRun"] is True
    await stack.client.resource("", "v1", "configmaps").create(cm("d"))
    with pytest.raises(APIError) as e:
        await stack.client.resource("", "v1", "configmaps").delete("d", "default")
    assert e.value.message == 'admission webhook "del.example.com" denied the request: keep it'
    req = server.calls_to("/v")[-1]["request"]
    assert req["object"] is None and req["oldObject"]["metadata"]["name"] == "d"
    assert req["options"]["kind"] == "DeleteOptions"


async def test_configurations_are_never_sent_to_webhooks(stack, server):
    server.handlers["/v"] = lambda r: deny(r, "no")
    rules = [{"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"]}]
    await configure(stack, "validating", "v", hook(server, "all.example.com", "/v", rules=rules))
    await configure(stack, "validating", "w", hook(server, "other.example.com", "/v"))
    await stack.client.resource(G, "v1", "validatingwebhookconfigurations").delete("v")
    assert server.calls_to("/v") == []


async def test_equivalent_match_converts_to_the_rules_version(stack, server):
    server.handlers["/v"] = lambda r: allow(r)
    rules = [{"operations": ["CREATE"], "apiGroups": ["autoscaling"], "apiVersions": ["v1"],
              "resources": ["horizontalpodautoscalers"]}]
    await configure(stack, "validating", "v", hook(server, "eq.example.com", "/v", rules=rules))
    await configure(stack, "validating", "x", hook(server, "exact.example.com", "/x", rules=rules, matchPolicy="Exact"))
    hpa = {"metadata": {"name": "h", "namespace": "default"},
           "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"},
                    "minReplicas": 1, "maxReplicas": 3}}
    await stack.client.resource("autoscaling", "v2", "horizontalpodautoscalers").create(hpa)
    req = server.calls_to("/v")[0]["request"]
    assert req["kind"] == {"group": "autoscaling", "version": "v1", "kind": "HorizontalPodAutoscaler"}
    assert req["requestKind"]["version"] == "v2" and req["object"]["apiVersion"] == "autoscaling/v1"
    assert server.calls_to("/x") == []


async def test_service_reference_resolves_through_ready_endpoints(stack):
    from tests.apiserver.admission.server import TestCA, primary_ip

    ip = primary_ip()
    if ip is None:
        pytest.skip("no non-loopback address to put in an EndpointSlice")
    svc_server = WebhookServer(TestCA(dns_names=("hooks.default.svc",)), host=ip).start()
    try:
        svc_server.handlers["/check"] = lambda r: deny(r, "via service")
        await stack.client.resource("", "v1", "services").create(
            {"metadata": {"name": "hooks", "namespace": "default"},
             "spec": {"ports": [{"name": "https", "port": 443, "targetPort": 8443}]}})
        await stack.client.resource("discovery.k8s.io", "v1", "endpointslices").create(
            {"metadata": {"name": "hooks-1", "namespace": "default", "labels": {"kubernetes.io/service-name": "hooks"}},
             "addressType": "IPv4", "ports": [{"name": "https", "port": svc_server.port}],
             "endpoints": [{"addresses": [ip], "conditions": {"ready": True}}]})
        w = hook(svc_server, "svc.example.com", "/check")
        w["clientConfig"] = {"service": {"namespace": "default", "name": "hooks", "path": "/check"},
                             "caBundle": svc_server.ca.bundle}
        await configure(stack, "validating", "svc", w)
        with pytest.raises(APIError) as e:
            await stack.client.resource("", "v1", "configmaps").create(cm("a"))
        assert e.value.message == 'admission webhook "svc.example.com" denied the request: via service'
        cfgs = stack.client.resource(G, "v1", "validatingwebhookconfigurations")
        cfg = copy.deepcopy(await cfgs.get("svc"))
        cfg["webhooks"][0]["clientConfig"]["service"]["name"] = "missing"
        await cfgs.update(cfg)
        with pytest.raises(APIError) as e:
            await stack.client.resource("", "v1", "configmaps").create(cm("b"))
        assert e.value.message == ('Internal error occurred: failed calling webhook "svc.example.com": '
                                   'failed to call webhook: service "missing" not found')
    finally:
        svc_server.stop()


async def test_subresources_with_their_own_kinds(stack, server):
    server.handlers["/v"] = lambda r: deny(r, f"no {r['request']['kind']['kind']}")
    rules = [{"operations": ["CREATE", "UPDATE"], "apiGroups": ["", "apps"], "apiVersions": ["v1"],
              "resources": ["pods/binding", "pods/eviction", "deployments/scale"]}]
    await configure(stack, "validating", "v", hook(server, "sub.example.com", "/v", rules=rules))
    pods = stack.client.resource("", "v1", "pods")
    await pods.create({"metadata": {"name": "p", "namespace": "default"},
                       "spec": {"containers": [{"name": "c", "image": "x"}]}})
    res = stack.rest.index.get("", "v1", "pods")
    with pytest.raises(APIError) as e:
        await stack.rest_subresources.bind(res, "default", "p", {"metadata": {"name": "p"}, "target": {"name": "n1"}},
                                           WriteOptions())
    assert e.value.message == 'admission webhook "sub.example.com" denied the request: no Binding'
    req = server.calls_to("/v")[-1]["request"]
    assert (req["kind"], req["resource"]["resource"], req["subResource"], req["name"]) == (
        {"group": "", "version": "v1", "kind": "Binding"}, "pods", "binding", "p")
    with pytest.raises(APIError) as e:
        await stack.rest_subresources.evict("default", "p", {"metadata": {"name": "p"}}, WriteOptions())
    assert e.value.message == 'admission webhook "sub.example.com" denied the request: no Eviction'
    deps = stack.rest.index.get("apps", "v1", "deployments")
    tpl = {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
    await stack.client.resource("apps", "v1", "deployments").create(
        {"metadata": {"name": "d", "namespace": "default"},
         "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "d"}}, "template": tpl}})
    with pytest.raises(APIError) as e:
        await stack.rest_subresources.put_scale(deps, "v1", "default", "d", {"spec": {"replicas": 3}}, WriteOptions())
    assert e.value.message == 'admission webhook "sub.example.com" denied the request: no Scale'
    req = server.calls_to("/v")[-1]["request"]
    assert req["object"]["spec"] == {"replicas": 3} and req["oldObject"]["spec"] == {"replicas": 1}


async def test_connect_admission_of_exec(stack, server):
    from multidict import MultiDict

    from nanokube.apiserver.streaming.pods import connect_options

    server.handlers["/v"] = lambda r: deny(r, "no shells in production") if "sh" in r["request"]["object"]["command"] \
        else allow(r)
    rules = [{"operations": ["CONNECT"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods/exec"]}]
    await configure(stack, "validating", "v", hook(server, "exec.example.com", "/v", rules=rules))
    q = MultiDict([("command", "sh"), ("command", "-c"), ("command", "ls"), ("stdin", "true"), ("tty", "1"),
                   ("container", "main")])
    opts = connect_options("exec", q)
    assert opts == {"kind": "PodExecOptions", "apiVersion": "v1", "stdin": True, "tty": True, "container": "main",
                    "command": ["sh", "-c", "ls"]}
    with pytest.raises(APIError) as e:
        await stack.rest.admit_connect("exec", "default", "p", opts, User("bob", ("devs",)))
    assert e.value.message == 'admission webhook "exec.example.com" denied the request: no shells in production'
    req = server.calls_to("/v")[-1]["request"]
    assert (req["operation"], req["kind"], req["subResource"], req["name"], req["options"]) == (
        "CONNECT", {"group": "", "version": "v1", "kind": "PodExecOptions"}, "exec", "p", None)
    await stack.rest.admit_connect("exec", "default", "p", connect_options("exec", MultiDict([("command", "date")])),
                                   User("bob"))
    assert connect_options("portforward", MultiDict([("ports", "8080,9090")])) == {
        "kind": "PodPortForwardOptions", "apiVersion": "v1", "ports": [8080, 9090]}


async def test_timeout_review_version_and_warnings_on_denial(stack, server):
    release = threading.Event()  # the webhook answers only once the API server has given up on it
    server.handlers["/slow"] = lambda r: release.wait(60) and allow(r)
    await configure(stack, "validating", "slow", hook(server, "slow.example.com", "/slow", timeoutSeconds=1))
    try:
        with pytest.raises(APIError) as e:
            await stack.client.resource("", "v1", "configmaps").create(cm("a"))
    finally:
        release.set()
    assert e.value.message == ('Internal error occurred: failed calling webhook "slow.example.com": failed to call '
                               f'webhook: Post "{server.url("/slow")}?timeout=1s": context deadline exceeded')
    await stack.client.resource(G, "v1", "validatingwebhookconfigurations").delete("slow")

    # a v1beta1 reviewer: asked in v1beta1, its response's uid is not checked
    server.handlers["/old"] = lambda r: {"response": {"allowed": False, "status": {"message": "old style"}},
                                         "warnings": []} if r["apiVersion"] == "admission.k8s.io/v1beta1" else allow(r)
    await configure(stack, "validating", "old", hook(server, "old.example.com", "/old",
                                                     admissionReviewVersions=["v1beta1"]))
    with pytest.raises(APIError) as e:
        await stack.client.resource("", "v1", "configmaps").create(cm("b"))
    assert e.value.message == 'admission webhook "old.example.com" denied the request: old style'
    assert server.calls_to("/old")[0]["apiVersion"] == "admission.k8s.io/v1beta1"
    await stack.client.resource(G, "v1", "validatingwebhookconfigurations").delete("old")

    server.handlers["/v"] = lambda r: deny(r, "nope", warnings=['mind the "quotes"', "second"])
    await configure(stack, "validating", "v", hook(server, "warn.example.com", "/v"))
    with pytest.raises(APIError) as e:
        await stack.client.resource("", "v1", "configmaps").create(cm("c"))
    assert e.value.headers["Warning"] == '299 - "mind the \\"quotes\\"", 299 - "second"'


async def test_defaults_reapplied_after_a_patch_and_dry_run_side_effects(stack, server):
    from nanokube.apiserver.cache import stored_value

    server.handlers["/m"] = lambda r: json_patch(r, [{"op": "remove", "path": "/spec/restartPolicy"},
                                                     {"op": "add", "path": "/metadata/labels", "value": {"p": "1"}}])
    rules = [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}]
    await configure(stack, "mutating", "m", hook(server, "pods.example.com", "/m", rules=rules))
    created = await stack.client.resource("", "v1", "pods").create(
        {"metadata": {"name": "p", "namespace": "default"}, "spec": {"containers": [{"name": "c", "image": "x"}]}})
    assert created["spec"]["restartPolicy"] == "Always" and created["metadata"]["labels"] == {"p": "1"}

    # sideEffects other than None/NoneOnDryRun (only stored by older API versions) refuse dry runs
    legacy = {"apiVersion": f"{G}/v1", "kind": "ValidatingWebhookConfiguration", "metadata": {"name": "legacy"},
              "webhooks": [hook(server, "legacy.example.com", "/v", sideEffects="Unknown", failurePolicy="Ignore",
                                matchPolicy="Equivalent", timeoutSeconds=10)]}
    res = stack.rest.index.get(G, "v1", "validatingwebhookconfigurations")
    kv = await stack.store.create(res.key(None, "legacy"), stored_value(legacy))
    await stack.cache.wait_for(kv.mod_revision)
    with pytest.raises(APIError) as e:
        await stack.rest.create(stack.rest.index.get("", "v1", "configmaps"), "v1", "default", cm("dry"),
                                WriteOptions(dry_run=True))
    assert (e.value.code, e.value.message) == (400, 'admission webhook "legacy.example.com" does not support dry run')


async def test_webhook_metrics(stack, server):
    from prometheus_client import generate_latest

    server.handlers["/v"] = lambda r: deny(r, "no", code=403)
    await configure(stack, "validating", "v", hook(server, "metered.example.com", "/v"))
    with pytest.raises(APIError):
        await stack.client.resource("", "v1", "configmaps").create(cm("a"))
    text = generate_latest(stack.rest.admission.webhooks.metrics.registry).decode()
    assert ('apiserver_admission_webhook_request_total{code="403",name="metered.example.com",operation="CREATE",'
            'rejected="true",type="validating"} 1.0') in text
    assert ('apiserver_admission_webhook_rejection_count{error_type="no_error",name="metered.example.com",'
            'operation="CREATE",rejection_code="403",type="validating"} 1.0') in text


async def test_mutating_webhook_on_scale_caps_replicas(stack, server):
    server.handlers["/cap"] = lambda r: json_patch(r, [{"op": "replace", "path": "/spec/replicas", "value": 2}]) \
        if r["request"]["object"]["spec"]["replicas"] > 2 else allow(r)
    rules = [{"operations": ["UPDATE"], "apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments/scale"]}]
    await configure(stack, "mutating", "cap", hook(server, "cap.example.com", "/cap", rules=rules))
    tpl = {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
    await stack.client.resource("apps", "v1", "deployments").create(
        {"metadata": {"name": "d", "namespace": "default"},
         "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "d"}}, "template": tpl}})
    scale = await stack.rest_subresources.put_scale(stack.rest.index.get("apps", "v1", "deployments"), "v1", "default",
                                                    "d", {"spec": {"replicas": 5}}, WriteOptions())
    assert scale["spec"]["replicas"] == 2
    stored = await stack.client.resource("apps", "v1", "deployments").get("d", "default")
    assert stored["spec"]["replicas"] == 2


@pytest.mark.parametrize(("response", "mutating", "reason"), [
    ({"allowed": "yes"}, False, "json: cannot unmarshal string into Go struct field AdmissionResponse.response.allowed of type bool"),
    ({"auditAnnotations": ["k"]}, True,
     "json: cannot unmarshal array into Go struct field AdmissionResponse.response.auditAnnotations of type map[string]string"),
    ({"auditAnnotations": {"k": 1}}, False,
     "json: cannot unmarshal number into Go struct field AdmissionResponse.response.auditAnnotations of type string"),
    ({"warnings": "careful"}, False,
     "json: cannot unmarshal string into Go struct field AdmissionResponse.response.warnings of type []string"),
    ({"allowed": False, "status": "no"}, False,
     "json: cannot unmarshal string into Go struct field AdmissionResponse.response.status of type v1.Status"),
    ({"allowed": False, "status": {"code": 2**40}}, True,
     "json: cannot unmarshal number 1099511627776 into Go struct field Status.response.status.code of type int32"),
    ({"allowed": False, "status": {"details": {"causes": [{"field": 1}]}}}, False,
     "json: cannot unmarshal number into Go struct field StatusCause.response.status.details.causes.field of type string"),
    ({"patchType": "JSONPatch", "patch": [1]}, True,
     "json: cannot unmarshal array into Go struct field AdmissionResponse.response.patch of type []uint8"),
    ({"patchType": "JSONPatch", "patch": "W10=!"}, True, "illegal base64 data at input byte 4"),
    ({"apiVersion": 1}, True, "couldn't get version/kind; json parse error: json: cannot unmarshal number into Go "
                              "struct field .apiVersion of type string"),
])
async def test_an_answer_go_cannot_decode_fails_the_call(stack, server, response, mutating, reason):
    """An AdmissionReview whose response holds a value of the wrong type fails the call under the failure
    policy, in the words of Go's decoder (the REST client's Into), as kube-apiserver's does: a list of
    audit annotations or a Status that was a string raised in the server (a 500 even under Ignore), and
    `allowed: "yes"` let the request through a webhook that fails closed."""
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}
    server.handlers["/w"] = lambda r: {**review, **{k: v for k, v in response.items() if k == "apiVersion"},
                                       "response": {"uid": r["request"]["uid"], "allowed": True,
                                                    **{k: v for k, v in response.items() if k != "apiVersion"}}}
    kind = "mutating" if mutating else "validating"
    await configure(stack, kind, "w", hook(server, "w.example.com", "/w"))
    configmaps = stack.client.resource("", "v1", "configmaps")
    with pytest.raises(APIError) as e:
        await configmaps.create(cm("a"))
    assert (e.value.code, e.value.message) == (
        500, f'Internal error occurred: failed calling webhook "w.example.com": failed to call webhook: {reason}')
    cfgs = stack.client.resource(G, "v1", f"{kind}webhookconfigurations")
    cfg = copy.deepcopy(await cfgs.get("w"))
    cfg["webhooks"][0]["failurePolicy"] = "Ignore"
    await cfgs.update(cfg)
    created = await configmaps.create(cm("a"))
    assert created["data"] == {"k": "v"} and "labels" not in created["metadata"]


@pytest.mark.parametrize(("ops", "code", "message"), [
    ([{"op": "replace", "path": "/metadata/resourceVersion", "value": "12345"}], 409,
     'Operation cannot be fulfilled on configmaps "a": the object has been modified; please apply your changes to '
     "the latest version and try again"),
    ([{"op": "replace", "path": "/metadata/uid", "value": "other"}], 422,
     'ConfigMap "a" is invalid: metadata.uid: Invalid value: "other": field is immutable'),
])
async def test_a_mutation_of_the_resource_version_or_uid_on_update_is_judged_as_the_store_judges_it(
        stack, server, ops, code, message):
    """Upstream's mutating admission runs inside Store.Update's UpdatedObject, so the object it leaves meets
    the resourceVersion check (a webhook's other version is a 409) and ValidateObjectMetaUpdate (another
    uid is immutable); ours put the stored values back and wrote the update."""
    configmaps = stack.client.resource("", "v1", "configmaps")
    created = await configmaps.create(cm("a"))
    server.handlers["/m"] = lambda r: json_patch(r, ops)
    w = hook(server, "m.example.com", "/m")
    w["rules"][0]["operations"] = ["UPDATE"]
    await configure(stack, "mutating", "m", w)
    changed = copy.deepcopy(created)
    changed["data"] = {"k": "changed"}
    with pytest.raises(APIError) as e:
        await configmaps.update(changed)
    assert (e.value.code, e.value.message) == (code, message)
    stored = await configmaps.get("a", "default")
    assert stored["data"] == {"k": "v"} and stored["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
