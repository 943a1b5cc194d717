"""Cluster files: YAML node pools expanded into per-node descriptions.

The file is validated on PyYAML's node tree rather than on plain data so that
every refusal can name the line and the field a user has to fix.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import uuid
from dataclasses import dataclass, field

import yaml

from ..machinery.quantity import QuantityError, canonical, parse_quantity
from ..machinery.validation import label_value, qualified_name
from .devices import Device

CAPACITY_KEYS = ("cpu", "memory", "pods", "ephemeral-storage")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
ZONE_LABEL = "topology.kubernetes.io/zone"
RACK_LABEL = "nanokube.io/rack"
NVLINK_LABEL = "nanokube.io/nvlink-domain"
_UUID_NS = uuid.UUID("6b1d3c1e-5f0a-4c8e-9a57-6e616e6f6b75")
_UUID_NS_BYTES = _UUID_NS.bytes


def _name_hash(name: str) -> bytes:
    """uuid5(_UUID_NS, name)'s SHA-1 digest, without building UUID objects
    (two per device, tens of thousands per large cluster)."""
    return hashlib.sha1(_UUID_NS_BYTES + name.encode()).digest()


def _uuid5(name: str) -> str:
    """str(uuid.uuid5(_UUID_NS, name))."""
    h = bytearray(_name_hash(name)[:16])
    h[6] = (h[6] & 0x0F) | 0x50
    h[8] = (h[8] & 0x3F) | 0x80
    x = h.hex()
    return f"{x[:8]}-{x[8:12]}-{x[12:16]}-{x[16:20]}-{x[20:]}"


DEFAULT_CLUSTER = """\
pools:
  - name: gpu
    count: 2
    capacity: {cpu: "64", memory: 512Gi, pods: "110", ephemeral-storage: 1Ti}
    topology: {zone: zone-a, nodesPerRack: 2, nodesPerNVLinkDomain: 1}
    gpus: {count: 8, model: H100-SXM5-80GB, memory: 80Gi, architecture: Hopper,
           driverVersion: 550.54.15, cudaVersion: "12.4", computeCapability: "9.0", numaNodes: 2}
    nics: {count: 8, model: ConnectX-7, bandwidth: 400G, rdma: true}
"""


class ClusterFileError(ValueError):
    """A malformed cluster file; the message names the line and the field."""


@dataclass(frozen=True)
class NodeSpec:
    name: str
    index: int
    capacity: dict
    allocatable: dict
    labels: dict
    taints: list
    devices: list[Device] = field(default_factory=list)
    #: the images the node holds from the start (as a kind node's image carries preloaded ones)
    images: tuple[str, ...] = ()


@dataclass(frozen=True)
class Pool:
    name: str
    count: int
    capacity: dict
    allocatable: dict
    labels: dict
    taints: list
    topology: dict
    gpus: dict | None
    nics: dict | None
    images: tuple[str, ...] = ()
    #: its nodes' names where not `<pool>-<i>` (a node that joins on its own, `Cluster.joining`)
    node_names: tuple[str, ...] = ()

    def node_name(self, i: int) -> str:
        return self.node_names[i] if self.node_names else f"{self.name}-{i}"


@dataclass(frozen=True)
class Cluster:
    pools: list[Pool]
    #: the first node's cluster-wide index
    first_index: int = 0

    def nodes(self) -> list[NodeSpec]:
        """Every node of every pool, with a cluster-wide index (for its podCIDR)."""
        out: list[NodeSpec] = []
        for pool in self.pools:
            for i in range(pool.count):
                out.append(_expand(pool, i, self.first_index + len(out)))
        return out

    def joining(self, name: str, index: int, pool: str = "", max_pods: int | None = None,
                labels: dict[str, str] | None = None) -> Cluster:
        """One node of `pool`'s shape (the first pool's by default), named `name`, of cluster-wide
        index `index`: a node that joins a running cluster on its own (`nanokube kubelet`), its
        pods capacity and allocatable `max_pods` where given (the kubelet's maxPods), `labels` over
        the pool's (--node-labels). ClusterFileError when there is no such pool."""
        found = [p for p in self.pools if p.name == pool] if pool else self.pools[:1]
        if not found:
            raise ClusterFileError(f"no pool {pool!r} (pools: {', '.join(p.name for p in self.pools)})")
        shape = found[0]
        if max_pods is not None:
            shape = dataclasses.replace(shape, capacity={**shape.capacity, "pods": str(max_pods)},
                                        allocatable={**shape.allocatable, "pods": str(max_pods)})
        if labels:
            shape = dataclasses.replace(shape, labels={**shape.labels, **labels})
        return Cluster([dataclasses.replace(shape, count=1, node_names=(name,))], index)


def _expand(pool: Pool, i: int, index: int) -> NodeSpec:
    name = pool.node_name(i)
    labels = dict(pool.labels)
    topo = pool.topology
    if "zone" in topo:
        labels[ZONE_LABEL] = topo["zone"]
    if "nodesPerRack" in topo:
        labels[RACK_LABEL] = f"{pool.name}-rack-{i // topo['nodesPerRack']}"
    if "nodesPerNVLinkDomain" in topo:
        labels[NVLINK_LABEL] = f"{pool.name}-nvl-{i // topo['nodesPerNVLinkDomain']}"
    gpus = _gpus(name, pool.gpus)
    return NodeSpec(name, index, dict(pool.capacity), dict(pool.allocatable), labels, list(pool.taints),
                    gpus + _nics(name, pool.nics, gpus, pool.gpus["numaNodes"] if pool.gpus else 1), pool.images)


def _numa(i: int, count: int, numa_nodes: int) -> int:
    return i * numa_nodes // max(count, 1)


def _pcie_root(i: int) -> str:
    return f"pci0000:{0x10 + i:02x}"


def _gpus(node: str, g: dict | None) -> list[Device]:
    if not g:
        return []
    if "discovered" in g:
        return list(g["discovered"])
    out = []
    for i in range(g["count"]):
        attrs = {
            "model": g["model"], "architecture": g["architecture"], "driverVersion": g["driverVersion"],
            "cudaVersion": g["cudaVersion"], "computeCapability": g["computeCapability"],
            "uuid": f"GPU-{_uuid5(f'{node}/gpu-{i}')}", "index": i,
            "pcieRoot": _pcie_root(i), "numaNode": _numa(i, g["count"], g["numaNodes"]),
        }
        if g.get("migSlices"):
            attrs["migSlices"] = g["migSlices"]
        if g.get("sharing"):
            attrs["sharing"] = True
        if g.get("driver") == "nvidia":
            from .dra.nvidia import PRODUCTS

            attrs.update(driver="nvidia", minor=i, mig=g["mig"], productName=PRODUCTS[g["model"]].product_name,
                         pcieBusID=f"0000:{0x10 + i:02x}:00.0")
            if i < g.get("migGPUs", 0):
                attrs["migDevices"] = g["migDevices"]
        out.append(Device("gpu", f"gpu-{i}", attrs, {"memory": g["memory"]}))
    return out


def _nics(node: str, n: dict | None, gpus: list[Device], numa_nodes: int) -> list[Device]:
    """NIC i sits next to GPU i: same PCIe root, same NUMA node."""
    if not n:
        return []
    out = []
    for i in range(n["count"]):
        mac = _name_hash(f"{node}/nic-{i}")[:5]
        attrs = {
            "model": n["model"], "rdma": n["rdma"], "interfaceName": f"ib{i}",
            "hardwareAddress": bytes((0x02, *mac)).hex(":"),
            "numaNode": _numa(i, n["count"], numa_nodes),
        }
        if i < len(gpus):
            attrs["pcieRoot"] = gpus[i].attributes["pcieRoot"]
            attrs["numaNode"] = gpus[i].attributes["numaNode"]
        out.append(Device("nic", f"nic-{i}", attrs, {"bandwidth": n["bandwidth"]}))
    return out


# --- parsing -----------------------------------------------------------------------


class _Reader:
    """Reads a composed YAML node, failing with `FILE:LINE: field: problem`."""

    def __init__(self, source: str):
        self.source = source

    def fail(self, node: yaml.Node, path: str, msg: str):
        raise ClusterFileError(f"{self.source}:{node.start_mark.line + 1}: {path}: {msg}")

    def mapping(self, node: yaml.Node, path: str, allowed: tuple[str, ...] | None) -> dict[str, yaml.Node]:
        """Keys to value nodes; `allowed=None` accepts any scalar key."""
        if not isinstance(node, yaml.MappingNode):
            self.fail(node, path, "must be a mapping")
        out: dict[str, yaml.Node] = {}
        for k, v in node.value:
            key = k.value if isinstance(k, yaml.ScalarNode) else None
            if key is None or (allowed is not None and key not in allowed):
                self.fail(k, f"{path}.{key}" if path else str(key),
                          f"unknown field; expected one of: {', '.join(allowed or ())}")
            if key in out:
                self.fail(k, f"{path}.{key}" if path else key, "duplicate field")
            out[key] = v
        return out

    def scalar(self, node: yaml.Node, path: str) -> str:
        if not isinstance(node, yaml.ScalarNode) or node.value == "":
            self.fail(node, path, "must be a non-empty scalar")
        return node.value

    def integer(self, node: yaml.Node, path: str, minimum: int = 0) -> int:
        v = self.scalar(node, path)
        try:
            n = int(v)
        except ValueError:
            self.fail(node, path, f"must be an integer, got {v!r}")
        if n < minimum:
            self.fail(node, path, f"must be at least {minimum}, got {n}")
        return n

    def boolean(self, node: yaml.Node, path: str) -> bool:
        v = self.scalar(node, path).lower()
        if v not in ("true", "false"):
            self.fail(node, path, f"must be true or false, got {v!r}")
        return v == "true"

    def quantity(self, node: yaml.Node, path: str) -> str:
        v = self.scalar(node, path)
        try:
            return canonical(v)
        except QuantityError as e:
            self.fail(node, path, f"invalid quantity {v!r}: {e}")

    def resources(self, node: yaml.Node, path: str, required: bool) -> dict:
        """cpu, memory, pods, ephemeral-storage, and extended resources (`nvidia.com/gpu: 8`) as
        a device plugin advertises them: a whole number each. A node that advertises one is
        NodeResourcesFit's to count; one it does not is a DRA DeviceClass's (DRAExtendedResource)."""
        m = self.mapping(node, path, None)
        for k, v in m.items():
            if k not in CAPACITY_KEYS and not _extended_resource(k):
                self.fail(v, f"{path}.{k}", f"unknown field; expected one of: {', '.join(CAPACITY_KEYS)}, "
                                            "or an extended resource name (example.com/gpu)")
        if required:
            for k in ("cpu", "memory"):
                if k not in m:
                    self.fail(node, f"{path}.{k}", "required field is missing")
        out = {k: self.quantity(v, f"{path}.{k}") for k, v in m.items()}
        for k in out.keys() - set(CAPACITY_KEYS):
            if (q := parse_quantity(out[k])).denominator != 1 or q < 0:
                self.fail(m[k], f"{path}.{k}", f"must be a whole number of devices, got {m[k].value!r}")
        return out

    def labels(self, node: yaml.Node, path: str) -> dict:
        m = self.mapping(node, path, None)
        out = {}
        for k, v in m.items():
            for msg in qualified_name(k):
                self.fail(v, f"{path}.{k}", f"invalid label key: {msg}")
            val = v.value if isinstance(v, yaml.ScalarNode) else self.fail(v, f"{path}.{k}", "must be a string")
            for msg in label_value(val):
                self.fail(v, f"{path}.{k}", f"invalid label value {val!r}: {msg}")
            out[k] = val
        return out

    def taints(self, node: yaml.Node, path: str) -> list:
        if not isinstance(node, yaml.SequenceNode):
            self.fail(node, path, "must be a list")
        out = []
        for i, t in enumerate(node.value):
            p = f"{path}[{i}]"
            m = self.mapping(t, p, ("key", "value", "effect"))
            if "key" not in m:
                self.fail(t, f"{p}.key", "required field is missing")
            if "effect" not in m:
                self.fail(t, f"{p}.effect", "required field is missing")
            taint = {"key": self.scalar(m["key"], f"{p}.key"), "effect": self.scalar(m["effect"], f"{p}.effect")}
            if taint["effect"] not in TAINT_EFFECTS:
                self.fail(m["effect"], f"{p}.effect", f"must be one of {', '.join(TAINT_EFFECTS)}")
            if "value" in m:
                taint["value"] = self.scalar(m["value"], f"{p}.value")
            out.append(taint)
        return out

    def topology(self, node: yaml.Node, path: str) -> dict:
        m = self.mapping(node, path, ("zone", "nodesPerRack", "nodesPerNVLinkDomain"))
        out: dict = {}
        if "zone" in m:
            out["zone"] = self.scalar(m["zone"], f"{path}.zone")
        for k in ("nodesPerRack", "nodesPerNVLinkDomain"):
            if k in m:
                out[k] = self.integer(m[k], f"{path}.{k}", 1)
        return out

    def gpus(self, node: yaml.Node, path: str) -> dict:
        fields = ("count", "model", "memory", "architecture", "driverVersion", "cudaVersion",
                  "computeCapability", "numaNodes", "migSlices", "discover", "driver", "mig", "sharing")
        m = self.mapping(node, path, fields)
        if "discover" in m:
            return self.discovered(m, path)
        driver = self.scalar(m["driver"], f"{path}.driver") if "driver" in m else "nanokube"
        if driver == "nvidia":
            return self.nvidia_gpus(node, m, path)
        if driver != "nanokube":
            self.fail(m["driver"], f"{path}.driver", f"must be nanokube or nvidia, got {driver!r}")
        if "mig" in m:
            self.fail(m["mig"], f"{path}.mig", "only with driver: nvidia (the nanokube driver partitions by migSlices)")
        for k in fields[:7]:
            if k not in m:
                self.fail(node, f"{path}.{k}", "required field is missing")
        out = {k: self.scalar(m[k], f"{path}.{k}") for k in fields[1:7] if k != "memory"}
        out["count"] = self.integer(m["count"], f"{path}.count", 1)
        out["memory"] = self.quantity(m["memory"], f"{path}.memory")
        out["numaNodes"] = self.integer(m["numaNodes"], f"{path}.numaNodes", 1) if "numaNodes" in m else 1
        if "migSlices" in m:
            out["migSlices"] = self.integer(m["migSlices"], f"{path}.migSlices", 1)
        if "sharing" in m:
            out["sharing"] = self.boolean(m["sharing"], f"{path}.sharing")
        return out

    def nvidia_gpus(self, node: yaml.Node, m: dict[str, yaml.Node], path: str) -> dict:
        """`driver: nvidia`: published as NVIDIA's DRA driver does; a known
        `model` fills in memory, architecture and compute capability."""
        from .dra.nvidia import PRODUCTS

        for k in ("count", "model"):
            if k not in m:
                self.fail(node, f"{path}.{k}", "required field is missing")
        if "migSlices" in m:
            self.fail(m["migSlices"], f"{path}.migSlices", "not with driver: nvidia; use mig: true (the model's MIG profiles)")
        model = self.scalar(m["model"], f"{path}.model")
        product = PRODUCTS.get(model)
        if product is None:
            self.fail(m["model"], f"{path}.model", f"unknown NVIDIA model {model!r}; known: {', '.join(PRODUCTS)}")
        count = self.integer(m["count"], f"{path}.count", 1)
        mig, static = (self.nvidia_mig(m["mig"], f"{path}.mig", product, count) if "mig" in m else (False, {}))
        out = {"driver": "nvidia", "model": model, "mig": mig, **static, "count": count,
               "memory": self.quantity(m["memory"], f"{path}.memory") if "memory" in m else product.memory,
               "numaNodes": self.integer(m["numaNodes"], f"{path}.numaNodes", 1) if "numaNodes" in m else 1}
        defaults = {"architecture": product.architecture, "computeCapability": product.compute_capability,
                    "driverVersion": "570.124.06", "cudaVersion": "12.8"}
        for k, v in defaults.items():
            out[k] = self.scalar(m[k], f"{path}.{k}") if k in m else v
        return out

    def nvidia_mig(self, node: yaml.Node, path: str, product, count: int) -> tuple[bool, dict]:
        """`mig: true`: DynamicMIG (every placement offered); `mig: [profiles]`
        or `mig: {devices: [profiles], gpus: N}`: MIG devices created up front
        (as mig-parted does) on every GPU or the first N, placed first-fit."""
        from .dra.nvidia import place

        if isinstance(node, yaml.ScalarNode):
            mig = self.boolean(node, path)
            if mig and not product.mig:
                self.fail(node, path, f"{product.model} does not support MIG")
            return mig, {}
        gpus = count
        if isinstance(node, yaml.MappingNode):
            m = self.mapping(node, path, ("devices", "gpus"))
            if "devices" not in m:
                self.fail(node, f"{path}.devices", "required field is missing")
            if "gpus" in m:
                gpus = self.integer(m["gpus"], f"{path}.gpus", 1)
                if gpus > count:
                    self.fail(m["gpus"], f"{path}.gpus", f"must be at most gpus.count ({count}), got {gpus}")
            node, path = m["devices"], f"{path}.devices"
        if not isinstance(node, yaml.SequenceNode) or not node.value:
            self.fail(node, path, "must be true, false, a non-empty list of MIG profiles, or {devices, gpus}")
        if not product.mig:
            self.fail(node, path, f"{product.model} does not support MIG")
        names = [self.scalar(n, f"{path}[{i}]") for i, n in enumerate(node.value)]
        try:
            placed = place(product, names)
        except ValueError as e:
            self.fail(node, path, str(e))
        return False, {"migDevices": placed, "migGPUs": gpus}

    def discovered(self, m: dict[str, yaml.Node], path: str) -> dict:
        """`gpus: {discover: nvml}`: this machine's real GPUs, read once now;
        no NVML is a refusal naming the cause, never a silent simulation."""
        from .dra import nvml

        for k, v in m.items():
            if k != "discover":
                self.fail(v, f"{path}.{k}", "cannot be combined with discover (NVML reports it)")
        how = self.scalar(m["discover"], f"{path}.discover")
        if how != "nvml":
            self.fail(m["discover"], f"{path}.discover", f"must be nvml, got {how!r}")
        try:
            devices = nvml.discover()
        except nvml.NvmlUnavailable as e:
            self.fail(m["discover"], f"{path}.discover", f"cannot discover this machine's GPUs: {e}")
        return {"discovered": devices, "numaNodes": 1 + max(d.attributes["numaNode"] for d in devices)}

    def nics(self, node: yaml.Node, path: str) -> dict:
        m = self.mapping(node, path, ("count", "model", "bandwidth", "rdma"))
        for k in ("count", "model", "bandwidth"):
            if k not in m:
                self.fail(node, f"{path}.{k}", "required field is missing")
        return {"count": self.integer(m["count"], f"{path}.count", 1), "model": self.scalar(m["model"], f"{path}.model"),
                "bandwidth": self.quantity(m["bandwidth"], f"{path}.bandwidth"),
                "rdma": self.boolean(m["rdma"], f"{path}.rdma") if "rdma" in m else True}

    def pool(self, node: yaml.Node, path: str) -> Pool:
        m = self.mapping(node, path, ("name", "count", "capacity", "allocatable", "labels", "taints", "topology",
                                      "gpus", "nics", "images"))
        for k in ("name", "count", "capacity"):
            if k not in m:
                self.fail(node, f"{path}.{k}", "required field is missing")
        name = self.scalar(m["name"], f"{path}.name")
        if not _dns_label(name):
            self.fail(m["name"], f"{path}.name", f"{name!r} must be a lowercase DNS label")
        # 0: a node type declared for a planner to add (`simulate --add-nodes POOL=COUNT`)
        count = self.integer(m["count"], f"{path}.count")
        if count != 1 and _discovers(m.get("gpus")):
            self.fail(m["count"], f"{path}.count", "must be 1 with gpus.discover: the discovered GPUs are this machine's")
        capacity = self.resources(m["capacity"], f"{path}.capacity", True)
        capacity.setdefault("pods", "110")
        allocatable = {**capacity, **(self.resources(m["allocatable"], f"{path}.allocatable", False)
                                      if "allocatable" in m else {})}
        return Pool(name, count, capacity, allocatable,
                    self.labels(m["labels"], f"{path}.labels") if "labels" in m else {},
                    self.taints(m["taints"], f"{path}.taints") if "taints" in m else [],
                    self.topology(m["topology"], f"{path}.topology") if "topology" in m else {},
                    self.gpus(m["gpus"], f"{path}.gpus") if "gpus" in m else None,
                    self.nics(m["nics"], f"{path}.nics") if "nics" in m else None,
                    self.images(m["images"], f"{path}.images") if "images" in m else ())

    def images(self, node: yaml.Node, path: str) -> tuple[str, ...]:
        """Image references, each one word (`imagePullPolicy: Never` finds them on the pool's nodes)."""
        if not isinstance(node, yaml.SequenceNode):
            self.fail(node, path, "must be a list")
        out = []
        for i, item in enumerate(node.value):
            image = self.scalar(item, f"{path}[{i}]")
            if image != image.strip() or " " in image:
                self.fail(item, f"{path}[{i}]", f"must be an image reference without spaces, got {image!r}")
            out.append(image)
        return tuple(out)


def _extended_resource(name: str) -> bool:
    """Upstream's IsExtendedResourceName: domain-qualified outside kubernetes.io, and a valid
    name once prefixed `requests.` (as a quota names it)."""
    domain, slash, _ = name.partition("/")
    if not slash or name.startswith("requests.") or domain == "kubernetes.io" or domain.endswith(".kubernetes.io"):
        return False
    return not qualified_name("requests." + name)


def _discovers(gpus: yaml.Node | None) -> bool:
    return isinstance(gpus, yaml.MappingNode) and any(getattr(k, "value", None) == "discover" for k, _ in gpus.value)


def _dns_label(s: str) -> bool:
    return len(s) <= 50 and re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", s) is not None


def parse_cluster(text: str, source: str = "<cluster>") -> Cluster:
    try:
        root = yaml.compose(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = f"{mark.line + 1}" if mark else "?"
        raise ClusterFileError(f"{source}:{line}: not valid YAML: {getattr(e, 'problem', e)}") from None
    r = _Reader(source)
    if root is None:
        raise ClusterFileError(f"{source}:1: pools: required field is missing")
    top = r.mapping(root, "", ("pools",))
    if "pools" not in top:
        r.fail(root, "pools", "required field is missing")
    seq = top["pools"]
    if not isinstance(seq, yaml.SequenceNode) or not seq.value:
        r.fail(seq, "pools", "must be a non-empty list")
    pools = [r.pool(n, f"pools[{i}]") for i, n in enumerate(seq.value)]
    seen: set[str] = set()
    for i, (p, n) in enumerate(zip(pools, seq.value)):
        if p.name in seen:
            r.fail(n, f"pools[{i}].name", f"duplicate pool name {p.name!r}")
        seen.add(p.name)
    return Cluster(pools)


def load_cluster(path: str) -> Cluster:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise ClusterFileError(f"{path}: cannot read: {e.strerror}") from None
    return parse_cluster(text, path)


def default_cluster() -> Cluster:
    """What `nanokube up` runs without --cluster: two 8-GPU, 8-NIC nodes."""
    return parse_cluster(DEFAULT_CLUSTER, "<default cluster>")
