"""Impersonation headers: what is checked, who the request runs as."""

import asyncio

import aiohttp
import pytest
from multidict import CIMultiDict

from nanokube.apiserver.app import APIServer
from nanokube.apiserver.auth.authorizer import Decision
from nanokube.apiserver.auth.impersonation import impersonate as impersonate_async
from nanokube.machinery.errors import APIError
from nanokube.machinery.user import User
from nanokube.pki.ca import ensure_pki
from nanokube.store.memory import MemoryStore
from tests.apiserver.test_request_body import admin_context

BOB = User("bob", ("devs", "system:authenticated"))


def allow_all(checked):
    async def authorize(user, a):
        checked.append((a.verb, a.group, a.resource, a.subresource, a.namespace, a.name))
        return Decision(True)
    return authorize


async def deny_all(user, a):
    return Decision(False)


def impersonate(headers, requester, authorize):
    return asyncio.run(impersonate_async(headers, requester, authorize))


def headers(*pairs):
    return CIMultiDict(pairs)


def test_no_headers_keeps_the_requester():
    assert impersonate(headers(), BOB, allow_all([])) is BOB


def test_user_groups_extra_uid():
    checked = []
    u = impersonate(headers(("Impersonate-User", "alice"), ("Impersonate-Group", "ops"), ("Impersonate-Uid", "u1"),
                            ("Impersonate-Extra-Acme.com%2fScopes", "read")), BOB, allow_all(checked))
    assert (u.name, u.groups, u.uid, u.extra) == ("alice", ("ops", "system:authenticated"), "u1", {"acme.com/scopes": ["read"]})
    assert checked == [("impersonate", "", "users", "", "", "alice"), ("impersonate", "", "groups", "", "", "ops"),
                       ("impersonate", "authentication.k8s.io", "userextras", "acme.com/scopes", "", "read"),
                       ("impersonate", "authentication.k8s.io", "uids", "", "", "u1")]


def test_service_account_gets_its_groups():
    checked = []
    u = impersonate(headers(("Impersonate-User", "system:serviceaccount:ns1:builder")), BOB, allow_all(checked))
    assert u.groups == ("system:serviceaccounts", "system:serviceaccounts:ns1", "system:authenticated")
    assert checked == [("impersonate", "", "serviceaccounts", "", "ns1", "builder")]


def test_forbidden_and_groups_without_a_user():
    with pytest.raises(APIError) as e:
        impersonate(headers(("Impersonate-User", "alice")), BOB, deny_all)
    assert (e.value.code, e.value.message) == (403, 'users "alice" is forbidden: User "bob" cannot impersonate '
                                                    'resource "users" in API group "" at the cluster scope')
    with pytest.raises(APIError) as e:
        impersonate(headers(("Impersonate-Group", "ops")), BOB, allow_all([]))
    assert e.value.code == 400 and "without impersonating a user" in e.value.message


async def test_groups_uid_or_extra_without_a_user_is_a_bad_request_over_http(tmp_path):
    """Impersonate-Group/-Uid/-Extra-* without Impersonate-User is the client's mistake: a 400
    BadRequest Status with the filter's words, not a 500."""
    pki = ensure_pki(str(tmp_path))
    s = APIServer(MemoryStore(), pki, port=0)
    await s.start()
    ctx = admin_context(pki, tmp_path)
    try:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx)) as admin:
            for header, requested in (
                    ({"Impersonate-Group": "ops"}, "{Group  ops    }"),
                    ({"Impersonate-Uid": "u1"}, "{UID  u1  authentication.k8s.io/v1  }"),
                    ({"Impersonate-Extra-Scopes": "read"}, "{UserExtra  read  authentication.k8s.io/v1  scopes}"),
                    ({"Impersonate-Group": "ops", "Impersonate-Uid": "u1"},
                     "{Group  ops    } {UID  u1  authentication.k8s.io/v1  }")):
                async with admin.get(f"https://localhost:{s.port}/api/v1/namespaces", headers=header) as r:
                    body = await r.json()
                    assert r.status == 400, header
                    assert body["reason"] == "BadRequest" and body["code"] == 400
                    assert body["message"] == f"requested [{requested}] without impersonating a user"
    finally:
        await s.stop()


async def test_a_username_that_is_no_service_accounts_is_a_plain_user(tmp_path):
    """Only `system:serviceaccount:<namespace>:<name>` with a valid namespace and name impersonates a
    ServiceAccount (serviceaccount.SplitUsername): a third part or an invalid namespace made it one, with
    the ServiceAccount groups and only `impersonate serviceaccounts` checked."""
    pki = ensure_pki(str(tmp_path))
    s = APIServer(MemoryStore(), pki, port=0)
    await s.start()
    ctx = admin_context(pki, tmp_path)
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    try:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx)) as admin:
            for name, groups in (("system:serviceaccount:a:b", ["system:serviceaccounts", "system:serviceaccounts:a",
                                                               "system:authenticated"]),
                                 ("system:serviceaccount:a:b:c", ["system:authenticated"]),
                                 ("system:serviceaccount:A_B:x", ["system:authenticated"]),
                                 ("system:serviceaccount:a:B", ["system:authenticated"]),
                                 ("system:serviceaccount::b", ["system:authenticated"])):
                async with admin.post(f"https://localhost:{s.port}/apis/authentication.k8s.io/v1/selfsubjectreviews",
                                      json=review, headers={"Impersonate-User": name}) as r:
                    info = (await r.json())["status"]["userInfo"]
                    assert (r.status, info["username"], info["groups"]) == (201, name, groups)
    finally:
        await s.stop()
