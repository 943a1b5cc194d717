"""Kubernetes' `semver` library (1.33+). A version is carried as
{"@semver": "<major>.<minor>.<patch>[-pre]"}."""

from __future__ import annotations

import re
from typing import Any

from ..errors import CELError
from ..types import BOOL, INT, SEMVER, STRING
from .overload import Overload

MARK = "@semver"
_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)


def _normalize(s: str) -> str:
    """semver(s, true): strip a leading v, fill missing minor/patch, drop
    leading zeros."""
    s = s[1:] if s.startswith("v") else s
    core, rest = re.match(r"^([0-9.]*)(.*)$", s, re.S).groups()
    parts = core.split(".")
    if not core or len(parts) > 3 or not all(p.isdigit() for p in parts):
        return s
    return ".".join([str(int(p)) for p in parts] + ["0"] * (3 - len(parts))) + rest


def parse_semver(s: str, normalize: bool = False) -> tuple | None:
    """(major, minor, patch, prerelease identifiers) or None if invalid."""
    m = _SEMVER.match(_normalize(s) if normalize else s)
    if not m:
        return None
    pre = tuple(m.group(4).split(".")) if m.group(4) else ()
    return int(m.group(1)), int(m.group(2)), int(m.group(3)), pre


def semver_value(s: str, normalize: bool = False) -> dict:
    v = parse_semver(s, normalize)
    if v is None:
        raise CELError("invalid semver")
    return {MARK: f"{v[0]}.{v[1]}.{v[2]}" + ("-" + ".".join(v[3]) if v[3] else "")}


def _v(x: Any) -> tuple:
    if isinstance(x, dict) and MARK in x:
        return parse_semver(x[MARK])
    raise CELError("no such overload")


def _key(v: tuple) -> tuple:
    """Precedence per semver.org: a release outranks its prereleases;
    numeric identifiers compare numerically and below alphanumeric ones."""
    pre = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in v[3])
    return v[0], v[1], v[2], (1,) if not pre else (0, pre)


def compare(a: Any, b: Any) -> int:
    x, y = _key(_v(a)), _key(_v(b))
    return (x > y) - (x < y)


OVERLOADS = [
    Overload("semver", (STRING,), SEMVER, impl=semver_value),
    Overload("semver", (STRING, BOOL), SEMVER, impl=semver_value),
    Overload("isSemver", (STRING,), BOOL, impl=lambda s: parse_semver(s) is not None),
    Overload("isSemver", (STRING, BOOL), BOOL, impl=lambda s, n: parse_semver(s, n) is not None),
    Overload("major", (SEMVER,), INT, member=True, impl=lambda v: _v(v)[0]),
    Overload("minor", (SEMVER,), INT, member=True, impl=lambda v: _v(v)[1]),
    Overload("patch", (SEMVER,), INT, member=True, impl=lambda v: _v(v)[2]),
    Overload("compareTo", (SEMVER, SEMVER), INT, member=True, impl=compare),
    Overload("isLessThan", (SEMVER, SEMVER), BOOL, member=True, impl=lambda a, b: compare(a, b) < 0),
    Overload("isGreaterThan", (SEMVER, SEMVER), BOOL, member=True, impl=lambda a, b: compare(a, b) > 0),
]
