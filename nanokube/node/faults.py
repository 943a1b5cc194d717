"""Faults a simulated node is told to have, through its Node's annotation
`sim.nanokube.io/fault`, so any API client (the `nanokube fault` command, a
test, kubectl annotate) can break and heal a node in a running cluster.

The value is a comma-separated list of tokens, each a fault:

- `lease-stop`: the kubelet goes silent; it stops renewing its Lease and
  posting status (the node lifecycle controller then marks it Unknown).
- `not-ready`: the kubelet keeps heartbeating but reports Ready=False.
- `memory-pressure`, `disk-pressure`, `pid-pressure`: the kubelet reports the
  node condition (MemoryPressure...) True, and its eviction manager refuses the
  pods such a node does not admit (admission.py) and evicts running ones, one
  per pass, as a leak outside the pods would make it (eviction.py).
- `shutdown`: the node is shutting down (graceful node shutdown, as systemd
  announces it): the kubelet reports Ready=False, stops its pods as Terminated
  and refuses new ones (NodeShutdown) until the fault is removed (shutdown
  cancelled).
- `gpu:<device>:<kind>`: the device (a GPU or NIC named as in its
  ResourceSlice) is unhealthy; kind is `xid` or `link-down` (NoExecute
  taint) or `ecc` (NoSchedule taint). A simulated device plugin's device
  (its ID, `GPU-<uuid>`) is reported Unhealthy instead, whatever the kind,
  and leaves the Node's allocatable.

A fault may carry timing options after semicolons, with RFC 3339 times so
the annotation says when things happen and a restarted agent agrees:

- `;until=<time>`: the fault heals by itself at that time.
- `;flap=<seconds>;since=<time>`: from `since` on, the fault is on for
  `flap` seconds, then off for as long, and so on (until `until`, if given).

Removing a token (or the annotation) heals that fault.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..clock import REAL, parse_time
from .dra.driver import FAULT_EFFECTS

ANNOTATION = "sim.nanokube.io/fault"
LEASE_STOP = "lease-stop"
NOT_READY = "not-ready"
#: the pressure faults, each with the node condition it makes True
PRESSURES = {"memory-pressure": "MemoryPressure", "disk-pressure": "DiskPressure", "pid-pressure": "PIDPressure"}
SHUTDOWN = "shutdown"
NODE_FAULTS = (LEASE_STOP, NOT_READY, *PRESSURES, SHUTDOWN)


@dataclass(frozen=True)
class Faults:
    """The faults in effect at one instant."""

    lease_stop: bool = False
    not_ready: bool = False
    devices: frozenset[tuple[str, str]] = field(default_factory=frozenset)
    #: the node conditions under pressure (MemoryPressure...)
    pressure: frozenset[str] = field(default_factory=frozenset)
    shutdown: bool = False


@dataclass(frozen=True)
class Timing:
    """When one fault is in effect: always, until a time, and/or flapping."""

    until: float | None = None
    flap: float | None = None
    since: float = 0.0

    def active(self, t: float) -> bool:
        if self.until is not None and t >= self.until:
            return False
        if self.flap:
            return t >= self.since and math.floor((t - self.since) / self.flap) % 2 == 0
        return True

    def next_change(self, t: float) -> float | None:
        """The first time after `t` at which `active` may change, if any."""
        if self.until is not None and t >= self.until:
            return None
        times = [self.until] if self.until is not None else []
        if self.flap:
            times.append(self.since if t < self.since else
                         self.since + (math.floor((t - self.since) / self.flap) + 1) * self.flap)
        return min(times, default=None)


@dataclass(frozen=True)
class Plan:
    """Every fault an annotation names, with its timing."""

    entries: tuple[tuple[str, Timing], ...] = ()

    def at(self, t: float) -> Faults:
        on = [base for base, timing in self.entries if timing.active(t)]
        devices = frozenset((p[1], p[2]) for p in (b.split(":") for b in on if b.startswith("gpu:")))
        return Faults(LEASE_STOP in on, NOT_READY in on, devices, frozenset(PRESSURES[b] for b in on if b in PRESSURES),
                      SHUTDOWN in on)

    def next_change(self, t: float) -> float | None:
        return min((c for _, timing in self.entries if (c := timing.next_change(t)) is not None), default=None)


def tokens(value: str | None) -> list[str]:
    return [t.strip() for t in (value or "").split(",") if t.strip()]


def base(token: str) -> str:
    """The fault a token names, without its timing options."""
    return token.split(";", 1)[0].strip()


def _fault(tok: str) -> str:
    b = base(tok)
    if b in NODE_FAULTS:
        return b
    parts = b.split(":")
    if len(parts) != 3 or parts[0] != "gpu" or not parts[1] or parts[2] not in FAULT_EFFECTS:
        raise ValueError(f"fault {tok!r}: expected {', '.join(NODE_FAULTS)} or gpu:<device>:<"
                         f"{'|'.join(FAULT_EFFECTS)}>, optionally with ;until=<time> and ;flap=<seconds>;since=<time>")
    return b


def _timing(tok: str) -> Timing:
    opts: dict[str, str] = {}
    for opt in tok.split(";")[1:]:
        key, sep, val = opt.partition("=")
        if not sep or key.strip() not in ("until", "flap", "since") or key.strip() in opts:
            raise ValueError(f"fault {tok!r}: unknown or repeated option {opt!r}")
        opts[key.strip()] = val.strip()
    try:
        until = parse_time(opts["until"]) if "until" in opts else None
        flap = float(opts["flap"]) if "flap" in opts else None
        since = parse_time(opts["since"]) if "since" in opts else None
    except ValueError as e:
        raise ValueError(f"fault {tok!r}: {e}") from None
    if flap is not None and not (flap > 0 and math.isfinite(flap) and since is not None):
        raise ValueError(f"fault {tok!r}: flap needs a positive number of seconds and a since time")
    if since is not None and flap is None:
        raise ValueError(f"fault {tok!r}: since is only meaningful with flap")
    return Timing(until, flap, since or 0.0)


def parse(value: str | None) -> Plan:
    """The plan a value names; raises ValueError naming a token it does not understand."""
    return Plan(tuple((_fault(tok), _timing(tok)) for tok in tokens(value)))


def token(fault: str, now: float, duration: float | None = None, flap: float | None = None) -> str:
    """`fault` with the options for healing after `duration` seconds and flapping every `flap` seconds from now."""
    opts = [f"until={REAL.rfc3339_micro(now + duration)}"] if duration else []
    if flap:
        opts += [f"flap={flap:g}", f"since={REAL.rfc3339_micro(now)}"]
    return ";".join([fault, *opts])


def gpu_token(device: str, kind: str) -> str:
    return f"gpu:{device}:{kind}"


def edit(value: str | None, add: tuple[str, ...] = (), remove=lambda fault: False) -> str:
    """`value` without the tokens whose fault `remove` selects or `add` names
    again (a re-injected fault takes its new timing), then `add` appended."""
    replaced = {base(t) for t in add}
    out = [t for t in tokens(value) if not remove(base(t)) and base(t) not in replaced]
    return ",".join(out + list(add))
