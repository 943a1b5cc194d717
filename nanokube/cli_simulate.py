"""`nanokube simulate`: replay a workload trace through the real control
plane on a virtual clock, once per scheduler configuration, and report."""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import shutil
import signal
import sys


def add_parser(sub) -> None:
    p = sub.add_parser("simulate", help="replay a workload trace through the control plane in virtual time")
    p.add_argument("--cluster", required=True, action="append", metavar="FILE",
                   help="nodes: a cluster file (YAML node pools) or an openb node list (*.csv); repeat to add the "
                        "pools of several (e.g. an openb list and a YAML file of new node types)")
    p.add_argument("--add-nodes", action="append", default=[], metavar="POOL=COUNT",
                   help="what-if: COUNT more nodes of the cluster's pool POOL (repeatable)")
    p.add_argument("--drop-nodes", default=None, metavar="COUNT|PERCENT%",
                   help="what-if: take that many of the first --cluster's nodes (or that share of them) away, drawn "
                        "across its pools by --seed")
    p.add_argument("--trace", required=True, metavar="FILE",
                   help="workload: an openb pod list (*.csv) or JSON Lines of {time, verb, object}")
    p.add_argument("--arrival-rate", type=float, default=None, metavar="FACTOR",
                   help="what-if: the trace's arrivals FACTOR times as frequent (creation times divided by FACTOR), "
                        "each object living as long as in the trace (its deletion moves with its creation), e.g. 2 "
                        "for twice the load; --until counts in the replayed time")
    p.add_argument("--keep-run-times", action="store_true",
                   help="openb: a task the trace scheduled runs as long as it ran there (deletion_time - "
                        "scheduled_time) from its start here, so waiting delays its end instead of cutting it short; "
                        "one never scheduled there is still deleted at its deletion_time; implies --drain")
    p.add_argument("--scheduler-config", action="append", default=[], metavar="FILE",
                   help="KubeSchedulerConfiguration; repeat to compare several on the same inputs (default: the "
                        "default profile)")
    p.add_argument("--seed", type=int, default=0, help="seed of the scheduler's tie-breaking, --inflate's sampling and --drop-nodes' choice")
    p.add_argument("--until", type=_trace_time, default=None, metavar="SECONDS|DURATION",
                   help="stop at this trace time: seconds, or a duration (90m, 720h, 30d, 1d12h)")
    p.add_argument("--limit-pods", type=int, default=None, metavar="N",
                   help="replay only the trace's first N pods created (their deletions and every other write stay), "
                        "for a quick run; with --inflate, sample from them")
    p.add_argument("--drain", action="store_true",
                   help="after the trace's last write, keep going until every pod has ended (or none runs and nothing "
                        "changed for 10 virtual minutes: what still waits fits nowhere), for a makespan; pods that "
                        "never end (a Deployment's) need --until too")
    p.add_argument("--speed", type=float, default=None, metavar="X",
                   help="pace virtual time at X times real time (default: as fast as possible)")
    p.add_argument("--serve-port", type=int, default=None, metavar="PORT",
                   help="with --speed: serve the API over HTTPS on PORT (0: any) and print a kubeconfig, to watch "
                        "the run with kubectl")
    p.add_argument("--controllers", default=None,
                   help="controllers to run (kube-controller-manager's --controllers syntax; default: all but "
                        "node-lifecycle, for an openb trace only resourceclaim)")
    p.add_argument("--inflate", type=float, default=None, metavar="FACTOR",
                   help="the inflation experiment: pods sampled from the trace by --seed, never finishing, until "
                        "their GPUs reach FACTOR x the cluster's (e.g. 1.3)")
    p.add_argument("--event-ttl", default="1h", metavar="DURATION",
                   help="how long an Event lives after its last write, in virtual time (Go duration; default 1h)")
    p.add_argument("--feature-gates", default="", metavar="Name=true,...",
                   help="feature gates to set, as Name=bool pairs, for the run's control plane (as `nanokube up`'s: on "
                        "top of 1.37's defaults with the alpha gates of the features nanokube implements on), e.g. "
                        "GenericWorkload=false to replay a gang trace with every pod scheduled alone")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="write results.json, report.html, and for a spreadsheet summary.csv (the table) and series.csv "
                        "(GPU allocation, fragmentation and pending pods over virtual time) here")
    p.add_argument("--quiet", action="store_true", help="no progress line on stderr")


def _trace_time(text: str) -> float:
    """--until: seconds as before, or a duration (a planner thinks of a month as 30d or 720h, not
    2592000): Go's, with days in front as the progress line and the table print them (149d08h)."""
    try:
        return float(text)
    except ValueError:
        pass
    from .machinery import goduration

    days, sep, rest = text.partition("d")
    try:
        if sep and days.replace(".", "", 1).isdigit():
            return float(days) * 86400 + (goduration.parse(rest) if rest else 0.0)
        return goduration.parse(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"{text!r}: want seconds (3600) or a duration (1h, 30d, 1d12h): {e}") \
            from None


def _load(args):
    from .node.cluster import load_cluster
    from .sim import openb
    from .sim.trace import load_jsonl

    from .sim.capacity import add_nodes, drop_nodes, merge

    files = [(p, openb.load_nodes(p) if p.endswith(".csv") else load_cluster(p)) for p in args.cluster]
    if args.drop_nodes is not None:
        # of the first file's nodes, the cluster as it is: later files and --add-nodes are what is added, so
        # adding them neither loses new nodes to the draw nor changes which of the cluster's nodes it takes
        files[0] = (files[0][0], drop_nodes(files[0][1], args.drop_nodes, args.seed))
    cluster = merge(files)
    for spec in args.add_nodes:
        cluster = add_nodes(cluster, spec)
    trace = openb.load_pods(args.trace, untimed=bool(args.inflate), run_times=args.keep_run_times) \
        if args.trace.endswith(".csv") \
        else load_jsonl(args.trace)
    return cluster, trace


#: what the re-executed interpreter runs (`reexecuted`)
REEXEC = "import sys; from nanokube.cli_simulate import reexecuted; reexecuted(sys.argv[1:])"
#: set in the re-executed interpreter, which ends with the command
_ends_process = False


def reexecuted(argv: list[str]) -> None:
    """The re-executed interpreter's program: the command, then an exit that leaves the heap to the OS.
    A run's objects (every node's and pod's API objects, caches and agents; 0.9 GB on openb) are
    garbage once it ends, and the interpreter's own teardown freed them one by one: 7 CPU-s, the
    process's last 6%, after the results were out. Output is flushed first; nothing else waits for an exit."""
    global _ends_process
    _ends_process = True
    from .cli import main

    try:
        rc = main(argv)
    except BrokenPipeError:
        rc = BROKEN_PIPE
    _exit(rc)


#: the exit status when stdout's reader has gone (`| head -1`), as a process SIGPIPE ends
BROKEN_PIPE = 141


def _exit(rc: int | None) -> None:
    """Stops the process, removing what a run not stopped holds in /tmp; a reader gone from stdout ends
    it as SIGPIPE would, without a traceback. Where no run began (its arguments or files refused) the
    stack module is not imported for that: importing the control plane cost 1.6 of a refusal's 1.8 CPU-s."""
    if stack := sys.modules.get("nanokube.sim.stack"):
        stack.remove_dirs()
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        rc = rc or BROKEN_PIPE
    sys.stderr.flush()
    os._exit(rc or 0)


def run(args: argparse.Namespace) -> int:
    for bad, why in ((args.serve_port is not None and not args.speed,
                      "--serve-port needs --speed (virtual time otherwise outruns any client)"),
                     (args.speed is not None and args.speed <= 0, f"--speed {args.speed}: must be above 0"),
                     (args.until is not None and args.until < 0, f"--until {args.until}: must be 0 or more"),
                     (args.inflate is not None and args.inflate <= 0, f"--inflate {args.inflate}: must be above 0"),
                     (args.drain and args.inflate, "--drain with --inflate: inflated pods never end"),
                     (args.arrival_rate is not None and args.arrival_rate <= 0,
                      f"--arrival-rate {args.arrival_rate}: must be above 0"),
                     (args.keep_run_times and not args.trace.endswith(".csv"),
                      "--keep-run-times is for an openb pod list (*.csv); a JSON Lines trace gives a pod's run time "
                      "with its sim.nanokube.io/run-seconds annotation"),
                     (args.keep_run_times and args.inflate, "--keep-run-times with --inflate: inflated pods never end"),
                     (args.arrival_rate is not None and args.inflate,
                      "--arrival-rate with --inflate: inflated pods arrive at a fixed pace, not the trace's"),
                     (args.limit_pods is not None and args.limit_pods < 1, f"--limit-pods {args.limit_pods}: must be 1 or more")):
        if bad:
            print(f"nanokube simulate: {why}", file=sys.stderr)
            return 2
    from .machinery import featuregates

    try:  # the process's gates, read by the run's components as `up`'s are
        gate_warnings = featuregates.set_flag(args.feature_gates)
    except ValueError as e:
        print(f"nanokube simulate: {e}", file=sys.stderr)
        return 2
    if os.environ.get("PYTHONHASHSEED") != "0":
        # string hashing decides set order; a fixed seed makes the run repeatable. Re-executed once the arguments
        # are judged (a refusal needs no second interpreter) and before the control plane's modules are
        # imported: the new interpreter imports them again.
        os.execve(sys.executable, [sys.executable, "-c", REEXEC, *sys.argv[1:]], {**os.environ, "PYTHONHASHSEED": "0"})
    if args.quiet:  # the components' informational logs (nodes registered...) too; warnings and errors stay
        import logging

        logging.getLogger().setLevel(logging.WARNING)
    for text in gate_warnings:
        print(f"nanokube simulate: {text}", file=sys.stderr)
    # the trace no longer holds the tasks' ends: the run goes on to them
    args.drain = args.drain or args.keep_run_times
    try:
        cluster, trace = _load(args)
        configs = [(name, _config(p)) for name, p in zip(_names(args.scheduler_config), args.scheduler_config)] \
            or [("default", None)]
        # imported once the files are judged: it imports the API server's watch cache (and aiohttp), 0.45
        # of a refused file's 0.7 CPU-s
        from .apiserver.eventttl import parse_ttl

        args.event_ttl = parse_ttl(args.event_ttl)
        if args.controllers is None:
            args.controllers = "resourceclaim" if args.trace.endswith(".csv") else "*,-node-lifecycle"
        _known_controllers(args.controllers)
        if args.out:
            _writable(args.out)
    except (OSError, KeyError, ValueError) as e:  # ClusterFileError, TraceError and ConfigError are ValueErrors
        print(f"nanokube simulate: {e}", file=sys.stderr)
        return 2
    if args.limit_pods is not None:
        from .sim.trace import first_pods

        trace = first_pods(trace, args.limit_pods)
    if args.arrival_rate is not None:
        from .sim.trace import scale_arrivals

        trace = scale_arrivals(trace, args.arrival_rate)
    if args.inflate:
        from .sim.trace import TraceError, inflate

        total = sum(1 for n in cluster.nodes() for d in n.devices if d.kind == "gpu") * 1000
        try:
            trace = inflate(trace, total, args.inflate, args.seed)
        except TraceError as e:
            print(f"nanokube simulate: {e}", file=sys.stderr)
            return 2
    if problem := _unscheduled(configs, args.scheduler_config, trace):
        print(f"nanokube simulate: {problem}", file=sys.stderr)
        return 2
    for _, cfg in configs:
        if cfg is not None:
            _fill_workload(cfg, trace)
    if not args.quiet:
        from .sim.capacity import describe

        print(f"cluster: {describe(cluster)}", file=sys.stderr, flush=True)
    results: list = []
    for i, (name, cfg) in enumerate(configs):
        last = i == len(configs) - 1
        if i:
            # the run before is garbage now that its loop has closed, much of it in cycles (components,
            # caches) that only a full collection frees: freed before this run builds its own, not after
            gc.collect()
        # which of the configurations runs: one's ETA says nothing of those still to come
        label = f"{name} [{i + 1}/{len(configs)}]" if len(configs) > 1 else name
        if rc := asyncio.run(_run(args, name, cfg, cluster, trace, args.controllers, results, last=last, label=label)):
            return rc
    return 0


#: what stops a run early, reporting what ran (exit status a shell's 128 + the signal): Ctrl-C, and the
#: SIGTERM of a `timeout` or a CI job's end
STOP_SIGNALS = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated"}


class _Stop(asyncio.Event):
    """Set by the first stop signal; `status` is the command's exit status then, a shell's 128 + the signal."""

    status = 0


def _on_signal(stopping: _Stop, signum: int) -> None:
    """The first ends the run where virtual time is and reports it; a second exits at once."""
    what = STOP_SIGNALS[signum]
    if stopping.is_set():
        print(f"\nnanokube simulate: {what} again; exiting without a report", file=sys.stderr, flush=True)
        _exit(128 + signum)
    print(f"\nnanokube simulate: {what}; stopping at the current virtual time to report what ran "
          "(again to exit at once)", file=sys.stderr, flush=True)
    stopping.status = 128 + signum
    stopping.set()


async def _run(args: argparse.Namespace, name: str, cfg, cluster, trace, controllers: str, results: list,
               last: bool, label: str) -> int:
    """One configuration's run and its line, and after the last (or an interrupted one) the table
    and the report; the exit status of a signal that stopped it, else 0. The re-executed
    interpreter then ends at once, inside the run's event loop: the last run's orderly stop (every
    component's tasks cancelled and awaited, the collector given back what the run froze: ~3 CPU-s
    on openb) serves only a process that goes on."""
    from .sim.driver import run as simulate
    from .sim.report import results_doc, write_report
    from .sim.summary import duration, table

    stopping = _Stop()
    loop = asyncio.get_running_loop()
    for signum in STOP_SIGNALS:
        if signal.getsignal(signum) is not signal.SIG_IGN:
            loop.add_signal_handler(signum, _on_signal, stopping, signum)
    ends = last and _ends_process
    r = await simulate(name, cluster, trace, cfg, seed=args.seed, until=args.until, speed=args.speed,
                       controllers=controllers, progress=not args.quiet, serve_port=args.serve_port,
                       stop=not ends, event_ttl=args.event_ttl, interrupt=stopping,
                       drain=args.drain, label=label)
    results.append(r)
    m = r.metrics
    cut = f" (interrupted at virtual {r.virtual_s:.0f}s)" if r.interrupted else ""
    # seconds to compare with --until, and the span as a person reads it (12902960s is 149d08h)
    span = f" ({duration(r.virtual_s)})" if r.virtual_s >= 60 else ""
    print(f"{name}: {m['scheduled']}/{m['pods']} pods scheduled{cut}, virtual {r.virtual_s:.0f}s{span} in wall "
          f"{r.wall_s:.1f}s, {r.cpu_s:.1f} CPU-s ({r.events / r.wall_s:,.0f} events/s, {m['pods'] / r.wall_s:,.1f} pods/s), "
          f"placements {r.placement_hash}", flush=True)
    if r.refused:
        # printed as they came, among the progress and the components' logs; a long run's scroll-back loses them
        n = len(r.refused)
        print(f"{name}: {n:,} trace write{'s' if n > 1 else ''} refused, not replayed (first: {r.refused[0]})",
              flush=True)
    if last or r.interrupted:
        inputs = {"cluster": ", ".join(args.cluster), "add_nodes": args.add_nodes, "drop_nodes": args.drop_nodes,
                  "trace": args.trace, "seed": args.seed, "inflate": args.inflate, "until": args.until,
                  "drain": args.drain, "limit_pods": args.limit_pods,
                  "arrival_rate": args.arrival_rate, "keep_run_times": args.keep_run_times,
                  "feature_gates": args.feature_gates or None}
        doc = write_report(args.out, results, inputs) if args.out else results_doc(results, inputs)
        width = shutil.get_terminal_size().columns if sys.stdout.isatty() else None
        print("\n" + table(doc["runs"], inflate=args.inflate, width=width), flush=True)
        if args.out:
            print(f"report: {os.path.join(args.out, 'report.html')}", flush=True)
    status = stopping.status if r.interrupted else 0
    if ends or (r.interrupted and _ends_process):
        _exit(status)
    return status


def _config(path: str):
    """A KubeSchedulerConfiguration file, any error naming the file (several may be given)."""
    from .scheduler.config import ConfigError, load

    try:
        return load(path)
    except OSError as e:
        raise ConfigError(f"{path}: cannot read: {e.strerror}") from None
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}") from None


def _known_controllers(spec: str) -> None:
    """--controllers judged before the run, as `nanokube up` judges it: an unknown name was a
    ValueError traceback from the controller manager's start, inside the run."""
    from .controllers.csrsigning import CSRSigningController
    from .controllers.manager import CONTROLLERS, enabled

    enabled([*CONTROLLERS, CSRSigningController], spec)


def _unscheduled(configs, paths: list[str], trace) -> str | None:
    """A configuration none of whose profiles takes a schedulerName the trace's pods ask for (a profile
    renamed as in a cluster of two schedulers) leaves them waiting for a scheduler the run lacks, with
    nothing said: refused, naming the names on both sides."""
    from .scheduler.config import DEFAULT_SCHEDULER
    from .sim.trace import scheduler_names

    wanted = scheduler_names(trace)
    for (_, cfg), path in zip(configs, paths or ["the default configuration"]):
        have = {p.scheduler_name for p in cfg.profiles} if cfg is not None else {DEFAULT_SCHEDULER}
        if missing := sorted(wanted - have):
            return (f"{path}: no profile for schedulerName {', '.join(missing)}, which the trace's pods ask for "
                    f"(its profiles: {', '.join(sorted(have))})")
    return None


def _writable(out: str) -> None:
    """--out is made (or found) before the run, so a path that cannot hold the report fails in a
    second, not after hours of simulation."""
    try:
        os.makedirs(out, exist_ok=True)
        if not os.access(out, os.W_OK | os.X_OK):
            raise PermissionError(13, "Permission denied")
    except OSError as e:
        raise OSError(f"--out {out}: cannot write there: {e.strerror}") from None


def _names(paths: list[str]) -> list[str]:
    """Each configuration's name in the lines and the table: its file's name, numbered where two are alike."""
    names = [os.path.splitext(os.path.basename(p))[0] for p in paths]
    return [f"{n}#{names[:i].count(n) + 1}" if names.count(n) > 1 else n for i, n in enumerate(names)]


def _fill_workload(cfg, trace) -> None:
    """GPUFragmentationGradient measures against the trace's task sizes unless the configuration names some."""
    for prof in cfg.profiles:
        if "GPUFragmentationGradient" in prof.plugins and not (prof.args.get("GPUFragmentationGradient") or {}).get(
                "workload") and trace.task_sizes:
            prof.args["GPUFragmentationGradient"] = {**(prof.args.get("GPUFragmentationGradient") or {}), "workload": [
                {"count": c, "milli": m, "cpu": cpu, "weight": w} for (c, m, cpu), w in trace.task_sizes]}
