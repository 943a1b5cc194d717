"""Smoke test of the API benchmarks: the whole code path at toy sizes on the memory backend.

Asserts only that every metric is reported with a sane value; timings are
never compared against thresholds.
"""

from __future__ import annotations

import dataclasses
import math
import os
import resource

import pytest

from benchmarks.api import (
    METRICS,
    BenchConfig,
    ChunkedLines,
    format_table,
    keep_freed_memory,
    percentile,
    run_benchmarks,
)

#: (two reader processes, not the default four: each is a spawned interpreter, and two cover merging their logs;
#: 50 pods' aftermath is judged over quarter-second windows, not whole seconds)
TINY = BenchConfig(pods=50, concurrency=8, gets=40, lists=3, page_limit=20, watchers=5, watch_processes=2,
                   watch_writes=10, watch_timeout_s=60, settle_window_s=0.25)


def test_percentile_interpolates_between_ranks():
    assert percentile([4.0, 1.0, 3.0, 2.0], 0.5) == 2.5
    assert percentile([1.0, 2.0, 3.0], 0.99) == pytest.approx(2.98)
    assert percentile([7.0], 0.99) == 7.0


def test_watch_reader_splits_chunks_into_event_lines_wherever_reads_end():
    events = [b'{"type":"ADDED","n":%d}' % i for i in range(3)]
    # one event per chunk, then two events in one chunk, then one event split over two chunks
    body = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in (events[0] + b"\n", events[1] + b"\n" + events[2][:5],
                                                                 events[2][5:] + b"\n"))
    for cut in range(len(body) + 1):
        after_headers = ChunkedLines(body[:cut])  # what the read of the headers brought along
        assert after_headers.feed(body[cut:]) == events
        two_reads = ChunkedLines(b"")
        assert two_reads.feed(body[:cut]) + two_reads.feed(body[cut:]) == events
    with pytest.raises(RuntimeError, match="ended a watch"):
        ChunkedLines(b"").feed(b"0\r\n\r\n")


def test_a_body_over_the_mmap_threshold_reuses_freed_memory_instead_of_faulting_it_in_again():
    if not keep_freed_memory():
        pytest.skip("malloc is not glibc's")

    def faults_reading_a_body() -> int:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        body = b"x" * (40 << 20)  # a 10,000-pod LIST's size; glibc maps anything over 32 MiB on its own
        del body
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

    faults_reading_a_body()
    assert faults_reading_a_body() < 1000  # the body is 10,240 pages


@pytest.mark.timeout(180)
def test_memory_backend_reports_every_metric():
    messages: list[str] = []
    results = run_benchmarks(["memory"], TINY, messages.append)
    row = dict(results["memory"])
    assert list(row) == list(METRICS)
    assert all(math.isfinite(v) for v in row.values())
    share_before_ack = row.pop("watch events read before write ack (%)")
    assert 0 <= share_before_ack <= 100
    per_pod = row.pop("memory per pod (KiB/pod)")
    assert per_pod >= 0
    for name in [m for m in METRICS if " CPU per " in m]:  # counted in 10 ms ticks: a toy phase may take none
        assert row.pop(name) >= 0
    assert all(v > 0 for v in row.values()), row
    for name in ("pod create", "GET pod", "LIST all pods", "LIST paginated walk", "watch delivery"):
        assert row[f"{name} p99 (ms)"] >= row[f"{name} p50 (ms)"]
    pid = next(int(m.split("pid ")[1].split()[0]) for m in messages if "nanokube pid" in m)
    assert not os.path.exists(f"/proc/{pid}"), "the nanokube process outlived the benchmark"
    table = format_table(results)
    assert all(metric in table for metric in METRICS)
    assert table.splitlines()[0].split("|")[1].strip() == "memory"


@pytest.mark.timeout(180)
def test_watch_only_measures_the_creates_and_the_watch_phase():
    results = run_benchmarks(["memory"], dataclasses.replace(TINY, watch_only=True), lambda _: None)
    row = results["memory"]
    skipped = ("GET pod", "LIST", "LWS", "custom object")
    assert list(row) == [m for m in METRICS if not any(s in m for s in skipped)]
    assert row["watch delivery p99 (ms)"] >= row["watch delivery p50 (ms)"] > 0
    table = format_table(results).splitlines()
    assert [line.split("|")[0].strip() for line in table[2:]] == list(row)
