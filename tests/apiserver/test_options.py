"""Write options validated as ValidateCreateOptions (and Update's, Patch's) does: fieldManager,
dryRun then fieldValidation, each a field error of one 422 on the options kind."""

from __future__ import annotations

import asyncio
import json

import pytest
from kubernetes.client.rest import ApiException



async def test_a_bad_field_validation_is_an_invalid_option_beside_the_others(core):
    body = {"metadata": {"name": "c"}}
    with pytest.raises(ApiException) as e:
        await asyncio.to_thread(core.create_namespaced_config_map, "default", body, dry_run="Some",
                                field_validation="Loud", field_manager="a\tb")
    assert e.value.status == 422
    status = json.loads(e.value.body)
    assert status["message"] == (
        'CreateOptions.meta.k8s.io "" is invalid: [fieldManager: Invalid value: "a\\tb": invalid character U+0009 '
        '(at position 1), dryRun: Unsupported value: ["Some"]: supported values: "All", fieldValidation: '
        'Unsupported value: "Loud": supported values: "", "Ignore", "Strict", "Warn"]')
    assert [c["field"] for c in status["details"]["causes"]] == ["fieldManager", "dryRun", "fieldValidation"]
    made = await asyncio.to_thread(core.create_namespaced_config_map, "default", body, field_validation="")
    assert made.metadata.name == "c"


async def test_a_limit_that_does_not_parse_is_the_parameter_codecs_400(core):
    """ListOptions decoding converts limit with strconv.ParseInt; its error is the whole 400 message."""
    def get():
        api = core.api_client
        request = api.param_serialize("GET", "/api/v1/namespaces/default/configmaps", query_params=[("limit", "ten")],
                                      header_params={"Accept": "application/json"})
        response = api.call_api(*request[:4])
        response.read()
        return response.status, json.loads(response.data)

    status, body = await asyncio.to_thread(get)
    assert (status, body["message"]) == (400, 'strconv.ParseInt: parsing "ten": invalid syntax')
    for name in ("a", "b"):
        await asyncio.to_thread(core.create_namespaced_config_map, "default", {"metadata": {"name": name}})
    listed = await asyncio.to_thread(core.list_namespaced_config_map, "default", limit=1)
    assert [c.metadata.name for c in listed.items] == ["a"] and listed.metadata.var_continue


async def test_server_side_apply_without_a_field_manager_is_an_invalid_patch_options(core):
    """ValidatePatchOptions runs before the patch is read: no fieldManager on an apply is the options'
    422 whether or not the body would decode, and the object is left as it was."""
    await asyncio.to_thread(core.create_namespaced_config_map, "default", {"metadata": {"name": "ssa"}})

    def apply(body: bytes, query: list[tuple[str, str]]):
        api = core.api_client
        request = api.param_serialize(
            "PATCH", "/api/v1/namespaces/default/configmaps/ssa", query_params=query, body=body,
            header_params={"Content-Type": "application/apply-patch+yaml", "Accept": "application/json"})
        response = api.call_api(request[0], request[1], request[2], body)
        response.read()
        return response.status, json.loads(response.data)

    good = b'{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {"k": "v"}}'
    for body in (good, b"{not: [yaml"):
        status, answer = await asyncio.to_thread(apply, body, [])
        assert status == 422
        assert (answer["kind"], answer["status"], answer["reason"], answer["code"]) == ("Status", "Failure", "Invalid", 422)
        assert answer["message"] == (
            'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch')
        assert answer["details"] == {"group": "meta.k8s.io", "kind": "PatchOptions", "causes": [
            {"reason": "FieldValueRequired", "message": "Required value: is required for apply patch",
             "field": "fieldManager"}]}
    assert (await asyncio.to_thread(core.read_namespaced_config_map, "ssa", "default")).data is None
    status, applied = await asyncio.to_thread(apply, good, [("fieldManager", "me")])
    assert (status, applied["data"]) == (200, {"k": "v"})


def _patch(core, name: str, ctype: str, body: bytes, query: list[tuple[str, str]]):
    api = core.api_client
    request = api.param_serialize(
        "PATCH", f"/api/v1/namespaces/default/configmaps/{name}", query_params=query,
        header_params={"Content-Type": ctype, "Accept": "application/json"})
    # the client serializes a JSON media type's body itself, so it is handed the decoded document
    response = api.call_api(request[0], request[1], request[2], json.loads(body) if "json" in ctype else body)
    response.read()
    return response.status, json.loads(response.data)


async def test_an_apply_without_a_field_manager_lists_every_bad_option_in_one_422(core):
    """ValidatePatchOptions: the apply's Required fieldManager first, then dryRun and fieldValidation."""
    await asyncio.to_thread(core.create_namespaced_config_map, "default", {"metadata": {"name": "ssa"}})
    body = b'{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {"k": "v"}}'
    status, answer = await asyncio.to_thread(
        _patch, core, "ssa", "application/apply-patch+yaml", body, [("dryRun", "Bogus"), ("fieldValidation", "Loud")])
    assert status == 422
    assert answer["message"] == (
        'PatchOptions.meta.k8s.io "" is invalid: [fieldManager: Required value: is required for apply patch, '
        'dryRun: Unsupported value: ["Bogus"]: supported values: "All", fieldValidation: Unsupported value: "Loud": '
        'supported values: "", "Ignore", "Strict", "Warn"]')
    assert [(c["reason"], c["field"]) for c in answer["details"]["causes"]] == [
        ("FieldValueRequired", "fieldManager"), ("FieldValueNotSupported", "dryRun"),
        ("FieldValueNotSupported", "fieldValidation")]
    assert (await asyncio.to_thread(core.read_namespaced_config_map, "ssa", "default")).data is None


async def test_force_on_a_patch_that_is_not_an_apply_is_forbidden(core):
    """Any force value (false too) on a merge, strategic or JSON patch is PatchOptions' 422; an apply may force."""
    await asyncio.to_thread(core.create_namespaced_config_map, "default", {"metadata": {"name": "f"}})
    patches = [("application/merge-patch+json", b'{"data": {"k": "v"}}'),
               ("application/strategic-merge-patch+json", b'{"data": {"k": "v"}}'),
               ("application/json-patch+json", b'[{"op": "add", "path": "/data", "value": {"k": "v"}}]')]
    for ctype, body in patches:
        for force in ("true", "false"):
            status, answer = await asyncio.to_thread(_patch, core, "f", ctype, body, [("force", force)])
            assert status == 422, (ctype, force)
            assert answer["message"] == (
                'PatchOptions.meta.k8s.io "" is invalid: force: Forbidden: may not be specified for non-apply patch')
            assert answer["details"]["causes"] == [
                {"reason": "FieldValueForbidden", "message": "Forbidden: may not be specified for non-apply patch",
                 "field": "force"}]
    assert (await asyncio.to_thread(core.read_namespaced_config_map, "f", "default")).data is None
    status, answer = await asyncio.to_thread(_patch, core, "f", "application/merge-patch+json", b'{"data": {"k": "v"}}', [])
    assert (status, answer["data"]) == (200, {"k": "v"})
    applied = b'{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "f"}, "data": {"k": "w"}}'
    status, answer = await asyncio.to_thread(
        _patch, core, "f", "application/apply-patch+yaml", applied, [("fieldManager", "m"), ("force", "true")])
    assert (status, answer["data"]) == (200, {"k": "w"})


async def test_a_delete_ignores_the_write_options_delete_options_lack(core):
    """DeleteOptions has no fieldManager or fieldValidation: a DELETE carrying bad ones is not refused."""
    await asyncio.to_thread(core.create_namespaced_config_map, "default", {"metadata": {"name": "d"}})

    def delete():
        api = core.api_client
        request = api.param_serialize("DELETE", "/api/v1/namespaces/default/configmaps/d",
                                      query_params=[("fieldValidation", "Loud"), ("fieldManager", "a\tb")],
                                      header_params={"Accept": "application/json"})
        response = api.call_api(*request[:4])
        response.read()
        return response.status, json.loads(response.data)

    status, body = await asyncio.to_thread(delete)
    assert (status, body["kind"], body["status"]) == (200, "Status", "Success")
    assert (await asyncio.to_thread(core.list_namespaced_config_map, "default")).items == []


def _write(core, method: str, path: str, ctype: str, body: bytes, query) -> tuple[int, dict]:
    """The bytes sent as they are (the client would serialize a JSON media type's body itself)."""
    api = core.api_client
    url = api.configuration.host + path + "?" + "&".join(f"{k}={v}" for k, v in query)
    response = api.rest_client.pool_manager.request(method, url, body=body, headers={
        **api.default_headers, "Content-Type": ctype, "Accept": "application/json"})
    return response.status, json.loads(response.data)


async def test_create_and_update_judge_media_type_body_size_and_options_in_upstreams_order(core):
    """create.go: the media type (415), the body's size (413), then the options; update.go: the body's
    size, the options, then the media type; patch.go: the media type, the body's size, the options.
    The body itself is decoded after all of them."""
    await asyncio.to_thread(core.create_namespaced_config_map, "default", {"metadata": {"name": "c"}})
    big = b'{"metadata": {"name": "c"}, "data": {"k": "' + b"x" * (3 * 1024 * 1024) + b'"}}'
    bad = [("dryRun", "Bogus")]
    post, put = "/api/v1/namespaces/default/configmaps", "/api/v1/namespaces/default/configmaps/c"
    cases = [
        ("POST", post, "application/json", big, bad, 413),
        ("PUT", put, "application/json", big, bad, 413),
        ("POST", post, "text/plain", big, bad, 415),
        ("POST", post, "text/plain", b"{}", bad, 415),
        ("PUT", put, "text/plain", big, bad, 413),
        ("PUT", put, "text/plain", b"{}", bad, 422),
        ("POST", post, "application/json", b"{not json", bad, 422),
        ("PUT", put, "application/json", b"{not json", bad, 422),
        ("POST", "/api/v1/namespaces/default/pods/p/binding", "application/json", big, bad, 413),
        ("PUT", "/apis/apps/v1/namespaces/default/deployments/d/scale", "application/json", big, bad, 413),
        # a patch's media type comes first, before the body and the options, /scale's too
        ("PATCH", "/apis/apps/v1/namespaces/default/deployments/d/scale", "text/plain", big, bad, 415),
        ("PATCH", "/apis/apps/v1/namespaces/default/deployments/d/scale", "application/merge-patch+json", big, bad, 413),
    ]
    for method, path, ctype, body, query, want in cases:
        status, answer = await asyncio.to_thread(_write, core, method, path, ctype, body, query)
        assert status == want, (method, ctype, len(body), answer)
        if want == 422:
            assert answer["message"] == (
                f'{"CreateOptions" if method == "POST" else "UpdateOptions"}.meta.k8s.io "" is invalid: dryRun: '
                'Unsupported value: ["Bogus"]: supported values: "All"')
        elif want == 413:
            assert answer["reason"] == "RequestEntityTooLarge"


def _get(core, path: str, query: str) -> tuple[int, list | dict]:
    """A GET's status and body: a Status as a dict, a watch's stream as its list of events."""
    api = core.api_client
    response = api.rest_client.pool_manager.request("GET", f"{api.configuration.host}{path}?{query}",
                                                    headers={**api.default_headers, "Accept": "application/json"})
    text = response.data.decode()
    if "watch=true" in query and response.status == 200:
        return 200, [json.loads(line) for line in text.splitlines() if line]
    return response.status, json.loads(text)


async def test_list_and_watch_options_are_judged_as_validate_list_options(core):
    """ValidateListOptions with the WatchList gate on (1.37): a watch's resourceVersionMatch needs
    sendInitialEvents and NotOlderThan, a list takes no sendInitialEvents; every rule one cause of
    one 422 on ListOptions.meta.k8s.io, in upstream's order. All of these were answered 200 (or 400)."""
    path = "/api/v1/namespaces/default/configmaps"
    cases = [
        ("watch=true&resourceVersionMatch=NotOlderThan", [
            "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents "
            "is provided"]),
        ("watch=true&sendInitialEvents=true", [
            "resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"]),
        ("watch=true&sendInitialEvents=true&resourceVersionMatch=Exact&continue=c", [
            "resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
            'resourceVersionMatch: Unsupported value: "Exact": supported values: "NotOlderThan"',
            "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is provided"]),
        ("sendInitialEvents=true&resourceVersionMatch=NotOlderThan", [
            "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
            "sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list"]),
        ("resourceVersion=0&resourceVersionMatch=Exact", [
            'resourceVersionMatch: Forbidden: resourceVersionMatch "exact" is forbidden for resourceVersion "0"']),
        ("resourceVersion=1&resourceVersionMatch=Newest", [
            'resourceVersionMatch: Unsupported value: "Newest": supported values: "Exact", "NotOlderThan", ""']),
    ]
    for query, want in cases:
        status, body = await asyncio.to_thread(_get, core, path, query + "&timeoutSeconds=1")
        assert (status, body["reason"], body["details"]["kind"], body["details"]["group"]) == (
            422, "Invalid", "ListOptions", "meta.k8s.io"), query
        detail = want[0] if len(want) == 1 else "[" + ", ".join(want) + "]"
        assert body["message"] == f'ListOptions.meta.k8s.io "" is invalid: {detail}', query
        assert [c["field"] for c in body["details"]["causes"]] == [w.split(":")[0] for w in want], query
    status, body = await asyncio.to_thread(_get, core, path, "resourceVersion=0&resourceVersionMatch=NotOlderThan")
    assert (status, body["kind"]) == (200, "ConfigMapList")


def _events(stream: list) -> list[tuple[str, str | None, dict | None]]:
    return [(e["type"], e["object"]["metadata"].get("name"), e["object"]["metadata"].get("annotations"))
            for e in stream]


async def test_a_watch_list_marks_the_end_of_its_initial_events_only_for_a_watch_that_takes_bookmarks(core):
    """The initial-events-end BOOKMARK follows the initial events when the watch allows bookmarks;
    a watch from "" or "0" that names neither option is defaulted to a watch-list
    (SetListOptionsDefaults), so it gets the bookmark too. Without allowWatchBookmarks none is
    sent (one was), and a watch-list from a resourceVersion the cache does not reach is one ERROR
    event with the 504 (it streamed the current state)."""
    for name in ("a", "b"):
        await asyncio.to_thread(core.create_namespaced_config_map, "default", {"metadata": {"name": name}})
    path = "/api/v1/namespaces/default/configmaps"
    end = ("BOOKMARK", None, {"k8s.io/initial-events-end": "true"})
    listed = [("ADDED", "a", None), ("ADDED", "b", None)]
    watch_list = "watch=true&timeoutSeconds=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
    cases = [
        (watch_list + "&allowWatchBookmarks=true", listed + [end]),
        (watch_list, listed),
        ("watch=true&timeoutSeconds=1&allowWatchBookmarks=true&resourceVersion=0", listed + [end]),
        ("watch=true&timeoutSeconds=1&allowWatchBookmarks=true", listed + [end]),
        ("watch=true&timeoutSeconds=1", listed),
    ]
    # each watch lasts its timeout: all at once, as independent clients
    *answers, (_, stream) = await asyncio.gather(
        *(asyncio.to_thread(_get, core, path, query) for query, _ in cases),
        asyncio.to_thread(_get, core, path, watch_list + "&resourceVersion=99999999"))
    for (query, want), (status, events) in zip(cases, answers, strict=True):
        assert (status, _events(events)) == (200, want), query
    assert [e["type"] for e in stream] == ["ERROR"]
    assert (stream[0]["object"]["code"], stream[0]["object"]["details"]["causes"][0]["reason"]) == (
        504, "ResourceVersionTooLarge")


async def test_a_delete_collection_judges_its_list_options_before_its_body_and_lists_with_them(core):
    """delete.go decodes and validates a DELETECOLLECTION's ListOptions (400, 422) before it reads the
    body, and deletes what the list with them holds: a page of `limit`. All of these were ignored."""
    for name in ("a", "b", "c"):
        await asyncio.to_thread(core.create_namespaced_config_map, "default", {"metadata": {"name": name}})
    path = "/api/v1/namespaces/default/configmaps"

    def delete(query: str, body: bytes = b"") -> tuple[int, dict]:
        api = core.api_client
        response = api.rest_client.pool_manager.request("DELETE", f"{api.configuration.host}{path}?{query}", body=body,
                                                        headers={**api.default_headers, "Accept": "application/json"})
        return response.status, json.loads(response.data)

    for query, code, message in [
        ("limit=ten", 400, 'strconv.ParseInt: parsing "ten": invalid syntax'),
        ("timeoutSeconds=x", 400, 'strconv.ParseInt: parsing "x": invalid syntax'),
        ("sendInitialEvents=true", 422,
         'ListOptions.meta.k8s.io "" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list'),
        ("resourceVersionMatch=Exact", 422, 'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: '
                                            'resourceVersionMatch is forbidden unless resourceVersion is provided'),
        ("watch=true&resourceVersionMatch=NotOlderThan", 422, 'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: '
         'Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided'),
        # a selector that does not parse is the decoder's 400, before the options' 422; a field label the
        # kind does not support is converted after it
        ("labelSelector=a%20in&sendInitialEvents=true", 400, "unable to parse requirement: found '' expected: '('"),
        ("fieldSelector=metadata.name&sendInitialEvents=true", 400,
         "invalid selector: 'metadata.name'; can't understand 'metadata.name'"),
        ("fieldSelector=spec.foo%3Dx&sendInitialEvents=true", 422,
         'ListOptions.meta.k8s.io "" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list'),
        ("limit=ten&labelSelector=a%20in", 400, 'strconv.ParseInt: parsing "ten": invalid syntax'),
    ]:
        status, body = await asyncio.to_thread(delete, query, b"{not json")  # (the body is read after them)
        assert (status, body["message"]) == (code, message), query
    assert len((await asyncio.to_thread(core.list_namespaced_config_map, "default")).items) == 3
    status, body = await asyncio.to_thread(delete, "limit=2")
    assert status == 200 and [o["metadata"]["name"] for o in body["items"]] == ["a", "b"]
    assert [c.metadata.name for c in (await asyncio.to_thread(core.list_namespaced_config_map, "default")).items] == ["c"]


async def test_a_watch_decodes_its_limit_as_a_list_does(core):
    """ListResource decodes every ListOptions parameter before it watches: a limit that does not parse
    is a 400 for a watch too, after timeoutSeconds (their fields' order), though a watch reads no limit.
    A watch took any (found by fuzz_sweep's `options` family)."""
    api = core.api_client

    def get(query: str) -> tuple[int, dict]:
        response = api.rest_client.pool_manager.request(
            "GET", f"{api.configuration.host}/api/v1/namespaces/default/configmaps?watch=true&{query}",
            headers={**api.default_headers, "Accept": "application/json"})
        return response.status, json.loads(response.data) if response.status != 200 else {}

    for query, message in [("timeoutSeconds=1&limit=x", 'strconv.ParseInt: parsing "x": invalid syntax'),
                           ("timeoutSeconds=1&limit=", 'strconv.ParseInt: parsing "": invalid syntax'),
                           ("timeoutSeconds=1&limit=99999999999999999999",
                            'strconv.ParseInt: parsing "99999999999999999999": value out of range'),
                           ("timeoutSeconds=y&limit=x", 'strconv.ParseInt: parsing "y": invalid syntax')]:
        status, body = await asyncio.to_thread(get, query)
        assert (status, body.get("message")) == (400, message), query
    assert (await asyncio.to_thread(get, "timeoutSeconds=1&limit=5"))[0] == 200


async def test_a_legacy_watch_path_has_a_lists_options(core):
    """ListResource's forceWatch (GET .../watch/...) leaves the options' watch false: no watch-list
    defaults (so no initial-events-end bookmark) and a list's rules (sendInitialEvents is refused).
    With ?watch=true as well, the options are a watch's again."""
    await asyncio.to_thread(core.create_namespaced_config_map, "default", {"metadata": {"name": "a"}})
    api = core.api_client

    def get(query: str) -> tuple[int, bytes]:
        response = api.rest_client.pool_manager.request(
            "GET", f"{api.configuration.host}/api/v1/watch/namespaces/default/configmaps?timeoutSeconds=1&{query}",
            headers={**api.default_headers, "Accept": "application/json"})
        return response.status, response.data

    legacy, watch, (status, data) = await asyncio.gather(*(asyncio.to_thread(get, q) for q in (
        "allowWatchBookmarks=true", "allowWatchBookmarks=true&watch=true",
        "sendInitialEvents=true&resourceVersionMatch=NotOlderThan")))  # each watch lasts its timeout: at once
    assert legacy[0] == 200 and [json.loads(line)["type"] for line in legacy[1].splitlines()] == ["ADDED"]
    assert watch[0] == 200 and [json.loads(line)["type"] for line in watch[1].splitlines()] == ["ADDED", "BOOKMARK"]
    assert (status, json.loads(data)["message"]) == (422, 'ListOptions.meta.k8s.io "" is invalid: [resourceVersionMatch: '
                                                          'Forbidden: resourceVersionMatch is forbidden unless resourceVersion '
                                                          'is provided, sendInitialEvents: Forbidden: sendInitialEvents is '
                                                          'forbidden for list]')


async def test_an_exact_resource_version_lists_that_snapshot(core):
    """resourceVersionMatch=Exact reads the collection as it was at that revision (the watch cache's
    snapshot, upstream's ListFromCacheSnapshot), answered with that revision; NotOlderThan reads the latest."""
    await asyncio.to_thread(core.create_namespaced_config_map, "default", {"metadata": {"name": "before"}})
    then = (await asyncio.to_thread(core.list_namespaced_config_map, "default")).metadata.resource_version
    await asyncio.to_thread(core.create_namespaced_config_map, "default", {"metadata": {"name": "after"}})
    await asyncio.to_thread(core.delete_namespaced_config_map, "before", "default")

    def names(match, **kw):
        got = core.list_namespaced_config_map("default", resource_version=then, resource_version_match=match, **kw)
        return [c.metadata.name for c in got.items], got.metadata.resource_version, got.metadata.var_continue

    assert (await asyncio.to_thread(names, "Exact"))[:2] == (["before"], then)
    assert (await asyncio.to_thread(names, "NotOlderThan"))[0] == ["after"]
    await asyncio.to_thread(core.create_namespaced_config_map, "default", {"metadata": {"name": "later"}})
    page, rv, token = await asyncio.to_thread(names, "Exact", limit=1)
    assert (page, rv) == (["before"], then) and token is None


async def test_a_delete_body_of_another_kind_is_the_decoders_400_and_deletes_nothing(core):
    """delete.go decodes the body with the meta scheme, where DeleteOptions is unversioned: any
    apiVersion of it is taken, another kind is not registered (400 BadRequest since upstream
    #133358), and nothing is deleted."""
    await asyncio.to_thread(core.create_namespaced_config_map, "default", {"metadata": {"name": "k"}})
    path = "/api/v1/namespaces/default/configmaps/k"
    for body, message in (
            ({"kind": "Pod"}, 'no kind "Pod" is registered for version "meta.k8s.io/v1" in scheme '),
            ({"apiVersion": "apps/v1", "kind": "Deployment"}, 'no kind "Deployment" is registered for version "apps/v1"'),
            ({"apiVersion": "a/b/c", "kind": "DeleteOptions"}, "unexpected GroupVersion string: a/b/c")):
        status, answer = await asyncio.to_thread(_write, core, "DELETE", path, "application/json",
                                                 json.dumps(body).encode(), [])
        assert (status, answer["reason"], answer["code"]) == (400, "BadRequest", 400), body
        assert answer["message"].startswith(message), answer["message"]
    status, answer = await asyncio.to_thread(_write, core, "DELETE", path, "application/json",
                                             json.dumps({"apiVersion": "v2", "kind": "DeleteOptions"}).encode(), [])
    assert (status, answer["status"]) == (200, "Success"), "DeleteOptions of any version is taken"


async def test_one_query_is_judged_for_each_patch_type_and_method_it_comes_with(core):
    """The checked options are remembered by method, query and media type (handlers._write_opts):
    a query an apply may send is still refused on a merge patch, then taken on an apply again,
    and a query's dry run stays a dry run on a create."""
    await asyncio.to_thread(core.create_namespaced_config_map, "default", {"metadata": {"name": "q"}})
    query = [("fieldManager", "m"), ("force", "true")]
    applied = b'{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "q"}, "data": {"k": "a"}}'
    for ctype, body, code in (("application/apply-patch+yaml", applied, 200),
                              ("application/merge-patch+json", b'{"data": {"k": "m"}}', 422),
                              ("application/apply-patch+yaml", applied.replace(b'"a"', b'"b"'), 200)):
        status, answer = await asyncio.to_thread(_patch, core, "q", ctype, body, query)
        assert status == code, (ctype, answer)
    assert (await asyncio.to_thread(core.read_namespaced_config_map, "q", "default")).data == {"k": "b"}
    for _ in range(2):
        made = await asyncio.to_thread(core.create_namespaced_config_map, "default", {"metadata": {"name": "dry"}},
                                       dry_run="All", field_manager="m")
        assert made.metadata.name == "dry"
    with pytest.raises(ApiException) as e:
        await asyncio.to_thread(core.read_namespaced_config_map, "dry", "default")
    assert e.value.status == 404
