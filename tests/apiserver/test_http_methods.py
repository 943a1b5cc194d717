"""A request line's method as Go's server reads it: any token is a method, routed case-sensitively, so one
the API's routes do not take (`get`, `Get`, `FOO`) is go-restful's 405 MethodNotAllowed Status, not the
HTTP parser's 400 (llhttp knows only its own list of methods, in capitals); a method that is no token
is still a 400."""

import orjson
import pytest

from tests.apiserver.test_expect import Conn, served


async def _send(server, ctx, line: str) -> tuple[int, dict]:
    c = await Conn.open(server, ctx)
    try:
        c.writer.write(f"{line}\r\nHost: localhost\r\n\r\n".encode())
        code, _, body = await c.answer()
        return code, orjson.loads(body)
    finally:
        c.close()


@pytest.mark.parametrize("method", ["get", "Get", "post", "FOO", "GETX"])
async def test_a_method_no_route_takes_is_a_405_status(tmp_path, method):
    async with served(tmp_path) as (server, ctx):
        code, got = await _send(server, ctx, f"{method} /api/v1/namespaces HTTP/1.1")
        assert code == 405, got
        assert (got["kind"], got["reason"], got["message"]) == (
            "Status", "MethodNotAllowed", "the server does not allow this method on the requested resource")


async def test_a_method_that_is_no_token_stays_a_400_and_get_is_served(tmp_path):
    async with served(tmp_path) as (server, ctx):
        code, got = await _send(server, ctx, "G@T /api/v1/namespaces HTTP/1.1")
        assert code == 400 and got["kind"] == "Status" and got["reason"] == "BadRequest", got
        code, got = await _send(server, ctx, "GET /api/v1/namespaces HTTP/1.1")
        assert code == 200 and got["kind"] == "NamespaceList", got
