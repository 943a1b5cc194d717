"""How a standalone component's command runs and ends, as component-base's cli.Run: a graceful
stop on SIGINT or SIGTERM, and an exit status with one line on stderr for what stopped it
(kube-scheduler, kube-controller-manager and kube-proxy alike)."""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Callable, Coroutine
from typing import Any

from .client import kubeconfig
from .machinery.errors import APIError


def run_loop(main: Coroutine[Any, Any, int]) -> int:
    """`main` on uvloop's event loop and TLS transport (libuv, Cython), as `nanokube up` runs: each of
    a component's API requests crosses the loop and TLS, which asyncio's selector loop and pure-Python
    SSL protocol make ~75 k instructions a request dearer (benchmarks/README, issue 19, lean61)."""
    import uvloop

    return uvloop.run(main)


def stop_on_signals() -> asyncio.Event:
    """An event the running loop sets on SIGINT or SIGTERM: the component's cue to stop."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    return stop


def run(component: str, main: Callable[[], int], fatal: tuple[type[Exception], ...] = (),
        unreachable: str = "cannot reach the API server: ") -> int:
    """`main()`'s status, or that of what ended it, said as `nanokube <component>: ...`: 2 for a
    value refused, 1 for what stops it running (a kubeconfig it cannot use, one of `fatal`, an API
    error, an OSError: the API server out of reach, where `unreachable` says so)."""
    try:
        return main()
    except (kubeconfig.KubeconfigError, *fatal) as e:
        print(f"nanokube {component}: {e}", file=sys.stderr)
        return 1
    except ValueError as e:
        print(f"nanokube {component}: {e}", file=sys.stderr)
        return 2
    except APIError as e:
        print(f"nanokube {component}: {e.reason}: {e.message}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"nanokube {component}: {unreachable}{e}", file=sys.stderr)
        return 1
