"""Local APIServices for CustomResourceDefinitions (kube-apiserver's
crdregistration controller): one per served group/version of any CRD, with
groupPriorityMinimum 1000 and versionPriority 100, labelled
`kube-aggregator.kubernetes.io/automanaged: "true"`, and removed when no CRD
serves that group/version any more."""

from __future__ import annotations

from ...client.informer import Informer
from ...controllers.base import Controller
from ...machinery.errors import APIError
from .autoregister import AUTOMANAGED, GROUP
from .priorities import CRD_GROUP_PRIORITY, CRD_VERSION_PRIORITY


def served_group_versions(crd: dict) -> set[tuple[str, str]]:
    spec = crd.get("spec") or {}
    return {(spec.get("group", ""), v["name"]) for v in spec.get("versions") or [] if v.get("served")}


class CRDRegistration(Controller):
    name = "crd-autoregister"

    def __init__(self, client, **kw):
        super().__init__(client, **kw)
        self.apiservices = client.resource(GROUP, "v1", "apiservices")
        self.crd_inf = Informer(client.resource("apiextensions.k8s.io", "v1", "customresourcedefinitions"), clock=self.clock)
        self.as_inf = Informer(self.apiservices, label_selector=f"{AUTOMANAGED}=true", clock=self.clock)
        self.crd_inf.add_handlers(self._enqueue, lambda old, new: (self._enqueue(old), self._enqueue(new)), self._enqueue)
        self.as_inf.add_handlers(on_delete=lambda a: self.queue.add(((a.get("spec") or {}).get("group", ""),
                                                                     (a.get("spec") or {}).get("version", ""))))

    def informers(self):
        return [self.crd_inf, self.as_inf]

    async def start(self) -> None:
        await super().start()
        for a in self.as_inf.list():  # APIServices left from CRDs deleted while the server was down
            self.queue.add(((a.get("spec") or {}).get("group", ""), (a.get("spec") or {}).get("version", "")))

    def _enqueue(self, crd: dict) -> None:
        for gv in served_group_versions(crd):
            self.queue.add(gv)

    async def sync(self, gv: tuple[str, str]) -> None:
        group, version = gv
        name = f"{version}.{group}"
        wanted = any(gv in served_group_versions(c) for c in self.crd_inf.list())
        current = self.as_inf.get(name)
        try:
            if wanted and current is None:
                await self.apiservices.create({
                    "metadata": {"name": name, "labels": {AUTOMANAGED: "true"}},
                    "spec": {"group": group, "version": version, "groupPriorityMinimum": CRD_GROUP_PRIORITY,
                             "versionPriority": CRD_VERSION_PRIORITY}})
            elif not wanted and current is not None:
                await self.apiservices.delete(name)
        except APIError as e:
            if e.code not in (404, 409):
                raise
