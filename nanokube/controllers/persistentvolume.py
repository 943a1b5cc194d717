"""The PersistentVolume controller (binder), as upstream's
pkg/controller/volume/persistentvolume: binds each claim to the smallest
fitting available volume (or the one it or the volume pre-binds), asks a
provisioner for a volume when none fits and the claim's StorageClass has one
(`volume.kubernetes.io/storage-provisioner`), leaves WaitForFirstConsumer
claims to the scheduler until a node is selected, gives claims created
before a default class existed that class, keeps both phases right, and
releases a volume whose claim is gone: Retain keeps it Released, Delete of a
provisioned volume is its provisioner's to carry out."""

from __future__ import annotations

import asyncio
import copy

from ..client.informer import InformerFactory
from ..clock import REAL, Clock
from ..machinery.errors import APIError
from ..volume.binding import (
    BIND_COMPLETED,
    BOUND_BY_CONTROLLER,
    PROVISIONED_BY,
    SELECTED_NODE,
    STORAGE_PROVISIONER,
    STORAGE_PROVISIONER_BETA,
    claim_ref_matches,
    find_matching_volume,
    volume_mismatch,
)
from ..volume.classes import (BETA_CLASS, WAIT_FOR_FIRST_CONSUMER, binding_mode, claim_class, default_class,
                              external_provisioner)
from .base import Controller
from ..client.record import CoreEventRecorder

CLAIM, VOLUME = "claim", "volume"
#: upstream's --pvclaimbinder-sync-period: every claim and volume is synced again this often
RESYNC = 15.0


def _ann(obj: dict) -> dict:
    return obj["metadata"].get("annotations") or {}


class PersistentVolumeController(Controller):
    name = "persistentvolume-binder-controller"
    aliases = ("persistentvolume-binder",)
    queue_name = "claims"

    def __init__(self, client, clock: Clock = REAL, resync: float = RESYNC,
                 informers: InformerFactory | None = None):
        super().__init__(client, clock, informers)
        self.resync = resync
        self.pvs = client.resource("", "v1", "persistentvolumes")
        self.pvcs = client.resource("", "v1", "persistentvolumeclaims")
        self.volumes = self.informer_factory.informer(self.pvs)
        self.claims = self.informer_factory.informer(self.pvcs)
        self.classes = self.informer_factory.informer(client.resource("storage.k8s.io", "v1", "storageclasses"))
        self.recorder = CoreEventRecorder(client, "persistentvolume-controller", clock)
        #: claim uid -> the last event reason recorded, so a waiting claim is not reported on every sync
        self._reported: dict[str, str] = {}
        self.claims.add_handlers(on_add=self._claim, on_update=lambda old, new: self._claim(new),
                                 on_delete=self._claim_gone)
        self.volumes.add_handlers(on_add=self._volume, on_update=lambda old, new: self._volume(new),
                                  on_delete=self._volume_gone)
        self.classes.add_handlers(on_add=lambda sc: self._pending_claims(),
                                  on_update=lambda old, new: self._pending_claims())

    def informers(self):
        return [self.classes, self.volumes, self.claims]

    async def start(self) -> None:
        await super().start()
        self._tasks.append(asyncio.create_task(self._resync_loop()))

    async def _resync_loop(self) -> None:
        while True:
            await self.clock.sleep(self.resync)
            for pv in self.volumes.list():
                self.queue.add((VOLUME, pv["metadata"]["name"]))
            for pvc in self.claims.list():
                self._claim(pvc)

    # --- event handlers -----------------------------------------------------------

    def _claim(self, pvc: dict) -> None:
        self.queue.add((CLAIM, f"{pvc['metadata']['namespace']}/{pvc['metadata']['name']}"))

    def _claim_gone(self, pvc: dict) -> None:
        self._reported.pop(pvc["metadata"].get("uid", ""), None)
        name = (pvc.get("spec") or {}).get("volumeName")
        if name:
            self.queue.add((VOLUME, name))

    def _volume(self, pv: dict) -> None:
        """A volume's own claim is synced with it; a free volume may suit any
        pending claim (upstream finds it at the next periodic resync)."""
        self.queue.add((VOLUME, pv["metadata"]["name"]))
        ref = (pv.get("spec") or {}).get("claimRef")
        if ref:
            self.queue.add((CLAIM, f"{ref.get('namespace')}/{ref.get('name')}"))
        elif (pv.get("status") or {}).get("phase") == "Available":
            self._pending_claims()

    def _volume_gone(self, pv: dict) -> None:
        ref = (pv.get("spec") or {}).get("claimRef")
        if ref:
            self.queue.add((CLAIM, f"{ref.get('namespace')}/{ref.get('name')}"))

    def _pending_claims(self) -> None:
        for pvc in self.claims.list():
            if (pvc.get("status") or {}).get("phase") != "Bound":
                self._claim(pvc)

    async def sync(self, key) -> None:
        kind, name = key
        if kind == CLAIM:
            pvc = self.claims.get(name)
            if pvc is not None:
                await self._sync_claim(pvc)
        else:
            pv = self.volumes.get(name)
            if pv is not None:
                await self._sync_volume(pv)

    async def _report(self, pvc: dict, type_: str, reason: str, message: str) -> None:
        uid = pvc["metadata"].get("uid", "")
        if self._reported.get(uid) == reason:
            return
        self._reported[uid] = reason
        await self.recorder.emit({"apiVersion": "v1", "kind": "PersistentVolumeClaim", **pvc}, type_, reason, message)

    # --- claims ---------------------------------------------------------------------

    async def _sync_claim(self, pvc: dict) -> None:
        volume_name = (pvc.get("spec") or {}).get("volumeName")
        if BIND_COMPLETED not in _ann(pvc):
            if volume_name:
                await self._sync_prebound_claim(pvc, volume_name)
            else:
                await self._sync_unbound_claim(pvc)
            return
        if not volume_name:
            await self._claim_lost(pvc, "ClaimLost", "Bound claim has lost reference to PersistentVolume. "
                                   "Data on the volume is lost!")
            return
        pv = self.volumes.get(volume_name)
        if pv is None:
            await self._claim_lost(pvc, "ClaimLost", "Bound claim has lost its PersistentVolume. Data on the volume is lost!")
        elif not (pv.get("spec") or {}).get("claimRef") or claim_ref_matches(pv, pvc):
            await self._bind(pv, pvc)
        else:
            await self._claim_lost(pvc, "ClaimMisbound", "Two claims are bound to the same volume, this one is bound incorrectly")

    async def _sync_unbound_claim(self, pvc: dict) -> None:
        spec = pvc.get("spec") or {}
        if spec.get("storageClassName") is None and BETA_CLASS not in _ann(pvc):
            sc = default_class(self.classes.list())
            if sc is not None:  # a claim made before the default class existed gets it now
                body = copy.deepcopy(pvc)
                body["spec"]["storageClassName"] = sc["metadata"]["name"]
                await self.pvcs.update(body)
                return
        cls = claim_class(pvc)
        sc = self.classes.get(cls) if cls else None
        delayed = binding_mode(sc) == WAIT_FOR_FIRST_CONSUMER and SELECTED_NODE not in _ann(pvc)
        pv = find_matching_volume(pvc, self.volumes.list(), delayed=delayed)
        if pv is not None:
            await self._bind(pv, pvc)
            return
        await self._set_claim_phase(pvc, "Pending")
        if delayed:
            await self._report(pvc, "Normal", "WaitForFirstConsumer", "waiting for first consumer to be created before binding")
        elif sc is not None and (prov := external_provisioner(sc)) is None:
            await self._report(pvc, "Warning", "ProvisioningFailed", f"no volume plugin matched name: {sc.get('provisioner')}")
        elif sc is not None:
            if _ann(pvc).get(STORAGE_PROVISIONER) != prov:
                body = copy.deepcopy(pvc)
                body["metadata"].setdefault("annotations", {}).update({STORAGE_PROVISIONER: prov, STORAGE_PROVISIONER_BETA: prov})
                await self.pvcs.update(body)
            await self._report(pvc, "Normal", "ExternalProvisioning",
                               f"Waiting for a volume to be created either by the external provisioner '{prov}' or "
                               "manually by the system administrator. If volume creation is delayed, please verify "
                               "that the provisioner is running and correctly registered.")
        elif cls and sc is None:
            await self._report(pvc, "Warning", "ProvisioningFailed", f'storageclass.storage.k8s.io "{cls}" not found')
        else:
            await self._report(pvc, "Normal", "FailedBinding",
                               "no persistent volumes available for this claim and no storage class is set")

    async def _sync_prebound_claim(self, pvc: dict, volume_name: str) -> None:
        pv = self.volumes.get(volume_name)
        if pv is None:
            await self._set_claim_phase(pvc, "Pending")
            await self._report(pvc, "Normal", "FailedBinding", f'volume "{volume_name}" not found')
        elif claim_ref_matches(pv, pvc):
            await self._bind(pv, pvc)
        elif not (pv.get("spec") or {}).get("claimRef"):
            if not (why := volume_mismatch(pv, pvc)):
                await self._bind(pv, pvc)
                return
            await self._set_claim_phase(pvc, "Pending")
            await self._report(pvc, "Warning", "VolumeMismatch", f'Cannot bind to requested volume "{volume_name}": {why}')
        else:
            await self._set_claim_phase(pvc, "Pending")
            await self._report(pvc, "Warning", "FailedBinding", f'volume "{volume_name}" already bound to a different claim.')

    async def _claim_lost(self, pvc: dict, reason: str, message: str) -> None:
        await self._set_claim_phase(pvc, "Lost")
        await self._report(pvc, "Warning", reason, message)

    async def _set_claim_phase(self, pvc: dict, phase: str) -> None:
        if (pvc.get("status") or {}).get("phase") == phase:
            return
        body = copy.deepcopy(pvc)
        body["status"] = {**(pvc.get("status") or {}), "phase": phase}
        await self.pvcs.update(body, subresource="status")

    async def _bind(self, pv: dict, pvc: dict) -> None:
        """Volume first (claimRef, then phase Bound), then the claim (volumeName
        and bind-completed, then status Bound with the volume's modes, and its size
        when the claim becomes Bound, as updateClaimStatus)."""
        md = pvc["metadata"]
        ref = (pv.get("spec") or {}).get("claimRef") or {}
        if ref.get("uid") != md.get("uid") or ref.get("name") != md["name"]:
            body = copy.deepcopy(pv)
            body["spec"]["claimRef"] = {"kind": "PersistentVolumeClaim", "namespace": md["namespace"], "name": md["name"],
                                        "uid": md["uid"], "apiVersion": "v1", "resourceVersion": md.get("resourceVersion", "")}
            body["metadata"].setdefault("annotations", {})[BOUND_BY_CONTROLLER] = "yes"
            pv = await self.pvs.update(body)
        pv = await self._set_volume_phase(pv, "Bound")
        spec = pvc.get("spec") or {}
        if spec.get("volumeName") != pv["metadata"]["name"] or BIND_COMPLETED not in _ann(pvc):
            body = copy.deepcopy(pvc)
            ann = body["metadata"].setdefault("annotations", {})
            if spec.get("volumeName") != pv["metadata"]["name"]:
                body["spec"]["volumeName"] = pv["metadata"]["name"]
                ann[BOUND_BY_CONTROLLER] = "yes"
            ann[BIND_COMPLETED] = "yes"
            pvc = await self.pvcs.update(body)
        old = pvc.get("status") or {}
        status = {**old, "phase": "Bound", "accessModes": list((pv.get("spec") or {}).get("accessModes") or [])}
        if old.get("phase") != "Bound":  # afterwards capacity and attributes class are the resizer's
            status["capacity"] = dict((pv.get("spec") or {}).get("capacity") or {})
            if (pv.get("spec") or {}).get("volumeAttributesClassName"):
                status["currentVolumeAttributesClassName"] = pv["spec"]["volumeAttributesClassName"]
        if status != pvc.get("status"):
            await self.pvcs.update({**pvc, "status": status}, subresource="status")
        self._reported.pop(md.get("uid", ""), None)

    # --- volumes ---------------------------------------------------------------------

    async def _set_volume_phase(self, pv: dict, phase: str, message: str = "") -> dict:
        status = pv.get("status") or {}
        if status.get("phase") == phase and status.get("message", "") == message:
            return pv
        new = {"phase": phase, "lastPhaseTransitionTime": self.clock.rfc3339()}
        if message:
            new["message"] = message
        return await self.pvs.update({**pv, "status": new}, subresource="status")

    async def _sync_volume(self, pv: dict) -> None:
        ref = (pv.get("spec") or {}).get("claimRef")
        if not ref or not ref.get("uid"):
            await self._set_volume_phase(pv, "Available")
            return
        key = f"{ref.get('namespace')}/{ref.get('name')}"
        pvc = self.claims.get(key)
        if pvc is None or pvc["metadata"].get("uid") != ref["uid"]:
            try:  # the informer may be behind: ask the server before releasing
                pvc = await self.pvcs.get(ref.get("name", ""), ref.get("namespace"))
            except APIError as e:
                if e.code != 404:
                    raise
                pvc = None
        if pvc is None or pvc["metadata"].get("uid") != ref["uid"]:
            await self._release(pv)
            return
        bound_to = (pvc.get("spec") or {}).get("volumeName")
        if bound_to == pv["metadata"]["name"] or (not bound_to and BOUND_BY_CONTROLLER in _ann(pv)):
            await self._set_volume_phase(pv, "Bound")
        elif not bound_to:
            await self._set_volume_phase(pv, "Available")
        elif BOUND_BY_CONTROLLER in _ann(pv):  # the claim went to another volume: give this one back
            body = copy.deepcopy(pv)
            del body["spec"]["claimRef"]
            body["metadata"]["annotations"].pop(BOUND_BY_CONTROLLER, None)
            pv = await self.pvs.update(body)
            await self._set_volume_phase(pv, "Available")

    async def _release(self, pv: dict) -> None:
        phase = (pv.get("status") or {}).get("phase")
        if phase not in ("Released", "Failed"):
            pv = await self._set_volume_phase(pv, "Released")
        policy = (pv.get("spec") or {}).get("persistentVolumeReclaimPolicy")
        if policy == "Delete" and not _ann(pv).get(PROVISIONED_BY) and phase != "Failed":
            message = f'error getting deleter volume plugin for volume "{pv["metadata"]["name"]}": no deletable volume plugin matched'
            pv = await self._set_volume_phase(pv, "Failed", message)
            await self.recorder.emit({"apiVersion": "v1", "kind": "PersistentVolume", **pv}, "Warning", "VolumeFailedDelete", message)
        elif policy == "Recycle" and phase != "Failed":
            message = "No recycler plugin found for the volume!"
            pv = await self._set_volume_phase(pv, "Failed", message)
            await self.recorder.emit({"apiVersion": "v1", "kind": "PersistentVolume", **pv}, "Warning", "VolumeFailedRecycle", message)
