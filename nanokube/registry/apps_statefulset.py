"""apps/v1 StatefulSets (stable identities, ordered rollout) and the
ControllerRevisions that keep StatefulSet and DaemonSet template history.

Validation follows apps validation's ValidateStatefulSetSpec and
ValidateControllerRevision; the columns are kubectl's printers.
"""

from __future__ import annotations

from .apps import (
    _validate_selector_and_template,
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
    template_ips,
    validate_positive_int_or_percent,
)
from .base import Column, Obj, Resource, Strategy, register
from .gated_fields import drop_template_fields
from ..machinery.gofmt import Struct
from ..machinery.meta import controller_ref
from ..machinery.validation import (
    FieldError,
    dns1123_label,
    forbidden,
    immutable,
    invalid,
    not_supported,
    required,
)
from . import pod_warnings

_STATUS = "io.k8s.api.apps.v1.StatefulSetStatus"
_CR = "io.k8s.api.apps.v1.ControllerRevision"
_RETENTION = ("Retain", "Delete")
#: spec fields an update may change (ValidateStatefulSetUpdate)
_MUTABLE = ("replicas", "ordinals", "template", "updateStrategy", "revisionHistoryLimit",
            "persistentVolumeClaimRetentionPolicy", "minReadySeconds")


class StatefulSetStrategy(Strategy):
    #: ValidateStatefulSetName: a DNS label, as its pods' names and hostnames are; an update does not
    #: check it (names were DNS subdomains before, and cannot change)
    name_validator = staticmethod(dns1123_label)
    update_name_validator = staticmethod(lambda name: [])
    columns = [
        name_column(),
        Column("Ready", "string",
               lambda o: f"{(o.get('status') or {}).get('readyReplicas', 0)}/{(o.get('spec') or {}).get('replicas', 0)}",
               "Number of the pod with ready state"),
        age_column(),
        containers_column(),
        images_column(),
    ]

    def default(self, obj: Obj, version: str) -> None:
        """SetDefaults_StatefulSet (apps/v1), with MaxUnavailableStatefulSet on."""
        spec = obj.setdefault("spec", {})
        spec.setdefault("podManagementPolicy", "OrderedReady")
        strategy = spec.setdefault("updateStrategy", {})
        strategy.setdefault("type", "RollingUpdate")
        if strategy["type"] == "RollingUpdate":
            ru = strategy.get("rollingUpdate") or {}
            ru.setdefault("partition", 0)
            ru.setdefault("maxUnavailable", 1)
            strategy["rollingUpdate"] = ru
        policy = spec.get("persistentVolumeClaimRetentionPolicy") or {}
        policy.setdefault("whenDeleted", "Retain")
        policy.setdefault("whenScaled", "Retain")
        spec["persistentVolumeClaimRetentionPolicy"] = policy
        spec.setdefault("replicas", 1)
        spec.setdefault("revisionHistoryLimit", 10)
        for claim in spec.get("volumeClaimTemplates") or []:
            claim.setdefault("spec", {}).setdefault("volumeMode", "Filesystem")
            claim.setdefault("status", {}).setdefault("phase", "Pending")
        default_pod_template(ensure_template(spec))

    def prepare_for_create(self, obj: Obj) -> None:
        drop_template_fields(obj.get("spec") or {})

    def prepare_for_update(self, new: Obj, old: Obj) -> None:
        drop_template_fields(new.get("spec") or {}, old.get("spec"))

    def warnings_on_create(self, obj):
        return pod_warnings.statefulset_create(obj)

    def warnings_on_update(self, new, old):
        return pod_warnings.statefulset_update(new, old)

    def validate(self, obj: Obj) -> list[FieldError]:
        return validate_statefulset_spec(obj.get("spec") or {}, "spec")

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        errs = validate_statefulset_spec(new.get("spec") or {}, "spec", template_ips(old.get("spec")))
        spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
        fixed = {k: v for k, v in spec.items() if k not in _MUTABLE}
        old_fixed = {k: v for k, v in old_spec.items() if k not in _MUTABLE}
        if fixed != old_fixed:
            errs.append(forbidden("spec", "updates to statefulset spec for fields other than 'replicas', 'ordinals', "
                                          "'template', 'updateStrategy', 'revisionHistoryLimit', "
                                          "'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"))
        return errs

    def validate_status_update(self, new: Obj, old: Obj) -> list[FieldError]:
        status = new.get("status") or {}
        errs: list[FieldError] = []
        for f in ("replicas", "readyReplicas", "currentReplicas", "updatedReplicas", "availableReplicas",
                  "observedGeneration", "collisionCount"):
            errs += nonnegative(status, f, "status")
        replicas = status.get("replicas", 0)
        for f in ("readyReplicas", "currentReplicas", "updatedReplicas"):
            if status.get(f, 0) > replicas:
                errs.append(invalid(f"status.{f}", status.get(f), "cannot be greater than status.replicas"))
        if status.get("availableReplicas", 0) > status.get("readyReplicas", 0):
            errs.append(invalid("status.availableReplicas", status.get("availableReplicas"),
                                "cannot be greater than status.readyReplicas"))
        return errs


def validate_statefulset_spec(spec: dict, path: str, old_ips: tuple[str, ...] = ()) -> list[FieldError]:
    errs: list[FieldError] = []
    policy = spec.get("podManagementPolicy")
    if not policy:
        errs.append(required(f"{path}.podManagementPolicy"))
    elif policy not in ("OrderedReady", "Parallel"):
        errs.append(invalid(f"{path}.podManagementPolicy", policy, "must be 'OrderedReady' or 'Parallel'"))
    errs += _validate_update_strategy(spec.get("updateStrategy") or {}, f"{path}.updateStrategy")
    retention = spec.get("persistentVolumeClaimRetentionPolicy") or {}
    for f in ("whenDeleted", "whenScaled"):
        if retention.get(f) not in _RETENTION:
            errs.append(not_supported(f"{path}.persistentVolumeClaimRetentionPolicy.{f}", retention.get(f, ""),
                                      _RETENTION))
    errs += nonnegative(spec, "replicas", path) + nonnegative(spec, "minReadySeconds", path)
    if spec.get("ordinals") is not None:
        errs += nonnegative(spec["ordinals"], "start", f"{path}.ordinals")
    pods = _with_claim_volumes(spec.get("template") or {}, spec.get("volumeClaimTemplates") or [])
    errs += _validate_selector_and_template(spec, path, old_ips, "StatefulSet", "statefulset", pods)
    for i, claim in enumerate(spec.get("volumeClaimTemplates") or []):
        if not (claim.get("metadata") or {}).get("name"):
            errs.append(required(f"{path}.volumeClaimTemplates[{i}].metadata.name", "name or generateName is required"))
    return errs


def _with_claim_volumes(template: dict, claims: list) -> dict:
    """The template as its pods will be: each claim template a volume (replacing
    a same-named one), so mounts of claims are not reported as missing."""
    names = {(c.get("metadata") or {}).get("name") for c in claims} - {None}
    if not names:
        return template
    spec = dict(template.get("spec") or {})
    spec["volumes"] = [v for v in spec.get("volumes") or [] if v.get("name") not in names] + [
        {"name": n, "persistentVolumeClaim": {"claimName": n}} for n in sorted(names)]
    return {**template, "spec": spec}


def _validate_update_strategy(strategy: dict, path: str) -> list[FieldError]:
    kind, ru = strategy.get("type"), strategy.get("rollingUpdate")
    if not kind:
        return [required(path)]
    # the internal StatefulSetUpdateStrategy and RollingUpdateStatefulSetStrategy: Go's field names
    internal_ru = None if ru is None else Struct(Partition=ru.get("partition") or 0,
                                                 MaxUnavailable=ru.get("maxUnavailable"))
    if kind == "OnDelete":
        return [invalid(f"{path}.rollingUpdate", internal_ru, "only allowed for updateStrategy 'RollingUpdate'")] \
            if ru is not None else []
    if kind != "RollingUpdate":
        return [invalid(path, Struct(Type=kind, RollingUpdate=internal_ru), "must be 'RollingUpdate' or 'OnDelete'")]
    if ru is None:
        return []
    path = f"{path}.rollingUpdate"
    errs = nonnegative(ru, "partition", path)
    mu = ru.get("maxUnavailable")
    if mu is not None:
        errs += validate_positive_int_or_percent(mu, f"{path}.maxUnavailable")
        if int_or_percent_value(mu) == 0:
            errs.append(invalid(f"{path}.maxUnavailable", mu, "must be greater than zero"))
        errs += not_more_than_100_percent(mu, f"{path}.maxUnavailable")
    return errs


# --- ControllerRevision ------------------------------------------------------------


def _controller_of(obj: Obj) -> str:
    """'<kind>.<group>/<name>' of the controlling owner, as kubectl prints it."""
    ref = controller_ref(obj)
    if ref is None:
        return "<none>"
    api_version = ref.get("apiVersion", "")
    group = api_version.split("/")[0] if "/" in api_version else ""
    kind = f"{ref.get('kind', '')}.{group}" if group else ref.get("kind", "")
    return f"{kind.lower()}/{ref.get('name', '')}"


class ControllerRevisionStrategy(Strategy):
    track_generation = False
    columns = [
        name_column(),
        Column("Controller", "string", _controller_of, "Controller of the object."),
        Column("Revision", "integer", lambda o: o.get("revision", 0), api_doc(_CR, "revision")),
        age_column(),
    ]

    def validate(self, obj: Obj) -> list[FieldError]:
        errs = [] if obj.get("data") is not None else [required("data", "data is mandatory")]
        if (obj.get("revision") or 0) < 0:
            errs.append(invalid("revision", obj["revision"], "must be greater than or equal to 0"))
        return errs

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        errs = self.validate(new)
        if new.get("data") != old.get("data"):
            errs.append(immutable("data", new.get("data")))
        return errs


register(
    Resource("apps", "statefulsets", "StatefulSet", ["v1"], namespaced=True, short_names=("sts",),
             categories=("all",), subresources=("status", "scale"), strategy=StatefulSetStrategy()),
    Resource("apps", "controllerrevisions", "ControllerRevision", ["v1"], namespaced=True,
             strategy=ControllerRevisionStrategy()),
)
