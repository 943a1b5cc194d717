"""TTL-after-finished controller: a Job with `ttlSecondsAfterFinished`
is deleted (foreground, so its pods go first) that many seconds after its
Complete or Failed condition became True. The Job is read afresh before the
delete, and the delete is preconditioned on that resourceVersion, so a TTL
changed in the meantime is honoured."""

from __future__ import annotations

from ..machinery.errors import APIError
from ..client.informer import InformerFactory, key_of
from ..clock import REAL, Clock, parse_time
from .base import Controller


def expires_at(job: dict) -> float | None:
    """When the finished Job may be deleted; None while it runs or has no TTL."""
    ttl = job["spec"].get("ttlSecondsAfterFinished")
    if ttl is None or job["metadata"].get("deletionTimestamp"):
        return None
    for c in (job.get("status") or {}).get("conditions") or []:
        if c["type"] in ("Complete", "Failed") and c["status"] == "True" and c.get("lastTransitionTime"):
            return parse_time(c["lastTransitionTime"]) + ttl
    return None


class TTLAfterFinishedController(Controller):
    name = "ttl-after-finished-controller"
    queue_name = "ttl_jobs_to_delete"

    def __init__(self, client, clock: Clock = REAL, informers: InformerFactory | None = None):
        super().__init__(client, clock, informers)
        self.jobs_api = client.resource("batch", "v1", "jobs")
        self.jobs = self.informer_factory.informer(self.jobs_api)
        self.jobs.add_handlers(self._changed, lambda _o, n: self._changed(n))

    def informers(self):
        return [self.jobs]

    def _changed(self, job: dict) -> None:
        if expires_at(job) is not None:
            self.queue.add(key_of(job))

    async def sync(self, key: str) -> None:
        job = self.jobs.get(key)
        if job is None or (at := expires_at(job)) is None:
            return
        if at > self.clock.now():
            self.queue.add_after(key, at - self.clock.now())
            return
        ns, name = key.split("/", 1)
        try:
            fresh = await self.jobs_api.get(name, ns)
            at = expires_at(fresh)
            if at is None:
                return
            if at > self.clock.now():
                self.queue.add_after(key, at - self.clock.now())
                return
            await self.jobs_api.delete(name, ns, propagation_policy="Foreground",
                                       preconditions={"resourceVersion": fresh["metadata"]["resourceVersion"]})
        except APIError as e:
            if e.code != 404:
                raise
