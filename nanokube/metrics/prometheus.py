"""Metrics answered by a Prometheus server, for users who have one, in the
spirit of prometheus-adapter: `nanokube up --metrics-provider
prometheus=http://HOST:9090 [--metrics-rules FILE]`.

A rules file (format in `rules.py`) maps external metrics and custom Pods
and Object metrics to PromQL; without one, an external metric is the
Prometheus series of the same name. The built-in provider keeps answering
whatever no rule covers (resource metrics always). Each lookup asks
Prometheus's HTTP API (`/api/v1/label/__name__/values` to discover series
for rules that do not name one, `/api/v1/query` for the value) with a
timeout; an unreachable server, an error answer, a non-vector result or a
sample that is not a finite number makes the metric unavailable, so the HPA
does not scale on it. While Prometheus cannot be asked which series exist,
metrics that a discovering rule might cover are unavailable too, rather
than read from the built-in store.
"""

from __future__ import annotations

import math
from fractions import Fraction
from urllib.parse import urlsplit

import aiohttp
import orjson

from .provider import ExternalSample, MetricsUnavailable
from .rules import DEFAULT_RULES, Rule, Rules, RulesError, alternation, load_rules, quote, selector_matchers

DEFAULT_TIMEOUT = 5.0


class PrometheusMetrics:
    """A metric source for MetricsProvider: each lookup returns None when no
    rule covers the metric, else its values (or raises MetricsUnavailable)."""

    def __init__(self, url: str, rules: Rules, timeout: float = DEFAULT_TIMEOUT):
        self.url = url.rstrip("/")
        self.rules = rules
        self.timeout = timeout

    async def external_metric(self, namespace: str, metric: str, selector: str = "") -> list[ExternalSample] | None:
        """The series of an external metric that match an HPA's label selector
        (and its namespace, when the rule maps a namespace label)."""
        found = await self._find(self.rules.external, metric)
        if found is None:
            return None
        rule, series = found
        try:
            matchers = selector_matchers(selector)
        except RulesError as e:
            raise MetricsUnavailable(str(e)) from None
        ns = rule.namespace_label
        if ns:
            matchers.append(f"{ns}={quote(namespace)}")
        return [ExternalSample(labels, v) for labels, v in await self._vector(rule.render(series, matchers, [ns] if ns else []))]

    async def object_values(self, namespace: str | None, res, names: list[str], metric: str) -> dict[str, int] | None:
        """Milli-values of a custom metric for the named objects of one
        resource (a registry Resource) that Prometheus has samples for."""
        found = await self._find(self.rules.custom, metric, lambda r: r.label_for(res.group, res.plural, res.singular))
        if found is None:
            return None
        if not names:
            return {}
        rule, series = found
        label = rule.label_for(res.group, res.plural, res.singular)
        matchers = [f"{label}=~{alternation(names)}"]
        if namespace and res.namespaced and (ns := rule.namespace_label):
            matchers.insert(0, f"{ns}={quote(namespace)}")
        wanted = set(names)
        return {labels[label]: v for labels, v in await self._vector(rule.render(series, matchers, [label]))
                if labels.get(label) in wanted}

    async def _find(self, rules: tuple[Rule, ...], metric: str, applies=lambda rule: True) -> tuple[Rule, str] | None:
        """The first rule exposing `metric`, with the series it comes from."""
        for rule in rules:
            if not applies(rule):
                continue
            static = rule.static_series
            for series in [static] if static else await self._series_names(rule.series_query):
                if rule.exposed_name(series) == metric:
                    return rule, series
        return None

    async def _series_names(self, series_query: str) -> list[str]:
        names = await self._get("/api/v1/label/__name__/values", {"match[]": series_query})
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise MetricsUnavailable("Prometheus returned a malformed list of series names")
        return names

    async def _vector(self, query: str) -> list[tuple[dict[str, str], int]]:
        """(labels without __name__, milli-value) of each series of an instant query."""
        data = await self._get("/api/v1/query", {"query": query})
        if not isinstance(data, dict) or data.get("resultType") != "vector" or not isinstance(data.get("result"), list):
            got = data.get("resultType") if isinstance(data, dict) else type(data).__name__
            raise MetricsUnavailable(f"Prometheus query {query!r} returned {got}, not a vector")
        out = []
        for sample in data["result"]:
            try:
                labels = {str(k): str(v) for k, v in sample["metric"].items() if k != "__name__"}
                out.append((labels, math.ceil(Fraction(sample["value"][1]) * 1000)))
            except (KeyError, IndexError, TypeError, ValueError, AttributeError):
                raise MetricsUnavailable(f"Prometheus returned a malformed sample for {query!r}") from None
        return out

    async def _get(self, path: str, params: dict[str, str]):
        """The `data` of a successful Prometheus API answer."""
        try:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout)) as session, \
                    session.get(self.url + path, params=params) as resp:
                body = await resp.read()
            doc = orjson.loads(body)
        except (TimeoutError, aiohttp.ClientError) as e:
            raise MetricsUnavailable(f"unable to fetch metrics from Prometheus at {self.url}: "
                                     f"{str(e) or type(e).__name__}") from None
        except orjson.JSONDecodeError:
            raise MetricsUnavailable(f"Prometheus at {self.url} answered {path} with something other than JSON") from None
        if not isinstance(doc, dict) or doc.get("status") != "success":
            detail = f"{doc.get('errorType')}: {doc.get('error')}" if isinstance(doc, dict) else "not an API response"
            raise MetricsUnavailable(f"Prometheus at {self.url} refused {path}: {detail}")
        return doc.get("data")


def load_source(spec: str, rules_path: str | None = None, timeout: float = DEFAULT_TIMEOUT) -> PrometheusMetrics | None:
    """The source `--metrics-provider` and `--metrics-rules` ask for: None
    for `builtin`, else Prometheus. RulesError says what is wrong."""
    kind, _, url = spec.partition("=")
    if kind == "builtin" and not url:
        if rules_path:
            raise RulesError("--metrics-rules needs --metrics-provider prometheus=URL")
        return None
    if kind != "prometheus":
        raise RulesError(f"--metrics-provider: {spec!r} is neither 'builtin' nor 'prometheus=URL'")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise RulesError(f"--metrics-provider: {url!r} is not an http(s) URL of a Prometheus server")
    if rules_path is None:
        return PrometheusMetrics(url, load_rules(DEFAULT_RULES), timeout)
    try:
        with open(rules_path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise RulesError(f"--metrics-rules: {e.strerror}: {rules_path}") from None
    try:
        return PrometheusMetrics(url, load_rules(text), timeout)
    except RulesError as e:
        raise RulesError(f"--metrics-rules {rules_path}: {e}") from None
