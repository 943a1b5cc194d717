"""A DRA driver's kubelet plugin for tests, serving what
k8s.io/dynamic-resource-allocation/kubeletplugin serves for a real driver:
Registration on `<registry>/<driver>-reg.sock` and DRAPlugin on
`<plugins>/<driver>/dra.sock`, over gRPC. It records every call, writes a CDI
spec (kind `<driver>/device`, one device per prepared device, each setting
`DEVICE_<n>` and the spec-wide `DRIVER`, with a mount and a device node), and
answers NodePrepareResources with one device per allocation result of its driver, found by `results`
(claim namespace, name -> [(request, pool, device[, shareID])]). Listing a
DRAResourceHealth service in `versions` serves NodeWatchResources: the health
`set_health` gives each device, streamed again on each change and every
`resend` seconds (a device's health holds for its timeout only).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from concurrent import futures

import grpc

from nanokube.node.dra.grpc_api import (DRA_METHODS, DRA_SERVICES, HEALTH_METHODS, HEALTH_SERVICES,
                                        REGISTRATION_METHODS, REGISTRATION_SERVICE, handler)
from nanokube.node.dra.proto import dra_health_pb2 as health
from nanokube.node.dra.proto import dra_pb2 as dra
from nanokube.node.dra.proto import pluginregistration_pb2 as reg

Results = Callable[[str, str], list[tuple[str, ...]]]


class PluginDriver:
    def __init__(self, driver: str, registry_dir: str, plugins_dir: str, cdi_dir: str, results: Results,
                 versions: tuple[str, ...] = ("v1.DRAPlugin", "v1beta1.DRAPlugin"), plugin_type: str = "DRAPlugin",
                 instance: str = "", resend: float | None = 5.0):
        """`instance` names the sockets of one of several instances, as kubeletplugin's rolling
        updates do (`<driver>-<uid>-reg.sock`, `dra-<uid>.sock`)."""
        self.driver = driver
        suffix = f"-{instance}" if instance else ""
        self.registration_socket = os.path.join(registry_dir, f"{driver}{suffix}-reg.sock")
        self.endpoint = os.path.join(plugins_dir, driver, f"dra{suffix}.sock")
        self.cdi_dir = cdi_dir
        self.results = results
        self.versions = versions
        self.plugin_type = plugin_type
        #: (method, request as a dict) in the order they came
        self.calls: list[tuple[str, dict]] = []
        #: (plugin_registered, error) of each NotifyRegistrationStatus
        self.statuses: list[tuple[bool, str]] = []
        #: claim uid -> the error NodePrepareResources (NodeUnprepareResources) answers for it
        self.fail: dict[str, str] = {}
        self.fail_unprepare: dict[str, str] = {}
        #: claim uids NodePrepareResources leaves out of its answer (neither prepared nor failed)
        self.skip: set[str] = set()
        #: answer NodePrepareResources keyed by each claim's name, not its UID (a driver's bug)
        self.key_by_name = False
        #: devices whose CDI spec it does not write (its CDI IDs then resolve to nothing)
        self.no_spec: set[str] = set()
        #: method -> (status code, details) the call fails with as a whole (a gRPC error, not a claim's)
        self.abort: dict[str, tuple[grpc.StatusCode, str]] = {}
        self._lock = threading.Lock()
        self._servers: list[grpc.Server] = []
        #: (pool, device) -> (health_pb2 status, timeout in seconds or 0); a change wakes the streams
        self._health: dict[tuple[str, str], tuple[int, int]] = {}
        self.resend = resend
        self._health_changed = threading.Condition(self._lock)
        self._stopping = False

    def start(self) -> PluginDriver:
        """DRAPlugin first, then the registration socket, as kubeletplugin.Start does."""
        os.makedirs(os.path.dirname(self.endpoint), exist_ok=True)
        impl = {"NodePrepareResources": self._prepare, "NodeUnprepareResources": self._unprepare}
        watch = {"NodeWatchResources": self._watch}
        self._serve(self.endpoint, [handler(DRA_SERVICES[v], DRA_METHODS, impl) for v in DRA_SERVICES] +
                    [handler(v, HEALTH_METHODS, watch, streaming=True) for v in HEALTH_SERVICES])
        self._serve(self.registration_socket, [handler(REGISTRATION_SERVICE, REGISTRATION_METHODS, {
            "GetInfo": self._get_info, "NotifyRegistrationStatus": self._notify})])
        return self

    def _serve(self, path: str, handlers: list) -> None:
        if os.path.exists(path):
            os.unlink(path)
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), handlers=handlers)
        server.add_insecure_port("unix://" + path)
        server.start()
        self._servers.append(server)

    def stop(self) -> None:
        """Stop serving and remove both sockets (a clean kubeletplugin stop)."""
        with self._lock:
            self._stopping = True
            self._health_changed.notify_all()
        for s in self._servers:
            s.stop(None)
        self._servers.clear()
        for path in (self.registration_socket, self.endpoint):
            if os.path.exists(path):
                os.unlink(path)

    def called(self, method: str) -> list[dict]:
        with self._lock:
            return [req for m, req in self.calls if m == method]

    def wait(self, check: Callable[[], object], timeout: float = 30.0):
        """Block until `check()` holds (for tests that run the cluster in another process)."""
        end = time.monotonic() + timeout
        while not (got := check()):
            if time.monotonic() > end:
                raise AssertionError("driver: condition never held")
            time.sleep(0.05)
        return got

    def state_dir(self, device: str) -> str:
        """Where it keeps a prepared device's files on the node (beside the CDI directory)."""
        return os.path.join(os.path.dirname(self.cdi_dir), "dra-state", self.driver, device)

    def _record(self, method: str, request: dict) -> None:
        with self._lock:
            self.calls.append((method, request))

    def _get_info(self, request, context) -> reg.PluginInfo:
        self._record("GetInfo", {})
        return reg.PluginInfo(type=self.plugin_type, name=self.driver, endpoint=self.endpoint,
                              supported_versions=list(self.versions))

    def _notify(self, request, context) -> reg.RegistrationStatusResponse:
        with self._lock:
            self.statuses.append((request.plugin_registered, request.error))
        self._record("NotifyRegistrationStatus", {"registered": request.plugin_registered, "error": request.error})
        return reg.RegistrationStatusResponse()

    def _prepare(self, request, context) -> dra.NodePrepareResourcesResponse:
        claims = [{"namespace": c.namespace, "uid": c.uid, "name": c.name} for c in request.claims]
        self._record("NodePrepareResources", {"claims": claims})
        if "NodePrepareResources" in self.abort:
            context.abort(*self.abort["NodePrepareResources"])
        out = dra.NodePrepareResourcesResponse()
        for c in claims:
            if c["uid"] in self.skip:
                continue
            if c["uid"] in self.fail:
                out.claims[c["uid"]].error = self.fail[c["uid"]]
                continue
            result = out.claims[c["name"] if self.key_by_name else c["uid"]]
            for request_name, pool, device, *share in self.results(c["namespace"], c["name"]):
                if device not in self.no_spec:
                    self.write_spec(device)
                # kubeletplugin hands on the allocation result's shareID (a 4th element here) as share_id
                result.devices.add(request_names=[request_name], pool_name=pool, device_name=device,
                                   cdi_device_ids=[f"{self.driver}/device={device}"],
                                   share_id=share[0] if share else None)
        return out

    def _unprepare(self, request, context) -> dra.NodeUnprepareResourcesResponse:
        claims = [{"namespace": c.namespace, "uid": c.uid, "name": c.name} for c in request.claims]
        self._record("NodeUnprepareResources", {"claims": claims})
        out = dra.NodeUnprepareResourcesResponse()
        for c in claims:
            out.claims[c["name"] if self.key_by_name else c["uid"]].error = self.fail_unprepare.get(c["uid"], "")
        return out

    def set_health(self, pool: str, device: str, status: str, timeout: int = 0) -> None:
        """Report the device "HEALTHY", "UNHEALTHY" or "UNKNOWN" on every stream, for `timeout`
        seconds (0: the kubelet's default)."""
        with self._lock:
            self._health[(pool, device)] = (health.HealthStatus.Value(status), timeout)
            self._health_changed.notify_all()

    def _watch(self, request, context):
        """NodeWatchResources: every device's health now, then again after each change and every
        `resend` seconds."""
        self._record("NodeWatchResources", {})
        sent, sent_at = None, 0.0
        while True:
            with self._lock:
                while self._health == sent and not self._stopping and context.is_active() and \
                        (self.resend is None or time.monotonic() - sent_at < self.resend):
                    self._health_changed.wait(0.1)
                if self._stopping or not context.is_active():
                    return
                sent, sent_at = dict(self._health), time.monotonic()
            yield health.NodeWatchResourcesResponse(devices=[
                health.DeviceHealth(device=health.DeviceIdentifier(pool_name=pool, device_name=device), health=h,
                                    last_updated_time=int(time.time()), health_check_timeout_seconds=timeout)
                for (pool, device), (h, timeout) in sorted(sent.items())])

    def write_spec(self, device: str) -> None:
        """One CDI spec file per device, as drivers write them (cdiVersion, kind, devices): besides
        the variables, the device's state directory (`state_dir(device)`, holding `info`) mounted
        read-only at /var/run/<driver>/<device>, and its device node /dev/dra-<device>."""
        os.makedirs(self.cdi_dir, exist_ok=True)
        os.makedirs(self.state_dir(device), exist_ok=True)
        with open(os.path.join(self.state_dir(device), "info"), "w") as f:
            f.write(f"{self.driver} {device}\n")
        index = device.rsplit("-", 1)[-1]
        spec = {"cdiVersion": "0.6.0", "kind": f"{self.driver}/device",
                "containerEdits": {"env": [f"DRIVER={self.driver}"]},
                "devices": [{"name": device, "containerEdits": {
                    "env": [f"DEVICE_{index}={device}"],
                    "mounts": [{"hostPath": self.state_dir(device), "containerPath": f"/var/run/{self.driver}/{device}",
                                "options": ["ro", "nosuid", "nodev", "bind"]}],
                    "deviceNodes": [{"path": f"/dev/dra-{device}", "type": "c", "major": 195, "minor": int(index),
                                     "fileMode": 0o660}]}}]}
        with open(os.path.join(self.cdi_dir, f"{self.driver}-{device}.json"), "w") as f:
            json.dump(spec, f)


if __name__ == "__main__":
    # a plugin in a process of its own, preparing every claim as device gpu-0 of pool NODE, until
    # killed: `python -m tests.node.dra.plugin_driver DRIVER REGISTRY PLUGINS CDI NODE`
    import sys

    name, registry, plugins, cdi_dir, node = sys.argv[1:6]
    PluginDriver(name, registry, plugins, cdi_dir, lambda ns, n: [("gpu", node, "gpu-0")]).start()
    print("serving", flush=True)
    threading.Event().wait()
