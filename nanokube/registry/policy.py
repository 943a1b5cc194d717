"""policy/v1: PodDisruptionBudgets."""

from __future__ import annotations

from .apps import (
    age_column,
    name_column,
    nonnegative,
    not_more_than_100_percent,
    validate_positive_int_or_percent,
)
from .base import Column, Obj, Resource, Strategy, register
from ..machinery.gofmt import Struct
from ..machinery.validation import FieldError, invalid, label_selector_value, not_supported, validate_label_selector

_EVICTION_POLICIES = ["AlwaysAllow", "IfHealthyBudget"]
_CONDITION_STATUSES = ("True", "False", "Unknown")


def _budget(field: str):
    def cell(o: Obj) -> str:
        v = (o.get("spec") or {}).get(field)
        return "N/A" if v is None else str(v)
    return cell


def validate_pdb_spec(spec: dict, path: str = "spec") -> list[FieldError]:
    errs: list[FieldError] = []
    if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
        internal = Struct(MinAvailable=spec["minAvailable"], Selector=label_selector_value(spec.get("selector")),
                          MaxUnavailable=spec["maxUnavailable"],
                          UnhealthyPodEvictionPolicy=spec.get("unhealthyPodEvictionPolicy"))
        errs.append(invalid(path, internal, "minAvailable and maxUnavailable cannot be both set"))
    for f in ("minAvailable", "maxUnavailable"):
        if spec.get(f) is not None:
            errs += validate_positive_int_or_percent(spec[f], f"{path}.{f}")
            errs += not_more_than_100_percent(spec[f], f"{path}.{f}")
    errs += validate_label_selector(spec.get("selector"), f"{path}.selector")
    policy = spec.get("unhealthyPodEvictionPolicy")
    if policy is not None and policy not in _EVICTION_POLICIES:
        errs.append(not_supported(f"{path}.unhealthyPodEvictionPolicy", policy, _EVICTION_POLICIES))
    return errs


class PodDisruptionBudgetStrategy(Strategy):
    columns = [
        name_column(),
        Column("Min Available", "string", _budget("minAvailable"),
               "The minimum number or percentage of available pods this budget requires."),
        Column("Max Unavailable", "string", _budget("maxUnavailable"),
               "The maximum number or percentage of unavailable pods this budget requires."),
        Column("Allowed Disruptions", "integer", lambda o: (o.get("status") or {}).get("disruptionsAllowed", 0),
               "Calculated number of pods that may be disrupted at this time."),
        age_column(),
    ]

    def validate(self, obj: Obj) -> list[FieldError]:
        return validate_pdb_spec(obj.get("spec") or {})

    def validate_status_update(self, new: Obj, old: Obj) -> list[FieldError]:
        status = new.get("status") or {}
        errs: list[FieldError] = []
        for i, c in enumerate(status.get("conditions") or []):
            if c.get("status") not in _CONDITION_STATUSES:
                errs.append(not_supported(f"status.conditions[{i}].status", c.get("status", ""), _CONDITION_STATUSES))
        for f in ("disruptionsAllowed", "currentHealthy", "desiredHealthy", "expectedPods"):
            errs += nonnegative(status, f, "status")
        return errs


register(Resource("policy", "poddisruptionbudgets", "PodDisruptionBudget", ["v1"], namespaced=True,
                  short_names=("pdb",), subresources=("status",), strategy=PodDisruptionBudgetStrategy()))
