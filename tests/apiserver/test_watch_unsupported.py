"""A watch of a resource whose storage lists but does not watch (componentstatuses; metrics-server's
pods and nodes) is refused as upstream's ListResource refuses it: a 405 naming the resource, after the
list's options are read. fuzz58 found metrics.k8s.io answering the watch with a list (which a watching
client cannot decode) and componentstatuses with the router's nameless 405."""

from __future__ import annotations

import pytest

from tests.served import send, served

CASES = [("/api/v1/componentstatuses", "", "componentstatuses"),
         ("/apis/metrics.k8s.io/v1beta1/namespaces/default/pods", "metrics.k8s.io", "pods"),
         ("/apis/metrics.k8s.io/v1beta1/pods", "metrics.k8s.io", "pods"),
         ("/apis/metrics.k8s.io/v1beta1/nodes", "metrics.k8s.io", "nodes")]


@pytest.mark.parametrize("path,group,plural", CASES)
async def test_watch_of_a_list_only_resource_is_refused_naming_it(tmp_path, path, group, plural):
    resource = f"{plural}.{group}" if group else plural
    async with served(tmp_path) as (_, api):
        for watch in ("1", "true", "x"):
            code, got = await send(api, "GET", f"{path}?watch={watch}&timeoutSeconds=1")
            assert code == 405, got
            assert got["kind"] == "Status" and got["reason"] == "MethodNotAllowed"
            assert got["message"] == f'watch is not supported on resources of kind "{resource}"'
            assert got["details"] == {"kind": plural, **({"group": group} if group else {})}
        # the options are read first: a selector that does not parse is the list's 400
        code, got = await send(api, "GET", f"{path}?watch=1&labelSelector=%C3%A9")
        assert code == 400 and got["reason"] == "BadRequest", got
        if not group:  # and its field labels are converted, a field the kind does not offer the list's 400
            code, got = await send(api, "GET", f"{path}?watch=1&fieldSelector=spec.x%3Dy")
            assert code == 400 and got["reason"] == "BadRequest", got
            assert got["message"] == '"spec.x" is not a known field selector: only "metadata.name", "metadata.namespace"'
            code, got = await send(api, "GET", f"{path}?watch=1&fieldSelector=metadata.name%3Detcd-0")
            assert code == 405 and got["reason"] == "MethodNotAllowed", got
        # no watch, or ?watch=false: the list
        for query in ("", "?watch=false", "?watch=0"):
            code, got = await send(api, "GET", path + query)
            assert code == 200 and got["kind"].endswith("List"), got


async def test_a_named_metrics_get_reads_no_watch(tmp_path):
    """An object's own path is a get whatever its ?watch (RequestInfo makes only a collection's a watch)."""
    async with served(tmp_path) as (_, api):
        code, got = await send(api, "GET", "/apis/metrics.k8s.io/v1beta1/nodes/nowhere?watch=1")
        assert code == 404 and got["reason"] == "NotFound", got
        code, got = await send(api, "GET", "/api/v1/componentstatuses/etcd-0?watch=1")
        assert code in (200, 404) and got["kind"] in ("ComponentStatus", "Status"), got
