"""`python -m benchmarks`: run the API benchmarks and print one table."""

from __future__ import annotations

import argparse
import dataclasses
import signal
import sys
from pathlib import Path

import orjson

from .api import BACKENDS, BenchConfig, format_table, run_benchmarks


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _interrupt(signum: int, frame: object) -> None:
    """SIGTERM unwinds like Ctrl-C so every started process and temp dir is cleaned up."""
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks", description="nanokube API server benchmarks.")
    p.add_argument("--pods", type=int, help="pods to create per backend (default 10000; 1000 with --quick)")
    p.add_argument("--backends", default=",".join(BACKENDS), help="comma-separated subset of sqlite,memory,etcd")
    p.add_argument("--quick", action="store_true", help="N=1000 pods")
    p.add_argument("--api-workers", type=int, default=1, metavar="N",
                   help="run the server as `nanokube up --api-workers N` (sqlite and etcd; CPU and RSS summed over them; "
                        "with --pending, every mode's server; with --scheduler-mode process, SQLite's)")
    p.add_argument("--json", type=Path, metavar="FILE", help="also save the config and results as JSON")
    p.add_argument("--watch-only", action="store_true",
                   help="only the pod creates and the watch phase (100 watchers x 200 updates), once the server settled")
    p.add_argument("--proxy", action="store_true", help="instead: kube-proxy nftables syncs in a private netns (root)")
    p.add_argument("--services", type=int, default=150, metavar="N",
                   help="with --proxy: services x 5 endpoints (default 150; see python -m benchmarks.proxy)")
    p.add_argument("--pki", type=int, metavar="N", help="instead: pod certificate issuance with N requests")
    p.add_argument("--informer", type=int, metavar="N",
                   help="instead: an in-process pod informer over N pods: its sync by streaming list and by LIST, "
                        "and a live pod event's CPU per informer")
    p.add_argument("--scheduler", nargs="?", const="all", metavar="NAMES",
                   help="instead: scheduler_perf-style workloads (comma-separated names, default all)")
    p.add_argument("--scheduler-mode", choices=("in-process", "process"), default="in-process",
                   help="with --scheduler: one process holding the API server, the scheduler and the workload "
                        "(default), or `nanokube up` and `nanokube scheduler` in processes of their own with "
                        "the workload over HTTPS (--api-workers applies)")
    p.add_argument("--scale", type=float, default=1.0, help="with --scheduler: multiply the default sizes")
    p.add_argument("--upstream-size", action="store_true",
                   help="with --scheduler: scheduler_perf's sizes (5000 nodes / 10000 pods; DRA 500 nodes / 2500+2500)")
    p.add_argument("--nodes", nargs="?", const="1000,5000", metavar="COUNTS",
                   help="instead: simulated node agents (comma-separated cluster sizes, default 1000,5000)")
    p.add_argument("--steady", type=float, default=60.0, metavar="S",
                   help="with --nodes: seconds of steady-state heartbeats measured per size (default 60)")
    p.add_argument("--gang", nargs="?", const="all", metavar="NAMES",
                   help="instead: gang scheduling and workload preemption (GangScheduling, SingleGang1024, "
                        "WorkloadPreemption; default all) next to SchedulingBasic; --upstream-size for 5000 nodes")
    p.add_argument("--pending", nargs="?", const="5000,11000,8000", metavar="NODES,BOUND,PENDING",
                   help="instead: pod creates over HTTPS while pods that fit nowhere queue up, with and without "
                        "the scheduler (default 5000 fake nodes, 11000 bound pods, 8000 pending pods)")
    p.add_argument("--pending-modes", default="none,in-process", metavar="MODES",
                   help="with --pending: comma-separated servers to run, of none (no scheduler), in-process "
                        "(up's own) and own-process (a `nanokube scheduler` process beside `up --scheduler none`); "
                        "default none,in-process")
    args = p.parse_args(argv)
    if args.pending:
        from . import pending

        try:
            nodes, bound, queued = (int(n) for n in args.pending.split(","))
        except ValueError:
            p.error("--pending: give NODES,BOUND,PENDING, e.g. 5000,11000,8000")
        modes = tuple(m.strip() for m in args.pending_modes.split(",") if m.strip())
        unknown = sorted(set(modes) - set(pending.MODES))
        if unknown or not modes:
            p.error(f"--pending-modes: unknown {', '.join(unknown) or '(none given)'}; "
                    f"choose from {', '.join(pending.MODES)}")
        cfg = pending.PendingConfig(nodes=nodes, bound_pods=bound, pending_pods=queued, modes=modes,
                                    api_workers=args.api_workers)
        signal.signal(signal.SIGTERM, _interrupt)
        print(pending.format_table(cfg, pending.run(cfg, _progress)))
        return 0
    if args.gang:
        from . import gang

        try:
            print(gang.report(args.gang, args.upstream_size, _progress))
        except ValueError as e:
            p.error(f"--gang: {e}")
        return 0
    if args.nodes:
        from . import nodes

        print(nodes.format_table(nodes.run([int(n) for n in args.nodes.split(",")], args.steady, _progress)))
        return 0
    if args.scheduler:
        from . import scheduler

        workloads = scheduler.upstream_workloads() if args.upstream_size else scheduler.default_workloads(args.scale)
        if args.scheduler != "all":
            wanted = set(args.scheduler.split(","))
            workloads = [w for w in workloads if w.name in wanted]
            if not workloads:
                p.error(f"--scheduler: choose from {', '.join(w.name for w in scheduler.default_workloads())}")
        if args.scheduler_mode == "in-process":
            print(scheduler.format_table(workloads, scheduler.run(workloads, _progress)))
            return 0
        from . import scheduler_process

        signal.signal(signal.SIGTERM, _interrupt)
        results = scheduler_process.run(workloads, _progress, api_workers=args.api_workers)
        print(scheduler.format_table(workloads, results, dict(zip(scheduler_process.HEADINGS,
                                                                  scheduler_process.PROCESS_METRICS))))
        return 0
    if args.proxy:
        from . import proxy

        print(proxy.format_table(proxy.run(args.services)))
        return 0
    if args.pki:
        from . import pki

        print(pki.format_table(pki.run(args.pki)))
        return 0
    if args.informer:
        from . import informer

        print(informer.format_table(informer.run(args.informer)))
        return 0
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    unknown = sorted(set(backends) - set(BACKENDS))
    if unknown or not backends:
        p.error(f"--backends: unknown {', '.join(unknown) or '(none given)'}; choose from {', '.join(BACKENDS)}")
    pods = args.pods or (1000 if args.quick else 10000)
    if pods < 1:
        p.error("--pods must be positive")
    if args.api_workers > 1 and "memory" in backends:
        p.error("--api-workers: the memory store serves one process; choose --backends sqlite or etcd")
    cfg = BenchConfig(pods=pods, watch_only=args.watch_only, api_workers=args.api_workers)
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        results = run_benchmarks(backends, cfg, _progress)
    except KeyboardInterrupt:
        _progress("interrupted; stopped everything the benchmark started")
        return 130
    print(f"nanokube API benchmarks: {pods} pods, {cfg.concurrency} creates in flight, "
          f"{cfg.watchers} watchers x {cfg.watch_writes} updates, one every {cfg.watch_interval_s * 1000:g} ms"
          + (f", {cfg.api_workers} API server workers" if cfg.api_workers > 1 else ""))
    print(format_table(results))
    if args.json:
        args.json.write_bytes(orjson.dumps({"config": dataclasses.asdict(cfg), "results": results},
                                           option=orjson.OPT_INDENT_2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
