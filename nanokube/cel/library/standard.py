"""Signatures of CEL's standard definitions, which the engine implements
natively: the checker needs them to type expressions."""

from __future__ import annotations

from ..types import (
    BOOL, BYTES, DOUBLE, DURATION, DYN, INT, PARAM_A, PARAM_B, STRING, TIMESTAMP, TYPE, UINT,
    list_of, map_of,
)
from .overload import Overload

LIST_A, MAP_AB = list_of(PARAM_A), map_of(PARAM_A, PARAM_B)
NUMBERS = (INT, UINT, DOUBLE)
ORDERED = NUMBERS + (STRING, BYTES, BOOL, TIMESTAMP, DURATION)


def _ops() -> list[Overload]:
    out = [Overload(op, (PARAM_A, PARAM_A), BOOL) for op in ("_==_", "_!=_")]
    for op in ("_<_", "_<=_", "_>_", "_>=_"):
        out += [Overload(op, (t, t), BOOL) for t in ORDERED]
        out += [Overload(op, (a, b), BOOL) for a in NUMBERS for b in NUMBERS if a != b]
    for op in ("_+_", "_-_", "_*_", "_/_"):
        out += [Overload(op, (t, t), t) for t in NUMBERS]
    out += [Overload("_%_", (t, t), t) for t in (INT, UINT)]
    out += [Overload("_+_", (t, t), t) for t in (STRING, BYTES, LIST_A, DURATION)]
    out += [Overload("_+_", (TIMESTAMP, DURATION), TIMESTAMP), Overload("_+_", (DURATION, TIMESTAMP), TIMESTAMP),
            Overload("_-_", (TIMESTAMP, TIMESTAMP), DURATION), Overload("_-_", (TIMESTAMP, DURATION), TIMESTAMP),
            Overload("_-_", (DURATION, DURATION), DURATION)]
    out += [Overload("-_", (INT,), INT), Overload("-_", (DOUBLE,), DOUBLE), Overload("!_", (BOOL,), BOOL)]
    out += [Overload("_&&_", (BOOL, BOOL), BOOL), Overload("_||_", (BOOL, BOOL), BOOL),
            Overload("_?_:_", (BOOL, PARAM_A, PARAM_A), PARAM_A)]
    out += [Overload("@in", (PARAM_A, LIST_A), BOOL), Overload("@in", (PARAM_A, MAP_AB), BOOL)]
    out += [Overload("_[_]", (LIST_A, INT), PARAM_A), Overload("_[_]", (MAP_AB, PARAM_A), PARAM_B)]
    return out


#: the type conversions and the argument types cel-go declares for each (`string([1])` is no overload)
_CONVERSIONS = {
    ("int", INT): (INT, UINT, DOUBLE, STRING, TIMESTAMP, DURATION),
    ("uint", UINT): (INT, UINT, DOUBLE, STRING),
    ("double", DOUBLE): (INT, UINT, DOUBLE, STRING),
    ("string", STRING): (STRING, BOOL, INT, UINT, DOUBLE, BYTES, TIMESTAMP, DURATION),
    ("bytes", BYTES): (BYTES, STRING),
    ("bool", BOOL): (BOOL, STRING),
    ("timestamp", TIMESTAMP): (TIMESTAMP, STRING, INT),
    ("duration", DURATION): (DURATION, STRING, INT),
    ("dyn", DYN): (PARAM_A,),
    ("type", TYPE): (PARAM_A,),
}


def _functions() -> list[Overload]:
    out = []
    for t in (STRING, BYTES, LIST_A, MAP_AB):
        out += [Overload("size", (t,), INT), Overload("size", (t,), INT, member=True)]
    for (name, t), sources in _CONVERSIONS.items():
        out += [Overload(name, (a,), t) for a in sources]
    for name in ("contains", "startsWith", "endsWith", "matches"):
        out.append(Overload(name, (STRING, STRING), BOOL, member=True))
    out.append(Overload("matches", (STRING, STRING), BOOL))
    for name in ("getFullYear", "getMonth", "getDate", "getDayOfMonth", "getDayOfWeek", "getDayOfYear",
                 "getHours", "getMinutes", "getSeconds", "getMilliseconds"):
        out.append(Overload(name, (TIMESTAMP,), INT, member=True))  # in a time zone: see `timestamps`
    for name in ("getHours", "getMinutes", "getSeconds", "getMilliseconds"):
        out.append(Overload(name, (DURATION,), INT, member=True))
    return out


OVERLOADS = _ops() + _functions()
