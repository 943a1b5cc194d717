"""routes.DebugFlags, which kube-apiserver, kube-scheduler and kube-controller-manager install
with profiling (on by default): /debug/flags/v sets the log verbosity at run time. Unlisted, so
/statusz does not name /debug."""

from __future__ import annotations

from aiohttp import web

from .machinery import logs, strconv
from .apiserver.healthz import TEXT

_INDEX = """<html>
<head>
<title>/debug/flags/</title>
</head>
<body>
/debug/flags/<br>
<br>
flags:<br>
<table>

<tr>v<br>

</table>
<br>
full flags configurable<br>
</body>
</html>
"""


def _plain(code: int, text: str) -> web.Response:
    """routes' writePlainText: the text and a newline."""
    return web.Response(status=code, body=(text + "\n").encode(), headers={"Content-Type": "text/plain", **TEXT})


async def _index(request: web.Request) -> web.Response:
    return web.Response(text=_INDEX, headers={"Content-Type": "text/html; charset=utf-8"})


async def _verbosity(request: web.Request) -> web.Response:
    """/debug/flags/v, StringFlagPutHandler over klog's verbosity: a PUT of a number sets -v's
    verbosity (logs.set_verbosity; a negative one is V(0)'s); any other method is refused."""
    if request.method != "PUT":
        return _plain(406, "unsupported http method")
    value = (await request.read()).decode(errors="replace")
    try:
        level = strconv.parse_int(value, 32)
    except strconv.NumError as e:
        return _plain(400, f"failed set klog.logging.verbosity {value}: {e}")
    logs.set_verbosity(level)
    return _plain(200, f"successfully set klog.logging.verbosity to {value}")


def install(app: web.Application) -> None:
    app.router.add_route("*", "/debug/flags/v", _verbosity)
    for path in ("/debug/flags", "/debug/flags/", "/debug/flags/{flag:.*}"):
        app.router.add_get(path, _index)
