"""Writes the admin kubeconfig users export as KUBECONFIG."""

from __future__ import annotations

import base64
import os

import yaml

from .ca import ClusterPKI, KeyPair


def write_kubeconfig(path: str, server: str, pki: ClusterPKI, name: str = "nanokube", ca_pem: bytes = b"",
                     admin: KeyPair | None = None) -> None:
    """`ca_pem` and `admin`: in place of DIR/pki's CA and admin certificate (the operator's PKI)."""
    b64 = lambda b: base64.b64encode(b).decode()
    admin = admin or pki.admin
    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": server,
                                                "certificate-authority-data": b64(ca_pem or pki.ca.cert_pem)}}],
        "users": [{"name": "admin", "user": {
            "client-certificate-data": b64(admin.cert_pem),
            "client-key-data": b64(admin.key_pem),
        }}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": "admin", "namespace": "default"}}],
        "current-context": name,
        "preferences": {},
    }
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        yaml.safe_dump(cfg, f, sort_keys=False)
    os.replace(tmp, path)
