"""Host and port joined as Go's net.JoinHostPort joins them, for URLs and dial errors alike."""

from __future__ import annotations


def join_host_port(host: str, port: int | str) -> str:
    """`host:port`, an IPv6 host in brackets (`[fd00::2]:443`): unbracketed, its colons would read as the port's."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
