"""core/v1 ComponentStatus (deprecated since 1.19, still served): a read-only
list of the control plane's health, `kubectl get componentstatuses`. The API
server keeps the objects (apiserver/componentstatus.py); clients may only get
and list them."""

from __future__ import annotations

from .base import Column, Obj, Resource, Strategy, register


def _healthy(o: Obj) -> dict:
    return next((c for c in o.get("conditions") or [] if c.get("type") == "Healthy"), {})


class ComponentStatusStrategy(Strategy):
    track_generation = False
    columns = [
        Column("Name", "string", lambda o: o["metadata"]["name"], format="name"),
        Column("Status", "string", lambda o: "Healthy" if _healthy(o).get("status") == "True" else "Unhealthy",
               "Status of the component conditions"),
        Column("Message", "string", lambda o: _healthy(o).get("message", ""), "Message of the component conditions"),
        Column("Error", "string", lambda o: _healthy(o).get("error", ""), "Error of the component conditions"),
    ]

    def deprecation(self, version):
        return "v1 ComponentStatus is deprecated in v1.19+"


register(Resource("", "componentstatuses", "ComponentStatus", ["v1"], namespaced=False, short_names=("cs",),
                  strategy=ComponentStatusStrategy(), verbs=("get", "list")))
