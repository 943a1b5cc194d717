"""kube-proxy nftables sync on the real kernel, in a private network namespace.

Measures a cold full sync of N Services x 5 endpoints (one transaction) and
the time to apply a one-Service change at N (a partial sync: one service's
chains and map elements). Needs root and `nft`.

The default N is 150: on the shared 2-core development VM `nft` is wrapped
to refuse transactions over 3000 lines (large ones soft-lock its kernel),
and a full sync writes about 18 lines per service. `--services 1000` or
`10000` (the issue's targets) need a dedicated machine without that guard.

Upstream (perf-anchors A8, §4): one change at 10k after a partial sync
~141 ms; its layout takes ~87 s to load 10k x 5 cold on the reference box.
"""

from __future__ import annotations

import ipaddress
import secrets
import statistics
import subprocess
import time

from nanokube.proxy.nftables.layout import Config, Endpoint, ServicePort
from nanokube.proxy.nftables.nft import Nft
from nanokube.proxy.nftables.sync import Syncer

UPSTREAM_ONE_CHANGE_AT_10K_MS = 141.0
UPSTREAM_COLD_10K_S = 86.6
CONFIG = Config(cluster_cidr="10.0.0.0/8", service_cidrs=("172.16.0.0/12",))


def _service(i: int, endpoints: int, generation: int = 0) -> ServicePort:
    svc_ip = str(ipaddress.IPv4Address("172.16.0.0") + i + 1)
    base = int(ipaddress.IPv4Address("10.0.0.0")) + i * 16 + 1
    eps = tuple(Endpoint(str(ipaddress.IPv4Address(base + j)), 8080 + generation) for j in range(endpoints))
    return ServicePort("bench", f"svc-{i}", "http", "tcp", svc_ip, 80, endpoints=eps)


def run(services: int = 150, endpoints: int = 5, changes: int = 20) -> dict:
    """Time a cold full sync, then `changes` one-service partial syncs."""
    ns = f"nk-bench-{secrets.token_hex(4)}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        syncer = Syncer(Nft(ns), CONFIG)
        state = {sp.key: sp for sp in (_service(i, endpoints) for i in range(services))}
        t0 = time.perf_counter()
        report = syncer.sync(state)
        cold = time.perf_counter() - t0
        if not report.ok:
            raise RuntimeError(f"full sync failed: {report.error}")
        times, lines = [], []
        for k in range(changes):
            sp = _service(k * 7919 % services, endpoints + 1 + k % 2, generation=k + 1)
            state[sp.key] = sp
            t0 = time.perf_counter()
            r = syncer.sync(state)
            times.append(time.perf_counter() - t0)
            if not r.ok or r.full:
                raise RuntimeError(f"partial sync {k} was not a clean partial sync: {r.error}")
            lines.append(r.lines)
        return {"services": services, "endpoints": endpoints, "cold_full_sync_s": cold,
                "cold_lines": report.lines, "one_change_p50_ms": statistics.median(times) * 1e3,
                "one_change_max_ms": max(times) * 1e3, "one_change_lines": max(lines)}
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)


def format_table(r: dict) -> str:
    rows = [
        ("cold full sync", f"{r['cold_full_sync_s']:.3f} s ({r['cold_lines']} lines)",
         f"{UPSTREAM_COLD_10K_S} s at 10k x 5 (upstream layout, reference box)"),
        ("one-service change p50", f"{r['one_change_p50_ms']:.1f} ms",
         f"{UPSTREAM_ONE_CHANGE_AT_10K_MS} ms at 10k (upstream partial sync)"),
        ("one-service change max", f"{r['one_change_max_ms']:.1f} ms ({r['one_change_lines']} lines)", ""),
    ]
    head = f"kube-proxy nftables sync: {r['services']} services x {r['endpoints']} endpoints"
    return "\n".join([head] + [f"  {a:<24} {b:<28} {c}" for a, b, c in rows])
