"""serviceaccounts/token over HTTP: a TokenRequest body is decoded as its Go type before it is judged,
so a field of the wrong JSON type is the decoder's 400, as upstream's, never a server error."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.apiserver.test_rest_managedfields import call, refused
from tests.served import send, served

SA = "/api/v1/namespaces/default/serviceaccounts"
TOKEN = f"{SA}/robot/token"


@pytest.mark.parametrize("body, message", [
    ({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": 7},
     "json: cannot unmarshal number into Go struct field TokenRequest.spec of type v1.TokenRequestSpec"),
    ({"spec": {"audiences": "api"}},
     "json: cannot unmarshal string into Go struct field TokenRequestSpec.spec.audiences of type []string"),
    ({"spec": {"audiences": [1]}},
     "json: cannot unmarshal number into Go struct field TokenRequestSpec.spec.audiences of type string"),
    ({"spec": {"expirationSeconds": "3600"}},
     "json: cannot unmarshal string into Go struct field TokenRequestSpec.spec.expirationSeconds of type int64"),
    ({"spec": {"boundObjectRef": ["Pod"]}},
     "json: cannot unmarshal array into Go struct field TokenRequestSpec.spec.boundObjectRef of type "
     "v1.BoundObjectReference"),
    ([1], "json: cannot unmarshal array into Go value of type v1.TokenRequest"),
])
async def test_a_token_request_of_the_wrong_shape_is_a_bad_request(tmp_path, body, message):
    async with served(tmp_path) as (_, c):
        await call(c, "POST", SA, {"metadata": {"name": "robot"}})
        code, got = await refused(c, "POST", TOKEN, body)
        assert (code, got) == (400, f'TokenRequest in version "v1" cannot be handled as a TokenRequest: {message}')
        issued = await call(c, "POST", TOKEN, {"spec": {"audiences": ["api"], "expirationSeconds": 3600}})
        assert issued["spec"]["audiences"] == ["api"] and issued["status"]["token"].count(".") == 2


async def test_a_token_request_naming_another_account_or_namespace_is_refused(tmp_path):
    """The create handler refuses an object of another namespace (400) before TokenREST.Create, which refuses a
    body naming another account (422 on metadata.name); its own name and namespace are accepted (a slip found
    by fuzzing: any name was issued the URL's account's token)."""
    async with served(tmp_path) as (_, c):
        await call(c, "POST", SA, {"metadata": {"name": "robot"}})
        code, got = await refused(c, "POST", TOKEN, {"metadata": {"name": "other"}, "spec": {}})
        assert (code, got) == (422, 'TokenRequest.authentication.k8s.io "robot" is invalid: metadata.name: '
                                    'Invalid value: "other": must match the service account name if specified')
        code, got = await refused(c, "POST", TOKEN, {"metadata": {"namespace": "kube-system"}, "spec": {}})
        assert (code, got) == (400, "the namespace of the provided object does not match the namespace sent on the request")
        issued = await call(c, "POST", TOKEN, {"metadata": {"name": "robot", "namespace": "default"}, "spec": {}})
        assert issued["metadata"]["name"] == "robot" and issued["status"]["token"].count(".") == 2


async def test_a_token_request_of_another_account_uid_is_a_conflict(tmp_path):
    """TokenRequestServiceAccountUIDValidation (beta, on since 1.34): a TokenRequest whose metadata.uid is not
    the account's is a 409, so that a token is not issued to an account deleted and made again."""
    async with served(tmp_path) as (_, c):
        sa = await call(c, "POST", SA, {"metadata": {"name": "robot"}})
        code, got = await refused(c, "POST", TOKEN, {"metadata": {"uid": "not-robots"}, "spec": {}})
        assert (code, got) == (409, 'Operation cannot be fulfilled on TokenRequest.authentication.k8s.io "robot": the UID '
                                    f'in the token request (not-robots) does not match the UID of the service account '
                                    f'({sa["metadata"]["uid"]})')
        issued = await call(c, "POST", TOKEN, {"metadata": {"uid": sa["metadata"]["uid"]}, "spec": {}})
        assert issued["status"]["token"].count(".") == 2


async def test_a_token_request_answers_without_the_fields_its_type_lacks(tmp_path):
    """The answer echoes the decoded spec, which (a Go struct) keeps no unknown field: one holding a number
    past float64 was echoed and failed to encode (a 500, found by fuzz_sweep's subresources sweep:
    POST .../token {"spec": {"replicas": 1e999}}), a plain one was echoed back."""
    async with served(tmp_path) as (_, c):
        await call(c, "POST", SA, {"metadata": {"name": "robot"}})
        for spec in ('{"replicas": 1e999}', '{"audiences": ["api"], "replicas": 1, "boundObjectRef": null}'):
            code, issued = await send(c, "POST", TOKEN, f'{{"spec": {spec}, "extra": 1}}'.encode())
            assert code == 201, issued
            # (boundObjectRef has no omitempty: null when unbound)
            assert set(issued["spec"]) == {"audiences", "expirationSeconds", "boundObjectRef"} and "extra" not in issued


async def test_kubectl_create_token_prints_the_answer_kube_apiserver_gives(tmp_path):
    """`kubectl create token -o json|yaml` prints the TokenRequest answered: TokenREST fills the account's
    name, namespace and uid into the request's metadata, stamps its creation, and echoes the spec, whose
    boundObjectRef (no omitempty) is null for an unbound token. The request's own metadata is echoed."""
    kubectl = [str(Path(sys.executable).parent / "kubectl"), "--kubeconfig", str(tmp_path / "kubeconfig")]
    async with served(tmp_path) as (_, c):
        sa = await call(c, "POST", SA, {"metadata": {"name": "robot"}})
        uid = sa["metadata"]["uid"]
        for output in ("json", "yaml"):
            r = await asyncio.to_thread(subprocess.run, [*kubectl, "create", "token", "robot", "-o", output],
                                        capture_output=True, text=True, timeout=60)
            assert r.returncode == 0, r.stderr
            if output == "json":
                got = json.loads(r.stdout)
                assert list(got["metadata"]) == ["name", "namespace", "uid", "creationTimestamp"]
                assert got["spec"]["boundObjectRef"] is None and list(got["status"]) == ["token", "expirationTimestamp"]
            else:
                assert f"  name: robot\n  namespace: default\n  uid: {uid}\n" in r.stdout
                assert "  boundObjectRef: null\n" in r.stdout
        assert (got["metadata"]["name"], got["metadata"]["namespace"], got["metadata"]["uid"]) == ("robot", "default", uid)
        labelled = await call(c, "POST", TOKEN, {"metadata": {"labels": {"a": "b"}}, "spec": {}})
        assert list(labelled["metadata"]) == ["name", "namespace", "uid", "creationTimestamp", "labels"]
        assert labelled["metadata"]["labels"] == {"a": "b"}
