"""Two `nanokube up` API servers on one etcd, as an HA control plane. The second joins with a copy
of the first's DIR/pki (the cluster CA, the service-account key, the front-proxy CA: what kubeadm
copies to another control-plane node), nodes of its own, and its own listen and advertised address
on the first's port. Both serve the same objects at the same resourceVersions, the `kubernetes`
Service's endpoints name both, neither hands out a ClusterIP or node port the other did, and
when one is killed the other drops it and takes over scheduling."""

from __future__ import annotations

import shutil
import signal
import ssl
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from .conftest import STORE, start_cluster, wait_for
from .test_kube_proxy import free_port

pytestmark = [pytest.mark.store,
              pytest.mark.skipif(STORE != "etcd", reason="API servers share a store only on etcd")]

SECOND_NODES = """\
pools:
  - name: second
    count: 1
    capacity: {cpu: "8", memory: 16Gi, pods: "110"}
"""


def service(name: str, cluster_ip: str, node_port: int) -> str:
    return (f"apiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: default}}\n"
            f"spec: {{type: NodePort, clusterIP: {cluster_ip}, ports: [{{port: 80, nodePort: {node_port}}}]}}\n")


def test_two_api_servers_on_one_etcd_serve_alike_and_survive_a_kill_9(store_url):
    d = Path(tempfile.mkdtemp(prefix="nanokube-e2e-ha-"))
    port = str(free_port())
    first = start_cluster(d / "first", store_url, ("--port", port, "--advertise-address", "192.0.2.11"))
    second = None
    try:
        shutil.copytree(d / "first" / "pki", d / "second" / "pki")
        (d / "cluster.yaml").write_text(SECOND_NODES)
        second = start_cluster(d / "second", store_url, ("--port", port, "--address", "127.0.0.2",
                                                         "--advertise-address", "192.0.2.12",
                                                         "--cluster", str(d / "cluster.yaml")))
        # its own kubeconfig dials 127.0.0.2, which its serving certificate names
        assert set(second.kubectl("get", "nodes", "-o", "name").stdout.split()) == {
            "node/gpu-0", "node/gpu-1", "node/second-0"}
        made = first.kubectl_json("create", "configmap", "ha", "--from-literal=k=v")
        assert second.kubectl_json("get", "configmap", "ha")["metadata"]["resourceVersion"] == \
            made["metadata"]["resourceVersion"]
        # a GET through one server right after a write through the other reads that write (a consistent read)
        from kubernetes import client
        writes, reads = client.CoreV1Api(second.client()), client.CoreV1Api(first.client())
        for i in range(100):
            writes.patch_namespaced_config_map("ha", "default", {"data": {"k": str(i)}})
            assert reads.read_namespaced_config_map("ha", "default").data["k"] == str(i)
        # a ClusterIP and a node port one server handed out are taken for the other too (the store arbitrates)
        first.kubectl("create", "-f", "-", input=service("a", "10.96.50.50", 30080))
        for name, ip, node_port in (("b", "10.96.50.51", 30080), ("c", "10.96.50.50", 30081)):
            taken = second.kubectl("create", "-f", "-", input=service(name, ip, node_port), check=False)
            assert taken.returncode != 0 and "already allocated" in taken.stderr, taken.stderr
        # a service account token the first server issued, accepted by the second (the shared key)
        token = wait_for(lambda: first.kubectl("create", "token", "default", check=False).stdout.strip(),
                         what="a token for the default ServiceAccount")
        tls = ssl.create_default_context(cafile=str(d / "second" / "pki" / "ca.crt"))
        req = urllib.request.Request(f"https://127.0.0.2:{port}/api/v1/namespaces/default/configmaps/ha",
                                     headers={"Authorization": f"Bearer {token}"})
        with pytest.raises(urllib.error.HTTPError) as refused:  # authenticated (403, not 401): no RBAC grant
            urllib.request.urlopen(req, context=tls, timeout=10)
        assert refused.value.code == 403

        def endpoints() -> list[str]:
            slice_ = second.kubectl_json("get", "endpointslice", "kubernetes")
            return sorted(a for e in slice_.get("endpoints") or [] for a in e["addresses"])
        wait_for(lambda: endpoints() == ["192.0.2.11", "192.0.2.12"], what="both servers in the endpoints")

        first.stop(signal.SIGKILL)
        wait_for(lambda: endpoints() == ["192.0.2.12"], what="the killed server's address dropped (lease TTL)")
        second.kubectl("run", "after", "--image=nginx", "--restart=Never")
        wait_for(lambda: second.kubectl_json("get", "pod", "after")["spec"].get("nodeName"),
                 what="a pod scheduled by the second server's scheduler once it took the kube-scheduler Lease")
    finally:
        first.stop()
        if second is not None:
            second.stop()
        shutil.rmtree(d, ignore_errors=True)
