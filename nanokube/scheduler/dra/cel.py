"""DRA device selectors on the shared Kubernetes CEL environment
(nanokube.cel): the `device` variable, with an unknown attribute domain
reading as an empty map, and a cost bound for this device's data checked
before each evaluation (the engine cannot be interrupted, so a selector
whose worst case exceeds the budget is refused instead of being run)."""

from __future__ import annotations

import re

from ...cel import CELError
from ...dra import device_cel
from ...cel.environment import COST_LIMIT_ERROR
from ...cel.library.quantity import quantity_value
from ...cel.library.semver import semver_value

__all__ = ["COST_LIMIT_ERROR", "CELError", "DeviceInput", "Selector", "compile_selector", "quantity_value",
           "semver_value"]

MAX_COST = device_cel.MAX_COST
#: upstream's resourceapi.CELSelectorExpressionMaxLength
MAX_EXPRESSION_LENGTH = 10 * 1024

_DOMAIN_REF = re.compile(r"""device\s*\.\s*(attributes|capacity)\s*\[\s*("[^"]*"|'[^']*')\s*\]""")
_DOMAIN_TEST = re.compile(r"""("[^"]*"|'[^']*')\s+in\s+device\s*\.\s*(attributes|capacity)\b""")
_ENV = device_cel.environment()


class Selector:
    """A compiled selector expression."""

    __slots__ = ("expression", "program", "estimated_cost", "_domains")

    def __init__(self, expression: str) -> None:
        if len(expression) > MAX_EXPRESSION_LENGTH:
            raise CELError(f"compilation failed: expression is longer than {MAX_EXPRESSION_LENGTH} characters")
        try:
            self.program = _ENV.compile(expression)
        except CELError as e:
            raise CELError(f"compilation failed: {e}") from None
        self.expression = expression
        self.estimated_cost = device_cel.estimated_cost(self.program)
        tested = {(m.group(2), m.group(1)[1:-1]) for m in _DOMAIN_TEST.finditer(expression)}
        self._domains = {(m.group(1), m.group(2)[1:-1]) for m in _DOMAIN_REF.finditer(expression)} - tested

    def matches(self, device: DeviceInput) -> bool:
        """Evaluate against one device; CELError on any failure."""
        value = device.value
        missing = [(k, d) for k, d in self._domains if d not in value[k]]
        if missing:
            value = {**value, **{k: dict(value[k]) for k, _ in missing}}
            for k, d in missing:
                value[k][d] = {}  # an unknown domain reads as an empty map
        bound = self.program.cost_bound(device_cel.sizes(device.entries, device.longest))
        result = self.program.evaluate({"device": value}, bound, MAX_COST)
        if not isinstance(result, bool):
            raise CELError(f"must evaluate to bool or the unknown type, not {type(result).__name__}")
        return result


class DeviceInput:
    """The `device` variable for one device, built once with the sizes the
    cost bound needs."""

    __slots__ = ("value", "entries", "longest")

    def __init__(self, driver: str, attributes: dict, capacity: dict, allow_multiple: bool) -> None:
        self.value = {
            "driver": driver,
            "attributes": attributes,
            "capacity": capacity,
            "allowMultipleAllocations": allow_multiple,
        }
        sizes = [len(attributes), len(capacity)] + [len(m) for m in attributes.values()] + [
            len(m) for m in capacity.values()]
        self.entries = max(sizes)
        strings = [len(k) for m in attributes.values() for k in m] + [
            len(v) for m in attributes.values() for v in m.values() if isinstance(v, str)]
        self.longest = max(strings, default=0)


_CACHE: dict[str, Selector | CELError] = {}


def compile_selector(expression: str) -> Selector:
    """The compiled selector, cached per expression text (errors too)."""
    hit = _CACHE.get(expression)
    if hit is None:
        try:
            hit = Selector(expression)
        except CELError as e:
            hit = e
        _CACHE[expression] = hit
    if isinstance(hit, CELError):
        raise hit
    return hit
