"""JSON patch (RFC 6902) as kube-apiserver applies it: evanphx/json-patch v4 semantics and messages."""

import copy

import pytest

from nanokube.apiserver.patch import PatchError
from nanokube.apiserver.patch.jsonpatch import MAX_OPERATIONS, apply


def pod():
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "web",
            "namespace": "default",
            "labels": {"app": "web", "tier": "front"},
            "annotations": {"example.com/owner": "team-a", "a~b": "tilde"},
            "finalizers": ["example.com/protect"],
        },
        "spec": {
            "containers": [
                {"name": "nginx", "image": "nginx:1.25", "ports": [{"containerPort": 80}]},
                {"name": "sidecar", "image": "busybox", "args": ["sleep", "3600"]},
            ],
            "restartPolicy": "Always",
        },
    }


def failure(doc, ops):
    with pytest.raises(PatchError) as e:
        apply(doc, ops)
    return e.value


def test_add_replace_remove_on_object_members():
    out = apply(
        pod(),
        [
            {"op": "add", "path": "/metadata/labels/env", "value": "prod"},
            {"op": "replace", "path": "/spec/restartPolicy", "value": "Never"},
            {"op": "remove", "path": "/metadata/labels/tier"},
        ],
    )
    assert out["metadata"]["labels"] == {"app": "web", "env": "prod"}
    assert out["spec"]["restartPolicy"] == "Never"


def test_inputs_are_not_mutated_and_values_are_not_shared():
    doc, value = pod(), {"name": "extra", "image": "x"}
    ops = [
        {"op": "add", "path": "/spec/containers/-", "value": value},
        {"op": "replace", "path": "/spec/containers/2/image", "value": "y"},
    ]
    before_doc, before_ops = copy.deepcopy(doc), copy.deepcopy(ops)
    out = apply(doc, ops)
    assert doc == before_doc and ops == before_ops
    assert out["spec"]["containers"][2] == {"name": "extra", "image": "y"}


def test_pointer_escapes():
    out = apply(
        pod(),
        [
            {"op": "replace", "path": "/metadata/annotations/example.com~1owner", "value": "team-b"},
            {"op": "remove", "path": "/metadata/annotations/a~0b"},
            {"op": "add", "path": "/metadata/labels/~01", "value": "v"},
        ],
    )
    assert out["metadata"]["annotations"] == {"example.com/owner": "team-b"}
    assert out["metadata"]["labels"]["~1"] == "v"


def test_array_add_insert_append_and_negative_index():
    out = apply(
        pod(),
        [
            {"op": "add", "path": "/metadata/finalizers/-", "value": "last"},
            {"op": "add", "path": "/metadata/finalizers/0", "value": "first"},
            {"op": "add", "path": "/metadata/finalizers/-1", "value": "appended"},
            {"op": "remove", "path": "/spec/containers/-1"},
        ],
    )
    assert out["metadata"]["finalizers"] == ["first", "example.com/protect", "last", "appended"]
    assert [c["name"] for c in out["spec"]["containers"]] == ["nginx"]


def test_move_and_copy():
    out = apply(
        pod(),
        [
            {"op": "copy", "from": "/metadata/labels", "path": "/spec/nodeSelector"},
            {"op": "move", "from": "/spec/containers/1/args", "path": "/spec/containers/0/args"},
            {"op": "add", "path": "/spec/nodeSelector/zone", "value": "a"},
        ],
    )
    assert out["spec"]["nodeSelector"] == {"app": "web", "tier": "front", "zone": "a"}
    assert out["metadata"]["labels"] == {"app": "web", "tier": "front"}
    assert out["spec"]["containers"][0]["args"] == ["sleep", "3600"]
    assert "args" not in out["spec"]["containers"][1]


def test_test_operation_passes_and_guards_later_operations():
    out = apply(
        pod(),
        [
            {"op": "test", "path": "/spec/containers/0/ports", "value": [{"containerPort": 80}]},
            {"op": "test", "path": "/metadata/labels", "value": {"tier": "front", "app": "web"}},
            {"op": "replace", "path": "/spec/containers/0/image", "value": "nginx:1.27"},
        ],
    )
    assert out["spec"]["containers"][0]["image"] == "nginx:1.27"


def test_failed_test_is_422_with_upstreams_generic_message_only():
    err = failure(pod(), [{"op": "test", "path": "/metadata/name", "value": "other"}])
    assert str(err) == "testing value /metadata/name failed: test failed"
    assert err.code == 422 and err.reason == "Invalid"
    assert err.status_message == "the server rejected our request due to an error in our request"
    assert err.details == {}


def test_copies_past_the_accumulated_limit_fail_with_the_librarys_message():
    ops = [{"op": "add", "path": "/data", "value": {"x": "a" * 1000}}]
    ops += [{"op": "copy", "from": "/data/x", "path": f"/data/y{i}"} for i in range(3200)]
    err = failure({"metadata": {}}, ops)
    assert err.code == 422 and str(err) == (
        "Unable to complete the copy, the accumulated size increase of copy is 3146280, exceeding the limit 3145728")


def test_test_compares_types_strictly():
    doc = {"spec": {"replicas": 1, "paused": True}}
    assert failure(doc, [{"op": "test", "path": "/spec/replicas", "value": True}]).code == 422
    assert failure(doc, [{"op": "test", "path": "/spec/replicas", "value": 1.0}]).code == 422
    assert failure(doc, [{"op": "test", "path": "/spec/paused", "value": 1}]).code == 422
    assert apply(doc, [{"op": "test", "path": "/spec/replicas", "value": 1}]) == doc


def test_test_null_matches_a_missing_member_and_whole_document():
    doc = pod()
    assert apply(doc, [{"op": "test", "path": "/spec/nodeName", "value": None}]) == doc
    assert apply(doc, [{"op": "test", "path": "", "value": pod()}]) == doc
    assert str(failure(doc, [{"op": "test", "path": "", "value": {}}])) == "testing value  failed: test failed"


def test_replace_of_missing_member_adds_it_like_upstream():
    out = apply(pod(), [{"op": "replace", "path": "/spec/nodeName", "value": "node-1"}])
    assert out["spec"]["nodeName"] == "node-1"


def test_replace_whole_document():
    assert apply(pod(), [{"op": "replace", "path": "", "value": {"kind": "Pod"}}]) == {"kind": "Pod"}
    err = failure(pod(), [{"op": "replace", "path": "", "value": "x"}])
    assert str(err) == "replace operation value must be object or array: %!w(<nil>)"


def test_copy_from_missing_member_inserts_null_like_upstream():
    out = apply(pod(), [{"op": "copy", "from": "/metadata/missing", "path": "/metadata/copied"}])
    assert out["metadata"]["copied"] is None


@pytest.mark.parametrize(
    "op,message",
    [
        (
            {"op": "add", "path": "/metadata/nope/x", "value": 1},
            'add operation does not apply: doc is missing path: "/metadata/nope/x": missing value',
        ),
        (
            {"op": "add", "path": "/spec/containers/5", "value": {}},
            "error in add for path: '/spec/containers/5': Unable to access invalid index: 5: invalid index referenced",
        ),
        (
            {"op": "add", "path": "/spec/containers/x", "value": {}},
            "error in add for path: '/spec/containers/x': value was not a proper array index: 'x': strconv.Atoi: parsing \"x\": invalid syntax",
        ),
        (
            {"op": "remove", "path": "/metadata/labels/missing"},
            "error in remove for path: '/metadata/labels/missing': Unable to remove nonexistent key: missing: missing value",
        ),
        (
            {"op": "remove", "path": "/spec/containers/2"},
            "error in remove for path: '/spec/containers/2': Unable to access invalid index: 2: invalid index referenced",
        ),
        (
            {"op": "remove", "path": "/spec/containers/-"},
            "error in remove for path: '/spec/containers/-': strconv.Atoi: parsing \"-\": invalid syntax",
        ),
        (
            {"op": "remove", "path": "/nope/x"},
            'remove operation does not apply: doc is missing path: "/nope/x": missing value',
        ),
        (
            {"op": "replace", "path": "/spec/containers/9", "value": 1},
            "replace operation does not apply: doc is missing key: /spec/containers/9: missing value",
        ),
        (
            {"op": "replace", "path": "/spec/restartPolicy/x", "value": 1},
            "replace operation does not apply: doc is missing path: /spec/restartPolicy/x: missing value",
        ),
        (
            {"op": "replace", "value": 1},
            "replace operation failed to decode path: operation missing path field: missing value",
        ),
        ({"op": "add", "value": 1}, "add operation failed to decode path: missing value"),
        (
            {"op": "move", "path": "/a"},
            "move operation failed to decode from: operation, missing from field: missing value",
        ),
        (
            {"op": "move", "from": "/metadata/gone", "path": "/a"},
            "error in move for path: 'gone': Unable to remove nonexistent key: gone: missing value",
        ),
        (
            {"op": "move", "from": "/metadata", "path": "/metadata/child"},
            "move operation does not apply: doc is missing destination path: /metadata/child: missing value",
        ),
        (
            {"op": "copy", "from": "/x/y", "path": "/a"},
            "copy operation does not apply: doc is missing from path: /x/y: missing value",
        ),
        (
            {"op": "test", "path": "/x/y", "value": 1},
            "test operation does not apply: is missing path: /x/y: missing value",
        ),
        (
            {"op": "test", "path": "/spec/containers/7", "value": 1},
            "error in test for path: '/spec/containers/7': Unable to access invalid index: 7: invalid index referenced",
        ),
        (
            {"op": "test", "path": 5, "value": 1},
            "test operation failed to decode path: json: cannot unmarshal number into Go value of type string",
        ),
        ({"op": "merge", "path": "/a"}, "Unexpected kind: merge"),
        ({"path": "/a"}, "Unexpected kind: unknown"),
    ],
)
def test_operation_failures_carry_upstream_messages(op, message):
    err = failure(pod(), [op])
    assert err.code == 422
    assert str(err) == message


def test_failure_leaves_no_partial_result_and_input_untouched():
    doc = pod()
    failure(doc, [{"op": "add", "path": "/metadata/labels/x", "value": "1"}, {"op": "remove", "path": "/nope/x"}])
    assert doc == pod()


@pytest.mark.parametrize(
    "patch,message",
    [
        ({"op": "add"}, "json: cannot unmarshal object into Go value of type jsonpatch.Patch"),
        (["add"], "json: cannot unmarshal string into Go value of type jsonpatch.Operation"),
        ([[]], "json: cannot unmarshal array into Go value of type jsonpatch.Operation"),
    ],
)
def test_undecodable_patch_is_bad_request(patch, message):
    err = failure(pod(), patch)
    assert (err.code, err.reason, str(err), err.status_message) == (400, "BadRequest", message, message)


def test_null_patch_is_a_no_op():
    assert apply(pod(), None) == pod()


def test_too_many_operations_is_413():
    ops = [{"op": "test", "path": "/kind", "value": "Pod"}] * (MAX_OPERATIONS + 1)
    err = failure(pod(), ops)
    assert err.code == 413 and err.reason == "RequestEntityTooLarge"
    assert str(err) == f"The allowed maximum operations in a JSON patch is {MAX_OPERATIONS}, got {MAX_OPERATIONS + 1}"
    assert apply(pod(), ops[:MAX_OPERATIONS]) == pod()


def test_kubectl_scale_style_patch():
    deploy = {
        "kind": "Deployment",
        "spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "app", "image": "a:1"}]}}},
    }
    out = apply(
        deploy,
        [
            {"op": "replace", "path": "/spec/replicas", "value": 3},
            {"op": "add", "path": "/spec/template/spec/containers/0/env", "value": [{"name": "MODE", "value": "fast"}]},
        ],
    )
    assert out["spec"]["replicas"] == 3
    assert out["spec"]["template"]["spec"]["containers"][0]["env"] == [{"name": "MODE", "value": "fast"}]


async def test_over_http_copies_may_add_at_most_3_mib(tmp_path):
    """evanphx/json-patch's AccumulatedCopySizeLimit as kube-apiserver sets it (JSONPatchMaxCopyBytes): copies of a
    document into itself double it each time; 26 of them kept the server building 2^26 copies (no answer in 10 s)."""
    import asyncio
    import json

    from kubernetes import client
    from kubernetes.client.rest import ApiException

    from tests.served import served

    async with served(tmp_path) as (_, api_client):
        core = client.CoreV1Api(api_client)
        await asyncio.to_thread(core.create_namespaced_config_map, "default", {"metadata": {"name": "c"}})
        ops = [{"op": "add", "path": "/data", "value": {"x": "a" * 1000}}]
        ops += [{"op": "copy", "from": "/data/x", "path": f"/data/y{i}"} for i in range(3200)]  # 1,002 bytes each
        with pytest.raises(ApiException) as e:
            await asyncio.to_thread(core.patch_namespaced_config_map, "c", "default", ops, dry_run="All")
        assert e.value.status == 422
        status = json.loads(e.value.body)
        assert (status["message"], status["details"]) == (
            "the server rejected our request due to an error in our request", {})
        got = await asyncio.to_thread(core.patch_namespaced_config_map, "c", "default", ops[:500], dry_run="All")
        assert len(got.data) == 500  # x and 499 copies (a ConfigMap holds 1 MiB)
        doubling = [{"op": "add", "path": "/metadata/annotations", "value": {}}] + [
            {"op": "copy", "from": "/metadata", "path": f"/metadata/annotations/x{i}"} for i in range(26)]
        with pytest.raises(ApiException) as e:
            await asyncio.to_thread(core.patch_namespaced_config_map, "c", "default", doubling, dry_run="All")
        assert e.value.status == 422 and json.loads(e.value.body)["reason"] == "Invalid"


async def test_over_http_a_failed_test_answers_upstreams_generic_422_and_changes_nothing(tmp_path):
    """kube-apiserver's jsonPatcher answers an operation that does not apply (a failed `test` among them) with
    NewGenericServerResponse(422, "", {}, "", err, 0, false): reason Invalid, the generic message in place of the
    library's, and a details struct with every field empty, which Go encodes as {}. The operations before it are
    not applied."""
    import asyncio

    from tests.served import served

    async with served(tmp_path) as (_, api):
        def request(method: str, path: str, body: bytes, ctype: str) -> tuple[int, bytes]:
            r = api.rest_client.pool_manager.request(method, api.configuration.host + path, body=body,
                                                     headers={"Content-Type": ctype})
            return r.status, r.data

        cms = "/api/v1/namespaces/default/configmaps"
        code, _ = await asyncio.to_thread(request, "POST", cms, b'{"metadata":{"name":"c"},"data":{"v":"1"}}',
                                          "application/json")
        assert code == 201
        ops = b'[{"op":"replace","path":"/data/v","value":"2"},{"op":"test","path":"/data/v","value":"1"}]'
        code, body = await asyncio.to_thread(request, "PATCH", f"{cms}/c", ops, "application/json-patch+json")
        assert (code, body) == (422, b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
                                     b'"message":"the server rejected our request due to an error in our request",'
                                     b'"reason":"Invalid","details":{},"code":422}\n')
        code, body = await asyncio.to_thread(request, "GET", f"{cms}/c", None, "application/json")
        assert code == 200 and b'"data":{"v":"1"}' in body
