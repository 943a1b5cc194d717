"""The admin's TLS client context from a kubeconfig, for tests that speak raw HTTPS."""

from __future__ import annotations

import base64
import ssl
import tempfile
from pathlib import Path

import yaml


def admin_context(kubeconfig: str) -> tuple[str, ssl.SSLContext]:
    """The kubeconfig's first server and a context trusting its CA with its first user's client
    certificate: ssl loads a chain only from files, so they are written to a directory that is gone
    once loaded (each test client used to leave one behind)."""
    cfg = yaml.safe_load(open(kubeconfig))
    cluster, user = cfg["clusters"][0]["cluster"], cfg["users"][0]["user"]
    ctx = ssl.create_default_context(cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
    with tempfile.TemporaryDirectory(prefix="nanokube-admin-") as d:
        for k in ("client-certificate-data", "client-key-data"):
            Path(d, k).write_bytes(base64.b64decode(user[k]))
        ctx.load_cert_chain(Path(d, "client-certificate-data"), Path(d, "client-key-data"))
    return cluster["server"], ctx
