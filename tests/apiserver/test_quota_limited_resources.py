"""ResourceQuota admission's limitedResources (--admission-control-config-file's
ResourceQuotaConfiguration): what it limits by default is refused unless a quota covers it, with
upstream's messages; a namespace with such a quota may use it (the docs' "Limit Priority Class
consumption by default", and GPUs only for the teams given a quota of them)."""

import pytest
import yaml

from nanokube.apiserver.admission.config_file import plugin_configs
from nanokube.machinery.errors import APIError

CONFIG = """apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: ResourceQuota
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: ResourceQuotaConfiguration
    limitedResources:
    - resource: pods
      matchContains: [nvidia.com/gpu]
    - resource: pods
      matchScopes:
      - scopeName: PriorityClass
        operator: In
        values: [system-node-critical, system-cluster-critical]
"""


def rc(stack, plural, group=""):
    return stack.client.resource(group, "v1", plural)


def pod(name, ns, gpus=0, **spec):
    res = {"nvidia.com/gpu": str(gpus)} if gpus else {}
    c = {"name": "main", "image": "busybox", "resources": {"requests": res, "limits": res}}
    return {"metadata": {"name": name, "namespace": ns}, "spec": {"containers": [c], **spec}}


async def quota(stack, ns, hard, **spec):
    """A quota with its status written, as the resource-quota controller (not running here) would."""
    q = await rc(stack, "resourcequotas").create({"metadata": {"name": "q", "namespace": ns},
                                                  "spec": {"hard": hard, **spec}})
    await rc(stack, "resourcequotas").update({**q, "status": {"hard": hard, "used": {k: "0" for k in hard}}},
                                             subresource="status")


@pytest.fixture
async def limited(stack, tmp_path):
    (tmp_path / "admission.yaml").write_text(CONFIG)
    stack.rest.admission.configure(plugin_configs(tmp_path / "admission.yaml"))
    for ns in ("team-a", "team-b", "kube-system"):
        await rc(stack, "namespaces").create({"metadata": {"name": ns}})
    return stack


async def test_gpus_only_where_a_quota_covers_them(limited):
    pods = rc(limited, "pods")
    await pods.create(pod("cpu", "team-a"))  # nothing limited used: no quota needed
    with pytest.raises(APIError) as e:
        await pods.create(pod("gpu", "team-a", gpus=1))
    assert (e.value.code, e.value.message) == (
        403, 'pods "gpu" is forbidden: insufficient quota to consume: requests.nvidia.com/gpu')
    await quota(limited, "team-b", {"requests.nvidia.com/gpu": "2"})
    await pods.create(pod("gpu", "team-b", gpus=2))
    used = (await rc(limited, "resourcequotas").get("q", "team-b"))["status"]["used"]
    assert used == {"requests.nvidia.com/gpu": "2"}
    with pytest.raises(APIError) as e:
        await pods.create(pod("more", "team-b", gpus=1))
    assert "exceeded quota: q, requested: requests.nvidia.com/gpu=1" in e.value.message


async def test_a_quota_not_naming_the_resource_does_not_cover_it(limited):
    await quota(limited, "team-a", {"pods": "10"})
    with pytest.raises(APIError) as e:
        await rc(limited, "pods").create(pod("gpu", "team-a", gpus=1))
    assert e.value.message == 'pods "gpu" is forbidden: insufficient quota to consume: requests.nvidia.com/gpu'


async def test_critical_pods_only_where_a_quota_of_their_class_is(limited):
    pods = rc(limited, "pods")
    with pytest.raises(APIError) as e:
        await pods.create(pod("agent", "team-a", priorityClassName="system-node-critical"))
    # a plain error in upstream's evaluator: a 500 without a reason
    assert (e.value.code, e.value.reason, e.value.message) == (
        500, "", "insufficient quota to match these scopes: "
                 "[{PriorityClass In [system-node-critical system-cluster-critical]}]")
    await quota(limited, "kube-system", {"pods": "1G"}, scopeSelector={"matchExpressions": [
        {"scopeName": "PriorityClass", "operator": "In", "values": ["system-node-critical", "system-cluster-critical"]}]})
    made = await pods.create(pod("agent", "kube-system", priorityClassName="system-node-critical"))
    assert made["spec"]["priority"] == 2000001000
    await pods.create(pod("plain", "team-a"))


@pytest.mark.parametrize("configuration, said", [
    ({"apiVersion": "v1", "kind": "Pod"},
     'couldn\'t init admission plugin "ResourceQuota": no kind "Pod" is registered for version "v1" in scheme '
     '"pkg/runtime/scheme.go:100"'),
    ({"apiVersion": "apiserver.config.k8s.io/v1", "kind": "ResourceQuotaConfiguration",
      "limitedResources": [{"matchContains": ["x"]}]},
     'couldn\'t init admission plugin "ResourceQuota": limitedResources[0].resource: Required value'),
    ({"apiVersion": "resourcequota.admission.k8s.io/v1beta1", "kind": "Configuration",
      "limitedResources": [{"resource": "pods", "matchContains": "x"}]},
     'couldn\'t init admission plugin "ResourceQuota": json: cannot unmarshal string into Go struct field '
     "LimitedResource.limitedResources.matchContains of type []string"),
])
def test_a_bad_configuration_is_refused(tmp_path, configuration, said):
    doc = {"apiVersion": "apiserver.config.k8s.io/v1", "kind": "AdmissionConfiguration",
           "plugins": [{"name": "ResourceQuota", "configuration": configuration}]}
    (tmp_path / "admission.yaml").write_text(yaml.safe_dump(doc))
    with pytest.raises(ValueError) as e:
        plugin_configs(tmp_path / "admission.yaml")
    assert str(e.value) == said
