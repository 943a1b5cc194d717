"""A pods/status patch that names only status (the scheduler's PodScheduled=False, a kubelet's)
patches a copy of the status alone and shares the rest of the live pod, unless a policy or
webhook is configured: then it patches and defaults a copy of the whole pod, as it would show it
all to them."""

from __future__ import annotations

import copy

import orjson
import pytest

from nanokube.apiserver.cache import stored_value
from nanokube.apiserver.rest import MERGE_PATCH, STRATEGIC_PATCH, WriteOptions
from nanokube.machinery import encoded
from nanokube.machinery.fieldorder import in_upstream_order
from tests.served import sent, served

NS = "default"
POD = {"metadata": {"name": "p", "namespace": NS, "labels": {"app": "a"}},
       "spec": {"containers": [{"name": "c", "image": "x", "resources": {"limits": {"cpu": "1"}}}]}}
COND = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/3 nodes are available",
        "lastProbeTime": None, "lastTransitionTime": "2026-12-03T08:00:00Z"}


def _same_but_identity(a: dict, b: dict) -> dict:
    """`b` with `a`'s name, uid, resourceVersion, creation time and managedFields' times, to compare two
    pods' writes (made in two seconds, maybe)."""
    out = copy.deepcopy(b)
    for f in ("name", "uid", "resourceVersion", "creationTimestamp"):
        out["metadata"][f] = a["metadata"][f]
    for entry, theirs in zip(out["metadata"]["managedFields"], a["metadata"]["managedFields"]):
        entry["time"] = theirs["time"]
    return out


@pytest.mark.parametrize("patch_type", [STRATEGIC_PATCH, MERGE_PATCH])
async def test_a_status_only_patch_stores_what_the_whole_pod_patch_does(stack, patch_type):
    pods = stack.client.resource("", "v1", "pods")
    a = await pods.create(POD)
    await pods.create({**POD, "metadata": {**POD["metadata"], "name": "q"}})
    cached = stack.cache.get("/registry/pods/default/p").obj
    before = copy.deepcopy(cached)
    # `metadata: {}` names a field beyond status: that patch goes the whole pod's way
    pa = await pods.patch("p", {"status": {"conditions": [COND]}}, patch_type, namespace=NS, subresource="status")
    pq = await pods.patch("q", {"metadata": {}, "status": {"conditions": [COND]}}, patch_type, namespace=NS,
                          subresource="status")
    assert pa == _same_but_identity(pa, pq)
    # the patch's null deletes lastProbeTime, which Go's decoder leaves zero: served null again
    assert pa["status"]["conditions"] == [COND]
    assert pa["spec"] == a["spec"] and pa["metadata"]["labels"] == {"app": "a"}
    assert cached == before  # the live pod it shared its spec with is as it was
    assert stack.cache.get("/registry/pods/default/p").obj["spec"] is cached["spec"]
    again = await pods.patch("p", {"status": {"conditions": [{**COND, "message": "0/4 nodes are available"}]}},
                             patch_type, namespace=NS, subresource="status")
    assert again["status"]["conditions"][0]["message"] == "0/4 nodes are available"
    assert [c["type"] for c in again["status"]["conditions"]] == ["PodScheduled"]
    gone = await pods.patch("p", {"status": None}, patch_type, namespace=NS, subresource="status")
    assert "conditions" not in (gone.get("status") or {}) and gone["spec"] == a["spec"]


async def test_a_policy_sees_the_whole_defaulted_pod_of_a_status_patch(stack):
    """A stored spec that defaulting would still fill in (written below the API, as an older
    server might have left it): a mutating policy on pods/status is shown it defaulted."""
    pods = stack.client.resource("", "v1", "pods")
    p = await pods.create(POD)
    bare = {**p, "spec": {k: v for k, v in p["spec"].items() if k != "dnsPolicy"}}
    kv = await stack.store.update("/registry/pods/default/p", stored_value(bare), int(p["metadata"]["resourceVersion"]))
    await stack.cache.wait_for(kv.mod_revision)
    out = await pods.patch("p", {"status": {"conditions": [COND]}}, STRATEGIC_PATCH, namespace=NS, subresource="status")
    assert "dnsPolicy" not in out["spec"] and "message" not in out["status"]  # nothing to show: as stored
    policies = stack.client.resource("admissionregistration.k8s.io", "v1", "mutatingadmissionpolicies")
    await policies.create({"metadata": {"name": "dns"}, "spec": {
        "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"],
                                                "resources": ["pods/status"]}]},
        "reinvocationPolicy": "Never",
        "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression":
                       '[JSONPatch{op: "add", path: "/status/message", value: object.spec.dnsPolicy}]'}}]}})
    await stack.client.resource("admissionregistration.k8s.io", "v1", "mutatingadmissionpolicybindings").create(
        {"metadata": {"name": "dns"}, "spec": {"policyName": "dns"}})
    out = await pods.patch("p", {"status": {"conditions": [COND]}}, STRATEGIC_PATCH, namespace=NS, subresource="status")
    assert out["status"]["message"] == "ClusterFirst" and "dnsPolicy" not in out["spec"]


async def test_a_status_patch_over_the_same_status_stores_the_remembered_result(stack):
    """The same status patch over an equal live status yields the status the first one stored (one
    object, shared like equal spec values); a live status that differs in anything gets its own."""
    pods = stack.client.resource("", "v1", "pods")
    for name in ("p", "q", "r"):
        await pods.create({**POD, "metadata": {**POD["metadata"], "name": name}})
    await pods.patch("r", {"status": {"conditions": [{**COND, "type": "Ready"}]}}, STRATEGIC_PATCH, namespace=NS,
                     subresource="status")
    out = {n: await pods.patch(n, {"status": {"conditions": [COND]}}, STRATEGIC_PATCH, namespace=NS,
                               subresource="status") for n in ("p", "q", "r")}
    cached = {n: stack.cache.get(f"/registry/pods/default/{n}").obj for n in out}
    assert out["p"]["status"] == out["q"]["status"] and cached["q"]["status"] is cached["p"]["status"]
    assert out["q"]["status"]["conditions"] == [COND]
    assert sorted(c["type"] for c in out["r"]["status"]["conditions"]) == ["PodScheduled", "Ready"]
    # one number more: another patch, merged anew
    later = await pods.patch("q", {"status": {"conditions": [COND], "observedGeneration": 1}}, STRATEGIC_PATCH,
                             namespace=NS, subresource="status")
    assert later["status"]["observedGeneration"] == 1 and cached["p"]["status"].get("observedGeneration") is None


async def test_a_status_patch_with_an_unknown_field_is_checked_each_time(stack):
    """A status with a field the kind lacks is never remembered: each such patch gets its warning
    (Warn) and has the field dropped, however often it comes."""
    pods = stack.client.resource("", "v1", "pods")
    res = stack.rest.index.get("", "v1", "pods")
    raw = b'{"status": {"conditions": [{"type": "PodScheduled", "status": "False", "bogus": 1}]}}'
    for name in ("p", "q"):
        await pods.create({**POD, "metadata": {**POD["metadata"], "name": name}})
        r = await stack.rest.patch(res, "v1", NS, name, STRATEGIC_PATCH, raw, WriteOptions(field_validation="Warn"),
                                   subresource="status")
        assert r.warnings == ['unknown field "status.conditions[0].bogus"']
        assert "bogus" not in r.obj["status"]["conditions"][0]


async def test_a_remembered_status_patch_sent_elsewhere_is_decoded_and_merged_as_ever(stack):
    """The bytes of a remembered status patch sent to the pod itself (whose status the status
    subresource owns) or over another live status are decoded and merged as any patch."""
    pods = stack.client.resource("", "v1", "pods")
    res = stack.rest.index.get("", "v1", "pods")
    raw = b'{"status":{"conditions":[{"type":"PodScheduled","status":"False","reason":"Unschedulable"}]}}'
    for name in ("p", "q"):
        await pods.create({**POD, "metadata": {**POD["metadata"], "name": name}})
    for name in ("p", "q"):
        await stack.rest.patch(res, "v1", NS, name, STRATEGIC_PATCH, raw, WriteOptions(), subresource="status")
    main = await stack.rest.patch(res, "v1", NS, "p", STRATEGIC_PATCH, raw, WriteOptions())
    assert main.obj["status"] == stack.cache.get("/registry/pods/default/q").obj["status"]
    await stack.rest.patch(res, "v1", NS, "p", STRATEGIC_PATCH, b'{"status":{"conditions":[{"type":"Ready",'
                           b'"status":"True"}]}}', WriteOptions(), subresource="status")
    again = await stack.rest.patch(res, "v1", NS, "p", STRATEGIC_PATCH, raw, WriteOptions(), subresource="status")
    assert sorted(c["type"] for c in again.obj["status"]["conditions"]) == ["PodScheduled", "Ready"]


async def test_a_status_write_stores_the_bytes_of_its_object_with_the_parts_it_kept_known(stack):
    """A created pod's spec is not remembered (a create or a binding would pay for it alone); a
    status write that keeps it remembers its JSON for the next ones, and a status write that keeps
    it (and its managedFields' FieldsV1) stores the very bytes a plain encoding of its object gives."""
    pods = stack.client.resource("", "v1", "pods")
    await pods.create(POD)
    cached = stack.cache.get("/registry/pods/default/p").obj
    assert encoded.known(cached["spec"]) is None
    for _ in range(2):
        await pods.patch("p", {"status": {"conditions": [COND]}}, STRATEGIC_PATCH, namespace=NS, subresource="status")
    obj = stack.cache.get("/registry/pods/default/p").obj
    assert obj["spec"] is cached["spec"]
    assert encoded.known(obj["spec"]) == orjson.dumps(obj["spec"])
    kv = await stack.store.get("/registry/pods/default/p")
    assert kv.value == stored_value(in_upstream_order(dict(obj), ""))


async def test_a_status_patch_repeating_a_key_warns_each_time_it_comes(tmp_path):
    """A status patch that repeats a key is never remembered, so the scan for repeated keys that a
    remembered patch goes without finds it each time: every pod's answer warns (fieldValidation=Warn)."""
    raw = b'{"status":{"conditions":[{"type":"PodScheduled","status":"False","reason":"Twice","reason":"Twice"}]}}'
    async with served(tmp_path) as (_, api):
        for name in ("p", "q", "r"):
            code, _, _ = await sent(api, "POST", f"/api/v1/namespaces/{NS}/pods",
                                    {**POD, "metadata": {**POD["metadata"], "name": name}})
            assert code == 201
            code, body, warned = await sent(api, "PATCH", f"/api/v1/namespaces/{NS}/pods/{name}/status", raw,
                                            STRATEGIC_PATCH)
            assert code == 200 and body["status"]["conditions"][0]["reason"] == "Twice"
            assert warned == ['299 - "duplicate field \\"status.conditions[0].reason\\""']
