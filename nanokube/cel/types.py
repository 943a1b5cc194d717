"""CEL types as the checker and the cost estimator see them.

A value of a Kubernetes library type (quantity, semver, IP, CIDR, URL,
named format) travels through the `common-expression-language` runtime as a
map with one marker key whose value is canonical, because that runtime only
carries plain CEL values; `type(x)` therefore reads `map` for them at run
time, though the checker knows them by their Kubernetes type names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: upstream's maxRequestSizeBytes: the bound of every unbounded size estimate
MAX_REQUEST_SIZE = 3 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Type:
    """name: bool, int, uint, double, string, bytes, null_type, timestamp,
    duration, list, map, optional, type, dyn, a Kubernetes type name, or
    `object` for a schema object (then `schema` holds the structural schema
    and `params` is empty). `max_size` bounds length/items/properties for
    the cost estimate; `exact` says it is the size itself (a literal's, a
    range's), which a bound from the actual values must not lower."""

    name: str
    params: tuple[Type, ...] = ()
    max_size: int = MAX_REQUEST_SIZE
    schema: Any = None
    exact: bool = False

    def __str__(self) -> str:
        if self.name == "object":
            return "object"
        if self.params:
            return f"{self.name}({', '.join(map(str, self.params))})"
        return self.name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Type) and self.name == other.name and self.params == other.params and (
            self.name != "object" or _schema_of(self) is _schema_of(other))

    def __hash__(self) -> int:
        return hash((self.name, self.params))


BOOL, INT, UINT, DOUBLE = Type("bool", max_size=1), Type("int", max_size=1), Type("uint", max_size=1), Type(
    "double", max_size=1)
STRING, BYTES, NULL, DYN = Type("string"), Type("bytes"), Type("null_type", max_size=1), Type("dyn")
TIMESTAMP, DURATION, TYPE = Type("timestamp", max_size=1), Type("duration", max_size=1), Type("type", max_size=1)
QUANTITY, SEMVER = Type("kubernetes.Quantity", max_size=1), Type("kubernetes.Semver", max_size=1)
IP, CIDR, URL = Type("net.IP", max_size=1), Type("net.CIDR", max_size=1), Type("kubernetes.URL", max_size=1)
FORMAT = Type("kubernetes.NamedFormat", max_size=1)
#: a type parameter in a function signature
PARAM_A, PARAM_B = Type("A"), Type("B")


def _schema_of(t: Type) -> Any:
    return t.schema[0] if isinstance(t.schema, tuple) else t.schema


def list_of(elem: Type, max_size: int = MAX_REQUEST_SIZE, exact: bool = False) -> Type:
    return Type("list", (elem,), max_size, exact=exact)


def map_of(key: Type, value: Type, max_size: int = MAX_REQUEST_SIZE, exact: bool = False) -> Type:
    return Type("map", (key, value), max_size, exact=exact)


def optional_of(t: Type) -> Type:
    return Type("optional", (t,), 1)

