"""The keys the storage layer's errors quote are kube-apiserver's etcd keys, whatever nanokube's own
layout: a 409 on a stale uid names /registry/minions/n for a node, as upstream's would."""

from __future__ import annotations

from tests.served import send, served


async def test_a_stale_uid_conflict_names_the_key_upstream_stores_the_object_under(tmp_path):
    objects = (("/api/v1/nodes", {"kind": "Node", "metadata": {"name": "n"}}, "/registry/minions/n"),
               ("/api/v1/namespaces/default/services",
                {"kind": "Service", "metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}]}},
                "/registry/services/specs/default/s"),
               ("/api/v1/namespaces/default/endpoints", {"kind": "Endpoints", "metadata": {"name": "e"}},
                "/registry/services/endpoints/default/e"),
               ("/apis/events.k8s.io/v1/namespaces/default/events",
                {"kind": "Event", "metadata": {"name": "ev"}, "eventTime": "2026-01-01T00:00:00.000000Z",
                 "reportingController": "c/x", "reportingInstance": "i", "action": "A", "reason": "R",
                 "type": "Normal", "regarding": {"kind": "Pod", "name": "p", "namespace": "default"}},
                "/registry/events/default/ev"),
               ("/apis/apps/v1/namespaces/default/controllerrevisions",
                {"kind": "ControllerRevision", "metadata": {"name": "r"}, "revision": 1, "data": {"a": 1}},
                "/registry/controllerrevisions/default/r"),
               ("/apis/apiregistration.k8s.io/v1/apiservices",
                {"kind": "APIService", "metadata": {"name": "v1.example.com"},
                 "spec": {"group": "example.com", "version": "v1", "groupPriorityMinimum": 1, "versionPriority": 1}},
                "/registry/apiregistration.k8s.io/apiservices/v1.example.com"))
    async with served(tmp_path) as (_, api):
        for path, body, key in objects:
            code, made = await send(api, "POST", path, body)
            assert code == 201, (path, made.get("message"))
            name = body["metadata"]["name"]
            stale = {**made, "metadata": {**made["metadata"], "uid": "stale"}}
            code, out = await send(api, "PUT", f"{path}/{name}", stale)
            assert code == 409 and f"StorageError: invalid object, Code: 4, Key: {key}, ResourceVersion: 0, " \
                f"AdditionalErrorMsg: Precondition failed: UID in precondition: stale, UID in object meta: " \
                f"{made['metadata']['uid']}" in out["message"], out
