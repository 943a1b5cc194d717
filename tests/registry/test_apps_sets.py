"""DaemonSet, StatefulSet and ControllerRevision through the in-process API:
defaults, upstream's validation messages and columns."""

import pytest

from nanokube.machinery.errors import APIError
from nanokube.registry.base import all_resources
from tests.controllers import make_stack

TEMPLATE = {"metadata": {"labels": {"app": "a"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}


def daemonset(name="d", **spec):
    return {"metadata": {"name": name, "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "a"}}, "template": TEMPLATE, **spec}}


def statefulset(name="web", **spec):
    return {"metadata": {"name": name, "namespace": "default"},
            "spec": {"serviceName": "web", "replicas": 3, "selector": {"matchLabels": {"app": "a"}},
                     "template": TEMPLATE, **spec}}


@pytest.fixture
async def client():
    s = await make_stack()
    yield s.client
    await s.close()


async def invalid(res, body) -> str:
    with pytest.raises(APIError) as e:
        await res.create(body)
    assert e.value.code == 422
    return e.value.message


async def test_daemonset_defaults_status_and_columns(client):
    ds = client.resource("apps", "v1", "daemonsets")
    got = await ds.create(daemonset(template={**TEMPLATE, "spec": {**TEMPLATE["spec"], "nodeSelector": {"gpu": "yes"}}}))
    assert got["spec"]["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}
    assert got["spec"]["revisionHistoryLimit"] == 10
    assert got["status"] == {"currentNumberScheduled": 0, "numberMisscheduled": 0, "desiredNumberScheduled": 0,
                             "numberReady": 0}
    cols = [c.name for c in client_strategy(client, "daemonsets").columns]
    assert cols == ["Name", "Desired", "Current", "Ready", "Up-to-date", "Available", "Node Selector", "Age",
                    "Containers", "Images", "Selector"]
    node_selector = client_strategy(client, "daemonsets").columns[6].fn(got)
    assert node_selector == "gpu=yes"


def client_strategy(client, plural):
    from nanokube.registry.base import all_resources

    return next(r for r in all_resources() if r.plural == plural).strategy


async def test_daemonset_rolling_update_rules(client):
    ds = client.resource("apps", "v1", "daemonsets")
    msg = await invalid(ds, daemonset(updateStrategy={"type": "RollingUpdate",
                                                      "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 0}}))
    assert "spec.updateStrategy.rollingUpdate.maxUnavailable: Required value: cannot be 0 when maxSurge is 0" in msg
    msg = await invalid(ds, daemonset(updateStrategy={"type": "RollingUpdate",
                                                      "rollingUpdate": {"maxUnavailable": "10%", "maxSurge": "20%"}}))
    assert "spec.updateStrategy.rollingUpdate.maxSurge: Invalid value: \"20%\": may not be set when maxUnavailable is non-zero" in msg
    msg = await invalid(ds, daemonset(updateStrategy={"type": "Sometimes"}))
    assert ('spec.updateStrategy: Unsupported value: {"Type":"Sometimes","RollingUpdate":null}: '
            'supported values: "RollingUpdate", "OnDelete"') in msg  # the internal DaemonSetUpdateStrategy
    msg = await invalid(ds, daemonset(selector={"matchLabels": {"app": "b"}}))
    assert "spec.template.metadata.labels: Invalid value" in msg and "`selector` does not match template `labels`" in msg
    ok = await ds.create(daemonset(updateStrategy={"type": "OnDelete"}))
    with pytest.raises(APIError) as e:
        await ds.patch("d", {"spec": {"selector": {"matchLabels": {"app": "a", "x": "y"}},
                                      "template": {"metadata": {"labels": {"app": "a", "x": "y"}}}}}, namespace="default")
    assert "spec.selector: Invalid value" in e.value.message and "field is immutable" in e.value.message
    assert ok["spec"]["updateStrategy"] == {"type": "OnDelete"}


async def test_statefulset_defaults_and_columns(client):
    sts = client.resource("apps", "v1", "statefulsets")
    got = await sts.create(statefulset(volumeClaimTemplates=[{"metadata": {"name": "www"}, "spec": {
        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]))
    spec = got["spec"]
    assert spec["podManagementPolicy"] == "OrderedReady"
    assert spec["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"partition": 0, "maxUnavailable": 1}}
    assert spec["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Retain", "whenScaled": "Retain"}
    assert spec["volumeClaimTemplates"][0]["spec"]["volumeMode"] == "Filesystem"
    assert spec["volumeClaimTemplates"][0]["status"] == {"phase": "Pending"}
    assert got["status"] == {"replicas": 0, "availableReplicas": 0}
    assert [c.name for c in client_strategy(client, "statefulsets").columns] == ["Name", "Ready", "Age", "Containers", "Images"]


async def test_statefulset_validation(client):
    sts = client.resource("apps", "v1", "statefulsets")
    msg = await invalid(sts, statefulset(podManagementPolicy="Whenever"))
    assert "spec.podManagementPolicy: Invalid value: \"Whenever\": must be 'OrderedReady' or 'Parallel'" in msg
    msg = await invalid(sts, statefulset(updateStrategy={"type": "OnDelete", "rollingUpdate": {"partition": 1}}))
    assert ('spec.updateStrategy.rollingUpdate: Invalid value: {"Partition":1,"MaxUnavailable":null}: '
            "only allowed for updateStrategy 'RollingUpdate'") in msg  # the internal RollingUpdateStatefulSetStrategy
    msg = await invalid(sts, statefulset(updateStrategy={"type": "Sometimes"}))
    assert ('spec.updateStrategy: Invalid value: {"Type":"Sometimes","RollingUpdate":null}: '
            "must be 'RollingUpdate' or 'OnDelete'") in msg
    msg = await invalid(sts, statefulset(updateStrategy={"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0}}))
    assert "spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value: 0: must be greater than zero" in msg
    msg = await invalid(sts, statefulset(ordinals={"start": -1}))
    assert "spec.ordinals.start: Invalid value: -1: must be greater than or equal to 0" in msg
    msg = await invalid(sts, statefulset(persistentVolumeClaimRetentionPolicy={"whenDeleted": "Keep"}))
    assert 'spec.persistentVolumeClaimRetentionPolicy.whenDeleted: Unsupported value: "Keep"' in msg
    await sts.create(statefulset())
    with pytest.raises(APIError) as e:
        await sts.patch("web", {"spec": {"serviceName": "other"}}, namespace="default")
    assert "spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template'" in e.value.message
    await sts.patch("web", {"spec": {"replicas": 5, "ordinals": {"start": 2}}}, namespace="default")


async def test_statefulset_name_is_a_dns_label_on_create_only(client):
    """ValidateStatefulSetName: its pods are named <name>-<ordinal>, so a 64-character or dotted
    name is refused (the fuzzer's probe stored one); an update does not check the name again."""
    sts = client.resource("apps", "v1", "statefulsets")
    assert 'metadata.name: Invalid value: "' + "a" * 64 + '": must be no more than 63 characters' in \
        await invalid(sts, statefulset(name="a" * 64))
    assert 'metadata.name: Invalid value: "web.v1": must not contain dots' in await invalid(sts, statefulset(name="web.v1"))
    assert "a lowercase RFC 1123 label must consist of" in await invalid(sts, statefulset(name="web_v1"))
    strategy = next(r for r in all_resources() if r.plural == "statefulsets")
    dotted = statefulset(name="web.v1")
    strategy.strategy.default(dotted, "v1")
    dotted["metadata"].update(uid="u", creationTimestamp="2026-01-01T00:00:00Z")
    assert strategy.validate_update(dotted, dotted) == []


async def test_controller_revision(client):
    crs = client.resource("apps", "v1", "controllerrevisions")
    msg = await invalid(crs, {"metadata": {"name": "r", "namespace": "default"}, "revision": 1})
    assert "data: Required value: data is mandatory" in msg
    got = await crs.create({"metadata": {"name": "r", "namespace": "default", "ownerReferences": [
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d", "uid": "u", "controller": True}]},
        "data": {"spec": {"template": {"$patch": "replace"}}}, "revision": 2})
    assert "generation" not in got["metadata"]
    cols = client_strategy(client, "controllerrevisions").columns
    assert [c.name for c in cols] == ["Name", "Controller", "Revision", "Age"]
    assert cols[1].fn(got) == "daemonset.apps/d" and cols[2].fn(got) == 2
    with pytest.raises(APIError) as e:
        await crs.patch("r", {"data": {"other": 1}}, namespace="default")
    assert "data: Invalid value" in e.value.message and "field is immutable" in e.value.message
    await crs.patch("r", {"revision": 3}, namespace="default")


async def test_statefulset_template_may_mount_its_claims(client):
    sts = client.resource("apps", "v1", "statefulsets")
    body = statefulset(volumeClaimTemplates=[{"metadata": {"name": "www"}, "spec": {
        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}])
    body["spec"]["template"] = {"metadata": {"labels": {"app": "a"}}, "spec": {"containers": [
        {"name": "c", "image": "nginx", "volumeMounts": [{"name": "www", "mountPath": "/data"}]}]}}
    await sts.create(body)
    body["metadata"]["name"] = "other"
    body["spec"]["template"]["spec"]["containers"][0]["volumeMounts"][0]["name"] = "missing"
    msg = await invalid(sts, body)
    assert 'spec.template.spec.containers[0].volumeMounts[0].name: Not found: "missing"' in msg


async def test_over_http_a_missing_selector_matches_no_template_labels(tmp_path):
    """LabelSelectorAsSelector(nil) is labels.Nothing(): not empty, so Deployments, ReplicaSets and
    StatefulSets report the template's labels as unmatched beside the Required selector; a DaemonSet
    has no Required selector, only the mismatch. (Raw HTTP: the client refuses a spec without selector.)"""
    import asyncio
    import json

    from tests.served import served

    template = {"metadata": {"labels": {"app": "a"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    mismatch = ("spec.template.metadata.labels", 'Invalid value: {"app":"a"}: `selector` does not match template `labels`')
    async with served(tmp_path) as (_, api_client):
        def post(plural: str, name: str):
            request = api_client.param_serialize(
                "POST", f"/apis/apps/v1/namespaces/default/{plural}",
                body={"metadata": {"name": name}, "spec": {"template": template}},
                header_params={"Content-Type": "application/json", "Accept": "application/json"})
            response = api_client.call_api(*request[:4])
            response.read()
            return response.status, json.loads(response.data)

        for plural, want in (("deployments", [("spec.selector", "Required value"), mismatch]),
                             ("replicasets", [("spec.selector", "Required value"), mismatch]),
                             ("statefulsets", [("spec.selector", "Required value"), mismatch]),
                             ("daemonsets", [mismatch])):
            status, body = await asyncio.to_thread(post, plural, "x")
            assert status == 422, body
            assert [(c["field"], c["message"]) for c in body["details"]["causes"]] == want, plural


async def test_over_http_a_workload_without_a_template_validates_an_empty_one(tmp_path):
    """A workload's template is a struct upstream, never nil: without one the defaulted empty
    template's own errors are reported (no 'Required' template), for apps and batch kinds alike;
    a ReplicationController's template is a pointer and stays Required."""
    import asyncio
    import json

    from tests.served import served

    mismatch = ("spec.template.metadata.labels", "Invalid value: null: `selector` does not match template `labels`")
    containers = ("spec.template.spec.containers", "Required value")
    job_restart = ("spec.template.spec.restartPolicy", 'Required value: valid values: "OnFailure", "Never"')
    selector = {"selector": {"matchLabels": {"a": "b"}}}
    cases = [
        ("/apis/apps/v1/namespaces/default/deployments", selector, [mismatch, containers]),
        ("/apis/apps/v1/namespaces/default/replicasets", selector, [mismatch, containers]),
        ("/apis/apps/v1/namespaces/default/statefulsets", selector, [mismatch, containers]),
        ("/apis/apps/v1/namespaces/default/daemonsets", selector, [mismatch, containers]),
        ("/apis/batch/v1/namespaces/default/jobs", {}, [containers, job_restart]),
        ("/apis/batch/v1/namespaces/default/cronjobs", {"schedule": "* * * * *"},
         [(f"spec.jobTemplate.{f}", m) for f, m in (containers, job_restart)]),
        ("/api/v1/namespaces/default/replicationcontrollers", {"selector": {"a": "b"}},
         [("spec.template", "Required value")]),
    ]
    async with served(tmp_path) as (_, api_client):
        def post(path: str, spec: dict):
            request = api_client.param_serialize("POST", path, body={"metadata": {"name": "x"}, "spec": spec},
                                                 header_params={"Content-Type": "application/json",
                                                                "Accept": "application/json"})
            response = api_client.call_api(*request[:4])
            response.read()
            return response.status, json.loads(response.data)

        for path, spec, want in cases:
            status, body = await asyncio.to_thread(post, path, spec)
            assert status == 422, body
            assert [(c["field"], c["message"]) for c in body["details"]["causes"]] == want, path
