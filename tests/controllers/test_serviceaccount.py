"""The ServiceAccounts controller: a `default` ServiceAccount in every active namespace, made
again when deleted; none in a terminating namespace."""

import pytest

from nanokube.controllers.serviceaccount import ServiceAccountsController
from nanokube.machinery.errors import APIError
from tests.controllers import eventually, make_stack


@pytest.fixture
async def env():
    s = await make_stack()
    ctrl = ServiceAccountsController(s.client)
    await ctrl.start()
    yield s.client
    await ctrl.stop()
    await s.close()


def default_sa(sas, ns):
    async def present():
        try:
            return await sas.get("default", ns)
        except APIError:
            return None
    return present


async def test_default_service_account_in_every_namespace_and_made_again(env):
    namespaces = env.resource("", "v1", "namespaces")
    sas = env.resource("", "v1", "serviceaccounts")
    await namespaces.create({"metadata": {"name": "team"}})
    for ns in ("default", "team"):
        sa = await eventually(default_sa(sas, ns))
        assert sa["metadata"]["namespace"] == ns
    first = (await sas.get("default", "team"))["metadata"]["uid"]
    await sas.delete("default", "team")
    again = await eventually(default_sa(sas, "team"))
    assert again["metadata"]["uid"] != first
