"""Rules that map metric API names to PromQL, a subset of prometheus-adapter's
configuration file (its `rules` and `externalRules`; `resourceRules` are not
read: resource metrics stay with the built-in provider).

    rules:              # custom.metrics.k8s.io: HPA Pods and Object metrics
    - seriesQuery: 'http_requests_total{namespace!="",pod!=""}'
      seriesFilters: [{isNot: "^.*_bucket$"}]
      resources:
        overrides:      # Prometheus label -> Kubernetes resource
          namespace: {resource: namespace}
          pod: {resource: pod}
        # or `template: "<<.Resource>>"`: the label is named after the
        # resource's singular name (<<.Group>> is its API group)
      name: {matches: "^(.*)_total$", as: "${1}_per_second"}
      metricsQuery: 'sum(rate(<<.Series>>{<<.LabelMatchers>>}[2m])) by (<<.GroupBy>>)'
    externalRules:      # external.metrics.k8s.io: HPA External metrics
    - seriesQuery: '{__name__=~"^.*_queue_length$"}'
      resources: {overrides: {namespace: {resource: namespace}}}
      metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (queue)'

Discovery: a seriesQuery that names one metric (`name{...}` or
`{__name__="name",...}`) is that series; any other is asked of Prometheus
(the metric names its series match) each time a metric is looked up.
`seriesFilters` keep (`is`) or drop (`isNot`) series names by regex.
Naming: `name.matches` (default `.*`) must match the series name, and `as`
(Go regexp expansion, `$1`/`${1}`; default `$1` with one capture group,
else `$0`) gives the API name.
Querying: `<<.Series>>` is the series name; `<<.LabelMatchers>>` the
comma-separated PromQL matchers - for custom metrics the namespace and the
objects' names (`pod=~"a|b"`), for external metrics the HPA's label selector
plus the namespace when the rule maps a `namespace` label (unless
`resources.namespaced: false`); `<<.GroupBy>>` the object label for custom
metrics (the namespace label, if any, for external ones). Other template
fields are refused when the file is loaded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..machinery import configfile
from ..machinery.configfile import ANY, Map, Struct
from ..machinery.errors import APIError
from ..machinery.selectors import parse_label_selector

_PLACEHOLDER = re.compile(r"<<\s*\.(\w+)\s*>>")
_FIELDS = {"Series", "LabelMatchers", "GroupBy"}
_BARE_NAME = re.compile(r"^\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\{.*\})?\s*$", re.DOTALL)
_NAME_MATCHER = re.compile(r'__name__\s*=\s*"((?:[^"\\]|\\.)*)"')
_RE2_SPECIAL = re.compile(r"[\\.+*?()|\[\]{}^$]")
_GO_EXPAND = re.compile(r"\$(?:\{(\w+)\}|(\w+)|\$)")


class RulesError(ValueError):
    """The rules file cannot be used; the message says where."""


@dataclass(frozen=True)
class Rule:
    series_query: str
    metrics_query: str
    matches: re.Pattern
    name_as: str
    filters: tuple[tuple[bool, re.Pattern], ...]  # (keep when it matches, pattern)
    overrides: tuple[tuple[str, str, str], ...]  # (label, group, resource)
    template: str
    namespaced: bool

    @property
    def static_series(self) -> str | None:
        """The one series the seriesQuery names, or None when it must be discovered."""
        if m := _BARE_NAME.match(self.series_query):
            return m.group(1)
        if m := _NAME_MATCHER.search(self.series_query):
            return m.group(1)
        return None

    def exposed_name(self, series: str) -> str | None:
        """The API name of a series, or None when filters or `matches` reject it."""
        for keep, pattern in self.filters:
            if bool(pattern.search(series)) != keep:
                return None
        m = self.matches.search(series)
        return _go_expand(m, self.name_as) if m else None

    def label_for(self, group: str, resource: str, singular: str) -> str | None:
        """The Prometheus label naming objects of a resource, or None when the rule has none."""
        for label, g, r in self.overrides:
            if g == group and r in (resource, singular):
                return label
        if self.template:
            return self.template.replace("<<.Group>>", group).replace("<<.Resource>>", singular)
        return None

    @property
    def namespace_label(self) -> str | None:
        return self.label_for("", "namespaces", "namespace") if self.namespaced else None

    def render(self, series: str, matchers: list[str], group_by: list[str]) -> str:
        values = {"Series": series, "LabelMatchers": ",".join(matchers), "GroupBy": ",".join(group_by)}
        return _PLACEHOLDER.sub(lambda m: values[m.group(1)], self.metrics_query)


@dataclass(frozen=True)
class Rules:
    custom: tuple[Rule, ...] = ()
    external: tuple[Rule, ...] = ()


#: without a rules file: every external metric is the Prometheus series of the
#: same name, filtered by the HPA's selector, in whichever namespace it is asked
DEFAULT_RULES = """
externalRules:
- seriesQuery: '{__name__=~".+"}'
  metricsQuery: '<<.Series>>{<<.LabelMatchers>>}'
"""


_MAPPING = Struct("config.ResourceMapping", {"template": str, "namespaced": bool,
                                              "overrides": Map(Struct("config.GroupResource",
                                                                      {"group": str, "resource": str}))})
_RULE = Struct("config.DiscoveryRule", {
    "seriesQuery": str, "metricsQuery": str, "resources": _MAPPING,
    "seriesFilters": [Struct("config.RegexFilter", {"is": str, "isNot": str})],
    "name": Struct("config.NameMapping", {"matches": str, "as": str})})
_RESOURCE_RULE = Struct("config.ResourceRule", {"containerQuery": str, "nodeQuery": str, "resources": _MAPPING,
                                               "containerLabel": str})
#: prometheus-adapter's config.MetricsDiscoveryConfig, as go-yaml's UnmarshalStrict reads it
_SCHEMA = Struct("config.MetricsDiscoveryConfig", {
    "rules": [_RULE], "externalRules": [_RULE],
    "resourceRules": Struct("config.ResourceRules", {"cpu": _RESOURCE_RULE, "memory": _RESOURCE_RULE, "window": ANY})})


def load_rules(text: str) -> Rules:
    """A rules file, decoded as prometheus-adapter's config loader does (go-yaml's strict
    unmarshal, its errors in go-yaml's words), then checked for what the rules need."""
    try:
        doc = configfile.unmarshal_strict(text, _SCHEMA) or {}
    except configfile.DecodeError as e:
        raise RulesError(f"unable to parse metrics discovery config: {e}") from None
    return Rules(custom=_rule_list(doc, "rules"), external=_rule_list(doc, "externalRules"))


def _rule_list(doc: dict, key: str) -> tuple[Rule, ...]:
    return tuple(_rule(item or {}, f"{key}[{i}]") for i, item in enumerate(doc.get(key) or []))


def _rule(item: dict, where: str) -> Rule:
    series, query = item.get("seriesQuery"), item.get("metricsQuery")
    if not isinstance(series, str) or not series.strip():
        raise RulesError(f"{where}.seriesQuery: required")
    if not isinstance(query, str) or not query.strip():
        raise RulesError(f"{where}.metricsQuery: required")
    bad = {f for f in _PLACEHOLDER.findall(query) if f not in _FIELDS}
    if bad:
        raise RulesError(f"{where}.metricsQuery: unsupported template field .{min(bad)} "
                         f"(supported: {', '.join(sorted(_FIELDS))})")
    name = item.get("name") or {}
    res = item.get("resources") or {}
    matches = _regex(name.get("matches") or ".*", f"{where}.name.matches")
    name_as = name.get("as") or ("$1" if matches.groups == 1 else "$0")
    filters = []
    for i, f in enumerate(item.get("seriesFilters") or []):
        if not f or len(f) != 1:
            raise RulesError(f"{where}.seriesFilters[{i}]: must be {{is: REGEX}} or {{isNot: REGEX}}")
        (kind, pattern), = f.items()
        filters.append((kind == "is", _regex(pattern, f"{where}.seriesFilters[{i}]")))
    overrides = []
    for label, target in (res.get("overrides") or {}).items():
        if not (target or {}).get("resource"):
            raise RulesError(f"{where}.resources.overrides.{label}: needs `resource`")
        overrides.append((str(label), str(target.get("group") or ""), str(target["resource"]).lower()))
    return Rule(series, query, matches, str(name_as), tuple(filters), tuple(overrides),
                str(res.get("template") or ""), res.get("namespaced", True) is not False)


def _regex(pattern, where: str) -> re.Pattern:
    try:
        return re.compile(str(pattern))
    except re.error as e:
        raise RulesError(f"{where}: invalid regex {pattern!r}: {e}") from None


def _go_expand(m: re.Match, template: str) -> str:
    """Go's Regexp.Expand: `$name` takes the longest word, `${name}` is
    explicit, `$$` is a dollar; unknown groups expand to nothing."""
    def one(x: re.Match) -> str:
        ref = x.group(1) or x.group(2)
        if ref is None:
            return "$"
        try:
            return m.group(int(ref) if ref.isdigit() else ref) or ""
        except IndexError:
            return ""
    return _GO_EXPAND.sub(one, template)


def quote(value: str) -> str:
    """A PromQL string literal."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def alternation(values) -> str:
    """An RE2 pattern matching exactly these values (a label's `=~` matcher)."""
    return quote("|".join(_RE2_SPECIAL.sub(r"\\\g<0>", v) for v in sorted(values)))


def selector_matchers(selector: str) -> list[str]:
    """A Kubernetes label selector as PromQL label matchers (a missing label
    is the empty string to Prometheus)."""
    try:
        reqs = parse_label_selector(selector) if selector else []
    except APIError as e:
        raise RulesError(e.message) from None
    out = []
    for key, op, values in reqs:
        if op == "=":
            out.append(f"{key}={quote(values[0])}")
        elif op == "!=":
            out.append(f"{key}!={quote(values[0])}")
        elif op == "in":
            out.append(f"{key}=~{alternation(values)}")
        elif op == "notin":
            out.append(f"{key}!~{alternation(values)}")
        elif op == "exists":
            out.append(f'{key}!=""')
        else:
            out.append(f'{key}=""')
    return out
