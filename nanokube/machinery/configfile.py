"""Configuration files (--config, --authentication-config, --encryption-provider-config, kubeconfigs,
...) read as upstream's component configs are: one loader for every file kind (`Kind`: its versions,
kind, scheme and Go structs), so that each reports what apimachinery's codec reports, not each on its
own: a YAML syntax error in go-yaml's words, a missing or unregistered version/kind in the serializer's,
a value of the wrong type as encoding/json's UnmarshalTypeError (Go's struct, field and type names),
then the keys the file repeats and the fields its kind lacks as one strict decoding error.

The strict codec runs sigs.k8s.io/yaml's YAMLToJSONStrict over a YAML file, whose go-yaml error lists
every repeated key (`line N: key "x" already set in map`), and kjson's strict unmarshal over a JSON
file (`duplicate field "a.b"`). Unknown fields are each kind's own (its schema), joined after these
into one `strict decoding error: e1, e2`; a kind whose upstream decodes leniently (the audit policy,
kube-proxy's v1alpha1, kubeconfigs) gets them back instead, to log or ignore.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable
from typing import Any

import yaml

from nanokube.machinery import goduration, gofmt, gojson, quantity

_Base: Any = yaml.CSafeLoader if hasattr(yaml, "CSafeLoader") else yaml.SafeLoader


class _Loader(_Base):  # type: ignore[misc,valid-type]
    """A YAML 1.1 safe loader that keeps timestamps as strings, as sigs.k8s.io/yaml's conversion to JSON does."""


_Loader.yaml_implicit_resolvers = {
    ch: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for ch, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def go_int(loader: Any, node: yaml.ScalarNode) -> Any:
    """An integer scalar as go-yaml resolves it: one of more digits than Python's int() takes (4300)
    is far past float64 too, so go-yaml keeps it the string it is (and the decoder refuses that
    where a number belongs), where PyYAML raised ValueError."""
    try:
        return loader.construct_yaml_int(node)
    except ValueError:
        return loader.construct_scalar(node)


_Loader.add_constructor("tag:yaml.org,2002:int", go_int)

#: the strict codec's prefix for its joined errors
STRICT = "strict decoding error: "
#: the values a document may hold, each alias expanded: this many per byte of it (and at least
#: ALIAS_FLOOR), as a request body's YAML is bounded (apiserver.serializer)
ALIAS_RATIO, ALIAS_FLOOR = 10, 100_000
#: what go-yaml (under sigs.k8s.io/yaml's conversion) says of a document past that
EXCESSIVE_ALIASING = "error converting YAML to JSON: yaml: document contains excessive aliasing"


_CONVERTING = "error converting YAML to JSON: "


def load(text: str | bytes) -> tuple[Any, list[str]]:
    """A file's document (None when empty) and what the strict decoder says of the keys it
    repeats ([] when none); yaml.YAMLError where it does not parse, or where its aliases expand
    past the bound (a "billion laughs" file would hold each reader walking it)."""
    try:
        doc = yaml.load(text, Loader=_Loader)
    except yaml.MarkedYAMLError as e:
        raise yaml.YAMLError(f"{_CONVERTING}{go_yaml_error(e, text)}") from None
    if ("*" if isinstance(text, str) else b"*") in text:  # (no alias without one)
        _bound_aliases(doc, max(ALIAS_FLOOR, ALIAS_RATIO * len(text)))
    return doc, duplicates(text)


_ALIAS = re.compile(r"\*([^\s,\[\]{}]+)")


def go_yaml_error(e: yaml.YAMLError, text: str | bytes) -> str:
    """go-yaml's (v2, under sigs.k8s.io/yaml) one line for a syntax error, `yaml: line N: <problem>`,
    where PyYAML writes several: libyaml's problem is go-yaml's, and its line is the problem's
    (counted from 1 for the scanner's, from 0 for the parser's, as go-yaml counts it), else the
    context's, none when that is 0. An alias to no anchor in `text` is go-yaml's own words."""
    problem = getattr(e, "problem", None)
    if isinstance(e, yaml.composer.ComposerError) and e.problem_mark and (problem or "").startswith("found undefined alias"):
        at = text[e.problem_mark.index:] if isinstance(text, str) else text.decode(errors="replace")[e.problem_mark.index:]
        name = _ALIAS.match(at)
        if name:
            return f"yaml: unknown anchor '{name.group(1)}' referenced"
    if not isinstance(e, (yaml.scanner.ScannerError, yaml.parser.ParserError)) or not problem:
        return str(e)
    problem_line = e.problem_mark.line if e.problem_mark else 0
    context_line = e.context_mark.line if e.context_mark else 0
    if problem_line:
        line = problem_line + isinstance(e, yaml.scanner.ScannerError)
    else:
        line = context_line
    return f"yaml: line {line}: {problem}" if line else f"yaml: {problem}"


def _bound_aliases(doc: Any, budget: int) -> None:
    """yaml.YAMLError where `doc` holds more than `budget` values, counting an aliased value (one
    object the loader shares) each time it is reached, and a recursive alias without end."""
    stack = [doc]
    while stack:
        v = stack.pop()
        budget -= 1
        if budget < 0:
            raise yaml.YAMLError(EXCESSIVE_ALIASING)
        if isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)


def duplicates(text: str | bytes) -> list[str]:
    """The strict decoder's errors for a file's repeated keys: one go-yaml error listing every
    repeated key of a YAML file, one `duplicate field "path"` a key of a JSON file."""
    loader = _Loader(text)
    try:
        root = loader.get_single_node()
        found = _repeated(loader, root) if root is not None else []
    except (yaml.YAMLError, ValueError):  # (it does not parse: its loading reports that)
        return []
    finally:
        loader.dispose()
    if not found:
        return []
    head = text.lstrip()[:1]
    if head in ("{", b"{"):
        return [f"duplicate field {gofmt.quote(path)}" for _, _, path in found]
    lines = "\n".join(f"  line {line}: key {key} already set in map" for line, key, _ in found)
    return [f"error converting YAML to JSON: yaml: unmarshal errors:\n{lines}"]


def strict_error(errors: list[str]) -> str:
    """The strict codec's one error for all it found."""
    return STRICT + ", ".join(errors)


def _repeated(loader: Any, root: yaml.Node) -> list[tuple[int, str, str]]:
    """(line, key as go-yaml's %#v writes it, JSON path) of every key its mapping already had, in
    document order; an alias is walked once."""
    out: list[tuple[int, int, str, str]] = []
    seen_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, str]] = [(root, "")]
    while stack:
        node, path = stack.pop()
        if id(node) in seen_nodes:
            continue
        seen_nodes.add(id(node))
        children: list[tuple[yaml.Node, str]] = []
        if isinstance(node, yaml.MappingNode):
            keys: set = set()
            for key_node, value in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node, yaml.ScalarNode):
                    continue
                key = loader.construct_object(key_node, deep=True)
                child = f"{path}.{key}" if path else str(key)
                if (type(key), key) in keys:
                    shown = gofmt.quote(key) if isinstance(key, str) else str(key).lower() if isinstance(key, bool) \
                        else str(key)
                    out.append((key_node.start_mark.line + 1, key_node.start_mark.column, shown, child))
                keys.add((type(key), key))
                children.append((value, child))
        elif isinstance(node, yaml.SequenceNode):
            children = [(item, f"{path}[{i}]") for i, item in enumerate(node.value)]
        stack.extend(reversed(children))
    out.sort(key=lambda f: f[:2])
    return [(line, shown, path) for line, _, shown, path in out]


# A file kind's schema, for the checks below: a Struct (a dict subclass naming its Go type) an object
# of those fields, a plain dict an object of the enclosing struct's, Map(s) a map of string keys to
# values of schema s, a list of one schema a list of such values, ANY any value (a RawExtension, an
# interface{}), DURATION a metav1.Duration (a string time.ParseDuration reads), QUANTITY a
# resource.Quantity (a string or number ParseQuantity reads), and a Go scalar type:
# str (string), bool, int (int32) or a name of Go's ("int64", "float32", "float64", or a named string
# type such as "v1.ScoringStrategyType").


class Struct(dict):
    """A Go struct's fields by JSON name, with the struct's Go type (`v1.KubeSchedulerProfile`):
    Go's decoder names the innermost struct in a type error, and the type in `of type ...`."""

    __slots__ = ("go",)

    def __init__(self, go: str, fields: dict) -> None:
        super().__init__(fields)
        self.go = go


class Map:
    """A Go map of string keys (map[string]bool): its keys are not fields, its values are checked."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


#: a value the decoder keeps as it is (runtime.RawExtension, interface{}): any JSON type fits
ANY = Map(None)
#: a metav1.Duration: it decodes itself, a JSON string into a string (so a number is a type error "of
#: type string"), then parses it, its error (`time: invalid duration "x"`) ending the decoding
DURATION = "metav1.Duration"
#: a resource.Quantity: it decodes itself from any JSON value but null, parsing its text (a string's
#: content, a number's digits), its error (`quantities must match ...`) ending the decoding
QUANTITY = "resource.Quantity"
_INTS = {int: 32, "int32": 32, "int64": 64}
_FLOATS = ("float32", "float64")


def _number(schema: Any) -> bool:
    """Whether the schema is a Go number type (whose type errors quote the number)."""
    return isinstance(schema, (type, str)) and (schema in _INTS or schema in _FLOATS)


def unknown_fields(value: Any, schema: Any, path: str = "") -> list[str]:
    """The paths of the fields `value` holds that `schema` does not name, as the strict decoder
    reports them (`jwt[0].issuer.urll`)."""
    out: list[str] = []
    if isinstance(schema, dict) and isinstance(value, dict):
        for k, v in value.items():
            p = f"{path}.{k}" if path else str(k)
            if k not in schema:
                out.append(p)
            elif isinstance(schema[k], (dict, list, Map)):
                out += unknown_fields(v, schema[k], p)
    elif isinstance(schema, list) and isinstance(value, list):
        for i, v in enumerate(value):
            out += unknown_fields(v, schema[0], f"{path}[{i}]")
    elif isinstance(schema, Map) and schema is not ANY and isinstance(value, dict):
        for k, v in value.items():
            out += unknown_fields(v, schema.value, f"{path}[{k}]")
    return out


def json_type(value: Any) -> str:
    """How encoding/json names a value's type in an UnmarshalTypeError."""
    return ("object" if isinstance(value, dict) else "array" if isinstance(value, list) else
            "bool" if isinstance(value, bool) else "number" if isinstance(value, (int, float)) else "string")


def kind_error(doc: Any, text: str, api_version: str | tuple[str, ...], kind: str, scheme: str) -> str | None:
    """The decoder's error for a file that is not an object of one of `api_version`/`kind` (the
    version and kind read first, as the serializer's SimpleMetaFactory does, then looked up in
    `scheme`), or None; an empty document (null) decodes as an empty object, whose kind is missing."""
    if doc is not None and not isinstance(doc, dict):
        return ("couldn't get version/kind; json parse error: json: cannot unmarshal "
                f"{json_type(doc)} into Go value of type struct {{ APIVersion string "
                '"json:\\"apiVersion,omitempty\\""; Kind string "json:\\"kind,omitempty\\"" }')
    got_version, got_kind = (doc or {}).get("apiVersion"), (doc or {}).get("kind")
    for name, got in (("apiVersion", got_version), ("kind", got_kind)):
        if got is not None and not isinstance(got, str):  # (SimpleMetaFactory's own struct refuses it)
            return (f"couldn't get version/kind; json parse error: json: cannot unmarshal {json_type(got)} into Go "
                    f"struct field .{name} of type string")
    if not got_kind:
        return f"Object 'Kind' is missing in '{text.strip()}'"
    if not got_version:
        return f"Object 'apiVersion' is missing in '{text.strip()}'"
    versions = (api_version,) if isinstance(api_version, str) else api_version
    if got_version not in versions or got_kind != kind:
        return f'no kind "{got_kind}" is registered for version "{got_version}" in scheme "{scheme}"'
    return None


def _fits(value: Any, schema: Any) -> bool:
    """Whether `value` (not null) has the JSON type `schema` wants, in range; a YAML timestamp is a
    string, as YAMLToJSON writes it, and an integral float the integer YAMLToJSON writes."""
    if isinstance(schema, dict):
        return isinstance(value, dict)
    if isinstance(schema, list):
        return isinstance(value, list)
    if isinstance(schema, Map):
        return schema is ANY or isinstance(value, dict)
    if schema == QUANTITY:
        return True
    if schema in (bool, "bool"):
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if not _number(schema):
        return isinstance(value, (str, datetime.date))
    if schema in _INTS:
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        bits = _INTS[schema]
        return isinstance(value, int) and -(1 << (bits - 1)) <= value < 1 << (bits - 1)
    return isinstance(value, (int, float)) and abs(value) <= (3.4028234663852886e38 if schema == "float32"
                                                              else float("inf"))


def go_type(schema: Any) -> str:
    """The Go type a schema stands for, as an UnmarshalTypeError prints it."""
    if isinstance(schema, Struct):
        return schema.go
    if isinstance(schema, dict):
        return "object"
    if isinstance(schema, list):
        return "[]" + go_type(schema[0])
    if isinstance(schema, Map):
        return "interface {}" if schema is ANY else "map[string]" + go_type(schema.value)
    return {str: "string", bool: "bool", int: "int32", DURATION: "string"}.get(schema, schema)


def mistyped(value: Any, schema: Any, struct: str) -> str | None:
    """The decoder's error for the first field (in document order) whose value has another JSON type
    than the field's (`jwt: 5`, `audiences: [1]`, `burst: 1.5`), as Go's UnmarshalTypeError words it:
    the innermost struct holding the field (`struct` at the top), the JSON field names from the top,
    no index or key, and the Go type; null fits any field."""
    return _mistyped(value, schema, struct, ())


def _mistyped(value: Any, schema: Any, struct: str, fields: tuple[str, ...]) -> str | None:
    if not _fits(value, schema):
        what = gojson.value_kind(value, literal=_number(schema))
        if not fields:
            return f"json: cannot unmarshal {what} into Go value of type {go_type(schema)}"
        return f"json: cannot unmarshal {what} into Go struct field {struct}.{'.'.join(fields)} of type {go_type(schema)}"
    if schema == DURATION:
        try:
            goduration.parse(str(value))
        except ValueError as e:
            return str(e)
        return None
    if schema == QUANTITY:
        try:
            quantity.parse_quantity(str(value).strip() if isinstance(value, (str, int, float)) and
                                    not isinstance(value, bool) else "")
        except quantity.QuantityError as e:
            return str(e)
        return None
    if isinstance(schema, dict):
        inner = schema.go.rpartition(".")[2] if isinstance(schema, Struct) else struct
        items = (((*fields, k), v, schema[k], inner) for k, v in value.items() if k in schema)
    elif isinstance(schema, list):
        items = ((fields, v, schema[0], struct) for v in value)
    elif isinstance(schema, Map) and schema is not ANY:
        items = ((fields, v, schema.value, struct) for v in value.values())
    else:
        return None
    return next((wrong for f, v, s, st in items if v is not None and (wrong := _mistyped(v, s, st, f))), None)


def zeroed(value: Any, schema: Any) -> Any:
    """`value` (whose types `mistyped` found right) with its nulls as Go decodes them: a null field
    of the schema is left out, a null list item (or map value) is its type's zero value ({}, [], "",
    0, false), an integral float (`1.0`) the integer YAMLToJSON makes of it."""
    if isinstance(schema, dict) and isinstance(value, dict):
        return {k: zeroed(v, schema[k]) if k in schema else v for k, v in value.items() if v is not None or k not in schema}
    if isinstance(schema, list) and isinstance(value, list):
        return [_zero(schema[0]) if v is None else zeroed(v, schema[0]) for v in value]
    if isinstance(schema, Map) and schema is not ANY and isinstance(value, dict):
        return {k: _zero(schema.value) if v is None else zeroed(v, schema.value) for k, v in value.items()}
    if isinstance(value, float) and _number(schema) and schema in _INTS:
        return int(value)
    return value


def _zero(schema: Any) -> Any:
    if isinstance(schema, dict) or isinstance(schema, Map):
        return {}
    if isinstance(schema, list):
        return []
    if schema in (bool, "bool"):
        return False
    if _number(schema):
        return 0
    return ""


class DecodeError(ValueError):
    """What the strict decoder refuses in a file, in its words."""


class Kind:
    """A file kind as its component's scheme registers it: the versions it is decoded in, its kind,
    the scheme's name (as a kind error quotes it), and its schema: a Struct, or for a kind whose
    versions are Go packages of their own (`v1beta1.Issuer`), a function of the package's name
    (the version's last segment) that builds the Struct."""

    __slots__ = ("versions", "kind", "scheme", "_schema", "_built")

    def __init__(self, versions: str | tuple[str, ...], kind: str, scheme: str,
                 schema: Struct | Callable[[str], Struct]) -> None:
        self.versions = (versions,) if isinstance(versions, str) else versions
        self.kind, self.scheme, self._schema = kind, scheme, schema
        self._built: dict[str, Struct] = {}

    def schema(self, version: str) -> Struct:
        """The schema of the kind in `version` (one of its versions)."""
        if isinstance(self._schema, Struct):
            return self._schema
        package = version.rpartition("/")[2]
        if package not in self._built:
            self._built[package] = self._schema(package)
        return self._built[package]


def decode(text: str | bytes, kind: Kind, *, lenient: bool = False) -> tuple[dict, list[str]]:
    """A configuration file decoded as the strict codec of its scheme decodes an object of `kind`:
    its YAML (a syntax error), then decode_object's checks."""
    try:
        doc, repeated = load(text)
    except yaml.YAMLError as e:
        raise DecodeError(str(e)) from None
    return decode_object(doc, repeated, text if isinstance(text, str) else text.decode(errors="replace"), kind,
                         lenient=lenient)


def decode_object(doc: Any, repeated: list[str], text: str, kind: Kind, *, lenient: bool = False) -> tuple[dict, list[str]]:
    """A loaded document (`repeated`: load's errors for its repeated keys, `text`: the file) checked
    as the strict codec does: its version and kind, the types of its fields (the first wrong one ends
    the unmarshal), then its repeated keys and unknown fields, one strict decoding error. Returns the
    object, its nulls as Go zeroes them, and the strict errors: [] unless `lenient` (where upstream
    falls back to a lenient decoder and only logs them); DecodeError otherwise."""
    if wrong := kind_error(doc, text, kind.versions, kind.kind, kind.scheme):
        raise DecodeError(wrong)
    schema = kind.schema(doc["apiVersion"])
    if wrong := mistyped(doc, schema, schema.go.rpartition(".")[2]):
        raise DecodeError(wrong)
    strict = repeated + [f"unknown field {gofmt.quote(p)}" for p in unknown_fields(doc, schema)
                         if p not in ("apiVersion", "kind")]
    if strict and not lenient:
        raise DecodeError(strict_error(strict))
    return zeroed(known(doc, schema) if strict else doc, schema), strict


def known(value: Any, schema: Any) -> Any:
    """`value` without the fields `schema` does not name, as a lenient decoder drops them."""
    if isinstance(schema, dict) and isinstance(value, dict):
        return {k: known(v, schema[k]) for k, v in value.items() if k in schema}
    if isinstance(schema, list) and isinstance(value, list):
        return [known(v, schema[0]) for v in value]
    if isinstance(schema, Map) and schema is not ANY and isinstance(value, dict):
        return {k: known(v, schema.value) for k, v in value.items()}
    return value


# --- go-yaml's own strict decoder -------------------------------------------------------------
# A file that its program reads with gopkg.in/yaml.v2's UnmarshalStrict straight into Go structs
# (prometheus-adapter's config), not through apimachinery's codec: no version or kind, and what is
# wrong is go-yaml's list of `line N: ...` errors, the whole document walked, against the schema
# above (a Struct's `go` the type name go-yaml prints; any scalar fits a string, as go-yaml keeps
# its text; null fits anything).

_NULL, _BOOL = "tag:yaml.org,2002:null", "tag:yaml.org,2002:bool"


def unmarshal_strict(text: str | bytes, schema: Struct) -> Any:
    """The document `text` holds, decoded as yaml.UnmarshalStrict fills the Go type `schema` stands
    for: a scalar into a string is its text (`5` is "5"), null the zero value ("" for a string);
    DecodeError in go-yaml's words for a syntax error, or for every field the type lacks, field or
    key given twice and value of another kind (`yaml: unmarshal errors:` and one line each)."""
    try:  # (its syntax errors and alias bound; then the nodes, for their lines and text)
        load(text)
    except yaml.YAMLError as e:  # go-yaml's own words, without the JSON conversion's
        raise DecodeError(str(e).removeprefix(_CONVERTING)) from None
    loader = _Loader(text)
    try:
        root = loader.get_single_node()
        errors: list[str] = []
        doc = None if root is None else _unmarshal(loader, root, schema, errors)
    finally:
        loader.dispose()
    if errors:
        raise DecodeError("yaml: unmarshal errors:\n" + "\n".join(f"  {e}" for e in errors))
    return doc


def _unmarshal(loader: Any, node: yaml.Node, schema: Any, errors: list[str]) -> Any:
    """`node` decoded into `schema`'s type, each problem appended to `errors` (its value then None)."""
    if node.tag == _NULL:
        return "" if schema is str else None
    if schema is ANY:
        return loader.construct_object(node, deep=True)
    if isinstance(schema, (dict, Map)):
        if not isinstance(node, yaml.MappingNode):
            return errors.append(_type_error(node, schema))
        out: dict = {}
        for key_node, value in node.value:  # (a key is its text, as go-yaml decodes it into a string)
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
            line = key_node.start_mark.line + 1
            if isinstance(schema, Map):
                if key in out:
                    errors.append(f"line {line}: key {gofmt.quote(str(key))} already set in map")
                else:
                    out[key] = _unmarshal(loader, value, schema.value, errors)
            elif key not in schema:
                errors.append(f"line {line}: field {key} not found in type {go_type(schema)}")
            elif key in out:
                errors.append(f"line {line}: field {key} already set in type {go_type(schema)}")
            else:
                out[key] = _unmarshal(loader, value, schema[key], errors)
        return out
    if isinstance(schema, list):
        if not isinstance(node, yaml.SequenceNode):
            return errors.append(_type_error(node, schema))
        return [_unmarshal(loader, item, schema[0], errors) for item in node.value]
    if not isinstance(node, yaml.ScalarNode) or (schema in (bool, "bool") and node.tag != _BOOL):
        return errors.append(_type_error(node, schema))
    return node.value if schema is str else loader.construct_object(node)


def _type_error(node: yaml.Node, schema: Any) -> str:
    """go-yaml's `cannot unmarshal`: the node's short tag, a scalar's text (cut past 10 characters)."""
    shown = ""
    if isinstance(node, yaml.ScalarNode):
        shown = f" `{node.value[:7]}...`" if len(node.value) > 10 else f" `{node.value}`"
    tag = node.tag.replace("tag:yaml.org,2002:", "!!")
    return f"line {node.start_mark.line + 1}: cannot unmarshal {tag}{shown} into {go_type(schema)}"
