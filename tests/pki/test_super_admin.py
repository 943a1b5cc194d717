"""DIR/pki/admin.crt, super-admin.conf's certificate, as kubeadm (1.29+) issues it: the user
kubernetes-super-admin in system:masters, apart from admin.conf's kubernetes-admin."""

from __future__ import annotations

from cryptography import x509
from cryptography.x509.oid import NameOID

from nanokube.pki.ca import ensure_pki, issue


def _subject(cert_pem: bytes) -> tuple[str, list[str]]:
    name = x509.load_pem_x509_certificate(cert_pem).subject
    return (name.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value,
            [a.value for a in name.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)])


def test_a_data_dir_of_the_old_kubernetes_admin_in_system_masters_gets_the_super_admin(tmp_path):
    first = ensure_pki(str(tmp_path))
    assert _subject(first.admin.cert_pem) == ("kubernetes-super-admin", ["system:masters"])
    assert ensure_pki(str(tmp_path)).admin.cert_pem == first.admin.cert_pem  # kept across starts
    old = issue(first.ca, "kubernetes-admin", organizations=("system:masters",), client=True)
    (tmp_path / "pki" / "admin.crt").write_bytes(old.cert_pem)
    (tmp_path / "pki" / "admin.key").write_bytes(old.key_pem)
    again = ensure_pki(str(tmp_path))
    assert _subject(again.admin.cert_pem) == ("kubernetes-super-admin", ["system:masters"])
    assert (tmp_path / "pki" / "admin.crt").read_bytes() == again.admin.cert_pem
    issuer = x509.load_pem_x509_certificate(again.admin.cert_pem).issuer
    assert issuer == first.ca.cert.subject
