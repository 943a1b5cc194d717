"""`nanokube up` as a process: health, version, metrics, clean shutdown and
restart on the same data dir."""

from __future__ import annotations

import json
import shutil
import signal
import tempfile
from pathlib import Path

import pytest
from kubernetes import client

from .conftest import STORE, start_cluster
from .test_bad_input import HTTP


@pytest.fixture(scope="module")
def cluster(session_cluster):
    """The session's cluster (conftest.session_cluster) for the tests that read it; the restart test
    starts and stops clusters of its own."""
    return session_cluster


@pytest.fixture
def applied(cluster):
    """The name of the ConfigMap a test creates with a server-side apply in `default`, deleted
    after it: the session's cluster is shared, and a create must find it absent (APPLY's 201)."""
    name = "metrics-applied"
    yield name
    cluster.kubectl("delete", "configmap", name, "-n", "default", "--ignore-not-found")


def test_health_version_metrics(cluster):
    import urllib.request

    h = HTTP(cluster.kubeconfig)
    for path in ("/healthz", "/livez", "/readyz"):
        with urllib.request.urlopen(urllib.request.Request(h.server + path), context=h.ctx) as r:
            assert r.status == 200 and r.read() == b"ok"
    code, version = h.request("GET", "/version")
    assert code == 200 and version["major"] == "1" and version["minor"] == "37"
    client.CoreV1Api(cluster.client()).list_namespaced_config_map("default")
    with urllib.request.urlopen(urllib.request.Request(h.server + "/metrics"), context=h.ctx) as r:
        text = r.read().decode()
    assert ('apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="configmaps",'
            'scope="namespace",subresource="",verb="LIST",version="v1"}') in text
    assert "apiserver_request_duration_seconds_bucket" in text
    assert "etcd_request_duration_seconds_bucket" in text
    # the process collector every component registers: dashboards' CPU and memory of kube-apiserver
    assert "\nprocess_cpu_seconds_total " in text and "\nprocess_resident_memory_bytes " in text
    # kubernetes_build_info, labelled as /version answers (dashboards' cluster version panel)
    [info] = [line for line in text.splitlines() if line.startswith("kubernetes_build_info{")]
    assert info == (f'kubernetes_build_info{{build_date="{version["buildDate"]}",compiler="gc",'
                    f'git_commit="{version["gitCommit"]}",git_tree_state="clean",git_version="{version["gitVersion"]}",'
                    f'go_version="{version["goVersion"]}",major="1",minor="37",platform="{version["platform"]}"}} 1')


def test_anonymous_gets_health_but_not_resources(cluster):
    import ssl
    import urllib.error
    import urllib.request

    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with urllib.request.urlopen(cluster.url + "/healthz", context=ctx) as r:
        assert r.status == 200
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(cluster.url + "/api/v1/namespaces", context=ctx)
    assert e.value.code == 403
    assert json.loads(e.value.read())["reason"] == "Forbidden"


@pytest.mark.skipif(STORE == "memory", reason="the memory store is not durable by design")
def test_sigterm_then_restart_keeps_objects_and_revisions(store_url):
    d = Path(tempfile.mkdtemp(prefix="nanokube-restart-"))
    try:
        c = start_cluster(d, store_url)
        api = client.CoreV1Api(c.client())
        api.create_namespace({"metadata": {"name": "keep"}})
        cm = api.create_namespaced_config_map("keep", {"metadata": {"name": "cm"}, "data": {"a": "1"}})
        api.delete_namespaced_config_map("cm", "keep")
        rv_before = int(api.list_namespaced_config_map("keep").metadata.resource_version)
        assert c.stop(signal.SIGTERM) == 0
        c2 = start_cluster(d, store_url)
        try:
            api2 = client.CoreV1Api(c2.client())
            assert "keep" in [n.metadata.name for n in api2.list_namespace().items]
            again = api2.create_namespaced_config_map("keep", {"metadata": {"name": "cm"}})
            assert int(again.metadata.resource_version) > rv_before > int(cm.metadata.resource_version)
        finally:
            c2.stop()
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_request_metrics_carry_kube_apiservers_labels(cluster, applied):
    """apiserver_request_total and apiserver_request_duration_seconds (STABLE) are broken out as
    kube-apiserver's: verb (a server-side apply is APPLY), dry_run, group, version, resource,
    subresource, scope (resource for a named object or a create, namespace, cluster) and
    component, so dashboards and SLO rules that select on them find the series; a watch is counted
    as WATCH once it ends."""
    cluster.kubectl("get", "pods", "-A")
    cluster.kubectl("get", "--raw", "/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=1")
    cluster.kubectl("get", "pods", "-n", "default")
    cluster.kubectl("get", "namespace", "default")
    cluster.kubectl("create", "configmap", "dry", "--dry-run=server")
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": applied, "namespace": "default"}}
    cluster.kubectl("apply", "--server-side", "-f", "-", input=json.dumps(cm))
    text = cluster.kubectl("get", "--raw", "/metrics").stdout

    def series(name, code=None, dry_run="", resource="pods", scope="cluster", verb="LIST"):
        labels = (f'code="{code}",' if code else "") + (f'component="apiserver",dry_run="{dry_run}",group="",'
                                                         f'resource="{resource}",scope="{scope}",subresource="",'
                                                         f'verb="{verb}",version="v1"')
        return f"{name}{{{labels}}} "
    assert series("apiserver_request_total", "200") in text
    assert series("apiserver_request_total", "200", scope="namespace") in text
    assert series("apiserver_request_total", "200", resource="namespaces", scope="resource", verb="GET") in text
    assert series("apiserver_request_total", "201", "All", "configmaps", "resource", "POST") in text
    assert series("apiserver_request_total", "201", resource="configmaps", scope="resource", verb="APPLY") in text
    assert series("apiserver_request_duration_seconds_count") in text
    assert series("apiserver_request_total", "200", resource="configmaps", scope="namespace", verb="WATCH") in text
    bounds = [line.split('le="')[1].split('"')[0] for line in text.splitlines() if line.startswith(
        "apiserver_request_duration_seconds_bucket{") and 'resource="pods",scope="cluster"' in line
              and 'verb="LIST"' in line]  # (the session's other modules may watch pods too)
    assert bounds == ["0.005", "0.025", "0.05", "0.1", "0.2", "0.4", "0.6", "0.8", "1", "1.25", "1.5", "2", "3",
                      "4", "5", "6", "8", "10", "15", "20", "30", "45", "60", "+Inf"]  # client_golang's numbers
    assert series("apiserver_request_duration_seconds_count", resource="configmaps", scope="namespace",
                  verb="WATCH") in text
    assert ("# HELP apiserver_request_total [STABLE] Counter of apiserver requests broken out for each verb, dry run "
            "value, group, version, resource, scope, component, and HTTP response code.") in text
    assert "_created" not in text, "client_golang's text format has no _created series"
