"""`nanokube simulate` run as a user runs it, in a subprocess, for tests/sim/test_cli*.py: a cluster
file and a trace (JSON Lines or an openb CSV pair) in the test's temporary directory."""

from __future__ import annotations

import os
import subprocess
import sys

CLUSTER = """\
pools:
  - name: n
    count: 2
    capacity: {cpu: "4", memory: 16Gi}
"""
#: eight GPUs for each of CLUSTER's nodes (CLUSTER + GPUS)
GPUS = """\
    gpus: {count: 8, model: A100, memory: 80Gi, architecture: Ampere, driverVersion: "550.54.15", cudaVersion: "12.4",
           computeCapability: "8.0"}
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


def simulate(tmp_path, *args: str, quiet: bool = True) -> subprocess.CompletedProcess:
    """tmp_path/cluster.yaml and tmp_path/trace.jsonl replayed (--quiet unless `quiet` is false); no
    PYTHONHASHSEED, so it re-executes itself, and its temporary files go under tmp_path/tmp for the test
    to see them gone."""
    (tmp_path / "tmp").mkdir(exist_ok=True)
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}, "TMPDIR": str(tmp_path / "tmp")}
    cmd = [sys.executable, "-c", "import sys; from nanokube.cli import main; sys.exit(main(sys.argv[1:]))",
           "simulate", "--cluster", str(tmp_path / "cluster.yaml"), "--trace", str(tmp_path / "trace.jsonl"),
           *(("--quiet",) if quiet else ()), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)


NODES = """sn,cpu_milli,memory_mib,gpu,model
openb-node-0000,32000,262144,0,
openb-node-0001,96000,786432,8,V100M32
"""
PODS = """name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
openb-pod-0000,12000,16384,1,1000,,LS,Running,0,100,0
openb-pod-0001,6000,12288,1,460,,LS,Running,10,50,10
"""


def simulate_csv(tmp_path, nodes: str, pods: str, *args: str) -> subprocess.CompletedProcess:
    """An openb node list and pod list, written to tmp_path/nodes.csv and tmp_path/pods.csv, replayed --quiet."""
    (tmp_path / "nodes.csv").write_text(nodes)
    (tmp_path / "pods.csv").write_text(pods)
    cmd = [sys.executable, "-m", "nanokube.cli", "simulate", "--cluster", str(tmp_path / "nodes.csv"),
           "--trace", str(tmp_path / "pods.csv"), "--quiet", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)
