"""slowStartBatch (k/k pkg/controller): many calls of one kind (a controller's pod creates) run in
batches of 1, 2, 4, ..., the calls of a batch at once, each batch only once the one before succeeded
whole. A call bound to fail (a quota, an admission rule, a missing service account) then fails once
or twice instead of once per pod, and so do its Events."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

#: upstream's controller.SlowStartInitialBatchSize
INITIAL_BATCH_SIZE = 1


async def slow_start_batch(count: int, call: Callable[[int], Awaitable[object]], initial: int = INITIAL_BATCH_SIZE,
                           limit: int | None = None) -> tuple[int, Exception | None]:
    """Call `call(i)` for i in 0..count-1 in doubling batches (none larger than `limit`: the
    StatefulSet's MaxBatchSize); after a batch with a failure none is begun. Returns the calls that
    succeeded and the batch's first error (None if none failed)."""
    done = succeeded = 0
    size = min(count, initial)
    while size > 0:
        results = await asyncio.gather(*(call(i) for i in range(done, done + size)), return_exceptions=True)
        for r in results:
            if isinstance(r, BaseException) and not isinstance(r, Exception):
                raise r  # a cancellation stops the batches
        errors = [r for r in results if isinstance(r, Exception)]
        succeeded += size - len(errors)
        if errors:
            return succeeded, errors[0]
        done += size
        size = min(2 * size, count - done, limit or count)
    return succeeded, None
