"""Kubernetes' `format` library (1.31+): named formats whose `validate()`
returns `optional.none()` for a valid string, else the list of errors."""

from __future__ import annotations

import base64
import binascii
import datetime
import re

import cel

from ...machinery import validation as v
from ..types import FORMAT, STRING, list_of, optional_of
from .overload import Overload
from .urls import _parse as parse_url

MARK = "@format"
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


def _prefix(check):
    """The *Prefix formats accept a trailing dash (a generateName prefix)."""
    return lambda s: check(s[:-1] + "a" if s.endswith("-") else s)


def _uri(s: str) -> list[str]:
    return [] if parse_url(s) is not None else ["invalid URI"]


def _uuid(s: str) -> list[str]:
    return [] if _UUID.match(s) else ["does not match the UUID format"]


def _byte(s: str) -> list[str]:
    try:
        base64.b64decode(s, validate=True)
    except (binascii.Error, ValueError):
        return ["invalid base64"]
    return []


def _date(s: str) -> list[str]:
    try:
        datetime.date.fromisoformat(s) if re.fullmatch(r"\d{4}-\d{2}-\d{2}", s) else int("x")
    except ValueError:
        return ["invalid date"]
    return []


def _datetime(s: str) -> list[str]:
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})", s):
        return ["invalid datetime"]
    try:
        datetime.datetime.fromisoformat(s.replace("z", "Z").replace("Z", "+00:00"))
    except ValueError:
        return ["invalid datetime"]
    return []


CHECKS = {
    "dns1123Label": v.dns1123_label,
    "dns1123Subdomain": v.dns1123_subdomain,
    "dns1035Label": v.dns1035_label,
    "qualifiedName": v.qualified_name,
    "dns1123LabelPrefix": _prefix(v.dns1123_label),
    "dns1123SubdomainPrefix": _prefix(v.dns1123_subdomain),
    "dns1035LabelPrefix": _prefix(v.dns1035_label),
    "labelValue": v.label_value,
    "uri": _uri,
    "uuid": _uuid,
    "byte": _byte,
    "date": _date,
    "datetime": _datetime,
}


def _validate(fmt: dict, s: str) -> cel.OptionalValue:
    errs = CHECKS[fmt[MARK]](s)
    return cel.OptionalValue.of(list(errs)) if errs else cel.OptionalValue.none()


def _named(name: str) -> cel.OptionalValue:
    return cel.OptionalValue.of({MARK: name}) if name in CHECKS else cel.OptionalValue.none()


OVERLOADS = [
    *[Overload(f"format.{name}", (), FORMAT, impl=lambda name=name: {MARK: name}) for name in CHECKS],
    Overload("format.named", (STRING,), optional_of(FORMAT), impl=_named),
    Overload("validate", (FORMAT, STRING), optional_of(list_of(STRING)), member=True, impl=_validate),
]
