"""A resource's keys in order, for the watch cache's pages and namespaces.

One sorted Python list took each new key by `bisect.insort`, which moves every later key along:
at 100,000 Events a create or delete cost ~50 us of moving alone, growing with the resource.
Here the keys are in blocks of at most 2 * LOAD (each a sorted list, found by bisecting the
blocks' last keys), so a change moves at most one block's keys; positions are counted across
blocks from their lengths' running sums, rebuilt (in C) on the first read after a change."""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterable
from itertools import accumulate

#: a block splits in two past twice this many keys, and joins a neighbour below a quarter of it
LOAD = 1000


class SortedKeys:
    __slots__ = ("_blocks", "_maxes", "_starts", "_len")

    def __init__(self, keys: Iterable[str] = ()) -> None:
        ordered = sorted(keys)
        self._blocks = [ordered[i:i + LOAD] for i in range(0, len(ordered), LOAD)]
        self._maxes = [b[-1] for b in self._blocks]
        #: where each block starts among all keys, and their number last; None until a read needs it
        self._starts: list[int] | None = None
        self._len = len(ordered)

    def __len__(self) -> int:
        return self._len

    def add(self, key: str) -> None:
        """Adds `key`, which is not among the keys yet."""
        maxes = self._maxes
        self._starts = None
        self._len += 1
        i = bisect_left(maxes, key)
        if i < len(maxes):
            block = self._blocks[i]
            insort(block, key)
        elif maxes:  # past the last key: the last block's end
            i -= 1
            block = self._blocks[i]
            block.append(key)
            maxes[i] = key
        else:
            self._blocks.append([key])
            maxes.append(key)
            return
        if len(block) > 2 * LOAD:
            self._blocks[i:i + 1] = block[:LOAD], block[LOAD:]
            maxes[i:i + 1] = block[LOAD - 1], block[-1]

    def remove(self, key: str) -> None:
        """Removes `key`; KeyError if it is not among the keys."""
        blocks, maxes = self._blocks, self._maxes
        i = bisect_left(maxes, key)
        block = blocks[i] if i < len(blocks) else []
        j = bisect_left(block, key)
        if j == len(block) or block[j] != key:
            raise KeyError(key)
        del block[j]
        self._starts = None
        self._len -= 1
        if not block:
            del blocks[i], maxes[i]
            return
        maxes[i] = block[-1]
        if len(block) < LOAD // 4 and len(blocks) > 1:  # many deletions: join the next block (or the previous)
            k = i if i + 1 < len(blocks) else i - 1
            joined = blocks[k] + blocks[k + 1]
            blocks[k:k + 2] = [joined]
            maxes[k:k + 2] = [joined[-1]]
            if len(joined) > 2 * LOAD:
                blocks[k:k + 1] = joined[:LOAD], joined[LOAD:]
                maxes[k:k + 1] = joined[LOAD - 1], joined[-1]

    def _start(self, i: int) -> int:
        starts = self._starts
        if starts is None:
            starts = self._starts = [0, *accumulate(map(len, self._blocks))]
        return starts[i]

    def bisect_left(self, key: str) -> int:
        """How many keys sort before `key`."""
        i = bisect_left(self._maxes, key)
        if i == len(self._maxes):
            return self._len
        return self._start(i) + bisect_left(self._blocks[i], key)

    def bisect_right(self, key: str) -> int:
        """How many keys sort before `key` or are it."""
        i = bisect_right(self._maxes, key)
        if i == len(self._maxes):
            return self._len
        return self._start(i) + bisect_right(self._blocks[i], key)

    def slice(self, lo: int, hi: int) -> list[str]:
        """The keys at positions lo to hi (excluded), as a list's `keys[lo:hi]` for 0 <= lo, hi."""
        hi = min(hi, self._len)
        if lo >= hi:
            return []
        self._start(0)
        starts, blocks = self._starts, self._blocks
        i = bisect_right(starts, lo) - 1
        out = blocks[i][lo - starts[i]:hi - starts[i]]
        while len(out) < hi - lo:
            i += 1
            out += blocks[i][:hi - lo - len(out)]
        return out
