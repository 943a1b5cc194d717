"""Table cells of times far off, as upstream's printers render them: translateTimestampSince says
"<unknown>" only for an unset time or Go's zero time (0001-01-01T00:00:00Z); any other time is
duration.HumanDuration of time.Since, a time.Duration that saturates at about 292 years, so year
0000 and 1700 both print "292y"."""

import aiohttp

from nanokube.apiserver.app import APIServer
from nanokube.store.memory import MemoryStore

TABLE = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}
CRONJOB = {"metadata": {"name": "c"}, "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": {"spec": {
    "restartPolicy": "Never", "containers": [{"name": "a", "image": "x"}]}}}}}}


async def _cells(s: aiohttp.ClientSession, url: str) -> dict:
    async with s.get(url, headers=TABLE) as r:
        table = await r.json()
    return dict(zip((c["name"] for c in table["columnDefinitions"]), table["rows"][0]["cells"]))


async def test_last_schedule_and_event_times_far_in_the_past_print_292y_and_the_zero_time_unknown():
    server = APIServer(MemoryStore(), None, port=0)
    await server.start()
    base = f"http://127.0.0.1:{server.port}"
    cronjobs = f"{base}/apis/batch/v1/namespaces/default/cronjobs"
    try:
        async with aiohttp.ClientSession() as s:
            async with s.post(cronjobs, json=CRONJOB) as r:
                cj = await r.json()
            shown = {}
            for t in ("0000-01-01T00:00:00Z", "1700-01-01T00:00:00Z", "0001-01-01T00:00:00Z"):
                cj["status"] = {"lastScheduleTime": t}
                async with s.put(f"{cronjobs}/c/status", json=cj) as r:
                    assert r.status == 200
                    cj = await r.json()
                shown[t[:4]] = (await _cells(s, cronjobs))["Last Schedule"]
            event = {"metadata": {"name": "e"}, "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
                     "reason": "R", "message": "m", "type": "Normal", "count": 1,
                     "firstTimestamp": "0001-01-01T00:00:00Z", "lastTimestamp": "0000-06-01T00:00:00Z"}
            async with s.post(f"{base}/api/v1/namespaces/default/events", json=event) as r:
                assert r.status == 201
            ev = await _cells(s, f"{base}/api/v1/namespaces/default/events")
        assert shown == {"0000": "292y", "1700": "292y", "0001": "<unknown>"}
        assert (ev["Last Seen"], ev["First Seen"]) == ("292y", "<unknown>")
    finally:
        await server.stop()
