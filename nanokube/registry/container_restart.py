"""A container's own restart policy and its restart rules (KEP-5307 ContainerRestartRules and
KEP-5532 RestartAllContainersOnContainerExits, both on by default in 1.37): what
validateContainerRestartPolicy and its rules' checks refuse, for regular and init containers alike.
A sidecar is an init container whose policy is Always; the rules only add exit codes that restart."""

from __future__ import annotations

from ..machinery.validation import FieldError, not_supported, required, too_many

CONTAINER_RESTART_POLICIES = ("Always", "OnFailure", "Never")
RULE_ACTIONS = ("Restart", "RestartAllContainers")
#: a sidecar restarts whenever it exits: a rule of its own can only restart the whole pod
SIDECAR_RULE_ACTIONS = ("RestartAllContainers",)
EXIT_CODE_OPERATORS = ("In", "NotIn")
MAX_RULES = 20
MAX_EXIT_CODES = 255


def validate_container_restart(c: dict, p: str, init: bool = False) -> list[FieldError]:
    """The policy one of the three values (an empty one too: a set pointer is checked); rules name
    the policy they fall back to, at most 20 of them, each with a known action (a sidecar's,
    an init container's with policy Always, RestartAllContainers alone: AllowRestartAllContainers)
    and an exitCodes condition (a known operator, at most 255 codes; any int32 code, none included)."""
    errs: list[FieldError] = []
    policy = c.get("restartPolicy")
    sidecar = init and policy == "Always"
    if policy is not None and policy not in CONTAINER_RESTART_POLICIES:
        errs.append(not_supported(f"{p}.restartPolicy", policy, CONTAINER_RESTART_POLICIES))
    rules = c.get("restartPolicyRules") or ()
    if not rules:
        return errs
    if policy is None:
        errs.append(required(f"{p}.restartPolicy", "must specify restartPolicy when restart rules are used"))
    actions = SIDECAR_RULE_ACTIONS if sidecar else RULE_ACTIONS
    rp = f"{p}.restartPolicyRules"
    if len(rules) > MAX_RULES:
        errs.append(too_many(rp, len(rules), MAX_RULES))
    for i, rule in enumerate(rules):
        ip = f"{rp}[{i}]"
        action = rule.get("action", "")
        if action not in actions:
            errs.append(not_supported(f"{ip}.action", action, actions))
        codes = rule.get("exitCodes")
        if codes is None:
            errs.append(required(f"{ip}.exitCodes", "must be specified"))
            continue
        operator = codes.get("operator", "")
        if operator not in EXIT_CODE_OPERATORS:
            errs.append(not_supported(f"{ip}.exitCodes.operator", operator, EXIT_CODE_OPERATORS))
        if len(values := codes.get("values") or ()) > MAX_EXIT_CODES:
            errs.append(too_many(f"{ip}.exitCodes.values", len(values), MAX_EXIT_CODES))
    return errs
