"""A CRD's date-time and duration fields in rules as kube-apiserver's CEL reads them: string() of a
timestamp is RFC 3339 with the offset it was written with, of a duration its seconds ('5400s'), of
a double Go's %g ('1e+20'); a timestamp's accessors read UTC without a time zone (not the value's
own offset) and take an IANA name or a fixed offset as one. Over HTTP."""

from __future__ import annotations

import json

import pytest
from kubernetes.client.rest import ApiException

from tests.apiserver.apiextensions import install
from tests.apiserver.apiextensions.test_cel_equality_types import crd
from tests.apiserver.test_rest_managedfields import call
from tests.served import served

THINGS = "/apis/eq.example.com/v1/namespaces/default/things"
MESSAGE = ("[string(self.at), string(self.at.getHours()), string(self.at.getHours('America/New_York')), "
           "string(self.at.getDayOfWeek('+05:30')), string(self.window), string(double(self.replicas) * 1e20)]"
           ".join(' ')")


def _crd() -> dict:
    body = crd([])
    spec = body["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    spec["properties"]["window"] = {"type": "string", "format": "duration", "maxLength": 32}
    spec["x-kubernetes-validations"] = [
        {"rule": "self.at.getHours() != 22", "messageExpression": MESSAGE},
        {"rule": "self.at.getHours('+02:00') == 0 && self.at.getMinutes('Asia/Kolkata') == 30",
         "message": "not midnight in Kyiv"},
    ]
    return body


async def _refused(c, spec: dict) -> list[tuple[str, str]]:
    thing = {"apiVersion": "eq.example.com/v1", "kind": "Thing", "metadata": {"name": "t"}, "spec": spec}
    with pytest.raises(ApiException) as e:
        await call(c, "POST", THINGS, thing)
    assert e.value.status == 422
    return [(c["field"], c["message"]) for c in json.loads(e.value.body)["details"]["causes"]]


async def test_timestamps_and_durations_read_as_kube_apiserver_reads_them(tmp_path):
    async with served(tmp_path) as (_, c):
        await install(c, _crd(), THINGS)
        # 22:00 UTC on Sunday 31 December: midnight in Kyiv (+02:00), 03:30 on Monday in Delhi
        causes = await _refused(c, {"replicas": 3, "at": "2024-01-01T00:00:00.25+02:00", "window": "90m"})
        assert causes == [("spec", "Invalid value: 2024-01-01T00:00:00.25+02:00 22 17 1 5400s 3e+20")]
        causes = await _refused(c, {"replicas": 3, "at": "2024-01-01T01:00:00Z", "window": "1s"})
        assert causes == [("spec", "Invalid value: not midnight in Kyiv")]
