import copy

from nanokube.apiserver.flowcontrol import FLOW_SCHEMAS, PRIORITY_LEVELS, dangling_condition
from nanokube.registry.base import all_resources

RES = {r.plural: r for r in all_resources() if r.group == "flowcontrol.apiserver.k8s.io"}
FS, PL = RES["flowschemas"], RES["prioritylevelconfigurations"]


def test_bootstrap_objects_are_valid_and_already_defaulted():
    """As upstream checks: defaulting changes none of the bootstrap objects."""
    for plural, objs in (("flowschemas", FLOW_SCHEMAS), ("prioritylevelconfigurations", PRIORITY_LEVELS)):
        for name, spec in objs.items():
            obj = {"metadata": {"name": name}, "spec": copy.deepcopy(spec)}
            RES[plural].strategy.default(obj, "v1")
            assert obj["spec"] == spec, name
            assert RES[plural].validate_create(obj) == [], name
    assert sorted(PRIORITY_LEVELS) == ["catch-all", "exempt", "global-default", "leader-election", "node-high",
                                       "system", "workload-high", "workload-low"]
    assert [FLOW_SCHEMAS[n]["matchingPrecedence"] for n in ("exempt", "probes", "global-default", "catch-all")] == [
        1, 2, 9900, 10000]


def test_priority_level_defaults_and_validation():
    pl = {"metadata": {"name": "p"}, "spec": {"type": "Limited", "limited": {"limitResponse": {"type": "Queue"}}}}
    PL.strategy.default(pl, "v1")
    assert pl["spec"]["limited"] == {"nominalConcurrencyShares": 30, "lendablePercent": 0,
                                     "limitResponse": {"type": "Queue"}}  # no queuing is made up
    assert [(e.field, e.message) for e in PL.validate_create(pl)] == [
        ("spec.limited.limitResponse.queuing", "Required value: must not be empty if limited.limitResponse.type is Limited")]
    pl["spec"]["limited"]["limitResponse"]["queuing"] = {"queues": 0}
    PL.strategy.default(pl, "v1")
    assert pl["spec"]["limited"]["limitResponse"]["queuing"] == {"queues": 64, "handSize": 8, "queueLengthLimit": 50}
    pl["spec"]["limited"]["limitResponse"]["queuing"]["handSize"] = 100
    assert [(e.field, e.detail) for e in PL.validate_create(pl)] == [
        ("spec.limited.limitResponse.queuing.handSize", "should not be greater than queues (64)")]
    assert [e.field for e in PL.validate_create({"metadata": {"name": "p"}, "spec": {"type": "Limited"}})] == ["spec.limited"]


def test_flow_schema_validation_and_columns():
    fs = {"metadata": {"name": "f"}, "spec": {"priorityLevelConfiguration": {"name": "workload-low"}, "rules": [
        {"subjects": [{"kind": "ServiceAccount", "serviceAccount": {"name": "x"}}],
         "resourceRules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]}]}}
    FS.strategy.default(fs, "v1")
    assert fs["spec"]["matchingPrecedence"] == 1000
    assert [e.field for e in FS.validate_create(fs)] == [
        "spec.rules[0].subjects[0].serviceAccount.namespace", "spec.rules[0].resourceRules[0].namespaces"]
    fs["status"] = {"conditions": [dangling_condition(fs, True, "2026-01-01T00:00:00Z")]}
    assert [c.fn(fs) for c in FS.strategy.columns if c.name != "Age"] == ["f", "workload-low", 1000, "<none>", "False"]
    exempt = {"metadata": {"name": "exempt"}, "spec": PRIORITY_LEVELS["exempt"]}
    assert [c.fn(exempt) for c in PL.strategy.columns if c.name != "Age"] == [
        "exempt", "Exempt", "<none>", "<none>", "<none>", "<none>"]


def _schema(name="f", precedence=500, pl="workload-low", **rule):
    return {"metadata": {"name": name}, "spec": {"matchingPrecedence": precedence, "priorityLevelConfiguration": {"name": pl},
                                                 "rules": [{"subjects": [{"kind": "User", "user": {"name": "u"}}], **rule}]}}


NS_MSG = ("each member of this list must be '*' or a DNS-1123 label; a lowercase RFC 1123 label must consist of lower case "
          "alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or "
          "'123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")


def test_flow_schema_spec_is_validated_as_upstream():
    """ValidateFlowSchemaSpec: what the fuzzer stored (verbs, namespaces and a priority level no request
    could name, matchingPrecedence 1 for a schema other than exempt) is refused with upstream's messages."""
    ok = {"resourceRules": [{"verbs": ["get", "list"], "apiGroups": ["*"], "resources": ["pods"], "namespaces": ["a"]}],
          "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["/healthz", "/apis/*", "/"]}]}
    assert FS.validate_create(_schema(**ok)) == []
    cases = [
        (_schema(precedence=1, **ok), ["spec.matchingPrecedence: Invalid value: 1: only the schema named 'exempt' may have matchingPrecedence 1"]),
        (_schema(precedence=0, **ok), ["spec.matchingPrecedence: Invalid value: 0: must be a positive value"]),
        (_schema(precedence=10001, **ok), ["spec.matchingPrecedence: Invalid value: 10001: must not be greater than 10000"]),
        (_schema(pl="a\n", **ok), ['spec.priorityLevelConfiguration.name: Invalid value: "a\\n": a lowercase RFC 1123 subdomain '
                                   "must consist of lower case alphanumeric characters, '-' or '.', and must start and end with "
                                   "an alphanumeric character (e.g. 'example.com', regex used for validation is "
                                   "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"]),
        (_schema(resourceRules=[{"verbs": ["get", "x"], "apiGroups": [], "resources": ["*", "pods"], "namespaces": ["A"]}]),
         ['spec.rules[0].resourceRules[0].verbs: Unsupported value: ["get","x"]: supported values: "create", "delete", '
          '"deletecollection", "get", "list", "patch", "proxy", "update", "watch"',
          "spec.rules[0].resourceRules[0].apiGroups: Required value: resource rules must supply at least one api group",
          'spec.rules[0].resourceRules[0].resources: Invalid value: ["*","pods"]: if \'*\' is present, must not specify other resources',
          f'spec.rules[0].resourceRules[0].namespaces[0]: Invalid value: "A": {NS_MSG}']),
        (_schema(nonResourceRules=[{"verbs": [], "nonResourceURLs": ["healthz", "/a b", "/a//b", "/a*", "/*/*", ""]}]),
         ["spec.rules[0].nonResourceRules[0].verbs: Required value: verbs must contain at least one value",
          'spec.rules[0].nonResourceRules[0].nonResourceURLs[0]: Invalid value: "healthz": must start with slash',
          'spec.rules[0].nonResourceRules[0].nonResourceURLs[1]: Invalid value: "/a b": must not contain white-space',
          'spec.rules[0].nonResourceRules[0].nonResourceURLs[2]: Invalid value: "/a//b": must not contain double slash',
          'spec.rules[0].nonResourceRules[0].nonResourceURLs[3]: Invalid value: "/a*": wildcard can only do suffix matching',
          'spec.rules[0].nonResourceRules[0].nonResourceURLs[4]: Invalid value: "/*/*": wildcard can only do suffix matching',
          'spec.rules[0].nonResourceRules[0].nonResourceURLs[5]: Invalid value: "": must not be empty']),
    ]
    for fs, errors in cases:
        assert [str(e) for e in FS.validate_create(fs)] == errors
    subjects = [{"kind": "ServiceAccount", "serviceAccount": {"name": "A", "namespace": "ns"}, "user": {"name": "u"}},
                {"kind": "Group", "group": {"name": ""}},
                {"kind": "User"}]
    fs = _schema(**ok)
    fs["spec"]["rules"][0]["subjects"] = subjects
    assert [str(e) for e in FS.validate_create(fs)] == [
        'spec.rules[0].subjects[0].serviceAccount.name: Invalid value: "A": a lowercase RFC 1123 subdomain must consist of '
        "lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. "
        "'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
        "spec.rules[0].subjects[0].user: Forbidden: user is forbidden when subject kind is not 'User'",
        "spec.rules[0].subjects[1].group.name: Required value",
        "spec.rules[0].subjects[2].user: Required value: user is required when subject kind is 'User'"]


async def test_over_http_priority_levels_and_flow_schemas_in_upstreams_words(tmp_path):
    """ValidatePriorityLevelConfigurationSpec: the exempt name and type go together, the other type's
    member is Forbidden, queues are at most 10^7 and a hand is bounded by shuffle sharding's 60 bits;
    v1's defaults make zero queue settings and a zero matchingPrecedence the defaults; an unknown
    distinguisher prints the internal FlowDistinguisherMethod."""
    import asyncio
    import json

    import pytest

    from kubernetes import client
    from kubernetes.client.rest import ApiException

    from tests.served import served

    async def causes(create, body):
        with pytest.raises(ApiException) as e:
            await asyncio.to_thread(create, body)
        assert e.value.status == 422
        return [(c["field"], c["message"]) for c in json.loads(e.value.body)["details"]["causes"]]

    async with served(tmp_path) as (_, api_client):
        fc = client.FlowcontrolApiserverV1Api(api_client)
        assert await causes(fc.create_priority_level_configuration, {"metadata": {"name": "p"}, "spec": {
            "type": "Exempt", "limited": {"limitResponse": {"type": "Reject"}}, "exempt": {"lendablePercent": 101}}}) == [
            ("spec.type", "Invalid value: \"Exempt\": type must be 'Exempt' if and only if name is 'exempt'"),
            ("spec.limited", "Forbidden: must be nil if the type is not Limited"),
            ("spec.exempt.lendablePercent", "Invalid value: 101: must be between 0 and 100, inclusive")]
        queuing = {"queues": 20_000_000, "handSize": 2, "queueLengthLimit": 0}
        assert await causes(fc.create_priority_level_configuration, {"metadata": {"name": "q"}, "spec": {
            "type": "Limited", "exempt": {}, "limited": {"borrowingLimitPercent": -1,
                                                         "limitResponse": {"type": "Queue", "queuing": queuing}}}}) == [
            ("spec.exempt", "Forbidden: must be nil if the type is Limited"),
            ("spec.limited.limitResponse.queuing.queues", "Invalid value: 20000000: must not be greater than 10000000"),
            ("spec.limited.borrowingLimitPercent", "Invalid value: -1: if specified, must be a non-negative integer")]
        queuing.update(queues=512, handSize=8)
        assert await causes(fc.create_priority_level_configuration, {"metadata": {"name": "q"}, "spec": {
            "type": "Limited", "limited": {"limitResponse": {"type": "Queue", "queuing": queuing}}}}) == [
            ("spec.limited.limitResponse.queuing.handSize",
             "Invalid value: 8: required entropy bits of deckSize 512 and handSize 8 should not be greater than 60")]
        queuing.update(queues=0, handSize=0)
        made = await asyncio.to_thread(fc.create_priority_level_configuration, {"metadata": {"name": "q"}, "spec": {
            "type": "Limited", "limited": {"limitResponse": {"type": "Queue", "queuing": queuing}}}})
        q = made.spec.limited.limit_response.queuing
        assert (q.queues, q.hand_size, q.queue_length_limit) == (64, 8, 50)
        schema = {"metadata": {"name": "f"}, "spec": {"matchingPrecedence": 0, "priorityLevelConfiguration": {"name": "q"},
                                                      "distinguisherMethod": {"type": "ByNothing"}}}
        assert await causes(fc.create_flow_schema, schema) == [
            ("spec.distinguisherMethod.type",
             'Unsupported value: {"Type":"ByNothing"}: supported values: "ByNamespace", "ByUser"')]
        del schema["spec"]["distinguisherMethod"]
        made = await asyncio.to_thread(fc.create_flow_schema, schema)
        assert made.spec.matching_precedence == 1000


async def test_over_http_the_mandatory_objects_keep_their_fixed_specs(tmp_path):
    """ValidateFlowSchema / ValidatePriorityLevelConfiguration: the mandatory 'exempt' and
    'catch-all' objects may not change their spec (the internal spec printed as Go's JSON of the
    untagged structs), except the exempt level's own `exempt` settings."""
    import asyncio
    import json

    import pytest
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    from tests.served import served

    async def causes(call, *args):
        with pytest.raises(ApiException) as e:
            await asyncio.to_thread(call, *args)
        assert e.value.status == 422
        return [(c["field"], c["message"]) for c in json.loads(e.value.body)["details"]["causes"]]

    async with served(tmp_path) as (_, api_client):
        fc = client.FlowcontrolApiserverV1Api(api_client)
        tuned = await asyncio.to_thread(fc.patch_priority_level_configuration, "exempt",
                                        {"spec": {"exempt": {"nominalConcurrencyShares": 10, "lendablePercent": 20}}})
        assert (tuned.spec.exempt.nominal_concurrency_shares, tuned.spec.exempt.lendable_percent) == (10, 20)
        assert await causes(fc.patch_priority_level_configuration, "exempt",
                            {"spec": {"limited": {"limitResponse": {"type": "Reject"}}}}) == [
            ("spec.limited", "Forbidden: must be nil if the type is not Limited"),
            ("spec", 'Invalid value: {"Type":"Exempt","Limited":{"NominalConcurrencyShares":30,"LimitResponse":'
                     '{"Type":"Reject","Queuing":null},"LendablePercent":0,"BorrowingLimitPercent":null},"Exempt":'
                     '{"NominalConcurrencyShares":10,"LendablePercent":20}}: spec of \'exempt\' except the '
                     "'spec.exempt' field must equal the fixed value")]
        assert await causes(fc.patch_priority_level_configuration, "catch-all",
                            {"spec": {"limited": {"nominalConcurrencyShares": 6}}}) == [
            ("spec", 'Invalid value: {"Type":"Limited","Limited":{"NominalConcurrencyShares":6,"LimitResponse":'
                     '{"Type":"Reject","Queuing":null},"LendablePercent":0,"BorrowingLimitPercent":null},"Exempt":null}: '
                     "spec of 'catch-all' must equal the fixed value")]
        assert await causes(fc.patch_flow_schema, "exempt", {"spec": {"matchingPrecedence": 2}}) == [
            ("spec", 'Invalid value: {"PriorityLevelConfiguration":{"Name":"exempt"},"MatchingPrecedence":2,'
                     '"DistinguisherMethod":null,"Rules":[{"Subjects":[{"Kind":"Group","User":null,"Group":'
                     '{"Name":"system:masters"},"ServiceAccount":null}],"ResourceRules":[{"Verbs":["*"],"APIGroups":'
                     '["*"],"Resources":["*"],"ClusterScope":true,"Namespaces":["*"]}],"NonResourceRules":[{"Verbs":'
                     '["*"],"NonResourceURLs":["*"]}]}]}: spec of \'exempt\' must equal the fixed value')]
        changed = await causes(fc.patch_flow_schema, "catch-all", {"spec": {"distinguisherMethod": {"type": "ByNamespace"}}})
        assert [f for f, _ in changed] == ["spec"]
        assert '"DistinguisherMethod":{"Type":"ByNamespace"}' in changed[0][1]
        assert changed[0][1].endswith("}]}]}: spec of 'catch-all' must equal the fixed value")
        kept = await asyncio.to_thread(fc.patch_flow_schema, "catch-all", {"metadata": {"labels": {"a": "b"}}})
        assert kept.spec.matching_precedence == 10000
