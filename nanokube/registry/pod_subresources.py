"""Writes through pods/ephemeralcontainers and pods/resize: what each takes of the request
(the rest of the pod stays as stored, its metadata too, as upstream's strategies reset it for
status writes) and the rules each adds to the pod's validation (ValidatePodEphemeralContainersUpdate,
ValidatePodResize). PodStrategy runs the pod's own checks first."""

from __future__ import annotations

from . import spec_diff
from ..machinery.validation import FieldError, forbidden, invalid

EPHEMERAL = "ephemeralcontainers"
RESIZE = "resize"
#: the annotation of a static pod's mirror pod (neither subresource writes one; pod validation reads it too)
MIRROR = "kubernetes.io/config.mirror"
_ONLY_CPU_MEMORY = "only cpu and memory resources are mutable"
#: upstream's field.NewPath(""), a refusal of the whole write: an empty name prints as an empty subscript
_WHOLE = "[]"


def _reset(new: dict, old: dict, spec: dict) -> dict:
    """The stored pod with `spec`: metadata as stored (ResetObjectMetaForStatus) but for the
    managedFields the write tracked, status as stored."""
    md = {**old["metadata"]}
    sent = new.get("metadata") or {}
    if "managedFields" in sent:
        md["managedFields"] = sent["managedFields"]
    return {**old, "metadata": md, "spec": spec}


def keep_ephemeral_containers(new: dict, old: dict) -> dict:
    """dropNonEphemeralContainerUpdates: the stored pod with the request's ephemeral containers."""
    spec = {**(old.get("spec") or {})}
    ephemeral = (new.get("spec") or {}).get("ephemeralContainers")
    if ephemeral:
        spec["ephemeralContainers"] = ephemeral
    else:
        spec.pop("ephemeralContainers", None)
    return _reset(new, old, spec)


def keep_resize(new: dict, old: dict) -> dict:
    """dropNonResizeUpdates: the stored pod with the request's pod-level resources
    (InPlacePodLevelResourcesVerticalScaling, beta since 1.36) and container resources and resize
    policies. A request that adds, removes, reorders or renames containers keeps its lists as
    sent, for validation to refuse."""
    ns, os_ = new.get("spec") or {}, old.get("spec") or {}
    spec = {**os_}
    if "resources" in ns:
        spec["resources"] = ns["resources"]
    else:
        spec.pop("resources", None)
    for key in ("containers", "initContainers"):
        sent, stored = ns.get(key) or [], os_.get(key) or []
        if len(sent) != len(stored):
            return new
        if not sent:
            continue
        if any(c.get("name") != o.get("name") for c, o in zip(sent, stored)):
            spec[key] = sent
            continue
        merged = []
        for c, o in zip(sent, stored):
            m = {**o}
            for f in ("resources", "resizePolicy"):
                if f in c:
                    m[f] = c[f]
                else:
                    m.pop(f, None)
            merged.append(m)
        spec[key] = merged
    return _reset(new, old, spec)


def _mirror(pod: dict) -> bool:
    return MIRROR in ((pod.get("metadata") or {}).get("annotations") or {})


def ephemeral_refusal(old: dict) -> FieldError | None:
    """What refuses any change of a pod's ephemeral containers whatever else is wrong."""
    if _mirror(old):
        return forbidden(_WHOLE, "static pods do not support ephemeral containers")
    return None


def validate_ephemeral_containers_update(new: dict, old: dict) -> list[FieldError]:
    """Existing ephemeral containers stay as they are, matched by name (a patch may reorder them)."""
    path = "spec.ephemeralContainers"
    sent = {c.get("name"): c for c in (new.get("spec") or {}).get("ephemeralContainers") or ()}
    errs = []
    for o in (old.get("spec") or {}).get("ephemeralContainers") or ():
        name = o.get("name", "")
        c = sent.get(name)
        if c is None:
            errs.append(forbidden(path, f'existing ephemeral containers "{name}" may not be removed\n'))
        elif c != o:
            errs.append(forbidden(path, f'existing ephemeral containers "{name}" may not be changed\n{spec_diff.diff(o, c)}'))
    return errs


def resize_refusal(new: dict, old: dict) -> FieldError | None:
    """What refuses a resize whatever else is wrong: a static or a Windows pod."""
    if _mirror(old):
        return forbidden(_WHOLE, "static pods cannot be resized")
    if ((old.get("spec") or {}).get("os") or {}).get("name") == "windows":
        return forbidden(_WHOLE, "windows pods cannot be resized")
    return None


def validate_resize(new: dict, old: dict, old_qos: str, new_qos: str, errs: list[FieldError]) -> list[FieldError]:
    """ValidatePodResize past the pod's own checks (`errs`, which come first): the QoS class
    stays, the node reports container resources, no requests or limits go, and nothing but cpu and
    memory changes, of the pod's own resources (which a resize may add, KEP-5419), of containers
    and of init containers, sidecars or not (InPlacePodVerticalScalingInitContainers, beta in 1.36
    and GA in 1.37: kubernetes#137352, #140728)."""
    ns, os_ = new.get("spec") or {}, old.get("spec") or {}
    errs = list(errs)
    if old_qos != new_qos:
        errs.append(invalid("spec", (new.get("status") or {}).get("qosClass", ""),
                            "Pod QOS Class may not change as a result of resizing"))
    if not _resize_supported(old):
        errs.append(forbidden("spec", "Pod running on node without support for resize"))
    errs += _container_resize(ns, os_, "spec.resources")
    if not _only_cpu_memory_changed({"resources": ns.get("resources")}, {"resources": os_.get("resources")}):
        errs.append(forbidden("spec", _ONLY_CPU_MEMORY))
    containers, inits = ns.get("containers") or [], ns.get("initContainers") or []
    old_containers, old_inits = os_.get("containers") or [], os_.get("initContainers") or []
    same_shape = len(containers) == len(old_containers) and len(inits) == len(old_inits)
    if same_shape:
        for ix, o in enumerate(old_inits):
            errs += _container_resize(inits[ix], o, f"spec.initContainers[{ix}].resources")
        for ix, o in enumerate(old_containers):
            errs += _container_resize(containers[ix], o, f"spec.containers[{ix}].resources")
        for c, o in zip(containers, old_containers):
            if not _only_cpu_memory_changed(c, o):
                errs.append(forbidden("spec", _ONLY_CPU_MEMORY))
        for c, o in zip(inits, old_inits):
            if not _only_cpu_memory_changed(c, o):
                errs.append(forbidden("spec", "only cpu and memory resources for sidecar containers are mutable"
                                      if o.get("restartPolicy") == "Always" else _ONLY_CPU_MEMORY))
    if errs:
        return errs
    if not same_shape or any(ns.get(k) != os_.get(k) for k in set(ns) | set(os_)
                             if k not in ("containers", "initContainers", "resources")):
        return [forbidden("spec", _ONLY_CPU_MEMORY)]
    return []


def _resize_supported(pod: dict) -> bool:
    """isPodResizeRequestSupported: the first running container's status reports its resources
    (a node that resizes does); no running container: assumed to."""
    for s in (pod.get("status") or {}).get("containerStatuses") or ():
        if "running" in (s.get("state") or {}):
            return s.get("resources") is not None
    return True


def _container_resize(c: dict, o: dict, path: str) -> list[FieldError]:
    """validateContainerResize: no request or limit may go. A memory limit may shrink or appear
    whatever the resize policy since 1.34 (kubernetes#133012: the kubelet checks the usage first)."""
    res, old = c.get("resources") or {}, o.get("resources") or {}
    errs = []
    if _removed(res.get("requests"), old.get("requests")):
        errs.append(forbidden(f"{path}.requests", "resource requests cannot be removed"))
    if _removed(res.get("limits"), old.get("limits")):
        errs.append(forbidden(f"{path}.limits", "resource limits cannot be removed"))
    return errs


def _removed(now: dict | None, before: dict | None) -> bool:
    return any(name not in (now or {}) for name in before or {})


def _only_cpu_memory_changed(c: dict, o: dict) -> bool:
    """Whether `c` differs from the stored container `o` in nothing but its cpu and memory
    (dropCPUMemoryResourcesFromContainer, then a semantic comparison: an empty list is an absent
    one). Other resources count even where the stored container has no such list
    (kubernetes#135084); claims go, as upstream's rebuilt requirements hold only limits and requests."""
    res, old = c.get("resources") or {}, o.get("resources") or {}
    munged = {}
    for bag in ("limits", "requests"):
        kept = {k: v for k, v in (res.get(bag) or {}).items() if k not in ("cpu", "memory")}
        kept.update((k, v) for k, v in (old.get(bag) or {}).items() if k in ("cpu", "memory"))
        if kept:
            munged[bag] = kept
    stored = {k: v for k, v in old.items() if v}
    return munged == stored and {k: v for k, v in c.items() if k != "resources"} == \
        {k: v for k, v in o.items() if k != "resources"}
