"""`nanokube scheduler`: the scheduler in its own process, over HTTPS with a
kubeconfig, as kube-scheduler runs beside an API server. With leader
election (the default) any number of copies may run; only the holder of the
`kube-system/kube-scheduler` Lease binds pods. `up` campaigns for the same
Lease with its in-process scheduler (`ElectedScheduler`)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Callable

from typing import TYPE_CHECKING

from . import component_cli, component_server, zpages
from .apiserver.healthz import Check
from .client import kubeconfig
from .client.leaderelection import LeaderElector, add_arguments, config_from_arguments, from_arguments
from .machinery.version import user_agent
from .scheduler.config import LEASE_NAME, ConfigError, SchedulerConfig
from .scheduler.config import load as load_config

if TYPE_CHECKING:
    from .client.http import HTTPClient
    from .scheduler.metrics import Metrics
    from .scheduler.scheduler import Scheduler

log = logging.getLogger("nanokube.scheduler")

#: kube-scheduler's secure port (DefaultKubeSchedulerPort)
SECURE_PORT = 10259


class ElectedScheduler:
    """Schedules only while `elector` holds the kube-scheduler Lease (always
    without one). As kube-scheduler, a candidate starts its informers and waits
    for them to sync before it campaigns, so a standby is ready (`synced`) and
    starts scheduling (`started`) the moment it leads. A stopped Scheduler cannot
    restart, so each term builds a new one; `metrics` outlives them all."""

    def __init__(self, build: Callable[[Metrics], Scheduler], elector: LeaderElector | None = None,
                 metrics: Metrics | None = None) -> None:
        self._build = build
        self.elector = elector
        if metrics is None:
            from .scheduler.metrics import Metrics

            metrics = Metrics()
        self.metrics = metrics
        self.scheduler: Scheduler | None = None
        #: the current scheduler's informers have synced (readyz's sched-handler-sync)
        self.synced = asyncio.Event()
        #: the current scheduler is scheduling
        self.started = asyncio.Event()
        self._task: asyncio.Task | None = None

    async def start(self) -> None:
        if self.elector is None:
            await self._sync_one()
            await self._run_one()
        else:
            self._task = asyncio.create_task(self._campaign())

    async def _campaign(self) -> None:
        """Sync, then lead while holding the lease; after losing it, sync a new scheduler and
        stand by again (kube-scheduler exits instead, and its supervisor restarts it)."""
        while True:
            await self._sync_one()
            try:
                await self.elector.run(self._lead)
            finally:
                await self._stop_one()

    async def _sync_one(self) -> None:
        self.scheduler = self._build(self.metrics)
        await self.scheduler.sync()
        self.synced.set()

    async def _run_one(self) -> None:
        await self.scheduler.run()
        self.started.set()
        log.info("scheduling pods for profiles: %s", ", ".join(self.scheduler.frameworks))

    async def _lead(self) -> None:
        await self._run_one()
        await asyncio.Event().wait()

    async def _stop_one(self) -> None:
        self.started.clear()
        self.synced.clear()
        if self.scheduler is not None:
            await self.scheduler.stop()
            self.scheduler = None

    async def stop(self) -> None:
        if self._task is None:
            await self._stop_one()
            return
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        await self._stop_one()
        await self.elector.release()


def add_parser(sub) -> None:
    p = sub.add_parser("scheduler", help="run the scheduler against a running API server")
    kubeconfig.add_arguments(p)
    p.add_argument("--config", default=None, metavar="FILE",
                   help="KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1): profiles, plugins, backoff")
    add_arguments(p, LEASE_NAME, "scheduling")
    component_server.add_arguments(p, SECURE_PORT)


def _endpoints(args: argparse.Namespace, client: HTTPClient, scheduler: ElectedScheduler, stop: asyncio.Event,
               configz: dict):
    """kube-scheduler's secure port: /healthz and /readyz watch the lease (when electing),
    /readyz also the shutdown and whether the scheduler's informers have synced (a standby's
    have: it syncs before it campaigns), /metrics serves the scheduler's registry (DELETE resets
    it), /metrics/resources the pods' requests and limits while this scheduler leads."""
    from . import configz as component_configz
    from .scheduler import resource_metrics

    leader = [Check("leaderElection", scheduler.elector.check)] if scheduler.elector else []
    readyz = [*leader,
              Check("shutdown", lambda: "process is shutting down" if stop.is_set() else None),
              Check("sched-handler-sync", lambda: None if scheduler.synced.is_set()
                    else "handlers are not fully synchronized")]
    auth = component_server.DelegatedAuth(client, args.authorization_always_allow_paths)
    pods = resource_metrics.registry(lambda: scheduler.scheduler.pods.list() if scheduler.scheduler else ())
    return component_server.app(auth, scheduler.metrics.registry, configz, lambda: leader, list, lambda: readyz,
                                reset=scheduler.metrics.reset,
                                resources=lambda: pods if scheduler.started.is_set() else None,
                                component="kube-scheduler", flags=zpages.flags(args),
                                profiling=configz[component_configz.SCHEDULER]["EnableProfiling"])


async def _run(args: argparse.Namespace, config) -> int:
    # imported once the flags and the configuration are judged: the component configuration's
    # controllers and the scheduler's plugins, 0.4 of a refusal's 0.6 CPU-s
    from . import configz as component_configz
    from .client.http import HTTPClient
    from .client.ratelimit import limited
    from .scheduler.scheduler import Scheduler

    client = HTTPClient.from_kubeconfig(args.kubeconfig, args.context, field_manager="default-scheduler",
                                        user_agent=user_agent("kube-scheduler"))
    scheduler = runner = None
    try:  # whatever stops it, from the client's first request on, closes what it opened
        await client.start()
        election = config_from_arguments(args, LEASE_NAME, config.leader_election if config else None)
        # kube-scheduler's clients: '.../scheduler' (createClients) and '.../leader-election' (the lock's)
        # each a clientset of its own, with its own clientConnection.qps/burst token bucket
        qps, burst = (config.qps, config.burst) if config else (SchedulerConfig.qps, SchedulerConfig.burst)
        elector = from_arguments(limited(client.named("leader-election"), qps, burst, client.clock), args,
                                 LEASE_NAME, config.leader_election if config else None)
        configz = component_configz.scheduler(config, election, args.kubeconfig or "")
        scheduling = limited(client.named("scheduler"), qps, burst, client.clock)
        # and its events client, createClients' eventClient: the configuration as it is, no user agent suffix
        events = limited(client, qps, burst, client.clock)
        scheduler = ElectedScheduler(lambda metrics: Scheduler(scheduling, config=config, metrics=metrics,
                                                               event_client=events), elector)
        stop = component_cli.stop_on_signals()
        runner = await component_server.serve(args, _endpoints(args, client, scheduler, stop, configz),
                                              "kube-scheduler")
        await scheduler.start()
        await stop.wait()
    finally:
        if scheduler is not None:
            await scheduler.stop()
        if runner is not None:
            await runner.cleanup()
        await client.close()
    log.info("scheduler stopped")
    return 0


def run(args: argparse.Namespace) -> int:
    try:
        component_server.validate(args)
    except ValueError as e:
        print(f"nanokube scheduler: {e}", file=sys.stderr)
        return 2
    try:
        config = load_config(args.config) if args.config else None
    except (ConfigError, OSError) as e:
        print(f"nanokube scheduler: --config: {e}", file=sys.stderr)
        return 2
    return component_cli.run("scheduler", lambda: component_cli.run_loop(_run(args, config)), (component_server.ServeError,))
