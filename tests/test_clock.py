"""metav1.Time text: second precision, UTC, Z; the per-second memo never returns a stale second."""

from nanokube.clock import format_time, parse_time


def test_format_time_truncates_to_the_second_and_round_trips():
    assert format_time(1767225600.9) == "2026-01-01T00:00:00Z"
    assert format_time(1767225601.0) == "2026-01-01T00:00:01Z"
    assert format_time(1767225600.2) == "2026-01-01T00:00:00Z", "going back a second is not served from the memo"
    assert parse_time(format_time(1767225659.5)) == 1767225659
