"""machinery.backoff: the doubling curve every retry loop shares."""

import pytest

from nanokube.machinery.backoff import doubling


@pytest.mark.parametrize(("base", "steps", "cap", "want"), [
    (10.0, 0, 300.0, 10.0),       # no failure yet: the base
    (10.0, 1, 300.0, 20.0),
    (10.0, 4, 300.0, 160.0),
    (10.0, 5, 300.0, 300.0),      # 320 capped
    (10.0, 5000, 300.0, 300.0),   # far past 2**1024: still the cap, no OverflowError
    (0.005, 10**9, 60.0, 60.0),
    (10.0, 3, 1.0, 1.0),          # a cap under the base: the cap
    (0.0, 7, 60.0, 0.0),          # no base, no wait
])
def test_the_base_doubles_per_step_up_to_the_cap(base, steps, cap, want):
    assert doubling(base, steps, cap) == want
