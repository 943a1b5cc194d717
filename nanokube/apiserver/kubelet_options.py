"""kube-apiserver's kubelet client flags (its KubeletClientConfig) that `nanokube up` takes and hands
on to its API workers: --kubelet-client-certificate and --kubelet-client-key (default: the
apiserver-kubelet-client pair `up` makes in DIR/pki, as kubeadm passes its own),
--kubelet-certificate-authority (none: the kubelets' serving certificates are taken unverified, as
upstream's), --kubelet-preferred-address-types (an unknown type is no error, as upstream's: it
matches no address) and --kubelet-timeout (a Go duration, 5s; upstream parses it and bounds
nothing with it, kubernetes#102052, and neither does nanokube). The files are read before anything
starts, so that one that does not load stops `up` with the reason."""

from __future__ import annotations

import argparse
import os
import ssl
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..machinery import goduration
from ..machinery.nodeaddresses import PREFERRED_ADDRESS_TYPES

if TYPE_CHECKING:
    from .app import APIServer

_FILES = ("kubelet_client_certificate", "kubelet_client_key", "kubelet_certificate_authority")


@dataclass(slots=True)
class KubeletClientOptions:
    cert_file: str = ""
    key_file: str = ""
    ca_file: str = ""
    preferred: tuple[str, ...] = PREFERRED_ADDRESS_TYPES


def add_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kubelet-client-certificate", default="", metavar="FILE",
                   help="the client certificate the API server presents to kubelets (default: DIR/pki/"
                        "apiserver-kubelet-client.crt, kubeadm's, in kubeadm:cluster-admins); read again when it changes")
    p.add_argument("--kubelet-client-key", default="", metavar="FILE", help="its key")
    p.add_argument("--kubelet-certificate-authority", default="", metavar="FILE",
                   help="the CA that signed the kubelets' serving certificates: with it they are verified (the "
                        "chain, then the address dialled against their SANs); without it, taken unverified")
    p.add_argument("--kubelet-preferred-address-types", default=",".join(PREFERRED_ADDRESS_TYPES), metavar="TYPES",
                   help="the Node address types to reach a kubelet at, first found first (default "
                        f"{','.join(PREFERRED_ADDRESS_TYPES)})")
    p.add_argument("--kubelet-timeout", default="5s", metavar="DURATION",
                   help="accepted as kube-apiserver's (default 5s), which bounds nothing with it either")


def load(args: argparse.Namespace) -> KubeletClientOptions:
    """The flags judged and their files read: ValueError with the line `up` stops with."""
    goduration.parse(args.kubelet_timeout, "--kubelet-timeout")
    cert, key, ca = (getattr(args, name) for name in _FILES)
    if cert or ca:  # (the dialler, and aiohttp with it, is imported only when a file is to be judged)
        from .streaming.kubelet import client_context
    if bool(cert) != bool(key):
        raise ValueError("--kubelet-client-certificate and --kubelet-client-key go together")
    for flag, files in (("--kubelet-certificate-authority", (ca, "", "")), ("--kubelet-client-certificate", ("", cert, key))):
        if not any(files):
            continue
        try:
            client_context(*files)
        except ssl.SSLError as e:  # (client-go's TLSConfigFor's and crypto/tls's words)
            raise ValueError(f"{flag}: {_tls_reason(e, *files)}") from None
        except OSError as e:  # (os.ReadFile's words)
            missing = next((f for f in files if f and not os.path.exists(f)), e.filename)
            raise ValueError(f"{flag}: open {missing}: {(e.strerror or str(e)).lower()}") from None
    types = tuple(t.strip() for t in args.kubelet_preferred_address_types.split(",") if t.strip())
    return KubeletClientOptions(cert, key, ca, types)


def _tls_reason(e: ssl.SSLError, ca: str, cert: str, key: str) -> str:
    if ca:
        return "unable to load root certificates: unable to parse bytes as PEM block"
    if e.reason == "KEY_VALUES_MISMATCH":
        return "tls: private key does not match public key"
    with open(cert, "rb") as f:
        which = "key" if b"-----BEGIN CERTIFICATE-----" in f.read() else "certificate"
    return f"tls: failed to find any PEM data in {which} input"


def apply(server: APIServer, options: KubeletClientOptions) -> None:
    """Before the server starts: the given files in place of the default pair."""
    kubelets = server.handlers.kubelets
    kubelets.preferred = options.preferred
    if options.cert_file or options.ca_file:
        kubelets.use(options.cert_file or kubelets.cert_file, options.key_file or kubelets.key_file, options.ca_file)


def worker_argv(args: argparse.Namespace) -> list[str]:
    """The flags as given to `up`, for each API worker (files by their absolute paths)."""
    out = [f"--{name.replace('_', '-')}={os.path.abspath(getattr(args, name))}" for name in _FILES
           if getattr(args, name)]
    return out + [f"--kubelet-preferred-address-types={args.kubelet_preferred_address_types}"]
