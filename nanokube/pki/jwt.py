"""ES256 JSON Web Tokens signed with the service-account key (DIR/pki/sa.key): the API server's
bound tokens and the token controller's legacy Secret tokens are both signed here, so both verify
with the one key the API server publishes."""

from __future__ import annotations

import base64
import hashlib

import orjson
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

#: the issuer of the tokens the token controller writes into kubernetes.io/service-account-token Secrets
LEGACY_ISSUER = "kubernetes/serviceaccount"


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def key_id(public: ec.EllipticCurvePublicKey) -> str:
    """The kid tokens name their key by: the SHA-256 of its DER SubjectPublicKeyInfo."""
    der = public.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return b64url(hashlib.sha256(der).digest())


def sign_es256(key: ec.EllipticCurvePrivateKey, claims: dict) -> str:
    """A compact JWT of `claims`, its header naming ES256 and the key's kid."""
    signing_input = (b64url(orjson.dumps({"alg": "ES256", "kid": key_id(key.public_key())})) + "."
                     + b64url(orjson.dumps(claims))).encode()
    r, s = decode_dss_signature(key.sign(signing_input, ec.ECDSA(hashes.SHA256())))
    return signing_input.decode() + "." + b64url(r.to_bytes(32, "big") + s.to_bytes(32, "big"))


def load_key(path: str) -> ec.EllipticCurvePrivateKey:
    with open(path, "rb") as f:
        return serialization.load_pem_private_key(f.read(), None)
