"""Settings `nanokube up` and its components read from NANOKUBE_* environment variables, where
upstream has a flag or config field: a number of seconds checked like the flag's validation."""

from __future__ import annotations

from collections.abc import Callable, Mapping


def seconds(env: Mapping[str, str], name: str, ok: Callable[[float], bool], what: str) -> float | None:
    """The seconds `env[name]` sets, None where it is unset or empty; a ValueError naming the
    variable and saying `what` is wanted where it is no number `ok` takes (NaN fails any range)."""
    raw = env.get(name)
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not ok(value):
        raise ValueError(f"{name}: {what}")
    return value
