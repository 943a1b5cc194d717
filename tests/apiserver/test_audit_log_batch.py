"""--audit-log-mode batch: upstream's buffered backend in front of the log file. Events wait in a
buffer (--audit-log-batch-buffer-size; one more is dropped and counted) and are written in the
background a batch at a time (--audit-log-batch-max-size, or what gathered within
--audit-log-batch-max-wait); what is left is written at shutdown."""

from __future__ import annotations

import asyncio

import orjson

from nanokube.apiserver.audit_file import LogOptions
from tests.apiserver.test_audit_authentication import CONFIGMAPS, served
from tests.controllers import eventually

#: configmap creates, one event each
COMPLETE_ONLY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: Metadata
    verbs: ["create"]
    resources: [{group: "", resources: ["configmaps"]}]
"""


def _names(log) -> list[str]:
    return [e["objectRef"]["name"] for e in map(orjson.loads, log.read_bytes().splitlines())]


async def _create(admin, name: str) -> None:
    async with admin.post(CONFIGMAPS, json={"metadata": {"name": name}}) as r:
        assert r.status == 201


async def test_batch_mode_writes_a_batch_once_it_fills(tmp_path):
    log = tmp_path / "audit.log"
    async with served(tmp_path, str(log), LogOptions(mode="batch", batch_max_size=2, batch_max_wait=3600),
                      COMPLETE_ONLY) as (_, admin):
        await _create(admin, "a")
        await asyncio.sleep(0.2)
        assert _names(log) == []  # answered; its event waits for a batch of two (or an hour)
        await _create(admin, "b")

        async def written():
            return _names(log)
        assert await eventually(written) == ["a", "b"]  # the batch, written in the background


async def test_batch_mode_drops_what_the_buffer_cannot_hold_and_writes_the_rest_at_shutdown(tmp_path):
    log = tmp_path / "audit.log"
    async with served(tmp_path, str(log), LogOptions(mode="batch", batch_buffer=2, batch_max_size=3,
                                                     batch_max_wait=3600), COMPLETE_ONLY) as (_, admin):
        for name in ("a", "b", "c"):
            await _create(admin, name)
        async with admin.get("/metrics") as r:
            assert 'apiserver_audit_error_total{plugin="buffered"} 1' in (await r.text()).splitlines()
        assert _names(log) == []
    assert _names(log) == ["a", "b"]
