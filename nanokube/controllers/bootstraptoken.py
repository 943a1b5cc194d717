"""What the bootstrap token controllers share (bootstrapsigner, tokencleaner: both off by default,
kubeadm turns them on): a watch of kube-system's bootstrap token Secrets, narrowed by type."""

from __future__ import annotations

from ..clock import REAL, Clock
from ..client.informer import InformerFactory
from ..machinery import bootstraptoken as bt
from .base import Controller


class BootstrapTokenController(Controller):
    """A controller of bootstrap token Secrets: `secrets` (the resource) and `secret_inf` (their informer)."""

    enabled_by_default = False

    def __init__(self, client, clock: Clock = REAL, informers: InformerFactory | None = None):
        super().__init__(client, clock, informers)
        self.secrets = client.resource("", "v1", "secrets")
        self.secret_inf = self.informer_factory.informer(self.secrets, bt.NAMESPACE,
                                                         field_selector=f"type={bt.SECRET_TYPE}")
