"""Projected volumes through an in-process API server and the real
pod-identity signer, in virtual time: a pod certificate is issued before the
volume sets up, refreshed in place at beginRefreshAt, and a denial is final."""

import asyncio
import base64
import datetime as dt
import json
import shutil
import time
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from nanokube.apiserver.auth.serviceaccount import ServiceAccountTokens
from nanokube.machinery.errors import APIError
from nanokube.node.volumes import MountError, VolumeManager, pod_certificate
from nanokube.pki import trustbundle
from nanokube.pki.signer import SIGNER_NAME, PodCertificateSigner
from tests.controllers import becomes, eventually, make_stack
from tests.node import ManualClock

CTB = {"clusterTrustBundle": {"signerName": SIGNER_NAME, "labelSelector": {}, "path": "ca.pem"}}


@pytest.fixture
async def env(tmp_path, monkeypatch):
    s = await make_stack()
    clock = ManualClock(start=float(int(time.time())))
    strategy = s.rest.index.get("certificates.k8s.io", "v1", "podcertificaterequests").strategy
    monkeypatch.setattr(strategy, "now", lambda: dt.datetime.fromtimestamp(clock.now(), dt.UTC))

    def lookup(plural, namespace, name):
        e = s.cache.get(s.rest.index.get("", "v1", plural).key(namespace, name))
        return e.obj if e else None
    s.rest.tokens = ServiceAccountTokens(ec.generate_private_key(ec.SECP256R1()), lookup, clock)
    await s.client.resource("", "v1", "serviceaccounts").create({"metadata": {"name": "default", "namespace": "default"}})
    await s.client.resource("", "v1", "nodes").create({"metadata": {"name": "gpu-0"}})
    signers = []

    async def signer(**kw):
        sg = PodCertificateSigner(s.client, str(tmp_path / "data"), clock=clock, **kw)
        await sg.start()
        signers.append(sg)
        return sg
    mgr = VolumeManager(s.client, "gpu-0", str(tmp_path / "pods"), clock)
    yield s.client, clock, mgr, signer
    for uid in list(mgr._refreshers):
        mgr.unmount(uid)
    await mgr.close()
    for sg in signers:
        await sg.stop()
    await s.close()


async def pod(client, name, *sources):
    body = {"metadata": {"name": name, "namespace": "default"}, "spec": {
        "nodeName": "gpu-0", "serviceAccountName": "default", "containers": [{"name": "app", "image": "busybox"}],
        "volumes": [{"name": "identity", "projected": {"sources": list(sources)}}]}}
    return await client.resource("", "v1", "pods").create(body)


async def in_virtual_time(clock, coro):
    """Run `coro`, moving the clock half a second at a time while it waits."""
    task = asyncio.ensure_future(coro)
    while not task.done():
        await clock.advance(0.5)
        await asyncio.sleep(0.01)
    return task.result()


def read(vol: str, name: str) -> bytes:
    return (Path(vol) / name).read_bytes()


def leaf(pem: bytes) -> x509.Certificate:
    return trustbundle.certificates(pem)[0]


def public(obj) -> bytes:
    return obj.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


async def test_certificate_issued_before_setup_and_refreshed_in_place(env):
    client, clock, mgr, signer = env
    await signer()
    p = await pod(client, "web", CTB, {"serviceAccountToken": {"path": "token", "expirationSeconds": 3600}},
                  {"podCertificate": {"signerName": SIGNER_NAME, "keyType": "ECDSAP256", "maxExpirationSeconds": 3600,
                                      "credentialBundlePath": "bundle.pem", "keyPath": "tls.key",
                                      "certificateChainPath": "tls.crt"}})
    dirs = await in_virtual_time(clock, mgr.mount(p))
    vol = dirs["identity"]
    bundle = read(vol, "bundle.pem")
    key_pem = read(vol, "tls.key")
    chain = read(vol, "tls.crt")
    ca = read(vol, "ca.pem")
    assert bundle.startswith(b"-----BEGIN PRIVATE KEY-----") and bundle == key_pem + chain
    cert = leaf(chain)
    assert public(serialization.load_pem_private_key(key_pem, None).public_key()) == public(cert.public_key())
    assert trustbundle.verify_chain(chain.decode(), ca.decode(), at=cert.not_valid_before_utc) is not None
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.UniformResourceIdentifier) == ["spiffe://cluster.local/ns/default/sa/default"]
    token = read(vol, "token")
    assert s_claims_sub(token.decode()) == "system:serviceaccount:default:default"
    pcrs, _ = await client.resource("certificates.k8s.io", "v1", "podcertificaterequests").list(namespace="default")
    assert len(pcrs) == 1
    spec = pcrs[0]["spec"]
    assert pcrs[0]["metadata"]["name"].startswith("req-")
    assert pcrs[0]["metadata"]["ownerReferences"][0]["uid"] == p["metadata"]["uid"]
    assert (spec["podName"], spec["nodeName"], spec["serviceAccountName"]) == ("web", "gpu-0", "default")

    # beginRefreshAt is half of the hour-long lifetime; jitter adds at most 5% of that
    await clock.advance(1800 + 90 + 1)
    for _ in range(10):
        await clock.advance(0.5)
        await asyncio.sleep(0.01)

    async def reissued():
        """The new certificate once written (its key is made in a thread, which virtual time does not wait for)."""
        got = leaf(read(vol, "tls.crt"))
        return got if got.serial_number != cert.serial_number else None
    renewed = await eventually(reissued)
    new_key = serialization.load_pem_private_key(read(vol, "tls.key"), None)
    assert renewed.serial_number != cert.serial_number
    assert public(new_key.public_key()) == public(renewed.public_key())
    pcrs, _ = await client.resource("certificates.k8s.io", "v1", "podcertificaterequests").list(namespace="default")
    assert len(pcrs) == 2
    assert read(vol, "token") == token, "the token is kept until 80% of its hour"

    await clock.advance(2880 - 1891 + 1)
    for _ in range(4):
        await clock.advance(0.5)
        await asyncio.sleep(0.01)
    assert await eventually(lambda: _true(read(vol, "token") != token))
    assert leaf(read(vol, "tls.crt")).serial_number == renewed.serial_number

    mgr.unmount(p["metadata"]["uid"])
    assert not mgr._refreshers and not mgr.state


def s_claims_sub(token: str) -> str:
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))["sub"]


async def test_denied_request_is_final_and_reported(env):
    client, clock, mgr, signer = env
    await signer(supported=frozenset({"ECDSAP256"}))
    p = await pod(client, "db", {"podCertificate": {"signerName": SIGNER_NAME, "keyType": "ED25519",
                                                     "credentialBundlePath": "bundle.pem"}})
    with pytest.raises(MountError) as e:
        await in_virtual_time(clock, mgr.mount(p))
    assert "was denied by signer nanokube.io/pod-identity: UnsupportedKeyType" in str(e.value)
    with pytest.raises(MountError) as again:
        await mgr.mount(p)
    assert str(again.value) == str(e.value)
    pcrs, _ = await client.resource("certificates.k8s.io", "v1", "podcertificaterequests").list(namespace="default")
    assert len(pcrs) == 1, "a denial is permanent: no second request"
    (cond,) = pcrs[0]["status"]["conditions"]
    # upstream's kubelet: reason Denied and the message it composes
    said = (f'PodCertificateRequest default/{pcrs[0]["metadata"]["name"]} was denied, reason="UnsupportedKeyType", '
            f'message="{cond["message"]}"')
    await becomes(lambda: refusals(client, "Denied"), [("Warning", said)])


async def refusals(client, reason: str) -> list[tuple[str, str]]:
    """The pod's Events of `reason` (written from the recorder's queue)."""
    events, _ = await client.resource("", "v1", "events").list(namespace="default")
    return [(ev["type"], ev["message"]) for ev in events if ev["reason"] == reason]


async def test_a_failed_request_is_final_and_reported_as_upstreams_kubelet_does(env):
    """A signer that sets Failed: the kubelet's Warning Event has reason Failed and the message
    upstream's kubelet composes; the volume stays failed, with no second request."""
    client, clock, mgr, _ = env
    pcrs = client.resource("certificates.k8s.io", "v1", "podcertificaterequests")
    p = await pod(client, "db", {"podCertificate": {"signerName": "example.com/flaky", "keyType": "ECDSAP256",
                                                     "credentialBundlePath": "bundle.pem"}})
    with pytest.raises(MountError, match="has not been issued yet"):
        await in_virtual_time(clock, mgr.mount(p))
    (pcr,) = await _listed(pcrs)
    when = dt.datetime.fromtimestamp(clock.now(), dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    await pcrs.update({**pcr, "status": {"conditions": [
        {"type": "Failed", "status": "True", "reason": "BackendDown", "message": 'HSM "a" unreachable',
         "lastTransitionTime": when}]}}, subresource="status")
    with pytest.raises(MountError, match="was failed by signer example.com/flaky: BackendDown"):
        await mgr.mount(p)
    said = (f'PodCertificateRequest default/{pcr["metadata"]["name"]} failed, reason="BackendDown", '
            'message="HSM \\"a\\" unreachable"')
    await becomes(lambda: refusals(client, "Failed"), [("Warning", said)])
    assert len(await _listed(pcrs)) == 1


async def _listed(pcrs) -> list[dict]:
    items, _ = await pcrs.list(namespace="default")
    return items


async def test_trust_bundle_selectors(env):
    client, _clock, mgr, signer = env
    await signer()
    nil = {"clusterTrustBundle": {"signerName": SIGNER_NAME, "path": "ca.pem"}}
    p = await pod(client, "a", nil)
    with pytest.raises(MountError, match="holds no certificates"):
        await mgr.mount(p)
    p = await pod(client, "b", {"clusterTrustBundle": {**nil["clusterTrustBundle"], "optional": True}})
    assert (await mgr.mount(p))["identity"]
    ctbs = client.resource("certificates.k8s.io", "v1", "clustertrustbundles")
    signed = await ctbs.get("nanokube.io:pod-identity:ca")
    await ctbs.create({"metadata": {"name": "team-ca"}, "spec": {"trustBundle": signed["spec"]["trustBundle"]}})
    p = await pod(client, "c", {"clusterTrustBundle": {"name": "team-ca", "path": "ca.pem"}},
                  {"downwardAPI": {"items": [{"path": "name", "fieldRef": {"fieldPath": "metadata.name"}}]}})
    vol = (await mgr.mount(p))["identity"]
    assert len(trustbundle.certificates(read(vol, "ca.pem").decode())) == 1
    assert read(vol, "name").decode() == "c"
    p = await pod(client, "d", {"clusterTrustBundle": {"name": "missing", "path": "ca.pem"}})
    with pytest.raises(MountError, match='"missing" not found'):
        await mgr.mount(p)
    # a signer-linked bundle by its name, as kube-apiserver accepts it; a name that spells no signer is refused
    p = await pod(client, "e", {"clusterTrustBundle": {"name": "nanokube.io:pod-identity:ca", "path": "ca.pem"}})
    vol = (await mgr.mount(p))["identity"]
    assert read(vol, "ca.pem").decode() == signed["spec"]["trustBundle"]
    with pytest.raises(APIError) as e:
        await pod(client, "f", {"clusterTrustBundle": {"name": "example.com/x:ca", "path": "ca.pem"}})
    assert e.value.code == 422 and ('spec.volumes[0].projected.sources[0].clusterTrustBundle.name: Invalid value: '
                                     '"example.com/x:ca": not a valid clustertrustbundlename: ClusterTrustBundle for '
                                     'signerName example.com/x must be named with prefix example.com:x:') in e.value.message


async def test_downward_api_fields_and_resources(env):
    client, _clock, mgr, _signer = env
    body = {"metadata": {"name": "dw", "namespace": "default", "labels": {"b": "2", "a": "one"},
                         "annotations": {"note": 'say "hi"'}},
            "spec": {"nodeName": "gpu-0", "containers": [{"name": "app", "image": "busybox", "resources": {
                "requests": {"cpu": "250m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}}}],
                "volumes": [{"name": "info", "downwardAPI": {"items": [
                    {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
                    {"path": "annotations", "fieldRef": {"fieldPath": "metadata.annotations"}},
                    {"path": "a", "fieldRef": {"fieldPath": "metadata.labels['a']"}},
                    {"path": "ns", "fieldRef": {"fieldPath": "metadata.namespace"}},
                    {"path": "cpu", "resourceFieldRef": {"containerName": "app", "resource": "requests.cpu",
                                                         "divisor": "1m"}},
                    {"path": "mem", "resourceFieldRef": {"containerName": "app", "resource": "limits.memory",
                                                         "divisor": "1Mi"}},
                    # no divisor: served "0", the zero Quantity, which the kubelet reads as 1
                    {"path": "bytes", "resourceFieldRef": {"containerName": "app", "resource": "limits.memory"}}]}}]}}
    p = await client.resource("", "v1", "pods").create(body)
    vol = (await mgr.mount(p))["info"]
    assert read(vol, "labels") == b'a="one"\nb="2"'
    assert read(vol, "annotations") == b'note="say \\"hi\\""'
    assert read(vol, "a") == b"one"
    assert read(vol, "ns") == b"default"
    assert (read(vol, "cpu"), read(vol, "mem")) == (b"250", b"128")
    assert p["spec"]["volumes"][0]["downwardAPI"]["items"][-1]["resourceFieldRef"]["divisor"] == "0"
    assert read(vol, "bytes") == str(128 * 2**20).encode()


def states(mgr, clock) -> list[str]:
    """The kubelet_podcertificate_states series the node's /metrics would serve now, less the name."""
    return [line.removeprefix(pod_certificate.STATES) for line in pod_certificate.metrics(mgr.state, clock.now())
            if not line.startswith("#")]


async def test_unanswered_refresh_is_reported_overdue_then_expired(env):
    client, clock, mgr, signer = env
    sg = await signer()
    p = await pod(client, "late", {"podCertificate": {"signerName": SIGNER_NAME, "keyType": "ECDSAP256",
                                                       "maxExpirationSeconds": 3600, "keyPath": "tls.key",
                                                       "certificateChainPath": "tls.crt"}})
    vol = (await in_virtual_time(clock, mgr.mount(p)))["identity"]
    issued = read(vol, "tls.crt")
    await sg.stop()

    async def reasons():
        items, _ = await client.resource("", "v1", "events").list(namespace="default")
        return [(e["reason"], e["message"]) for e in items if e["involvedObject"]["name"] == "late"]
    overdue = ("CertificateOverdueForRefresh", "PodCertificate refresh overdue")
    await clock.advance(1800 + 90 + 600 + 1)
    assert await eventually(lambda: _equal(reasons, [overdue]))
    assert states(mgr, clock) == [f'{{signer_name="{SIGNER_NAME}",state="overdue_for_refresh"}} 1']
    await clock.advance(1200)
    assert await eventually(lambda: _equal(reasons, [overdue, ("CertificateExpired", "PodCertificate expired")]))
    assert states(mgr, clock) == [f'{{signer_name="{SIGNER_NAME}",state="expired"}} 1']
    assert read(vol, "tls.crt") == issued, "the last credentials stay while a refresh is pending"


async def test_a_refresh_failing_again_and_again_is_one_counted_failed_mount_event(env):
    """Each failed refresh is reported, through the kubelet's recorder: one FailedMount Event
    whose count grows (`kubectl describe pod`'s "(x3 over 20s)"), not an Event per try."""
    client, clock, mgr, _ = env
    cms = client.resource("", "v1", "configmaps")
    await cms.create({"metadata": {"name": "settings", "namespace": "default"}, "data": {"a": "1"}})
    p = await pod(client, "cfg", {"configMap": {"name": "settings"}})
    vol = (await mgr.mount(p))["identity"]
    assert read(vol, "a") == b"1"
    await cms.delete("settings", "default")

    async def failed_mounts():
        items, _ = await client.resource("", "v1", "events").list(namespace="default")
        return [e for e in items if e["reason"] == "FailedMount"]
    for tries in (1, 2, 3):
        await clock.advance(60 if tries == 1 else 10)
        [ev] = await eventually(lambda: _async_when(failed_mounts, lambda got: got and got[0]["count"] >= tries))
        assert ev["count"] == tries
    assert ev["message"] == 'MountVolume.SetUp failed for volume "identity" : configmap "settings" not found'
    assert ev["source"] == {"component": "kubelet", "host": "gpu-0"}
    assert read(vol, "a") == b"1", "the last good files stay"


async def _async_when(fetch, done):
    got = await fetch()
    return got if done(got) else None


async def test_a_long_lived_token_is_renewed_after_a_day_and_unchanged_files_are_not_rewritten(env):
    """The token manager renews a token at 80% of its lifetime but after 24 hours at the latest;
    the minute resyncs of the projection's config find the same content and leave the files'
    directory as it was, a changed ConfigMap is written at the next one."""
    client, clock, mgr, _ = env
    cms = client.resource("", "v1", "configmaps")
    await cms.create({"metadata": {"name": "kube-root-ca.crt", "namespace": "default"}, "data": {"ca.crt": "one"}})
    p = await pod(client, "week", {"serviceAccountToken": {"path": "token", "expirationSeconds": 7 * 24 * 3600}},
                  {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}})
    vol = (await mgr.mount(p))["identity"]
    token, data = read(vol, "token"), (Path(vol) / "..data").readlink()
    for _ in range(3):
        await clock.advance(60)
    assert (Path(vol) / "..data").readlink() == data and read(vol, "token") == token
    await cms.patch("kube-root-ca.crt", {"data": {"ca.crt": "two"}}, "application/merge-patch+json",
                    namespace="default")
    await clock.advance(60)
    await eventually(lambda: _async_when(lambda: _read_async(vol, "ca.crt"), lambda got: got == b"two"))
    assert read(vol, "token") == token
    await clock.advance(24 * 3600 - 4 * 60 - 1)
    assert read(vol, "token") == token
    await clock.advance(61)
    await eventually(lambda: _async_when(lambda: _read_async(vol, "token"), lambda got: got != token))


async def _read_async(vol: str, name: str) -> bytes:
    return read(vol, name)


async def test_a_removed_volume_directory_is_written_again_at_the_next_resync(env):
    """Files that are gone (the volume's directory removed under the pod) are not 'unchanged':
    the next resync writes them again."""
    client, clock, mgr, _ = env
    cms = client.resource("", "v1", "configmaps")
    await cms.create({"metadata": {"name": "kube-root-ca.crt", "namespace": "default"}, "data": {"ca.crt": "one"}})
    p = await pod(client, "healed", {"serviceAccountToken": {"path": "token"}},
                  {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}})
    vol = (await mgr.mount(p))["identity"]
    shutil.rmtree(vol)
    await clock.advance(60)
    await eventually(lambda: _present(vol, "ca.crt"))
    assert read(vol, "ca.crt") == b"one" and read(vol, "token")


async def _present(vol: str, name: str) -> bool:
    return (Path(vol) / name).exists()


async def _true(value):
    return value


async def _equal(get, want):
    return await get() == want
