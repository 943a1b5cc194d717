"""`nanokube up --min-request-timeout`: a watch that names no timeoutSeconds is ended by the server
after a random time from that many seconds to twice it (kube-apiserver's flag), by whichever API
worker serves it."""

from __future__ import annotations

import subprocess
import time

from .conftest import KUBECTL, running_cluster

QUIET = ("--scheduler", "none", "--controllers", "")


def test_watches_without_timeout_seconds_end_after_the_min_request_timeout_on_every_worker():
    with running_cluster("watch-timeout", ("--min-request-timeout", "2", "--api-workers", "2", *QUIET)) as c:
        started = time.monotonic()
        watches = [subprocess.Popen([KUBECTL, "--kubeconfig", c.kubeconfig, "get", "--raw",
                                     "/api/v1/namespaces/default/configmaps?watch=1"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                   for _ in range(6)]  # spread over both workers by the kernel
        try:
            codes = [w.wait(timeout=60) for w in watches]
        finally:
            for w in watches:
                w.kill()
                w.wait()
        assert codes == [0] * 6, [w.stderr.read() for w in watches]
        assert time.monotonic() - started >= 2
