"""An EncryptionConfiguration whose field holds a value of another JSON type (`resources: 5`,
`keys: [5]`, a key's `secret: 5`, `identity: 5`, a KMS `cachesize: x`) or that nests past the
decoder's depth is refused by the decoder, in Go's words: `up` stops with its line. Before, such
a file was a Python traceback out of `up` (TypeError, AttributeError, RecursionError)."""

from __future__ import annotations

import pytest

from nanokube.cli import main

HEAD = "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\n"
ONE = "resources:\n- resources: [secrets]\n  providers: [%s]\n"


@pytest.mark.parametrize("config, line", [
    (HEAD + "resources: 5\n", "Go struct field EncryptionConfiguration.resources of type []v1.ResourceConfiguration"),
    (HEAD + "resources: [5]\n", "Go struct field EncryptionConfiguration.resources of type v1.ResourceConfiguration"),
    (HEAD + "resources:\n- resources: [5]\n  providers: [identity: {}]\n",
     "Go struct field ResourceConfiguration.resources.resources of type string"),
    (HEAD + ONE % "aescbc: {keys: [5]}", "AESConfiguration.resources.providers.aescbc.keys of type v1.Key"),
    (HEAD + ONE % "aesgcm: {keys: [{name: k, secret: 5}]}",
     "Key.resources.providers.aesgcm.keys.secret of type string"),
    (HEAD + ONE % "identity: 5", "ProviderConfiguration.resources.providers.identity of type v1.IdentityConfiguration"),
    (HEAD + ONE % "kms: {apiVersion: v2, name: [a], endpoint: 'unix:///x.sock'}",
     "KMSConfiguration.resources.providers.kms.name of type string"),
    (HEAD + ONE % "kms: {apiVersion: v2, name: a, endpoint: 'unix:///x.sock', cachesize: x}",
     "KMSConfiguration.resources.providers.kms.cachesize of type int32"),
    # a metav1.Duration decodes a string, then parses it
    (HEAD + ONE % "kms: {apiVersion: v2, name: a, endpoint: 'unix:///x.sock', timeout: 3}",
     "KMSConfiguration.resources.providers.kms.timeout of type string"),
    (HEAD + ONE % "kms: {apiVersion: v2, name: a, endpoint: 'unix:///x.sock', timeout: 3x}",
     'time: unknown unit "x" in duration "3x"'),
    (HEAD + "x: " + "[" * 3000 + "]" * 3000 + "\n", "exceeded maximum nesting depth"),
])
def test_up_stops_on_a_value_of_the_wrong_type_without_a_traceback(tmp_path, capsys, config, line):
    path = tmp_path / "enc.yaml"
    path.write_text(config)
    assert main(["up", "--data-dir", str(tmp_path / "d"), "--encryption-provider-config", str(path)]) != 0
    err = capsys.readouterr().err
    assert line in err and "Traceback" not in err, err


@pytest.mark.parametrize("config, said", [
    (HEAD + ONE % "identity: {}" + "kind: EncryptionConfiguration\n",
     'strict decoding error: error converting YAML to JSON: yaml: unmarshal errors:\n'
     '  line 6: key "kind" already set in map'),
    (HEAD + ONE % "aescbc: {keys: [{name: k, secret: c2VjcmV0IGlzIHNlY3VyZQ==, name: j}]}, {identiy: {}}",
     'strict decoding error: error converting YAML to JSON: yaml: unmarshal errors:\n'
     '  line 5: key "name" already set in map, unknown field "resources[0].providers[1].identiy"'),
])
def test_up_stops_on_a_repeated_key_or_an_unknown_field_as_the_strict_decoder_words_it(tmp_path, capsys, config, said):
    """The codec is strict (before, the later key won and a misspelled provider was an empty one)."""
    path = tmp_path / "enc.yaml"
    path.write_text(config)
    assert main(["up", "--data-dir", str(tmp_path / "d"), "--encryption-provider-config", str(path)]) != 0
    err = capsys.readouterr().err
    head = f'nanokube: --encryption-provider-config: error while parsing file: error decoding encryption provider ' \
           f'configuration file "{path}": '
    assert err == f"{head}{said}\n", err
