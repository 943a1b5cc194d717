"""Extended resources backed by DRA (DRAExtendedResource, GA in 1.37): a
container's `nvidia.com/gpu: 2` is served by a DeviceClass whose
`extendedResourceName` it is (or `deviceclass.resource.kubernetes.io/<class>`,
every class's implicit name) on nodes that do not advertise the resource
themselves. The scheduler allocates one claim per pod for all such requests,
which the kubelet then prepares like any other; this module holds what the
scheduler, the claim controller and the kubelet share about it."""

from __future__ import annotations

from ..machinery.quantity import whole_count

#: every DeviceClass is also the extended resource of this prefix and its name
IMPLICIT_PREFIX = "deviceclass.resource.kubernetes.io/"
#: marks the claim the scheduler created for a pod's extended resources
ANNOTATION = "resource.kubernetes.io/extended-resource-claim"


def class_mapping(classes: list[dict]) -> dict[str, str]:
    """Resource name -> DeviceClass name: each class's implicit name, and each
    extendedResourceName, taken by the newest class naming it (of classes created in the same
    second, the lexically first), as upstream's DeviceClassMapping."""
    out: dict[str, str] = {}
    named: dict[str, list[dict]] = {}
    for c in sorted(classes, key=lambda c: c["metadata"]["name"]):
        out[IMPLICIT_PREFIX + c["metadata"]["name"]] = c["metadata"]["name"]
        if ern := (c.get("spec") or {}).get("extendedResourceName"):
            named.setdefault(ern, []).append(c)
    for ern, cs in named.items():
        out[ern] = max(cs, key=lambda c: c["metadata"].get("creationTimestamp") or "")["metadata"]["name"]
    return out


def _containers(spec: dict) -> list[dict]:
    """Init containers, then containers: the order request names count them in."""
    return [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]


def _requests(c: dict) -> dict:
    return (c.get("resources") or {}).get("requests") or {}


def device_requests(spec: dict, backed: dict[str, str]) -> list[dict]:
    """The claim's requests for the DRA-backed resources `backed` (name -> class): one per
    container and resource, `container-<i>-request-<j>` with j the resource's place among the
    container's sorted requests, ExactCount of the amount asked, sorted by name."""
    out = []
    for i, c in enumerate(_containers(spec)):
        reqs = _requests(c)
        for j, name in enumerate(sorted(reqs)):
            if name in backed and whole_count(reqs[name]):
                out.append({"name": f"container-{i}-request-{j}", "exactly": {
                    "deviceClassName": backed[name], "allocationMode": "ExactCount", "count": whole_count(reqs[name])}})
    return sorted(out, key=lambda r: r["name"])


def request_mappings(spec: dict, requests: list[dict]) -> list[dict]:
    """pod.status.extendedResourceClaimStatus.requestMappings: which container's resource each
    of the claim's requests serves."""
    names = {r["name"] for r in requests}
    return [{"containerName": c["name"], "resourceName": name, "requestName": f"container-{i}-request-{j}"}
            for i, c in enumerate(_containers(spec)) for j, name in enumerate(sorted(_requests(c)))
            if f"container-{i}-request-{j}" in names]


def claim_name(pod: dict) -> str | None:
    """The pod's extended resource claim, once the scheduler recorded it."""
    return (((pod.get("status") or {}).get("extendedResourceClaimStatus")) or {}).get("resourceClaimName") or None
