"""An in-process informer's cost: its sync by a streaming list against a LIST, and a live event.

Every component `nanokube up` runs in-process syncs its informers by a streaming list (a watch
with sendInitialEvents, as client-go's WatchListClient) and then watches; this measures both on
an in-process server (memory store, watch cache, the loopback client) holding `pods` pods: the
CPU of one informer's sync each way (the least of `reps`), and the CPU a pod patch costs with
`watchers` pod informers watching against none, per event per informer (the least of `reps`
rounds each). CPU, not wall time:
the process's own (`time.process_time`), so a loaded machine stretches it less; for exact
numbers run it under callgrind (benchmarks/README, stream57).
"""

from __future__ import annotations

import asyncio
import gc
import os
import time

from nanokube.apiserver.app import APIServer
from nanokube.apiserver.loopback import LocalClient
from nanokube.client.informer import Informer
from nanokube.clock import REAL
from nanokube.store.memory import MemoryStore


def _pod(i: int) -> dict:
    return {"metadata": {"name": f"p-{i:05d}", "namespace": "default", "labels": {"app": f"a{i % 10}"}},
            "spec": {"containers": [{"name": "c", "image": "registry.example/app:1.0",
                                     "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}],
                     "nodeSelector": {"pool": "none"}}}


async def _sync_cpu(client: LocalClient, streamed: bool) -> float:
    """CPU seconds until a fresh pod informer has synced, by a streaming list or a LIST."""
    rc = client.resource("", "v1", "pods")
    rc.watch_list = streamed
    inf = Informer(rc)
    gc.collect()
    start = time.process_time()
    task = asyncio.ensure_future(inf.run())
    await inf.synced.wait()
    spent = time.process_time() - start
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return spent


async def _patches_cpu(client: LocalClient, first: int, count: int) -> float:
    """CPU seconds of `count` label patches, one pod each, and of the watches' handling of them."""
    pods = client.resource("", "v1", "pods")
    gc.collect()
    start = time.process_time()
    for i in range(first, first + count):
        await pods.patch(f"p-{i:05d}", {"metadata": {"labels": {"x": str(i)}}}, namespace="default")
    await asyncio.sleep(0.05)  # the informers take the last events
    return time.process_time() - start


async def _run(pods: int, reps: int, watchers: int) -> dict:
    os.environ.setdefault("NANOKUBE_CACHE_MUTATION_DETECTOR", "false")
    s = APIServer(MemoryStore(), None, port=0, clock=REAL)
    await s.store.start()
    await s.cache.start()
    try:
        client = LocalClient(s.rest)
        s.rest.admission.disable("ServiceAccount")
        await client.resource("", "v1", "namespaces").create({"metadata": {"name": "default"}})
        pods_api = client.resource("", "v1", "pods")
        for b in range(0, pods, 200):
            await asyncio.gather(*(pods_api.create(_pod(i), response=False) for i in range(b, min(pods, b + 200))))
        gc.freeze()
        await _sync_cpu(client, True)  # warm-up
        streamed = min([await _sync_cpu(client, True) for _ in range(reps)])
        listed = min([await _sync_cpu(client, False) for _ in range(reps)])
        # rounds of patches alone, then with the informers watching, each on pods not patched yet; the
        # least of each, as the informers' share is a few percent of a patch and the load moves both
        count = min(pods // (2 * reps), 500)
        alone = watched = float("inf")
        for r in range(reps):
            alone = min(alone, await _patches_cpu(client, 2 * r * count, count))
            informers = [Informer(client.resource("", "v1", "pods")) for _ in range(watchers)]
            tasks = [asyncio.ensure_future(inf.run()) for inf in informers]
            for inf in informers:
                await inf.synced.wait()
            watched = min(watched, await _patches_cpu(client, (2 * r + 1) * count, count))
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        return {"pods": pods, "streamed_sync_ms": streamed * 1000, "list_sync_ms": listed * 1000,
                "watchers": watchers, "patch_us": alone / count * 1e6, "watched_patch_us": watched / count * 1e6,
                "per_event_per_informer_us": (watched - alone) / count / watchers * 1e6 if watchers else 0.0}
    finally:
        await s.cache.stop()
        await s.store.close()


def run(pods: int = 10_000, reps: int = 5, watchers: int = 12) -> dict:
    return asyncio.run(_run(pods, reps, watchers))


def format_table(r: dict) -> str:
    return "\n".join([
        f"in-process pod informer, {r['pods']} pods (CPU, least of the runs)",
        f"  sync by streaming list  {r['streamed_sync_ms']:8.1f} ms",
        f"  sync by LIST            {r['list_sync_ms']:8.1f} ms  (streamed / LIST {r['streamed_sync_ms'] / r['list_sync_ms']:.2f})",
        f"  pod patch, no informer  {r['patch_us']:8.0f} us",
        f"  with {r['watchers']} informers       {r['watched_patch_us']:8.0f} us  "
        f"({r['per_event_per_informer_us']:.0f} us per event per informer)",
    ])
