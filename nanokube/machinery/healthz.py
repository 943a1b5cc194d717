"""The answer of a health endpoint's root, as k8s.io/apiserver's healthz handler writes it: shared
by the API server and components (apiserver/healthz.py) and the kubelet (node/kubelet_server.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterable


def root_answer(kind: str, checks: Iterable[tuple[str, Callable[[], str | None]]], excluded: set[str],
                verbose: bool, ran: Callable[[str, str | None], None] | None = None) -> tuple[int, str]:
    """(status, text) of `/kind` over the (name, run) `checks`, run() giving the reason a check fails
    or None: 'ok', or each check's line where one fails or `verbose` asks; an `excluded` name skips
    its check and one that matches none is warned of. `ran(name, reason)` hears of each check run."""
    lines, failed, names = [], False, set()
    for name, run in checks:
        names.add(name)
        if name in excluded:
            lines.append(f"[+]{name} excluded: ok\n")
            continue
        reason = run()
        if ran is not None:
            ran(name, reason)
        if reason is None:
            lines.append(f"[+]{name} ok\n")
        else:
            failed = True
            lines.append(f"[-]{name} failed: reason withheld\n")
    if unmatched := sorted(excluded - names):
        lines.append("warn: some health checks cannot be excluded: no matches for "
                     + ",".join(f'"{n}"' for n in unmatched) + "\n")
    if failed:
        return 500, "".join(lines) + f"{kind} check failed\n"
    if not verbose:
        return 200, "ok"
    return 200, "".join(lines) + f"{kind} check passed\n"


def check_answer(reason: str | None) -> tuple[int, str]:
    """(status, text) of `/kind/NAME`, one check that failed for `reason` (None: it passed)."""
    return (200, "ok") if reason is None else (500, f"internal server error: {reason}\n")
