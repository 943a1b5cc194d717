"""pods/log query parameters as PodLogOptions, with kube-apiserver's validation messages."""

import pytest

from nanokube.machinery.errors import APIError
from nanokube.node.streaming import log_options


def test_options_from_the_query():
    o = log_options({"follow": "true", "timestamps": "true", "tailLines": "5", "limitBytes": "10",
                     "sinceSeconds": "60"}, 1000.0, "web")
    assert (o.follow, o.timestamps, o.tail_lines, o.limit_bytes, o.since, o.previous) == (True, True, 5, 10, 940.0,
                                                                                          False)
    assert log_options({"sinceTime": "2026-01-01T00:00:00Z"}, 0, "web").since == 1767225600.0


@pytest.mark.parametrize("query,message", [
    ({"tailLines": "-1"}, 'PodLogOptions "web" is invalid: tailLines: Invalid value: -1: must be greater than or equal to 0'),
    ({"limitBytes": "0"}, 'PodLogOptions "web" is invalid: limitBytes: Invalid value: 0: must be greater than 0'),
    ({"sinceSeconds": "0"}, 'PodLogOptions "web" is invalid: sinceSeconds: Invalid value: 0: must be greater than 0'),
    ({"sinceSeconds": "5", "sinceTime": "2026-01-01T00:00:00Z"},
     'PodLogOptions "web" is invalid: []: Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified'),
])
def test_invalid_options(query, message):
    with pytest.raises(APIError) as e:
        log_options(query, 0, "web")
    assert (e.value.code, e.value.message) == (422, message)
