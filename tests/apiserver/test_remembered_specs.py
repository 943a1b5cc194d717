"""The pods of one template send one spec over and over, and the server remembers which spec JSON
passed its decoding, its validation and its warnings clean (issue 19). A spec sent again is still
judged as that request asks and as its own pod needs: these creates send each spec twice or more
and expect what the first one got."""

import asyncio
import json

from kubernetes import client

from tests.served import served


async def _create(api: client.ApiClient, pod: dict, query: str = "") -> tuple[int, dict, str]:
    """(status, body, Warning header) of a pod create, its body sent as it is."""
    def send():
        r = api.rest_client.pool_manager.request(
            "POST", f"{api.configuration.host}/api/v1/namespaces/default/pods{query}", body=json.dumps(pod).encode(),
            headers={"Content-Type": "application/json"})
        return r.status, json.loads(r.data), r.headers.get("Warning") or ""
    return await asyncio.to_thread(send)


def _pod(name: str, spec: dict, **meta) -> dict:
    return {"metadata": {"name": name, **meta}, "spec": spec}


async def test_a_spec_with_an_unknown_field_is_judged_by_each_requests_field_validation(tmp_path):
    spec = {"containers": [{"name": "c", "image": "i"}], "bogus": 1}
    async with served(tmp_path) as (_, api):
        for i in range(2):
            status, _, warnings = await _create(api, _pod(f"ignored-{i}", spec), "?fieldValidation=Ignore")
            assert (status, warnings) == (201, "")
        status, body, _ = await _create(api, _pod("strict", spec), "?fieldValidation=Strict")
        assert status == 400 and 'strict decoding error: unknown field "spec.bogus"' in body["message"]
        status, _, warnings = await _create(api, _pod("warned", spec), "?fieldValidation=Warn")
        assert status == 201 and 'unknown field \\"spec.bogus\\"' in warnings, warnings


async def test_a_repeated_spec_has_its_zero_values_dropped_each_time(tmp_path):
    """The decoding drops an omitempty zero (`hostNetwork: false`) from every copy: a spec the
    decoding changes is never remembered as one it leaves as it is."""
    spec = {"containers": [{"name": "c", "image": "i"}], "hostNetwork": False, "nodeName": ""}
    async with served(tmp_path) as (_, api):
        for i in range(3):
            status, body, _ = await _create(api, _pod(f"p{i}", spec))
            assert status == 201 and not {"hostNetwork", "nodeName"} & set(body["spec"]), body["spec"]


async def test_a_repeated_spec_with_an_empty_list_validation_reads_is_held_each_time(tmp_path):
    """`supplementalGroups: []` is held for validation and dropped after it: in every copy of a
    linux pod's spec (the decoding holds it by reference in the request's own object), and a
    windows pod's is refused every time."""
    def spec(os: str) -> dict:
        return {"os": {"name": os}, "containers": [{"name": "c", "image": "i"}],
                "securityContext": {"supplementalGroups": []}}
    async with served(tmp_path) as (_, api):
        for i in range(3):
            status, body, _ = await _create(api, _pod(f"linux-{i}", spec("linux")))
            assert status == 201 and body["spec"]["securityContext"] == {}, body["spec"]
        for i in range(2):
            status, body, _ = await _create(api, _pod(f"windows-{i}", spec("windows")))
            assert status == 422 and "spec.securityContext.supplementalGroups" in body["message"]


async def test_a_spec_found_valid_is_still_judged_with_its_pods_annotations(tmp_path):
    """The spec's own rules are remembered; those that read the pod's annotations with it are not:
    a seccomp annotation that contradicts the (remembered) spec is refused, and the spec's
    warnings for an annotation of a deprecated form are given to the pod that has it."""
    spec = {"containers": [{"name": "c", "image": "i"}],
            "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}}
    async with served(tmp_path) as (_, api):
        for i in range(2):
            status, _, warnings = await _create(api, _pod(f"plain-{i}", spec))
            assert (status, warnings) == (201, "")
        contradicting = {"seccomp.security.alpha.kubernetes.io/pod": "unconfined"}
        status, body, _ = await _create(api, _pod("contradicting", spec, annotations=contradicting))
        assert status == 422 and "seccomp type in annotation and field must match" in body["message"]
        deprecated = {"scheduler.alpha.kubernetes.io/critical-pod": ""}
        status, _, warnings = await _create(api, _pod("deprecated", spec, annotations=deprecated))
        assert status == 201 and "metadata.annotations[scheduler.alpha.kubernetes.io/critical-pod]" in warnings


async def test_an_invalid_spec_is_refused_every_time(tmp_path):
    spec = {"containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 70000}]}]}
    async with served(tmp_path) as (_, api):
        for i in range(3):
            status, body, _ = await _create(api, _pod(f"p{i}", spec))
            assert status == 422 and "spec.containers[0].ports[0].containerPort" in body["message"]


def _token_spec(volume: str, mount: str, *more_volumes: dict) -> dict:
    """A spec with a projected token volume named `volume`, mounted by the name `mount`."""
    return {"serviceAccountName": "default",
            "containers": [{"name": "c", "image": "i", "volumeMounts": [
                {"name": mount, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": True}]}],
            "volumes": [{"name": volume, "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}},
                        *more_volumes]}


async def test_a_token_volumes_own_name_is_still_checked_where_it_matters(tmp_path):
    """Pods that differ only in their token volume's name (ServiceAccount admission draws one per pod)
    are remembered as one spec; a name that is not a DNS label, a mount of another name, a second
    volume of that name and a mount naming what stands for it are each refused all the same."""
    async with served(tmp_path) as (_, api):
        for suffix in ("bbbbb", "ccccc", "ddddd"):
            name = "kube-api-access-" + suffix
            status, body, _ = await _create(api, _pod(suffix, _token_spec(name, name)))
            assert status == 201, body
        refused = {
            "upper": (_token_spec("kube-api-access-FFFFF", "kube-api-access-FFFFF"), "spec.volumes[0].name"),
            "other-mount": (_token_spec("kube-api-access-fffff", "kube-api-access-ggggg"),
                            "spec.containers[0].volumeMounts[0].name: Not found"),
            "twice": (_token_spec("kube-api-access-fffff", "kube-api-access-fffff",
                                  {"name": "kube-api-access-fffff", "emptyDir": {}}), "spec.volumes[1].name: Duplicate"),
            "stand-in": (_token_spec("kube-api-access-fffff", "kube-api-access-00000"),
                         "spec.containers[0].volumeMounts[0].name: Not found"),
        }
        for name, (spec, message) in refused.items():
            status, body, _ = await _create(api, _pod(name, spec))
            assert status == 422 and message in body["message"], (name, body)


async def test_pods_of_one_template_each_mount_their_own_token_volume(tmp_path):
    async with served(tmp_path, disable_admission_plugins=()) as (_, api):
        await asyncio.to_thread(client.CoreV1Api(api).create_namespaced_service_account, "default",
                                {"metadata": {"name": "default"}})
        names = set()
        for i in range(3):
            status, body, _ = await _create(api, _pod(f"p{i}", {"containers": [{"name": "c", "image": "i"}]}))
            assert status == 201, body
            (volume,) = body["spec"]["volumes"]
            (mount,) = body["spec"]["containers"][0]["volumeMounts"]
            assert volume["name"].startswith("kube-api-access-") and mount["name"] == volume["name"]
            names.add(volume["name"])
        assert len(names) == 3


async def _create_raw(api: client.ApiClient, body: bytes, query: str = "") -> tuple[int, dict, str]:
    """(status, body, Warning header) of a pod create of these bytes."""
    def send():
        r = api.rest_client.pool_manager.request(
            "POST", f"{api.configuration.host}/api/v1/namespaces/default/pods{query}", body=body,
            headers={"Content-Type": "application/json"})
        return r.status, json.loads(r.data), r.headers.get("Warning") or ""
    return await asyncio.to_thread(send)


async def test_a_repeated_spec_is_decoded_defaulted_and_tracked_as_the_first(tmp_path):
    """A spec remembered decoded and defaulted: every copy has the first's nulls dropped, quantities
    canonical, map keys sorted and defaults, and the same managedFields but for their time."""
    spec = {"containers": [{"name": "c", "image": "i:1", "args": None,
                            "resources": {"limits": {"memory": "1Gi", "cpu": "0.5"}}}],
            "nodeSelector": {"zone": "a", "disk": "ssd"}, "hostname": None}
    async with served(tmp_path) as (_, api):
        made = []
        for i in range(3):
            status, body, _ = await _create(api, _pod(f"p{i}", spec))
            assert status == 201, body
            made.append(body)
        first = made[0]["spec"]
        assert list(first["nodeSelector"]) == ["disk", "zone"] and "hostname" not in first
        (c,) = first["containers"]
        assert "args" not in c and c["resources"]["requests"] == {"cpu": "500m", "memory": "1Gi"}
        assert (c["imagePullPolicy"], first["restartPolicy"], first["dnsPolicy"]) == ("IfNotPresent", "Always",
                                                                                      "ClusterFirst")

        def tracked(pod: dict) -> list:
            return [{k: v for k, v in e.items() if k != "time"} for e in pod["metadata"]["managedFields"]]
        for pod in made[1:]:
            assert pod["spec"] == first and tracked(pod) == tracked(made[0])
            assert pod["spec"] is not first


async def test_the_rest_of_a_body_is_decoded_whatever_its_spec(tmp_path):
    """With its spec remembered, a body's metadata and other fields are still decoded: their
    unknown fields per fieldValidation, their type errors as the decoder words them."""
    spec = {"containers": [{"name": "c", "image": "i"}]}
    async with served(tmp_path) as (_, api):
        for i in range(2):
            assert (await _create(api, _pod(f"p{i}", spec)))[0] == 201
        status, body, _ = await _create(api, _pod("strict", spec, bogus=1), "?fieldValidation=Strict")
        assert status == 400 and 'strict decoding error: unknown field "metadata.bogus"' in body["message"]
        status, body, warnings = await _create(api, _pod("warned", spec, bogus=1), "?fieldValidation=Warn")
        assert status == 201 and 'unknown field \\"metadata.bogus\\"' in warnings and "bogus" not in body["metadata"]
        status, body, _ = await _create(api, _pod("typed", spec, labels=5))
        assert status == 400 and "cannot unmarshal number into Go struct field ObjectMeta.metadata.labels" \
            in body["message"], body["message"]
        status, body, _ = await _create(api, {**_pod("extra", spec), "extra": True}, "?fieldValidation=Strict")
        assert status == 400 and 'unknown field "extra"' in body["message"]


async def test_a_remembered_spec_sent_with_a_repeated_key_is_a_strict_error(tmp_path):
    """A body whose keys repeat is judged as the decoder meets them even where the spec it decodes
    to is one remembered clean."""
    async with served(tmp_path) as (_, api):
        spec = {"containers": [{"name": "c", "image": "i"}], "restartPolicy": "Never"}
        for i in range(2):
            assert (await _create(api, _pod(f"p{i}", spec)))[0] == 201
        raw = (b'{"metadata":{"name":"twice"},"spec":{"containers":[{"name":"c","image":"i"}],'
               b'"restartPolicy":"Always","restartPolicy":"Never"}}')
        status, body, _ = await _create_raw(api, raw, "?fieldValidation=Strict")
        assert status == 400 and 'duplicate field "spec.restartPolicy"' in body["message"], body["message"]
        status, _, warnings = await _create_raw(api, raw.replace(b'"twice"', b'"warned"'), "?fieldValidation=Warn")
        assert status == 201 and 'duplicate field \\"spec.restartPolicy\\"' in warnings, warnings
