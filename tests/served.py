"""An in-process API server over a memory store, driven by the official `kubernetes` client
through a kubeconfig, as a user's program would drive `nanokube up`."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from kubernetes import client, config

from nanokube.apiserver.app import APIServer
from nanokube.pki.ca import ensure_pki
from nanokube.pki.kubeconfig import write_kubeconfig
from nanokube.store.interface import Store
from nanokube.store.memory import MemoryStore


@contextlib.asynccontextmanager
async def served(tmp_path: Path, disable_admission_plugins: tuple[str, ...] = ("ServiceAccount", "TaintNodesByCondition"),
                 store: Store | None = None, prepare: Callable[[APIServer], None] | None = None,
                 **options) -> AsyncIterator[tuple[APIServer, client.ApiClient]]:
    """A started server and an ApiClient for it; both closed on exit. No controller manager makes
    namespaces' ServiceAccounts here, nor takes TaintNodesByCondition's not-ready taint off a new
    node, so both are off unless asked for, as upstream's integration tests run kube-apiserver with
    --disable-admission-plugins=ServiceAccount,TaintNodesByCondition.
    `store`: where it keeps its objects, a new memory store by default; `prepare(server)`: what a
    command line would set before it starts (encryption at rest); `options`: APIServer's others
    (an audit log's path)."""
    pki = ensure_pki(str(tmp_path))
    server = APIServer(store or MemoryStore(), pki, port=0, **options)
    if disable_admission_plugins:
        server.rest.admission.disable(*disable_admission_plugins)
    if prepare is not None:
        prepare(server)
    await server.start()
    try:
        kubeconfig = str(tmp_path / "kubeconfig")
        write_kubeconfig(kubeconfig, server.url, pki)
        api_client = config.new_client_from_config(config_file=kubeconfig)
        try:
            yield server, api_client
        finally:
            api_client.close()
    finally:
        await server.stop()


async def sent(api: client.ApiClient, method: str, path: str, body=None,
               ctype: str = "application/json") -> tuple[int, dict, list[str]]:
    """A request the client's models would not build (a malformed or hostile body), over its own
    connection pool: the answer's code, JSON body and Warning headers. `body` bytes go as they
    are, any other value as its JSON."""
    data = body if body is None or isinstance(body, bytes) else json.dumps(body).encode()

    def send():
        r = api.rest_client.pool_manager.request(method, api.configuration.host + path, body=data,
                                                 headers={"Content-Type": ctype})
        return r.status, json.loads(r.data), r.headers.getlist("Warning")
    return await asyncio.to_thread(send)


async def send(api: client.ApiClient, method: str, path: str, body=None,
               ctype: str = "application/json") -> tuple[int, dict]:
    """`sent`'s code and JSON body."""
    return (await sent(api, method, path, body, ctype))[:2]


@pytest.fixture
async def core(tmp_path) -> AsyncIterator[client.CoreV1Api]:
    """The official client's CoreV1Api on a `served` server (tests/conftest.py loads this module as a
    plugin, so a test asks for `core` by name)."""
    async with served(tmp_path) as (_, api_client):
        yield client.CoreV1Api(api_client)
