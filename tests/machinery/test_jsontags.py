"""machinery/jsontags.py against upstream's json tags: kubectl 1.37's Go type data holds every
k8s.io/api struct with its tags (scripts/kubectl_go_types.py), so each hand entry for a reviewed
type (apiserver/omitempty.py's scope) is checked against what types.go says, and none is missing."""

import pytest

from nanokube import schema as k8s
from nanokube.apiserver import omitempty
from nanokube.machinery.jsontags import KEEP_EMPTY, NIL_POINTERS, NOT_OMITEMPTY, REQUIRED_OMITEMPTY, VALIDATED_EMPTY
from tests.machinery.test_go_types import KUBECTL, _script


@pytest.fixture(scope="module")
def tags() -> dict[str, dict[str, tuple[str, bool, int]]]:
    """{definition: {json name: (kind, omitempty, required)}} of every reviewed k8s.io/api struct,
    kind: "value" (a non-pointer scalar), "pointer", "list" (slice, []byte included), "map" or "struct"."""
    script = _script()
    types = script.all_types(script.Binary(KUBECTL.read_bytes()))
    defs, scope, out = k8s.definitions(), omitempty._scope(), {}
    for t in types.values():
        name = "io.k8s." + t.full.removeprefix("k8s.io.")
        if t.kind != script.STRUCT or t.name.startswith("*") or name not in scope:
            continue
        required = set(defs[name].get("required") or ())
        fields = {}
        for _fname, struct_tag, _embedded, typ in t.fields:
            json_tag = script.tag(struct_tag, "json")
            if not json_tag or json_tag.startswith(("-", ",")):
                continue
            json_name, *options = json_tag.split(",")
            go_kind = types[typ].kind
            kind = "value" if go_kind in script.SCALARS else {
                script.POINTER: "pointer", script.SLICE: "list", script.MAP: "map"}.get(go_kind, "struct")
            fields[json_name] = (kind, "omitempty" in options, json_name in required)
        out[name] = fields
    return out


def _derived(tags, kinds) -> dict[str, frozenset[str]]:
    out = {}
    for name, fields in tags.items():
        found = {f for f, (kind, omit, required) in fields.items() if kind in kinds and not omit and not required}
        if found:
            out[name] = frozenset(found)
    return out


def _of_api(table: dict) -> dict:
    return {k: v for k, v in table.items() if k.startswith("io.k8s.api.") and k in omitempty._scope()}


def test_every_reviewed_k8s_api_type_is_in_kubectls_types(tags):
    assert {n for n in omitempty._scope() if n.startswith("io.k8s.api.")} <= tags.keys()


def test_not_omitempty_lists_exactly_the_optional_value_scalars_tagged_without_omitempty(tags):
    assert _of_api(NOT_OMITEMPTY) == _derived(tags, {"value"})


def test_keep_empty_lists_exactly_the_optional_lists_and_maps_tagged_without_omitempty(tags):
    assert _of_api(KEEP_EMPTY) == _derived(tags, {"list", "map"})


def test_required_omitempty_lists_exactly_the_required_lists_and_maps_tagged_omitempty(tags):
    found = {name: frozenset(f for f, (kind, omit, required) in fields.items()
                             if kind in ("list", "map") and omit and required) for name, fields in tags.items()}
    assert REQUIRED_OMITEMPTY == {name: fields for name, fields in found.items() if fields}


#: optional pointers tagged without omitempty that upstream's defaulting fills when nil
DEFAULTED = {("io.k8s.api.core.v1.GRPCAction", "service"),
             ("io.k8s.api.flowcontrol.v1.LimitedPriorityLevelConfiguration", "nominalConcurrencyShares"),
             ("io.k8s.api.networking.v1.IngressClassParametersReference", "scope")}


def test_nil_pointers_lists_exactly_the_optional_pointers_tagged_without_omitempty(tags):
    derived = {name: frozenset(f for f in fields if (name, f) not in DEFAULTED)
               for name, fields in _derived(tags, {"pointer"}).items()}
    assert _of_api(NIL_POINTERS) == {name: fields for name, fields in derived.items() if fields}


def test_validated_empty_lists_are_omitempty_lists(tags):
    for name, fields in VALIDATED_EMPTY.items():
        for f in fields:
            assert tags[name][f][:2] == ("list", True), (name, f)


def test_omitempty_value_scalars_are_the_tables(tags):
    """omitempty.fields (the decoder's and the field manager's "zero is unset") is every value
    scalar tagged omitempty, read from the generated protobuf table."""
    for name, fields in tags.items():
        if not name.startswith("io.k8s.api."):  # meta's Time, intstr: hand-written encodings
            continue
        scalars = {f for f, (kind, omit, _req) in fields.items() if kind == "value" and omit}
        assert omitempty.fields(name) == scalars, name


def test_the_structs_held_by_value_are_types_gos_and_none_is_omitzero():
    """omitempty.structs (a Node's spec, its status's nodeInfo, a preferred scheduling term's
    preference): every field of a reviewed struct, optional or required, whose Go type is a struct
    held by value, bar the types that encode themselves (Time, IntOrString, RawExtension; a
    Quantity is one, written "0"); encoding/json writes each whatever its omitempty, as none is
    tagged omitzero."""
    script = _script()
    types = script.all_types(script.Binary(KUBECTL.read_bytes()))
    scope = omitempty._scope()
    for t in types.values():
        name = "io.k8s." + t.full.removeprefix("k8s.io.")
        if t.kind != script.STRUCT or t.name.startswith("*") or name not in scope:
            continue
        found = set()
        for _fname, struct_tag, _embedded, typ in t.fields:
            json_name, *options = (script.tag(struct_tag, "json") or "-").split(",")
            ft = types[typ]
            if ft.kind == script.STRUCT and json_name not in ("", "-") and ft.full not in omitempty._OWN_JSON:
                assert "omitzero" not in options, (name, json_name)
                found.add(json_name)
        assert omitempty.structs(name) == found, name
