"""kubectl (the version-matched 1.37 from the test extra) against a real `nanokube up`, as a user drives it."""

from __future__ import annotations

import base64
import json
import subprocess
import threading
import time

import pytest
import yaml

from .conftest import KUBECTL, wait_for
from .manifests import all_kinds, to_yaml

#: the outcome depends on the store: this module runs again on etcd
pytestmark = pytest.mark.store

NS = "e2e"


@pytest.fixture(scope="module")
def applied(cluster):
    docs = all_kinds(NS)
    r = cluster.kubectl("apply", "-f", "-", input=to_yaml(docs))
    return docs, r.stdout


def _resource_arg(doc: dict) -> str:
    group = doc["apiVersion"].split("/")[0] if "/" in doc["apiVersion"] else ""
    plural = {
        "Endpoints": "endpoints", "PodDisruptionBudget": "poddisruptionbudgets", "PriorityClass": "priorityclasses",
        "DeviceClass": "deviceclasses", "CertificateSigningRequest": "certificatesigningrequests",
        "ClusterTrustBundle": "clustertrustbundles", "HorizontalPodAutoscaler": "horizontalpodautoscalers",
        "EndpointSlice": "endpointslices", "ResourceSlice": "resourceslices", "ResourceClaim": "resourceclaims",
        "ResourceClaimTemplate": "resourceclaimtemplates", "DeviceTaintRule": "devicetaintrules",
        "PodCertificateRequest": "podcertificaterequests", "CompositePodGroup": "compositepodgroups",
        "PodGroup": "podgroups", "Workload": "workloads",
    }.get(doc["kind"], doc["kind"].lower() + "s")
    version = doc["apiVersion"].split("/")[-1]
    return f"{plural}.{version}.{group}" if group else plural


def _create_cm(cluster, name: str, data: dict, ns: str = NS) -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}, "data": data}
    cluster.kubectl("create", "-f", "-", input=yaml.safe_dump(cm))


def _contains(got, sent) -> bool:
    """Everything sent is there (the server may add defaults around it)."""
    if isinstance(sent, dict):
        return isinstance(got, dict) and all(_contains(got.get(k), v) for k, v in sent.items())
    if isinstance(sent, list):
        return isinstance(got, list) and len(got) == len(sent) and all(_contains(g, s) for g, s in zip(got, sent))
    return got == sent


def test_apply_creates_every_kind(cluster, applied):
    docs, out = applied
    for doc in docs:
        assert f'{doc["metadata"]["name"]} created' in out, out
        args = ["get", _resource_arg(doc), doc["metadata"]["name"], "-o", "json"]
        if doc["metadata"].get("namespace"):
            args += ["-n", doc["metadata"]["namespace"]]
        got = json.loads(cluster.kubectl(*args).stdout)
        assert got["kind"] == doc["kind"]
        assert got["apiVersion"] == doc["apiVersion"]
        assert got["metadata"]["uid"]
        assert int(got["metadata"]["resourceVersion"]) > 0
        for field in ("spec", "data", "value", "subsets", "endpoints", "reason", "note", "regarding"):
            if field in doc:
                assert _contains(got[field], doc[field]), (doc["kind"], field, got[field])


def test_apply_again_is_unchanged(cluster, applied):
    docs, _ = applied
    out = cluster.kubectl("apply", "-f", "-", input=to_yaml(docs)).stdout
    assert "configmap/settings unchanged" in out
    assert "podgroup.scheduling.k8s.io/trainers unchanged" in out


def test_get_output_formats(cluster, applied):
    table = cluster.kubectl("get", "pods", "-n", NS).stdout
    header = table.splitlines()[0].split()
    assert header == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert "web-0" in table
    wide = cluster.kubectl("get", "pods", "-n", NS, "-o", "wide").stdout.splitlines()[0]
    assert "NOMINATED NODE" in wide and "IP" in wide
    y = yaml.safe_load(cluster.kubectl("get", "configmap", "settings", "-n", NS, "-o", "yaml").stdout)
    assert y["data"] == {"mode": "fast"}
    j = cluster.kubectl_json("get", "deploy", "web", "-n", NS)
    assert j["spec"]["replicas"] == 2 and j["spec"]["strategy"]["type"] == "RollingUpdate"
    jp = cluster.kubectl("get", "svc", "web", "-n", NS, "-o", "jsonpath={.spec.clusterIP}").stdout
    assert jp.startswith("10.")
    pg = cluster.kubectl("get", "podgroups", "-n", NS).stdout
    assert "trainers" in pg and "Gang" in pg
    rc = cluster.kubectl("get", "resourceclaims", "-n", NS).stdout
    assert rc.splitlines()[0].split()[:2] == ["NAME", "STATE"] and "pending" in rc
    dtr = cluster.kubectl("get", "devicetaintrules").stdout
    assert "NoSchedule" in dtr


def test_get_all_namespaces_and_short_names(cluster, applied):
    out = cluster.kubectl("get", "po", "-A").stdout
    assert out.splitlines()[0].split()[0] == "NAMESPACE"
    assert "web-0" in out
    assert "web" in cluster.kubectl("get", "deploy", "-n", NS).stdout
    assert "kube-system" in cluster.kubectl("get", "ns").stdout


def test_label_selector_and_field_selector(cluster, applied):
    cluster.kubectl("label", "configmap", "settings", "-n", NS, "tier=backend")
    _create_cm(cluster, "other", {"a": "b"})
    names = cluster.kubectl("get", "cm", "-n", NS, "-l", "tier in (backend,db)", "-o", "name").stdout.split()
    assert names == ["configmap/settings"]
    names = cluster.kubectl("get", "cm", "-n", NS, "-l", "!tier", "-o", "name").stdout.split()
    assert "configmap/other" in names and "configmap/settings" not in names
    names = cluster.kubectl("get", "cm", "-n", NS, "--field-selector", "metadata.name=other", "-o", "name").stdout.split()
    assert names == ["configmap/other"]


def test_label_annotate(cluster, applied):
    cluster.kubectl("label", "pod", "web-0", "-n", NS, "team=ml")
    cluster.kubectl("annotate", "pod", "web-0", "-n", NS, "owner=alice")
    pod = cluster.kubectl_json("get", "pod", "web-0", "-n", NS)
    assert pod["metadata"]["labels"]["team"] == "ml"
    assert pod["metadata"]["annotations"]["owner"] == "alice"
    cluster.kubectl("label", "pod", "web-0", "-n", NS, "team-")
    pod = cluster.kubectl_json("get", "pod", "web-0", "-n", NS)
    assert "team" not in pod["metadata"]["labels"]


def test_patch_types(cluster, applied):
    generation = cluster.kubectl_json("get", "deploy", "web", "-n", NS)["metadata"]["generation"]  # others' changes
    cluster.kubectl("patch", "deploy", "web", "-n", NS, "--type", "strategic", "-p",
                    json.dumps({"spec": {"template": {"spec": {"containers": [{"name": "web", "image": "nginx:1.28"}]}}}}))
    d = cluster.kubectl_json("get", "deploy", "web", "-n", NS)
    c = d["spec"]["template"]["spec"]["containers"]
    assert len(c) == 1 and c[0]["image"] == "nginx:1.28" and c[0]["ports"] == [{"containerPort": 80, "protocol": "TCP"}]
    assert d["metadata"]["generation"] == generation + 1
    # a ConfigMap of its own: other tests read `settings` as applied
    cluster.kubectl("create", "configmap", "patched", "-n", NS, "--from-literal=mode=fast")
    cluster.kubectl("patch", "cm", "patched", "-n", NS, "--type", "merge", "-p", '{"data":{"mode":null,"extra":"1"}}')
    assert cluster.kubectl_json("get", "cm", "patched", "-n", NS)["data"] == {"extra": "1"}
    cluster.kubectl("patch", "cm", "patched", "-n", NS, "--type", "json", "-p",
                    '[{"op":"add","path":"/data/k","value":"v"},{"op":"test","path":"/data/extra","value":"1"}]')
    assert cluster.kubectl_json("get", "cm", "patched", "-n", NS)["data"] == {"extra": "1", "k": "v"}
    bad = cluster.kubectl("patch", "cm", "patched", "-n", NS, "--type", "json", "-p",
                          '[{"op":"test","path":"/data/extra","value":"2"}]', check=False)
    assert bad.returncode != 0
    assert cluster.kubectl_json("get", "cm", "patched", "-n", NS)["data"] == {"extra": "1", "k": "v"}


def test_scale(cluster, applied):
    cluster.kubectl("scale", "deploy", "web", "-n", NS, "--replicas=4")
    assert cluster.kubectl_json("get", "deploy", "web", "-n", NS)["spec"]["replicas"] == 4
    r = cluster.kubectl("scale", "deploy", "web", "-n", NS, "--replicas=1", "--current-replicas=3", check=False)
    assert r.returncode != 0
    assert cluster.kubectl_json("get", "deploy", "web", "-n", NS)["spec"]["replicas"] == 4
    # back to the applied 2 (other tests read it), through a precondition that holds
    cluster.kubectl("scale", "deploy", "web", "-n", NS, "--replicas=2", "--current-replicas=4")
    assert cluster.kubectl_json("get", "deploy", "web", "-n", NS)["spec"]["replicas"] == 2


def test_get_scale_subresource_prints_desired_and_available(cluster, applied):
    lines = cluster.kubectl("get", "deploy", "web", "-n", NS, "--subresource=scale").stdout.splitlines()
    assert lines[0].split() == ["NAME", "DESIRED", "AVAILABLE", "AGE"]
    name, desired, available, _ = lines[1].split()
    scale = cluster.kubectl_json("get", "deploy", "web", "-n", NS, "--subresource=scale")
    assert (scale["kind"], name, int(desired)) == ("Scale", "web", scale["spec"]["replicas"])
    assert available.isdigit()


def test_get_raw_root_lists_paths(cluster):
    paths = json.loads(cluster.kubectl("get", "--raw", "/").stdout)["paths"]
    assert {"/api/v1", "/apis/scheduling.k8s.io/v1", "/livez/ping", "/version"} <= set(paths)
    assert paths == sorted(paths)


def test_server_side_apply_conflict(cluster, applied):
    manifest = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa", "namespace": NS},
                "data": {"owner": "alice"}}
    cluster.kubectl("apply", "--server-side", "--field-manager=alice", "-f", "-", input=yaml.safe_dump(manifest))
    manifest["data"]["owner"] = "bob"
    r = cluster.kubectl("apply", "--server-side", "--field-manager=bob", "-f", "-", input=yaml.safe_dump(manifest), check=False)
    assert r.returncode != 0
    assert "conflict" in r.stderr.lower() and ".data.owner" in r.stderr
    assert cluster.kubectl_json("get", "cm", "ssa", "-n", NS)["data"]["owner"] == "alice"
    cluster.kubectl("apply", "--server-side", "--field-manager=bob", "--force-conflicts", "-f", "-",
                    input=yaml.safe_dump(manifest))
    cm = cluster.kubectl_json("get", "cm", "ssa", "-n", NS, "--show-managed-fields")
    assert cm["data"]["owner"] == "bob"
    managers = {m["manager"]: m for m in cm["metadata"]["managedFields"]}
    assert "f:owner" in json.dumps(managers["bob"]["fieldsV1"])
    assert managers["bob"]["operation"] == "Apply"


def test_describe(cluster, applied):
    out = cluster.kubectl("describe", "pod", "web-0", "-n", NS).stdout
    assert "Name:" in out and "web-0" in out and "nginx:1.27" in out
    out = cluster.kubectl("describe", "podgroup", "trainers", "-n", NS).stdout
    assert "trainers" in out and "Min Count" in out


def test_watch_sees_each_change(cluster, applied):
    env_cmd = [KUBECTL, "--kubeconfig", cluster.kubeconfig, "get", "cm", "-n", NS, "-w",
               "--output-watch-events", "-o", "custom-columns=EVENT:.type,NAME:.object.metadata.name,V:.object.data.v",
               "--field-selector", "metadata.name=watched"]
    proc = subprocess.Popen(env_cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True)
    reader.start()
    try:
        _create_cm(cluster, "watched", {"v": "1"})
        # once kubectl's list has it, its watch goes on from that list's resourceVersion: it sees what follows
        wait_for(lambda: any("watched" in line for line in lines), 60, "kubectl listing the ConfigMap")
        cluster.kubectl("patch", "cm", "watched", "-n", NS, "-p", '{"data":{"v":"2"}}')
        cluster.kubectl("delete", "cm", "watched", "-n", NS)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and sum("watched" in line for line in lines) < 3:
            time.sleep(0.1)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    events = [line.split() for line in lines if "watched" in line]
    assert [e[0] for e in events] == ["ADDED", "MODIFIED", "DELETED"], lines
    assert events[0][2] == "1" and events[1][2] == "2"


def test_wait_for_condition(cluster, applied):
    waiter = subprocess.Popen(
        [KUBECTL, "--kubeconfig", cluster.kubeconfig, "wait", "-n", NS, "--for=condition=PodGroupInitiallyScheduled",
         "podgroup/trainers", "--timeout=30s", "-v=6"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    logged: list[str] = []
    reader = threading.Thread(target=lambda: logged.extend(iter(waiter.stderr.readline, "")), daemon=True)
    reader.start()
    # the condition is set once kubectl has read the group without it and watches for it (-v=6 logs the answer)
    wait_for(lambda: any('"Response" verb="GET"' in line and "watch=true" in line for line in logged), 30,
             "kubectl watching the group")
    status = {"status": {"conditions": [{"type": "PodGroupInitiallyScheduled", "status": "True", "reason": "Scheduled",
                                         "message": "all members placed", "lastTransitionTime": "2026-11-30T10:00:00Z",
                                         "observedGeneration": 1}]}}
    cluster.kubectl("patch", "podgroup", "trainers", "-n", NS, "--subresource=status", "--type=merge", "-p", json.dumps(status))
    out = waiter.stdout.read()
    assert waiter.wait(timeout=40) == 0, logged
    reader.join(10)
    assert "condition met" in out


def test_explain(cluster):
    out = cluster.kubectl("explain", "podgroup.spec").stdout
    assert "GROUP:      scheduling.k8s.io" in out
    assert "schedulingPolicy" in out
    out = cluster.kubectl("explain", "resourceclaims.spec.devices.requests").stdout
    assert "exactly" in out
    # an enum-typed field lists its values, as kube-openapi's documents give them
    out = cluster.kubectl("explain", "service.spec.type").stdout
    assert "FIELD: type <string>\nENUM:\n    ClusterIP\n    ExternalName\n    LoadBalancer\n    NodePort\n" in out
    out = cluster.kubectl("explain", "pods.spec", "--recursive").stdout
    assert "  restartPolicy\t<string>\n  enum: Always, Never, OnFailure\n" in out
    assert "    imagePullPolicy\t<string>\n    enum: Always, IfNotPresent, Never\n" in out


def test_delete_wait_and_cascading(cluster, applied):
    _create_cm(cluster, "owner", {"a": "b"})
    owner = cluster.kubectl_json("get", "cm", "owner", "-n", NS)
    dependent = {"apiVersion": "v1", "kind": "ConfigMap",
                 "metadata": {"name": "dependent", "namespace": NS, "ownerReferences": [
                     {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"]}]}}
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(dependent))
    out = cluster.kubectl("delete", "cm", "owner", "-n", NS, "--wait=true").stdout
    assert 'configmap "owner" deleted' in out
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if cluster.kubectl("get", "cm", "dependent", "-n", NS, check=False).returncode != 0:
            break
        time.sleep(0.2)
    assert cluster.kubectl("get", "cm", "dependent", "-n", NS, check=False).returncode != 0


def test_namespace_deletion_removes_contents(cluster):
    cluster.kubectl("create", "-f", "-", input=yaml.safe_dump({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "doomed"}}))
    _create_cm(cluster, "x", {"a": "b"}, ns="doomed")
    cluster.kubectl("delete", "ns", "doomed", "--wait=true", timeout=60)
    assert cluster.kubectl("get", "ns", "doomed", check=False).returncode != 0
    r = cluster.kubectl("get", "cm", "x", "-n", "doomed", check=False)
    assert r.returncode != 0


def test_system_namespaces_and_priority_classes_refuse_deletion(cluster):
    for ns in ("default", "kube-system", "kube-public"):
        r = cluster.kubectl("delete", "namespace", ns, check=False)
        assert (r.returncode, r.stderr) == (
            1, f'Error from server (Forbidden): namespaces "{ns}" is forbidden: this namespace may not be deleted\n')
    r = cluster.kubectl("delete", "priorityclass", "system-node-critical", check=False)
    assert (r.returncode, r.stderr) == (1, 'Error from server (Forbidden): priorityclasses.scheduling.k8s.io '
                                           '"system-node-critical" is forbidden: this is a system priority class '
                                           'and cannot be deleted\n')
    assert cluster.kubectl("get", "namespace", "default", "-o", "jsonpath={.status.phase}").stdout == "Active"
    assert cluster.kubectl("get", "pc", "system-node-critical", "-o", "jsonpath={.value}").stdout == "2000001000"


def test_kubectl_create_generators(cluster, applied):
    """kubectl's typed generators send protobuf bodies."""
    cluster.kubectl("create", "namespace", "generated")
    cluster.kubectl("create", "configmap", "gen", "-n", "generated", "--from-literal=k=v")
    cluster.kubectl("create", "deployment", "gen", "-n", "generated", "--image=nginx:1.27", "--replicas=3")
    cluster.kubectl("create", "secret", "generic", "gen", "-n", "generated", "--from-literal=password=x")
    assert cluster.kubectl_json("get", "cm", "gen", "-n", "generated")["data"] == {"k": "v"}
    d = cluster.kubectl_json("get", "deploy", "gen", "-n", "generated")
    assert d["spec"]["replicas"] == 3
    assert d["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.27"
    # protobuf carries the template's zero creationTimestamp; 1.37 leaves it out (omitzero), never null
    assert d["spec"]["template"]["metadata"] == {"labels": {"app": "gen"}}
    cluster.kubectl("delete", "namespace", "generated", "--wait=true")


def test_events_served_by_both_groups(cluster, applied):
    core = cluster.kubectl("get", "events.v1.", "-n", NS, "-o", "name").stdout.split()
    new = cluster.kubectl("get", "events.v1.events.k8s.io", "-n", NS, "-o", "name").stdout.split()
    assert "event/web-0.start" in core and "event/web-0.scheduled" in core
    assert "event.events.k8s.io/web-0.start" in new and "event.events.k8s.io/web-0.scheduled" in new
    ev = cluster.kubectl_json("get", "events.v1.events.k8s.io", "web-0.start", "-n", NS)
    assert ev["note"] == "Started container web" and ev["regarding"]["name"] == "web-0"


def test_an_approved_client_csr_is_issued_a_certificate_that_authenticates(cluster, tmp_path):
    """The 'add a user' flow: a kube-apiserver-client CSR, `kubectl certificate approve`, the issued
    certificate (CONDITION Approved,Issued) in a kubeconfig, and the server knows its subject."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    req = x509.CertificateSigningRequestBuilder().subject_name(x509.Name([
        x509.NameAttribute(NameOID.COMMON_NAME, "e2e-alice"), x509.NameAttribute(NameOID.ORGANIZATION_NAME, "e2e-devs"),
    ])).sign(key, hashes.SHA256())
    csr = {"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest", "metadata": {"name": "e2e-alice"},
           "spec": {"request": base64.b64encode(req.public_bytes(serialization.Encoding.PEM)).decode(),
                    "signerName": "kubernetes.io/kube-apiserver-client", "expirationSeconds": 86400,
                    "usages": ["client auth"]}}
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(csr))
    cluster.kubectl("certificate", "approve", "e2e-alice")
    deadline = time.monotonic() + 30
    while not (cert := cluster.kubectl("get", "csr", "e2e-alice", "-o", "jsonpath={.status.certificate}").stdout):
        assert time.monotonic() < deadline, "no certificate issued"
        time.sleep(0.2)
    row = cluster.kubectl("get", "csr", "e2e-alice", "--no-headers").stdout.split()
    assert row[-1] == "Approved,Issued" and row[-2] == "24h"
    (tmp_path / "alice.crt").write_bytes(base64.b64decode(cert))
    (tmp_path / "alice.key").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                           serialization.NoEncryption()))
    cfg = yaml.safe_load(open(cluster.kubeconfig))
    cfg["users"][0]["user"] = {"client-certificate": str(tmp_path / "alice.crt"), "client-key": str(tmp_path / "alice.key")}
    (tmp_path / "kubeconfig").write_text(yaml.safe_dump(cfg))
    r = subprocess.run([KUBECTL, "--kubeconfig", str(tmp_path / "kubeconfig"), "auth", "whoami", "-o", "json"],
                       capture_output=True, text=True, timeout=60)
    user = json.loads(r.stdout)["status"]["userInfo"]
    assert user["username"] == "e2e-alice" and user["groups"] == ["e2e-devs", "system:authenticated"]


def _csr_doc(name: str, signer: str, usages: list, cn: str, dns=(), expiration=None):
    """A CertificateSigningRequest of a new key for `cn` in organization system:nodes."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    b = x509.CertificateSigningRequestBuilder().subject_name(x509.Name([
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:nodes"), x509.NameAttribute(NameOID.COMMON_NAME, cn)]))
    if dns:
        b = b.add_extension(x509.SubjectAlternativeName([x509.DNSName(d) for d in dns]), critical=False)
    req = b.sign(ec.generate_private_key(ec.SECP256R1()), hashes.SHA256())
    spec = {"request": base64.b64encode(req.public_bytes(serialization.Encoding.PEM)).decode(), "signerName": signer,
            "usages": usages}
    if expiration:
        spec["expirationSeconds"] = expiration
    return {"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest", "metadata": {"name": name},
            "spec": spec}


def _issued(cluster, name: str):
    from cryptography import x509

    deadline = time.monotonic() + 30
    while not (cert := cluster.kubectl("get", "csr", name, "-o", "jsonpath={.status.certificate}").stdout):
        assert time.monotonic() < deadline, f"no certificate issued for {name}"
        time.sleep(0.2)
    return x509.load_pem_x509_certificate(base64.b64decode(cert))


def test_kubelet_csrs_are_auto_approved_signed_and_denied_as_upstream(cluster):
    """csrapproving approves a kubelet client request whose requester may create
    certificatesigningrequests/nodeclient (the admin may do anything), csrsigning issues it a
    system:nodes client certificate; `kubectl certificate approve` gets a kubelet serving request
    its certificate, `deny` marks a request Denied; conditions carry both times; `kubectl get csr`
    shows upstream's columns."""
    from cryptography import x509
    from cryptography.x509.oid import ExtendedKeyUsageOID

    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all([
        _csr_doc("e2e-node-client", "kubernetes.io/kube-apiserver-client-kubelet", ["digital signature", "client auth"],
                 "system:node:e2e-n1", expiration=3600),
        _csr_doc("e2e-node-serving", "kubernetes.io/kubelet-serving", ["digital signature", "server auth"],
                 "system:node:e2e-n1", dns=("e2e-n1.example.com",)),
        _csr_doc("e2e-node-denied", "kubernetes.io/kube-apiserver-client-kubelet", ["client auth"],
                 "system:node:e2e-n2")]))
    client_cert = _issued(cluster, "e2e-node-client")
    assert client_cert.subject.rfc4514_string() == "CN=system:node:e2e-n1,O=system:nodes"
    assert client_cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value == \
        x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH])
    assert (client_cert.not_valid_after_utc - client_cert.not_valid_before_utc).total_seconds() == 3600 + 300
    got = cluster.kubectl_json("get", "csr", "e2e-node-client")
    (approved,) = got["status"]["conditions"]
    assert (approved["type"], approved["reason"], approved["message"]) == \
        ("Approved", "AutoApproved", "Auto approving kubelet client certificate after SubjectAccessReview.")
    assert approved["lastUpdateTime"] and approved["lastTransitionTime"]

    # a kubelet serving request is never auto-approved; a person approves it
    assert not (cluster.kubectl_json("get", "csr", "e2e-node-serving").get("status") or {}).get("conditions")
    cluster.kubectl("certificate", "approve", "e2e-node-serving")
    san = _issued(cluster, "e2e-node-serving").extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["e2e-n1.example.com"]

    # usages a kubelet client request may not have: not recognized, so not approved; denied by hand
    cluster.kubectl("certificate", "deny", "e2e-node-denied")
    (denied,) = cluster.kubectl_json("get", "csr", "e2e-node-denied")["status"]["conditions"]
    assert (denied["type"], denied["reason"]) == ("Denied", "KubectlDeny")
    assert denied["lastUpdateTime"] and denied["lastTransitionTime"]

    out = cluster.kubectl("get", "csr", "e2e-node-client", "e2e-node-serving", "e2e-node-denied").stdout.splitlines()
    assert out[0].split() == ["NAME", "AGE", "SIGNERNAME", "REQUESTOR", "REQUESTEDDURATION", "CONDITION"]
    requestor = got["spec"]["username"]
    rows = {r.split()[0]: r.split()[2:] for r in out[1:]}
    assert rows == {
        "e2e-node-client": ["kubernetes.io/kube-apiserver-client-kubelet", requestor, "60m", "Approved,Issued"],
        "e2e-node-serving": ["kubernetes.io/kubelet-serving", requestor, "<none>", "Approved,Issued"],
        "e2e-node-denied": ["kubernetes.io/kube-apiserver-client-kubelet", requestor, "<none>", "Denied"]}
