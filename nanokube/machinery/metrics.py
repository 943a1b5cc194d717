"""Prometheus metric families kept as plain numbers, exposed as prometheus_client's own (the API
server's and the scheduler's hot paths update them)."""

from __future__ import annotations

from bisect import bisect_left

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import Metric
from prometheus_client.utils import floatToGoString


def exponential_buckets(start: float, factor: float, count: int) -> tuple[float, ...]:
    """client_golang's ExponentialBuckets, each bound the one before times `factor` as Go computes
    it: the bounds are upstream's to the last bit, so `le` reads as upstream's does (0.00001 times
    1.5 twice is 2.2500000000000005e-05, not 0.00001 * 2.25's 2.25e-05)."""
    bounds = [float(start)]
    for _ in range(count - 1):
        bounds.append(bounds[-1] * factor)
    return tuple(bounds)


class _Value:
    """One labelled series of a Family: plain numbers the event loop adds to (prometheus_client's
    children take a lock and run two checks per `inc` and a Python loop over buckets per `observe`)."""

    __slots__ = ("value", "buckets", "bounds")

    def __init__(self, bounds: tuple[float, ...] | None) -> None:
        self.value = 0.0  # a counter's or gauge's value, a histogram's sum
        self.bounds = bounds
        self.buckets = [0.0] * (len(bounds) + 1) if bounds is not None else None

    def inc(self, amount: float = 1) -> None:
        self.value += amount

    def dec(self, amount: float = 1) -> None:
        self.value -= amount

    def set(self, value: float) -> None:
        self.value = float(value)

    def observe(self, amount: float) -> None:
        self.value += amount
        self.buckets[bisect_left(self.bounds, amount)] += 1  # the first bucket whose bound is >= amount


class Family:
    """A labelled counter, gauge or histogram whose samples and exposition are those of
    prometheus_client's Counter, Gauge and Histogram (`_total`, cumulative `le`
    buckets ending in +Inf), kept as plain numbers: the API server updates several per request, the scheduler
    several per attempt."""

    def __init__(self, kind: str, name: str, documentation: str, labelnames: list[str], registry: CollectorRegistry,
                 buckets: tuple[float, ...] | None = None, total: bool = True) -> None:
        """`total=False`: a counter exposed under its bare name, as client_golang's counters whose
        upstream name has no `_total` (endpoint_slice_controller_changes)."""
        self.kind = kind
        self.name = name[:-6] if kind == "counter" and name.endswith("_total") else name
        self._counter_sample = self.name + "_total" if total else self.name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self.bounds = tuple(float(b) for b in buckets) if kind == "histogram" else None
        self._series: dict[tuple[str, ...], _Value] = {}
        #: after a reset, series not updated since are left out of the exposition
        self._hide_unused = False
        if not self.labelnames:  # an unlabelled metric is exposed from the start, as prometheus_client's
            self.labels()
        registry.register(self)

    def labels(self, *values: str) -> _Value:
        series = self._series.get(values)
        if series is None:
            if len(values) != len(self.labelnames):
                raise ValueError(f"{self.name}: expected {len(self.labelnames)} label values, got {len(values)}")
            key = tuple(map(str, values))
            series = self._series.get(key)
            if series is None:
                series = self._series[key] = _Value(self.bounds)
        return series

    def remove(self, *values: str) -> None:
        """A series left out of the exposition from now on (a vector's Delete)."""
        self._series.pop(tuple(map(str, values)), None)

    def reset(self) -> None:
        """component-base's Reset, which a DELETE of a HandlerWithReset's /metrics runs: a vector's
        series start from nothing and are not exposed until updated again (they are zeroed in place,
        as callers may hold one), an unlabelled counter goes back to 0; an unlabelled histogram or
        gauge has no Reset upstream and keeps its numbers."""
        if not self.labelnames:
            if self.kind == "counter":
                self._series[()].__init__(None)
            return
        for series in self._series.values():
            series.__init__(self.bounds)
        self._hide_unused = True

    def describe(self) -> list[Metric]:
        return [Metric(self.name, self.documentation, self.kind)]

    def collect(self) -> list[Metric]:
        m = Metric(self.name, self.documentation, self.kind)
        name = self.name
        for values, s in list(self._series.items()):
            if self._hide_unused and not s.value and not (s.buckets and any(s.buckets)):
                continue
            labels = dict(zip(self.labelnames, values))
            if self.kind == "counter":
                m.add_sample(self._counter_sample, labels, s.value)
            elif self.kind == "gauge":
                m.add_sample(name, labels, s.value)
            else:
                total = 0.0
                for bound, count in zip((*self.bounds, float("inf")), s.buckets):
                    total += count
                    m.add_sample(name + "_bucket", {**labels, "le": floatToGoString(bound)}, total)
                m.add_sample(name + "_count", labels, total)
                m.add_sample(name + "_sum", labels, s.value)
        return [m]
