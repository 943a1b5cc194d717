"""What the CRD tests share: installing a CRD until its resource is served, a CRD as a server of
another version stored it, the official client's watch of a custom resource run in a thread, and
a raw watch read until the events a test waits for have arrived."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable

from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from tests.apiserver.test_rest_managedfields import call
from tests.controllers import tries

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


async def install(api, crd: dict, path: str) -> None:
    """Create `crd` and wait until its resources' list at `path` is served (404 until then)."""
    await call(api, "POST", CRDS, crd)
    for _ in tries():
        try:
            await call(api, "GET", path)
            return
        except ApiException as e:
            assert e.status == 404  # not served yet
            await asyncio.sleep(0.05)
    raise AssertionError(f"{path} was never served")


async def rewritten_in_store(server, api, crd: dict, edit: Callable[[dict], None]) -> dict:
    """Create `crd`, then `edit` what the store holds as a server of another version would have
    written it (past this server's validation), and wait until it is served; the served CRD."""
    url = f"{CRDS}/{crd['metadata']['name']}"
    await call(api, "POST", CRDS, crd)
    while not any(x["type"] == "Established" and x["status"] == "True"
                  for x in ((await call(api, "GET", url)).get("status") or {}).get("conditions") or []):
        await asyncio.sleep(0.02)
    key = f"/registry/customresourcedefinitions.apiextensions.k8s.io/{crd['metadata']['name']}"
    kv = await server.store.get(key)
    obj = json.loads(kv.value)
    edit(obj)
    obj["metadata"]["generation"] += 1
    await server.store.update(key, json.dumps(obj).encode(), kv.mod_revision)
    while (got := await call(api, "GET", url))["metadata"]["generation"] != obj["metadata"]["generation"]:
        await asyncio.sleep(0.02)
    return got


async def watched(api, group: str, plural: str) -> tuple[list[tuple[str, str]], threading.Event]:
    """Watch the namespace default's `plural` with the official client (its own 60 s timeout) in a
    thread: the (type, name) of each event seen, and an Event set when the stream ends. Returns
    once the first event has arrived."""
    seen: list[tuple[str, str]] = []
    done = threading.Event()

    def watching() -> None:
        objects = client.CustomObjectsApi(api)
        for ev in watch.Watch().stream(objects.list_namespaced_custom_object, group, "v1", "default", plural,
                                       timeout_seconds=60):
            seen.append((ev["type"], ev["object"]["metadata"]["name"]))
        done.set()

    threading.Thread(target=watching, daemon=True).start()
    while not seen:
        await asyncio.sleep(0.02)
    return seen, done


async def open_watch(api, path: str):
    """A watch of `path` over the client's connection pool, returned once its headers have come: the
    server has registered it by then, so a write that follows is a live event of it."""
    return await asyncio.to_thread(api.rest_client.pool_manager.request, "GET", api.configuration.host + path,
                                   preload_content=False)


async def lines_until(r, done: Callable[[list[bytes]], bool]) -> list[bytes]:
    """The event lines of watch `r`, read as they arrive until `done(lines)` holds or the stream ends,
    then its connection closed: the watch's timeoutSeconds is only a ceiling, not a deadline the
    writes that make the events race (under load they lost it)."""
    def read() -> list[bytes]:
        lines: list[bytes] = []
        rest = b""
        try:
            for chunk in r.read_chunked():
                *complete, rest = (rest + chunk).split(b"\n")
                lines += [line for line in complete if line.strip()]
                if done(lines):
                    break
        finally:
            r.close()
            r.release_conn()
        return lines
    return await asyncio.to_thread(read)
