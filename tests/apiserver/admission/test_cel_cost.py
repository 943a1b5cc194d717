"""CEL limits of ValidatingAdmissionPolicies over HTTP, with the official client: the parser's
recursion limit, the per-call cost limit on what an expression actually does, and the
runtime cost budget a policy's expressions share."""

from __future__ import annotations

import asyncio
import json

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.served import served
from tests.controllers import tries

RULES = [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]}]


def policy(name: str, validations: list[dict], **spec) -> dict:
    return {"metadata": {"name": name}, "spec": {"matchConstraints": {"resourceRules": RULES},
                                                 "validations": validations, **spec}}


async def bind(admission, name: str, body: dict) -> None:
    await asyncio.to_thread(admission.create_validating_admission_policy, body)
    await asyncio.to_thread(admission.create_validating_admission_policy_binding, {
        "metadata": {"name": name}, "spec": {"policyName": name, "validationActions": ["Deny"]}})


async def test_a_long_operator_chain_is_the_parsers_recursion_error(tmp_path):
    """cel-go's parser counts one level per operator: 250 of them compile, 3,000 are refused with its
    'max recursion depth exceeded' at no location (was a Python RecursionError reported as the
    nesting limit at 1:1)."""
    chain = " + ".join(["1"] * 3000)
    async with served(tmp_path) as (_, api_client):
        admission = client.AdmissionregistrationV1Api(api_client)
        with pytest.raises(ApiException) as e:
            await asyncio.to_thread(admission.create_validating_admission_policy,
                                    policy("chain", [{"expression": f"{chain} > 0"}]))
        assert e.value.status == 422
        [cause] = json.loads(e.value.body)["details"]["causes"]
        assert cause["field"] == "spec.validations[0].expression"
        assert cause["message"].endswith(
            ": compilation failed: ERROR: <input>:-1:0: max recursion depth exceeded")
        made = await asyncio.to_thread(admission.create_validating_admission_policy,
                                       policy("fits", [{"expression": " + ".join(["1"] * 250) + " == 250"}]))
        assert made.metadata.name == "fits"


def _labelled(name: str, label: str, validations: list[dict]) -> dict:
    return policy(name, validations, matchConstraints={
        "resourceRules": RULES, "objectSelector": {"matchLabels": {"set": label}}})


async def _create(core, name: str, label: str, data: dict) -> tuple[int, str]:
    body = {"metadata": {"name": name, "labels": {"set": label}}, "data": data}
    try:
        await asyncio.to_thread(core.create_namespaced_config_map, "default", body, dry_run="All")
    except ApiException as e:
        return e.status, json.loads(e.body)["message"]
    return 201, ""


async def _until_denied(core, label: str, data: dict) -> None:
    """Policies take effect once the source has seen them."""
    for _ in tries():
        if (await _create(core, "probe", label, data))[0] == 422:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the policy never took effect")


async def test_a_policys_expressions_share_the_runtime_cost_budget(tmp_path):
    """Each `contains` over a 1,000,000-character value costs 100,000, a tenth of the per-call limit:
    99 of them fit upstream's 10,000,000 budget, 101 run out of it, which fails the policy (as its
    failurePolicy says) with upstream's message. The same 101 over a short value are charged its
    size, not the worst case their types allow (101 * 314,573 would run out too)."""
    check = [{"expression": "!object.data.s.contains('needle')"}]
    probe = [{"expression": "object.data.s != 'probe'"}]
    big = {"s": "x" * 1_000_000}
    async with served(tmp_path) as (_, api_client):
        admission, core = client.AdmissionregistrationV1Api(api_client), client.CoreV1Api(api_client)
        await bind(admission, "under", _labelled("under", "under", check * 99 + [{"expression": "false"}]))
        await bind(admission, "over", _labelled("over", "over", probe + check * 101))
        await _until_denied(core, "under", {"s": "x"})
        await _until_denied(core, "over", {"s": "probe"})
        code, message = await _create(core, "a", "under", big)
        assert (code, message) == (422, 'configmaps "a" is forbidden: ValidatingAdmissionPolicy \'under\' with '
                                         "binding 'under' denied request: failed expression: false")
        code, message = await _create(core, "b", "over", big)
        assert (code, message) == (422, 'configmaps "b" is forbidden: ValidatingAdmissionPolicy \'over\' with binding '
                                         "'over' denied request: validation failed due to running out of cost budget, "
                                         "no further validation rules will be run")
        assert await _create(core, "c", "over", {"s": "x" * 1000}) == (201, "")


async def test_match_conditions_have_a_budget_of_their_own(tmp_path):
    """upstream's 2,500,000 for one policy's matchConditions, which are all evaluated before their
    results are read: 26 conditions of 100,000 after a False one run out of it, and the policy fails
    closed with the budget's message (the False one used to skip the policy at once)."""
    conditions = [{"name": "y", "expression": "object.data.s.startsWith('y')"}] + [
        {"name": f"c{i}", "expression": "!object.data.s.contains('needle')"} for i in range(26)]
    body = _labelled("conditions", "conditions", [{"expression": "false"}])
    body["spec"]["matchConditions"] = conditions
    async with served(tmp_path) as (_, api_client):
        admission, core = client.AdmissionregistrationV1Api(api_client), client.CoreV1Api(api_client)
        await bind(admission, "conditions", body)
        await _until_denied(core, "conditions", {"s": "y"})
        assert await _create(core, "a", "conditions", {"s": "x" * 1000}) == (201, "")
        assert await _create(core, "b", "conditions", {"s": "x" * 1_000_000}) == (
            422, "configmaps \"b\" is forbidden: ValidatingAdmissionPolicy 'conditions' with binding 'conditions' "
                 "denied request: validation failed due to running out of cost budget, no further validation rules "
                 "will be run")


async def test_comprehensions_are_charged_what_they_run(tmp_path):
    """An expression whose worst case passes the per-call limit runs metered: `lists.range(n)` of a
    value and `dyn(...)` ranges are charged their actual sizes, so a short range is admitted (it
    was refused as if n could be a million) and a long one is stopped at the limit (a dyn() range
    was sized as the object's largest collection, and 9,000,000 iterations ran)."""
    ranges = [{"expression": "lists.range(int(object.data.n)).all(i, i >= 0)"}]
    pairs = [{"expression": "dyn(object.data.s.split('')).all(c, dyn(object.data.s.split('')).all(d, d != ''))"}]
    cancelled = "resulted in error: operation cancelled: actual cost limit exceeded"
    async with served(tmp_path) as (_, api_client):
        admission, core = client.AdmissionregistrationV1Api(api_client), client.CoreV1Api(api_client)
        await bind(admission, "ranges", _labelled("ranges", "ranges", ranges))
        await bind(admission, "pairs", _labelled("pairs", "pairs", pairs))
        await _until_denied(core, "ranges", {"n": "300000"})
        assert await _create(core, "a", "ranges", {"n": "3"}) == (201, "")
        code, message = await _create(core, "b", "ranges", {"n": "300000"})
        assert code == 422 and message.endswith(cancelled), message
        assert await _create(core, "c", "pairs", {"s": "x" * 10}) == (201, "")
        code, message = await _create(core, "d", "pairs", {"s": "x" * 3000})
        assert code == 422 and message.endswith(cancelled), message


async def test_lists_built_and_sorted_are_charged_as_upstream_charges_them(tmp_path):
    """lists.range(n) costs n + 11 as cel-go's lists library charges it (it was charged 1: 3,000 ranges
    of 3,000 built 9 M integers in 4 s and were admitted), and sort 2 n^2 + 11: 500 elements are
    admitted, 1,000 (2,000,011) are over the per-call limit, as upstream's."""
    squares = [{"expression": "lists.range(3000).map(x, lists.range(3000)).size() > 0"}]
    sorted_ = [{"expression": "lists.range(int(object.data.n)).sort().size() > 0"}]
    cancelled = "resulted in error: operation cancelled: actual cost limit exceeded"
    async with served(tmp_path) as (_, api_client):
        admission, core = client.AdmissionregistrationV1Api(api_client), client.CoreV1Api(api_client)
        await bind(admission, "squares", _labelled("squares", "squares", squares))
        await bind(admission, "sorted", _labelled("sorted", "sorted", sorted_))
        await _until_denied(core, "squares", {})
        code, message = await _create(core, "a", "squares", {})
        assert code == 422 and message.endswith(cancelled), message
        await _until_denied(core, "sorted", {"n": "1000"})
        assert await _create(core, "b", "sorted", {"n": "500"}) == (201, "")
        code, message = await _create(core, "c", "sorted", {"n": "1000"})
        assert code == 422 and message.endswith(cancelled), message


async def test_operators_on_object_values_are_charged_on_the_values(tmp_path):
    """`+` on an object's values (`dyn`) is priced on what they are, as cel-go's tracker prices
    concatenation: 300 copies of a 1,000,000-character value doubled (1.1 GB, 4.4 s) were
    charged 1 each and admitted; a short value still is. A regex over the value likewise: 3,000
    matches (5.5 s) were admitted; cel-go's price, 100,001 each, stops the tenth."""
    doubled = [{"expression": "lists.range(300).map(x, object.data.s + object.data.s).size() > 0"}]
    matched = [{"expression": "lists.range(3000).all(i, !object.data.s.matches('x+y'))"}]
    cancelled = "resulted in error: operation cancelled: actual cost limit exceeded"
    async with served(tmp_path) as (_, api_client):
        admission, core = client.AdmissionregistrationV1Api(api_client), client.CoreV1Api(api_client)
        await bind(admission, "doubled", _labelled("doubled", "doubled", doubled))
        await bind(admission, "matched", _labelled("matched", "matched", matched))
        for label in ("doubled", "matched"):
            await _until_denied(core, label, {"s": "x" * 1_000_000})
            assert await _create(core, "a", label, {"s": "x" * 1000}) == (201, "")
            code, message = await _create(core, "b", label, {"s": "x" * 1_000_000})
            assert code == 422 and message.endswith(cancelled), message


async def test_flatten_is_charged_what_it_builds(tmp_path):
    """`flatten` of an object's lists is charged the elements it returns: four container args
    flatten to four, though the pod's longest list (2,000 env entries) made the bound 2,000^2."""
    rules = [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}]
    flat = {"metadata": {"name": "flat"}, "spec": {"matchConstraints": {"resourceRules": rules}, "validations": [
        {"expression": "object.spec.containers.map(c, c.args).flatten().all(a, a != '')"}]}}
    env = [{"name": f"E{i}", "value": "v"} for i in range(2000)]
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [
        {"name": "a", "image": "i", "args": ["1", "2"], "env": env}, {"name": "b", "image": "i", "args": ["3", "4"]}]}}
    async with served(tmp_path) as (_, api_client):
        admission, core = client.AdmissionregistrationV1Api(api_client), client.CoreV1Api(api_client)
        await bind(admission, "flat", flat)
        bad = {"metadata": {"name": "q"}, "spec": {"containers": [{"name": "a", "image": "i", "args": [""]}]}}
        for _ in tries():
            try:
                await asyncio.to_thread(core.create_namespaced_pod, "default", bad, dry_run="All")
            except ApiException as e:
                assert e.status == 422
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError("the policy never took effect")
        made = await asyncio.to_thread(core.create_namespaced_pod, "default", pod, dry_run="All")
        assert [c.args for c in made.spec.containers] == [["1", "2"], ["3", "4"]]


async def test_a_syntax_error_far_along_a_line_is_a_compilation_error(tmp_path):
    """The engine panics printing an issue past column 65,535 (a BaseException no handler caught:
    the request failed without an answer); the error is ours then."""
    unterminated = "object.metadata.name == '" + "a" * 70_000
    async with served(tmp_path) as (_, api_client):
        admission = client.AdmissionregistrationV1Api(api_client)
        with pytest.raises(ApiException) as e:
            await asyncio.to_thread(admission.create_validating_admission_policy,
                                    policy("far", [{"expression": unterminated}]))
        assert e.value.status == 422
        [cause] = json.loads(e.value.body)["details"]["causes"]
        assert cause["field"] == "spec.validations[0].expression"
        assert ": compilation failed: ERROR: <input>:1:25: Syntax error: token recognition error at: " in cause["message"]


def test_an_expression_whose_metered_form_the_engine_refuses_is_bounded_before_it_runs():
    """A comprehension inside 92 nested lists: the source is within the engine's nesting limit,
    its metered form (two levels more) is not, so it runs as written, bounded for its values
    before it starts (it failed with an empty error)."""
    from nanokube.apiserver.admission.cel import compile_expression, evaluate

    expression = "[" * 92 + "object.l.exists_one(x, x > 0)" + "]" * 92 + " != []"
    assert compile_expression(expression).metered() is None
    activation = {"object": {"l": [1, 2]}, "variables": {}}
    assert evaluate(expression, activation) is True


async def test_exists_is_charged_the_iterations_it_runs(tmp_path):
    """`exists` over the 400,000 elements of a split stops at the first one, which matches: admitted
    (its whole range was charged before it started, 2 M, over the per-call limit); over a value
    with no match it runs until the limit stops it."""
    first = [{"expression": "object.data.s.split(',').exists(x, x == 'a')"}]
    async with served(tmp_path) as (_, api_client):
        admission, core = client.AdmissionregistrationV1Api(api_client), client.CoreV1Api(api_client)
        await bind(admission, "first", _labelled("first", "first", first))
        await _until_denied(core, "first", {"s": "b"})
        assert await _create(core, "a", "first", {"s": "a," * 400_000}) == (201, "")
        code, message = await _create(core, "b", "first", {"s": "b," * 400_000})
        assert code == 422 and message.endswith("resulted in error: operation cancelled: actual cost limit exceeded")


async def test_a_mutations_expression_and_the_variables_it_reads_share_a_budget(tmp_path):
    """Each mutation has upstream's RuntimeCELCostBudget (10 M), charged with the variables its
    expression reads: 101 variables of 100,000 each (a `contains` over 1,000,000 characters) run
    it out, which fails the policy with the budget's message (mutations had no budget). The
    variables of the second mutation see the object the first one made."""
    rules = [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]}]
    names = [f"v{i}" for i in range(101)]
    reads = " && ".join(f"variables.{n}" for n in names)

    def label(key: str, value: str) -> str:
        return '[JSONPatch{op: "add", path: "/metadata/labels/%s", value: %s}]' % (key, value)

    body = {"metadata": {"name": "budget"}, "spec": {
        "matchConstraints": {"resourceRules": rules, "objectSelector": {"matchLabels": {"set": "budget"}}},
        "failurePolicy": "Fail", "reinvocationPolicy": "Never",
        "variables": [{"name": n, "expression": "!object.data.s.contains('needle')"} for n in names] + [
            {"name": "step", "expression": "'step' in object.metadata.labels ? object.metadata.labels.step : 'none'"}],
        "mutations": [
            {"patchType": "JSONPatch", "jsonPatch": {"expression": label("step", "'one'")}},
            {"patchType": "JSONPatch", "jsonPatch": {"expression": label(
                "seen", f"({reads}) ? variables.step : 'no'")}}]}}
    async with served(tmp_path) as (_, api_client):
        admission, core = client.AdmissionregistrationV1Api(api_client), client.CoreV1Api(api_client)
        await asyncio.to_thread(admission.create_mutating_admission_policy, body)
        await asyncio.to_thread(admission.create_mutating_admission_policy_binding, {
            "metadata": {"name": "budget"}, "spec": {"policyName": "budget"}})
        cm = {"metadata": {"name": "small", "labels": {"set": "budget"}}, "data": {"s": "x"}}
        for _ in tries():
            made = await asyncio.to_thread(core.create_namespaced_config_map, "default", cm, dry_run="All")
            if "seen" in made.metadata.labels:
                break
            await asyncio.sleep(0.05)
        assert made.metadata.labels == {"set": "budget", "step": "one", "seen": "one"}
        big = {"metadata": {"name": "big", "labels": {"set": "budget"}}, "data": {"s": "x" * 1_000_000}}
        with pytest.raises(ApiException) as e:
            await asyncio.to_thread(core.create_namespaced_config_map, "default", big, dry_run="All")
        # the generic policy dispatcher's answer: NewForbidden's 403 and details, its message replaced by the
        # PolicyError's, its reason the mutating dispatcher's for a mutation that fails (Invalid)
        denied = ("policy 'budget' with binding 'budget' denied request: validation failed due to running out of "
                  "cost budget, no further validation rules will be run")
        status = json.loads(e.value.body)
        assert (e.value.status, status["code"], status["reason"], status["message"]) == (403, 403, "Invalid", denied)
        assert status["details"] == {"name": "big", "kind": "configmaps", "causes": [{"message": denied}]}
