"""The OpenAPI documents kubectl reads: `/openapi/v2` and `/openapi/v3/...`.

The schemas come from `nanokube.schema` (JSON Schema `$defs`), rewritten into
the OpenAPI form upstream serves: single `type` strings, refs under
`#/definitions/` (v2) or `#/components/schemas/` (v3), IntOrString and Quantity
in their upstream shapes. Paths carry `x-kubernetes-action` and
`x-kubernetes-group-version-kind` on every operation and list the query
parameters inline, because kubectl looks for `fieldValidation` among a PATCH
operation's own parameters to decide whether the server validates fields, and
`kubectl explain` finds a resource's kind through its path's GET operation.

Documents are built once per set of served resources and kept as bytes; they
are large and never change while the server runs. Only JSON is produced here;
`openapi_proto` re-encodes the v2 document as protobuf for kubectl.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path
from typing import Any, Iterable

import orjson

from nanokube import schema
from nanokube.metrics import openapi as metrics_openapi
from nanokube.registry.base import Resource

V2_PREFIX = "#/definitions/"
V3_PREFIX = "#/components/schemas/"
VERSION = "v1.37.0"

_META = "io.k8s.apimachinery.pkg.apis.meta.v1."
_INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
_QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
#: types every group-version's operations refer to
_COMMON = (_META + "Status", _META + "DeleteOptions", _META + "WatchEvent", _META + "Patch", _META + "APIResourceList")

#: subresource -> (definition of its body, HTTP methods it serves)
_SUBRESOURCES: dict[str, tuple[str | None, tuple[str, ...]]] = {
    "status": (None, ("get", "put", "patch")),
    "scale": ("io.k8s.api.autoscaling.v1.Scale", ("get", "put", "patch")),
    "binding": ("io.k8s.api.core.v1.Binding", ("post",)),
    "eviction": ("io.k8s.api.policy.v1.Eviction", ("post",)),
    "approval": (None, ("get", "put", "patch")),
    "log": ("", ("get",)),
}

_PATCH_TYPES = (
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
    "application/apply-patch+cbor",
)


def _patch_types(r: Resource) -> tuple[str, ...]:
    """What PATCH accepts; kubectl's client-side apply uses strategic merge only for kinds whose
    PATCH lists it (custom resources do not)."""
    if r.strategy.strategic_merge:
        return _PATCH_TYPES
    return tuple(t for t in _PATCH_TYPES if t != "application/strategic-merge-patch+json")


# --- schema conversion ------------------------------------------------------

_KEEP = ("description", "format", "required", "default")


def convert(node: dict[str, Any], prefix: str) -> dict[str, Any]:
    """One JSON Schema node in OpenAPI form, refs pointing under `prefix`. In v3, where a `$ref`'s
    siblings are ignored, a reference with a description or default of its own is wrapped in
    `allOf` as upstream's v3 documents do (kubectl explain prints the field's description, then
    the referenced type's); v2 keeps them beside the `$ref`."""
    out: dict[str, Any] = {}
    ref = node.get("$ref")
    if ref:
        target = prefix + ref[len(schema.REF_PREFIX):]
        if prefix == V3_PREFIX and any(k in node for k in _KEEP):
            out["allOf"] = [{"$ref": target}]
        else:
            out["$ref"] = target
    t = node.get("type")
    if t is not None:
        out["type"] = t if isinstance(t, str) else next(x for x in t if x != "null")
    for k in _KEEP:
        if k in node:
            out[k] = node[k]
    if "enum" in node:
        out["enum"] = [v for v in node["enum"] if v is not None]
    if "properties" in node:
        out["properties"] = {k: convert(v, prefix) for k, v in node["properties"].items()}
    if "items" in node:
        out["items"] = convert(node["items"], prefix)
    ap = node.get("additionalProperties")
    if isinstance(ap, dict):
        out["additionalProperties"] = convert(ap, prefix)
    elif ap is not None:
        out["additionalProperties"] = ap
    for k, v in node.items():
        if k.startswith("x-kubernetes-"):
            out[k] = v
    return out


#: The two types kube-openapi describes from their Go docs, which kubernetes-validate's definitions lack
#: (a bare `oneOf`): what they hold and how they are written, in our words.
_INT_OR_STRING_DOC = (
    "IntOrString is a type that can hold an int32 or a string. In JSON and YAML it is written as the value it "
    "holds, a number or a string, so that one field can take either: a port by its number or by its name, a "
    "count or a percentage such as \"25%\".")
_QUANTITY_DOC = """Quantity is a fixed-point representation of a number, written in JSON and YAML as a string (a plain \
number is read too).

Its form is a signed decimal number followed by a suffix, which may be empty:

  <quantity> ::= <signedNumber><suffix>
  <suffix> ::= <binarySI> | <decimalSI> | <decimalExponent>
  <binarySI> ::= Ki | Mi | Gi | Ti | Pi | Ei  (powers of 1024: 1Ki = 1024)
  <decimalSI> ::= n | u | m | "" | k | M | G | T | P | E  (powers of 1000)
  <decimalExponent> ::= e <signedNumber> | E <signedNumber>  (1e3 = 1000)

Whatever the suffix, a quantity is at most 2^63-1 in magnitude and has at most three decimal places: a larger \
value is capped and a finer one rounded up (0.1m is read as 1m).

A quantity is written back in canonical form: a suffix of the kind it was given in (binary SI stays binary \
SI), as large as keeps every digit, no fractional digits and no sign unless negative: 1.5 is written "1500m", 1.5Gi "1536Mi", 1000k "1M". A well-formed value not \
in canonical form is accepted and written back canonically, so what is read back may be spelled differently from \
what was sent; the number it stands for is the same."""


@functools.cache
def _enums() -> dict[str, dict[str, list[str]]]:
    """definition -> {field: values}: the enums kube-openapi gives fields of a `+enum` Go type, which
    kubernetes-validate's definitions leave out (generated by scripts/gen_openapi_enums.py)."""
    return orjson.loads(Path(__file__).with_name("openapi_enums.json").read_bytes())


def definition_openapi(name: str, prefix: str, v3: bool) -> dict[str, Any]:
    """The named definition as upstream renders it in a v2 or v3 document."""
    if name == _INT_OR_STRING:
        d: dict[str, Any] = {"description": _INT_OR_STRING_DOC, "format": "int-or-string"}
        if v3:  # no `type`: kubectl explain then names the field <IntOrString>
            d["oneOf"] = [{"type": "integer"}, {"type": "string"}]
            d["x-kubernetes-int-or-string"] = True
        else:
            d["type"] = "string"
        return d
    if name == _QUANTITY:
        d = {"description": _QUANTITY_DOC}
        if v3:
            d["oneOf"] = [{"type": "string"}, {"type": "number"}]
        else:
            d["type"] = "string"
        return d
    d = convert(schema.definitions()[name], prefix)
    for field, values in _enums().get(name, {}).items():
        prop = d["properties"][field]
        if prop.get("type") == "array":  # (a list of an enum type: its items' enum, no paragraph)
            prop["items"]["enum"] = values
        else:
            prop["enum"] = values
            prop["description"] = _with_enum_values(prop.get("description", ""), values)
    if d.get("x-kubernetes-group-version-kind"):
        # kubernetes-validate pins apiVersion/kind with an enum; upstream does not.
        for p in ("apiVersion", "kind"):
            d.get("properties", {}).get(p, {}).pop("enum", None)
    return d


def _with_enum_values(description: str, values: list[str]) -> str:
    """A field's description with the paragraph kube-openapi adds for a `+enum` type (what `kubectl
    explain` shows): each value as Go's %q quotes it. Upstream follows a value with its constant's Go
    comment, which no pinned package carries: here the values alone, as upstream lists a constant
    without one."""
    lines = "\n".join(f" - `{orjson.dumps(v).decode()}`" for v in values)
    return f"{description}\n\nPossible enum values:\n{lines}" if description else f"Possible enum values:\n{lines}"


def definition_for(resource: Resource, version: str) -> str | None:
    """The `$defs` name of a resource's kind at `version`."""
    return schema.definition_name(resource.group, version, resource.kind)


def _refs(node: Any, found: set[str]) -> None:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            found.add(ref[len(schema.REF_PREFIX):])
        for v in node.values():
            _refs(v, found)
    elif isinstance(node, list):
        for v in node:
            _refs(v, found)


def reachable(roots: Iterable[str]) -> list[str]:
    """Every definition the roots refer to, transitively, sorted."""
    defs = schema.definitions()
    seen: set[str] = set()
    todo = [r for r in roots if r in defs]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        found: set[str] = set()
        _refs(defs[name], found)
        todo.extend(found - seen)
    return sorted(seen)


# --- paths --------------------------------------------------------------------


def _camel(group: str, version: str) -> str:
    parts = group.removesuffix(".k8s.io").split(".") if group else ["core"]
    return "".join(p[:1].upper() + p[1:] for p in parts) + version[:1].upper() + version[1:]


def _gvk(group: str, version: str, kind: str) -> dict[str, str]:
    return {"group": group, "kind": kind, "version": version}


_PARAM_DOCS = {
    "path": ("string", "Path is the URL path to use for the current proxy request."),
    "pretty": ("string", "If 'true', then the output is pretty printed."),
    "dryRun": ("string", "When present, indicates that modifications should not be persisted."),
    "fieldManager": ("string", "fieldManager is a name associated with the actor or entity that is making these changes."),
    "fieldValidation": (
        "string",
        "fieldValidation instructs the server on how to handle objects in the request containing unknown or "
        "duplicate fields. Valid values are: Ignore, Warn (the default) and Strict.",
    ),
    "force": ("boolean", "Force is going to \"force\" Apply requests. It must be unset for non-apply patch requests."),
    "labelSelector": ("string", "A selector to restrict the list of returned objects by their labels."),
    "fieldSelector": ("string", "A selector to restrict the list of returned objects by their fields."),
    "watch": ("boolean", "Watch for changes to the described resources and return them as a stream."),
    "allowWatchBookmarks": ("boolean", "allowWatchBookmarks requests watch events with type \"BOOKMARK\"."),
    "resourceVersion": ("string", "resourceVersion sets a constraint on what resource versions a request may be served from."),
    "resourceVersionMatch": ("string", "resourceVersionMatch determines how resourceVersion is applied to list calls."),
    "sendInitialEvents": ("boolean", "sendInitialEvents=true may be set together with watch=true."),
    "timeoutSeconds": ("integer", "Timeout for the list/watch call."),
    "limit": ("integer", "limit is a maximum number of responses to return for a list call."),
    "continue": ("string", "The continue option should be set when retrieving more results from the server."),
    "gracePeriodSeconds": ("integer", "The duration in seconds before the object should be deleted."),
    "propagationPolicy": ("string", "Whether and how garbage collection will be performed."),
    "orphanDependents": ("boolean", "Deprecated: please use the PropagationPolicy."),
    "container": ("string", "The container for which to stream logs."),
    "follow": ("boolean", "Follow the log stream of the pod."),
    "previous": ("boolean", "Return previous terminated container logs."),
    "tailLines": ("integer", "If set, the number of lines from the end of the logs to show."),
    "sinceSeconds": ("integer", "A relative time in seconds before the current time from which to show logs."),
    "timestamps": ("boolean", "If true, add an RFC3339 timestamp at the beginning of every line of log output."),
    "insecureSkipTLSVerifyBackend": ("boolean", "insecureSkipTLSVerifyBackend indicates that the apiserver should "
                                                "not confirm the validity of the serving certificate of the backend "
                                                "it is connecting to."),
    "limitBytes": ("integer", "If set, the number of bytes to read from the server before terminating the log output."),
    "stream": ("string", "Specify which container log stream to return to the client."),
    "namespace": ("string", "object name and auth scope, such as for teams and projects"),
    # the metrics adapters' routes' (metrics/openapi.ROUTES)
    "resource": ("string", "the name of the resource"),
    "subresource": ("string", "the name of the subresource"),
    "metricLabelSelector": ("string", "A selector to restrict the list of returned metrics by their labels"),
}
_LIST_Q = ("allowWatchBookmarks", "continue", "fieldSelector", "labelSelector", "limit", "resourceVersion",
           "resourceVersionMatch", "sendInitialEvents", "timeoutSeconds", "watch")
_WRITE_Q = ("dryRun", "fieldManager", "fieldValidation")
_DELETE_Q = ("dryRun", "gracePeriodSeconds", "orphanDependents", "propagationPolicy")
_LOG_Q = ("container", "follow", "insecureSkipTLSVerifyBackend", "limitBytes", "previous", "sinceSeconds", "stream",
          "tailLines", "timestamps")
#: the pod connect subresources: their options kind and query parameters (name, type, description)
_CONNECT: dict[str, tuple[str, tuple[tuple[str, str, str], ...]]] = {
    "exec": ("PodExecOptions", (
        ("command", "string", "Command is the remote command to execute. argv array. Not executed within a shell."),
        ("container", "string", "Container in which to execute the command."),
        ("stderr", "boolean", "Redirect the standard error stream of the pod for this call."),
        ("stdin", "boolean", "Redirect the standard input stream of the pod for this call. Defaults to false."),
        ("stdout", "boolean", "Redirect the standard output stream of the pod for this call."),
        ("tty", "boolean", "TTY if true indicates that a tty will be allocated for the exec call. Defaults to false."),
    )),
    "attach": ("PodAttachOptions", (
        ("container", "string", "The container in which to execute the command."),
        ("stderr", "boolean", "Stderr if true indicates that stderr is to be redirected for the attach call."),
        ("stdin", "boolean", "Stdin if true, redirects the standard input stream of the pod for this call."),
        ("stdout", "boolean", "Stdout if true indicates that stdout is to be redirected for the attach call."),
        ("tty", "boolean", "TTY if true indicates that a tty will be allocated for the attach call."),
    )),
    "portforward": ("PodPortForwardOptions", (
        ("ports", "integer", "List of ports to forward Required when using WebSockets"),
    )),
}


def _param(name: str, where: str, v3: bool, required: bool = False,
           described: tuple[str, str] | None = None) -> dict[str, Any]:
    """`described`: (type, description) where they are not `_PARAM_DOCS`' for `name`."""
    typ, doc = described or _PARAM_DOCS.get(name, ("string", f"name of the {name}"))
    p: dict[str, Any] = {"description": doc, "in": where, "name": name}
    if v3:
        p["schema"] = {"type": typ, "uniqueItems": True}
    else:
        p["type"] = typ
        p["uniqueItems"] = True
    if required:
        p["required"] = True
    return p


class _PathBuilder:
    """Operations for one group-version, in v2 or v3 form."""

    def __init__(self, group: str, version: str, v3: bool) -> None:
        self.group, self.version, self.v3 = group, version, v3
        self.prefix = V3_PREFIX if v3 else V2_PREFIX
        self.root = f"/apis/{group}/{version}" if group else f"/api/{version}"
        self.tag = _camel(group, version)
        self.paths: dict[str, dict[str, Any]] = {}
        self.roots: set[str] = set(_COMMON)

    def _media(self, ref: str | None, types: tuple[str, ...]) -> dict[str, Any]:
        body = {"$ref": self.prefix + ref} if ref else {"type": "string"}
        return {t: {"schema": body} for t in types}

    def _op(self, action: str, op_id: str, desc: str, gvk: dict[str, str], *, query: tuple = (),
            body: str | None = None, body_types: tuple[str, ...] = ("application/json",),
            response: str | None = None, created: bool = False) -> dict[str, Any]:
        out_types = ("application/json", "application/yaml")
        op: dict[str, Any] = {
            "description": desc,
            "operationId": op_id,
            "parameters": [_param(q, "query", self.v3) if isinstance(q, str) else
                           _param(q[0], "query", self.v3, described=q[1:]) for q in query],
            "tags": [(self.group.removesuffix(".k8s.io").replace(".", "") or "core") + "_" + self.version],
            "x-kubernetes-action": action,
            "x-kubernetes-group-version-kind": gvk,
        }
        codes = {"200": "OK"}
        if created:
            codes.update({"201": "Created", "202": "Accepted"})
        if self.v3:
            if body is not None:
                op["requestBody"] = {"content": self._media(body, body_types), "required": True}
            op["responses"] = {c: {"content": self._media(response, out_types), "description": d}
                               for c, d in codes.items()}
        else:
            if body is not None:
                op["parameters"].insert(0, {"in": "body", "name": "body", "required": True,
                                            "schema": {"$ref": self.prefix + body}})
                op["consumes"] = list(body_types) if body_types != ("application/json",) else ["*/*"]
            op["produces"] = list(out_types)
            op["schemes"] = ["https"]
            schema_ = {"$ref": self.prefix + response} if response else {"type": "string"}
            op["responses"] = {c: {"description": d, "schema": schema_} for c, d in codes.items()}
            op["responses"]["401"] = {"description": "Unauthorized"}
        return op

    def _path(self, path: str, path_params: tuple[str, ...], ops: dict[str, dict[str, Any]],
              pretty: bool = True, described: dict[str, tuple[str, str]] | None = None) -> None:
        """`described`: (type, description) of the path parameters not described as `_PARAM_DOCS` does;
        `name` is the name of the kind the operations serve (PodExecOptions, Scale, Pod), as upstream's."""
        if not ops:
            return
        described = dict(described or {})
        kind = next(iter(ops.values())).get("x-kubernetes-group-version-kind", {}).get("kind")
        if kind:
            described.setdefault("name", ("string", f"name of the {kind}"))
        entry = self.paths.setdefault(path, {})
        entry.update(ops)
        entry["parameters"] = [_param(p, "path", self.v3, required=True, described=described.get(p))
                               for p in path_params] + (
            [_param("pretty", "query", self.v3)] if pretty else [])

    def add(self, r: Resource) -> None:
        kind_def = definition_for(r, self.version)
        list_def = schema.definition_name(self.group, self.version, r.list_kind)
        if kind_def is None:
            return
        self.roots.update((kind_def, list_def or kind_def))
        if (r.group, r.kind) in metrics_openapi.ROUTES:
            self._metric_routes(r.group, r.kind, list_def)
        gvk = _gvk(self.group, self.version, r.kind)
        verbs = set(r.verbs)
        if list_def is None:  # create-only kinds (Binding, TokenReview) have no list type
            verbs -= {"list", "watch", "deletecollection"}
        ns = "Namespaced" if r.namespaced else ""
        name = self.tag + ns + r.kind
        base = f"{self.root}/namespaces/{{namespace}}/{r.plural}" if r.namespaced else f"{self.root}/{r.plural}"
        scope = ("namespace",) if r.namespaced else ()
        item_params = ("name",) + scope

        coll: dict[str, dict[str, Any]] = {}
        if "list" in verbs:
            coll["get"] = self._op("list", "list" + name, f"list or watch objects of kind {r.kind}", gvk,
                                   query=_LIST_Q, response=list_def)
        if "create" in verbs:
            coll["post"] = self._op("post", "create" + name, f"create a {r.kind}", gvk, query=_WRITE_Q,
                                    body=kind_def, response=kind_def, created=True)
        if "deletecollection" in verbs:
            coll["delete"] = self._op("deletecollection", "deletecollection" + name,
                                      f"delete collection of {r.kind}", gvk, query=_DELETE_Q + _LIST_Q,
                                      body=_META + "DeleteOptions", response=_META + "Status")
        self._path(base, scope, coll)

        item: dict[str, dict[str, Any]] = {}
        if "get" in verbs:
            item["get"] = self._op("get", "read" + name, f"read the specified {r.kind}", gvk, response=kind_def)
        if "update" in verbs:
            item["put"] = self._op("put", "replace" + name, f"replace the specified {r.kind}", gvk,
                                   query=_WRITE_Q, body=kind_def, response=kind_def, created=True)
        if "patch" in verbs:
            item["patch"] = self._op("patch", "patch" + name, f"partially update the specified {r.kind}", gvk,
                                     query=_WRITE_Q + ("force",), body=_META + "Patch", body_types=_patch_types(r),
                                     response=kind_def, created=True)
        if "delete" in verbs:
            item["delete"] = self._op("delete", "delete" + name, f"delete a {r.kind}", gvk, query=_DELETE_Q,
                                      body=_META + "DeleteOptions", response=_META + "Status", created=True)
        self._path(base + "/{name}", item_params, item)

        if "list" in verbs and r.namespaced:
            self._path(f"{self.root}/{r.plural}", (), {"get": self._op(
                "list", f"list{self.tag}{r.kind}ForAllNamespaces", f"list or watch objects of kind {r.kind}",
                gvk, query=_LIST_Q, response=list_def)})
        if "watch" in verbs:
            wbase = (f"{self.root}/watch/namespaces/{{namespace}}/{r.plural}" if r.namespaced
                     else f"{self.root}/watch/{r.plural}")
            self._path(wbase, scope, {"get": self._op(
                "watchlist", "watch" + name + "List", f"watch individual changes to a list of {r.kind}", gvk,
                query=_LIST_Q, response=_META + "WatchEvent")})
            self._path(wbase + "/{name}", item_params, {"get": self._op(
                "watch", "watch" + name, f"watch changes to an object of kind {r.kind}", gvk,
                query=_LIST_Q, response=_META + "WatchEvent")})

        for sub in r.subresources:
            self._subresource(r, sub, base + "/{name}/" + sub, item_params, name, kind_def, gvk)

    def _metric_routes(self, group: str, kind: str, list_def: str) -> None:
        """A metrics adapter's metric-named routes, whose operations, outside its resources' REST
        installer, carry no x-kubernetes-action or group-version-kind."""
        for path, params, op_id, desc, query in metrics_openapi.ROUTES[group, kind]:
            op = self._op("list", op_id, desc, {}, query=_LIST_Q + query, response=list_def)
            del op["x-kubernetes-action"], op["x-kubernetes-group-version-kind"]
            self._path(f"{self.root}/{path}", params, {"get": op},
                       described={"name": ("string", "name of the described resource")})

    def _subresource(self, r: Resource, sub: str, path: str, params: tuple[str, ...], name: str,
                     kind_def: str, gvk: dict[str, str]) -> None:
        if sub == "proxy":
            self._proxy(r, path, params, name)
            return
        if sub in _CONNECT:
            self._connect(r, sub, path, params, name)
            return
        body, methods = _SUBRESOURCES.get(sub, (None, ("get", "put", "patch")))
        if body == "":  # a text stream (pods/log)
            self._path(path, params, {"get": self._op(
                "get", f"read{name}{sub.title()}", f"read {sub} of the specified {r.kind}", gvk, query=_LOG_Q)})
            return
        sgvk = gvk
        if body:  # a different kind (Scale, Binding, Eviction) with its own group-version-kind
            sgvk = schema.definitions()[body]["x-kubernetes-group-version-kind"][0]
            self.roots.add(body)
        body = body or kind_def
        suffix = sub[:1].upper() + sub[1:]
        ops: dict[str, dict[str, Any]] = {}
        if "get" in methods:
            ops["get"] = self._op("get", f"read{name}{suffix}", f"read {sub} of the specified {r.kind}", sgvk,
                                  response=body)
        if "put" in methods:
            ops["put"] = self._op("put", f"replace{name}{suffix}", f"replace {sub} of the specified {r.kind}",
                                  sgvk, query=_WRITE_Q, body=body, response=body, created=True)
        if "patch" in methods:
            ops["patch"] = self._op("patch", f"patch{name}{suffix}", f"partially update {sub} of the specified {r.kind}",
                                    sgvk, query=_WRITE_Q + ("force",), body=_META + "Patch",
                                    body_types=_patch_types(r), response=body, created=True)
        if "post" in methods:
            ops["post"] = self._op("post", f"create{name}{suffix}", f"create {sub} of a {r.kind}", sgvk,
                                   query=_WRITE_Q, body=body, response=body, created=True)
        self._path(path, params, ops)

    def _connect(self, r: Resource, sub: str, path: str, params: tuple[str, ...], name: str) -> None:
        """exec, attach and portforward: connect operations for GET and POST (connectCoreV1GetNamespacedPodExec
        and the rest) taking their options kind's query parameters, as the log's are not."""
        kind, query = _CONNECT[sub]
        gvk = {"group": "", "kind": kind, "version": "v1"}
        self._path(path, params, {m: self._op("connect", f"connect{self.tag}{m.title()}{name.removeprefix(self.tag)}"
                                              f"{sub.title()}", f"connect {m.upper()} requests to {sub} of {r.kind}",
                                              gvk, query=query)
                                  for m in ("get", "post")}, pretty=False)

    def _proxy(self, r: Resource, path: str, params: tuple[str, ...], name: str) -> None:
        """The proxy subresource's connect operations (connectGetNamespacedPodProxy and the rest),
        at the subresource and with a path after it."""
        gvk = {"group": "", "kind": f"{r.kind}ProxyOptions", "version": "v1"}
        for at, suffix, path_params in ((path, "", params), (path + "/{path}", "WithPath", (*params, "path"))):
            ops = {m: self._op("connect", f"connect{self.tag}{m.title()}{name.removeprefix(self.tag)}Proxy{suffix}",
                               f"connect {m.upper()} requests to proxy of {r.kind}", gvk, query=("path",))
                   for m in ("delete", "get", "head", "options", "patch", "post", "put")}
            self._path(at, path_params, ops, described={"path": ("string", "path to the resource")})


# --- documents ----------------------------------------------------------------


def _key(resources: Iterable[Resource]) -> tuple:
    return tuple((r.group, r.plural, r.kind, tuple(r.versions), r.namespaced, tuple(r.subresources), tuple(r.verbs))
                 for r in resources)


def _group_versions(resources: list[Resource]) -> dict[tuple[str, str], list[Resource]]:
    gvs: dict[tuple[str, str], list[Resource]] = {}
    for r in resources:
        for v in r.versions:
            gvs.setdefault((r.group, v), []).append(r)
    return gvs


_V2_CACHE: dict[tuple, bytes] = {}
_V3_CACHE: dict[tuple, dict[str, tuple[bytes, str]]] = {}


def forget_documents() -> None:
    """Definitions changed in place (a CRD's schema): documents are built anew."""
    _V2_CACHE.clear()
    _V3_CACHE.clear()


def build_v2(resources: list[Resource]) -> bytes:
    """The Swagger 2.0 document served at `/openapi/v2`."""
    key = _key(resources)
    if key not in _V2_CACHE:
        paths: dict[str, Any] = {}
        roots: set[str] = set()
        for (group, version), rs in sorted(_group_versions(resources).items()):
            pb = _PathBuilder(group, version, v3=False)
            for r in rs:
                pb.add(r)
            paths.update(pb.paths)
            roots |= pb.roots
        doc = {
            "swagger": "2.0",
            "info": {"title": "Kubernetes", "version": VERSION},
            "paths": dict(sorted(paths.items())),
            "definitions": {n: definition_openapi(n, V2_PREFIX, v3=False) for n in reachable(roots)},
            "securityDefinitions": {"BearerToken": {"description": "Bearer Token authentication",
                                                    "in": "header", "name": "authorization", "type": "apiKey"}},
            "security": [{"BearerToken": []}],
        }
        _V2_CACHE[key] = orjson.dumps(doc)
    return _V2_CACHE[key]


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def content_hash(body: bytes) -> str:
    """kube-openapi's computeETag: the upper-case hex SHA-512 of a document."""
    return hashlib.sha512(body).hexdigest().upper()


def v3_documents(resources: list[Resource]) -> dict[str, tuple[bytes, str]]:
    """Each group-version's OpenAPI 3.0 document and its content hash, keyed
    as `/openapi/v3/<key>` names it (`api/v1`, `apis/apps/v1`)."""
    key = _key(resources)
    if key not in _V3_CACHE:
        docs: dict[str, tuple[bytes, str]] = {}
        for (group, version), rs in sorted(_group_versions(resources).items()):
            pb = _PathBuilder(group, version, v3=True)
            for r in rs:
                pb.add(r)
            doc = {
                "openapi": "3.0.0",
                "info": {"title": "Kubernetes", "version": VERSION},
                "paths": dict(sorted(pb.paths.items())),
                "components": {
                    "schemas": {n: definition_openapi(n, V3_PREFIX, v3=True) for n in reachable(pb.roots)},
                    "securitySchemes": {"BearerToken": {"description": "Bearer Token authentication",
                                                        "in": "header", "name": "authorization", "type": "apiKey"}},
                },
                "security": [{"BearerToken": []}],
            }
            body = orjson.dumps(doc)
            docs[_gv_path(group, version)] = (body, content_hash(body))
        _V3_CACHE[key] = docs
    return _V3_CACHE[key]


def build_v3_index(resources: list[Resource]) -> bytes:
    """The `/openapi/v3` discovery document: where each group-version's doc lives."""
    docs = v3_documents(resources)
    return orjson.dumps({"paths": {p: {"serverRelativeURL": f"/openapi/v3/{p}?hash={h}"}
                                   for p, (_, h) in docs.items()}})


def v3_document(resources: list[Resource], group: str, version: str) -> tuple[bytes, str] | None:
    """The OpenAPI 3.0 document of one group-version and its hash; None if none is served."""
    return v3_documents(resources).get(_gv_path(group, version))
