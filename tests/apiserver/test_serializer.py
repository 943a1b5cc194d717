import orjson
import pytest

from nanokube.apiserver import serializer
from nanokube.machinery import errors


@pytest.mark.parametrize("raw, found", [
    (b'{"a":1,"b":"x:y"}', []),
    (b'{"a":1,"a":2}', ['duplicate field "a"']),
    (b'{"a":{"x":1},"a":{"y":2}}', ['duplicate field "a"']),
    # an escaped ':' decodes to one the body does not show; it must not hide the repeated "a"
    (b'{"a":1,"a":2,"b":"\\u003a"}', ['duplicate field "a"']),
    (b'{"b":"\\u003a:","c":[{"d":1,"d":2}]}', ['duplicate field "c[0].d"']),
])
def test_duplicate_fields_are_found_with_or_without_the_decoded_body(raw, found):
    assert serializer.duplicates(raw, False) == found
    assert serializer.duplicates(raw, False, orjson.loads(raw)) == found


def test_a_body_deeper_than_orjson_writes_is_counted_the_slow_way():
    raw = b'{"a":' * 300 + b"1" + b"}" * 300
    assert serializer.duplicates(raw, False) == []


def test_depth_is_refused_past_the_limit_whatever_the_bracket_count():
    assert serializer.loads_json(b"[" * serializer.MAX_DEPTH + b"]" * serializer.MAX_DEPTH)
    with pytest.raises(errors.APIError):
        serializer.loads_json(b"[" * (serializer.MAX_DEPTH + 1) + b"]" * (serializer.MAX_DEPTH + 1))
    with pytest.raises(errors.APIError):
        serializer.loads_json(("[" * (serializer.MAX_DEPTH + 1) + "]" * (serializer.MAX_DEPTH + 1)))


async def test_a_yaml_body_is_loaded_once_for_its_value_and_its_repeated_keys(monkeypatch):
    """PyYAML builds a YAML body's values in Python (a 0.7 MB body of small maps: ~1.5 s); the body's
    value and its repeated keys (the strict decoder's warnings) come from one load, not two. A create
    (decoded, then checked) and an apply (checked, then decoded) each load their body once, with
    go-yaml's warning and the last value kept."""
    import aiohttp

    from nanokube.apiserver.app import APIServer
    from nanokube.store.memory import MemoryStore

    loads: list[int] = []
    real = serializer._Loader.get_single_data
    monkeypatch.setattr(serializer._Loader, "get_single_data", lambda self: loads.append(1) or real(self))
    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    url = f"http://127.0.0.1:{server.port}/api/v1/namespaces/default/configmaps"
    body = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: y\ndata:\n  a: '1'\n  a: '2'\n"
    try:
        async with aiohttp.ClientSession() as s:
            async with s.post(url, data=body, headers={"Content-Type": "application/yaml"}) as r:
                assert r.status == 201 and (await r.json())["data"] == {"a": "2"}
                # YAMLToJSONStrict's error, go-yaml's TypeError: a warning per line it lists
                assert r.headers.getall("Warning") == ['299 - "line 7: key \\"a\\" already set in map"']
            assert len(loads) == 1
            async with s.patch(f"{url}/y", data=body.replace("'2'", "'3'"), params={"fieldManager": "m", "force": "true"},
                               headers={"Content-Type": "application/apply-patch+yaml"}) as r:
                assert r.status == 200 and (await r.json())["data"] == {"a": "3"}
                # the applyPatcher's yaml.UnmarshalStrict of the patch: sigs.k8s.io/yaml's wrapped go-yaml error,
                # a warning per line it lists as well
                assert r.headers.getall("Warning") == ['299 - "line 7: key \\"a\\" already set in map"']
            assert len(loads) == 2
    finally:
        await server.stop()


async def test_a_json_string_that_is_not_utf8_is_decoded_as_gos_decoder_does():
    """encoding/json (sigs.k8s.io/json) reads each byte of a string that is not UTF-8, and each lone
    surrogate escape, as U+FFFD; orjson refuses them, and the body was a 400 ('str is not valid UTF-8')."""
    import aiohttp

    from nanokube.apiserver.app import APIServer
    from nanokube.store.memory import MemoryStore

    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    url = f"http://127.0.0.1:{server.port}/api/v1/namespaces/default/configmaps"
    try:
        async with aiohttp.ClientSession() as s:
            body = b'{"metadata": {"name": "u", "labels": {"a": "b"}}, "data": {"k": "x\xc0\x80y\xe9", "s": "\\ud800", "p": "\\ud83d\\ude00"}}'
            async with s.post(url, data=body, headers={"Content-Type": "application/json"}) as r:
                assert r.status == 201, await r.text()
                assert (await r.json())["data"] == {"k": "x\ufffd\ufffdy\ufffd", "s": "\ufffd", "p": "\U0001f600"}
            async with s.post(url, data=b'{"metadata": {"name": "v"}, "data": {"a": NaN, "b": "\xff"}}',
                              headers={"Content-Type": "application/json"}) as r:
                assert r.status == 400  # (not JSON either)
    finally:
        await server.stop()


async def test_a_yaml_integer_past_float64_is_the_string_go_yaml_resolves_it_to():
    """go-yaml's resolve takes a plain integer that int64, uint64 and float64 cannot hold as a string (ParseFloat's
    range error); the conversion to float raised OverflowError, a 500."""
    import aiohttp

    from nanokube.apiserver.app import APIServer
    from nanokube.store.memory import MemoryStore

    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    url = f"http://127.0.0.1:{server.port}/api/v1/namespaces/default/configmaps"
    big = "1" + "0" * 400
    try:
        async with aiohttp.ClientSession() as s:
            body = f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\ndata:\n  a: {big}\n  b: 18446744073709551616\n"
            async with s.post(url, data=body, headers={"Content-Type": "application/yaml"}) as r:
                assert r.status == 400 and (await r.json())["message"].endswith(  # (2^64: a float, as go-yaml takes it)
                    "json: cannot unmarshal number into Go struct field ConfigMap.data of type string")
            async with s.post(url, data=body.replace("  b: 18446744073709551616\n", ""),
                              headers={"Content-Type": "application/yaml"}) as r:
                assert r.status == 201, await r.text()
                assert (await r.json())["data"] == {"a": big}
            huge = "1" + "0" * 5000  # (past int()'s 4300 digits, which PyYAML's int() refused: a 400, fuzz62)
            async with s.post(url, data=f"metadata:\n  name: huge\ndata:\n  a: {huge}\n",
                              headers={"Content-Type": "application/yaml"}) as r:
                assert r.status == 201 and (await r.json())["data"] == {"a": huge}, await r.text()
    finally:
        await server.stop()


async def test_repeated_keys_and_unknown_fields_are_one_strict_error_in_the_decoders_order():
    """sigs.k8s.io/json's strict decoder collects both kinds of strict error as it walks the body: a
    Strict 400 lists them all (it listed the repeated keys alone) and Warn warns of them in document
    order (the repeated keys came first); a YAML body's repeated keys (YAMLToJSONStrict's one error) come
    before its unknown fields."""
    import aiohttp

    from nanokube.apiserver.app import APIServer
    from nanokube.store.memory import MemoryStore

    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    url = f"http://127.0.0.1:{server.port}/api/v1/namespaces/default/configmaps"
    body = b'{"metadata":{"name":"a","foo":1,"name":"a"},"bar":2,"data":{"x":"1","x":"2"}}'
    texts = ['unknown field "metadata.foo"', 'duplicate field "metadata.name"', 'unknown field "bar"',
             'duplicate field "data.x"']
    json_type = {"Content-Type": "application/json"}
    try:
        async with aiohttp.ClientSession() as s:
            async with s.post(url, data=body, params={"fieldValidation": "Strict"}, headers=json_type) as r:
                assert r.status == 400
                assert (await r.json())["message"] == ('ConfigMap in version "v1" cannot be handled as a ConfigMap: '
                                                       "strict decoding error: " + ", ".join(texts))
            async with s.post(url, data=body, params={"fieldValidation": "Warn"}, headers=json_type) as r:
                assert r.status == 201
                assert r.headers.getall("Warning") == ['299 - "' + t.replace('"', '\\"') + '"' for t in texts]
            async with s.put(f"{url}/a", data=body.replace(b'"bar"', b'"baz"'), params={"fieldValidation": "Strict"},
                             headers=json_type) as r:
                assert r.status == 400 and (await r.json())["message"].endswith(
                    ", ".join(texts).replace('"bar"', '"baz"'))
            yaml_body = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: y\nbar: 1\ndata:\n  a: '1'\n  a: '2'\n"
            async with s.post(url, data=yaml_body, params={"fieldValidation": "Strict"},
                              headers={"Content-Type": "application/yaml"}) as r:
                assert r.status == 400
                assert (await r.json())["message"].endswith('strict decoding error: yaml: unmarshal errors:\n'
                                                            '  line 8: key "a" already set in map, unknown field "bar"')
            async with s.post(url, data='{"metadata": {"name": "q",\n"name": "q"}}', params={"fieldValidation": "Strict"},
                              headers={"Content-Type": "application/yaml"}) as r:  # JSON text is YAML: go-yaml's words
                assert r.status == 400
                assert (await r.json())["message"].endswith('strict decoding error: yaml: unmarshal errors:\n'
                                                            '  line 2: key "name" already set in map')
    finally:
        await server.stop()


async def test_an_apply_patch_that_repeats_keys_is_reported_as_yaml_unmarshal_strict_reports_it():
    """The applyPatcher checks the patch with yaml.UnmarshalStrict, JSON or YAML: under Warn the warning is
    sigs.k8s.io/yaml's wrapped go-yaml error, under Strict a 400 "error strict decoding YAML: ..." (a JSON
    patch's were `duplicate field` texts, and the 400 was "error strict decoding patch")."""
    import aiohttp

    from nanokube.apiserver.app import APIServer
    from nanokube.store.memory import MemoryStore

    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    url = f"http://127.0.0.1:{server.port}/api/v1/namespaces/default/configmaps/j"
    apply = {"Content-Type": "application/apply-patch+yaml"}
    body = b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"j"},\n"data":{"a":"1","a":"2","b":"1","b":"2"}}'
    text = ('error converting YAML to JSON: yaml: unmarshal errors:\n  line 2: key "a" already set in map\n'
            '  line 2: key "b" already set in map')
    try:
        async with aiohttp.ClientSession() as s:
            async with s.patch(url, data=body, params={"fieldManager": "m", "fieldValidation": "Strict"},
                               headers=apply) as r:
                assert r.status == 400 and (await r.json())["message"] == "error strict decoding YAML: " + text
            async with s.patch(url, data=body, params={"fieldManager": "m"}, headers=apply) as r:
                assert r.status == 201 and (await r.json())["data"] == {"a": "2", "b": "2"}
                assert r.headers.getall("Warning") == ['299 - "line 2: key \\"a\\" already set in map"',
                                                       '299 - "line 2: key \\"b\\" already set in map"']
    finally:
        await server.stop()


async def test_a_custom_resources_repeated_keys_come_before_its_unknown_fields():
    """A custom resource's body is decoded as unstructured JSON (its strict errors: the repeated keys) and
    then pruned by its schema, whose unknown fields schemaCoercingDecoder appends after them."""
    import asyncio

    import aiohttp

    from nanokube.apiserver.app import APIServer
    from nanokube.store.memory import MemoryStore
    from tests.controllers import tries

    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    base = f"http://127.0.0.1:{server.port}"
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "things.dup.example.com"},
           "spec": {"group": "dup.example.com", "scope": "Namespaced", "names": {"plural": "things", "kind": "Thing"},
                    "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                        "type": "object", "properties": {"spec": {"type": "object", "properties": {
                            "a": {"type": "string"}}}}}}}]}}
    body = b'{"apiVersion":"dup.example.com/v1","kind":"Thing","metadata":{"name":"t"},"spec":{"zz":1,"a":"x","a":"y"}}'
    try:
        async with aiohttp.ClientSession() as s:
            async with s.post(f"{base}/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=crd) as r:
                assert r.status == 201
            for _ in tries():
                async with s.post(f"{base}/apis/dup.example.com/v1/namespaces/default/things", data=body,
                                  params={"fieldValidation": "Strict"}, headers={"Content-Type": "application/json"}) as r:
                    code, got = r.status, await r.json()
                if code != 404:  # (served once the CRD is established)
                    break
                await asyncio.sleep(0.05)
            assert code == 400
            assert got["message"] == ('Thing in version "v1" cannot be handled as a Thing: strict decoding '
                                      'error: duplicate field "spec.a", unknown field "spec.zz"')
    finally:
        await server.stop()
