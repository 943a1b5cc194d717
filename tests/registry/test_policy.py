from nanokube.registry.base import all_resources

RES = next(r for r in all_resources() if r.group == "policy")
S = RES.strategy


def pdb(**spec):
    return {"metadata": {"name": "web", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, **spec}}


def test_registration():
    assert (RES.plural, RES.versions, RES.short_names, RES.subresources) == (
        "poddisruptionbudgets", ["v1"], ("pdb",), ("status",))


def test_valid():
    assert RES.validate_create(pdb(minAvailable="50%")) == []
    assert S.validate(pdb(maxUnavailable=1, unhealthyPodEvictionPolicy="AlwaysAllow")) == []


def test_min_and_max_are_exclusive():
    errs = S.validate(pdb(minAvailable=1, maxUnavailable="10%"))
    assert [(e.field, e.detail) for e in errs] == [("spec", "minAvailable and maxUnavailable cannot be both set")]
    # the internal PodDisruptionBudgetSpec: Go's field names, in its order
    assert errs[0].message == ('Invalid value: {"MinAvailable":1,"Selector":{"matchLabels":{"app":"web"}},'
                               '"MaxUnavailable":"10%","UnhealthyPodEvictionPolicy":null}: '
                               "minAvailable and maxUnavailable cannot be both set")


def test_int_or_percent_rules():
    errs = {(e.field, e.detail) for e in S.validate(pdb(minAvailable="120%"))}
    assert errs == {("spec.minAvailable", "must not be greater than 100%")}
    errs = {(e.field, e.detail) for e in S.validate(pdb(maxUnavailable=-2))}
    assert errs == {("spec.maxUnavailable", "must be greater than or equal to 0")}
    assert [e.field for e in S.validate(pdb(maxUnavailable="half"))] == ["spec.maxUnavailable"]


def test_selector_and_eviction_policy():
    obj = pdb(unhealthyPodEvictionPolicy="Sometimes")
    obj["spec"]["selector"] = {"matchExpressions": [{"key": "app", "operator": "In"}]}
    assert [(e.reason, e.field) for e in S.validate(obj)] == [
        ("FieldValueRequired", "spec.selector.matchExpressions[0].values"),
        ("FieldValueNotSupported", "spec.unhealthyPodEvictionPolicy")]


def test_status_update():
    obj = pdb()
    obj["status"] = {"disruptionsAllowed": -1, "expectedPods": 2}
    assert [e.field for e in S.validate_status_update(obj, obj)] == ["status.disruptionsAllowed"]


def test_columns():
    obj = pdb(minAvailable="50%")
    obj["status"] = {"disruptionsAllowed": 2}
    assert [c.name for c in S.columns] == ["Name", "Min Available", "Max Unavailable", "Allowed Disruptions", "Age"]
    assert [c.fn(obj) for c in S.columns[:4]] == ["web", "50%", "N/A", 2]
