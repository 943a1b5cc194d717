"""apps/v1: Deployments and ReplicaSets.

Also home of the workload helpers other groups reuse (label selectors,
int-or-percent values, pod-template glue), because apps is where upstream
defines them (apps validation's ValidatePositiveIntOrPercent, metav1's
selector rules).
"""

from __future__ import annotations

import re
from typing import Any

from .. import schema
from .base import AGE, Column, Obj, Resource, Strategy, register
from .gated_fields import drop_template_fields
from ..machinery.validation import (
    FieldError,
    forbidden,
    immutable,
    invalid,
    label_selector_value,
    not_supported,
    required,
    validate_label_selector,
)
from . import pod_warnings

# --- docs for column descriptions ------------------------------------------------


def api_doc(definition: str, field: str) -> str:
    """The OpenAPI description of `field` in `$defs[definition]`."""
    props = schema.definitions()[definition].get("properties") or {}
    return (props.get(field) or {}).get("description", "")


_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"


def name_column() -> Column:
    return Column("Name", "string", lambda o: o["metadata"]["name"], api_doc(_META, "name"), format="name")


def age_column() -> Column:
    return Column("Age", "string", AGE, api_doc(_META, "creationTimestamp"))


# --- label selectors ------------------------------------------------------------

_SELECTOR_OPS = ("In", "NotIn", "Exists", "DoesNotExist")


def selector_is_empty(sel: Any) -> bool:
    return not sel or not (sel.get("matchLabels") or sel.get("matchExpressions"))


def selector_matches(sel: Any, labels: dict | None) -> bool:
    """LabelSelectorAsSelector(sel).Matches(labels); a nil selector matches nothing."""
    if sel is None:
        return False
    labels = labels or {}
    for k, v in (sel.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for req in sel.get("matchExpressions") or []:
        k, op, values = req.get("key"), req.get("operator"), req.get("values") or []
        if op == "In" and labels.get(k) not in values:
            return False
        if op == "NotIn" and k in labels and labels[k] in values:
            return False
        if op == "Exists" and k not in labels:
            return False
        if op == "DoesNotExist" and k in labels:
            return False
    return True


def selector_string(sel: Any) -> str:
    """labels.Selector.String() of a LabelSelector: requirements sorted by key."""
    if sel is None:
        return "<none>"
    reqs: list[tuple[str, str]] = [(k, f"{k}={v}") for k, v in (sel.get("matchLabels") or {}).items()]
    for r in sel.get("matchExpressions") or []:
        k, op, vals = r.get("key", ""), r.get("operator"), sorted(r.get("values") or [])
        text = {"In": f"{k} in ({','.join(vals)})", "NotIn": f"{k} notin ({','.join(vals)})",
                "Exists": k, "DoesNotExist": f"!{k}"}.get(op, k)
        reqs.append((k, text))
    return ",".join(t for _, t in sorted(reqs, key=lambda r: r[0])) or ""


# --- int-or-percent ---------------------------------------------------------------

_PERCENT = re.compile(r"^[0-9]+%\Z")
_PERCENT_MSG = ("a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', "
                "regex used for validation is '[0-9]+%')")


def validate_positive_int_or_percent(v: Any, path: str) -> list[FieldError]:
    """ValidatePositiveIntOrPercent: a non-negative int or an 'N%' string."""
    if isinstance(v, str):
        return [] if _PERCENT.match(v) else [invalid(path, v, _PERCENT_MSG)]
    if isinstance(v, int) and v < 0:
        return [invalid(path, v, "must be greater than or equal to 0")]
    return []


def not_more_than_100_percent(v: Any, path: str) -> list[FieldError]:
    if isinstance(v, str) and _PERCENT.match(v) and int(v[:-1]) > 100:
        return [invalid(path, v, "must not be greater than 100%")]
    return []


def int_or_percent_value(v: Any) -> int:
    """getIntOrPercentValue: the number, percent or not (0 when unparsable)."""
    if isinstance(v, str):
        return int(v[:-1]) if _PERCENT.match(v) else 0
    return v or 0


def nonnegative(obj: dict, field: str, path: str) -> list[FieldError]:
    v = obj.get(field)
    if v is not None and v < 0:
        return [invalid(f"{path}.{field}", v, "must be greater than or equal to 0")]
    return []


# --- pod templates (rules owned by the core group) -------------------------------


def ensure_template(holder: dict, key: str = "template") -> dict:
    """A workload's template as its Go field (a struct, not a pointer) holds it: an absent or null
    one is empty, defaulted and validated like any other (its own errors, not 'Required')."""
    if holder.get(key) is None:
        holder[key] = {}
    return holder[key]


def default_pod_template(template: dict | None) -> None:
    """Apply core's pod defaults to a workload template, as upstream's defaulters do."""
    from .core import default_pod_spec

    if template is not None:
        default_pod_spec(template.setdefault("spec", {}))


def pod_template_errors(template: dict, path: str, old_ips: tuple[str, ...] = ()) -> list[FieldError]:
    from .core import validate_pod_template

    return validate_pod_template(template, path, old_ips)


def template_ips(holder: dict | None) -> tuple[str, ...]:
    """The IPs in the pod template that `holder` (an old object's spec, a PodTemplate) holds, its
    nameservers and host alias IPs: an update may keep them unchecked, as StrictIPCIDRValidation
    ratchets every kind's old values (a template's are mutable, unlike a pod's)."""
    from .core import pod_spec_ips

    return pod_spec_ips((((holder or {}).get("template") or {}).get("spec")) or {})


def template_containers(obj: Obj) -> list[dict]:
    return ((((obj.get("spec") or {}).get("template") or {}).get("spec") or {}).get("containers")) or []


def containers_column() -> Column:
    return Column("Containers", "string", lambda o: ",".join(c.get("name", "") for c in template_containers(o)),
                  "Names of each container in the template.", priority=1)


def images_column() -> Column:
    return Column("Images", "string", lambda o: ",".join(c.get("image", "") for c in template_containers(o)),
                  "Images referenced by each container in the template.", priority=1)


def selector_column(description: str) -> Column:
    return Column("Selector", "string", lambda o: selector_string((o.get("spec") or {}).get("selector")),
                  description, priority=1)


# --- shared ReplicaSet/Deployment rules ------------------------------------------


def _validate_selector_and_template(spec: dict, path: str, old_ips: tuple[str, ...] = (), kind: str = "ReplicaSet",
                                    selector_of: str = "deployment", pods: dict | None = None) -> list[FieldError]:
    """The selector + template half of ValidateDeploymentSpec / ValidateReplicaSetSpec, and of
    ValidateStatefulSetSpec: `kind` and `selector_of` name the workload in two messages as
    upstream words them, `pods` is the template as its pods will be where that differs."""
    errs: list[FieldError] = []
    sel = spec.get("selector")
    if sel is None:
        errs.append(required(f"{path}.selector"))
    else:
        errs += validate_label_selector(sel, f"{path}.selector")
        if selector_is_empty(sel):
            errs.append(invalid(f"{path}.selector", label_selector_value(sel), f"empty selector is invalid for {selector_of}"))
    template = spec.get("template") or {}
    tpath = f"{path}.template"
    labels = (template.get("metadata") or {}).get("labels")
    # a missing selector is LabelSelectorAsSelector's Nothing: not empty, and it matches no labels
    if (sel is None or not selector_is_empty(sel)) and not selector_matches(sel, labels):
        errs.append(invalid(f"{tpath}.metadata.labels", labels, "`selector` does not match template `labels`"))
    errs += pod_template_errors(template if pods is None else pods, tpath, old_ips)
    tspec = template.get("spec") or {}
    if tspec.get("restartPolicy") != "Always":
        errs.append(not_supported(f"{tpath}.spec.restartPolicy", tspec.get("restartPolicy", ""), ["Always"]))
    if tspec.get("activeDeadlineSeconds") is not None:
        errs.append(forbidden(f"{tpath}.spec.activeDeadlineSeconds", f"activeDeadlineSeconds in {kind} is not Supported"))
    return errs


def _replica_status_errors(status: dict, bounded: tuple[str, ...], counts: tuple[str, ...]) -> list[FieldError]:
    """Status counters are non-negative; `bounded` ones may not exceed status.replicas."""
    errs: list[FieldError] = []
    for f in ("replicas", "observedGeneration", "terminatingReplicas", *bounded, *counts):
        errs += nonnegative(status, f, "status")
    for f in bounded:
        if status.get(f, 0) > status.get("replicas", 0):
            errs.append(invalid(f"status.{f}", status.get(f), "cannot be greater than status.replicas"))
    if status.get("availableReplicas", 0) > status.get("readyReplicas", 0):
        errs.append(invalid("status.availableReplicas", status.get("availableReplicas"), "cannot be greater than readyReplicas"))
    return errs


def _immutable_selector(new: Obj, old: Obj) -> list[FieldError]:
    """apps/v1 forbids changing spec.selector after creation."""
    sel = (new.get("spec") or {}).get("selector")
    return [] if sel == (old.get("spec") or {}).get("selector") else [immutable("spec.selector", label_selector_value(sel))]


# --- Deployment -----------------------------------------------------------------

_DEPLOY_STATUS = "io.k8s.api.apps.v1.DeploymentStatus"
_DEPLOY_SPEC = "io.k8s.api.apps.v1.DeploymentSpec"


class DeploymentStrategy(Strategy):
    #: deploymentStatusStrategy keeps the stored labels
    status_metadata = ("annotations", "finalizers", "ownerReferences")
    columns = [
        name_column(),
        Column("Ready", "string",
               lambda o: f"{(o.get('status') or {}).get('readyReplicas', 0)}/{(o.get('spec') or {}).get('replicas', 0)}",
               "Number of the pod with ready state"),
        Column("Up-to-date", "string", lambda o: (o.get("status") or {}).get("updatedReplicas", 0),
               api_doc(_DEPLOY_STATUS, "updatedReplicas")),
        Column("Available", "string", lambda o: (o.get("status") or {}).get("availableReplicas", 0),
               api_doc(_DEPLOY_STATUS, "availableReplicas")),
        age_column(),
        containers_column(),
        images_column(),
        selector_column(api_doc(_DEPLOY_SPEC, "selector")),
    ]

    def default(self, obj: Obj, version: str) -> None:
        """SetDefaults_Deployment (apps/v1)."""
        spec = obj.setdefault("spec", {})
        spec.setdefault("replicas", 1)
        strategy = spec.setdefault("strategy", {})
        strategy.setdefault("type", "RollingUpdate")
        if strategy["type"] == "RollingUpdate":
            ru = strategy.get("rollingUpdate") or {}
            ru.setdefault("maxUnavailable", "25%")
            ru.setdefault("maxSurge", "25%")
            strategy["rollingUpdate"] = ru
        spec.setdefault("revisionHistoryLimit", 10)
        spec.setdefault("progressDeadlineSeconds", 600)
        default_pod_template(ensure_template(spec))

    def prepare_for_create(self, obj: Obj) -> None:
        drop_template_fields(obj.get("spec") or {})

    def prepare_for_update(self, new: Obj, old: Obj) -> None:
        drop_template_fields(new.get("spec") or {}, old.get("spec"))

    def warnings_on_create(self, obj):
        return pod_warnings.workload_create(obj)

    def warnings_on_update(self, new, old):
        return pod_warnings.workload_update(new, old)

    def validate(self, obj: Obj, old_ips: tuple[str, ...] = ()) -> list[FieldError]:
        spec = obj.get("spec") or {}
        errs = nonnegative(spec, "replicas", "spec")
        errs += _validate_selector_and_template(spec, "spec", old_ips)
        errs += _validate_deployment_strategy(spec.get("strategy") or {}, "spec.strategy")
        for f in ("minReadySeconds", "revisionHistoryLimit", "progressDeadlineSeconds"):
            errs += nonnegative(spec, f, "spec")
        pds = spec.get("progressDeadlineSeconds")
        if pds is not None and pds <= spec.get("minReadySeconds", 0):
            errs.append(invalid("spec.progressDeadlineSeconds", pds, "must be greater than minReadySeconds"))
        return errs

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        return self.validate(new, template_ips(old.get("spec"))) + _immutable_selector(new, old)

    def validate_status_update(self, new: Obj, old: Obj) -> list[FieldError]:
        return _replica_status_errors(new.get("status") or {}, ("updatedReplicas", "readyReplicas", "availableReplicas"),
                                      ("collisionCount", "unavailableReplicas"))


def _validate_deployment_strategy(strategy: dict, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    kind = strategy.get("type")
    ru = strategy.get("rollingUpdate")
    if kind == "Recreate":
        if ru is not None:
            errs.append(forbidden(f"{path}.rollingUpdate", "may not be specified when strategy `type` is 'Recreate'"))
    elif kind == "RollingUpdate":
        if ru is None:
            errs.append(required(f"{path}.rollingUpdate", "this should be defaulted and never be nil"))
        else:
            errs += _validate_rolling_update(ru, f"{path}.rollingUpdate")
    else:
        errs.append(not_supported(f"{path}.Type", kind or "", ["Recreate", "RollingUpdate"]))
    return errs


def _validate_rolling_update(ru: dict, path: str) -> list[FieldError]:
    mu, ms = ru.get("maxUnavailable"), ru.get("maxSurge")
    errs = validate_positive_int_or_percent(mu, f"{path}.maxUnavailable")
    errs += validate_positive_int_or_percent(ms, f"{path}.maxSurge")
    if int_or_percent_value(mu) == 0 and int_or_percent_value(ms) == 0:
        errs.append(invalid(f"{path}.maxUnavailable", mu, "may not be 0 when `maxSurge` is 0"))
    errs += not_more_than_100_percent(mu, f"{path}.maxUnavailable")
    return errs


# --- ReplicaSet -----------------------------------------------------------------

_RS_SPEC = "io.k8s.api.apps.v1.ReplicaSetSpec"
_RS_STATUS = "io.k8s.api.apps.v1.ReplicaSetStatus"


class ReplicaSetStrategy(Strategy):
    columns = [
        name_column(),
        Column("Desired", "integer", lambda o: (o.get("spec") or {}).get("replicas", 0), api_doc(_RS_SPEC, "replicas")),
        Column("Current", "integer", lambda o: (o.get("status") or {}).get("replicas", 0), api_doc(_RS_STATUS, "replicas")),
        Column("Ready", "integer", lambda o: (o.get("status") or {}).get("readyReplicas", 0),
               api_doc(_RS_STATUS, "readyReplicas")),
        age_column(),
        containers_column(),
        images_column(),
        selector_column(api_doc(_RS_SPEC, "selector")),
    ]
    field_selectors = {"status.replicas": lambda o: str((o.get("status") or {}).get("replicas", 0))}

    def default(self, obj: Obj, version: str) -> None:
        """SetDefaults_ReplicaSet (apps/v1)."""
        spec = obj.setdefault("spec", {})
        spec.setdefault("replicas", 1)
        default_pod_template(ensure_template(spec))

    def prepare_for_create(self, obj: Obj) -> None:
        drop_template_fields(obj.get("spec") or {})

    def prepare_for_update(self, new: Obj, old: Obj) -> None:
        drop_template_fields(new.get("spec") or {}, old.get("spec"))

    def warnings_on_create(self, obj):
        return pod_warnings.workload_create(obj)

    def warnings_on_update(self, new, old):
        return pod_warnings.workload_update(new, old)

    def validate(self, obj: Obj, old_ips: tuple[str, ...] = ()) -> list[FieldError]:
        spec = obj.get("spec") or {}
        errs = nonnegative(spec, "replicas", "spec") + nonnegative(spec, "minReadySeconds", "spec")
        return errs + _validate_selector_and_template(spec, "spec", old_ips)

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        return self.validate(new, template_ips(old.get("spec"))) + _immutable_selector(new, old)

    def validate_status_update(self, new: Obj, old: Obj) -> list[FieldError]:
        return _replica_status_errors(new.get("status") or {}, ("fullyLabeledReplicas", "readyReplicas", "availableReplicas"), ())


register(
    Resource("apps", "deployments", "Deployment", ["v1"], namespaced=True, short_names=("deploy",),
             categories=("all",), subresources=("status", "scale"), strategy=DeploymentStrategy()),
    Resource("apps", "replicasets", "ReplicaSet", ["v1"], namespaced=True, short_names=("rs",),
             categories=("all",), subresources=("status", "scale"), strategy=ReplicaSetStrategy()),
)
