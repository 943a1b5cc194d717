"""Acceptance for issue 13: `kubectl api-resources` lists what kube-apiserver
1.37 lists.

The expected API is every (group, version, kind) release-1.37's definitions
(kubernetes-validate) give, with the resource name, scope, short names, verbs
and categories upstream's discovery documents give for that kind
(tests/apiserver/data/api_resources_1.37.json, from kubernetes/kubernetes
api/discovery). Both discovery documents the server publishes are compared
with it: aggregated discovery (every version) and what `kubectl api-resources
-o json` prints (one row per group and resource). Any difference fails,
except those the README lists under "Known differences from kube-apiserver
1.37 discovery", each with its reason.
"""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

import pytest

from nanokube import schema

from .test_bad_input import HTTP


@pytest.fixture(scope="module")
def cluster(session_cluster):
    """The session's cluster (conftest.session_cluster): this module only reads discovery."""
    return session_cluster


ROOT = Path(__file__).resolve().parents[2]
DATA = json.loads((ROOT / "tests/apiserver/data/api_resources_1.37.json").read_text())["resources"]
#: kinds the definitions give a group-version-kind that are no resources of their own
NOT_RESOURCES = {("", "APIGroup"), ("", "APIVersions"), ("", "Status"), ("autoscaling", "Scale"),
                 ("policy", "Eviction"), ("authentication.k8s.io", "TokenRequest")}
AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"


def _attrs(namespaced: bool, kind: str, short: list, verbs: list, categories: list) -> dict:
    return {"kind": kind, "namespaced": namespaced, "shortNames": sorted(short or []),
            "verbs": sorted(verbs or []), "categories": sorted(categories or [])}


def expected() -> dict[tuple[str, str, str], dict]:
    """(group, version, resource) -> attributes, for every resource kind of 1.37."""
    by_kind = {(r["group"], r["kind"]): r for r in DATA}
    out = {}
    for d in schema.builtin_definitions().values():
        for gvk in d.get("x-kubernetes-group-version-kind") or []:
            g, v, k = gvk["group"], gvk["version"], gvk["kind"]
            if k.endswith("List") or k in ("DeleteOptions", "WatchEvent") or (g, k) in NOT_RESOURCES:
                continue
            r = by_kind[(g, k)]
            out[(g, v, r["resource"])] = _attrs(r["namespaced"], k, r["shortNames"], r["verbs"], r["categories"])
    return out


def known_differences() -> set[str]:
    """`group/version resource` entries of the README's known-differences table."""
    text = (ROOT / "README.md").read_text()
    section = text.split("### Known differences from kube-apiserver 1.37 discovery", 1)[1].split("\n#", 1)[0]
    return set(re.findall(r"^\| `([^`]+)` \|", section, re.M))


def _key(g: str, v: str, r: str) -> str:
    return f"{g or 'core'}/{v} {r}"


def served(cluster) -> dict[tuple[str, str, str], dict]:
    out = {}
    for path in ("/api", "/apis"):
        h = HTTP(cluster.kubeconfig)
        with urllib.request.urlopen(urllib.request.Request(h.server + path, headers={"Accept": AGGREGATED}),
                                    context=h.ctx, timeout=30) as resp:
            doc = json.loads(resp.read())
        for item in doc["items"]:
            g = item["metadata"].get("name", "")
            # ObjectMeta's zero fields are omitted (a null creationTimestamp too, since 1.34), the core group's name
            assert item["metadata"] == ({"name": g} if g else {}), item["metadata"]
            for ver in item["versions"]:
                for r in ver["resources"]:
                    out[(g, ver["version"], r["resource"])] = _attrs(
                        r["scope"] == "Namespaced", r["responseKind"]["kind"], r.get("shortNames"), r.get("verbs"),
                        r.get("categories"))
    return out


def differences(want: dict, got: dict) -> dict[str, str]:
    diffs = {}
    for key in want.keys() | got.keys():
        name = _key(*key)
        if key not in got:
            diffs[name] = "not served"
        elif key not in want:
            diffs[name] = "not served by kube-apiserver 1.37"
        elif want[key] != got[key]:
            diffs[name] = f"served as {got[key]}, upstream {want[key]}"
    return diffs


def test_data_covers_every_resource_kind():
    kinds = {(r["group"], r["kind"]) for r in DATA}
    assert len(kinds) == len(DATA)
    assert expected(), "no resource kinds in the definitions"


def test_aggregated_discovery_matches_kube_apiserver(cluster):
    diffs = differences(expected(), served(cluster))
    known = known_differences()
    unexpected = {k: v for k, v in diffs.items() if k not in known}
    assert unexpected == {}, "differences the README does not list:\n" + "\n".join(
        f"{k}: {v}" for k, v in sorted(unexpected.items()))
    stale = sorted(known - diffs.keys())
    assert stale == [], f"README lists differences that are gone: {stale}"


def test_kubectl_api_resources(cluster):
    rows = json.loads(cluster.kubectl("api-resources", "-o", "json").stdout)["resources"]
    want = expected()
    known = known_differences()
    by_group_resource = {}
    for (g, v, r), attrs in want.items():
        by_group_resource.setdefault((g, r), []).append((v, attrs))
    seen = set()
    for row in rows:
        g, r = row.get("group", ""), row["name"]
        seen.add((g, r))
        if (g, r) not in by_group_resource:
            assert _key(g, row["version"], r) in known, f"kubectl lists {g}/{r}, which 1.37 does not serve"
            continue
        attrs = dict(by_group_resource[(g, r)]).get(row["version"])
        got = _attrs(row["namespaced"], row["kind"], row.get("shortNames"), row.get("verbs"), row.get("categories"))
        if attrs != got:
            assert _key(g, row["version"], r) in known, f"{g}/{row['version']} {r}: kubectl prints {got}, upstream {attrs}"
    for (g, r), versions in by_group_resource.items():
        if (g, r) not in seen:
            assert any(_key(g, v, r) in known for v, _ in versions), f"kubectl api-resources lacks {g}/{r}"
