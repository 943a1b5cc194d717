"""--runtime-config as kube-apiserver merges it: a version turned off is not served (discovery,
OpenAPI, kubectl api-resources, 404 on its paths), a resource can be turned
off or on within a version, and what the flag refuses is refused with upstream's words by `up`.
The server's /metrics reports the feature gates."""

import asyncio
import contextlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from kubernetes import config

from nanokube.apiserver.app import APIServer
from nanokube.apiserver.runtime_config import from_flag
from nanokube.pki.ca import ensure_pki
from nanokube.pki.kubeconfig import write_kubeconfig
from nanokube.registry.base import all_resources
from nanokube.store.memory import MemoryStore
from tests.served import sent

KUBECTL = str(Path(sys.executable).parent / "kubectl")


def _served(value: str) -> dict[tuple[str, str], set[str]]:
    out: dict[tuple[str, str], set[str]] = {}
    for r in from_flag(value, all_resources()).served(all_resources()):
        for v in r.versions:
            out.setdefault((r.group, v), set()).add(r.plural)
    return out


def test_nanokubes_default_serves_every_version_it_implements():
    everything = {(r.group, v) for r in all_resources() for v in r.versions}
    assert set(_served("")) == everything
    assert ("scheduling.k8s.io", "v1alpha3") in everything and ("resource.k8s.io", "v1beta2") in everything


def test_upstreams_default_is_ga_only_and_a_version_or_resource_overrides_the_stage():
    served = _served("api/beta=false,api/alpha=false,scheduling.k8s.io/v1beta1=true,"
                     "resource.k8s.io/v1alpha3/resourcepoolstatusrequests=true")
    assert all(v.rstrip("0123456789") == "v" for g, v in served if (g, v) not in {
        ("scheduling.k8s.io", "v1beta1"), ("resource.k8s.io", "v1alpha3")})
    assert served[("scheduling.k8s.io", "v1beta1")] == {"workloads", "podgroups"}
    assert served[("resource.k8s.io", "v1alpha3")] == {"resourcepoolstatusrequests"}


def test_a_version_said_after_a_stage_wins_and_a_resource_after_its_version():
    served = _served("api/all=false,api/ga=true,scheduling.k8s.io/v1alpha3=true,"
                     "scheduling.k8s.io/v1alpha3/compositepodgroups=false")
    assert served[("scheduling.k8s.io", "v1alpha3")] == {"workloads", "podgroups"}
    assert ("scheduling.k8s.io", "v1beta1") not in served and ("apps", "v1") in served


def test_a_group_nanokube_has_no_version_of_is_skipped():
    assert _served("metrics.k8s.io/v1beta1=false,v1=false,api/v1=false") == _served("")


@pytest.mark.parametrize("value, error", [
    ("api/all=maybe", "invalid value api/all=maybe"),
    ("api/beta=", "invalid value api/beta="),
    ("scheduling.k8s.io/v1alpha2=true", "group version scheduling.k8s.io/v1alpha2 that has not been registered"),
    ("scheduling.k8s.io/v1beta1=no", 'invalid value of scheduling.k8s.io/v1beta1: no, err: strconv.ParseBool: '
                                     'parsing "no": invalid syntax'),
    ("scheduling.k8s.io/v1beta1/PodGroups=false", 'invalid key scheduling.k8s.io/v1beta1/PodGroups: '
     'group/version/resource and resource is always lowercase plural, not "PodGroups"'),
])
def test_refusals_word_upstreams_errors(value, error):
    with pytest.raises(ValueError) as e:
        from_flag(value, all_resources())
    assert str(e.value) == error


@pytest.mark.parametrize("flags, error", [
    (["--runtime-config", "api/alpha=false,resource.k8s.io/v9=true"],
     "group version resource.k8s.io/v9 that has not been registered"),
    (["--runtime-config", "api/beta=false", "--feature-gates", "CompositePodGroup=false"],
     "scheduling.k8s.io/v1beta1/podgroups, scheduling.k8s.io/v1beta1/workloads not served while feature gate "
     "GenericWorkload is on: --feature-gates GenericWorkload=false too"),
    (["--runtime-config", "/v1/namespaces=false,rbac.authorization.k8s.io/v1=false"],
     "the API server itself reads what it turns off (core/v1/namespaces, rbac.authorization.k8s.io/v1/clusterroles, "
     "rbac.authorization.k8s.io/v1/clusterrolebindings, rbac.authorization.k8s.io/v1/roles, "
     "rbac.authorization.k8s.io/v1/rolebindings)"),
])
def test_up_refuses_a_runtime_config_before_it_starts(tmp_path, flags, error):
    """What upstream refuses, and a resource turned off that a component whose gate is on reads."""
    r = subprocess.run([sys.executable, "-m", "nanokube.cli", "up", "--data-dir", str(tmp_path), "--port", "0", *flags],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert r.stderr.strip().endswith(f"nanokube: --runtime-config: {error}")
    assert not (tmp_path / "kubeconfig").exists()


@pytest.mark.parametrize("value, error", [
    ("flowcontrol.apiserver.k8s.io/v1=false", "flowcontrol.apiserver.k8s.io/v1=false"),
    ("api/ga=false,api/all=true", "api/ga=false"),
    ("api/all=false", "api/all=false"),
])
def test_up_refuses_turning_off_what_priority_and_fairness_reads_as_kube_apiserver_does(tmp_path, value, error):
    r = subprocess.run([sys.executable, "-m", "nanokube.cli", "up", "--data-dir", str(tmp_path), "--port", "0",
                        "--runtime-config", value], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert r.stderr.strip().endswith(f"nanokube: --runtime-config={error} conflicts with --enable-priority-and-fairness=true")


def test_up_stops_when_a_controller_reads_what_the_runtime_config_turns_off(tmp_path):
    """Upstream's controller manager would fail its lists; `up`'s are built in, so it stops at once."""
    r = subprocess.run([sys.executable, "-m", "nanokube.cli", "up", "--data-dir", str(tmp_path), "--port", "0",
                        "--runtime-config", "batch/v1=false"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    assert r.stderr.strip().endswith("nanokube: --runtime-config: the controllers read what it turns off (no resource "
                                     "jobs in batch/v1); --controllers can leave theirs out")


async def test_a_storage_version_no_longer_served_is_still_decodable(tmp_path):
    async with _server(tmp_path, "certificates.k8s.io/v1beta1=false") as (server, api):
        path = "/apis/internal.apiserver.k8s.io/v1alpha1/storageversions/certificates.k8s.io.podcertificaterequests"
        for _ in range(200):
            code, sv, _ = await sent(api, "GET", path)
            if code == 200 and sv.get("status"):
                break
            await asyncio.sleep(0.05)
        [version] = sv["status"]["storageVersions"]
        assert version["servedVersions"] == ["certificates.k8s.io/v1"]
        assert version["decodableVersions"] == ["certificates.k8s.io/v1", version["encodingVersion"]]
        assert version["encodingVersion"] == "certificates.k8s.io/v1beta1"


@contextlib.asynccontextmanager
async def _server(tmp_path: Path, runtime_config: str):
    pki = ensure_pki(str(tmp_path))
    server = APIServer(MemoryStore(), pki, port=0, runtime_config=from_flag(runtime_config, all_resources()))
    server.rest.admission.disable("ServiceAccount")
    await server.start()
    try:
        write_kubeconfig(str(tmp_path / "kubeconfig"), server.url, pki)
        api = config.new_client_from_config(config_file=str(tmp_path / "kubeconfig"))
        try:
            yield server, api
        finally:
            api.close()
    finally:
        await server.stop()


def _kubectl(tmp_path: Path, *args: str) -> str:
    return subprocess.run([KUBECTL, *args, "--kubeconfig", str(tmp_path / "kubeconfig"),
                           "--cache-dir", str(tmp_path / "cache")], capture_output=True, text=True, timeout=60).stdout


async def test_a_version_turned_off_is_not_served(tmp_path):
    async with _server(tmp_path, "scheduling.k8s.io/v1beta1=false,scheduling.k8s.io/v1alpha3/compositepodgroups=false,"
                                 "resource.k8s.io/v1alpha3=false,internal.apiserver.k8s.io/v1alpha1=false") as (server, api):
        code, groups, _ = await sent(api, "GET", "/apis")
        scheduling = next(g for g in groups["groups"] if g["name"] == "scheduling.k8s.io")
        assert [v["version"] for v in scheduling["versions"]] == ["v1", "v1alpha3"]
        assert "internal.apiserver.k8s.io" not in [g["name"] for g in groups["groups"]]
        code, alpha, _ = await sent(api, "GET", "/apis/scheduling.k8s.io/v1alpha3")
        assert sorted(r["name"] for r in alpha["resources"]) == ["podgroups", "podgroups/status", "workloads"]
        assert (await sent(api, "GET", "/apis/scheduling.k8s.io/v1beta1"))[0] == 404
        assert (await sent(api, "GET", "/apis/scheduling.k8s.io/v1beta1/namespaces/default/podgroups"))[0] == 404
        assert (await sent(api, "GET", "/apis/scheduling.k8s.io/v1alpha3/compositepodgroups"))[0] == 404
        assert (await sent(api, "GET", "/apis/resource.k8s.io/v1alpha3/resourcepoolstatusrequests"))[0] == 404
        code, created, _ = await sent(api, "POST", "/apis/scheduling.k8s.io/v1alpha3/namespaces/default/podgroups", {
            "apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "PodGroup", "metadata": {"name": "g"},
            "spec": {"schedulingPolicy": {"basic": {}}}})
        assert code == 201, created
        metrics = await asyncio.to_thread(api.rest_client.pool_manager.request, "GET", server.url + "/metrics")
        assert b'kubernetes_feature_enabled{name="GenericWorkload",stage="BETA"} 1\n' in metrics.data
        code, index, _ = await sent(api, "GET", "/openapi/v3")
        assert "apis/scheduling.k8s.io/v1alpha3" in index["paths"]
        assert "apis/scheduling.k8s.io/v1beta1" not in index["paths"]
        listed = await asyncio.to_thread(_kubectl, tmp_path, "api-resources", "--api-group", "scheduling.k8s.io", "-o", "name")
        assert listed.split() == ["podgroups.scheduling.k8s.io", "priorityclasses.scheduling.k8s.io",
                                  "workloads.scheduling.k8s.io"]
        got = await asyncio.to_thread(_kubectl, tmp_path, "get", "podgroups.v1alpha3.scheduling.k8s.io", "g", "-o", "json")
        assert json.loads(got)["apiVersion"] == "scheduling.k8s.io/v1alpha3"
