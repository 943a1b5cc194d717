"""The config-file loader every component shares: repeated keys in the strict decoder's words."""

from __future__ import annotations

import pytest
import yaml

from nanokube.machinery import configfile
from nanokube.scheduler import config as scheduler_config

YAML_HEAD = "error converting YAML to JSON: yaml: unmarshal errors:\n"


def test_a_yaml_file_gets_one_error_listing_every_repeated_key_in_line_order():
    doc, strict = configfile.load("a: 1\nb:\n  x: 1\n  x: 2\na: 3\n")
    assert doc == {"a": 3, "b": {"x": 2}}  # (the lenient value: the later key wins)
    assert strict == [YAML_HEAD + '  line 4: key "x" already set in map\n  line 5: key "a" already set in map']
    assert configfile.strict_error(strict + ['unknown field "c"']) == (
        "strict decoding error: " + strict[0] + ', unknown field "c"')


def test_a_json_file_gets_one_duplicate_field_a_key_with_its_path_in_document_order():
    assert configfile.duplicates('{"a": 1, "b": [{"x": 1, "x": 2}], "a": 3}') == [
        'duplicate field "b[0].x"', 'duplicate field "a"']


@pytest.mark.parametrize("text, want", [
    ("1: a\n'1': b\n", []),  # an integer and a string key differ, as go-yaml decodes them
    ("true: a\nyes: b\n", ['  line 2: key true already set in map']),  # (YAML 1.1: both the bool true)
    ("a: &x {q: 1}\nb: *x\nc: *x\n", []),  # an alias is the same mapping, not a repeated key
    ("a: &x {q: 1, q: 2}\nb: *x\n", ['  line 1: key "q" already set in map']),  # walked once
    ("base: &b {k: 1}\nm:\n  <<: *b\n  <<: *b\n  k: 2\n", []),  # merge keys are not keys
    ("t: 2020-01-01\n", []),
])
def test_what_counts_as_a_repeated_key(text, want):
    got = configfile.duplicates(text)
    assert got == ([YAML_HEAD + "\n".join(want)] if want else [])


def test_a_file_that_does_not_parse_is_the_loaders_error_not_a_repeated_key():
    assert configfile.duplicates("a: [") == [] and configfile.duplicates("") == []
    with pytest.raises(yaml.YAMLError):
        configfile.load("a: [")
    assert configfile.load("t: 2020-01-01\n") == ({"t": "2020-01-01"}, [])  # a timestamp stays a string


def test_aliases_expand_within_a_bound_of_the_files_size():
    """A value reached through an alias counts each time (go-yaml's excessive aliasing): a file of a
    few hundred bytes that expands a billionfold, or an alias of the mapping it is in, is refused."""
    laughs = "".join(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}' if i else 'ha'] * 9)}]\n" for i in range(10))
    for text in (laughs, "a: &a {b: *a}\n"):
        with pytest.raises(yaml.YAMLError, match="^error converting YAML to JSON: yaml: document contains "
                                                 "excessive aliasing$"):
            configfile.load(text)
    doc, _ = configfile.load("base: &b {k: [1, 2]}\n" + "".join(f"u{i}: *b\n" for i in range(100)))
    assert doc["u99"] == {"k": [1, 2]}


def test_an_integer_past_what_int_takes_is_the_string_go_yaml_keeps():
    """fuzz62: 5001 digits made PyYAML's int() raise ValueError (Python's 4300-digit limit), which no
    loader expected; go-yaml's resolver keeps a number past float64 a string."""
    doc, _ = configfile.load("a: 1" + "0" * 5000 + "\nb: 0x10\nc: -1_000\n")
    assert doc == {"a": "1" + "0" * 5000, "b": 16, "c": -1000}


@pytest.mark.parametrize("text, want", [
    ("a: b\nc: d: e\n", "yaml: line 2: mapping values are not allowed in this context"),  # scanner: counted from 1
    ("a:\n  b: 1\n c: 2\n", "yaml: line 2: did not find expected key"),  # parser: go-yaml's count from 0
    ("a: [1, 2\n", "yaml: line 1: did not find expected ',' or ']'"),
    ('a: "x\n', "yaml: line 2: found unexpected end of stream"),
    ("a: b: c\n", "yaml: mapping values are not allowed in this context"),  # (line 0: no line)
    ("a: *nope\n", "yaml: unknown anchor 'nope' referenced"),
])
def test_a_syntax_error_is_go_yamls_one_line(text, want, tmp_path):
    """fuzzleft62: PyYAML's several lines (`while parsing a block mapping\\n  in "<unicode string>"...`)
    were each loader's error; go-yaml's is one line, `yaml: line N: <problem>`, its line counted as it counts."""
    with pytest.raises(yaml.YAMLError) as e:
        configfile.load(text)
    assert str(e.value) == "error converting YAML to JSON: " + want
    path = tmp_path / "sched.yaml"
    path.write_text(text)
    with pytest.raises(scheduler_config.ConfigError) as e:
        scheduler_config.load(path)
    assert str(e.value) == f"error converting YAML to JSON: {want}"


_ITEM = configfile.Struct("v1.Item", {"name": str, "weight": "int64", "timeout": configfile.DURATION})
_TOP = configfile.Struct("v1.Top", {"count": int, "rate": "float32", "items": [_ITEM], "gates": configfile.Map(bool),
                                    "raw": configfile.ANY, "plain": {"x": str}})


@pytest.mark.parametrize("doc, want", [
    # Go's UnmarshalTypeError: the innermost struct holding the field, the JSON names from the top
    # (no index, no map key), the Go type; a numeric field's error quotes the number
    ({"items": [{"name": 1}]}, "number into Go struct field Item.items.name of type string"),
    ({"items": [5]}, "number into Go struct field Top.items of type v1.Item"),
    ({"items": {}}, "object into Go struct field Top.items of type []v1.Item"),
    ({"count": 1.5}, "number 1.5 into Go struct field Top.count of type int32"),
    ({"count": 2 ** 31}, "number 2147483648 into Go struct field Top.count of type int32"),
    ({"rate": "x"}, "string into Go struct field Top.rate of type float32"),
    ({"gates": {"A": "yes"}}, "string into Go struct field Top.gates of type bool"),
    ({"gates": []}, "array into Go struct field Top.gates of type map[string]bool"),
    ({"plain": {"x": True}}, "bool into Go struct field Top.plain.x of type string"),  # (an unnamed struct: its holder's)
    ({"items": [{"timeout": 5}]}, "number into Go struct field Item.items.timeout of type string"),
    # the first wrong field in the document's order
    ({"rate": [], "count": "x"}, "array into Go struct field Top.rate of type float32"),
])
def test_a_type_error_is_worded_as_gos_decoder_words_it(doc, want):
    assert configfile.mistyped(doc, _TOP, "Top") == "json: cannot unmarshal " + want


def test_what_fits_a_field_and_what_a_duration_says():
    ok = {"count": 2.0, "rate": 1, "raw": [1, "a"], "gates": {"A": None}, "items": [None, {"weight": 2 ** 40}]}
    assert configfile.mistyped(ok, _TOP, "Top") is None
    assert configfile.zeroed(ok, _TOP) == {"count": 2, "rate": 1, "raw": [1, "a"], "gates": {"A": False},
                                           "items": [{}, {"weight": 2 ** 40}]}
    assert configfile.mistyped({"items": [{"timeout": "5x"}]}, _TOP, "Top") == 'time: unknown unit "x" in duration "5x"'


def test_decode_checks_kind_then_types_then_strict_errors_and_a_lenient_kind_drops_unknown_fields():
    kind = configfile.Kind(("x.io/v1", "x.io/v1beta1"), "Top", "pkg/x/scheme.go:1",
                           lambda v: configfile.Struct(f"{v}.Top", {"apiVersion": str, "kind": str, "items": [
                               configfile.Struct(f"{v}.Item", {"name": str})]}))
    head = "apiVersion: x.io/v1beta1\nkind: Top\n"
    for text, want in [
        ("kind: Top\n", "Object 'apiVersion' is missing in 'kind: Top'"),
        ("apiVersion: x.io/v2\nkind: Top\n", 'no kind "Top" is registered for version "x.io/v2" in scheme "pkg/x/scheme.go:1"'),
        (head + "items: 1\nfoo: 1\n", "json: cannot unmarshal number into Go struct field Top.items of type []v1beta1.Item"),
        (head + "items: [{nam: a}]\nfoo: 1\nfoo: 2\n", 'strict decoding error: error converting YAML to JSON: yaml: '
                                                      'unmarshal errors:\n  line 5: key "foo" already set in map, '
                                                      'unknown field "items[0].nam", unknown field "foo"'),
    ]:
        with pytest.raises(configfile.DecodeError) as e:
            configfile.decode(text, kind)
        assert str(e.value) == want
    doc, strict = configfile.decode(head + "items: [{nam: a, name: b}]\n", kind, lenient=True)
    assert (doc["items"], strict) == ([{"name": "b"}], ['unknown field "items[0].nam"'])
