"""The shape every controller shares: informers feed a work queue; workers
run an idempotent `sync(key)` and retry with backoff on failure."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

from ..client.http import EXPECTED
from ..client.informer import InformerFactory
from ..client.record import CoreEventRecorder
from ..client.workqueue import WorkQueue
from ..machinery.errors import APIError
from ..clock import REAL, Clock

log = logging.getLogger(__name__)

#: conflicts in a row a key's syncs end with before one is a warning: a conflict is retried (the copy read
#: again) and the next sync mostly succeeds, nothing for whoever reads the log to act on, and upstream's
#: Deployment controller logs one at V(2) until its maxRetries (15); one that keeps coming back means some
#: writer keeps changing the object
CONFLICT_RETRIES = 15
#: the objects a controller's pass over many (a namespace's pods) reads between two turns of the loop
TURN = 1024


async def in_turns(items: list, size: int = TURN) -> AsyncIterator[list]:
    """`items` in slices of `size` (TURN; fewer for items that each hold many objects, as an
    EndpointSlice holds 100 endpoints), the loop let run between two: the in-process controllers share
    the API server's loop, and the passes of a ReplicaSet's sync over 300,000 pods (claim, status) held
    it for seconds, every request waiting (upstream's controller manager is a process of its own). The
    informers move on meanwhile, so a caller judges its expectations before it lists what it passes
    over, as upstream's syncs do: a pod observed after the list is left to a later sync, not made again."""
    if len(items) <= size:
        yield items
        return
    for i in range(0, len(items), size):
        if i:
            await asyncio.sleep(0)
        yield items[i:i + size]


class Controller:
    #: kube-controller-manager's name for it (cmd/kube-controller-manager/names): `--controllers`,
    #: /healthz checks and logs show it
    name = "controller"
    #: the other names `--controllers` takes for it (upstream's ControllerDescriptor aliases)
    aliases: tuple[str, ...] = ()
    #: its work queue's name upstream, the `name` label of the workqueue_* metrics ("" is not metered)
    queue_name = ""
    #: the feature gates it needs on to run (its ControllerDescriptor's requiredFeatureGates)
    feature_gates: tuple[str, ...] = ()
    #: whether `--controllers '*'` runs it (upstream's ControllersDisabledByDefault are not)
    enabled_by_default = True
    workers = 1
    #: a controller's own exceptions that mean "not yet, retry" (no bug) besides EXPECTED
    retriable: tuple[type[Exception], ...] = ()
    #: its core/v1 Event recorder, if it records any: `stop` drops the writes it has queued
    recorder: CoreEventRecorder | None = None

    def __init__(self, client, clock: Clock = REAL, informers: InformerFactory | None = None):
        """`informers`: the manager's shared factory, which it stops; without one the controller
        runs (and stops) informers of its own."""
        self.client = client
        self.clock = clock
        self.informer_factory = informers or InformerFactory(clock)
        self._own_factory = informers is None
        self.queue = WorkQueue(clock)
        self._tasks: list[asyncio.Task] = []

    def informers(self) -> list:
        """Informers this controller needs started (and synced before work)."""
        return []

    async def sync(self, key) -> None:
        raise NotImplementedError

    async def start(self) -> None:
        infs = self.informers()
        self.informer_factory.start(infs)
        for inf in infs:
            await inf.synced.wait()
        for _ in range(self.workers):
            self._tasks.append(asyncio.create_task(self._worker()))

    async def stop(self) -> None:
        self.queue.shutdown()
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.recorder is not None:
            await self.recorder.close()
        if self._own_factory:
            await self.informer_factory.stop()

    async def _worker(self) -> None:
        while True:
            key = await self.queue.get()
            try:
                await self.sync(key)
                self.queue.forget(key)
            except asyncio.CancelledError:
                raise
            except EXPECTED + self.retriable as e:
                quiet = isinstance(e, APIError) and e.code == 409 and self.queue.num_requeues(key) < CONFLICT_RETRIES
                log.log(logging.INFO if quiet else logging.WARNING, "%s: sync %s failed: %s", self.name, key, e)
                self.queue.add_rate_limited(key)
            except Exception:  # a bug: its traceback, at ERROR as upstream's HandleError logs, for whoever reads the log
                log.exception("%s: sync %s failed", self.name, key)
                self.queue.add_rate_limited(key)
            finally:
                self.queue.done(key)
