"""dropDisabledPodFields for the pod fields of alpha features, off by default in 1.37, that a
create keeps none of: the API has them, so they decode, but a server whose gate is off drops them
before validation (upstream keeps one an existing pod already uses; a pod's spec cannot gain them
by update either). nanokube implements none of these features, so they are always off.

- spec.evictionResponders: EvictionRequestAPI (lifecycle.k8s.io/v1alpha1, not served);
- a volume's emptyDir.mode: EmptyDirVolumeMode;
- the owner UIDs of atomic-writer volumes' files (configMap, secret, downwardAPI and projected
  defaultUser; an item's and a projected token's, trust bundle's or pod certificate's user):
  AtomicWriteVolumeUserFields;
- a volume mount's bindMountOptions: VolumeBindMountOptions;
- an httpGet action's protocol (a probe's or a lifecycle hook's): HTTPProbeProtocol (KEP-5999);
- a grpc probe's mode: GRPCContainerProbeTLS (KEP-4939);
- a container's lifecycle.stopSignal: ContainerStopSignals (KEP-4960, alpha since 1.33, beta in 1.38)."""

from __future__ import annotations

_ATOMIC_WRITERS = ("configMap", "secret", "downwardAPI", "projected")
_PROJECTED_USERS = ("serviceAccountToken", "clusterTrustBundle", "podCertificate")
_CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")
_PROBES = ("livenessProbe", "readinessProbe", "startupProbe")


def drop_disabled_pod_fields(spec: dict) -> None:
    """Drop, in place, what a create keeps none of while the features above are off."""
    spec.pop("evictionResponders", None)
    for volume in spec.get("volumes") or ():
        if type(empty := volume.get("emptyDir")) is dict:
            empty.pop("mode", None)
        for kind in _ATOMIC_WRITERS:
            if type(source := volume.get(kind)) is dict:
                _drop_users(source)
    for key in _CONTAINER_LISTS:
        for c in spec.get(key) or ():
            for mount in c.get("volumeMounts") or ():
                if type(mount) is dict:
                    mount.pop("bindMountOptions", None)
            if type(lifecycle := c.get("lifecycle")) is dict:
                lifecycle.pop("stopSignal", None)
            handlers = [c.get(probe) for probe in _PROBES] + list((c.get("lifecycle") or {}).values())
            for handler in handlers:
                if type(handler) is dict:
                    for action, field in (("httpGet", "protocol"), ("grpc", "mode")):
                        if type(body := handler.get(action)) is dict:
                            body.pop(field, None)


def _drop_users(source: dict) -> None:
    source.pop("defaultUser", None)
    for item in source.get("items") or ():
        if type(item) is dict:
            item.pop("user", None)
    for projection in source.get("sources") or ():
        if type(projection) is not dict:
            continue
        for kind in ("configMap", "secret", "downwardAPI"):
            if type(inner := projection.get(kind)) is dict:
                _drop_users(inner)
        for kind in _PROJECTED_USERS:
            if type(inner := projection.get(kind)) is dict:
                inner.pop("user", None)
