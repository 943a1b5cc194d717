"""One signature of a library function."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..types import Type


@dataclass(frozen=True, slots=True)
class Overload:
    """`name(args) -> result`; `member` when called as `args[0].name(...)`.
    `impl` is None for functions the engine itself implements. `stored_only`: the
    library version that adds it came after the server's minimum compatibility
    version (1.36), so only already stored expressions may call it (upstream's
    StoredExpressions environment has it, NewExpressions does not). `admission`: only
    the environments with admission's typed construction (Object{...}) declare it."""

    name: str
    args: tuple[Type, ...]
    result: Type
    member: bool = False
    impl: Callable[..., Any] | None = None
    stored_only: bool = False
    admission: bool = False
