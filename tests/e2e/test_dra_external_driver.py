"""Bring your own DRA driver: a kubelet plugin serving the real gRPC APIs
registers with a simulated node of `nanokube up` through the node's
plugins_registry socket directory, publishes its ResourceSlice through the
API, and the node agent prepares the claim of a pod scheduled on its devices
by calling NodePrepareResources; the container sees the CDI spec's env and
mount (and, simulated, its device node), and deleting the pod calls
NodeUnprepareResources; the node's /metrics counts the calls and the claims
in use as the kubelet's DRA metrics do. On both runtimes: the simulated one's
`env` prints what the container was given, the process runtime's is a real
process's environment and mount namespace."""

from __future__ import annotations

import pytest
from kubernetes import client

from tests.e2e.conftest import PROCESS_RUNTIME, process_cluster, running_cluster, wait_for
from tests.node.dra.plugin_driver import PluginDriver

DRIVER = "gpu.byo.example.com"
PREPARE = "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources"


def _metrics(c, node: str) -> str:
    return c.kubectl("get", "--raw", f"/api/v1/nodes/{node}/proxy/metrics").stdout


@pytest.fixture(scope="module", params=["simulated", pytest.param("process", marks=PROCESS_RUNTIME)])
def byo(request, store_url):
    with (running_cluster("byo-dra") if request.param == "simulated" else process_cluster(store_url, "byo-dra")) as c:
        yield c


def test_a_driver_of_ones_own_prepares_the_claim_and_the_container_gets_its_cdi_edits(byo, request):
    api = byo.client()
    core, resource = client.CoreV1Api(api), client.ResourceV1Api(api)
    node = wait_for(lambda: core.list_node().items)[0].metadata.name
    node_dir = byo.data_dir / "pods" / node
    assert (node_dir / "plugins_registry").is_dir()

    def results(namespace: str, name: str) -> list[tuple[str, str, str]]:
        """As a real driver does: read the claim's allocation for this driver's devices."""
        claim = resource.read_namespaced_resource_claim(name, namespace)
        return [(r.request, r.pool, r.device) for r in claim.status.allocation.devices.results if r.driver == DRIVER]

    driver = PluginDriver(DRIVER, str(node_dir / "plugins_registry"), str(node_dir / "plugins"), str(node_dir / "cdi"),
                          results).start()
    try:
        wait_for(lambda: driver.statuses, what="registration")
        assert driver.statuses == [(True, "")]
        resource.create_device_class({"metadata": {"name": DRIVER}, "spec": {
            "selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}]}})
        resource.create_resource_slice({"metadata": {"name": f"{node}-{DRIVER}"}, "spec": {
            "driver": DRIVER, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0"}, {"name": "gpu-1"}]}})
        resource.create_namespaced_resource_claim_template("default", {"metadata": {"name": "byo"}, "spec": {
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER}}]}}}})
        core.create_namespaced_pod("default", {"metadata": {"name": "byo"}, "spec": {
            "terminationGracePeriodSeconds": 0, "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "byo"}],
            "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sleep", "infinity"],
                            "resources": {"claims": [{"name": "gpu"}]}}]}})
        wait_for(lambda: core.read_namespaced_pod("byo", "default").status.phase == "Running", what="pod Running")
        pod = core.read_namespaced_pod("byo", "default")
        claim_name = pod.status.resource_claim_statuses[0].resource_claim_name
        claim = resource.read_namespaced_resource_claim(claim_name, "default")
        [device] = [r.device for r in claim.status.allocation.devices.results]
        assert driver.called("NodePrepareResources") == [{"claims": [
            {"namespace": "default", "uid": claim.metadata.uid, "name": claim_name}]}]

        env = byo.kubectl("exec", "byo", "--", "env").stdout.splitlines()
        assert f"DRIVER={DRIVER}" in env
        assert f"DEVICE_{device.rsplit('-', 1)[1]}={device}" in env
        # the spec's mount: the driver's directory for the device, read-only
        mounted = f"/var/run/{DRIVER}/{device}"
        assert byo.kubectl("exec", "byo", "--", "cat", f"{mounted}/info").stdout == f"{DRIVER} {device}\n"
        write = byo.kubectl("exec", "byo", "--", "sh", "-c", f"echo x > {mounted}/new", check=False)
        assert write.returncode != 0 and "Read-only file system" in write.stderr, write.stderr
        if request.node.callspec.params["byo"] == "simulated":  # the process runtime's /dev is the host's
            assert f"dra-{device}" in byo.kubectl("exec", "byo", "--", "ls", "/dev").stdout.split()

        # the kubelet's DRA metrics, scraped through the API server's node proxy
        metrics = _metrics(byo, node)
        assert f'dra_resource_claims_in_use{{driver_name="{DRIVER}"}} 1' in metrics
        assert (f'dra_grpc_operations_duration_seconds_count{{driver_name="{DRIVER}",grpc_status_code="OK",'
                f'method_name="{PREPARE}"}} 1') in metrics
        assert 'dra_operations_duration_seconds_count{is_error="false",operation_name="PrepareResources"}' in metrics

        core.delete_namespaced_pod("byo", "default")
        unprepared = wait_for(lambda: driver.called("NodeUnprepareResources"), what="NodeUnprepareResources")
        assert unprepared == [{"claims": [{"namespace": "default", "uid": claim.metadata.uid, "name": claim_name}]}]
        # the claim leaves the gauge before the unprepare's end (the driver's call, the claim's status) is counted
        metrics = wait_for(lambda: (m := _metrics(byo, node)) and 'dra_resource_claims_in_use{driver_name="<any>"} 0' in m
                           and 'dra_operations_duration_seconds_count{is_error="false",operation_name="UnprepareResources"}'
                           in m and m, what="no claims in use, the UnprepareResources counted")
        assert f'dra_resource_claims_in_use{{driver_name="{DRIVER}"}}' not in metrics
    finally:
        driver.stop()
