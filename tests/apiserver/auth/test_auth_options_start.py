"""`up` without --anonymous-auth, --authentication-config or --authorization-config: the server's
default stands (anyone without credentials is system:anonymous, and RBAC decides), and none of the
config machinery (JWT authenticators, webhook authorizer, reload loop) is loaded, so its start-up and
each API worker's stay as they were before those flags (about 11 ms of imports each)."""

import argparse
import asyncio
import ssl
import subprocess
import sys
import urllib.request

from nanokube.apiserver import auth_options
from tests.served import served

NO_FLAGS = argparse.Namespace(anonymous_auth=None, authentication_config=None, authorization_config=None)

SCRIPT = """
import argparse, sys, types
from nanokube.apiserver import auth_options
auth_options.apply(types.SimpleNamespace(), auth_options.load(argparse.Namespace(
    anonymous_auth=None, authentication_config=None, authorization_config=None)))
print(*sorted(m for m in sys.modules if m.startswith("nanokube.apiserver.auth.") and m.rsplit(".", 1)[1] in (
    "oidc", "webhook", "config_reload", "authentication_controller", "authorization_config")))
"""


async def test_without_flags_a_request_without_credentials_is_still_anonymous(tmp_path):
    """(apply set the server's `anonymous` to the options' None: every such request a 500)"""
    async with served(tmp_path) as (server, _):
        auth_options.apply(server, auth_options.load(NO_FLAGS))
        ctx = ssl.create_default_context(cadata=server.pki.ca.cert_pem.decode())

        def get(path: str) -> tuple[int, bytes]:
            with urllib.request.urlopen(server.url + path, context=ctx, timeout=10) as r:
                return r.status, r.read()
        assert await asyncio.to_thread(get, "/livez") == (200, b"ok")


def test_without_flags_no_config_machinery_is_loaded():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True).stdout
    assert out.split() == []
