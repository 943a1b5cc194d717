"""prometheus-adapter style rules: discovery, naming, association, the PromQL
they render, and files refused with a message that says where."""

import pytest

from nanokube.cli import main
from nanokube.metrics.prometheus import load_source
from nanokube.metrics.rules import DEFAULT_RULES, RulesError, load_rules, selector_matchers

CUSTOM = """
rules:
- seriesQuery: 'http_requests_total{namespace!="",pod!=""}'
  seriesFilters: [{isNot: "^http_requests_total$"}]
  name: {matches: "^(.*)_total$", as: "${1}_per_second"}
  resources: {overrides: {namespace: {resource: namespace}, pod: {resource: pods}}}
  metricsQuery: 'sum(rate(<<.Series>>{<<.LabelMatchers>>}[2m])) by (<<.GroupBy>>)'
- seriesQuery: '{__name__="jobs_waiting",service!=""}'
  resources: {template: "<<.Resource>>"}
  metricsQuery: 'max(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
- seriesQuery: '{__name__=~"^.*_lag$"}'
  resources: {overrides: {deploy: {group: apps, resource: deployment}}}
  metricsQuery: '<<.Series>>{<<.LabelMatchers>>}'
"""


def test_series_named_in_the_query_need_no_discovery():
    a, b, c = load_rules(CUSTOM).custom
    assert (a.static_series, b.static_series, c.static_series) == ("http_requests_total", "jobs_waiting", None)
    assert load_rules(DEFAULT_RULES).external[0].static_series is None


def test_naming_uses_go_expansion_and_filters():
    a, b, _ = load_rules(CUSTOM).custom
    assert a.exposed_name("http_requests_total") is None  # isNot filter
    assert a.exposed_name("http_errors_total") == "http_errors_per_second"
    assert a.exposed_name("http_errors") is None  # `matches` does not match
    assert b.exposed_name("jobs_waiting") == "jobs_waiting"
    one = load_rules("rules: [{seriesQuery: x, metricsQuery: x, name: {matches: '^(a)(b)$', as: '$1_$2-$$'}}]").custom[0]
    assert one.exposed_name("ab") == "b-$"  # `$1_` names the (unknown) group "1_", as in Go


def test_association_by_override_and_template():
    a, b, c = load_rules(CUSTOM).custom
    assert a.label_for("", "pods", "pod") == "pod" and a.namespace_label == "namespace"
    assert a.label_for("", "services", "service") is None
    assert b.label_for("", "services", "service") == "service" and b.namespace_label == "namespace"
    assert c.label_for("apps", "deployments", "deployment") == "deploy"
    assert c.label_for("", "deployments", "deployment") is None and c.namespace_label is None
    ext = load_rules("externalRules: [{seriesQuery: q, metricsQuery: q, resources: "
                     "{namespaced: false, overrides: {namespace: {resource: namespace}}}}]").external[0]
    assert ext.namespace_label is None


def test_render_fills_the_placeholders():
    a = load_rules(CUSTOM).custom[0]
    assert a.render("http_errors_total", ['namespace="d"', 'pod=~"p"'], ["pod"]) == \
        'sum(rate(http_errors_total{namespace="d",pod=~"p"}[2m])) by (pod)'


def test_label_selectors_become_promql_matchers():
    assert selector_matchers('queue=jobs,env in (b,a.b),tier notin (x),gpu,!spot,zone!=z-1') == [
        'queue="jobs"', r'env=~"a\\.b|b"', 'tier!~"x"', 'gpu!=""', 'spot=""', 'zone!="z-1"']
    assert selector_matchers("") == []
    with pytest.raises(RulesError):
        selector_matchers("a in (")
    with pytest.raises(RulesError):  # not a label value (labels.Parse checks them)
        selector_matchers('zone!=z"1')


@pytest.mark.parametrize("text,message", [
    ("rules: [{seriesQuery: x}]", "rules[0].metricsQuery: required"),
    ("externalRules: [{metricsQuery: x}]", "externalRules[0].seriesQuery: required"),
    ("rules: [{seriesQuery: x, metricsQuery: '<<.GroupBySlice>>'}]", "unsupported template field .GroupBySlice"),
    ("rules: [{seriesQuery: x, metricsQuery: x, name: {matches: '('}}]", "rules[0].name.matches: invalid regex"),
    ("rules: [{seriesQuery: x, metricsQuery: x, seriesFilters: [{}]}]", "rules[0].seriesFilters[0]"),
    ("rules: [{seriesQuery: x, metricsQuery: x, resources: {overrides: {ns: {}}}}]", "overrides.ns: needs `resource`"),
    # decoding, as prometheus-adapter's loader (go-yaml's UnmarshalStrict) words it
    ("rules: [{seriesQuery: x, metricsQuery: x, seriesFilters: [{isnt: a}]}]",
     "line 1: field isnt not found in type config.RegexFilter"),
    ("externalRule: []", "line 1: field externalRule not found in type config.MetricsDiscoveryConfig"),
    ("rules: {a: 1}", "line 1: cannot unmarshal !!map into []config.DiscoveryRule"),
    ("[1]", "line 1: cannot unmarshal !!seq into config.MetricsDiscoveryConfig"),
    ("rules: [", "unable to parse metrics discovery config: yaml: line 1: did not find expected node content"),
])
def test_bad_rules_files(text, message):
    with pytest.raises(RulesError, match=message.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(")
                       .replace(".", r"\.")):
        load_rules(text)


def test_a_rules_file_s_decoding_errors_are_go_yamls_each_with_its_line():
    """Every unknown field, repeated field and value of the wrong kind, in document order, as
    go-yaml's strict unmarshal lists them; a scalar's text cut past ten characters."""
    text = ("rules:\n- seriesQuery: x\n  metricsQuery: y\n  resources: {namespaced: maybe, overrides: {ns: 5}}\n"
            "  name: {matches: a, as: b, colour: red}\n  name: {}\n"
            "resourceRules: {window: 5m, cpu: {nodeQuery: [a], containerLabel: a-very-long-label}}\n"
            "externalRules:\n- {seriesQuery: x, metricsQuery: y, seriesFilters: {is: a}}\n")
    with pytest.raises(RulesError) as e:
        load_rules(text)
    assert str(e.value).splitlines() == [
        "unable to parse metrics discovery config: yaml: unmarshal errors:",
        "  line 4: cannot unmarshal !!str `maybe` into bool",
        "  line 4: cannot unmarshal !!int `5` into config.GroupResource",
        "  line 5: field colour not found in type config.NameMapping",
        "  line 6: field name already set in type config.DiscoveryRule",
        "  line 7: cannot unmarshal !!seq into string",
        "  line 9: cannot unmarshal !!map into []config.RegexFilter"]
    # a long scalar is cut; a number or a boolean is a string's text, as go-yaml keeps it
    with pytest.raises(RulesError, match=r"line 1: cannot unmarshal !!str `a-very-\.\.\.` into bool$"):
        load_rules("rules: [{seriesQuery: x, metricsQuery: y, resources: {namespaced: a-very-long-value}}]")
    assert load_rules("rules: [{seriesQuery: x, metricsQuery: y, name: {as: 5}}]").custom[0].name_as == "5"
    # what the rules' own checks read is the decoded Go value: a number's text, null a string's zero value
    one = load_rules("rules: [{seriesQuery: 5, metricsQuery: '<<.Series>>', seriesFilters: [{is: null}]}]").custom[0]
    assert one.series_query == "5" and one.exposed_name("up") == "up"  # (`is: ""` lets every series by)


def test_load_source_from_flags(tmp_path):
    assert load_source("builtin") is None
    src = load_source("prometheus=http://127.0.0.1:9090/")
    assert src.url == "http://127.0.0.1:9090" and src.rules.external and not src.rules.custom
    f = tmp_path / "rules.yaml"
    f.write_text(CUSTOM)
    assert len(load_source("prometheus=https://prom.example", str(f)).rules.custom) == 3
    f.write_text("rules: [{}]")
    with pytest.raises(RulesError, match=r"--metrics-rules .*rules\.yaml: rules\[0\]\.seriesQuery"):
        load_source("prometheus=http://p:9090", str(f))
    with pytest.raises(RulesError, match="needs --metrics-provider prometheus=URL"):
        load_source("builtin", str(f))
    with pytest.raises(RulesError, match="not an http"):
        load_source("prometheus=p:9090")
    with pytest.raises(RulesError, match="neither"):
        load_source("graphite=http://g")
    with pytest.raises(RulesError, match="No such file"):
        load_source("prometheus=http://p:9090", str(tmp_path / "missing.yaml"))


@pytest.mark.parametrize("flags,message", [
    (["--metrics-provider", "prometheus=localhost:9090"], "not an http(s) URL"),
    (["--metrics-rules", "rules.yaml"], "--metrics-rules needs --metrics-provider prometheus=URL"),
])
def test_nanokube_up_refuses_bad_metrics_flags_before_starting(tmp_path, capsys, flags, message):
    assert main(["up", "--data-dir", str(tmp_path / "data"), *flags]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "data").exists()
