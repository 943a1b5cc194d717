"""An Event's value fields as the field manager reads them over HTTP: upstream tracks the decoded
Go struct, where a value field (not a pointer) sent empty, as client-go sends reportingInstance and
action, or null reads as unset, so a create owns none of them (kube-controller-manager's Events own
f:reportingComponent but not f:reportingInstance)."""

from __future__ import annotations

from tests.apiserver.test_rest_managedfields import CORE_EVENTS, call, entries
from tests.served import served


async def test_empty_value_fields_of_an_event_are_nobodys(tmp_path):
    async with served(tmp_path) as (_, api_client):
        ev = {"kind": "Event", "apiVersion": "v1", "metadata": {"name": "x", "creationTimestamp": None},
              "involvedObject": {"kind": "Pod", "namespace": "default", "name": "p"}, "reason": "R", "message": "m",
              "source": {"component": "ctl"}, "firstTimestamp": "2026-01-01T00:00:00Z",
              "lastTimestamp": "2026-01-01T00:00:00Z", "count": 1, "type": "Normal", "eventTime": None, "series": None,
              "action": "", "related": None, "reportingComponent": "ctl", "reportingInstance": ""}
        created = await call(api_client, "POST", CORE_EVENTS, ev, "ctl")
        assert entries(created)["ctl"][2] == {
            "f:count": {}, "f:firstTimestamp": {}, "f:involvedObject": {}, "f:lastTimestamp": {}, "f:message": {},
            "f:reason": {}, "f:reportingComponent": {}, "f:source": {"f:component": {}}, "f:type": {}}
        # a later write that sets one owns it
        changed = await call(api_client, "PUT", f"{CORE_EVENTS}/x", {**created, "reportingInstance": "host-1"}, "ctl2")
        assert entries(changed)["ctl2"][2] == {"f:reportingInstance": {}}
