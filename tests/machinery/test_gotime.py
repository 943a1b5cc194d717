"""machinery/gotime.py: RFC 3339 times as Go's time package parses and formats them, years past Python's included."""

import pytest

from nanokube.machinery.gotime import format_rfc3339, parse_rfc3339


@pytest.mark.parametrize("text, formatted", [
    ("2026-12-07T18:40:25.4Z", "2026-12-07T18:40:25Z"),  # the fraction dropped
    ("1969-12-31T23:59:59.5Z", "1969-12-31T23:59:59Z"),  # the second it falls in, before the epoch too
    ("0000-02-29T12:00:00Z", "0000-02-29T12:00:00Z"),  # year 0, a leap year
    ("0000-01-01T00:00:00+01:00", "-0001-12-31T23:00:00Z"),  # Go's year -1
    ("9999-12-31T23:59:59-23:00", "10000-01-01T22:59:59Z"),
    ("2026-03-01T00:30:00+05:30", "2026-02-28T19:00:00Z"),
])
def test_a_parsed_time_is_written_in_utc_as_gos_rfc3339_layout_writes_it(text, formatted):
    assert format_rfc3339(parse_rfc3339(text)) == formatted
