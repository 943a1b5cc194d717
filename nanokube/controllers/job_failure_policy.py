"""A Job's podFailurePolicy applied to one failed pod: the first rule whose
exit codes or pod conditions match decides whether the Job fails at once
(FailJob), the pod's index fails at once (FailIndex), the failure is not
counted against the backoff limits (Ignore), or it is counted as usual
(Count). The messages are upstream's.

With backoffLimitPerIndex an index's failures so far travel on each
replacement pod's annotations, so the count survives the failed pods."""

from __future__ import annotations

REASON = "PodFailurePolicy"


def _exit_code_match(rule: dict, pod: dict) -> dict | None:
    """The first container (regular, then init) that terminated with a
    non-zero exit code the rule's operator accepts."""
    req = rule["onExitCodes"]
    values = set(req.get("values") or [])
    status = pod.get("status") or {}
    for cs in (status.get("containerStatuses") or []) + (status.get("initContainerStatuses") or []):
        term = (cs.get("state") or {}).get("terminated")
        if term is None or term.get("exitCode", 0) == 0:
            continue
        if req.get("containerName") and req["containerName"] != cs["name"]:
            continue
        if (term["exitCode"] in values) == (req.get("operator") == "In"):
            return {"name": cs["name"], "exitCode": term["exitCode"]}
    return None


def _condition_match(rule: dict, pod: dict) -> str | None:
    conds = (pod.get("status") or {}).get("conditions") or []
    for pattern in rule["onPodConditions"]:
        want = pattern.get("status") or "True"
        if any(c["type"] == pattern["type"] and c.get("status") == want for c in conds):
            return pattern["type"]
    return None


def match(policy: dict | None, pod: dict) -> tuple[str, str] | None:
    """(action, message) of the first matching rule, or None (counted as usual)."""
    md = pod["metadata"]
    for i, rule in enumerate((policy or {}).get("rules") or []):
        action = rule.get("action")
        if rule.get("onExitCodes"):
            c = _exit_code_match(rule, pod)
            if c is not None:
                return action, (f"Container {c['name']} for pod {md['namespace']}/{md['name']} failed with exit "
                                f"code {c['exitCode']} matching {action} rule at index {i}")
        elif rule.get("onPodConditions"):
            ctype = _condition_match(rule, pod)
            if ctype is not None:
                return action, f"Pod {md['namespace']}/{md['name']} has condition {ctype} matching {action} rule at index {i}"
    return None


FAILURE_COUNT = "batch.kubernetes.io/job-index-failure-count"
IGNORED_COUNT = "batch.kubernetes.io/job-index-ignored-failure-count"


def _count(pod: dict, key: str) -> int:
    """An annotation's count; a missing or tampered value reads as 0, as upstream."""
    v = (pod["metadata"].get("annotations") or {}).get(key, "")
    return int(v) if v.isdigit() and int(v) <= 2**31 - 1 else 0


def failure_counts(pod: dict) -> tuple[int, int]:
    """(counted, ignored) failures of the pod's index before this pod ran."""
    return _count(pod, FAILURE_COUNT), _count(pod, IGNORED_COUNT)


def counts_after(spec: dict, failed_pod: dict | None) -> tuple[int, int]:
    """The counts a replacement for `failed_pod` carries: its own plus its
    failure, as ignored when the podFailurePolicy says Ignore."""
    if failed_pod is None:
        return 0, 0
    counted, ignored = failure_counts(failed_pod)
    verdict = match(spec.get("podFailurePolicy"), failed_pod)
    if verdict and verdict[0] == "Ignore":
        return counted, ignored + 1
    return counted + 1, ignored


def index_failed(spec: dict, failed_pod: dict) -> bool:
    """With backoffLimitPerIndex, whether this failure ends the pod's index:
    a FailIndex rule matched, or a counted failure when the index already
    used up its backoffLimitPerIndex."""
    verdict = match(spec.get("podFailurePolicy"), failed_pod)
    if verdict and verdict[0] == "FailIndex":
        return True
    if verdict and verdict[0] == "Ignore":
        return False
    return failure_counts(failed_pod)[0] >= spec["backoffLimitPerIndex"]
