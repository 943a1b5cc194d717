"""core/v1 ResourceQuota and LimitRange: upstream's validation (resource
names, non-negative and integer quantities, scopes; min <= defaultRequest <=
default <= max), LimitRangeItem defaulting and the quota's `kubectl get`
columns. Enforcement is admission's (apiserver/admission_plugins)."""

from __future__ import annotations

from ..machinery import gofmt
from ..machinery.quantity import QuantityError, format_quantity, parse_quantity
from ..machinery.validation import FieldError, duplicate, forbidden, immutable, invalid, qualified_name, required
from ..quota.resources import (
    SCOPES,
    is_extended,
    is_integer_resource,
    is_native,
    is_standard_quota_resource,
    is_standard_resource,
    scope_errors,
)
from .base import AGE, Column, Resource, Strategy, register
from .core_printing import AGE_DOC, NAME_DOC

LIMIT_TYPES = ("Pod", "Container", "PersistentVolumeClaim")


def _quota_cells(quota: dict) -> tuple[str, str]:
    """printResourceQuota: `name: used/hard` for each hard resource, limits.* apart."""
    hard = (quota.get("spec") or {}).get("hard") or {}
    status = quota.get("status") or {}
    req, lim = [], []
    for name in sorted(hard):
        used = (status.get("used") or {}).get(name, "0")
        h = (status.get("hard") or {}).get(name, "0")
        (lim if name.split(".")[0] == "limits" and "." in name else req).append(f"{name}: {used}/{h}")
    return ", ".join(req), ", ".join(lim)


def _resource_name(name: str, path: str, quota: bool) -> list[FieldError]:
    """validateResourceName, and for quotas ValidateResourceQuotaResourceName on top (both may report)."""
    errs = [invalid(path, name, m) for m in qualified_name(name)]
    if not errs and "/" not in name and not is_standard_resource(name):
        errs.append(invalid(path, name, "must be a standard resource type or fully qualified"))
    if quota and "/" not in name and not is_standard_quota_resource(name):
        errs.append(invalid(path, name, "must be a standard resource for quota"))
    return errs


def _quantity_value(name: str, value, path: str) -> list[FieldError]:
    try:
        q = parse_quantity(str(value))
    except QuantityError as e:
        return [invalid(path, value, str(e))]
    if q < 0:
        return [invalid(path, value, "must be greater than or equal to 0")]
    if is_integer_resource(name) and q.denominator != 1:
        return [invalid(path, value, "must be an integer")]
    return []


#: the scopes a selector may only ask to exist
_EXISTS_ONLY = ("BestEffort", "NotBestEffort", "Terminating", "NotTerminating", "CrossNamespacePodAffinity")


def _scope_selector_errors(spec: dict) -> list[FieldError]:
    """validateScopedResourceSelectorRequirement: its paths name `matchExpressions`, not an item."""
    errs: list[FieldError] = []
    p = "spec.scopeSelector.matchExpressions"
    selector = spec["scopeSelector"]
    exprs = selector.get("matchExpressions") or []
    value = gofmt.Struct(**({"matchExpressions": [gofmt.Struct(
        scopeName=e.get("scopeName", ""), operator=e.get("operator", ""), **({"values": e["values"]} if e.get("values") else {}))
        for e in exprs]} if exprs else {}))
    hard = sorted(spec.get("hard") or {})
    chosen = set()
    for sel in exprs:
        scope, op, values = sel.get("scopeName"), sel.get("operator"), sel.get("values") or []
        if scope not in SCOPES:
            errs.append(invalid(f"{p}.scopeName", scope, "unsupported scope"))
        else:
            errs += [invalid(p, value, m) for m in scope_errors([scope], hard)]
        if scope in _EXISTS_ONLY and op != "Exists":
            errs.append(invalid(f"{p}.operator", op, "must be 'Exists' when scope is any of ResourceQuotaScopeTerminating, "
                                "ResourceQuotaScopeNotTerminating, ResourceQuotaScopeBestEffort, "
                                "ResourceQuotaScopeNotBestEffort or ResourceQuotaScopeCrossNamespacePodAffinity"))
        if op in ("In", "NotIn"):
            if not values:
                errs.append(required(f"{p}.values", "must be at least one value when `operator` is 'In' or 'NotIn' for scope selector"))
        elif op in ("Exists", "DoesNotExist"):
            if values:
                errs.append(invalid(f"{p}.values", values, "must be no value when `operator` is 'Exist' or 'DoesNotExist' for scope selector"))
        else:
            errs.append(invalid(f"{p}.operator", op, "not a valid selector operator"))
        chosen.add(scope)
    for pair in (("BestEffort", "NotBestEffort"), ("Terminating", "NotTerminating")):
        if chosen.issuperset(pair):
            errs.append(invalid(p, spec.get("scopes"), "conflicting scopes"))
    return errs


class ResourceQuotaStrategy(Strategy):
    return_deleted_object = True
    track_generation = False
    columns = [
        Column("Name", "string", lambda o: o["metadata"]["name"], NAME_DOC, format="name"),
        Column("Age", "string", AGE, AGE_DOC),
        Column("Request", "string", lambda o: _quota_cells(o)[0], "Request represents a minimum amount of cpu/memory that a container may consume."),
        Column("Limit", "string", lambda o: _quota_cells(o)[1], "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node."),
    ]

    def validate(self, obj):
        spec = obj.get("spec") or {}
        errs: list[FieldError] = []
        for name, value in (spec.get("hard") or {}).items():
            p = f"spec.hard[{name}]"
            errs += _resource_name(name, p, quota=True)
            errs += _quantity_value(name, value, p)
        scopes = list(spec.get("scopes") or [])
        errs += [invalid("spec.scopes", scopes, m) for m in scope_errors(scopes, list(spec.get("hard") or {}))]
        if "scopeSelector" in spec and spec["scopeSelector"] is not None:
            errs += _scope_selector_errors(spec)
        return errs

    def validate_update(self, new, old):
        """ValidateResourceQuotaUpdate: the spec as on create, and scopes, as a set, that do not change
        (the new list as sent in the error: `[]` an empty one, `null` none at all, as Go prints them)."""
        errs = self.validate(new)
        scopes = (new.get("spec") or {}).get("scopes")
        if set(scopes or ()) != set((old.get("spec") or {}).get("scopes") or ()):
            errs.append(immutable("spec.scopes", scopes))
        return errs

    def validate_status_update(self, new, old):
        errs: list[FieldError] = []
        status = new.get("status") or {}
        for bag in ("hard", "used"):
            for name, value in (status.get(bag) or {}).items():
                errs += _resource_name(name, f"status.{bag}[{name}]", quota=True)
                errs += _quantity_value(name, value, f"status.{bag}[{name}]")
        return errs


# --- LimitRange --------------------------------------------------------------------

_CONTAINER_RESOURCES = ("cpu", "memory", "ephemeral-storage")


def _overcommit_allowed(name: str) -> bool:
    """IsOvercommitAllowed: native resources other than hugepages."""
    return is_native(name) and not name.startswith("hugepages-")


def _limit_resource_name(limit_type: str, name: str, path: str) -> list[FieldError]:
    """validateLimitRangeResourceName: container resource names for Pod and Container items."""
    errs = [invalid(path, name, m) for m in qualified_name(name)]
    if not errs and "/" not in name and not is_standard_resource(name):
        errs.append(invalid(path, name, "must be a standard resource type or fully qualified"))
    if limit_type not in ("Pod", "Container"):
        return errs
    if "/" not in name:
        if name not in _CONTAINER_RESOURCES and not name.startswith("hugepages-"):
            errs.append(invalid(path, name, "must be a standard resource for containers"))
    elif not is_native(name) and not is_extended(name):
        errs.append(invalid(path, name, "doesn't follow extended resource name standard"))
    return errs



def _q(bag: dict | None, name: str):
    try:
        return parse_quantity(str((bag or {})[name])) if name in (bag or {}) else None
    except QuantityError:
        return None


def _s(value) -> str:
    return format_quantity(value)


class LimitRangeStrategy(Strategy):
    track_generation = False

    def default(self, obj, version):
        """SetDefaults_LimitRangeItem: a container's default limit from max, its
        default request from the default limit, else from min."""
        for item in (obj.get("spec") or {}).get("limits") or []:
            if item.get("type") != "Container":
                continue
            default = dict(item.get("default") or {})
            for k, v in (item.get("max") or {}).items():
                default.setdefault(k, v)
            request = dict(item.get("defaultRequest") or {})
            for k, v in default.items():
                request.setdefault(k, v)
            for k, v in (item.get("min") or {}).items():
                request.setdefault(k, v)
            if default:
                item["default"] = default
            if request:
                item["defaultRequest"] = request

    def validate(self, obj):
        """ValidateLimitRange: type and resource names, min <= defaultRequest <= default <= max,
        ratios; a Pod item has no defaults; a claim item bounds storage."""
        errs: list[FieldError] = []
        seen: set[str] = set()
        for i, item in enumerate((obj.get("spec") or {}).get("limits") or []):
            p = f"spec.limits[{i}]"
            typ = item.get("type") or ""
            type_errs = [invalid(f"{p}.type", typ, m) for m in qualified_name(typ)]
            if not type_errs and "/" not in typ and typ not in LIMIT_TYPES:
                type_errs.append(invalid(f"{p}.type", typ, "must be a standard limit type or fully qualified"))
            errs += type_errs
            if typ in seen:
                errs.append(duplicate(f"{p}.type", typ))
            seen.add(typ)
            bags = ["max", "min"]
            if typ == "Pod":
                if item.get("default"):
                    errs.append(forbidden(f"{p}.default", "may not be specified when `type` is 'Pod'"))
                if item.get("defaultRequest"):
                    errs.append(forbidden(f"{p}.defaultRequest", "may not be specified when `type` is 'Pod'"))
            else:
                bags += ["default", "defaultRequest"]
            if typ == "PersistentVolumeClaim" and "storage" not in (item.get("min") or {}) \
                    and "storage" not in (item.get("max") or {}):
                errs.append(required(f"{p}.limits", "either minimum or maximum storage value is required, but neither was provided"))
            bags.append("maxLimitRequestRatio")
            names: set[str] = set()
            for bag in bags:
                for name in item.get(bag) or {}:
                    errs += _limit_resource_name(typ, name, f"{p}.{bag}[{name}]")
                    names.add(name)
            for k in sorted(names):
                errs += self._item_bounds(item if typ != "Pod" else {**item, "default": {}, "defaultRequest": {}}, k, p)
        return errs

    @staticmethod
    def _item_bounds(item: dict, k: str, p: str) -> list[FieldError]:
        errs = []
        mn, mx = _q(item.get("min"), k), _q(item.get("max"), k)
        df, dr = _q(item.get("default"), k), _q(item.get("defaultRequest"), k)
        ratio = _q(item.get("maxLimitRequestRatio"), k)
        raw = lambda bag: (item.get(bag) or {}).get(k)  # noqa: E731
        if mn is not None and mx is not None and mn > mx:
            errs.append(invalid(f"{p}.min[{k}]", raw("min"), f"min value {_s(mn)} is greater than max value {_s(mx)}"))
        if dr is not None and mn is not None and mn > dr:
            errs.append(invalid(f"{p}.defaultRequest[{k}]", raw("defaultRequest"),
                                f"min value {_s(mn)} is greater than default request value {_s(dr)}"))
        if dr is not None and mx is not None and dr > mx:
            errs.append(invalid(f"{p}.defaultRequest[{k}]", raw("defaultRequest"),
                                f"default request value {_s(dr)} is greater than max value {_s(mx)}"))
        if dr is not None and df is not None and dr > df:
            errs.append(invalid(f"{p}.defaultRequest[{k}]", raw("defaultRequest"),
                                f"default request value {_s(dr)} is greater than default limit value {_s(df)}"))
        if df is not None and mn is not None and mn > df:
            errs.append(invalid(f"{p}.default[{k}]", raw("min"), f"min value {_s(mn)} is greater than default value {_s(df)}"))
        if df is not None and mx is not None and df > mx:
            errs.append(invalid(f"{p}.default[{k}]", raw("max"), f"default value {_s(df)} is greater than max value {_s(mx)}"))
        if ratio is not None and ratio < 1:
            errs.append(invalid(f"{p}.maxLimitRequestRatio[{k}]", raw("maxLimitRequestRatio"),
                                f"ratio {_s(ratio)} is less than 1"))
        if ratio is not None and mn is not None and mx is not None and mn > 0 and ratio > mx / mn:
            errs.append(invalid(f"{p}.maxLimitRequestRatio[{k}]", raw("maxLimitRequestRatio"),
                                f"ratio {_s(ratio)} is greater than max/min = {float(mx / mn):f}"))
        if not _overcommit_allowed(k) and df is not None and dr is not None and df != dr:
            errs.append(invalid(f"{p}.defaultRequest[{k}]", raw("defaultRequest"),
                                f"default value {_s(df)} must equal to defaultRequest value {_s(dr)} in {k}"))
        return errs


register(
    Resource("", "resourcequotas", "ResourceQuota", ["v1"], namespaced=True, short_names=("quota",),
             subresources=("status",), strategy=ResourceQuotaStrategy()),
    Resource("", "limitranges", "LimitRange", ["v1"], namespaced=True, short_names=("limits",),
             strategy=LimitRangeStrategy()),
)
