"""`nanokube simulate`'s what-ifs, each against the trace as it is: more, fewer or other nodes
(--add-nodes, --drop-nodes, pools of no nodes), arrivals sooner (--arrival-rate), a run on until
the pods end (--drain), and tasks that keep their run times (--keep-run-times)."""

from __future__ import annotations

import json

import pytest

from .simulate import CLUSTER, NODES, PODS, simulate, simulate_csv


@pytest.mark.timeout(600)  # thirteen simulate processes: a loaded machine takes up to ~10 s to start each
def test_what_if_more_fewer_or_other_nodes(tmp_path):
    """Four 3-CPU pods on 4-CPU nodes: one pod a node, so the pods scheduled count the nodes."""
    (tmp_path / "cluster.yaml").write_text(CLUSTER)
    (tmp_path / "big.yaml").write_text(CLUSTER.replace("name: n", "name: big").replace("count: 2", "count: 1")
                                       .replace('cpu: "4"', 'cpu: "8"'))
    pods = [{"time": 0, "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}"}, "spec": {
        "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "3"}}}]}}} for i in range(4)]
    (tmp_path / "trace.jsonl").write_text("".join(json.dumps(p) + "\n" for p in pods))

    def run(*args: str, quiet: bool = True) -> tuple[list[str], str]:
        """The nodes the pods went to, and what the run wrote to stderr."""
        out = tmp_path / "out"
        proc = simulate(tmp_path, "--until", "5", "--out", str(out), *args, quiet=quiet)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return sorted(set(json.loads((out / "results.json").read_text())["runs"][0]["placements"].values())), proc.stderr

    def nodes(*args: str) -> list[str]:
        return run(*args)[0]

    assert nodes() == ["n-0", "n-1"]
    placed, stderr = run("--add-nodes", "n=2", quiet=False)
    assert placed == ["n-0", "n-1", "n-2", "n-3"]
    assert "cluster: 4 nodes, 0 GPUs in 1 pools" in stderr, stderr[-2000:]  # the cluster the run has, said first
    assert "<code>" + str(tmp_path / "cluster.yaml") + "</code> with --add-nodes n=2," in \
        (tmp_path / "out" / "report.html").read_text()
    assert nodes("--drop-nodes", "1") == ["n-0"]
    assert nodes("--drop-nodes", "50%", "--add-nodes", "n=1") == ["n-0", "n-1"]
    assert nodes("--cluster", str(tmp_path / "big.yaml")) == ["big-0", "n-0", "n-1"]
    # a drop takes from the first file's nodes, the cluster as it is, not from a file of nodes added
    # (seed 0 drew big-0 and one n when the draw took 50% of all three)
    dropped = nodes("--cluster", str(tmp_path / "big.yaml"), "--drop-nodes", "50%")
    assert len(dropped) == 2 and dropped[0] == "big-0" and dropped[1] in ("n-0", "n-1"), dropped

    for args, message in [
        (("--add-nodes", "gpu=3"), "--add-nodes: no pool 'gpu'; the cluster's pools: n"),
        (("--add-nodes", "n"), "--add-nodes 'n': want POOL=COUNT, e.g. n=10"),
        (("--drop-nodes", "2"), "--drop-nodes 2: 2 of the cluster's 2 nodes would leave none"),
        (("--drop-nodes", "0.1"), "--drop-nodes '0.1': want a number of nodes (50) or a percentage of them (10%)"),
        (("--cluster", str(tmp_path / "cluster.yaml")), "cluster.yaml: pool 'n' is also in"),
        (("--inflate", "-1"), "--inflate -1.0: must be above 0"),
        (("--inflate", "1.3", "--drain"), "--drain with --inflate: inflated pods never end"),
    ]:
        proc = simulate(tmp_path, *args)
        assert proc.returncode == 2 and "nanokube simulate: " in proc.stderr and message in proc.stderr, \
            (args, proc.stderr[-2000:])


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
        proc = simulate(tmp_path, "--out", str(out), *args)
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
        proc = simulate(tmp_path, *args)
        assert proc.returncode == 2 and f"nanokube simulate: {message}" in proc.stderr, (args, proc.stderr[-2000:])


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
        proc = simulate(tmp_path, "--out", str(out), *args)
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
        proc = simulate_csv(tmp_path, NODES, pods, "--out", str(out), *args)
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
        proc = simulate_csv(tmp_path, NODES, pods, *args)
        assert proc.returncode == 2 and f"nanokube simulate: {message}" in proc.stderr, (args, proc.stderr[-2000:])
    proc = simulate_csv(tmp_path, NODES, pods.replace("30,80,30", "30,80,90"), "--keep-run-times")
    assert proc.returncode == 2 and "pods.csv:4: scheduled_time: 90 is not between creation_time 30 and " \
                                    "deletion_time 80" in proc.stderr, proc.stderr[-2000:]


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
        proc = simulate(tmp_path, "--until", "5", "--out", str(out), *args)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert json.loads((out / "results.json").read_text())["runs"][0]["placements"] == want
