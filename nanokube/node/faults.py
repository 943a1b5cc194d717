"""Faults a simulated node is told to have, through its Node's annotation
`sim.nanokube.io/fault`, so any API client (the `nanokube fault` command, a
test, kubectl annotate) can break and heal a node in a running cluster.

The value is a comma-separated list of tokens:

- `lease-stop`: the kubelet goes silent; it stops renewing its Lease and
  posting status (the node lifecycle controller then marks it Unknown).
- `not-ready`: the kubelet keeps heartbeating but reports Ready=False.
- `gpu:<device>:<kind>`: the device (a GPU or NIC named as in its
  ResourceSlice) is unhealthy; kind is `xid` or `link-down` (NoExecute
  taint) or `ecc` (NoSchedule taint).

Removing a token (or the annotation) heals that fault.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .dra.driver import FAULT_EFFECTS

ANNOTATION = "sim.nanokube.io/fault"
LEASE_STOP = "lease-stop"
NOT_READY = "not-ready"
NODE_FAULTS = (LEASE_STOP, NOT_READY)


@dataclass(frozen=True)
class Faults:
    lease_stop: bool = False
    not_ready: bool = False
    devices: frozenset[tuple[str, str]] = field(default_factory=frozenset)


def tokens(value: str | None) -> list[str]:
    return [t.strip() for t in (value or "").split(",") if t.strip()]


def parse(value: str | None) -> Faults:
    """The faults a value names; raises ValueError naming a token it does not understand."""
    devices = set()
    for tok in tokens(value):
        if tok in NODE_FAULTS:
            continue
        parts = tok.split(":")
        if len(parts) != 3 or parts[0] != "gpu" or not parts[1] or parts[2] not in FAULT_EFFECTS:
            raise ValueError(f"fault {tok!r}: expected {', '.join(NODE_FAULTS)} or gpu:<device>:<"
                             f"{'|'.join(FAULT_EFFECTS)}>")
        devices.add((parts[1], parts[2]))
    toks = tokens(value)
    return Faults(LEASE_STOP in toks, NOT_READY in toks, frozenset(devices))


def gpu_token(device: str, kind: str) -> str:
    return f"gpu:{device}:{kind}"


def edit(value: str | None, add: tuple[str, ...] = (), remove=lambda tok: False) -> str:
    """`value` with the tokens `remove` selects dropped and `add` appended once each."""
    out = [t for t in tokens(value) if not remove(t)]
    out += [t for t in add if t not in out]
    return ",".join(out)
