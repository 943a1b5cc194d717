"""Recover Kubernetes generated.proto files (field structure only) from a kubectl binary.

Usage: extract_kubectl_protos.py KUBECTL OUT_DIR

kubectl's gogo-generated packages (k8s.io/api/..., k8s.io/apimachinery/...) each embed their
FileDescriptorProto as a gzip stream. This finds every gzip stream in the binary, keeps those that
decode to a descriptor of a file under k8s.io/, and writes OUT_DIR/<file name> as .proto text in
the shape scripts/gen_protobuf_fields.py reads: messages with `optional`/`repeated` fields, map
entries as `map<K, V>`, fully qualified type names, and `[(gogoproto.nullable) = false]` on the
fields whose descriptor carries that option. Comments, enums, services and other options are not
rendered. Then run `gen_protobuf_fields.py OUT_DIR` to build a table from them. Only kubectl up to
1.32 embeds descriptors; the committed table comes from scripts/kubectl_go_types.py.

Self-contained (reads the descriptor wire format directly), so no protobuf library is needed.
"""

import sys
import zlib
from pathlib import Path

GZIP_HEADER = b"\x1f\x8b\x08\x00"
#: FieldDescriptorProto.Type numbers -> proto scalar names (11 message, 14 enum are named types)
SCALAR_TYPES = {1: "double", 2: "float", 3: "int64", 4: "uint64", 5: "int32", 6: "fixed64", 7: "fixed32",
                8: "bool", 9: "string", 12: "bytes", 13: "uint32", 15: "sfixed32", 16: "sfixed64",
                17: "sint32", 18: "sint64"}
LABEL_REPEATED = 3
GOGO_NULLABLE = 65001


class DescriptorError(ValueError):
    """A descriptor uses something the .proto rendering does not cover."""


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if i >= len(buf) or shift > 63:
            raise DescriptorError("truncated varint")
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, i
        shift += 7


def fields(buf: bytes) -> list[tuple[int, int | bytes]]:
    """The (number, value) pairs of one message: ints for varints, bytes for everything else."""
    out, i = [], 0
    while i < len(buf):
        key, i = _varint(buf, i)
        num, wire = key >> 3, key & 7
        if wire == 0:
            val, i = _varint(buf, i)
        elif wire in (1, 2, 5):
            size = {1: 8, 5: 4}.get(wire)
            if size is None:
                size, i = _varint(buf, i)
            val, i = buf[i:i + size], i + size
        else:
            raise DescriptorError(f"unsupported wire type {wire}")
        if i > len(buf):
            raise DescriptorError("truncated field")
        out.append((num, val))
    return out


def _first(pairs: list, num: int, default=None):
    return next((v for n, v in pairs if n == num), default)


def embedded_descriptors(binary: bytes) -> dict[str, bytes]:
    """{file name: serialized FileDescriptorProto} for every k8s.io descriptor gzipped in binary."""
    found: dict[str, bytes] = {}
    at = binary.find(GZIP_HEADER)
    while at >= 0:
        try:
            raw = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(binary[at:at + (1 << 20)])
            name = _first(fields(raw), 1) if raw[:1] == b"\x0a" else None
        except (zlib.error, DescriptorError):
            name = None
        k8s_file = isinstance(name, bytes) and name.startswith(b"k8s.io/") and name.endswith(b".proto")
        if k8s_file and found.setdefault(name.decode(), raw) != raw:
            raise DescriptorError(f"two different descriptors for {name.decode()}")
        at = binary.find(GZIP_HEADER, at + 1)
    return found


def _type(field: list) -> str:
    kind = _first(field, 5)
    if kind in SCALAR_TYPES:
        return SCALAR_TYPES[kind]
    return _first(field, 6).decode().lstrip(".")


def render_message(msg: list) -> str:
    """One DescriptorProto as `message Name { ... }`."""
    name = _first(msg, 1).decode()
    maps = {}
    for num, nested in msg:
        if num == 4:
            raise DescriptorError(f"enum nested in {name}")
        if num != 3:
            continue
        entry = fields(nested)
        options = fields(_first(entry, 7, b""))
        if _first(options, 7) != 1:
            raise DescriptorError(f"nested message {_first(entry, 1).decode()} in {name} is not a map entry")
        kv = {_first(f, 1).decode(): _type(f) for f in (fields(v) for n, v in entry if n == 2)}
        maps[_first(entry, 1).decode()] = kv
    lines = [f"message {name} {{"]
    for field in (fields(v) for n, v in msg if n == 2):
        fname, number, ftype = _first(field, 1).decode(), _first(field, 3), _type(field)
        entry = maps.get(ftype.rsplit(".", 1)[-1]) if _first(field, 4) == LABEL_REPEATED else None
        if entry is not None:
            lines.append(f"  map<{entry['key']}, {entry['value']}> {fname} = {number};")
            continue
        label = "repeated" if _first(field, 4) == LABEL_REPEATED else "optional"
        value_field = _first(fields(_first(field, 8, b"")), GOGO_NULLABLE) == 0
        option = " [(gogoproto.nullable) = false]" if value_field else ""
        lines.append(f"  {label} {ftype} {fname} = {number}{option};")
    lines.append("}")
    return "\n".join(lines)


def render_file(raw: bytes) -> str:
    """A FileDescriptorProto as .proto text."""
    desc = fields(raw)
    if _first(desc, 5) is not None:
        raise DescriptorError(f"top-level enum in {_first(desc, 1).decode()}")
    lines = ['syntax = "proto2";', f"package {_first(desc, 2).decode()};", ""]
    lines += [f'import "{v.decode()}";' for n, v in desc if n == 3]
    for num, msg in desc:
        if num == 4:
            lines += ["", render_message(fields(msg))]
    return "\n".join(lines) + "\n"


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    binary, out = Path(sys.argv[1]).read_bytes(), Path(sys.argv[2])
    descriptors = embedded_descriptors(binary)
    for name, raw in sorted(descriptors.items()):
        path = out / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render_file(raw))
    print(f"{len(descriptors)} descriptors -> {out}")


if __name__ == "__main__":
    main()
