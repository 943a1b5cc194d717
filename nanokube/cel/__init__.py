"""Kubernetes' CEL environment, shared by the API server (CRD validation
rules, admission policies, webhook match conditions) and the scheduler (DRA
device selectors).

It runs expressions on the `common-expression-language` engine and adds what
kube-apiserver 1.37's environment has on top of CEL: the Kubernetes libraries
(lists, regex, urls, quantity, ip, cidr, format, semver), cel-go's string,
list, set and math extensions, optional values, a static checker with cel-go's
error wording, a worst-case cost estimate, and a compile cache.

The engine lacks some syntax; `desugar` rewrites the optional syntax `x.?f`
and `l[?i]`, two-variable comprehensions (`all`/`exists`/`exists_one`,
`transformList`/`transformMap`/`transformMapEntry`), `sortBy`, `optMap` and
`optFlatMap`, `cel.bind` and typed object construction into forms it runs, and
the calls it answers otherwise than cel-go (string() of a timestamp, duration
or double, size() of a string, a timestamp's accessors) into calls of ours.
`validators` runs cel-go's AST validators (literal arguments, homogeneous
aggregate literals); lists v1's `includes` compiles only in stored expressions. The `authz` library checks
through an authorizer the API server binds (`library.authz.Authz`); CRD rules
declare no `authorizer`, as upstream's do not. The engine refuses nesting
deeper than 96 levels, where cel-go allows 250 (a source nested deeper only
through parentheses runs in its printed form, which has none to spare).
"""

import importlib.machinery
import importlib.util
import sys


def _engine_cli_on_first_use() -> None:
    """The engine package's `__init__` imports its command line (`cel.cli`: typer, rich, prompt_toolkit,
    pygments), which nanokube never runs, in every process that evaluates CEL. Before the engine is
    first imported, `cel.cli` is put in place as a module whose code runs when one of its attributes
    is first read (a module `__getattr__`, which the import system's own reads of `__spec__` and
    `__file__` do not reach, as they would a LazyLoader module's)."""
    if "cel" in sys.modules:
        return
    engine = importlib.util.find_spec("cel")
    cli = engine and engine.submodule_search_locations and \
        importlib.machinery.PathFinder.find_spec("cel.cli", engine.submodule_search_locations)
    if not cli or cli.loader is None:
        return
    module = importlib.util.module_from_spec(cli)

    def __getattr__(name: str):
        del module.__dict__["__getattr__"]
        cli.loader.exec_module(module)
        return getattr(module, name)

    module.__getattr__ = __getattr__
    sys.modules["cel.cli"] = module


_engine_cli_on_first_use()

from .environment import Environment, Program  # noqa: E402
from .errors import CELError  # noqa: E402

__all__ = ["CELError", "Environment", "Program"]
