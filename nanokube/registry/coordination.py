"""coordination.k8s.io: Leases (node heartbeats, leader election) and LeaseCandidates (coordinated leader election)."""

from __future__ import annotations

import re

from .base import AGE, Column, Resource, Strategy, register
from ..machinery.validation import (
    FieldError,
    config_key,
    forbidden,
    immutable,
    invalid,
    not_supported,
    qualified_name,
    required,
)


class LeaseStrategy(Strategy):
    allow_create_on_update = True
    track_generation = False  # leaseStrategy neither sets nor bumps it
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
        strategy = spec.get("strategy")
        if strategy is not None:
            errs += _strategy(strategy, "spec.strategy")
        if spec.get("preferredHolder") and not strategy:
            errs.append(forbidden("spec.preferredHolder", "may only be specified if `strategy` is defined"))
        return errs


register(Resource("coordination.k8s.io", "leases", "Lease", ["v1"], namespaced=True, strategy=LeaseStrategy()))


_STRATEGIES = ("OldestEmulationVersion",)
_ZERO = (0, 0, 0, 1, ())
_NUMBER = re.compile(r"(?:0|[1-9][0-9]*)\Z")
_IDENT = re.compile(r"[0-9A-Za-z-]+\Z")


def _semver(v: str) -> tuple | None:
    """blang/semver's Parse (MAJOR.MINOR.PATCH[-pre][+build], no leading zeros) as a key that orders
    versions as its Compare does (a prerelease before its release; numeric identifiers first, by
    value), or None where Parse fails."""
    core, _, build = v.partition("+")
    if "+" in v and not all(_IDENT.match(b) for b in build.split(".")):
        return None
    core, dash, pre = core.partition("-")
    nums = core.split(".")
    if len(nums) != 3 or not all(_NUMBER.match(n) for n in nums):
        return None
    ids = pre.split(".") if dash else []
    if not all(_IDENT.match(i) and (not i.isdigit() or _NUMBER.match(i)) for i in ids):
        return None
    key = tuple((0, int(i), "") if i.isdigit() else (1, 0, i) for i in ids)
    return (*map(int, nums), 1 if not ids else 0, key)


def _strategy(strategy: str, path: str) -> list[FieldError]:
    """ValidateCoordinatedLeaseStrategy (whose path is its caller's plus .strategy: spec.strategy.strategy)."""
    if "/" not in strategy:
        return [] if strategy in _STRATEGIES else [not_supported(f"{path}.strategy", strategy, _STRATEGIES)]
    return [invalid(f"{path}.strategy", strategy, m) for m in qualified_name(strategy)]


class LeaseCandidateStrategy(Strategy):
    """LeaseCandidate (coordinated leader election): a component offers itself
    for the Lease `spec.leaseName` with its versions and preferred strategy."""

    track_generation = False  # as Lease's, its strategy neither sets nor bumps it
    allow_create_on_update = True
    name_validator = staticmethod(config_key)  # ValidLeaseCandidateName: IsConfigMapKey
    columns = [
        Column("Name", "string", lambda o: o["metadata"]["name"], format="name"),
        Column("LeaseName", "string", lambda o: (o.get("spec") or {}).get("leaseName", "")),
        Column("BinaryVersion", "string", lambda o: (o.get("spec") or {}).get("binaryVersion", "")),
        Column("EmulationVersion", "string", lambda o: (o.get("spec") or {}).get("emulationVersion", "")),
        Column("Age", "string", AGE),
    ]

    def validate(self, obj):
        """ValidateLeaseCandidateSpec: a version that does not parse counts as 0.0.0."""
        spec = obj.get("spec") or {}
        errs: list[FieldError] = []
        if not spec.get("leaseName"):
            errs.append(required("spec.leaseName", ""))
        emulation, binary = spec.get("emulationVersion", ""), spec.get("binaryVersion", "")
        ev = _semver(emulation) if emulation else _ZERO
        if ev is None:
            errs.append(invalid("spec.emulationVersion", emulation, "must be a valid semantic version"))
        bv = _semver(binary) if binary else _ZERO
        if not binary:
            errs.append(required("spec.binaryVersion", ""))
        elif bv is None:
            errs.append(invalid("spec.binaryVersion", binary, "must be a valid semantic version"))
        ev, bv = ev or _ZERO, bv or _ZERO
        if binary and emulation and bv < ev:
            errs.append(invalid("spec.binaryVersion", binary, "must be greater than or equal to `emulationVersion`"))
        strategy = spec.get("strategy", "")
        if not strategy:
            errs.append(required("spec.strategy", ""))
        else:
            if strategy == "OldestEmulationVersion" and ev == _ZERO:
                errs.append(required("spec.emulationVersion", "must be specified when `strategy` is 'OldestEmulationVersion'"))
            errs += _strategy(strategy, "spec.strategy")
        return errs

    def validate_update(self, new, old):
        errs = self.validate(new)
        if (new.get("spec") or {}).get("leaseName") != (old.get("spec") or {}).get("leaseName"):
            errs.append(immutable("spec.leaseName", (new.get("spec") or {}).get("leaseName")))
        return errs


register(Resource("coordination.k8s.io", "leasecandidates", "LeaseCandidate", ["v1beta1", "v1alpha2"], namespaced=True,
                  strategy=LeaseCandidateStrategy()))
