"""Leader election through a coordination.k8s.io Lease, as client-go's
leaderelection does it: acquire the lease when it is free or expired, renew
it every retry period, and give up leadership when renewals have failed for
the renew deadline, so two instances never both act."""

from __future__ import annotations

import asyncio
import logging
import socket
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace

import aiohttp

from ..machinery import goduration
from ..machinery.errors import APIError
from ..clock import REAL, Clock, parse_time
from .metrics import LEADER

log = logging.getLogger(__name__)


class LeaderElector:
    def __init__(self, client, name: str, identity: str, namespace: str = "kube-system", clock: Clock = REAL, *,
                 lease_duration: float = 15.0, renew_deadline: float = 10.0, retry_period: float = 2.0):
        self.leases = client.resource("coordination.k8s.io", "v1", "leases")
        self.name = name
        self.namespace = namespace
        self.identity = identity
        self.clock = clock
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self._lease: dict | None = None
        self.leading = False

    async def run(self, lead: Callable[[], Awaitable[None]]) -> None:
        """Wait to acquire the lease, then run `lead()` until it returns or
        leadership is lost (it is cancelled then); returns afterwards."""
        while not await self.try_acquire_or_renew():
            await self.clock.sleep(self.retry_period)
        self.leading = True
        LEADER.labels(self.name).set(1)  # leaderelection's leaderOn, leaderOff when the term ends
        log.info("%s: %s became leader", self.name, self.identity)
        work = asyncio.ensure_future(lead())
        renew = asyncio.ensure_future(self._keep_renewing())
        try:
            await asyncio.wait([work, renew], return_when=asyncio.FIRST_COMPLETED)
        finally:
            self.leading = False
            LEADER.labels(self.name).set(0)
            for t in (work, renew):
                t.cancel()
            await asyncio.gather(work, renew, return_exceptions=True)
        if renew.done() and not renew.cancelled():
            log.warning("%s: %s lost the lease", self.name, self.identity)

    async def _keep_renewing(self) -> None:
        last = self.clock.monotonic()
        while True:
            await self.clock.sleep(self.retry_period)
            if await self.try_acquire_or_renew():
                last = self.clock.monotonic()
            elif self.clock.monotonic() - last >= self.renew_deadline:
                return

    async def try_acquire_or_renew(self) -> bool:
        """One attempt; True if this identity holds the lease afterwards. An API server that does
        not answer (killed, restarting) fails the attempt like a refusal, as client-go's: a leader
        keeps leading until its renewals have failed for the renew deadline, a standby retries. One
        that never answers (stopped, its packets dropped) fails it at the renew deadline, the
        timeout kube-controller-manager and kube-scheduler give their leader-election client: a
        leader waiting on it for ever would go on leading past the lease the others see expire."""
        attempt = asyncio.ensure_future(self._attempt())
        timed_out = False

        def expire() -> None:
            nonlocal timed_out
            timed_out = True
            attempt.cancel()
        timer = self.clock.call_later(self.renew_deadline, expire)
        try:
            return await attempt
        except asyncio.CancelledError:
            if not timed_out:
                raise
            log.warning("%s: error retrieving resource lock %s/%s: no answer within %gs", self.name, self.namespace,
                        self.name, self.renew_deadline)
            return False
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as e:
            log.warning("%s: error retrieving resource lock %s/%s: %s", self.name, self.namespace, self.name,
                        e or type(e).__name__)
            return False
        finally:
            timer.cancel()

    async def _attempt(self) -> bool:
        now = self.clock.rfc3339_micro()
        try:
            lease = await self.leases.get(self.name, self.namespace)
        except APIError as e:
            if e.code != 404:
                log.warning("%s: reading the lease failed: %s", self.name, e.message)
                return False
            try:
                self._lease = await self.leases.create({
                    "metadata": {"name": self.name, "namespace": self.namespace},
                    "spec": {"holderIdentity": self.identity, "leaseDurationSeconds": int(self.lease_duration),
                             "acquireTime": now, "renewTime": now, "leaseTransitions": 0}})
                return True
            except APIError:
                return False
        spec = dict(lease.get("spec") or {})
        holder = spec.get("holderIdentity") or ""
        if holder and holder != self.identity and not self._expired(spec):
            return False
        if holder != self.identity:  # a new holder, also of a lease released by the last one (client-go's count)
            spec["leaseTransitions"] = spec.get("leaseTransitions", 0) + 1
            spec["acquireTime"] = now
        spec.update(holderIdentity=self.identity, leaseDurationSeconds=int(self.lease_duration), renewTime=now)
        try:
            self._lease = await self.leases.update({**lease, "spec": spec})
            return True
        except APIError as e:
            if e.code != 409:
                log.warning("%s: renewing the lease failed: %s", self.name, e.message)
            return False

    def check(self, tolerance: float = 20.0) -> str | None:
        """The leaderElection health check (client-go's HealthzAdaptor): a leader whose
        last renewal is older than the lease duration plus `tolerance` has lost touch
        without noticing; a standby is healthy."""
        if not self.leading or self._lease is None:
            return None
        renewed = parse_time(self._lease["spec"]["renewTime"])
        if renewed + self.lease_duration + tolerance < self.clock.now():
            return f"failed election to renew leadership on lease {self.name}"
        return None

    def _expired(self, spec: dict) -> bool:
        renewed = spec.get("renewTime") or spec.get("acquireTime")
        if not renewed:
            return True
        return parse_time(renewed) + float(spec.get("leaseDurationSeconds") or 0) < self.clock.now()

    async def release(self) -> None:
        """Hand the lease back on a clean shutdown so a standby takes over at once."""
        if self._lease is None:
            return
        try:
            cur = await self.leases.get(self.name, self.namespace)
            if (cur.get("spec") or {}).get("holderIdentity") == self.identity:
                spec = {**cur["spec"], "holderIdentity": "", "leaseDurationSeconds": 1,
                        "renewTime": self.clock.rfc3339_micro()}
                await self.leases.update({**cur, "spec": spec})
        except APIError as e:
            log.warning("%s: releasing the lease failed: %s", self.name, e.message)


@dataclass(frozen=True)
class LeaderElectionConfig:
    """component-base's LeaderElectionConfiguration, with upstream's defaults."""

    leader_elect: bool = True
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    resource_name: str = ""
    resource_namespace: str = "kube-system"


def add_arguments(parser, lease: str, acting: str) -> None:
    """kube-controller-manager's and kube-scheduler's --leader-elect flags, the durations Go's
    ("15s"); unset flags leave a configuration file's values (or the defaults) alone."""
    d = LeaderElectionConfig()
    parser.add_argument("--leader-elect", default=None, choices=("true", "false"),
                        help=f"hold the kube-system/{lease} Lease while {acting} (default true)")
    for flag, default in (("lease-duration", d.lease_duration), ("renew-deadline", d.renew_deadline),
                          ("retry-period", d.retry_period)):
        parser.add_argument(f"--leader-elect-{flag}", type=goduration.flag_value, default=None, metavar="DURATION",
                            help=f"default {goduration.string(round(default * 1e9))}")


def config_from_arguments(args, lease: str, base: LeaderElectionConfig | None = None) -> LeaderElectionConfig:
    """`base` (a configuration file's section, or the defaults for `lease`) with the flags
    given explicitly overriding it, as upstream's components apply them. The flags on `args`
    are set to the values in effect, which /flagz shows (as the kubelet's configure does)."""
    cfg = base or LeaderElectionConfig(resource_name=lease)
    durations = {"lease_duration": args.leader_elect_lease_duration, "renew_deadline": args.leader_elect_renew_deadline,
                 "retry_period": args.leader_elect_retry_period}
    flags = {"leader_elect": None if args.leader_elect is None else args.leader_elect == "true",
             **{k: None if v is None else goduration.parse(v) for k, v in durations.items()}}
    cfg = replace(cfg, **{k: v for k, v in flags.items() if v is not None})
    args.leader_elect = "true" if cfg.leader_elect else "false"
    for k in durations:
        setattr(args, f"leader_elect_{k}", goduration.string(round(getattr(cfg, k) * 1e9)))
    return cfg


def from_arguments(client, args, lease: str, base: LeaderElectionConfig | None = None) -> LeaderElector | None:
    """The elector config_from_arguments describes; None without leader election. Each
    process campaigns under a fresh identity."""
    return elector_for(client, config_from_arguments(args, lease, base), f"{socket.gethostname()}_{uuid.uuid4()}")


def elector_for(client, cfg: LeaderElectionConfig, identity: str, clock: Clock = REAL) -> LeaderElector | None:
    """The elector a LeaderElectionConfiguration describes; None when it turns election off."""
    if not cfg.leader_elect:
        return None
    log.info("attempting to acquire leader lease %s/%s as %s", cfg.resource_namespace, cfg.resource_name, identity)
    return LeaderElector(client, cfg.resource_name, identity, cfg.resource_namespace, clock,
                         lease_duration=cfg.lease_duration, renew_deadline=cfg.renew_deadline,
                         retry_period=cfg.retry_period)
