"""`nanokube up`'s certificate and key flags: refused as kube-apiserver refuses them, before anything
starts, with the flag's line; the CA clients are told to trust."""

from __future__ import annotations

import argparse
import datetime as dt
import time
from types import SimpleNamespace

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from nanokube.apiserver import pki_options
from nanokube.apiserver.aggregator.requestheader import combined
from nanokube.apiserver.auth.serviceaccount import ServiceAccountTokens
from nanokube.apiserver.pki_options import PKIOptions, client_trust
from nanokube.cli import main
from nanokube.pki.ca import KeyPair, ensure_pki, issue, new_ca
from nanokube.pki.jwt import key_id


@pytest.mark.parametrize("flags, said", [
    (["--tls-cert-file", "a.crt"], "missing filename for serving cert"),
    (["--proxy-client-key-file", "p.key"], "missing filename for proxy client cert"),
    (["--tls-sni-cert-key", "only.crt"], "--tls-sni-cert-key: expected comma separated certificate and key file paths"),
    (["--service-account-issuer", "https://a", "--service-account-issuer", "https://a"],
     'service-account-issuer "https://a" is already specified'),
    (["--service-account-key-file", "{empty}"],
     "--service-account-key-file: {empty}: data does not contain any valid RSA or ECDSA public keys"),
    (["--service-account-signing-key-file", "{ca}"], "--service-account-signing-key-file: "),
    (["--service-account-signing-key-file", "{key}"], "nanokube: service-account-key-file is a required flag\n"),
    (["--cluster-signing-kubelet-serving-cert-file", "{ca}"], '"cluster-signing-kubelet-serving": cannot specify cert without key'),
    (["--client-ca-file", "{empty}"], "nanokube: serving certificates or client CAs: "),
])
def test_a_bad_flag_stops_up_with_its_line(flags, said, tmp_path, capsys):
    (tmp_path / "empty.pem").write_text("")
    (tmp_path / "ca.crt").write_bytes((ca := new_ca()).cert_pem)
    (tmp_path / "ca.key").write_bytes(ca.key_pem)
    paths = {"empty": str(tmp_path / "empty.pem"), "ca": str(tmp_path / "ca.crt"), "key": str(tmp_path / "ca.key")}
    argv = ["up", "--data-dir", str(tmp_path / "d"), "--store", "memory", *(f.format(**paths) for f in flags)]
    assert main(argv) == 2
    assert said.format(**paths) in capsys.readouterr().err


def test_clients_trust_the_ca_that_issued_the_given_serving_certificate(tmp_path, caplog):
    """The admin kubeconfig's, cluster-info's and kube-root-ca.crt's CA for --tls-cert-file: the
    root of an intermediate the file carries after the leaf, where the client CAs hold it."""
    root = new_ca("operator-root")
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    mid = KeyPair(x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(x509.NameOID.COMMON_NAME, "mid")]))
                  .issuer_name(root.cert.subject).public_key(key.public_key()).serial_number(1)
                  .not_valid_before(now).not_valid_after(now + dt.timedelta(days=1))
                  .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                  .sign(root.key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM),
                  key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption()))
    leaf = issue(mid, "apiserver", server=True)
    (tmp_path / "chain.crt").write_bytes(leaf.cert_pem + mid.cert_pem)
    (tmp_path / "clients.crt").write_bytes(root.cert_pem)
    pki = ensure_pki(str(tmp_path))
    given = PKIOptions(serving=(str(tmp_path / "chain.crt"), "unused.key"), client_ca=str(tmp_path / "clients.crt"))
    assert client_trust(given, pki, {}) == root.cert_pem
    assert client_trust(PKIOptions(), pki, {}) == pki.ca.cert_pem  # up's own serving certificate
    (tmp_path / "self.crt").write_bytes(own := new_ca("self-signed").cert_pem)
    assert client_trust(PKIOptions(serving=(str(tmp_path / "self.crt"), "unused.key")), pki, {}) == own
    (tmp_path / "leaf.crt").write_bytes(leaf.cert_pem)  # no CA up knows issued it
    assert client_trust(PKIOptions(serving=(str(tmp_path / "leaf.crt"), "unused.key")), pki, {}) == pki.ca.cert_pem
    assert "no CA nanokube knows issued --tls-cert-file's certificate" in caplog.text


def test_two_cas_of_one_name_are_told_apart_by_key(tmp_path):
    """A CA is found by the key that signed, as Go's x509 builds a chain, not by its name: the
    serving certificate's CA where the client CAs hold another of the same subject first, and the
    admin kubeconfigs' issuer where the client CAs hold a CA named as DIR/pki's (rotated) but of
    another key."""
    old, new = new_ca("kubernetes"), new_ca("kubernetes")
    assert old.cert.subject == new.cert.subject
    leaf = issue(new, "kube-apiserver", dns_names=("localhost",), server=True)
    (tmp_path / "serving.crt").write_bytes(leaf.cert_pem)
    (tmp_path / "serving.key").write_bytes(leaf.key_pem)
    pki = ensure_pki(str(tmp_path))
    rotated, signer = new_ca(), new_ca("kubernetes-signer")  # (DIR/pki's CA is nanokube-ca too)
    assert rotated.cert.subject == pki.ca.cert.subject
    (tmp_path / "clients.crt").write_bytes(old.cert_pem + new.cert_pem + rotated.cert_pem + signer.cert_pem)
    (tmp_path / "signer.crt").write_bytes(signer.cert_pem)
    (tmp_path / "signer.key").write_bytes(signer.key_pem)
    given = PKIOptions(serving=(str(tmp_path / "serving.crt"), str(tmp_path / "serving.key")),
                       client_ca=str(tmp_path / "clients.crt"))
    signers = {"kubernetes.io/kube-apiserver-client": (str(tmp_path / "signer.crt"), str(tmp_path / "signer.key"))}
    assert client_trust(given, pki, signers) == new.cert_pem
    admin, super_admin = pki_options.admin_credentials(given, pki, pki_options.tls(given, pki), signers)
    for kp in (admin, super_admin):
        kp.cert.verify_directly_issued_by(signer.cert)  # (raises where DIR/pki's CA issued it)


def test_no_jwt_issuer_of_the_authentication_config_may_be_a_service_account_issuer(tmp_path, capsys):
    config = tmp_path / "authn.yaml"
    config.write_text("apiVersion: apiserver.config.k8s.io/v1\nkind: AuthenticationConfiguration\njwt:\n"
                      "- issuer:\n    url: https://b.example\n    audiences: [a]\n"
                      "  claimMappings:\n    username:\n      claim: sub\n      prefix: ''\n")
    argv = ["up", "--data-dir", str(tmp_path / "d"), "--store", "memory", "--authentication-config", str(config),
            "--service-account-issuer", "https://a.example", "--service-account-issuer", "https://b.example"]
    assert main(argv) == 2
    assert ('jwt[0].issuer.url: Invalid value: "https://b.example": URL must not overlap with disallowed issuers: '
            '[https://a.example https://b.example]') in capsys.readouterr().err


def test_service_account_keys_default_to_the_tls_key_and_audiences_to_the_issuers(tmp_path, caplog):
    """kube-apiserver's defaults: no --service-account-key-file nor signing key file, the TLS key
    verifies (where it is a key keyutil reads: RSA, not an ECDSA key in PKCS #8); no
    --api-audiences, every issuer is an audience."""
    rsa_key = rsa.generate_private_key(65537, 2048)
    (tmp_path / "tls.key").write_bytes(rsa_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                             serialization.NoEncryption()))
    (tmp_path / "ec.key").write_bytes(issue(new_ca(), "apiserver", server=True).key_pem)
    parser = argparse.ArgumentParser()
    pki_options.add_flags(parser)

    def configured(*flags: str) -> ServiceAccountTokens:
        own = ec.generate_private_key(ec.SECP256R1())
        server = SimpleNamespace(tls=None, pki=SimpleNamespace(), tokens=ServiceAccountTokens(own, lambda *a: None))
        pki_options.apply(server, pki_options.load(parser.parse_args(list(flags))), None)
        return server.tokens

    tls_key = rsa_key.public_key()
    tokens = configured("--tls-private-key-file", str(tmp_path / "tls.key"), "--tls-cert-file", "x.crt",
                        "--service-account-issuer", "https://a", "--service-account-issuer", "https://b")
    assert set(tokens.verifying) == {key_id(tls_key), tokens.kid}  # (and `up`'s own key, which signs)
    assert tokens.audiences == ("https://a", "https://b")
    signing = ec.generate_private_key(ec.SECP256R1())  # given, the key files verify: the TLS key is no default then
    (tmp_path / "sa.key").write_bytes(signing.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                            serialization.NoEncryption()))
    (tmp_path / "sa.pub").write_bytes(signing.public_key().public_bytes(serialization.Encoding.PEM,
                                                                        serialization.PublicFormat.SubjectPublicKeyInfo))
    tokens = configured("--tls-private-key-file", str(tmp_path / "tls.key"), "--tls-cert-file", "x.crt",
                        "--service-account-signing-key-file", str(tmp_path / "sa.key"),
                        "--service-account-key-file", str(tmp_path / "sa.pub"), "--api-audiences", "x,y")
    assert (set(tokens.verifying), tokens.audiences) == ({key_id(signing.public_key())}, ("x", "y"))
    tokens = configured("--tls-private-key-file", str(tmp_path / "ec.key"), "--tls-cert-file", "x.crt")
    assert set(tokens.verifying) == {tokens.kid}
    assert "--tls-private-key-file holds no key that verifies service account tokens" in caplog.text
    argv = pki_options.worker_argv(parser.parse_args(["--api-audiences", "x,y"]))  # `up`'s API workers take it
    assert pki_options.load(parser.parse_args(argv)).audiences == ("x", "y")


def test_the_published_trust_is_joined_with_what_the_configmap_held():
    """Several API servers share kube-system/extension-apiserver-authentication: each adds its CAs
    and header names (each once, lists as Go's json.Marshal writes them); a CA leaves 5 minutes
    after it expires."""
    old, short, new = new_ca("old"), new_ca("short", days=1), new_ca("new")
    stored = {"client-ca-file": (old.cert_pem + short.cert_pem).decode(), "requestheader-group-headers": '["X-A"]'}
    ours = {"client-ca-file": (new.cert_pem + old.cert_pem).decode(), "requestheader-group-headers": '["X-B","X-A"]'}
    now = time.time()
    assert combined(stored, ours, now) == {"client-ca-file": (old.cert_pem + short.cert_pem + new.cert_pem).decode(),
                                           "requestheader-group-headers": '["X-A","X-B"]'}
    expiry = short.cert.not_valid_after_utc.timestamp()
    assert short.cert_pem.decode() in combined(stored, ours, expiry + 299)["client-ca-file"]
    assert combined(stored, ours, expiry + 301)["client-ca-file"] == (old.cert_pem + new.cert_pem).decode()


def test_api_workers_are_given_every_certificate_flag_as_up_read_it(tmp_path, monkeypatch):
    """`up --api-workers N` hands each worker its certificate flags (files by absolute paths): the
    worker reads the same options (an empty --requestheader-allowed-names too: any name)."""
    parser = argparse.ArgumentParser()
    pki_options.add_flags(parser)
    monkeypatch.chdir(tmp_path)
    up = parser.parse_args(["--tls-cert-file", "a.crt", "--tls-private-key-file", "a.key",
                            "--tls-sni-cert-key", "s.crt,s.key:api.example.test,*.apps.test", "--client-ca-file", "c.crt",
                            "--requestheader-client-ca-file", "r.crt", "--requestheader-allowed-names", "",
                            "--requestheader-username-headers", "X-Edge-User,X-Remote-User",
                            "--proxy-client-cert-file", "p.crt", "--proxy-client-key-file", "p.key"])
    given = pki_options.load(up)
    argv = pki_options.worker_argv(up)
    monkeypatch.chdir("/")  # (a worker's paths do not depend on where it runs)
    assert pki_options.load(parser.parse_args(argv)) == given
    assert given.requestheader.allowed_names == () and given.sni[0].names == ("api.example.test", "*.apps.test")
    assert given.proxy_client == (str(tmp_path / "p.crt"), str(tmp_path / "p.key"))
