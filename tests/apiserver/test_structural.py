import asyncio
import copy

import orjson
import pytest

from nanokube import schema
from nanokube.apiserver import structural as st

POD = schema.kind_schema("", "v1", "Pod")
DEPLOYMENT = schema.kind_schema("apps", "v1", "Deployment")
SECRET = schema.kind_schema("", "v1", "Secret")


def pod(**spec) -> dict:
    base = {"containers": [{"name": "app", "image": "nginx", "ports": [{"containerPort": 80}],
                            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": 1}}}]}
    base.update(spec)
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "labels": {"a": "b"}, "creationTimestamp": None}, "spec": base}


def test_valid_pod_has_no_errors():
    assert st.check(pod(), POD, True) == ([], [])


def test_type_mismatch_message_matches_upstream_shape():
    errs, _ = st.check(pod(containers="x"), POD, True)
    assert errs == ["json: cannot unmarshal string into Go struct field PodSpec.spec.containers of type []v1.Container"]
    msg = st.decode_error_message("Pod", "v1", errs[0])
    assert msg.startswith('Pod in version "v1" cannot be handled as a Pod: json: cannot unmarshal string')


def test_map_values_and_nested_fields_name_the_field_path_without_indices():
    obj = pod()
    obj["metadata"]["labels"] = {"a": 1}
    obj["spec"]["containers"][0]["ports"][0]["containerPort"] = "80"
    errs, _ = st.check(obj, POD, True)
    assert errs == [
        "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.labels of type string",
        "json: cannot unmarshal string into Go struct field ContainerPort.spec.containers.ports.containerPort of type int32",
    ]


@pytest.mark.parametrize("value, fragment", [
    (2**31, "number 2147483648 into Go struct field"),
    (1.5, "number 1.5 into Go struct field"),
    (True, "bool into Go struct field"),
])
def test_int32_range_floats_and_bools(value, fragment):
    errs, _ = st.check(pod(terminationGracePeriodSeconds=0, priority=value), POD, True)
    assert len(errs) == 1 and fragment in errs[0] and errs[0].endswith("PodSpec.spec.priority of type int32")


def test_int64_accepts_large_values():
    assert st.check(pod(terminationGracePeriodSeconds=2**40), POD, True) == ([], [])


def test_null_means_unset_everywhere():
    assert st.check(pod(containers=None, nodeSelector={"a": None}, volumes=[None]), POD, True) == ([], [])


def test_null_times_stay_null_but_a_zero_creation_timestamp_is_left_out():
    """Go encodes a zero metav1.Time as null, except ObjectMeta's creationTimestamp (omitzero since 1.34):
    a template's `creationTimestamp: null` is not served back; a pointer time sent null is nil, left out
    (omitempty), as deletionTimestamp is."""
    d = {"metadata": {"name": "d", "creationTimestamp": None, "deletionTimestamp": None},
         "spec": {"selector": {"matchLabels": {"a": "b"}},
                  "template": {"metadata": {"creationTimestamp": None, "labels": {"a": "b"}}, "spec": {"containers": []}}},
         "status": {"conditions": [{"type": "Available", "status": "True", "lastUpdateTime": None}]}}
    assert st.check(d, DEPLOYMENT, True) == ([], [])
    assert d["metadata"] == {"name": "d"}
    assert d["spec"]["template"]["metadata"] == {"labels": {"a": "b"}}
    assert d["status"]["conditions"][0]["lastUpdateTime"] is None


def test_unknown_fields_collected_with_indices_only_when_strict():
    obj = pod(foo=1)
    obj["spec"]["containers"][0]["port"] = 80
    obj["metadata"]["region"] = "x"
    errs, unknown = st.check(obj, POD, True)
    assert errs == []
    assert unknown == ["metadata.region", "spec.containers[0].port", "spec.foo"]
    assert st.check(obj, POD, False) == ([], [])
    assert st.strict_error(unknown[:2]) == (
        'strict decoding error: unknown field "metadata.region", unknown field "spec.containers[0].port"')
    assert st.unknown_field_warnings(["spec.foo"]) == ['unknown field "spec.foo"']


def test_field_names_are_case_sensitive():
    _, unknown = st.check(pod(NodeName="n"), POD, True)
    assert unknown == ["spec.NodeName"]


def test_int_or_string():
    d = {"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"selector": {}, "template": {},
         "strategy": {"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}}}}
    assert st.check(d, DEPLOYMENT, True) == ([], [])
    d["spec"]["strategy"]["rollingUpdate"]["maxSurge"] = True
    errs, _ = st.check(d, DEPLOYMENT, True)
    assert errs == ["json: cannot unmarshal bool into Go struct field "
                    "RollingUpdateDeployment.spec.strategy.rollingUpdate.maxSurge of type int32"]


@pytest.mark.parametrize("q, ok", [("100m", True), ("1.5Gi", True), ("1e3", True), (2, True), (0.5, True),
                                   ("abc", False), ("", False), ("1Kb", False), (True, False)])
def test_quantity(q, ok):
    errs, _ = st.check(pod(overhead={"cpu": q}), POD, True)
    assert (errs == []) is ok
    if not ok:
        assert errs[0].startswith("quantities must match the regular expression")


def test_date_time():
    obj = pod()
    obj["metadata"]["creationTimestamp"] = "2025-01-02T03:04:05Z"
    obj["metadata"]["deletionTimestamp"] = "2025-01-02T03:04:05.123+02:00"
    assert st.check(obj, POD, True) == ([], [])
    obj["metadata"]["creationTimestamp"] = "yesterday"
    errs, _ = st.check(obj, POD, True)
    assert errs == ['parsing time "yesterday" as "2006-01-02T15:04:05Z07:00": cannot parse "yesterday" as "2006"']


def test_valid_times_are_remembered_only_within_a_bound():
    obj = pod()
    for i in range(5000):
        obj["metadata"]["creationTimestamp"] = f"2025-01-02T03:{i // 60 % 60:02d}:{i % 60:02d}.{i:06d}Z"
        assert st.check(obj, POD, True) == ([], [])
    assert 0 < len(st._GOOD_TIMES) <= 4096
    obj["metadata"]["creationTimestamp"] = "2025-01-02T03:04:60Z"  # a remembered time's prefix, out of range
    assert st.check(obj, POD, True)[0] == ['parsing time "2025-01-02T03:04:60Z": second out of range']


def test_a_fractional_utc_time_is_remembered_by_its_second():
    """Every eventTime is new (microseconds): its second stands for it, and only for UTC times."""
    obj = pod()
    obj["metadata"]["creationTimestamp"] = "2025-03-04T05:06:07.123456Z"
    assert st.check(obj, POD, True) == ([], [])
    assert "2025-03-04T05:06:07Z" in st._GOOD_TIMES and "2025-03-04T05:06:07.123456Z" not in st._GOOD_TIMES
    obj["metadata"]["creationTimestamp"] = "2025-03-04T05:06:07.654321Z"
    assert st.check(obj, POD, True) == ([], [])
    obj["metadata"]["creationTimestamp"] = "2025-03-04T05:06:07.5+24:00"  # the remembered second, a bad offset
    assert st.check(obj, POD, True)[0] == ['parsing time "2025-03-04T05:06:07.5+24:00": time zone offset out of range']
    obj["metadata"]["creationTimestamp"] = "2025-02-29T05:06:07.5Z"
    assert st.check(obj, POD, True)[0] == ['parsing time "2025-02-29T05:06:07.5Z": day out of range']


def test_base64_bytes():
    secret = {"apiVersion": "v1", "kind": "Secret", "data": {"k": "aGVsbG8="}}
    assert st.check(secret, SECRET, True) == ([], [])
    secret["data"]["k"] = "not base64!"
    errs, _ = st.check(secret, SECRET, True)
    assert errs == ["illegal base64 data at input byte 3"]


def test_raw_extension_and_managed_fields_accept_any_json():
    obj = pod()
    obj["metadata"]["managedFields"] = [{"manager": "m", "fieldsV1": {"f:spec": {"f:x": {}}}, "operation": "Apply"}]
    assert st.check(obj, POD, True) == ([], [])
    event = {"type": "ADDED", "object": {"anything": [1, "x"]}}
    assert st.check(event, schema.definitions()["io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent"], True) == ([], [])


def test_non_object_body():
    errs, _ = st.check([], POD, True)
    assert errs == ["json: cannot unmarshal array into Go value of type v1.Pod"]


def test_recursive_schema_compiles():
    crd = schema.kind_schema("apiextensions.k8s.io", "v1", "CustomResourceDefinition")
    props = {"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {"type": "string"}}}}}
    obj = {"spec": {"versions": [{"name": "v1", "schema": {"openAPIV3Schema": props}}]}}
    assert st.check(obj, crd, True) == ([], [])


def test_crd_style_schema():
    s = {"type": "object", "properties": {
        "spec": {"type": "object", "properties": {"port": {"x-kubernetes-int-or-string": True},
                                                  "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}}
    assert st.check({"spec": {"port": "http", "extra": {"x": 1}}}, s, True) == ([], [])
    _, unknown = st.check({"spec": {"bogus": 1}}, s, True)
    assert unknown == ["spec.bogus"]
    assert st.prune({"spec": {"bogus": 1, "extra": {"x": 1}}}, s) == {"spec": {"extra": {"x": 1}}}


def test_prune_drops_unknown_fields_and_keeps_the_rest():
    obj = pod(foo=1)
    obj["spec"]["containers"][0]["port"] = 80
    obj["metadata"]["managedFields"] = [{"fieldsV1": {"f:anything": {}}}]
    before = copy.deepcopy(obj)
    pruned = st.prune(obj, POD)
    assert obj == before
    assert "foo" not in pruned["spec"] and "port" not in pruned["spec"]["containers"][0]
    assert pruned["spec"]["containers"][0]["resources"] == obj["spec"]["containers"][0]["resources"]
    assert pruned["metadata"]["managedFields"] == [{"fieldsV1": {"f:anything": {}}}]
    assert st.check(pruned, POD, True) == ([], [])



async def _post_lease(api, lease: dict) -> tuple[int, dict]:
    """POST a Lease body as sent (the client's V1Lease model would reformat its times)."""
    def send():
        request = api.param_serialize("POST", "/apis/coordination.k8s.io/v1/namespaces/default/leases", body=lease,
                                      header_params={"Content-Type": "application/json", "Accept": "application/json"})
        response = api.call_api(*request[:4])
        response.read()
        return response.status, orjson.loads(response.data)
    return await asyncio.to_thread(send)


@pytest.mark.parametrize("renew, rest, layout", [
    ("2025-01-02T03:04:05Z", "Z", ".000000"),
    ("2025-01-02T03:04:05.123Z", ".123Z", ".000000"),
    ("2025-01-02T03:04:05.123456789Z", "789Z", "Z07:00"),
])
async def test_a_micro_time_needs_six_fraction_digits(tmp_path, renew, rest, layout):
    """MicroTime decodes with RFC3339Micro only (a Time takes any fraction): a Lease's renewTime with
    none, three or nine digits is a 400 naming the layout; six digits in another zone are served in UTC."""
    from tests.served import served

    async with served(tmp_path) as (_, api):
        code, got = await _post_lease(api, {"metadata": {"name": "l"}, "spec": {"renewTime": renew}})
        assert code == 400 and got["reason"] == "BadRequest", got
        assert got["message"] == (
            f'Lease in version "v1" cannot be handled as a Lease: parsing time "{renew}" as '
            f'"2006-01-02T15:04:05.000000Z07:00": cannot parse "{rest}" as "{layout}"')
        code, got = await _post_lease(
            api, {"metadata": {"name": "l"}, "spec": {"renewTime": "2025-01-02T03:04:05.123456+02:00"}})
        assert code == 201 and got["spec"]["renewTime"] == "2025-01-02T01:04:05.123456Z", got
