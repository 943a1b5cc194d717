"""Proxy mode selection with 1.37's deprecations (spec §7): nftables is the
implemented mode; an unset mode warns that the default is changing; ipvs is
refused with the deprecation message and the supported modes, saying which of
them nanokube runs (iptables, the other, is refused next)."""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)

SUPPORTED = ("iptables", "nftables")
IMPLEMENTED = ("nftables",)

DEFAULT_CHANGING = (
    "proxy mode was not set: Kubernetes 1.37 defaults to \"iptables\" and the default will change to "
    "\"nftables\" (planned for 1.40); set the mode explicitly. nanokube implements only \"nftables\" "
    "and runs it")
IPVS_DEPRECATED = (
    "the ipvs proxy mode is deprecated and is being removed (KEP-5495; the KubeProxyIPVS gate "
    "defaults to false in 1.40); use one of the supported modes: " + ", ".join(SUPPORTED) +
    " (nanokube implements only \"nftables\")")


class ModeError(ValueError):
    pass


def select_mode(mode: str | None) -> tuple[str, list[str]]:
    """Return the mode to run and the warnings to log and record as Events.

    Unset means nanokube's one implemented mode, nftables, with upstream's
    defaulted-mode warning."""
    warnings: list[str] = []
    if not mode:
        warnings.append(DEFAULT_CHANGING)
        mode = "nftables"
    elif mode == "ipvs":
        raise ModeError(IPVS_DEPRECATED)
    elif mode not in SUPPORTED:
        raise ModeError(f"unknown proxy mode {mode!r}; supported modes: {', '.join(SUPPORTED)}")
    elif mode not in IMPLEMENTED:
        raise ModeError(f"proxy mode {mode!r} is not implemented by nanokube; use \"nftables\"")
    for w in warnings:
        log.warning("%s", w)
    return mode, warnings
