"""The attach/detach controller, as upstream's pkg/controller/volume/attachdetach: a volume of a
CSI driver that needs attaching (its CSIDriver says attachRequired, or there is none) is attached
to the node of every pod scheduled there that mounts its claim, by a VolumeAttachment the driver's
external-attacher acts on; once that says `attached`, the volume is listed in the Node's
status.volumesAttached, which the kubelet waits for before it mounts, and the pods get
SuccessfulAttachVolume. When no pod on the node wants the volume any more (the pods went or
finished) and the kubelet no longer lists it in status.volumesInUse (or 6 minutes passed), the
volume is dropped from the Node's list and its VolumeAttachment deleted: the attacher detaches it
and lets the object go. A ReadWriteOnce volume attached to one node is not attached to a second
(Multi-Attach error); an attacher's attachError, or none answering within 2 minutes, is a
FailedAttachVolume on the pods, in upstream's words. Works per node, from informers only, and
detaches only its actual state of world's attachments: those it made and those found at its start
under the names it gives; another client's VolumeAttachments are left alone."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..client.informer import InformerFactory
from ..client.record import CoreEventRecorder
from ..clock import REAL, Clock
from ..machinery.errors import APIError
from ..machinery.podphase import pod_is_terminal
from ..volume.attachment import attach_required, attachment_name, unique_name, uses_claims
from .base import Controller
from .pvc_protection import claims_of

#: csiTimeout: how long the kubelet's CSI plugin in the controller waits for an attacher
ATTACH_TIMEOUT = 120.0
#: the reconciler's maxWaitForUnmountDuration: a volume still in use is detached after this long
MAX_WAIT_FOR_UNMOUNT = 360.0
SUCCESSFUL_ATTACH, FAILED_ATTACH = "SuccessfulAttachVolume", "FailedAttachVolume"
_NODE, _PV = "nodeName", "persistentVolumeName"


@dataclass
class _Wanted:
    pv: dict
    driver: str
    handle: str
    pods: list[dict] = field(default_factory=list)


def _running(statuses) -> bool:
    return any("running" in (s.get("state") or {}) for s in statuses or ())


def _terminated(pod: dict) -> bool:
    """IsPodTerminated: a terminal phase, or deleted with no container running."""
    if pod_is_terminal(pod):
        return True
    status = pod.get("status") or {}
    return bool(pod["metadata"].get("deletionTimestamp")) and not any(
        _running(status.get(f)) for f in ("initContainerStatuses", "containerStatuses", "ephemeralContainerStatuses"))


def _exclusive(pv: dict) -> bool:
    """IsMultiAttachAllowed, negated: access modes given and none of them ReadWriteMany or ReadOnlyMany."""
    modes = (pv.get("spec") or {}).get("accessModes") or ()
    return bool(modes) and not any(m in ("ReadWriteMany", "ReadOnlyMany") for m in modes)


class AttachDetachController(Controller):
    name = "persistentvolume-attach-detach-controller"
    aliases = ("attachdetach",)
    queue_name = "volumes"

    def __init__(self, client, clock: Clock = REAL, informers: InformerFactory | None = None):
        super().__init__(client, clock, informers)
        factory = self.informer_factory
        self.pods = factory.informer(client.resource("", "v1", "pods"))
        self.nodes = factory.informer(client.resource("", "v1", "nodes"))
        self.claims = factory.informer(client.resource("", "v1", "persistentvolumeclaims"))
        self.volumes = factory.informer(client.resource("", "v1", "persistentvolumes"))
        self.drivers = factory.informer(client.resource("storage.k8s.io", "v1", "csidrivers"))
        self.attachments = factory.informer(client.resource("storage.k8s.io", "v1", "volumeattachments"))
        self.attachments.add_index(_NODE, lambda va: (va.get("spec") or {}).get("nodeName"))
        self.attachments.add_index(_PV, lambda va: ((va.get("spec") or {}).get("source") or {}).get(_PV))
        self.vas = client.resource("storage.k8s.io", "v1", "volumeattachments")
        self.node_status = client.resource("", "v1", "nodes")
        self.recorder = CoreEventRecorder(client, "attachdetach-controller", clock)
        #: node name -> the keys of the pods there that mount a claim (the desired state's pods)
        self._pods_on: dict[str, dict[str, None]] = {}
        #: attachment name -> when it was asked for (attach) or found unwanted but in use (detach)
        self._attaching: dict[str, float] = {}
        self._unmounting: dict[str, float] = {}
        #: attachment name -> the last attach outcome told to its pods
        self._told: dict[str, str] = {}
        #: the actual state of world: attachment name -> its volume's unique name, for those this
        #: controller asked for (or found, under the name it gives, for a pod's volume) and those found
        #: at start whose PersistentVolume names them so (processVolumeAttachments' uncertain ones);
        #: it detaches only these, also after their PersistentVolume went. Another client's
        #: VolumeAttachment made later (another attacher's, a test's) is none of its business.
        self._known: dict[str, str] = {}
        #: PersistentVolume name -> the nodes waiting for it to be detached elsewhere
        self._blocked: dict[str, set[str]] = {}
        self.pods.add_handlers(on_add=self._pod, on_update=lambda old, new: self._pod(new), on_delete=self._pod_gone)
        self.nodes.add_handlers(on_add=self._node_added, on_update=self._node_updated,
                                on_delete=lambda n: self.queue.add(n["metadata"]["name"]))
        self.claims.add_handlers(on_update=self._claim_updated)
        self.attachments.add_handlers(on_add=self._attachment, on_update=lambda old, new: self._attachment(new),
                                      on_delete=self._attachment_gone)
        self.drivers.add_handlers(on_add=self._everywhere, on_update=lambda old, new: self._everywhere(new),
                                  on_delete=self._everywhere)

    def informers(self):
        return [self.nodes, self.volumes, self.claims, self.drivers, self.attachments, self.pods]

    async def start(self) -> None:
        await super().start()
        self._take_in_attachments()  # before any sync: the workers run from the next await on

    def _take_in_attachments(self) -> None:
        """processVolumeAttachments: a VolumeAttachment there at start, under the name this controller
        gives its PersistentVolume's volume on that node, is taken in as uncertain: attached again
        where a pod wants it, else detached."""
        for va in self.attachments.list():
            spec = va.get("spec") or {}
            pv = self.volumes.get((spec.get("source") or {}).get(_PV) or "")
            csi = ((pv or {}).get("spec") or {}).get("csi")
            if csi and va["metadata"]["name"] == attachment_name(
                    csi.get("volumeHandle", ""), csi.get("driver", ""), spec.get("nodeName", "")):
                self._known[va["metadata"]["name"]] = unique_name(csi.get("driver", ""), csi.get("volumeHandle", ""))

    # --- handlers: each pod event asks only whether the pod is on a node and mounts a claim ---

    def _pod(self, pod: dict) -> None:
        node = (pod.get("spec") or {}).get("nodeName")
        if node and uses_claims(pod):
            md = pod["metadata"]
            self._pods_on.setdefault(node, {})[f"{md['namespace']}/{md['name']}"] = None
            self.queue.add(node)

    def _pod_gone(self, pod: dict) -> None:
        node = (pod.get("spec") or {}).get("nodeName")
        if node and node in self._pods_on:
            md = pod["metadata"]
            self._pods_on[node].pop(f"{md['namespace']}/{md['name']}", None)
            self.queue.add(node)

    def _node_added(self, node: dict) -> None:
        name = node["metadata"]["name"]
        if name in self._pods_on or self.attachments.by_index(_NODE, name):
            self.queue.add(name)

    def _node_updated(self, old: dict, new: dict) -> None:
        """The kubelet's volumesInUse changed (a detach may wait for it), or someone rewrote ours."""
        before, after = old.get("status") or {}, new.get("status") or {}
        if before.get("volumesInUse") != after.get("volumesInUse") or \
                before.get("volumesAttached") != after.get("volumesAttached"):
            self.queue.add(new["metadata"]["name"])

    def _claim_updated(self, old: dict, new: dict) -> None:
        """A claim bound meanwhile: the nodes of its pods may need its volume now."""
        if (old.get("spec") or {}).get("volumeName") == (new.get("spec") or {}).get("volumeName"):
            return
        prefix = new["metadata"]["namespace"] + "/"
        for node, keys in self._pods_on.items():
            if any(k.startswith(prefix) for k in keys):
                self.queue.add(node)

    def _attachment(self, va: dict) -> None:
        if node := (va.get("spec") or {}).get("nodeName"):
            self.queue.add(node)

    def _attachment_gone(self, va: dict) -> None:
        """Detached (the actual state lets it go only now: until then it still holds its volume
        against a second node), or deleted by someone else (attached again if still wanted)."""
        self._known.pop(va["metadata"]["name"], None)
        self._attachment(va)
        for node in self._blocked.pop(((va.get("spec") or {}).get("source") or {}).get(_PV) or "", ()):
            self.queue.add(node)

    def _everywhere(self, _driver: dict) -> None:
        """A CSIDriver came, changed or went: whether its volumes need attaching may have changed."""
        for node in {*self._pods_on, *(((va.get("spec") or {}).get("nodeName") or "")
                                       for va in self.attachments.list())} - {""}:
            self.queue.add(node)

    # --- the reconciler, one node at a time ------------------------------------------------

    def _desired(self, node: str) -> dict[str, _Wanted]:
        """Attachment name -> what the node's pods want attached there."""
        out: dict[str, _Wanted] = {}
        keys = self._pods_on.get(node, {})
        for key in list(keys):
            pod = self.pods.get(key)
            if pod is None or (pod.get("spec") or {}).get("nodeName") != node:
                keys.pop(key, None)
                continue
            if _terminated(pod):
                continue
            ns = pod["metadata"]["namespace"]
            for claim in claims_of(pod):
                pvc = self.claims.get(f"{ns}/{claim}")
                pv = self.volumes.get(((pvc or {}).get("spec") or {}).get("volumeName") or "")
                csi = ((pv or {}).get("spec") or {}).get("csi")
                if not csi or not attach_required(self.drivers.get(csi.get("driver", ""))):
                    continue
                name = attachment_name(csi.get("volumeHandle", ""), csi.get("driver", ""), node)
                out.setdefault(name, _Wanted(pv, csi.get("driver", ""), csi.get("volumeHandle", ""))).pods.append(pod)
        if not keys:
            self._pods_on.pop(node, None)
        return out

    async def sync(self, node_name: str) -> None:
        node = self.nodes.get(node_name)
        wanted = self._desired(node_name) if node is not None else {}
        have = {va["metadata"]["name"]: va for va in self.attachments.by_index(_NODE, node_name)}
        now = self.clock.now()
        again: list[float] = []
        for name, want in wanted.items():
            va = have.get(name)
            if va is None:
                await self._attach(name, want, node_name)
                again.append(ATTACH_TIMEOUT)
            elif not va["metadata"].get("deletionTimestamp"):  # one being detached is asked for again once gone
                self._known[name] = unique_name(want.driver, want.handle)
                left = await self._attach_outcome(name, want, va, now)
                if left:
                    again.append(left)
        in_use = set(((node or {}).get("status") or {}).get("volumesInUse") or ())
        report, detach = [], []
        for name, va in have.items():
            unique = self._known.get(name)
            if unique is None or va["metadata"].get("deletionTimestamp"):
                continue  # not in the actual state of world, or being detached
            if name in wanted:
                self._unmounting.pop(name, None)
            elif unique in in_use and (left := self._unmounting.setdefault(name, now) + MAX_WAIT_FOR_UNMOUNT - now) > 0:
                again.append(left)  # the kubelet still has it mounted: wait, but not forever
            else:
                detach.append(name)
                continue
            if (va.get("status") or {}).get("attached"):
                report.append(unique)
        if node is not None:
            await self._report(node, report)  # before detaching, as RemoveVolumeFromReportAsAttached
        for name in detach:
            try:
                await self.vas.delete(name)
            except APIError as e:
                if e.code != 404:
                    raise
            for d in (self._attaching, self._unmounting, self._told):
                d.pop(name, None)
        if again:
            self.queue.add_after(node_name, max(min(again), 0.001))

    async def _attach(self, name: str, want: _Wanted, node: str) -> None:
        """Create the VolumeAttachment, unless the volume may be attached to one node only and is
        attached (or being attached) to another."""
        pv_name = want.pv["metadata"]["name"]
        elsewhere = [va for va in self.attachments.by_index(_PV, pv_name)
                     if va["spec"].get("nodeName") != node and va["metadata"]["name"] in self._known]
        if elsewhere and _exclusive(want.pv):
            self._blocked.setdefault(pv_name, set()).add(node)
            await self._multi_attach(name, want, {va["spec"].get("nodeName") for va in elsewhere})
            return
        try:
            await self.vas.create({"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment",
                                   "metadata": {"name": name},
                                   "spec": {"attacher": want.driver, "nodeName": node, "source": {_PV: pv_name}}})
        except APIError as e:
            if e.code != 409:
                raise
        self._known[name] = unique_name(want.driver, want.handle)
        self._attaching.setdefault(name, self.clock.now())

    async def _multi_attach(self, name: str, want: _Wanted, nodes: set[str]) -> None:
        """reportMultiAttachError: the pods of the same namespace using it elsewhere are named, the
        others only counted out."""
        pv = want.pv["metadata"]["name"]
        for pod in want.pods:
            ns = pod["metadata"]["namespace"]
            users = sorted(k.split("/", 1)[1] for n in nodes for k in self._pods_on.get(n, ())
                           if k.startswith(ns + "/") and (p := self.pods.get(k)) is not None
                           and not _terminated(p) and self._mounts(p, pv))
            why = f"Volume is already used by pod(s) {', '.join(users)}" if users else \
                "Volume is already exclusively attached to one node and can't be attached to another"
            await self.recorder.emit({"apiVersion": "v1", "kind": "Pod", **pod}, "Warning", FAILED_ATTACH,
                                     f'Multi-Attach error for volume "{pv}" {why}')
        self._told.pop(name, None)

    def _mounts(self, pod: dict, pv: str) -> bool:
        ns = pod["metadata"]["namespace"]
        return any(((self.claims.get(f"{ns}/{c}") or {}).get("spec") or {}).get("volumeName") == pv
                   for c in claims_of(pod))

    async def _attach_outcome(self, name: str, want: _Wanted, va: dict, now: float) -> float:
        """Tell the pods once the attacher attached the volume or failed to; the seconds left
        before its silence is a timeout (0 when there is nothing to wait for)."""
        status = va.get("status") or {}
        pv = want.pv["metadata"]["name"]
        if status.get("attached"):
            self._attaching.pop(name, None)
            await self._tell(name, want.pods, "Normal", SUCCESSFUL_ATTACH,
                             f'AttachVolume.Attach succeeded for volume "{pv}" ')
            return 0.0
        error = (status.get("attachError") or {}).get("message")
        if error:
            await self._tell(name, want.pods, "Warning", FAILED_ATTACH,
                             f'AttachVolume.Attach failed for volume "{pv}" : {error}')
            return 0.0
        left = self._attaching.setdefault(name, now) + ATTACH_TIMEOUT - now
        if left > 0:
            return left
        await self._tell(name, want.pods, "Warning", FAILED_ATTACH,
                         f'AttachVolume.Attach failed for volume "{pv}" : timed out waiting for external-attacher '
                         f"of {want.driver} CSI driver to attach volume {want.handle}")
        return 0.0

    async def _tell(self, name: str, pods: list[dict], type_: str, reason: str, message: str) -> None:
        if self._told.get(name) == message:
            return
        self._told[name] = message
        for pod in pods:
            await self.recorder.emit({"apiVersion": "v1", "kind": "Pod", **pod}, type_, reason, message)

    async def _report(self, node: dict, names: list[str]) -> None:
        """The Node's status.volumesAttached, written when it differs (the node status updater)."""
        names = sorted(set(names))
        if [v.get("name") for v in (node.get("status") or {}).get("volumesAttached") or ()] == names:
            return
        attached = [{"name": n, "devicePath": ""} for n in names] or None
        await self.node_status.patch(node["metadata"]["name"], {"status": {"volumesAttached": attached}},
                                     subresource="status")
