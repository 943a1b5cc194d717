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
