"""Local APIServices for every group/version this server serves itself
(kube-apiserver's autoregister controller): the built-in ones with upstream's
priorities, labelled `kube-aggregator.kubernetes.io/automanaged: onstart`, and
the in-process metrics APIs with the priorities of their adapters' manifests.
Auto-managed APIServices for group/versions no longer served are removed."""

from __future__ import annotations

from ...machinery.errors import APIError
from ..rest import SYSTEM, WriteOptions
from .priorities import ADAPTER_PRIORITY, priority

GROUP = "apiregistration.k8s.io"
AUTOMANAGED = "kube-aggregator.kubernetes.io/automanaged"


def local_apiservice(group: str, version: str, prio: tuple[int, int]) -> dict:
    return {"metadata": {"name": f"{version}.{group}", "labels": {AUTOMANAGED: "onstart"}},
            "spec": {"group": group, "version": version, "groupPriorityMinimum": prio[0], "versionPriority": prio[1]}}


def desired(group_versions: dict[str, list[str]], adapter_groups: dict[str, str]) -> dict[str, dict]:
    """name -> APIService for the built-in group/versions and the in-process adapters."""
    out = {}
    for group, versions in group_versions.items():
        for version in versions:
            prio = priority(group, version)
            if prio is not None:
                out[f"{version}.{group}"] = local_apiservice(group, version, prio)
    for group, version in adapter_groups.items():
        out[f"{version}.{group}"] = local_apiservice(group, version, ADAPTER_PRIORITY)
    return out


async def register_local_apiservices(server, adapter_groups: dict[str, str]) -> None:
    res = server.index.get(GROUP, "v1", "apiservices")
    want = desired(server.index.group_versions(), adapter_groups)
    opts = WriteOptions(field_manager="kube-apiserver", user=SYSTEM)
    for name, obj in want.items():
        await server.ensure(GROUP, "v1", "apiservices", None, obj)
    items, _ = await server.rest.list(res, "v1", None, label_selector=f"{AUTOMANAGED}=onstart")
    for obj in items:
        if obj["metadata"]["name"] not in want:
            try:
                await server.rest.delete(res, "v1", None, obj["metadata"]["name"], {}, opts)
            except APIError as e:
                if e.code != 404:
                    raise
