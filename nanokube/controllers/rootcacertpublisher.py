"""kube-controller-manager's root CA certificate publisher: every namespace holds the ConfigMap
kube-root-ca.crt whose `ca.crt` is the CA that verifies the API server, so a pod reaches
kubernetes.default.svc through its projected kube-api-access volume (ServiceAccount admission
projects the ConfigMap's ca.crt beside the token). The ConfigMap is made again when deleted and put
back when its data or description is edited. It learns what exists from the shared informers and
writes with its own client (root-ca-cert-publisher, whose role may only create and update
ConfigMaps)."""

from __future__ import annotations

from ..client.informer import InformerFactory
from ..clock import REAL, Clock
from ..machinery.errors import NAMESPACE_TERMINATING, APIError, has_status_cause
from .base import Controller

CONFIG_MAP = "kube-root-ca.crt"
DESCRIPTION_ANNOTATION = "kubernetes.io/description"
DESCRIPTION = ("Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints "
               "such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across "
               "distributions of Kubernetes clusters.")


class RootCACertPublisher(Controller):
    name = "root-ca-certificate-publisher-controller"
    aliases = ("root-ca-cert-publisher",)
    queue_name = "root_ca_cert_publisher"

    def __init__(self, client, clock: Clock = REAL, informers: InformerFactory | None = None, root_ca: bytes = b""):
        """`root_ca`: the PEM bundle to publish (kube-controller-manager's --root-ca-file, else the
        CA its own client trusts)."""
        super().__init__(client, clock, informers)
        self.root_ca = root_ca.decode()
        self.config_maps = client.resource("", "v1", "configmaps")
        self.ns_inf = self.informer_factory.informer(client.resource("", "v1", "namespaces"))
        self.cm_inf = self.informer_factory.informer(self.config_maps, field_selector=f"metadata.name={CONFIG_MAP}")
        self.ns_inf.add_handlers(on_add=self._enqueue_namespace, on_update=self._namespace_updated)
        self.cm_inf.add_handlers(on_update=lambda old, new: self._enqueue_owner(new), on_delete=self._enqueue_owner)

    def informers(self):
        return [self.ns_inf, self.cm_inf]

    def _enqueue_namespace(self, ns: dict) -> None:
        self.queue.add(ns["metadata"]["name"])

    def _namespace_updated(self, old: dict, new: dict) -> None:
        if (new.get("status") or {}).get("phase") == "Active":
            self._enqueue_namespace(new)

    def _enqueue_owner(self, cm: dict) -> None:
        if cm["metadata"].get("name") == CONFIG_MAP:
            self.queue.add(cm["metadata"]["namespace"])

    def _data(self) -> dict[str, str]:
        return {"ca.crt": self.root_ca}

    async def sync(self, namespace: str) -> None:
        cm = self.cm_inf.get(f"{namespace}/{CONFIG_MAP}")
        if cm is None:
            try:
                await self.config_maps.create({
                    "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": CONFIG_MAP, "namespace": namespace,
                                 "annotations": {DESCRIPTION_ANNOTATION: DESCRIPTION}},
                    "data": self._data()})
            except APIError as e:
                # a namespace gone or terminating is not retried; a 409 is an informer behind, retried
                if e.code != 404 and not has_status_cause(e, NAMESPACE_TERMINATING):
                    raise
            return
        annotations = cm["metadata"].get("annotations") or {}
        if cm.get("data") == self._data() and annotations.get(DESCRIPTION_ANNOTATION):
            return
        fixed = {**cm, "metadata": {**cm["metadata"], "annotations": {**annotations, DESCRIPTION_ANNOTATION: DESCRIPTION}},
                 "data": self._data()}
        await self.config_maps.update(fixed)
