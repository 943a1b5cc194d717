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
#: a first process that ends on SIGTERM: a bare `sleep infinity` as PID 1 has no handler, so the
#: kernel drops the signal and the deleted pod waits out the kubelet's 2 s minimum grace for SIGKILL
UNTIL_TERM = ["sh", "-c", "trap 'exit 0' TERM; sleep infinity & wait"]


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
            "containers": [{"name": "main", "image": "busybox:1.36", "command": UNTIL_TERM,
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


@pytest.mark.parametrize("byo", ["simulated"], indirect=True)
def test_a_joined_kubelets_root_dir_is_where_a_driver_registers_and_its_claims_outlive_a_restart(byo):
    """`nanokube kubelet --root-dir R`, as upstream's: a driver registers through R/plugins_registry
    and serves from R/plugins/<driver>; the kubelet checkpoints the claim it prepared
    (R/dra_manager_state), so once restarted it adopts the running pod without a second
    NodePrepareResources, the container keeps its CDI edits, and the pod's deletion unprepares. The
    driver writes its CDI specs where a driver's default CDI root is, one of the runtime's
    --cdi-spec-dirs (containerd's /etc/cdi, a directory of the test's here), not R/cdi."""
    import contextlib
    import os
    import shutil
    import signal
    import socket
    import subprocess
    import sys
    import tempfile

    driver_name, node = "gpu.joined.example.com", "byo-joined"
    root = tempfile.mkdtemp(prefix="nk-", dir="/tmp")  # a socket's path: at most 105 bytes for gRPC
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    argv = [sys.executable, "-m", "nanokube.cli", "kubelet", "--kubeconfig", byo.kubeconfig, "--root-dir", root,
            "--node-name", node, "--bind-address", "127.0.0.1", "--secure-port", str(port), "--hostname-override",
            "127.0.0.1", "--read-only-port", "0", "--healthz-port", "0",
            "--cdi-spec-dirs", f"{root}/etc/cdi,{root}/var/run/cdi"]
    log = open(os.path.join(root, "kubelet.log"), "ab")
    kubelet = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    api = byo.client()
    core, resource = client.CoreV1Api(api), client.ResourceV1Api(api)
    driver = None
    try:
        wait_for(lambda: os.path.isdir(os.path.join(root, "plugins_registry")), what="the kubelet's plugins_registry")
        driver = PluginDriver(driver_name, os.path.join(root, "plugins_registry"), os.path.join(root, "plugins"),
                              os.path.join(root, "etc", "cdi"), lambda ns, n: [("gpu", node, "gpu-0")]).start()
        wait_for(lambda: driver.statuses, what="registration")
        assert driver.statuses == [(True, "")]
        resource.create_device_class({"metadata": {"name": driver_name}, "spec": {
            "selectors": [{"cel": {"expression": f"device.driver == '{driver_name}'"}}]}})
        resource.create_resource_slice({"metadata": {"name": f"{node}-{driver_name}"}, "spec": {
            "driver": driver_name, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0"}]}})
        claim = resource.create_namespaced_resource_claim("default", {"metadata": {"name": "joined"}, "spec": {
            "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": driver_name}}]}}})
        core.create_namespaced_pod("default", {"metadata": {"name": "joined"}, "spec": {
            "terminationGracePeriodSeconds": 0, "resourceClaims": [{"name": "gpu", "resourceClaimName": "joined"}],
            "containers": [{"name": "main", "image": "busybox:1.36", "command": UNTIL_TERM,
                            "resources": {"claims": [{"name": "gpu"}]}}]}})
        wait_for(lambda: core.read_namespaced_pod("joined", "default").status.phase == "Running", what="pod Running")
        ref = {"namespace": "default", "uid": claim.metadata.uid, "name": "joined"}
        assert driver.called("NodePrepareResources") == [{"claims": [ref]}]
        assert os.path.isfile(os.path.join(root, "dra_manager_state"))

        kubelet.send_signal(signal.SIGTERM)
        assert kubelet.wait(timeout=30) == 0
        kubelet = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        wait_for(lambda: len(driver.statuses) == 2, what="registration with the restarted kubelet")
        env = wait_for(lambda: (r := byo.kubectl("exec", "joined", "--", "env", check=False)).returncode == 0
                       and r.stdout.splitlines(), what="exec in the adopted pod")
        assert f"DRIVER={driver_name}" in env and "DEVICE_0=gpu-0" in env
        assert driver.called("NodePrepareResources") == [{"claims": [ref]}]

        core.delete_namespaced_pod("joined", "default")
        assert wait_for(lambda: driver.called("NodeUnprepareResources"), what="NodeUnprepareResources") == [
            {"claims": [ref]}]
    finally:
        kubelet.send_signal(signal.SIGTERM)
        try:
            kubelet.wait(timeout=30)
        except subprocess.TimeoutExpired:
            kubelet.kill()
            kubelet.wait()
        log.close()
        if driver is not None:
            driver.stop()
        for delete, args in ((core.delete_namespaced_pod, ("joined", "default")),
                             (resource.delete_namespaced_resource_claim, ("joined", "default")),
                             (resource.delete_resource_slice, (f"{node}-{driver_name}",)),
                             (resource.delete_device_class, (driver_name,)), (core.delete_node, (node,))):
            with contextlib.suppress(client.ApiException):  # (one the test never made: a 404)
                delete(*args)
        shutil.rmtree(root, ignore_errors=True)
