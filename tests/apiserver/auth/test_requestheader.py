from multidict import CIMultiDict

from nanokube.apiserver.auth.requestheader import is_front_proxy, user_from_headers

FRONT = {"issuer": ((("commonName", "front-proxy-ca"),),), "subject": ((("commonName", "front-proxy-client"),),)}
OTHER = {"issuer": ((("commonName", "front-proxy-ca"),),), "subject": ((("commonName", "kubernetes-admin"),),)}


def test_front_proxy_vouches_for_the_header_user():
    assert is_front_proxy(FRONT) and not is_front_proxy({"issuer": ((("commonName", "nanokube-ca"),),)})
    h = CIMultiDict([("X-Remote-User", "alice"), ("X-Remote-Group", "devs"), ("X-Remote-Group", "ops"),
                     ("X-Remote-Extra-Acme.com%2FProject", "a"), ("X-Remote-Extra-Acme.com%2FProject", "b"),
                     ("X-Remote-Uid", "u-1")])
    u = user_from_headers(FRONT, h)
    assert (u.name, u.groups, u.uid, u.extra) == ("alice", ("devs", "ops", "system:authenticated"), "u-1",
                                                  {"acme.com/project": ["a", "b"]})


def test_no_user_or_a_name_not_allowed():
    assert user_from_headers(FRONT, CIMultiDict([("X-Remote-Group", "devs")])) is None
    assert user_from_headers(OTHER, CIMultiDict([("X-Remote-User", "alice")])) is None


def test_a_connections_certificate_is_read_once_and_a_front_proxy_stays_one():
    from nanokube.apiserver.app import APIServer
    from nanokube.store.memory import MemoryStore

    server = APIServer(MemoryStore(), None, port=0)
    alice = {"subject": ((("commonName", "alice"),), (("organizationName", "devs"),)),
             "issuer": ((("commonName", "kubernetes-ca"),),)}
    proxy = {"subject": ((("commonName", "front-proxy-client"),),), "issuer": ((("commonName", "front-proxy-ca"),),)}
    front, user = server._cert_identity(alice)
    assert not front and user.name == "alice" and user.groups == ("devs", "system:authenticated")
    assert server._cert_identity(alice)[1] is user
    assert server._cert_identity({**alice, "subject": ((("commonName", "bob"),),)})[1].name == "bob"
    assert server._cert_identity(proxy)[0] and server._cert_identity(None) == (False, None)
