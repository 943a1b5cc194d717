"""`nanokube kubelet`: one simulated node in its own process, joining a running cluster over HTTPS
as a kubelet does: with `--kubeconfig` alone it acts as that kubeconfig's user; with
`--bootstrap-kubeconfig` (a bootstrap token's) and no valid `--kubeconfig` yet, it first has a
client certificate for system:node:<name> issued through a CertificateSigningRequest (TLS
bootstrapping, node/bootstrap.py), writes the kubeconfig and acts as the node from then on;
`--rotate-certificates` renews that certificate before it expires. The node is the agent `up`
runs for each of its simulated nodes, of the shape of a pool of `--cluster` (up's file; up's
default cluster without one): it registers its Node, renews its Lease, and runs the pods the
scheduler binds to it. Its pod network range is the lowest no other node's address takes, as
the node IPAM controller hands out the next free one. Its port (--secure-port, reported as the
Node's kubelet endpoint, reached at its Hostname address, --hostname-override) serves the kubelet's
endpoints, the API server's pods/log, exec, attach, portforward and nodes/proxy among them, to
callers the API server vouches for (kubelet_auth.py), with a self-signed certificate, or with
`--rotate-server-certificates` (serverTLSBootstrap) one the cluster's kubelet-serving signer issued
once an admin approved its request. SIGTERM or SIGINT stops it cleanly."""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import ipaddress
import logging
import os
import socket
import sys
from functools import partial

from . import component_cli, component_server, zpages
from .apiserver.healthz import PING
from .client import kubeconfig
from .client.http import HTTPClient
from .machinery.version import user_agent

log = logging.getLogger("nanokube.kubelet")

#: the kubelet's --port, where it serves its endpoints
SECURE_PORT = 10250


def add_parser(sub) -> None:
    p = sub.add_parser("kubelet", help="run one simulated node against a running API server")
    p.add_argument("--kubeconfig", required=True, metavar="FILE",
                   help="the node's kubeconfig; with --bootstrap-kubeconfig, written there once a client certificate "
                        "is issued, unless it already holds a valid one")
    p.add_argument("--bootstrap-kubeconfig", default="", metavar="FILE",
                   help="a kubeconfig whose credentials (a bootstrap token) may ask for the node's client certificate")
    p.add_argument("--cert-dir", default="", metavar="DIR",
                   help="where the issued certificate and key go (default: pki beside --kubeconfig)")
    p.add_argument("--rotate-certificates", action="store_true",
                   help="ask for a new client certificate before the current one expires (off by default, as the "
                        "kubelet's; kubeadm turns it on)")
    p.add_argument("--rotate-server-certificates", action="store_true",
                   help="serverTLSBootstrap: ask as the node for a serving certificate (signer kubernetes.io/kubelet-"
                        "serving, the node's addresses its names), which an admin approves (`kubectl certificate "
                        "approve`: kube-controller-manager does not); the port serves it once issued (its handshakes "
                        "fail with an internal_error alert until then; --tls-cert-file is not read) and it is renewed before it expires")
    p.add_argument("--node-name", default="", metavar="NAME", help="the node's name (default: the host's name)")
    p.add_argument("--hostname-override", default="", metavar="NAME",
                   help="the Hostname address the node reports, where the API server reaches its kubelet's port "
                        "(default: the host's name)")
    p.add_argument("--cluster", default=None, metavar="FILE",
                   help="`nanokube up`'s cluster file, whose pool gives the node its capacity, labels, taints and "
                        "devices (default: up's default cluster)")
    p.add_argument("--pool", default="", metavar="NAME", help="the pool of --cluster the node is one of (default: the first)")
    p.add_argument("--runtime", choices=("simulated",), default="simulated",
                   help="what runs the node's containers: simulated (as up's default runtime)")
    component_server.add_arguments(p, SECURE_PORT)


async def _client(creds: kubeconfig.Credentials) -> HTTPClient:
    client = HTTPClient(creds, field_manager="kubelet", user_agent=user_agent("kubelet"))
    await client.start()
    return client


async def _free_index(client: HTTPClient, name: str) -> int:
    """The node's cluster-wide index: its own address's if its Node is registered, else the lowest
    no Node's InternalIP takes. A node's own credentials read no other Node (the Node authorizer's
    rule): such a node takes an index of its name's hash, past those `up`'s nodes number from 0."""
    from .machinery.errors import APIError
    from .node.agent import node_ip

    first = int(ipaddress.IPv4Address(node_ip(0)))
    nodes = client.resource("", "v1", "nodes")
    try:
        if (own := _index_of(await nodes.get(name), first)) >= 0:
            return own
    except APIError as e:
        if e.code != 404:
            raise
    try:
        items = (await nodes.list())[0]
    except APIError as e:
        if e.code != 403:
            raise
        return _HASHED_FROM + int.from_bytes(hashlib.sha256(name.encode()).digest()[:4]) % _HASHED
    taken = {_index_of(node, first) for node in items}
    return next(i for i in range(len(taken) + 1) if i not in taken)


#: where the indexes of nodes that may not list the others begin, and how many there are (the pod
#: network's /24s: 10.0.0.0/8 holds 65536)
_HASHED_FROM, _HASHED = 4096, 65536 - 4096


def _index_of(node: dict, first: int) -> int:
    """A registered node's index, from its InternalIP (-1 without one)."""
    for a in (node.get("status") or {}).get("addresses") or ():
        if a.get("type") == "InternalIP":
            return int(ipaddress.IPv4Address(a["address"])) - first
    return -1


async def _run(args: argparse.Namespace, cluster) -> int:
    from .node import bootstrap
    from .node.manager import NodeManager, options_from_env

    name = args.node_name
    if args.bootstrap_kubeconfig:
        await bootstrap.bootstrap(args.kubeconfig, args.bootstrap_kubeconfig, args.cert_dir, name, _client)
    client = await _client(kubeconfig.load(args.kubeconfig, env={}))
    stop = component_cli.stop_on_signals()
    nodes = runner = None
    rotations: list[asyncio.Task] = []
    try:
        joining = cluster.joining(name, await _free_index(client, name), args.pool)
        nodes = NodeManager(lambda _user, _manager: client, joining, standalone=True, **options_from_env())
        agent = nodes.agents[name]
        agent.hostname, agent.kubelet_port = args.hostname_override or socket.gethostname().lower(), args.secure_port
        agent.rotate_certificates = args.rotate_certificates and bool(args.bootstrap_kubeconfig)
        agent.server_tls_bootstrap = args.rotate_server_certificates
        await nodes.start()
        serving = component_server.tls_context("", "", client.creds.ca, self_signed=False) \
            if args.rotate_server_certificates else None
        runner = await component_server.serve(args, _endpoints(args, client, stop, nodes.kubelet_for(name)), "kubelet",
                                              client_ca=client.creds.ca, tls=serving)
        if args.rotate_certificates and args.bootstrap_kubeconfig:
            rotations.append(asyncio.create_task(bootstrap.rotate(client, name,
                                                                  os.path.join(args.cert_dir, bootstrap.CURRENT))))
        if serving is not None:
            rotations.append(asyncio.create_task(bootstrap.rotate_serving(client, name, agent.addresses, args.cert_dir,
                                                                          partial(component_server.serve_certificate,
                                                                                  serving))))
        log.info("node %s is running", name)
        await stop.wait()
    finally:
        for task in rotations:
            task.cancel()
        await asyncio.gather(*rotations, return_exceptions=True)
        if runner is not None:
            await runner.cleanup()
        if nodes is not None:
            await nodes.stop()
        await client.close()
    log.info("kubelet stopped")
    return 0


def _endpoints(args: argparse.Namespace, client: HTTPClient, stop: asyncio.Event, kubelet):
    """The kubelet's port: /healthz (and /metrics: the client's requests), then every other endpoint
    of the node's kubelet server (stats, /configz, logs, exec, attach, port-forward...), which the
    API server reaches at the Node's address with its kubelet client certificate."""
    from aiohttp import web
    from prometheus_client import CollectorRegistry

    from .apiserver.healthz import Check
    from .kubelet_auth import KubeletAuth

    checks = [PING, Check("shutdown", lambda: "process is shutting down" if stop.is_set() else None)]
    auth = KubeletAuth(client, args.node_name, args.authorization_always_allow_paths)
    app = component_server.app(auth, CollectorRegistry(), None, lambda: checks, component="kubelet",
                               flags=zpages.flags(args), profiling=False)

    async def kubelet_server(request: web.Request) -> web.StreamResponse:
        return await kubelet.serve(request, request.path)

    app.router.add_route("*", "/{path:.*}", kubelet_server)
    return app


def run(args: argparse.Namespace) -> int:
    from .node.cluster import ClusterFileError, default_cluster, load_cluster

    try:
        component_server.validate(args)
        cluster = load_cluster(args.cluster) if args.cluster else default_cluster()
        cluster.joining(args.node_name, 0, args.pool)  # an unknown --pool is refused before bootstrapping
    except (ValueError, ClusterFileError) as e:
        print(f"nanokube kubelet: {e}", file=sys.stderr)
        return 2
    args.node_name = args.node_name or socket.gethostname().lower()
    args.cert_dir = args.cert_dir or os.path.join(os.path.dirname(os.path.abspath(args.kubeconfig)), "pki")
    from .node.bootstrap import BootstrapError

    return component_cli.run("kubelet", lambda: asyncio.run(_run(args, cluster)), (component_server.ServeError,
                                                                                  BootstrapError))
