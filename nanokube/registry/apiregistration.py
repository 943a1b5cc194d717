"""apiregistration.k8s.io/v1 APIService: one group/version of the aggregated
API, served locally (no `service`) or proxied to an extension API server
(apiserver/aggregator/). Validation follows kube-aggregator's."""

from __future__ import annotations

from .apps import age_column, name_column
from .base import Column, Obj, Resource, Strategy, register
from .core_spec import PORT_RANGE_MSG
from ..machinery.conditions import find_condition
from ..machinery.validation import FieldError, dns1035_label, dns1123_subdomain, invalid, required


def _spec(o: Obj) -> dict:
    return o.get("spec") or {}


def _service(o: Obj) -> str:
    svc = _spec(o).get("service")
    return "Local" if not svc else f"{svc.get('namespace', '')}/{svc.get('name', '')}"


def _available(o: Obj) -> str:
    """kube-aggregator's printer: the Available status, with the reason unless True."""
    c = find_condition((o.get("status") or {}).get("conditions"), "Available")
    if c is None:
        return "Unknown"
    return c["status"] if c.get("status") == "True" else f"{c.get('status')} ({c.get('reason', '')})"


def _name(name: str) -> list[str]:
    """`<version>.<group>`: a DNS-1035 version, then a DNS subdomain group or
    nothing (`v1.` is the core group)."""
    version, dot, group = name.partition(".")
    if not dot:
        return ["must be in the form: version.group"]
    return dns1035_label(version) + (dns1123_subdomain(group) if group else [])


class APIServiceStrategy(Strategy):
    track_generation = False  # apiServerStrategy neither sets nor bumps it
    status_metadata = ()  # apiServerStatusStrategy keeps the stored labels, annotations, finalizers, owners
    generic_meta = True
    allow_unconditional_update = False
    name_validator = staticmethod(_name)
    columns = [
        name_column(),
        Column("Service", "string", _service, "The reference to the service that hosts this API endpoint."),
        Column("Available", "string", _available, "Whether this service is available."),
        age_column(),
    ]

    def default(self, obj, version):
        svc = _spec(obj).get("service")
        if svc is not None:
            svc.setdefault("port", 443)

    def prepare_for_update(self, new, old):
        new["status"] = old.get("status") or {}

    def validate(self, obj):
        spec = _spec(obj)
        errs: list[FieldError] = []
        group, version = spec.get("group", ""), spec.get("version", "")
        want = f"{version}.{group}"
        if obj["metadata"].get("name") != want:
            errs.append(invalid("metadata.name", obj["metadata"].get("name", ""),
                                f'must be `spec.version+"."+spec.group`: "{want}"'))
        if group:
            errs += [invalid("spec.group", group, m) for m in dns1123_subdomain(group)]
        if not version:
            errs.append(required("spec.version", ""))
        else:
            errs += [invalid("spec.version", version, m) for m in dns1035_label(version)]
        gpm, vp = spec.get("groupPriorityMinimum", 0), spec.get("versionPriority", 0)
        if not 0 < gpm <= 20000:
            errs.append(invalid("spec.groupPriorityMinimum", gpm, "must be positive and less than 20000"))
        if not 0 < vp <= 1000:
            errs.append(invalid("spec.versionPriority", vp, "must be positive and less than 1000"))
        svc = spec.get("service")
        if svc is None:
            if spec.get("caBundle"):
                errs.append(invalid("spec.caBundle", f"{len(spec['caBundle'])} bytes", "local APIServices may not have a caBundle"))
            if spec.get("insecureSkipTLSVerify"):
                errs.append(invalid("spec.insecureSkipTLSVerify", True, "local APIServices may not have insecureSkipTLSVerify"))
            return errs
        if not svc.get("namespace"):
            errs.append(required("spec.service.namespace", ""))
        if not svc.get("name"):
            errs.append(required("spec.service.name", ""))
        port = svc.get("port")
        if port is not None and not (isinstance(port, int) and 1 <= port <= 65535):
            errs.append(invalid("spec.service.port", port, PORT_RANGE_MSG))
        if spec.get("insecureSkipTLSVerify") and spec.get("caBundle"):
            errs.append(invalid("spec.insecureSkipTLSVerify", True, "may not be true if caBundle is present"))
        return errs

    def validate_status_update(self, new, old):
        errs: list[FieldError] = []
        for i, c in enumerate((new.get("status") or {}).get("conditions") or []):
            if c.get("status") not in ("True", "False", "Unknown"):
                errs.append(invalid(f"status.conditions[{i}].status", c.get("status"), "must be True, False, or Unknown"))
        return errs


register(Resource("apiregistration.k8s.io", "apiservices", "APIService", ["v1"], namespaced=False,
                  categories=("api-extensions",), subresources=("status",), strategy=APIServiceStrategy()))
