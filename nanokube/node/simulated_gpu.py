"""`nvidia-smi` in a simulated container, as an ML engineer's first command in a GPU pod runs it:
the summary table (driver 5xx / CUDA 12.x layout, a MIG devices table where the container was
given MIG devices), `-L`, `-q` (the detailed report), `--query-gpu=... --format=csv`, each for the
GPUs `-i` names (by index, UUID or PCI bus id; a list of them) or all; `topo -m`, their NVLink
and PCIe matrix with each GPU's CPU and NUMA affinity.

The GPUs it sees are the container's (`GPUS`, by container, set by simulated_io for the commands
about to run):
those its DRA claims were prepared with, and those NVIDIA_VISIBLE_DEVICES names (the device
plugin's Allocate sets it for `nvidia.com/gpu`), numbered from 0 in PCI bus order, with
the product name NVML gives the model ("NVIDIA H100 80GB HBM3"), UUID and memory the node
publishes, and the MIG devices of each that the container's NVIDIA-personality claims gave it
(their profiles' memory and engines: dra/nvidia.py). A container given none has no `nvidia-smi`: the
NVIDIA container runtime mounts the binary and the driver's libraries in only for a container it
hands GPUs to, and CUDA images do not ship it, so on a real GPU node such a pod's shell says
`nvidia-smi: not found` (exec: executable file not found in $PATH). Where `GPUS` is unset (a
command worked out with no node at hand) the command is not interpreted.
"""

from __future__ import annotations

import math
import re
from contextvars import ContextVar
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from fractions import Fraction

from ..machinery.quantity import parse_quantity
from . import simulated_system
from .dra.nvidia import PRODUCTS, MigProfile
from .simulated_applets import NotFound, Process, Unknown
from .simulated_fs import ContainerFS


@dataclass(frozen=True)
class Mig:
    """One MIG device a container sees: its profile (memory, multiprocessors and engines) and UUID."""

    profile: MigProfile
    uuid: str
    #: the memory slice its GPU instance's placement starts at
    start: int = 0


@dataclass(frozen=True)
class Gpu:
    """One GPU a container sees, with the MIG devices of it the container was given (none: whole)."""

    name: str
    uuid: str
    bus_id: str
    memory_mib: int
    driver: str
    cuda: str
    architecture: str = ""
    migs: tuple[Mig, ...] = ()
    #: the board's power limit and idle draw, watts (its product's; an H100 SXM's for one not known)
    power_cap: int = 700
    idle_power: int = 70
    #: NVLinks to each peer (0: PCIe only), its PCIe root, its NUMA node (None: not known) of the node's
    nvlinks: int = 0
    pcie_root: str = ""
    numa: int | None = None
    numa_nodes: int = 1
    #: its minor number on the node (/dev/nvidiaN): the driver's, its index there
    minor: int = 0


@dataclass(frozen=True)
class Nic:
    """One of the node's RDMA NICs as `topo -m` lists it: its verbs device name (a ConnectX's
    `mlx5_N`), PCIe root and NUMA node (None: not known)."""

    name: str
    pcie_root: str = ""
    numa: int | None = None


#: the GPUs of each container whose commands are being worked out; one not there has no node at hand
GPUS: ContextVar[dict[str, tuple[Gpu, ...]]] = ContextVar("simulated_gpus", default={})
#: the node's RDMA NICs, in order, for the commands being worked out: `topo -m` lists every one
#: (the host's /sys/class/infiniband, which a container sees whole)
NICS: ContextVar[tuple[Nic, ...]] = ContextVar("simulated_nics", default=())
#: what an idle GPU shows as used: the driver's reservation on a GPU no process uses
IDLE_MIB = 1
_QUERY = {  # field: (header, unit, value of GPU i)
    "index": ("index", "", lambda i, g: str(i)),
    "name": ("name", "", lambda i, g: g.name),
    "uuid": ("uuid", "", lambda i, g: g.uuid),
    "pci.bus_id": ("pci.bus_id", "", lambda i, g: g.bus_id),
    "driver_version": ("driver_version", "", lambda i, g: g.driver),
    "memory.total": ("memory.total", "MiB", lambda i, g: str(g.memory_mib)),
    "memory.used": ("memory.used", "MiB", lambda i, g: str(IDLE_MIB)),
    "memory.free": ("memory.free", "MiB", lambda i, g: str(g.memory_mib - IDLE_MIB)),
    "utilization.gpu": ("utilization.gpu", "%", lambda i, g: "0"),
    "utilization.memory": ("utilization.memory", "%", lambda i, g: "0"),
    "count": ("count", "", lambda i, g: ""),  # (filled in with how many GPUs are listed)
    "mig.mode.current": ("mig.mode.current", "", lambda i, g: "Enabled" if g.migs else "Disabled"),
    "temperature.gpu": ("temperature.gpu", "", lambda i, g: "30"),
    "compute_mode": ("compute_mode", "", lambda i, g: "Default"),
    "persistence_mode": ("persistence_mode", "", lambda i, g: "Enabled"),
    "power.draw": ("power.draw", "W", lambda i, g: f"{g.idle_power:.2f}"),
    "power.limit": ("power.limit", "W", lambda i, g: f"{g.power_cap:.2f}"),
}
#: nvidia-smi's exit code where `-i` names no GPU it sees (NVML_ERROR_NOT_FOUND)
NOT_FOUND_CODE = 6


def gpu(attributes: dict, capacity: dict, index: int, migs=(), numa_nodes: int = 1) -> Gpu:
    """A node's GPU (cluster.Device attributes and capacity) as nvidia-smi names it, with the MIG
    devices of it a container was given (`migs`: their profile and UUID, as the NVIDIA driver
    prepared them); `numa_nodes`: how many its node has."""
    product = PRODUCTS.get(attributes.get("model", ""))
    name = attributes.get("productName") or (product.product_name if product else f"NVIDIA {attributes.get('model', 'GPU')}")
    memory = int(parse_quantity(str(capacity.get("memory", "0"))) / Fraction(2**20))
    bus = attributes.get("pcieBusID") or f"0000:{0x10 + index:02x}:00.0"
    profiles = {p.name: p for p in product.mig} if product else {}
    return Gpu(name, attributes.get("uuid", ""), "0000" + bus.upper(), memory,
               attributes.get("driverVersion", "550.54.15"), str(attributes.get("cudaVersion", "12.4")),
               attributes.get("architecture", ""), tuple(_mig(m["profile"], m["uuid"], profiles, m.get("device", "")) for m in migs),
               *((product.power_cap, product.idle_power, product.nvlinks) if product else (700, 70, 0)),
               attributes.get("pcieRoot", ""), attributes.get("numaNode"), numa_nodes, index)


def nics(devices: list) -> tuple[Nic, ...]:
    """The node's RDMA NICs (cluster.Device, kind "nic") as `topo -m` names them: numbered in the
    node's order, `mlx5_N` for the ConnectX family's mlx5 driver, else their interface's name."""
    rdma = [d for d in devices if d.kind == "nic" and d.attributes.get("rdma")]
    return tuple(Nic(f"mlx5_{i}" if str(d.attributes.get("model", "")).startswith("ConnectX") else
                     d.attributes.get("interfaceName", f"nic{i}"), d.attributes.get("pcieRoot", ""),
                     d.attributes.get("numaNode")) for i, d in enumerate(rdma))


#: the driver's device nodes the NVIDIA runtime gives a container along with its GPUs' own
CONTROL_NODES = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset")


def with_device_nodes(edits, container: str):
    """`edits` (a container's CDI edits, dra/cdi.ContainerEdits) with the device nodes of the GPUs
    the container sees (`GPUS`, where known), as the NVIDIA runtime's CDI spec adds them:
    /dev/nvidiaN (N the GPU's minor number) and the driver's control nodes (character devices,
    0666), so `ls /dev/nvidia*` lists them."""
    gpus = GPUS.get().get(container)
    if not gpus:
        return edits
    paths = [f"/dev/nvidia{g.minor}" for g in gpus] + list(CONTROL_NODES)
    return replace(edits, device_nodes=[*edits.device_nodes, *((p, p, 0o666) for p in paths)])


def _mig(profile: str, uuid: str, profiles: dict, device: str = "") -> Mig:
    """A MIG device of `profile`: its figures from the model's profile table, else its memory from
    the profile's name (`1g.10gb`: 10 GiB) and no engines known; its placement's start from the
    driver's name for it (`gpu-0-mig-1g10gb-19-3`: slice 3)."""
    start = int(m.group(1)) if (m := re.search(r"-(\d+)$", device)) else 0
    if profile not in profiles:
        gb = re.search(r"\.(\d+)gb", profile)
        return Mig(MigProfile(profile, 0, 0, (), int(gb.group(1)) * 1024 if gb else 0, 0, 0, 0), uuid, start)
    return Mig(profiles[profile], uuid, start)


def nvidia_smi(proc: Process, fs: ContainerFS, name: str, args: list[str]) -> int:
    gpus = GPUS.get().get(fs.container) if fs is not None else None
    if gpus is None:
        raise Unknown
    if not gpus:
        raise NotFound
    args, ids = _ids(args)
    listed = list(enumerate(gpus))  # (nvidia-smi keeps each GPU's own index when -i picks some)
    if ids is not None:
        listed = [(i, g) for i, g in listed if any(_names(i, g, x) for x in ids)]
        if not listed:
            proc.out("No devices were found\n")
            return NOT_FOUND_CODE
    now = getattr(proc, "started", 0.0) + getattr(proc, "now", 0.0)
    if not args:
        proc.out(_table(listed, now))
        return 0
    if args in (["-L"], ["--list-gpus"]):
        proc.out(_list(listed))
        return 0
    if args in (["-q"], ["--query"]):
        proc.out(_report(listed, len(gpus), now))
        return 0
    if args in (["topo", "-m"], ["topo", "--matrix"]):
        proc.out(_topology(listed))
        return 0
    if args[:1] == ["dmon"]:
        return _dmon(proc, listed, args[1:])
    if args == ["mig", "-lgi"] and any(g.migs for _, g in listed):
        proc.out(_instances(listed))
        return 0
    query = next((a.split("=", 1)[1] for a in args if a.startswith("--query-gpu=")), None)
    form = next((a.split("=", 1)[1] for a in args if a.startswith("--format=")), None)
    if query is None or form is None or len(args) != 2:
        raise Unknown
    fields, opts = query.split(","), form.split(",")
    if opts[0] != "csv" or not set(opts[1:]) <= {"noheader", "nounits"}:
        proc.err(f'"{form}" is not a valid format.\n')
        return 2
    bad = next((f for f in fields if f not in _QUERY), None)
    if bad is not None:
        proc.err(f'Field "{bad}" is not a valid field to query.\n\n')
        return 2
    units = "nounits" not in opts
    # `nounits` drops the units from the values only: the header still names them
    lines = [] if "noheader" in opts else [", ".join(
        _QUERY[f][0] + (f" [{_QUERY[f][1]}]" if _QUERY[f][1] else "") for f in fields)]
    for i, g in listed:
        lines.append(", ".join((str(len(listed)) if f == "count" else _QUERY[f][2](i, g))
                               + (f" {_QUERY[f][1]}" if units and _QUERY[f][1] else "") for f in fields))
    proc.out("".join(line + "\n" for line in lines))
    return 0


def listing(container: str) -> str:
    """What `nvidia-smi -L` prints in `container` (none where it has no GPUs), for a script the
    shell cannot interpret: its output at start is logged all the same."""
    return _list(list(enumerate(GPUS.get().get(container) or ())))


def _list(listed: list[tuple[int, Gpu]]) -> str:
    """`-L`: each GPU by its product name and UUID, its MIG devices under it."""
    return "".join(f"GPU {i}: {g.name} (UUID: {g.uuid})\n" + "".join(
        f"  MIG {m.profile.name:<11} Device {j:>2}: (UUID: {m.uuid})\n" for j, m in enumerate(g.migs))
        for i, g in listed)


def _ids(args: list[str]) -> tuple[list[str], list[str] | None]:
    """The arguments less `-i ID[,ID...]` / `--id=...`, and the IDs it names (None: no -i)."""
    rest, ids = [], None
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("-i", "--id") and i + 1 < len(args):
            ids, i = [*(ids or []), *args[i + 1].split(",")], i + 2
            continue
        if a.startswith(("--id=", "-i=")):
            ids = [*(ids or []), *a.split("=", 1)[1].split(",")]
        else:
            rest.append(a)
        i += 1
    return rest, ids


def _names(i: int, g: Gpu, x: str) -> bool:
    """Whether `-i` value `x` names GPU `g` (index `i`): its index, its UUID, or its PCI bus id
    (with the 8- or 4-digit domain, any case)."""
    x = x.strip()
    return x == str(i) or x == g.uuid or x.upper() in (g.bus_id.upper(), g.bus_id[4:].upper())


def _report(listed: list[tuple[int, Gpu]], attached: int, now: float) -> str:
    """`nvidia-smi -q`: the NVSMI log, a section per GPU of what this simulation knows of it (its
    product, mode, PCI address, memory, utilisation; its MIG devices), each key padded to the
    column the real report puts its colons at."""
    d = datetime.fromtimestamp(now, timezone.utc)
    first = listed[0][1]
    out = ["", "==============NVSMI LOG==============", "",
           _kv(0, "Timestamp", f"{d:%a %b} {d.day:2d} {d:%H:%M:%S} {d.year}"),
           _kv(0, "Driver Version", first.driver), _kv(0, "CUDA Version", first.cuda), "",
           _kv(0, "Attached GPUs", str(attached))]
    for i, g in listed:
        mig = "Enabled" if g.migs else "Disabled"
        bus = g.bus_id.split(":")
        out += [f"GPU {g.bus_id}", _kv(1, "Product Name", g.name), _kv(1, "Product Brand", "NVIDIA"),
                _kv(1, "Product Architecture", g.architecture or "N/A"), _kv(1, "Display Mode", "Disabled"),
                _kv(1, "Display Active", "Disabled"), _kv(1, "Persistence Mode", "Enabled"),
                "    MIG Mode", _kv(2, "Current", mig), _kv(2, "Pending", mig)]
        out += ["    MIG Devices"] if g.migs else []
        for j, m in enumerate(g.migs):
            p = m.profile
            out += ["        MIG Device", _kv(3, "Index", str(j)), _kv(3, "GPU Instance ID", str(j + 1)),
                    _kv(3, "Compute Instance ID", "0"), "            Device Attributes", "                Shared",
                    *(_kv(5, k, str(v)) for k, v in (("Multiprocessor count", p.sm), ("Copy Engine count", p.ce),
                                                     ("Encoder count", p.enc), ("Decoder count", p.dec),
                                                     ("OFA count", p.ofa), ("JPG count", p.jpeg))),
                    "            FB Memory Usage", _kv(4, "Total", f"{p.memory_mib} MiB"),
                    _kv(4, "Used", f"{IDLE_MIB} MiB"), _kv(4, "Free", f"{p.memory_mib - IDLE_MIB} MiB")]
        out += [_kv(1, "GPU UUID", g.uuid), _kv(1, "Minor Number", str(i)), "    PCI", _kv(2, "Bus", f"0x{bus[1]}"),
                _kv(2, "Device", f"0x{bus[2].split('.')[0]}"), _kv(2, "Domain", f"0x{bus[0][-4:]}"),
                _kv(2, "Bus Id", g.bus_id), "    FB Memory Usage", _kv(2, "Total", f"{g.memory_mib} MiB"),
                _kv(2, "Used", f"{IDLE_MIB} MiB"), _kv(2, "Free", f"{g.memory_mib - IDLE_MIB} MiB"),
                _kv(1, "Compute Mode", "Default"), "    Utilization",
                *(_kv(2, k, "N/A" if g.migs else "0 %") for k in ("Gpu", "Memory", "Encoder", "Decoder")),
                "    Temperature", _kv(2, "GPU Current Temp", "30 C"), _kv(1, "Processes", "None"), ""]
    return "".join(line + "\n" for line in out)


_LEGEND = """
Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
"""


def _topology(listed: list[tuple[int, Gpu]]) -> str:
    """`nvidia-smi topo -m`: the matrix of the GPUs and the node's RDMA NICs, tab-separated, as
    NCCL users read it before a run. SXM boards reach each other over their bonded NVLinks (NV12
    on an A100, NV18 on an H100, through the NVSwitches); other pairs through the PCIe switch of
    their root (PIX: a NIC beside its GPU), the host bridges of one NUMA node (NODE), or across the
    sockets (SYS). Each GPU's CPU and NUMA affinity is its NUMA node's share of the node's CPUs,
    numbered in blocks (no hyperthread siblings); a NIC's row has none. The NICs' names follow
    the legend."""
    node = simulated_system.NODE.get() or {}
    cpus = math.ceil(parse_quantity(str(node.get("cpu", "1"))))
    nics = NICS.get()

    def link(a: Gpu | Nic, b: Gpu | Nic) -> str:
        if getattr(a, "nvlinks", 0) and getattr(b, "nvlinks", 0):
            return f"NV{min(a.nvlinks, b.nvlinks)}"
        if a.pcie_root and a.pcie_root == b.pcie_root:
            return "PIX"
        return "NODE" if a.numa is not None and a.numa == b.numa else "SYS"

    def affinity(g: Gpu) -> str:
        if g.numa is None:
            return f"0-{cpus - 1}\tN/A"
        share = max(cpus // max(g.numa_nodes, 1), 1)
        return f"{g.numa * share}-{(g.numa + 1) * share - 1}\t{g.numa}"

    devices = [(f"GPU{i}", g) for i, g in listed] + [(f"NIC{i}", n) for i, n in enumerate(nics)]
    out = ["\t" + "".join(f"{name}\t" for name, _ in devices) + "CPU Affinity\tNUMA Affinity\tGPU NUMA ID"]
    for name, a in devices:
        cells = "\t".join(" X " if b is a else link(a, b) for _, b in devices)
        out.append(f"{name}\t{cells}" + (f"\t{affinity(a)}\t\tN/A" if isinstance(a, Gpu) else ""))
    legend = "\nNIC Legend:\n\n" + "".join(f"  NIC{i}: {n.name}\n" for i, n in enumerate(nics)) + "\n" if nics else ""
    return "".join(line + "\n" for line in out) + _LEGEND + legend


#: dmon's metric groups (`-s`, default "puc"), each its columns: (name, unit, value for an idle GPU)
_DMON = {
    "p": (("pwr", "W", lambda g: str(g.idle_power)), ("gtemp", "C", lambda g: "30"), ("mtemp", "C", lambda g: "-")),
    "u": tuple((name, "%", lambda g: "0") for name in ("sm", "mem", "enc", "dec", "jpg", "ofa")),
    "c": (("mclk", "MHz", lambda g: str(_IDLE_CLOCKS.get(g.architecture, (405, 210))[0])),
          ("pclk", "MHz", lambda g: str(_IDLE_CLOCKS.get(g.architecture, (405, 210))[1]))),
}
#: an idle board's memory and graphics clocks (MHz) by architecture: HBM3, HBM2e; else a GDDR card's P8
_IDLE_CLOCKS = {"Hopper": (2619, 345), "Ampere": (1215, 210)}


def _dmon(proc: Process, listed: list[tuple[int, Gpu]], args: list[str]) -> int:
    """`nvidia-smi dmon [-c N] [-d SECONDS] [-s puc]`: its two header lines, then N samples of each
    GPU, `-d` seconds apart (1 by default) on the command's clock, as a run watching its GPUs
    logs them: idle (no process here uses a GPU). Without `-c` it samples until stopped, each
    sample written as its time comes (`repeats`). The other metric groups and options are not
    simulated."""
    opts = dict(zip(args[::2], args[1::2]))
    if len(args) % 2 or not set(opts) <= {"-c", "-d", "-s"} or not hasattr(proc, "now") or \
            not re.fullmatch(r"[1-9]\d{0,3}", opts.get("-c", "1")) or not re.fullmatch(r"[1-9]\d*", opts.get("-d", "1")) or \
            not re.fullmatch(r"[puc]+", opts.get("-s", "puc")):
        raise Unknown
    columns = [c for group in "puc" if group in opts.get("-s", "puc") for c in _DMON[group]]
    proc.out("# gpu" + "".join(f" {name:>6}" for name, _, _ in columns) + " \n"
             + "# Idx" + "".join(f" {unit:>6}" for _, unit, _ in columns) + " \n")
    sample, period = "".join(f"{i:>5}" + "".join(f" {value(g):>6}" for _, _, value in columns) + " \n"
                             for i, g in listed), int(opts.get("-d", "1"))
    if "-c" not in opts:
        proc.repeats(period, sample)
    for n in range(int(opts["-c"])):
        if n:
            proc.now += period
        proc.out(sample)
    return 0


def _instances(listed: list[tuple[int, Gpu]]) -> str:
    """`nvidia-smi mig -lgi`: the GPU instances of the container's MIG devices, each its profile's
    name and ID, its instance ID (as the MIG devices table numbers them) and placement."""
    rule = "+" + "-" * 55 + "+"
    out = [rule, f"| {'GPU instances:':<54}|", "| GPU   Name             Profile  Instance   Placement  |",
           "|                          ID       ID       Start:Size |", "|" + "=" * 55 + "|"]
    for i, g in listed:
        for j, m in enumerate(g.migs):
            out += [f"| {i:>3}  {'MIG ' + m.profile.name:<16}{m.profile.id:>6}{j + 1:>9}{m.start:>11}:{m.profile.size:<6}|",
                    rule]
    return "".join(line + "\n" for line in out)


def _kv(depth: int, key: str, value: str) -> str:
    """One line of `-q`'s report: the key indented 4 spaces a level, padded to column 42, then its value."""
    return f"{'    ' * depth + key:<42}: {value}"


def _table(listed: list[tuple[int, Gpu]], now: float) -> str:
    """The summary `nvidia-smi` prints: the header, a block per GPU, a MIG devices table where the
    container has MIG devices, then the processes table (none: a container sees no other's
    processes, and its own run no CUDA work)."""
    d = datetime.fromtimestamp(now, timezone.utc)
    first = listed[0][1]
    rule = "+" + "-" * 41 + "+" + "-" * 24 + "+" + "-" * 22 + "+"
    wide = "+" + "-" * 89 + "+"
    out = [f"{d:%a %b} {d.day:2d} {d:%H:%M:%S} {d.year}       ", wide,
           f"| NVIDIA-SMI {first.driver:<22} Driver Version: {first.driver:<14} CUDA Version: {first.cuda:<9}|",
           "|" + "-" * 41 + "+" + "-" * 24 + "+" + "-" * 22 + "+",
           "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |",
           "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |",
           "|                                         |                        |               MIG M. |",
           "|" + "=" * 41 + "+" + "=" * 24 + "+" + "=" * 22 + "|"]
    for i, g in listed:
        name = g.name if len(g.name) <= 29 else g.name[:26] + "..."
        memory = f"{IDLE_MIB:>7}MiB / {g.memory_mib:>6}MiB"
        util = "N/A" if g.migs else "0%"
        out += [f"| {i:>3}  {name:<29}  On  |{g.bus_id:>19} Off |{0:>21} |",
                f"| N/A   30C    P0           {g.idle_power:>4}W / {g.power_cap:>4}W | {memory} |{util:>8}      Default |",
                f"|{'':41}|{'':24}|{'Enabled' if g.migs else 'Disabled':>21} |", rule]
    migs = [(i, j, m) for i, g in listed for j, m in enumerate(g.migs)]
    if migs:
        cells = "+" + "-" * 18 + "+" + "-" * 34 + "+" + "-" * 11 + "+" + "-" * 23 + "+"
        out += [" " * 91, wide, f"| {'MIG devices:':<88}|", cells,
                "| GPU  GI  CI  MIG |                     Memory-Usage |        Vol|        Shared         |",
                "|      ID  ID  Dev |                       BAR1-Usage | SM     Unc| CE ENC  DEC  OFA  JPG |",
                "|                  |                                  |        ECC|                       |",
                "|" + "=" * 18 + "+" + "=" * 34 + "+" + "=" * 11 + "+" + "=" * 23 + "|"]
        for i, j, m in migs:
            p = m.profile
            memory = f"{IDLE_MIB}MiB / {p.memory_mib}MiB"
            out += [f"| {i:>2}  {j + 1:>3}   0  {j:>2}  | {memory:>31}  | {p.sm:>2}      0 |"
                    f" {p.ce:>2} {p.enc:>3} {p.dec:>4} {p.ofa:>4} {p.jpeg:>4} |",
                    f"|{'':18}| {'0MiB / 65535MiB':>31}  |{'':11}|{'':23}|", cells]
    out += [" " * 91, wide, f"| {'Processes:':<88}|",
            "|  GPU   GI   CI        PID   Type   Process name                              GPU Memory |",
            "|        ID   ID                                                               Usage      |",
            "|" + "=" * 89 + "|", f"|  {'No running processes found':<87}|", wide]
    return "".join(line + "\n" for line in out)


#: what CUDA's vectorAdd sample prints where it runs on a GPU, and where the container has none (the
#: NVIDIA runtime mounted no driver: the CUDA runtime finds no libcuda and says so at its first call)
_VECTOR_ADD = ("[Vector addition of 50000 elements]\nCopy input data from the host memory to the CUDA device\n"
               "CUDA kernel launch with 196 blocks of 256 threads\nCopy output data from the CUDA device to the host "
               "memory\nTest PASSED\nDone\n")
_NO_DRIVER = ("Failed to allocate device vector A (error code CUDA driver version is insufficient for CUDA runtime "
              "version)!\n")
#: NVIDIA's CUDA sample images, whose `vectoradd-*` tags run the vectorAdd sample by default
SAMPLE_REPOSITORY = "nvcr.io/nvidia/k8s/cuda-sample"


def image_command(image: str) -> list[str]:
    """The default command of a CUDA vectorAdd sample image (`nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0`,
    the GPU Operator's and the DRA driver's smoke test); [] for any other image."""
    repository, _, tag = image.split("@")[0].rpartition(":")
    return ["/cuda-samples/vectorAdd"] if repository == SAMPLE_REPOSITORY and tag.startswith("vectoradd") else []


def uses_gpus(spec: dict) -> bool:
    """Whether container `spec` may have been given GPUs: DRA claims, an extended resource (the
    device plugin's `nvidia.com/gpu`, or DRA's claim for one) or NVIDIA_VISIBLE_DEVICES set. Its
    GPUs are worked out (its environment made) for any command it runs (`sh /launch.sh`); a
    container given none of these sees none, at no cost (its environment lists the Services)."""
    resources = spec.get("resources") or {}
    return bool(resources.get("claims")) or any(
        "/" in name and not name.startswith("kubernetes.io/")
        for key in ("limits", "requests") for name in resources.get(key) or {}) or any(
        e.get("name") == "NVIDIA_VISIBLE_DEVICES" for e in spec.get("env") or ())


def vector_add(proc: Process, fs: ContainerFS, name: str, args: list[str]) -> int:
    """CUDA's vectorAdd sample: adds two vectors on the container's first GPU, checks the sum and
    passes; in a container given no GPU the CUDA runtime finds no driver and it fails (exit 1)."""
    gpus = GPUS.get().get(fs.container) if fs is not None else None
    if gpus is None or args:
        raise Unknown
    proc.out(_VECTOR_ADD.split("\n", 1)[0] + "\n")
    if not gpus:
        proc.err(_NO_DRIVER)
        return 1
    proc.out(_VECTOR_ADD.split("\n", 1)[1])
    return 0


APPLETS = {"nvidia-smi": nvidia_smi, "vectorAdd": vector_add}
