"""Impersonation headers: what is checked, who the request runs as."""

import pytest
from multidict import CIMultiDict

from nanokube.apiserver.auth.authorizer import Decision
from nanokube.apiserver.auth.impersonation import impersonate
from nanokube.machinery.errors import APIError
from nanokube.machinery.user import User

BOB = User("bob", ("devs", "system:authenticated"))


def allow_all(checked):
    def authorize(name, groups, a):
        checked.append((a.verb, a.group, a.resource, a.subresource, a.namespace, a.name))
        return Decision(True)
    return authorize


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
        impersonate(headers(("Impersonate-User", "alice")), BOB, lambda *a: Decision(False))
    assert (e.value.code, e.value.message) == (403, 'users "alice" is forbidden: User "bob" cannot impersonate '
                                                    'resource "users" in API group "" at the cluster scope')
    with pytest.raises(APIError) as e:
        impersonate(headers(("Impersonate-Group", "ops")), BOB, allow_all([]))
    assert e.value.code == 500 and "without impersonating a user" in e.value.message
