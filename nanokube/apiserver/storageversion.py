"""This API server's identity and its storage versions.

APIServerIdentity: kube-apiserver holds a Lease `apiserver-<hash of the
host name>` in kube-system (label `apiserver.kubernetes.io/identity:
kube-apiserver`), renewed every 10 s, whose name is its ID. StorageVersionAPI:
for every resource it stores it publishes a StorageVersion `<group>.<resource>`
saying, under that ID, which version it encodes objects in and which it can
decode and serves; with one API server every resource has a common encoding
version. They are written in the background after start, unchanged ones skipped.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import socket
import uuid

from ..machinery.errors import APIError
from .background import BackgroundLoop
from .rest import SYSTEM, WriteOptions

GROUP = "internal.apiserver.k8s.io"
IDENTITY_LABEL = "apiserver.kubernetes.io/identity"
LEASE_DURATION = 3600
RENEW_INTERVAL = 10.0


def identity(hostname: str) -> str:
    digest = hashlib.sha256(hostname.encode()).digest()
    return "apiserver-" + base64.b32encode(digest[:16]).decode().lower().rstrip("=")


def storage_version_name(group: str, plural: str) -> str:
    return f"{group or 'core'}.{plural}"


def storage_version(res, server_id: str) -> dict:
    gv = (lambda v: f"{res.group}/{v}" if res.group else v)
    encoding = gv(res.storage_version)
    versions = [gv(v) for v in res.versions]
    # the stored version is decodable even where --runtime-config serves it no more
    decodable = versions if encoding in versions else [*versions, encoding]
    return {"metadata": {"name": storage_version_name(res.group, res.plural)}, "status": {
        "storageVersions": [{"apiServerID": server_id, "encodingVersion": encoding,
                             "decodableVersions": decodable, "servedVersions": versions}],
        "commonEncodingVersion": encoding,
        "conditions": [{"type": "AllEncodingVersionsEqual", "status": "True", "reason": "CommonEncodingVersionSet",
                        "message": "Common encoding version set"}]}}


class APIServerIdentity(BackgroundLoop):
    """Holds the identity Lease and publishes the StorageVersions under it."""

    def __init__(self, server, hostname: str | None = None) -> None:
        self.server = server
        self.hostname = hostname or socket.gethostname()
        self.id = identity(self.hostname)
        self.holder = f"{self.id}_{uuid.uuid4()}"
        self.opts = WriteOptions(field_manager="kube-apiserver", user=SYSTEM)

    async def start(self) -> None:
        await self._renew()
        await super().start()

    async def _loop(self) -> None:
        await self._publish_storage_versions()
        while True:
            await self.server.clock.sleep(RENEW_INTERVAL)
            try:
                await self._renew()
            except APIError:
                pass  # the next beat tries again

    async def _renew(self) -> None:
        rest, res = self.server.rest, self.server.index.get("coordination.k8s.io", "v1", "leases")
        now = self.server.clock.rfc3339_micro()
        lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {
            "name": self.id, "namespace": "kube-system",
            "labels": {IDENTITY_LABEL: "kube-apiserver", "kubernetes.io/hostname": self.hostname}},
            "spec": {"holderIdentity": self.holder, "leaseDurationSeconds": LEASE_DURATION, "renewTime": now}}
        try:
            current = await rest.get(res, "v1", "kube-system", self.id)
        except APIError as e:
            if e.code != 404:
                raise
            lease["spec"]["acquireTime"] = now
            await rest.create(res, "v1", "kube-system", lease, self.opts)
            return
        spec = {**(current.get("spec") or {}), **lease["spec"]}
        # the update sets the body's metadata (generation, managedFields): a copy, not the cache's object
        body = {**copy.deepcopy(current), "spec": spec}
        await rest.update(res, "v1", "kube-system", self.id, body, self.opts)

    async def _publish_storage_versions(self) -> None:
        rest, sv_res = self.server.rest, self.server.index.get(GROUP, "v1alpha1", "storageversions")
        if sv_res is None:  # --runtime-config turned internal.apiserver.k8s.io/v1alpha1 off: nowhere to publish
            return
        for res in self.server.index.resources:
            if "create" not in res.verbs or res.verbs == ("create",) or res.storage_alias:
                continue  # computed or review resources store nothing; aliases share another's storage
            want = storage_version(res, self.id)
            name = want["metadata"]["name"]
            try:
                current = await rest.get(sv_res, "v1alpha1", None, name)
            except APIError as e:
                if e.code != 404:
                    raise
                current = (await rest.create(sv_res, "v1alpha1", None, {"metadata": want["metadata"]}, self.opts)).obj
            if current.get("status") != want["status"]:
                await rest.update(sv_res, "v1alpha1", None, name, {**copy.deepcopy(current), "status": want["status"]},
                                  self.opts, subresource="status")
