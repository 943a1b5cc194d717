"""pods/log `stream` (KEP-3288) with PodLogsQuerySplitStreams on: the kubelet returns only the lines the
container wrote to that stream (its log records each line's stream), both without one (All)."""

import json

from tests.e2e.conftest import running_cluster, wait_for

LOG = "/api/v1/namespaces/default/pods/talker/log"


def test_a_stream_of_a_containers_log_holds_only_its_lines():
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "talker", "namespace": "default"},
           "spec": {"containers": [{"name": "c", "image": "busybox",
                                    "command": ["sh", "-c", "echo out; echo err >&2; echo more; sleep 3600"]}]}}
    with running_cluster("log-streams", ("--feature-gates", "PodLogsQuerySplitStreams=true")) as c:
        c.kubectl("create", "-f", "-", input=json.dumps(pod))
        both = wait_for(lambda: (out := c.kubectl("logs", "talker", check=False).stdout).count("\n") == 3 and out,
                        60, "the three lines logged")
        stdout = c.kubectl("get", "--raw", f"{LOG}?stream=Stdout").stdout
        stderr = c.kubectl("get", "--raw", f"{LOG}?stream=Stderr").stdout
        every = c.kubectl("get", "--raw", f"{LOG}?stream=All&tailLines=2").stdout
        refused = c.kubectl("get", "--raw", f"{LOG}?stream=Stdout&tailLines=1", check=False)
    assert both == "out\nerr\nmore\n"
    assert (stdout, stderr, every) == ("out\nmore\n", "err\n", "err\nmore\n")
    assert "`tailLines` and specific `stream` are mutually exclusive for now" in refused.stderr, refused.stderr
