import ssl

from multidict import CIMultiDict

from nanokube.apiserver.auth.requestheader import RequestHeader
from nanokube.pki.ca import ensure_front_proxy, ensure_pki, issue, new_ca

FRONT = {"subject": ((("commonName", "front-proxy-client"),),)}
OTHER = {"subject": ((("commonName", "kubernetes-admin"),),)}


def test_front_proxy_vouches_for_the_header_user():
    h = CIMultiDict([("X-Remote-User", "alice"), ("X-Remote-Group", "devs"), ("X-Remote-Group", "ops"),
                     ("X-Remote-Extra-Acme.com%2FProject", "a"), ("X-Remote-Extra-Acme.com%2FProject", "b"),
                     ("X-Remote-Uid", "u-1")])
    rh = RequestHeader()
    assert rh.allows(FRONT) and not rh.allows(OTHER)
    u = rh.user(h)
    assert (u.name, u.groups, u.uid, u.extra) == ("alice", ("devs", "ops", "system:authenticated"), "u-1",
                                                  {"acme.com/project": ["a", "b"]})
    assert rh.user(CIMultiDict([("X-Remote-Group", "devs")])) is None


def test_the_flags_name_the_headers_and_no_allowed_name_allows_any():
    rh = RequestHeader(allowed_names=(), username_headers=("X-Proxy-User", "X-Remote-User"),
                       group_headers=("X-Proxy-Group",), extra_prefixes=("X-Proxy-Extra-",), uid_headers=())
    assert rh.allows(OTHER)
    u = rh.user(CIMultiDict([("X-Remote-User", "bob"), ("X-Proxy-Group", "g"), ("X-Remote-Group", "ignored"),
                             ("X-Proxy-Extra-Scope", "s"), ("X-Remote-Uid", "ignored")]))
    assert (u.name, u.groups, u.uid, u.extra) == ("bob", ("g", "system:authenticated"), "", {"scope": ["s"]})


class _Transport:
    """A TLS transport's view of the client certificate chain it verified (leaf first, up to the
    CA of ours it ends in, DER, as Python 3.13's SSLObject gives it)."""

    def __init__(self, *pems: bytes) -> None:
        self.chain = [ssl.PEM_cert_to_DER_cert(p.decode()) for p in pems]

    def get_extra_info(self, name):
        return self if name == "ssl_object" else None

    def get_verified_chain(self):
        return self.chain


def test_a_connections_certificate_is_judged_by_its_issuer_once(tmp_path):
    from nanokube.apiserver.app import APIServer
    from nanokube.store.memory import MemoryStore

    pki = ensure_pki(str(tmp_path))
    server = APIServer(MemoryStore(), pki, port=0)
    front_ca = ensure_front_proxy(pki.dir)[0]
    alice_pem = issue(pki.ca, "alice", organizations=("devs",), client=True).cert_pem
    alice = {"subject": ((("commonName", "alice"),), (("organizationName", "devs"),))}
    front, user = server._cert_identity(alice, _Transport(alice_pem, pki.ca.cert_pem))
    assert front is None and user.name == "alice" and user.groups == ("devs", "system:authenticated")
    assert server._cert_identity(alice, None)[1] is user  # (the connection's, not judged again)
    proxy = issue(front_ca, "front-proxy-client", client=True).cert_pem
    assert server._cert_identity(FRONT, _Transport(proxy, front_ca.cert_pem)) == (server.requestheader, None)  # a front proxy is no user of its own
    stranger = issue(new_ca("other-ca"), "mallory", client=True).cert_pem  # (TLS would not have verified it)
    assert server._cert_identity({"subject": ((("commonName", "mallory"),),)}, _Transport(stranger)) == (None, None)
    assert server._cert_identity(None, None) == (None, None)


def test_a_front_proxy_ca_named_as_the_client_ca_makes_no_users(tmp_path):
    """An operator's client CA and request-header CA may share a subject (both `kubernetes`): the
    handshake verified the certificate against both, so the CA its verified chain ends in, not its
    issuer's name, says which set it is of. A certificate of the front-proxy CA is no user (system:masters least of all),
    as upstream's x509 authenticator verifies against the client CAs alone; the client CA's are."""
    from nanokube.apiserver.app import APIServer
    from nanokube.apiserver.serving_tls import ServingTLS
    from nanokube.store.memory import MemoryStore

    pki = ensure_pki(str(tmp_path))
    server = APIServer(MemoryStore(), pki, port=0)
    users_ca, proxies_ca = new_ca("kubernetes"), new_ca("kubernetes")
    server.tls = ServingTLS((pki.server.cert_pem, pki.server.key_pem), users_ca.cert_pem, proxies_ca.cert_pem)
    masters = {"subject": ((("commonName", "front-proxy-client"),), (("organizationName", "system:masters"),))}
    forged = issue(proxies_ca, "front-proxy-client", organizations=("system:masters",), client=True).cert_pem
    assert server._cert_identity(masters, _Transport(forged, proxies_ca.cert_pem)) == (server.requestheader, None)  # the front proxy's, no user
    real = dict(masters)  # (another connection's certificate: judged on its own)
    admin = issue(users_ca, "front-proxy-client", organizations=("system:masters",), client=True).cert_pem
    front, user = server._cert_identity(real, _Transport(admin, users_ca.cert_pem))
    assert front is None and (user.name, user.groups) == ("front-proxy-client", ("system:masters", "system:authenticated"))
