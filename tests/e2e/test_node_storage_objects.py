"""A node's own credentials and the storage.k8s.io objects a kubelet touches, as upstream
confines them: it reads and writes only the CSINode named after it (the Node authorizer's
authorizeCSINode refuses another's by name, NodeRestriction's admitCSINode the create of one
under another's name), lists CSIDrivers,
and reads only the VolumeAttachments of its own node (the Node authorizer's authorizeGet).
Driven over HTTPS with node gpu-0's client certificate."""

from __future__ import annotations

from tests.e2e.conftest import wait_for
from tests.e2e.manifests import to_yaml
from tests.e2e.test_security import _call, gpu0  # noqa: F401 (gpu0 is a fixture)

CSINODES = "/apis/storage.k8s.io/v1/csinodes"
ATTACHMENTS = "/apis/storage.k8s.io/v1/volumeattachments"
NOT_ITS_OWN = "can only access CSINode with the same name as the requesting node"


def _csinode(name: str) -> dict:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": name},
            "spec": {"drivers": [{"name": "local.csi.nanokube.io", "nodeID": name}]}}


def _attachment(name: str, node: str) -> dict:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment", "metadata": {"name": name},
            "spec": {"attacher": "local.csi.nanokube.io", "nodeName": node, "source": {"persistentVolumeName": name}}}


def test_each_kubelet_makes_its_nodes_csinode_with_no_drivers(cluster):
    """As the kubelet's CSI plugin at start-up: `kubectl get csinodes` lists every node, DRIVERS 0,
    each annotated with the plugins migrated to CSI."""
    def listed():  # (a Node is Ready as it registers, its CSINode created right after)
        rows = [line.split()[:2] for line in cluster.kubectl("get", "csinodes").stdout.splitlines()]
        return rows if len(rows) == 3 else None
    rows = wait_for(listed, 30, "both nodes' CSINodes")
    assert rows == [["NAME", "DRIVERS"], ["gpu-0", "0"], ["gpu-1", "0"]], rows
    csinode = cluster.kubectl_json("get", "csinode", "gpu-1")
    node = cluster.kubectl_json("get", "node", "gpu-1")
    assert csinode["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Node", "name": "gpu-1", "uid": node["metadata"]["uid"]}]
    assert csinode["spec"] == {"drivers": None}  # the kubelet sends `[]`: stored nil, as protobuf reads it back
    # the in-tree plugins the kubelet hands to CSI drivers (1.37: every one csi-translation-lib knows)
    assert csinode["metadata"]["annotations"]["storage.alpha.kubernetes.io/migrated-plugins"] == (
        "kubernetes.io/aws-ebs,kubernetes.io/azure-disk,kubernetes.io/azure-file,kubernetes.io/cinder,"
        "kubernetes.io/gce-pd,kubernetes.io/portworx-volume,kubernetes.io/vsphere-volume")


def test_a_node_writes_only_its_own_csinode(cluster, gpu0):  # noqa: F811
    code, body = _call(cluster, gpu0, "POST", CSINODES, _csinode("gpu-0"))
    assert (code, body["reason"]) == (409, "AlreadyExists"), body  # its kubelet made it at start-up
    assert _call(cluster, gpu0, "DELETE", f"{CSINODES}/gpu-0")[0] == 200
    code, body = _call(cluster, gpu0, "POST", CSINODES, _csinode("gpu-0"))
    assert code == 201, body
    assert _call(cluster, gpu0, "PATCH", f"{CSINODES}/gpu-0", {"metadata": {"labels": {"csi": "ready"}}})[0] == 200
    code, body = _call(cluster, gpu0, "POST", CSINODES, _csinode("gpu-1"))
    assert (code, body["message"]) == (403, f'csinodes.storage.k8s.io "gpu-1" is forbidden: {NOT_ITS_OWN}')
    cluster.kubectl("apply", "-f", "-", input=to_yaml([_csinode("gpu-1")]))
    # another's by name the Node authorizer refuses (authorizeCSINode), reads included
    for method, verb, body in (("PATCH", "patch", {"metadata": {"labels": {"x": "y"}}}), ("DELETE", "delete", None),
                               ("GET", "get", None)):
        code, out = _call(cluster, gpu0, method, f"{CSINODES}/gpu-1", body)
        assert (code, out["message"]) == (403, f'csinodes.storage.k8s.io "gpu-1" is forbidden: User "system:node:gpu-0" '
                                               f'cannot {verb} resource "csinodes" in API group "storage.k8s.io" at the '
                                               f"cluster scope: {NOT_ITS_OWN}")
    assert cluster.kubectl_json("get", "csinode", "gpu-1")["metadata"].get("labels") is None
    assert _call(cluster, gpu0, "DELETE", f"{CSINODES}/gpu-0")[0] == 200
    assert _call(cluster, gpu0, "GET", "/apis/storage.k8s.io/v1/csidrivers")[0] == 200


def test_a_node_reads_only_its_own_volume_attachments(cluster, gpu0):  # noqa: F811
    cluster.kubectl("apply", "-f", "-", input=to_yaml([_attachment("va-here", "gpu-0"),
                                                       _attachment("va-there", "gpu-1")]))
    assert _call(cluster, gpu0, "GET", f"{ATTACHMENTS}/va-here")[0] == 200
    code, body = _call(cluster, gpu0, "GET", f"{ATTACHMENTS}/va-there")
    assert (code, body["message"].rpartition(": ")[2]) == (403, "no relationship found between node 'gpu-0' and this object")
    code, body = _call(cluster, gpu0, "GET", ATTACHMENTS)
    assert (code, body["message"].rpartition(": ")[2]) == (403, "can only get individual resources of this type")
