"""pods/log over HTTP in kube-apiserver's order: the query converted into PodLogOptions (400 in
strconv's and time.Parse's words), then ValidatePodLogOptions (one 422 holding every error),
both before the pod is looked up (404) and its container chosen (400)."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.served import served

PODS = "/api/v1/namespaces/default/pods"
TWO = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "two"},
       "spec": {"containers": [{"name": "a", "image": "busybox"}, {"name": "b", "image": "busybox"}]}}


async def _get(api, path: str) -> tuple[int, dict | str]:
    def send():
        r = api.rest_client.pool_manager.request("GET", api.configuration.host + path)
        text = r.data.decode()
        return r.status, json.loads(text) if r.headers.get("Content-Type", "").startswith("application/json") else text
    return await asyncio.to_thread(send)


@pytest.fixture
async def api(tmp_path):
    async with served(tmp_path) as (_, api_client):
        def create():
            return api_client.rest_client.pool_manager.request(
                "POST", api_client.configuration.host + PODS, body=json.dumps(TWO).encode(),
                headers={"Content-Type": "application/json"}).status
        assert await asyncio.to_thread(create) == 201
        yield api_client


async def test_options_are_judged_before_the_container_is_chosen(api):
    code, status = await _get(api, f"{PODS}/two/log?tailLines=-1")
    assert (code, status["reason"], status["message"]) == (
        422, "Invalid", 'PodLogOptions "two" is invalid: tailLines: Invalid value: -1: must be greater than or equal to 0')
    assert status["details"] == {"name": "two", "kind": "PodLogOptions", "causes": [
        {"reason": "FieldValueInvalid", "message": "Invalid value: -1: must be greater than or equal to 0",
         "field": "tailLines"}]}
    # valid options: the container is the question
    code, status = await _get(api, f"{PODS}/two/log?tailLines=1")
    assert (code, status["message"]) == (400, "a container name must be specified for pod two, choose one of: [a b]")
    code, status = await _get(api, f"{PODS}/two/log?container=c&limitBytes=1")
    assert (code, status["message"]) == (400, "container c is not valid for pod two")
    # no node yet: an empty log
    assert await _get(api, f"{PODS}/two/log?container=a&sinceSeconds=10&timestamps=true") == (200, "")


async def test_every_invalid_option_at_once_in_upstreams_order(api):
    code, status = await _get(api, f"{PODS}/two/log?sinceSeconds=0&limitBytes=0&tailLines=-5")
    assert code == 422 and status["message"] == (
        'PodLogOptions "two" is invalid: [tailLines: Invalid value: -5: must be greater than or equal to 0, '
        "limitBytes: Invalid value: 0: must be greater than 0, sinceSeconds: Invalid value: 0: must be greater than 0]")
    assert [c["field"] for c in status["details"]["causes"]] == ["tailLines", "limitBytes", "sinceSeconds"]
    code, status = await _get(api, f"{PODS}/two/log?sinceSeconds=0&sinceTime=2026-01-01T00:00:00Z")
    assert code == 422 and status["message"] == (
        'PodLogOptions "two" is invalid: []: Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified')


async def test_a_query_that_does_not_convert_is_a_400_before_validation(api):
    for query, message in (
            ("tailLines=abc", 'strconv.ParseInt: parsing "abc": invalid syntax'),
            ("limitBytes=99999999999999999999", 'strconv.ParseInt: parsing "99999999999999999999": value out of range'),
            # the fields convert in PodLogOptions' order: sinceSeconds before tailLines
            ("tailLines=x&sinceSeconds=y", 'strconv.ParseInt: parsing "y": invalid syntax'),
            ("sinceSeconds=0&tailLines=x", 'strconv.ParseInt: parsing "x": invalid syntax'),
            ("sinceTime=yesterday", 'parsing time "yesterday" as "2006-01-02T15:04:05Z07:00": cannot parse '
                                    '"yesterday" as "2006"'),
            ("sinceTime=2026-02-30T00:00:00Z", 'parsing time "2026-02-30T00:00:00Z": day out of range'),
            ("sinceTime=2026-01-01", 'parsing time "2026-01-01" as "2006-01-02T15:04:05Z07:00": cannot parse "" '
                                     'as "T"')):
        code, status = await _get(api, f"{PODS}/two/log?{query}")
        assert (code, status["reason"], status["message"]) == (400, "BadRequest", message), query


async def test_options_are_judged_before_the_pod_is_looked_up(api):
    code, status = await _get(api, f"{PODS}/missing/log?limitBytes=0")
    assert (code, status["message"]) == (
        422, 'PodLogOptions "missing" is invalid: limitBytes: Invalid value: 0: must be greater than 0')
    code, status = await _get(api, f"{PODS}/missing/log?tailLines=3")
    assert (code, status["message"]) == (404, 'pods "missing" not found')


async def test_a_since_time_outside_datetimes_years_is_read_as_go_reads_it(api):
    """fuzz63: a sinceTime in year 0, or one that a zone's offset moves past either end of years 1 to 9999,
    was a 500 (Python's datetime could not write it back for the kubelet); Go reads and writes any year, so it is
    as good as any sinceTime: the answer is the one a sinceTime of this century gets."""
    expected = await _get(api, f"{PODS}/two/log?container=a&sinceTime=2026-01-01T00:00:00Z")
    assert expected[0] < 500, expected
    for t in ("0000-01-01T00:00:00Z", "0000-01-01T00:00:00%2B01:00", "9999-12-31T23:59:59-23:00"):
        assert await _get(api, f"{PODS}/two/log?container=a&sinceTime={t}") == expected, t


async def test_a_stream_is_forbidden_with_the_gate_off_and_checked_with_it_on(api, monkeypatch):
    """KEP-3288: `stream` is PodLogsQuerySplitStreams' (alpha, off): without it any stream is
    forbidden; with it one of Stdout, Stderr, All, and a single stream not with tailLines."""
    from nanokube.machinery import featuregates

    code, status = await _get(api, f"{PODS}/two/log?stream=Stdout")
    assert (code, status["message"]) == (422, 'PodLogOptions "two" is invalid: stream: Forbidden: may not be specified')
    monkeypatch.setattr(featuregates, "GATES", featuregates.FeatureGates({"PodLogsQuerySplitStreams": True}))
    code, status = await _get(api, f"{PODS}/two/log?stream=stdout")
    assert (code, status["message"]) == (422, 'PodLogOptions "two" is invalid: stream: Unsupported value: "stdout": '
                                              'supported values: "Stdout", "Stderr", "All"')
    code, status = await _get(api, f"{PODS}/two/log?stream=Stderr&tailLines=2")
    assert (code, status["message"]) == (
        422, 'PodLogOptions "two" is invalid: []: Forbidden: `tailLines` and specific `stream` are mutually exclusive for now')
    code, status = await _get(api, f"{PODS}/two/log?stream=All&tailLines=2")
    assert code == 400 and status["message"].startswith("a container name must be specified"), status
