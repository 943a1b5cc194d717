"""The fuzzer's scan of `nanokube up`'s log for component failures (tests/e2e/logscan.py)."""

from __future__ import annotations

from .logscan import component_failures, read_from

PDB_TRACEBACK = """\
E{ts}   41235 base.py:61] disruption: sync fuzz/fuzz-{n} failed
Traceback (most recent call last):
  File "/work/main/nanokube/controllers/base.py", line 58, in _worker
    await self.sync(key)
  File "/home/me/nanokube/nanokube/controllers/disruption.py", line 97, in sync
    spec = pdb["spec"]
           ~~~^^^^^^^^
KeyError: 'spec'
"""
LOG = (
    "I1203 13:57:40.594000   41235 leaderelection.py:240] kube-controller-manager: x became leader\n"
    + PDB_TRACEBACK.format(ts="1203 13:57:41.001000", n=1)
    + "W1203 13:57:41.500000   41235 base.py:61] replicaset: sync fuzz/a failed: 409 Conflict\n"
    + PDB_TRACEBACK.format(ts="1203 13:57:42.001000", n=2)
    + "E1203 13:57:43.000000   41235 events.py:118] unable to write event fuzz-12.187a9f00c1e2d3b4 (retry limit exceeded)\n"
    + "E1203 13:57:44.000000   41235 events.py:118] unable to write event fuzz-7.187a9f00c1e2ffff (retry limit exceeded)\n"
    + """\
I1203 13:57:45.000000   41235 scheduler.py:433] binding
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
        "ERROR events.py:118: unable to write event fuzz-N.N (retry limit exceeded)",
        "OverflowError at json/decoder.py:9 in decode (via nanokube/store/sqlite.py:14 in run)",
    ]
    pdb = found["KeyError at nanokube/controllers/disruption.py:97 in sync"]
    assert pdb.count == 2
    assert pdb.example.startswith("E1203 13:57:41.001000") and pdb.example.endswith("KeyError: 'spec'")


def test_a_clean_log_has_no_failures():
    assert component_failures("I1203 13:57:40.594000   41235 manager.py:90] 2 nodes registered\n"
                              "W1203 13:57:41.500000   41235 base.py:61] sync failed: 409\n"
                              "stray text\n") == []


def test_a_run_reads_only_its_own_part_of_the_log(tmp_path):
    log = tmp_path / "nanokube.log"
    log.write_text(PDB_TRACEBACK.format(ts="1203 13:57:41.001000", n=1))
    start = log.stat().st_size
    with open(log, "a") as f:
        f.write("I1203 13:57:45.000000   41235 scheduler.py:433] binding\n")
    assert component_failures(read_from(log, start)) == []
