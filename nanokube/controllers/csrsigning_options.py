"""kube-controller-manager's CSR signing flags and the signers' CA files (--cluster-signing-*), apart
from the controller so that `up` and `nanokube controller-manager` parse and judge them before they
import any controller."""

from __future__ import annotations

import logging
import os

log = logging.getLogger("nanokube.controllers.csrsigning")

SIGNER_NAME = "kubernetes.io/kube-apiserver-client"
KUBELET_CLIENT_SIGNER = "kubernetes.io/kube-apiserver-client-kubelet"
KUBELET_SERVING_SIGNER = "kubernetes.io/kubelet-serving"
LEGACY_UNKNOWN_SIGNER = "kubernetes.io/legacy-unknown"
#: kube-controller-manager's --cluster-signing-duration default
SIGNING_DURATION = 365 * 86400
#: each signer's per-signer flags, --cluster-signing-<stem>-cert-file and -key-file, and the name
#: upstream's flag validation calls the pair by (sic: the kubelet client's reads kube-apiserver-client)
FLAGS = {KUBELET_SERVING_SIGNER: ("kubelet-serving", "cluster-signing-kubelet-serving"),
         KUBELET_CLIENT_SIGNER: ("kubelet-client", "cluster-signing-kube-apiserver-client"),
         SIGNER_NAME: ("kube-apiserver-client", "cluster-signing-kube-apiserver"),
         LEGACY_UNKNOWN_SIGNER: ("legacy-unknown", "cluster-signing-legacy-unknown")}
#: the kubernetes.io signers the controller runs
SIGNERS = (SIGNER_NAME, KUBELET_CLIENT_SIGNER, KUBELET_SERVING_SIGNER, LEGACY_UNKNOWN_SIGNER)


#: a signer's CA: its certificate and key files
Files = tuple[str, str]


def validate_files(generic: Files, specific: dict[str, Files]) -> list[str]:
    """CSRSigningControllerOptions.Validate: each signer's pair both or neither, and no signer's
    pair beside the generic one; the errors in upstream's words and order."""
    errs = []
    for signer, (cert, key) in specific.items():
        if bool(cert) != bool(key):
            errs.append(f'"{FLAGS[signer][1]}": ' + ("cannot specify cert without key" if cert else
                                                     "cannot specify key without cert"))
    if any(generic) and any(any(f) for f in specific.values()):
        errs.append("cannot specify --cluster-signing-{cert,key}-file and other --cluster-signing-*-file flags "
                    "at the same time")
    return errs


def signer_files(generic: Files, specific: dict[str, Files]) -> dict[str, Files]:
    """The signers that run and their CAs, as startCSRSigningController picks them: with no
    signer's own pair, the generic pair signs for all (nothing runs unless it has both files);
    else each signer with a pair of its own."""
    if not any(any(f) for f in specific.values()):
        return dict.fromkeys(SIGNERS, generic) if all(generic) else {}
    return {signer: files for signer, files in specific.items() if any(files)}


def add_flags(p) -> None:
    """The CSR signer's CA files and certificate lifetime, as kube-controller-manager's flags."""
    g = p.add_argument_group("CSR signing")
    g.add_argument("--cluster-signing-cert-file", default="", metavar="FILE",
                   help="PEM CA certificate that signs for every kubernetes.io signer (no per-signer flag with it)")
    g.add_argument("--cluster-signing-key-file", default="", metavar="FILE",
                   help="the PEM RSA or ECDSA key of --cluster-signing-cert-file")
    for signer, (stem, _) in FLAGS.items():
        g.add_argument(f"--cluster-signing-{stem}-cert-file", default="", metavar="FILE",
                       help=f"PEM CA certificate for {signer} alone (not with --cluster-signing-cert-file)")
        g.add_argument(f"--cluster-signing-{stem}-key-file", default="", metavar="FILE",
                       help=f"the key of --cluster-signing-{stem}-cert-file")
    g.add_argument("--cluster-signing-duration", default="8760h", metavar="DURATION",
                   help="the longest lifetime of a signed certificate (Go duration; default 8760h)")


def _flag_files(args) -> tuple[Files, dict[str, Files]]:
    """(the generic pair, each signer's pair) as the flags name them."""
    return ((args.cluster_signing_cert_file, args.cluster_signing_key_file),
            {signer: (getattr(args, f"cluster_signing_{stem.replace('-', '_')}_cert_file"),
                      getattr(args, f"cluster_signing_{stem.replace('-', '_')}_key_file"))
             for signer, (stem, _) in FLAGS.items()})


def given(args) -> bool:
    """Whether the flags name any signer's CA file (`up` signs with its own CA where none does)."""
    generic, specific = _flag_files(args)
    return any(generic) or any(any(f) for f in specific.values())


def from_flags(args) -> dict[str, Files]:
    """The CSR signers the flags run and their CA files; ValueError with upstream's words for a bad
    combination (several at once read as utilerrors' aggregate: '[a, b]')."""
    generic, specific = _flag_files(args)
    errs = validate_files(generic, specific)
    if errs:
        raise ValueError(errs[0] if len(errs) == 1 else "[" + ", ".join(errs) + "]")
    signers = signer_files(generic, specific)
    if not signers:
        log.info("Skipping CSR signer controller because no csr cert/key was specified")
    return signers


def cluster_ca(data_dir: str) -> dict[str, Files]:
    """Every signer on the cluster CA `nanokube up` keeps in DIR/pki (the API server trusts it)."""
    pki = os.path.join(data_dir, "pki")
    return dict.fromkeys(SIGNERS, (os.path.join(pki, "ca.crt"), os.path.join(pki, "ca.key")))
