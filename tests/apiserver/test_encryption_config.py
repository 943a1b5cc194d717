"""--encryption-provider-config's EncryptionConfiguration: decoding, defaulting and validation in
kube-apiserver's words, and which transformer each resource gets."""

from __future__ import annotations

import base64

import pytest
import yaml

from nanokube.apiserver.encryption import config
from nanokube.apiserver.encryption.config import ConfigError
from nanokube.apiserver.encryption.value import IDENTITY

KEY32 = base64.b64encode(b"k" * 32).decode()


def write(tmp_path, resources: list, **doc) -> str:
    path = tmp_path / "enc.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "apiserver.config.k8s.io/v1", "kind": "EncryptionConfiguration",
                                    "resources": resources, **doc}))
    return str(path)


def aescbc(name: str = "key1", secret: str = KEY32) -> dict:
    return {"aescbc": {"keys": [{"name": name, "secret": secret}]}}


def error(tmp_path, resources: list, **doc) -> str:
    with pytest.raises(ConfigError) as e:
        config.load(write(tmp_path, resources, **doc))
    return str(e.value)


def test_a_file_that_is_missing_or_empty(tmp_path):
    with pytest.raises(ConfigError, match=r'^error while parsing file: error while loading file: error reading '
                                          r'encryption provider configuration file ".*/nope.yaml": open .*/nope.yaml: '
                                          r'no such file or directory$'):
        config.load(str(tmp_path / "nope.yaml"))
    (tmp_path / "empty.yaml").write_text("")
    with pytest.raises(ConfigError, match=r'^error while parsing file: error while loading file: encryption provider '
                                          r'configuration file ".*/empty.yaml" is empty$'):
        config.load(str(tmp_path / "empty.yaml"))


def test_the_kind_and_version_are_those_of_the_api(tmp_path):
    """What the decoder refuses names the file (loadConfig's wrapper); what validation refuses does not."""
    decoding = f'error while parsing file: error decoding encryption provider configuration file "{tmp_path}/enc.yaml": '
    assert error(tmp_path, [], apiVersion="apiserver.config.k8s.io/v2") == decoding + (
        'no kind "EncryptionConfiguration" is registered for version "apiserver.config.k8s.io/v2" in scheme '
        '"pkg/runtime/scheme.go:100"')
    # (the file's own text, as the serializer quotes the data it was given)
    assert error(tmp_path, [], kind="").startswith(decoding + "Object 'Kind' is missing in 'apiVersion: apiserver.config")


def test_resources_and_providers_are_required(tmp_path):
    assert error(tmp_path, []) == "error while parsing file: resources: Required value: at least one resources is required"
    assert error(tmp_path, [{"resources": [], "providers": []}]) == (
        "error while parsing file: [resources[0].resources: Required value: at least one resources[0].resources is "
        "required, resources[0].providers: Required value: at least one resources[0].providers is required]")


def test_resource_names_as_upstream_validates_them(tmp_path):
    msg = error(tmp_path, [{"resources": ["Secrets", "serviceipallocations", "*.events.k8s.io", "deployments.extensions",
                                          "configmaps.*"], "providers": [{"identity": {}}]}])
    assert msg == (
        'error while parsing file: [resources[0].resources[0]: Invalid value: "Secrets": resource name should not '
        'contain capital letters, resources[0].resources[1]: Invalid value: "serviceipallocations": resources which '
        'do not have REST API/s cannot be encrypted, resources[0].resources[2]: Invalid value: "*.events.k8s.io": '
        '\'*.events.k8s.io\' objects are stored using the \'events\' API group in etcd. Use \'events\' instead in the '
        'config file, resources[0].resources[3]: Invalid value: "deployments.extensions": \'extensions\' group has '
        'been removed and cannot be used for encryption, resources[0].resources[4]: Invalid value: "configmaps.*": '
        'encrypting the same resource across groups is not supported]')
    assert error(tmp_path, [{"resources": ["*"], "providers": [{"identity": {}}]}]) == (
        'error while parsing file: resources[0].resources[0]: Invalid value: "*": use \'*.\' to encrypt all the '
        'resources from core API group or *.* to encrypt all resources')


def test_overlapping_and_repeated_resources(tmp_path):
    assert error(tmp_path, [{"resources": ["secrets", "*."], "providers": [{"identity": {}}]}]) == (
        'error while parsing file: resources[0].resources: Invalid value: ["secrets","*."]: using overlapping '
        "resources such as 'secrets' and '*.' in the same resource list is not allowed as they will be masked")
    assert error(tmp_path, [{"resources": ["secrets", "secrets"], "providers": [{"identity": {}}]}]) == (
        'error while parsing file: resources[0].resources: Invalid value: ["secrets","secrets"]: the same resource '
        "cannot be specified multiple times")


def test_keys_must_be_base64_of_a_usable_length(tmp_path):
    msg = error(tmp_path, [{"resources": ["secrets"], "providers": [
        aescbc(secret="not base64!"), {"aesgcm": {"keys": [{"name": "k", "secret": base64.b64encode(b"x" * 8).decode()}]}},
        {"secretbox": {"keys": [{"name": "", "secret": base64.b64encode(b"x" * 16).decode()}]}},
        {"aescbc": {"keys": []}}]}])
    assert msg == (
        'error while parsing file: [resources[0].providers[0].aescbc.keys[0].secret: Invalid value: "REDACTED": '
        'secrets must be base64 encoded, resources[0].providers[1].aesgcm.keys[0].secret: Invalid value: '
        '"REDACTED": secret is not of the expected length, got 8, expected one of [16 24 32], '
        'resources[0].providers[2].secretbox.keys[0].name: Required value: name is a mandatory field for a key, '
        'resources[0].providers[2].secretbox.keys[0].secret: Invalid value: "REDACTED": secret is not of the '
        'expected length, got 16, expected one of [32], resources[0].providers[3].aescbc.keys: Required value: at '
        'least one keys is required]')


def test_one_provider_per_element(tmp_path):
    msg = error(tmp_path, [{"resources": ["secrets"], "providers": [{**aescbc(), "identity": {}}, {}]}])
    assert "resources[0].providers[0]: Invalid value: " in msg
    assert ("more than one provider specified in a single element, should split into different list elements" in msg)
    assert KEY32 not in msg and '"secret":"REDACTED"' in msg
    assert ("resources[0].providers[1]: Invalid value: {\"aesgcm\":null,\"aescbc\":null,\"secretbox\":null,"
            "\"identity\":null,\"kms\":null}: provider does not contain any of the expected providers: KMS, AESGCM, "
            "AESCBC, Secretbox, Identity") in msg


def test_kms_fields(tmp_path):
    msg = error(tmp_path, [{"resources": ["secrets"], "providers": [
        {"kms": {"apiVersion": "v2", "name": "a:b", "endpoint": "tcp://x", "timeout": "-1s", "cachesize": 10}},
        {"kms": {"apiVersion": "v3", "name": "c", "endpoint": "unix:///s"}},
        {"kms": {"apiVersion": "v2", "name": "c", "endpoint": ""}}]}])
    assert msg == (
        'error while parsing file: [resources[0].providers[0].kms.name: Invalid value: "a:b": invalid KMS provider '
        "name a:b, must not contain ':', resources[0].providers[0].kms.timeout: Invalid value: -1s: timeout should be "
        'a positive value, resources[0].providers[0].kms.endpoint: Invalid value: "tcp://x": unsupported scheme "tcp" '
        'for KMS provider, only unix is supported, resources[0].providers[0].kms.cachesize: Invalid value: 10: '
        'cachesize is not supported in v2, resources[0].providers[1].kms.apiVersion: Invalid value: "v3": unsupported '
        'apiVersion apiVersion for KMS provider, only v1 and v2 are supported, resources[0].providers[2].kms.name: '
        'Invalid value: "c": duplicate KMS provider name c, names must be unique, resources[0].providers[2].kms.endpoint: '
        'Invalid value: "": endpoint is a mandatory field for a kms]')


def test_kms_v1_is_refused_as_its_gate_is_off(tmp_path):
    """KMSv1 is deprecated and off by default: a configuration naming it (apiVersion defaults to v1) does not load."""
    assert error(tmp_path, [{"resources": ["secrets"], "providers": [{"kms": {"name": "old", "endpoint": "unix:///s"}}]}]) \
        == "error while building transformers: " + config.KMSV1_DISABLED


def test_each_resource_gets_its_own_then_its_groups_then_every_resources_transformer(tmp_path):
    res = config.load(write(tmp_path, [
        {"resources": ["secrets", "deployments.apps"], "providers": [aescbc("a")]},
        {"resources": ["*.apps"], "providers": [aescbc("b")]},
        {"resources": ["*."], "providers": [aescbc("c")]},
        {"resources": ["*.*"], "providers": [aescbc("d")]}]))

    def key_names(segment):
        return [k.prefix for p in res.for_resource(segment).items for k in p.transformer.items]

    assert key_names("secrets") == [b"a:"]
    assert key_names("deployments.apps") == [b"a:"]
    assert key_names("statefulsets.apps") == [b"b:"]
    assert key_names("configmaps") == [b"c:"]
    assert key_names("roles.rbac.authorization.k8s.io") == [b"d:"]
    only_secrets = config.load(write(tmp_path, [{"resources": ["secrets"], "providers": [aescbc()]}]))
    assert only_secrets.for_resource("configmaps") is IDENTITY


def test_a_json_file_repeating_a_key_is_refused_with_its_path(tmp_path):
    (tmp_path / "enc.json").write_text('{"apiVersion": "apiserver.config.k8s.io/v1", "kind": "EncryptionConfiguration", '
                                       '"resources": [{"resources": ["secrets"], "resources": ["configmaps"], '
                                       '"providers": [{"identity": {}}]}]}')
    with pytest.raises(ConfigError) as e:
        config.load(str(tmp_path / "enc.json"))
    assert str(e.value) == (f'error while parsing file: error decoding encryption provider configuration file '
                            f'"{tmp_path}/enc.json": strict decoding error: duplicate field "resources[0].resources"')


def test_kms_endpoint_as_go_url_parse_reads_it(tmp_path):
    """Upstream's validation refuses what url.Parse refuses (a NUL byte, a bad escape) and any scheme but
    unix (lower-cased); an empty or overlong socket path is left to the dial, as upstream does."""
    def kms(endpoint: str) -> list:
        return [{"resources": ["secrets"], "providers": [{"kms": {"apiVersion": "v2", "name": "p", "endpoint": endpoint}}]}]

    assert error(tmp_path, kms("unix:///run/a\x00b")) == (
        'error while parsing file: resources[0].providers[0].kms.endpoint: Invalid value: "unix:///run/a\\x00b": '
        'invalid endpoint for kms provider, error: parse "unix:///run/a\\x00b": net/url: invalid control character in URL')
    assert error(tmp_path, kms("unix:///run/%zz")).endswith(
        'error: parse "unix:///run/%zz": invalid URL escape "%zz"')
    assert error(tmp_path, kms("://x")).endswith('error: parse "://x": missing protocol scheme')
    assert error(tmp_path, kms("unix://h:x/s")).endswith('error: parse "unix://h:x/s": invalid port ":x" after host')
    assert error(tmp_path, kms("unix://[::1/s")).endswith('error: parse "unix://[::1/s": missing \']\' in host')
    assert error(tmp_path, kms("run/kms.sock")).endswith('unsupported scheme "" for KMS provider, only unix is supported')
    for accepted in ("unix://", "UNIX:///run/kms.sock", "unix:///" + "a" * 120, "unix:%zz", "unix://[::1]:5/s"):
        assert config.parse(open(write(tmp_path, kms(accepted)), "rb").read(), "enc.yaml")


def test_kms_timeout_is_decoded_as_a_go_duration(tmp_path):
    """A timeout ParseDuration refuses (overflow included) fails the decoder, not validation; null is the default."""
    def kms(timeout) -> list:
        return [{"resources": ["secrets"], "providers": [{"kms": {"apiVersion": "v2", "name": "p",
                                                                  "endpoint": "unix:///s", "timeout": timeout}}]}]

    path = write(tmp_path, kms("99999999999h"))
    assert error(tmp_path, kms("99999999999h")) == (
        f'error while parsing file: error decoding encryption provider configuration file "{path}": '
        'time: invalid duration "99999999999h"')
    assert error(tmp_path, kms("5")).endswith('time: missing unit in duration "5"')
    assert config.parse(open(write(tmp_path, kms(None)), "rb").read(), "enc.yaml")["resources"][0]["providers"][0][
        "kms"]["timeout"] == "3s"


def test_a_yaml_syntax_error_is_go_yamls_one_line(tmp_path):
    path = tmp_path / "enc.yaml"
    path.write_text("kind: EncryptionConfiguration\nresources: a: b\n")
    with pytest.raises(ConfigError) as e:
        config.load(str(path))
    assert str(e.value) == (f'error while parsing file: error decoding encryption provider configuration file "{path}": '
                            "error converting YAML to JSON: yaml: line 2: mapping values are not allowed in this context")
