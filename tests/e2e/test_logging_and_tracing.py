"""What a user debugging the control plane turns on: component-base's logging flags (`-v`,
`--vmodule`, `--logging-format json`) and the API server's tracing (`--tracing-config-file`
pointing at an OTLP gRPC collector), on one `nanokube up` whose log is JSON and whose spans go to
a collector this module runs: the opentelemetry-proto TraceService, over gRPC."""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import subprocess
import sys
import threading
from concurrent import futures

import grpc
import pytest
from kubernetes import client
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from tests.apiserver.admission.server import WebhookServer, allow

from .conftest import running_cluster, wait_for

#: klog's text header: severity, mmdd hh:mm:ss.uuuuuu, process id, file:line
KLOG = re.compile(r"^(?P<sev>[IWEF])\d{4} \d\d:\d\d:\d\d\.\d{6} +(?P<pid>\d+) (?P<caller>[\w.]+:\d+)\] (?P<msg>.*)$")
NS = "traced"


def _value(v):
    return getattr(v, v.WhichOneof("value")) if v.WhichOneof("value") else None


class Collector(trace_service_pb2_grpc.TraceServiceServicer):
    """An OpenTelemetry collector's trace receiver: keeps every span exported to it, with its
    resource's attributes."""

    def __init__(self) -> None:
        self.spans: list[dict] = []
        self._lock = threading.Lock()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(self, self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")

    def Export(self, request, context):
        with self._lock:
            for rs in request.resource_spans:
                resource = {kv.key: _value(kv.value) for kv in rs.resource.attributes}
                for ss in rs.scope_spans:
                    for s in ss.spans:
                        self.spans.append({
                            "name": s.name, "kind": s.kind, "trace": s.trace_id.hex(), "id": s.span_id.hex(),
                            "parent": s.parent_span_id.hex(), "resource": resource,
                            "attributes": {kv.key: _value(kv.value) for kv in s.attributes},
                            "links": [(link.trace_id.hex(), link.span_id.hex()) for link in s.links]})
        return trace_service_pb2.ExportTraceServiceResponse()

    def find(self, **want) -> list[dict]:
        with self._lock:
            return [s for s in self.spans if all(s.get(k) == v for k, v in want.items())]

    def children(self, span: dict) -> list[dict]:
        return self.find(trace=span["trace"], parent=span["id"])


class HeaderWebhook(WebhookServer):
    """The test webhook server, keeping each request's headers too."""

    def __init__(self) -> None:
        super().__init__()
        self.headers: list[dict] = []

    async def _handle(self, request):
        self.headers.append({k.lower(): v for k, v in request.headers.items()})
        return await super()._handle(request)


@pytest.fixture(scope="module")
def collector():
    c = Collector()
    c.server.start()
    yield c
    c.server.stop(0)


@pytest.fixture(scope="module")
def cluster(collector, tmp_path_factory):
    config = tmp_path_factory.mktemp("tracing") / "tracing.yaml"
    config.write_text("apiVersion: apiserver.config.k8s.io/v1\nkind: TracingConfiguration\n"
                      f"endpoint: 127.0.0.1:{collector.port}\nsamplingRatePerMillion: 1000000\n")
    # the batch processor's delay (OTel's own variable) down from 5 s, so that spans arrive soon
    # two API server workers, each tracing and logging as `up` was told
    flags = ("--tracing-config-file", str(config), "--logging-format", "json", "--scheduler", "none", "--api-workers", "2")
    with running_cluster("tracing", flags, env={"OTEL_BSP_SCHEDULE_DELAY": "100"}) as c:
        c.kubectl("create", "namespace", NS)
        yield c


def _spans(collector: Collector, timeout: float = 30, **want) -> list[dict]:
    return wait_for(lambda: collector.find(**want), timeout, f"spans {want}")


def test_a_kubectl_create_is_a_span_with_the_handler_and_the_store_under_it(cluster, collector):
    """kubectl's POST is a server span named by its route, with otelhttp's attributes; the
    handler's `Create` is its child and the store's write the child of that."""
    cluster.kubectl("create", "configmap", "traced-cm", "-n", NS, "--from-literal=a=b")
    name = "POST /api/v1/namespaces/{:namespace}/configmaps"
    [span] = [s for s in _spans(collector, name=name)
              if s["attributes"]["http.target"].startswith(f"/api/v1/namespaces/{NS}/configmaps")]
    attrs = span["attributes"]
    assert span["kind"] == 2 and span["parent"] == "" and span["resource"]["service.name"] == "apiserver"
    assert attrs["http.request.method"] == "POST" and attrs["http.response.status_code"] == 201
    assert attrs["user_agent.original"].startswith("kubectl/") and attrs["http.route"] == name.split()[1]
    assert re.fullmatch(r"[0-9a-f-]{36}", attrs["audit-id"])
    [create] = wait_for(lambda: collector.children(span), 30, "the handler's span")
    assert create["name"] == "Create"
    assert {k: create["attributes"][k] for k in ("resource", "scope", "verb", "audit-id", "protocol")} == \
        {"resource": "configmaps", "scope": "namespace", "verb": "POST", "audit-id": attrs["audit-id"],
         "protocol": "HTTP/1.1"}
    stored = wait_for(lambda: [s for s in collector.children(create) if s["name"].startswith("Create ")], 30,
                      "the store's span")
    assert [s["attributes"]["key"] for s in stored] == [f"/registry/configmaps/{NS}/traced-cm"]


def test_traceparent_in_to_the_api_server_and_out_to_a_webhook(cluster, collector):
    """An admin's traceparent is the parent of the request's span, and the validating webhook's
    call, a span under the handler's, sends the trace on in its own traceparent; anyone else's
    request starts a trace of its own, linked to the one it came with."""
    hook = HeaderWebhook().start()
    hook.handlers["/validate"] = allow
    try:
        cluster.kubectl("label", "namespace", NS, "traced=yes")
        config = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
                  "metadata": {"name": "traced"},
                  "webhooks": [{"name": "traced.example.com", "sideEffects": "None", "admissionReviewVersions": ["v1"],
                                "clientConfig": {"url": hook.url("/validate"), "caBundle": hook.ca.bundle},
                                "namespaceSelector": {"matchLabels": {"traced": "yes"}},
                                "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                                           "resources": ["configmaps"]}]}]}
        cluster.kubectl("apply", "-f", "-", input=json.dumps(config))
        trace_id, parent = secrets.token_hex(16), secrets.token_hex(8)
        api = cluster.client()
        api.set_default_header("traceparent", f"00-{trace_id}-{parent}-01")
        v1 = client.CoreV1Api(api)
        body = {"metadata": {"name": "hooked"}, "data": {"a": "b"}}
        wait_for(lambda: _created(v1, body) and hook.calls_to("/validate"), 30, "the webhook's call")
        # (every request of the client carries the header: the create the webhook saw is the call's)
        call = _spans(collector, trace=trace_id, name="Call validating webhook")[-1]
        [create] = _spans(collector, trace=trace_id, id=call["parent"])
        [span] = _spans(collector, trace=trace_id, id=create["parent"])
        assert create["name"] == "Create" and span["parent"] == parent
        assert span["name"] == "POST /api/v1/namespaces/{:namespace}/configmaps"
        assert {k: call["attributes"][k] for k in ("configuration", "webhook", "operation")} == \
            {"configuration": "traced", "webhook": "traced.example.com", "operation": "CREATE"}
        sent = [h["traceparent"] for h in hook.headers if "traceparent" in h]
        assert sent and sent[-1] == f"00-{trace_id}-{call['id']}-01"
        # impersonating a user outside system:masters and system:monitoring: a new root, with a link
        api.set_default_header("Impersonate-User", "alice")
        api.set_default_header("Impersonate-Group", "system:authenticated")
        client.CoreApi(api).get_api_versions()
        [alone] = _spans(collector, name="GET", links=[(trace_id, parent)])
        assert alone["trace"] != trace_id and alone["parent"] == ""
    finally:
        cluster.kubectl("delete", "validatingwebhookconfiguration", "traced", "--ignore-not-found")
        hook.stop()


def _created(v1, body) -> bool:
    try:
        v1.create_namespaced_config_map(NS, body)
    except client.ApiException as e:  # the configuration's webhook not called yet: not loaded
        if e.status != 409:
            raise
        v1.delete_namespaced_config_map(body["metadata"]["name"], NS)
        return False
    return True


def test_up_logs_json_and_flagz_shows_the_logging_flags(cluster):
    """--logging-format json: each record component-base's JSON object (ts, caller, msg, v);
    /flagz shows the logging flags as set, and duration flags as Go prints them (5m as 5m0s)."""
    lines = [line for line in cluster.log_path.read_text().splitlines() if line.startswith("{")]
    records = [json.loads(line) for line in lines]
    [registered] = [r for r in records if r["msg"].endswith("simulated nodes registered")]
    assert list(registered) == ["ts", "caller", "msg", "v"] and registered["v"] == 0
    assert re.fullmatch(r"manager\.py:\d+", registered["caller"]) and isinstance(registered["ts"], float)
    flagz = cluster.kubectl("get", "--raw", "/flagz").stdout
    assert re.search(r"^logging-format\W+json$", flagz, re.M) and re.search(r"^v\W+0$", flagz, re.M), flagz
    assert re.search(r"^etcd-compaction-interval\W+5m0s$", flagz, re.M), flagz
    assert re.search(r"^event-ttl\W+1h0m0s$", flagz, re.M), flagz


def test_a_scheduler_process_with_vmodule_logs_each_binding_in_klog_text(cluster):
    """`nanokube scheduler --vmodule=scheduler=2`: klog's text header on every line, and the V(2)
    line kube-scheduler writes for a bound pod (structured: the message quoted, then pod and
    node), which -v=0 alone leaves out."""
    log_path = cluster.data_dir / "scheduler.log"
    with open(log_path, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "nanokube.cli", "scheduler", "--kubeconfig", cluster.kubeconfig,
                                 "--secure-port", "0", "--vmodule", "scheduler=2"],
                                stdout=subprocess.DEVNULL, stderr=out, env=os.environ)
    try:
        wait_for(lambda: "scheduling pods for profiles" in log_path.read_text(), 60, "the scheduler leading")
        cluster.kubectl("run", "logged", "-n", NS, "--image=busybox")
        line = wait_for(lambda: next((ln for ln in log_path.read_text().splitlines()
                                      if "Successfully bound pod to node" in ln), None), 60, "the binding's line")
        m = KLOG.match(line)
        assert m and m["sev"] == "I" and re.fullmatch(r"scheduler\.py:\d+", m["caller"]), line
        assert re.fullmatch(rf'"Successfully bound pod to node" pod="{NS}/logged" node="[\w.-]+"', m["msg"]), line
        assert all(KLOG.match(ln) for ln in log_path.read_text().splitlines() if ln and not ln.startswith(" ")), \
            log_path.read_text()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)


@pytest.mark.parametrize("args, said", [
    (("up", "--tracing-config-file", "{rate}"),
     "nanokube: --tracing-config-file: samplingRatePerMillion: Invalid value: 1000001: sampling rate must be less "
     "than or equal to one million"),
    (("up", "--tracing-config-file", "{kind}"),
     "nanokube: --tracing-config-file: failed to read tracing config: unable to decode tracing configuration data: "
     'no kind "EgressSelectorConfiguration" is registered for version "apiserver.config.k8s.io/v1" in scheme '
     '"pkg/runtime/scheme.go:100"'),
    (("up", "--tracing-config-file", "{type}"),
     "nanokube: --tracing-config-file: failed to read tracing config: unable to decode tracing configuration data: "
     "json: cannot unmarshal string into Go struct field TracingConfiguration.samplingRatePerMillion of type int32"),
    (("scheduler", "--logging-format", "xml"),
     "nanokube scheduler: --logging-format: Unsupported log format 'xml' (supported: text, json)"),
    (("controller-manager", "--logging-format", "json", "--vmodule", "base=4"),
     "nanokube controller-manager: --vmodule: Forbidden: only supported for text log format"),
    (("controller-manager", "--vmodule", "base=4,cron=-1"),  # (fuzz62: a negative level was taken)
     'nanokube controller-manager: invalid argument "base=4,cron=-1" for "--vmodule" flag: parsing verbosity in '
     '"cron=-1": strconv.ParseUint: parsing "-1": invalid syntax'),
    (("scheduler", "-v", "9" * 5000),  # (fuzz62: taken, as any int() was)
     f'nanokube scheduler: error: argument -v/--v: strconv.ParseUint: parsing "{"9" * 5000}": value out of range'),
])
def test_a_bad_tracing_configuration_or_logging_flag_is_refused(tmp_path, args, said):
    (tmp_path / "rate.yaml").write_text("apiVersion: apiserver.config.k8s.io/v1\nkind: TracingConfiguration\n"
                                        "samplingRatePerMillion: 1000001\n")
    (tmp_path / "kind.yaml").write_text("apiVersion: apiserver.config.k8s.io/v1\nkind: EgressSelectorConfiguration\n")
    (tmp_path / "type.yaml").write_text("apiVersion: apiserver.config.k8s.io/v1beta1\nkind: TracingConfiguration\n"
                                        "samplingRatePerMillion: all\n")
    argv = [a.format(rate=tmp_path / "rate.yaml", kind=tmp_path / "kind.yaml", type=tmp_path / "type.yaml") for a in args]
    if argv[0] == "up":
        argv += ["--data-dir", str(tmp_path / "data"), "--port", "0"]
    r = subprocess.run([sys.executable, "-m", "nanokube.cli", *argv], capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stderr.strip().splitlines()[-1]) == (2, said), r.stderr


def test_a_tracing_configuration_is_decoded_strictly(tmp_path):
    """The TracingConfiguration codec is strict: a repeated key (before, the later one won) and an
    unknown field stop `up` with the strict decoder's error, go-yaml's list spanning lines."""
    (tmp_path / "dup.yaml").write_text("apiVersion: apiserver.config.k8s.io/v1\nkind: TracingConfiguration\n"
                                       "endpoint: 127.0.0.1:4317\nendpoint: 127.0.0.1:4318\nsamplingRate: 5\n")
    r = subprocess.run([sys.executable, "-m", "nanokube.cli", "up", "--tracing-config-file", str(tmp_path / "dup.yaml"),
                        "--data-dir", str(tmp_path / "data"), "--port", "0"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.endswith(
        "nanokube: --tracing-config-file: failed to read tracing config: unable to decode tracing configuration data: "
        "strict decoding error: error converting YAML "
        'to JSON: yaml: unmarshal errors:\n  line 4: key "endpoint" already set in map, unknown field "samplingRate"\n'), \
        r.stderr
