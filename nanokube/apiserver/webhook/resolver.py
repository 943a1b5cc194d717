"""Service resolution for webhooks through the Service's ready endpoints
(kube-apiserver's endpoint service resolver), read from the watch cache."""

from __future__ import annotations

import random

from .client import WebhookError

SERVICE_NAME_LABEL = "kubernetes.io/service-name"


class EndpointServiceResolver:
    def __init__(self, rest) -> None:
        self.rest = rest

    def _get(self, plural: str, group: str, namespace: str | None, name: str) -> dict | None:
        res = self.rest.index.get(group, "v1", plural)
        entry = self.rest.cache.get(res.key(namespace, name)) if res else None
        return entry.obj if entry else None

    def __call__(self, namespace: str, name: str, port: int) -> tuple[str, int]:
        svc = self._get("services", "", namespace, name)
        if svc is None:
            raise WebhookError(f'service "{name}" not found')
        spec = svc.get("spec") or {}
        if spec.get("type") == "ExternalName":
            return spec.get("externalName", ""), port
        svc_port = next((p for p in spec.get("ports") or [] if p.get("port") == port), None)
        if svc_port is None:
            raise WebhookError(f'no service port {port} found for service "{name}"')
        slices = self.rest.index.get("discovery.k8s.io", "v1", "endpointslices")
        candidates: list[tuple[str, int]] = []
        for _, e in self.rest.cache.list(slices.key_prefix(namespace)) if slices else []:
            es = e.obj
            if ((es.get("metadata") or {}).get("labels") or {}).get(SERVICE_NAME_LABEL) != name:
                continue
            ports = [p for p in es.get("ports") or [] if (p.get("name") or "") == (svc_port.get("name") or "")]
            if not ports or ports[0].get("port") is None:
                continue
            for ep in es.get("endpoints") or []:
                if (ep.get("conditions") or {}).get("ready") is False:
                    continue
                candidates += [(addr, ports[0]["port"]) for addr in ep.get("addresses") or []]
        if not candidates:
            raise WebhookError(f'service unavailable: no endpoints available for service "{name}"')
        return random.choice(candidates)
