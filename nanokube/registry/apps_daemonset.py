"""apps/v1 DaemonSets: one pod per eligible node, rolled by template generation.

Validation follows apps validation's ValidateDaemonSetSpec; the columns are
kubectl's daemonset printer.
"""

from __future__ import annotations

from .apps import (
    _immutable_selector,
    age_column,
    api_doc,
    containers_column,
    default_pod_template,
    ensure_template,
    images_column,
    int_or_percent_value,
    name_column,
    nonnegative,
    not_more_than_100_percent,
    pod_template_errors,
    selector_column,
    selector_is_empty,
    selector_matches,
    template_ips,
    validate_positive_int_or_percent,
)
from .base import Column, Obj, Resource, Strategy, register
from .gated_fields import drop_template_fields
from .core_printing import format_labels
from ..machinery.gofmt import Struct
from ..machinery.validation import (
    FieldError,
    invalid,
    label_selector_value,
    not_supported,
    required,
    validate_label_selector,
)
from . import pod_warnings

#: apps/v1's form of the internal spec.templateGeneration, kept by the server
TEMPLATE_GENERATION = "deprecated.daemonset.template.generation"
_SPEC = "io.k8s.api.apps.v1.DaemonSetSpec"
_STATUS = "io.k8s.api.apps.v1.DaemonSetStatus"
_STATUS_COUNTERS = ("currentNumberScheduled", "numberMisscheduled", "desiredNumberScheduled", "numberReady",
                    "observedGeneration", "updatedNumberScheduled", "numberAvailable", "numberUnavailable",
                    "collisionCount")


def _status(field: str):
    return lambda o: (o.get("status") or {}).get(field, 0)


class DaemonSetStrategy(Strategy):
    columns = [
        name_column(),
        Column("Desired", "integer", _status("desiredNumberScheduled"), api_doc(_STATUS, "desiredNumberScheduled")),
        Column("Current", "integer", _status("currentNumberScheduled"), api_doc(_STATUS, "currentNumberScheduled")),
        Column("Ready", "integer", _status("numberReady"), api_doc(_STATUS, "numberReady")),
        Column("Up-to-date", "integer", _status("updatedNumberScheduled"), api_doc(_STATUS, "updatedNumberScheduled")),
        Column("Available", "integer", _status("numberAvailable"), api_doc(_STATUS, "numberAvailable")),
        Column("Node Selector", "string",
               lambda o: format_labels((((o.get("spec") or {}).get("template") or {}).get("spec") or {}).get("nodeSelector")),
               "The node selector for the pod template."),
        age_column(),
        containers_column(),
        images_column(),
        selector_column(api_doc(_SPEC, "selector")),
    ]

    def default(self, obj: Obj, version: str) -> None:
        """SetDefaults_DaemonSet (apps/v1)."""
        spec = obj.setdefault("spec", {})
        strategy = spec.setdefault("updateStrategy", {})
        strategy.setdefault("type", "RollingUpdate")
        if strategy["type"] == "RollingUpdate":
            ru = strategy.get("rollingUpdate") or {}
            ru.setdefault("maxUnavailable", 1)
            ru.setdefault("maxSurge", 0)
            strategy["rollingUpdate"] = ru
        spec.setdefault("revisionHistoryLimit", 10)
        default_pod_template(ensure_template(spec))

    def prepare_for_create(self, obj: Obj) -> None:
        md = obj.setdefault("metadata", {})
        md["annotations"] = {**(md.get("annotations") or {}), TEMPLATE_GENERATION: "1"}
        drop_template_fields(obj.get("spec") or {})

    def prepare_for_update(self, new: Obj, old: Obj) -> None:
        """The template generation is the server's: it steps when the template changes."""
        drop_template_fields(new.get("spec") or {}, old.get("spec"))
        old_gen = ((old.get("metadata") or {}).get("annotations") or {}).get(TEMPLATE_GENERATION)
        if old_gen is None:
            return
        if (new.get("spec") or {}).get("template") != (old.get("spec") or {}).get("template"):
            old_gen = str(int(old_gen) + 1)
        md = new.setdefault("metadata", {})
        md["annotations"] = {**(md.get("annotations") or {}), TEMPLATE_GENERATION: old_gen}

    def warnings_on_create(self, obj):
        return pod_warnings.workload_create(obj)

    def warnings_on_update(self, new, old):
        return pod_warnings.workload_update(new, old)

    def validate(self, obj: Obj) -> list[FieldError]:
        return validate_daemonset_spec(obj.get("spec") or {}, "spec")

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        return validate_daemonset_spec(new.get("spec") or {}, "spec", template_ips(old.get("spec"))) + _immutable_selector(new, old)

    def validate_status_update(self, new: Obj, old: Obj) -> list[FieldError]:
        status = new.get("status") or {}
        errs: list[FieldError] = []
        for f in _STATUS_COUNTERS:
            errs += nonnegative(status, f, "status")
        return errs


def validate_daemonset_spec(spec: dict, path: str, old_ips: tuple[str, ...] = ()) -> list[FieldError]:
    errs: list[FieldError] = []
    sel = spec.get("selector")
    sel_errs = validate_label_selector(sel, f"{path}.selector") if sel is not None else []
    errs += sel_errs
    template = spec.get("template") or {}
    labels = (template.get("metadata") or {}).get("labels")
    # no Required: a missing selector is LabelSelectorAsSelector's Nothing, which matches no labels
    if not sel_errs and not selector_matches(sel, labels):
        errs.append(invalid(f"{path}.template.metadata.labels", labels, "`selector` does not match template `labels`"))
    if sel is not None and selector_is_empty(sel):
        errs.append(invalid(f"{path}.selector", label_selector_value(sel), "empty selector is invalid for daemonset"))
    errs += pod_template_errors(template, f"{path}.template", old_ips)
    tspec = template.get("spec") or {}
    if tspec.get("restartPolicy") != "Always":
        errs.append(not_supported(f"{path}.template.spec.restartPolicy", tspec.get("restartPolicy", ""), ["Always"]))
    if tspec.get("activeDeadlineSeconds") is not None:
        errs.append(invalid(f"{path}.template.spec.activeDeadlineSeconds", tspec["activeDeadlineSeconds"],
                            "activeDeadlineSeconds in DaemonSet is not Supported"))
    errs += nonnegative(spec, "minReadySeconds", path)
    errs += _validate_update_strategy(spec.get("updateStrategy") or {}, f"{path}.updateStrategy")
    errs += nonnegative(spec, "revisionHistoryLimit", path)
    return errs


def _validate_update_strategy(strategy: dict, path: str) -> list[FieldError]:
    kind = strategy.get("type")
    if kind == "OnDelete":
        return []
    if kind != "RollingUpdate":  # the internal DaemonSetUpdateStrategy: Go's field names
        ru = strategy.get("rollingUpdate")
        internal = Struct(Type=kind or "", RollingUpdate=None if ru is None else Struct(
            MaxUnavailable=ru.get("maxUnavailable") or 0, MaxSurge=ru.get("maxSurge") or 0))
        return [not_supported(path, internal, ["RollingUpdate", "OnDelete"])]
    ru = strategy.get("rollingUpdate")
    if ru is None:
        return [required(f"{path}.rollingUpdate")]
    path = f"{path}.rollingUpdate"
    mu, ms = ru.get("maxUnavailable"), ru.get("maxSurge")
    errs = validate_positive_int_or_percent(mu, f"{path}.maxUnavailable")
    errs += validate_positive_int_or_percent(ms, f"{path}.maxSurge")
    errs += not_more_than_100_percent(mu, f"{path}.maxUnavailable")
    errs += not_more_than_100_percent(ms, f"{path}.maxSurge")
    has_unavailable, has_surge = int_or_percent_value(mu) != 0, int_or_percent_value(ms) != 0
    if has_unavailable and has_surge:
        errs.append(invalid(f"{path}.maxSurge", ms, "may not be set when maxUnavailable is non-zero"))
    elif not has_unavailable and not has_surge:
        errs.append(required(f"{path}.maxUnavailable", "cannot be 0 when maxSurge is 0"))
    return errs


register(Resource("apps", "daemonsets", "DaemonSet", ["v1"], namespaced=True, short_names=("ds",),
                  categories=("all",), subresources=("status",), strategy=DaemonSetStrategy()))
