"""`nvidia-smi` in a simulated container, as an ML engineer's first command in a GPU pod runs it:
the summary table (driver 5xx / CUDA 12.x layout), `-L`, and `--query-gpu=... --format=csv`.

The GPUs it sees are the container's (`GPUS`, by container, set by simulated_io for the commands
about to run):
those its DRA claims were prepared with, and those NVIDIA_VISIBLE_DEVICES names (the device
plugin's Allocate sets it for `nvidia.com/gpu`), numbered from 0 in PCI bus order, with
the model, UUID and memory the node publishes. A container given none has no `nvidia-smi`: the
NVIDIA container runtime mounts the binary and the driver's libraries in only for a container it
hands GPUs to, and CUDA images do not ship it, so on a real GPU node such a pod's shell says
`nvidia-smi: not found` (exec: executable file not found in $PATH). Where `GPUS` is unset (a
command worked out with no node at hand) the command is not interpreted.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime, timezone
from fractions import Fraction

from ..machinery.quantity import parse_quantity
from .simulated_applets import NotFound, Process, Unknown
from .simulated_fs import ContainerFS


@dataclass(frozen=True)
class Gpu:
    """One GPU a container sees."""

    name: str
    uuid: str
    bus_id: str
    memory_mib: int
    driver: str
    cuda: str


#: the GPUs of each container whose commands are being worked out; one not there has no node at hand
GPUS: ContextVar[dict[str, tuple[Gpu, ...]]] = ContextVar("simulated_gpus", default={})
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
}


def gpu(attributes: dict, capacity: dict, index: int) -> Gpu:
    """A node's GPU (cluster.Device attributes and capacity) as nvidia-smi names it."""
    name = attributes.get("productName") or f"NVIDIA {attributes.get('model', 'GPU')}"
    memory = int(parse_quantity(str(capacity.get("memory", "0"))) / Fraction(2**20))
    bus = attributes.get("pcieBusID") or f"0000:{0x10 + index:02x}:00.0"
    return Gpu(name, attributes.get("uuid", ""), "0000" + bus.upper(), memory,
               attributes.get("driverVersion", "550.54.15"), str(attributes.get("cudaVersion", "12.4")))


def nvidia_smi(proc: Process, fs: ContainerFS, name: str, args: list[str]) -> int:
    gpus = GPUS.get().get(fs.container) if fs is not None else None
    if gpus is None:
        raise Unknown
    if not gpus:
        raise NotFound
    if not args:
        proc.out(_table(gpus, getattr(proc, "started", 0.0) + getattr(proc, "now", 0.0)))
        return 0
    if args in (["-L"], ["--list-gpus"]):
        proc.out("".join(f"GPU {i}: {g.name} (UUID: {g.uuid})\n" for i, g in enumerate(gpus)))
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
    for i, g in enumerate(gpus):
        lines.append(", ".join(_QUERY[f][2](i, g) + (f" {_QUERY[f][1]}" if units and _QUERY[f][1] else "")
                               for f in fields))
    proc.out("".join(line + "\n" for line in lines))
    return 0


def _table(gpus: tuple[Gpu, ...], now: float) -> str:
    """The summary `nvidia-smi` prints: the header, a block per GPU, then the processes table
    (none: a container sees no other's processes, and its own run no CUDA work)."""
    d = datetime.fromtimestamp(now, timezone.utc)
    first = gpus[0]
    rule = "+" + "-" * 41 + "+" + "-" * 24 + "+" + "-" * 22 + "+"
    wide = "+" + "-" * 89 + "+"
    out = [f"{d:%a %b} {d.day:2d} {d:%H:%M:%S} {d.year}       ", wide,
           f"| NVIDIA-SMI {first.driver:<22} Driver Version: {first.driver:<14} CUDA Version: {first.cuda:<9}|",
           "|" + "-" * 41 + "+" + "-" * 24 + "+" + "-" * 22 + "+",
           "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |",
           "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |",
           "|                                         |                        |               MIG M. |",
           "|" + "=" * 41 + "+" + "=" * 24 + "+" + "=" * 22 + "|"]
    for i, g in enumerate(gpus):
        name = g.name if len(g.name) <= 29 else g.name[:26] + "..."
        memory = f"{IDLE_MIB:>7}MiB / {g.memory_mib:>6}MiB"
        out += [f"| {i:>3}  {name:<29}  On  |{g.bus_id:>19} Off |{0:>21} |",
                f"| N/A   30C    P0             70W /  700W | {memory} |      0%      Default |",
                f"|{'':41}|{'':24}|{'Disabled':>21} |", rule]
    out += [" " * 91, wide, f"| {'Processes:':<88}|",
            "|  GPU   GI   CI        PID   Type   Process name                              GPU Memory |",
            "|        ID   ID                                                               Usage      |",
            "|" + "=" * 89 + "|", f"|  {'No running processes found':<87}|", wide]
    return "".join(line + "\n" for line in out)


APPLETS = {"nvidia-smi": nvidia_smi}
