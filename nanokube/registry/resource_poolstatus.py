"""resource.k8s.io/v1alpha3 ResourcePoolStatusRequest (DRAResourcePoolStatus,
alpha in 1.37): a one-shot question "how full are this driver's pools?",
answered once in `status` by controllers/resourcepoolstatusrequest.py; spec
and, once set, status are immutable."""

from __future__ import annotations

import re

from .base import RESET_DELETION, Obj, Resource, Strategy, register
from ..machinery.validation import (
    FieldError,
    dns1123_subdomain,
    forbidden,
    immutable,
    invalid,
    qualified_name,
    required,
)

LIMIT_DEFAULT, LIMIT_MAX = 100, 1000
_POOL_SEGMENT = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def _spec(o: Obj) -> dict:
    return o.get("spec") or {}


class ResourcePoolStatusRequestStrategy(Strategy):
    #: DELETE answers with the object, as the resource.k8s.io registries do
    return_deleted_object = True
    status_metadata = ()  # ResetObjectMetaForStatus
    status_deletion_kept = RESET_DELETION

    def default(self, obj, version):
        obj.setdefault("spec", {}).setdefault("limit", LIMIT_DEFAULT)

    def prepare_for_update(self, new, old):
        if "status" in old:
            new["status"] = old["status"]
        else:
            new.pop("status", None)

    def validate(self, obj):
        spec = _spec(obj)
        errs: list[FieldError] = []
        driver = spec.get("driver", "")
        if not driver:
            errs.append(required("spec.driver", ""))
        else:
            errs += [invalid("spec.driver", driver, m) for m in dns1123_subdomain(driver)]
        pool = spec.get("poolName")
        if pool is not None:
            if not pool:
                errs.append(required("spec.poolName", ""))
            elif len(pool) > 253 or not all(_POOL_SEGMENT.match(s) for s in pool.split("/")):
                errs.append(invalid("spec.poolName", pool, "a valid resource pool name is one or more DNS subdomains "
                                                           "separated by slashes"))
        limit = spec.get("limit")
        if limit is not None and not 1 <= limit <= LIMIT_MAX:
            errs.append(invalid("spec.limit", limit, f"must be between 1 and {LIMIT_MAX}, inclusive"))
        attr = spec.get("defaultPartitionTypeAttribute")
        if attr is not None:
            if "/" not in attr:
                errs.append(invalid("spec.defaultPartitionTypeAttribute", attr, "must include the domain qualifier"))
            else:
                errs += [invalid("spec.defaultPartitionTypeAttribute", attr, m) for m in qualified_name(attr)]
        return errs

    def validate_update(self, new, old):
        errs = self.validate(new)
        if _spec(new) != _spec(old):
            errs.append(immutable("spec", _spec(new)))
        return errs

    def validate_status_update(self, new, old):
        if old.get("status") is not None and new.get("status") != old.get("status"):
            return [forbidden("status", "may not be changed once set")]
        status = new.get("status") or {}
        if status and status.get("poolCount") is None:
            return [required("status.poolCount", "")]
        return []


register(Resource("resource.k8s.io", "resourcepoolstatusrequests", "ResourcePoolStatusRequest", ["v1alpha3"],
                  namespaced=False, subresources=("status",), strategy=ResourcePoolStatusRequestStrategy()))
