"""A component's secure port served in process on a free port, for the tests that speak raw HTTP/1.1
to one (its parser's refusals, header limits, declined upgrades): component_server.serve with a
self-signed certificate, and a client context that trusts it unverified."""

import argparse
import contextlib
import socket
import ssl

from prometheus_client import CollectorRegistry

from nanokube import component_server


class AllowAll:
    """An API server that allows every SubjectAccessReview (anonymous requests pass)."""

    async def request(self, method, path, body=None, **kw):
        return {"status": {"allowed": True}}


@contextlib.asynccontextmanager
async def component_port(api=None):
    """(port, client SSL context) of a component port whose delegated authn/authz asks `api`
    (AllowAll by default); cleaned up on exit."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    args = argparse.Namespace(secure_port=port, bind_address="127.0.0.1", tls_cert_file="", tls_private_key_file="")
    app = component_server.app(component_server.DelegatedAuth(api or AllowAll()), CollectorRegistry(), {}, list)
    runner = await component_server.serve(args, app, "test")
    insecure = ssl.create_default_context()
    insecure.check_hostname, insecure.verify_mode = False, ssl.CERT_NONE
    try:
        yield port, insecure
    finally:
        await runner.cleanup()
