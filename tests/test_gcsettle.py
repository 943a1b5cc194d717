"""The cycle collector's settings of a long-lived process (nanokube/gcsettle.py): a server defers its
full collections from its start until it settles, and gets its full-collection threshold back then."""

from __future__ import annotations

import gc

from nanokube import gcsettle


def test_full_collections_wait_for_settle_and_come_back_with_it():
    before = gc.get_threshold()
    gcsettle.defer()
    try:
        assert gc.get_threshold() == (*before[:2], gcsettle.NEVER)
        thresholds = gcsettle.settle()
        assert thresholds == before  # what `restore` puts back: the process's own, not the deferral's
        assert gc.get_threshold() == (gcsettle.YOUNG, *before[1:])
        assert gc.get_freeze_count() > 0
    finally:
        gcsettle.restore(before)
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_settle_without_defer_keeps_the_thresholds_it_found():
    gc.set_threshold(700, 7, 9)
    try:
        assert gcsettle.settle() == (700, 7, 9)
        assert gc.get_threshold() == (gcsettle.YOUNG, 7, 9)
    finally:
        gcsettle.restore((700, 10, 10))


def test_an_up_that_stops_before_it_settles_gives_full_collections_back(tmp_path, capsys):
    """`up` refusing its cluster file (after its deferral) leaves an in-process caller's collector as it was:
    a test worker that kept the deferral ran no full collection for the rest of its session."""
    from nanokube.cli import main

    bad = tmp_path / "bad.yaml"
    bad.write_text("pools:\n  - name: a\n    count: 1\n    capacity: {cpu: 1, memory: 1Gi, gpus: 8}\n")
    before = gc.get_threshold()
    assert main(["up", "--cluster", str(bad), "--data-dir", str(tmp_path / "d")]) == 2
    assert "pools[0].capacity.gpus: unknown field" in capsys.readouterr().err
    assert gc.get_threshold() == before
