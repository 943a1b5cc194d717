"""scheduling.k8s.io: PriorityClass, and the workload-aware scheduling kinds
Workload, PodGroup and CompositePodGroup.

v1beta1 and v1alpha3 share the same JSON shape for Workload and PodGroup in
1.37 (the DisruptionMode types differ only in Go names), so conversion is the
identity and storage is v1beta1, the more stable of the two. CompositePodGroup
exists only in v1alpha3, which is therefore its storage version.
"""

from __future__ import annotations

from typing import Any

from .base import AGE, RESET_DELETION, Column, Obj, Resource, Strategy, register
from .gated_fields import drop_podgroup_fields, drop_podgroup_status_fields, drop_workload_fields
from .resource_validation import each, each_unique
from ..machinery.validation import (
    FieldError,
    dns1123_label,
    dns1123_subdomain,
    forbidden,
    immutable,
    invalid,
    not_supported,
    path_segment_name,
    qualified_name,
    required,
    too_many,
    validate_conditions,
)

GROUP = "scheduling.k8s.io"
SYSTEM_PREFIX = "system-"
HIGHEST_USER_PRIORITY = 1_000_000_000
SYSTEM_CLASSES = {"system-cluster-critical": 2_000_000_000, "system-node-critical": 2_000_001_000}
PREEMPTION_POLICIES = ("PreemptLowerPriority", "Never")
MAX_TEMPLATES = 8
MAX_CLAIMS = 4
MAX_TOPOLOGY = 1
MAX_DEPTH = 4

Errors = list[FieldError]


def _name(o: Obj) -> str:
    return o["metadata"]["name"]


NAME = Column("Name", "string", _name, "Name must be unique within a namespace.", format="name")
AGE_COLUMN = Column("Age", "string", AGE, "CreationTimestamp is a timestamp representing the server time when this object was created.")


# --- PriorityClass ------------------------------------------------------------


def preemption_policy(value: Any, path: str) -> Errors:
    return [] if value in PREEMPTION_POLICIES else [not_supported(path, value, PREEMPTION_POLICIES)]


class PriorityClassStrategy(Strategy):
    track_generation = False
    columns = [
        NAME,
        Column("Value", "integer", lambda o: o.get("value", 0), "Value is the integer value of this priority class."),
        Column("Global-Default", "boolean", lambda o: bool(o.get("globalDefault")), "GlobalDefault specifies whether this PriorityClass should be considered as the default priority."),
        AGE_COLUMN,
        Column("PreemptionPolicy", "string", lambda o: o.get("preemptionPolicy", ""), "PreemptionPolicy is the Policy for preempting pods with lower priority."),
    ]

    def default(self, obj, version):
        obj.setdefault("preemptionPolicy", "PreemptLowerPriority")

    def validate(self, obj):
        errs: Errors = []
        name, value, global_default = obj["metadata"].get("name", ""), obj.get("value", 0), bool(obj.get("globalDefault"))
        if name.startswith(SYSTEM_PREFIX):
            problem = _system_class_problem(name, value, global_default)
            if problem:
                errs.append(forbidden("metadata.name", f"priority class names with '{SYSTEM_PREFIX}' prefix are reserved for system use only. error: {problem}"))
        elif value > HIGHEST_USER_PRIORITY:
            errs.append(forbidden("value", f"maximum allowed value of a user defined priority is {HIGHEST_USER_PRIORITY}"))
        if obj.get("preemptionPolicy") is not None:
            errs += preemption_policy(obj["preemptionPolicy"], "preemptionPolicy")
        return errs

    def refuse_delete(self, name):
        return "this is a system priority class and cannot be deleted" if name in SYSTEM_CLASSES else None

    def validate_update(self, new, old):
        errs = self.validate(new)
        if new.get("value", 0) != old.get("value", 0):
            errs.append(forbidden("value", "may not be changed in an update."))
        if new.get("preemptionPolicy") != old.get("preemptionPolicy"):
            errs.append(immutable("preemptionPolicy", new.get("preemptionPolicy")))
        return errs


def _system_class_problem(name: str, value: int, global_default: bool) -> str:
    if name not in SYSTEM_CLASSES:
        return f"{name} is not a known system priority class"
    if SYSTEM_CLASSES[name] != value:
        return f"value of {name} PriorityClass must be {SYSTEM_CLASSES[name]}"
    if global_default:
        return f"globalDefault of {name} PriorityClass must be false"
    return ""


# --- shared pieces of the group specs --------------------------------------------


def _names(path: str, value: Any, fn) -> Errors:
    if not value:
        return [required(path)]
    return [invalid(path, value, m) for m in fn(value)]


def union(obj: Any, path: str, members: tuple[str, ...]) -> tuple[str | None, Errors]:
    """A one-of: (the member set, errors) with upstream's union messages."""
    chosen = [m for m in members if (obj or {}).get(m) is not None]
    listed = ", ".join(f"`{m}`" for m in members)
    if not chosen:
        return None, [invalid(path, "", f"must specify one of: {listed}")]
    if len(chosen) > 1:
        return None, [invalid(path, "{" + ", ".join(f"`{m}`" for m in chosen) + "}", f"exactly one of {listed} is required, but multiple fields are set")]
    return chosen[0], []


def scheduling_policy(policy: Any, path: str, count_field: str) -> tuple[str | None, Errors]:
    kind, errs = union(policy, path, ("basic", "gang"))
    if kind == "gang":
        n = policy["gang"].get(count_field) or 0
        if n == 0:
            errs.append(required(f"{path}.gang.{count_field}"))
        elif n < 0:
            errs.append(invalid(f"{path}.gang.{count_field}", n, "must be greater than zero"))
    return kind, errs


def topology(constraints: Any, path: str) -> Errors:
    def one(t: dict, p: str) -> Errors:
        return _names(f"{p}.key", t.get("key"), qualified_name)

    return each((constraints or {}).get("topology"), f"{path}.topology", MAX_TOPOLOGY, one)


def resource_claims(claims: Any, path: str) -> Errors:
    def one(c: dict, p: str) -> Errors:
        errs = _names(f"{p}.name", c.get("name"), dns1123_label)
        by_name, by_template = c.get("resourceClaimName"), c.get("resourceClaimTemplateName")
        if by_name is None and by_template is None:
            errs.append(invalid(p, "", "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`"))
        elif by_name is not None and by_template is not None:
            errs.append(invalid(p, "", "at most one of `resourceClaimName` or `resourceClaimTemplateName` may be specified"))
        elif by_name is not None:
            errs += _names(f"{p}.resourceClaimName", by_name, dns1123_subdomain)
        else:
            errs += _names(f"{p}.resourceClaimTemplateName", by_template, dns1123_subdomain)
        return errs

    return each_unique(claims, path, MAX_CLAIMS, one, lambda c: c.get("name"))


def group_settings(spec: dict, path: str, policy_kind: str | None) -> tuple[str | None, Errors]:
    """disruptionMode, priorityClassName and preemptionPolicy: common to groups and templates."""
    errs: Errors = []
    mode = None
    if spec.get("disruptionMode") is not None:
        mode, errs = union(spec["disruptionMode"], f"{path}.disruptionMode", ("single", "all"))
        if mode == "all" and policy_kind == "basic":
            errs.append(invalid(f"{path}.disruptionMode", "all", "`all` disruption mode may not be used with the `basic` scheduling policy"))
    if spec.get("priorityClassName"):
        errs += _names(f"{path}.priorityClassName", spec["priorityClassName"], dns1123_subdomain)
    if spec.get("preemptionPolicy") is not None:
        errs += preemption_policy(spec["preemptionPolicy"], f"{path}.preemptionPolicy")
    return mode, errs


def pod_group_fields(spec: dict, path: str) -> tuple[str | None, Errors]:
    kind, errs = scheduling_policy(spec.get("schedulingPolicy"), f"{path}.schedulingPolicy", "minCount")
    errs += topology(spec.get("schedulingConstraints"), f"{path}.schedulingConstraints")
    errs += resource_claims(spec.get("resourceClaims"), f"{path}.resourceClaims")
    mode, more = group_settings(spec, path, kind)
    return mode, errs + more


def composite_fields(spec: dict, path: str) -> tuple[str | None, Errors]:
    kind, errs = scheduling_policy(spec.get("schedulingPolicy"), f"{path}.schedulingPolicy", "minGroupCount")
    errs += topology(spec.get("schedulingConstraints"), f"{path}.schedulingConstraints")
    mode, more = group_settings(spec, path, kind)
    return mode, errs + more


def workload_ref(ref: Any, path: str) -> Errors:
    return _names(f"{path}.workloadName", ref.get("workloadName"), dns1123_subdomain) + _names(
        f"{path}.templateName", ref.get("templateName"), dns1123_label
    )


def _immutable_fields(new: dict, old: dict, path: str, fields: tuple[str, ...]) -> Errors:
    return [immutable(f"{path}.{f}", new.get(f)) for f in fields if new.get(f) != old.get(f)]


def _policy_kind(spec: dict) -> str | None:
    policy = spec.get("schedulingPolicy") or {}
    return next((k for k in ("basic", "gang") if policy.get(k) is not None), None)


def group_status(obj: Obj, condition: str) -> str:
    """upstream's printPodGroup status cell: Pending before any attempt,
    Scheduled or Unschedulable by the `condition` (whatever its reason),
    and the reason of a DisruptionTarget condition once there is one."""
    conds = {c.get("type"): c for c in (obj.get("status") or {}).get("conditions") or []}
    status = "Pending"
    if condition in conds:
        status = "Scheduled" if conds[condition].get("status") == "True" else "Unschedulable"
    if "DisruptionTarget" in conds:
        status = conds["DisruptionTarget"].get("reason", "")
    return status


def _policy_column(o: Obj) -> str:
    """Gang when the gang policy is set, else Basic (printPodGroup's)."""
    return "Gang" if ((o.get("spec") or {}).get("schedulingPolicy") or {}).get("gang") is not None else "Basic"


def _workload_column(o: Obj) -> str:
    return ((o.get("spec") or {}).get("workloadRef") or {}).get("workloadName") or "<none>"


def _group_columns(condition: str) -> list[Column]:
    """upstream's podGroupColumnDefinitions (CompositePodGroup's by analogy, with its own condition)."""
    return [
        NAME,
        Column("Policy", "string", _policy_column, "SchedulingPolicy defines the scheduling policy for this instance of the group."),
        Column("Workload", "string", _workload_column, "Name of the referenced Workload object"),
        Column("Status", "string", lambda o: group_status(o, condition), "Status of the PodGroup"),
        AGE_COLUMN,
    ]


# --- PodGroup / CompositePodGroup ----------------------------------------------


class _GroupStrategy(Strategy):
    """What PodGroups and CompositePodGroups share on update: listed spec
    fields are immutable, and which scheduling policy is set never changes."""

    immutable_spec: tuple[str, ...] = ()
    track_generation = False  # podGroupStrategy and compositePodGroupStrategy neither set nor bump it
    status_metadata = ()  # ResetObjectMetaForStatus
    status_deletion_kept = RESET_DELETION

    def prepare_for_update(self, new, old):
        drop_podgroup_fields(new.get("spec") or {}, old.get("spec"))

    def validate_update(self, new, old):
        spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
        errs = self.validate(new) + _immutable_fields(spec, old_spec, "spec", self.immutable_spec)
        if _policy_kind(spec) != _policy_kind(old_spec):
            errs.append(immutable("spec.schedulingPolicy", spec.get("schedulingPolicy")))
        return errs


class PodGroupStrategy(_GroupStrategy):
    columns = _group_columns("PodGroupInitiallyScheduled")
    immutable_spec = ("workloadRef", "schedulingConstraints", "resourceClaims", "disruptionMode", "priorityClassName", "priority", "preemptionPolicy", "parentCompositePodGroupName")

    def default(self, obj, version):
        spec = obj.setdefault("spec", {})
        spec.setdefault("disruptionMode", {"single": {}})

    def prepare_for_create(self, obj):
        drop_podgroup_fields(obj.get("spec") or {})

    def prepare_for_status_update(self, new, old):
        drop_podgroup_status_fields(new.get("status") or {}, old.get("spec"))

    def validate(self, obj):
        spec = obj.get("spec") or {}
        errs: Errors = []
        if spec.get("workloadRef") is not None:
            errs += workload_ref(spec["workloadRef"], "spec.workloadRef")
        _, more = pod_group_fields(spec, "spec")
        errs += more
        parent = spec.get("parentCompositePodGroupName")
        if parent is not None:
            errs += _names("spec.parentCompositePodGroupName", parent, dns1123_subdomain)
            if spec.get("workloadRef") is None:
                errs.append(required("spec.workloadRef", "must be set when `parentCompositePodGroupName` is set"))
        return errs

    def validate_status_update(self, new, old):
        status = new.get("status") or {}
        errs = validate_conditions(status.get("conditions"), "status.conditions")
        return errs + each_unique(
            status.get("resourceClaimStatuses"),
            "status.resourceClaimStatuses",
            MAX_CLAIMS,
            lambda s, p: _names(f"{p}.name", s.get("name"), dns1123_label)
            + (_names(f"{p}.resourceClaimName", s["resourceClaimName"], dns1123_subdomain) if s.get("resourceClaimName") is not None else []),
            lambda s: s.get("name"),
        )


class CompositePodGroupStrategy(_GroupStrategy):
    columns = _group_columns("CompositePodGroupInitiallyScheduled")
    immutable_spec = ("workloadRef", "schedulingConstraints", "disruptionMode", "priorityClassName", "priority", "preemptionPolicy", "parentCompositePodGroupName")

    def prepare_for_create(self, obj):
        drop_podgroup_fields(obj.get("spec") or {})

    def validate(self, obj):
        spec = obj.get("spec") or {}
        errs = workload_ref(spec["workloadRef"], "spec.workloadRef") if spec.get("workloadRef") is not None else [required("spec.workloadRef")]
        _, more = composite_fields(spec, "spec")
        errs += more
        if spec.get("parentCompositePodGroupName") is not None:
            errs += _names("spec.parentCompositePodGroupName", spec["parentCompositePodGroupName"], dns1123_subdomain)
        return errs

    def validate_status_update(self, new, old):
        return validate_conditions((new.get("status") or {}).get("conditions"), "status.conditions")


# --- Workload -----------------------------------------------------------------------


def _path_segment(value: str, path: str) -> Errors:
    if not value:
        return [required(path)]
    return [invalid(path, value, m) for m in path_segment_name(value)]


def controller_ref(ref: dict, path: str) -> Errors:
    errs = [invalid(f"{path}.apiGroup", ref["apiGroup"], m) for m in dns1123_subdomain(ref["apiGroup"])] if ref.get("apiGroup") else []
    return errs + _path_segment(ref.get("kind", ""), f"{path}.kind") + _path_segment(ref.get("name", ""), f"{path}.name")


class _TemplateTree:
    """Walks the template hierarchy checking names, depth and disruption nesting."""

    def __init__(self) -> None:
        self.seen: set[str] = set()
        self.errs: Errors = []

    def _name(self, t: dict, path: str) -> None:
        name = t.get("name")
        self.errs += _names(f"{path}.name", name, dns1123_label)
        if name in self.seen:
            self.errs.append(invalid(f"{path}.name", name, "must be unique across all templates of the workload"))
        self.seen.add(name)

    def pod_groups(self, items: Any, path: str, parent_mode: str | None) -> None:
        if len(items or []) > MAX_TEMPLATES:
            self.errs.append(too_many(path, len(items), MAX_TEMPLATES))
            return
        for i, t in enumerate(items or []):
            p = f"{path}[{i}]"
            self._name(t, p)
            mode, errs = pod_group_fields(t, p)
            self.errs += errs
            self._nesting(parent_mode, mode, p)

    def composites(self, items: Any, path: str, depth: int, parent_mode: str | None) -> None:
        if len(items or []) > MAX_TEMPLATES:
            self.errs.append(too_many(path, len(items), MAX_TEMPLATES))
            return
        for i, t in enumerate(items or []):
            p = f"{path}[{i}]"
            if depth > MAX_DEPTH - 1:
                self.errs.append(invalid(p, t.get("name", ""), f"the template hierarchy may be at most {MAX_DEPTH} levels deep"))
                continue
            self._name(t, p)
            mode, errs = composite_fields(t, p)
            self.errs += errs
            self._nesting(parent_mode, mode, p)
            if not t.get("compositePodGroupTemplates") and not t.get("podGroupTemplates"):
                self.errs.append(required(p, "at least one of `compositePodGroupTemplates` or `podGroupTemplates` must be set"))
            self.composites(t.get("compositePodGroupTemplates"), f"{p}.compositePodGroupTemplates", depth + 1, mode or parent_mode)
            self.pod_groups(t.get("podGroupTemplates"), f"{p}.podGroupTemplates", mode or parent_mode)

    def _nesting(self, parent: str | None, mode: str | None, path: str) -> None:
        if parent == "all" and mode == "single":
            self.errs.append(invalid(f"{path}.disruptionMode", "single", "must be `all` when a parent template uses the `all` disruption mode"))


def _strip_min_count(templates: Any) -> Any:
    out = []
    for t in templates or []:
        gang = (t.get("schedulingPolicy") or {}).get("gang")
        if gang is not None:
            t = {**t, "schedulingPolicy": {**t["schedulingPolicy"], "gang": {k: v for k, v in gang.items() if k != "minCount"}}}
        out.append(t)
    return out


class WorkloadStrategy(Strategy):
    track_generation = False  # workloadStrategy neither sets nor bumps it
    columns = [NAME, AGE_COLUMN]  # upstream's workloadColumnDefinitions

    def prepare_for_create(self, obj):
        drop_workload_fields(obj.get("spec") or {})

    def prepare_for_update(self, new, old):
        drop_workload_fields(new.get("spec") or {}, old.get("spec"))

    def validate(self, obj):
        spec = obj.get("spec") or {}
        errs: Errors = controller_ref(spec["controllerRef"], "spec.controllerRef") if spec.get("controllerRef") is not None else []
        pgs, cpgs = spec.get("podGroupTemplates"), spec.get("compositePodGroupTemplates")
        if not pgs and not cpgs:
            errs.append(invalid("spec", "", "must specify one of: `podGroupTemplates`, `compositePodGroupTemplates`"))
        elif pgs and cpgs:
            errs.append(invalid("spec", "{`podGroupTemplates`, `compositePodGroupTemplates`}", "exactly one of `podGroupTemplates`, `compositePodGroupTemplates` is required, but multiple fields are set"))
        tree = _TemplateTree()
        tree.pod_groups(pgs, "spec.podGroupTemplates", None)
        tree.composites(cpgs, "spec.compositePodGroupTemplates", 1, None)
        return errs + tree.errs

    def validate_update(self, new, old):
        spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
        errs = self.validate(new)
        if old_spec.get("controllerRef") is not None and spec.get("controllerRef") != old_spec["controllerRef"]:
            errs.append(immutable("spec.controllerRef", spec.get("controllerRef")))
        new_t, old_t = spec.get("podGroupTemplates") or [], old_spec.get("podGroupTemplates") or []
        if [t.get("name") for t in new_t] != [t.get("name") for t in old_t]:
            errs.append(immutable("spec.podGroupTemplates", new_t))
        else:
            for i, (a, b) in enumerate(zip(_strip_min_count(new_t), _strip_min_count(old_t))):
                if a != b:
                    errs.append(immutable(f"spec.podGroupTemplates[{i}]", new_t[i]))
        if spec.get("compositePodGroupTemplates") != old_spec.get("compositePodGroupTemplates"):
            errs.append(immutable("spec.compositePodGroupTemplates", spec.get("compositePodGroupTemplates")))
        return errs


BETA = ["v1beta1", "v1alpha3"]

register(
    Resource(GROUP, "priorityclasses", "PriorityClass", ["v1"], namespaced=False, short_names=("pc",), strategy=PriorityClassStrategy()),
    Resource(GROUP, "workloads", "Workload", BETA, namespaced=True, strategy=WorkloadStrategy()),
    Resource(GROUP, "podgroups", "PodGroup", BETA, namespaced=True, subresources=("status",), strategy=PodGroupStrategy()),
    Resource(GROUP, "compositepodgroups", "CompositePodGroup", ["v1alpha3"], namespaced=True, subresources=("status",), strategy=CompositePodGroupStrategy()),
)
