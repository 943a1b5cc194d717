"""`nanokube up --api-workers 2`: a LoadBalancer Service with externalTrafficPolicy Local gets a
healthCheckNodePort through either worker, and the port is one Service's across both: asked for
through the other worker it is kube-apiserver's 500 (as a node port, the 422), until the policy
change that frees it has been made through the first."""

from __future__ import annotations

import pytest

from .conftest import STORE, running_cluster
from .test_api_workers import _conns

SVCS = "/api/v1/namespaces/default/services"
TAKEN = "Internal error occurred: failed to allocate requested HealthCheck NodePort {}: provided port is already allocated"


def _lb(name: str, **spec) -> dict:
    return {"metadata": {"name": name}, "spec": {"type": "LoadBalancer", "externalTrafficPolicy": "Local",
                                                  "ports": [{"port": 80}], **spec}}


@pytest.mark.skipif(STORE == "memory", reason="the memory store serves one process")
def test_a_health_check_port_is_one_services_across_workers():
    with running_cluster("hc-port", ("--api-workers", "2")) as c:
        conns, pids = _conns(c, 16)
        a, b = (next(x for x in conns if x.worker == pid) for pid in pids)
        code, made = a.call("POST", SVCS, _lb("first"))
        assert code == 201, made
        hc = made["spec"]["healthCheckNodePort"]
        assert 30000 <= hc <= 32767 and hc != made["spec"]["ports"][0]["nodePort"]
        for w in (a, b):
            code, status = w.call("POST", SVCS, _lb("second", healthCheckNodePort=hc))
            assert (code, status["message"]) == (500, TAKEN.format(hc)), status
            code, status = w.call("POST", SVCS, _lb("third", type="NodePort", externalTrafficPolicy="Cluster",
                                                    ports=[{"port": 80, "nodePort": hc}]))
            assert (code, status["message"]) == (422, f'Service "third" is invalid: spec.ports[0].nodePort: Invalid '
                                                      f"value: {hc}: provided port is already allocated"), status
        first = a.call("GET", f"{SVCS}/first")[1]
        first["spec"]["externalTrafficPolicy"] = "Cluster"  # its healthCheckNodePort left as it was: dropped
        code, put = a.call("PUT", f"{SVCS}/first", first)
        assert code == 200 and "healthCheckNodePort" not in put["spec"], put
        code, second = b.call("POST", SVCS, _lb("second", healthCheckNodePort=hc))
        assert code == 201 and second["spec"]["healthCheckNodePort"] == hc, second
