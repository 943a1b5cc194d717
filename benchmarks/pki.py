"""Pod certificate issuance: requests created through the in-process API,
signed by the built-in pod-identity signer, observed Issued on a watch.

Reports issued requests per second with all requests in flight, p99
create→Issued latency when requests arrive at a fixed rate (100/s), the
signer's own rate (its `decide` on pending requests, no API calls) and the
ceiling under both, P-256 signatures per second with the CA's key alone, to
show how much of a request's cost is signing and how much the API round trips.
"""

from __future__ import annotations

import asyncio
import base64
import os
import tempfile
import time

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

from nanokube.apiserver.admission import Admission
from nanokube.apiserver.cache import WatchCache
from nanokube.apiserver.rest import GenericREST, ResourceIndex
from nanokube.apiserver.loopback import LocalClient
from nanokube.clock import Clock
from nanokube.pki import keys
from nanokube.pki.signer import PodCertificateSigner
from nanokube.registry.base import all_resources
from nanokube.store.memory import MemoryStore


def _stubs(n: int) -> list[str]:
    return [base64.b64encode(keys.stub_csr(keys.generate_key("ECDSAP256"))).decode() for _ in range(n)]


def _request(i: int, stub: str) -> dict:
    return {"metadata": {"name": f"req-{i}", "namespace": "default"}, "spec": {
        "signerName": "nanokube.io/pod-identity", "podName": f"p{i}", "podUID": f"u{i}", "serviceAccountName": "sa",
        "serviceAccountUID": "sau", "nodeName": "n1", "nodeUID": "nu", "stubPKCS10Request": stub}}


async def _stack() -> tuple[MemoryStore, WatchCache, LocalClient]:
    store = MemoryStore()
    cache = WatchCache(store)
    rest = GenericREST(store, cache, ResourceIndex(all_resources()), Clock())
    rest.admission = Admission(rest)
    await store.start()
    await cache.start()
    client = LocalClient(rest)
    await client.resource("", "v1", "namespaces").create({"metadata": {"name": "default"}})
    return store, cache, client


async def _sign_only(n: int) -> dict:
    """The signer's decision (parse the stub, issue, build the status) alone."""
    store, cache, client = await _stack()
    requests = [_request(i, stub) for i, stub in enumerate(_stubs(n))]
    with tempfile.TemporaryDirectory() as d:
        signer = PodCertificateSigner(client, d)
        signer.ca.load()
        t0 = time.perf_counter()
        for r in requests:
            signer.decide(r)
        elapsed = time.perf_counter() - t0
    await cache.stop()
    await store.close()
    return {"requests": n, "seconds": round(elapsed, 3), "issued_per_s": round(n / elapsed, 1), "p50_ms": "-",
            "p99_ms": "-"}


def _sign_floor(n: int) -> dict:
    """The CA's P-256 key signing a leaf-sized TBSCertificate and nothing else:
    the most any signer in Python could issue."""
    key, tbs, algorithm = ec.generate_private_key(ec.SECP256R1()), os.urandom(520), ec.ECDSA(hashes.SHA256())
    t0 = time.perf_counter()
    for _ in range(n):
        key.sign(tbs, algorithm)
    elapsed = time.perf_counter() - t0
    return {"requests": n, "seconds": round(elapsed, 3), "issued_per_s": round(n / elapsed, 1), "p50_ms": "-",
            "p99_ms": "-"}


async def _run(n: int, rate: float | None) -> dict:
    store, cache, client = await _stack()
    rc = client.resource("certificates.k8s.io", "v1", "podcertificaterequests")
    stubs = _stubs(n)
    with tempfile.TemporaryDirectory() as d:
        signer = PodCertificateSigner(client, d)
        await signer.start()
        created: dict[str, float] = {}
        latency: list[float] = []
        done = asyncio.Event()
        stream = await rc.watch("default")

        async def observe() -> None:
            async for typ, obj in stream:
                conds = (obj.get("status") or {}).get("conditions") or []
                name = obj["metadata"]["name"]
                if conds and name in created and conds[0]["type"] == "Issued":
                    latency.append(time.perf_counter() - created.pop(name))
                    if len(latency) == n:
                        done.set()
                        return

        watcher = asyncio.create_task(observe())
        t0 = time.perf_counter()
        for i, stub in enumerate(stubs):
            created[f"req-{i}"] = time.perf_counter()
            await rc.create(_request(i, stub))
            if rate:
                await asyncio.sleep(max(0.0, t0 + (i + 1) / rate - time.perf_counter()))
        await asyncio.wait_for(done.wait(), 600)
        elapsed = time.perf_counter() - t0
        watcher.cancel()
        await signer.stop()
    await cache.stop()
    await store.close()
    latency.sort()
    return {"requests": n, "seconds": round(elapsed, 3), "issued_per_s": round(n / elapsed, 1),
            "p50_ms": round(latency[len(latency) // 2] * 1000, 2), "p99_ms": round(latency[int(len(latency) * 0.99) - 1] * 1000, 2)}


def run(n: int = 2000, rate: float = 100.0) -> dict:
    """Throughput with every request in flight, latency at `rate` per second,
    the signer alone, and P-256 signing alone."""
    return {"burst": asyncio.run(_run(n, None)), f"at_{int(rate)}_per_s": asyncio.run(_run(min(n, int(rate * 10)), rate)),
            "signer_only": asyncio.run(_sign_only(n)), "p256_sign": _sign_floor(n)}


def format_table(results: dict) -> str:
    rows = [f"{'run':<14}{'requests':>10}{'issued/s':>12}{'p50 ms':>10}{'p99 ms':>10}"]
    for name, r in results.items():
        rows.append(f"{name:<14}{r['requests']:>10}{r['issued_per_s']:>12}{r['p50_ms']:>10}{r['p99_ms']:>10}")
    floor = results["p256_sign"]["issued_per_s"]
    rows.append(f"end to end: {100 * results['burst']['issued_per_s'] / floor:.1f}% of the P-256 signing rate; "
                f"signer alone: {100 * results['signer_only']['issued_per_s'] / floor:.1f}%")
    return "\n".join(rows)
