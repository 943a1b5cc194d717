"""One admission request: what is being done to which object, and by whom
(apiserver's admission.Attributes). Objects are held in their storage form;
webhooks and policies see them converted to the version they matched, through
/scale as the autoscaling/v1 Scale of the object, and through pods/binding and
pods/eviction as the Binding or Eviction the client sent."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ... import schema as schemas
from ...machinery.gojson import value_kind
from ...registry.base import Resource
from ..patch import json_copy
from .matching import Target

OPTIONS_KIND = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions", "DELETE": "DeleteOptions"}
SCALE_KIND = {"group": "autoscaling", "version": "v1", "kind": "Scale"}


@dataclass
class Attributes:
    res: Resource
    version: str
    subresource: str
    operation: str  # CREATE | UPDATE | DELETE
    namespace: str
    name: str
    obj: dict | None
    old: dict | None
    opts: Any  # rest.WriteOptions: user, dry_run, field_manager
    options: dict = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    annotations: dict[str, str] = field(default_factory=dict)
    #: group/version/kind of a subresource's own object (Scale, Binding, Eviction)
    sub_kind: dict | None = None
    #: the CEL `authorizer` value for the requesting user (None where nothing authorizes)
    authorizer: dict | None = None
    #: whether its checks may wait on an authorization webhook: CEL reading it then runs in a worker
    authorizer_waits: bool = False

    @property
    def target(self) -> Target:
        return Target(self.res, self.version)

    @property
    def dry_run(self) -> bool:
        return bool(self.opts.dry_run)

    @property
    def scale(self) -> bool:
        return self.subresource == "scale"

    async def prepare(self, t: Target, *objs: dict | None) -> None:
        """Convert ahead what `versioned` will read at `t` (custom resources converted
        by a webhook convert asynchronously); the request's objects by default."""
        if self.sub_kind is None:
            todo = [o for o in (objs or (self.obj, self.old)) if o is not None]
            if todo:
                await t.res.strategy.prepare_conversion(todo, t.version)

    def versioned(self, t: Target, obj: dict | None) -> dict | None:
        """`obj` (storage form) as a `t` object, a private copy."""
        if obj is None:
            return None
        if self.scale:
            from ..subresources import _scale_of

            return json_copy(_scale_of(self.res, obj))
        if self.sub_kind is not None:
            return json_copy(obj)
        out = json_copy(t.res.strategy.from_storage(obj, t.version))
        out["apiVersion"], out["kind"] = t.res.api_version(t.version), t.res.kind
        return out

    def schema(self, t: Target) -> dict | None:
        """The schema of what `versioned` returns."""
        if self.sub_kind is not None:
            return schemas.kind_schema(self.sub_kind["group"], self.sub_kind["version"], self.sub_kind["kind"])
        return schemas.kind_schema(t.res.group, t.version, t.res.kind)

    def prune(self, t: Target, obj: dict, typed: bool = False) -> dict:
        """Drop the fields a mutated `t` object's schema does not know, as decoding it does.
        `typed` (a webhook's patch, a policy's mutation): a value of the wrong type is refused
        first, a ValueError with the words of upstream's decoding of the patched JSON into the kind."""
        md = obj.get("metadata")
        if md is None:  # removed or nulled: decoded, the kind's ObjectMeta is empty
            obj["metadata"] = {}
        if self.sub_kind is None and t.res.strategy.decode(obj, t.version) is not None:
            if typed and type(md) is not dict and md is not None:  # (a kind's own schema check refuses one)
                raise ValueError(f"json: cannot unmarshal {value_kind(md)} into Go struct field "
                                 f"{t.res.kind}.metadata of type v1.ObjectMeta")
            return obj  # the kind decodes itself (a custom resource's structural schema)
        sch = self.schema(t)
        if sch is None:
            return obj
        from ..structural import check, prune

        if typed and (errs := check(obj, sch, False)[0]):
            raise ValueError(errs[0])
        return prune(obj, sch)

    def default(self, t: Target, obj: dict) -> None:
        if self.sub_kind is None:
            t.res.strategy.default(obj, t.version)

    async def store_versioned(self, t: Target, obj: dict) -> None:
        """Take a mutated `t` object back: defaults re-applied, storage form
        (through /scale only the replicas carry over)."""
        if self.scale:
            replicas = (obj.get("spec") or {}).get("replicas", 0)
            await self.prepare(Target(self.res, self.version), self.obj)
            ext = json_copy(self.res.strategy.from_storage(self.obj, self.version))
            self.res.strategy.set_replicas(ext, replicas)
            await self.res.strategy.prepare_conversion([ext], self.res.storage_version)
            self.obj = self.res.strategy.to_storage(ext, self.version)
            return
        if self.sub_kind is not None:
            self.obj = obj
            return
        t.res.strategy.default(obj, t.version)
        await t.res.strategy.prepare_conversion([obj], t.res.storage_version)
        self.obj = t.res.strategy.to_storage(obj, t.version)

    def operation_options(self) -> dict | None:
        """Create/Update/DeleteOptions; CONNECT has none."""
        kind = OPTIONS_KIND.get(self.operation)
        if kind is None:
            return None
        out: dict[str, Any] = {"kind": kind, "apiVersion": "meta.k8s.io/v1"}
        if self.dry_run:
            out["dryRun"] = ["All"]
        if self.operation != "DELETE" and self.opts.field_manager:
            out["fieldManager"] = self.opts.field_manager
        out.update({k: v for k, v in self.options.items() if k not in ("kind", "apiVersion")})
        return out

    def user_info(self) -> dict:
        u = self.opts.user
        out: dict[str, Any] = {"username": u.name}
        if u.uid:
            out["uid"] = u.uid
        if u.groups:
            out["groups"] = list(u.groups)
        if u.extra:
            out["extra"] = {k: list(v) if isinstance(v, (list, tuple)) else [v] for k, v in u.extra.items()}
        return out

    def request(self, t: Target, uid: str, obj: dict | None, old: dict | None) -> dict:
        """admission.k8s.io AdmissionRequest as sent for match target `t`."""
        req: dict[str, Any] = {
            "uid": uid, "kind": t.gvk, "resource": t.gvr,
            "requestKind": self.target.gvk, "requestResource": self.target.gvr,
            "name": self.name, "operation": self.operation, "userInfo": self.user_info(),
            "object": obj, "oldObject": old, "dryRun": self.dry_run, "options": self.operation_options(),
        }
        if self.subresource:
            req["subResource"] = req["requestSubResource"] = self.subresource
        if self.sub_kind is not None:
            req["kind"] = req["requestKind"] = dict(self.sub_kind)
        if self.namespace:
            req["namespace"] = self.namespace
        return req

    def add_annotation(self, key: str, value: str) -> None:
        """Audit annotations: the first value for a key stays."""
        self.annotations.setdefault(key, value)
