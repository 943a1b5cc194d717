"""ReplicationControllers and PodTemplates through the in-process API."""

import pytest

from nanokube.machinery.errors import APIError
from nanokube.registry.base import all_resources
from tests.controllers import make_stack

TEMPLATE = {"metadata": {"labels": {"app": "a", "tier": "web"}},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}}


@pytest.fixture
async def client():
    s = await make_stack()
    yield s.client
    await s.close()


def strategy(plural):
    return next(r for r in all_resources() if r.plural == plural).strategy


async def test_rc_defaults_selector_and_labels_from_template(client):
    rcs = client.resource("", "v1", "replicationcontrollers")
    got = await rcs.create({"metadata": {"name": "rc", "namespace": "default"}, "spec": {"template": TEMPLATE}})
    assert got["spec"]["selector"] == {"app": "a", "tier": "web"}
    assert got["metadata"]["labels"] == {"app": "a", "tier": "web"}
    assert got["spec"]["replicas"] == 1 and got["status"] == {"replicas": 0}
    cols = strategy("replicationcontrollers").columns
    assert [c.name for c in cols] == ["Name", "Desired", "Current", "Ready", "Age", "Containers", "Images", "Selector"]
    assert cols[-1].fn(got) == "app=a,tier=web"


async def test_rc_validation(client):
    rcs = client.resource("", "v1", "replicationcontrollers")
    with pytest.raises(APIError) as e:
        await rcs.create({"metadata": {"name": "rc", "namespace": "default"},
                          "spec": {"selector": {"app": "b"}, "replicas": -1,
                                   "template": {**TEMPLATE, "spec": {**TEMPLATE["spec"], "restartPolicy": "Never"}}}})
    msg = e.value.message
    assert msg.startswith('ReplicationController "rc" is invalid: [')
    for part in ("spec.replicas: Invalid value: -1: must be greater than or equal to 0",
                 "spec.template.metadata.labels: Invalid value", "`selector` does not match template `labels`",
                 'spec.template.spec.restartPolicy: Unsupported value: "Never": supported values: "Always"'):
        assert part in msg


async def test_pod_template(client):
    pts = client.resource("", "v1", "podtemplates")
    got = await pts.create({"metadata": {"name": "pt", "namespace": "default"}, "template": TEMPLATE})
    assert got["template"]["spec"]["restartPolicy"] == "Always" and got["metadata"]["generation"] == 1
    cols = strategy("podtemplates").columns
    assert [c.name for c in cols] == ["Name", "Containers", "Images", "Pod Labels"]
    assert [c.fn(got) for c in cols[1:]] == ["c", "nginx", "app=a,tier=web"]
    got = await pts.patch("pt", {"template": {"spec": {"containers": [{"name": "c", "image": "nginx:2"}]}}},
                          namespace="default")
    assert got["metadata"]["generation"] == 2
    with pytest.raises(APIError) as e:
        await pts.create({"metadata": {"name": "bad", "namespace": "default"},
                          "template": {"spec": {"containers": []}}})
    assert "template.spec.containers: Required value" in e.value.message
