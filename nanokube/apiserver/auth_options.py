"""The authentication and authorization flags of kube-apiserver that `nanokube up` takes and hands
on to its API workers (pkg/kubeapiserver/options/authentication.go and authorization.go):
--anonymous-auth, --enable-bootstrap-token-auth, --authentication-config and --authorization-config,
each file read and validated before anything starts, so that a bad one stops `up` with upstream's
reasons."""

from __future__ import annotations

import argparse
import os
import socket
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .audit_options import go_bool

if TYPE_CHECKING:
    from .app import APIServer
    from .auth.authentication_config import Anonymous, Configuration


@dataclass(slots=True)
class AuthOptions:
    #: who may go without credentials; None: the server's default (anyone, everywhere)
    anonymous: Anonymous | None = None
    #: --authentication-config's path and what it held when read
    authentication_path: str = ""
    authentication: Configuration | None = None
    #: --authorization-config's path, what it held and its authorizers
    authorization_path: str = ""
    authorization: tuple[str, list] | None = None
    #: --enable-bootstrap-token-auth: bootstrap tokens authenticate (`up` runs it on, as kubeadm does)
    bootstrap_tokens: bool = False
    #: --service-account-issuer's (pki_options), which no JWT issuer of the authentication config may be
    service_account_issuers: tuple[str, ...] = ()


def add_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--anonymous-auth", type=go_bool, nargs="?", const=True, default=None, metavar="BOOL",
                   help="whether a request without credentials is system:anonymous's (default true); false: a 401. "
                        "Not with an authentication config that sets `anonymous`")
    p.add_argument("--enable-bootstrap-token-auth", type=go_bool, nargs="?", const=True, default=True, metavar="BOOL",
                   help="whether a bootstrap token (kube-system Secrets of type bootstrap.kubernetes.io/token) "
                        "authenticates as system:bootstrap:<id>, as a joining node's does (default true, as kubeadm "
                        "runs kube-apiserver)")
    p.add_argument("--authentication-config", default=None, metavar="FILE",
                   help="AuthenticationConfiguration (apiserver.config.k8s.io/v1): JWT issuers and who may go "
                        "anonymous, where; reloaded when the file changes")
    p.add_argument("--authorization-config", default=None, metavar="FILE",
                   help="AuthorizationConfiguration (apiserver.config.k8s.io/v1): the authorizers asked in order "
                        "(Node, RBAC, Webhooks with CEL matchConditions; default Node then RBAC); reloaded when the "
                        "file changes")


def load(args: argparse.Namespace) -> AuthOptions:
    """The flags' files read and validated: ValueError (ConfigError) with the line `up` stops with.
    A flag `args` lacks is left at its default; nothing of authentication is imported for none."""
    options = AuthOptions(bootstrap_tokens=bool(getattr(args, "enable_bootstrap_token_auth", False)))
    given, flag = getattr(args, "authentication_config", None), getattr(args, "anonymous_auth", None)
    if given or flag is not None:
        from .auth import authentication_config

        options.authentication_path = os.path.abspath(given) if given else ""
        options.service_account_issuers = tuple(getattr(args, "service_account_issuer", None) or ()) \
            or (authentication_config.SERVICE_ACCOUNT_ISSUER,)
        try:
            options.authentication, options.anonymous = authentication_config.load(
                options.authentication_path or None, flag, options.service_account_issuers)
        except authentication_config.ConfigError as e:
            raise authentication_config.ConfigError(f"--authentication-config: {e}" if given else str(e)) from None
    given = getattr(args, "authorization_config", None)
    if given:
        from ..client import kubeconfig
        from .auth import authorization_config

        options.authorization_path = os.path.abspath(given)
        try:
            options.authorization = authorization_config.read(options.authorization_path)
            for spec in options.authorization[1]:  # the webhooks' kubeconfigs, which only building reads
                if spec.webhook is not None:
                    kubeconfig.load(spec.webhook.kubeconfig, env={})
        except (authorization_config.ConfigError, kubeconfig.KubeconfigError) as e:
            raise authorization_config.ConfigError(f"--authorization-config: {e}") from None
    return options


def apply(server: APIServer, options: AuthOptions) -> None:
    """Before the server starts."""
    if options.anonymous is not None:  # (else the server's default stands)
        server.anonymous = options.anonymous
    if options.authentication is not None:
        from .auth.authentication_controller import AuthenticationController

        server.authentication = AuthenticationController(options.authentication_path, options.authentication,
                                                         server.clock, _apiserver_id(), options.service_account_issuers)
        server.component_metrics.append(server.authentication.metrics.registry)
    if options.bootstrap_tokens:  # before the JWT issuers, as kube-apiserver's token authenticators go
        from .auth.bootstraptoken import BootstrapTokenAuthenticator
        from .auth.node import cache_reader

        get = cache_reader(server.index, server.cache)[0]
        server.authentication = BootstrapTokenAuthenticator(lambda plural, namespace, name: get("", plural, namespace, name),
                                                            server.clock.now, server.authentication)
    if options.authorization is not None:
        from .auth.authorization_config import AuthorizationController

        text, specs = options.authorization
        controller = AuthorizationController(options.authorization_path, text, specs, server.authorizer.node,
                                             server.rbac, server.clock, _apiserver_id())
        server.use_authorizer(controller)
        server.component_metrics.append(controller.metrics.registry)


def _apiserver_id() -> str:
    """The server's identity, whose hash labels the config controllers' metrics."""
    from .storageversion import identity

    return identity(socket.gethostname())


def worker_argv(args: argparse.Namespace) -> list[str]:
    """The flags as given to `up`, for each API worker (files by their absolute paths)."""
    out = []
    if args.anonymous_auth is not None:
        out.append(f"--anonymous-auth={'true' if args.anonymous_auth else 'false'}")
    if not args.enable_bootstrap_token_auth:  # (on by default)
        out.append("--enable-bootstrap-token-auth=false")
    for flag in ("authentication_config", "authorization_config"):
        if getattr(args, flag):
            out.append(f"--{flag.replace('_', '-')}={os.path.abspath(getattr(args, flag))}")
    return out
