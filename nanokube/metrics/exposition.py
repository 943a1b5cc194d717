"""The text format every Kubernetes component serves at /metrics: client_golang's (expfmt's text
format, version 0.0.4), written from prometheus_client collectors. Every /metrics nanokube renders
from collectors is written here (the kubelet's hand-written endpoints take their numbers from
go_float), so none differs from upstream where prometheus_client's generate_latest does:

- it adds OpenMetrics' `_created` series, which client_golang's text format has not;
- it writes numbers as Python's repr, "2.0" and "1000000.0" where Go writes "2" and "1e+06", and
  a histogram's bounds alike: le="1.0" is another series than upstream's le="1" to a Prometheus
  before 3.0 (which does not normalise `le`), so a query copied from upstream's dashboards misses it;
- it sorts `le` among the other labels, where client_golang writes it last, and writes families in
  registration order and empty vectors' HELP and TYPE, where client_golang's Gather sorts families
  by name, their series by label values, and leaves out a family without series.

Nothing here imports prometheus_client: a process pays for it only where it keeps metrics.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterable

#: the text format as client_golang (1.20+, prometheus/common's expfmt.Negotiate) names it to a scrape
#: that asks for no escaping of names: its default scheme, underscores (every name here is a legacy one,
#: which no scheme changes, so the body is the same under any)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8; escaping=underscores"
_ESCAPINGS = frozenset(("allow-utf-8", "underscores", "dots", "values"))


def content_type(accept: str | None) -> str:
    """The Content-Type of a /metrics answer to `accept`, as expfmt.Negotiate picks it: the text format
    (never OpenMetrics or protobuf, which component-base does not offer), with the escaping scheme the
    last known `escaping` parameter of the clauses it read up to the text/plain one names, in the
    order of their quality (Prometheus 3 asks for allow-utf-8, Prometheus 2 and curl for none)."""
    if not accept or "escaping=" not in accept:  # the common scrape, without the parse
        return CONTENT_TYPE
    clauses = []
    for i, clause in enumerate(accept.split(",")):
        kind, *params = (p.strip() for p in clause.split(";"))
        values = dict(p.partition("=")[::2] for p in params)
        try:
            q = float(values.get("q", 1))
        except ValueError:
            q = 0.0
        clauses.append((-q, i, kind.lower(), values))
    escaping = "underscores"
    for _, _, kind, values in sorted(clauses):
        if values.get("escaping") in _ESCAPINGS:
            escaping = values["escaping"]
        if kind == "text/plain" and values.get("version", "0.0.4") == "0.0.4":
            break
    return f"text/plain; version=0.0.4; charset=utf-8; escaping={escaping}"

def gzip_preferred(accept_encodings: Iterable[str]) -> bool:
    """Whether promhttp's handler answers gzipped to these Accept-Encoding headers: of its offers,
    identity and gzip in that order, the one an Accept-Encoding coding (or `*`) gives the highest
    quality, the first on a tie (gddo's NegotiateContentEncoding), and gzip only at a quality
    above 0 (a 0 falls back to identity). Whatever the answer's size: promhttp has no threshold."""
    specs = []
    for coding in accept_encodings:
        for clause in coding.split(","):  # (ParseAccept stops at what it cannot read)
            value, *params = (p.strip() for p in clause.split(";"))
            if not value:
                break
            q = 1.0
            if params:
                key, _, number = params[0].partition("=")
                try:
                    q = float(number) if key == "q" and 0 <= float(number) <= 1 else -1
                except ValueError:
                    q = -1
                if q < 0:
                    break
            specs.append((value, q))
    best, best_q = "identity", -1.0
    for offer in ("identity", "gzip"):
        for value, q in specs:
            if q > best_q and value in ("*", offer):
                best, best_q = offer, q
    return best == "gzip" and best_q > 0


def gzipped(body: bytes) -> bytes:
    """`body` gzipped at gzip's default level, as promhttp's pooled gzip.Writer writes it."""
    z = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    return z.compress(body) + z.flush()


def scrape_headers(accept: str | None, gzip: bool) -> list[tuple[str, str]]:
    """A metrics answer's headers as promhttp writes them: its Content-Type (`content_type`),
    `Vary: Accept` and `Vary: Accept-Encoding` whatever was negotiated, `Content-Encoding: gzip`
    where the body is gzipped."""
    return [("Content-Type", content_type(accept)), ("Vary", "Accept"), ("Vary", "Accept-Encoding"),
            *([("Content-Encoding", "gzip")] if gzip else [])]


#: OpenMetrics' type names as the text format has them (prometheus_client's generate_latest's mapping)
_TYPES = {"unknown": "untyped", "info": "gauge", "stateset": "gauge", "gaugehistogram": "histogram"}
#: the label client_golang writes last, after the series' own, by the type of the family
_BOUND = {"histogram": "le", "summary": "quantile"}
#: a series' samples in client_golang's order: buckets or quantiles, then `_sum`, then `_count`
_RANK = {"_sum": 1, "_count": 2}


def go_float(value: float) -> str:
    """A number as client_golang writes it (strconv.FormatFloat(v, 'g', -1, 64)): the shortest
    digits that read back the same, in exponent form below 1e-4 and from 1e+06 up."""
    value = float(value)
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if math.isnan(value):
        return "NaN"
    if value.is_integer() and abs(value) < 1e6:
        return str(int(value))
    sign, text = ("-", repr(-value)) if value < 0 else ("", repr(value))
    mantissa, _, exponent = text.partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = (whole + fraction).lstrip("0")
    # the power of ten of the first significant digit: repr's exponent, moved by where its point is
    point = int(exponent or 0) + len(whole) - (len(whole + fraction) - len(digits))
    digits = digits.rstrip("0")
    power = point - 1
    if power < -4 or power >= 6:
        tail = f".{digits[1:]}" if len(digits) > 1 else ""
        return f"{sign}{digits[0]}{tail}e{'-' if power < 0 else '+'}{abs(power):02d}"
    if point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    whole, fraction = digits[:point].ljust(point, "0"), digits[point:]
    return f"{sign}{whole}.{fraction}" if fraction else f"{sign}{whole}"


def _label_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def render(*collectors) -> bytes:
    """The exposition of `collectors` (CollectorRegistry or anything with `collect()`) as one
    registry's: families of the same name from several are one family."""
    families: dict[str, tuple[str, str, dict[tuple, list[tuple[int, str]]]]] = {}
    for collector in collectors:
        for metric in collector.collect():
            kind = _TYPES.get(metric.type, metric.type)
            name = metric.name
            if metric.type == "info":
                name += "_info"
            elif metric.type == "counter" and not (metric.samples and metric.samples[0].name == name):
                name += "_total"  # prometheus_client's suffix; a counter whose samples carry its bare name keeps it
            family = families.get(name)
            if family is None:
                family = families[name] = (metric.documentation, kind, {})
            series, bound, created = family[2], _BOUND.get(kind), metric.name + "_created"
            for sample in metric.samples:
                if sample.name == created:
                    continue
                labels = sample.labels
                extra = labels.get(bound) if bound else None
                key = tuple(sorted((k, v) for k, v in labels.items() if k != bound or extra is None))
                pairs = [f'{k}="{_label_value(v)}"' for k, v in key]
                if extra is not None:  # the bound last, as a number
                    pairs.append(f'{bound}="{go_float(float(extra))}"')
                line = f"{sample.name}{{{','.join(pairs)}}}" if pairs else sample.name
                line = f"{line} {go_float(sample.value)}"
                if sample.timestamp is not None:
                    line = f"{line} {int(float(sample.timestamp) * 1000)}"
                rank = _RANK.get(sample.name[len(metric.name):], 0) if bound else 0
                series.setdefault(key, []).append((rank, line))
    out = []
    for name in sorted(families):
        documentation, kind, series = families[name]
        if not series:
            continue
        out.append(f"# HELP {name} {_help(documentation)}")
        out.append(f"# TYPE {name} {kind}")
        for key in sorted(series):
            out += [line for _, line in sorted(series[key], key=lambda ranked: ranked[0])]
    return ("\n".join(out) + "\n").encode() if out else b""
