"""The front-proxy identity: the request-header CA and client certificate the
aggregator proxies with, and the ConfigMap `kube-system/extension-apiserver-
authentication` through which extension API servers learn whom to trust
(upstream's ClusterAuthenticationTrustController publishes the same keys)."""

from __future__ import annotations

import json
import os

from ...pki.ca import ensure_front_proxy

CONFIGMAP = "extension-apiserver-authentication"


def front_proxy_files(pki) -> tuple[str, str]:
    """(client certificate file, key file) of `front-proxy-client`, created on first use."""
    ensure_front_proxy(pki.dir)
    return os.path.join(pki.dir, "front-proxy-client.crt"), os.path.join(pki.dir, "front-proxy-client.key")


def authentication_configmap(pki) -> dict:
    ca, _ = ensure_front_proxy(pki.dir)
    return {"metadata": {"name": CONFIGMAP, "namespace": "kube-system"}, "data": {
        "client-ca-file": pki.ca.cert_pem.decode(),
        "requestheader-client-ca-file": ca.cert_pem.decode(),
        "requestheader-allowed-names": json.dumps(["front-proxy-client"]),
        "requestheader-extra-headers-prefix": json.dumps(["X-Remote-Extra-"]),
        "requestheader-group-headers": json.dumps(["X-Remote-Group"]),
        "requestheader-username-headers": json.dumps(["X-Remote-User"]),
        "requestheader-uid-headers": json.dumps(["X-Remote-Uid"]),
    }}
