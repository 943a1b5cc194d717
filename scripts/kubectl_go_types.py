"""Generate nanokube/apiserver/protobuf_fields.json from the Go type metadata of a kubectl binary.

Usage: kubectl_go_types.py [KUBECTL] [OUT]   (KUBECTL defaults to .venv/bin/kubectl, v1.37)

Since 1.33 k8s.io/api embeds no protobuf descriptors (scripts/extract_kubectl_protos.py finds
none in kubectl 1.37), but every Go binary keeps the runtime type data `reflect` and
encoding/json read: each struct's fields with their Go type and their full struct tag
(`json:"shareID,omitempty" protobuf:"bytes,7,opt,name=shareID"`). kubectl's scheme holds every
built-in group, so its types are upstream's types.go of that release. This walks them from the
`.typelink` table (Go 1.26's abi.Type layout, x86-64 ELF) and writes the table
apiserver/protobuf.py decodes with: message full name -> {field number: [json name, type, flags]},
flags "r" (repeated), "m" (map), "i" (an embedded struct JSON inlines), "o" (a value scalar
tagged omitempty: its zero on the wire is "unset") and "p" (a pointer: on the wire only when set,
where a value field is always written), read from the Go type and the json tag themselves,
where gen_protobuf_fields.py had to guess them from gogo options and the OpenAPI `required` list.
"""

from __future__ import annotations

import json
import struct
import sys
from pathlib import Path

#: packages whose structs are messages nanokube decodes
PACKAGES = ("k8s.io/api/", "k8s.io/apimachinery/pkg/apis/meta/v1", "k8s.io/apimachinery/pkg/runtime",
            "k8s.io/apimachinery/pkg/api/resource", "k8s.io/apimachinery/pkg/util/intstr")
#: abi.Kind numbers -> proto scalar type
SCALARS = {1: "bool", 5: "int32", 6: "int64", 10: "uint32", 11: "uint64", 13: "float", 14: "double",
           24: "string", 2: "int64"}
ARRAY, MAP, POINTER, SLICE, STRUCT, UINT8 = 17, 21, 22, 23, 25, 8
TFLAG_UNCOMMON, TFLAG_EXTRA_STAR = 1, 2
NAME_HAS_TAG, NAME_EMBEDDED = 2, 8
TYPE_SIZE = 48  # abi.Type on a 64-bit target


class GoTypeError(ValueError):
    """The binary's type data does not have the shape this reader knows."""


class Binary:
    """The Go runtime type data of a 64-bit little-endian ELF executable."""

    def __init__(self, data: bytes):
        if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
            raise GoTypeError("not a 64-bit little-endian ELF file")
        self.data = data
        shoff, = struct.unpack_from("<Q", data, 0x28)
        entsize, count, strndx = struct.unpack_from("<HHH", data, 0x3A)
        raw = [struct.unpack_from("<IIQQQQ", data, shoff + i * entsize) for i in range(count)]
        names = raw[strndx][4]
        self.sections = {}
        for name, _type, _flags, addr, off, size in raw:
            end = data.index(b"\0", names + name)
            self.sections[data[names + name:end].decode()] = (addr, off, size)
        if ".typelink" not in self.sections or ".rodata" not in self.sections:
            raise GoTypeError("no Go .typelink/.rodata sections (not a Go binary?)")
        # the linker lays type data from the start of .rodata (runtime.types), which typelinks and
        # name offsets count from
        self.types = self.sections[".rodata"][0]

    def offset(self, addr: int) -> int:
        for start, off, size in self.sections.values():
            if start and start <= addr < start + size:
                return off + addr - start
        raise GoTypeError(f"address {addr:#x} is in no section")

    def read(self, addr: int, fmt: str) -> tuple:
        return struct.unpack_from(fmt, self.data, self.offset(addr))

    def name(self, addr: int) -> tuple[str, str, int]:
        """An abi.Name: (name, tag, flags)."""
        i = self.offset(addr)
        flags, i = self.data[i], i + 1
        size, i = self._varint(i)
        text, i = self.data[i:i + size].decode(), i + size
        tag = ""
        if flags & NAME_HAS_TAG:
            size, i = self._varint(i)
            tag = self.data[i:i + size].decode()
        return text, tag, flags

    def _varint(self, i: int) -> tuple[int, int]:
        out = shift = 0
        while True:
            b, i = self.data[i], i + 1
            out |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                return out, i

    def typelinks(self) -> list[int]:
        _addr, off, size = self.sections[".typelink"]
        return [self.types + o for o in struct.unpack_from(f"<{size // 4}i", self.data, off)]


class GoType:
    """One abi.Type: its kind, its name (`v1.PodSpec`, `*v1.PodSpec`, `string`), its package path
    when named, and what it is made of."""

    def __init__(self, binary: Binary, addr: int):
        _size, _ptr, _hash, tflag, _align, _falign, kind, _eq, _gc, name_off, _ptrto = binary.read(
            addr, "<QQIBBBBQQii")
        self.kind = kind & 0x1F
        name = binary.name(binary.types + name_off)[0]
        self.name = name[1:] if tflag & TFLAG_EXTRA_STAR else name
        self.elem = self.key = 0
        self.fields: list[tuple[str, str, bool, int]] = []
        extra = 0
        if self.kind in (POINTER, SLICE):
            self.elem, extra = binary.read(addr + TYPE_SIZE, "<Q")[0], 8
        elif self.kind == ARRAY:
            self.elem, extra = binary.read(addr + TYPE_SIZE, "<Q")[0], 24
        elif self.kind == MAP:
            self.key, self.elem = binary.read(addr + TYPE_SIZE, "<QQ")
        elif self.kind == STRUCT:
            fields, count = binary.read(addr + TYPE_SIZE + 8, "<QQ")
            for i in range(count):
                name_addr, typ, _offset = binary.read(fields + 24 * i, "<QQQ")
                fname, tag, flags = binary.name(name_addr)
                self.fields.append((fname, tag, bool(flags & NAME_EMBEDDED), typ))
            extra = 32
        self.pkg = ""
        if tflag & TFLAG_UNCOMMON and (self.kind in (POINTER, SLICE, ARRAY, STRUCT) or self.kind in SCALARS):
            pkg_off, = binary.read(addr + TYPE_SIZE + extra, "<i")
            if pkg_off:
                self.pkg = binary.name(binary.types + pkg_off)[0]

    @property
    def full(self) -> str:
        """k8s.io/api/core/v1 + v1.PodSpec -> k8s.io.api.core.v1.PodSpec (the proto message name)."""
        return self.pkg.replace("/", ".") + "." + self.name.rpartition(".")[2]


def all_types(binary: Binary) -> dict[int, GoType]:
    """Every type reachable from the typelinks, by address."""
    seen: dict[int, GoType] = {}
    todo = binary.typelinks()
    while todo:
        addr = todo.pop()
        if addr in seen or not addr:
            continue
        t = seen[addr] = GoType(binary, addr)
        todo += [t.elem, t.key] + [f[3] for f in t.fields]
    return seen


def tag(tags: str, key: str) -> str | None:
    """The value of `key:"..."` in a Go struct tag."""
    marker = f'{key}:"'
    start = tags.find(marker)
    if start < 0 or (start and tags[start - 1] != " "):
        return None
    start += len(marker)
    return tags[start:tags.index('"', start)]


#: apimachinery types that marshal themselves (their Go structs carry no protobuf tags): the
#: messages their hand-written generated.proto declares
_TIMESTAMP = {"1": ["seconds", "int64", "o"], "2": ["nanos", "int32", "o"]}
HAND_WRITTEN = {
    "k8s.io.apimachinery.pkg.apis.meta.v1.Time": _TIMESTAMP,
    "k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime": _TIMESTAMP,
    "k8s.io.apimachinery.pkg.api.resource.Quantity": {"1": ["string", "string", ""]},
    "k8s.io.apimachinery.pkg.api.resource.QuantityValue": {"1": ["string", "string", ""]},
}


def build_table(types: dict[int, GoType]) -> dict[str, dict[str, list]]:
    table: dict[str, dict[str, list]] = {}
    wrappers: dict[str, str] = {}

    def proto_type(addr: int) -> str:
        t = types[addr]
        if t.kind == STRUCT:
            return t.full
        if t.kind == SLICE and types[t.elem].kind == UINT8:
            return "bytes"
        if t.kind == SLICE and t.pkg:  # a named slice type: go-to-protobuf wraps it in a message
            wrappers[t.full] = proto_type(t.elem)
            return t.full
        if t.kind in SCALARS:
            return SCALARS[t.kind]
        raise GoTypeError(f"no proto type for Go type {t.name}")

    for t in types.values():
        if t.kind != STRUCT or not t.pkg.startswith(PACKAGES) or t.name.startswith("*"):
            continue
        entry = {}
        for fname, tags, embedded, typ in t.fields:
            proto = tag(tags, "protobuf")
            if not proto or proto.startswith("-"):
                continue
            parts = proto.split(",")
            number, label = parts[1], parts[2]
            proto_name = next((p[5:] for p in parts if p.startswith("name=")), fname[:1].lower() + fname[1:])
            json_tag = tag(tags, "json")
            json_tag = ("-" if json_tag is None else json_tag).split(",")
            json_name, omitempty = json_tag[0], "omitempty" in json_tag[1:]
            if json_name == "-":  # a field JSON leaves out or writes by hand (RawExtension.Raw)
                json_name = proto_name
            ft = types[typ]
            pointer = ft.kind == POINTER
            if pointer:
                ft = types[ft.elem]
            if not json_name and embedded:  # encoding/json inlines an embedded struct it names not
                json_name, flags, ftype = proto_name, "i", proto_type(typ)
            elif ft.kind == MAP:
                if types[ft.key].kind != 24:
                    raise GoTypeError(f"{t.full}.{json_name}: only string map keys are supported")
                flags, ftype = "m", proto_type(ft.elem)
            elif ft.kind == SLICE and types[ft.elem].kind != UINT8 and (label == "rep" or not ft.pkg):
                # an unnamed slice is repeated even where a hand-written tag says "opt"
                # (CapacityRequestPolicy.validValues); a named one tagged "opt" is a wrapper message
                flags, ftype = "r", proto_type(ft.elem)
            else:
                ftype = proto_type(typ if not pointer else types[typ].elem)
                flags = "p" if pointer else "o" if omitempty and ftype in SCALARS.values() else ""
            entry[number] = [json_name, ftype, flags]
        table[t.full] = entry
    for name, elem in wrappers.items():
        table.setdefault(name, {"1": ["items", elem, "r"]})
    return table | HAND_WRITTEN


def main() -> None:
    root = Path(__file__).resolve().parent.parent
    kubectl = Path(sys.argv[1]) if len(sys.argv) > 1 else root / ".venv/bin/kubectl"
    out = Path(sys.argv[2]) if len(sys.argv) > 2 else root / "nanokube/apiserver/protobuf_fields.json"
    table = build_table(all_types(Binary(kubectl.read_bytes())))
    lines = [f"{json.dumps(k)}:{json.dumps(v, separators=(',', ':'))}" for k, v in sorted(table.items())]
    out.write_text("{\n" + ",\n".join(lines) + "\n}\n")
    print(f"{len(table)} messages -> {out}")


if __name__ == "__main__":
    main()
