"""`nanokube up` configured as upstream's defaults are (GA APIs only, alpha gates off) and with
GenericWorkload off: it starts, prints what it runs with, serves no alpha or beta version, reports
the gates on /metrics, drops a pod's schedulingGroup and schedules the pod on its own."""

import json

import pytest

from tests.e2e.conftest import STORE, running_cluster, wait_for

FLAGS = ("--runtime-config", "api/alpha=false,api/beta=false",
         "--feature-gates", "AllAlpha=false,GenericWorkload=false,DRADeviceBindingConditions=false")


def test_up_as_upstreams_defaults_with_generic_workload_off():
    with running_cluster("gates", FLAGS) as c:
        versions = c.kubectl("api-versions").stdout.split()
        assert "scheduling.k8s.io/v1" in versions and "resource.k8s.io/v1" in versions
        assert not [v for v in versions if "alpha" in v or ("beta" in v and "metrics.k8s.io" not in v)], versions
        assert "podgroups" not in c.kubectl("api-resources", "-o", "name").stdout
        metrics = c.kubectl("get", "--raw", "/metrics").stdout
        assert 'kubernetes_feature_enabled{name="GenericWorkload",stage="BETA"} 0' in metrics
        assert 'kubernetes_feature_enabled{name="CompositePodGroup",stage="ALPHA"} 0' in metrics
        assert 'kubernetes_feature_enabled{name="HPAScaleToZero",stage="BETA"} 1' in metrics

        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "member", "namespace": "default"},
               "spec": {"schedulingGroup": {"podGroupName": "trainers"},
                        "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "3600"]}]}}
        c.kubectl("create", "-f", "-", input=json.dumps(pod))
        stored = c.kubectl_json("get", "pod", "member")
        assert "schedulingGroup" not in stored["spec"]
        wait_for(lambda: c.kubectl_json("get", "pod", "member")["spec"].get("nodeName"), 60, "the pod scheduled alone")
        log = c.log_path.read_text()
    assert ("feature gates beyond 1.37's defaults: DRADeviceBindingConditions=false,GenericWorkload=false; APIs: "
            "1.37's GA-only default, then nanokube's api/all=true, then api/alpha=false,api/beta=false") in log


@pytest.mark.skipif(STORE == "memory", reason="the memory store serves one process")
def test_every_api_server_worker_serves_by_the_flags():
    """With two workers each request may land on either: every one drops the gate's field and
    leaves the version out, and /metrics reports the gate once."""
    flags = ("--api-workers", "2", "--runtime-config", "scheduling.k8s.io/v1alpha3=false",
             "--feature-gates", "CompositePodGroup=false")
    with running_cluster("gates-workers", flags) as c:
        for i in range(6):
            group = json.loads(c.kubectl("get", "--raw", "/apis/scheduling.k8s.io").stdout)
            assert [v["version"] for v in group["versions"]] == ["v1", "v1beta1"]
            pg = {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                  "metadata": {"name": f"g{i}", "namespace": "default"},
                  "spec": {"parentCompositePodGroupName": "fleet", "schedulingPolicy": {"basic": {}}}}
            created = json.loads(c.kubectl("create", "-f", "-", "-o", "json", input=json.dumps(pg)).stdout)
            assert "parentCompositePodGroupName" not in created["spec"]
        metrics = c.kubectl("get", "--raw", "/metrics").stdout
        assert metrics.count('kubernetes_feature_enabled{name="CompositePodGroup",stage="ALPHA"} 0\n') == 1
