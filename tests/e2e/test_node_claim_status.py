"""A node's own credentials and the claims of its pods, as upstream confines them: the Node
authorizer lets a node update or patch the status of a claim a pod on it uses, and nothing of
other claims (authorizeStatusUpdate); NodeRestriction lets it change only the status fields the
kubelet's volume expansion writes (capacity, conditions, allocatedResources and
allocatedResourceStatuses); anything else of claims and volumes is a get of one related object
(authorizeGet), in upstream's words. Driven over HTTPS with node gpu-0's client certificate."""

from __future__ import annotations

from tests.e2e.manifests import to_yaml
from tests.e2e.test_security import _call, gpu0  # noqa: F401 (gpu0 is a fixture)


def _claim(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": "default"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}


def _pod(name: str, node: str, claim: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": node,
                     "containers": [{"name": "app", "image": "busybox", "command": ["sleep", "infinity"]}],
                     "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]}}


def test_a_node_updates_only_the_resize_status_of_its_pods_claims(cluster, gpu0):  # noqa: F811
    cluster.kubectl("apply", "-f", "-", input=to_yaml([_claim("ckpt-here"), _claim("ckpt-there"),
                                                        _pod("trainer-here", "gpu-0", "ckpt-here"),
                                                        _pod("trainer-there", "gpu-1", "ckpt-there")]))
    base = "/api/v1/namespaces/default/persistentvolumeclaims"
    resize = {"status": {"capacity": {"storage": "1Gi"}, "allocatedResources": {"storage": "1Gi"},
                         "allocatedResourceStatuses": {"storage": "NodeResizeInProgress"},
                         "conditions": [{"type": "FileSystemResizePending", "status": "True"}]}}
    code, body = _call(cluster, gpu0, "PATCH", f"{base}/ckpt-here/status", resize)
    assert code == 200, body
    assert body["status"]["allocatedResourceStatuses"] == {"storage": "NodeResizeInProgress"}
    claim = cluster.kubectl_json("get", "pvc", "ckpt-here")
    claim["status"]["allocatedResourceStatuses"] = {"storage": "NodeResizeInfeasible"}
    code, body = _call(cluster, gpu0, "PUT", f"{base}/ckpt-here/status", claim)
    assert code == 200, body

    code, body = _call(cluster, gpu0, "PATCH", f"{base}/ckpt-there/status", resize)
    assert (code, body["message"]) == (403, (
        'persistentvolumeclaims "ckpt-there" is forbidden: User "system:node:gpu-0" cannot patch resource '
        '"persistentvolumeclaims/status" in API group "" in the namespace "default": no relationship found '
        "between node 'gpu-0' and this object"))
    code, body = _call(cluster, gpu0, "GET", f"{base}/ckpt-here/status")
    assert (code, body["message"].rpartition(": ")[2]) == (403, "can only get/update/patch this type")
    assert _call(cluster, gpu0, "GET", f"{base}/ckpt-here")[0] == 200
    for method, path in (("PATCH", f"{base}/ckpt-here"), ("GET", base), ("GET", "/api/v1/persistentvolumes")):
        code, body = _call(cluster, gpu0, method, path, {"metadata": {"labels": {"x": "y"}}} if method == "PATCH" else None)
        assert (code, body["message"].rpartition(": ")[2]) == (403, "can only get individual resources of this type")

    forbidden = 'persistentvolumeclaims "ckpt-here" is forbidden: node "gpu-0" is not allowed to update fields ' \
                "other than status.capacity and status.conditions: "
    for change in ({"metadata": {"labels": {"owner": "gpu-0"}}}, {"status": {"phase": "Lost"}},
                   {"status": {"currentVolumeAttributesClassName": "fast"}}):
        code, body = _call(cluster, gpu0, "PATCH", f"{base}/ckpt-here/status", change)
        assert code == 403 and body["message"].startswith(forbidden), body
    assert cluster.kubectl_json("get", "pvc", "ckpt-here")["status"]["phase"] != "Lost"
