"""WorkloadWithJob: a Job that sets `spec.scheduling` gets a Workload with one
pod group template and a PodGroup instantiated from it, both controlled by the
Job, before any of its pods exist; the pods then name that PodGroup in
`spec.schedulingGroup.podGroupName` so the scheduler can gang them.

Names derive from the Job's uid (KEP-5547's convention) so a recreated Job of
the same name never picks up the previous Job's objects, and a sync that lost
the race with its own earlier create finds the object by name.
"""

from __future__ import annotations

from ..machinery.errors import APIError
from ..machinery.meta import controller_ref
from ..client.informer import Informer, InformerFactory
from .deployment import template_hash
from .replicaset import owner_reference

API_VERSION = "scheduling.k8s.io/v1beta1"
TEMPLATE = "job"
#: fields of spec.scheduling copied verbatim into the template and the PodGroup
_COPIED = ("schedulingConstraints", "disruptionMode", "resourceClaims")


def uses_workload(job: dict) -> bool:
    """Only a Job asking for workload scheduling, whose pod template does not
    already name a group of the user's, gets objects of its own."""
    spec = job["spec"]
    return spec.get("scheduling") is not None and not (spec["template"].get("spec") or {}).get("schedulingGroup")


def workload_name(job: dict) -> str:
    return f"{job['metadata']['name']}-{template_hash(job['metadata']['uid'], None)}"


def pod_group_name(job: dict) -> str:
    return f"{workload_name(job)}-{TEMPLATE}"


def scheduling_policy(job: dict) -> dict:
    """spec.scheduling's policy, basic when unset; a gang without minCount
    takes `parallelism` (at least 1, since a suspended Job may have 0)."""
    policy = (job["spec"].get("scheduling") or {}).get("schedulingPolicy") or {}
    if "gang" not in policy or policy["gang"] is None:
        return {"basic": {}}
    min_count = policy["gang"].get("minCount")
    return {"gang": {"minCount": min_count if min_count is not None else max(1, job["spec"].get("parallelism", 1))}}


def pod_group_template(job: dict) -> dict:
    sched = job["spec"].get("scheduling") or {}
    return {"name": TEMPLATE, "schedulingPolicy": scheduling_policy(job),
            **{f: sched[f] for f in _COPIED if sched.get(f) is not None}}


def build_workload(job: dict) -> dict:
    md = job["metadata"]
    return {"apiVersion": API_VERSION, "kind": "Workload",
            "metadata": {"name": workload_name(job), "namespace": md["namespace"],
                         "ownerReferences": [owner_reference(job, "batch/v1", "Job")]},
            "spec": {"controllerRef": {"apiGroup": "batch", "kind": "Job", "name": md["name"]},
                     "podGroupTemplates": [pod_group_template(job)]}}


def build_pod_group(job: dict, workload: dict) -> dict:
    """The PodGroup copies the template (policy included) rather than pointing
    at it, so later template edits only affect groups created afterwards."""
    template = next(t for t in workload["spec"]["podGroupTemplates"] if t["name"] == TEMPLATE)
    wl_ref = {**owner_reference(workload, API_VERSION, "Workload"), "controller": False, "blockOwnerDeletion": False}
    return {"apiVersion": API_VERSION, "kind": "PodGroup",
            "metadata": {"name": pod_group_name(job), "namespace": job["metadata"]["namespace"],
                         "ownerReferences": [owner_reference(job, "batch/v1", "Job"), wl_ref]},
            "spec": {"workloadRef": {"workloadName": workload["metadata"]["name"], "templateName": TEMPLATE},
                     **{k: v for k, v in template.items() if k != "name"}}}


def owned_by(obj: dict, job: dict) -> bool:
    return (controller_ref(obj) or {}).get("uid") == job["metadata"]["uid"]


class JobWorkloads:
    """Finds or creates a Job's Workload and PodGroup, keeping gang.minCount
    in step with the Job. Its informers requeue the owning Job on any change."""

    def __init__(self, client, enqueue_job, informers: InformerFactory):
        self.workloads = client.resource("scheduling.k8s.io", "v1beta1", "workloads")
        self.pod_groups = client.resource("scheduling.k8s.io", "v1beta1", "podgroups")
        self.wl_inf = informers.informer(self.workloads)
        self.pg_inf = informers.informer(self.pod_groups)
        for inf in (self.wl_inf, self.pg_inf):
            inf.add_handlers(on_add=lambda o: self._owner_changed(o, enqueue_job),
                             on_update=lambda _, o: self._owner_changed(o, enqueue_job),
                             on_delete=lambda o: self._owner_changed(o, enqueue_job))

    def informers(self) -> list[Informer]:
        return [self.wl_inf, self.pg_inf]

    @staticmethod
    def _owner_changed(obj: dict, enqueue_job) -> None:
        ref = controller_ref(obj)
        if ref and ref.get("kind") == "Job":
            enqueue_job(f"{obj['metadata']['namespace']}/{ref['name']}")

    async def ensure(self, job: dict) -> str | None:
        """The PodGroup name the Job's pods should carry, once the Workload and
        then the PodGroup exist; None while an object of that name belongs to
        someone else (the Job must not start pods into a foreign group)."""
        ns = job["metadata"]["namespace"]
        workload = await self._get_or_create(self.wl_inf, self.workloads, build_workload(job), ns)
        if not owned_by(workload, job):
            return None
        workload = await self._sync_min_count(self.workloads, workload, job, self._workload_min_count)
        group = await self._get_or_create(self.pg_inf, self.pod_groups, build_pod_group(job, workload), ns)
        if not owned_by(group, job) or (group["spec"].get("workloadRef") or {}).get("workloadName") != workload_name(job):
            return None
        await self._sync_min_count(self.pod_groups, group, job, self._pod_group_min_count)
        return group["metadata"]["name"]

    @staticmethod
    async def _get_or_create(inf: Informer, rc, obj: dict, ns: str) -> dict:
        name = obj["metadata"]["name"]
        got = inf.get(f"{ns}/{name}")
        if got is not None:
            return got
        try:
            return await rc.create(obj)
        except APIError as e:
            if e.code != 409:
                raise
            return await rc.get(name, ns)  # created by an earlier sync the informer has not seen yet

    @staticmethod
    def _workload_min_count(obj: dict, min_count: int | None) -> dict:
        templates = [dict(t, schedulingPolicy={"gang": {"minCount": min_count}}) if t["name"] == TEMPLATE else t
                     for t in obj["spec"]["podGroupTemplates"]]
        return {**obj, "spec": {**obj["spec"], "podGroupTemplates": templates}}

    @staticmethod
    def _pod_group_min_count(obj: dict, min_count: int | None) -> dict:
        return {**obj, "spec": {**obj["spec"], "schedulingPolicy": {"gang": {"minCount": min_count}}}}

    @staticmethod
    def _current_min_count(obj: dict) -> int | None:
        spec = obj["spec"]
        policy = spec["schedulingPolicy"] if "schedulingPolicy" in spec else \
            next(t for t in spec["podGroupTemplates"] if t["name"] == TEMPLATE)["schedulingPolicy"]
        return (policy.get("gang") or {}).get("minCount")

    async def _sync_min_count(self, rc, obj: dict, job: dict, with_min_count) -> dict:
        """gang.minCount is the one mutable part: follow the Job's (explicit
        or parallelism-derived) value; basic groups have nothing to follow."""
        want = (scheduling_policy(job).get("gang") or {}).get("minCount")
        have = self._current_min_count(obj)
        if want is None or have is None or want == have:
            return obj
        return await rc.update(with_min_count(obj, want))
