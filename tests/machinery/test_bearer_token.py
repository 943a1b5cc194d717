"""Reading a bearer token off an Authorization header, as the bearertoken authenticator does."""

from __future__ import annotations

import pytest

from nanokube.machinery.user import bearer_token


@pytest.mark.parametrize(("header", "token"), [
    ("Bearer abc", "abc"), ("bearer abc", "abc"), ("BEARER abc", "abc"), ("  Bearer abc  ", "abc"),
    ("Bearer abc def", "abc"),  # the token is the second space-separated part
    ("Bearer  abc", None),  # an empty token is no token: upstream's bearertoken ignores it (anonymous)
    ("Basic dXNlcjpwdw==", None), ("Bearer", None), ("", None), ("Bearerabc", None),
])
def test_the_scheme_in_any_case_and_the_second_part(header, token):
    assert bearer_token(header) == token
