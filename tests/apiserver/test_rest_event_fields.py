"""An Event's value fields as the field manager reads them over HTTP: upstream tracks the decoded
Go struct, where a value field (not a pointer) sent empty, as client-go sends reportingInstance and
action, or null reads as unset, so a create owns none of them (kube-controller-manager's Events own
f:reportingComponent but not f:reportingInstance); and an Event's top-level fields as kube-apiserver
serves them at each API, Go's encoding of its type."""

from __future__ import annotations

from tests.apiserver.test_rest_managedfields import CORE_EVENTS, EVENTS, call, entries, event
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


async def test_events_are_served_as_go_encodes_them_at_both_versions(tmp_path):
    """core/v1 always encodes reportingComponent, reportingInstance, source and the timestamps (no
    omitempty, or a struct) and leaves out unset omitempty fields; events.k8s.io/v1 always encodes
    eventTime, regarding and the deprecated struct fields, and leaves out an empty reportingController."""
    async with served(tmp_path) as (_, api_client):
        await call(api_client, "POST", EVENTS, event("new", "hello"))
        old = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "old"}, "type": "Normal",
               "involvedObject": {"kind": "Pod", "namespace": "default", "name": "p"}, "reason": "R", "message": "m",
               "action": "", "count": 0}
        await call(api_client, "POST", CORE_EVENTS, old)

        def top(obj: dict) -> dict:
            return {k: v for k, v in obj.items() if k not in ("metadata", "apiVersion", "kind")}

        core_new = top(await call(api_client, "GET", f"{CORE_EVENTS}/new"))
        assert core_new == {
            "involvedObject": {"kind": "Deployment", "namespace": "default", "name": "web"}, "reason": "Scaled",
            "message": "hello", "source": {}, "firstTimestamp": None, "lastTimestamp": None, "type": "Normal",
            "eventTime": "2026-01-01T00:00:00.000000Z", "action": "Scale", "reportingComponent": "example.com/ctl",
            "reportingInstance": "ctl-1"}
        core_old = top(await call(api_client, "GET", f"{CORE_EVENTS}/old"))
        assert core_old == {
            "involvedObject": {"kind": "Pod", "namespace": "default", "name": "p"}, "reason": "R", "message": "m",
            "source": {}, "firstTimestamp": None, "lastTimestamp": None, "type": "Normal", "eventTime": None,
            "reportingComponent": "", "reportingInstance": ""}
        events_old = top(await call(api_client, "GET", f"{EVENTS}/old"))
        assert events_old == {
            "eventTime": None, "reason": "R", "regarding": {"kind": "Pod", "namespace": "default", "name": "p"},
            "note": "m", "type": "Normal", "deprecatedSource": {}, "deprecatedFirstTimestamp": None,
            "deprecatedLastTimestamp": None}
        # what a client read and sends back unchanged is no change
        new = await call(api_client, "GET", f"{EVENTS}/new")
        again = await call(api_client, "PUT", f"{EVENTS}/new", new)
        assert again["metadata"]["resourceVersion"] == new["metadata"]["resourceVersion"]


async def test_patches_through_events_k8s_io_are_tracked_at_that_version(tmp_path):
    """A patch at events.k8s.io/v1 (stored as core/v1) is tracked on the live and patched objects at
    the request's version, as upstream's patcher hands its field manager: the series refresh an events
    recorder sends owns series alone, and fields the writer sent unchanged stay their first owner's."""
    async with served(tmp_path) as (_, api_client):
        created = await call(api_client, "POST", EVENTS, event("web.1", "scaled"), "recorder")
        first = entries(created)["recorder"]
        series = {"series": {"count": 2, "lastObservedTime": "2026-01-01T00:30:00.000000Z"}}
        refreshed = await call(api_client, "PATCH", f"{EVENTS}/web.1", series, "refresher",
                               "application/strategic-merge-patch+json")
        owners = entries(refreshed)
        assert owners["refresher"] == ("Update", "events.k8s.io/v1",
                                       {"f:series": {".": {}, "f:count": {}, "f:lastObservedTime": {}}})
        assert owners["recorder"] == first
        assert refreshed["series"] == series["series"] and refreshed["note"] == "scaled"
        # a JSON patch of the count, and a merge patch sending the note it has: the count changes hands,
        # the note does not
        counted = await call(api_client, "PATCH", f"{EVENTS}/web.1",
                             [{"op": "replace", "path": "/series/count", "value": 3}], "counter",
                             "application/json-patch+json")
        assert entries(counted)["counter"] == ("Update", "events.k8s.io/v1", {"f:series": {"f:count": {}}})
        assert entries(counted)["refresher"][2] == {"f:series": {".": {}, "f:lastObservedTime": {}}}
        same = await call(api_client, "PATCH", f"{EVENTS}/web.1", {"note": "scaled", "series": {"count": 4}}, "merger",
                          "application/merge-patch+json")
        assert entries(same)["merger"] == ("Update", "events.k8s.io/v1", {"f:series": {"f:count": {}}})
        assert entries(same)["recorder"] == first
        # the core/v1 view holds the same entries, each in the version it was written at
        core = await call(api_client, "GET", f"{CORE_EVENTS}/web.1")
        assert core["metadata"]["managedFields"] == same["metadata"]["managedFields"]
        assert core["series"]["count"] == 4
