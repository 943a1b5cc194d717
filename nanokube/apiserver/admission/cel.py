"""CEL for admission (webhook matchConditions, ValidatingAdmissionPolicy and
MutatingAdmissionPolicy) on the shared Kubernetes CEL environment (nanokube.cel).

Variables are the ones upstream's admission CEL declares: `object`,
`oldObject`, `request`, `params`, `namespaceObject`, `variables` and
`authorizer`, any of which may be null (an object on DELETE, oldObject on
CREATE, params without a paramRef), so programs run in a context of their own
that binds nulls as values. Typed object construction (`Object{...}`,
`JSONPatch{...}`) is the environment's; `jsonpatch.escapeKey(k)`, which it
lacks, is rewritten to the two replacements it stands for.
"""

from __future__ import annotations

import functools
import re
import threading
from typing import Any

import cel

from ...cel import CELError as _SharedCELError
from ...cel import Environment, desugar
from ...cel.cost import dynamic_sizes, extent
from ...cel.environment import PER_CALL_LIMIT
from ...cel.errors import COST_LIMIT_ERROR
from ...cel.library import runtime_functions
from ...cel.library.authz import AUTHORIZER
from ...cel.types import DYN, Type

VARIABLES = ("object", "oldObject", "request", "params", "namespaceObject", "variables", "authorizer")


class CELError(Exception):
    """Compilation or evaluation failed; the text follows upstream's."""


_TOKEN = re.compile(r"""
    (?P<str>[rR]?[bB]?(?:'''.*?'''|\"\"\".*?\"\"\"|'(?:\\.|[^'\\])*'|"(?:\\.|[^"\\])*"))
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<ws>\s+)
  | (?P<other>.)
""", re.S | re.X)


def rewrite(expression: str) -> str:
    """`jsonpatch.escapeKey(k)` becomes `(k).replace("~", "~0").replace("/", "~1")`."""
    if "escapeKey" not in expression:
        return expression
    toks = [(m.lastgroup, m.group()) for m in _TOKEN.finditer(expression)]
    out: list[str] = []
    i = 0
    while i < len(toks):
        kind, text = toks[i]
        if kind == "ident" and text == "jsonpatch" and i + 3 < len(toks) and toks[i + 1][1] == "." \
                and toks[i + 2][1] == "escapeKey" and toks[i + 3][1] == "(":
            end = _closing(toks, i + 3)
            out.append("(" + rewrite("".join(t for _, t in toks[i + 4:end])) + ').replace("~", "~0").replace("/", "~1")')
            i = end + 1
            continue
        out.append(text)
        i += 1
    return "".join(out)


def _closing(toks, open_at: int) -> int:
    """Index of the token closing the bracket at `open_at`."""
    depth = 0
    for j in range(open_at, len(toks)):
        if toks[j][0] == "other" and toks[j][1] in "([{":
            depth += 1
        elif toks[j][0] == "other" and toks[j][1] in ")]}":
            depth -= 1
            if depth == 0:
                return j
    return len(toks) - 1


_LOCAL = threading.local()


class _Fields(dict):
    """A policy's `variables` object: each variable's name and the type its expression compiled to."""


def _field_type(obj: Type, name: str) -> Type | None:
    if isinstance(obj.schema, _Fields):
        return obj.schema.get(name)
    return DYN


@functools.lru_cache(maxsize=256)
def _environment(declared: frozenset, variables: tuple[tuple[str, Type], ...] | None = None) -> Environment:
    """One environment per set of declared variables and of a policy's variables (bounded:
    policies written with many different variables share the cache)."""
    types = {name: AUTHORIZER if name == "authorizer" else DYN for name in declared}
    if variables is not None and "variables" in declared:
        types["variables"] = Type("object", schema=_Fields(variables))
    return Environment(types, field_type=_field_type, struct_types=True)


def _context() -> cel.Context:
    ctx = getattr(_LOCAL, "ctx", None)
    if ctx is None:
        ctx = _LOCAL.ctx = cel.Context()
        for name, fn in {**runtime_functions(), **desugar.RUNTIME}.items():
            ctx.add_function(name, fn)
    return ctx


def compile_expression(expression: str, declared: frozenset = frozenset(VARIABLES),
                       variables: tuple[tuple[str, Type], ...] | None = None):
    """The checked program (cached) with the `declared` variables (where an
    expression is written limits them: no `params` without a paramKind, no
    `authorizer` in a messageExpression); `variables` (a policy's, with the
    types their expressions compiled to) are the fields `variables` has, as
    upstream's composited compiler types it: `variables.x` of another name is
    an undefined field, and a bool variable is a bool. CELError reads
    `compilation failed: ERROR: <input>:1:5: ...` as upstream's does."""
    try:
        return _environment(declared, variables).compile(rewrite(expression))
    except _SharedCELError as e:
        raise CELError(f"compilation failed: {e}") from None


def _over_limit(program, activation: dict[str, Any]) -> bool:
    """Whether the expression's worst case on these values passes the per-call limit: the
    engine cannot be stopped once running, so it is not started (upstream's evaluation is
    cancelled when its actual cost passes the limit)."""
    if program.max_cost <= PER_CALL_LIMIT:
        return False
    n, s = extent([v for k, v in activation.items() if k != "authorizer"])
    return program.cost_bound(dynamic_sizes(n, s)) > PER_CALL_LIMIT


def evaluate(expression: str, activation: dict[str, Any]) -> Any:
    """Evaluate with the admission variables bound (absent ones are null)."""
    program = compile_expression(expression)
    if _over_limit(program, activation):
        raise CELError(f"expression '{expression}' resulted in error: {COST_LIMIT_ERROR}")
    ctx = _context()
    for name in VARIABLES:
        ctx.add_variable(name, activation.get(name))
    try:
        return program.program.execute(ctx)
    except _SharedCELError as e:
        why = str(e)
    except KeyError as e:
        why = f"no such key: {e.args[0]}"
    except ZeroDivisionError:
        why = "division by zero"
    except Exception as e:  # the engine reports evaluation errors by many types
        text = str(e)
        own = re.search(r"CELError: (.*?)\. Check function arguments", text, re.S)
        why = own.group(1) if own else text.split(". Check that the variable", 1)[0].split("\n")[0]
    raise CELError(f"expression '{expression}' resulted in error: {why}")
