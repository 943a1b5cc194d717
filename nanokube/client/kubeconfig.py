"""Finding and reading kubeconfig files the way kubectl does, for every subcommand that talks to an
API server: `--kubeconfig FILE`, else `$KUBECONFIG` (a list of files, merged: the first file to
name a cluster, user or context wins, the first non-empty `current-context` wins), else the
kubeconfig `nanokube up` writes in `./.nanokube`, else `~/.kube/config`; `--context` picks a
context. Errors name the files that were read."""

from __future__ import annotations

import argparse
import base64
import os
import ssl
import tempfile
from dataclasses import dataclass
from typing import Mapping

import yaml

from ..machinery import configfile, gofmt
from ..machinery.configfile import ANY, Kind, Map, Struct

#: where `nanokube up` writes its admin kubeconfig by default
UP_DEFAULT = os.path.join(".nanokube", "kubeconfig")
HOME_DEFAULT = os.path.join("~", ".kube", "config")


class KubeconfigError(ValueError):
    """A kubeconfig that cannot be used; the message names the file(s) and what is wrong."""


@dataclass
class Credentials:
    server: str
    ssl: ssl.SSLContext | None
    token: str = ""
    namespace: str = "default"
    #: TLS that trusts the server but presents no client certificate (rest.AnonymousClientConfig's),
    #: for a client that authenticates by token alone
    anonymous_ssl: ssl.SSLContext | None = None
    #: the PEM CA bundle the cluster entry trusts (rest.Config's CAData), b"" where it names none
    ca: bytes = b""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """kubectl's `--kubeconfig` and `--context` flags."""
    parser.add_argument("--kubeconfig", default=None,
                        help="kubeconfig file (default: $KUBECONFIG, else ./.nanokube/kubeconfig, else ~/.kube/config)")
    parser.add_argument("--context", default=None, help="the kubeconfig context to use (default: its current-context)")


def paths(explicit: str | None = None, env: Mapping[str, str] = os.environ) -> list[str]:
    """The files to read, in precedence order."""
    if explicit:
        return [explicit]
    listed = [p for p in env.get("KUBECONFIG", "").split(os.pathsep) if p]
    if listed:
        return listed
    return [UP_DEFAULT] if os.path.exists(UP_DEFAULT) else [os.path.expanduser(HOME_DEFAULT)]


_EXTENSIONS = [Struct("v1.NamedExtension", {"name": str, "extension": ANY})]
#: a kubeconfig as client-go's clientcmd.Load decodes it: leniently (unknown fields and repeated keys
#: pass), a file without apiVersion or kind taken as v1 Config; client-go's v1 structs; the scheme named as kubectl 1.37 names it
FILE = Kind("v1", "Config", "k8s.io/client-go/tools/clientcmd/api/latest/latest.go:50", Struct("v1.Config", {
    "apiVersion": str, "kind": str, "current-context": str, "extensions": _EXTENSIONS,
    "preferences": Struct("v1.Preferences", {"colors": bool, "extensions": _EXTENSIONS}),
    "clusters": [Struct("v1.NamedCluster", {"name": str, "cluster": Struct("v1.Cluster", {
        "server": str, "tls-server-name": str, "insecure-skip-tls-verify": bool, "certificate-authority": str,
        "certificate-authority-data": str, "proxy-url": str, "disable-compression": bool,
        "extensions": _EXTENSIONS})})],
    "users": [Struct("v1.NamedAuthInfo", {"name": str, "user": Struct("v1.AuthInfo", {
        "client-certificate": str, "client-certificate-data": str, "client-key": str, "client-key-data": str,
        "token": str, "tokenFile": str, "as": str, "as-uid": str, "as-groups": [str], "as-user-extra": Map([str]),
        "username": str, "password": str,
        "auth-provider": Struct("v1.AuthProviderConfig", {"name": str, "config": Map(str)}),
        "exec": Struct("v1.ExecConfig", {
            "command": str, "args": [str], "env": [Struct("v1.ExecEnvVar", {"name": str, "value": str})],
            "apiVersion": str, "installHint": str, "provideClusterInfo": bool, "interactiveMode": "v1.ExecInteractiveMode"}),
        "extensions": _EXTENSIONS})})],
    "contexts": [Struct("v1.NamedContext", {"name": str, "context": Struct("v1.Context", {
        "cluster": str, "user": str, "namespace": str, "extensions": _EXTENSIONS})})],
}))


def read_file(path: str) -> dict:
    """The kubeconfig at `path` as clientcmd.LoadFromFile decodes it (an empty file is an empty
    config); KubeconfigError as kubectl words it (`error loading config file "PATH": ...`)."""
    with open(path) as f:
        text = f.read()
    try:
        doc, _ = configfile.load(text)
        if doc is None:
            doc = {}
        if isinstance(doc, dict):  # (the default version and kind clientcmd.Load decodes with)
            doc = {**doc, "apiVersion": doc.get("apiVersion") or "v1", "kind": doc.get("kind") or "Config"}
        return configfile.decode_object(doc, [], text, FILE, lenient=True)[0]
    except (yaml.YAMLError, configfile.DecodeError) as e:
        raise KubeconfigError(f"error loading config file {gofmt.quote(path)}: {e}") from None


@dataclass
class _Entry:
    value: dict
    source: str  # the file it came from: relative paths inside it resolve against its directory


def _merge(files: list[str]) -> tuple[dict[str, dict[str, _Entry]], str, list[str]]:
    """Named clusters/users/contexts (first file wins), current-context, and the files read.
    A missing file in a $KUBECONFIG list is skipped, as kubectl skips it; an explicit one is not."""
    merged: dict[str, dict[str, _Entry]] = {"clusters": {}, "users": {}, "contexts": {}}
    current, read = "", []
    for path in files:
        try:
            cfg = read_file(path)
        except FileNotFoundError:
            if len(files) == 1:
                raise KubeconfigError(f"kubeconfig {path} does not exist") from None
            continue
        except OSError as e:
            raise KubeconfigError(f"error loading config file {gofmt.quote(path)}: {e}") from None
        read.append(path)
        for section, key in (("clusters", "cluster"), ("users", "user"), ("contexts", "context")):
            for item in cfg.get(section) or []:
                if item.get("name") and item["name"] not in merged[section]:
                    merged[section][item["name"]] = _Entry(item.get(key) or {}, path)
        current = current or cfg.get("current-context") or ""
    if not read:
        raise KubeconfigError(f"none of the kubeconfig files exist: {', '.join(files)}")
    return merged, current, read


def load(explicit: str | None = None, context: str | None = None, env: Mapping[str, str] = os.environ) -> Credentials:
    """Server, TLS context and credentials of the chosen context."""
    merged, current, read = _merge(paths(explicit, env))
    where = ", ".join(read)
    name = context or current
    if not name:
        raise KubeconfigError(f"{where}: no context chosen (no current-context and no --context)")
    ctx = merged["contexts"].get(name)
    if ctx is None:
        raise KubeconfigError(f'{where}: context "{name}" not found')
    cluster = merged["clusters"].get(ctx.value.get("cluster", ""))
    if cluster is None:
        raise KubeconfigError(f'{where}: cluster "{ctx.value.get("cluster")}" of context "{name}" not found')
    user = merged["users"].get(ctx.value.get("user", ""), _Entry({}, cluster.source))
    server = str(cluster.value.get("server") or "").rstrip("/")
    if not server:
        raise KubeconfigError(f'{cluster.source}: cluster "{ctx.value.get("cluster")}" has no server')
    sslctx = anonymous = None
    ca = _material(cluster, "certificate-authority", required=False) or b""
    if server.startswith("https://"):
        sslctx, anonymous = _trust(cluster), _trust(cluster)
        cert = _material(user, "client-certificate", required=False)
        if cert:
            with tempfile.TemporaryDirectory() as d:
                cert_path, key_path = os.path.join(d, "tls.crt"), os.path.join(d, "tls.key")
                for target, pem in ((cert_path, cert), (key_path, _material(user, "client-key", required=True))):
                    with open(os.open(target, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as out:
                        out.write(pem)
                sslctx.load_cert_chain(cert_path, key_path)
    return Credentials(server, sslctx, str(user.value.get("token") or ""), ctx.value.get("namespace") or "default",
                       anonymous, ca)


class _ServerNameContext(ssl.SSLContext):
    """A client TLS context that sends and verifies `tls_server_name` in place of the host dialled:
    the cluster entry's tls-server-name, for a server reached at an address its certificate does
    not name (one API server of several behind an address of its own, a tunnel, a port forward)."""

    tls_server_name = ""

    def wrap_socket(self, sock, server_side=False, do_handshake_on_connect=True, suppress_ragged_eofs=True,
                    server_hostname=None, session=None):
        return super().wrap_socket(sock, server_side, do_handshake_on_connect, suppress_ragged_eofs,
                                   self.tls_server_name or server_hostname, session)

    def wrap_bio(self, incoming, outgoing, server_side=False, server_hostname=None, session=None):
        return super().wrap_bio(incoming, outgoing, server_side, self.tls_server_name or server_hostname, session)


def _trust(cluster: _Entry) -> ssl.SSLContext:
    """A TLS context that verifies the server as the cluster entry says."""
    ca = _material(cluster, "certificate-authority", required=False)
    ctx = _ServerNameContext(ssl.PROTOCOL_TLS_CLIENT)  # ssl.create_default_context's settings, on the subclass
    if ca:
        ctx.load_verify_locations(cadata=ca.decode())
    else:
        ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
    ctx.tls_server_name = str(cluster.value.get("tls-server-name") or "")
    if cluster.value.get("insecure-skip-tls-verify"):
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


def _material(entry: _Entry, kind: str, required: bool) -> bytes:
    """`<kind>-data` (base64) or the file `<kind>` names, relative to the kubeconfig it is in."""
    section = entry.value
    try:
        if section.get(f"{kind}-data"):
            return base64.b64decode(section[f"{kind}-data"])
        if section.get(kind):
            with open(os.path.join(os.path.dirname(entry.source), os.path.expanduser(section[kind])), "rb") as f:
                return f.read()
    except (OSError, ValueError) as e:
        raise KubeconfigError(f"{entry.source}: cannot read {kind}: {e}") from None
    if required:
        raise KubeconfigError(f"{entry.source}: no {kind} given")
    return b""
