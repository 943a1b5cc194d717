"""The function libraries of Kubernetes' CEL environment, as overloads the
checker types and the runtime dispatches on.

The engine binds one Python callable per function name, so overloads of one
name from several libraries (quantity's and semver's `compareTo`, the string
and list `indexOf`) share a dispatcher that picks the first overload whose
argument types match the values.
"""

from __future__ import annotations

from typing import Any, Callable

from .. import meter
from ..cost import PRICED_AFTER, RUNTIME_COSTED, actual_call_cost
from ..errors import CELError
from . import authz, ext, format, jsonpatch, lists, net, quantity, regex, semver, standard, timestamps, urls
from .overload import Overload
from .values import matches_type

__all__ = ["Overload", "overloads", "runtime_functions"]


def overloads() -> list[Overload]:
    return [o for m in (standard, timestamps, ext, lists, regex, urls, quantity, net, format, semver,
                                           authz, jsonpatch) for o in m.OVERLOADS]


def _dispatcher(name: str, candidates: list[Overload]) -> Callable[..., Any]:
    costed, after = name in RUNTIME_COSTED, name in PRICED_AFTER

    def dispatch(*args: Any) -> Any:
        for o in candidates:
            if len(o.args) == len(args) and all(matches_type(a, t) for a, t in zip(args, o.args)):
                m = meter.active() if costed else None
                if m is not None and not after:  # a metered run: its price on these values, before it runs
                    m.charge(actual_call_cost(name, args))
                out = o.impl(*args)
                if m is not None and after:
                    m.charge(actual_call_cost(name, args, out))
                return out
        raise CELError(f"no such overload: {name}")

    return dispatch


def runtime_functions() -> dict[str, Callable[..., Any]]:
    """name -> the callable the engine binds."""
    by_name: dict[str, list[Overload]] = {}
    for o in overloads():
        if o.impl is not None:
            by_name.setdefault(o.name, []).append(o)
    return {name: _dispatcher(name, cands) for name, cands in by_name.items()}
