"""`nanokube simulate` as a command: it re-executes itself with a fixed hash seed, and the
re-executed interpreter ends without tearing down its heap or stopping its last run's
components (cli_simulate.reexecuted), so what it printed must still arrive through a pipe, its
exit status must still be the command's, and the run's temporary directory must still go."""

from __future__ import annotations

import csv
import json
import os
import pty
import re
import signal
import subprocess
import sys

import pytest

from .simulate import CLUSTER, GPUS, MOST_ALLOCATED, NODES, PODS, simulate, simulate_csv


def test_output_and_exit_status_survive_the_fast_exit(tmp_path):
    (tmp_path / "cluster.yaml").write_text(CLUSTER)
    pods = [{"time": i, "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}"},
                                   "spec": {"containers": [{"name": "c", "image": "busybox"}]}}} for i in range(3)]
    (tmp_path / "trace.jsonl").write_text("".join(json.dumps(p) + "\n" for p in pods))
    out = tmp_path / "out"
    # two configurations: the first stops as a library caller's run does, the second is left to the exit
    (tmp_path / "most.yaml").write_text(MOST_ALLOCATED)
    proc = simulate(tmp_path, "--until", "5", "--out", str(out), "--scheduler-config", str(tmp_path / "most.yaml"),
                    "--scheduler-config", str(tmp_path / "most.yaml"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "most#1: 3/3 pods scheduled" in proc.stdout and "most#2: 3/3 pods scheduled" in proc.stdout
    assert "placements" in proc.stdout and proc.stdout.rstrip().endswith(f"report: {out / 'report.html'}")
    assert proc.stderr == ""  # --quiet: no progress, and none of the components' informational logs
    assert [r["pods"] for r in json.loads((out / "results.json").read_text())["runs"]] == [3, 3]
    assert list((tmp_path / "tmp").iterdir()) == []

    (tmp_path / "trace.jsonl").write_text('{"time": -1, "object": {}}\n')
    proc = simulate(tmp_path)
    assert proc.returncode == 2
    assert "time: must be a number of seconds >= 0" in proc.stderr


def test_a_bad_event_ttl_is_refused_before_the_run(tmp_path):
    (tmp_path / "cluster.yaml").write_text(CLUSTER)
    (tmp_path / "trace.jsonl").write_text("")
    proc = simulate(tmp_path, "--event-ttl", "90")
    assert proc.returncode == 2
    assert 'nanokube simulate: invalid argument "90" for "--event-ttl" flag' in proc.stderr


def test_a_malformed_openb_csv_is_one_line_naming_the_file_line_and_column(tmp_path):
    cases = [
        (NODES.replace("cpu_milli", "cpu"), PODS, "nodes.csv:1: missing column cpu_milli: an openb node list has the "
                                                  "columns sn,cpu_milli,memory_mib,gpu,model"),
        (NODES.replace("96000", "96k"), PODS, "nodes.csv:3: cpu_milli: '96k' is not an integer"),
        (NODES + "openb-node-0002,1000\n", PODS, "nodes.csv:4: 2 fields, the header has 5"),
        (NODES, PODS.replace(",0,100,0", ",0,soon,0"), "pods.csv:2: deletion_time: 'soon' is not a number"),
        (NODES, PODS.replace("12288,1,460", "12288,-1,460"), "pods.csv:3: num_gpu: must not be negative, got -1"),
        # a GPU share openb cannot have was read as a whole GPU (or none), placed and counted as such
        (NODES, PODS.replace("12288,1,460", "12288,1,1500"), "pods.csv:3: gpu_milli: 1500 with num_gpu 1: a task asks "
                                                             "for no GPU (0 and 0), a share of one (1 and 1-1000) or "
                                                             "whole GPUs (N and 1000)"),
        (NODES, PODS.replace("12288,1,460", "12288,2,460"), "pods.csv:3: gpu_milli: 460 with num_gpu 2: "),
        (NODES, PODS.replace("12288,1,460", "12288,0,460"), "pods.csv:3: gpu_milli: 460 with num_gpu 0: "),
        (NODES, PODS.replace(",LS,Running,10", ",LS,Runing,10"),
         "pods.csv:3: pod_phase: 'Runing' is not one of Pending, Running, Succeeded, Failed, Unknown"),
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
        proc = simulate_csv(tmp_path, nodes, pods)
        assert proc.returncode == 2, (message, proc.stderr[-2000:])
        assert message in proc.stderr and "Traceback" not in proc.stderr, (message, proc.stderr[-2000:])


def test_a_csv_saved_with_a_byte_order_mark_and_crlf_line_ends_is_read(tmp_path):
    """As a spreadsheet saves it: the mark is not part of the first column's name."""
    proc = simulate_csv(tmp_path, "\ufeff" + NODES.replace("\n", "\r\n"), "\ufeff" + PODS.replace("\n", "\r\n"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("default: 2/2 pods scheduled"), proc.stdout


def test_small_gpu_shares_keep_two_decimals(tmp_path):
    """One GPU of 16: 6.25% allocated at most, which one decimal would round to 6.2% (policies
    compared on a large cluster differ in the second decimal); 10% and more keep one."""
    nodes = NODES + "openb-node-0002,96000,786432,8,V100M32\n"
    pods = PODS.splitlines()[0] + "\nopenb-pod-0000,12000,16384,1,1000,,LS,Running,0,100,0\n"
    proc = simulate_csv(tmp_path, nodes, pods)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("CONFIGURATION"))
    assert lines[header + 1].split()[:8] == ["default", "1", "1", "0", "0", lines[header + 1].split()[5], "6.25%",
                                             "0.0%"], lines
    proc = simulate_csv(tmp_path, nodes, pods.replace("16384,1,1000", "16384,2,1000"))
    assert proc.stdout.splitlines()[header + 1].split()[6] == "12.5%", proc.stdout


def test_an_untimed_task_list_is_sampled_by_inflation(tmp_path):
    pods = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\nt0,12000,16384,1,1000\nt1,6000,12288,1,500\n"
    proc = simulate_csv(tmp_path, NODES, pods, "--inflate", "1.0", "--seed", "2")
    assert proc.returncode == 0, proc.stderr[-2000:]
    line = proc.stdout.splitlines()[0]
    assert line.startswith("default: ") and " pods scheduled" in line
    scheduled, arrived = line.split()[1].split("/")
    assert int(arrived) >= 8 and int(scheduled) >= 8  # sampled until they ask for the node's 8 GPUs
    header = next(line for line in proc.stdout.splitlines() if line.startswith("CONFIGURATION"))
    assert "ALLOC AT 100% ARRIVED" in header and "ALLOC AT 130% ARRIVED" not in header  # the run stops at 100%


def test_an_inflation_reports_fragmentation_at_the_arrived_workload(tmp_path):
    """The paper's fragmentation curves over arrived workload, of all GPU capacity and of the unallocated:
    one 8-GPU node and tasks of 0.6 GPU only. Each GPU takes one (two are 1.2); the 14th task brings the
    arrived workload to 8.4 GPUs (100%), when the 8 placed hold 4.8 (60%) and each GPU's free 0.4 fits no
    task: 3.2 GPUs fragmented, 40% of all, 100% of the unallocated."""
    pods = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\nt0,1000,1024,1,600\n"
    out = tmp_path / "out"
    proc = simulate_csv(tmp_path, NODES, pods, "--inflate", "1.0", "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("CONFIGURATION"))
    cols = dict(zip(lines[header].split("   "), lines[header + 1].split()))
    assert cols["ALLOC AT 100% ARRIVED"] == "60.0%" and cols["FRAG AT 100% ARRIVED"] == "40.0%", lines
    run = json.loads((out / "results.json").read_text())["runs"][0]
    assert run["summary"]["fragmentation_ratio_at_arrived"] == {"1.0": pytest.approx(0.4)}
    assert run["summary"]["fragmentation_rate_at_arrived"] == {"1.0": pytest.approx(1.0)}
    assert len(run["by_arrival"]["fragmentation_rate"]) == len(run["by_arrival"]["arrived_ratio"]) == 106  # to 8.4
    page = (out / "report.html").read_text()
    assert "<th>GPU frag at 100% arrived</th>" in page and '<canvas id="arrival_frag">' in page
    assert "GPU alloc / frag at N% arrived: the same shares when the GPUs the arrived pods ask for" in page
    assert "<td>60.0%</td><td>40.0%</td>" in page  # the row's allocation and fragmentation at 100% arrived
    # the run spans virtual seconds: its lines over time are drawn in seconds, not as 0.0000x days
    data = json.loads(re.search(r'<script id="data" type="application/json">(.*?)</script>', page).group(1))
    assert data["time_unit"] == "seconds" and data["runs"][0]["alloc"][-1]["x"] == run["series"]["t"][-1], data


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
    proc = simulate(tmp_path, "--until", "400", "--out", str(out), "--scheduler-config", str(tmp_path / "most.yaml"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("CONFIGURATION"))
    assert lines[header].split("   ")[:6] == ["CONFIGURATION", "PODS", "SCHEDULED", "PENDING AT END", "DELETED WAITING",
                                              "GPU ALLOC MEAN"]
    assert "DELAY P50" in lines[header] and "DELAY P99" in lines[header] and "MAKESPAN" in lines[header]
    assert lines[header + 1].split() == ["most", "3", "3", "0", "0", "-", "-", "-", "2", "1m39s", "2m28s", "2m28s",
                                         "2m28s", "2m28s", "3m20s", "0"]
    assert any(line.endswith("; WAITED: scheduled pods whose delay was 1s or more") for line in lines)
    assert any(line.startswith("DELAY: a scheduled pod's creation to its binding") for line in lines)
    assert "GPU ALLOC / GPU FRAG: '-', the cluster has no GPUs" in lines
    summary = json.loads((out / "results.json").read_text())["runs"][0]["summary"]
    assert summary["scheduling_delay_s"] == {"p50": 99.0, "p90": 148.0, "p95": 148.0, "p99": 148.0, "max": 148.0,
                                             "mean": (0 + 99 + 148) / 3}
    assert summary["makespan_s"] == 200.0 and summary["pending_at_end"] == summary["running_at_end"] == 0
    assert summary["waited"] == 2  # a and b; the hog was bound at once
    page = (out / "report.html").read_text()
    assert "<th>waited</th>" in page and "<td>2</td><td>1m39s</td><td>2m28s</td><td>2m28s</td><td>2m28s</td><td>2m28s</td>" in page
    # the same row for a spreadsheet, unformatted; '-' (no GPUs) an empty cell
    [row] = list(csv.DictReader((out / "summary.csv").open()))
    assert (row["configuration"], row["pods"], row["waited"], row["gpu_alloc_ratio_mean"]) == ("most", "3", "2", "")
    assert (row["scheduling_delay_p50_s"], row["scheduling_delay_max_s"], row["makespan_s"]) == ("99.0", "148.0", "200.0")
    series = list(csv.DictReader((out / "series.csv").open()))
    assert {r["configuration"] for r in series} == {"most"} and max(int(r["pending"]) for r in series) == 2
    assert [float(r["t_s"]) for r in series] == sorted(float(r["t_s"]) for r in series)


def test_the_table_has_the_delays_95th_percentile(tmp_path):
    """p95 beside p50/p90/p99 (a planner computed it from results.json; sim56): twenty 3-CPU pods
    at once on one 4-CPU node, each running 10 s, wait 0, 10, ... 190 s in turn. Nearest rank of
    twenty: p90 the 18th (2m50s), p95 the 19th (3m00s), p99 the 20th (3m10s)."""
    (tmp_path / "cluster.yaml").write_text(CLUSTER.replace("count: 2", "count: 1"))
    pods = [{"time": 0, "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": f"p{i:02d}", "annotations": {"sim.nanokube.io/run-seconds": "10"}}, "spec": {
        "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox",
                                                  "resources": {"requests": {"cpu": "3"}}}]}}} for i in range(20)]
    (tmp_path / "trace.jsonl").write_text("".join(json.dumps(p) + "\n" for p in pods))
    out = tmp_path / "out"
    proc = simulate(tmp_path, "--until", "400", "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("CONFIGURATION"))
    cols = lines[header].split("   ")
    delays = [c.strip() for c in cols if c.strip().startswith("DELAY")]
    assert delays == ["DELAY P50", "DELAY P90", "DELAY P95", "DELAY P99", "DELAY MAX"]
    row = lines[header + 1].split()
    assert row[-7:-2] == ["1m30s", "2m50s", "3m00s", "3m10s", "3m10s"]
    delay = json.loads((out / "results.json").read_text())["runs"][0]["summary"]["scheduling_delay_s"]
    assert (delay["p90"], delay["p95"], delay["p99"]) == (170.0, 180.0, 190.0)
    assert "<th>delay p95</th>" in (out / "report.html").read_text()


def _stopped(tmp_path, *signals: int, args: tuple[str, ...] = (), env: dict | None = None) -> tuple[int, str, str]:
    """`nanokube simulate --speed 1` over an hour-long trace, sent `signals` once its first progress line
    is out (the run is going): its exit status, stdout and stderr."""
    (tmp_path / "cluster.yaml").write_text(CLUSTER)
    pods = [{"time": i * 60, "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}"},
                                        "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}
            for i in range(60)]
    (tmp_path / "trace.jsonl").write_text("".join(json.dumps(p) + "\n" for p in pods))
    cmd = [sys.executable, "-m", "nanokube.cli", "simulate", "--cluster", str(tmp_path / "cluster.yaml"),
           "--trace", str(tmp_path / "trace.jsonl"), "--speed", "1", *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})})
    try:
        seen = ""
        while "virtual" not in seen:  # the progress line: the run has started
            ch = proc.stderr.read(1)
            assert ch, "exited before its first progress line"
            seen += ch
        for signum in signals:
            proc.send_signal(signum)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    return proc.returncode, stdout, stderr


@pytest.mark.parametrize("signum, status, said", [(signal.SIGINT, 130, "interrupted"),
                                                  (signal.SIGTERM, 143, "terminated")])
def test_ctrl_c_stops_the_run_and_reports_what_ran(tmp_path, signum, status, said):
    """--speed 1 over an hour-long trace: the run is still going when the first progress line is out.
    SIGTERM (a `timeout`, a CI job's end) stops it as Ctrl-C does; it used to end it without a report."""
    out = tmp_path / "out"
    returncode, stdout, stderr = _stopped(tmp_path, signum, args=("--out", str(out)))
    assert returncode == status, stderr[-2000:]
    assert "Traceback" not in stderr and f"{said}; stopping at the current virtual time" in stderr
    first = stdout.splitlines()[0]
    assert first.startswith("default: 1/1 pods scheduled (interrupted at virtual "), stdout
    assert any(line.startswith("default (interrupted)   1 ") for line in stdout.splitlines()), stdout
    [run] = json.loads((out / "results.json").read_text())["runs"]
    assert run["interrupted"] is True and run["pods"] == 1 and run["virtual_s"] < 60
    assert (out / "report.html").exists()


def test_a_second_stop_signal_exits_at_once_and_still_removes_the_runs_directory(tmp_path):
    """SIGTERM and SIGINT together (two signals, so that the kernel does not merge them into one): the
    second ends the command without a report (os._exit, which runs no finalizer), and the run's
    directory goes from the temporary directory all the same."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    _, _, stderr = _stopped(tmp_path, signal.SIGTERM, signal.SIGINT, env={"TMPDIR": str(tmp)})
    assert "again; exiting without a report" in stderr, stderr[-2000:]
    assert [d.name for d in tmp.iterdir() if d.name.startswith("nanokube-")] == []


def test_progress_counts_the_trace_writes_replayed(tmp_path):
    """The ETA follows the writes replayed, not virtual time (most of a trace's time can be empty)."""
    (tmp_path / "cluster.yaml").write_text(CLUSTER)

    def trace(*times: int) -> None:
        pods = [{"time": t, "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{t}"},
                                       "spec": {"containers": [{"name": "c", "image": "busybox"}]}}} for t in times]
        (tmp_path / "trace.jsonl").write_text("".join(json.dumps(p) + "\n" for p in pods))
    trace(0, 1, 86400)
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

    # on a terminal, one line rewritten in place; five virtual seconds show it (a day of them cost 2 CPU-s)
    trace(0, 1, 2)
    seen = _on_a_terminal([*cmd[:-1], "5"], "stderr")
    assert b"\rdefault: virtual 00:00:05 / 00:00:05 (100.0%) writes 3/3, " in seen, seen[-2000:]


def test_progress_says_which_of_the_configurations_runs(tmp_path):
    """Each configuration's ETA is its own: with several, the line says which of them runs."""
    (tmp_path / "cluster.yaml").write_text(CLUSTER)
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c",
                                                                                                  "image": "busybox"}]}}
    (tmp_path / "trace.jsonl").write_text(json.dumps({"time": 0, "object": pod}) + "\n")
    (tmp_path / "most.yaml").write_text(MOST_ALLOCATED)
    (tmp_path / "packed.yaml").write_text(MOST_ALLOCATED)
    proc = simulate(tmp_path, "--until", "60", "--scheduler-config", str(tmp_path / "most.yaml"),
                    "--scheduler-config", str(tmp_path / "packed.yaml"), quiet=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    progress = [line for line in proc.stderr.splitlines() if " virtual " in line and "events/s" in line]
    assert progress[0].startswith("most [1/2]: virtual ") and progress[-1].startswith("packed [2/2]: virtual "), progress
    assert proc.stdout.startswith("most: 1/1 pods scheduled"), proc.stdout  # the results keep the name alone

    proc = simulate(tmp_path, "--until", "60", "--scheduler-config", str(tmp_path / "most.yaml"), quiet=False)
    assert [line for line in proc.stderr.splitlines() if line.startswith("most: virtual ")], proc.stderr[-2000:]


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
    try:
        _, stderr = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 141, stderr[-2000:]
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr, stderr[-2000:]


def test_limit_pods_replays_the_first_pods_created(tmp_path):
    proc = simulate_csv(tmp_path, NODES, PODS, "--limit-pods", "1", "--out", str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("default: 1/1 pods scheduled"), proc.stdout
    [run] = json.loads((tmp_path / "out" / "results.json").read_text())["runs"]
    assert list(run["placements"]) == ["default/openb-pod-0000"] and run["virtual_s"] == 100  # its deletion
    proc = simulate_csv(tmp_path, NODES, PODS, "--limit-pods", "0")
    assert proc.returncode == 2 and "nanokube simulate: --limit-pods 0: must be 1 or more" in proc.stderr


def test_bad_arguments_and_unreadable_files_are_refused_before_the_run(tmp_path):
    """Each is one line naming what is wrong, exit status 2, no traceback and no run: a negative
    --speed used to hang, --speed 0 ran as fast as possible, an unwritable --out failed after the run,
    an unknown --controllers name failed at the run's start with a traceback."""
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
         f"{tmp_path / 'cluster.yaml'}: Object 'Kind' is missing in 'pools:"),
        # a traceback from the controller manager's start, inside the run
        (("--controllers", "job,bogus"), '--controllers: "bogus" is not in the list of known controllers'),
    ]:
        proc = simulate(tmp_path, *args)
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
    proc = simulate(tmp_path, "--out", str(out), "--until", "1h")
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
    proc = simulate(tmp_path, "--out", str(out), "--until", "1d12h")
    assert proc.returncode == 0 and "trace write" not in proc.stdout, proc.stdout
    assert json.loads((out / "results.json").read_text())["runs"][0]["refused_writes"] == []
    assert json.loads((out / "results.json").read_text())["inputs"]["until"] == 36 * 3600


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
    proc = simulate(tmp_path, "--until", "60", "--out", str(out))
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

    proc = simulate(tmp_path, "--until", "1", "--scheduler-config", str(tmp_path / "most.yaml"))
    header = next(line for line in proc.stdout.splitlines() if line.startswith("CONFIGURATION"))
    assert header.split("   ")[:3] == ["CONFIGURATION", "PODS", "SCHEDULED"], proc.stdout




def test_the_scheduler_s_reasons_say_why_pods_waited_or_never_ran(tmp_path):
    """Two 4-CPU nodes, each held by a 3-CPU hog: an 8-CPU pod fits no node, one selecting a label
    no node has matches none, a gang of three 1-CPU pods finds room for two, and a 3-CPU pod waits
    until a hog goes at 30 s. The table names the scheduler's reasons, without their node counts,
    under it; results.json keeps each pod's message."""
    (tmp_path / "cluster.yaml").write_text(CLUSTER)
    pod = lambda name, cpu, **spec: {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {  # noqa: E731
        "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}], **spec}}
    events = [{"time": 0, "object": pod("hog-a", "3")}, {"time": 0, "object": pod("hog-b", "3")},
              {"time": 1, "object": pod("big", "8")}, {"time": 1, "object": pod("picky", "1", nodeSelector={"gpu": "a100"})},
              {"time": 2, "object": pod("waits", "3")}, {"time": 30, "verb": "delete", "object": pod("hog-a", "3")}]
    # a gang of three 1-CPU pods where two fit: the members that fit say how many did, which is left out
    events.append({"time": 3, "object": {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "gang"}, "spec": {
        "parallelism": 3, "completions": 3, "scheduling": {"schedulingPolicy": {"gang": {}}},
        "template": {"spec": {**pod("x", "1")["spec"], "restartPolicy": "Never"}}}}})
    (tmp_path / "trace.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    out = tmp_path / "out"
    proc = simulate(tmp_path, "--until", "60", "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    at = lines.index("NOT SCHEDULED, pods by the scheduler's last reason (a pod counts under each reason a node gave it):")
    assert lines[at + 1] == ("  default: 2 Insufficient cpu, 2 minCount (3) cannot be satisfied, 1 node(s) didn't match "
                             "Pod's node affinity/selector")
    assert lines[at + 2] == "WAITED, pods by the scheduler's last reason (a pod counts under each reason a node gave it):"
    assert lines[at + 3] == "  default: 1 Insufficient cpu"
    run = json.loads((out / "results.json").read_text())["runs"][0]
    assert run["summary"]["unschedulable_reasons"] == {"Insufficient cpu": 2, "minCount (3) cannot be satisfied": 2,
                                                       "node(s) didn't match Pod's node affinity/selector": 1}
    assert run["summary"]["waited_reasons"] == {"Insufficient cpu": 1}
    assert run["unschedulable"]["default/big"].startswith("0/2 nodes are available: 2 Insufficient cpu.")
    assert "<td>default</td><td>Insufficient cpu</td><td>2</td><td>1</td>" in (out / "report.html").read_text()


def test_a_served_openb_run_replays_as_an_unserved_one(tmp_path):
    """--serve-port gives the API server PKI, which turned ServiceAccount admission on: every pod of
    an openb trace (whose controllers make no `default` ServiceAccount) was refused. Served or not,
    the same pods are placed alike."""
    served = simulate_csv(tmp_path, NODES, PODS, "--until", "20", "--speed", "40", "--serve-port", "0")
    assert served.returncode == 0, served.stderr[-2000:]
    assert "forbidden" not in served.stderr and "refused" not in served.stdout, served.stderr[-2000:]
    assert served.stdout.startswith("default: 2/2 pods scheduled"), served.stdout
    unserved = simulate_csv(tmp_path, NODES, PODS, "--until", "20")
    hashes = [re.search(r"placements (\w+)", p.stdout).group(1) for p in (served, unserved)]
    assert hashes[0] == hashes[1]


def test_gpu_allocation_counts_the_gpus_a_job_s_pods_claim(tmp_path):
    """One 8-GPU node, a Job of four pods each claiming a GPU through a ResourceClaimTemplate for
    100 of the run's 200 s: half the GPUs for half the time. It read 0.0%: the allocation counted
    only the GPUs of pods the trace itself creates, not of those a controller makes."""
    (tmp_path / "cluster.yaml").write_text(CLUSTER.replace("count: 2", "count: 1") + GPUS)
    template = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": "one-gpu", "namespace": "default"}, "spec": {"spec": {"devices": {"requests": [
                    {"name": "gpu", "exactly": {"deviceClassName": "gpu.nanokube.io", "count": 1}}]}}}}
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "namespace": "default"}, "spec": {
        "parallelism": 4, "completions": 4, "template": {
            "metadata": {"annotations": {"sim.nanokube.io/run-seconds": "100"}},
            "spec": {"restartPolicy": "Never", "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
                     "containers": [{"name": "c", "image": "busybox", "resources": {"claims": [{"name": "gpu"}]}}]}}}}
    (tmp_path / "trace.jsonl").write_text("".join(json.dumps({"time": 0, "object": o}) + "\n" for o in (template, job)))
    out = tmp_path / "out"
    proc = simulate(tmp_path, "--until", "200", "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("CONFIGURATION"))
    row = dict(zip(lines[header].split("   "), lines[header + 1].split()))
    assert row["PODS"] == "4" and row["GPU ALLOC MAX"] == "50.0%", lines[header:header + 2]
    summary = json.loads((out / "results.json").read_text())["runs"][0]["summary"]
    assert 0.24 < summary["gpu_alloc_ratio_mean"] < 0.26, summary


def test_a_configuration_without_a_profile_for_the_trace_s_pods_is_refused(tmp_path):
    """A profile renamed (as in a cluster running two schedulers) left every pod of the trace
    waiting for a scheduler the run lacks: '0/2 pods scheduled' and nothing said why."""
    (tmp_path / "renamed.yaml").write_text(MOST_ALLOCATED.replace("default-scheduler", "gpu-scheduler"))
    proc = simulate_csv(tmp_path, NODES, PODS, "--scheduler-config", str(tmp_path / "renamed.yaml"))
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout
    assert proc.stderr == (f"nanokube simulate: {tmp_path / 'renamed.yaml'}: no profile for schedulerName "
                           "default-scheduler, which the trace's pods ask for (its profiles: gpu-scheduler)\n")
    # a Job's pods asking for that scheduler by name: the default configuration has no such profile
    (tmp_path / "cluster.yaml").write_text(CLUSTER)
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": {"template": {"spec": {
        "schedulerName": "gpu-scheduler", "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}
    (tmp_path / "trace.jsonl").write_text(json.dumps({"time": 0, "object": job}) + "\n")
    proc = simulate(tmp_path, "--until", "5")
    assert proc.returncode == 2
    assert "the default configuration: no profile for schedulerName gpu-scheduler" in proc.stderr, proc.stderr
    proc = simulate(tmp_path, "--until", "5", "--scheduler-config", str(tmp_path / "renamed.yaml"))
    assert proc.returncode == 0 and proc.stdout.startswith("renamed: 1/1 pods scheduled"), proc.stderr[-2000:]


def test_feature_gates_set_the_runs_control_plane(tmp_path):
    """Pods of a PodGroup that never comes wait with GenericWorkload on (nanokube's default); with
    --feature-gates GenericWorkload=false the API server drops their schedulingGroup and the scheduler
    places each alone. A refused flag is upstream's words before the run."""
    (tmp_path / "cluster.yaml").write_text(CLUSTER)
    pods = [{"time": i, "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}"}, "spec": {
        "schedulingGroup": {"podGroupName": "never"}, "containers": [{"name": "c", "image": "busybox"}]}}}
        for i in range(2)]
    (tmp_path / "trace.jsonl").write_text("".join(json.dumps(p) + "\n" for p in pods))
    out = tmp_path / "out"
    waiting = simulate(tmp_path, "--until", "5")
    assert waiting.returncode == 0 and "default: 0/2 pods scheduled" in waiting.stdout, waiting.stderr[-2000:]
    alone = simulate(tmp_path, "--until", "5", "--feature-gates", "GenericWorkload=false", "--out", str(out))
    assert alone.returncode == 0 and "default: 2/2 pods scheduled" in alone.stdout, alone.stderr[-2000:]
    assert json.loads((out / "results.json").read_text())["inputs"]["feature_gates"] == "GenericWorkload=false"
    refused = simulate(tmp_path, "--feature-gates", "Gang=true")
    assert refused.returncode == 2 and refused.stderr == (
        'nanokube simulate: invalid argument "Gang=true" for "--feature-gates" flag: unrecognized feature gate: Gang\n')
