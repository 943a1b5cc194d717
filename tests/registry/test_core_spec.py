"""Pod spec pieces through the official client: dnsConfig (validatePodDNSConfig) as 1.37 checks it."""

from __future__ import annotations

import asyncio
import json

import pytest
from kubernetes.client.rest import ApiException


UNDERSCORE_SUBDOMAIN = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '_', '-' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'_?[a-z0-9]([-_a-z0-9]*[a-z0-9])?(\\._?[a-z0-9]([-_a-z0-9]*[a-z0-9])?)*')")


def _pod(name: str, **spec) -> dict:
    return {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "busybox"}], **spec}}


async def _refused(core, body: dict) -> str:
    with pytest.raises(ApiException) as e:
        await asyncio.to_thread(core.create_namespaced_pod, "default", body)
    assert e.value.status == 422, e.value.body
    return json.loads(e.value.body)["message"]


async def test_dns_searches_and_options_are_validated(core):
    config = {"searches": ["Bad.Example.com.", ".", "_sip._tcp.example.com.", "ok.example"],
              "options": [{"name": "ndots", "value": "2"}, {"value": "1"}]}
    assert await _refused(core, _pod("p", dnsConfig=config)) == (
        'Pod "p" is invalid: [spec.dnsConfig.searches[0]: Invalid value: "Bad.Example.com": '
        f'{UNDERSCORE_SUBDOMAIN}, spec.dnsConfig.options[1]: Required value: must not be empty]')
    config = {"searches": ["_sip._tcp.example.com.", "."], "options": [{"name": "ndots", "value": "2"}]}
    created = await asyncio.to_thread(core.create_namespaced_pod, "default", _pod("p", dnsConfig=config))
    assert created.spec.dns_config.searches == ["_sip._tcp.example.com.", "."]


async def test_dns_search_list_limits(core):
    many = [f"d{i}.example" for i in range(33)]
    listed = "[" + ",".join(f'"{s}"' for s in many) + "]"
    assert await _refused(core, _pod("p", dnsConfig={"searches": many})) == (
        f'Pod "p" is invalid: spec.dnsConfig.searches: Invalid value: {listed}: must not have more than 32 search paths')
    long = ["a" * 63 + "." + "b" * 63 + "." + "c" * 63 + "." + "d" * 61] * 9  # 9 x 253 + 8 spaces = 2285
    listed = "[" + ",".join(f'"{s}"' for s in long) + "]"
    assert await _refused(core, _pod("p", dnsConfig={"searches": long})) == (
        f'Pod "p" is invalid: spec.dnsConfig.searches: Invalid value: {listed}: must not have more than 2048 characters '
        "(including spaces) in the search list")


async def test_dns_policy_none_needs_a_config_with_a_nameserver(core):
    assert await _refused(core, _pod("p", dnsPolicy="None")) == (
        'Pod "p" is invalid: spec.dnsConfig: Required value: must provide `dnsConfig` when `dnsPolicy` is None')
    # an empty dnsConfig is a config: it lacks the nameserver, and that error is the only one of dnsConfig's
    assert await _refused(core, _pod("p", dnsPolicy="None", dnsConfig={})) == (
        'Pod "p" is invalid: spec.dnsConfig.nameservers: Required value: '
        "must provide at least one DNS nameserver when `dnsPolicy` is None")
    assert await _refused(core, _pod("p", dnsPolicy="None", dnsConfig={"options": [{}]})) == (
        'Pod "p" is invalid: spec.dnsConfig.nameservers: Required value: '
        "must provide at least one DNS nameserver when `dnsPolicy` is None")


async def test_an_exists_toleration_with_a_value_prints_the_internal_toleration(core):
    """validateTolerations hands the whole core.Toleration to field.Invalid: Go's field names, in its order."""
    toleration = {"effect": "NoSchedule", "value": "v", "operator": "Exists", "key": "k"}
    assert await _refused(core, _pod("p", tolerations=[toleration])) == (
        'Pod "p" is invalid: spec.tolerations[0].operator: Invalid value: {"Key":"k","Operator":"Exists","Value":"v",'
        '"Effect":"NoSchedule","TolerationSeconds":null}: value must be empty when `operator` is \'Exists\'')
