"""`nanokube up --etcd-compaction-interval`: the API server compacts its store each interval, at the
revision the previous round saw, as kube-apiserver compacts etcd; a pager's continue token older than
that is 410 Expired with a token for the rest, while a watch from it still resumes from the watch
cache. On etcd the compaction is etcd's own, taken in turns through its `compact_rev_key`."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import urllib.error
import urllib.request

import pytest
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from .conftest import STORE, running_cluster, wait_for

#: the outcome depends on the store: this module runs again on etcd
pytestmark = pytest.mark.store

NS = "compaction"


@pytest.fixture(scope="module")
def cluster():
    with running_cluster("compaction", ("--etcd-compaction-interval", "1s")) as c:
        core = client.CoreV1Api(c.client())
        core.create_namespace({"metadata": {"name": NS}})
        wait_for(lambda: core.list_namespaced_config_map(NS).items, what="the namespace's kube-root-ca.crt")
        yield c


def test_a_pager_s_token_expires_past_a_compaction_and_a_watch_from_it_still_resumes(cluster):
    core = client.CoreV1Api(cluster.client())
    for name in ("a", "b", "c"):
        core.create_namespaced_config_map(NS, {"metadata": {"name": name}})
    first = core.list_namespaced_config_map(NS, limit=1)
    token, rv = first.metadata._continue, first.metadata.resource_version
    core.create_namespaced_config_map(NS, {"metadata": {"name": "late"}})

    def expired():
        try:
            core.list_namespaced_config_map(NS, limit=1, _continue=token)
        except ApiException as e:
            return e
    refused = wait_for(expired, timeout=30, what="the continue token expired")
    status = json.loads(refused.body)
    assert (refused.status, status["reason"]) == (410, "Expired")
    assert status["message"].startswith("The provided continue parameter is too old to display a consistent list result.")
    rest = core.list_namespaced_config_map(NS, _continue=status["metadata"]["continue"])
    # the remainder, at the latest revision
    assert [o.metadata.name for o in rest.items] == ["b", "c", "kube-root-ca.crt", "late"]

    w = watch.Watch()
    seen = []
    for ev in w.stream(core.list_namespaced_config_map, NS, resource_version=rv, _request_timeout=30):
        seen.append((ev["type"], ev["object"].metadata.name))
        w.stop()
    assert seen == [("ADDED", "late")]  # the watch cache's history, which compaction leaves alone


@pytest.mark.skipif(STORE != "etcd", reason="etcd's own history and compact_rev_key")
def test_etcd_itself_is_compacted_in_rounds_counted_by_compact_rev_key(cluster):
    core = client.CoreV1Api(cluster.client())
    made = core.create_namespaced_config_map(NS, {"metadata": {"name": "etcd"}})
    rv = made.metadata.resource_version
    core.patch_namespaced_config_map("etcd", NS, {"data": {"k": "v"}})
    endpoint = cluster.store.removeprefix("etcd://")

    def etcd_range(key: str, revision: str = "0") -> tuple[int, dict]:
        body = json.dumps({"key": base64.b64encode(key.encode()).decode(), "revision": revision}).encode()
        try:
            with urllib.request.urlopen(urllib.request.Request(f"http://{endpoint}/v3/kv/range", body), timeout=10) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    key = f"/registry/configmaps/{NS}/etcd"
    code, refused = wait_for(lambda: (got := etcd_range(key, rv))[0] != 200 and got, timeout=30,
                             what="etcd compacted past the object's first revision")
    assert "required revision has been compacted" in refused["message"]
    code, rounds = etcd_range("compact_rev_key")
    kv = rounds["kvs"][0]
    assert code == 200 and int(kv["version"]) >= 2  # a round that noted a revision, then one that compacted
    assert int(base64.b64decode(kv["value"])) >= int(rv)


@pytest.mark.parametrize("value, error", [
    ("1x", 'invalid argument "1x" for "--etcd-compaction-interval" flag: time: unknown unit "x" in duration "1x"'),
    ("-5m", "--etcd-compaction-interval must not be negative")])
def test_a_bad_interval_is_refused_before_anything_starts(tmp_path, value, error):
    r = subprocess.run([sys.executable, "-m", "nanokube.cli", "up", "--data-dir", str(tmp_path), "--port", "0",
                        f"--etcd-compaction-interval={value}"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.strip() == f"nanokube: {error}"
    assert list(tmp_path.iterdir()) == []
