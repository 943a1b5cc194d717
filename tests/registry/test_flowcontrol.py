import copy

from nanokube.apiserver.flowcontrol import FLOW_SCHEMAS, PRIORITY_LEVELS, dangling_condition
from nanokube.registry.base import all_resources

RES = {r.plural: r for r in all_resources() if r.group == "flowcontrol.apiserver.k8s.io"}
FS, PL = RES["flowschemas"], RES["prioritylevelconfigurations"]


def test_bootstrap_objects_are_valid_and_already_defaulted():
    """As upstream checks: defaulting changes none of the bootstrap objects."""
    for plural, objs in (("flowschemas", FLOW_SCHEMAS), ("prioritylevelconfigurations", PRIORITY_LEVELS)):
        for name, spec in objs.items():
            obj = {"metadata": {"name": name}, "spec": copy.deepcopy(spec)}
            RES[plural].strategy.default(obj, "v1")
            assert obj["spec"] == spec, name
            assert RES[plural].validate_create(obj) == [], name
    assert sorted(PRIORITY_LEVELS) == ["catch-all", "exempt", "global-default", "leader-election", "node-high",
                                       "system", "workload-high", "workload-low"]
    assert [FLOW_SCHEMAS[n]["matchingPrecedence"] for n in ("exempt", "probes", "global-default", "catch-all")] == [
        1, 2, 9900, 10000]


def test_priority_level_defaults_and_validation():
    pl = {"metadata": {"name": "p"}, "spec": {"type": "Limited", "limited": {"limitResponse": {"type": "Queue"}}}}
    PL.strategy.default(pl, "v1")
    assert pl["spec"]["limited"] == {"nominalConcurrencyShares": 30, "lendablePercent": 0, "limitResponse": {
        "type": "Queue", "queuing": {"queues": 64, "handSize": 8, "queueLengthLimit": 50}}}
    pl["spec"]["limited"]["limitResponse"]["queuing"]["handSize"] = 100
    assert [(e.field, e.detail) for e in PL.validate_create(pl)] == [
        ("spec.limited.limitResponse.queuing.handSize", "should not be greater than queues (64)")]
    assert [e.field for e in PL.validate_create({"metadata": {"name": "p"}, "spec": {"type": "Limited"}})] == ["spec.limited"]


def test_flow_schema_validation_and_columns():
    fs = {"metadata": {"name": "f"}, "spec": {"priorityLevelConfiguration": {"name": "workload-low"}, "rules": [
        {"subjects": [{"kind": "ServiceAccount", "serviceAccount": {"name": "x"}}],
         "resourceRules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]}]}}
    FS.strategy.default(fs, "v1")
    assert fs["spec"]["matchingPrecedence"] == 1000
    assert [e.field for e in FS.validate_create(fs)] == [
        "spec.rules[0].subjects[0].serviceAccount.namespace", "spec.rules[0].resourceRules[0].namespaces"]
    fs["status"] = {"conditions": [dangling_condition(fs, True, "2026-01-01T00:00:00Z")]}
    assert [c.fn(fs) for c in FS.strategy.columns if c.name != "Age"] == ["f", "workload-low", 1000, "<none>", "False"]
    exempt = {"metadata": {"name": "exempt"}, "spec": PRIORITY_LEVELS["exempt"]}
    assert [c.fn(exempt) for c in PL.strategy.columns if c.name != "Age"] == [
        "exempt", "Exempt", "<none>", "<none>", "<none>", "<none>"]
