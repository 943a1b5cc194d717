"""A patch whose result does not decode into its kind (a value of the wrong type, an unknown field
under fieldValidation=Strict), over HTTP: upstream's patchers answer 422 Invalid with an empty
kind and name, `patch: Invalid value: <what was decoded>: <the decoder's error>`. The json and
merge patchers decode the patched object's JSON (Go's JSON decoder's words); the strategic merge
patcher converts the patched map into the Go type (the unstructured converter's words) and quotes
the patch as %+v prints it. Nothing is written."""

from __future__ import annotations

import asyncio
import json

import pytest

from nanokube.machinery import gofmt
from tests.served import send as _send
from tests.served import served

DEPLOYS = "/apis/apps/v1/namespaces/default/deployments"
MERGE, SMP, JSONPATCH = ("application/merge-patch+json", "application/strategic-merge-patch+json",
                         "application/json-patch+json")
DEPLOYMENT = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
              "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                       "template": {"metadata": {"labels": {"app": "web"}},
                                    "spec": {"containers": [{"name": "app", "image": "nginx"}]}}}}


def _invalid(status: dict) -> tuple[str, str]:
    """The quoted value and the error of a patch's 422, checking its shape on the way."""
    assert (status["code"], status["reason"]) == (422, "Invalid")
    [cause] = status["details"]["causes"]
    assert status["details"] == {"causes": [cause]} and (cause["reason"], cause["field"]) == ("FieldValueInvalid", "patch")
    assert status["message"] == f' "" is invalid: patch: {cause["message"]}'
    assert cause["message"].startswith("Invalid value: ")
    rest = cause["message"][len("Invalid value: "):]
    quoted = json.loads(rest[:rest.index('": ') + 1])  # Go's %q of these values reads as a JSON string
    return quoted, rest[rest.index('": ') + 3:]


@pytest.fixture
async def api(tmp_path):
    async with served(tmp_path) as (_, api_client):
        assert (await _send(api_client, "POST", DEPLOYS, DEPLOYMENT))[0] == 201
        yield api_client


@pytest.mark.parametrize("ctype,patch", [
    (MERGE, {"spec": {"replicas": "x"}}),
    (JSONPATCH, [{"op": "replace", "path": "/spec/replicas", "value": "x"}]),
])
async def test_a_json_or_merge_patch_result_of_the_wrong_type(api, ctype, patch):
    code, status = await _send(api, "PATCH", f"{DEPLOYS}/web", patch, ctype)
    value, error = _invalid(status)
    assert code == 422 and error == ("json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas "
                                     "of type int32")
    patched = json.loads(value)  # the patched object, as it was decoded
    assert patched["spec"]["replicas"] == "x" and patched["metadata"]["name"] == "web"
    assert (await _send(api, "GET", f"{DEPLOYS}/web", None))[1]["spec"]["replicas"] == 1


@pytest.mark.parametrize("patch,error", [
    ({"spec": {"replicas": "x"}}, "unrecognized type: int32"),
    ({"spec": {"replicas": 1.5}}, "cannot convert float64 to int32"),
    ({"spec": {"paused": "yes"}}, "unrecognized type: bool"),
    ({"spec": {"template": {"spec": {"containers": {"name": "app"}}}}}, "cannot restore slice from map"),
    ({"spec": {"template": "x"}}, "cannot restore struct from: string"),
    ({"metadata": {"labels": ["a"]}}, "cannot restore map from slice"),
    ({"metadata": {"labels": {"a": 1}}}, "cannot convert int64 to string"),
    ({"metadata": "x"}, "cannot restore struct from: string"),
    # IntOrString decodes itself, from the value's JSON
    ({"spec": {"strategy": {"rollingUpdate": {"maxSurge": True}}}}, "json: cannot unmarshal bool into Go value of type int32"),
])
async def test_a_strategic_merge_patch_result_of_the_wrong_type(api, patch, error):
    before = (await _send(api, "GET", f"{DEPLOYS}/web", None))[1]
    code, status = await _send(api, "PATCH", f"{DEPLOYS}/web", patch, SMP)
    assert code == 422 and _invalid(status) == (gofmt.value(patch), error)
    assert (await _send(api, "GET", f"{DEPLOYS}/web", None))[1] == before


async def test_the_quoted_patch_prints_as_go_prints_a_map(api):
    patch = {"spec": {"template": {"spec": {"containers": {"name": "app", "ports": [80, 1.5e6], "tty": None}}}}}
    _, status = await _send(api, "PATCH", f"{DEPLOYS}/web", patch, SMP)
    assert _invalid(status)[0] == "map[spec:map[template:map[spec:map[containers:map[name:app ports:[80 1.5e+06] tty:<nil>]]]]]"


@pytest.mark.parametrize("ctype", [MERGE, SMP])
async def test_an_unknown_field_under_strict(api, ctype):
    patch = {"spec": {"zeta": 1, "alpha": 2}}
    code, status = await _send(api, "PATCH", f"{DEPLOYS}/web?fieldValidation=Strict", patch, ctype)
    value, error = _invalid(status)
    assert code == 422
    # the converter sorts its errors; Go marshals an object the merge went into with its keys sorted,
    # and the JSON decoder meets them in that order
    assert error == 'strict decoding error: unknown field "spec.alpha", unknown field "spec.zeta"'
    assert value == gofmt.value(patch) if ctype == SMP else json.loads(value)["spec"]["zeta"] == 1
    # Warn (the default) warns and drops them, as before
    code, _ = await _send(api, "PATCH", f"{DEPLOYS}/web", patch, ctype)
    assert code == 200


async def test_a_create_or_update_of_the_wrong_type_stays_a_400(api):
    """Only a patch's result is the patchers' 422: a body that does not decode is a 400."""
    body = {**DEPLOYMENT, "metadata": {"name": "other"}, "spec": {**DEPLOYMENT["spec"], "replicas": "x"}}
    code, status = await _send(api, "POST", DEPLOYS, body)
    assert (code, status["message"]) == (400, 'Deployment in version "v1" cannot be handled as a Deployment: json: '
                                              "cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas "
                                              "of type int32")


async def test_a_strategic_merge_patch_wraps_an_integer_into_an_int32_as_the_converter_does(api):
    """The unstructured converter converts an int64 into an int32 field by Go's conversion, which
    wraps: the result is what validation then sees (a json or merge patch is the decoder's 422)."""
    code, status = await _send(api, "PATCH", f"{DEPLOYS}/web", {"spec": {"replicas": 2**31}}, SMP)
    assert (code, status["message"]) == (422, 'Deployment.apps "web" is invalid: spec.replicas: Invalid value: '
                                              "-2147483648: must be greater than or equal to 0")
    code, patched = await _send(api, "PATCH", f"{DEPLOYS}/web", {"spec": {"replicas": 2**32 + 3}}, SMP)
    assert (code, patched["spec"]["replicas"]) == (200, 3)
    code, status = await _send(api, "PATCH", f"{DEPLOYS}/web", {"spec": {"replicas": 2**32 + 3}}, MERGE)
    assert code == 422 and _invalid(status)[1] == ("json: cannot unmarshal number 4294967299 into Go struct field "
                                                   "DeploymentSpec.spec.replicas of type int32")


async def test_a_repeated_key_under_strict(api):
    """The patch's own strict errors (its repeated keys) join its result's unknown fields in the
    patchers' 422, once the object is found; an apply patch's stay the 400 of decoding it."""
    body = '{"spec":{"replicas":2,"replicas":3,"zeta":1}}'

    def send(path: str, ctype: str):
        r = api.rest_client.pool_manager.request("PATCH", api.configuration.host + path, body=body.encode(),
                                                 headers={"Content-Type": ctype})
        return r.status, json.loads(r.data)
    for ctype in (MERGE, SMP):
        code, status = await asyncio.to_thread(send, f"{DEPLOYS}/web?fieldValidation=Strict", ctype)
        assert code == 422 and _invalid(status)[1] == ('strict decoding error: duplicate field "spec.replicas", '
                                                       'unknown field "spec.zeta"'), ctype
        code, status = await asyncio.to_thread(send, f"{DEPLOYS}/nothing?fieldValidation=Strict", ctype)
        assert code == 404, ctype
    assert (await _send(api, "GET", f"{DEPLOYS}/web", None))[1]["spec"]["replicas"] == 1


MERGE_BODY = """{"spec": {"unknown1": "val1", "unknownDupe": "valDupe", "unknownDupe": "valDupe2", "paused": true,
  "paused": false, "template": {"spec": {"containers": [{"name": "app", "image": "nginx:latest",
  "unknownNested": "val1", "imagePullPolicy": "Always", "imagePullPolicy": "Never"}]}}}}"""
JSON_PATCH_BODY = """[
  {"op": "add", "path": "/spec/unknown1", "value": "val1", "foo": "bar"},
  {"op": "add", "path": "/spec/unknown2", "path": "/spec/unknown3", "value": "val1"},
  {"op": "add", "path": "/spec/unknownDupe", "value": "valDupe"},
  {"op": "add", "path": "/spec/unknownDupe", "value": "valDupe2"},
  {"op": "add", "path": "/spec/paused", "value": true},
  {"op": "add", "path": "/spec/paused", "value": false},
  {"op": "add", "path": "/spec/template/spec/containers/0/unknownNested", "value": "val1"},
  {"op": "add", "path": "/spec/template/spec/containers/0/imagePullPolicy", "value": "Always"},
  {"op": "add", "path": "/spec/template/spec/containers/0/imagePullPolicy", "value": "Never"}]"""
REPEATED = ['duplicate field "spec.unknownDupe"', 'duplicate field "spec.paused"',
            'duplicate field "spec.template.spec.containers[0].imagePullPolicy"']
UNKNOWN = ['unknown field "spec.template.spec.containers[0].unknownNested"', 'unknown field "spec.unknown1"']


@pytest.mark.parametrize("ctype,body,texts", [
    (MERGE, MERGE_BODY, [*REPEATED, *UNKNOWN, 'unknown field "spec.unknownDupe"']),
    (SMP, MERGE_BODY, [*REPEATED, *UNKNOWN, 'unknown field "spec.unknownDupe"']),
    (JSONPATCH, JSON_PATCH_BODY, ['json patch unknown field "[0].foo"', 'json patch duplicate field "[1].path"', *UNKNOWN,
                                  'unknown field "spec.unknown3"', 'unknown field "spec.unknownDupe"']),
])
async def test_upstreams_field_validation_cases(api, ctype, body, texts):
    """test/integration/apiserver/field_validation_test.go's typed patch cases: under Strict one
    error with the patch's own strict errors first, then the result's unknown fields in the order
    its decoder meets them; under Warn (the default) the same texts as Warning headers."""
    def send(query: str):
        r = api.rest_client.pool_manager.request("PATCH", f"{api.configuration.host}{DEPLOYS}/web{query}",
                                                 body=body.encode(), headers={"Content-Type": ctype})
        return r.status, json.loads(r.data), r.headers.getlist("Warning")
    code, status, _ = await asyncio.to_thread(send, "?fieldValidation=Strict")
    assert code == 422 and _invalid(status)[1] == "strict decoding error: " + ", ".join(texts)
    code, _, warnings = await asyncio.to_thread(send, "")
    assert code == 200 and warnings == ['299 - "' + t.replace('"', '\\"') + '"' for t in texts]
    code, _, warnings = await asyncio.to_thread(send, "?fieldValidation=Ignore")
    assert (code, warnings) == (200, [])


_TEMPLATE = {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "app", "image": "nginx"}]}}
_POD_TEMPLATE = {**_TEMPLATE, "spec": {**_TEMPLATE["spec"], "restartPolicy": "Never"}}
_SPECS = {
    "statefulsets": {"serviceName": "x", "selector": {"matchLabels": {"app": "x"}}, "template": _TEMPLATE},
    "deployments": {"selector": {"matchLabels": {"app": "x"}}, "template": _TEMPLATE},
    "replicasets": {"selector": {"matchLabels": {"app": "x"}}, "template": _TEMPLATE},
    "daemonsets": {"selector": {"matchLabels": {"app": "x"}}, "template": _TEMPLATE},
    "jobs": {"template": _POD_TEMPLATE, "completionMode": "Indexed", "completions": 2},
    "cronjobs": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": _POD_TEMPLATE}}},
}
_KINDS = {"statefulsets": ("apps", "StatefulSet"), "deployments": ("apps", "Deployment"),
          "replicasets": ("apps", "ReplicaSet"), "daemonsets": ("apps", "DaemonSet"), "jobs": ("batch", "Job"),
          "cronjobs": ("batch", "CronJob")}


@pytest.mark.parametrize("plural,path,go_type", [
    ("statefulsets", "replicas", "StatefulSetSpec"), ("statefulsets", "ordinals.start", "StatefulSetOrdinals"),
    ("statefulsets", "minReadySeconds", "StatefulSetSpec"), ("statefulsets", "revisionHistoryLimit", "StatefulSetSpec"),
    ("statefulsets", "updateStrategy.rollingUpdate.partition", "RollingUpdateStatefulSetStrategy"),
    ("deployments", "replicas", "DeploymentSpec"), ("deployments", "progressDeadlineSeconds", "DeploymentSpec"),
    ("deployments", "minReadySeconds", "DeploymentSpec"), ("deployments", "revisionHistoryLimit", "DeploymentSpec"),
    ("replicasets", "replicas", "ReplicaSetSpec"), ("replicasets", "minReadySeconds", "ReplicaSetSpec"),
    ("daemonsets", "minReadySeconds", "DaemonSetSpec"), ("daemonsets", "revisionHistoryLimit", "DaemonSetSpec"),
    ("jobs", "parallelism", "JobSpec"), ("jobs", "completions", "JobSpec"), ("jobs", "backoffLimit", "JobSpec"),
    ("jobs", "backoffLimitPerIndex", "JobSpec"), ("jobs", "maxFailedIndexes", "JobSpec"),
    ("jobs", "ttlSecondsAfterFinished", "JobSpec"),
    ("cronjobs", "successfulJobsHistoryLimit", "CronJobSpec"), ("cronjobs", "failedJobsHistoryLimit", "CronJobSpec"),
])
async def test_an_int32_field_of_apps_and_batch_past_its_range_is_refused_and_not_stored(tmp_path, plural, path, go_type):
    """2**31 in an apps/v1 or batch/v1 int32 field (a StatefulSet's ordinals.start and replicas, a
    Job's parallelism...): Go's decoder refuses it naming the field, a create or update's 400 and a
    merge patch's 422 at `patch`, and nothing is stored."""
    group, kind = _KINDS[plural]
    base = f"/apis/{group}/v1/namespaces/default/{plural}"
    error = f"json: cannot unmarshal number 2147483648 into Go struct field {go_type}.spec.{path} of type int32"

    def spec_with(value) -> dict:
        spec = json.loads(json.dumps(_SPECS[plural]))
        *outer, last = path.split(".")
        at = spec
        for name in outer:
            at = at.setdefault(name, {})
        at[last] = value
        return spec
    async with served(tmp_path) as (_, api):
        body = {"apiVersion": f"{group}/v1", "kind": kind, "metadata": {"name": "big"}, "spec": spec_with(2**31)}
        code, status = await _send(api, "POST", base, body)
        assert (code, status["message"]) == (400, f'{kind} in version "v1" cannot be handled as a {kind}: {error}')
        assert (await _send(api, "GET", f"{base}/big", None))[0] == 404

        code, made = await _send(api, "POST", base, {**body, "spec": _SPECS[plural]})
        assert code == 201, made
        code, status = await _send(api, "PUT", f"{base}/big", {**made, "spec": {**made["spec"], **spec_with(2**31)}})
        assert (code, status["message"]) == (400, f'{kind} in version "v1" cannot be handled as a {kind}: {error}')
        code, status = await _send(api, "PATCH", f"{base}/big", {"spec": spec_with(2**31)}, MERGE)
        assert code == 422 and _invalid(status)[1] == error
        assert (await _send(api, "GET", f"{base}/big", None))[1] == made
