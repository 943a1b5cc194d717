"""cel-go's AST validators, which Kubernetes' base environment enables: a CRD rule whose duration,
timestamp or regex literal would fail at runtime, or whose list or map literal mixes element types,
is refused when the CRD is written, with cel-go's words and the literal's position; a format call's
arguments may mix them. Over HTTP."""

from __future__ import annotations

import json

import pytest
from kubernetes.client.rest import ApiException

from tests.apiserver.apiextensions.test_cel_equality_types import CRDS, crd
from tests.apiserver.test_rest_managedfields import call
from tests.served import served


@pytest.mark.parametrize(("rule", "error"), [
    ("duration('1d') > duration('0s')", "ERROR: <input>:1:10: invalid duration argument"),
    ("self.at < timestamp('2024-13-01T00:00:00Z')", "ERROR: <input>:1:21: invalid timestamp argument"),
    ("self.mode.matches('[a-z')", "ERROR: <input>:1:19: invalid matches argument"),
    ("self.mode in ['a', 1]", "ERROR: <input>:1:20: expected type 'string' but found 'int'"),
    ("'a' in {'a': 1, 'b': 'x'}", "ERROR: <input>:1:22: expected type 'int' but found 'string'"),
])
async def test_literals_that_cannot_work_are_refused(tmp_path, rule, error):
    async with served(tmp_path) as (_, c):
        with pytest.raises(ApiException) as e:
            await call(c, "POST", CRDS, crd([rule]))
        assert e.value.status == 422
        assert error in json.loads(e.value.body)["message"]


async def test_valid_literals_and_format_arguments_compile(tmp_path):
    rules = ["duration('1h30m') > duration('0s')", "self.at > timestamp('2024-01-01T00:00:00.5+02:00')",
             "self.mode.matches('^[a-z]+$')", "'%s %d'.format([self.mode, self.replicas]) != ''",
             "self.sizes == [] || self.sizes in [[1], []]"]
    async with served(tmp_path) as (_, c):
        made = await call(c, "POST", CRDS, crd(rules))
        schema = made["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
        assert [v["rule"] for v in schema["x-kubernetes-validations"]] == rules
