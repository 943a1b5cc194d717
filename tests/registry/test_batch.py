import copy

import pytest

from nanokube.registry import batch
from nanokube.registry.base import all_resources

UID = "0b7e5a1c-1111-2222-3333-444455556666"


@pytest.fixture(autouse=True)
def _pod_rules(monkeypatch):
    """Pod-template rules belong to the core group; stand in for them here."""
    monkeypatch.setattr(batch, "pod_template_errors", lambda t, p, old_ips=(): [])
    monkeypatch.setattr(batch, "default_pod_template", lambda t: None)


STRATEGY = next(r for r in all_resources() if r.group == "batch" and r.plural == "jobs").strategy


def job(**spec):
    return {"metadata": {"name": "pi", "namespace": "default", "uid": UID},
            "spec": {"template": {"spec": {"restartPolicy": "Never",
                                           "containers": [{"name": "pi", "image": "perl"}]}}, **spec}}


def created(obj):
    STRATEGY.default(obj, "v1")
    STRATEGY.prepare_for_create(obj)
    return obj


def fields(errs):
    return [(e.reason, e.field) for e in errs]


def test_registration():
    r = next(r for r in all_resources() if r.group == "batch" and r.plural == "jobs")
    assert (r.namespaced, r.categories, r.subresources) == (True, ("all",), ("status",))


def test_defaults():
    spec = created(job())["spec"]
    assert (spec["completions"], spec["parallelism"], spec["backoffLimit"]) == (1, 1, 6)
    assert (spec["completionMode"], spec["suspend"], spec["podReplacementPolicy"]) == ("NonIndexed", False, "TerminatingOrFailed")


def test_defaults_with_per_index_backoff_and_failure_policy():
    spec = created(job(parallelism=3, backoffLimitPerIndex=1, completionMode="Indexed",
                       podFailurePolicy={"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}))["spec"]
    assert "completions" not in spec
    assert spec["backoffLimit"] == 2**31 - 1
    assert spec["podReplacementPolicy"] == "Failed"
    assert spec["podFailurePolicy"]["rules"][0]["onPodConditions"][0]["status"] == "True"


def test_generated_selector_and_labels():
    obj = created(job())
    assert obj["spec"]["selector"] == {"matchLabels": {batch.CONTROLLER_UID: UID}}
    labels = obj["spec"]["template"]["metadata"]["labels"]
    assert labels == {"controller-uid": UID, "job-name": "pi", batch.CONTROLLER_UID: UID, batch.JOB_NAME: "pi"}
    assert obj["metadata"]["labels"] == labels
    assert STRATEGY.validate(obj) == []


def test_manual_selector_kept():
    obj = created(job(manualSelector=True, selector={"matchLabels": {"a": "b"}}))
    obj["spec"]["template"]["metadata"] = {"labels": {"a": "b"}}
    assert obj["spec"]["selector"] == {"matchLabels": {"a": "b"}}
    assert STRATEGY.validate(obj) == []


def test_wrong_selector_is_not_auto_generated():
    obj = created(job())
    obj["spec"]["selector"]["matchLabels"][batch.CONTROLLER_UID] = "other"
    errs = STRATEGY.validate(obj)
    assert ("FieldValueInvalid", "spec.selector") in fields(errs)
    assert any(e.detail == "`selector` does not match template `labels`" for e in errs)


def test_restart_policy():
    obj = created(job())
    obj["spec"]["template"]["spec"]["restartPolicy"] = "Always"
    errs = STRATEGY.validate(obj)
    assert [(e.field, e.message) for e in errs] == [
        ("spec.template.spec.restartPolicy", 'Required value: valid values: "OnFailure", "Never"')]


def test_counts_and_indexed_rules():
    obj = created(job(parallelism=-1, completionMode="Indexed", completions=None, maxFailedIndexes=2))
    obj["spec"]["completions"] = None
    errs = {(e.reason, e.field, e.detail) for e in STRATEGY.validate(obj)}
    assert ("FieldValueInvalid", "spec.parallelism", "must be greater than or equal to 0") in errs
    assert ("FieldValueRequired", "spec.completions", "when completion mode is Indexed") in errs
    assert ("FieldValueRequired", "spec.backoffLimitPerIndex", "when maxFailedIndexes is specified") in errs


def test_per_index_needs_indexed_mode():
    obj = created(job(backoffLimitPerIndex=1))
    assert ("FieldValueInvalid", "spec.backoffLimitPerIndex") in fields(STRATEGY.validate(obj))


def test_indexed_name_must_allow_pod_hostnames():
    obj = created(job(completionMode="Indexed", completions=10))
    obj["metadata"]["name"] = "a" * 62
    errs = STRATEGY.validate(obj)
    assert any(e.field == "metadata.name" and e.detail.startswith("will not able to create pod") for e in errs)


def test_pod_failure_policy_rules():
    obj = created(job(podFailurePolicy={"rules": [
        {"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [3, 0, 3], "containerName": "x"}},
        {"action": "Explode"},
    ]}))
    errs = {(e.field, e.detail) for e in STRATEGY.validate(obj)}
    p = "spec.podFailurePolicy.rules"
    assert (f"{p}[0].action", "requires the backoffLimitPerIndex to be set") in errs
    assert (f"{p}[0].onExitCodes.containerName", "must be one of the container or initContainer names in the pod template") in errs
    assert (f"{p}[0].onExitCodes.values[1]", "must not be 0 for the In operator") in errs
    assert (f"{p}[0].onExitCodes.values[2]", "") in errs  # duplicate
    assert (f"{p}[0].onExitCodes.values", "must be ordered") in errs
    assert (f"{p}[1]", "specifying one of OnExitCodes and OnPodConditions is required") in errs
    assert any(f == f"{p}[1].action" for f, _ in errs)


def test_pod_replacement_policy_with_failure_policy():
    obj = created(job(podFailurePolicy={"rules": []}, podReplacementPolicy="TerminatingOrFailed"))
    assert ("FieldValueNotSupported", "spec.podReplacementPolicy") in fields(STRATEGY.validate(obj))


def test_success_policy():
    obj = created(job(successPolicy={"rules": [{"succeededIndexes": "0-2,5", "succeededCount": 5}]},
                      completionMode="Indexed", completions=4))
    errs = {(e.field, e.detail) for e in STRATEGY.validate(obj)}
    r = "spec.successPolicy.rules[0]"
    assert (f"{r}.succeededIndexes", 'error parsing succeededIndexes: too large index: "5"') in errs
    assert (f"{r}.succeededCount", "must be less than or equal to 4 (the number of specified completions)") in errs
    obj = created(job(successPolicy={"rules": []}))
    errs = {(e.field, e.detail) for e in STRATEGY.validate(obj)}
    assert ("spec.successPolicy", "requires indexed completion mode") in errs
    assert ("spec.successPolicy.rules", "at least one rules must be specified when the successPolicy is specified") in errs


def test_parse_indexes():
    assert batch.parse_indexes("1,3-5,7", 10) == 5
    with pytest.raises(ValueError, match="non-increasing order"):
        batch.parse_indexes("3,2", 10)


def test_scheduling_claims_limit_and_immutability():
    claims = [{"name": f"c{i}", "resourceClaimName": f"rc{i}"} for i in range(5)]
    obj = created(job(scheduling={"resourceClaims": claims}))
    assert ("FieldValueTooMany", "spec.scheduling.resourceClaims") in fields(STRATEGY.validate(obj))
    old = created(job(scheduling={"resourceClaims": claims[:1]}))
    new = copy.deepcopy(old)
    new["spec"]["scheduling"]["resourceClaims"] = claims[1:2]
    assert ("FieldValueInvalid", "spec.scheduling.resourceClaims") in fields(STRATEGY.validate_update(new, old))


def test_update_immutability():
    old = created(job())
    new = copy.deepcopy(old)
    new["spec"]["completions"] = 3
    new["spec"]["template"]["spec"]["containers"][0]["image"] = "perl:2"
    errs = {(e.field, e.detail) for e in STRATEGY.validate_update(new, old)}
    assert errs == {("spec.completions", "field is immutable"), ("spec.template", "field is immutable")}


def test_elastic_indexed_completions():
    old = created(job(completionMode="Indexed", completions=2, parallelism=2))
    new = copy.deepcopy(old)
    new["spec"]["completions"] = 4
    errs = STRATEGY.validate_update(new, old)
    assert [(e.field, e.detail) for e in errs] == [("spec.completions", "can only be modified in tandem with spec.parallelism")]
    new["spec"]["parallelism"] = 4
    assert STRATEGY.validate_update(new, old) == []


def test_suspended_job_may_change_scheduling_directives():
    old = created(job(suspend=True))
    new = copy.deepcopy(old)
    new["spec"]["template"]["spec"]["nodeSelector"] = {"zone": "a"}
    new["spec"]["template"]["spec"]["affinity"] = {"nodeAffinity": {"x": 1}}
    assert STRATEGY.validate_update(new, old) == []
    new["spec"]["suspend"] = False
    assert ("FieldValueInvalid", "spec.template") in fields(STRATEGY.validate_update(new, old))


def test_status_update_rules():
    old = created(job())
    old["status"] = {"succeeded": 2, "conditions": [{"type": "Complete", "status": "True"}]}
    new = copy.deepcopy(old)
    new["status"] = {"succeeded": 1, "active": -1, "uncountedTerminatedPods": {"succeeded": ["a"], "failed": ["a", ""]}}
    found = STRATEGY.validate_status_update(new, old)
    errs = {(e.field, e.detail) for e in found}
    assert ("status.active", "must be greater than or equal to 0") in errs
    assert ("status.succeeded", "cannot decrease the succeeded counter") in errs
    # field.OmitValueType{}: no value in the message
    assert "status.conditions: Invalid value: cannot disable the terminal Complete=True condition" in map(str, found)
    assert ("status.uncountedTerminatedPods.failed[0]", "") in errs
    assert ("status.uncountedTerminatedPods.failed[1]", "must not be empty") in errs


def test_columns():
    strat = batch.JobStrategy(clock=lambda: 1_000_100.0)
    obj = created(job(parallelism=3, completions=None))
    obj["spec"].pop("completions")
    obj["status"] = {"succeeded": 1, "startTime": "1970-01-12T13:46:40Z"}
    cells = {c.name: c.fn(obj) for c in strat.columns if c.name != "Age"}
    assert cells["Status"] == "Running"
    assert cells["Completions"] == "1/1 of 3"
    assert cells["Duration"] == "100s"
    obj["status"]["completionTime"] = "1970-01-12T13:56:40Z"
    obj["status"]["conditions"] = [{"type": "Complete", "status": "True"}]
    cells = {c.name: c.fn(obj) for c in strat.columns if c.name != "Age"}
    assert (cells["Status"], cells["Duration"]) == ("Complete", "10m")
    assert cells["Selector"] == f"{batch.CONTROLLER_UID}={UID}"
    obj["status"]["conditions"] = [{"type": "Suspended", "status": "True"}]
    assert batch.job_status(obj) == "Suspended"
    assert strat.field_selectors["status.successful"](obj) == "1"


async def test_over_http_a_pod_failure_policy_needs_restart_policy_never(core):
    """ValidateJobSpec: OnFailure is a Job's restart policy, but not beside a podFailurePolicy."""
    import asyncio
    import json

    from kubernetes import client
    from kubernetes.client.rest import ApiException

    jobs = client.BatchV1Api(core.api_client)
    body = {"metadata": {"name": "j"}, "spec": {
        "podFailurePolicy": {"rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}]},
        "template": {"spec": {"restartPolicy": "OnFailure", "containers": [{"name": "c", "image": "i"}]}}}}
    with pytest.raises(ApiException) as e:
        await asyncio.to_thread(jobs.create_namespaced_job, "default", body)
    assert e.value.status == 422
    assert [(c["field"], c["message"]) for c in json.loads(e.value.body)["details"]["causes"]] == [
        ("spec.template.spec.restartPolicy",
         'Invalid value: "OnFailure": only "Never" is supported when podFailurePolicy is specified')]
    body["spec"]["template"]["spec"]["restartPolicy"] = "Never"
    made = await asyncio.to_thread(jobs.create_namespaced_job, "default", body)
    assert made.spec.pod_failure_policy.rules[0].action == "FailJob"
