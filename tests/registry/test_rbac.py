"""RBAC object validation and the review resource."""

from nanokube.registry.base import all_resources

G = "rbac.authorization.k8s.io"
RES = {(r.group, r.plural): r for r in all_resources()}


def errs(plural, obj, group=G):
    return [(e.reason, e.field, e.detail) for e in RES[(group, plural)].validate_create(obj)]


def test_role_rules():
    ok = {"metadata": {"name": "r", "namespace": "a"}, "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]}
    assert errs("roles", ok) == []
    bad = {"metadata": {"name": "r", "namespace": "a"}, "rules": [{"verbs": [], "nonResourceURLs": ["/x"]}]}
    assert errs("roles", bad) == [
        ("FieldValueRequired", "rules[0].verbs", "verbs must contain at least one value"),
        ("FieldValueInvalid", "rules[0].nonResourceURLs", "namespaced rules cannot apply to non-resource URLs"),
    ]
    assert errs("roles", {"metadata": {"name": "r", "namespace": "a"}, "rules": [{"verbs": ["get"]}]}) == [
        ("FieldValueRequired", "rules[0].apiGroups", "resource rules must supply at least one api group"),
        ("FieldValueRequired", "rules[0].resources", "resource rules must supply at least one resource"),
    ]


def test_cluster_role_allows_non_resource_urls_and_colon_names():
    obj = {"metadata": {"name": "system:x"}, "rules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz"]}]}
    assert errs("clusterroles", obj) == []
    both = {"metadata": {"name": "a/b"}, "rules": [{"verbs": ["get"], "nonResourceURLs": ["/x"], "resources": ["pods"]}]}
    assert errs("clusterroles", both) == [
        ("FieldValueInvalid", "metadata.name", "may not contain '/'"),
        ("FieldValueInvalid", "rules[0].nonResourceURLs", "rules cannot apply to both regular resources and non-resource URLs"),
    ]


def test_bindings():
    rb = {"metadata": {"name": "b", "namespace": "a"}, "roleRef": {"apiGroup": G, "kind": "Role", "name": "r"},
          "subjects": [{"kind": "User", "apiGroup": G, "name": "alice"}, {"kind": "ServiceAccount", "name": "sa"}]}
    assert errs("rolebindings", rb) == []
    crb = {"metadata": {"name": "b"}, "roleRef": {"apiGroup": G, "kind": "Role", "name": "r"},
           "subjects": [{"kind": "ServiceAccount", "name": "sa"}, {"kind": "Robot", "name": "x"}]}
    assert errs("clusterrolebindings", crb) == [
        ("FieldValueNotSupported", "roleRef.kind", 'supported values: "ClusterRole"'),
        ("FieldValueRequired", "subjects[0].namespace", ""),
        ("FieldValueNotSupported", "subjects[1].kind", 'supported values: "ServiceAccount", "User", "Group"'),
    ]


def test_role_ref_is_immutable():
    res = RES[(G, "rolebindings")]
    old = {"metadata": {"name": "b", "namespace": "a"}, "roleRef": {"apiGroup": G, "kind": "Role", "name": "r"}}
    new = {**old, "roleRef": {"apiGroup": G, "kind": "Role", "name": "other"}}
    assert [str(e) for e in res.strategy.validate_update(new, old)] == [  # the internal RoleRef's Go field names
        f'roleRef: Invalid value: {{"APIGroup":"{G}","Kind":"Role","Name":"other"}}: cannot change roleRef']


def test_binding_columns():
    res = RES[(G, "rolebindings")]
    obj = {"metadata": {"name": "b"}, "roleRef": {"kind": "ClusterRole", "name": "view"},
           "subjects": [{"kind": "User", "name": "alice"}, {"kind": "ServiceAccount", "name": "sa", "namespace": "n"}]}
    cols = {c.name: c.fn for c in res.strategy.columns if c.name != "Age"}
    assert (cols["Role"](obj), cols["Users"](obj), cols["ServiceAccounts"](obj), cols["Groups"](obj)) == ("ClusterRole/view", "alice", "n/sa", "")


def test_access_review_needs_exactly_one_attribute_set():
    assert RES[("authorization.k8s.io", "selfsubjectaccessreviews")].verbs == ("create",)
    validate = RES[("authorization.k8s.io", "selfsubjectaccessreviews")].strategy.validate
    assert [e.detail for e in validate({"spec": {}})] == ["exactly one of nonResourceAttributes or resourceAttributes must be specified"]
    both = {"spec": {"resourceAttributes": {}, "nonResourceAttributes": {"verb": "get"}}}
    assert [str(e) for e in validate(both)] == ['spec.nonResourceAttributes: Invalid value: {"Path":"","Verb":"get"}: '
                                                "cannot be specified in combination with resourceAttributes"]
    assert validate({"spec": {"nonResourceAttributes": {"verb": "get", "path": "/x"}}}) == []


def test_service_account_subjects_and_aggregation_selectors_are_validated():
    """ValidateRoleBindingSubject's ServiceAccount name and ValidateClusterRole's aggregationRule (the
    fuzzer stored a ServiceAccount subject named A_B and a selector matching label value "b c")."""
    rb = {"metadata": {"name": "b", "namespace": "a"}, "roleRef": {"apiGroup": G, "kind": "Role", "name": "r"},
          "subjects": [{"kind": "ServiceAccount", "name": "A_B"}]}
    assert [(r, f) for r, f, _ in errs("rolebindings", rb)] == [("FieldValueInvalid", "subjects[0].name")]
    rb["subjects"][0]["name"] = "builder"
    assert errs("rolebindings", rb) == []
    cr = {"metadata": {"name": "agg"}, "aggregationRule": {"clusterRoleSelectors": [
        {"matchLabels": {"a": "b c"}}, {"matchExpressions": [{"key": "k", "operator": "In", "values": ["x y"]}]},
        {"matchLabels": {"rbac.example.com/aggregate": "true"}}]}}
    assert [(r, f) for r, f, _ in errs("clusterroles", cr)] == [
        ("FieldValueInvalid", "aggregationRule.clusterRoleSelectors[0].matchLabels"),
        ("FieldValueInvalid", "aggregationRule.clusterRoleSelectors[0]"),
        ("FieldValueInvalid", "aggregationRule.clusterRoleSelectors[1].matchExpressions[0].values[0]"),
        ("FieldValueInvalid", "aggregationRule.clusterRoleSelectors[1]")]
    assert errs("clusterroles", {"metadata": {"name": "agg"}, "aggregationRule": {}}) == [
        ("FieldValueRequired", "aggregationRule.clusterRoleSelectors",
         "at least one clusterRoleSelector required if aggregationRule is non-nil")]
    # a value the stored selector already had stays allowed by ValidateLabelSelector; the conversion still fails
    strategy = RES[(G, "clusterroles")].strategy
    old = {"metadata": {"name": "agg"}, "aggregationRule": {"clusterRoleSelectors": [cr["aggregationRule"]["clusterRoleSelectors"][1]]}}
    assert [e.field for e in strategy.validate_update(old, old)] == ["aggregationRule.clusterRoleSelectors[0]"]
