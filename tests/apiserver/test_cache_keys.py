from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nanokube.apiserver import cache_keys
from nanokube.apiserver.cache_keys import SortedKeys

_KEYS = st.text(alphabet="ab/z\U0010ffff", max_size=5)


@settings(max_examples=300, deadline=None)
@given(start=st.lists(_KEYS, unique=True, max_size=40),
       ops=st.lists(st.tuples(st.booleans(), _KEYS), max_size=120),
       probes=st.lists(_KEYS, max_size=8), cuts=st.lists(st.integers(0, 60), min_size=2, max_size=2))
def test_keys_in_blocks_answer_as_one_sorted_list_through_adds_and_removes(start, ops, probes, cuts):
    with mock.patch.object(cache_keys, "LOAD", 3):  # small blocks: splits and joins happen often
        keys, model = SortedKeys(start), sorted(start)
        for add, key in ops:
            if add and key not in model:
                keys.add(key)
                model.append(key)
                model.sort()
            elif not add and key in model:
                keys.remove(key)
                model.remove(key)
            assert len(keys) == len(model)
            for p in probes:
                assert (keys.bisect_left(p), keys.bisect_right(p)) == (len([k for k in model if k < p]),
                                                                        len([k for k in model if k <= p]))
            lo, hi = sorted(cuts)
            assert keys.slice(lo, hi) == model[lo:hi]
            assert keys.slice(0, len(model)) == model


def test_removing_a_key_that_is_not_there_is_a_key_error_and_changes_nothing():
    keys = SortedKeys(["/a", "/c"])
    for missing in ("/b", "/d", ""):
        with pytest.raises(KeyError):
            keys.remove(missing)
    assert (len(keys), keys.slice(0, 5)) == (2, ["/a", "/c"])
