"""ResourceClaim controller: creates the claims pods ask for through a
ResourceClaimTemplate (recording their names in the pod status), and the
claims PodGroups share (one per group entry, owned by the PodGroup and
recorded in its status and in its member pods' status), drops
finished or deleted pods from a claim's reservedFor, deallocates a claim
nothing reserves any more and removes its delete-protection finalizer, and
deletes generated claims whose pod is gone or done."""

from __future__ import annotations

from ..client.record import CoreEventRecorder
from ..machinery.errors import APIError
from ..machinery.featuregates import enabled
from ..dra.extended_resources import claim_name as extended_claim_name
from ..dra.resourceclaim import ClaimError, claim_name
from ..dra.resourceclaim import FINALIZER, GROUP, VERSION
from ..dra.podgroup_claims import API_GROUP, PODGROUP_CLAIM_ANNOTATION, generated_claim, group_entry
from ..machinery.podgroups import POD_GROUP_INDEX, group_key
from ..machinery.podphase import pod_is_terminal
from .base import Controller

POD_CLAIM_ANNOTATION = "resource.kubernetes.io/pod-claim-name"


def claim_names_extended(pod: dict) -> set[str]:
    """The pod's extended resource claim (DRAExtendedResource), as a set of at most one name."""
    name = extended_claim_name(pod)
    return {name} if name else set()


def pod_done(pod: dict) -> bool:
    """Terminal, or deleted before it was ever scheduled: it will never use a claim."""
    if pod_is_terminal(pod):
        return True
    return bool(pod["metadata"].get("deletionTimestamp")) and not (pod.get("spec") or {}).get("nodeName")


def _owner_uid(claim: dict) -> str | None:
    """The uid of the Pod or PodGroup a generated claim belongs to."""
    for r in claim["metadata"].get("ownerReferences") or []:
        if r.get("controller") and r.get("kind") in ("Pod", "PodGroup"):
            return r.get("uid")
    return None


def _owner_pod(claim: dict) -> tuple[str, str] | None:
    for r in claim["metadata"].get("ownerReferences") or []:
        if r.get("controller") and r.get("kind") == "Pod" and r.get("apiVersion") == "v1":
            return r.get("name", ""), r.get("uid", "")
    return None


class ResourceClaimController(Controller):
    name = "resourceclaim-controller"
    aliases = ("resource-claim-controller",)
    queue_name = "resource_claim"

    def __init__(self, client, clock=None, **kw):
        super().__init__(client, **({"clock": clock} if clock else {}), **kw)
        self.pods_api = client.resource("", "v1", "pods")
        self.claims_api = client.resource(GROUP, VERSION, "resourceclaims")
        self.templates_api = client.resource(GROUP, VERSION, "resourceclaimtemplates")
        self.pods = self.informer_factory.informer(self.pods_api)
        self.pods.add_index(POD_GROUP_INDEX, group_key)
        self.claims = self.informer_factory.informer(self.claims_api)
        self.pods.add_handlers(self._pod_changed, lambda o, n: self._pod_changed(n), self._pod_changed)
        self.claims.add_handlers(self._claim_added, self._claim_updated, self._claim_deleted)
        #: a PodGroup's claims (DRAWorkloadResourceClaims, over GenericWorkload); off, no PodGroup is read
        self.podgroups = None
        if enabled("GenericWorkload") and enabled("DRAWorkloadResourceClaims"):
            self.podgroups_api = client.resource(API_GROUP, "v1beta1", "podgroups")
            self.podgroups = self.informer_factory.informer(self.podgroups_api)
            self.podgroups.add_handlers(self._podgroup_changed, lambda o, n: self._podgroup_changed(n),
                                        self._podgroup_deleted)
        #: generated claims by the uid of the pod or PodGroup that controls them
        self._by_owner: dict[str, dict[str, dict]] = {}
        #: uids of claims deleted whose deletion the informer has not shown yet
        self._deleted: set[str] = set()
        self.recorder = CoreEventRecorder(client, self.name, self.clock)

    def informers(self):
        return [self.pods, self.claims, *([self.podgroups] if self.podgroups else [])]

    def _podgroup_changed(self, pg: dict) -> None:
        """A group's claims are generated with the group; its members wait for them."""
        md = pg["metadata"]
        ns = md.get("namespace", "")
        if not (pg.get("spec") or {}).get("resourceClaims"):
            return
        self.queue.add(("podgroup", ns, md["name"]))
        for pod in self.pods.by_index(POD_GROUP_INDEX, f"{ns}/{md['name']}"):  # its members, not the namespace
            if (pod.get("spec") or {}).get("resourceClaims"):
                self.queue.add(("pod", ns, pod["metadata"]["name"]))

    def _podgroup_deleted(self, pg: dict) -> None:
        """Claims reserved for the group lose that reservation."""
        md = pg["metadata"]
        ns = md.get("namespace", "")
        for claim in self.claims.list_namespace(ns):
            if any(r.get("resource") == "podgroups" and r.get("uid") == md.get("uid")
                   for r in (claim.get("status") or {}).get("reservedFor") or []):
                self._claim_changed(claim)

    def _pod_changed(self, pod: dict) -> None:
        claims = (pod.get("spec") or {}).get("resourceClaims")
        statuses = (pod.get("status") or {}).get("resourceClaimStatuses")
        extended = claim_names_extended(pod)
        if not claims and not statuses and not extended:  # most pods: every write of each is handed here
            return
        md = pod["metadata"]
        ns = md.get("namespace", "")
        if claims:
            self.queue.add(("pod", ns, md["name"]))
        names = {st.get("resourceClaimName") for st in statuses or []}
        names |= {pc.get("resourceClaimName") for pc in claims or []} | extended
        for name in names - {None}:
            self.queue.add(("claim", ns, name))

    def _claim_changed(self, claim: dict) -> None:
        md = claim["metadata"]
        self.queue.add(("claim", md.get("namespace", ""), md["name"]))

    def _index(self, claim: dict, add: bool) -> None:
        owner = _owner_uid(claim)
        if owner is None:
            return
        key = f"{claim['metadata'].get('namespace', '')}/{claim['metadata']['name']}"
        claims = self._by_owner.setdefault(owner, {})
        if add:
            claims[key] = claim
        else:
            claims.pop(key, None)
            if not claims:
                del self._by_owner[owner]

    def _claim_added(self, claim: dict) -> None:
        self._index(claim, True)
        self._claim_changed(claim)

    def _claim_updated(self, old: dict, new: dict) -> None:
        self._index(old, False)
        self._index(new, True)
        self._claim_changed(new)

    def _claim_deleted(self, claim: dict) -> None:
        self._index(claim, False)
        self._deleted.discard(claim["metadata"].get("uid"))
        self._claim_changed(claim)

    async def sync(self, key) -> None:
        kind, ns, name = key
        if kind == "pod":
            await self._sync_pod(ns, name)
        elif kind == "podgroup":
            await self._sync_podgroup(ns, name)
        else:
            await self._sync_claim(ns, name)

    # --- claims for pods -----------------------------------------------------

    async def _sync_pod(self, ns: str, name: str) -> None:
        pod = self.pods.get(f"{ns}/{name}")
        if pod is None or pod_done(pod) or pod["metadata"].get("deletionTimestamp"):
            return
        statuses = []
        key = group_key(pod)
        pg = self.podgroups.get(key) if key and self.podgroups else None
        for pc in (pod.get("spec") or {}).get("resourceClaims") or []:
            if not pc.get("resourceClaimTemplateName"):
                continue
            try:
                claim_name(pod, pc)
                continue
            except ClaimError:
                pass
            if group_entry(pg, pc) is not None:
                shared = generated_claim(pg, pc["name"])
                if shared is not None:  # else the PodGroup's sync generates it, then requeues the pod
                    statuses.append({"name": pc["name"], "resourceClaimName": shared})
                continue
            try:
                claim = self._existing_claim(pod, pc["name"]) or await self._create_claim(pod, pc)
            except APIError as e:  # the sync is retried; the pod says why it waits
                await self.recorder.emit({**pod, "kind": "Pod"}, "Warning", "FailedResourceClaimCreation",
                                         f"PodResourceClaim {pc['name']}: {e.message}")
                raise
            statuses.append({"name": pc["name"], "resourceClaimName": claim["metadata"]["name"]})
        if statuses:
            try:
                await self.pods_api.patch(name, {"status": {"resourceClaimStatuses": statuses}},
                                          "application/strategic-merge-patch+json", namespace=ns, subresource="status")
            except APIError as e:  # deleted since the informer saw it: nothing to do, as upstream's syncPod
                if e.code != 404:  # for a pod that is gone (its claims go with it: `_sync_claim`)
                    raise

    def _existing_claim(self, owner: dict, claim: str, annotation: str = POD_CLAIM_ANNOTATION) -> dict | None:
        """A claim generated earlier whose name never made it into the owner's status."""
        for c in self._by_owner.get(owner["metadata"].get("uid", ""), {}).values():
            if c["metadata"].get("namespace") == owner["metadata"].get("namespace") and \
                    (c["metadata"].get("annotations") or {}).get(annotation) == claim:
                return c
        return None

    async def _create_claim(self, owner: dict, entry: dict, owner_api: str = "v1",
                            annotation: str = POD_CLAIM_ANNOTATION) -> dict:
        """A claim from the entry's template, named after and controlled by its owner (a Pod or PodGroup)."""
        md = owner["metadata"]
        try:
            tmpl = await self.templates_api.get(entry["resourceClaimTemplateName"], md.get("namespace"))
        except APIError as e:  # upstream reads its lister, whose NotFound names the resource in the singular
            name = entry["resourceClaimTemplateName"]
            why = f'resourceclaimtemplate.{GROUP} "{name}" not found' if e.code == 404 else e.message
            raise APIError(e.code, e.reason, f'resource claim template "{name}": {why}') from None
        tmeta = (tmpl.get("spec") or {}).get("metadata") or {}
        # the template's labels, none where it has none (upstream copies its nil map, which is not sent)
        labels = {"labels": dict(tmeta["labels"])} if tmeta.get("labels") else {}
        claim = {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceClaim",
            "metadata": {
                "generateName": f"{md['name']}-{entry['name']}-", "namespace": md.get("namespace"), **labels,
                "annotations": {**(tmeta.get("annotations") or {}), annotation: entry["name"]},
                "ownerReferences": [{"apiVersion": owner_api, "kind": owner.get("kind") or "Pod", "name": md["name"],
                                     "uid": md.get("uid"), "controller": True, "blockOwnerDeletion": True}],
            },
            "spec": (tmpl.get("spec") or {}).get("spec") or {},
        }
        try:
            return await self.claims_api.create(claim)
        except APIError as e:  # upstream names the claim it asked for, which has no name yet
            raise APIError(e.code, e.reason, f"create ResourceClaim : {e.message}") from None

    # --- claims for PodGroups --------------------------------------------------

    async def _sync_podgroup(self, ns: str, name: str) -> None:
        """Generates the group's template claims and records them in its status."""
        pg = self.podgroups.get(f"{ns}/{name}")
        if pg is None or pg["metadata"].get("deletionTimestamp"):
            return
        statuses = []
        for entry in pg["spec"].get("resourceClaims") or []:
            if not entry.get("resourceClaimTemplateName") or generated_claim(pg, entry["name"]) is not None:
                continue
            claim = self._existing_claim(pg, entry["name"], PODGROUP_CLAIM_ANNOTATION) or await self._create_claim(
                {**pg, "kind": "PodGroup"}, entry, f"{API_GROUP}/v1beta1", PODGROUP_CLAIM_ANNOTATION)
            statuses.append({"name": entry["name"], "resourceClaimName": claim["metadata"]["name"]})
        if statuses:
            kept = (pg.get("status") or {}).get("resourceClaimStatuses") or []
            try:
                await self.podgroups_api.patch(name, {"status": {"resourceClaimStatuses": kept + statuses}},
                                               "application/merge-patch+json", namespace=ns, subresource="status")
            except APIError as e:  # deleted since the informer saw it: nothing to do, as for a pod (its
                if e.code != 404:  # claims, which it controls, go with it)
                    raise

    # --- reservations and deallocation -----------------------------------------

    async def _consumer_gone(self, ns: str, ref: dict) -> bool:
        if ref.get("resource") == "pods" and not ref.get("apiGroup"):
            pod = self.pods.get(f"{ns}/{ref.get('name')}")
            if pod is None:  # the informer may lag behind a pod the scheduler just saw
                try:
                    pod = await self.pods_api.get(ref.get("name", ""), ns)
                except APIError as e:
                    if e.code != 404:
                        raise
                    return True
            return pod["metadata"].get("uid") != ref.get("uid") or pod_done(pod)
        if ref.get("resource") == "podgroups" and ref.get("apiGroup") == "scheduling.k8s.io" and self.podgroups:
            try:
                pg = await self.client.resource("scheduling.k8s.io", "v1beta1", "podgroups").get(ref.get("name", ""), ns)
            except APIError as e:
                if e.code != 404:
                    raise
                return True
            return pg["metadata"].get("uid") != ref.get("uid")
        return False

    async def _sync_claim(self, ns: str, name: str) -> None:
        claim = self.claims.get(f"{ns}/{name}")
        if claim is None:
            return
        status = claim.get("status") or {}
        reserved = status.get("reservedFor") or []
        valid = [r for r in reserved if not await self._consumer_gone(ns, r)]
        allocated = status.get("allocation") is not None
        protected = FINALIZER in (claim["metadata"].get("finalizers") or [])
        deallocate = allocated and not valid and protected and (len(valid) < len(reserved)
                                                                or claim["metadata"].get("deletionTimestamp"))
        if len(valid) < len(reserved) or deallocate:
            new_status = {k: v for k, v in status.items() if k != "reservedFor"}
            if valid:
                new_status["reservedFor"] = valid
            if deallocate:
                new_status.pop("allocation", None)
            claim = await self.claims_api.update({**claim, "status": new_status}, subresource="status")
        # an unallocated claim keeps the finalizer the scheduler may have just
        # added for the allocation it is about to write, unless it is deleted
        if protected and (deallocate or not allocated and claim["metadata"].get("deletionTimestamp")):
            fins = [f for f in claim["metadata"].get("finalizers") or [] if f != FINALIZER]
            claim = await self.claims_api.update({**claim, "metadata": {**claim["metadata"], "finalizers": fins}})
        if not valid:
            await self._delete_if_orphaned(claim)

    async def _delete_if_orphaned(self, claim: dict) -> None:
        """A generated claim whose pod is gone or done has no further use. Deleted once: releasing it
        (two updates) queues it again while the informer may still hold it."""
        owner = _owner_pod(claim)
        md = claim["metadata"]
        if owner is None or md.get("deletionTimestamp") or md.get("uid") in self._deleted:
            return
        if not await self._consumer_gone(md.get("namespace", ""), {"resource": "pods", "name": owner[0], "uid": owner[1]}):
            return
        try:
            await self.claims_api.delete(md["name"], md.get("namespace"), preconditions={"uid": md.get("uid")})
        except APIError as e:
            if e.code != 404:
                raise
            return
        if self.claims.get(f"{md.get('namespace', '')}/{md['name']}") is not None:
            self._deleted.add(md.get("uid"))
