"""core/v1 Binding as a resource of its own: `POST
/api/v1/namespaces/{ns}/bindings` with the pod's name in `metadata.name`
binds it like `pods/{name}/binding` (older schedulers use this form)."""

from __future__ import annotations

from .base import Resource, Strategy, register


class BindingStrategy(Strategy):
    track_generation = False


register(Resource("", "bindings", "Binding", ["v1"], namespaced=True, strategy=BindingStrategy(), verbs=("create",)))
