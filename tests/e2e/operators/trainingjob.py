"""A kopf operator, written as for any Kubernetes cluster: a TrainingJob gets one pod per
worker (owned by it), its status says how many were created, and its deletion handler
(which makes kopf hold its finalizer) records that it ran in a ConfigMap."""

import kopf
import kubernetes

GROUP, VERSION, PLURAL = "ml.example.com", "v1", "trainingjobs"


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_):
    settings.posting.enabled = True
    kubernetes.config.load_kube_config()


@kopf.on.create(GROUP, VERSION, PLURAL)
def create_workers(spec, name, namespace, body, patch, **_):
    core = kubernetes.client.CoreV1Api()
    pods = []
    for i in range(spec.get("workers", 1)):
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": f"{name}-worker-{i}", "labels": {"trainingjob": name}},
               "spec": {"containers": [{"name": "trainer", "image": spec.get("image", "pytorch")}]}}
        kopf.adopt(pod, owner=body)
        core.create_namespaced_pod(namespace, pod)
        pods.append(pod["metadata"]["name"])
    patch.status["phase"] = "Running"
    return {"pods": pods}


@kopf.on.delete(GROUP, VERSION, PLURAL)
def cleanup(name, namespace, **_):
    core = kubernetes.client.CoreV1Api()
    core.create_namespaced_config_map(namespace, {"metadata": {"name": f"{name}-cleaned-up"}, "data": {"by": "kopf"}})
