"""podFailurePolicy rule matching for one failed pod, with upstream's messages."""

from nanokube.controllers.job_failure_policy import match

POLICY = {"rules": [
    {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
    {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [42]}},
    {"action": "Count", "onExitCodes": {"operator": "NotIn", "values": [1, 2]}},
]}


def failed_pod(exit_codes: dict, conditions=(), init: dict | None = None) -> dict:
    def statuses(codes):
        return [{"name": n, "state": {"terminated": {"exitCode": c}}} for n, c in codes.items()]
    st = {"phase": "Failed", "containerStatuses": statuses(exit_codes), "conditions": list(conditions)}
    if init:
        st["initContainerStatuses"] = statuses(init)
    return {"metadata": {"name": "p", "namespace": "ns"}, "status": st}


def test_exit_code_in_rule_fails_the_job_with_upstreams_message():
    assert match(POLICY, failed_pod({"side": 0, "main": 42})) == (
        "FailJob", "Container main for pod ns/p failed with exit code 42 matching FailJob rule at index 1")


def test_container_name_restricts_the_exit_code_rule():
    assert match(POLICY, failed_pod({"other": 42})) == (
        "Count", "Container other for pod ns/p failed with exit code 42 matching Count rule at index 2")


def test_pod_condition_rule_comes_first_and_status_defaults_to_true():
    disrupted = [{"type": "DisruptionTarget", "status": "True"}]
    assert match(POLICY, failed_pod({"main": 42}, disrupted)) == (
        "Ignore", "Pod ns/p has condition DisruptionTarget matching Ignore rule at index 0")
    assert match(POLICY, failed_pod({"main": 1}, [{"type": "DisruptionTarget", "status": "False"}])) is None


def test_zero_exit_codes_and_unmatched_codes_fall_through():
    assert match(POLICY, failed_pod({"main": 1})) is None
    assert match({"rules": [{"action": "FailJob", "onExitCodes": {"operator": "NotIn", "values": [5]}}]},
                 failed_pod({"main": 0})) is None
    assert match(None, failed_pod({"main": 42})) is None


def test_init_containers_are_checked_after_regular_ones():
    got = match({"rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [3]}}]},
                failed_pod({"main": 0}, init={"setup": 3}))
    assert got == ("FailJob", "Container setup for pod ns/p failed with exit code 3 matching FailJob rule at index 0")
