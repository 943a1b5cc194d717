"""`nanokube simulate` as a command: it re-executes itself with a fixed hash seed, and the
re-executed interpreter ends without tearing down its heap (cli_simulate.REEXEC), so what it
printed must still arrive through a pipe and its exit status must still be the command's."""

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


def _simulate(tmp_path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}
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

    (tmp_path / "trace.jsonl").write_text('{"time": -1, "object": {}}\n')
    proc = _simulate(tmp_path)
    assert proc.returncode == 2
    assert "time: must be a number of seconds >= 0" in proc.stderr
