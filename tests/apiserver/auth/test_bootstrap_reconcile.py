"""The default RBAC policy across a restart on the same store: what a user changed is kept or
repaired as kube-apiserver's bootstrap reconcile keeps or repairs it."""

import aiohttp
import pytest

from nanokube.apiserver.app import APIServer
from nanokube.pki.ca import ensure_pki
from nanokube.store.sqlite import SQLiteStore
from tests.apiserver.test_request_body import admin_context

RBAC = "/apis/rbac.authorization.k8s.io/v1"
LEASES = {"verbs": ["get", "update"], "apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
          "resourceNames": ["kube-scheduler"]}
MINE = {"verbs": ["get", "update"], "apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
        "resourceNames": ["my-scheduler"]}
SA = {"kind": "ServiceAccount", "name": "my-scheduler", "namespace": "kube-system"}
ADMIN = {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "dns-admin"}


class Server:
    def __init__(self, tmp_path):
        self.tmp_path = tmp_path
        self.pki = ensure_pki(str(tmp_path))
        self.ctx = admin_context(self.pki, tmp_path)

    async def __aenter__(self):
        self.server = APIServer(SQLiteStore(str(self.tmp_path / "state.db")), self.pki, port=0)
        await self.server.start()
        self.http = aiohttp.ClientSession(f"https://127.0.0.1:{self.server.port}",
                                          connector=aiohttp.TCPConnector(ssl=self.ctx))
        return self

    async def __aexit__(self, *exc):
        await self.http.close()
        await self.server.stop()

    async def call(self, method: str, path: str, body: dict | None = None) -> dict:
        async with self.http.request(method, path, json=body) as r:
            got = await r.json()
            assert r.status < 300, got
            return got


async def versions(s: Server) -> dict[str, str]:
    """The resourceVersion of every RBAC object, by plural/[namespace/]name."""
    out = {}
    for plural in ("clusterroles", "clusterrolebindings", "roles", "rolebindings"):
        for o in (await s.call("GET", f"{RBAC}/{plural}"))["items"]:
            md = o["metadata"]
            out["/".join(filter(None, (plural, md.get("namespace"), md["name"])))] = md["resourceVersion"]
    return out


@pytest.fixture
def server(tmp_path):
    return Server(tmp_path)


async def test_a_restart_restores_default_rules_and_subjects_and_keeps_the_users(server):
    async with server as s:
        role = await s.call("GET", f"{RBAC}/clusterroles/system:kube-scheduler")
        assert LEASES in role["rules"]
        assert role["metadata"]["annotations"]["rbac.authorization.kubernetes.io/autoupdate"] == "true"
        # the "Configure Multiple Schedulers" edit, plus a default rule taken away
        role["rules"] = [r for r in role["rules"] if r != LEASES] + [MINE]
        await s.call("PUT", f"{RBAC}/clusterroles/system:kube-scheduler", role)
        binding = await s.call("GET", f"{RBAC}/clusterrolebindings/system:kube-scheduler")
        binding["subjects"] = [SA]
        await s.call("PUT", f"{RBAC}/clusterrolebindings/system:kube-scheduler", binding)
        frozen = await s.call("GET", f"{RBAC}/clusterroles/system:volume-scheduler")
        frozen["metadata"]["annotations"]["rbac.authorization.kubernetes.io/autoupdate"] = "false"
        frozen["rules"] = frozen["rules"][:1]
        frozen = await s.call("PUT", f"{RBAC}/clusterroles/system:volume-scheduler", frozen)
        untouched = await versions(s)
        await s.call("DELETE", f"{RBAC}/clusterroles/system:kube-dns")
        # a binding made again to another role (a roleRef cannot change in place)
        await s.call("DELETE", f"{RBAC}/clusterrolebindings/system:kube-dns")
        await s.call("POST", f"{RBAC}/clusterrolebindings", {
            "metadata": {"name": "system:kube-dns"}, "subjects": [ADMIN],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"}})
    async with server as s:
        role = await s.call("GET", f"{RBAC}/clusterroles/system:kube-scheduler")
        # the user's rule stays; what was taken away comes back broken down, a rule per verb
        assert role["rules"][-3:] == [MINE, {**LEASES, "verbs": ["get"]}, {**LEASES, "verbs": ["update"]}]
        binding = await s.call("GET", f"{RBAC}/clusterrolebindings/system:kube-scheduler")
        assert binding["subjects"] == [SA, {"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                                            "name": "system:kube-scheduler"}]
        assert await s.call("GET", f"{RBAC}/clusterroles/system:volume-scheduler") == frozen
        # the defaults left as they were are not written again
        edited = {"clusterroles/system:kube-scheduler", "clusterrolebindings/system:kube-scheduler",
                  "clusterroles/system:kube-dns", "clusterrolebindings/system:kube-dns"}
        now = await versions(s)
        assert {k: v for k, v in now.items() if k not in edited} == {k: v for k, v in untouched.items() if k not in edited}
        assert (await s.call("GET", f"{RBAC}/clusterroles/system:kube-dns"))["rules"]
        dns = await s.call("GET", f"{RBAC}/clusterrolebindings/system:kube-dns")
        assert dns["roleRef"]["name"] == "system:kube-dns"
        assert dns["subjects"] == [ADMIN, {"kind": "ServiceAccount", "name": "kube-dns", "namespace": "kube-system"}]
        assert dns["metadata"]["labels"] == {"kubernetes.io/bootstrapping": "rbac-defaults"}


async def test_a_restart_takes_the_system_nodes_group_out_of_an_earlier_system_node_binding(server):
    """An earlier nanokube's system:node binding named the whole system:nodes group, which would grant
    every node what the Node authorizer refuses it: reconcile takes that subject out, keeps the user's."""
    group = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:nodes"}
    async with server as s:
        binding = await s.call("GET", f"{RBAC}/clusterrolebindings/system:node")
        assert "subjects" not in binding
        binding["subjects"] = [group, ADMIN]
        await s.call("PUT", f"{RBAC}/clusterrolebindings/system:node", binding)
    async with server as s:
        assert (await s.call("GET", f"{RBAC}/clusterrolebindings/system:node"))["subjects"] == [ADMIN]
        frozen = await s.call("GET", f"{RBAC}/clusterrolebindings/system:node")
        frozen["subjects"] = [group]
        frozen["metadata"]["annotations"]["rbac.authorization.kubernetes.io/autoupdate"] = "false"
        frozen = await s.call("PUT", f"{RBAC}/clusterrolebindings/system:node", frozen)
    async with server as s:
        assert await s.call("GET", f"{RBAC}/clusterrolebindings/system:node") == frozen  # the admin's to keep
