"""core/v1 ReplicationControllers (ReplicaSet's predecessor, selecting by an
equality map) and PodTemplates.

Validation follows core validation's ValidateReplicationControllerSpec and
ValidatePodTemplate; the columns are kubectl's printers.
"""

from __future__ import annotations

from .apps import age_column, containers_column, images_column, name_column, nonnegative, template_ips
from .base import Column, Obj, Resource, Strategy, register
from .core_pods import default_pod_spec, validate_pod_template
from .core_printing import doc, format_labels
from .gated_fields import drop_template_fields
from ..machinery.validation import FieldError, forbidden, invalid, not_supported, required, validate_labels
from . import pod_warnings


def _status(field: str):
    return lambda o: (o.get("status") or {}).get(field, 0)


class ReplicationControllerStrategy(Strategy):
    columns = [
        name_column(),
        Column("Desired", "integer", lambda o: (o.get("spec") or {}).get("replicas", 0),
               doc("ReplicationControllerSpec", "replicas")),
        Column("Current", "integer", _status("replicas"), doc("ReplicationControllerStatus", "replicas")),
        Column("Ready", "integer", _status("readyReplicas"), doc("ReplicationControllerStatus", "readyReplicas")),
        age_column(),
        containers_column(),
        images_column(),
        Column("Selector", "string", lambda o: format_labels((o.get("spec") or {}).get("selector")),
               doc("ReplicationControllerSpec", "selector"), priority=1),
    ]
    field_selectors = {"status.replicas": lambda o: str((o.get("status") or {}).get("replicas", 0))}

    def default(self, obj: Obj, version: str) -> None:
        """SetDefaults_ReplicationController: selector and labels from the template's labels."""
        spec = obj.setdefault("spec", {})
        template = spec.get("template")
        if template is not None:
            tlabels = (template.get("metadata") or {}).get("labels")
            if tlabels:
                if not spec.get("selector"):
                    spec["selector"] = dict(tlabels)
                md = obj.setdefault("metadata", {})
                if not md.get("labels"):
                    md["labels"] = dict(tlabels)
            default_pod_spec(template.setdefault("spec", {}))
        spec.setdefault("replicas", 1)

    def prepare_for_create(self, obj: Obj) -> None:
        drop_template_fields(obj.get("spec") or {})

    def prepare_for_update(self, new: Obj, old: Obj) -> None:
        drop_template_fields(new.get("spec") or {}, old.get("spec"))

    def warnings_on_create(self, obj):
        return pod_warnings.workload_create(obj)

    def warnings_on_update(self, new, old):
        return pod_warnings.rc_update(new, old)

    def validate(self, obj: Obj, old_ips: tuple[str, ...] = ()) -> list[FieldError]:
        spec = obj.get("spec") or {}
        errs = nonnegative(spec, "minReadySeconds", "spec")
        selector = spec.get("selector") or {}
        if not selector:
            errs.append(required("spec.selector"))
        else:
            errs += validate_labels(selector, "spec.selector")
        errs += nonnegative(spec, "replicas", "spec")
        template = spec.get("template")
        if template is None:
            errs.append(required("spec.template"))
            return errs
        labels = (template.get("metadata") or {}).get("labels") or {}
        if selector and any(labels.get(k) != v for k, v in selector.items()):
            errs.append(invalid("spec.template.metadata.labels", labels or None, "`selector` does not match template `labels`"))
        errs += validate_pod_template(template, "spec.template", old_ips)
        tspec = template.get("spec") or {}
        if tspec.get("restartPolicy") != "Always":
            errs.append(not_supported("spec.template.spec.restartPolicy", tspec.get("restartPolicy", ""), ["Always"]))
        if tspec.get("activeDeadlineSeconds") is not None:
            errs.append(forbidden("spec.template.spec.activeDeadlineSeconds",
                                  "activeDeadlineSeconds in ReplicationController is not Supported"))
        return errs

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        """The old template's IPs stand unchecked (StrictIPCIDRValidation's ratcheting)."""
        return self.validate(new, template_ips(old.get("spec")))

    def validate_status_update(self, new: Obj, old: Obj) -> list[FieldError]:
        status = new.get("status") or {}
        errs: list[FieldError] = []
        for f in ("replicas", "fullyLabeledReplicas", "readyReplicas", "availableReplicas", "observedGeneration"):
            errs += nonnegative(status, f, "status")
        replicas = status.get("replicas", 0)
        for f in ("fullyLabeledReplicas", "readyReplicas", "availableReplicas"):
            if status.get(f, 0) > replicas:
                errs.append(invalid(f"status.{f}", status.get(f), "cannot be greater than status.replicas"))
        if status.get("availableReplicas", 0) > status.get("readyReplicas", 0):
            errs.append(invalid("status.availableReplicas", status.get("availableReplicas"),
                                "cannot be greater than readyReplicas"))
        return errs


def _template_containers(o: Obj) -> list[dict]:
    return (((o.get("template") or {}).get("spec") or {}).get("containers")) or []


class PodTemplateStrategy(Strategy):
    columns = [
        name_column(),
        Column("Containers", "string", lambda o: ",".join(c.get("name", "") for c in _template_containers(o)),
               "Names of each container in the template."),
        Column("Images", "string", lambda o: ",".join(c.get("image", "") for c in _template_containers(o)),
               "Images referenced by each container in the template."),
        Column("Pod Labels", "string", lambda o: format_labels(((o.get("template") or {}).get("metadata") or {}).get("labels")),
               "The labels for the pod template."),
    ]

    def default(self, obj: Obj, version: str) -> None:
        default_pod_spec(obj.setdefault("template", {}).setdefault("spec", {}))

    def prepare_for_create(self, obj: Obj) -> None:
        drop_template_fields(obj)

    def prepare_for_update(self, new: Obj, old: Obj) -> None:
        drop_template_fields(new, old)

    def warnings_on_create(self, obj):
        return pod_warnings.pod_template_create(obj)

    def warnings_on_update(self, new, old):
        return pod_warnings.pod_template_update(new, old)

    def validate(self, obj: Obj) -> list[FieldError]:
        return validate_pod_template(obj.get("template") or {}, "template")

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        return validate_pod_template(new.get("template") or {}, "template", template_ips(old))


register(
    Resource("", "replicationcontrollers", "ReplicationController", ["v1"], namespaced=True, short_names=("rc",),
             categories=("all",), subresources=("status", "scale"), strategy=ReplicationControllerStrategy()),
    Resource("", "podtemplates", "PodTemplate", ["v1"], namespaced=True, strategy=PodTemplateStrategy()),
)
