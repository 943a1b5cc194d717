"""`nanokube controller-manager`: the controllers in their own process,
over HTTPS with a kubeconfig, as kube-controller-manager runs beside an API
server. With leader election (the default) any number of copies may run;
only the holder of the `kube-system/kube-controller-manager` Lease acts."""

from __future__ import annotations

import argparse
import asyncio
import logging

from . import component_cli, component_server
from . import configz as component_configz
from . import zpages
from .apiserver.healthz import PING, Check
from .client import kubeconfig
from .client.http import HTTPClient
from .client.leaderelection import add_arguments, config_from_arguments, from_arguments
from .client.ratelimit import limited, rest_limit
from .controllers import csrsigning, csrsigning_options
from .controllers.clientbuilder import ServiceAccountClients
from .controllers.manager import CONTROLLERS, KCM_CLIENT_LIMIT, LEASE_NAME, ControllerManager, enabled
from .controllers.service_lb import DEFAULT_POOL, parse_pool
from .controllers.serviceaccount_token import TokensController
from .machinery import goduration
from .machinery.version import user_agent
from .pki.jwt import load_key

log = logging.getLogger("nanokube.controller-manager")

#: kube-controller-manager's secure port (KubeControllerManagerPort)
SECURE_PORT = 10257


def add_parser(sub) -> None:
    p = sub.add_parser("controller-manager", help="run the controllers against a running API server")
    kubeconfig.add_arguments(p)
    p.add_argument("--controllers", default="*",
                   help="'*' for all, NAME to enable, -NAME to disable (comma-separated), as kube-controller-manager")
    add_arguments(p, LEASE_NAME, "acting")
    p.add_argument("--kube-api-qps", type=float, default=KCM_CLIENT_LIMIT[0], metavar="QPS",
                   help="requests a second each controller's client may send (a token bucket of its own; watches "
                        "are not limited; 0: client-go's 5, negative: no limit; default 20)")
    p.add_argument("--kube-api-burst", type=int, default=KCM_CLIENT_LIMIT[1], metavar="N",
                   help="the requests each such client may send at once before --kube-api-qps holds (default 30)")
    p.add_argument("--load-balancer-pool", default=DEFAULT_POOL, metavar="CIDR",
                   help=f"IPv4 addresses for type LoadBalancer Services (default {DEFAULT_POOL}, as `nanokube up`)")
    csrsigning_options.add_flags(p)
    p.add_argument("--service-account-private-key-file", default="", metavar="FILE",
                   help="the API server's service-account signing key (PEM; `up` keeps it in DIR/pki/sa.key): "
                        "runs the token controller, which fills kubernetes.io/service-account-token Secrets")
    p.add_argument("--use-service-account-credentials", action="store_true",
                   help="each controller acts as its own kube-system service account (token from TokenRequest), "
                        "held to its system:controller:<name> role")
    component_server.add_arguments(p, SECURE_PORT)


def _service_account_key(path: str):
    """--service-account-private-key-file's key, or None without one; ValueError for a bad file."""
    if not path:
        return None
    try:
        return load_key(path)
    except (OSError, ValueError, TypeError) as e:
        raise ValueError(f"--service-account-private-key-file: {e}") from None


def _endpoints(args: argparse.Namespace, client: HTTPClient, manager: ControllerManager):
    """kube-controller-manager's secure port: /healthz checks the lease (when electing) and
    names each running controller, /metrics serves the controllers' registry; upstream
    installs no /livez or /readyz here."""
    leader = [Check("leaderElection", manager.elector.check)] if manager.elector else []

    def healthz() -> list[Check]:
        running = manager.controllers if manager.started.is_set() else []
        return [*leader, *(Check(c.name, PING.run) for c in running)]

    auth = component_server.DelegatedAuth(client, args.authorization_always_allow_paths)
    configz = component_configz.controller_manager(args, config_from_arguments(args, LEASE_NAME))
    return component_server.app(auth, manager.metrics.registry, configz, healthz,
                                component="kube-controller-manager", flags=zpages.flags(args))


async def _run(args: argparse.Namespace) -> int:
    client = HTTPClient.from_kubeconfig(args.kubeconfig, args.context, field_manager="kube-controller-manager",
                                        user_agent=user_agent("kube-controller-manager"))
    manager = runner = None
    try:  # whatever stops it, from the client's first request on, closes what it opened
        await client.start()
        # the leader-election clientset, and each controller's (ControllerManager), with its own bucket
        elector = from_arguments(limited(client.named("leader-election"), *args.client_limit, client.clock), args,
                                 LEASE_NAME)
        manager = ControllerManager(client, controllers=args.controllers, elector=elector,
                                    load_balancer_pool=args.load_balancer_pool, signers=args.signers,
                                    signing_duration=args.signing_duration,
                                    controller_clients=ServiceAccountClients(client)
                                    if args.use_service_account_credentials else None, root_ca=client.creds.ca,
                                    service_account_key=args.service_account_key, client_limit=args.client_limit)
        stop = component_cli.stop_on_signals()
        runner = await component_server.serve(args, _endpoints(args, client, manager), "kube-controller-manager")
        await manager.start()
        started = asyncio.ensure_future(manager.started.wait())
        stopped = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait([started, stopped], return_when=asyncio.FIRST_COMPLETED)
            if started.done():
                log.info("running %d controllers: %s", len(manager.controllers),
                         ", ".join(c.name for c in manager.controllers))
            await stopped
        finally:
            started.cancel()
            stopped.cancel()
    finally:
        if manager is not None:
            await manager.stop()
        if runner is not None:
            await runner.cleanup()
        await client.close()
    log.info("controller manager stopped")
    return 0


def run(args: argparse.Namespace) -> int:
    def main() -> int:
        component_server.validate(args)
        parse_pool(args.load_balancer_pool)
        enabled([*CONTROLLERS, csrsigning.CSRSigningController, TokensController], args.controllers)
        args.service_account_key = _service_account_key(args.service_account_private_key_file)
        args.signers = csrsigning_options.from_flags(args)
        args.signing_duration = goduration.parse(args.cluster_signing_duration, "--cluster-signing-duration")
        args.client_limit = rest_limit(args.kube_api_qps, args.kube_api_burst)
        return component_cli.run_loop(_run(args))
    return component_cli.run("controller-manager", main, (component_server.ServeError,))
