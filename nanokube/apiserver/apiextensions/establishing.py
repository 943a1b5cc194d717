"""The CRD establishing controller (apiextensions `controller/establish/establishing_controller.go`).

Once the naming controller has accepted a CRD's names (`Established=False/Installing`),
this marks it `Established=True/InitialNamesAccepted` (or `False/InvalidCABundle` when
its conversion webhook's caBundle holds no certificate): its endpoints are served from
then on. It runs inside the API server, as upstream's does.
"""

from __future__ import annotations

import base64
import copy

from cryptography import x509

from ...machinery.errors import APIError
from .naming import CRDController, condition, set_crd_condition


def valid_ca_bundle(crd: dict) -> bool:
    """A conversion webhook's caBundle, when set, must hold PEM certificates."""
    bundle = ((((crd.get("spec") or {}).get("conversion") or {}).get("webhook") or {}).get("clientConfig") or {}).get("caBundle")
    if not bundle:
        return True
    try:
        return bool(x509.load_pem_x509_certificates(base64.b64decode(bundle)))
    except ValueError:
        return False


class EstablishingController(CRDController):
    name = "crd-establishing"

    def _enqueue(self, crd: dict) -> None:
        names = condition(crd, "NamesAccepted")
        est = condition(crd, "Established")
        if names and names.get("status") == "True" and (est is None or est.get("status") != "True"):
            self.queue.add(crd["metadata"]["name"])

    async def sync(self, name: str) -> None:
        crd = self.inf.get(name)
        if crd is None:
            return
        est = condition(crd, "Established")
        if (condition(crd, "NamesAccepted") or {}).get("status") != "True" or (est or {}).get("status") == "True":
            return
        status = copy.deepcopy(crd.get("status") or {})
        if valid_ca_bundle(crd):
            cond = ("True", "InitialNamesAccepted", "the initial names have been accepted")
        else:
            cond = ("False", "InvalidCABundle", "The conversion webhook CABundle is invalid")
        set_crd_condition(status, "Established", *cond, self.clock.rfc3339())
        if status == crd.get("status"):
            return
        try:
            await self.crds.update({**crd, "status": status}, subresource="status")
        except APIError as e:
            if e.code not in (404, 409):
                raise
            if e.code == 409:
                self.queue.add_after(name, 0.05)
