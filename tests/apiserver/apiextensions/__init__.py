"""What the CRD tests share: installing a CRD until its resource is served, and the official
client's watch of a custom resource run in a thread."""

from __future__ import annotations

import asyncio
import threading

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
