"""The scheduler's clientConnection.qps/burst in `nanokube simulate`: kube-scheduler's client waits
for a token of its rate limit before each request (client-go's token bucket), so a burst of
arrivals binds no faster than a limit the configuration sets lets it, in virtual time as on a
cluster; without one the simulation applies none (the default would measure the limit)."""

from __future__ import annotations

import json

from .simulate import CLUSTER, simulate

LIMITED = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection: {qps: 2, burst: 2}
"""
DEFAULT = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
"""


def test_a_burst_of_arrivals_binds_at_the_configured_rate(tmp_path):
    (tmp_path / "cluster.yaml").write_text(CLUSTER)
    pods = [{"time": 0, "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}"},
                                   "spec": {"containers": [{"name": "c", "image": "busybox"}]}}} for i in range(10)]
    (tmp_path / "trace.jsonl").write_text("".join(json.dumps(p) + "\n" for p in pods))
    (tmp_path / "limited.yaml").write_text(LIMITED)
    (tmp_path / "default.yaml").write_text(DEFAULT)
    out = tmp_path / "out"
    proc = simulate(tmp_path, "--until", "30", "--out", str(out), "--scheduler-config", str(tmp_path / "limited.yaml"),
                    "--scheduler-config", str(tmp_path / "default.yaml"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    limited, default = json.loads((out / "results.json").read_text())["runs"]
    assert limited["scheduled"] == default["scheduled"] == 10
    # two bindings at once (the burst), then one each half second: the tenth four seconds in
    bound = sorted(t[1] - t[0] for t in limited["timeline"].values())
    assert all(b >= 0.5 * (i - 1) - 1e-6 for i, b in enumerate(bound)), bound
    assert bound[-1] >= 4.0
    # no limit set: all ten go at once
    assert max(t[1] - t[0] for t in default["timeline"].values()) < 0.5
