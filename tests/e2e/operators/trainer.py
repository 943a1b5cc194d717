"""A kopf operator as its author would deploy it beside other replicas: peering through a
KopfPeering object, its progress kept in annotations of its own prefix, a status patch on
create, an update handler on one field that posts an Event, and a deletion handler."""

import kopf
import kubernetes

GROUP, VERSION, PLURAL = "ops.example.com", "v1", "trainers"


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_):
    settings.posting.level = 0
    settings.peering.name = "trainers"
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix=GROUP)
    kubernetes.config.load_kube_config()


@kopf.on.create(GROUP, VERSION, PLURAL)
def created(spec, name, body, patch, **_):
    kopf.info(body, reason="Created", message=f"trainer {name} with {spec.get('replicas')} replicas")
    patch.status["ready"] = True
    patch.status["replicas"] = spec.get("replicas", 0)
    patch.status["selector"] = f"trainer={name}"


@kopf.on.update(GROUP, VERSION, PLURAL, field="spec.replicas")
def rescaled(old, new, body, patch, **_):
    kopf.event(body, type="Normal", reason="Rescaled", message=f"{old} -> {new}")
    patch.status["replicas"] = new


@kopf.on.delete(GROUP, VERSION, PLURAL)
def deleted(name, namespace, **_):
    kubernetes.client.CoreV1Api().create_namespaced_config_map(namespace, {"metadata": {"name": f"{name}-gone"}})
