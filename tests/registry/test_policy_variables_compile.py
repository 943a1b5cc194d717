"""A policy's variables are compiled once per validation of it (registry/admissionregistration's
_variable_scopes): each expression compiled them all again with its own and each variable with those
before it, hashing them all for the environments' cache key, so a ValidatingAdmissionPolicy of 3,000
variables (170 KB) held the API server's loop for 50 s (found by a fuzz sweep of lists of 3,000 items).
Each variable's scope was then still a copy of the one before (1.3 s); now one grows as each compiles
(apiserver/admission/cel.VariableCompiler)."""

from nanokube.apiserver.admission import cel
from nanokube.registry.admissionregistration import validate_mutating_policy, validate_validating_policy

MATCH = {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]}]}


def _counted(monkeypatch) -> list[str]:
    compiled: list[str] = []
    real = cel.compile_expression
    monkeypatch.setattr(cel, "compile_expression", lambda e, *a: compiled.append(e) or real(e, *a))
    variable = cel.VariableCompiler.compile
    monkeypatch.setattr(cel.VariableCompiler, "compile", lambda self, e: compiled.append(e) or variable(self, e))
    return compiled


def _expression_errors(errs) -> list:
    """The errors of expressions (the spec is not defaulted: its matchPolicy and the like are missing)."""
    return [e for e in errs if e.field.startswith(("spec.variables", "spec.validations", "spec.mutations"))]


def _variables(n: int) -> list[dict]:
    """Each variable reads the one before it: a variable sees those before it, typed."""
    return [{"name": "v0", "expression": "object.metadata.name"}] + [
        {"name": f"v{i}", "expression": f"variables.v{i - 1} + 'x'"} for i in range(1, n)]


def test_a_validating_policys_variables_compile_once(monkeypatch):
    compiled = _counted(monkeypatch)
    spec = {"failurePolicy": "Fail", "matchConstraints": MATCH, "variables": _variables(50),
            "validations": [{"expression": f"variables.v{i} != ''", "messageExpression": f"string(variables.v{i})"} for i in range(3)]}
    assert _expression_errors(validate_validating_policy({"spec": spec}, {})) == []
    assert len(compiled) == 50 + 6
    spec["validations"][0]["expression"] = "variables.v49 + 1 == 2"  # a string variable: no + int
    [err] = _expression_errors(validate_validating_policy({"spec": spec}, {}))
    assert err.field == "spec.validations[0].expression" and "found no matching overload for '_+_'" in err.detail


def test_a_variable_sees_only_those_before_it(monkeypatch):
    compiled = _counted(monkeypatch)
    spec = {"failurePolicy": "Fail", "matchConstraints": MATCH, "reinvocationPolicy": "Never",
            "variables": [{"name": "a", "expression": "variables.b"}, {"name": "b", "expression": "1"}],
            "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression": "[JSONPatch{op: 'test', path: '/a'}]"}}]}
    [err] = _expression_errors(validate_mutating_policy({"spec": spec}, {}))
    assert err.field == "spec.variables[0].expression" and "undefined field 'b'" in err.detail
    assert len(compiled) == 2 + 1
