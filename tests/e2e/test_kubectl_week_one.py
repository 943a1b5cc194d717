"""An ML-platform engineer's first week with kubectl against `nanokube up`: logs, patches,
printers and the other everyday commands, checked against what kube-apiserver 1.37 and
the kubelet answer them on an upstream cluster."""

from __future__ import annotations

import json


def test_a_json_patch_whose_test_fails_is_upstreams_generic_invalid(cluster):
    """patch.go answers a JSON patch that does not apply with NewGenericServerResponse(422, ...,
    isUnexpectedResponse=false): the library's message is dropped, details are empty, and
    kubectl prints its generic line (not 'The request is invalid: : testing value ...')."""
    cluster.kubectl("create", "configmap", "jp-test", "--from-literal=a=1")
    r = cluster.kubectl("patch", "configmap", "jp-test", "--type=json",
                        "-p", '[{"op":"test","path":"/data/a","value":"2"}]', check=False)
    assert r.returncode == 1
    assert r.stderr.strip() == "The request is invalid: the server rejected our request due to an error in our request"
    r = cluster.kubectl("patch", "configmap", "jp-test", "--type=json", "-v=8",
                        "-p", '[{"op":"remove","path":"/data/nope"}]', check=False)
    body = next(line for line in r.stderr.splitlines() if '"kind":"Status"' in line)
    status = json.loads(body[body.index("{"):])
    assert (status["code"], status["reason"], status["details"]) == (422, "Invalid", {})
    assert cluster.kubectl_json("get", "configmap", "jp-test")["data"] == {"a": "1"}
