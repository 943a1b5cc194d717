"""fuzz63: a node's kubelet endpoints through nodes/proxy (/pods, /configz, /stats, /metrics, /logs,
/containerLogs, /exec, /attach, /portForward, /run, /healthz) with any method, odd paths and query
parameters, headers that ask for an upgrade and bodies, all on one kept-alive connection, as a derandomized
Hypothesis run of a fixed number of examples. The contract: an answer within NO_ANSWER seconds (a
connection left waiting fails it: a refused upgrade with a body did, keepalive.py), and no 5xx but the
kubelet's own 500s (a streaming request that does not upgrade, a /run whose command cannot run)."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .conftest import own_namespace, wait_for
from .test_hardening import Raw

NS = "fuzz-kubelet"
NO_ANSWER = 20
PATHS = ["/pods", "/pods/", "/configz", "/runningpods/", "/stats/summary", "/stats/", "/metrics", "/metrics/resource",
         "/metrics/cadvisor", "/metrics/probes", "/healthz", "/healthz/ping", "/healthz/syncloop", "/healthz/x",
         "/logs/", "/logs/pods/", "/logs/..", "/logs/%2e%2e/", "/logs/%00", f"/containerLogs/{NS}/p/c",
         f"/containerLogs/{NS}/p", f"/containerLogs/{NS}/p/nope", "/containerLogs///", "/containerLogs/%00/%00/%00",
         f"/exec/{NS}/p/c", f"/exec/{NS}/p", f"/attach/{NS}/p/c", f"/portForward/{NS}/p", f"/run/{NS}/p/c",
         f"/run/{NS}/p/nope", "/exec/", "/portForward", "/cri/", "/debug/pprof/", "/", "//pods", "/" + "a" * 3000]
QUERIES = ["", "tailLines=-1", "tailLines=x", "tailLines=99999999999999999999", "limitBytes=0", "limitBytes=x",
           "sinceSeconds=0", "sinceSeconds=x", "sinceTime=x", "sinceTime=0000-01-01T00:00:00Z",
           "sinceTime=9999-12-31T23:59:59-23:00", "sinceSeconds=1&sinceTime=2020-01-01T00:00:00Z", "timestamps=x",
           "previous=true", "command=ls&stdout=true", "command=&stdout=1", "stdin=x&stdout=x&tty=x", "port=80",
           "port=x", "port=99999", "cmd=ls", "cmd=", "only_cpu_and_memory=x", "%zz=1", "a=b&" * 500]
HEADERS = [{}, {"Accept": "text/plain;q=x"}, {"Accept-Encoding": "gzip"}, {"Accept": "application/openmetrics-text"},
           {"Upgrade": "websocket", "Connection": "Upgrade"}, {"Upgrade": "SPDY/3.1", "Connection": "Upgrade"},
           {"X-Stream-Protocol-Version": "v5.channel.k8s.io"}, {"Range": "bytes=0-10"}]
STREAMING = ("/exec/", "/attach/", "/portForward/", "/run/")


@pytest.fixture(scope="module")
def cluster(session_cluster):
    """The session's cluster (conftest.session_cluster): this module writes only in its own namespace."""
    with own_namespace(session_cluster, NS) as c:
        c.kubectl("-n", NS, "run", "p", "--image=busybox", "--restart=Never", "--overrides",
                  '{"spec": {"containers": [{"name": "c", "image": "busybox", "command": ["sh", "-c", '
                  '"while true; do echo hi; sleep 1; done"]}]}}')
        wait_for(lambda: c.kubectl_json("-n", NS, "get", "pod", "p")["status"].get("phase") == "Running",
                 what="the fuzzed pod running")
        yield c


@pytest.mark.timeout(300)
def test_no_kubelet_request_hangs_or_fails_the_server(cluster):
    node = cluster.kubectl_json("-n", NS, "get", "pod", "p")["spec"]["nodeName"]
    raw = Raw(cluster.kubeconfig, timeout=NO_ANSWER)
    seen = set()

    @settings(max_examples=250, deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(st.sampled_from(["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]), st.sampled_from(PATHS),
           st.sampled_from(QUERIES), st.sampled_from(HEADERS), st.sampled_from([None, b"x", b"{}" * 1000]))
    def prop(method, path, query, headers, body):
        target = f"/api/v1/nodes/{node}/proxy{path}" + (f"?{query}" if query else "")
        code, _, answer = raw.request(method, target, body=body if method in ("POST", "PUT", "PATCH") else None,
                                      ctype=None, headers=headers)
        seen.add(code)
        assert code < 500 or path.startswith(STREAMING), f"{method} {target[:200]} {headers}: {code} {str(answer)[:300]}"

    try:
        prop()
    finally:  # (the kept-alive connection the draws shared)
        if raw.conn is not None:
            raw.conn.close()
    assert {200, 404, 405} <= seen, seen  # (the draws reached what each endpoint serves and refuses)
