"""PrioritySort: higher spec.priority first, then the longer-queued pod."""

from __future__ import annotations


class PrioritySort:
    name = "PrioritySort"

    def __init__(self, args: dict, handle) -> None:
        pass

    def sort_key(self, info) -> tuple:
        return (-info.priority, info.timestamp)
