"""coordination.k8s.io: Leases (node heartbeats, leader election) and LeaseCandidates (coordinated leader election)."""

from __future__ import annotations

from .base import AGE, Column, Resource, Strategy, register
from ..machinery.validation import FieldError, immutable, invalid, not_supported, required


class LeaseStrategy(Strategy):
    allow_create_on_update = True
    columns = [
        Column("Name", "string", lambda o: o["metadata"]["name"], format="name"),
        Column("Holder", "string", lambda o: (o.get("spec") or {}).get("holderIdentity", "")),
        Column("Age", "string", AGE),
    ]

    def validate(self, obj):
        errs: list[FieldError] = []
        spec = obj.get("spec") or {}
        d = spec.get("leaseDurationSeconds")
        if d is not None and d <= 0:
            errs.append(invalid("spec.leaseDurationSeconds", d, "must be greater than 0"))
        t = spec.get("leaseTransitions")
        if t is not None and t < 0:
            errs.append(invalid("spec.leaseTransitions", t, "must be greater than or equal to 0"))
        return errs


register(Resource("coordination.k8s.io", "leases", "Lease", ["v1"], namespaced=True, strategy=LeaseStrategy()))


_STRATEGIES = ("OldestEmulationVersion",)


def _semver(v: str) -> bool:
    parts = v.split(".")
    return len(parts) == 3 and all(p.isdigit() for p in parts)


class LeaseCandidateStrategy(Strategy):
    """LeaseCandidate (coordinated leader election): a component offers itself
    for the Lease `spec.leaseName` with its versions and preferred strategy."""

    allow_create_on_update = True
    columns = [
        Column("Name", "string", lambda o: o["metadata"]["name"], format="name"),
        Column("LeaseName", "string", lambda o: (o.get("spec") or {}).get("leaseName", "")),
        Column("BinaryVersion", "string", lambda o: (o.get("spec") or {}).get("binaryVersion", "")),
        Column("EmulationVersion", "string", lambda o: (o.get("spec") or {}).get("emulationVersion", "")),
        Column("Age", "string", AGE),
    ]

    def validate(self, obj):
        spec = obj.get("spec") or {}
        errs: list[FieldError] = []
        if not spec.get("leaseName"):
            errs.append(required("spec.leaseName", ""))
        binary = spec.get("binaryVersion", "")
        if not binary:
            errs.append(required("spec.binaryVersion", "must be non-empty"))
        elif not _semver(binary):
            errs.append(invalid("spec.binaryVersion", binary, "must be a valid semantic version"))
        emulation = spec.get("emulationVersion", "")
        if emulation and not _semver(emulation):
            errs.append(invalid("spec.emulationVersion", emulation, "must be a valid semantic version"))
        strategy = spec.get("strategy", "")
        if not strategy:
            errs.append(required("spec.strategy", ""))
        elif "/" not in strategy and strategy not in _STRATEGIES:
            errs.append(not_supported("spec.strategy", strategy, _STRATEGIES))
        return errs

    def validate_update(self, new, old):
        errs = self.validate(new)
        if (new.get("spec") or {}).get("leaseName") != (old.get("spec") or {}).get("leaseName"):
            errs.append(immutable("spec.leaseName", (new.get("spec") or {}).get("leaseName")))
        return errs


register(Resource("coordination.k8s.io", "leasecandidates", "LeaseCandidate", ["v1beta1", "v1alpha2"], namespaced=True,
                  strategy=LeaseCandidateStrategy()))
