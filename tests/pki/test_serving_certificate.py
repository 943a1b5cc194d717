"""The API server's serving certificate names what in-cluster clients dial: the `kubernetes`
Service's ClusterIP and DNS names, besides loopback."""

from __future__ import annotations


from cryptography import x509

from nanokube.pki.ca import ensure_pki, issue


def _names(cert_pem: bytes) -> tuple[set[str], set[str]]:
    san = x509.load_pem_x509_certificate(cert_pem).extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return set(san.get_values_for_type(x509.DNSName)), {str(i) for i in san.get_values_for_type(x509.IPAddress)}


def test_the_serving_certificate_names_the_kubernetes_service(tmp_path):
    dns, ips = _names(ensure_pki(str(tmp_path)).server.cert_pem)
    assert {"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local",
            "localhost"} <= dns
    assert {"10.96.0.1", "127.0.0.1", "::1"} <= ips


def test_a_data_dir_whose_certificate_lacks_a_name_gets_a_new_one_of_the_same_ca(tmp_path):
    first = ensure_pki(str(tmp_path))
    old = issue(first.ca, "kube-apiserver", dns_names=("localhost", "kubernetes"), ips=("127.0.0.1",), server=True)
    (tmp_path / "pki" / "apiserver.crt").write_bytes(old.cert_pem)
    (tmp_path / "pki" / "apiserver.key").write_bytes(old.key_pem)
    again = ensure_pki(str(tmp_path))
    assert again.ca.cert_pem == first.ca.cert_pem
    assert "10.96.0.1" in _names(again.server.cert_pem)[1]
    assert (tmp_path / "pki" / "apiserver.crt").read_bytes() == again.server.cert_pem
    assert ensure_pki(str(tmp_path)).server.cert_pem == again.server.cert_pem  # kept once it names them all


def test_the_advertised_address_is_named_and_a_new_one_reissues(tmp_path):
    first = ensure_pki(str(tmp_path), ips=("192.0.2.9",))
    assert {"192.0.2.9", "10.96.0.1"} <= _names(first.server.cert_pem)[1]
    assert ensure_pki(str(tmp_path)).server.cert_pem == first.server.cert_pem  # a worker: names enough already
    moved = ensure_pki(str(tmp_path), ips=("192.0.2.10",))
    assert "192.0.2.10" in _names(moved.server.cert_pem)[1] and moved.ca.cert_pem == first.ca.cert_pem
