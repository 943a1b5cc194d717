"""`nanokube simulate` as a command: it re-executes itself with a fixed hash seed, and the
re-executed interpreter ends without tearing down its heap or stopping its last run's
components (cli_simulate.reexecuted), so what it printed must still arrive through a pipe, its
exit status must still be the command's, and the run's temporary directory must still go."""

from __future__ import annotations

import json
import os
import pty
import signal
import subprocess
import sys

import pytest

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
    assert proc.stderr == ""  # --quiet: no progress, and none of the components' informational logs
    assert json.loads((out / "results.json").read_text())["runs"][0]["pods"] == 3
    assert list((tmp_path / "tmp").iterdir()) == []

    # two configurations: the first stops as a library caller's run does, the second is left to the exit
    (tmp_path / "most.yaml").write_text(MOST_ALLOCATED)
    proc = _simulate(tmp_path, "--until", "5", "--out", str(out), "--scheduler-config", str(tmp_path / "most.yaml"),
                     "--scheduler-config", str(tmp_path / "most.yaml"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "most#1: 3/3 pods scheduled" in proc.stdout and "most#2: 3/3 pods scheduled" in proc.stdout
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


NODES = """sn,cpu_milli,memory_mib,gpu,model
openb-node-0000,32000,262144,0,
openb-node-0001,96000,786432,8,V100M32
"""
PODS = """name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
openb-pod-0000,12000,16384,1,1000,,LS,Running,0,100,0
openb-pod-0001,6000,12288,1,460,,LS,Running,10,50,10
"""


def _csv(tmp_path, nodes: str, pods: str, *args: str) -> subprocess.CompletedProcess:
    (tmp_path / "nodes.csv").write_text(nodes)
    (tmp_path / "pods.csv").write_text(pods)
    cmd = [sys.executable, "-m", "nanokube.cli", "simulate", "--cluster", str(tmp_path / "nodes.csv"),
           "--trace", str(tmp_path / "pods.csv"), "--quiet", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def test_a_malformed_openb_csv_is_one_line_naming_the_file_line_and_column(tmp_path):
    cases = [
        (NODES.replace("cpu_milli", "cpu"), PODS, "nodes.csv:1: missing column cpu_milli: an openb node list has the "
                                                  "columns sn,cpu_milli,memory_mib,gpu,model"),
        (NODES.replace("96000", "96k"), PODS, "nodes.csv:3: cpu_milli: '96k' is not an integer"),
        (NODES + "openb-node-0002,1000\n", PODS, "nodes.csv:4: 2 fields, the header has 5"),
        (NODES, PODS.replace(",0,100,0", ",0,soon,0"), "pods.csv:2: deletion_time: 'soon' is not a number"),
        (NODES, PODS.replace("12288,1,460", "12288,-1,460"), "pods.csv:3: num_gpu: must not be negative, got -1"),
        # two tasks of one name would be one pod created twice (the second refused mid-run)
        (NODES, PODS.replace("openb-pod-0001", "openb-pod-0000"),
         "pods.csv:3: name: openb-pod-0000 is also the task on line 2"),
        # the node list given as the trace
        (NODES, NODES, "pods.csv:1: missing columns name, num_gpu, gpu_milli: an openb pod list has the columns "),
        # a task list without times (as openb_pod_list_multigpu50.csv) is only for sampling
        (NODES, "name,cpu_milli,memory_mib,num_gpu,gpu_milli\nopenb-pod-0000,12000,16384,1,1000\n",
         "pods.csv: no creation_time column: its tasks have no arrival times, so it can only be sampled "
         "(--inflate FACTOR)"),
    ]
    for nodes, pods, message in cases:
        proc = _csv(tmp_path, nodes, pods)
        assert proc.returncode == 2, (message, proc.stderr[-2000:])
        assert message in proc.stderr and "Traceback" not in proc.stderr, (message, proc.stderr[-2000:])


def test_a_csv_saved_with_a_byte_order_mark_and_crlf_line_ends_is_read(tmp_path):
    """As a spreadsheet saves it: the mark is not part of the first column's name."""
    proc = _csv(tmp_path, "\ufeff" + NODES.replace("\n", "\r\n"), "\ufeff" + PODS.replace("\n", "\r\n"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("default: 2/2 pods scheduled"), proc.stdout


def test_small_gpu_shares_keep_two_decimals(tmp_path):
    """One GPU of 16: 6.25% allocated at most, which one decimal would round to 6.2% (policies
    compared on a large cluster differ in the second decimal); 10% and more keep one."""
    nodes = NODES + "openb-node-0002,96000,786432,8,V100M32\n"
    pods = PODS.splitlines()[0] + "\nopenb-pod-0000,12000,16384,1,1000,,LS,Running,0,100,0\n"
    proc = _csv(tmp_path, nodes, pods)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("CONFIGURATION"))
    assert lines[header + 1].split()[:8] == ["default", "1", "1", "0", "0", lines[header + 1].split()[5], "6.25%",
                                             "0.0%"], lines
    proc = _csv(tmp_path, nodes, pods.replace("16384,1,1000", "16384,2,1000"))
    assert proc.stdout.splitlines()[header + 1].split()[6] == "12.5%", proc.stdout


def test_an_untimed_task_list_is_sampled_by_inflation(tmp_path):
    pods = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\nt0,12000,16384,1,1000\nt1,6000,12288,1,500\n"
    proc = _csv(tmp_path, NODES, pods, "--inflate", "1.0", "--seed", "2")
    assert proc.returncode == 0, proc.stderr[-2000:]
    line = proc.stdout.splitlines()[0]
    assert line.startswith("default: ") and " pods scheduled" in line
    scheduled, arrived = line.split()[1].split("/")
    assert int(arrived) >= 8 and int(scheduled) >= 8  # sampled until they ask for the node's 8 GPUs
    header = next(line for line in proc.stdout.splitlines() if line.startswith("CONFIGURATION"))
    assert "ALLOC AT 100% ARRIVED" in header and "ALLOC AT 130% ARRIVED" not in header  # the run stops at 100%


def test_the_table_compares_configurations_with_units(tmp_path):
    """One 4-CPU node, three 3-CPU pods of a fixed run time: each waits for the one before
    to finish, so the delays and the makespan are the run times themselves."""
    (tmp_path / "cluster.yaml").write_text(CLUSTER.replace("count: 2", "count: 1"))
    pod = lambda name, secs: {"apiVersion": "v1", "kind": "Pod", "metadata": {  # noqa: E731
        "name": name, "annotations": {"sim.nanokube.io/run-seconds": str(secs)}}, "spec": {
        "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox",
                                                  "resources": {"requests": {"cpu": "3"}}}]}}
    events = [{"time": 0, "object": pod("hog", 100)}, {"time": 1, "object": pod("a", 50)},
              {"time": 2, "object": pod("b", 50)}]
    (tmp_path / "trace.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    (tmp_path / "most.yaml").write_text(MOST_ALLOCATED)
    out = tmp_path / "out"
    proc = _simulate(tmp_path, "--until", "400", "--out", str(out), "--scheduler-config", str(tmp_path / "most.yaml"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("CONFIGURATION"))
    assert lines[header].split("   ")[:6] == ["CONFIGURATION", "PODS", "SCHEDULED", "PENDING AT END", "DELETED WAITING",
                                              "GPU ALLOC MEAN"]
    assert "DELAY P50" in lines[header] and "DELAY P99" in lines[header] and "MAKESPAN" in lines[header]
    assert lines[header + 1].split() == ["most", "3", "3", "0", "0", "-", "-", "-", "2", "1m39s", "2m28s", "2m28s",
                                         "2m28s", "3m20s", "0"]
    assert any(line.endswith("; WAITED: scheduled pods whose delay was 1s or more") for line in lines)
    assert any(line.startswith("DELAY: a scheduled pod's creation to its binding") for line in lines)
    assert "GPU ALLOC / GPU FRAG: '-', the cluster has no GPUs" in lines
    summary = json.loads((out / "results.json").read_text())["runs"][0]["summary"]
    assert summary["scheduling_delay_s"] == {"p50": 99.0, "p90": 148.0, "p99": 148.0, "max": 148.0,
                                             "mean": (0 + 99 + 148) / 3}
    assert summary["makespan_s"] == 200.0 and summary["pending_at_end"] == summary["running_at_end"] == 0
    assert summary["waited"] == 2  # a and b; the hog was bound at once
    page = (out / "report.html").read_text()
    assert "<th>waited</th>" in page and "<td>2</td><td>1m39s</td><td>2m28s</td><td>2m28s</td><td>2m28s</td>" in page


@pytest.mark.parametrize("signum, status, said", [(signal.SIGINT, 130, "interrupted"),
                                                  (signal.SIGTERM, 143, "terminated")])
def test_ctrl_c_stops_the_run_and_reports_what_ran(tmp_path, signum, status, said):
    """--speed 1 over an hour-long trace: the run is still going when the first progress line is out.
    SIGTERM (a `timeout`, a CI job's end) stops it as Ctrl-C does; it used to end it without a report."""
    (tmp_path / "cluster.yaml").write_text(CLUSTER)
    pods = [{"time": i * 60, "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}"},
                                        "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}
            for i in range(60)]
    (tmp_path / "trace.jsonl").write_text("".join(json.dumps(p) + "\n" for p in pods))
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "nanokube.cli", "simulate", "--cluster", str(tmp_path / "cluster.yaml"),
           "--trace", str(tmp_path / "trace.jsonl"), "--speed", "1", "--out", str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        seen = ""
        while "virtual" not in seen:  # the progress line: the run has started
            ch = proc.stderr.read(1)
            assert ch, "exited before its first progress line"
            seen += ch
        proc.send_signal(signum)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == status, stderr[-2000:]
    assert "Traceback" not in stderr and f"{said}; stopping at the current virtual time" in stderr
    first = stdout.splitlines()[0]
    assert first.startswith("default: 1/1 pods scheduled (interrupted at virtual "), stdout
    assert any(line.startswith("default (interrupted)   1 ") for line in stdout.splitlines()), stdout
    [run] = json.loads((out / "results.json").read_text())["runs"]
    assert run["interrupted"] is True and run["pods"] == 1 and run["virtual_s"] < 60
    assert (out / "report.html").exists()


@pytest.mark.timeout(600)  # thirteen simulate processes: a loaded machine takes up to ~10 s to start each
def test_what_if_more_fewer_or_other_nodes(tmp_path):
    """Four 3-CPU pods on 4-CPU nodes: one pod a node, so the pods scheduled count the nodes."""
    (tmp_path / "cluster.yaml").write_text(CLUSTER)
    (tmp_path / "big.yaml").write_text(CLUSTER.replace("name: n", "name: big").replace("count: 2", "count: 1")
                                       .replace('cpu: "4"', 'cpu: "8"'))
    pods = [{"time": 0, "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}"}, "spec": {
        "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "3"}}}]}}} for i in range(4)]
    (tmp_path / "trace.jsonl").write_text("".join(json.dumps(p) + "\n" for p in pods))

    def nodes(*args: str) -> list[str]:
        out = tmp_path / "out"
        proc = _simulate(tmp_path, "--until", "5", "--out", str(out), *args)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return sorted(set(json.loads((out / "results.json").read_text())["runs"][0]["placements"].values()))

    assert nodes() == ["n-0", "n-1"]
    assert nodes("--add-nodes", "n=2") == ["n-0", "n-1", "n-2", "n-3"]
    assert "<code>" + str(tmp_path / "cluster.yaml") + "</code> with --add-nodes n=2," in \
        (tmp_path / "out" / "report.html").read_text()
    assert nodes("--drop-nodes", "1") == ["n-0"]
    assert nodes("--drop-nodes", "50%", "--add-nodes", "n=1") == ["n-0", "n-1"]
    assert nodes("--cluster", str(tmp_path / "big.yaml")) == ["big-0", "n-0", "n-1"]
    # a drop takes from the first file's nodes, the cluster as it is, not from a file of nodes added
    # (seed 0 drew big-0 and one n when the draw took 50% of all three)
    dropped = nodes("--cluster", str(tmp_path / "big.yaml"), "--drop-nodes", "50%")
    assert len(dropped) == 2 and dropped[0] == "big-0" and dropped[1] in ("n-0", "n-1"), dropped

    proc = subprocess.run([sys.executable, "-m", "nanokube.cli", "simulate", "--cluster", str(tmp_path / "cluster.yaml"),
                           "--trace", str(tmp_path / "trace.jsonl"), "--add-nodes", "n=1", "--until", "1"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "cluster: 3 nodes, 0 GPUs in 1 pools" in proc.stderr, proc.stderr[-2000:]
    for args, message in [
        (("--add-nodes", "gpu=3"), "--add-nodes: no pool 'gpu'; the cluster's pools: n"),
        (("--add-nodes", "n"), "--add-nodes 'n': want POOL=COUNT, e.g. n=10"),
        (("--drop-nodes", "2"), "--drop-nodes 2: 2 of the cluster's 2 nodes would leave none"),
        (("--drop-nodes", "0.1"), "--drop-nodes '0.1': want a number of nodes (50) or a percentage of them (10%)"),
        (("--cluster", str(tmp_path / "cluster.yaml")), "cluster.yaml: pool 'n' is also in"),
        (("--inflate", "-1"), "--inflate -1.0: must be above 0"),
        (("--inflate", "1.3", "--drain"), "--drain with --inflate: inflated pods never end"),
    ]:
        proc = _simulate(tmp_path, *args)
        assert proc.returncode == 2 and "nanokube simulate: " in proc.stderr and message in proc.stderr, \
            (args, proc.stderr[-2000:])


def test_drain_runs_on_until_the_pods_end(tmp_path):
    """Without --drain the run ends at the trace's last write (2 s), the pods still waiting;
    with it, at the last pod's end, or 10 quiet minutes after it when a pod fits nowhere."""
    (tmp_path / "cluster.yaml").write_text(CLUSTER.replace("count: 2", "count: 1"))
    pod = lambda name, secs, cpu="3": {"apiVersion": "v1", "kind": "Pod", "metadata": {  # noqa: E731
        "name": name, "annotations": {"sim.nanokube.io/run-seconds": str(secs)}}, "spec": {
        "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox",
                                                  "resources": {"requests": {"cpu": cpu}}}]}}
    events = [{"time": 0, "object": pod("hog", 100)}, {"time": 1, "object": pod("a", 50)},
              {"time": 2, "object": pod("b", 50)}]
    out = tmp_path / "out"

    def run(*args: str) -> dict:
        (tmp_path / "trace.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
        proc = _simulate(tmp_path, "--out", str(out), *args)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return json.loads((out / "results.json").read_text())["runs"][0]

    cut = run()
    assert cut["virtual_s"] == 2 and cut["summary"]["pending_at_end"] == 2 and cut["summary"]["makespan_s"] is None
    drained = run("--drain")
    assert drained["virtual_s"] == 200 and drained["scheduled"] == 3 and drained["summary"]["makespan_s"] == 200
    events.append({"time": 2, "object": pod("too-big", 10, cpu="5")})
    stuck = run("--drain")
    assert stuck["virtual_s"] == 200 + 600 and stuck["summary"]["pending_at_end"] == 1
    assert run("--drain", "--until", "150")["virtual_s"] == 150
    assert "</code> (--until 150.0 --drain), seed 0" in (out / "report.html").read_text()


def test_progress_counts_the_trace_writes_replayed(tmp_path):
    """The ETA follows the writes replayed, not virtual time (most of a trace's time can be empty)."""
    (tmp_path / "cluster.yaml").write_text(CLUSTER)
    pods = [{"time": t, "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{t}"},
                                   "spec": {"containers": [{"name": "c", "image": "busybox"}]}}} for t in (0, 1, 86400)]
    (tmp_path / "trace.jsonl").write_text("".join(json.dumps(p) + "\n" for p in pods))
    cmd = [sys.executable, "-m", "nanokube.cli", "simulate", "--cluster", str(tmp_path / "cluster.yaml"),
           "--trace", str(tmp_path / "trace.jsonl"), "--until", "90000"]
    proc = subprocess.run(cmd, capture_output=True, timeout=120)
    stderr = proc.stderr.decode()
    assert proc.returncode == 0, stderr[-2000:]
    # stderr is a pipe, not a terminal: whole lines, no carriage returns rewriting one line in place
    assert "\r" not in stderr, stderr[-2000:]
    last = stderr.splitlines()[-1]
    assert last.startswith("default: virtual 1d01:00:00 / 1d01:00:00 (100.0%) writes 3/3, "), last
    assert "ETA 0s" in last

    # on a terminal, one line rewritten in place
    seen = _on_a_terminal(cmd, "stderr")
    assert b"\rdefault: virtual 1d01:00:00 / 1d01:00:00 (100.0%) writes 3/3, " in seen, seen[-2000:]


def _on_a_terminal(cmd: list[str], stream: str, **env: str) -> bytes:
    """What `cmd` writes to its `stream` ("stdout" or "stderr") when that is a terminal (the other
    discarded), once it has exited 0."""
    main, tty = pty.openpty()
    ends = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, stream: tty}
    proc = subprocess.Popen(cmd, **ends, env={**os.environ, **env})
    os.close(tty)
    seen = b""
    try:
        while chunk := _read(main):
            seen += chunk
        assert proc.wait(timeout=120) == 0, seen[-2000:]
    finally:
        proc.kill()
        os.close(main)
    return seen


def _read(fd: int) -> bytes:
    """What a pty gives next; b"" once its other side has closed (Linux reads EIO then)."""
    try:
        return os.read(fd, 4096)
    except OSError:
        return b""


def test_a_reader_gone_from_stdout_ends_the_command_without_a_traceback(tmp_path):
    """`nanokube simulate ... | head -1`: the reader goes; here before the first line."""
    (tmp_path / "cluster.yaml").write_text(CLUSTER)
    (tmp_path / "trace.jsonl").write_text(json.dumps({"time": 0, "object": {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}) + "\n")
    cmd = [sys.executable, "-m", "nanokube.cli", "simulate", "--quiet", "--cluster", str(tmp_path / "cluster.yaml"),
           "--trace", str(tmp_path / "trace.jsonl"), "--until", "1", "--out", str(tmp_path / "out")]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc.stdout.close()
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 141, stderr[-2000:]
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr, stderr[-2000:]


def test_limit_pods_replays_the_first_pods_created(tmp_path):
    proc = _csv(tmp_path, NODES, PODS, "--limit-pods", "1", "--out", str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("default: 1/1 pods scheduled"), proc.stdout
    [run] = json.loads((tmp_path / "out" / "results.json").read_text())["runs"]
    assert list(run["placements"]) == ["default/openb-pod-0000"] and run["virtual_s"] == 100  # its deletion
    proc = _csv(tmp_path, NODES, PODS, "--limit-pods", "0")
    assert proc.returncode == 2 and "nanokube simulate: --limit-pods 0: must be 1 or more" in proc.stderr


def test_bad_arguments_and_unreadable_files_are_refused_before_the_run(tmp_path):
    """Each is one line naming what is wrong, exit status 2, no traceback and no run: a negative
    --speed used to hang, --speed 0 ran as fast as possible, an unwritable --out failed after the run."""
    (tmp_path / "cluster.yaml").write_text(CLUSTER)
    (tmp_path / "trace.jsonl").write_text("")
    (tmp_path / "blocker").write_text("")
    for args, message in [
        (("--speed", "0"), "--speed 0.0: must be above 0"),
        (("--speed", "-1"), "--speed -1.0: must be above 0"),
        (("--until", "-5"), "--until -5.0: must be 0 or more"),
        (("--until", "3w"), "error: argument --until: '3w': want seconds (3600) or a duration (1h, 30d, 1d12h): "
                            'time: unknown unit "w" in duration "3w"'),
        (("--until", "1d2x"), "error: argument --until: '1d2x': want seconds (3600) or a duration (1h, 30d, 1d12h): "
                              'time: unknown unit "x" in duration "2x"'),
        (("--keep-run-times",), "--keep-run-times is for an openb pod list (*.csv); a JSON Lines trace gives"),
        (("--out", str(tmp_path / "blocker" / "out")), f"--out {tmp_path / 'blocker' / 'out'}: cannot write there"),
        (("--trace", str(tmp_path / "nope.jsonl")), f"{tmp_path / 'nope.jsonl'}: cannot read: No such file or directory"),
        (("--trace", str(tmp_path)), f"{tmp_path}: cannot read: Is a directory"),
        (("--scheduler-config", str(tmp_path / "nope.yaml")),
         f"{tmp_path / 'nope.yaml'}: cannot read: No such file or directory"),
        (("--scheduler-config", str(tmp_path / "cluster.yaml")),
         f'{tmp_path / "cluster.yaml"}: no kind "" is registered for version ""'),
    ]:
        proc = _simulate(tmp_path, *args)
        assert proc.returncode == 2, (args, proc.stderr[-2000:])
        assert f"nanokube simulate: {message}" in proc.stderr and "Traceback" not in proc.stderr, \
            (args, proc.stderr[-2000:])
        assert proc.stdout == "", (args, proc.stdout)


def test_refused_trace_writes_are_counted_after_the_run(tmp_path):
    """A write the API server refuses (an invalid pod, a kind it does not serve) is printed when it
    happens and the run goes on; the summary line under the run says how many were not replayed,
    where a long run's scroll-back has lost them, and results.json lists them. --until takes a
    duration as --event-ttl does."""
    (tmp_path / "cluster.yaml").write_text(CLUSTER)
    good = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "good"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    events = [{"time": 0, "object": good},
              {"time": 1, "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bad"}, "spec": {}}},
              {"time": 2, "object": {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}}]
    (tmp_path / "trace.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    out = tmp_path / "out"
    proc = _simulate(tmp_path, "--out", str(out), "--until", "1h")
    assert proc.returncode == 0, proc.stderr[-2000:]
    first = 'create Pod bad: Pod "bad" is invalid: spec.containers: Required value'
    assert f"nanokube simulate: {first}" in proc.stderr, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("default: 1/1 pods scheduled, virtual 3600s (1h00m) in wall "), lines
    assert lines[1] == f"default: 2 trace writes refused, not replayed (first: {first})", lines
    run = json.loads((out / "results.json").read_text())["runs"][0]
    assert run["refused_writes"] == [first, "example.com/v1 Widget: not served; skipped"]
    assert json.loads((out / "results.json").read_text())["inputs"]["until"] == 3600

    (tmp_path / "trace.jsonl").write_text(json.dumps(events[0]) + "\n")
    proc = _simulate(tmp_path, "--out", str(out), "--until", "1d12h")
    assert proc.returncode == 0 and "trace write" not in proc.stdout, proc.stdout
    assert json.loads((out / "results.json").read_text())["runs"][0]["refused_writes"] == []
    assert json.loads((out / "results.json").read_text())["inputs"]["until"] == 36 * 3600


def test_arrival_rate_replays_arrivals_sooner_and_keeps_lifetimes(tmp_path):
    """One 4-CPU node, three 3-CPU pods 100 s apart, each deleted 50 s after its creation: one
    at a time fits. At 4x they arrive 25 s apart and still live 50 s, so each waits for the one
    before it: the delays the what-if is for."""
    (tmp_path / "cluster.yaml").write_text(CLUSTER.replace("count: 2", "count: 1"))
    pod = lambda name: {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {  # noqa: E731
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "3"}}}]}}
    events = []
    for i in range(3):
        events += [{"time": 100 * i, "object": pod(f"p{i}")},
                   {"time": 100 * i + 50, "verb": "delete", "object": pod(f"p{i}")}]
    (tmp_path / "trace.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    out = tmp_path / "out"

    def run(*args: str) -> dict:
        proc = _simulate(tmp_path, "--out", str(out), *args)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return json.loads((out / "results.json").read_text())["runs"][0]

    same = run()
    assert [v[0] for v in same["timeline"].values()] == [0, 100, 200] and same["virtual_s"] == 250
    assert same["summary"]["scheduling_delay_s"]["max"] == 0
    busy = run("--arrival-rate", "4")
    assert [v[0] for v in busy["timeline"].values()] == [0, 25, 50] and busy["virtual_s"] == 100
    assert [v[3] for v in busy["timeline"].values()] == [50, 75, 100]  # each lives its 50 s
    assert [v[1] for v in busy["timeline"].values()] == [0, 50, 75]  # bound once the one before is gone
    assert busy["summary"]["scheduling_delay_s"]["max"] == 25
    assert "(--arrival-rate 4.0)" in (out / "report.html").read_text()
    assert json.loads((out / "results.json").read_text())["inputs"]["arrival_rate"] == 4.0
    for args, message in [(("--arrival-rate", "0"), "--arrival-rate 0.0: must be above 0"),
                          (("--arrival-rate", "2", "--inflate", "1.3"), "--arrival-rate with --inflate: ")]:
        proc = _simulate(tmp_path, *args)
        assert proc.returncode == 2 and f"nanokube simulate: {message}" in proc.stderr, (args, proc.stderr[-2000:])


def test_pods_the_trace_deletes_while_they_wait_are_counted_apart(tmp_path):
    """One 4-CPU node held by a 3-CPU hog for 100 s: a second 3-CPU pod is deleted at 50 s
    without ever running, a third still waits at the end. No delay counts either, so the table
    says them: PODS 3 = SCHEDULED 1 + PENDING AT END 1 + DELETED WAITING 1."""
    (tmp_path / "cluster.yaml").write_text(CLUSTER.replace("count: 2", "count: 1"))
    pod = lambda name: {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {  # noqa: E731
        "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "3"}}}]}}
    events = [{"time": 0, "object": pod("hog")}, {"time": 1, "object": pod("gives-up")},
              {"time": 2, "object": pod("waits")}, {"time": 50, "verb": "delete", "object": pod("gives-up")}]
    (tmp_path / "trace.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    out = tmp_path / "out"
    proc = _simulate(tmp_path, "--until", "60", "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("default: 1/3 pods scheduled, virtual 60s (1m00s) in wall "), lines[0]
    header = next(i for i, line in enumerate(lines) if line.startswith("CONFIGURATION"))
    assert lines[header].split("   ")[:5] == ["CONFIGURATION", "PODS", "SCHEDULED", "PENDING AT END", "DELETED WAITING"]
    assert lines[header + 1].split()[:5] == ["default", "3", "1", "1", "1"]
    assert any(line.startswith("DELETED WAITING: pods the trace deleted before any node took them") for line in lines)
    summary = json.loads((out / "results.json").read_text())["runs"][0]["summary"]
    assert summary["deleted_waiting"] == 1 and summary["pending_at_end"] == 1
    assert "<th>deleted waiting</th>" in (out / "report.html").read_text()


def test_keep_run_times_delays_a_waiting_task_instead_of_cutting_it_short(tmp_path):
    """One 8-GPU node, three 8-GPU tasks: a ran 0-100 s; c was never scheduled in the trace
    (deleted at 60 s, waiting); d ran 30-80 s there (on a node this cluster lacks) and failed.
    Replayed as the trace says, d waits for a's GPUs and is deleted at 80 s before it ever runs;
    with --keep-run-times it runs its 50 s once a has ended, and fails as it did."""
    pods = (PODS.split("\n")[0] + "\n"
            "a,1000,1024,8,1000,,LS,Running,0,100,0\n"
            "c,1000,1024,8,1000,,BE,Pending,20,60,\n"
            "d,1000,1024,8,1000,,BE,Failed,30,80,30\n")
    out = tmp_path / "out"

    def run(*args: str) -> dict:
        proc = _csv(tmp_path, NODES, pods, "--out", str(out), *args)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return json.loads((out / "results.json").read_text())["runs"][0]

    cut = run()
    assert cut["scheduled"] == 1 and cut["summary"]["deleted_waiting"] == 2 and cut["virtual_s"] == 100
    kept = run("--keep-run-times")
    a, c, d = (kept["timeline"][f"default/{n}"] for n in "acd")
    assert a[3] - a[2] == 100 and c[1] is None and c[3] == 60
    assert d[1] >= a[3] and d[3] - d[2] == 50  # bound once a's GPUs are free, then its own 50 s
    assert kept["summary"]["deleted_waiting"] == 1 and kept["summary"]["makespan_s"] == d[3]
    assert kept["virtual_s"] == d[3]  # --drain: on to the last task's end, past the trace's last write (60 s)
    assert "--keep-run-times --drain" in (out / "report.html").read_text()

    for args, message in [
        (("--keep-run-times", "--inflate", "1.3"), "--keep-run-times with --inflate: inflated pods never end"),
    ]:
        proc = _csv(tmp_path, NODES, pods, *args)
        assert proc.returncode == 2 and f"nanokube simulate: {message}" in proc.stderr, (args, proc.stderr[-2000:])
    proc = _csv(tmp_path, NODES, pods.replace("30,80,30", "30,80,90"), "--keep-run-times")
    assert proc.returncode == 2 and "pods.csv:4: scheduled_time: 90 is not between creation_time 30 and " \
                                    "deletion_time 80" in proc.stderr, proc.stderr[-2000:]


def test_a_terminal_too_narrow_for_the_rows_gets_the_configurations_side_by_side(tmp_path):
    """Two configurations on an 80-column terminal: a line per column, a column per configuration,
    instead of two 180-character rows that wrap into each other; a pipe still gets the rows."""
    (tmp_path / "cluster.yaml").write_text(CLUSTER)
    (tmp_path / "trace.jsonl").write_text(json.dumps({"time": 0, "object": {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}) + "\n")
    (tmp_path / "most.yaml").write_text(MOST_ALLOCATED)
    cmd = [sys.executable, "-m", "nanokube.cli", "simulate", "--quiet", "--cluster", str(tmp_path / "cluster.yaml"),
           "--trace", str(tmp_path / "trace.jsonl"), "--until", "1", "--scheduler-config", str(tmp_path / "most.yaml"),
           "--scheduler-config", str(tmp_path / "most.yaml")]
    seen = _on_a_terminal(cmd, "stdout", COLUMNS="80")
    lines = seen.decode().replace("\r\n", "\n").splitlines()
    assert next(line for line in lines if line.startswith("CONFIGURATION")).split() == ["CONFIGURATION", "most#1",
                                                                                          "most#2"]
    assert next(line for line in lines if line.startswith("PODS ")).split() == ["PODS", "1", "1"]
    assert next(line for line in lines if line.startswith("DELAY P99 ")).split() == ["DELAY", "P99", "0.0s", "0.0s"]

    proc = _simulate(tmp_path, "--until", "1", "--scheduler-config", str(tmp_path / "most.yaml"))
    header = next(line for line in proc.stdout.splitlines() if line.startswith("CONFIGURATION"))
    assert header.split("   ")[:3] == ["CONFIGURATION", "PODS", "SCHEDULED"], proc.stdout


def test_a_pool_of_no_nodes_is_a_node_type_to_add(tmp_path):
    """`count: 0` declares a node type without nodes, for `--add-nodes` to add: a 3-CPU pod fits
    only the big nodes, none of which exist until added."""
    (tmp_path / "cluster.yaml").write_text(CLUSTER.replace('cpu: "4"', 'cpu: "2"') + CLUSTER.replace(
        "pools:\n", "").replace("name: n", "name: big").replace("count: 2", "count: 0"))
    pod = {"time": 0, "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {
        "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "3"}}}]}}}
    (tmp_path / "trace.jsonl").write_text(json.dumps(pod) + "\n")
    for args, want in [((), {}), (("--add-nodes", "big=1"), {"default/p": "big-0"})]:
        out = tmp_path / "out"
        proc = _simulate(tmp_path, "--until", "5", "--out", str(out), *args)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert json.loads((out / "results.json").read_text())["runs"][0]["placements"] == want
