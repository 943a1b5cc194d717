"""DefaultBinder: binds through the pods/binding subresource."""

from __future__ import annotations

from ...machinery.errors import APIError
from ..framework import Code, Status


class DefaultBinder:
    name = "DefaultBinder"

    def __init__(self, args: dict, handle) -> None:
        self.handle = handle

    async def bind(self, state, info, node: str):
        md = info.pod["metadata"]
        try:
            await self.handle.api.bind(md.get("namespace", ""), md["name"], md.get("uid", ""), node)
        except APIError as e:
            return Status(Code.ERROR, [e.message])
        return None
