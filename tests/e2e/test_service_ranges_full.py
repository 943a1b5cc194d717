"""`nanokube up`, with one API server worker and with two, once every node port of 30000-32767 is
held: a Service that needs one picked is kube-apiserver's 500 InternalError "failed to allocate a
nodePort: range is full" through either worker, one that asks for a taken port by number stays the
422 on its field, and a freed port is picked again. With two workers, one that has handed out its
own share of the range goes on with the other's (the store arbitrates), so the range is full only
when all of it is."""

from __future__ import annotations

import pytest

from .conftest import STORE, running_cluster
from .test_api_workers import _conns

SVCS = "/api/v1/namespaces/default/services"
FIRST, LAST = 30000, 32767


def _service(name: str, ports: int, **port) -> dict:
    return {"metadata": {"name": name}, "spec": {"type": "NodePort", "selector": {"app": name},
                                                  "ports": [{"name": f"p{i}", "port": 1000 + i, **port} for i in range(ports)]}}


@pytest.mark.parametrize("workers", [1, pytest.param(2, marks=pytest.mark.skipif(
    STORE == "memory", reason="the memory store serves one process"))])
def test_a_node_port_from_the_full_range_is_an_internal_error(workers):
    with running_cluster(f"ports-full-{workers}", ("--api-workers", str(workers))) as c:
        conns, pids = _conns(c, 8 * workers)
        by_worker = [next(x for x in conns if x.worker == pid) for pid in pids]
        first = by_worker[0]  # every port through one worker: with two, its share and then the other's
        held: list[set[int]] = []
        while (n := sum(map(len, held))) < LAST - FIRST + 1:
            code, made = first.call("POST", SVCS, _service(f"s{len(held)}", min(250, LAST - FIRST + 1 - n)))
            assert code == 201, made
            held.append({p["nodePort"] for p in made["spec"]["ports"]})
        assert set().union(*held) == set(range(FIRST, LAST + 1))
        for w in by_worker:
            code, status = w.call("POST", SVCS, _service("one-more", 1))
            assert (code, status["reason"], status["message"]) == (
                500, "InternalError", "Internal error occurred: failed to allocate a nodePort: range is full"), status
            code, status = w.call("POST", SVCS, _service("wants-31000", 1, nodePort=31000))
            assert (code, status["message"]) == (422, 'Service "wants-31000" is invalid: spec.ports[0].nodePort: '
                                                      'Invalid value: 31000: provided port is already allocated'), status
        assert by_worker[-1].call("DELETE", f"{SVCS}/s0")[0] == 200
        code, again = by_worker[0].call("POST", SVCS, _service("one-more", 1))
        assert code == 201 and again["spec"]["ports"][0]["nodePort"] in held[0], again
        code, listed = by_worker[-1].call("GET", SVCS)
        assert sorted(s["metadata"]["name"] for s in listed["items"]) == sorted(
            ["kubernetes", "one-more", *(f"s{i}" for i in range(1, len(held)))])
