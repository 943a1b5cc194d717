"""An authentication or authorization config whose field holds a value of the wrong JSON type
(`jwt: 5`, `audiences: [1]`, `cacheAuthorizedRequests: 1`) is refused by the strict decoder as
upstream's is (json: cannot unmarshal ...): `up` stops with that one line, and a reload of such a
file is a failed reload after which the next good file is still applied. Before, such a file was a
Python traceback out of `up`, and the reload loop died on it, applying nothing more."""

from __future__ import annotations

import asyncio
import hashlib
import re

import pytest

from nanokube.cli import main
from tests.apiserver.auth.jwt_issuer import served_with

AUTHN = "apiVersion: apiserver.config.k8s.io/v1\nkind: AuthenticationConfiguration\n"
AUTHZ = "apiVersion: apiserver.config.k8s.io/v1\nkind: AuthorizationConfiguration\n"
ISSUER = "jwt:\n- issuer: {url: 'https://127.0.0.1:9', audiences: %s}\n  claimMappings: {username: {claim: sub, prefix: ''}}\n"


@pytest.mark.parametrize("flag, config, line", [
    ("--authentication-config", AUTHN + "jwt: 5\n",
     "cannot unmarshal number into Go struct field AuthenticationConfiguration.jwt of type []v1.JWTAuthenticator"),
    # a type error ends decoding: an unknown field or a repeated key is not reported beside it
    ("--authentication-config", AUTHN + "extra: 1\njwt: []\njwt: 5\n",
     "cannot unmarshal number into Go struct field AuthenticationConfiguration.jwt of type []v1.JWTAuthenticator"),
    ("--authentication-config", AUTHN + ISSUER % "[a, 1]",
     "cannot unmarshal number into Go struct field Issuer.jwt.issuer.audiences of type string"),
    ("--authentication-config", AUTHN + "anonymous: {enabled: true, conditions: [/livez]}\n",
     "cannot unmarshal string into Go struct field AnonymousAuthConfig.anonymous.conditions of type "
     "v1.AnonymousAuthCondition"),
    ("--authorization-config", AUTHZ + "authorizers:\n- {type: Webhook, name: w, webhook: {cacheAuthorizedRequests: 1}}\n",
     "cannot unmarshal number into Go struct field WebhookConfiguration.authorizers.webhook.cacheAuthorizedRequests of "
     "type bool"),
    # a metav1.Duration parses itself as it decodes (its error before validation's)
    ("--authorization-config", AUTHZ + "authorizers:\n- {type: Webhook, name: w, webhook: {timeout: 3x}}\n",
     'failed to load AuthorizationConfiguration from file: time: unknown unit "x" in duration "3x"'),
    # an older version's Go package names its types; a version the scheme lacks, or none, is the kind's error
    ("--authorization-config", AUTHZ.replace("/v1", "/v1beta1") + "authorizers: {type: RBAC}\n",
     "cannot unmarshal object into Go struct field AuthorizationConfiguration.authorizers of type "
     "[]v1beta1.AuthorizerConfiguration"),
    ("--authentication-config", AUTHN.replace("/v1", "/v2"),
     'no kind "AuthenticationConfiguration" is registered for version "apiserver.config.k8s.io/v2" in scheme '
     '"pkg/runtime/scheme.go:100"'),
    ("--authorization-config", "kind: AuthorizationConfiguration\n",
     "Object 'apiVersion' is missing in 'kind: AuthorizationConfiguration'"),
])
def test_up_stops_on_a_value_of_the_wrong_type_with_one_line(tmp_path, capsys, flag, config, line):
    err = up_refuses(tmp_path, capsys, flag, config)
    assert line in err and err.count("\n") == 1, err


def up_refuses(tmp_path, capsys, flag: str, config: str) -> str:
    """What `up` says, exiting 2, of a file given with `flag`; nothing started."""
    path = tmp_path / "config.yaml"
    path.write_text(config)
    assert main(["up", "--data-dir", str(tmp_path / "d"), flag, str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"nanokube: {flag}: ") and "Traceback" not in err, err
    assert not (tmp_path / "d").exists()  # nothing started
    return err


@pytest.mark.parametrize("flag, config, line", [
    ("--authentication-config", (AUTHN + "jwt: " + "[" * 3000 + "]" * 3000 + "\n").encode(), "exceeded maximum nesting depth"),
    ("--authorization-config", ("a: " + "{a: " * 3000 + "1" + "}" * 3000 + "\n").encode(), "exceeded maximum nesting depth"),
    ("--authentication-config", AUTHN.encode() + b"jwt: \xff\xfe\n", "yaml: invalid leading UTF-8 octet"),
    ("--authorization-config", AUTHZ.encode() + b"authorizers: \xff\n", "yaml: invalid leading UTF-8 octet"),
    ("--authorization-config", AUTHZ.encode() + b"x0: &a0 [a,a,a,a,a,a,a,a,a,a]\n" + b"".join(
        b"x%d: &a%d [%s]\n" % (i, i, b",".join([b"*a%d" % (i - 1)] * 10)) for i in range(1, 9)),
     "document contains excessive aliasing"),
])
def test_up_stops_on_a_file_too_deep_aliased_or_not_utf8_without_a_traceback(tmp_path, capsys, flag, config, line):
    """(Before, a nesting past Python's recursion limit or a byte that is not UTF-8 was a traceback out
    of `up`, and on reload ended the reload loop; aliases were expanded without a bound.)"""
    path = tmp_path / "config.yaml"
    path.write_bytes(config)
    assert main(["up", "--data-dir", str(tmp_path / "d"), flag, str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"nanokube: {flag}: ") and line in err and "Traceback" not in err, err


@pytest.mark.parametrize("flag, config, said", [
    ("--authentication-config", AUTHN + ISSUER % "[a]" + "kind: AuthenticationConfiguration\njwts: []\n",
     'strict decoding error: error converting YAML to JSON: yaml: unmarshal errors:\n'
     '  line 6: key "kind" already set in map, unknown field "jwts"'),
    ("--authorization-config", AUTHZ + "authorizers:\n- {type: RBAC, name: rbac, name: again}\n- {type: Node, name: node}\n"
     "authorizers: []\n",
     'failed to load AuthorizationConfiguration from file: strict decoding error: error converting YAML to JSON: '
     'yaml: unmarshal errors:\n  line 4: key "name" already set in map\n  line 6: key "authorizers" already set in map'),
    ("--authorization-config", '{"apiVersion": "apiserver.config.k8s.io/v1", "kind": "AuthorizationConfiguration", '
     '"authorizers": [{"type": "RBAC", "name": "rbac", "type": "Node"}]}',
     'failed to load AuthorizationConfiguration from file: strict decoding error: duplicate field "authorizers[0].type"'),
])
def test_up_stops_on_a_repeated_key_as_the_strict_decoder_words_it(tmp_path, capsys, flag, config, said):
    """(Before, the later value silently won.) A YAML file gets go-yaml's list, a JSON one kjson's paths."""
    err = up_refuses(tmp_path, capsys, flag, config)
    assert err.endswith(f": {said}\n"), err


@pytest.mark.parametrize("bad", [(AUTHN + "jwt: 5\n").encode(), b"[" * 3000 + b"]" * 3000, AUTHN.encode() + b"jwt: \xff\n",
                                 (AUTHN + ISSUER % "[a]" + "jwt: []\n").encode()])
async def test_a_reloaded_file_of_the_wrong_type_fails_and_the_next_good_one_still_applies(tmp_path, bad):
    def reloads(text: str, status: str) -> int:
        found = re.search(r'apiserver_authentication_config_controller_automatic_reloads_total\{apiserver_id_hash='
                          rf'"sha256:\w+",status="{status}"\}} (\d+)', text)
        return int(found.group(1)) if found else 0

    async def until(status: str) -> str:
        for _ in range(100):
            if reloads(text := server.metrics_text().decode(), status) == 1:
                return text
            await asyncio.sleep(0.1)
        return text

    config = tmp_path / "authn.yaml"
    async with served_with(tmp_path, AUTHN + ISSUER % "[a]") as (server, _):
        config.write_bytes(bad)
        assert reloads(await until("failure"), "failure") == 1
        config.write_text(good := AUTHN + ISSUER % "[b]")
        text = await until("success")
        assert reloads(text, "success") == 1
        applied = hashlib.sha256(good.encode()).hexdigest()
        assert re.search(r'apiserver_authentication_config_controller_last_config_info\{apiserver_id_hash="sha256:\w+",'
                         rf'hash="sha256:{applied}"\}} 1', text), text  # the good file is the one applied


async def test_a_reload_is_judged_off_the_event_loop(tmp_path, monkeypatch):
    """A file of a few MB takes seconds to decode (600,000 audiences: 28 s), which the server spent on
    its event loop, answering nothing meanwhile. Here the build of a reloaded file is held until the
    test lets it go: a request made meanwhile is answered, and the file still applies after."""
    import threading

    from kubernetes import client

    from nanokube.apiserver.auth import authentication_controller
    from tests.apiserver.auth.jwt_issuer import admin_client

    held, release, built = threading.Event(), threading.Event(), threading.Event()
    parse = authentication_controller.parse

    def held_parse(text: str, *rest):
        held.set()
        release.wait(20)
        built.set()
        return parse(text, *rest)

    monkeypatch.setattr(authentication_controller, "parse", held_parse)
    async with served_with(tmp_path, AUTHN + ISSUER % "[a]") as (server, kubeconfig):
        (tmp_path / "authn.yaml").write_text(AUTHN + ISSUER % "[b]")
        while not held.is_set():
            await asyncio.sleep(0.05)
        api = admin_client(kubeconfig)
        try:
            version = await asyncio.to_thread(client.VersionApi(api).get_code)
            assert version.major and not built.is_set()  # answered while the build was held
        finally:
            release.set()
            api.close()
        success = re.compile(r'apiserver_authentication_config_controller_automatic_reloads_total\{[^}]*status="success"\} 1')
        for _ in range(100):
            if success.search(text := server.metrics_text().decode()):
                break
            await asyncio.sleep(0.1)
        assert success.search(text), text
