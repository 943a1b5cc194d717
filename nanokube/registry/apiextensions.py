"""apiextensions.k8s.io: CustomResourceDefinition (customresourcedefinition/strategy.go).

A CRD's own semantics live here: its defaults, validation (apiserver/apiextensions/
crd_validation.py), status kept apart from spec with `status.storedVersions`
tracking every storage version ever used, and a first DELETE that only marks the
CRD `Terminating` and adds the `customresourcecleanup.apiextensions.k8s.io`
finalizer, so the finalizer controller deletes every custom object first.
Serving the custom resources themselves is `apiserver/apiextensions/serving.py`.
"""

from __future__ import annotations

import copy

from ..apiserver.apiextensions import crd_validation
from ..machinery.validation import FieldError
from .base import Obj, Resource, Strategy, register

GROUP = "apiextensions.k8s.io"
CLEANUP_FINALIZER = "customresourcecleanup.apiextensions.k8s.io"


def storage_version(crd: Obj) -> str | None:
    for v in (crd.get("spec") or {}).get("versions") or []:
        if v.get("storage"):
            return v.get("name")
    return None


#: CustomResourceDefinitionStatus's fields and CustomResourceDefinitionNames' in Go's struct order, which
#: upstream serves them in whatever order a writer sent them
_STATUS_FIELDS = ("conditions", "acceptedNames", "storedVersions")
_NAMES_FIELDS = ("plural", "singular", "shortNames", "kind", "listKind", "categories")


def _in_order(d: dict, fields: tuple[str, ...]) -> dict:
    """`d` itself when its known fields come first and in `fields`' order, else a copy that is."""
    known = [k for k in d if k in fields]
    if known == [k for k in fields if k in d] and list(d)[:len(known)] == known:
        return d
    out = {k: d[k] for k in fields if k in d}
    out.update((k, v) for k, v in d.items() if k not in out)
    return out


def _status_in_go_order(crd: Obj) -> None:
    """The status (and its acceptedNames) in struct order: the naming controller and a status writer
    build them in any order (acceptedNames' defaults came last), and a copy replaces what is out of it
    (a written status may be shared with a remembered patch's)."""
    st = crd.get("status")
    if not isinstance(st, dict):
        return
    ordered = _in_order(st, _STATUS_FIELDS)
    names = ordered.get("acceptedNames")
    if isinstance(names, dict) and (named := _in_order(names, _NAMES_FIELDS)) is not names:
        ordered = {**ordered, "acceptedNames": named}
    crd["status"] = ordered


def _with_stored_version(crd: Obj) -> None:
    """Append the current storage version to status.storedVersions (a copy of status)."""
    sv = storage_version(crd)
    st = dict(crd.get("status") or {})
    stored = list(st.get("storedVersions") or [])
    if sv and sv not in stored:
        stored.append(sv)
    st["storedVersions"] = stored
    crd["status"] = st


class CRDStrategy(Strategy):
    generic_meta = True
    allow_unconditional_update = False

    def default(self, obj: Obj, version: str) -> None:
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return
        names = spec.get("names")
        if isinstance(names, dict) and names.get("kind"):
            names.setdefault("singular", names["kind"].lower())
            names.setdefault("listKind", names["kind"] + "List")
        conv = spec.setdefault("conversion", {"strategy": "None"})
        if isinstance(conv, dict):
            conv.setdefault("strategy", "None")
            svc = ((conv.get("webhook") or {}).get("clientConfig") or {}).get("service")
            if isinstance(svc, dict):
                svc.setdefault("port", 443)
        st = obj.get("status")
        if isinstance(st, dict) and isinstance(st.get("acceptedNames"), dict):
            an = st["acceptedNames"]
            if an.get("kind"):
                an.setdefault("singular", an["kind"].lower())
                an.setdefault("listKind", an["kind"] + "List")

    def prepare_for_create(self, obj: Obj) -> None:
        obj["status"] = {"conditions": None, "acceptedNames": {"plural": "", "kind": ""}, "storedVersions": []}
        _with_stored_version(obj)

    def prepare_for_update(self, new: Obj, old: Obj) -> None:
        _with_stored_version(new)
        _status_in_go_order(new)

    def prepare_for_status_update(self, new: Obj, old: Obj) -> None:
        _status_in_go_order(new)

    def validate(self, obj: Obj) -> list[FieldError]:
        return crd_validation.validate(obj)

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        return crd_validation.validate_update(new, old)

    def warnings_on_create(self, obj: Obj) -> list[str]:
        return crd_validation.format_warnings(obj)

    def warnings_on_update(self, new: Obj, old: Obj) -> list[str]:
        """Only formats the old object did not already use (upstream ratchets them)."""
        known = set(crd_validation.format_warnings(old))
        return [w for w in crd_validation.format_warnings(new) if w not in known]

    def validate_status_update(self, new: Obj, old: Obj) -> list[FieldError]:
        return crd_validation.validate_status(new)

    def blocks_deletion(self, obj: Obj) -> bool:
        md = obj.get("metadata") or {}
        return not md.get("deletionTimestamp") or CLEANUP_FINALIZER in (md.get("finalizers") or [])

    def prepare_for_delete(self, obj: Obj) -> None:
        md = obj["metadata"]
        fins = list(md.get("finalizers") or [])
        if CLEANUP_FINALIZER not in fins:
            fins.append(CLEANUP_FINALIZER)
        md["finalizers"] = fins
        st = copy.deepcopy(obj.get("status") or {})
        conds = [c for c in st.get("conditions") or [] if c.get("type") != "Terminating"]
        conds.append({"type": "Terminating", "status": "True", "lastTransitionTime": md["deletionTimestamp"],
                      "reason": "InstanceDeletionPending",
                      "message": "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon"})
        st["conditions"] = conds
        obj["status"] = st


CRD = Resource(
    GROUP, "customresourcedefinitions", "CustomResourceDefinition", ["v1"], namespaced=False,
    short_names=("crd", "crds"), categories=("api-extensions",), subresources=("status",), strategy=CRDStrategy(),
)

register(CRD)
