"""Bound ServiceAccount tokens: TokenRequest defaults and validation, the
claims issued, and every reason the verifier refuses a token."""

from __future__ import annotations

import base64

import orjson
import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from nanokube.machinery import errors
from nanokube.apiserver.auth.serviceaccount import API_AUDIENCE, ServiceAccountTokens, load_or_create_key
from nanokube.clock import Clock

T0 = 1_900_000_000.0


class FakeClock(Clock):
    def __init__(self) -> None:
        self.t = T0

    def now(self) -> float:
        return self.t


def _obj(name: str, uid: str, **spec) -> dict:
    return {"metadata": {"name": name, "namespace": "ns", "uid": uid}, "spec": spec}


@pytest.fixture
def world():
    return {("serviceaccounts", "ns", "robot"): _obj("robot", "sa-1"),
            ("pods", "ns", "web"): _obj("web", "pod-1", serviceAccountName="robot"),
            ("pods", "ns", "other"): _obj("other", "pod-2")}


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def tokens(world, clock):
    return ServiceAccountTokens(ec.generate_private_key(ec.SECP256R1()), lambda p, ns, n: world.get((p, ns, n)), clock)


def _claims(token: str) -> dict:
    part = token.split(".")[1]
    return orjson.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))


def test_key_is_created_once_and_reloaded(tmp_path):
    a = load_or_create_key(str(tmp_path / "pki"))
    b = load_or_create_key(str(tmp_path / "pki"))
    assert a.private_numbers() == b.private_numbers()
    assert (tmp_path / "pki" / "sa.key").stat().st_mode & 0o777 == 0o600


def test_token_request_defaults_and_claims(tokens):
    tr = tokens.token_request("ns", "robot", {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest"})
    assert tr["spec"] == {"audiences": [API_AUDIENCE], "expirationSeconds": 3600, "boundObjectRef": None}
    assert tr["status"]["expirationTimestamp"] == "2030-03-17T18:46:40Z"
    claims = _claims(tr["status"]["token"])
    assert claims["sub"] == "system:serviceaccount:ns:robot"
    assert claims["aud"] == [API_AUDIENCE] and claims["iss"] == API_AUDIENCE
    assert (claims["iat"], claims["nbf"], claims["exp"]) == (T0, T0, T0 + 3600)
    assert claims["kubernetes.io"] == {"namespace": "ns", "serviceaccount": {"name": "robot", "uid": "sa-1"}}


def test_token_authenticates_as_the_service_account(tokens):
    token = tokens.token_request("ns", "robot", {})["status"]["token"]
    user = tokens.authenticate(token)
    assert user.name == "system:serviceaccount:ns:robot"
    assert user.groups == ("system:serviceaccounts", "system:serviceaccounts:ns", "system:authenticated")
    assert user.uid == "sa-1"


@pytest.mark.parametrize("seconds, message", [
    (599, 'TokenRequest.authentication.k8s.io "robot" is invalid: spec.expirationSeconds: Invalid value: 599: '
          "may not specify a duration less than 10 minutes"),
    (2**32, "may not specify a duration larger than 2^32 seconds"),
])
def test_expiration_bounds(tokens, seconds, message):
    with pytest.raises(errors.APIError) as e:
        tokens.token_request("ns", "robot", {"spec": {"expirationSeconds": seconds}})
    assert e.value.code == 422 and message in e.value.message


def test_missing_service_account_is_not_found(tokens):
    with pytest.raises(errors.APIError) as e:
        tokens.token_request("ns", "ghost", {})
    assert (e.value.code, e.value.message) == (404, 'serviceaccounts "ghost" not found')


def test_bound_pod_claims_and_revocation(tokens, world, clock):
    ref = {"apiVersion": "v1", "kind": "Pod", "name": "web"}
    token = tokens.token_request("ns", "robot", {"spec": {"boundObjectRef": ref}})["status"]["token"]
    assert _claims(token)["kubernetes.io"]["pod"] == {"name": "web", "uid": "pod-1"}
    user = tokens.authenticate(token)
    assert user.extra["authentication.kubernetes.io/pod-uid"] == ["pod-1"]
    world[("pods", "ns", "web")]["metadata"]["deletionTimestamp"] = "2030-03-17T17:46:40Z"
    assert tokens.authenticate(token) is not None
    clock.t += 61
    assert tokens.authenticate(token) is None
    world[("pods", "ns", "web")] = _obj("web", "pod-9", serviceAccountName="robot")
    assert tokens.authenticate(token) is None
    del world[("pods", "ns", "web")]
    assert tokens.authenticate(token) is None


@pytest.mark.parametrize("ref, code, message", [
    ({"apiVersion": "v1", "kind": "Pod", "name": "other"}, 400,
     'cannot bind token for serviceaccount "robot" to pod running with different serviceaccount name.'),
    ({"apiVersion": "v1", "kind": "Pod", "name": "web", "uid": "stale"}, 409,
     'Operation cannot be fulfilled on Pod "web": the UID in the bound object reference (stale) does not match'),
    ({"apiVersion": "v1", "kind": "Pod", "name": "gone"}, 404, 'pods "gone" not found'),
    ({"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, 400,
     "cannot bind token to object of type apps/v1, Kind=Deployment"),
])
def test_bad_bound_object_refs(tokens, ref, code, message):
    with pytest.raises(errors.APIError) as e:
        tokens.token_request("ns", "robot", {"spec": {"boundObjectRef": ref}})
    assert e.value.code == code and e.value.message.startswith(message)


def test_expiry_with_leeway(tokens, clock):
    token = tokens.token_request("ns", "robot", {"spec": {"expirationSeconds": 600}})["status"]["token"]
    clock.t += 600 + 59
    assert tokens.authenticate(token) is not None
    clock.t += 2
    assert tokens.authenticate(token) is None
    assert tokens.review(token) == (None, [], "service account token has expired")  # the validator's words


def test_not_yet_valid_token_is_refused(tokens, clock):
    token = tokens.token_request("ns", "robot", {})["status"]["token"]
    clock.t -= 120
    assert tokens.authenticate(token) is None


def test_other_audience_is_refused(tokens):
    token = tokens.token_request("ns", "robot", {"spec": {"audiences": ["vault"]}})["status"]["token"]
    assert _claims(token)["aud"] == ["vault"]
    assert tokens.authenticate(token) is None


def test_recreated_or_deleted_service_account_revokes(tokens, world):
    token = tokens.token_request("ns", "robot", {})["status"]["token"]
    world[("serviceaccounts", "ns", "robot")] = _obj("robot", "sa-2")
    assert tokens.authenticate(token) is None
    del world[("serviceaccounts", "ns", "robot")]
    assert tokens.authenticate(token) is None


def test_tampered_and_foreign_tokens_are_refused(tokens, world, clock):
    token = tokens.token_request("ns", "robot", {})["status"]["token"]
    header, payload, sig = token.split(".")
    claims = _claims(token)
    claims["sub"] = "system:serviceaccount:kube-system:admin"
    forged = base64.urlsafe_b64encode(orjson.dumps(claims)).rstrip(b"=").decode()
    assert tokens.authenticate(f"{header}.{forged}.{sig}") is None
    other = ServiceAccountTokens(ec.generate_private_key(ec.SECP256R1()), lambda p, ns, n: world.get((p, ns, n)), clock)
    assert tokens.authenticate(other.token_request("ns", "robot", {})["status"]["token"]) is None
    for junk in ("", "a.b", "a.b.c", f"{header}.{payload}.", "x" * 40):
        assert tokens.authenticate(junk) is None


async def test_issuer_discovery_serves_the_keys_that_verify_tokens(tmp_path):
    """ServiceAccountIssuerDiscovery over HTTP: the OIDC discovery document and the JWK set, which
    service accounts may read (system:service-account-issuer-discovery) and anonymous may not; a
    token's signature verifies with the served key its kid names."""
    import asyncio
    import json
    import ssl
    import urllib.error
    import urllib.request

    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
    from kubernetes import client

    from tests.served import served

    async with served(tmp_path) as (server, api_client):
        core = client.CoreV1Api(api_client)
        await asyncio.to_thread(core.create_namespaced_service_account, "default", {"metadata": {"name": "reader"}})
        token = (await asyncio.to_thread(core.create_namespaced_service_account_token, "reader", "default",
                                         {"spec": {}})).status.token
        ctx = ssl.create_default_context(cadata=server.pki.ca.cert_pem.decode())

        def get(path: str, bearer: str | None):
            request = urllib.request.Request(server.url + path,
                                             headers={"Authorization": f"Bearer {bearer}"} if bearer else {})
            try:
                with urllib.request.urlopen(request, context=ctx, timeout=10) as r:
                    return r.status, dict(r.headers), r.read()
            except urllib.error.HTTPError as e:
                return e.code, dict(e.headers), e.read()

        code, headers, body = await asyncio.to_thread(get, "/.well-known/openid-configuration", token)
        assert (code, headers["Content-Type"], headers["Cache-Control"]) == (200, "application/json", "public, max-age=3600")
        assert json.loads(body) == {
            "issuer": API_AUDIENCE, "jwks_uri": f"https://127.0.0.1:{server.port}/openid/v1/jwks",
            "response_types_supported": ["id_token"], "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["ES256"]}
        code, headers, body = await asyncio.to_thread(get, "/openid/v1/jwks/", token)
        assert (code, headers["Content-Type"]) == (200, "application/jwk-set+json")
        [key] = json.loads(body)["keys"]
        assert {k: key[k] for k in ("use", "kty", "crv", "alg")} == {"use": "sig", "kty": "EC", "crv": "P-256", "alg": "ES256"}
        head, claims, sig = token.split(".")
        assert orjson.loads(_unb64(head))["kid"] == key["kid"]
        public = ec.EllipticCurvePublicNumbers(int.from_bytes(_unb64(key["x"]), "big"), int.from_bytes(_unb64(key["y"]), "big"),
                                               ec.SECP256R1()).public_key()
        raw = _unb64(sig)
        public.verify(encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big")),
                      f"{head}.{claims}".encode(), ec.ECDSA(hashes.SHA256()))
        code, _, body = await asyncio.to_thread(get, "/openid/v1/jwks", None)
        assert code == 403 and json.loads(body)["message"] == \
            'forbidden: User "system:anonymous" cannot get path "/openid/v1/jwks"'


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def test_a_secret_based_legacy_token_is_valid_while_its_secret_holds_it(world, tokens):
    """The token controller's tokens (issuer kubernetes/serviceaccount, no expiry, no audience): valid
    for the server's audiences while the Secret holds that very token and the account keeps its uid."""
    from nanokube.controllers.serviceaccount_token import legacy_claims
    from nanokube.pki.jwt import sign

    secret = {"metadata": {"name": "robot-token", "namespace": "ns"}}
    token = sign(tokens.key, legacy_claims(world[("serviceaccounts", "ns", "robot")], secret))
    secret["data"] = {"token": base64.b64encode(token.encode()).decode()}
    world[("secrets", "ns", "robot-token")] = secret
    used = []
    tokens.legacy_used = lambda *a: used.append(a)
    user = tokens.authenticate(token)
    assert (user.name, user.uid, user.extra) == ("system:serviceaccount:ns:robot", "sa-1", {})
    assert used == [("ns", "robot-token", "2030-03-17")]  # the day of T0, UTC
    secret["metadata"]["labels"] = {"kubernetes.io/legacy-token-last-used": "2030-03-17"}
    tokens.authenticate(token)
    assert len(used) == 1  # labelled today already
    secret["metadata"]["labels"] = {"kubernetes.io/legacy-token-last-used": "2030-03-18"}
    tokens.authenticate(token)
    assert len(used) == 1  # nor relabelled back from tomorrow (another server's clock ahead), as upstream
    assert tokens.review(token) == (user, [API_AUDIENCE], "")
    assert tokens.review(token, ["vault"]) == (  # the audiences the legacy token implies are the server's
        None, [], f'token audiences ["{API_AUDIENCE}"] is invalid for the target audiences ["vault"]')
    secret["data"] = {"token": base64.b64encode(b"another").decode()}  # the Secret was given a new token
    assert tokens.review(token) == (None, [], "Token does not match server's copy")  # legacy.go's words
    secret["data"] = {"token": base64.b64encode(token.encode()).decode()}
    world[("serviceaccounts", "ns", "robot")] = _obj("robot", "sa-2")  # recreated: another uid
    assert tokens.review(token) == (None, [], "ServiceAccount UID (sa-2) does not match claim (sa-1)")
    del world[("serviceaccounts", "ns", "robot")]
    assert tokens.review(token) == (None, [], 'serviceaccounts "robot" not found')
    del world[("secrets", "ns", "robot-token")]
    assert tokens.review(token) == (None, [], "Token has been invalidated")


def test_tokens_bound_to_a_secret_or_a_node_and_a_pods_node(tokens, world, clock):
    """TokenRequest binds to a Secret or a Node too (revoked with it); a pod's token names the node it
    runs on, for information (the node-name/uid extra), not as a binding."""
    world[("secrets", "ns", "creds")] = _obj("creds", "secret-1")
    world[("nodes", "", "n1")] = _obj("n1", "node-1")
    world[("pods", "ns", "placed")] = _obj("placed", "pod-3", serviceAccountName="robot", nodeName="n1")

    def token(kind: str, name: str) -> str:
        ref = {"apiVersion": "v1", "kind": kind, "name": name}
        return tokens.token_request("ns", "robot", {"spec": {"boundObjectRef": ref}})["status"]["token"]

    by_secret, by_node, by_pod = token("Secret", "creds"), token("Node", "n1"), token("Pod", "placed")
    assert _claims(by_secret)["kubernetes.io"]["secret"] == {"name": "creds", "uid": "secret-1"}
    assert _claims(by_node)["kubernetes.io"]["node"] == {"name": "n1", "uid": "node-1"}
    assert {k: _claims(by_pod)["kubernetes.io"][k] for k in ("pod", "node")} == {
        "pod": {"name": "placed", "uid": "pod-3"}, "node": {"name": "n1", "uid": "node-1"}}
    assert tokens.authenticate(by_node).extra["authentication.kubernetes.io/node-uid"] == ["node-1"]
    assert tokens.authenticate(by_pod).extra["authentication.kubernetes.io/node-name"] == ["n1"]
    assert tokens.authenticate(by_secret) is not None
    del world[("secrets", "ns", "creds")]
    del world[("nodes", "", "n1")]
    assert tokens.authenticate(by_secret) is None and tokens.authenticate(by_node) is None
    assert tokens.authenticate(by_pod) is not None  # the node is not a binding of a pod's token
    with pytest.raises(errors.APIError) as e:
        token("Secret", "creds")
    assert (e.value.code, e.value.message) == (404, 'secrets "creds" not found')


def test_a_review_says_why_a_bound_token_is_refused(tokens, world, clock):
    """TokenReview's status.error for a token whose bindings are gone, in upstream's validator's words
    (claims.go): the ServiceAccount's lookup error or uid mismatch, a bound object's uid mismatch, and
    "invalidated" for a bound object gone or deleted beyond the grace."""
    world[("secrets", "ns", "creds")] = _obj("creds", "secret-1")
    world[("nodes", "", "n1")] = _obj("n1", "node-1")

    def token(kind: str, name: str) -> str:
        ref = {"apiVersion": "v1", "kind": kind, "name": name}
        return tokens.token_request("ns", "robot", {"spec": {"boundObjectRef": ref}})["status"]["token"]

    def why(tok: str) -> str:
        return tokens.review(tok)[2]

    by_pod, by_secret, by_node = token("Pod", "web"), token("Secret", "creds"), token("Node", "n1")
    world[("pods", "ns", "web")] = _obj("web", "pod-9", serviceAccountName="robot")
    assert why(by_pod) == "pod UID (pod-9) does not match service account pod ref claim (pod-1)"
    del world[("pods", "ns", "web")]
    assert why(by_pod) == "service account token has been invalidated"
    world[("secrets", "ns", "creds")] = _obj("creds", "secret-2")
    assert why(by_secret) == "secret UID (secret-2) does not match service account secret ref claim (secret-1)"
    world[("nodes", "", "n1")]["metadata"]["deletionTimestamp"] = "2030-03-17T17:46:40Z"
    assert tokens.authenticate(by_node) is not None  # within the grace
    clock.t += 61
    assert why(by_node) == "service account token has been invalidated"
    world[("serviceaccounts", "ns", "robot")] = _obj("robot", "sa-2")
    assert why(by_pod) == "service account UID (sa-2) does not match claim (sa-1)"
    world[("serviceaccounts", "ns", "robot")] = {"metadata": {**_obj("robot", "sa-1")["metadata"],
                                                              "deletionTimestamp": "2030-03-17T17:46:40Z"}}
    assert why(by_secret) == "service account ns/robot has been deleted"
    del world[("serviceaccounts", "ns", "robot")]
    assert why(by_pod) == 'serviceaccounts "robot" not found'


def test_operator_keys_rotate_and_issuers_accumulate(tokens):
    """--service-account-signing-key-file an RSA key, --service-account-key-file holding it and the
    EC key before it, two --service-account-issuer: tokens of the old key and issuer still verify,
    new ones are RS256 from the first issuer, and the key set publishes both keys by kid."""
    from cryptography.hazmat.primitives.asymmetric import rsa

    from nanokube.pki.jwt import key_id

    old = tokens.token_request("ns", "robot", {})["status"]["token"]
    rsa_key = rsa.generate_private_key(65537, 2048)
    tokens.configure(rsa_key, (rsa_key.public_key(), tokens.public), ("https://issuer.example", API_AUDIENCE),
                     ("https://issuer.example",))
    assert tokens.authenticate(old, (API_AUDIENCE,)).name == "system:serviceaccount:ns:robot"
    new = tokens.token_request("ns", "robot", {})["status"]["token"]
    header = orjson.loads(base64.urlsafe_b64decode(new.split(".")[0] + "=="))
    assert header == {"alg": "RS256", "kid": key_id(rsa_key.public_key())}
    assert _claims(new)["iss"] == "https://issuer.example" and _claims(new)["aud"] == ["https://issuer.example"]
    assert tokens.authenticate(new).name == "system:serviceaccount:ns:robot"
    assert [(k["kty"], k["alg"]) for k in tokens.jwks()["keys"]] == [("RSA", "RS256"), ("EC", "ES256")]
    assert tokens.openid_configuration("https://x/jwks")["id_token_signing_alg_values_supported"] == ["ES256", "RS256"]
    tokens.configure(rsa_key, (rsa_key.public_key(),), ("https://issuer.example",), ("https://issuer.example",))
    assert tokens.authenticate(old, (API_AUDIENCE,)) is None  # its key no longer verifies, nor its issuer
