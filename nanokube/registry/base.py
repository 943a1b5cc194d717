"""How an API group declares its resources.

Each `registry/<group>.py` module builds `Resource` entries with a `Strategy`:
the semantic rules OpenAPI cannot state (defaults, validation, immutability),
its `kubectl get` columns, its field selectors and its version conversions.
The API server is generic over these; it never special-cases a kind.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable

from ..machinery import gofmt
from ..machinery.errors import APIError
from ..machinery.validation import (
    FieldError,
    dns1123_subdomain,
    kube_finalizer_errors,
    path_segment_name,
    validate_object_meta,
    validate_object_meta_update,
)

Obj = dict[str, Any]

#: the metadata a /status write may carry in upstream's status strategies
STATUS_META = ("labels", "annotations", "finalizers", "ownerReferences")
#: the deletion fields ResetObjectMetaForStatus copies from the stored object, and all of them
RESET_DELETION = ("deletionTimestamp",)
STORED_DELETION = ("deletionTimestamp", "deletionGracePeriodSeconds")


def AGE(obj: Obj) -> str:
    """Marker for the Age column: the table renderer fills it from its clock."""
    raise NotImplementedError


class Age(str):
    """A cell value: a timestamp the table shows as its age (a custom resource's `date` column)."""


@dataclass(frozen=True, slots=True)
class Column:
    """A server-side printing column (meta.k8s.io/v1 TableColumnDefinition)."""

    name: str
    type: str
    fn: Callable[[Obj], Any]
    description: str = ""
    format: str = ""
    priority: int = 0  # 1 = shown only with -o wide
    #: a cell without a value: built-in printers write "<none>"; a CRD's columns leave it null
    empty: Any = "<none>"


class Strategy:
    """Per-resource semantics. Subclass and override what differs.

    Objects handed to hooks are in the *storage* version except `default` and
    `convert_*`, which see the request's version. Hooks mutate in place.
    """

    #: does a create keep the `status` it was sent although /status exists (a kubelet registers
    #: its Node with its status)? Other resources start with an empty status.
    keep_status_on_create: bool = False
    name_validator: Callable[[str], list[str]] = staticmethod(dns1123_subdomain)
    #: the name check of an update; None: name_validator. Where upstream tightened a kind's name
    #: rule it skips it on update, so objects stored under the old rule can still be updated
    update_name_validator: Callable[[str], list[str]] | None = None
    #: is the metadata judged by apimachinery's generic ObjectMeta rules only, as upstream's custom
    #: resources, CRDs, APIServices and admission configuration are? Other kinds add core's finalizer-name rule
    generic_meta: bool = False
    #: are the objects unstructured (custom resources: map[string]interface{} in Go), every map of
    #: which is stored and served with its keys sorted, instead of in struct order?
    unstructured: bool = False
    #: fields (beyond metadata.name / metadata.namespace) usable in fieldSelector
    field_selectors: dict[str, Callable[[Obj], Any]] = {}
    #: may converting an object change what selectors read (a CRD's conversion webhook renames a
    #: selectable field)? A list or watch then selects on each object converted to its version.
    converts_fields: bool = False
    #: the metadata fields a fieldSelector may name (the kind's field label conversion: Namespace's
    #: and Node's leave out metadata.namespace)
    metadata_field_selectors: tuple[str, ...] = ("metadata.name", "metadata.namespace")
    #: columns for `kubectl get`; None means upstream's default NAME / CREATED AT
    columns: list[Column] | None = None
    #: the order of a listed table's rows when upstream's printer sorts them (FlowSchemas)
    table_sort_key: Callable[[Obj], Any] | None = None
    #: whether generation bumps on spec changes (objects with a spec)
    track_generation: bool = True
    #: does DELETE answer with the object (pods, services...) rather than a Status?
    return_deleted_object: bool = False
    #: may PUT create a missing object (leases, endpoints, events)?
    allow_create_on_update: bool = False
    #: may PUT leave out metadata.resourceVersion (the update then applies to what is stored)? Custom
    #: resources, CRDs and APIServices require it: "must be specified for an update"
    allow_unconditional_update: bool = True
    #: does PATCH accept strategic merge patches? (custom resources have no patch strategies)
    strategic_merge: bool = True
    #: what of metadata a write through /status (or /approval) takes from the request: a status
    #: strategy that resets spec alone lets these through; pods' keeps the stored ownerReferences,
    #: Deployments' the stored labels, ResetObjectMetaForStatus (newer kinds, custom resources) all four
    status_metadata: tuple[str, ...] = STATUS_META
    #: does a /status write's managedFields name the metadata it changed but could not keep? Upstream's
    #: field manager leaves unowned what a strategy's reset fields name; a few strategies reset
    #: metadata without naming it there (custom resources, ResourceClaims, ServiceCIDRs)
    status_owns_dropped_metadata: bool = False
    #: the deletion fields a /status write takes from the stored object rather than validating the
    #: request's: pods' status strategy clears deletionTimestamp (the update then restores the stored
    #: one), ResetObjectMetaForStatus copies it, and a strategy keeping the whole stored ObjectMeta
    #: (FlowSchemas, custom resources) copies the grace period too. Other strategies leave them to
    #: ObjectMeta's update validation, which refuses a new one as immutable
    status_deletion_kept: tuple[str, ...] = ()
    #: subresources whose writes change part of the spec (pods' ephemeralcontainers and resize):
    #: `prepare_for_subresource_update` keeps the rest, `validate_subresource_update` judges them
    spec_subresources: tuple[str, ...] = ()
    #: does `default` fill in anything of status? (pods': spec only, so a /status write, which keeps
    #: the stored object but its status, has nothing of its own for it to fill in)
    defaults_status: bool = True
    #: does `default` read and write the spec alone? (pods': a create of a spec seen before then
    #: takes it decoded and defaulted from memory, apiserver/decoded_specs.py)
    defaults_spec_only: bool = False
    #: what records the values a write is given in the store before it is written, when several
    #: API servers allocate them (apiserver/reservations.py: Services with --api-workers > 1)
    reservations: Any = None

    def columns_at(self, version: str) -> list[Column] | None:
        """A Table's columns where each version has its own (a CRD's), read on the object as served at
        `version`; None: `columns`, read on the stored object as built-in printers read the internal one."""
        return None

    def field_selectors_at(self, version: str) -> dict[str, Callable[[Obj], Any]]:
        """The fields a list or watch at `version` may select on besides the metadata ones."""
        return self.field_selectors

    def unsupported_field_label(self, label: str, version: str) -> str:
        """The 400 for a fieldSelector naming a field the kind does not offer at `version`: a kind
        with fields of its own registers a field label conversion (core's words); one without has
        apimachinery's DefaultMetaV1FieldSelectorConversion."""
        if self.field_selectors:
            return f"field label not supported: {label}"
        return f'{gofmt.quote(label)} is not a known field selector: only "metadata.name", "metadata.namespace"'

    def decode(self, obj: Obj, version: str) -> list[str] | None:
        """Drop unknown fields of a decoded body in place and return their paths; None when the
        Go-struct decoding of release-1.37's definitions (apiserver/structural.py) applies."""
        return None

    def conversion_error(self, obj: Obj, version: str) -> str | None:
        """The error converting a decoded body of `version` to storage returns, if any (upstream's
        conversions that decode an annotation): the body then cannot be handled as its kind."""
        return None

    async def prepare_conversion(self, objs: list[Obj], version: str, reuse: bool = False) -> None:
        """Converting needs I/O for some kinds (a CRD's conversion webhook): the rest layer
        awaits this with the objects `from_storage` (or `to_storage`, with the storage
        version) is about to convert, so the sync hooks find them converted. `reuse`: a
        conversion already made of the same stored object may serve (a watch event fanned
        out to many watchers); otherwise each request converts afresh."""

    def converted(self, objs: list[Obj], version: str) -> bool:
        """Whether `prepare_conversion(objs, version, reuse=True)` has nothing to do, answered without
        I/O: a watch event's objects another watch of the version had converted."""
        return True

    def returns_deleted_object(self, version: str) -> bool:
        """Whether DELETE at `version` answers with the object (return_deleted_object); a kind
        whose storage differs by version (DeviceTaintRule) says so per version."""
        return self.return_deleted_object

    def deprecation(self, version: str) -> str | None:
        """The Warning every request to `version` gets, if it is deprecated."""
        return None

    def scale_of(self, obj: Obj, unset: int | None = None) -> tuple[int, int, str] | None:
        """(spec replicas, status replicas, label selector) of the Scale subresource when it
        reads other paths than a workload's spec.replicas / status.replicas / selector (CRDs);
        spec replicas are `unset` where the object has none (None: an internal error)."""
        return None

    def set_replicas(self, obj: Obj, replicas: int) -> None:
        """What a write through /scale changes."""
        obj.setdefault("spec", {})["replicas"] = replicas

    def replicas_path(self, api_version: str = "") -> tuple[str, ...] | None:
        """The field `set_replicas` writes at `api_version` (default: the storage version), which
        a /scale writer's managedFields name; None where that version has no /scale."""
        return ("spec", "replicas")

    def default(self, obj: Obj, version: str) -> None:
        """Fill defaults, in the request's version, before validation."""

    def prepare_for_create(self, obj: Obj) -> None:
        """Reset what a create may not set (e.g. status when /status exists)."""

    def prepare_for_update(self, new: Obj, old: Obj) -> None:
        """Carry over what an update of the main resource may not change."""

    def begin_create(self, obj: Obj) -> list[FieldError]:
        """What upstream's Store.BeginCreate refuses (a Service's allocations), before validation
        runs: reported alone, ahead of the metadata's errors. May raise an APIError."""
        return []

    def begin_update(self, new: Obj, old: Obj) -> list[FieldError]:
        """As begin_create, for Store.BeginUpdate."""
        return []

    def validate(self, obj: Obj) -> list[FieldError]:
        return []

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        return self.validate(new)

    def validation_costly(self, obj: Obj, size: int) -> bool:
        """Whether validating `obj` (`size` bytes of JSON, 0 where not known) may hold the event loop
        long enough to run in a worker thread however small the object is (asked of unstructured
        kinds only: a built-in kind's validation may allocate, and stays on the loop)."""
        return False

    def warnings_on_create(self, obj: Obj) -> list[str]:
        """Upstream's WarningsOnCreate: what a valid create is warned about (Warning headers), in a
        new list; runs after validation, dry runs included."""
        return []

    def warnings_on_update(self, new: Obj, old: Obj) -> list[str]:
        """Upstream's WarningsOnUpdate, for an update of the main resource or its /scale."""
        return []

    def prepare_for_status_update(self, new: Obj, old: Obj) -> None:
        """Restore what a write through /status may not clear, before its validation (`new` is
        the stored object with the written status; replace parts of it, change none in place)."""

    def validate_status_update(self, new: Obj, old: Obj) -> list[FieldError]:
        return []

    def warnings_on_status_update(self, new: Obj, old: Obj) -> list[str]:
        """The status strategy's WarningsOnUpdate, for a write through /status."""
        return []

    def prepare_for_approval_update(self, new: Obj, old: Obj) -> None:
        """As prepare_for_status_update, for a write through /approval."""

    def prepare_for_subresource_update(self, subresource: str, new: Obj, old: Obj) -> Obj:
        """For a write through one of `spec_subresources`: the object to store, what the request
        may change of it taken from `new`, the rest from `old` (neither changed in place)."""
        return new

    def validate_subresource_update(self, subresource: str, new: Obj, old: Obj) -> list[FieldError]:
        """Writes through one of `spec_subresources`, after the metadata's update checks."""
        return []

    def validate_approval_update(self, new: Obj, old: Obj) -> list[FieldError]:
        """Writes through /approval (CertificateSigningRequest conditions)."""
        return []

    def validate_finalize(self, new: Obj, old: Obj) -> list[FieldError]:
        """Writes through /finalize (namespaces' spec.finalizers)."""
        return []

    def release(self, obj: Obj) -> None:
        """Free what prepare_for_create allocated (a Service's cluster IP), after
        the object is gone or its create failed."""

    def restore(self, objs: list[Obj], replace: bool = False) -> None:
        """Rebuild allocation state from stored objects: all of them at startup (`replace`: forget
        what the strategy held before), or some more later."""

    def own(self) -> Strategy:
        """The strategy of one server's resource: this one, shared by every server in the process,
        unless it keeps state of the server's (a Service's allocators), when each gets a fresh one."""
        return self

    def finish_update(self, new: Obj, old: Obj, written: bool) -> None:
        """After an update prepare_for_update prepared: stored (or deleted) when `written`; refused,
        failed or a dry run when not (a Service frees what only the old one held, or only the new)."""

    def blocks_deletion(self, obj: Obj) -> bool:
        """Beyond metadata.finalizers, does something keep a deleting object
        (a namespace's spec.finalizers)?"""
        return False

    def refuse_delete(self, name: str) -> str | None:
        """Why the resource's REST Delete refuses `name` outright, before looking it up (a system
        PriorityClass); None to delete as usual. A deletecollection does not ask, as upstream's
        store deletes each item past the resource's own Delete."""
        return None

    def prepare_for_delete(self, obj: Obj) -> None:
        """Mark a deleting object that lingers (a namespace turns Terminating)."""

    def graceful_delete_seconds(self, obj: Obj, requested: int | None) -> int:
        """Grace period before the object is really removed (pods on a node)."""
        return 0

    def to_storage(self, obj: Obj, version: str) -> Obj:
        """Convert a request object at `version` to the storage version."""
        return obj

    def from_storage(self, obj: Obj, version: str) -> Obj:
        """Convert a stored object to `version` (return a new dict if changed)."""
        return obj


#: the storage prefixes kube-apiserver's storage factory renames (its SpecialDefaultResourcePrefixes)
_PREFIX_RENAMES = {("", "replicationcontrollers"): "controllers", ("", "endpoints"): "services/endpoints",
                   ("", "nodes"): "minions", ("", "services"): "services/specs",
                   ("networking.k8s.io", "ingresses"): "ingress"}
#: groups served by the apiextensions and aggregator servers, whose keys are group/resource
_GROUP_PREFIXED = frozenset({"apiextensions.k8s.io", "apiregistration.k8s.io"})


@dataclass(slots=True)
class Resource:
    group: str
    plural: str
    kind: str
    versions: list[str]  # served versions, preferred first
    namespaced: bool
    storage_version: str = ""
    singular: str = ""
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()  # status, scale, binding, eviction, log, approval
    strategy: Strategy = field(default_factory=Strategy)
    #: (group, plural) whose storage this resource shares, e.g. events.k8s.io
    #: events live in core events' keys and convert to and from that shape
    storage_alias: tuple[str, str] | None = None
    verbs: tuple[str, ...] = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
    #: a list's kind: <kind>List, or a CRD's accepted listKind
    list_kind: str = ""

    def __post_init__(self) -> None:
        self.storage_version = self.storage_version or self.versions[0]
        self.singular = self.singular or self.kind.lower()
        self.list_kind = self.list_kind or self.kind + "List"

    @property
    def group_resource(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def api_version(self, version: str) -> str:
        return f"{self.group}/{version}" if self.group else version

    @property
    def storage_resource(self) -> str:
        if self.storage_alias:
            g, p = self.storage_alias
            return f"{p}.{g}" if g else p
        return self.group_resource

    def key_prefix(self, namespace: str | None = None) -> str:
        if self.namespaced and namespace:
            return f"/registry/{self.storage_resource}/{namespace}/"
        return f"/registry/{self.storage_resource}/"

    def key(self, namespace: str | None, name: str) -> str:
        if self.namespaced:
            return f"/registry/{self.storage_resource}/{namespace}/{name}"
        return f"/registry/{self.storage_resource}/{name}"

    def etcd_key(self, key: str) -> str:
        """`key` (one of key()'s) as kube-apiserver lays it out in etcd, which its StorageErrors name:
        built-in resources under the resource's storage prefix (a few historical ones renamed), the
        apiextensions and aggregator servers' resources and custom resources under group/resource.
        nanokube's own keys stay <resource>.<group>; this is only what the messages quote."""
        group, plural = self.storage_alias or (self.group, self.plural)
        if self.strategy.unstructured or group in _GROUP_PREFIXED:
            prefix = f"{group}/{plural}"
        else:
            prefix = _PREFIX_RENAMES.get((group, plural), plural)
        return f"/registry/{prefix}/{key[len(self.key_prefix()):]}"

    def validate_create(self, obj: Obj) -> list[FieldError]:
        if errs := self.strategy.begin_create(obj):
            return errs
        meta = obj.get("metadata") or {}
        errs = validate_object_meta(meta, self.namespaced, self.strategy.name_validator)
        if not self.strategy.generic_meta:
            errs += kube_finalizer_errors(meta)
        return _after(errs, self.strategy.validate, obj)

    def validate_update(self, new: Obj, old: Obj, meta_errs: list[FieldError] | None = None) -> list[FieldError]:
        """`meta_errs`: `update_meta_errors(new, old)` where worked out already (for a large object, in a
        worker thread: the strategy's checks may allocate, as a Service's begin_update does, and stay
        on the loop)."""
        if errs := self.strategy.begin_update(new, old):
            return errs
        errs = self.update_meta_errors(new, old) if meta_errs is None else list(meta_errs)
        return _after(errs, self.strategy.validate_update, new, old)

    def update_meta_errors(self, new: Obj, old: Obj) -> list[FieldError]:
        """An update's metadata checks (pure: they read the objects only)."""
        meta = new.get("metadata") or {}
        errs = validate_object_meta(meta, self.namespaced, self.strategy.update_name_validator or self.strategy.name_validator)
        errs += validate_object_meta_update(meta, old.get("metadata") or {})
        if not self.strategy.generic_meta:
            errs += kube_finalizer_errors(meta)
        return errs

    def validate_spec_subresource_update(self, subresource: str, new: Obj, old: Obj) -> list[FieldError]:
        """A write through one of the strategy's `spec_subresources`: the metadata's update checks,
        as any update's, then the strategy's for that subresource."""
        meta = new.get("metadata") or {}
        errs = validate_object_meta(meta, self.namespaced, self.strategy.update_name_validator or self.strategy.name_validator)
        errs += validate_object_meta_update(meta, old.get("metadata") or {})
        if not self.strategy.generic_meta:
            errs += kube_finalizer_errors(meta)
        return errs + self.strategy.validate_subresource_update(subresource, new, old)

    def validate_subresource_meta(self, new: Obj, old: Obj) -> list[FieldError]:
        """The metadata checks of a write through /status, /approval or /finalize: upstream's
        BeforeUpdate validates every update's ObjectMeta (its name as a path segment only), and
        core's status validators add the finalizer-name rule."""
        meta = new.get("metadata") or {}
        errs = validate_object_meta(meta, self.namespaced, path_segment_name)
        errs += validate_object_meta_update(meta, old.get("metadata") or {})
        if not self.strategy.generic_meta:
            errs += kube_finalizer_errors(meta)
        return errs


def _after(errs: list[FieldError], validate, *objs: Obj) -> list[FieldError]:
    """`errs` and the strategy's errors. A strategy may raise an APIError for what is not a field's
    error: the metadata's errors come first then."""
    try:
        return errs + validate(*objs)
    except APIError:
        if errs:
            return errs
        raise


_RESOURCES: list[Resource] = []


def register(*resources: Resource) -> None:
    _RESOURCES.extend(resources)


def all_resources() -> list[Resource]:
    """Every served resource, for one server (its strategies' state its own); importing the group
    modules registers them."""
    from . import GROUP_MODULES  # noqa: F401  (import side effect)

    return [r if (s := r.strategy.own()) is r.strategy else replace(r, strategy=s) for r in _RESOURCES]
