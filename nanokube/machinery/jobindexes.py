"""An Indexed Job's index lists (status.completedIndexes and failedIndexes, a success policy rule's
succeededIndexes) as sorted, disjoint intervals, as upstream's orderedIntervals: "0-2147483646" names
two billion indexes in twelve bytes, so nothing here is linear in the indexes a list names, only in
its intervals (and, for the pending ones, in the indexes asked for)."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Container, Iterable

Interval = tuple[int, int]


def first_overlap(a: Iterable[Interval], b: Iterable[Interval]) -> int | None:
    """The lowest index two sorted interval lists share, walking both once (the registry's
    validateFailedIndexesNotOverlapCompleted and the controller read this)."""
    ai, bi = iter(a), iter(b)
    x, y = next(ai, None), next(bi, None)
    while x is not None and y is not None:
        if x[0] <= y[1] and y[0] <= x[1]:
            return max(x[0], y[0])
        if x[0] <= y[0]:
            x = next(ai, None)
        else:
            y = next(bi, None)
    return None


class Indexes:
    """orderedIntervals: the indexes of a list as (first, last) pairs, sorted, disjoint, never adjacent."""

    __slots__ = ("spans",)

    def __init__(self, spans: Iterable[Interval] = ()):
        self.spans: list[Interval] = []
        for first, last in sorted(spans):
            if self.spans and first <= self.spans[-1][1] + 1:
                self.spans[-1] = (self.spans[-1][0], max(last, self.spans[-1][1]))
            else:
                self.spans.append((first, last))

    @classmethod
    def parse(cls, text: str | None, completions: int) -> Indexes:
        """parseIndexesFromString: the intervals below completions. A part that does not parse is
        skipped, one that starts at completions or above ends the list, a last index past it is cut."""
        spans: list[Interval] = []
        for part in (text or "").split(","):
            limits = part.split("-")
            try:
                first = int(limits[0])
                last = int(limits[1]) if len(limits) > 1 else first
            except ValueError:
                continue
            if first >= completions:
                break
            spans.append((first, min(last, completions - 1)))
        return cls(spans)

    def __len__(self) -> int:
        return sum(last - first + 1 for first, last in self.spans)

    def __contains__(self, i: object) -> bool:
        if not isinstance(i, int):
            return False
        k = bisect_right(self.spans, (i, float("inf")))
        return k > 0 and self.spans[k - 1][1] >= i

    def add(self, i: int) -> bool:
        """Add one index; False when it was there already."""
        k = bisect_right(self.spans, (i, float("inf")))
        if k > 0 and self.spans[k - 1][1] >= i:
            return False
        joins_left = k > 0 and self.spans[k - 1][1] == i - 1
        joins_right = k < len(self.spans) and self.spans[k][0] == i + 1
        if joins_left and joins_right:
            self.spans[k - 1:k + 1] = [(self.spans[k - 1][0], self.spans[k][1])]
        elif joins_left:
            self.spans[k - 1] = (self.spans[k - 1][0], i)
        elif joins_right:
            self.spans[k] = (i, self.spans[k][1])
        else:
            self.spans.insert(k, (i, i))
        return True

    def __or__(self, other: Indexes | Iterable[int]) -> Indexes:
        more = other.spans if isinstance(other, Indexes) else [(i, i) for i in other]
        return Indexes(self.spans + more)

    def shared(self, other: Indexes) -> int:
        """How many indexes both hold."""
        total, a, b = 0, 0, 0
        while a < len(self.spans) and b < len(other.spans):
            (f1, l1), (f2, l2) = self.spans[a], other.spans[b]
            total += max(0, min(l1, l2) - max(f1, f2) + 1)
            if l1 <= l2:
                a += 1
            else:
                b += 1
        return total

    def first_missing(self, count: int, completions: int, busy: Container[int] = ()) -> list[int]:
        """firstPendingIndexes: the lowest `count` indexes below completions that are neither here nor
        busy, walking the gaps between intervals (steps: count plus the busy indexes passed over)."""
        out: list[int] = []
        start = 0
        for first, last in self.spans + [(completions, completions)]:
            i = start
            while i < min(first, completions) and len(out) < count:
                if i not in busy:
                    out.append(i)
                i += 1
            if len(out) >= count or first >= completions:
                break
            start = last + 1
        return out

    def __str__(self) -> str:
        """As upstream writes them: "0-2,4,6,7" (a run of two is written as two indexes)."""
        parts = []
        for first, last in self.spans:
            parts.append(str(first) if first == last else f"{first},{last}" if last == first + 1
                         else f"{first}-{last}")
        return ",".join(parts)
