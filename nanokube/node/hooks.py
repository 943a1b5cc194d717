"""Container lifecycle hooks, as the kubelet's handlerRunner runs them (pkg/kubelet/lifecycle):
a container's postStart or preStop handler, one of exec (a command in the container), httpGet (a
request to the pod, `host` defaulting to its IP, the port a number or a named one of the
container's), or sleep (KEP-3960), and on failure the message the kubelet logs (a postStart one's
is also the PostStartHookError its container then waits in; its events say only `PostStartHook
failed`, `PreStopHook failed`, so that no secret leaks). An httpGet hook fails only when the
request does: the kubelet reads no status code of the answer. One with scheme HTTPS whose server
answered in plain HTTP (SCHEME_MISMATCH) is made again over HTTP without its Authorization header,
for the hooks written before the kubelet honoured the scheme: if that one gets an answer, the hook
passed, and the runtime is told (`Runner.fallback`: the pod's LifecycleHTTPFallback Warning and
kubelet_lifecycle_handler_http_fallbacks_total); if not, the HTTPS request's error stands. A sleep
cut off before its end (the grace period up, the pod's deletion) is told too (`Runner.sleep_cut`:
kubelet_sleep_action_terminated_early_total, the counter runSleepHandler bumps when its context ends).

Each runtime says how a command runs in its containers and how a request reaches its pods
(`Runner`); the sleep is on the worker's clock, virtual in simulation. When the kubelet runs a hook
and what a failure does (the container killed, the time left for SIGTERM) is the runtime's worker's:
`MIN_GRACE` is the shortest grace period SIGTERM gets, after a preStop hook too."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from ..machinery.gofmt import quote
from ..machinery.streaming import StreamFailed

#: killContainer's minimumGracePeriodInSeconds: what is left for SIGTERM however long preStop took
MIN_GRACE = 2.0
POST_START_FAILED = "PostStartHook failed"
PRE_STOP_FAILED = "PreStopHook failed"
#: the User-Agent of an httpGet hook's request (NewRequestForHTTPGetAction's "lifecycle" fragment)
USER_AGENT = "kube-lifecycle/1.37"
#: net/http's ErrSchemeMismatch: an HTTPS request whose server answered in plain HTTP
SCHEME_MISMATCH = "http: server gave HTTP response to HTTPS client"
FALLBACK_EVENT = "LifecycleHTTPFallback"


@dataclass
class Runner:
    """How a runtime runs a hook: `exec(argv)` runs a command in the container to its end and gives
    its exit code, stdout and stderr (a StreamFailed where it cannot run); `http_get(host, port,
    path, headers, scheme)` makes one request and gives '' or why it failed (Go's words);
    `sleep(seconds)`; `fallback(message)` tells of an HTTPS hook that passed over HTTP, `sleep_cut()`
    of a sleep cut off before its end."""

    exec: Callable[[list[str]], Awaitable[tuple[int, bytes, bytes]]]
    http_get: Callable[[str, int, str, list[dict], str], Awaitable[str]]
    sleep: Callable[[float], Awaitable[None]]
    fallback: Callable[[str], Awaitable[None]]
    sleep_cut: Callable[[], None]


def handler(container: dict, hook: str) -> dict | None:
    """Container `container`'s `hook` (postStart, preStop) handler, None without one."""
    return ((container.get("lifecycle") or {}).get(hook)) or None


def pod_name(pod: dict) -> str:
    """format.Pod: name_namespace(uid)."""
    md = pod.get("metadata") or {}
    return f"{md.get('name', '')}_{md.get('namespace', '')}({md.get('uid', '')})"


def port(container: dict, value) -> int:
    """resolvePort: a number, or the name of one of the container's ports (ValueError: neither)."""
    if isinstance(value, int) or str(value).isdigit():
        return int(value)
    for p in container.get("ports") or ():
        if p.get("name") == value:
            return int(p["containerPort"])
    raise ValueError(f"couldn't find port: {value} in {container.get('name', '')}")


async def run(pod: dict, container: dict, spec: dict, pod_ip: str, runner: Runner) -> str:
    """Run handler `spec` of `container`: '' when it succeeded, else the kubelet's message for it."""
    where = f'for Container {quote(container.get("name", ""))} in Pod {quote(pod_name(pod))} failed'
    if "exec" in spec:
        argv = list((spec["exec"] or {}).get("command") or ())
        try:
            code, out, err = await runner.exec(argv)
        except StreamFailed as e:
            code, out, err, why = -1, b"", b"", str(e)
        else:
            why = f"command '{' '.join(argv)}' exited with {code}: {err.decode(errors='replace')}"
        if code == 0:
            return ""
        return f"Exec lifecycle hook ([{' '.join(argv)}]) {where} - error: {why}, " \
               f"message: {quote((out + err).decode(errors='replace'))}"
    if "httpGet" in spec:
        h = spec["httpGet"] or {}
        try:
            error = await _http_get(h, h.get("host") or pod_ip, port(container, h.get("port")), runner)
        except ValueError as e:
            error = str(e)
        return f"HTTP lifecycle hook ({h.get('path') or ''}) {where} - error: {error}" if error else ""
    if "sleep" in spec:
        try:
            await runner.sleep(float((spec["sleep"] or {}).get("seconds") or 0))
        except asyncio.CancelledError:
            runner.sleep_cut()
            raise
        return ""
    return f"Cannot run handler: invalid handler: {spec}"


async def _http_get(h: dict, host: str, number: int, runner: Runner) -> str:
    """runHTTPHandler's request of httpGet action `h` to `host`:`number`, and its fallback to HTTP."""
    path, headers, scheme = h.get("path") or "", list(h.get("httpHeaders") or ()), h.get("scheme") or "HTTP"
    error = await runner.http_get(host, number, path, headers, scheme)
    if scheme.upper() != "HTTPS" or not error.endswith(SCHEME_MISMATCH):
        return error
    plain = [x for x in headers if str(x.get("name", "")).lower() != "authorization"]
    if await runner.http_get(host, number, path, plain, "HTTP"):
        return error
    address = f"[{host}]:{number}" if ":" in host else f"{host}:{number}"
    await runner.fallback(f"request to HTTPS lifecycle hook {address} got HTTP response, retry with HTTP succeeded")
    return ""
