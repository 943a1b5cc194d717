import asyncio

from nanokube.controllers.slow_start import slow_start_batch


async def test_batches_double_and_each_runs_its_calls_at_once():
    started: list[list[int]] = []
    running: list[int] = []

    async def call(i):
        if not running:
            started.append([])
        running.append(i)
        started[-1].append(i)
        await asyncio.sleep(0)
        running.remove(i)
    assert await slow_start_batch(10, call) == (10, None)
    assert started == [[0], [1, 2], [3, 4, 5, 6], [7, 8, 9]]


async def test_no_batch_begins_after_one_with_a_failure():
    calls = []

    async def call(i):
        calls.append(i)
        if i in (4, 5):
            raise ValueError(f"refused {i}")
    made, failure = await slow_start_batch(20, call)
    assert sorted(calls) == [0, 1, 2, 3, 4, 5, 6]
    assert made == 5 and str(failure) == "refused 4"


async def test_nothing_to_do():
    async def call(i):
        raise AssertionError("never called")
    assert await slow_start_batch(0, call) == (0, None)


async def test_batches_stop_growing_at_the_limit():
    sizes: list[int] = []
    running = [0]

    async def call(i):
        if running[0] == 0:
            sizes.append(0)
        running[0] += 1
        sizes[-1] += 1
        await asyncio.sleep(0)
        running[0] -= 1
    assert await slow_start_batch(1300, call, limit=500) == (1300, None)
    assert sizes == [1, 2, 4, 8, 16, 32, 64, 128, 256, 500, 289]
