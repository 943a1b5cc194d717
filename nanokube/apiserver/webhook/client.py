"""The API server's HTTPS client for webhooks (admission and CRD conversion).

A `clientConfig` names either a `url` or a Service. A Service is dialled at
an address its resolver picks (its endpoints) while TLS verifies the name
`<service>.<namespace>.svc` against `caBundle` (system roots when empty), as
apiserver's util/webhook client does. Failures are raised as `WebhookError`
with the text Go's HTTP client gives, since users see it inside upstream's
admission and conversion error messages.
"""

from __future__ import annotations

import asyncio
import base64
import ipaddress
import math
import ssl
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import orjson

from ...machinery.errors import generic_status_message
from ...machinery.hostport import join_host_port

#: (namespace, name, port) -> (host, port) to dial; raises WebhookError when the
#: Service cannot be reached (not found, no such port, no ready endpoints)
ServiceResolver = Callable[[str, str, int], tuple[str, int]]


class WebhookError(Exception):
    """A call that produced no usable response."""


def _ca_bundle(cc: dict) -> bytes:
    raw = cc.get("caBundle") or ""
    if isinstance(raw, bytes):
        return raw
    try:
        return base64.b64decode(raw)
    except ValueError:
        return b""


class WebhookClient:
    """POSTs JSON to webhooks; one connection pool per event loop."""

    def __init__(self, resolver: ServiceResolver | None = None) -> None:
        self.resolver = resolver
        self._contexts: dict[bytes, ssl.SSLContext] = {}
        self._session: aiohttp.ClientSession | None = None
        #: under the process runtime, Services' endpoints (pod IPs) are dialled from the
        #: cluster network namespace (dial_services_from); `url` webhooks stay on the host
        self._service_dialer: Callable | None = None
        self._service_session: aiohttp.ClientSession | None = None
        #: called with each request's headers before it is sent: tracing's traceparent (tracing.install)
        self.on_request: Callable[[dict], None] | None = None

    def _ssl(self, ca: bytes) -> ssl.SSLContext:
        ctx = self._contexts.get(ca)
        if ctx is None:
            try:
                ctx = ssl.create_default_context(cadata=ca.decode()) if ca else ssl.create_default_context()
            except (ssl.SSLError, ValueError) as e:
                raise WebhookError(f"unable to load root certificates: {e}") from None
            self._contexts[ca] = ctx
        return ctx

    def dial_services_from(self, socket_factory: Callable) -> None:
        """Open connections to Services' endpoints with `socket_factory` (see netns.dialer)."""
        self._service_dialer = socket_factory

    def _session_for_loop(self, service: bool = False) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        dialer = self._service_dialer if service else None
        session = self._service_session if dialer else self._session
        if session is None or session.closed or session._loop is not loop:
            session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0, enable_cleanup_closed=True, socket_factory=dialer),
                auto_decompress=True)
            if dialer:
                self._service_session = session
            else:
                self._session = session
        return session

    def endpoint(self, cc: dict) -> tuple[str, str, str | None]:
        """(URL shown in errors, URL dialled, TLS server name) of a clientConfig."""
        if cc.get("url"):
            return cc["url"], cc["url"], None
        svc = cc.get("service") or {}
        ns, name, port = svc.get("namespace", ""), svc.get("name", ""), svc.get("port") or 443
        path = svc.get("path") or ""
        server_name = f"{name}.{ns}.svc"
        shown = f"https://{server_name}:{port}{path}"
        if self.resolver is None:
            return shown, shown, server_name
        host, dial_port = self.resolver(ns, name, port)
        return shown, f"https://{join_host_port(host, dial_port)}{path}", server_name

    async def post(self, cc: dict, body: Any, timeout: float, send_timeout: bool = True) -> dict:
        """POST `body` as JSON and return the decoded JSON answer. `timeout` bounds
        the whole call; with `send_timeout` it is also passed on as `?timeout=Ns`."""
        shown, dialled, server_name = self.endpoint(cc)
        if send_timeout and timeout > 0:
            query = f"?timeout={math.ceil(timeout)}s"
            shown, dialled = shown + query, dialled + query
        ctx = self._ssl(_ca_bundle(cc))
        data = orjson.dumps(body)
        headers = {"Content-Type": "application/json", "Accept": "application/json, */*"}
        kwargs: dict[str, Any] = {"ssl": ctx}
        if self.on_request is not None:
            self.on_request(headers)
        if server_name:
            kwargs["server_hostname"] = server_name
            headers["Host"] = f"{server_name}:{urlsplit(shown).port or 443}"
        try:
            async with asyncio.timeout(timeout if timeout > 0 else None):
                async with self._session_for_loop(_endpoint_ip(server_name, dialled)).post(dialled, data=data, headers=headers, **kwargs) as resp:
                    raw = await resp.read()
                    status = resp.status
        except TimeoutError:
            raise WebhookError(f'Post "{shown}": context deadline exceeded') from None
        except aiohttp.ClientConnectorCertificateError as e:
            raise WebhookError(f'Post "{shown}": tls: failed to verify certificate: {x509_reason(e.certificate_error, server_name or urlsplit(shown).hostname)}') from None
        except aiohttp.ClientConnectorError as e:
            u = urlsplit(dialled)
            why = "connection refused" if isinstance(e.os_error, ConnectionRefusedError) else (e.os_error.strerror or str(e.os_error)).lower()
            raise WebhookError(f'Post "{shown}": dial tcp {join_host_port(u.hostname or "", u.port or 443)}: connect: {why}') from None
        except UnicodeError:  # a host no resolver takes (a label empty or past 63 bytes: IDNA refuses to encode it)
            raise WebhookError(f'Post "{shown}": dial tcp: lookup {urlsplit(dialled).hostname}: no such host') from None
        except (aiohttp.ClientError, OSError) as e:
            raise WebhookError(f'Post "{shown}": {e}') from None
        if not 200 <= status < 300:
            raise WebhookError(status_message(status, raw))
        try:
            out = orjson.loads(raw)
        except orjson.JSONDecodeError as e:
            raise WebhookError(f"invalid character in response body: {e}") from None
        if not isinstance(out, dict):
            raise WebhookError("json: cannot unmarshal the response into an object")
        return out

    async def close(self) -> None:
        for session in (self._session, self._service_session):
            if session is not None and not session.closed:
                await session.close()


def _endpoint_ip(server_name: str | None, dialled: str) -> bool:
    """Whether a Service resolved to an endpoint address (a pod's, dialled from the
    cluster network); an ExternalName's host name is dialled as a `url` is."""
    if server_name is None:
        return False
    try:
        ipaddress.ip_address(urlsplit(dialled).hostname or "")
    except ValueError:
        return False
    return True


def status_message(code: int, raw: bytes) -> str:
    """client-go's error for a non-2xx answer: the message of the Status it holds, else the generic one."""
    try:
        st = orjson.loads(raw)
    except orjson.JSONDecodeError:
        st = None
    if isinstance(st, dict) and st.get("kind") == "Status" and st.get("message"):
        return st["message"]
    return generic_status_message(code, raw)


def x509_reason(cert_err: Exception, host: str | None) -> str:
    """Go's x509 error for a certificate that failed verification (Python's `cert_err`)."""
    text = getattr(cert_err, "verify_message", "") or str(cert_err)
    if "Hostname mismatch" in text or "IP address mismatch" in text:
        return f"x509: certificate is not valid for {host}"
    if "expired" in text:
        return "x509: certificate has expired or is not yet valid"
    return "x509: certificate signed by unknown authority"
