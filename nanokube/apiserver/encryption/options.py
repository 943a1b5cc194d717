"""`up`'s --encryption-provider-config and --encryption-provider-config-automatic-reload: the file
loaded with the other flags (a bad one stops `up` with one line), the store wrapped, the server
handed the metrics, the KMS health checks and the keys of values that do not decrypt."""

from __future__ import annotations

import argparse
import os
import socket


def add_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--encryption-provider-config", default="", metavar="FILE",
                        help="an EncryptionConfiguration (apiserver.config.k8s.io/v1): the providers that encrypt "
                             "each resource's values in the store, as kube-apiserver's")
    parser.add_argument("--encryption-provider-config-automatic-reload", action="store_true",
                        help="read --encryption-provider-config again as it changes (a bad file keeps the last "
                             "good one); its KMS providers then share one health check, kms-providers")


def load(args: argparse.Namespace):
    """The configuration (controller.Encryption) of the flags; None without one; ValueError, with the
    flag's name, for a file that does not load or flags that do not go together."""
    if args.encryption_provider_config_automatic_reload and not args.encryption_provider_config:
        raise ValueError("--encryption-provider-config-automatic-reload must be set with --encryption-provider-config")
    if not args.encryption_provider_config:
        return None
    from ..storageversion import identity
    from .config import ConfigError
    from .controller import Encryption

    try:
        return Encryption(args.encryption_provider_config, args.encryption_provider_config_automatic_reload,
                          apiserver_id=identity(socket.gethostname()))
    except ConfigError as e:
        raise ValueError(f"--encryption-provider-config: {e}") from None


def worker_argv(args: argparse.Namespace) -> list[str]:
    """The flags as given to `up`, for each API worker, which encrypts as `up` does (and reloads the
    file on its own)."""
    if not args.encryption_provider_config:
        return []
    out = [f"--encryption-provider-config={os.path.abspath(args.encryption_provider_config)}"]
    if args.encryption_provider_config_automatic_reload:
        out.append("--encryption-provider-config-automatic-reload")
    return out


def install(server, encryption) -> None:
    """`server` (made over `encryption.wrap`'s store) serving what the configuration adds."""
    server.encryption = encryption
    server.rest.unreadable, server.rest.stale = encryption.store.unreadable, encryption.store.stale
    encryption.store.watch_cache = server.cache
    server.component_metrics.append(encryption.metrics.registry)
