"""machinery/responses: the HTTP answers made of API errors."""

from __future__ import annotations

import orjson
import pytest

from nanokube.machinery import errors
from nanokube.machinery.responses import error_response


@pytest.mark.parametrize("code", [1000, 2**31 - 1, 99, -1])
def test_a_status_code_http_cannot_carry_is_the_panic_filters_500(code):
    """A webhook's denial keeps its own status.code (ToStatusErr only raises one below 400), and any int32
    reaches the response writer: net/http's WriteHeader panics outside 100-999, and kube-apiserver's
    panic filter answers a plain 500. Ours wrote "HTTP/1.1 1000", a status line no client reads."""
    resp = error_response(errors.APIError(code, "", "admission webhook \"w.example.com\" denied the request"))
    assert (resp.status, resp.text, resp.headers["Content-Type"], resp.headers["X-Content-Type-Options"]) == (
        500, "This request caused apiserver to panic. Look in the logs for details.\n", "text/plain; charset=utf-8", "nosniff")


@pytest.mark.parametrize("code", [999, 600, 400])
def test_a_status_code_http_can_carry_is_the_status(code):
    resp = error_response(errors.APIError(code, "", "denied"))
    assert resp.status == code and orjson.loads(resp.body)["code"] == code
