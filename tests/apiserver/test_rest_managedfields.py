"""managedFields through the official client, as kube-apiserver's field manager records them: in the
version a write is made at (events.k8s.io/v1 and core/v1 Events are one stored object; each write's
fields are named as its API names them, and a manager of the other API sees the change in its own
names), and before mutating admission (what a policy adds belongs to nobody)."""

from __future__ import annotations

import asyncio
import json

import pytest
from kubernetes.client.rest import ApiException

from tests.served import send, served
from tests.controllers import tries

EVENTS = "/apis/events.k8s.io/v1/namespaces/default/events"
CORE_EVENTS = "/api/v1/namespaces/default/events"


async def call(api_client, method: str, path: str, body=None, manager: str = "",
               content_type: str = "application/json", force: bool = False, warnings: list | None = None):
    """The response body; its Warning header goes into `warnings`."""
    query = [("fieldManager", manager)] if manager else []
    if force:
        query.append(("force", "true"))

    def send():
        request = api_client.param_serialize(method, path, query_params=query,
                                             body=json.dumps(body) if "yaml" in content_type else body,
                                             header_params={"Content-Type": content_type, "Accept": "application/json"})
        response = api_client.call_api(*request[:4])
        response.read()
        if not 200 <= response.status < 300:
            raise ApiException(http_resp=response)
        if warnings is not None and response.getheader("Warning"):
            warnings.append(response.getheader("Warning"))
        return json.loads(response.data)
    return await asyncio.to_thread(send)


async def refused(api_client, *args, **kw) -> tuple[int, str]:
    with pytest.raises(ApiException) as e:
        await call(api_client, *args, **kw)
    return e.value.status, json.loads(e.value.body)["message"]


def entries(obj: dict) -> dict[str, dict]:
    """managedFields by manager: (operation, apiVersion, fieldsV1)."""
    return {e["manager"]: (e["operation"], e["apiVersion"], e["fieldsV1"]) for e in obj["metadata"]["managedFields"]}


def event(name: str, note: str) -> dict:
    return {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": name},
            "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "example.com/ctl",
            "reportingInstance": "ctl-1", "action": "Scale", "reason": "Scaled", "type": "Normal",
            "regarding": {"kind": "Deployment", "namespace": "default", "name": "web"}, "note": note}


async def test_events_are_tracked_in_the_version_they_are_written_at(tmp_path):
    async with served(tmp_path) as (_, api_client):
        created = await call(api_client, "POST", EVENTS, event("web.1", "scaled up"), "modern")
        op, version, fields = entries(created)["modern"]
        assert (op, version) == ("Update", "events.k8s.io/v1")
        assert {"f:note", "f:regarding", "f:reportingController", "f:eventTime"} <= fields.keys()
        assert not {"f:message", "f:involvedObject", "f:reportingComponent"} & fields.keys()
        # one stored object: core/v1 shows the same entries, in the names they were written with
        core = await call(api_client, "GET", f"{CORE_EVENTS}/web.1")
        assert core["message"] == "scaled up"
        assert core["metadata"]["managedFields"] == created["metadata"]["managedFields"]

        legacy = await call(api_client, "POST", CORE_EVENTS, {
            "metadata": {"name": "web.2"}, "involvedObject": {"kind": "Pod", "namespace": "default", "name": "p"},
            "reason": "Pulled", "message": "pulled", "type": "Normal", "count": 1,
            "source": {"component": "kubelet"}}, "kubelet")
        op, version, fields = entries(legacy)["kubelet"]
        assert (op, version) == ("Update", "v1")
        assert {"f:message", "f:involvedObject", "f:count", "f:source"} <= fields.keys()
        assert not {"f:note", "f:regarding", "f:deprecatedCount"} & fields.keys()
        read = await call(api_client, "GET", f"{EVENTS}/web.2")
        assert read["note"] == "pulled" and read["metadata"]["managedFields"] == legacy["metadata"]["managedFields"]


async def test_a_write_through_one_events_api_takes_fields_owned_through_the_other(tmp_path):
    async with served(tmp_path) as (_, api_client):
        await call(api_client, "POST", EVENTS, event("web.1", "first"), "modern")
        patched = await call(api_client, "PATCH", f"{CORE_EVENTS}/web.1", {"message": "second"}, "legacy",
                             "application/merge-patch+json")
        owners = entries(patched)
        assert owners["legacy"] == ("Update", "v1", {"f:message": {}})
        # the core write changed what events.k8s.io/v1 calls note: its writer no longer owns it
        assert "f:note" not in owners["modern"][2] and "f:regarding" in owners["modern"][2]

        applied = {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "web.1"}, "note": "third"}
        code, message = await refused(api_client, "PATCH", f"{EVENTS}/web.1", applied, "applier",
                                      "application/apply-patch+yaml")
        assert (code, message) == (409, 'Apply failed with 1 conflict: conflict with "legacy" using v1: .message')

        # the value legacy set, applied again: no conflict, both own it, each in its own version
        applied["note"] = "second"
        shared = entries(await call(api_client, "PATCH", f"{EVENTS}/web.1", applied, "applier",
                                    "application/apply-patch+yaml"))
        assert shared["applier"] == ("Apply", "events.k8s.io/v1", {"f:note": {}})
        assert shared["legacy"] == ("Update", "v1", {"f:message": {}})

        core_applied = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "web.1"}, "message": "fourth"}
        code, message = await refused(api_client, "PATCH", f"{CORE_EVENTS}/web.1", core_applied, "applier2",
                                      "application/apply-patch+yaml")
        assert (code, message) == (409, 'Apply failed with 2 conflicts: conflicts with "applier":\n- .note\n'
                                        'conflicts with "legacy" using v1:\n- .message')
        forced = entries(await call(api_client, "PATCH", f"{CORE_EVENTS}/web.1", core_applied, "applier2",
                                    "application/apply-patch+yaml", force=True))
        assert forced["applier2"] == ("Apply", "v1", {"f:message": {}})
        assert "applier" not in forced and "legacy" not in forced


POLICY = {
    "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy",
    "metadata": {"name": "stamp"},
    "spec": {"matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                     "operations": ["CREATE", "UPDATE"], "resources": ["configmaps"]}]},
             "reinvocationPolicy": "Never",
             "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression":
                            'Object{metadata: Object.metadata{labels: {"policy.example.com/stamped": "true"}}}'}}]},
}
BINDING = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicyBinding",
           "metadata": {"name": "stamp"}, "spec": {"policyName": "stamp"}}
ADMISSION = "/apis/admissionregistration.k8s.io/v1"
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


async def in_force(api_client, policy: dict, applied) -> None:
    """Create `policy` and its binding; return once `applied(probe, its warnings)` holds of a probe
    ConfigMap's create."""
    await call(api_client, "POST", f"{ADMISSION}/mutatingadmissionpolicies", policy)
    await call(api_client, "POST", f"{ADMISSION}/mutatingadmissionpolicybindings", BINDING)
    for i in tries():
        warned: list[str] = []
        probe = await call(api_client, "POST", CONFIGMAPS, {"metadata": {"name": f"probe-{i}"}, "data": {"k": "v"}},
                           "prober", warnings=warned)
        if applied(probe, warned):
            return
        await asyncio.sleep(0.05)
    pytest.fail("the policy never took effect")


async def test_what_a_mutating_policy_adds_is_owned_by_nobody(tmp_path):
    """The field manager records a write before mutating admission, as upstream's handlers call it:
    the requester owns what it sent, not the label the policy stamps on it."""
    async with served(tmp_path) as (_, api_client):
        await in_force(api_client, POLICY,
                       lambda probe, _: "policy.example.com/stamped" in (probe["metadata"].get("labels") or {}))

        created = await call(api_client, "POST", CONFIGMAPS, {
            "metadata": {"name": "cm", "labels": {"mine": "x"}}, "data": {"k": "v"}}, "me")
        assert created["metadata"]["labels"] == {"mine": "x", "policy.example.com/stamped": "true"}
        mine = ("Update", "v1", {"f:data": {".": {}, "f:k": {}}, "f:metadata": {"f:labels": {".": {}, "f:mine": {}}}})
        assert entries(created) == {"me": mine}

        created["data"]["k"] = "w"  # sent back with the stamp it read: unchanged, still nobody's
        updated = await call(api_client, "PUT", f"{CONFIGMAPS}/cm", created, "me")
        assert updated["data"] == {"k": "w"} and entries(updated) == {"me": mine}


async def test_managed_fields_a_policy_leaves_unreadable_are_restored_with_a_warning(tmp_path):
    policy = {**POLICY, "spec": {**POLICY["spec"], "mutations": [{"patchType": "JSONPatch", "jsonPatch": {
        "expression": '[JSONPatch{op: "replace", path: "/metadata/managedFields/0/fieldsType", value: "Bad"}]'}}]}}
    async with served(tmp_path) as (_, api_client):
        await in_force(api_client, policy, lambda _, warned: bool(warned))
        warned: list[str] = []
        created = await call(api_client, "POST", CONFIGMAPS, {"metadata": {"name": "cm"}, "data": {"k": "v"}}, "me",
                             warnings=warned)
        assert entries(created) == {"me": ("Update", "v1", {"f:data": {".": {}, "f:k": {}}})}
        assert created["metadata"]["managedFields"][0]["fieldsType"] == "FieldsV1"
        # (managedfields.ValidateManagedFields: the entries' validation before their decoding)
        assert warned == ['299 - ".metadata.managedFields was in an invalid state after admission; this could be '
                          'caused by an outdated mutating admission controller; please fix your requests: '
                          'metadata.managedFields[0].fieldsType: Invalid value: \\"Bad\\": must be `FieldsV1`"']


async def test_managed_fields_a_policy_leaves_invalid_are_restored_with_a_warning(tmp_path):
    """A manager's name of 129 bytes decodes, but fails ValidateManagedFields: the admission controller
    puts the entries back and warns, where the write was refused (a 422 at validation)."""
    policy = {**POLICY, "spec": {**POLICY["spec"], "mutations": [{"patchType": "JSONPatch", "jsonPatch": {
        "expression": f'[JSONPatch{{op: "replace", path: "/metadata/managedFields/0/manager", value: "{"m" * 129}"}}]'}}]}}
    async with served(tmp_path) as (_, api_client):
        await in_force(api_client, policy, lambda _, warned: bool(warned))
        warned: list[str] = []
        created = await call(api_client, "POST", CONFIGMAPS, {"metadata": {"name": "cm"}, "data": {"k": "v"}}, "me",
                             warnings=warned)
        assert list(entries(created)) == ["me"]
        assert warned == ['299 - ".metadata.managedFields was in an invalid state after admission; this could be '
                          'caused by an outdated mutating admission controller; please fix your requests: '
                          'metadata.managedFields[0].manager: Too long: may not be more than 128 bytes"']


HPA_V2 = "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers"
HPA_V1 = "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers"
APPLY = "application/apply-patch+yaml"


def hpa_v2(**spec) -> dict:
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "h"},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"}, "maxReplicas": 5,
                     **spec}}


CPU_50 = [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}]


@pytest.mark.parametrize("shared", [False, True])
async def test_an_applier_switching_versions_is_pruned_as_its_last_version_shows_the_object(tmp_path, shared):
    """What an applier set at autoscaling/v2 (spec.metrics) and leaves out of its next apply at
    autoscaling/v1 (targetCPUUtilizationPercentage, the same field as v1 shows it) is removed, unless
    another manager owns it too: the prune happens as v2 shows the object."""
    async with served(tmp_path) as (_, api_client):
        await call(api_client, "PATCH", f"{HPA_V2}/h", hpa_v2(minReplicas=2, metrics=CPU_50), "app", APPLY)
        if shared:
            await call(api_client, "PATCH", f"{HPA_V2}/h", hpa_v2(metrics=CPU_50), "other", APPLY)
        v1 = {"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "h"},
              "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"}, "maxReplicas": 5}}
        out = await call(api_client, "PATCH", f"{HPA_V1}/h", v1, "app", APPLY)
        assert out["spec"]["minReplicas"] == 1  # pruned, then defaulted
        # a metric nobody else owns is pruned (and v1's reading of no metric is the default 80%)
        assert out["spec"]["targetCPUUtilizationPercentage"] == (50 if shared else 80)
        assert entries(out)["app"] == ("Apply", "autoscaling/v1", {"f:spec": {"f:maxReplicas": {}, "f:scaleTargetRef": {}}})



async def test_nulls_a_go_client_sends_are_nobodys(tmp_path):
    """Upstream tracks the decoded Go struct against the kind's zero object, where an unset time is
    null too: the pod template's creationTimestamp: null that client-go sends with every workload
    is owned by nobody."""
    async with served(tmp_path) as (_, api_client):
        d = {"kind": "Deployment", "apiVersion": "apps/v1", "metadata": {"name": "d", "creationTimestamp": None},
             "spec": {"selector": {"matchLabels": {"app": "d"}}, "strategy": {},
                      "template": {"metadata": {"creationTimestamp": None, "labels": {"app": "d"}},
                                   "spec": {"containers": [{"name": "c", "image": "x", "resources": {}}]}}},
             "status": {}}
        created = await call(api_client, "POST", "/apis/apps/v1/namespaces/default/deployments", d, "kubectl-create")
        owned = entries(created)["kubectl-create"][2]["f:spec"]["f:template"]["f:metadata"]
        assert owned == {"f:labels": {".": {}, "f:app": {}}}
        # an update that sends the null where the stored object has none changes nothing there
        plain = {**d, "metadata": {"name": "e"}, "spec": {**d["spec"], "template": {
            "metadata": {"labels": {"app": "d"}}, "spec": d["spec"]["template"]["spec"]}}}
        stored = await call(api_client, "POST", "/apis/apps/v1/namespaces/default/deployments", plain, "app")
        stored["spec"]["replicas"] = 2
        stored["spec"]["template"]["metadata"]["creationTimestamp"] = None
        updated = await call(api_client, "PUT", "/apis/apps/v1/namespaces/default/deployments/e", stored, "ctl")
        assert entries(updated)["ctl"] == ("Update", "apps/v1", {"f:spec": {"f:replicas": {}}})


async def test_an_omitempty_value_fields_zero_is_unset_and_nobodys(tmp_path):
    """Upstream's field manager compares decoded Go structs: a value field (not a pointer) whose JSON
    is omitempty reads the same sent as false, 0 or "" as not sent, so no manager owns it, at any
    depth; a pointer's zero is a value (automountServiceAccountToken: false is owned)."""
    async with served(tmp_path) as (_, api_client):
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
               "spec": {"hostNetwork": False, "automountServiceAccountToken": False, "nodeName": "",
                        "containers": [{"name": "c", "image": "x", "stdin": False,
                                        "ports": [{"containerPort": 80, "hostPort": 0}]}]}}
        out = await call(api_client, "POST", "/api/v1/namespaces/default/pods", pod, "creator")
        spec = entries(out)["creator"][2]["f:spec"]
        assert "f:hostNetwork" not in spec and "f:nodeName" not in spec and "f:automountServiceAccountToken" in spec
        container = spec["f:containers"]['k:{"name":"c"}']
        assert "f:stdin" not in container
        assert container["f:ports"]['k:{"containerPort":80,"protocol":"TCP"}'].keys() == {".", "f:containerPort",
                                                                                         "f:protocol"}
        # an update of what was read owns what it changed only
        labelled = {**out, "metadata": {**out["metadata"], "labels": {"a": "b"}}}
        owned = await call(api_client, "PUT", "/api/v1/namespaces/default/pods/p", labelled, "other")
        assert entries(owned)["other"][2] == {"f:metadata": {"f:labels": {".": {}, "f:a": {}}}}


async def test_a_required_value_fields_zero_is_the_empty_objects_and_nobodys_on_create(tmp_path):
    """A required value field tagged without omitempty (a ResourceSlice pool's `generation`) decodes as
    its zero where it is left out, and the empty object a create is compared with holds that zero as
    it does an optional one's: left out or sent as 0, nobody owns it; sent as 1, the creator does. An
    apply configuration is not decoded: the applier owns what it sends alone."""
    base = "/apis/resource.k8s.io/v1/resourceslices"

    def slice_(name: str, **pool) -> dict:
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
                "spec": {"driver": "gpu.example.com", "allNodes": True,
                         "pool": {"name": "p", "resourceSliceCount": 1, **pool}}}

    async with served(tmp_path) as (_, api_client):
        for name, pool, owned in (("left-out", {}, False), ("zero", {"generation": 0}, False),
                                  ("one", {"generation": 1}, True)):
            out = await call(api_client, "POST", base, slice_(name, **pool), "creator")
            assert out["spec"]["pool"]["generation"] == pool.get("generation", 0)
            assert ("f:generation" in entries(out)["creator"][2]["f:spec"]["f:pool"]) is owned, name
        applied = await call(api_client, "PATCH", f"{base}/applied", slice_("applied"), "applier",
                             "application/apply-patch+yaml")
        assert applied["spec"]["pool"]["generation"] == 0
        assert entries(applied)["applier"][2]["f:spec"]["f:pool"] == {"f:name": {}, "f:resourceSliceCount": {}}


async def test_creates_of_one_shape_own_a_value_and_not_a_zero(tmp_path):
    """Creates of one shape share their managedFields (apply.py remembers them by the object's
    shape): the same pod sent with hostNetwork true, then false, is two shapes."""
    async with served(tmp_path) as (_, api_client):
        for name, value in (("on", True), ("off", False), ("on-again", True)):
            pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                   "spec": {"hostNetwork": value, "containers": [{"name": "c", "image": "x"}]}}
            out = await call(api_client, "POST", "/api/v1/namespaces/default/pods", pod, "creator")
            assert ("f:hostNetwork" in entries(out)["creator"][2]["f:spec"]) is value, name
            assert out["spec"].get("hostNetwork") is (value or None)  # false is omitempty's zero: not stored


async def test_sent_managed_fields_are_decoded_and_validated_as_upstreams(tmp_path):
    """A write's managedFields as kube-apiserver's field manager takes them (decodeLiveOrNew): entries its
    decoder refuses (an operation, apiVersion or fieldsType it lacks) stand for the stored ones, an empty
    list resets them, and what it keeps is validated (ValidateManagedFields: a manager of 129 bytes or a
    control character, a subresource of 257, is a 422). A merge patch stored `operation: Bogus` entries,
    and every manager's name, as sent (found by hand probes beside fuzz_sweep, fuzz48)."""
    base = "/api/v1/namespaces/default/configmaps"
    entry = {"manager": "m", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:data": {"f:other": {}}}}

    def managers(obj: dict) -> list:
        return [(e["manager"], e["operation"]) for e in obj["metadata"].get("managedFields", [])]

    async with served(tmp_path) as (_, c):
        assert (await send(c, "POST", f"{base}?fieldManager=creator", {"metadata": {"name": "a"}, "data": {"k": "v"}}))[0] == 201
        for bad in ({"operation": "Bogus"}, {"apiVersion": ""}, {"fieldsType": None}):
            code, got = await send(c, "PATCH", f"{base}/a?fieldManager=patcher",
                                   {"metadata": {"managedFields": [{**entry, **bad}]}}, "application/merge-patch+json")
            assert (code, managers(got)) == (200, [("creator", "Update")]), bad
        code, got = await send(c, "PATCH", f"{base}/a", {"metadata": {"managedFields": []}}, "application/merge-patch+json")
        assert (code, managers(got)) == (200, []), got
        for bad, cause in [({"manager": "x" * 129}, ("metadata.managedFields[0].manager", "Too long: may not be more than 128 bytes")),
                           ({"manager": "a\nb"}, ("metadata.managedFields[0].manager",
                                                  'Invalid value: "a\\nb": invalid character U+000A (at position 1)')),
                           ({"subresource": "s" * 257}, ("metadata.managedFields[0].subresource",
                                                         "Too long: may not be more than 256 bytes"))]:
            for method, path, body, ctype in [
                    ("POST", base, {"metadata": {"name": "b", "managedFields": [{**entry, **bad}]}}, "application/json"),
                    ("PATCH", f"{base}/a", {"metadata": {"managedFields": [{**entry, **bad}]}}, "application/merge-patch+json")]:
                code, got = await send(c, method, path, body, ctype)
                assert (code, [(x["field"], x["message"]) for x in got["details"]["causes"]]) == (422, [cause]), (method, bad)


@pytest.mark.parametrize("agent, manager", [
    ("kubectl/v1.37.0 (linux/amd64)", "kubectl"),
    ("é" * 100 + "/1.0", "é" * 64),  # cut at 128 bytes, not 128 characters
    ("x" * 127 + "é/1.0", "x" * 127),  # the character that would pass 128 bytes is left out whole
    ("a\tb\u00a0c/1.0", "abc"),  # unprintable characters dropped (a tab, a no-break space)
])
async def test_a_write_naming_no_manager_is_managed_by_its_user_agents_prefix(tmp_path, agent, manager):
    """managerOrUserAgent's prefixFromUserAgent: a valid manager whatever the User-Agent, where the
    first 128 characters were taken (a 422 at metadata.managedFields[0].manager once ab2d1dd2
    validated every write's entries)."""
    async with served(tmp_path) as (_, c):
        def create():  # the header's bytes in UTF-8, as Go's client sends a string
            r = c.rest_client.pool_manager.request(
                "POST", c.configuration.host + "/api/v1/namespaces/default/configmaps",
                body=json.dumps({"metadata": {"name": "a"}, "data": {"k": "v"}}).encode(),
                headers={"Content-Type": "application/json", "User-Agent": agent.encode()})
            return r.status, json.loads(r.data)
        code, got = await asyncio.to_thread(create)
        assert (code, [e["manager"] for e in got["metadata"]["managedFields"]]) == (201, [manager]), got
