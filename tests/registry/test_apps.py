import copy

import pytest

from nanokube.registry import apps
from nanokube.registry.base import all_resources


@pytest.fixture(autouse=True)
def _pod_rules(monkeypatch):
    """Pod-template rules belong to the core group; stand in for them here."""
    monkeypatch.setattr(apps, "pod_template_errors", lambda t, p, old_ips=(): [])
    monkeypatch.setattr(apps, "default_pod_template",
                        lambda t: t is not None and t.setdefault("spec", {}).setdefault("restartPolicy", "Always"))


def resource(plural):
    return next(r for r in all_resources() if r.group == "apps" and r.plural == plural)


def deployment(**spec):
    return {"metadata": {"name": "web", "namespace": "default", "uid": "u1"},
            "spec": {"selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}]}}, **spec}}


def defaulted(obj, plural="deployments"):
    resource(plural).strategy.default(obj, "v1")
    return obj


def fields(errs):
    return [(e.reason, e.field) for e in errs]


def test_registration():
    d, rs = resource("deployments"), resource("replicasets")
    assert (d.namespaced, d.short_names, d.categories, d.subresources) == (True, ("deploy",), ("all",), ("status", "scale"))
    assert (rs.short_names, rs.categories, rs.subresources) == (("rs",), ("all",), ("status", "scale"))


def test_deployment_defaults():
    spec = defaulted(deployment())["spec"]
    assert spec["replicas"] == 1
    assert spec["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}
    assert (spec["revisionHistoryLimit"], spec["progressDeadlineSeconds"]) == (10, 600)


def test_recreate_gets_no_rolling_update():
    spec = defaulted(deployment(strategy={"type": "Recreate"}))["spec"]
    assert spec["strategy"] == {"type": "Recreate"}


def test_valid_deployment():
    assert resource("deployments").validate_create(defaulted(deployment())) == []


def test_selector_must_match_template():
    obj = defaulted(deployment(selector={"matchLabels": {"app": "other"}}))
    errs = resource("deployments").strategy.validate(obj)
    assert fields(errs) == [("FieldValueInvalid", "spec.template.metadata.labels")]
    assert errs[0].detail == "`selector` does not match template `labels`"


def test_selector_required_and_not_empty():
    obj = defaulted(deployment())
    del obj["spec"]["selector"]
    assert ("FieldValueRequired", "spec.selector") in fields(resource("deployments").strategy.validate(obj))
    obj["spec"]["selector"] = {}
    errs = resource("deployments").strategy.validate(obj)
    assert any(e.field == "spec.selector" and e.detail == "empty selector is invalid for deployment" for e in errs)


def test_bad_selector_operator():
    obj = defaulted(deployment(selector={"matchLabels": {"app": "web"},
                                        "matchExpressions": [{"key": "tier", "operator": "Has"}]}))
    assert ("FieldValueInvalid", "spec.selector.matchExpressions[0].operator") in fields(
        resource("deployments").strategy.validate(obj))


def test_negative_replicas_and_zero_surge_and_unavailable():
    obj = defaulted(deployment(replicas=-1, strategy={"type": "RollingUpdate",
                                                     "rollingUpdate": {"maxSurge": 0, "maxUnavailable": "0%"}}))
    errs = resource("deployments").strategy.validate(obj)
    assert ("FieldValueInvalid", "spec.replicas") in fields(errs)
    e = next(e for e in errs if e.field == "spec.strategy.rollingUpdate.maxUnavailable")
    assert e.detail == "may not be 0 when `maxSurge` is 0"


def test_percent_format_and_limit():
    obj = defaulted(deployment(strategy={"type": "RollingUpdate",
                                         "rollingUpdate": {"maxSurge": "x%", "maxUnavailable": "150%"}}))
    errs = {e.field: e.detail for e in resource("deployments").strategy.validate(obj)}
    assert errs["spec.strategy.rollingUpdate.maxSurge"].startswith("a valid percent string")
    assert errs["spec.strategy.rollingUpdate.maxUnavailable"] == "must not be greater than 100%"


def test_unknown_strategy_type_and_recreate_with_rolling_update():
    obj = defaulted(deployment(strategy={"type": "BlueGreen"}))
    assert ("FieldValueNotSupported", "spec.strategy.Type") in fields(resource("deployments").strategy.validate(obj))
    obj["spec"]["strategy"] = {"type": "Recreate", "rollingUpdate": {}}
    assert ("FieldValueForbidden", "spec.strategy.rollingUpdate") in fields(resource("deployments").strategy.validate(obj))


def test_template_restart_policy_must_be_always():
    obj = defaulted(deployment())
    obj["spec"]["template"]["spec"]["restartPolicy"] = "Never"
    errs = resource("deployments").strategy.validate(obj)
    assert fields(errs) == [("FieldValueNotSupported", "spec.template.spec.restartPolicy")]


def test_progress_deadline_must_exceed_min_ready():
    obj = defaulted(deployment(minReadySeconds=600))
    errs = resource("deployments").strategy.validate(obj)
    assert [(e.field, e.detail) for e in errs] == [("spec.progressDeadlineSeconds", "must be greater than minReadySeconds")]


def test_selector_immutable_on_update():
    old = defaulted(deployment())
    new = copy.deepcopy(old)
    new["spec"]["selector"]["matchLabels"]["tier"] = "fe"
    new["spec"]["template"]["metadata"]["labels"]["tier"] = "fe"
    errs = resource("deployments").strategy.validate_update(new, old)
    assert [(e.field, e.detail) for e in errs] == [("spec.selector", "field is immutable")]


def test_deployment_status_rules():
    obj = defaulted(deployment())
    obj["status"] = {"replicas": 1, "readyReplicas": 2, "availableReplicas": 3, "updatedReplicas": -1}
    errs = {(e.field, e.detail) for e in resource("deployments").strategy.validate_status_update(obj, obj)}
    assert ("status.readyReplicas", "cannot be greater than status.replicas") in errs
    assert ("status.availableReplicas", "cannot be greater than readyReplicas") in errs
    assert ("status.updatedReplicas", "must be greater than or equal to 0") in errs


def test_deployment_columns():
    obj = defaulted(deployment(replicas=3))
    obj["status"] = {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}
    cols = resource("deployments").strategy.columns
    assert [c.name for c in cols] == ["Name", "Ready", "Up-to-date", "Available", "Age", "Containers", "Images", "Selector"]
    cells = [c.fn(obj) for c in cols if c.name != "Age"]
    assert cells == ["web", "2/3", 3, 2, "nginx", "nginx:1.27", "app=web"]
    assert [c.priority for c in cols[-3:]] == [1, 1, 1]


def test_replicaset_defaults_columns_and_field_selector():
    obj = {"metadata": {"name": "web-1", "namespace": "default"},
           "spec": {"selector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "api"]}]},
                    "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": []}}}}
    defaulted(obj, "replicasets")
    assert obj["spec"]["replicas"] == 1
    strat = resource("replicasets").strategy
    assert strat.validate(obj) == []
    obj["status"] = {"replicas": 1, "readyReplicas": 1}
    cols = {c.name: c.fn(obj) for c in strat.columns if c.name != "Age"}
    assert (cols["Desired"], cols["Current"], cols["Ready"], cols["Selector"]) == (1, 1, 1, "app in (api,web)")
    assert strat.field_selectors["status.replicas"](obj) == "1"


def test_selector_string_forms():
    sel = {"matchLabels": {"b": "2"}, "matchExpressions": [{"key": "a", "operator": "Exists"},
                                                            {"key": "c", "operator": "DoesNotExist"}]}
    assert apps.selector_string(sel) == "a,b=2,!c"
