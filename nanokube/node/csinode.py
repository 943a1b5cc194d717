"""The node's CSINode (storage.k8s.io/v1), as the kubelet's CSI volume plugin makes it at start-up
(nodeinfomanager's InitializeCSINodeWithAnnotation): named after the Node and owned by it, so the
garbage collector removes it with the Node, with no drivers until a CSI driver registers. The
scheduler's volume plugins read it through their CSINode informer; `kubectl get csinodes` lists it.

It carries the in-tree volume plugins whose operations this kubelet hands to their CSI drivers
(`storage.alpha.kubernetes.io/migrated-plugins`), which the attach/detach controller and the
scheduler's volume limits read to tell a migrated node from an old one: every plugin csi-translation-lib
translates, all migrated for good since Portworx's gate went (csi_plugin.go's migratedPlugins)."""

from __future__ import annotations

from ..machinery.errors import APIError

#: v1.MigratedPluginsAnnotationKey
MIGRATED_PLUGINS = "storage.alpha.kubernetes.io/migrated-plugins"
#: the in-tree plugin names of csi-translation-lib, sorted and comma-joined as setMigrationAnnotation writes them
MIGRATED = ",".join(sorted((
    "kubernetes.io/aws-ebs", "kubernetes.io/azure-disk", "kubernetes.io/azure-file", "kubernetes.io/cinder",
    "kubernetes.io/gce-pd", "kubernetes.io/portworx-volume", "kubernetes.io/vsphere-volume")))


async def ensure(client, node: dict) -> None:
    """Create `node`'s CSINode unless there is one (a restarted kubelet keeps what it made, its
    drivers included), and set its migrated plugins where they differ, as upstream's
    setMigrationAnnotation (an update only then)."""
    csinodes = client.resource("storage.k8s.io", "v1", "csinodes")
    meta = node["metadata"]
    owner = {"apiVersion": "v1", "kind": "Node", "name": meta["name"], "uid": meta["uid"]}
    try:
        await csinodes.create({"metadata": {"name": meta["name"], "ownerReferences": [owner],
                                            "annotations": {MIGRATED_PLUGINS: MIGRATED}},
                               "spec": {"drivers": []}})
        return
    except APIError as e:
        if e.code != 409:
            raise
    current = await csinodes.get(meta["name"])
    annotations = current["metadata"].get("annotations") or {}
    if set(filter(None, annotations.get(MIGRATED_PLUGINS, "").split(","))) != set(MIGRATED.split(",")):
        await csinodes.update({**current, "metadata": {**current["metadata"],
                                                       "annotations": {**annotations, MIGRATED_PLUGINS: MIGRATED}}})
