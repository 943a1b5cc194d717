"""isPrettyPrint: ?pretty=true, or (without ?pretty) a curl, Wget or browser User-Agent, gets the JSON
indented by two spaces (json.MarshalIndent, no newline after it); anything else the compact form."""

import aiohttp
import orjson

from nanokube.apiserver.app import APIServer
from nanokube.store.memory import MemoryStore


async def test_json_is_pretty_printed_for_pretty_true_and_command_line_tools():
    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    url = f"http://127.0.0.1:{server.port}/api/v1/namespaces/default/configmaps"
    try:
        async with aiohttp.ClientSession() as s:
            async with s.post(url, json={"metadata": {"name": "a"}, "data": {"k": "v"}}) as r:
                assert r.status == 201
            got = {}
            for key, query, agent in [("pretty", "?pretty=true", "x"), ("curl", "", "curl/8.5.0"),
                                      ("curl-off", "?pretty=false", "curl/8.5.0"), ("bogus", "?pretty=yes", "x"),
                                      ("plain", "", "kubectl/v1.37.0")]:
                async with s.get(f"{url}/a{query}", headers={"User-Agent": agent}) as r:
                    got[key] = await r.read()
            async with s.get(f"{url}/missing?pretty=1") as r:
                missing = await r.read()
        obj = orjson.loads(got["plain"])
        assert got["pretty"] == got["curl"] == orjson.dumps(obj, option=orjson.OPT_INDENT_2)
        assert got["pretty"].startswith(b'{\n  "kind": "ConfigMap",\n  "apiVersion": "v1",')
        assert got["curl-off"] == got["bogus"] == got["plain"] == orjson.dumps(obj) + b"\n"
        assert missing.startswith(b'{\n  "kind": "Status",')
    finally:
        await server.stop()
