"""The console's static page as the API server serves it at /ui/: the package's files as they
are (no secret, nothing filled in per request), their content types and caching headers, 404 for
any other name, and who may read them: system:anonymous too, through RBAC (the bootstrap
`nanokube:console` binding) and APF, while the API itself stays closed to a request without
credentials and open to a token only as far as the token's RBAC goes."""

from __future__ import annotations

import asyncio
import json
import ssl
import urllib.error
import urllib.request

from kubernetes import client

from nanokube.apiserver.app import APIServer
from nanokube.apiserver.audit_policy import load
from nanokube.pki.ca import ensure_pki
from nanokube.store.memory import MemoryStore
from nanokube.store.sqlite import SQLiteStore
from nanokube.ui.serving import STATIC
from tests.served import send, served


def _get(server, path: str, headers: dict | None = None) -> tuple[int, dict, bytes]:
    """A request as a browser sends it: no client certificate, no Authorization unless given."""
    ctx = ssl.create_default_context(cadata=server.pki.ca.cert_pem.decode())
    req = urllib.request.Request(server.url + path, headers=headers or {})
    opener = urllib.request.build_opener(urllib.request.HTTPSHandler(context=ctx), _NoRedirect)
    try:
        with opener.open(req, timeout=10) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


async def get(server, path: str, headers: dict | None = None) -> tuple[int, dict, bytes]:
    return await asyncio.to_thread(_get, server, path, headers)


async def test_files_are_served_as_shipped_with_their_types_and_caching(tmp_path):
    async with served(tmp_path) as (server, _):
        for path, name, ctype in [("/ui/", "index.html", "text/html; charset=utf-8"),
                                  ("/ui/index.html", "index.html", "text/html; charset=utf-8"),
                                  ("/ui/console.js", "console.js", "text/javascript; charset=utf-8"),
                                  ("/ui/console.css", "console.css", "text/css; charset=utf-8")]:
            code, headers, body = await get(server, path)
            assert (code, headers["Content-Type"], body) == (200, ctype, (STATIC / name).read_bytes()), path
            assert headers["Cache-Control"] == "no-cache" and headers["X-Content-Type-Options"] == "nosniff"
            assert "default-src 'self'" in headers["Content-Security-Policy"]
            again = await get(server, path, {"If-None-Match": headers["ETag"]})
            assert (again[0], again[1]["ETag"], again[2]) == (304, headers["ETag"], b"")


async def test_the_page_names_no_secret_and_no_other_server(tmp_path):
    async with served(tmp_path) as (server, _):
        page = b"".join([(await get(server, f"/ui/{name}"))[2] for name in ("", "console.js", "console.css")])
        assert b"PRIVATE KEY" not in page and server.pki.ca.cert_pem not in page
        assert b"http://" not in page and b"https://" not in page  # no CDN: the machine may have no network


async def test_bare_path_redirects_and_unknown_names_are_404(tmp_path):
    async with served(tmp_path) as (server, _):
        code, headers, _ = await get(server, "/ui")
        assert (code, headers["Location"]) == (301, "/ui/")
        for path in ("/ui/nope.js", "/ui/static/console.js", "/ui/..%2fserving.py", "/ui/serving.py"):
            code, headers, body = await get(server, path)
            assert (code, headers["Content-Type"], body) == (404, "text/plain; charset=utf-8", b"404 page not found\n"), path


async def test_anonymous_reads_the_page_through_rbac_but_not_the_api(tmp_path):
    async with served(tmp_path) as (server, api):
        assert (await get(server, "/ui/"))[0] == 200
        code, _, body = await get(server, "/api/v1/pods")
        assert code == 403 and b'User \\"system:anonymous\\" cannot list resource \\"pods\\"' in body
        rbac = client.RbacAuthorizationV1Api(api)
        await asyncio.to_thread(rbac.delete_cluster_role_binding, "nanokube:console")
        for _ in range(100):  # the authorizer reads the binding from the watch cache
            code, _, body = await get(server, "/ui/console.js")
            if code == 403:
                break
            await asyncio.sleep(0.05)
        assert code == 403 and b'User \\"system:anonymous\\" cannot get path \\"/ui/console.js\\"' in body


async def test_a_token_reads_the_page_and_only_what_its_rbac_allows(tmp_path):
    async with served(tmp_path) as (server, api):
        core = client.CoreV1Api(api)
        await asyncio.to_thread(core.create_namespaced_service_account, "default", {"metadata": {"name": "console"}})
        token = (await asyncio.to_thread(core.create_namespaced_service_account_token, "console", "default",
                                         {"spec": {}})).status.token
        bearer = {"Authorization": f"Bearer {token}"}
        assert (await get(server, "/ui/", bearer))[0] == 200
        assert (await get(server, "/api/v1/nodes", bearer))[0] == 403
        assert (await get(server, "/ui/", {"Authorization": f"Bearer {token[:-4]}xxxx"}))[0] == 401


async def test_listed_at_the_root_but_not_in_openapi_and_under_apf(tmp_path):
    async with served(tmp_path) as (server, api):
        assert "/ui/" in (await send(api, "GET", "/"))[1]["paths"]
        code, doc = await send(api, "GET", "/openapi/v2")
        assert code == 200 and not [p for p in doc["paths"] if p.startswith("/ui")]
        await get(server, "/ui/")
        text = server.metrics_text().decode()
        assert any(line.startswith("apiserver_flowcontrol_dispatched_requests_total{") and 'flow_schema="global-default"'
                   in line for line in text.splitlines()), "the anonymous page load went through APF"


async def test_an_anonymous_page_load_is_audited_with_rbacs_decision(tmp_path):
    (tmp_path / "policy.yaml").write_text("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: Metadata}]\n")
    log = tmp_path / "audit.log"
    server = APIServer(MemoryStore(), ensure_pki(str(tmp_path)), port=0, audit_log_path=str(log),
                       audit_policy=load(tmp_path / "policy.yaml"))
    await server.start()
    try:
        assert (await get(server, "/ui/console.css"))[0] == 200
    finally:
        await server.stop()
    (event,) = [e for line in log.read_text().splitlines() if (e := json.loads(line))["requestURI"] == "/ui/console.css"
                and e["stage"] == "ResponseComplete"]
    assert (event["verb"], event["user"], event["responseStatus"]["code"]) == (
        "get", {"username": "system:anonymous", "groups": ["system:unauthenticated"]}, 200)
    assert event["annotations"]["authorization.k8s.io/decision"] == "allow"
    assert 'ClusterRoleBinding "nanokube:console"' in event["annotations"]["authorization.k8s.io/reason"]


async def test_a_console_closed_as_a_bootstrap_binding_is_closed_stays_so_after_a_restart(tmp_path):
    """Every start reconciles the bootstrap RBAC as kube-apiserver's post-start hook does: a deleted
    `nanokube:console` binding is made again, while one annotated autoupdate "false" is kept as it is,
    so the console stays closed to system:anonymous with that group left out of its subjects."""
    db = str(tmp_path / "db.sqlite")
    async with served(tmp_path, store=SQLiteStore(db)) as (_, api):
        await asyncio.to_thread(client.RbacAuthorizationV1Api(api).delete_cluster_role_binding, "nanokube:console")
    async with served(tmp_path, store=SQLiteStore(db)) as (server, api):
        assert (await get(server, "/ui/"))[0] == 200
        rbac = client.RbacAuthorizationV1Api(api)
        binding = await asyncio.to_thread(rbac.read_cluster_role_binding, "nanokube:console")
        binding.metadata.annotations["rbac.authorization.kubernetes.io/autoupdate"] = "false"
        binding.subjects = [s for s in binding.subjects if s.name != "system:unauthenticated"]
        await asyncio.to_thread(rbac.replace_cluster_role_binding, "nanokube:console", binding)
    async with served(tmp_path, store=SQLiteStore(db)) as (server, api):
        code, _, body = await get(server, "/ui/")
        assert code == 403 and b'User \\"system:anonymous\\" cannot get path \\"/ui/\\"' in body
        binding = await asyncio.to_thread(client.RbacAuthorizationV1Api(api).read_cluster_role_binding, "nanokube:console")
        assert [s.name for s in binding.subjects] == ["system:authenticated"]
