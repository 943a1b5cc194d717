"""The CRD naming controller (apiextensions `controller/status/naming_controller.go`).

Upstream runs it inside the apiextensions-apiserver, and so does nanokube: it is
part of serving CRDs, not a kube-controller-manager loop. It accepts a CRD's
names unless another CRD of the same group already holds them — plural,
singular and short names share one namespace, kind and listKind another — and
writes `status.acceptedNames` with the `NamesAccepted` condition (and
`Established=False` until the establishing controller takes over).
"""

from __future__ import annotations

import copy
from typing import Any

from ...client.informer import Informer
from ...controllers.base import Controller
from ...machinery.conditions import find_condition, set_condition
from ...machinery.errors import APIError

GROUP = "apiextensions.k8s.io"


def set_crd_condition(status: dict[str, Any], typ: str, cstatus: str, reason: str, message: str, now: str) -> None:
    """SetCRDCondition on a status of our own: a lastTransitionTime moves only with the status."""
    status["conditions"] = set_condition(status.get("conditions"), {
        "type": typ, "status": cstatus, "lastTransitionTime": now, "reason": reason, "message": message})


def condition(crd: dict, typ: str) -> dict | None:
    return find_condition((crd.get("status") or {}).get("conditions"), typ)


def names_and_conditions(crd: dict, others: list[dict]) -> tuple[dict, tuple[str, str, str], tuple[str, str, str]]:
    """(accepted names, NamesAccepted condition, Established condition) as upstream's
    calculateNamesAndConditions: conflicting names keep their previously accepted value."""
    spec_names = crd["spec"]["names"]
    accepted = dict((crd.get("status") or {}).get("acceptedNames") or {})
    resources: set[str] = set()
    kinds: set[str] = set()
    for o in others:
        an = (o.get("status") or {}).get("acceptedNames") or {}
        resources.update(x for x in [an.get("plural"), an.get("singular"), *(an.get("shortNames") or [])] if x)
        kinds.update(x for x in [an.get("kind"), an.get("listKind")] if x)
    new = dict(accepted)
    reason, message = "", ""

    def taken(name: str | None, pool: set[str], mine: list[str]) -> bool:
        return bool(name) and name in pool and name not in mine

    plural = spec_names.get("plural")
    if taken(plural, resources, [accepted.get("plural")]):
        reason, message = "PluralConflict", f'"{plural}" is already in use'
    else:
        new["plural"] = plural
    singular = spec_names.get("singular")
    if taken(singular, resources, [accepted.get("singular")]):
        reason, message = "SingularConflict", f'"{singular}" is already in use'
    else:
        new["singular"] = singular
    short = spec_names.get("shortNames") or []
    conflicts = [s for s in short if taken(s, resources, accepted.get("shortNames") or [])]
    if conflicts:
        reason, message = "ShortNamesConflict", "; ".join(f'"{s}" is already in use' for s in conflicts)
    else:
        if short:
            new["shortNames"] = list(short)
        else:
            new.pop("shortNames", None)
    kind = spec_names.get("kind")
    if taken(kind, kinds, [accepted.get("kind")]):
        reason, message = "KindConflict", f'"{kind}" is already in use'
    else:
        new["kind"] = kind
    list_kind = spec_names.get("listKind")
    if taken(list_kind, kinds, [accepted.get("listKind")]):
        reason, message = "ListKindConflict", f'"{list_kind}" is already in use'
    else:
        new["listKind"] = list_kind
    if spec_names.get("categories"):
        new["categories"] = list(spec_names["categories"])
    else:
        new.pop("categories", None)
    if reason:
        names_cond = ("False", reason, message)
    else:
        names_cond = ("True", "NoConflicts", "no conflicts found")
    est = condition(crd, "Established")
    if est is not None:
        est_cond = (est.get("status", ""), est.get("reason", ""), est.get("message", ""))
    else:
        est_cond = ("False", "NotAccepted", "not all names are accepted")
    if est_cond[0] != "True" and not reason:
        est_cond = ("False", "Installing", "the initial names have been accepted")
    return new, names_cond, est_cond


class CRDController(Controller):
    """A controller of CRDs inside the API server (the apiextensions-apiserver's): an informer of
    them whose adds go to `_enqueue`, updates to `_updated` (by default `_enqueue` of the new object),
    deletes to `_deleted`."""

    def __init__(self, client, **kw):
        super().__init__(client, **kw)
        self.crds = client.resource(GROUP, "v1", "customresourcedefinitions")
        self.inf = Informer(self.crds, clock=self.clock)
        self.inf.add_handlers(on_add=self._enqueue, on_update=self._updated, on_delete=self._deleted)

    def informers(self):
        return [self.inf]

    def _enqueue(self, crd: dict) -> None:
        self.queue.add(crd["metadata"]["name"])

    def _updated(self, old: dict, new: dict) -> None:
        self._enqueue(new)

    def _deleted(self, crd: dict) -> None:
        pass


class NamingController(CRDController):
    name = "crd-naming"

    def _deleted(self, crd: dict) -> None:
        """Names a deleted CRD held may now go to another CRD of its group."""
        for o in self.inf.list():
            if o["spec"].get("group") == crd["spec"].get("group"):
                self._enqueue(o)

    async def sync(self, name: str) -> None:
        crd = self.inf.get(name)
        if crd is None:
            return
        group = crd["spec"].get("group")
        others = [o for o in self.inf.list() if o["spec"].get("group") == group and o["metadata"]["name"] != name]
        names, names_cond, est_cond = names_and_conditions(crd, others)
        status = copy.deepcopy(crd.get("status") or {})
        now = self.clock.rfc3339()
        status["acceptedNames"] = names
        set_crd_condition(status, "NamesAccepted", *names_cond, now)
        set_crd_condition(status, "Established", *est_cond, now)
        if status == crd.get("status"):
            return
        try:
            await self.crds.update({**crd, "status": status}, subresource="status")
        except APIError as e:
            if e.code == 404:
                return
            raise
        for o in others:  # a name this CRD gave up (or took) changes what the others may accept
            self._enqueue(o)
