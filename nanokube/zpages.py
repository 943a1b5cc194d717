"""The z-pages every control-plane component serves (KEP-4827 /statusz, KEP-4828 /flagz; beta and
on by default since 1.36): who the component is and the flags it started with, for people debugging
it. Plain text by default, with a delimiter picked at random (statusz per answer, flagz once) so
that nobody parses it; the structured config.k8s.io Statusz and Flagz (v1beta1, or the deprecated
v1alpha1, which warns) only when the Accept header asks for one by group, version and kind."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import orjson
import yaml
from aiohttp import web
from prometheus_client import ProcessCollector

from .machinery import errors, goduration
from .machinery.responses import error_response
from .machinery.version import BUILD_VERSION, GO_VERSION

GROUP = "config.k8s.io"
#: the served versions; a deprecated one's answer carries a Warning
VERSIONS = ("v1beta1", "v1alpha1")
DEPRECATED = frozenset({"v1alpha1"})
_WARNING = "This endpoint is not meant to be machine parseable, has no formatting compatibility guarantees " \
           "and is for debugging purposes only."
_DELIMITERS = (":", ": ", "=", " ")
_TEXT = "text/plain"
_JSON = "application/json"
_YAML = "application/yaml"
#: the serializers the z-pages' codec factory offers, in its order (protobuf is offered, never allowed)
_SERIALIZERS = (_JSON, _YAML, "application/vnd.kubernetes.protobuf", _TEXT)
#: first path segments statusz leaves out: the API itself, not debugging endpoints
_NOT_DEBUGGING = frozenset({"/api", "/apis", "/openid", "/openapi", "/.well-known"})
_IMPORTED = time.time()


def process_start_time() -> float:
    """The process's start (process_start_time_seconds, as statusz's registry reads it)."""
    for family in ProcessCollector(registry=None).collect():
        if family.name == "process_start_time_seconds" and family.samples:
            return family.samples[0].value
    return _IMPORTED


def listed_paths(app: web.Application) -> list[str]:
    """The first segments of the paths `app` serves so far, sorted, less the API's own: statusz's
    Paths, a snapshot when it is installed (itself, installed last, is not in it)."""
    seen = set()
    for resource in app.router.resources():
        first = resource.canonical.split("/")[1] if resource.canonical.count("/") else ""
        if first and "{" not in first and f"/{first}" not in _NOT_DEBUGGING:
            seen.add(f"/{first}")
    return sorted(seen)


def flags(args) -> dict[str, str]:
    """Every flag the command defines and its value as pflag prints it (set, or the default), for
    a namespace whose parser set itself as the `flag_parser` default (`register`). A duration flag
    (metavar DURATION, kept as the text given) prints as Go's time.Duration does: 5m as 5m0s; a map
    flag as component-base's map flags do, `k=v` (or `k<v`) pairs sorted and comma-joined."""
    out = {}
    for action in args.flag_parser._actions:
        long = [s for s in action.option_strings if s.startswith("--")]
        if not long or action.dest == "help":
            continue
        value = getattr(args, action.dest, action.default)
        if action.metavar == "DURATION":
            out[long[0][2:]] = _duration_text(value)
        elif isinstance(value, dict):  # (a map flag: its pairs sorted, `<`-separated where its metavar says so)
            sep = "<" if "<" in (action.metavar or "") else "="
            out[long[0][2:]] = ",".join(sorted(f"{k}{sep}{v}" for k, v in value.items()))
        else:
            out[long[0][2:]] = _flag_text(value)
    return out


def register(parser) -> None:
    """Lets `flags` read `parser`'s flags back from the namespace it parses."""
    parser.set_defaults(flag_parser=parser)


def _duration_text(value: str | None) -> str:
    try:
        return goduration.string(round(goduration.parse(value) * 1e9)) if value else ""
    except ValueError:  # (a flag its command rejects at start, which serves no /flagz then)
        return value


def _flag_text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(map(str, value)) + "]"
    return str(value)


def _escape(s: str) -> str:
    """html.EscapeString, which the text page applies to each value."""
    return s.replace("&", "&amp;").replace("'", "&#39;").replace("<", "&lt;").replace(">", "&gt;") \
        .replace('"', "&#34;")


@dataclass(frozen=True)
class _Clause:
    type: str
    subtype: str
    quality: float
    params: dict


def _clauses(accept: str) -> list[_Clause]:
    """goautoneg.ParseAccept: by quality, then the specific before the wildcards."""
    out = []
    for part in accept.split(","):
        bits = [b.strip() for b in part.split(";")]
        mt, _, sub = bits[0].lower().partition("/")
        params = {}
        for b in bits[1:]:
            k, eq, v = b.partition("=")
            if eq:
                params[k.strip().lower()] = v.strip()
        try:
            q = float(params.pop("q", "1"))
        except ValueError:
            q = 0.0
        out.append(_Clause(mt or "*", sub or "*", q, params))
    out.sort(key=lambda c: (-c.quality, c.type == "*", c.subtype == "*"))
    return out


def negotiate(accept: str, kind: str) -> tuple[str, str]:
    """(media type, version) the Accept header asks of a z-page serving `kind`, as
    NegotiateOutputMediaType under the z-pages' restrictions: text/plain only without a target,
    JSON or YAML only for config.k8s.io/<served version>, kind `kind`; the version is '' for text.
    No acceptable clause is a 406."""
    if not accept.strip():
        return _TEXT, ""
    for c in _clauses(accept):
        for served in _SERIALIZERS:
            t, s = served.split("/")
            if c.type not in ("*", t) or c.subtype not in ("*", s) or (c.type == "*" and c.subtype != "*"):
                continue
            target = {k: c.params[k] for k in ("as", "g", "v") if k in c.params}
            if served == _TEXT and not target:
                return _TEXT, ""
            if served in (_JSON, _YAML) and target.get("g") == GROUP and target.get("v") in VERSIONS \
                    and target.get("as") == kind:
                return served, target["v"]
    raise errors.APIError(406, "NotAcceptable", "only the following media types are accepted: "
                          + ", ".join(_SERIALIZERS))


def _structured(media: str, version: str, page: str, obj: dict) -> web.Response:
    headers = {}
    if version in DEPRECATED:
        headers["Warning"] = f'299 - "This version of the {page} endpoint is deprecated. Please use a newer version."'
    if media == _YAML:
        body = yaml.safe_dump(obj, sort_keys=True, default_flow_style=False, allow_unicode=True).encode()
    else:
        body = orjson.dumps(obj) + b"\n"
    return web.Response(body=body, headers={"Content-Type": media, **headers})


def _text(body: str) -> web.Response:
    return web.Response(body=body.encode(), headers={"Content-Type": "text/plain; charset=utf-8",
                                                     "X-Content-Type-Options": "nosniff"})


def _header(component: str, page: str) -> str:
    return f"\n{component} {page}\nWarning: {_WARNING}\n"


@dataclass
class Statusz:
    """What /statusz says of `component`: started at `start` (epoch seconds), up until `now()`."""

    component: str
    paths: list[str]
    start: float
    now: Callable[[], float] = time.time
    binary_version: str = BUILD_VERSION.removeprefix("v")
    emulation_version: str = ".".join(BUILD_VERSION.removeprefix("v").split(".")[:2])

    def object(self, version: str) -> dict:
        obj = {"kind": "Statusz", "apiVersion": f"{GROUP}/{version}", "metadata": {"name": self.component},
               "startTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.start)),
               "uptimeSeconds": self._uptime(), "goVersion": GO_VERSION, "binaryVersion": self.binary_version}
        if self.emulation_version:
            obj["emulationVersion"] = self.emulation_version
        obj["paths"] = self.paths or None
        return obj

    def _uptime(self) -> int:
        return max(0, int(self.now() - self.start))

    def text(self) -> str:
        d = _escape(random.choice(_DELIMITERS))
        up = self._uptime()
        emulation = f"Emulation version{d} {_escape(self.emulation_version)}" if self.emulation_version else ""
        paths = f"Paths{d} {_escape(' '.join(self.paths))}" if self.paths else ""
        started = time.strftime("%a %b %e %H:%M:%S %Z %Y", time.localtime(self.start))
        return (_header(self.component, "statusz")
                + f"\nStarted{d} {_escape(started)}\nUp{d} {up // 3600} hr {up // 60 % 60:02d} min {up % 60:02d} sec\n"
                  f"Go version{d} {_escape(GO_VERSION)}\nBinary version{d} {_escape(self.binary_version)}\n"
                  f"{emulation}\n{paths}\n")

    async def handle(self, request: web.Request) -> web.Response:
        return _answer(request, "Statusz", self.text, self.object)


def _answer(request: web.Request, kind: str, text: Callable[[], str], obj: Callable[[str], dict]) -> web.Response:
    """The page as the Accept header asks: plain text, or the structured `kind` of a version."""
    try:
        media, version = negotiate(request.headers.get("Accept", ""), kind)
    except errors.APIError as e:
        return error_response(e)
    if media == _TEXT:
        return _text(text())
    return _structured(media, version, kind.lower(), obj(version))


@dataclass
class Flagz:
    """What /flagz says of `component`: each flag and its value. The text is made once, its
    delimiter picked then (flagz's cached plain text response)."""

    component: str
    flags: dict[str, str]
    _text: str = field(default="", init=False, repr=False)

    def object(self, version: str) -> dict:
        obj = {"kind": "Flagz", "apiVersion": f"{GROUP}/{version}", "metadata": {"name": self.component}}
        if self.flags:
            obj["flags"] = dict(sorted(self.flags.items()))
        return obj

    def text(self) -> str:
        if not self._text:
            sep = random.choice(_DELIMITERS)
            self._text = _header(self.component, "flagz") + "".join(f"{k}{sep}{v}\n"
                                                                    for k, v in sorted(self.flags.items()))
        return self._text

    async def handle(self, request: web.Request) -> web.Response:
        return _answer(request, "Flagz", self.text, self.object)


def install(app: web.Application, component: str, flag_values: dict[str, str] | None,
            start: float | None = None, now: Callable[[], float] = time.time) -> Statusz:
    """/flagz (when the component has flags to show), then /statusz listing what `app` serves by
    then, as kube-scheduler, kube-controller-manager and kube-apiserver install them last. Like
    any handler on their muxes, each answers whatever the method (after authorization for its verb)."""
    if flag_values is not None:
        app.router.add_route("*", "/flagz", Flagz(component, flag_values).handle)
    statusz = Statusz(component, listed_paths(app), process_start_time() if start is None else start, now)
    app.router.add_route("*", "/statusz", statusz.handle)
    return statusz
