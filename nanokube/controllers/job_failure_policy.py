"""A Job's podFailurePolicy applied to one failed pod: the first rule whose
exit codes or pod conditions match decides whether the Job fails at once
(FailJob), the failure is not counted against backoffLimit (Ignore), or it
is counted as usual (Count). The messages are upstream's."""

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
