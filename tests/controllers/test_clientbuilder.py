"""--use-service-account-credentials' token source: the account is made when missing, an hour's
token asked of TokenRequest, kept until a fifth of its life is left, then renewed; the builder gives
one token client per name."""

from nanokube.clock import format_time
from nanokube.controllers.clientbuilder import ServiceAccountClients, ServiceAccountTokens
from nanokube.machinery.errors import APIError
from tests.node import ManualClock


class _Accounts:
    def __init__(self, clock):
        self.clock, self.made, self.requests = clock, [], []

    async def get(self, name, namespace):
        if (namespace, name) not in self.made:
            raise APIError(404, "NotFound", f'serviceaccounts "{name}" not found')
        return {}

    async def create(self, obj, namespace=None):
        md = obj["metadata"]
        if "namespace" in md:
            self.made.append((md["namespace"], md["name"]))
        else:
            raise APIError(409, "AlreadyExists", f'namespaces "{md["name"]}" already exists')
        return obj

    async def create_subresource(self, name, subresource, body, namespace=None):
        self.requests.append((namespace, name, subresource, body["spec"]["expirationSeconds"]))
        return {"spec": body["spec"], "status": {"token": f"token-{len(self.requests)}",
                "expirationTimestamp": format_time(self.clock.now() + body["spec"]["expirationSeconds"])}}


class _Root:
    def __init__(self, clock):
        self.accounts = _Accounts(clock)
        self.named_clients = []

    def resource(self, group, version, plural):
        return self.accounts

    def with_token(self, name, tokens):
        self.named_clients.append(name)
        return (name, tokens)


async def test_token_is_made_kept_and_renewed_with_a_fifth_left():
    clock = ManualClock()
    root = _Root(clock)
    tokens = ServiceAccountTokens(root, "replicaset-controller", clock)
    assert await tokens() == "token-1"
    assert root.accounts.made == [("kube-system", "replicaset-controller")]
    clock.t += 2879
    assert await tokens() == "token-1"
    clock.t += 2
    assert await tokens() == "token-2"
    assert root.accounts.requests == [("kube-system", "replicaset-controller", "token", 3600)] * 2
    assert root.accounts.made == [("kube-system", "replicaset-controller")]


def test_one_token_client_per_name():
    root = _Root(ManualClock())
    builder = ServiceAccountClients(root)
    assert builder.named("node-controller") is builder.named("node-controller")
    builder.named("job-controller")
    assert root.named_clients == ["node-controller", "job-controller"]
