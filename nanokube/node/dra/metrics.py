"""The kubelet's DRA metrics (pkg/kubelet/metrics and cm/dra), one set per node, served at the
node's /metrics under upstream's names, labels, buckets and HELP texts:

- `dra_operations_duration_seconds{operation_name,is_error}`: each PrepareResources (every pod
  about to start, with claims or not, each try) and UnprepareResources (every pod that ends);
- `dra_grpc_operations_duration_seconds{driver_name,method_name,grpc_status_code}`: each
  NodePrepareResources / NodeUnprepareResources call, by the full gRPC method; a built-in
  simulated driver's in-process preparation counts as its kubelet plugin's call (always OK: a
  plugin reports a claim's failure in its answer, not as the call's status);
- `dra_resource_claims_in_use{driver_name}`: the prepared claims by driver, and all of them under
  the driver name "<any>" (always present; a claim with devices of two drivers counts once there);
- on a registry of its own (its family sorts after the kubelet_* ones), the plugin manager's
  `plugin_manager_total_plugins{socket_path,state}`: 1 for each socket in the plugins_registry
  directory ("desired_state_of_world") and each registered through one ("actual_state_of_world"),
  so a plugin whose registration fails shows as desired only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import Metric

from ...clock import Clock
from ...machinery.metrics import Family
from ...metrics.exposition import render

# grpc is imported where a call is made: `nanokube simulate`'s kubelets make none, and each
# of its runs would pay for the import (3.5% of a small run's instructions)
if TYPE_CHECKING:
    import grpc

#: client_golang's DefBuckets, the buckets of both histograms
DEF_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
#: the driver_name of the count over all drivers
ANY_DRIVER = "<any>"
PREPARE, UNPREPARE = "PrepareResources", "UnprepareResources"
_OPERATIONS_HELP = (
    "[ALPHA] Latency histogram in seconds for the duration of handling all ResourceClaims referenced by a pod when "
    "the pod starts or stops. Identified by the name of the operation (PrepareResources or UnprepareResources) and "
    "separated by the success of the operation. The number of failed operations is provided through the "
    "histogram's overall count.")
_IN_USE_HELP = (
    "[ALPHA] The number of ResourceClaims that are currently in use on the node, by driver name (driver_name label "
    "value) and across all drivers (special value <any> for driver_name). Note that the sum of all by-driver counts "
    "is not the total number of in-use ResourceClaims because the same ResourceClaim might use devices from "
    "different drivers. Instead, use the count for the <any> driver_name.")


def status_code(e: grpc.RpcError | None) -> str:
    """A call's status as Go's codes.Code names it ("OK", "DeadlineExceeded", "Unavailable")."""
    if e is None:
        return "OK"
    import grpc

    code = e.code() if isinstance(e, grpc.Call) else grpc.StatusCode.UNKNOWN
    if code is grpc.StatusCode.CANCELLED:  # Go's spelling
        return "Canceled"
    return "".join(w.capitalize() for w in code.name.split("_"))


class _ClaimsInUse:
    """The gauge, read at each scrape from the node's prepared claims (upstream's claimInfoCollector)."""

    def __init__(self, in_use: Callable[[], dict[str, int]]) -> None:
        self.in_use = in_use

    def collect(self) -> list[Metric]:
        m = Metric("dra_resource_claims_in_use", _IN_USE_HELP, "gauge")
        for driver, count in sorted(self.in_use().items()):
            m.add_sample("dra_resource_claims_in_use", {"driver_name": driver}, count)
        return [m]


class _TotalPlugins:
    """The plugin manager's gauge, read at each scrape from its watcher (upstream's totalPluginsCollector)."""

    def __init__(self, watcher) -> None:
        self.watcher = watcher

    def collect(self) -> list[Metric]:
        m = Metric("plugin_manager_total_plugins", "[ALPHA] Number of plugins in Plugin Manager", "gauge")
        for state, paths in (("actual_state_of_world", sorted(self.watcher.registered)),
                             ("desired_state_of_world", self.watcher.desired)):
            for path in paths:
                m.add_sample("plugin_manager_total_plugins", {"socket_path": path, "state": state}, 1)
        return [m]


class DRAMetrics:
    """One node's DRA metrics; `in_use()` gives the prepared claims by driver, "<any>" included."""

    def __init__(self, clock: Clock, in_use: Callable[[], dict[str, int]]) -> None:
        self.clock = clock
        self.registry = CollectorRegistry(auto_describe=False)
        self.operations = Family("histogram", "dra_operations_duration_seconds", _OPERATIONS_HELP,
                                 ["operation_name", "is_error"], self.registry, DEF_BUCKETS)
        self.grpc = Family("histogram", "dra_grpc_operations_duration_seconds",
                           "[ALPHA] Duration in seconds of the DRA gRPC operations",
                           ["driver_name", "method_name", "grpc_status_code"], self.registry, DEF_BUCKETS)
        self.registry.register(_ClaimsInUse(in_use))
        #: the plugin manager's (`watch`)
        self.plugins = CollectorRegistry(auto_describe=False)

    def watch(self, watcher) -> None:
        """Count the plugins of the node's plugin watcher."""
        self.plugins.register(_TotalPlugins(watcher))

    def operation(self, name: str, started: float, failed: bool) -> None:
        """A PrepareResources or UnprepareResources that began at `started` (the clock's monotonic)."""
        self.operations.labels(name, "true" if failed else "false").observe(self.clock.monotonic() - started)

    def call(self, driver: str, method: str, started: float, error: grpc.RpcError | None = None) -> None:
        """A gRPC call `method` ("/service/Method") to the driver's plugin that began at `started`."""
        self.grpc.labels(driver, method, status_code(error)).observe(self.clock.monotonic() - started)

    def render(self) -> bytes:
        """The DRA families, in the text format."""
        return render(self.registry)

    def render_plugins(self) -> bytes:
        """The plugin manager's family, in the text format (nothing without a watcher)."""
        return render(self.plugins)
