"""A CRD's additionalPrinterColumns as kube-apiserver's table convertor fills them, over HTTP with
kubectl's Table Accept header: the first value a `[*]` path finds, and a value that is not of the
column's type (or no value) is a null cell, which kubectl prints empty, an integer column
truncating a number; an explicit null in a string column is the JSONPath printer's "<no value>"."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
from kubernetes.client.rest import ApiException

from tests.apiserver.test_rest_managedfields import call
from tests.served import served
from tests.controllers import tries

KUBECTL = str(Path(sys.executable).parent / "kubectl")
GROUP = "cols.example.com"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
COLUMNS = [("Ports", "string", ".spec.ports[*].name"), ("Tags", "string", ".spec.tags"),
           ("Count", "string", ".spec.count"), ("Size", "number", ".spec.size"), ("Whole", "integer", ".spec.ratio"),
           ("Flag", "boolean", ".spec.flag"), ("When", "date", ".spec.count")]


def crd() -> dict:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"things.{GROUP}"},
            "spec": {"group": GROUP, "scope": "Namespaced", "names": {"plural": "things", "kind": "Thing"},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "additionalPrinterColumns": [{"name": n, "type": t, "jsonPath": p}
                                                                for n, t, p in COLUMNS],
                                   "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {
                                       "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}}]}}


async def _create_once_served(c, path: str, body: dict) -> None:
    """POSTs `body` to a CRD's collection, again while the CRD is not served yet (a 404)."""
    for _ in tries():
        try:
            await call(c, "POST", path, body)
            return
        except ApiException as e:
            assert e.status == 404
            await asyncio.sleep(0.05)


async def _table(c, path: str) -> dict:
    """GET `path` as kubectl asks for it, a Table."""
    def send():
        request = c.param_serialize("GET", path, header_params={"Accept": TABLE})
        response = c.call_api(*request[:4])
        response.read()
        return json.loads(response.data)
    return await asyncio.to_thread(send)

async def test_cells_take_the_first_value_of_the_columns_type(tmp_path):
    async with served(tmp_path) as (_, c):
        await call(c, "POST", CRDS, crd())
        things = f"/apis/{GROUP}/v1/namespaces/default/things"
        body = {"apiVersion": f"{GROUP}/v1", "kind": "Thing", "metadata": {"name": "t"},
                "spec": {"ports": [{"name": "http"}, {"name": "https"}], "tags": ["a", "b"], "count": 3,
                         "size": "50%", "ratio": 2.7, "flag": "yes"}}
        await _create_once_served(c, things, body)

        table = await _table(c, f"{things}/t")
        assert table["rows"][0]["cells"][1:] == ["http", '["a","b"]', "3", None, 2, None, None]
        # an explicit null is found: a string column prints it as the JSONPath printer prints no value
        await call(c, "POST", things, {**body, "metadata": {"name": "nulls"},
                                       "spec": {"ports": [{"name": None}], "tags": None, "size": None}})
        got = await _table(c, things)
        assert [r["cells"][1:] for r in got["rows"] if r["cells"][0] == "nulls"] == [
            ["<no value>", "<no value>", None, None, None, None, None]]
        # kubectl 1.37 prints a null cell as nothing between its columns' tabs
        out = await asyncio.to_thread(subprocess.run, [
            KUBECTL, "--kubeconfig", str(tmp_path / "kubeconfig"), "get", "things", "-o", "wide"],
            capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        head, _, row = out.stdout.splitlines()
        cut = [head.index(n.upper()) for n, _, _ in COLUMNS]
        cells = [row[a:b].strip() for a, b in zip(cut, cut[1:] + [len(row)])]
        assert cells == ["http", '["a","b"]', "3", "", "2", "", ""]


# client-go JSONPath cases fuzz64 found cut short, with the cell upstream's table convertor shows
DIALECT = [("Last", ".spec.ports[-1:].name", "https"), ("First", ".spec.ports[-2].name", "http"),
           ("Ready", '.status.conditions[?(@.type=="Ready")].status', "True"),
           ("Odd", ".spec.ports[?(@.weight)].name", "https"),
           ("Big", ".spec.ports[?(@.weight > 0.5)].name", "https"),
           ("Int", ".spec.ports[?(@.port==80)].name", "http"),  # a path's int (Go's) equals a stored int64
           ("App", ".metadata.labels.app\\.kubernetes\\.io/name", "web"),
           ("Dotted", ".metadata.labels['app.kubernetes.io/name']", None),  # read as .app.kubernetes.io/name
           ("Deep", "..port", "80"), ("Union", ".spec.ports[1,0].name", "https"), ("Step", ".spec.ports[1::2].name", "https"),
           ("Map", ".spec.tags[*]", None), ("Values", ".spec.tags.*", "1"), ("Past", ".spec.ports[2].name", None),
           ("Obj", ".spec.ports[0]", '{"name":"http","port":80,"x":"\\u003cb\\u003e"}')]


async def test_client_go_jsonpath_columns_and_columns_stop_at_one_the_table_cannot_parse(tmp_path):
    """validateSimpleJSONPath asks only for a leading '.', so a CRD whose column the table's JSONPath cannot
    parse is stored, and tableconvertor.New serves the columns before it. The columns before it are client-go
    JSONPath (DIALECT): filters, escaped dots, recursive descent, unions, negative indexes and steps; one that
    fails to evaluate is an empty cell. A path that does not start with '.' is refused at upstream's field
    name, JSONPath."""
    columns = [{"name": n, "type": "string", "jsonPath": p} for n, p, _ in DIALECT]
    columns += [{"name": "Bad", "type": "string", "jsonPath": ".spec.ports[x]"},
                {"name": "After", "type": "string", "jsonPath": ".spec.count"}]
    async with served(tmp_path) as (_, c):
        bad = crd()
        bad["spec"]["versions"][0]["additionalPrinterColumns"] = [{"name": "X", "type": "string", "jsonPath": "{.spec.count}"}]
        with pytest.raises(ApiException) as e:
            await call(c, "POST", CRDS, bad)
        assert (e.value.status, json.loads(e.value.body)["details"]["causes"]) == (422, [{
            "reason": "FieldValueInvalid", "field": "spec.additionalPrinterColumns[0].JSONPath",
            "message": 'Invalid value: "{.spec.count}": must be a simple json path starting with .'}])
        good = crd()
        good["spec"]["versions"][0]["additionalPrinterColumns"] = columns
        good["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"] = {
            "type": "object", "x-kubernetes-preserve-unknown-fields": True}
        await call(c, "POST", CRDS, good)
        things = f"/apis/{GROUP}/v1/namespaces/default/things"
        body = {"apiVersion": f"{GROUP}/v1", "kind": "Thing",
                "metadata": {"name": "t", "labels": {"app.kubernetes.io/name": "web"}},
                "spec": {"ports": [{"name": "http", "port": 80, "x": "<b>"}, {"name": "https", "port": 443, "weight": 1.5}],
                         "tags": {"b": 2, "a": 1}, "count": 3},
                "status": {"conditions": [{"type": "Synced", "status": "False"}, {"type": "Ready", "status": "True"}]}}
        await _create_once_served(c, things, body)
        table = await _table(c, f"{things}/t")
        assert [d["name"] for d in table["columnDefinitions"]] == ["Name"] + [n for n, _, _ in DIALECT]
        assert table["rows"][0]["cells"] == ["t"] + [cell for _, _, cell in DIALECT]


async def _kubectl_cells(tmp_path, columns: list[tuple[str, str, str]], spec: dict) -> tuple[list[str], list[str]]:
    """A Thing CRD with `columns` (name, type, jsonPath) and one Thing of `spec`: the column names and
    the cells `kubectl get things -o wide` prints for it (an empty cell as "")."""
    async with served(tmp_path) as (_, c):
        body = crd()
        body["spec"]["versions"][0]["additionalPrinterColumns"] = [
            {"name": n, "type": t, "jsonPath": p} for n, t, p in columns]
        await call(c, "POST", CRDS, body)
        await _create_once_served(c, f"/apis/{GROUP}/v1/namespaces/default/things", {
            "apiVersion": f"{GROUP}/v1", "kind": "Thing", "metadata": {"name": "t"}, "spec": spec})
        out = await asyncio.to_thread(subprocess.run, [
            KUBECTL, "--kubeconfig", str(tmp_path / "kubeconfig"), "get", "things", "-o", "wide"],
            capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    head, row = out.stdout.splitlines()
    names = head.split()
    cut = [head.index(n) for n in names]
    return names, [row[a:b].strip() for a, b in zip(cut, cut[1:] + [len(row)])]


async def test_strings_under_wildcard_and_recursive_descent_as_client_go_walks_them(tmp_path):
    """client-go's `.*` ranges over a string's bytes (Go's uint8s, which a string column prints as
    numbers and an integer column, wanting an int64, leaves empty) and `..` yields every non-empty
    string beside the maps and lists; both found nothing in a string before."""
    names, cells = await _kubectl_cells(tmp_path, [
        ("Deep", "string", ".spec.name.."), ("Byte", "string", ".spec.name.*"), ("Int", "integer", ".spec.name.*"),
        ("Tags", "string", ".spec.tags...*"), ("Empty", "string", ".spec.none..")],
        {"name": "é", "tags": ["ab"], "none": ""})
    assert names == ["NAME", "DEEP", "BYTE", "INT", "TAGS", "EMPTY"]
    assert cells == ["t", "é", "195", "", "ab", ""]


async def test_a_number_in_a_path_is_ascii_as_strconv_reads_it(tmp_path):
    """The scanner takes any Unicode digit into a number, as Go's unicode.IsDigit, but strconv parses
    ASCII ones only: a filter comparing with '٨٠' does not parse, so the table ends its columns there
    (it was read as 80)."""
    names, cells = await _kubectl_cells(tmp_path, [
        ("Port", "string", ".spec.ports[?(@.port==80)].name"), ("Arabic", "string", ".spec.ports[?(@.port==٨٠)].name"),
        ("After", "string", ".spec.count")], {"ports": [{"name": "http", "port": 80}], "count": 3})
    assert (names, cells) == (["NAME", "PORT"], ["t", "http"])


async def test_range_and_end_run_as_client_go_find_results_runs_them(tmp_path):
    """`{range}` runs the actions after it once per value it found, each run a result of its own, and
    the table shows the first result's first value: a range at the end of the first action shows the
    first element's field, one in a later action leaves the first action's value; an `end` outside any
    range is an error, an empty cell (all three were empty cells before)."""
    names, cells = await _kubectl_cells(tmp_path, [
        ("First", "string", ".spec.ports[*] range}{.name}{end"),
        ("Lead", "string", ".spec.count}{range .spec.ports[*]}{.name}{end"),
        ("Stray", "string", ".spec.count}{end"), ("After", "string", ".spec.count")],
        {"ports": [{"name": "http"}, {"name": "https"}], "count": 3})
    assert (names, cells) == (["NAME", "FIRST", "LEAD", "STRAY", "AFTER"], ["t", "http", "3", "", "3"])
