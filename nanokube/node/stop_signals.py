"""The signal the runtime stops a container with, and how the image's own program exits on it.

containerd sends the STOPSIGNAL of the image's config (its Dockerfile's) where it names one, else
SIGTERM. A container's lifecycle.stopSignal (KEP-4960) would win over both, but its gate,
ContainerStopSignals, is alpha and off in 1.37: the API server drops the field
(registry/pod_disabled_fields) and the kubelet reports no containerStatuses[].stopSignal.

The images people first run carry their Dockerfile's signal here, with the exit code their program
gives on it: a server that shuts down cleanly exits 0 (nginx's graceful stop on SIGQUIT, httpd's on
SIGWINCH, haproxy's soft stop on SIGUSR1, postgres's fast shutdown on SIGINT, a database's on
SIGTERM), so `kubectl get -w` shows Completed as a Deployment scales down, not Error. Any other
image's program is taken to die of SIGTERM: 143 (128 + 15)."""

from __future__ import annotations

from .simulated_net import repository

#: how a process that SIGTERM ends exits (128 + 15), as containerd reports it
SIGTERM_EXIT = 143

#: by repository (registry and library/ left out): the image's STOPSIGNAL, and its program's exit code on it
STOP_SIGNALS: dict[str, tuple[str, int]] = {
    "nginx": ("SIGQUIT", 0),
    "nginxinc/nginx-unprivileged": ("SIGQUIT", 0),
    "httpd": ("SIGWINCH", 0),
    "haproxy": ("SIGUSR1", 0),
    "postgres": ("SIGINT", 0),
    "redis": ("SIGTERM", 0),
    "mysql": ("SIGTERM", 0),
    "mariadb": ("SIGTERM", 0),
    "mongo": ("SIGTERM", 0),
}


def stop_signal(image: str) -> tuple[str, int]:
    """The signal the runtime stops a container of `image` with, and the code its program exits with then."""
    return STOP_SIGNALS.get(repository(image), ("SIGTERM", SIGTERM_EXIT))
