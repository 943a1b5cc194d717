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
    """(client certificate file, key file) of `front-proxy-client`, created on first use (or the
    operator's, --proxy-client-cert-file's)."""
    if pki.proxy_client is not None:
        return pki.proxy_client
    ensure_front_proxy(pki.dir)
    return os.path.join(pki.dir, "front-proxy-client.crt"), os.path.join(pki.dir, "front-proxy-client.key")


def authentication_configmap(server) -> dict:
    """What the server trusts, as of now: its client CA and request-header CA (DIR/pki's, or the
    operator's files) and the request-header flags."""
    tls, rh = server.serving_tls(), server.requestheader
    return {"metadata": {"name": CONFIGMAP, "namespace": "kube-system"}, "data": {
        "client-ca-file": tls.client_ca_pem.decode(),
        "requestheader-client-ca-file": tls.requestheader_ca_pem.decode(),
        "requestheader-allowed-names": json.dumps(list(rh.allowed_names)),
        "requestheader-extra-headers-prefix": json.dumps(list(rh.extra_prefixes)),
        "requestheader-group-headers": json.dumps(list(rh.group_headers)),
        "requestheader-username-headers": json.dumps(list(rh.username_headers)),
        "requestheader-uid-headers": json.dumps(list(rh.uid_headers)),
    }}
