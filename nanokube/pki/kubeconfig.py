"""Writes the admin kubeconfig users export as KUBECONFIG (kubeadm's admin.conf: its user in
kubeadm:cluster-admins) and DIR/super-admin.conf (system:masters, the break-glass credential)."""

from __future__ import annotations

import base64
import os

import yaml

from .ca import ClusterPKI, KeyPair

#: the system:masters kubeconfig's name in the data dir, as kubeadm's in /etc/kubernetes
SUPER_ADMIN_CONF = "super-admin.conf"


def write_kubeconfig(path: str, server: str, pki: ClusterPKI, name: str = "nanokube", ca_pem: bytes = b"",
                     admin: KeyPair | None = None, user: str = "admin") -> None:
    """`ca_pem` and `admin`: in place of DIR/pki's CA and system:masters certificate (the admin
    kubeconfig's own, the operator's PKI); `user`: the name the kubeconfig gives that user."""
    b64 = lambda b: base64.b64encode(b).decode()
    admin = admin or pki.admin
    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": server,
                                                "certificate-authority-data": b64(ca_pem or pki.ca.cert_pem)}}],
        "users": [{"name": user, "user": {
            "client-certificate-data": b64(admin.cert_pem),
            "client-key-data": b64(admin.key_pem),
        }}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": user, "namespace": "default"}}],
        "current-context": name,
        "preferences": {},
    }
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        yaml.dump(cfg, f, Dumper=yaml.CSafeDumper, sort_keys=False)  # (libyaml's: the same text, 40x sooner)
    os.replace(tmp, path)
