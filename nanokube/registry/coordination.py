"""coordination.k8s.io: Leases (node heartbeats, leader election)."""

from __future__ import annotations

from .base import AGE, Column, Resource, Strategy, register
from ..machinery.validation import FieldError, invalid


class LeaseStrategy(Strategy):
    allow_create_on_update = True
    columns = [
        Column("Name", "string", lambda o: o["metadata"]["name"], format="name"),
        Column("Holder", "string", lambda o: (o.get("spec") or {}).get("holderIdentity", "")),
        Column("Age", "string", AGE),
    ]

    def validate(self, obj):
        errs: list[FieldError] = []
        spec = obj.get("spec") or {}
        d = spec.get("leaseDurationSeconds")
        if d is not None and d <= 0:
            errs.append(invalid("spec.leaseDurationSeconds", d, "must be greater than 0"))
        t = spec.get("leaseTransitions")
        if t is not None and t < 0:
            errs.append(invalid("spec.leaseTransitions", t, "must be greater than or equal to 0"))
        return errs


register(Resource("coordination.k8s.io", "leases", "Lease", ["v1"], namespaced=True, strategy=LeaseStrategy()))
