"""pods/log for the process runtime: each container instance writes
stdout and stderr to a file of its own; `previous`, `tailLines`,
`limitBytes` and `follow` (streamed until the instance exits) read them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from ...machinery import errors
from .worker import Container

FOLLOW_POLL = 0.2


def serve_log(c: Container | None, pod: str, container: str, query: dict) -> bytes | AsyncIterator[bytes]:
    if c is None or c.instances == 0:
        raise errors.bad_request(f'container "{container}" in pod "{pod}" is waiting to start: ContainerCreating')
    previous = query.get("previous") in ("true", "1")
    instance = c.instances - (2 if previous else 1)
    if instance < 0:
        raise errors.bad_request(f'previous terminated container "{container}" in pod "{pod}" not found')
    data = full = _read(c.log_path(instance))
    tail = query.get("tailLines")
    if tail is not None and tail.isdigit():
        lines = data.splitlines(keepends=True)
        data = b"".join(lines[len(lines) - int(tail):]) if int(tail) else b""
    limit = query.get("limitBytes")
    if limit is not None and limit.isdigit():
        data = data[:int(limit)]
    follow = query.get("follow") in ("true", "1") and not previous and limit is None
    if not follow or c.proc is None or c.proc.returncode is not None:
        return data
    return _follow(c, instance, data, len(full))


def _read(path: str, offset: int = 0) -> bytes:
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read()
    except FileNotFoundError:
        return b""


async def _follow(c: Container, instance: int, head: bytes, offset: int) -> AsyncIterator[bytes]:
    """`head`, then what the running instance appends after `offset` until it exits."""
    if head:
        yield head
    path = c.log_path(instance)
    while True:
        done = c.instances - 1 != instance or c.proc is None or c.proc.returncode is not None
        chunk = _read(path, offset)
        if chunk:
            offset += len(chunk)
            yield chunk
        if done:
            return
        await asyncio.sleep(FOLLOW_POLL)
