"""kube-proxy nftables sync on the real kernel, in a private network namespace.

For each size N: a cold full sync of N Services x 5 endpoints (one
transaction into an empty namespace), a full resync over the loaded table
(what the periodic resync costs), and one-Service changes at N (partial
syncs): half replace an endpoint (only `service-endpoints-tcp` elements
change), half add one (the `service-ips` element moves to another `lb-`
chain). Times are wall clock around `Syncer.sync`, planning included; the
`nft` column is the share spent in the kernel transaction. Needs root and
libnftables/`nft`.

    python -m benchmarks.proxy --services 1000,10000

Upstream on this development VM (perf-anchors §8, nft 1.0.6, kernel 6.18):
its layout (per-service chains with anonymous `numgen ... vmap`) loads
1k x 5 in 0.39-0.47 s and 10k x 5 in 86.6-90.5 s; one change costs
19-20 ms at 1k and 200-270 ms at 10k through `nft -f`. Upstream's own
partial sync: ~141 ms for one change at 10k (perf-anchors A8). Upstream's
layout is not re-run at 10k here: loading it soft-locks this VM's kernel.
"""

from __future__ import annotations

import argparse
import ipaddress
import secrets
import statistics
import subprocess
import time

from nanokube.proxy.nftables.layout import Config, Endpoint, ServicePort
from nanokube.proxy.nftables.nft import Nft
from nanokube.proxy.nftables.sync import Syncer

UPSTREAM_ONE_CHANGE_AT_10K_MS = 141.0
UPSTREAM_LAYOUT_COLD_S = {1000: 0.43, 10000: 86.6}  # perf-anchors §8, this VM
UPSTREAM_LAYOUT_ONE_CHANGE_MS = {1000: 19.5, 10000: 235.0}  # perf-anchors §8, `nft -f`, this VM
CONFIG = Config(cluster_cidr="10.0.0.0/8", service_cidrs=("172.16.0.0/12",))


class TimedNft(Nft):
    """Nft that adds up the time spent applying transactions."""

    spent = 0.0

    def apply(self, transaction: str) -> None:
        t0 = time.perf_counter()
        try:
            super().apply(transaction)
        finally:
            self.spent += time.perf_counter() - t0


def _service(i: int, endpoints: int, generation: int = 0) -> ServicePort:
    svc_ip = str(ipaddress.IPv4Address("172.16.0.0") + i + 1)
    base = int(ipaddress.IPv4Address("10.0.0.0")) + i * 16 + 1
    eps = tuple(Endpoint(str(ipaddress.IPv4Address(base + j)), 8080) for j in range(endpoints))
    if generation:
        eps = eps[:-1] + (Endpoint(eps[-1].ip, 8080 + generation),)
    return ServicePort("bench", f"svc-{i}", "http", "tcp", svc_ip, 80, endpoints=eps)


def _timed(syncer: Syncer, nft: TimedNft, state: dict, full: bool = False):
    nft.spent = 0.0
    t0 = time.perf_counter()
    report = syncer.sync(state, full)
    return report, time.perf_counter() - t0, nft.spent


def run(services: int = 1000, endpoints: int = 5, changes: int = 20) -> dict:
    """Time a cold full sync, a full resync, then `changes` one-service partial syncs."""
    ns = f"nk-bench-{secrets.token_hex(4)}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    nft = TimedNft(ns)
    try:
        syncer = Syncer(nft, CONFIG)
        state = {sp.key: sp for sp in (_service(i, endpoints) for i in range(services))}
        report, cold, cold_nft = _timed(syncer, nft, state)
        if not report.ok:
            raise RuntimeError(f"full sync failed: {report.error}")
        resync, resync_s, _ = _timed(syncer, nft, state, full=True)
        if not resync.ok:
            raise RuntimeError(f"full resync failed: {resync.error}")
        times, nft_times, lines = [], [], []
        for k in range(changes):
            i = k * 7919 % services
            sp = _service(i, endpoints + k % 2, generation=k + 1)
            state[sp.key] = sp
            r, elapsed, in_nft = _timed(syncer, nft, state)
            if not r.ok or r.full or r.services_changed != [sp.key]:
                raise RuntimeError(f"partial sync {k} was not a clean one-service partial sync: {r.error}")
            times.append(elapsed)
            nft_times.append(in_nft)
            lines.append(r.lines)
        return {"services": services, "endpoints": endpoints, "cold_full_sync_s": cold, "cold_nft_s": cold_nft,
                "cold_lines": report.lines, "full_resync_s": resync_s,
                "one_change_p50_ms": statistics.median(times) * 1e3, "one_change_max_ms": max(times) * 1e3,
                "one_change_nft_p50_ms": statistics.median(nft_times) * 1e3,
                "one_change_lines": max(lines)}
    finally:
        nft.close()
        subprocess.run(["ip", "netns", "del", ns], check=False)


def format_table(results: dict | list[dict]) -> str:
    rows = [results] if isinstance(results, dict) else results
    head = (f"{'services x eps':<15} {'cold full sync':>15} {'(nft)':>8} {'full resync':>12} "
            f"{'1 change p50':>13} {'(nft)':>8} {'max':>8}   upstream layout here: cold / 1 change")
    out = ["kube-proxy nftables sync, real kernel, private netns", head]
    for r in rows:
        n = r["services"]
        up_cold, up_change = UPSTREAM_LAYOUT_COLD_S.get(n), UPSTREAM_LAYOUT_ONE_CHANGE_MS.get(n)
        upstream = f"{up_cold} s / {up_change} ms" if up_cold else "-"
        if n == 10000:
            upstream += f" (upstream partial sync: {UPSTREAM_ONE_CHANGE_AT_10K_MS:.0f} ms)"
        out.append(f"{n:>6} x {r['endpoints']:<6} {r['cold_full_sync_s']:>13.3f} s {r['cold_nft_s']:>6.3f} s "
                   f"{r['full_resync_s']:>10.3f} s {r['one_change_p50_ms']:>10.2f} ms "
                   f"{r['one_change_nft_p50_ms']:>5.2f} ms {r['one_change_max_ms']:>5.1f} ms   {upstream}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.proxy", description=__doc__.split("\n\n")[0])
    p.add_argument("--services", default="1000", metavar="N[,N...]",
                   help="service counts, each x 5 endpoints (default 1000; the issue's sizes: 1000,10000)")
    p.add_argument("--changes", type=int, default=20, help="one-service partial syncs timed per size")
    args = p.parse_args(argv)
    print(format_table([run(int(n), changes=args.changes) for n in args.services.split(",")]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
