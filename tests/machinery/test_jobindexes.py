from nanokube.machinery.jobindexes import Indexes, first_overlap

BIG = 2**31 - 1


def test_parse_skips_what_does_not_parse_stops_at_completions_and_merges_neighbours():
    assert Indexes.parse("0-2,x,3,5-,7,9-20,30", 12).spans == [(0, 3), (7, 7), (9, 11)]
    assert Indexes.parse("", 5).spans == [] and Indexes.parse(None, 5).spans == []
    whole = Indexes.parse(f"0-{BIG - 1}", BIG)
    assert whole.spans == [(0, BIG - 1)] and len(whole) == BIG and BIG - 1 in whole and BIG not in whole


def test_written_as_upstream_writes_them():
    assert str(Indexes([(4, 4), (0, 2), (7, 8)])) == "0-2,4,7,8"
    assert str(Indexes([(1, 1), (3, 5)])) == "1,3-5"
    assert str(Indexes()) == ""
    assert str(Indexes.parse("0-2,4,7-8", 9)) == "0-2,4,7,8"


def test_add_joins_the_intervals_it_touches():
    idx = Indexes([(0, 1), (5, 6)])
    assert idx.add(3) and idx.spans == [(0, 1), (3, 3), (5, 6)]
    assert idx.add(2) and idx.spans == [(0, 3), (5, 6)]
    assert idx.add(4) and idx.spans == [(0, 6)]
    assert not idx.add(4) and idx.spans == [(0, 6)]
    assert idx.add(8) and idx.add(7) and idx.spans == [(0, 8)]
    assert None not in idx


def test_union_and_shared_count_by_interval():
    a = Indexes([(0, BIG - 10)]) | {BIG - 5, BIG - 9}
    assert a.spans == [(0, BIG - 9), (BIG - 5, BIG - 5)]
    b = Indexes([(BIG - 20, BIG - 1)])
    assert a.shared(b) == 12 + 1 and b.shared(a) == 13
    assert (a | b).spans == [(0, BIG - 1)]


def test_first_missing_walks_the_gaps_skipping_busy_indexes():
    done = Indexes([(0, BIG - 6), (BIG - 4, BIG - 4)])
    assert done.first_missing(3, BIG) == [BIG - 5, BIG - 3, BIG - 2]
    assert done.first_missing(3, BIG, busy={BIG - 5, BIG - 2}) == [BIG - 3, BIG - 1]
    assert Indexes().first_missing(2, 5, busy={0}) == [1, 2]
    assert Indexes().first_missing(0, 5) == []
    assert Indexes([(0, 4)]).first_missing(2, 5) == []


def test_first_overlap_walks_both_lists_once():
    assert first_overlap([(0, 2), (6, 9)], [(3, 5), (8, 8)]) == 8
    assert first_overlap([(0, 2)], [(3, BIG)]) is None
    assert first_overlap([(0, BIG)], [(BIG, BIG)]) == BIG
    assert first_overlap([], [(0, 1)]) is None
