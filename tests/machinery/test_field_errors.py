"""Field errors print their values as upstream's field.Error.ErrorBody in 1.37: strings %q,
bools, ints and floats %v, everything else (nil, lists, maps, structs) json.Marshal'ed; Required,
Forbidden, TooLong and Internal errors print none; NotSupported, TooLong and TooMany word their
details as upstream's constructors."""

import asyncio
import json

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from nanokube.machinery.gofmt import Struct
from nanokube.machinery.validation import (
    OMIT,
    FieldError,
    duplicate,
    invalid,
    not_supported,
    too_long,
    too_many,
)
from tests.served import served


def test_values_print_by_their_go_type():
    assert str(invalid("f", "a\tb", "d")) == 'f: Invalid value: "a\\tb": d'
    assert str(invalid("f", 5, "d")) == "f: Invalid value: 5: d"
    assert str(invalid("f", 2.0, "d")) == "f: Invalid value: 2: d"
    assert str(invalid("f", 1e6, "d")) == "f: Invalid value: 1e+06: d"
    assert str(invalid("f", False, "d")) == "f: Invalid value: false: d"
    assert str(invalid("f", None, "d")) == "f: Invalid value: null: d"  # json.Marshal(nil), unquoted
    assert str(invalid("f", ["a", "b"], "d")) == 'f: Invalid value: ["a","b"]: d'
    assert str(invalid("f", {"z": "1", "a": "2"}, "d")) == 'f: Invalid value: {"a":"2","z":"1"}: d'
    assert str(duplicate("f[1]", Struct(IP="10.0.0.1"))) == 'f[1]: Duplicate value: {"IP":"10.0.0.1"}'
    assert str(invalid("f", OMIT, "cannot disable")) == "f: Invalid value: cannot disable"


def test_errors_without_values_print_none():
    assert FieldError("FieldValueTooLong", "f", "may not be more than 3 bytes", "abcd", True).message == \
        "Too long: may not be more than 3 bytes"
    assert FieldError("FieldValueRequired", "f", "", "", True).message == "Required value"


def test_not_supported_quotes_each_value_and_says_nothing_without_any():
    assert not_supported("f", "x", ["A", 'q"uote']).message == \
        'Unsupported value: "x": supported values: "A", "q\\"uote"'
    assert not_supported("f", 3, [1, 2.5, {"a": 1}]).message == \
        'Unsupported value: 3: supported values: "1", "2.5", "{\\"a\\":1}"'
    assert not_supported("f", "x", []).message == 'Unsupported value: "x"'


def test_too_long_and_too_many_word_their_limits():
    assert too_long("f", 1).message == "Too long: may not be more than 1 byte"
    assert too_long("f", 63).message == "Too long: may not be more than 63 bytes"
    assert too_long("f", -1).message == "Too long: value is too long"
    assert too_many("f", 5, 1).message == "Too many: 5: must have at most 1 item"
    assert too_many("f", 5, 4).message == "Too many: 5: must have at most 4 items"
    assert too_many("f", -1, 4).message == "Too many: must have at most 4 items"
    assert too_many("f", 5, -1).message == "Too many: 5: has too many items"


# --- through the API -------------------------------------------------------------


@pytest.fixture
async def api(tmp_path):
    async with served(tmp_path) as (_, api_client):
        yield api_client


async def _refused(call, *args) -> str:
    with pytest.raises(ApiException) as e:
        await asyncio.to_thread(call, *args)
    assert e.value.status == 422, e.value.body
    return json.loads(e.value.body)["message"]


async def test_a_string_map_prints_with_its_keys_sorted(api):
    """ValidateDeploymentSpec hands the template's labels (a map[string]string) to field.Invalid:
    json.Marshal sorts the keys, whatever order the request had them in."""
    body = {"metadata": {"name": "web"}, "spec": {
        "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"zone": "b", "app": "other", "tier": "fe"}},
                     "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}
    assert await _refused(client.AppsV1Api(api).create_namespaced_deployment, "default", body) == (
        'Deployment.apps "web" is invalid: spec.template.metadata.labels: Invalid value: '
        '{"app":"other","tier":"fe","zone":"b"}: `selector` does not match template `labels`')


async def test_a_string_list_prints_as_json_and_an_unset_pointer_as_null(api):
    """validatePodDNSConfig hands the nameservers ([]string) over; a Service's unset
    loadBalancerClass (*string) is json.Marshal's null, unquoted."""
    core = client.CoreV1Api(api)
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox"}],
                                               "dnsPolicy": "None", "dnsConfig": {"nameservers": [
                                                   "10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"]}}}
    assert await _refused(core.create_namespaced_pod, "default", pod) == (
        'Pod "p" is invalid: spec.dnsConfig.nameservers: Invalid value: '
        '["10.0.0.1","10.0.0.2","10.0.0.3","10.0.0.4"]: must not have more than 3 nameservers')
    lb = {"metadata": {"name": "lb"}, "spec": {"type": "LoadBalancer", "ports": [{"port": 80}],
                                               "loadBalancerClass": "example.com/lb"}}
    await asyncio.to_thread(core.create_namespaced_service, "default", lb)
    unset = {"spec": {"loadBalancerClass": None}}
    assert await _refused(core.patch_namespaced_service, "lb", "default", unset) == (
        'Service "lb" is invalid: spec.loadBalancerClass: Invalid value: null: may not change once set')


async def test_a_label_selector_prints_in_its_structs_field_order(api):
    """ValidateImmutableField hands the new *metav1.LabelSelector over: matchLabels before
    matchExpressions, key/operator/values, whatever order the request wrote them in."""
    apps = client.AppsV1Api(api)
    labels = {"app": "web", "tier": "fe"}
    body = {"metadata": {"name": "web"}, "spec": {
        "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}
    await asyncio.to_thread(apps.create_namespaced_deployment, "default", body)
    moved = {"spec": {"selector": {"matchExpressions": [{"values": ["fe"], "operator": "In", "key": "tier"}],
                                   "matchLabels": {"app": "web"}}}}
    assert await _refused(apps.patch_namespaced_deployment, "web", "default", moved) == (
        'Deployment.apps "web" is invalid: spec.selector: Invalid value: {"matchLabels":{"app":"web"},'
        '"matchExpressions":[{"key":"tier","operator":"In","values":["fe"]}]}: field is immutable')


async def test_two_controller_references_are_named_and_printed_as_json(api):
    """The shape kube-apiserver 1.37 answers (as seen in the wild: `... Found "true" in references for
    FunctionRevision/a and FunctionRevision/b`), the references as []metav1.OwnerReference's JSON."""
    refs = [{"uid": "u1", "name": "a", "kind": "Rev", "apiVersion": "example.com/v1", "controller": True,
             "blockOwnerDeletion": True},
            {"apiVersion": "example.com/v1", "kind": "Rev", "name": "b", "uid": "u2", "controller": True}]
    body = {"metadata": {"name": "c", "ownerReferences": refs}}
    assert await _refused(client.CoreV1Api(api).create_namespaced_config_map, "default", body) == (
        'ConfigMap "c" is invalid: metadata.ownerReferences: Invalid value: [{"apiVersion":"example.com/v1",'
        '"kind":"Rev","name":"a","uid":"u1","controller":true,"blockOwnerDeletion":true},{"apiVersion":'
        '"example.com/v1","kind":"Rev","name":"b","uid":"u2","controller":true}]: Only one reference can have '
        'Controller set to true. Found "true" in references for Rev/a and Rev/b')
