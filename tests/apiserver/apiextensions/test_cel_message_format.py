"""A CRD rule's messageExpression built with `<string>.format(...)` prints its arguments as cel-go's
ext.Strings v2 formatter does in kube-apiserver: `%s` of a timestamp is RFC 3339 ('...Z'), of a
duration its seconds ('5400s'), of a whole double '5', of bytes their text, a list or map as a CEL
literal with quoted strings; a clause given a type it does not take (`%d` of a double) is an
evaluation error, so the rule's message is reported instead. Over HTTP."""

from __future__ import annotations

import json

import pytest
from kubernetes.client.rest import ApiException

from tests.apiserver.apiextensions import install
from tests.apiserver.apiextensions.test_cel_equality_types import crd
from tests.apiserver.test_rest_managedfields import call
from tests.served import served

THINGS = "/apis/eq.example.com/v1/namespaces/default/things"
PRINTED = ("'%s replicas at %s, %s later, ratio %s, sizes %s, tags %s, raw %s, flags %s'.format(["
           "self.replicas, self.at, duration('90m'), double(self.replicas), self.sizes, ['a', 'b'], b'ok', "
           "{'on': true, 'mode': self.mode}])")
UNPRINTABLE = "'%d replicas'.format([double(self.replicas)])"


def _crd() -> dict:
    body = crd([])
    spec = body["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    spec["x-kubernetes-validations"] = [
        {"rule": "self.replicas < 3", "messageExpression": PRINTED},
        {"rule": "self.replicas < 4", "messageExpression": UNPRINTABLE, "message": "too many replicas"},
    ]
    return body


async def test_message_expressions_print_values_as_cel_go_formats_them(tmp_path):
    async with served(tmp_path) as (_, c):
        await install(c, _crd(), THINGS)
        thing = {"apiVersion": "eq.example.com/v1", "kind": "Thing", "metadata": {"name": "t"},
                 "spec": {"replicas": 5, "mode": "fast", "sizes": [1, 2], "at": "2024-01-01T00:00:00.5Z"}}
        with pytest.raises(ApiException) as e:
            await call(c, "POST", THINGS, thing)
        err = e.value
        assert err.status == 422
        causes = json.loads(err.body)["details"]["causes"]
        assert [(c["field"], c["message"]) for c in causes] == [
            ("spec", 'Invalid value: 5 replicas at 2024-01-01T00:00:00.5Z, 5400s later, ratio 5, sizes [1, 2], '
                     'tags ["a", "b"], raw ok, flags {"mode":"fast", "on":true}'),
            ("spec", "Invalid value: too many replicas"),
        ]
