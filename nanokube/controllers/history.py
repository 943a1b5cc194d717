"""ControllerRevisions: the template history DaemonSets and StatefulSets keep
(k/k pkg/controller/history), which `kubectl rollout history/undo` read.

A revision's data is a strategic-merge patch that replaces the owner's pod
template; undo applies it to the owner.
"""

from __future__ import annotations

import orjson

from ..machinery.errors import APIError
from ..machinery.responses import go_escaped
from ..machinery.selectors import selector_from_object
from .replicaset import claim_objects, owner_reference

HASH_LABEL = "controller.kubernetes.io/hash"
POD_REVISION_LABEL = "controller-revision-hash"
_SAFE = "bcdfghjklmnpqrstvwxz2456789"
_MAX_PREFIX = 223


def template_patch(owner: dict) -> dict:
    """getPatch: `{"spec": {"template": {..., "$patch": "replace"}}}`, its keys sorted at every level
    as json.Marshal of a map writes them: the revision's data is kept as these bytes, and `kubectl
    rollout undo` compares them with its own getPatch of the owner to skip a rollback to the
    template the owner already has."""
    patch = {"spec": {"template": {**((owner.get("spec") or {}).get("template") or {}), "$patch": "replace"}}}
    return orjson.loads(orjson.dumps(patch, option=orjson.OPT_SORT_KEYS))


def safe_encode(text: str) -> str:
    """rand.SafeEncodeString: no vowels, no look-alike characters."""
    return "".join(_SAFE[ord(c) % len(_SAFE)] for c in text)


def hash_revision(data: dict, collision_count: int | None) -> str:
    """HashControllerRevision: FNV-1 (not 1a) 32 over the data's JSON as Go encodes it, then the
    collision count's decimal text."""
    raw = go_escaped(orjson.dumps(data, option=orjson.OPT_SORT_KEYS))
    if collision_count is not None:
        raw += str(collision_count).encode()
    h = 0x811C9DC5
    for b in raw:
        h = ((h * 0x01000193) & 0xFFFFFFFF) ^ b
    return safe_encode(str(h))


def revision_name(prefix: str, hash_: str) -> str:
    return f"{prefix[:_MAX_PREFIX]}-{hash_}"


class History:
    """Creates, re-numbers and prunes one kind of owner's ControllerRevisions."""

    def __init__(self, client, informer, owner_api_version: str, owner_kind: str):
        self.revisions = client.resource("apps", "v1", "controllerrevisions")
        self.informer = informer
        self.api_version, self.kind = owner_api_version, owner_kind

    async def claim(self, owner: dict) -> list[dict]:
        """The owner's revisions, oldest first; orphans its selector matches
        (left by a delete with --cascade=orphan) are adopted, as its pods are."""
        selector = selector_from_object((owner.get("spec") or {}).get("selector"))
        owned = await claim_objects(self.revisions, self.informer.list(), owner, selector, self.api_version, self.kind)
        return sorted(owned, key=lambda r: (r.get("revision", 0), r["metadata"]["name"]))

    def new_revision(self, owner: dict, name: str, labels: dict, number: int, annotations: dict | None = None) -> dict:
        md = {"name": name, "namespace": owner["metadata"]["namespace"], "labels": labels,
              "ownerReferences": [owner_reference(owner, self.api_version, self.kind)]}
        if annotations:
            md["annotations"] = dict(annotations)
        return {"apiVersion": "apps/v1", "kind": "ControllerRevision", "metadata": md,
                "data": template_patch(owner), "revision": number}

    async def create(self, body: dict) -> tuple[dict | None, bool]:
        """(the revision, True) once created, or an existing one with the same
        name: (it, True) when its data is the same, (None, False) on a collision."""
        try:
            return await self.revisions.create(body), True
        except APIError as e:
            if e.code != 409:
                raise
        md = body["metadata"]
        existing = await self.revisions.get(md["name"], md["namespace"])
        return (existing, True) if existing.get("data") == body["data"] else (None, False)

    async def renumber(self, revision: dict, number: int) -> dict:
        """An old revision that matches the template again (a rollback) becomes the newest."""
        return await self.revisions.patch(revision["metadata"]["name"], {"revision": number},
                                          namespace=revision["metadata"]["namespace"])

    async def delete(self, revision: dict) -> None:
        try:
            await self.revisions.delete(revision["metadata"]["name"], revision["metadata"]["namespace"])
        except APIError as e:
            if e.code != 404:
                raise

    async def truncate(self, history: list[dict], live: set[str], limit: int) -> None:
        """Delete the oldest revisions beyond `limit` that no live pod or status names."""
        old = [r for r in history if r["metadata"]["name"] not in live]
        for r in old[:max(0, len(old) - limit)]:
            await self.delete(r)
