"""Built-in API groups. Importing this package registers every resource."""

from importlib import import_module

_GROUPS = [
    "core",
    "core_volumes",
    "core_quota",
    "core_replication",
    "apps",
    "apps_daemonset",
    "apps_statefulset",
    "batch",
    "batch_cronjob",
    "autoscaling",
    "coordination",
    "discovery",
    "events",
    "policy",
    "scheduling",
    "resource",
    "certificates",
    "storage",
    "node",
    "rbac",
    "apiextensions",
    "networking",
    "flowcontrol",
    "apiregistration",
    "authentication",
    "core_componentstatuses",
    "core_bindings",
    "storagemigration",
    "apiserverinternal",
    "resource_poolstatus",
    "admissionregistration",
]

GROUP_MODULES = []
for _g in _GROUPS:
    try:
        GROUP_MODULES.append(import_module(f"{__name__}.{_g}"))
    except ModuleNotFoundError as e:  # a group still being written
        if e.name != f"{__name__}.{_g}":
            raise
