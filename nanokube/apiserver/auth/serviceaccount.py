"""Bound ServiceAccount tokens: the TokenRequest API's issuer and the bearer
verifier. Tokens are ES256 JWTs signed with a key kept in DIR/pki/sa.key;
they name their ServiceAccount (and optionally a Pod) by uid, so deleting or
recreating either revokes them without any token store."""

from __future__ import annotations

import base64
import os
import uuid
from typing import Callable

import orjson
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from ...clock import REAL, Clock, format_time, parse_time
from ...pki.jwt import LEGACY_ISSUER, key_id, sign_es256
from ...machinery.validation import invalid
from ...machinery import errors
from ...machinery.user import User

API_AUDIENCE = "https://kubernetes.default.svc.cluster.local"
ISSUER = API_AUDIENCE
DEFAULT_EXPIRATION = 3600
MIN_EXPIRATION = 600
MAX_EXPIRATION = 2**32 - 1
#: clock skew tolerated on exp/nbf, as upstream's JWT validation allows
LEEWAY = 60.0
#: a bound pod being deleted keeps its tokens valid this long, for graceful shutdown
DELETION_GRACE = 60.0

#: (plural, namespace, name) -> the stored core/v1 object, or None
Lookup = Callable[[str, str, str], "dict | None"]
#: the label the API server keeps on a legacy token's Secret: the day (UTC) the token was last used
LAST_USED_LABEL = "kubernetes.io/legacy-token-last-used"
#: the label the legacy token cleaner (or an admin) sets on a legacy token's Secret to refuse its
#: token from then on, whatever day it names; removing it allows the token again
INVALID_SINCE_LABEL = "kubernetes.io/legacy-token-invalid-since"

def load_or_create_key(pki_dir: str) -> ec.EllipticCurvePrivateKey:
    """The P-256 signing key, created on first start so restarts keep tokens valid."""
    path = os.path.join(pki_dir, "sa.key")
    if os.path.exists(path):
        with open(path, "rb") as f:
            return serialization.load_pem_private_key(f.read(), None)
    key = ec.generate_private_key(ec.SECP256R1())
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    os.makedirs(pki_dir, exist_ok=True)
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(pem)
    os.replace(tmp, path)
    return key


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(s: str) -> bytes:
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def service_account_user(namespace: str, name: str, uid: str = "", extra: dict | None = None) -> User:
    return User(f"system:serviceaccount:{namespace}:{name}",
                ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"),
                uid, extra or {})


class ServiceAccountTokens:
    """Issues and verifies bound tokens for one API server."""

    def __init__(self, key: ec.EllipticCurvePrivateKey, lookup: Lookup, clock: Clock = REAL,
                 issuer: str = ISSUER, audiences: tuple[str, ...] = (API_AUDIENCE,),
                 legacy_used: Callable[[str, str, str], None] | None = None):
        """`legacy_used(namespace, secret, day)` labels a legacy token's Secret with the day it was used."""
        self.key = key
        self.legacy_used = legacy_used
        self.public = key.public_key()
        self.lookup = lookup
        self.clock = clock
        self.issuer = issuer
        self.audiences = audiences
        self.kid = key_id(self.public)

    # --- issuer discovery -------------------------------------------------

    def jwks(self) -> dict:
        """The key set that verifies the tokens (/openid/v1/jwks): the P-256 public key as a JWK,
        named by the tokens' kid."""
        n = self.public.public_numbers()
        return {"keys": [{"use": "sig", "kty": "EC", "kid": self.kid, "crv": "P-256", "alg": "ES256",
                          "x": _b64(n.x.to_bytes(32, "big")), "y": _b64(n.y.to_bytes(32, "big"))}]}

    def openid_configuration(self, jwks_uri: str) -> dict:
        """The OIDC discovery document (/.well-known/openid-configuration), in upstream's field order."""
        return {"issuer": self.issuer, "jwks_uri": jwks_uri, "response_types_supported": ["id_token"],
                "subject_types_supported": ["public"], "id_token_signing_alg_values_supported": ["ES256"]}

    # --- issuing ----------------------------------------------------------

    def token_request(self, namespace: str, name: str, body: dict) -> dict:
        """Answer a TokenRequest for serviceaccounts/NAME/token: validate,
        default, resolve the bound object, and return the filled-in request."""
        if not isinstance(body, dict):
            raise errors.bad_request("the body of a TokenRequest must be an object")
        spec = dict(body.get("spec") or {})
        spec["audiences"] = list(spec.get("audiences") or self.audiences)
        seconds = spec.setdefault("expirationSeconds", DEFAULT_EXPIRATION)
        if not isinstance(seconds, int) or seconds < MIN_EXPIRATION:
            raise errors.invalid("authentication.k8s.io", "TokenRequest", name, [
                invalid("spec.expirationSeconds", seconds, "may not specify a duration less than 10 minutes")])
        if seconds > MAX_EXPIRATION:
            raise errors.invalid("authentication.k8s.io", "TokenRequest", name, [
                invalid("spec.expirationSeconds", seconds, "may not specify a duration larger than 2^32 seconds")])
        sa = self.lookup("serviceaccounts", namespace, name)
        if sa is None:
            raise errors.not_found("", "serviceaccounts", name)
        bound = self._bound(namespace, name, spec.get("boundObjectRef"))
        now = self.clock.now()
        token = self.issue(sa, spec["audiences"], seconds, bound, now)
        return {
            "kind": "TokenRequest",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": name, "namespace": namespace, "creationTimestamp": format_time(now)},
            "spec": spec,
            "status": {"token": token, "expirationTimestamp": format_time(now + seconds)},
        }

    def _bound(self, namespace: str, sa_name: str, ref: dict | None) -> dict[str, dict]:
        """The objects a token is bound to, by claim name: a Pod (with the Node it runs on, when
        that exists), a Secret or a Node, as upstream's TokenREST resolves a boundObjectRef."""
        if not ref:
            return {}
        api_version, kind, name = ref.get("apiVersion") or "", ref.get("kind") or "", ref.get("name") or ""
        plural = {"Pod": "pods", "Secret": "secrets", "Node": "nodes"}.get(kind) if api_version == "v1" else None
        if plural is None:
            group, _, version = api_version.rpartition("/")
            raise errors.bad_request(f"cannot bind token to object of type {group}/{version}, Kind={kind}")
        obj = self.lookup(plural, "" if kind == "Node" else namespace, name)
        if obj is None:
            raise errors.not_found("", plural, name)
        if kind == "Pod" and (obj.get("spec") or {}).get("serviceAccountName", "default") != sa_name:
            raise errors.bad_request(
                f'cannot bind token for serviceaccount "{sa_name}" to pod running with different serviceaccount name.')
        uid = obj["metadata"].get("uid", "")
        if ref.get("uid") and ref["uid"] != uid:
            raise errors.conflict("", kind, name,
                                  f"the UID in the bound object reference ({ref['uid']}) does not match the UID in "
                                  "record. The object might have been deleted and then recreated")
        bound = {kind.lower(): obj}
        if kind == "Pod" and (node_name := (obj.get("spec") or {}).get("nodeName")):
            if (node := self.lookup("nodes", "", node_name)) is not None:
                bound["node"] = node
        return bound

    def issue(self, sa: dict, audiences: list[str], seconds: int, bound: dict[str, dict] | None = None,
              now: float | None = None) -> str:
        """A bound token (upstream's Claims): `bound` names the pod (and its node), secret or node."""
        now = self.clock.now() if now is None else now
        md = sa["metadata"]
        k8s: dict = {"namespace": md["namespace"],
                     "serviceaccount": {"name": md["name"], "uid": md.get("uid", "")}}
        for claim, obj in sorted((bound or {}).items()):
            k8s[claim] = {"name": obj["metadata"]["name"], "uid": obj["metadata"].get("uid", "")}
        claims = {"aud": audiences, "exp": int(now) + seconds, "iat": int(now), "iss": self.issuer,
                  "jti": str(uuid.uuid4()), "kubernetes.io": k8s, "nbf": int(now),
                  "sub": f"system:serviceaccount:{md['namespace']}:{md['name']}"}
        return sign_es256(self.key, claims)

    # --- verifying --------------------------------------------------------

    def review(self, token: str, audiences: list[str] | None = None) -> tuple[User | None, list[str], str]:
        """A TokenReview's answer: the user, which of `audiences` (default: this server's) the token
        is for, and why it is refused ("" when it is not), in upstream's authenticators' words."""
        wanted = tuple(audiences) if audiences else self.audiences
        user = self.authenticate(token, wanted)
        claims = self._claims(token)
        if user is None or claims is None:
            return None, [], self._refusal(token, claims, wanted)
        aud = self.audiences if claims.get("iss") == LEGACY_ISSUER else claims.get("aud")
        aud = [aud] if isinstance(aud, str) else aud
        if not set(wanted) & set(aud):
            return None, [], self._refusal(token, claims, wanted)
        return user, [a for a in wanted if a in aud], ""

    def _refusal(self, token: str, claims: dict | None, wanted: tuple[str, ...]) -> str:
        """A token not ours (no JWT of our key and issuers) is bearertoken's "invalid bearer token" (no token
        authenticator errs on it); one for other audiences, expired or not yet valid, the JWT authenticator's
        error, the audiences checked first; then why the validator refused the objects it is bound to."""
        if claims is None or claims.get("iss") not in (self.issuer, LEGACY_ISSUER):
            return "invalid bearer token"
        aud = claims.get("aud") if claims.get("iss") == self.issuer else None
        aud = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) and aud else list(self.audiences)
        if not set(aud) & set(wanted):
            def quoted(values) -> str:  # Go's %q of a []string
                return "[" + " ".join(orjson.dumps(str(v)).decode() for v in values) + "]"
            return f"token audiences {quoted(aud)} is invalid for the target audiences {quoted(wanted)}"
        if claims.get("iss") == LEGACY_ISSUER:
            return self._legacy(token, claims)[1] or "invalid bearer token"
        exp, nbf, now = claims.get("exp"), claims.get("nbf", 0), self.clock.now()
        if isinstance(exp, (int, float)) and exp + LEEWAY < now:
            return "service account token has expired"
        if isinstance(nbf, (int, float)) and nbf - LEEWAY > now:
            return "service account token is not valid yet"
        return self._bound_user(claims, now)[1] or "invalid bearer token"

    def authenticate(self, token: str, audiences: tuple[str, ...] | None = None) -> User | None:
        """The ServiceAccount user a bearer token stands for, or None when the
        token is malformed, forged, expired, for another audience, or bound to
        objects that no longer exist."""
        claims = self._claims(token)
        if claims is None:
            return None
        if claims.get("iss") == LEGACY_ISSUER:
            return self._legacy(token, claims)[0]
        now = self.clock.now()
        aud = claims.get("aud")
        aud = [aud] if isinstance(aud, str) else aud
        if (claims.get("iss") != self.issuer or not isinstance(aud, list) or not set(aud) & set(audiences or self.audiences)
                or not isinstance(claims.get("exp"), (int, float)) or claims["exp"] + LEEWAY < now
                or claims.get("nbf", 0) - LEEWAY > now):
            return None
        return self._bound_user(claims, now)[0]

    def _bound_user(self, claims: dict, now: float) -> tuple[User | None, str]:
        """The user of a well-formed, current token whose ServiceAccount and bound objects still stand,
        or why not in upstream's validator's words (pkg/serviceaccount/claims.go): the ServiceAccount's
        lookup error or uid mismatch said, a bound secret, pod or node gone "invalidated"."""
        k8s = claims.get("kubernetes.io")
        if not isinstance(k8s, dict):
            return None, ""
        ns, sa_ref = k8s.get("namespace"), k8s.get("serviceaccount") or {}
        if not (ns and isinstance(sa_ref, dict) and sa_ref.get("name")):
            return None, ""
        sa = self.lookup("serviceaccounts", ns, sa_ref["name"])
        if sa is None:
            return None, f'serviceaccounts "{sa_ref["name"]}" not found'
        if sa["metadata"].get("uid") != sa_ref.get("uid"):
            return None, f"service account UID ({sa['metadata'].get('uid', '')}) does not match claim ({sa_ref.get('uid', '')})"
        if sa["metadata"].get("deletionTimestamp"):
            return None, f"service account {ns}/{sa_ref['name']} has been deleted"
        extra = {"authentication.kubernetes.io/credential-id": [f"JTI={claims.get('jti', '')}"]}
        pod_ref, secret_ref, node_ref = k8s.get("pod"), k8s.get("secret"), k8s.get("node")
        if secret_ref is not None and (why := self._unbound("secret", ns, secret_ref, now)):
            return None, why
        if pod_ref is not None:
            if why := self._unbound("pod", ns, pod_ref, now):
                return None, why
            extra["authentication.kubernetes.io/pod-name"] = [pod_ref["name"]]
            extra["authentication.kubernetes.io/pod-uid"] = [pod_ref["uid"]]
        if node_ref is not None:
            # a pod's token names its node for information only; a node-bound one lives with the node
            if pod_ref is None and (why := self._unbound("node", "", node_ref, now)):
                return None, why
            extra["authentication.kubernetes.io/node-name"] = [node_ref.get("name", "")]
            extra["authentication.kubernetes.io/node-uid"] = [node_ref.get("uid", "")]
        return service_account_user(ns, sa_ref["name"], sa_ref["uid"], extra), ""

    def _unbound(self, kind: str, namespace: str, ref: dict, now: float) -> str:
        """Why a token bound to this object is refused ("" while the object exists with the token's uid,
        not deleted longer ago than the grace)."""
        obj = self.lookup(kind + "s", namespace, ref.get("name") or "") if isinstance(ref, dict) else None
        if obj is None:
            return "service account token has been invalidated"
        if obj["metadata"].get("uid") != ref.get("uid"):
            return (f"{kind} UID ({obj['metadata'].get('uid', '')}) does not match service account {kind} "
                    f"ref claim ({ref.get('uid', '')})")
        deleted = obj["metadata"].get("deletionTimestamp")
        return "service account token has been invalidated" if deleted and parse_time(deleted) + DELETION_GRACE < now else ""

    def _legacy(self, token: str, claims: dict) -> tuple[User | None, str]:
        """A Secret-based token (upstream's legacy validator): valid while its Secret still holds it,
        is not labelled invalid, and its ServiceAccount, by uid, exists; neither being deleted. It carries no audience: the
        server's own are implied. Refused, the validator's words (pkg/serviceaccount/legacy.go)."""
        ns = claims.get("kubernetes.io/serviceaccount/namespace")
        name = claims.get("kubernetes.io/serviceaccount/service-account.name")
        uid = claims.get("kubernetes.io/serviceaccount/service-account.uid")
        secret_name = claims.get("kubernetes.io/serviceaccount/secret.name")
        if not all(isinstance(v, str) and v for v in (ns, name, uid, secret_name)):
            return None, ""
        if claims.get("sub") != f"system:serviceaccount:{ns}:{name}":
            return None, "sub claim is invalid"
        secret = self.lookup("secrets", ns, secret_name)
        if secret is None or secret["metadata"].get("deletionTimestamp"):
            return None, "Token has been invalidated"
        if (secret.get("data") or {}).get("token") != base64.b64encode(token.encode()).decode():
            return None, "Token does not match server's copy"
        sa = self.lookup("serviceaccounts", ns, name)
        if sa is None:
            return None, f'serviceaccounts "{name}" not found'
        if sa["metadata"].get("deletionTimestamp"):
            return None, f"ServiceAccount {ns}/{name} has been deleted"
        if sa["metadata"].get("uid") != uid:
            return None, f"ServiceAccount UID ({sa['metadata'].get('uid', '')}) does not match claim ({uid})"
        today = format_time(self.clock.now())[:10]
        labels = secret["metadata"].get("labels") or {}
        if self.legacy_used is not None and labels.get(LAST_USED_LABEL) != today:
            self.legacy_used(ns, secret_name, today)  # LegacyServiceAccountTokenTracking, once a day
        if labels.get(INVALID_SINCE_LABEL):  # the refused use is tracked too, as upstream's
            return None, (f"the token in secret {ns}/{secret_name} for service account {ns}/{name} has been marked "
                          "invalid. Use tokens from the TokenRequest API or manually created secret-based tokens, "
                          f"or remove the '{INVALID_SINCE_LABEL}' label from the secret to temporarily allow use "
                          "of this token")
        return service_account_user(ns, name, uid), ""

    def _claims(self, token: str) -> dict | None:
        """The payload of a well-formed ES256 JWT signed by our key."""
        parts = token.split(".")
        if len(parts) != 3:
            return None
        try:
            header, claims, sig = orjson.loads(_unb64(parts[0])), orjson.loads(_unb64(parts[1])), _unb64(parts[2])
        except (ValueError, orjson.JSONDecodeError):
            return None
        if not isinstance(header, dict) or header.get("alg") != "ES256" or len(sig) != 64 or not isinstance(claims, dict):
            return None
        der = encode_dss_signature(int.from_bytes(sig[:32], "big"), int.from_bytes(sig[32:], "big"))
        try:
            self.public.verify(der, f"{parts[0]}.{parts[1]}".encode(), ec.ECDSA(hashes.SHA256()))
        except InvalidSignature:
            return None
        return claims
