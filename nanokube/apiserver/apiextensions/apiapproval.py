"""The API approval condition controller (apiextensions `controller/apiapproval/apiapproval_controller.go`).

A CRD in a protected group (under k8s.io or kubernetes.io) carries the
`KubernetesAPIApprovalPolicyConformant` condition, saying what its
`api-approved.kubernetes.io` annotation holds: `True/ApprovedAnnotation` for a URL,
`False/UnapprovedAnnotation` for a reason starting with "unapproved", and
`False/MissingAnnotation` or `False/InvalidAnnotation` for what validation lets
through unchanged. Tools (Gateway API's, Argo CD's health checks) read it. Other
groups never get one, and the group is immutable, so none is ever removed.
"""

from __future__ import annotations

import copy

from ...machinery.errors import APIError
from .crd_validation import api_approval_state, protected_group
from .naming import CRDController, condition, set_crd_condition

TYPE = "KubernetesAPIApprovalPolicyConformant"
_CONDITIONS = {"approved": ("True", "ApprovedAnnotation"), "bypassed": ("False", "UnapprovedAnnotation"),
               "missing": ("False", "MissingAnnotation"), "invalid": ("False", "InvalidAnnotation")}


def approval_condition(crd: dict) -> tuple[str, str, str] | None:
    """calculateCondition: (status, reason, message), or None outside the protected groups."""
    if not protected_group((crd.get("spec") or {}).get("group") or ""):
        return None
    state, message = api_approval_state(crd)
    return (*_CONDITIONS[state], message)


class APIApprovalController(CRDController):
    name = "crd-api-approval"

    def _enqueue(self, crd: dict) -> None:
        if protected_group((crd.get("spec") or {}).get("group") or ""):
            self.queue.add(crd["metadata"]["name"])

    async def sync(self, name: str) -> None:
        crd = self.inf.get(name)
        if crd is None or (cond := approval_condition(crd)) is None:
            return
        old = condition(crd, TYPE)
        if old is not None and (old.get("status"), old.get("reason"), old.get("message")) == cond:
            return
        status = copy.deepcopy(crd.get("status") or {})
        set_crd_condition(status, TYPE, *cond, self.clock.rfc3339())
        try:
            await self.crds.update({**crd, "status": status}, subresource="status")
        except APIError as e:
            if e.code not in (404, 409):  # deleted or changed meanwhile: its event brings it back
                raise
