"""Status conditions (`status.conditions`, a list keyed by `type`), as apimachinery's
meta.FindStatusCondition / IsStatusConditionTrue / SetStatusCondition / RemoveStatusCondition
and podutil.GetPodCondition / UpdatePodCondition.

The writers return new lists and never change the given one or its items: the lists they
are given usually belong to an informer's cached object."""

from __future__ import annotations

from collections.abc import Iterable


def find_condition(conditions: Iterable[dict] | None, ctype: str) -> dict | None:
    """The first condition of type `ctype`, or None (a plain loop: pod readiness asks it per pod)."""
    for c in conditions or ():
        if c.get("type") == ctype:
            return c
    return None


def is_condition_true(conditions: Iterable[dict] | None, ctype: str) -> bool:
    """A condition of type `ctype` has status True (with the types unique, as validation keeps them,
    IsStatusConditionTrue; with duplicates, any of them, as upstream's loops over a Job's conditions)."""
    for c in conditions or ():
        if c.get("type") == ctype and c.get("status") == "True":
            return True
    return False


def transition_time(old: dict | None, status: str | None, now: str | None) -> str | None:
    """The lastTransitionTime of a condition now at `status`: the old condition's while its status
    stays (and it has one), else `now` (upstream's rule, kubelet's updateLastTransitionTime too)."""
    if old is not None and old.get("status") == status and (since := old.get("lastTransitionTime")):
        return since
    return now


def observed_generation(obj: dict) -> dict:
    """The observedGeneration a condition written on `obj` carries, as a field to merge into it:
    the object's metadata.generation (podutil.CalculatePodConditionObservedGeneration with
    PodObservedGenerationTracking GA since 1.35), none where it has no generation."""
    gen = (obj.get("metadata") or {}).get("generation")
    return {"observedGeneration": gen} if gen else {}


def set_condition(conditions: Iterable[dict] | None, new: dict) -> list[dict]:
    """The conditions with `new` in place of the first of its type (appended when there is none;
    later ones of that type are dropped).

    `new` carries the time to record; its lastTransitionTime is replaced by the old condition's
    while the status stays the same, so a changed reason, message or observedGeneration alone
    moves no transition time (SetStatusCondition's rule)."""
    ctype = new["type"]
    out = []
    found = False
    for c in conditions or ():
        if c.get("type") != ctype:
            out.append(c)
        elif not found:
            found = True
            since = transition_time(c, new.get("status"), new.get("lastTransitionTime"))
            out.append(new if since == new.get("lastTransitionTime") else {**new, "lastTransitionTime": since})
    if not found:
        out.append(new)
    return out


def remove_condition(conditions: Iterable[dict] | None, ctype: str) -> list[dict]:
    """The conditions without those of type `ctype`."""
    return [c for c in conditions or () if c.get("type") != ctype]
