"""A CRD deleted while its instances cannot be listed (the conversion webhook refuses them): the
CRD finalizer's own Terminating writes do not requeue it, so it retries on the queue's backoff
instead of hot-looping writes to the CRD, as upstream's finalizer ignores those updates."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from nanokube.apiserver.apiextensions.finalizer import CRDFinalizer
from nanokube.apiserver.apiextensions.serving import CustomResources
from nanokube.apiserver.loopback import LocalClient
from nanokube.apiserver.rest import SYSTEM
from nanokube.clock import VirtualClock
from tests.apiserver.admission.server import WebhookServer
from tests.apiserver.apiextensions.test_serving import condition, established
from tests.controllers import eventually, make_stack

GROUP = "backoff.example.com"
SCHEMA = {"type": "object", "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}


def _crd(hook: WebhookServer, storage: str) -> dict:
    return {"metadata": {"name": f"widgets.{GROUP}"},
            "spec": {"group": GROUP, "scope": "Namespaced", "names": {"plural": "widgets", "kind": "Widget"},
                     "conversion": {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"], "clientConfig": {
                         "url": hook.url("/convert"), "caBundle": hook.ca.bundle}}},
                     "versions": [{"name": v, "served": True, "storage": v == storage,
                                   "schema": {"openAPIV3Schema": SCHEMA}} for v in ("v1", "v2")]}}


def _refuse(review: dict) -> dict:
    return {"apiVersion": review["apiVersion"], "kind": "ConversionReview", "response": {
        "uid": review["request"]["uid"], "result": {"status": "Failure", "message": "down for maintenance"}}}


async def test_a_failing_cleanup_waits_for_the_backoff_not_for_its_own_status_writes():
    clock = VirtualClock(max_turns=1000)  # the queue's backoff waits on it: it stands still until advanced
    stack = await make_stack()
    serving = CustomResources(SimpleNamespace(index=stack.rest.index, cache=stack.cache, clock=clock),
                              LocalClient(stack.rest, SYSTEM, "kube-apiextensions-apiserver"), lambda: None)
    finalizer = next(c for c in serving.controllers if isinstance(c, CRDFinalizer))
    hook = WebhookServer().start()
    await serving.start()
    try:
        env = SimpleNamespace(crds=stack.client.resource("apiextensions.k8s.io", "v1", "customresourcedefinitions"))
        name = f"widgets.{GROUP}"
        await env.crds.create(_crd(hook, "v1"))
        await established(env, name)
        await stack.client.resource(GROUP, "v1", "widgets").create(
            {"metadata": {"name": "w", "namespace": "default"}, "spec": {"size": 1}})
        # stored at v1, listed at the new storage version v2: every list asks the webhook, which refuses
        await env.crds.update({**await env.crds.get(name), "spec": _crd(hook, "v2")["spec"]})
        hook.handlers["/convert"] = _refuse
        await env.crds.delete(name)

        async def failed():
            got = await env.crds.get(name)
            return got if (condition(got, "Terminating") or ("", "", ""))[1] == "InstanceDeletionFailed" else None

        got = await eventually(failed)
        assert "down for maintenance" in condition(got, "Terminating")[2]
        seen = got["metadata"]["resourceVersion"], len(hook.calls_to("/convert"))
        # virtual time stands still, so no backoff ends: a requeue now could only come from the
        # finalizer's own writes, which the hot loop made within milliseconds
        await asyncio.sleep(0.5)
        now = await env.crds.get(name)
        assert (now["metadata"]["resourceVersion"], len(hook.calls_to("/convert"))) == seen
        assert finalizer.queue.num_requeues(name) == 1

        await clock.advance(0.005)  # the first backoff ends: one more try, failing alike
        async def retried():
            return finalizer.queue.num_requeues(name) == 2
        await eventually(retried)
        assert len(hook.calls_to("/convert")) == seen[1] + 1
    finally:
        await serving.stop()
        hook.stop()
        await stack.close()
