"""v1 Endpoints validation over HTTP, as upstream's validateEndpointSubsets: every subset names at
least one ready or not-ready address, and an endpoint port's appProtocol is a qualified name."""

import aiohttp

from nanokube.apiserver.app import APIServer
from nanokube.store.memory import MemoryStore


async def _post(body: dict) -> tuple[int, list]:
    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    eps = f"http://127.0.0.1:{server.port}/api/v1/namespaces/default/endpoints"
    try:
        async with aiohttp.ClientSession() as s, s.post(eps, json=body) as r:
            status = await r.json()
            return r.status, [(c["field"], c["reason"], c["message"]) for c in status["details"].get("causes", [])] \
                if r.status == 422 else []
    finally:
        await server.stop()


async def test_a_subset_without_addresses_is_refused():
    body = {"metadata": {"name": "web"}, "subsets": [
        {"addresses": [{"ip": "10.0.0.1"}], "ports": [{"port": 80}]},
        {"ports": [{"port": 81}]},
        {"addresses": [], "notReadyAddresses": [], "ports": [{"port": 82}]},
    ]}
    msg = "Required value: must specify `addresses` or `notReadyAddresses`"
    assert await _post(body) == (422, [("subsets[1]", "FieldValueRequired", msg),
                                       ("subsets[2]", "FieldValueRequired", msg)])


async def test_a_subset_of_not_ready_addresses_alone_is_stored():
    body = {"metadata": {"name": "web"}, "subsets": [{"notReadyAddresses": [{"ip": "10.0.0.2"}]}]}
    assert await _post(body) == (201, [])


async def test_an_endpoint_ports_app_protocol_is_a_qualified_name():
    body = {"metadata": {"name": "web"}, "subsets": [
        {"addresses": [{"ip": "10.0.0.1"}], "ports": [{"port": 80, "appProtocol": "bad proto!"}]}]}
    code, causes = await _post(body)
    assert code == 422 and [(f, r) for f, r, _ in causes] == [("subsets[0].ports[0].appProtocol", "FieldValueInvalid")]
    assert causes[0][2].startswith('Invalid value: "bad proto!": name part must consist of alphanumeric characters')
