"""Generate nanokube/apiserver/protobuf_fields.json from Kubernetes generated.proto files.

Usage: gen_protobuf_fields.py PROTO_ROOT [OUT]

PROTO_ROOT holds the upstream tree (PROTO_ROOT/k8s.io/api/core/v1/generated.proto, ...).
The table maps each message's full name to {field number: [json name, type, flags]}:
type is a proto scalar name or a message full name; flags holds "r" (repeated),
"m" (map<string, type>), "o" (a Go value field whose JSON is omitempty, so a zero
on the wire means "unset") and "i" (an embedded message whose fields JSON inlines into
the parent). A field is a Go value field when the .proto marks it
`[(gogoproto.nullable) = false]`; upstream files that dropped gogo options mark none,
and their zeros are then kept. Whether a field is omitempty comes from the OpenAPI
`required` list in nanokube.schema (required fields are the non-omitempty ones). A proto field
name that differs from its JSON name only in case (authentication/v1 BoundObjectReference `uID`)
takes the OpenAPI property's spelling.

PROTO_ROOT can be produced from a kubectl binary up to 1.32 by scripts/extract_kubectl_protos.py
(1.33+ embed no descriptors). The committed table is scripts/kubectl_go_types.py's, read from
kubectl 1.37's Go types; this route stays as a cross-check (tests/apiserver/test_protobuf_rbac.py).
"""

import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nanokube import schema

PACKAGES = [
    "api/core/v1", "api/apps/v1", "api/batch/v1", "api/autoscaling/v1", "api/autoscaling/v2",
    "api/coordination/v1", "api/discovery/v1", "api/events/v1", "api/policy/v1",
    "api/scheduling/v1", "api/scheduling/v1beta1", "api/scheduling/v1alpha3",
    "api/resource/v1", "api/resource/v1beta1", "api/resource/v1beta2", "api/resource/v1alpha3",
    "api/certificates/v1", "api/certificates/v1beta1",
    "apimachinery/pkg/apis/meta/v1", "apimachinery/pkg/runtime", "apimachinery/pkg/api/resource",
    "apimachinery/pkg/util/intstr", "api/rbac/v1", "api/authorization/v1", "api/authentication/v1",
    "api/networking/v1",
]
SCALARS = {"double", "float", "int32", "int64", "uint32", "uint64", "sint32", "sint64",
           "fixed32", "fixed64", "sfixed32", "sfixed64", "bool", "string", "bytes"}
TOKEN = re.compile(r'"[^"]*"|[A-Za-z_][\w.]*|\d+|[{}<>=;,\[\]()]')
COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)


class ProtoSyntaxError(ValueError):
    """The .proto text does not have the shape go-to-protobuf writes."""


def parse_proto(text: str) -> tuple[str, dict[str, list[tuple]]]:
    """Return (package, {message name: [(name, number, type, label, options)]})."""
    toks = TOKEN.findall(COMMENT.sub(" ", text))
    package, messages, i = "", {}, 0

    def expect(tok: str) -> None:
        nonlocal i
        if toks[i] != tok:
            raise ProtoSyntaxError(f"expected {tok!r}, got {toks[i]!r}")
        i += 1

    while i < len(toks):
        tok = toks[i]
        if tok in ("syntax", "import", "option"):
            i = toks.index(";", i) + 1
        elif tok == "package":
            package, i = toks[i + 1], i + 2
            expect(";")
        elif tok == "message":
            name, i = toks[i + 1], i + 2
            expect("{")
            fields = messages.setdefault(name, [])
            while toks[i] != "}":
                if toks[i] == "map":
                    key, value, fname, i = toks[i + 2], toks[i + 4], toks[i + 6], i + 7
                    if toks[i - 4] != "," or toks[i - 2] != ">":
                        raise ProtoSyntaxError(f"bad map field in {name}")
                    label, ftype = f"map:{key}", value
                else:
                    label, ftype, fname, i = toks[i], toks[i + 1], toks[i + 2], i + 3
                    if label not in ("optional", "repeated", "required"):
                        raise ProtoSyntaxError(f"unexpected {label!r} in message {name}")
                expect("=")
                number, i = int(toks[i]), i + 1
                options = {}
                if toks[i] == "[":
                    end = toks.index("]", i)
                    options, i = parse_options(toks[i + 1:end]), end + 1
                expect(";")
                fields.append((fname, number, ftype, label, options))
            i += 1
        else:
            raise ProtoSyntaxError(f"unexpected top-level token {tok!r}")
    return package, messages


def parse_options(opt: list[str]) -> dict[str, str]:
    """Parse `(a.b) = v, c = w` option tokens."""
    out, j = {}, 0
    while j < len(opt):
        if opt[j] == "(":
            name, j = opt[j + 1], j + 3
        else:
            name, j = opt[j], j + 1
        if opt[j] != "=":
            raise ProtoSyntaxError(f"bad option near {name!r}")
        out[name], j = opt[j + 1].strip('"'), j + 3
    return out


def openapi_name(message: str) -> str:
    """k8s.io.api.core.v1.Pod -> io.k8s.api.core.v1.Pod (the OpenAPI definition name)."""
    return "io.k8s." + message.removeprefix("k8s.io.")


def build_table(root: Path) -> dict[str, dict[str, list]]:
    defs = schema.definitions()
    table: dict[str, dict[str, list]] = {}
    for pkg_dir in PACKAGES:
        path = root / "k8s.io" / pkg_dir / "generated.proto"
        if not path.exists():
            continue
        package, messages = parse_proto(path.read_text())
        for name, fields in messages.items():
            full = f"{package}.{name}"
            definition = defs.get(openapi_name(full), {})
            required = set(definition.get("required", ()))
            json_names = {p.lower(): p for p in definition.get("properties", ())}
            entry = {}
            for fname, number, ftype, label, options in fields:
                fname = json_names.get(fname.lower(), fname)
                if ftype not in SCALARS and "." not in ftype:
                    ftype = f"{package}.{ftype}"
                flags = ""
                if label == "repeated":
                    flags = "r"
                elif label.startswith("map:"):
                    if label != "map:string":
                        raise ProtoSyntaxError(f"{full}.{fname}: only string map keys are supported")
                    flags = "m"
                elif ftype in SCALARS and options.get("gogoproto.nullable") == "false" and fname not in required:
                    flags = "o"
                elif ftype not in SCALARS and json_names and fname not in json_names.values():
                    flags = "i"  # an embedded struct whose JSON is inline (IngressRule's IngressRuleValue)
                entry[str(number)] = [fname, ftype, flags]
            table[full] = entry
    return table


def main() -> None:
    root = Path(sys.argv[1])
    out = Path(sys.argv[2]) if len(sys.argv) > 2 else (
        Path(__file__).resolve().parent.parent / "nanokube/apiserver/protobuf_fields.json")
    table = build_table(root)
    lines = [f"{json.dumps(k)}:{json.dumps(v, separators=(',', ':'))}" for k, v in sorted(table.items())]
    out.write_text("{\n" + ",\n".join(lines) + "\n}\n")
    print(f"{len(table)} messages -> {out}")


if __name__ == "__main__":
    main()
