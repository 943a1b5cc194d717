"""CRD conversion: None rewrites apiVersion; Webhook posts a ConversionReview to
a real HTTPS server trusted through the CRD's caBundle."""

from __future__ import annotations

import pytest

from nanokube.apiserver.apiextensions.conversion import ConversionError, Converter, convert
from nanokube.apiserver.webhook.client import WebhookClient
from tests.apiserver.admission.server import TestCA, WebhookServer

G = "stable.example.com"


def widget(version: str, name: str, spec: dict, **meta) -> dict:
    return {"apiVersion": f"{G}/{version}", "kind": "Widget",
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "resourceVersion": "7", **meta},
            "spec": spec}


def to_version(obj: dict, desired: str) -> dict:
    """The test webhook's conversion: v1 spec.size is an int, v2 spec.size.value."""
    out = {**obj, "apiVersion": desired}
    spec = dict(obj.get("spec") or {})
    if desired.endswith("/v2") and not isinstance(spec.get("size"), dict):
        spec["size"] = {"value": spec.get("size", 0)}
    elif desired.endswith("/v1") and isinstance(spec.get("size"), dict):
        spec["size"] = spec["size"]["value"]
    out["spec"] = spec
    return out


def converting(review: dict) -> dict:
    req = review["request"]
    return {"apiVersion": review["apiVersion"], "kind": "ConversionReview",
            "response": {"uid": req["uid"], "result": {"status": "Success"},
                         "convertedObjects": [to_version(o, req["desiredAPIVersion"]) for o in req["objects"]]}}


@pytest.fixture(scope="module")
def server():
    s = WebhookServer(TestCA(dns_names=("converter.conversion.svc",))).start()
    s.handlers["/convert"] = converting
    yield s
    s.stop()


@pytest.fixture
async def client():
    c = WebhookClient()
    yield c
    await c.close()


def crd(server=None, path="/convert", versions=("v1",)) -> dict:
    spec = {"group": G, "names": {"kind": "Widget", "plural": "widgets"}, "scope": "Namespaced",
            "versions": [{"name": "v1", "served": True, "storage": True}, {"name": "v2", "served": True}]}
    if server is not None:
        spec["conversion"] = {"strategy": "Webhook", "webhook": {
            "conversionReviewVersions": list(versions),
            "clientConfig": {"url": server.url(path), "caBundle": server.ca.bundle}}}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"widgets.{G}"}, "spec": spec}


async def test_none_strategy_rewrites_api_version_only():
    objs = [widget("v1", "a", {"size": 1}), widget("v2", "b", {"size": 2})]
    out = await convert(crd(), objs, f"{G}/v2")
    assert out == [{**objs[0], "apiVersion": f"{G}/v2"}, objs[1]]
    assert objs[0]["apiVersion"] == f"{G}/v1"  # the input is not modified


async def test_webhook_converts_and_skips_objects_already_converted(server, client):
    server.calls.clear()
    objs = [widget("v1", "a", {"size": 3}), widget("v2", "b", {"size": {"value": 4}})]
    out = await Converter(client).convert(crd(server), objs, f"{G}/v2")
    assert [o["spec"] for o in out] == [{"size": {"value": 3}}, {"size": {"value": 4}}]
    assert out[1] is objs[1]
    (review,) = server.calls_to("/convert")
    assert review["apiVersion"] == "apiextensions.k8s.io/v1" and review["kind"] == "ConversionReview"
    assert review["request"]["desiredAPIVersion"] == f"{G}/v2"
    assert [o["metadata"]["name"] for o in review["request"]["objects"]] == ["a"]
    assert server.calls[-1][1] == "timeout=30s"


async def test_nothing_to_convert_makes_no_call(server, client):
    server.calls.clear()
    objs = [widget("v2", "a", {"size": {"value": 1}})]
    assert await Converter(client).convert(crd(server), objs, f"{G}/v2") == objs
    assert server.calls == []


async def test_v1beta1_review_when_listed_first(server, client):
    server.calls.clear()
    await Converter(client).convert(crd(server, versions=("v1beta1", "v1")), [widget("v1", "a", {"size": 1})],
                                    f"{G}/v2")
    assert server.calls_to("/convert")[0]["apiVersion"] == "apiextensions.k8s.io/v1beta1"


async def test_only_labels_and_annotations_come_back_from_the_webhook(server, client):
    def relabel(review):
        out = converting(review)
        for o in out["response"]["convertedObjects"]:
            o["metadata"] = {**o["metadata"], "labels": {"converted": "yes"}, "annotations": {"a": "b"},
                             "resourceVersion": "999", "generation": 42}
        return out

    server.handlers["/relabel"] = relabel
    (out,) = await Converter(client).convert(crd(server, "/relabel"), [widget("v1", "a", {"size": 1}, labels={"x": "y"})],
                                             f"{G}/v2")
    assert out["metadata"] == {"name": "a", "namespace": "default", "uid": "uid-a", "resourceVersion": "7",
                               "labels": {"converted": "yes"}, "annotations": {"a": "b"}}


def _answer(mutate):
    def handler(review):
        out = converting(review)
        mutate(out)
        return out
    return handler


GVK = f"{G}/v1, Kind=Widget"
BAD_ANSWERS = {
    "/wrong-uid": (_answer(lambda a: a["response"].update(uid="other")),
                   f'conversion webhook for {GVK} failed: expected response.uid="'),
    "/no-response": (_answer(lambda a: a.pop("response")),
                     f"conversion webhook for {GVK} failed: no response provided"),
    "/failed": (_answer(lambda a: a["response"].update(result={"status": "Failure", "message": "cannot convert"})),
                f"conversion webhook for {GVK} failed: cannot convert"),
    "/failed-no-message": (_answer(lambda a: a["response"].update(result={"status": "Failure"})),
                           f"conversion webhook for {GVK} failed: response.result.status was 'Failure', not 'Success'"),
    "/wrong-kind-review": (_answer(lambda a: a.update(kind="AdmissionReview")),
                           f"conversion webhook for {GVK} failed: expected webhook response of "
                           "apiextensions.k8s.io/v1, Kind=ConversionReview, got apiextensions.k8s.io/v1, "
                           "Kind=AdmissionReview"),
    "/count": (_answer(lambda a: a["response"].update(convertedObjects=[])),
               f"conversion webhook for {GVK} returned 0 objects, expected 1"),
    "/version": (_answer(lambda a: a["response"]["convertedObjects"][0].update(apiVersion=f"{G}/v1")),
                 f"conversion webhook for {GVK} returned invalid converted object at index 0: invalid groupVersion "
                 f"(expected {G}/v2, received {G}/v1)"),
    "/kind": (_answer(lambda a: a["response"]["convertedObjects"][0].update(kind="Gadget")),
              f"conversion webhook for {GVK} returned invalid converted object at index 0: invalid kind "
              "(expected Widget, received Gadget)"),
    "/rename": (_answer(lambda a: a["response"]["convertedObjects"][0]["metadata"].update(name="b")),
                f"conversion webhook for {GVK} returned invalid converted object at index 0: must have the same "
                "name: a != b"),
}


@pytest.mark.parametrize("path", list(BAD_ANSWERS))
async def test_bad_answers_are_refused_with_upstream_messages(server, client, path):
    handler, message = BAD_ANSWERS[path]
    server.handlers[path] = handler
    with pytest.raises(ConversionError) as e:
        await Converter(client).convert(crd(server, path), [widget("v1", "a", {"size": 1})], f"{G}/v2")
    assert str(e.value).startswith(message), str(e.value)


async def test_a_list_is_named_by_its_list_kind(server, client):
    server.handlers["/fail"] = BAD_ANSWERS["/failed"][0]
    with pytest.raises(ConversionError, match=f"conversion webhook for {G}/v1, Kind=WidgetList failed: cannot convert"):
        await Converter(client).convert(crd(server, "/fail"), [widget("v1", "a", {"size": 1})], f"{G}/v2",
                                        list_kind="WidgetList")


def test_status_error_is_a_500_without_reason():
    from nanokube.apiserver.apiextensions.conversion import status_error

    e = status_error(ConversionError("conversion webhook for x failed: no"))
    assert (e.code, e.reason, e.message) == (500, "", "conversion webhook for x failed: no")


async def test_untrusted_server(server, client):
    other = TestCA()
    c = crd(server)
    c["spec"]["conversion"]["webhook"]["clientConfig"]["caBundle"] = other.bundle
    with pytest.raises(ConversionError, match=f"conversion webhook for {GVK} failed: Post \"{server.url('/convert')}\\?timeout=30s\": "
                                              "tls: failed to verify certificate: x509: certificate signed by unknown "
                                              "authority"):
        await Converter(client).convert(c, [widget("v1", "a", {"size": 1})], f"{G}/v2")


async def test_service_reference_uses_the_service_server_name(server):
    c = crd(server)
    c["spec"]["conversion"]["webhook"]["clientConfig"] = {
        "service": {"namespace": "conversion", "name": "converter", "path": "/convert", "port": 8443},
        "caBundle": server.ca.bundle}
    seen = []
    client = WebhookClient(lambda ns, name, port: seen.append((ns, name, port)) or ("127.0.0.1", server.port))
    try:
        (out,) = await Converter(client).convert(c, [widget("v1", "a", {"size": 5})], f"{G}/v2")
    finally:
        await client.close()
    assert out["spec"] == {"size": {"value": 5}} and seen == [("conversion", "converter", 8443)]
