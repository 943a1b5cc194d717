"""Built-in API groups. Importing this package registers every resource."""

from importlib import import_module

_GROUPS = [
    "core",
    "apps",
    "batch",
    "autoscaling",
    "coordination",
    "discovery",
    "events",
    "policy",
    "scheduling",
    "resource",
    "certificates",
    "rbac",
    "networking",
    "flowcontrol",
    "apiregistration",
    "authentication",
]

GROUP_MODULES = []
for _g in _GROUPS:
    try:
        GROUP_MODULES.append(import_module(f"{__name__}.{_g}"))
    except ModuleNotFoundError as e:  # a group still being written
        if e.name != f"{__name__}.{_g}":
            raise
