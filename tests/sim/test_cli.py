"""`nanokube simulate` as a command: it re-executes itself with a fixed hash seed, and the
re-executed interpreter ends without tearing down its heap or stopping its last run's
components (cli_simulate.reexecuted), so what it printed must still arrive through a pipe, its
exit status must still be the command's, and the run's temporary directory must still go."""

from __future__ import annotations

import json
import os
import subprocess
import sys

CLUSTER = """\
pools:
  - name: n
    count: 2
    capacity: {cpu: "4", memory: 16Gi}
"""
MOST_ALLOCATED = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: default-scheduler
    pluginConfig:
      - name: NodeResourcesFit
        args: {scoringStrategy: {type: MostAllocated}}
"""


def _simulate(tmp_path, *args: str) -> subprocess.CompletedProcess:
    (tmp_path / "tmp").mkdir(exist_ok=True)
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}, "TMPDIR": str(tmp_path / "tmp")}
    cmd = [sys.executable, "-c", "import sys; from nanokube.cli import main; sys.exit(main(sys.argv[1:]))",
           "simulate", "--cluster", str(tmp_path / "cluster.yaml"), "--trace", str(tmp_path / "trace.jsonl"),
           "--quiet", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)


def test_output_and_exit_status_survive_the_fast_exit(tmp_path):
    (tmp_path / "cluster.yaml").write_text(CLUSTER)
    pods = [{"time": i, "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}"},
                                   "spec": {"containers": [{"name": "c", "image": "busybox"}]}}} for i in range(3)]
    (tmp_path / "trace.jsonl").write_text("".join(json.dumps(p) + "\n" for p in pods))
    out = tmp_path / "out"
    proc = _simulate(tmp_path, "--until", "5", "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "default: 3/3 pods scheduled" in proc.stdout and "placements" in proc.stdout
    assert proc.stdout.rstrip().endswith(f"report: {out / 'report.html'}")
    assert json.loads((out / "results.json").read_text())["runs"][0]["pods"] == 3
    assert list((tmp_path / "tmp").iterdir()) == []

    # two configurations: the first stops as a library caller's run does, the second is left to the exit
    (tmp_path / "most.yaml").write_text(MOST_ALLOCATED)
    proc = _simulate(tmp_path, "--until", "5", "--out", str(out), "--scheduler-config", str(tmp_path / "most.yaml"),
                     "--scheduler-config", str(tmp_path / "most.yaml"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.count("most: 3/3 pods scheduled") == 2
    assert [r["pods"] for r in json.loads((out / "results.json").read_text())["runs"]] == [3, 3]
    assert list((tmp_path / "tmp").iterdir()) == []

    (tmp_path / "trace.jsonl").write_text('{"time": -1, "object": {}}\n')
    proc = _simulate(tmp_path)
    assert proc.returncode == 2
    assert "time: must be a number of seconds >= 0" in proc.stderr


def test_a_bad_event_ttl_is_refused_before_the_run(tmp_path):
    (tmp_path / "cluster.yaml").write_text(CLUSTER)
    (tmp_path / "trace.jsonl").write_text("")
    proc = _simulate(tmp_path, "--event-ttl", "90")
    assert proc.returncode == 2
    assert 'nanokube simulate: invalid argument "90" for "--event-ttl" flag' in proc.stderr
