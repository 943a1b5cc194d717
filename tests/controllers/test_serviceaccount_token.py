"""The token controller: Secrets of type kubernetes.io/service-account-token get their token,
ca.crt and namespace; those of an account that does not exist, or no longer does, are deleted."""

import base64

import orjson
import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from nanokube.controllers.serviceaccount_token import TokensController
from nanokube.machinery.errors import APIError
from tests.controllers import eventually, make_stack

CA = b"-----BEGIN CERTIFICATE-----\nfake\n-----END CERTIFICATE-----\n"


@pytest.fixture
async def env():
    s = await make_stack()
    ctl = TokensController(s.client, ec.generate_private_key(ec.SECP256R1()), CA)
    await ctl.start()
    yield s.client
    await ctl.stop()
    await s.close()


def _secret(name: str, account: str) -> dict:
    return {"metadata": {"name": name, "namespace": "default",
                         "annotations": {"kubernetes.io/service-account.name": account}},
            "type": "kubernetes.io/service-account-token"}


def _gone(secrets, name: str):
    async def check():
        try:
            await secrets.get(name, "default")
        except APIError as e:
            return e.code == 404
        return False
    return check


async def test_a_token_secret_is_filled_in_and_goes_with_its_account(env):
    accounts, secrets = env.resource("", "v1", "serviceaccounts"), env.resource("", "v1", "secrets")
    sa = await accounts.create({"metadata": {"name": "robot", "namespace": "default"}})
    await secrets.create(_secret("robot-token", "robot"))

    async def filled():
        got = await secrets.get("robot-token", "default")
        return got if (got.get("data") or {}).get("token") else None

    got = await eventually(filled)
    data = {k: base64.b64decode(v) for k, v in got["data"].items()}
    assert (data["ca.crt"], data["namespace"]) == (CA, b"default")
    assert got["metadata"]["annotations"]["kubernetes.io/service-account.uid"] == sa["metadata"]["uid"]
    header, claims, _ = data["token"].split(b".")
    assert orjson.loads(base64.urlsafe_b64decode(header + b"=="))["alg"] == "ES256"
    assert orjson.loads(base64.urlsafe_b64decode(claims + b"=" * (-len(claims) % 4))) == {
        "iss": "kubernetes/serviceaccount", "kubernetes.io/serviceaccount/namespace": "default",
        "kubernetes.io/serviceaccount/secret.name": "robot-token",
        "kubernetes.io/serviceaccount/service-account.name": "robot",
        "kubernetes.io/serviceaccount/service-account.uid": sa["metadata"]["uid"],
        "sub": "system:serviceaccount:default:robot"}
    await accounts.delete("robot", "default")
    assert await eventually(_gone(secrets, "robot-token"))


async def test_a_token_secret_for_no_account_is_deleted(env):
    secrets = env.resource("", "v1", "secrets")
    await secrets.create(_secret("orphan-token", "nobody"))
    assert await eventually(_gone(secrets, "orphan-token"))
