"""`nanokube up`'s certificate and key flags refused as kube-apiserver refuses them: before anything
starts, with the flag's line."""

from __future__ import annotations

import pytest

from nanokube.cli import main
from nanokube.pki.ca import new_ca


@pytest.mark.parametrize("flags, said", [
    (["--tls-cert-file", "a.crt"], "missing filename for serving cert"),
    (["--proxy-client-key-file", "p.key"], "missing filename for proxy client cert"),
    (["--tls-sni-cert-key", "only.crt"], "--tls-sni-cert-key: expected comma separated certificate and key file paths"),
    (["--service-account-issuer", "https://a", "--service-account-issuer", "https://a"],
     'service-account-issuer "https://a" is already specified'),
    (["--service-account-key-file", "{empty}"],
     "--service-account-key-file: {empty}: data does not contain any valid RSA or ECDSA public keys"),
    (["--service-account-signing-key-file", "{ca}"], "--service-account-signing-key-file: "),
    (["--cluster-signing-kubelet-serving-cert-file", "{ca}"], '"cluster-signing-kubelet-serving": cannot specify cert without key'),
    (["--api-workers", "2", "--client-ca-file", "{ca}"], "--api-workers above 1 takes none of --tls-cert-file"),
    (["--client-ca-file", "{empty}"], "nanokube: serving certificates or client CAs: "),
])
def test_a_bad_flag_stops_up_with_its_line(flags, said, tmp_path, capsys):
    (tmp_path / "empty.pem").write_text("")
    (tmp_path / "ca.crt").write_bytes(new_ca().cert_pem)
    paths = {"empty": str(tmp_path / "empty.pem"), "ca": str(tmp_path / "ca.crt")}
    argv = ["up", "--data-dir", str(tmp_path / "d"), "--store", "memory", *(f.format(**paths) for f in flags)]
    assert main(argv) == 2
    assert said.format(**paths) in capsys.readouterr().err
