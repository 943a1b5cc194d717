"""JSON Web Tokens signed with the service-account key (DIR/pki/sa.key, or kube-apiserver's
--service-account-signing-key-file): the API server's bound tokens and the token controller's
legacy Secret tokens are both signed here, so both verify with the keys the API server publishes.
An ECDSA key signs ES256/384/512 by its curve, an RSA key RS256, as upstream's signers pick."""

from __future__ import annotations

import base64
import hashlib

import orjson
from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature, encode_dss_signature

#: the issuer of the tokens the token controller writes into kubernetes.io/service-account-token Secrets
LEGACY_ISSUER = "kubernetes/serviceaccount"
#: an ECDSA key's curve -> (its JWS algorithm, its digest, the bytes of r and of s)
CURVES = {"secp256r1": ("ES256", hashes.SHA256, 32), "secp384r1": ("ES384", hashes.SHA384, 48),
          "secp521r1": ("ES512", hashes.SHA512, 66)}


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def key_id(public) -> str:
    """The kid tokens name their key by: the SHA-256 of its DER SubjectPublicKeyInfo."""
    der = public.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return b64url(hashlib.sha256(der).digest())


def algorithm(public) -> str:
    """The JWS algorithm a key of this kind signs with; ValueError for another kind or curve."""
    if isinstance(public, rsa.RSAPublicKey):
        return "RS256"
    if isinstance(public, ec.EllipticCurvePublicKey) and public.curve.name in CURVES:
        return CURVES[public.curve.name][0]
    raise ValueError("the key must be an RSA key or an ECDSA key of P-256, P-384 or P-521")


def sign(key, claims: dict) -> str:
    """A compact JWT of `claims`, its header naming the key's algorithm and kid."""
    public = key.public_key()
    alg = algorithm(public)
    signing_input = (b64url(orjson.dumps({"alg": alg, "kid": key_id(public)})) + "."
                     + b64url(orjson.dumps(claims))).encode()
    if alg == "RS256":
        return signing_input.decode() + "." + b64url(key.sign(signing_input, padding.PKCS1v15(), hashes.SHA256()))
    _, digest, size = CURVES[public.curve.name]
    r, s = decode_dss_signature(key.sign(signing_input, ec.ECDSA(digest())))
    return signing_input.decode() + "." + b64url(r.to_bytes(size, "big") + s.to_bytes(size, "big"))


_HASHES = {"256": hashes.SHA256, "384": hashes.SHA384, "512": hashes.SHA512}


def verify_signature(key, alg: str, signed: bytes, sig: bytes) -> bool:
    """Whether `sig` is `key`'s JWS signature of `signed` by `alg` (RS*, PS* or ES*)."""
    digest = _HASHES.get(alg[2:])
    if digest is None:
        return False
    try:
        if alg.startswith("RS") and isinstance(key, rsa.RSAPublicKey):
            key.verify(sig, signed, padding.PKCS1v15(), digest())
        elif alg.startswith("PS") and isinstance(key, rsa.RSAPublicKey):
            key.verify(sig, signed, padding.PSS(padding.MGF1(digest()), digest.digest_size), digest())
        elif alg.startswith("ES") and isinstance(key, ec.EllipticCurvePublicKey):
            size = (key.curve.key_size + 7) // 8
            if len(sig) != 2 * size:
                return False
            der = encode_dss_signature(int.from_bytes(sig[:size], "big"), int.from_bytes(sig[size:], "big"))
            key.verify(der, signed, ec.ECDSA(digest()))
        else:
            return False
    except InvalidSignature:
        return False
    return True


def load_key(path: str):
    """A PEM private key file's key (ValueError for a file without one)."""
    with open(path, "rb") as f:
        return serialization.load_pem_private_key(f.read(), None)


def _sequence(der: bytes) -> bytes:
    """The contents of the DER SEQUENCE `der` (b"" for anything else)."""
    if len(der) < 2 or der[0] != 0x30:
        return b""
    return der[2 + (der[1] & 0x7F if der[1] & 0x80 else 0):]


def _public_key(der: bytes):
    """A block's key as keyutil.ParsePublicKeysPEM tries it, whatever the block's label: an RSA private
    key (PKCS #1 or #8), an RSA or ECDSA public key (a SubjectPublicKeyInfo, or a certificate's) or an
    ECDSA private key (SEC 1 only); ValueError for anything else, a PKCS #1 RSAPublicKey (which Go's
    ParsePKIXPublicKey refuses) and an ECDSA key in PKCS #8 among them."""
    try:
        return x509.load_der_x509_certificate(der).public_key()
    except ValueError:
        pass
    body = _sequence(der)
    if body[:1] == b"\x30":  # SubjectPublicKeyInfo: an AlgorithmIdentifier first
        return serialization.load_der_public_key(der)
    key = serialization.load_der_private_key(der, None)
    if isinstance(key, ec.EllipticCurvePrivateKey) and body[3:4] == b"\x30":  # PKCS #8: an AlgorithmIdentifier after the version
        raise ValueError("an ECDSA key in PKCS #8")
    return key.public_key()


def public_keys(pem: bytes) -> list:
    """Every key of a PEM file as kube-apiserver's --service-account-key-file reads one (keyutil's
    ParsePublicKeysPEM, see `_public_key`), RSA or ECDSA; ValueError where it holds none. A block
    that holds no such key (a CA bundle's other PEM, an encrypted key, a damaged one) is passed
    over, as keyutil tolerates non-key blocks."""
    keys = []
    for block in pem.split(b"-----BEGIN ")[1:]:
        lines = block.split(b"-----END ", 1)[0].split(b"\n")[1:]
        try:
            key = _public_key(base64.b64decode(b"".join(line.strip() for line in lines if b":" not in line), validate=True))
        except (ValueError, TypeError, UnsupportedAlgorithm):  # (TypeError: an encrypted key, no password)
            continue
        if isinstance(key, (rsa.RSAPublicKey, ec.EllipticCurvePublicKey)):
            keys.append(key)
    if not keys:
        raise ValueError("data does not contain any valid RSA or ECDSA public keys")
    return keys
