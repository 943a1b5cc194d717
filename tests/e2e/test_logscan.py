"""The fuzzer's scan of `nanokube up`'s log for component failures (tests/e2e/logscan.py)."""

from __future__ import annotations

from .logscan import component_failures, read_from

PDB_TRACEBACK = """\
{ts} ERROR nanokube.controllers.base: disruption: sync fuzz/fuzz-{n} failed
Traceback (most recent call last):
  File "/work/main/nanokube/controllers/base.py", line 58, in _worker
    await self.sync(key)
  File "/home/me/nanokube/nanokube/controllers/disruption.py", line 97, in sync
    spec = pdb["spec"]
           ~~~^^^^^^^^
KeyError: 'spec'
"""
LOG = (
    "2026-12-03 13:57:40,594 INFO nanokube.client.leaderelection: kube-controller-manager: x became leader\n"
    + PDB_TRACEBACK.format(ts="2026-12-03 13:57:41,001", n=1)
    + "2026-12-03 13:57:41,500 WARNING nanokube.controllers.base: replicaset: sync fuzz/a failed: 409 Conflict\n"
    + PDB_TRACEBACK.format(ts="2026-12-03 13:57:42,001", n=2)
    + "2026-12-03 13:57:43,000 ERROR nanokube.client.events: unable to write event fuzz-12.187a9f00c1e2d3b4 (retry limit exceeded)\n"
    + "2026-12-03 13:57:44,000 ERROR nanokube.client.events: unable to write event fuzz-7.187a9f00c1e2ffff (retry limit exceeded)\n"
    + """\
2026-12-03 13:57:45,000 INFO nanokube.scheduler: binding
Exception in thread Thread-3 (checkpoint):
Traceback (most recent call last):
  File "/work/main/nanokube/store/sqlite.py", line 12, in run
    self.step()
KeyError: 'x'

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/work/main/nanokube/store/sqlite.py", line 14, in run
    math.pow(2, n)
  File "/usr/lib/python3.12/json/decoder.py", line 9, in decode
    raise ValueError(x)
OverflowError: math range error
"""
)


def test_each_traceback_and_error_line_is_a_failure_counted_once_per_kind():
    found = {f.signature: f for f in component_failures(LOG)}
    assert list(found) == [
        "KeyError at nanokube/controllers/disruption.py:97 in sync",
        "ERROR nanokube.client.events: unable to write event fuzz-N.N (retry limit exceeded)",
        "OverflowError at json/decoder.py:9 in decode (via nanokube/store/sqlite.py:14 in run)",
    ]
    pdb = found["KeyError at nanokube/controllers/disruption.py:97 in sync"]
    assert pdb.count == 2
    assert pdb.example.startswith("2026-12-03 13:57:41,001 ERROR") and pdb.example.endswith("KeyError: 'spec'")


def test_a_clean_log_has_no_failures():
    assert component_failures("2026-12-03 13:57:40,594 INFO nanokube.node.manager: 2 nodes registered\n"
                              "2026-12-03 13:57:41,500 WARNING nanokube.controllers.base: sync failed: 409\n"
                              "stray text\n") == []


def test_a_run_reads_only_its_own_part_of_the_log(tmp_path):
    log = tmp_path / "nanokube.log"
    log.write_text(PDB_TRACEBACK.format(ts="2026-12-03 13:57:41,001", n=1))
    start = log.stat().st_size
    with open(log, "a") as f:
        f.write("2026-12-03 13:57:45,000 INFO nanokube.scheduler: binding\n")
    assert component_failures(read_from(log, start)) == []
