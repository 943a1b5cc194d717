"""Label key and value validators remember valid values only: an invalid
one is rejected every time with a fresh list of errors."""

from nanokube.machinery.validation import label_value, qualified_name


def test_remembered_validators_keep_rejecting_and_hand_out_fresh_errors():
    assert qualified_name("example.com/app") == [] == qualified_name("example.com/app")
    first = qualified_name("bad/key/name")
    first.append("changed by a caller")
    assert qualified_name("bad/key/name") == first[:1]
    assert label_value("x" * 64) == ["must be no more than 63 characters"]
    assert label_value("x" * 64) == ["must be no more than 63 characters"]
    for i in range(9000):
        assert label_value(f"v{i}") == []
    assert label_value("-bad") and label_value("v1") == []
