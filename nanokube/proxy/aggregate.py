"""Several proxiers' metrics as one exposition: each sample gains a `node`
label and families merge by name, so the in-process proxiers of `up
--runtime process` can share the API server's `/metrics` without duplicate
metric names."""

from __future__ import annotations

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import Metric


class NodeLabelledMetrics:
    """A collector (anything with `collect()` serves `generate_latest`)."""

    def __init__(self, registries: dict[str, CollectorRegistry]):
        self.registries = registries

    def collect(self):
        families: dict[str, Metric] = {}
        for node, registry in self.registries.items():
            for fam in registry.collect():
                out = families.get(fam.name)
                if out is None:
                    out = families[fam.name] = Metric(fam.name, fam.documentation, fam.type, fam.unit)
                out.samples += [s._replace(labels={"node": node, **s.labels}) for s in fam.samples]
        return list(families.values())
