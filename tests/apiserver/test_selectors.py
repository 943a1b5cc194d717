import asyncio
import json

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from nanokube.machinery.errors import APIError
from nanokube.machinery.selectors import (
    field_requirements,
    matches_fields,
    matches_labels,
    parse_field_selector,
    parse_label_selector,
    selector_from_object,
    selector_to_string,
)
from tests.served import served
from tests.controllers import tries

LABELS = {"app": "web", "tier": "front", "env": "prod"}


@pytest.mark.parametrize(
    "sel,want",
    [
        ("app=web", True),
        ("app==web", True),
        ("app=db", False),
        ("app!=db", True),
        ("app!=web", False),
        ("missing!=x", True),
        ("tier in (front,back)", True),
        ("tier in (back)", False),
        ("missing in (x)", False),
        ("env notin (dev,test)", True),
        ("env notin (prod)", False),
        ("missing notin (x)", True),
        ("app", True),
        ("missing", False),
        ("!missing", True),
        ("!app", False),
        ("app=web,tier in (front),!missing,env", True),
        ("app=web,tier=back", False),
        ("  app = web ,  tier  in ( front , back ) ", True),
    ],
)
def test_label_selector_operators(sel, want):
    assert matches_labels(parse_label_selector(sel), LABELS) is want


def test_label_selector_parses_requirements():
    assert parse_label_selector("a=b,c!=d,e in (x,y),f notin (z),g,!h") == [
        ("a", "=", ("b",)), ("c", "!=", ("d",)), ("e", "in", ("x", "y")),
        ("f", "notin", ("z",)), ("g", "exists", ()), ("h", "!", ()),
    ]


def test_empty_value_matches_only_a_present_empty_label():
    reqs = parse_label_selector("a=")
    assert reqs == [("a", "=", ("",))]
    assert matches_labels(reqs, {"a": ""})
    assert not matches_labels(reqs, {})
    assert not matches_labels(reqs, {"a": "x"})


@pytest.mark.parametrize("sel, message", [
    ("a in x", "unable to parse requirement: found 'x' expected: '('"),
    ("a in (x", "unable to parse requirement: found '', expected: ',' or ')'"),
    ("a b", "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"),
    ("!", "unable to parse requirement: found '', expected: identifier"),
    ("a=b c", "found 'c', expected: ',' or 'end of string'"),
    ("a=b,,=c", "found ',', expected: identifier after ','"),
    ("((", "found '(', expected: !, identifier, or 'end of string'"),
    ("a>=5", "unable to parse requirement: found '=', expected: identifier"),
    ("a>x", "unable to parse requirement: values[0]: Invalid value: \"x\": for 'Gt', 'Lt' operators, the value must "
            "be an integer"),
    ("a" * 64, f'unable to parse requirement: <nil>: Invalid value: "{"a" * 64}": name part must be no more than 63 '
               "bytes"),
    ("a in (b," + "c" * 64 + ")", f'unable to parse requirement: values[1][a]: Invalid value: "{"c" * 64}": must be no '
                                  "more than 63 bytes"),
])
def test_label_selector_errors_are_400_with_upstreams_message(sel, message):
    with pytest.raises(APIError) as e:
        parse_label_selector(sel)
    assert e.value.code == 400
    assert e.value.message == message


def test_label_selector_values_as_upstream_reads_them():
    assert parse_label_selector("x in (foo,,baz),y,z notin ()") == [
        ("x", "in", ("", "baz", "foo")), ("y", "exists", ()), ("z", "notin", ("",))]
    assert parse_label_selector("in in (notin, in)") == [("in", "in", ("in", "notin"))]
    reqs = parse_label_selector("n>5,m<10")
    assert reqs == [("n", "gt", ("5",)), ("m", "lt", ("10",))]
    assert matches_labels(reqs, {"n": "6", "m": "9"})
    assert not matches_labels(reqs, {"n": "5", "m": "9"})
    assert not matches_labels(reqs, {"n": "x6", "m": "9"})
    assert not matches_labels(reqs, {"m": "9"})


@pytest.fixture
async def api(tmp_path):
    async with served(tmp_path) as (_, api_client):
        yield api_client


async def test_over_http_a_list_with_an_invalid_label_selector_is_a_400(api):
    core = client.CoreV1Api(api)
    await asyncio.to_thread(core.create_namespaced_config_map, "default",
                            {"metadata": {"name": "n7", "labels": {"n": "7"}}})
    for sel in ("a" * 64, "a=" + "x" * 64, "a in (b, c d)"):
        with pytest.raises(ApiException) as e:
            await asyncio.to_thread(core.list_namespaced_config_map, "default", label_selector=sel)
        assert e.value.status == 400, sel
        assert json.loads(e.value.body)["message"].startswith("unable to parse requirement: "), e.value.body
    with pytest.raises(ApiException) as e:  # the selector is judged first, as upstream decodes it with the options
        await asyncio.to_thread(core.list_namespaced_config_map, "default", label_selector="a" * 64,
                                resource_version="-1", resource_version_match="Exact")
    assert e.value.status == 400, e.value.body
    got = await asyncio.to_thread(core.list_namespaced_config_map, "default", label_selector="n>6,n<8")
    assert [c.metadata.name for c in got.items] == ["n7"]
    got = await asyncio.to_thread(core.list_namespaced_config_map, "default", label_selector="n>7")
    assert got.items == []


def test_selector_object_set_based():
    sel = {
        "matchLabels": {"app": "web"},
        "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["front", "back"]},
            {"key": "env", "operator": "NotIn", "values": ["dev"]},
            {"key": "env", "operator": "Exists"},
            {"key": "canary", "operator": "DoesNotExist"},
        ],
    }
    reqs = selector_from_object(sel)
    assert matches_labels(reqs, LABELS)
    assert not matches_labels(reqs, {**LABELS, "canary": "1"})
    assert not matches_labels(reqs, {**LABELS, "env": "dev"})
    assert selector_to_string(sel) == "app=web,tier in (back,front),env notin (dev),env,!canary"
    assert matches_labels(parse_label_selector(selector_to_string(sel)), LABELS)


def test_selector_object_nil_selects_nothing_empty_selects_everything():
    assert selector_from_object(None) is None
    assert not matches_labels(selector_from_object(None), LABELS)
    assert matches_labels(selector_from_object({}), LABELS)
    assert matches_labels(selector_from_object({}), None)


SUPPORTED = {"metadata.name": lambda o: o["metadata"]["name"], "spec.flag": lambda o: o["spec"].get("flag")}
OBJ = {"metadata": {"name": "x"}, "spec": {"flag": True}}


def _unsupported(label):
    return f"field label not supported: {label}"


@pytest.mark.parametrize(
    "sel,want",
    [("metadata.name=x", True), ("metadata.name==x", True), ("metadata.name!=x", False),
     ("metadata.name=y", False), ("spec.flag=true", True), ("metadata.name=x,spec.flag!=false", True)],
)
def test_field_selector(sel, want):
    assert matches_fields(parse_field_selector(sel, SUPPORTED, _unsupported), OBJ) is want


def test_field_selector_unsupported_label_is_400():
    with pytest.raises(APIError) as e:
        parse_field_selector("spec.other=1", SUPPORTED, _unsupported)
    assert e.value.code == 400
    assert "field label not supported: spec.other" in e.value.message


def test_field_selector_without_operator_is_400():
    with pytest.raises(APIError) as e:
        parse_field_selector("metadata.name", SUPPORTED, _unsupported)
    assert e.value.code == 400


def test_field_selector_escapes_and_terms_as_upstream_reads_them():
    assert field_requirements(r"b=x\,y\=z\\w,a!=v") == [("a", False, "v"), ("b", True, r"x,y=z\w")]
    assert field_requirements("a==b,,c=") == [("a", True, "b"), ("c", True, "")]
    assert field_requirements("a=!b") == [("a", True, "!b")]  # the first operator found splits the term
    with pytest.raises(APIError) as e:
        field_requirements("a=b!=c")
    assert e.value.code == 400 and e.value.message == "invalid field selector: unescaped character in value: 61"


async def test_over_http_field_selector_values_unescape_and_bad_escapes_are_400(core):
    for name, stype in (("odd", "x,y=z\\w"), ("plain", "Opaque")):
        await asyncio.to_thread(core.create_namespaced_secret, "default",
                                {"metadata": {"name": name}, "type": stype})
    got = await asyncio.to_thread(core.list_namespaced_secret, "default", field_selector=r"type=x\,y\=z\\w")
    assert [s.metadata.name for s in got.items] == ["odd"]
    got = await asyncio.to_thread(core.list_namespaced_secret, "default",
                                  field_selector=r"metadata.name!=plain,type!=x\,y\=z\\w")
    assert got.items == []
    for sel, message in (
        (r"type=a\b", "invalid field selector: invalid escape sequence: \\b"),
        ("type=a\\", "invalid field selector: invalid escape sequence: \\"),
        ("type=a=b", "invalid field selector: unescaped character in value: 61"),
        # sorted terms: the unparsable one sorts first, and every term parses before any field is judged
        ("zz=1,type", "invalid selector: 'zz=1,type'; can't understand 'type'"),
        (r"zz=1,type=a\b", "invalid field selector: invalid escape sequence: \\b"),
        ("zz=1,yy=2", "field label not supported: yy"),
        ("type = Opaque", "field label not supported: type "),
    ):
        with pytest.raises(ApiException) as e:
            await asyncio.to_thread(core.list_namespaced_secret, "default", field_selector=sel)
        assert e.value.status == 400, sel
        assert json.loads(e.value.body)["message"] == message, sel


async def test_over_http_each_kind_offers_its_field_labels_in_its_words(tmp_path):
    """The kind's field label conversion: Namespace and Node offer no metadata.namespace, a kind
    without a conversion of its own gets apimachinery's default words, a Job batch's, and a
    cluster-scoped custom resource no metadata.namespace (the CR converter's words)."""
    crd = {"metadata": {"name": "tiles.example.com"}, "spec": {
        "group": "example.com", "scope": "Cluster", "names": {"plural": "tiles", "kind": "Tile"},
        "versions": [{"name": "v1", "served": True, "storage": True,
                      "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}
    async with served(tmp_path) as (_, api_client):
        core = client.CoreV1Api(api_client)
        await asyncio.to_thread(client.ApiextensionsV1Api(api_client).create_custom_resource_definition, crd)
        objs = client.CustomObjectsApi(api_client)
        calls = [
            (lambda sel: core.list_namespace(field_selector=sel), "metadata.namespace=x",
             "field label not supported: metadata.namespace"),
            (lambda sel: core.list_node(field_selector=sel), "metadata.namespace=x",
             "field label not supported: metadata.namespace"),
            (lambda sel: core.list_namespaced_config_map("default", field_selector=sel), "data=x",
             '"data" is not a known field selector: only "metadata.name", "metadata.namespace"'),
            (lambda sel: client.BatchV1Api(api_client).list_namespaced_job("default", field_selector=sel),
             "spec.x=1", 'field label "spec.x" not supported for batchv1.Job'),
            (lambda sel: objs.list_cluster_custom_object("example.com", "v1", "tiles", field_selector=sel),
             "metadata.namespace=x", "field label not supported: metadata.namespace"),
        ]
        for _ in tries():  # until the new kind is served
            try:
                await asyncio.to_thread(objs.list_cluster_custom_object, "example.com", "v1", "tiles")
                break
            except ApiException:
                await asyncio.sleep(0.05)
        for call, sel, message in calls:
            with pytest.raises(ApiException) as e:
                await asyncio.to_thread(call, sel)
            assert e.value.status == 400, sel
            assert json.loads(e.value.body)["message"] == message
        names = await asyncio.to_thread(core.list_namespace, field_selector="metadata.name=default,status.phase=Active")
        assert [n.metadata.name for n in names.items] == ["default"]
        tiles = await asyncio.to_thread(objs.list_cluster_custom_object, "example.com", "v1", "tiles",
                                        field_selector="metadata.name=t")
        assert tiles["items"] == []


async def test_over_http_a_custom_resource_version_selects_on_its_own_selectable_fields(tmp_path):
    """selectableFields are per version (the CR converter's map by group version): a list at v2 offers
    v2's, not the storage version's."""
    schema = {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "color": {"type": "string"}, "size": {"type": "integer"}}}}}}
    crd = {"metadata": {"name": "dots.example.com"}, "spec": {
        "group": "example.com", "scope": "Namespaced", "names": {"plural": "dots", "kind": "Dot"},
        "versions": [{"name": "v1", "served": True, "storage": True, "schema": schema,
                      "selectableFields": [{"jsonPath": ".spec.color"}]},
                     {"name": "v2", "served": True, "storage": False, "schema": schema,
                      "selectableFields": [{"jsonPath": ".spec.size"}]}]}}
    async with served(tmp_path) as (_, api_client):
        await asyncio.to_thread(client.ApiextensionsV1Api(api_client).create_custom_resource_definition, crd)
        objs = client.CustomObjectsApi(api_client)
        dot = {"apiVersion": "example.com/v1", "kind": "Dot", "metadata": {"name": "d"}, "spec": {"color": "red", "size": 3}}
        for _ in tries():  # until the new kind is served
            try:
                await asyncio.to_thread(objs.create_namespaced_custom_object, "example.com", "v1", "default", "dots", dot)
                break
            except ApiException:
                await asyncio.sleep(0.05)

        async def names(version, sel):
            got = await asyncio.to_thread(objs.list_namespaced_custom_object, "example.com", version, "default", "dots",
                                          field_selector=sel)
            return [o["metadata"]["name"] for o in got["items"]]
        assert await names("v1", "spec.color=red") == ["d"]
        assert await names("v2", "spec.size=3") == ["d"]
        assert await names("v2", "spec.size=4") == []
        for version, sel in (("v1", "spec.size=3"), ("v2", "spec.color=red")):
            with pytest.raises(ApiException) as e:
                await names(version, sel)
            assert e.value.status == 400
            assert json.loads(e.value.body)["message"] == f"field label not supported: {sel.split('=')[0]}"
