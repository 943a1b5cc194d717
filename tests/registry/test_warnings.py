"""Strategies' create/update warnings (upstream's WarningsOnCreate/WarningsOnUpdate) as Warning
headers: through the official client, raw HTTP and kubectl; none where there is nothing to say."""

import asyncio
import base64
import datetime
import json
import subprocess

import aiohttp
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.serialization import PrivateFormat
from cryptography.x509.oid import NameOID
from kubernetes import client, config

from nanokube.apiserver.app import APIServer
from nanokube.pki.ca import ensure_pki
from nanokube.pki.kubeconfig import write_kubeconfig
from nanokube.registry import kind_warnings, pod_warnings
from nanokube.store.memory import MemoryStore
from tests.e2e.conftest import KUBECTL


def _pod(name="p", **spec):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "busybox"}], **spec}}


def _deployment(name="d", template_meta=None, **pod_spec):
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels, **(template_meta or {})},
                                  "spec": {"containers": [{"name": "c", "image": "busybox"}], **pod_spec}}}}


@pytest.fixture
async def server(tmp_path):
    pki = ensure_pki(str(tmp_path))
    srv = APIServer(MemoryStore(), pki, port=0)
    srv.rest.admission.disable("ServiceAccount")  # no controller manager makes the default account
    await srv.start()
    kubeconfig = str(tmp_path / "kubeconfig")
    write_kubeconfig(kubeconfig, srv.url, pki)
    try:
        yield srv, kubeconfig
    finally:
        await srv.stop()


async def test_pod_warnings_reach_the_official_client(server):
    _, kubeconfig = server
    api = client.CoreV1Api(config.new_client_from_config(config_file=kubeconfig))
    try:
        pod = _pod("web.1", nodeSelector={"beta.kubernetes.io/os": "linux"})
        pod["spec"]["containers"][0]["resources"] = {"requests": {"memory": "1.5"}}
        pod["spec"]["containers"][0]["env"] = [{"name": "A", "value": "x"}, {"name": "A", "value": "y"}]
        _, status, headers = await asyncio.to_thread(api.create_namespaced_pod_with_http_info, "default", pod)
        assert status == 201
        assert headers.getlist("Warning") == [
            '299 - "metadata.name: this is used in the Pod\'s hostname, which can result in surprising behavior; '
            "a DNS label is recommended: [must not contain dots]\"",
            '299 - "spec.nodeSelector[beta.kubernetes.io/os]: deprecated since v1.14; use \\"kubernetes.io/os\\" '
            'instead"',
            '299 - "spec.containers[0].resources.requests[memory]: fractional byte value \\"1500m\\" is invalid, '
            'must be an integer"',
            '299 - "spec.containers[0].env[1]: hides previous definition of \\"A\\", which may be dropped when '
            'using apply"',
        ]
        _, status, headers = await asyncio.to_thread(api.create_namespaced_pod_with_http_info, "default", _pod("plain"))
        assert status == 201 and "Warning" not in headers
        # upstream gives no warnings on a pod's update
        _, status, headers = await asyncio.to_thread(
            api.patch_namespaced_pod_with_http_info, "web.1", "default", {"metadata": {"labels": {"a": "b"}}})
        assert status == 200 and "Warning" not in headers
    finally:
        api.api_client.close()


@pytest.fixture
async def plain():
    """A server without TLS or authentication, for raw HTTP."""
    srv = APIServer(MemoryStore(), None, port=0)
    await srv.start()
    try:
        yield f"http://127.0.0.1:{srv.port}"
    finally:
        await srv.stop()


async def _post(session, url, body, **params):
    async with session.post(url, json=body, params=params) as r:
        return r.status, r.headers.getall("Warning", [])


async def test_template_warnings_at_their_paths_dry_run_and_update_on_generation_only(plain):
    base = f"{plain}/apis/apps/v1/namespaces/default/deployments"
    dep = _deployment(template_meta={"annotations": {"seccomp.security.alpha.kubernetes.io/pod": "runtime/default"}},
                      affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                          {"topologyKey": "kubernetes.io/hostname"}]}})
    want = ['299 - "spec.template.metadata.annotations[seccomp.security.alpha.kubernetes.io/pod]: non-functional in '
            'v1.27+; use the \\"seccompProfile\\" field instead"',
            '299 - "spec.template.spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].'
            'labelSelector: a null labelSelector results in matching no pod"']
    async with aiohttp.ClientSession() as s:
        assert await _post(s, base, dep, dryRun="All") == (201, want)
        assert await _post(s, base, dep) == (201, want)
        async with s.get(f"{base}/d") as r:
            assert r.status == 200
        patch = {"metadata": {"labels": {"x": "y"}}}  # no generation change: no warnings
        async with s.patch(f"{base}/d", json=patch, headers={"Content-Type": "application/merge-patch+json"}) as r:
            assert r.status == 200 and "Warning" not in r.headers
        patch = {"spec": {"replicas": 3}}  # a new generation: the template's warnings again
        async with s.patch(f"{base}/d", json=patch, headers={"Content-Type": "application/merge-patch+json"}) as r:
            assert r.status == 200 and r.headers.getall("Warning") == want
        assert await _post(s, base, _deployment("quiet")) == (201, [])


async def test_port_and_env_warnings_only_where_they_clash(plain):
    """A container port's number seen twice with another protocol, an empty hostIP and a repeated env
    name that refers to its previous value say nothing; a repeat that hides it, a port another
    container has too and a hostIP without a hostPort warn, in upstream's order."""
    url = f"{plain}/api/v1/namespaces/default/pods"
    quiet = _pod("quiet", containers=[
        {"name": "c", "image": "busybox",
         "ports": [{"containerPort": 80, "protocol": "TCP"}, {"containerPort": 80, "protocol": "UDP"},
                   {"containerPort": 81, "hostIP": ""}],
         "env": [{"name": "A", "value": "x"}, {"name": "B", "value": "y"}, {"name": "A", "value": "$(A)-more"}]},
        {"name": "d", "image": "busybox", "ports": [{"containerPort": 82}]}])
    loud = _pod("loud", containers=[
        {"name": "c", "image": "busybox", "ports": [{"containerPort": 80}],
         "env": [{"name": "A"}, {"name": "B"}, {"name": "C"}, {"name": "B", "value": "z"}]},
        {"name": "d", "image": "busybox",
         "ports": [{"containerPort": 80}, {"name": "web", "containerPort": 81, "hostIP": "10.0.0.1"}]}])
    async with aiohttp.ClientSession() as s:
        assert await _post(s, url, quiet) == (201, [])
        assert await _post(s, url, loud) == (201, [
            '299 - "spec.containers[0].env[3]: hides previous definition of \\"B\\", which may be dropped when '
            'using apply"',
            '299 - "spec.containers[1].ports[0]: duplicate port definition with spec.containers[0].ports[0]"',
            '299 - "spec.containers[1].ports[1]: hostIP set without hostPort: {Name:web HostPort:0 '
            'ContainerPort:81 Protocol:TCP HostIP:10.0.0.1}"',
        ])

async def test_service_ip_and_cidr_warnings(plain):
    url = f"{plain}/api/v1/namespaces/default/services"
    svc = {"metadata": {"name": "s"}, "spec": {
        "ports": [{"port": 80}], "externalIPs": ["2001:DB8::1"], "externalName": "x.example"}}
    async with aiohttp.ClientSession() as s:
        status, warnings = await _post(s, url, svc)
        assert status == 201, warnings
        assert warnings == [
            '299 - "spec.externalIPs[0]: IPv6 address \\"2001:DB8::1\\" should be in RFC 5952 canonical format '
            '(\\"2001:db8::1\\")"',
            '299 - "spec.externalIPs is deprecated and may no longer be implemented in some clusters"',
            '299 - "spec.externalName is ignored when spec.type is not \\"ExternalName\\""',
        ]
        assert await _post(s, url, {"metadata": {"name": "q"}, "spec": {"ports": [{"port": 80}]}}) == (201, [])


def _self_signed(key) -> bytes:
    """A PEM certificate for `key`'s public half, signed by it."""
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "tls.example")])
    now = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .sign(key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM)


def _key_pem(key, fmt) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, fmt, serialization.NoEncryption())


async def test_tls_secret_and_service_account_warnings(server):
    """The Secret strategy's warningsForSecret: a kubernetes.io/tls Secret whose tls.crt and
    tls.key are no key pair is warned with tls.X509KeyPair's error, on create and update. The
    ServiceAccount strategy's: the enforce-mountable-secrets annotation is deprecated, said when a
    request sets it."""
    _, kubeconfig = server
    api = client.CoreV1Api(config.new_client_from_config(config_file=kubeconfig))
    rsa_key, other_rsa = (rsa.generate_private_key(public_exponent=65537, key_size=2048) for _ in range(2))
    ec_key = ec.generate_private_key(ec.SECP256R1())
    cert = _self_signed(rsa_key)

    def tls(name, crt, key):
        data = {"tls.crt": base64.b64encode(crt).decode(), "tls.key": base64.b64encode(key).decode()}
        return {"metadata": {"name": name}, "type": "kubernetes.io/tls", "data": data}

    async def warned(call, *args):
        _, _, headers = await asyncio.to_thread(call, *args)
        return headers.getlist("Warning")

    try:
        create = api.create_namespaced_secret_with_http_info
        assert await warned(create, "default", tls("good", cert, _key_pem(rsa_key, PrivateFormat.TraditionalOpenSSL))) == []
        assert await warned(create, "default", tls("ec", _self_signed(ec_key), _key_pem(ec_key, PrivateFormat.PKCS8))) == []
        assert await warned(create, "default", tls("other", cert, _key_pem(other_rsa, PrivateFormat.PKCS8))) == [
            '299 - "tls: private key does not match public key"']
        assert await warned(create, "default", tls("kind", cert, _key_pem(ec_key, PrivateFormat.TraditionalOpenSSL))) == [
            '299 - "tls: private key type does not match public key type"']
        assert await warned(create, "default", tls("twice", cert, cert)) == [
            '299 - "tls: found a certificate rather than a key in the PEM for the private key"']
        assert await warned(create, "default", {"metadata": {"name": "opaque"}, "data": {"tls.crt": "eA=="}}) == []
        swapped = {"data": tls("", _key_pem(rsa_key, PrivateFormat.PKCS8), cert)["data"]}
        assert await warned(api.patch_namespaced_secret_with_http_info, "good", "default", swapped) == [
            '299 - "tls: failed to find certificate PEM data in certificate input, but did find a private key; '
            'PEM inputs may have been switched"']

        annotated = {"metadata": {"name": "sa", "annotations": {"kubernetes.io/enforce-mountable-secrets": "true"}}}
        deprecated = ['299 - "metadata.annotations[kubernetes.io/enforce-mountable-secrets]: deprecated in v1.32+; '
                      'prefer separate namespaces to isolate access to mounted secrets"']
        assert await warned(api.create_namespaced_service_account_with_http_info, "default", annotated) == deprecated
        label = {"metadata": {"labels": {"a": "b"}}}
        assert await warned(api.patch_namespaced_service_account_with_http_info, "sa", "default", label) == []
        await asyncio.to_thread(api.create_namespaced_service_account, "default", {"metadata": {"name": "plain"}})
        assert await warned(api.patch_namespaced_service_account_with_http_info, "plain", "default",
                            {"metadata": annotated["metadata"] | {"name": "plain"}}) == deprecated
    finally:
        api.api_client.close()


async def test_kubectl_prints_the_warning(server):
    _, kubeconfig = server
    pvc = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
           "metadata": {"name": "c", "namespace": "default",
                        "annotations": {"volume.beta.kubernetes.io/storage-class": "fast"}},
           "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}
    r = await asyncio.to_thread(subprocess.run, [KUBECTL, "--kubeconfig", kubeconfig, "create", "-f", "-"],
                                input=json.dumps(pvc), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stderr.splitlines() == ['Warning: metadata.annotations[volume.beta.kubernetes.io/storage-class]: '
                                     'deprecated since v1.8; use "storageClassName" attribute instead']


def test_pod_spec_warnings_in_upstreams_order():
    spec = {
        "volumes": [{"name": "g", "gitRepo": {"repository": "r"}},
                    {"name": "cm", "configMap": {"name": "m", "items": [{"key": "a", "path": "x"},
                                                                           {"key": "b", "path": "x/y"}]}},
                    {"name": "pr", "projected": {"sources": [{}, {"serviceAccountToken": {"path": "t"}},
                                                             {"secret": {"name": "s", "items": [{"key": "k", "path": "t"}]}}]}}],
        "hostAliases": [{"ip": "1.2.3.4"}, {"ip": "1.2.3.4"}],
        "imagePullSecrets": [{"name": ""}],
        "overhead": {"memory": "0.5"},
        "initContainers": [{"name": "i", "ports": [{"containerPort": 80, "protocol": "TCP"}]}],
        "containers": [{"name": "c", "ports": [{"containerPort": 80, "protocol": "TCP", "hostPort": 80},
                                               {"containerPort": 81, "protocol": "TCP", "hostIP": "1.2.3.4"}]}],
        "terminationGracePeriodSeconds": -1,
        "topologySpreadConstraints": [{"topologyKey": "failure-domain.beta.kubernetes.io/zone", "labelSelector": {}}],
    }
    assert pod_warnings.spec_warnings("", spec, {}, False) == [
        'spec.topologySpreadConstraints[0].topologyKey: failure-domain.beta.kubernetes.io/zone is deprecated since '
        'v1.17; use "topology.kubernetes.io/zone" instead',
        "spec.volumes[0].gitRepo: deprecated in v1.11",
        'volume "cm" (ConfigMap "m"): overlapping paths: "x/y" with "x"',
        'volume "pr" (Projected) has no sources provided',
        'volume "pr" (Projected Secret "s"): overlapping paths: "t" with "t"',
        'spec.hostAliases[1].ip: duplicate ip "1.2.3.4"',
        'spec.imagePullSecrets[0].name: invalid empty name ""',
        'spec.overhead[memory]: fractional byte value "500m" is invalid, must be an integer',
        "spec.containers[0].ports[0]: overlapping port definition with spec.initContainers[0].ports[0]",
        "spec.containers[0].ports[1]: hostIP set without hostPort: {Name: HostPort:0 ContainerPort:81 "
        "Protocol:TCP HostIP:1.2.3.4}",
        "spec.terminationGracePeriodSeconds: must be >= 0; negative values are invalid and will be treated as 1",
    ]
    assert pod_warnings.spec_warnings("", {"containers": [{"name": "c", "image": "x", "resources": {
        "requests": {"memory": "64Mi", "cpu": "0.5"}}}]}, {}, False) == []


def test_workload_specific_warnings():
    job = {"metadata": {"name": "j"}, "spec": {"completionMode": "Indexed", "completions": 200_000,
                                               "parallelism": 20_000, "template": {"spec": {}}}}
    assert pod_warnings.job_create(job) == [
        "spec: In Indexed Jobs with a number of completions higher than 10^5 and a parallelism higher than 10^4, "
        "Kubernetes might not be able to track completedIndexes when a big number of indexes fail"]
    sts = {"metadata": {"generation": 2}, "spec": {"revisionHistoryLimit": -1, "template": {"spec": {}},
                                                   "volumeClaimTemplates": [{"spec": {"resources": {
                                                       "requests": {"storage": "1.5"}}}}]}}
    claim = 'fractional byte value "1500m" is invalid, must be an integer'
    assert pod_warnings.statefulset_create(sts)[0] == f"spec.volumeClaimTemplates[0].resources.requests[storage]: {claim}"
    assert pod_warnings.statefulset_update(sts, sts) == [
        f"spec.volumeClaimTemplates[0].Spec.resources.requests[storage]: {claim}",
        "spec.revisionHistoryLimit: a negative value retains all historical revisions; a value >= 0 is recommended"]
    cron = {"metadata": {"generation": 1}, "spec": {"schedule": "TZ=UTC 0 * * * *", "jobTemplate": {"spec": {}}}}
    assert pod_warnings.cronjob_update(cron, cron) == [
        "cannot use TZ or CRON_TZ in spec.spec.schedule, use timeZone instead, see "
        "https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ for more details"]


def test_other_kinds_warnings():
    assert kind_warnings.pv_warnings({"spec": {"persistentVolumeReclaimPolicy": "Recycle", "rbd": {}, "nodeAffinity": {
        "required": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "beta.kubernetes.io/arch", "values": ["a b"]}]}]}}}}) == [
        "spec.persistentVolumeReclaimPolicy: The Recycle reclaim policy is deprecated. Instead, the recommended "
        "approach is to use dynamic provisioning.",
        'spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].key: beta.kubernetes.io/arch is '
        'deprecated since v1.14; use "kubernetes.io/arch" instead',
        "spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].values[0]: a b is invalid, a valid "
        "label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and "
        "end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for "
        "validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
        "spec.rbd: deprecated in v1.28, non-functional in v1.31+",
    ]
    assert kind_warnings.node_warnings({"spec": {"externalID": "x"}}) == [
        "spec.externalID: this field is deprecated, and is unused by Kubernetes"]
    assert kind_warnings.network_policy_warnings({"spec": {"egress": [{"to": [{"ipBlock": {
        "cidr": "2001:DB8::/32", "except": ["::ffff:10.0.0.0/120"]}}]}]}}) == [
        'spec.egress[0].to[0].ipBlock.cidr: IPv6 CIDR value "2001:DB8::/32" should be in RFC 5952 canonical format '
        '("2001:db8::/32")',
        'spec.egress[0].to[0].ipBlock.except[0]: non-standard CIDR value "::ffff:10.0.0.0/120" will be considered '
        'invalid in a future Kubernetes release: use "10.0.0.0/120"']
    assert kind_warnings.endpoint_slice_warnings({"addressType": "FQDN", "endpoints": []}, create=True) == [
        "spec.addressType: FQDN endpoints are deprecated"]
    assert kind_warnings.endpoints_warnings({"metadata": {"labels": {
        "endpoints.kubernetes.io/managed-by": "endpoint-controller"}}, "subsets": [{"addresses": [{"ip": "::ffff:1.2.3.4"}]}]}) == []


def test_warnings_quote_values_as_go_does():
    """Warnings print names with %q: Go's escapes, not JSON's (\\x01, not \\u0001; a non-breaking space escaped)."""
    assert pod_warnings.go_quote("a\x01b\u00a0c") == '"a\\x01b\\u00a0c"'
    assert pod_warnings.go_quote(5) == '"5"'
