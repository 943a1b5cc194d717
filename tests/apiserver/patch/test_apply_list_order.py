"""The order of an associative list that two managers apply, over HTTP: structured-merge-diff merges
the applied list into the live one in the applied order, keeping the live items the applied list
does not name where they were, as kube-apiserver's server-side apply orders a Deployment's
containers or a custom resource's ports."""

from __future__ import annotations

from tests.apiserver.test_rest_managedfields import call
from tests.served import served

DEPLOYS = "/apis/apps/v1/namespaces/default/deployments"
APPLY = "application/apply-patch+yaml"


def deployment(*names: str) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": n, "image": "nginx"} for n in names]}}}}


def names(obj: dict) -> list[str]:
    return [c["name"] for c in obj["spec"]["template"]["spec"]["containers"]]


async def test_applied_items_take_the_applied_order(tmp_path):
    async with served(tmp_path) as (_, api):
        assert names(await call(api, "PATCH", f"{DEPLOYS}/web", deployment("http"), "one", content_type=APPLY)) == [
            "http"]
        # a new item before a shared one comes before it
        assert names(await call(api, "PATCH", f"{DEPLOYS}/web", deployment("grpc", "http"), "two",
                                content_type=APPLY)) == ["grpc", "http"]
        # shared items follow the applied order; live-only items stay where they were
        assert names(await call(api, "PATCH", f"{DEPLOYS}/web", deployment("grpc", "http", "c"), "one",
                                content_type=APPLY)) == ["grpc", "http", "c"]
        assert names(await call(api, "PATCH", f"{DEPLOYS}/web", deployment("c", "x", "grpc"), "three",
                                content_type=APPLY)) == ["http", "c", "x", "grpc"]
