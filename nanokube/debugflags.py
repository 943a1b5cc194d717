"""routes.DebugFlags, which kube-apiserver, kube-scheduler and kube-controller-manager install
with profiling (on by default): /debug/flags/v sets the log verbosity at run time. Unlisted, so
/statusz does not name /debug."""

from __future__ import annotations

import re

from aiohttp import web

from .machinery import logs
from .apiserver.healthz import TEXT
from .machinery.gofmt import quote

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
    digits = re.fullmatch(r"([+-]?)0*([0-9]+)", value)
    why = "" if digits else "invalid syntax"
    # (the digits' count first: int() refuses over 4300 of them, ParseInt's leading zeros among them)
    level = int(digits[1] + digits[2]) if digits and len(digits[2]) <= 10 else None
    if not why and (level is None or not -2 ** 31 <= level < 2 ** 31):
        why = "value out of range"
    if why or level is None:
        return _plain(400, f"failed set klog.logging.verbosity {value}: strconv.ParseInt: parsing {quote(value)}: {why}")
    logs.set_verbosity(level)
    return _plain(200, f"successfully set klog.logging.verbosity to {value}")


def install(app: web.Application) -> None:
    app.router.add_route("*", "/debug/flags/v", _verbosity)
    for path in ("/debug/flags", "/debug/flags/", "/debug/flags/{flag:.*}"):
        app.router.add_get(path, _index)
