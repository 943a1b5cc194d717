"""One node's pod resources server (pkg/kubelet/apis/podresources/server_v1.go), serving
v1.PodResourcesLister on `<node dir>/pod-resources/kubelet.sock`, as a kubelet serves it on
/var/lib/kubelet/pod-resources/kubelet.sock:

- List: the node's active pods (not Succeeded or Failed), Get: one pod the node runs, whatever
  its phase, or upstream's error for another ("pod NAME in namespace NS not found", a plain
  error: gRPC code Unknown). Each pod lists its sidecars (restartable init containers), then its
  containers; each container its devices from device plugins (the device manager's, one entry
  per resource and NUMA node, without topology for devices that have none), exclusive CPUs and
  memory blocks (always none: a simulated node's CPU and memory managers are the `none`
  policy's) and its dynamic resources: each prepared ResourceClaim its `resources.claims`
  name (once per reference, the whole claim whatever request it names, as upstream's
  GetContainerClaimInfos), and the pod's extended resource claim when a request of it maps to
  the container; a device per entry with its driver, pool, name and its own CDI device IDs
  (upstream's loop also hands a driver's later devices the IDs of its earlier ones, a slip not
  copied), and the share ID of a device allocated with consumable capacity (KEP-5075: an
  external driver's Device.share_id, a built-in one's allocation result's shareID; unset, not
  empty, for a device allocated whole). A claim not prepared yet leaves the container's list
  empty, as upstream's lookup error does.
- GetAllocatableResources: the device plugins', CPU and memory managers' inventory: each healthy
  device plugin device, one entry each (per NUMA node), and no CPUs or memory (DRA devices are in
  ResourceSlices, not here, upstream too).

Every call first passes the rate limit (ratelimit.py); those served are counted in the
kubelet's metrics (`metrics`, on the node's /metrics). The servers of all nodes share the
process's event loop and read the node's state on it. The socket is a KubeletSocket
(../kubelet_socket.py): a bare listening socket whose gRPC server starts when a client first
connects, within the open files the node servers of the process share; a path too long for a
unix socket is bound through /proc/self/fd.
"""

from __future__ import annotations

import logging
import os
from collections import Counter

import grpc

from ...clock import REAL, Clock
from ...dra.resourceclaim import EXTENDED_CLAIM_REF, pod_claims
from ..dra.grpc_api import handler
from ..devicemanager.manager import NO_TOPOLOGY, DeviceManager
from ..dra.prepare import ClaimPreparer
from ..kubelet_socket import KubeletSocket
from .proto import podresources_pb2 as pb
from .ratelimit import DEFAULT_BURST, DEFAULT_QPS, LIMIT_EXCEEDED, Limiter

log = logging.getLogger(__name__)

#: under the kubelet's root directory, as upstream's PodResourcesPath and PodResourcesSocket
SOCKET_DIR = "pod-resources"
SOCKET_NAME = "kubelet.sock"
SERVICE = "v1.PodResourcesLister"
METHODS = {
    "List": (pb.ListPodResourcesRequest, pb.ListPodResourcesResponse),
    "GetAllocatableResources": (pb.AllocatableResourcesRequest, pb.AllocatableResourcesResponse),
    "Get": (pb.GetPodResourcesRequest, pb.GetPodResourcesResponse),
}
_TERMINAL = ("Succeeded", "Failed")
#: the kubelet's counters of the endpoint (pkg/kubelet/metrics), kubelet_pod_resources_endpoint_<key>: their help
_METRICS = {
    "errors_get": "Number of requests to the PodResource Get endpoint which returned error. Broken down by server "
                  "api version.",
    "errors_get_allocatable": "Number of requests to the PodResource GetAllocatableResources endpoint which returned "
                              "error. Broken down by server api version.",
    "errors_list": "Number of requests to the PodResource List endpoint which returned error. Broken down by server "
                   "api version.",
    "requests_get": "Number of requests to the PodResource Get endpoint. Broken down by server api version.",
    "requests_get_allocatable": "Number of requests to the PodResource GetAllocatableResources endpoint. Broken down "
                                "by server api version.",
    "requests_list": "Number of requests to the PodResource List endpoint. Broken down by server api version.",
    "requests_total": "Cumulative number of requests to the PodResource endpoint. Broken down by server api version.",
}


class PodResourcesServer:
    """Serves the pods `pods()` gives (the node's pod workers' copies) with the devices `claims`
    prepared for them and `devices` allocated them, on `root_dir`'s pod-resources socket."""

    def __init__(self, root_dir: str, pods, claims: ClaimPreparer, clock: Clock = REAL, node: str = "",
                 qps: float = DEFAULT_QPS, burst: int = DEFAULT_BURST, devices: DeviceManager | None = None):
        self.path = os.path.join(root_dir, SOCKET_DIR, SOCKET_NAME)
        self.pods = pods
        self.claims = claims
        self.devices = devices or DeviceManager()
        self.node = node
        self.limiter = Limiter(clock, qps, burst)
        #: the calls served by _METRICS key (a vector's series shows once counted)
        self.counts: Counter[str] = Counter()
        self.socket = KubeletSocket(self.path, self._handlers, "pod resources API", node)

    async def start(self) -> None:
        await self.socket.start()

    async def stop(self) -> None:
        await self.socket.stop()

    def _handlers(self) -> list[grpc.GenericRpcHandler]:
        impl = {"List": self._list, "GetAllocatableResources": self._allocatable, "Get": self._get}
        return [handler(SERVICE, METHODS, {name: self._limited(fn) for name, fn in impl.items()})]

    def metrics(self) -> list[str]:
        """The counters in the text format, by name; named as client_golang exposes a counter (no
        `_total` added)."""
        out = []
        for key in sorted(self.counts):
            name = f"kubelet_pod_resources_endpoint_{key}"
            out += [f"# HELP {name} [ALPHA] {_METRICS[key]}", f"# TYPE {name} counter",
                    f'{name}{{server_api_version="v1"}} {self.counts[key]}']
        return out

    def _count(self, *keys: str) -> None:
        self.counts.update(("requests_total", *keys))

    def _limited(self, fn):
        """Upstream's LimiterUnaryServerInterceptor: a call past the rate limit is refused unserved."""
        async def call(request, context):
            if not self.limiter.allow():
                await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, LIMIT_EXCEEDED)
            return await fn(request, context)
        return call

    # --- the three methods ------------------------------------------------------------------------

    async def _list(self, request: pb.ListPodResourcesRequest, context) -> pb.ListPodResourcesResponse:
        self._count("requests_list")
        return pb.ListPodResourcesResponse(pod_resources=[
            self.pod_resources(p) for p in self.pods() if (p.get("status") or {}).get("phase") not in _TERMINAL])

    async def _allocatable(self, request: pb.AllocatableResourcesRequest, context) -> pb.AllocatableResourcesResponse:
        self._count("requests_get_allocatable")
        return pb.AllocatableResourcesResponse(devices=[
            pb.ContainerDevices(resource_name=resource, device_ids=[device], topology=_topology(node))
            for resource, device, numa in self.devices.allocatable_devices() for node in numa or (NO_TOPOLOGY,)])

    async def _get(self, request: pb.GetPodResourcesRequest, context) -> pb.GetPodResourcesResponse:
        self._count("requests_get")
        pod = next((p for p in self.pods() if p["metadata"]["name"] == request.pod_name
                    and p["metadata"].get("namespace") == request.pod_namespace), None)
        if pod is None:
            self.counts["errors_get"] += 1
            await context.abort(grpc.StatusCode.UNKNOWN,
                                f"pod {request.pod_name} in namespace {request.pod_namespace} not found")
        return pb.GetPodResourcesResponse(pod_resources=self.pod_resources(pod))

    # --- what a pod holds -------------------------------------------------------------------------

    def pod_resources(self, pod: dict) -> pb.PodResources:
        spec = pod.get("spec") or {}
        containers = [c for c in spec.get("initContainers") or [] if c.get("restartPolicy") == "Always"]
        containers += spec.get("containers") or []
        md = pod["metadata"]
        return pb.PodResources(name=md["name"], namespace=md.get("namespace", ""), containers=[
            pb.ContainerResources(name=c["name"], devices=self.container_devices(md.get("uid", ""), c["name"]),
                                  dynamic_resources=self.dynamic_resources(pod, c))
            for c in containers])

    def container_devices(self, uid: str, container: str) -> list[pb.ContainerDevices]:
        return [pb.ContainerDevices(resource_name=resource, device_ids=ids,
                                    topology=_topology(numa))
                for resource, ids, numa in self.devices.container_devices(uid, container)]

    def dynamic_resources(self, pod: dict, container: dict) -> list[pb.DynamicResource]:
        """The prepared claims the container uses, each with its devices (upstream's GetDynamicResources)."""
        ns = pod["metadata"].get("namespace", "")
        refs = [ref["name"] for ref in (container.get("resources") or {}).get("claims") or []]
        names = []
        for ref, name in pod_claims(pod):
            if name is None:
                continue
            if ref == EXTENDED_CLAIM_REF:
                mappings = ((pod.get("status") or {}).get("extendedResourceClaimStatus") or {}).get(
                    "requestMappings") or []
                if any(m.get("containerName") == container["name"] for m in mappings):
                    names.append(name)
            else:
                names += [name for r in refs if r == ref]
        prepared = {(n, name): uid for uid, (n, name, _) in self.claims.prepared.items()}
        out = []
        for name in names:
            uid = prepared.get((ns, name))
            if uid is None:
                log.debug("node %s: pod resources of %s/%s: ResourceClaim %s is not prepared", self.node, ns,
                          pod["metadata"]["name"], name)
                return []
            devices = {**self.claims.builtin.get(uid, {}), **self.claims.external.get(uid, {})}
            out.append(pb.DynamicResource(claim_name=name, claim_namespace=ns, claim_resources=[
                pb.ClaimResource(driver_name=driver, pool_name=d.pool, device_name=d.device,
                                 cdi_devices=[pb.CDIDevice(name=i) for i in d.cdi_ids], share_id=d.share_id)
                for driver in sorted(devices) for d in devices[driver]]))
        return out


def _topology(numa: int) -> pb.TopologyInfo | None:
    """One NUMA node's topology; none for devices without topology (upstream leaves it nil)."""
    return None if numa == NO_TOPOLOGY else pb.TopologyInfo(nodes=[pb.NUMANode(ID=numa)])
