"""What follows a container's exit: its own restartPolicy and restartPolicyRules
(KEP-5307 ContainerRestartRules, beta and on in 1.37) before the pod's restartPolicy, and the
RestartAllContainers action (KEP-5532, beta in 1.36) that restarts the whole pod in place.

As upstream's podutil.ContainerShouldRestart, which the kubelet acts on and the API server's
status validation allows for: the first rule whose exit codes match decides; with none matching,
the container's own policy (or, without one, the pod's) does."""

from __future__ import annotations

RESTART = "Restart"
RESTART_ALL = "RestartAllContainers"
#: the condition a pod with a RestartAllContainers rule carries (GenerateAllContainersRestartingCondition)
CONDITION = "AllContainersRestarting"
STARTED_REASON = "RestartAllContainersStarted"
STARTED_MESSAGE = "container exited with restart policy rule"


def _matches(rule: dict, code: int) -> bool:
    codes = rule.get("exitCodes") or {}
    found = code in (codes.get("values") or ())
    return found if codes.get("operator") == "In" else not found


def on_exit(container: dict, pod_policy: str, code: int) -> str | None:
    """What follows the container's exit with `code`: RESTART, RESTART_ALL, or None (it stays terminated)."""
    for rule in container.get("restartPolicyRules") or ():
        if _matches(rule, code):
            return rule.get("action")
    policy = container.get("restartPolicy") or pod_policy
    if policy == "Always" or (policy == "OnFailure" and code != 0):
        return RESTART
    return None


def restarts_all(pod: dict) -> bool:
    """Whether a container of the pod has a RestartAllContainers rule (AllContainersCouldRestart):
    only such a pod reports the AllContainersRestarting condition."""
    spec = pod.get("spec") or {}
    return any(rule.get("action") == RESTART_ALL for c in (spec.get("initContainers") or []) + (spec.get("containers") or [])
               for rule in c.get("restartPolicyRules") or ())


def condition_status(restarting: bool, phase: str) -> tuple[bool, str, str]:
    """The AllContainersRestarting condition's status, reason and message: True while the pod's
    containers are stopped to restart, False with the pod's end as reason once it ended."""
    if restarting:
        return True, STARTED_REASON, STARTED_MESSAGE
    return False, {"Succeeded": "PodCompleted", "Failed": "PodFailed"}.get(phase, ""), ""
