"""A real OpenID issuer for the JWT authenticator's tests: an HTTPS server with a CA of its own that
serves the discovery document and the key set, and signs tokens with its current RSA key, which
`rotate` replaces; and an API server started with an authentication config that trusts it."""

from __future__ import annotations

import base64
import contextlib
import json
import ssl
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

from aiohttp import web
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from kubernetes import client, config

from nanokube.apiserver import auth_options
from nanokube.apiserver.app import APIServer
from nanokube.pki.ca import ensure_pki, issue, new_ca
from nanokube.pki.kubeconfig import write_kubeconfig
from nanokube.store.memory import MemoryStore


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class Issuer:
    def __init__(self) -> None:
        self.ca = new_ca("test-issuer-ca")
        self.serving = issue(self.ca, "issuer", ips=("127.0.0.1",), server=True)
        self.url = ""
        self.keys: list[tuple[str, rsa.RSAPrivateKey]] = []
        self.fetches = 0
        self.rotate()

    def rotate(self) -> None:
        """A new signing key, published next to the old ones."""
        self.keys.append((f"key-{len(self.keys)}", rsa.generate_private_key(public_exponent=65537, key_size=2048)))

    def token(self, **claims) -> str:
        kid, key = self.keys[-1]
        now = int(time.time())
        body = {"iss": self.url, "aud": "nanokube", "sub": "alice", "iat": now, "exp": now + 600, **claims}
        signing = _b64(json.dumps({"alg": "RS256", "kid": kid, "typ": "JWT"}).encode()) + "." + \
            _b64(json.dumps(body).encode())
        return signing + "." + _b64(key.sign(signing.encode(), padding.PKCS1v15(), hashes.SHA256()))

    def _jwks(self) -> dict:
        out = []
        for kid, key in self.keys:
            n = key.public_key().public_numbers()
            out.append({"kty": "RSA", "alg": "RS256", "use": "sig", "kid": kid,
                        "n": _b64(n.n.to_bytes((n.n.bit_length() + 7) // 8, "big")), "e": _b64(n.e.to_bytes(3, "big"))})
        return {"keys": out}

    @contextlib.asynccontextmanager
    async def served(self) -> AsyncIterator[Issuer]:
        async def discovery(request: web.Request) -> web.Response:
            return web.json_response({"issuer": self.url, "jwks_uri": self.url + "/keys"})

        async def keys(request: web.Request) -> web.Response:
            self.fetches += 1
            return web.json_response(self._jwks())

        app = web.Application()
        app.router.add_get("/.well-known/openid-configuration", discovery)
        app.router.add_get("/keys", keys)
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        with tempfile.TemporaryDirectory() as d:
            (Path(d) / "c").write_bytes(self.serving.cert_pem)
            (Path(d) / "k").write_bytes(self.serving.key_pem)
            ctx.load_cert_chain(Path(d) / "c", Path(d) / "k")
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ctx)
        await site.start()
        self.url = f"https://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"
        try:
            yield self
        finally:
            await runner.cleanup()

    def config(self, mappings: str = "", rules: str = "") -> str:
        """An AuthenticationConfiguration naming this issuer (the claim mappings' lines below `claimMappings:`)."""
        ca = "\n".join("      " + line for line in self.ca.cert_pem.decode().splitlines())
        mappings = mappings or "    username:\n      claim: sub\n      prefix: 'oidc:'\n"
        return (f"apiVersion: apiserver.config.k8s.io/v1\nkind: AuthenticationConfiguration\njwt:\n"
                f"- issuer:\n    url: {self.url}\n    audiences: [nanokube]\n    certificateAuthority: |\n{ca}\n"
                f"  claimMappings:\n{mappings}{rules}")


@contextlib.asynccontextmanager
async def served_with(tmp_path: Path, authentication_config: str) -> AsyncIterator[tuple[APIServer, str]]:
    """A started server with --authentication-config (its file at tmp_path/authn.yaml) and its
    admin kubeconfig's path."""
    path = tmp_path / "authn.yaml"
    path.write_text(authentication_config)
    pki = ensure_pki(str(tmp_path))
    server = APIServer(MemoryStore(), pki, port=0)
    server.rest.admission.disable("ServiceAccount")

    class Args:
        anonymous_auth = None
    Args.authentication_config = str(path)
    auth_options.apply(server, auth_options.load(Args))
    await server.start()
    try:
        kubeconfig = str(tmp_path / "kubeconfig")
        write_kubeconfig(kubeconfig, server.url, pki)
        yield server, kubeconfig
    finally:
        await server.stop()


def token_client(server: APIServer, token: str) -> client.ApiClient:
    """The official client with nothing but a bearer token (and the cluster's CA)."""
    c = client.Configuration()
    c.host = server.url
    c.ssl_ca_cert = server.pki.ca_path
    c.api_key = {"authorization": token}
    c.api_key_prefix = {"authorization": "Bearer"}
    return client.ApiClient(c)


def admin_client(kubeconfig: str) -> client.ApiClient:
    return config.new_client_from_config(config_file=kubeconfig)
