"""The service environment variables the kubelet gives every container (pkg/kubelet/envvars and
getServiceEnvVarMap): for each Service with a cluster IP, NAME_SERVICE_HOST, NAME_SERVICE_PORT
(and NAME_SERVICE_PORT_<PORT NAME> per named port) and Docker's link variables NAME_PORT and
NAME_PORT_<port>_<PROTO>[_PROTO|_PORT|_ADDR]; NAME is the Service's, upper-cased, `-` as `_`."""

from __future__ import annotations

import logging

from ..machinery.errors import APIError

log = logging.getLogger(__name__)

#: the master services, whose variables every container gets (from the default namespace)
MASTER_SERVICES = ("kubernetes",)


def _name(name: str) -> str:
    return name.upper().replace("-", "_")


def from_services(services: list[dict]) -> dict[str, str]:
    """FromServices: the variables of each Service that has a cluster IP (not headless, not ExternalName)."""
    env: dict[str, str] = {}
    for svc in services:
        spec = svc.get("spec") or {}
        ip, ports = spec.get("clusterIP", ""), spec.get("ports") or []
        if ip in ("", "None") or not ports:
            continue
        prefix = _name(svc["metadata"]["name"])
        env[f"{prefix}_SERVICE_HOST"] = ip
        env[f"{prefix}_SERVICE_PORT"] = str(ports[0]["port"])
        for p in ports:
            if p.get("name"):
                env[f"{prefix}_SERVICE_PORT_{_name(p['name'])}"] = str(p["port"])
        for i, p in enumerate(ports):
            proto = p.get("protocol") or "TCP"
            url = f"{proto.lower()}://{f'[{ip}]' if ':' in ip else ip}:{p['port']}"
            if i == 0:
                env[f"{prefix}_PORT"] = url
            at = f"{prefix}_PORT_{p['port']}_{proto.upper()}"
            env |= {at: url, f"{at}_PROTO": proto.lower(), f"{at}_PORT": str(p["port"]), f"{at}_ADDR": ip}
    return env


async def variables(client, namespace: str, enable_service_links: bool) -> dict[str, str]:
    """getServiceEnvVarMap: the default namespace's master services always, and while the pod's
    enableServiceLinks holds (the default), every Service of its namespace (one of the same name
    taking the master's place). A failed list leaves those out, logged."""
    services = client.resource("", "v1", "services")
    chosen: dict[str, dict] = {}
    try:
        for svc in (await services.list("default"))[0]:
            if svc["metadata"]["name"] in MASTER_SERVICES:
                chosen[svc["metadata"]["name"]] = svc
        if enable_service_links:
            for svc in (await services.list(namespace))[0]:
                chosen[svc["metadata"]["name"]] = svc
    except APIError as e:
        log.warning("services for the environment of pods in %s: %s", namespace, e.message)
    return from_services(list(chosen.values()))
