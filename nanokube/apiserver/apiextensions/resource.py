"""A CRD as a served `Resource`: the custom resource's strategy (customresource/strategy.go).

Each established CRD becomes one `registry.base.Resource` whose strategy carries
the CRD's schemas, so custom objects go through the same GenericREST, watch cache,
patch, apply, table and discovery code as built-in kinds. Per version it knows:
pruning and defaults (on write and on read), OpenAPI validation, CEL rules
(`cel_rules`), printer columns, selectable fields, the scale paths and
the deprecation warning. `conversion.strategy: None` rewrites only apiVersion;
`Webhook` converts through `conversion` ahead of the sync hooks (`prepare_conversion`).
"""

from __future__ import annotations

import copy
import functools
import re
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Callable

import orjson

from ... import schema as schemas
from ...machinery import errors, gofmt
from ...machinery.conditions import is_condition_true
from ...machinery.fieldorder import go_sorted
from ...machinery.validation import FieldError, custom_finalizer_warnings, invalid
from ...registry.base import AGE, STORED_DELETION, Age, Column, Obj, Resource, Strategy
from .. import structural
from ..patch import apply as ssa
from ..rest import version_priority
from . import cel_rules, defaulting, jsonpath, validator

_META = "io.k8s.apimachinery.pkg.apis.meta.v1."
#: defaulted copies of stored objects that lacked a default when read, remembered by the
#: stored object's identity (cached objects are immutable); others are served as stored
READ_MEMO_SIZE = 4096
NAME_COLUMN_DOC = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"
#: the request's ratcheting warnings: [(the object validated, the errors of the rules ratcheting made
#: warnings of)], for the warnings_on_* hook the rest layer calls once validation passed. The request's
#: own list, put in its task's context by prepare_for_update (on the event loop, ahead of validation):
#: a validation in a worker thread, whose context is a copy, fills that same list, and concurrent
#: updates never see each other's (kube-apiserver adds them to the request context's warnings)
_RATCHETED: ContextVar[list[tuple[Obj, list[str]]] | None] = ContextVar("ratcheted", default=None)
#: the estimated CEL cost (cel_rules.CompiledRules.cost_for) past which a custom resource is validated
#: in a worker thread however small: rules that build lists run at ~1.5-2 us a unit here
#: (`lists.range(100).map(x, lists.range(100))`: 12,413 units, 18 ms), so at most ~10 ms of the loop
OFF_LOOP_COST = 5_000
AGE_COLUMN_DOC = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists."


def served_versions(crd: Obj) -> list[str]:
    vs = [v["name"] for v in (crd.get("spec") or {}).get("versions") or [] if v.get("served")]
    return sorted(vs, key=version_priority)


def deprecation_warning(crd: Obj, v: dict[str, Any]) -> str:
    """Upstream's defaultDeprecationWarning: name a newer served, non-deprecated version if any."""
    if v.get("deprecationWarning") is not None:
        return v["deprecationWarning"]
    spec = crd["spec"]
    kind = spec["names"]["kind"]
    msg = f"{spec['group']}/{v['name']} {kind} is deprecated"
    newer = [x["name"] for x in spec.get("versions") or [] if x.get("served") and not x.get("deprecated")
             and version_priority(x["name"]) < version_priority(v["name"])]
    if newer:
        msg += f"; use {spec['group']}/{sorted(newer, key=version_priority)[0]} {kind}"
    return msg


_GO_JSON_ESCAPES = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026",
                                  "\u2028": "\\u2028", "\u2029": "\\u2029"})


def _cell(path: jsonpath.Path, typ: str) -> Callable[[Obj], Any]:
    """A column's cell as upstream's table convertor makes it: the first value the path finds
    (one of `[*]`'s many), kept only when it is of the column's type (cellForJSONValue: an
    integer column truncates a number, a number column takes an integer; anything else is
    null, which kubectl prints as an empty cell); a string column prints any value, as the
    JSONPath printer does, an explicit null as its "<no value>"."""
    def fn(obj: Obj) -> Any:
        found = jsonpath.find(obj, path)
        if not found:
            return None
        v = found[0]
        if v is None:
            return "<no value>" if typ == "string" else None
        number = isinstance(v, (int, float)) and not isinstance(v, (bool, jsonpath.Byte))  # (a uint8 is no int64)
        if typ == "string":
            if isinstance(v, (dict, list)):  # json.Marshal: keys sorted, HTML characters escaped
                return orjson.dumps(v, option=orjson.OPT_SORT_KEYS).decode().translate(_GO_JSON_ESCAPES)
            if isinstance(v, bool):
                return "true" if v else "false"
            return v if isinstance(v, str) else str(v) if isinstance(v, int) else gofmt.format_float(v)
        if typ == "date":
            return Age(v) if isinstance(v, str) else None
        if typ == "integer":
            return int(v) if number else None
        if typ == "number":
            return v if number else None
        if typ == "boolean":
            return v if isinstance(v, bool) else None
        return None
    return fn


def printer_columns(version: dict[str, Any]) -> list[Column]:
    """Table columns of one version: Name, then the CRD's columns (or Age when it has none), up to
    the first whose path the table cannot parse (tableconvertor.New returns the columns it built
    before such a one, which the CRD handler serves)."""
    cols = [Column("Name", "string", lambda o: o["metadata"]["name"], NAME_COLUMN_DOC, "name")]
    declared = version.get("additionalPrinterColumns")
    if not declared:
        return cols + [Column("Age", "date", AGE, AGE_COLUMN_DOC)]
    for c in declared:
        try:
            path = jsonpath.compile_path(c["jsonPath"])
        except jsonpath.JSONPathError:
            break
        if c["jsonPath"].strip("{}") == ".metadata.creationTimestamp" and c.get("type") == "date":
            fn = AGE
        else:
            fn = _cell(path, c.get("type", "string"))
        cols.append(Column(c["name"], c.get("type", "string"), fn, c.get("description", ""), c.get("format", ""),
                           c.get("priority", 0), empty=None))
    return cols


def _selector(path: jsonpath.Path) -> Callable[[Obj], Any]:
    def fn(obj: Obj) -> Any:
        found = jsonpath.find(obj, path)
        return found[0] if found else ""
    return fn


@dataclass
class VersionInfo:
    name: str
    schema: dict[str, Any]
    has_defaults: bool
    columns: list[Column]
    field_selectors: dict[str, Callable[[Obj], Any]]
    deprecation: str | None
    rules: Any = None  # cel_rules.CompiledRules or None
    scale: dict[str, Any] | None = None
    status: bool = False


def _version_info(crd: Obj, v: dict[str, Any]) -> VersionInfo:
    schema = (v.get("schema") or {}).get("openAPIV3Schema") or {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    subs = v.get("subresources") or {}
    selectors = {}
    for f in v.get("selectableFields") or []:
        jp = f["jsonPath"]
        selectors[jp.lstrip(".")] = _selector(jsonpath.compile_path(jp))
    rules, _ = cel_rules.compile_rules(schema, "", preexisting=cel_rules.STORED)
    return VersionInfo(
        name=v["name"], schema=schema, has_defaults=defaulting.has_defaults(schema),
        columns=printer_columns(v), field_selectors=selectors,
        deprecation=deprecation_warning(crd, v) if v.get("deprecated") else None, rules=rules,
        scale=subs.get("scale") if isinstance(subs.get("scale"), dict) else None, status="status" in subs,
    )


@functools.cache
def _object_meta_fields() -> frozenset[str]:
    return frozenset(schemas.definitions()[f"{_META}ObjectMeta"]["properties"])


_SEGMENT = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def _value_at(obj: Any, path: str) -> tuple[bool, Any]:
    """The value at a field error's path (`spec.a[0].b`), if there is one."""
    cur = obj
    for name, index in _SEGMENT.findall(path):
        if index:
            if not isinstance(cur, list) or int(index) >= len(cur):
                return False, None
            cur = cur[int(index)]
        elif isinstance(cur, dict) and name in cur:
            cur = cur[name]
        else:
            return False, None
    return True, cur


def _unchanged(err: FieldError, new: Obj, old: Obj) -> bool:
    """Validation ratcheting (CRDValidationRatcheting, GA): an update may keep a value the
    schema no longer accepts, as long as it does not change it (for a missing required
    field, as long as the object that lacks it is unchanged; for a junctor's error, printed at
    the root, as long as the node whose schema holds the junctor is unchanged)."""
    if isinstance(err, validator.JunctorError):
        path = err.node
    else:
        path = err.field.rpartition(".")[0] if err.reason == "FieldValueRequired" else err.field
    return bool(path) and _value_at(new, path) == _value_at(old, path)


def _split_path(path: str) -> list[str]:
    """A scale path's fields as the scale subresource splits it (splitReplicasPath): at each period
    after the leading one, nothing trimmed (`.spec.replicas ` names the field "replicas ")."""
    return path.removeprefix(".").split(".")


def _get_path(obj: Obj, path: str) -> tuple[bool, Any]:
    cur: Any = obj
    for step in _split_path(path):
        if not isinstance(cur, dict) or step not in cur:
            return False, None
        cur = cur[step]
    return True, cur


def _set_path(obj: Obj, path: str, value: Any) -> None:
    steps = _split_path(path)
    cur = obj
    for name in steps[:-1]:
        nxt = cur.get(name)
        if not isinstance(nxt, dict):
            nxt = cur[name] = {}
        cur = nxt
    cur[steps[-1]] = value


def _go_value(v: Any) -> str:
    """fmt's %v of a decoded JSON value, as unstructured's accessor errors print it."""
    if v is None:
        return "<nil>"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return gofmt.format_float(v)
    return str(v) if isinstance(v, (int, str)) else orjson.dumps(v).decode()


def _go_type(v: Any) -> str:
    """fmt's %T of a decoded JSON value."""
    if v is None:
        return "<nil>"
    if isinstance(v, bool):
        return "bool"
    return {str: "string", int: "int64", float: "float64", list: "[]interface {}"}.get(
        type(v), "map[string]interface {}")


def _nested(obj: Obj, path: str, want: type) -> tuple[Any, str | None]:
    """unstructured.NestedInt64 / NestedString at a CRD's `.a.b` path: the value (None where the
    path leads nowhere), or the accessor error where a step or the value has another type."""
    steps = path.lstrip(".").split(".")
    cur: Any = obj
    for i, name in enumerate(steps):
        if not isinstance(cur, dict):
            at = "." + ".".join(steps[:i])
            return None, f"{at} accessor error: {_go_value(cur)} is of the type {_go_type(cur)}, expected map[string]interface{{}}"
        if name not in cur:
            return None, None
        cur = cur[name]
    if not isinstance(cur, want) or isinstance(cur, bool):
        return None, f"{path} accessor error: {_go_value(cur)} is of the type {_go_type(cur)}, expected {'int64' if want is int else 'string'}"
    return cur, None


def _scale_errors(obj: Obj, scale: dict[str, Any] | None, spec: bool) -> list[FieldError]:
    """customResourceValidator's ValidateScaleSpec (`spec`) and ValidateScaleStatus: the replicas
    paths hold integers from 0 to MaxInt32 and the label selector path a string, each error at
    the path as the CRD names it (`.spec.replicas`)."""
    if scale is None:
        return []
    errs = []
    paths = ([scale.get("specReplicasPath", ".spec.replicas")] if spec else []) + [
        scale.get("statusReplicasPath", ".status.replicas")]
    for path in paths:
        n, problem = _nested(obj, path, int)
        if problem:
            errs.append(invalid(path, 0, problem))
        elif n is not None and n < 0:
            errs.append(invalid(path, n, "should be a non-negative integer"))
        elif n is not None and n > 2147483647:
            errs.append(invalid(path, n, "should be less than or equal to 2147483647"))
    if scale.get("labelSelectorPath"):
        _, problem = _nested(obj, scale["labelSelectorPath"], str)
        if problem:
            errs.append(invalid(scale["labelSelectorPath"], "", problem))
    return errs


def _in_go_order(obj: Obj) -> Obj:
    """`obj` with every map sorted (`go_sorted`), as a custom resource is served. What the watch cache
    holds is so already (stored sorted, decoded so), which its top level and metadata show at the cost
    of a glance; an object still being written (a dry run's, an unchanged update's answer) is not."""
    prev = ""
    for k in obj:
        if k < prev:
            return go_sorted(obj)
        prev = k
    md = obj.get("metadata")
    if type(md) is dict:
        prev = ""
        for k in md:
            if k < prev:
                return go_sorted(obj)
            prev = k
    return obj


class CustomResourceStrategy(Strategy):
    strategic_merge = False
    generic_meta = True
    unstructured = True
    allow_unconditional_update = False
    #: a /status write takes only .status from the request (status_strategy.go), whose reset
    #: fields name spec alone
    status_metadata = ()
    status_deletion_kept = STORED_DELETION
    status_owns_dropped_metadata = True


    def columns_at(self, version: str) -> list[Column] | None:
        """The version's own printer columns: upstream serves each version from a storage whose table
        convertor is that version's, given the object converted to it."""
        info = self.versions.get(version)
        return info.columns if info is not None else None

    def field_selectors_at(self, version: str) -> dict[str, Callable[[Obj], Any]]:
        """The version's own selectableFields, as the CR converter keeps them per group version (read
        on the object converted to the version where a webhook converts it: `converts_fields`)."""
        info = self.versions.get(version)
        return info.field_selectors if info is not None else self.field_selectors

    def unsupported_field_label(self, label: str, version: str) -> str:
        return f"field label not supported: {label}"
    def __init__(self, crd: Obj, group: str, plural: str, kind: str, storage: str) -> None:
        self.crd = crd
        self.group, self.plural, self.kind, self.storage = group, plural, kind, storage
        self.versions = {v["name"]: _version_info(crd, v) for v in crd["spec"]["versions"] if v.get("served") or v.get("storage")}
        st = self.versions[storage]
        self.columns = st.columns
        self.field_selectors = st.field_selectors
        # the CR converter's ConvertFieldLabel: metadata.namespace only where objects have one
        if crd["spec"].get("scope") != "Namespaced":
            self.metadata_field_selectors = ("metadata.name",)
        self.terminating = bool((crd.get("metadata") or {}).get("deletionTimestamp"))
        self._read_memo: dict[int, tuple[Obj, str, Obj]] = {}
        self.webhook = ((crd["spec"].get("conversion") or {}).get("strategy")) == "Webhook"
        self.converts_fields = self.webhook
        #: (id(object), apiVersion) -> (object, the webhook's conversion of it)
        self._converted: dict[tuple[int, str], tuple[Obj, Obj]] = {}
        #: may a version's rules cost past OFF_LOOP_COST (their static estimate)? Else no write asks further
        self._costly = any(i.rules is not None and i.rules.cost > OFF_LOOP_COST for i in self.versions.values())

    # --- decoding and defaults -------------------------------------------------------

    def _info(self, obj_or_version: Obj | str) -> VersionInfo:
        v = obj_or_version if isinstance(obj_or_version, str) else str(obj_or_version.get("apiVersion", "")).rpartition("/")[2]
        return self.versions.get(v) or self.versions[self.storage]

    def decode(self, obj: Obj, version: str) -> list[str] | None:
        """Unknown fields: metadata's are those ObjectMeta lacks, then the schema's, then those
        embedded resources' metadata lack (sorted, as objectmeta.Coerce sorts them). Metadata of
        the wrong types, the root's or an embedded resource's, is a 400, as upstream's decoder
        fails to unmarshal it into an ObjectMeta."""
        md = obj.get("metadata")
        unknown = []
        if isinstance(md, dict):
            errs = structural.definition_errors(md, f"{_META}ObjectMeta")
            if errs:
                raise errors.bad_request(structural.decode_error_message(self.kind, version, errs[0]))
            unknown = [f"metadata.{k}" for k in md if k not in _object_meta_fields()]
            for path in unknown:
                del md[path[len("metadata."):]]
        schema = self._info(version).schema
        unknown += defaulting.prune(obj, schema)
        if not ssa.APPLIED.get():  # an apply's merged object is not decoded: validation sees its nulls
            defaulting.prune_nulls(obj, schema)
        if (bad := validator.coerce_error(obj, schema)) is not None:
            raise errors.bad_request(structural.decode_error_message(self.kind, version, str(bad)))
        return unknown + sorted(defaulting.prune_embedded_metadata(obj, schema, _object_meta_fields()))

    def default(self, obj: Obj, version: str) -> None:
        info = self._info(version)
        if info.has_defaults:  # decode dropped the nulls no default fills (an apply's are left to validation)
            defaulting.default(obj, info.schema, drop_nulls=False)

    async def prepare_conversion(self, objs: list[Obj], version: str, reuse: bool = False) -> None:
        """`conversion.strategy: Webhook`: convert what is not yet at `version` in one
        ConversionReview, for to_storage/from_storage to pick up. Each request asks the webhook
        again, as kube-apiserver does, so a redeployed or failing webhook shows on the next read;
        only `reuse` (one watch event sent to many watchers) takes a conversion already made."""
        want = f"{self.group}/{version}"
        todo = self._unconverted(objs, want, reuse)
        if not todo:
            return
        from .conversion import ConversionError, convert, status_error

        try:
            out = await convert(self.crd, todo, want)
        except ConversionError as e:
            raise status_error(e) from None
        if len(self._converted) > 4096:
            self._converted.clear()
        for o, c in zip(todo, out):
            self._converted[(id(o), want)] = (o, go_sorted(c))  # the webhook's order is not Go's

    def converted(self, objs: list[Obj], version: str) -> bool:
        return not self._unconverted(objs, f"{self.group}/{version}", True)

    def _unconverted(self, objs: list[Obj], want: str, reuse: bool) -> list[Obj]:
        """What of `objs` the webhook has to convert to apiVersion `want`."""
        if not self.webhook:
            return []
        return [o for o in objs if o.get("apiVersion") != want and not (
            reuse and (hit := self._converted.get((id(o), want))) is not None and hit[0] is o)]

    def _webhook_converted(self, obj: Obj, version: str) -> Obj:
        hit = self._converted.get((id(obj), f"{self.group}/{version}"))
        return hit[1] if hit is not None and hit[0] is obj else obj

    def to_storage(self, obj: Obj, version: str) -> Obj:
        """The object at the storage version. One converted from another version is pruned by the
        storage version's schema, as upstream's storage codec prunes whatever it converts: a field
        only the request's version declares is not stored."""
        if version == self.storage:
            obj["apiVersion"] = f"{self.group}/{self.storage}"
            return obj
        if self.webhook:
            obj = self._webhook_converted(obj, self.storage)
        else:
            obj["apiVersion"] = f"{self.group}/{self.storage}"
        defaulting.prune(obj, self._info(self.storage).schema)
        return obj

    def from_storage(self, obj: Obj, version: str) -> Obj:
        """Conversion to the version asked for, pruned by its schema when converted (as on the
        way in), then read-time defaults and pruning: a schema change shows on objects written
        before it. An object converts from the version it was stored at, which is an earlier
        storage version for one written before the CRD's storage version changed."""
        converted = obj.get("apiVersion") != f"{self.group}/{version}"
        if self.webhook and converted:
            obj = self._webhook_converted(obj, version)
        info = self._info(version)
        if not info.has_defaults and not converted:
            return _in_go_order(obj)
        hit = self._read_memo.get(id(obj))
        if hit is not None and hit[0] is obj and hit[1] == version:
            return hit[2]
        out = _in_go_order(obj)
        if (converted and defaulting.prune(obj, info.schema, drop=False)) or (
                info.has_defaults and defaulting.lacks_defaults(obj, info.schema)):
            out = copy.deepcopy(obj)
            defaulting.prune(out, info.schema)
            defaulting.default(out, info.schema)
            out = go_sorted(out)  # defaults went in after the keys there
        if len(self._read_memo) >= READ_MEMO_SIZE:
            self._read_memo.clear()
        self._read_memo[id(obj)] = (obj, version, out)
        return out

    # --- create / update -----------------------------------------------------------

    def prepare_for_create(self, obj: Obj) -> None:
        if self.terminating:  # crdHandler's serveResource: a 405 naming the verb, its message replaced
            err = errors.method_not_supported(self.group, self.plural, "create")
            err.message = "create not allowed while custom resource definition is terminating"
            raise err

    def prepare_for_update(self, new: Obj, old: Obj) -> None:
        _RATCHETED.set([])
        if not self._info(self.storage).status and new.get("status") != old.get("status") \
                and (old.get("metadata") or {}).get("generation") is not None:
            new["metadata"]["generation"] = old["metadata"]["generation"] + 1

    def _validate(self, obj: Obj, old: Obj | None, spec: bool = True) -> list[FieldError]:
        info = self._info(obj)
        body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")}
        if (info.schema.get("properties") or {}).get("metadata"):
            # the schema's metadata holds only name and generateName restrictions (a CRD may set no
            # others): upstream validates the whole object, so the object's must meet them
            md = obj.get("metadata") or {}
            body["metadata"] = {k: md[k] for k in ("name", "generateName") if k in md}
        errs, later = validator.validate_passes(body, {**info.schema, "required": [
            r for r in info.schema.get("required") or [] if r not in ("apiVersion", "kind", "metadata")]})
        if old is not None:
            errs = [e for e in errs if not _unchanged(e, obj, old)]
            later = [e for e in later if not _unchanged(e, obj, old)]
        # customResourceValidator's scale checks (not ratcheted) follow the schema's, ahead of the
        # strategy's embedded-resource and list-type passes
        errs += _scale_errors(obj, info.scale, spec) + later
        if info.rules is not None:
            if cel_rules.has_blocking_errors(errs):
                errs.append(cel_rules.not_checked_error())
            else:
                ratcheted: list[str] = []
                errs.extend(info.rules.validate(obj, old, ratcheted))
                kept = _RATCHETED.get()
                if kept is None:  # validated outside an update's request (no prepare_for_update ran)
                    _RATCHETED.set(kept := [])
                kept[:] = [(obj, ratcheted)] if ratcheted else []
        return errs

    @staticmethod
    def _ratchet_warnings(new: Obj) -> list[str]:
        """The errors of rules ratcheted on `new`'s unchanged values: upstream's CEL validator adds
        them to the request's warnings."""
        kept = _RATCHETED.get()
        if not kept:
            return []
        obj, texts = kept.pop()
        return texts if obj is new else []

    def validate(self, obj: Obj) -> list[FieldError]:
        return self._validate(obj, None)

    def validation_costly(self, obj: Obj, size: int) -> bool:
        """Whether the rules of `obj`'s version may cost past OFF_LOOP_COST on an object of `size`
        bytes (an expensive rule holds the loop whatever the object: seconds for one accepted
        under upstream's limits)."""
        if not self._costly:
            return False
        rules = self._info(obj).rules
        return rules is not None and rules.cost_for(size) > OFF_LOOP_COST

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        return self._validate(new, old)

    def prepare_for_status_update(self, new: Obj, old: Obj) -> None:
        _RATCHETED.set([])

    def validate_status_update(self, new: Obj, old: Obj) -> list[FieldError]:
        return self._validate(new, old, spec=False)

    def warnings_on_create(self, obj: Obj) -> list[str]:
        return custom_finalizer_warnings(obj.get("metadata") or {}, None)

    def warnings_on_update(self, new: Obj, old: Obj) -> list[str]:
        return self._ratchet_warnings(new) + custom_finalizer_warnings(new.get("metadata") or {},
                                                                      old.get("metadata") or {})

    def warnings_on_status_update(self, new: Obj, old: Obj) -> list[str]:
        return self._ratchet_warnings(new)

    # --- scale -----------------------------------------------------------------------

    def scale_of(self, obj: Obj, unset: int | None = None) -> tuple[int, int, str]:
        """Read at the paths of the object's own version, as each version's /scale is served
        from the object converted to it (versions may name other paths)."""
        sc = self._info(obj).scale or {}
        found, spec = _get_path(obj, sc.get("specReplicasPath", ".spec.replicas"))
        if not found and unset is None:
            raise errors.internal(f"the spec replicas field {sc.get('specReplicasPath')!r} does not exist".replace("'", '"'))
        if not found:
            spec = unset
        _, status = _get_path(obj, sc.get("statusReplicasPath", ".status.replicas"))
        selector = ""
        if sc.get("labelSelectorPath"):
            _, sel = _get_path(obj, sc["labelSelectorPath"])
            selector = sel if isinstance(sel, str) else ""
        return spec, status if isinstance(status, int) else 0, selector

    def set_replicas(self, obj: Obj, replicas: int) -> None:
        _set_path(obj, (self._info(obj).scale or {}).get("specReplicasPath", ".spec.replicas"), replicas)

    def replicas_path(self, api_version: str = "") -> tuple[str, ...] | None:
        info = self.versions.get(api_version.rpartition("/")[2] or self.storage)
        if info is None or info.scale is None:
            return None
        return tuple(_split_path(info.scale.get("specReplicasPath", ".spec.replicas")))

    def deprecation(self, version: str) -> str | None:
        info = self.versions.get(version)
        return info.deprecation if info else None


def resource_for(crd: Obj) -> Resource | None:
    """The Resource a CRD serves, under its accepted names; None until its names are accepted."""
    spec, st = crd.get("spec") or {}, crd.get("status") or {}
    names = st.get("acceptedNames") or {}
    if not names.get("plural") or not names.get("kind"):
        return None
    conds = st.get("conditions")
    if not (is_condition_true(conds, "NamesAccepted") or is_condition_true(conds, "Established")):
        return None
    versions = served_versions(crd)
    storage = next((v["name"] for v in spec.get("versions") or [] if v.get("storage")), None)
    if not versions or storage is None:
        return None
    subs: list[str] = []
    for v in spec["versions"]:
        for s in ("status", "scale"):
            if s in (v.get("subresources") or {}) and s not in subs:
                subs.append(s)
    strategy = CustomResourceStrategy(crd, spec["group"], names["plural"], names["kind"], storage)
    return Resource(
        spec["group"], names["plural"], names["kind"], versions, namespaced=spec.get("scope") == "Namespaced",
        storage_version=storage, singular=names.get("singular") or names["kind"].lower(),
        short_names=tuple(names.get("shortNames") or ()), categories=tuple(names.get("categories") or ()),
        subresources=tuple(subs), strategy=strategy, list_kind=names.get("listKind") or "",
    )


# --- OpenAPI definitions ----------------------------------------------------------------


def definition_prefix(group: str) -> str:
    """Upstream names a CRD kind's definition by its reversed group: io.x-k8s.leaderworkerset.v1.LeaderWorkerSet."""
    return ".".join(reversed(group.split(".")))


def definitions(crd: Obj, res: Resource) -> dict[str, dict[str, Any]]:
    """JSON-Schema `$defs` entries for each served version's kind and list kind: the
    schema with metadata as ObjectMeta and apiVersion/kind described, as upstream's
    builder publishes them (what `kubectl explain` and server-side apply read)."""
    out: dict[str, dict[str, Any]] = {}
    prefix = definition_prefix(res.group)
    for v in crd["spec"]["versions"]:
        if not v.get("served"):
            continue
        schema = orjson.loads(orjson.dumps((v.get("schema") or {}).get("openAPIV3Schema") or {"type": "object"}))
        props = schema.setdefault("properties", {})
        props["apiVersion"] = {"description": _API_VERSION_DOC, "type": "string"}
        props["kind"] = {"description": _KIND_DOC, "type": "string"}
        props["metadata"] = {"$ref": f"#/$defs/{_META}ObjectMeta", "description": _METADATA_DOC}
        gvk = [{"group": res.group, "kind": res.kind, "version": v["name"]}]
        schema["x-kubernetes-group-version-kind"] = gvk
        name = f"{prefix}.{v['name']}.{res.kind}"
        out[name] = schema
        out[f"{prefix}.{v['name']}.{res.list_kind}"] = {
            "description": f"{res.list_kind} is a list of {res.kind}",
            "required": ["items"],
            "type": "object",
            "properties": {
                "apiVersion": {"description": _API_VERSION_DOC, "type": "string"},
                "items": {"description": f"List of {res.plural}. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md",
                          "type": "array", "items": {"$ref": f"#/$defs/{name}"}},
                "kind": {"description": _KIND_DOC, "type": "string"},
                "metadata": {"$ref": f"#/$defs/{_META}ListMeta", "description": "Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds"},
            },
            "x-kubernetes-group-version-kind": [{"group": res.group, "kind": res.list_kind, "version": v["name"]}],
        }
    return out


_API_VERSION_DOC = ("APIVersion defines the versioned schema of this representation of an object. Servers should convert "
                    "recognized schemas to the latest internal value, and may reject unrecognized values. More info: "
                    "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources")
_KIND_DOC = ("Kind is a string value representing the REST resource this object represents. Servers may infer this from "
             "the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: "
             "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds")
_METADATA_DOC = ("Standard object's metadata. More info: "
                 "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata")
