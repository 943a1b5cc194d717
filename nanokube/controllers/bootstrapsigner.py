"""kube-controller-manager's bootstrapsigner (off by default; kubeadm turns it on): the
kube-public/cluster-info ConfigMap, which anyone may read, carries the cluster's kubeconfig (its
server and CA) and, for every live bootstrap token marked usage-bootstrap-signing=true, a detached
JWS of that kubeconfig under `jws-kubeconfig-<token id>`. A joining node that holds a token reads
the ConfigMap without credentials and trusts the CA only if the signature its token makes matches,
so a man in the middle cannot hand it another CA. Signatures of tokens gone, expired or no longer
for signing are removed. One key: any change to the ConfigMap or to a kube-system Secret re-signs."""

from __future__ import annotations

from ..clock import REAL, Clock
from ..client.informer import InformerFactory
from ..machinery import bootstraptoken as bt
from ..machinery.errors import APIError
from .bootstraptoken import BootstrapTokenController

_KEY = "cluster-info"


class BootstrapSignerController(BootstrapTokenController):
    name = "bootstrap-signer-controller"
    aliases = ("bootstrapsigner",)
    queue_name = "bootstrap_signer_queue"

    def __init__(self, client, clock: Clock = REAL, informers: InformerFactory | None = None):
        super().__init__(client, clock, informers)
        self.config_maps = client.resource("", "v1", "configmaps")
        self.cm_inf = self.informer_factory.informer(self.config_maps, bt.CLUSTER_INFO_NAMESPACE,
                                                     field_selector=f"metadata.name={bt.CLUSTER_INFO}")
        for inf in (self.cm_inf, self.secret_inf):
            inf.add_handlers(on_add=self._enqueue, on_update=lambda old, new: self._enqueue(new), on_delete=self._enqueue)

    def informers(self):
        return [self.cm_inf, self.secret_inf]

    def _enqueue(self, _obj: dict) -> None:
        self.queue.add(_KEY)

    def _tokens(self) -> dict[str, str]:
        """id -> secret of the tokens that sign now; one that expires later gets its Secret's
        update from the token cleaner, or none: a re-sign is queued for its expiry."""
        now, out = self.clock.now(), {}
        for secret in self.secret_inf.list():
            if (token := bt.signing_token(secret, now)) is not None:
                out[token[0]] = token[1]
                if (at := bt.expiration(secret)) is not None:
                    self.queue.add_after(_KEY, at - now + 0.001)
        return out

    async def sync(self, key: str) -> None:
        cm = self.cm_inf.get(f"{bt.CLUSTER_INFO_NAMESPACE}/{bt.CLUSTER_INFO}")
        content = ((cm or {}).get("data") or {}).get(bt.KUBECONFIG_KEY)
        if content is None:
            return
        data = {k: v for k, v in cm["data"].items() if not k.startswith(bt.JWS_PREFIX)}
        data.update({bt.JWS_PREFIX + token_id: bt.detached_jws(content, token_id, secret)
                     for token_id, secret in self._tokens().items()})
        if data == cm["data"]:
            return
        try:
            await self.config_maps.update({**cm, "data": data})
        except APIError as e:
            if e.code != 404:  # a conflict: retried over the informer's newer copy
                raise
