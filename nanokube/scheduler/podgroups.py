"""The scheduler's view of PodGroups: the groups from their informer and,
per group, the member pods seen (pending or assigned), keyed by the pod's
`spec.schedulingGroup.podGroupName` in its namespace."""

from __future__ import annotations

from ..machinery.meta import object_key
from ..machinery.podgroups import group_key


def _terminal(pod: dict) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


class PodGroupIndex:
    """PodGroups by `ns/name`, and their non-terminal member pods by uid."""

    def __init__(self) -> None:
        self.groups: dict[str, dict] = {}
        self.members: dict[str, dict[str, dict]] = {}

    def set_group(self, pg: dict) -> None:
        self.groups[object_key(pg)] = pg

    def remove_group(self, pg: dict) -> None:
        self.groups.pop(object_key(pg), None)

    def get(self, key: str) -> dict | None:
        return self.groups.get(key)

    def observe_pod(self, pod: dict) -> str | None:
        """Records a member pod; returns the key of its group (None: it has none, as most pods: told
        apart before calling group_key, since every pod event asks)."""
        if not (pod.get("spec") or {}).get("schedulingGroup"):
            return None
        key = group_key(pod)
        if key is None:
            return None
        uid = pod["metadata"].get("uid", "")
        if _terminal(pod):
            self.members.get(key, {}).pop(uid, None)
        else:
            self.members.setdefault(key, {})[uid] = pod
        return key

    def forget_pod(self, pod: dict) -> None:
        key = group_key(pod)
        if key is not None:
            self.members.get(key, {}).pop(pod["metadata"].get("uid", ""), None)

    def member_count(self, key: str) -> int:
        return len(self.members.get(key, ()))

    def assigned(self, key: str) -> list[dict]:
        """Members already bound to a node."""
        return [p for p in self.members.get(key, {}).values() if (p.get("spec") or {}).get("nodeName")]
