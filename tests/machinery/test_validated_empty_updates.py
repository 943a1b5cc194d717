"""An update's validation reads the empty lists jsontags.VALIDATED_EMPTY names as set, as upstream's
ValidatePodUpdate (which validates the whole new spec: validateWindows tells `supplementalGroups: []`
from none) and ValidateIngressSpec (which prints the rules it refuses) read the decoded struct; what
compares the update with the stored object reads them as none (semantic equality), and they are
never stored."""

import json

import pytest
from kubernetes.client import ApiException

from tests.apiserver.test_rest_managedfields import call
from tests.served import served

PODS = "/api/v1/namespaces/default/pods"
MERGE, SMP = "application/merge-patch+json", "application/strategic-merge-patch+json"
FORBIDDEN = "spec.securityContext.supplementalGroups: Forbidden: cannot be set for a windows pod"


def _pod(name: str, os: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"os": {"name": os}, "containers": [{"name": "c", "image": "i"}]}}


async def _refused(api, *args, **kw) -> dict:
    with pytest.raises(ApiException) as e:
        await call(api, *args, **kw)
    assert e.value.status == 422
    return json.loads(e.value.body)


async def test_a_windows_pods_update_to_empty_supplemental_groups_is_forbidden_and_nothing_else(tmp_path):
    async with served(tmp_path) as (_, api):
        pod = await call(api, "POST", PODS, _pod("w", "windows"))
        put = {**pod, "spec": {**pod["spec"], "securityContext": {"supplementalGroups": []}}}
        body = {"spec": {"securityContext": {"supplementalGroups": []}}}
        for status in (await _refused(api, "PUT", f"{PODS}/w", put),
                       await _refused(api, "PATCH", f"{PODS}/w", body, content_type=MERGE),
                       await _refused(api, "PATCH", f"{PODS}/w", body, content_type=SMP)):
            # one cause: `[]` and none are the same spec to the update's comparison (before: accepted)
            assert status["message"] == f'Pod "w" is invalid: {FORBIDDEN}'
        assert (await call(api, "GET", f"{PODS}/w"))["spec"]["securityContext"] == {}


async def test_a_linux_pods_empty_supplemental_groups_are_neither_a_change_nor_stored(tmp_path):
    async with served(tmp_path) as (_, api):
        pod = await call(api, "POST", PODS, _pod("l", "linux"))
        put = {**pod, "spec": {**pod["spec"], "securityContext": {"supplementalGroups": []}}}
        updated = await call(api, "PUT", f"{PODS}/l", put)
        assert updated["spec"]["securityContext"] == {}
        assert updated["metadata"]["resourceVersion"] == pod["metadata"]["resourceVersion"]  # a no-op
        patched = await call(api, "PATCH", f"{PODS}/l", {"spec": {"securityContext": {"supplementalGroups": []}}},
                             content_type=MERGE)
        assert patched["spec"]["securityContext"] == {}


async def test_an_ingress_update_refusing_empty_rules_prints_them(tmp_path):
    async with served(tmp_path) as (_, api):
        ings = "/apis/networking.k8s.io/v1/namespaces/default/ingresses"
        backend = {"service": {"name": "s", "port": {"number": 80}}}
        ing = await call(api, "POST", ings, {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
                                             "metadata": {"name": "i"}, "spec": {"defaultBackend": backend}})
        status = await _refused(api, "PUT", f"{ings}/i", {**ing, "spec": {"rules": []}})
        assert [c["message"] for c in status["details"]["causes"]] == [
            "Invalid value: []: either `defaultBackend` or `rules` must be specified"]
        kept = await call(api, "PUT", f"{ings}/i", {**ing, "spec": {"defaultBackend": backend, "rules": []}})
        assert kept["spec"] == {"defaultBackend": backend}
