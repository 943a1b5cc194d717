"""A short-lived pod certificate is refreshed in place, without restarting
the pod, through `nanokube up` in real time. The API server's rules (notBefore
within 5 minutes of now, beginRefreshAt at least 10 minutes after it) put the
earliest refresh about five minutes out, so scripts/test.sh runs this file
beside the main pass, where its waiting costs no wall time; the etcd pass
leaves it out (no store changes it)."""

from __future__ import annotations

import datetime as dt
import subprocess

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from tests.e2e.manifests import to_yaml

from .conftest import wait_for
from .test_pod_certificates import FAST, e2e_signer, pod, running, volume  # noqa: F401 (a fixture)


@pytest.mark.timeout(600)
@pytest.mark.usefixtures("e2e_signer")
def test_short_lived_certificate_is_refreshed_without_restart(cluster):
    cluster.kubectl("apply", "-f", "-", input=to_yaml([pod("rotating", FAST, "ECDSAP256", maxExpirationSeconds=3600)]))
    p = running(cluster, "rotating")
    vol = volume(cluster, p)
    first = x509.load_pem_x509_certificate((vol / "tls.crt").read_bytes())
    assert (first.not_valid_after_utc - first.not_valid_before_utc).total_seconds() == 3600
    status = p["status"]["containerStatuses"][0]

    def renewed():
        cert = x509.load_pem_x509_certificate((vol / "tls.crt").read_bytes())
        return cert if cert.serial_number != first.serial_number else None
    # beginRefreshAt is about 5 minutes away; kubelet jitter adds at most 30 s
    second = wait_for(renewed, timeout=420, every=2)
    assert dt.datetime.now(dt.UTC) < first.not_valid_after_utc
    key = serialization.load_pem_private_key((vol / "tls.key").read_bytes(), None)
    der = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    assert key.public_key().public_bytes(*der) == second.public_key().public_bytes(*der)
    subprocess.run(["openssl", "verify", "-CAfile", str(vol / "ca.pem"), str(vol / "tls.crt")], check=True,
                   capture_output=True)
    after = cluster.kubectl_json("get", "pod", "rotating")
    assert after["metadata"]["uid"] == p["metadata"]["uid"]
    now = after["status"]["containerStatuses"][0]
    assert (now["restartCount"], now["state"]) == (status["restartCount"], status["state"]), "no restart"
    assert len([r for r in cluster.kubectl_json("get", "podcertificaterequests")["items"]
                if r["spec"]["podUID"] == p["metadata"]["uid"]]) == 2
    cluster.kubectl("delete", "pod", "rotating", "--grace-period=0")
