"""TaintNodesByCondition admission: a Node is created tainted not-ready:NoSchedule (once, whatever
else it brings), never on an update, and not at all where the plugin is disabled."""

from tests.apiserver.test_rest_managedfields import call, entries
from tests.served import served

NODES = "/api/v1/nodes"
NOT_READY = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}


async def test_a_new_node_is_tainted_not_ready_once(tmp_path):
    async with served(tmp_path, disable_admission_plugins=("ServiceAccount",)) as (_, api):
        bare = await call(api, "POST", NODES, {"metadata": {"name": "bare"}}, "maker")
        assert bare["spec"] == {"taints": [NOT_READY]}
        assert "managedFields" not in bare["metadata"]  # admission's taint is nobody's
        gpu = {"key": "gpu", "value": "a100", "effect": "NoSchedule"}
        own = {"key": NOT_READY["key"], "value": "boot", "effect": "NoSchedule"}
        tainted = await call(api, "POST", NODES, {"metadata": {"name": "tainted"}, "spec": {"taints": [gpu, own]}},
                             "maker")
        assert tainted["spec"]["taints"] == [gpu, own]  # one of that key and effect is there already
        assert entries(tainted)["maker"][2] == {"f:spec": {"f:taints": {}}}
        other = await call(api, "POST", NODES, {"metadata": {"name": "other"}, "spec": {"taints": [gpu]}})
        assert other["spec"]["taints"] == [gpu, NOT_READY]
        untainted = await call(api, "PATCH", f"{NODES}/bare", {"spec": {"taints": None}},
                               content_type="application/merge-patch+json")
        assert untainted["spec"] == {}
        replaced = await call(api, "PUT", f"{NODES}/bare", untainted)
        assert replaced["spec"] == {}


async def test_a_disabled_plugin_taints_nothing(tmp_path):
    async with served(tmp_path, disable_admission_plugins=("ServiceAccount", "TaintNodesByCondition")) as (_, api):
        node = await call(api, "POST", NODES, {"metadata": {"name": "n"}})
        assert node["spec"] == {}
