"""ServiceAccount admission: every pod runs as a ServiceAccount that exists.

A pod created without `spec.serviceAccountName` gets `default`; a pod whose account does not exist
is refused (403). Unless the pod or its account sets `automountServiceAccountToken: false`, the pod
gets the projected volume `kube-api-access-<5 random>` (a bound token from the TokenRequest API,
kube-root-ca.crt's ca.crt and the namespace), mounted read-only at
/var/run/secrets/kubernetes.io/serviceaccount in every container and init container that mounts
nothing there, and the account's imagePullSecrets when it names none. An account annotated
`kubernetes.io/enforce-mountable-secrets: "true"` limits the Secrets its pods (and their
ephemeral containers) may reference to those it lists. Mirror pods are never changed and may
reference neither an account nor a Secret.

The account is read from the watch cache (upstream's informer); a miss is read again after a
consistent read of storage, and `default`, which the serviceaccount controller makes shortly
after its namespace, up to ten times 100-200 ms apart, as kube-apiserver does: a pod created
right after its namespace waits for the account instead of failing. The validating phase checks
the account the mutating phase read for the same request and name, without a second lookup.
"""

from __future__ import annotations

import random
import weakref

from ...machinery import errors
from .lookup import get, object_name

DEFAULT = "default"
MOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
VOLUME_PREFIX = "kube-api-access-"
ENFORCE_MOUNTABLE_SECRETS = "kubernetes.io/enforce-mountable-secrets"
MIRROR = "kubernetes.io/config.mirror"
#: serviceaccount.WarnOnlyBoundTokenExpirationSeconds: the token's lifetime the kubelet asks for
TOKEN_EXPIRATION = 3607
#: lookups of `default` while its controller may not have made it yet, and their spacing (s)
DEFAULT_ATTEMPTS = 10
RETRY_INTERVAL = (0.1, 0.2)
#: Go's strconv.ParseBool spellings of true
_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
#: volume sources naming a Secret by `secretRef.name` (podutil.VisitPodSecretNames)
_SECRET_REF_SOURCES = ("cephfs", "cinder", "flexVolume", "rbd", "scaleIO", "iscsi", "storageos")


def token_volume(name: str) -> dict:
    """The projected volume a pod reads its API credentials from (TokenVolumeSource)."""
    return {"name": name, "projected": {"sources": [
        {"serviceAccountToken": {"expirationSeconds": TOKEN_EXPIRATION, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1",
                                                                     "fieldPath": "metadata.namespace"}}]}},
    ], "defaultMode": 0o644}}


def _automount(sa: dict, spec: dict) -> bool:
    """The pod's choice, else the account's, else true."""
    if spec.get("automountServiceAccountToken") is not None:
        return bool(spec["automountServiceAccountToken"])
    if sa.get("automountServiceAccountToken") is not None:
        return bool(sa["automountServiceAccountToken"])
    return True


def _mount_token(spec: dict, suffix) -> None:
    """Mount the token volume (an existing kube-api-access-* one, else a new one named with
    `suffix`, the server's generateName suffixes) in every container and init container not already
    mounting something at MOUNT_PATH."""
    volumes = spec.get("volumes") or []
    existing = next((v["name"] for v in volumes if str(v.get("name", "")).startswith(VOLUME_PREFIX)), None)
    name = existing or VOLUME_PREFIX + suffix(VOLUME_PREFIX)
    needed = False
    for kind in ("initContainers", "containers"):
        for c in spec.get(kind) or []:
            mounts = c.get("volumeMounts") or []
            if any(m.get("mountPath") == MOUNT_PATH for m in mounts):
                continue
            c["volumeMounts"] = [*mounts, {"name": name, "readOnly": True, "mountPath": MOUNT_PATH}]
            needed = True
    if existing is None and needed:
        spec["volumes"] = [*volumes, token_volume(name)]


def _env_secret_refs(containers: list[dict], what: str, sa_name: str, allowed: set[str]) -> str | None:
    for c in containers:
        for env in c.get("env") or []:
            ref = (env.get("valueFrom") or {}).get("secretKeyRef")
            if ref is not None and ref.get("name", "") not in allowed:
                return (f'{what} {c.get("name", "")} with envVar {env.get("name", "")} referencing '
                        f'secret.secretName="{ref.get("name", "")}" is not allowed because service account '
                        f"{sa_name} does not reference that secret")
        for src in c.get("envFrom") or []:
            ref = src.get("secretRef")
            if ref is not None and ref.get("name", "") not in allowed:
                return (f'{what} {c.get("name", "")} with envFrom referencing secret.secretName="{ref.get("name", "")}" '
                        f"is not allowed because service account {sa_name} does not reference that secret")
    return None


def _unlisted_secret(sa: dict, spec: dict) -> str | None:
    """Why the pod may not be created under an account that enforces its mountable secrets."""
    sa_name = sa["metadata"]["name"]
    allowed = {s.get("name", "") for s in sa.get("secrets") or []}
    for v in spec.get("volumes") or []:
        if v.get("secret") is not None and v["secret"].get("secretName", "") not in allowed:
            return (f'volume with secret.secretName="{v["secret"].get("secretName", "")}" is not allowed because '
                    f"service account {sa_name} does not reference that secret")
    why = (_env_secret_refs(spec.get("initContainers") or [], "init container", sa_name, allowed)
           or _env_secret_refs(spec.get("containers") or [], "container", sa_name, allowed))
    if why:
        return why
    pulls = {s.get("name", "") for s in sa.get("imagePullSecrets") or []}
    for i, ref in enumerate(spec.get("imagePullSecrets") or []):
        if ref.get("name", "") not in pulls:
            return (f'imagePullSecrets[{i}].name="{ref.get("name", "")}" is not allowed because service account '
                    f"{sa_name} does not reference that imagePullSecret")
    return None


def _references_secrets(spec: dict) -> bool:
    """Whether a pod names any Secret (podutil.VisitPodSecretNames over all its containers)."""
    if spec.get("imagePullSecrets"):
        return True
    for kind in ("initContainers", "containers", "ephemeralContainers"):
        for c in spec.get(kind) or []:
            if any((src.get("secretRef") or {}).get("name") for src in c.get("envFrom") or []):
                return True
            if any(((env.get("valueFrom") or {}).get("secretKeyRef") or {}).get("name") for env in c.get("env") or []):
                return True
    for v in spec.get("volumes") or []:
        if (v.get("secret") or {}).get("secretName") or (v.get("azureFile") or {}).get("secretName"):
            return True
        if any((v.get(k) or {}).get("secretRef") for k in _SECRET_REF_SOURCES):
            return True
        if ((v.get("csi") or {}).get("nodePublishSecretRef") or {}).get("name"):
            return True
        if any((s.get("secret") or {}).get("name") for s in (v.get("projected") or {}).get("sources") or []):
            return True
    return False


class ServiceAccount:
    """The ServiceAccount admission plugin (mutating on pod CREATE, validating on CREATE and on
    updates through pods/ephemeralcontainers)."""

    name = "ServiceAccount"

    def __init__(self, rest) -> None:
        self.rest = rest
        #: the last account read: (its request's attributes, weakly; namespace; name; the account)
        self._read: tuple[weakref.ref, str, str, dict] | None = None

    @staticmethod
    def applies(a) -> bool:
        return a.res.group == "" and a.res.plural == "pods" and a.obj is not None \
            and a.subresource in ("", "ephemeralcontainers")

    def _refuse(self, a, why: str) -> errors.APIError:
        return errors.forbidden(a.res.group, a.res.plural, object_name(a), why)

    async def _account(self, a, name: str) -> dict:
        """The account from the cache, else after a consistent read (several, for `default`); once
        per request (`a`) and name."""
        read = self._read
        if read is not None and read[0]() is a and read[1] == a.namespace and read[2] == name:
            return read[3]
        sa = get(self.rest, "", "serviceaccounts", a.namespace, name)
        if sa is None:
            sa = await self._account_after_sync(a, name)
        self._read = (weakref.ref(a), a.namespace, name, sa)
        return sa

    async def _account_after_sync(self, a, name: str) -> dict:
        interval = random.uniform(*RETRY_INTERVAL)
        for attempt in range(DEFAULT_ATTEMPTS if name == DEFAULT else 1):
            if attempt:
                await self.rest.clock.sleep(interval)
            await self.rest.cache.sync()
            sa = get(self.rest, "", "serviceaccounts", a.namespace, name)
            if sa is not None:
                return sa
        raise self._refuse(a, f'error looking up service account {a.namespace}/{name}: serviceaccount "{name}" not found')

    async def admit(self, a) -> None:
        if not self.applies(a) or a.operation != "CREATE" or a.subresource:
            return
        md, spec = a.obj.setdefault("metadata", {}), a.obj.setdefault("spec", {})
        sa = None
        if MIRROR not in (md.get("annotations") or {}):
            if not spec.get("serviceAccountName"):
                spec["serviceAccountName"] = DEFAULT
            spec["serviceAccount"] = spec["serviceAccountName"]
            sa = await self._account(a, spec["serviceAccountName"])
            if _automount(sa, spec):
                _mount_token(spec, self.rest.name_suffix)
            if not spec.get("imagePullSecrets") and sa.get("imagePullSecrets"):
                spec["imagePullSecrets"] = [{"name": s.get("name", "")} for s in sa["imagePullSecrets"]]
        await self.validate(a)

    async def validate(self, a) -> None:
        """Run at the end of admit, as upstream's Admit does, and again in the validating phase (a
        webhook may have named another account meanwhile)."""
        if not self.applies(a):
            return
        spec = a.obj.get("spec") or {}
        if a.operation == "UPDATE" and a.subresource == "ephemeralcontainers":
            await self._ephemeral_secrets(a, spec)
            return
        if a.operation != "CREATE" or a.subresource:
            return
        if MIRROR in ((a.obj.get("metadata") or {}).get("annotations") or {}):
            self._mirror(a, spec)
            return
        name = spec.get("serviceAccountName")
        if not name:
            raise self._refuse(a, f"no service account specified for pod {a.namespace}/{a.obj['metadata'].get('name', '')}")
        sa = await self._account(a, name)
        if self._enforces(sa):
            why = _unlisted_secret(sa, spec)
            if why:
                raise self._refuse(a, why)

    @staticmethod
    def _enforces(sa: dict) -> bool:
        return ((sa.get("metadata") or {}).get("annotations") or {}).get(ENFORCE_MOUNTABLE_SECRETS) in _TRUE

    def _mirror(self, a, spec: dict) -> None:
        if spec.get("serviceAccountName"):
            raise self._refuse(a, "a mirror pod may not reference service accounts")
        if _references_secrets(spec):
            raise self._refuse(a, "a mirror pod may not reference secrets")
        for v in spec.get("volumes") or []:
            if any("serviceAccountToken" in s for s in (v.get("projected") or {}).get("sources") or []):
                raise self._refuse(a, "a mirror pod may not use ServiceAccountToken volume projections")

    async def _ephemeral_secrets(self, a, spec: dict) -> None:
        name = spec.get("serviceAccountName")
        if not name:
            raise self._refuse(a, f"no service account specified for pod {a.namespace}/{a.obj['metadata'].get('name', '')}")
        sa = await self._account(a, name)
        if not self._enforces(sa):
            return
        allowed = {s.get("name", "") for s in sa.get("secrets") or []}
        why = _env_secret_refs(spec.get("ephemeralContainers") or [], "ephemeral container", name, allowed)
        if why:
            raise self._refuse(a, why)
