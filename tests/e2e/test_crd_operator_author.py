"""An operator author's day on `nanokube up`, with kubectl, kopf and the official client: a CRD
with map and set lists that two server-side appliers share, nested defaults, an embedded
resource, priority columns and a scale subresource (an HPA on one without a selector); a ValidatingAdmissionPolicy whose binding
picks its ConfigMap params by label in the request's namespace; a MutatingAdmissionPolicy
labelling new objects; foreground deletion waiting on a child's finalizer; validation
ratcheting after a schema is tightened; a CRD deleted while an object holds a finalizer; a kopf
operator in peering mode; kopf's own admission webhooks; and leader election through a Lease."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from nanokube.pki.ca import issue, new_ca

from .conftest import kopf_run, wait_for

GROUP = "ops.example.com"
CRD_NAME = f"trainers.{GROUP}"
OPERATORS = Path(__file__).parent / "operators"

SPEC_SCHEMA = {
    "type": "object",
    "x-kubernetes-validations": [{
        "rule": "self.minReplicas <= self.replicas",
        "messageExpression": "'replicas ' + string(self.replicas) + ' is below minReplicas ' + string(self.minReplicas)",
        "fieldPath": ".replicas"}],
    "properties": {
        "replicas": {"type": "integer", "default": 1},
        "minReplicas": {"type": "integer", "default": 0},
        "resources": {"type": "object", "default": {}, "properties": {
            "gpus": {"type": "integer", "default": 1}, "tier": {"type": "string", "default": "standard"}}},
        "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                  "items": {"type": "object", "required": ["name"], "properties": {
                      "name": {"type": "string"}, "port": {"type": "integer", "default": 8080}}}},
        "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
        "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        "template": {"type": "object", "x-kubernetes-embedded-resource": True,
                     "x-kubernetes-preserve-unknown-fields": True}}}
CRD = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": CRD_NAME},
       "spec": {"group": GROUP, "scope": "Namespaced",
                "names": {"plural": "trainers", "singular": "trainer", "kind": "Trainer", "shortNames": ["tr"]},
                "versions": [{
                    "name": "v1", "served": True, "storage": True,
                    "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas",
                                                             "statusReplicasPath": ".status.replicas",
                                                             "labelSelectorPath": ".status.selector"}},
                    "additionalPrinterColumns": [
                        {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
                        {"name": "Image", "type": "string", "jsonPath": ".spec.template.spec.containers[0].image",
                         "priority": 1},
                        {"name": "Ready", "type": "boolean", "jsonPath": ".status.ready", "priority": 2}],
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                        "spec": SPEC_SCHEMA,
                        "status": {"type": "object", "properties": {
                            "replicas": {"type": "integer"}, "selector": {"type": "string"},
                            "ready": {"type": "boolean"}}}}}}}]}}


def trainer(name: str, namespace: str = "default", **spec) -> dict:
    return {"apiVersion": f"{GROUP}/v1", "kind": "Trainer", "metadata": {"name": name, "namespace": namespace},
            "spec": spec}


@pytest.fixture(scope="module")
def c(cluster):
    cluster.kubectl("apply", "--server-side", "-f", "-", input=json.dumps(CRD))
    cluster.kubectl("wait", "--for", "condition=Established", f"crd/{CRD_NAME}", "--timeout=50s")
    return cluster


def apply(c, obj: dict, *args: str, check: bool = True):
    return c.kubectl("apply", "--server-side", *args, "-f", "-", input=json.dumps(obj), check=check)


def test_two_appliers_share_map_and_set_lists_and_nested_defaults_fill_in(c):
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"},
           "spec": {"containers": [{"name": "c", "image": "nginx"}], "unknownField": 1}}
    apply(c, trainer("shared", replicas=2, ports=[{"name": "http"}, {"name": "grpc", "port": 9000}], tags=["a", "b"],
                     extra={"anything": {"goes": [1, 2]}}, template=pod))
    got = c.kubectl_json("get", "trainer", "shared")["spec"]
    assert got["ports"] == [{"name": "http", "port": 8080}, {"name": "grpc", "port": 9000}]
    assert got["resources"] == {"gpus": 1, "tier": "standard"} and got["minReplicas"] == 0
    assert got["extra"] == {"anything": {"goes": [1, 2]}} and got["template"]["spec"]["unknownField"] == 1

    # grpc's port is the first manager's; http's came from the default, so nobody owns it
    taken = trainer("shared", ports=[{"name": "grpc", "port": 9001}])
    refused = apply(c, taken, "--field-manager", "sidecar", check=False)
    assert refused.returncode != 0 and '.spec.ports[name="grpc"].port' in refused.stderr
    other = trainer("shared", ports=[{"name": "metrics", "port": 9090}, {"name": "http", "port": 8081}], tags=["c", "a"])
    apply(c, other, "--field-manager", "sidecar")
    # the first manager drops grpc: only its own entry goes, http stays the sidecar's
    apply(c, trainer("shared", replicas=2, ports=[{"name": "http"}], tags=["a", "b"],
                     extra={"anything": {"goes": [1, 2]}}, template=pod))
    got = c.kubectl_json("get", "trainer", "shared")["spec"]
    assert {p["name"]: p["port"] for p in got["ports"]} == {"metrics": 9090, "http": 8081}
    assert sorted(got["tags"]) == ["a", "b", "c"]

    rows = c.kubectl("get", "tr", "shared", "-o", "wide").stdout.splitlines()
    assert rows[0].split() == ["NAME", "REPLICAS", "IMAGE", "READY"] and rows[1].split() == ["shared", "2", "nginx"]
    assert c.kubectl("get", "tr", "shared").stdout.splitlines()[0].split() == ["NAME", "REPLICAS"]


def test_bad_lists_and_an_embedded_resource_without_kind_get_every_error(c):
    bad = trainer("bad", ports=[{"name": "a"}, {"name": "a", "port": 1}, {"port": 3}], tags=["x", "x"],
                  template={"metadata": {"labels": {"bad key!": "v"}}})
    r = c.kubectl("create", "-f", "-", input=json.dumps(bad), check=False)
    assert r.returncode != 0
    lines = set(r.stderr.splitlines())
    for want in ("* spec.ports[2].name: Required value", "* spec.template.apiVersion: Required value",
                 "* spec.template.kind: Required value", '* spec.ports[1]: Duplicate value: {"name":"a"}',
                 '* spec.tags[1]: Duplicate value: "x"'):
        assert want in lines, r.stderr
    assert any(line.startswith('* spec.template.metadata.labels: Invalid value: "bad key!"') for line in lines)


def test_scale_with_a_precondition_and_the_rule_naming_a_field(c):
    apply(c, trainer("scaled", replicas=2))
    c.kubectl("patch", "trainer", "scaled", "--subresource", "status", "--type", "merge",
              "-p", json.dumps({"status": {"replicas": 2, "selector": "trainer=scaled", "ready": True}}))
    r = c.kubectl("scale", "tr", "scaled", "--current-replicas=7", "--replicas=3", check=False)
    assert r.returncode != 0 and "Expected replicas to be 7, was 2" in r.stderr
    c.kubectl("scale", "tr", "scaled", "--current-replicas=2", "--replicas=3")
    scale = json.loads(c.kubectl("get", "--raw", f"/apis/{GROUP}/v1/namespaces/default/trainers/scaled/scale").stdout)
    assert scale["spec"] == {"replicas": 3} and scale["status"] == {"replicas": 2, "selector": "trainer=scaled"}
    r = c.kubectl("patch", "tr", "scaled", "--type", "merge", "-p", '{"spec":{"minReplicas":9}}', check=False)
    assert r.stderr.strip() == ('The Trainer "scaled" is invalid: spec.replicas: Invalid value: '
                                "replicas 3 is below minReplicas 9")


VAP = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
       "metadata": {"name": "max-replicas"},
       "spec": {"failurePolicy": "Fail", "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
                "matchConstraints": {"resourceRules": [{"apiGroups": [GROUP], "apiVersions": ["*"],
                                                        "operations": ["CREATE", "UPDATE"],
                                                        "resources": ["trainers"]}]},
                "variables": [{"name": "limit", "expression": "int(params.data.maxReplicas)"}],
                "validations": [{"expression": "object.spec.replicas <= variables.limit", "reason": "Forbidden",
                                 "messageExpression": "'replicas must be at most ' + string(variables.limit)"
                                                      " + ' (from ' + params.metadata.name + ')'"}]}}
VAPB = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": "max-replicas"},
        "spec": {"policyName": "max-replicas", "validationActions": ["Deny"],
                 "paramRef": {"selector": {"matchLabels": {"limits": "trainers"}}, "parameterNotFoundAction": "Deny"}}}


def test_autoscaling_a_resource_whose_scale_has_no_selector_is_refused(c):
    """`kubectl autoscale trainer` of a Trainer whose status has no selector yet: its scale names
    none, and the HPA controller's validateAndParseSelector stops there (SelectorRequired, then
    FailedComputeMetricsReplicas; ScalingActive False, InvalidSelector) and scales nothing.
    nanokube listed every pod of the namespace with the empty selector and judged their metrics."""
    apply(c, trainer("unselected", replicas=2))
    c.kubectl("autoscale", "trainer", "unselected", "--min=1", "--max=3", "--cpu=50%")
    c.kubectl("wait", "hpa/unselected", "--timeout=30s",
              "--for=jsonpath={.status.conditions[?(@.type=='ScalingActive')].reason}=InvalidSelector")
    hpa = c.kubectl_json("get", "hpa", "unselected")
    active = next(x for x in hpa["status"]["conditions"] if x["type"] == "ScalingActive")
    assert (active["status"], active["message"]) == ("False", "the HPA target's scale is missing a selector")
    assert hpa["status"]["currentMetrics"] is None  # (no omitempty upstream: null)

    def reasons():
        events = c.kubectl_json("get", "events", "--field-selector", "involvedObject.name=unselected,"
                                "involvedObject.kind=HorizontalPodAutoscaler")["items"]
        return {e["reason"]: e["message"] for e in events}
    wait_for(lambda: {"SelectorRequired", "FailedComputeMetricsReplicas"} <= set(reasons()), 30, "the HPA's events")
    assert reasons() == {"SelectorRequired": "selector is required", "FailedComputeMetricsReplicas": "selector is required"}
    assert c.kubectl_json("get", "trainer", "unselected")["spec"]["replicas"] == 2
    c.kubectl("delete", "hpa,trainer", "unselected")


def test_policy_params_are_picked_by_label_in_the_requests_namespace(c):
    c.kubectl("create", "namespace", "limited")
    c.kubectl("create", "namespace", "unlimited")
    for name, limit in (("lim-a", "10"), ("lim-b", "3")):
        c.kubectl("-n", "limited", "create", "configmap", name, f"--from-literal=maxReplicas={limit}")
        c.kubectl("-n", "limited", "label", "configmap", name, "limits=trainers")
    try:
        c.kubectl("apply", "-f", "-", input=json.dumps(VAP))
        c.kubectl("apply", "-f", "-", input=json.dumps(VAPB))
        cols = c.kubectl("get", "validatingadmissionpolicybinding", "max-replicas").stdout.splitlines()
        assert cols[1].split()[:3] == ["max-replicas", "max-replicas", "limits=trainers"]

        def denied():
            r = apply(c, trainer("t", "limited", replicas=4), check=False)
            return r.returncode != 0 and r.stderr

        # every selected param must allow it: lim-b's 3 denies 4
        stderr = wait_for(denied, timeout=30, what="the binding enforced")
        assert ("trainers.ops.example.com \"t\" is forbidden: ValidatingAdmissionPolicy 'max-replicas' with binding "
                "'max-replicas' denied request: replicas must be at most 3 (from lim-b)") in stderr
        apply(c, trainer("t", "limited", replicas=3))
        # no params in this namespace: parameterNotFoundAction Deny, 422 with the binding named
        r = apply(c, trainer("t", "unlimited", replicas=1), check=False)
        assert r.stderr.strip() == (
            "The trainers \"t\" is invalid: : ValidatingAdmissionPolicy 'max-replicas' with binding 'max-replicas' "
            "denied request: failed to configure binding: no params found for policy binding with `Deny` "
            "parameterNotFoundAction")
    finally:
        c.kubectl("delete", "validatingadmissionpolicybinding", "max-replicas", "--ignore-not-found")
        c.kubectl("delete", "validatingadmissionpolicy", "max-replicas", "--ignore-not-found")
        wait_for(lambda: apply(c, trainer("t", "unlimited"), "--dry-run=server", check=False).returncode == 0,
                 timeout=30, what="the policy gone")


MAP = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy",
       "metadata": {"name": "trainer-defaults"},
       "spec": {"failurePolicy": "Fail", "reinvocationPolicy": "IfNeeded",
                "matchConstraints": {"resourceRules": [{"apiGroups": [GROUP], "apiVersions": ["v1"],
                                                        "operations": ["CREATE"], "resources": ["trainers"]}]},
                "matchConditions": [{"name": "no-opt-out", "expression":
                                     "!has(object.metadata.labels) || !('skip' in object.metadata.labels)"}],
                "mutations": [
                    {"patchType": "ApplyConfiguration", "applyConfiguration": {"expression":
                        'Object{metadata: Object.metadata{labels: {"team": "ml"}}, spec: Object.spec{tags: ["managed"]}}'}},
                    {"patchType": "JSONPatch", "jsonPatch": {"expression":
                        '[JSONPatch{op: "add", path: "/metadata/annotations", '
                        'value: {"ops.example.com/gpus": string(object.spec.resources.gpus)}}]'}}]}}
MAPB = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicyBinding",
        "metadata": {"name": "trainer-defaults"}, "spec": {"policyName": "trainer-defaults"}}


def test_mutating_policy_labels_new_trainers_after_defaulting(c):
    c.kubectl("apply", "-f", "-", input=json.dumps(MAP))
    c.kubectl("apply", "-f", "-", input=json.dumps(MAPB))
    try:
        def mutated():
            name = f"m{time.monotonic_ns()}"
            c.kubectl("create", "-f", "-", input=json.dumps(trainer(name, tags=["x"])))
            got = c.kubectl_json("get", "trainer", name)
            return got if got["metadata"].get("labels") else None

        got = wait_for(mutated, timeout=30, what="the mutating policy applied")
        assert got["metadata"]["labels"] == {"team": "ml"}
        # the JSON patch saw the schema's nested default
        assert got["metadata"]["annotations"] == {"ops.example.com/gpus": "1"}
        assert got["spec"]["tags"] == ["x", "managed"]
        opted_out = trainer("opted-out")
        opted_out["metadata"]["labels"] = {"skip": "yes"}
        c.kubectl("create", "-f", "-", input=json.dumps(opted_out))
        assert c.kubectl_json("get", "trainer", "opted-out")["metadata"]["labels"] == {"skip": "yes"}
    finally:
        c.kubectl("delete", "mutatingadmissionpolicybinding", "trainer-defaults", "--ignore-not-found")
        c.kubectl("delete", "mutatingadmissionpolicy", "trainer-defaults", "--ignore-not-found")

        def unlabelled():
            r = c.kubectl("create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(trainer("probe")))
            return "labels" not in json.loads(r.stdout)["metadata"]

        wait_for(unlabelled, timeout=30, what="the mutating policy gone")


def test_foreground_deletion_waits_for_a_child_trainers_finalizer(c):
    c.kubectl("create", "-f", "-", input=json.dumps(trainer("owner")))
    uid = c.kubectl_json("get", "trainer", "owner")["metadata"]["uid"]
    ref = {"apiVersion": f"{GROUP}/v1", "kind": "Trainer", "name": "owner", "uid": uid, "blockOwnerDeletion": True}
    child = trainer("owned")
    child["metadata"].update(finalizers=[f"{GROUP}/cleanup"], ownerReferences=[{**ref, "controller": True}])
    c.kubectl("create", "-f", "-", input=json.dumps(child))
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owner-config", "ownerReferences": [ref]}}
    c.kubectl("create", "-f", "-", input=json.dumps(cm))

    c.kubectl("delete", "trainer", "owner", "--cascade=foreground", "--wait=false")
    wait_for(lambda: c.kubectl("get", "configmap", "owner-config", check=False).returncode != 0, timeout=30,
             what="the ConfigMap collected")
    wait_for(lambda: c.kubectl_json("get", "trainer", "owned")["metadata"].get("deletionTimestamp"), timeout=30,
             what="the child trainer deleted")
    owner = c.kubectl_json("get", "trainer", "owner")["metadata"]
    assert owner["finalizers"] == ["foregroundDeletion"] and owner["deletionTimestamp"]

    c.kubectl("patch", "trainer", "owned", "--type", "json", "-p", '[{"op":"remove","path":"/metadata/finalizers"}]')
    wait_for(lambda: c.kubectl("get", "trainer", "owner", check=False).returncode != 0, timeout=30,
             what="the owner gone once its blocking child is")


def test_a_tightened_schema_ratchets_values_left_unchanged(c):
    apply(c, trainer("old", replicas=8, tags=["a", "c"]))
    tighten = [{"op": "add", "path": "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/replicas/maximum",
                "value": 5},
               {"op": "add", "path": "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/tags/"
                                 "x-kubernetes-validations", "value": [{"rule": "self.all(t, t != 'c')",
                                                                        "message": "no c"}]}]
    c.kubectl("patch", "crd", CRD_NAME, "--type", "json", "-p", json.dumps(tighten))
    try:
        def ratcheted():
            r = c.kubectl("patch", "tr", "old", "--type", "merge", "-p", '{"spec":{"minReplicas":1}}', check=False)
            return r.returncode == 0 and "no c" in r.stderr and r

        r = wait_for(ratcheted, timeout=30, what="the tightened schema served")
        assert "Warning: spec.tags: Invalid value: no c" in r.stderr
        r = c.kubectl("patch", "tr", "old", "--type", "merge", "-p", '{"spec":{"replicas":7}}', check=False)
        assert "spec.replicas: Invalid value: 7: spec.replicas in body should be less than or equal to 5" in r.stderr
        r = c.kubectl("patch", "tr", "old", "--type", "merge", "-p", '{"spec":{"tags":["c","d"]}}', check=False)
        assert 'The Trainer "old" is invalid: spec.tags: Invalid value: no c' in r.stderr
    finally:
        c.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=json.dumps(CRD))


@pytest.fixture
def operator(c):
    pytest.importorskip("kopf")
    peering = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
               "metadata": {"name": "kopfpeerings.kopf.dev"},
               "spec": {"group": "kopf.dev", "scope": "Namespaced",
                        "names": {"kind": "KopfPeering", "plural": "kopfpeerings", "singular": "kopfpeering"},
                        "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                            "type": "object", "properties": {"status": {
                                "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}}]}}
    c.kubectl("apply", "-f", "-", input=json.dumps(peering))
    c.kubectl("wait", "--for", "condition=Established", "crd/kopfpeerings.kopf.dev", "--timeout=50s")
    c.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "kopf.dev/v1", "kind": "KopfPeering",
                                                    "metadata": {"name": "trainers", "namespace": "default"}}))
    log_path = c.data_dir / "trainer-operator.log"
    with kopf_run(["--namespace", "default", str(OPERATORS / "trainer.py")],
                   {**os.environ, "KUBECONFIG": c.kubeconfig}, log_path):
        yield log_path


def test_kopf_operator_in_peering_mode_patches_status_and_posts_events(c, operator):
    log = lambda: operator.read_text(errors="replace")  # noqa: E731
    wait_for(lambda: (c.kubectl_json("get", "kopfpeering", "trainers").get("status") or {}), timeout=30,
             what=f"the operator announced itself in its KopfPeering\n{log()}")
    apply(c, trainer("kopfed", replicas=1))
    wait_for(lambda: (c.kubectl_json("get", "tr", "kopfed").get("status") or {}).get("ready"), timeout=30,
             what=f"the create handler's status\n{log()}")
    c.kubectl("scale", "tr", "kopfed", "--replicas=3")
    wait_for(lambda: (c.kubectl_json("get", "tr", "kopfed").get("status") or {}).get("replicas") == 3, timeout=30,
             what=f"the update handler's status\n{log()}")
    assert c.kubectl("get", "tr", "kopfed", "-o", "wide").stdout.splitlines()[1].split() == ["kopfed", "3", "true"]

    def events():
        got = c.kubectl_json("get", "events", "--field-selector", "involvedObject.name=kopfed")["items"]
        reasons = {e["reason"]: e for e in got}
        return {"Created", "Rescaled"} <= reasons.keys() and reasons

    reasons = wait_for(events, timeout=30, what=f"the operator's Events\n{log()}")
    assert reasons["Rescaled"]["message"] == "1 -> 3"
    assert reasons["Rescaled"]["involvedObject"]["kind"] == "Trainer"
    c.kubectl("delete", "tr", "kopfed", "--timeout=30s")
    assert c.kubectl("get", "configmap", "kopfed-gone", check=False).returncode == 0


def holder(c) -> str | None:
    r = c.kubectl("get", "lease", "trainer-operator", "-o", "jsonpath={.spec.holderIdentity}", check=False)
    return r.stdout if r.returncode == 0 else None


def test_leader_election_through_a_lease_fails_over(c):
    # the candidates are killed, so the client's atexit never removes the PEM files it wrote
    # from the kubeconfig: they go in a directory of this test's, removed with it
    tmp = tempfile.TemporaryDirectory(prefix="nanokube-candidates-")
    env = {**os.environ, "KUBECONFIG": c.kubeconfig, "TMPDIR": tmp.name}
    candidate = [sys.executable, str(OPERATORS / "lease_candidate.py")]
    first = subprocess.Popen([*candidate, "first"], env=env, stdout=subprocess.PIPE, text=True)
    second = None
    try:
        wait_for(lambda: holder(c) == "first", timeout=30, what="the first candidate leading")
        assert first.stdout.readline().split() == ["first", "leading"]
        second = subprocess.Popen([*candidate, "second"], env=env, stdout=subprocess.PIPE, text=True)
        lease = c.kubectl_json("get", "lease", "trainer-operator")["spec"]
        assert lease["holderIdentity"] == "first" and lease["leaseDurationSeconds"] == 4
        acquired = lease["acquireTime"]
        first.kill()  # no release: the second waits out the lease
        first.wait()
        wait_for(lambda: holder(c) == "second", timeout=30, what="the second candidate leading")
        assert second.stdout.readline().split() == ["second", "leading"]
        lease = c.kubectl_json("get", "lease", "trainer-operator")["spec"]
        # the official client writes no leaseTransitions; the new holder's acquireTime is its own
        assert lease["holderIdentity"] == "second" and lease["acquireTime"] != acquired
    finally:
        for p in (first, second):
            if p and p.poll() is None:
                p.kill()
                p.wait()
        tmp.cleanup()


def test_kopf_managed_admission_webhooks_validate_and_mutate(c, tmp_path):
    pytest.importorskip("kopf")
    ca = new_ca("trainer-webhooks")
    serving = issue(ca, "127.0.0.1", ips=("127.0.0.1",), server=True)
    files = {"CA": ca.cert_pem, "CERT": serving.cert_pem, "KEY": serving.key_pem}
    env = {**os.environ, "KUBECONFIG": c.kubeconfig}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
        env[f"TRAINER_WEBHOOK_{name}"] = str(tmp_path / name)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        env["TRAINER_WEBHOOK_PORT"] = str(s.getsockname()[1])
    log_path = tmp_path / "kopf.log"
    try:  # kopf stops before its webhook configurations go, lest it make them again
        with kopf_run(["--standalone", "--namespace", "webhooked", str(OPERATORS / "trainer_webhooks.py")], env,
                       log_path):
            c.kubectl("create", "namespace", "webhooked")

            def configured():
                r = c.kubectl("get", "validatingwebhookconfiguration", f"trainers.{GROUP}", "-o", "json", check=False)
                return r.returncode == 0 and json.loads(r.stdout).get("webhooks")

            hooks = wait_for(configured, timeout=60, what=f"kopf's webhook configuration\n{log_path.read_text()}")
            assert hooks[0]["clientConfig"]["url"].startswith(f"https://127.0.0.1:{env['TRAINER_WEBHOOK_PORT']}/")

            def labelled():
                r = c.kubectl("-n", "webhooked", "apply", "--server-side", "-f", "-", check=False,
                              input=json.dumps(trainer("ok", "webhooked", replicas=2)))
                return r.returncode == 0 and c.kubectl_json("-n", "webhooked", "get", "tr", "ok")["metadata"].get("labels")

            assert wait_for(labelled, timeout=30, what=f"the mutating webhook\n{log_path.read_text()}") == {
                "mutated-by": "kopf"}
            r = c.kubectl("-n", "webhooked", "create", "-f", "-", input=json.dumps(trainer("big", "webhooked", replicas=6)),
                          check=False)
            assert r.stderr.strip() == ('Error from server: error when creating "STDIN": admission webhook '
                                        f'"at-most-four.trainers.{GROUP}" denied the request: at most 4 replicas')
    finally:
        for kind in ("validatingwebhookconfiguration", "mutatingwebhookconfiguration"):
            c.kubectl("delete", kind, f"trainers.{GROUP}", "--ignore-not-found")
