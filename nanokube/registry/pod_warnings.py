"""Upstream's warnings for pods and pod templates (pkg/api/pod/warnings.go), the node labels and
node selector terms they share (pkg/api/node/util.go), a PVC spec's (pkg/api/persistentvolumeclaim)
and a Job spec's (pkg/api/job/warnings.go); texts as upstream's.

A path prefix is "" for a pod and "spec.template." (etc.) for a template. Objects are the stored
v1 JSON; paths name upstream's internal fields ("storageOS" where v1 says "storageos").
The checks read only what a pod has: one with nothing to warn about costs a few dict lookups.
"""

from __future__ import annotations

import functools
from typing import Any

from ..machinery import gofmt
from ..machinery.quantity import QuantityError, parse
from ..machinery.validation import dns1123_label, label_value, remembers_clean
from .pod_spec_key import spec_key

DEPRECATED_NODE_LABELS = {
    "beta.kubernetes.io/arch": 'deprecated since v1.14; use "kubernetes.io/arch" instead',
    "beta.kubernetes.io/os": 'deprecated since v1.14; use "kubernetes.io/os" instead',
    "failure-domain.beta.kubernetes.io/region": 'deprecated since v1.17; use "topology.kubernetes.io/region" instead',
    "failure-domain.beta.kubernetes.io/zone": 'deprecated since v1.17; use "topology.kubernetes.io/zone" instead',
    "beta.kubernetes.io/instance-type": 'deprecated since v1.17; use "node.kubernetes.io/instance-type" instead',
    "app.kubernetes.io/created-by": "deprecated since v1.9",
    "scheduler.alpha.kubernetes.io/preferAvoidPods": "deprecated since v1.22; use Taints and Tolerations instead",
    "node-role.kubernetes.io/master": 'use "node-role.kubernetes.io/control-plane" instead',
}

_DEPRECATED_ANNOTATIONS = (
    ("scheduler.alpha.kubernetes.io/critical-pod", 'non-functional in v1.16+; use the "priorityClassName" field instead'),
    ("security.alpha.kubernetes.io/sysctls", 'non-functional in v1.11+; use the "sysctls" field instead'),
    ("security.alpha.kubernetes.io/unsafe-sysctls", 'non-functional in v1.11+; use the "sysctls" field instead'),
)

#: (v1 key, upstream's field name, message) of the deprecated and removed volume plugins, in upstream's order
_VOLUME_PLUGINS = (
    ("photonPersistentDisk", "photonPersistentDisk", "deprecated in v1.11, non-functional in v1.16+"),
    ("gitRepo", "gitRepo", "deprecated in v1.11"),
    ("scaleIO", "scaleIO", "deprecated in v1.16, non-functional in v1.22+"),
    ("flocker", "flocker", "deprecated in v1.22, non-functional in v1.25+"),
    ("storageos", "storageOS", "deprecated in v1.22, non-functional in v1.25+"),
    ("quobyte", "quobyte", "deprecated in v1.22, non-functional in v1.25+"),
    ("glusterfs", "glusterfs", "deprecated in v1.25, non-functional in v1.26+"),
    ("ephemeral", "", ""),
    ("cephfs", "cephfs", "deprecated in v1.28, non-functional in v1.31+"),
    ("rbd", "rbd", "deprecated in v1.28, non-functional in v1.31+"),
)
#: each of them by its v1 key: (its place among them, its field name, the message)
_PLUGIN_ORDER = {key: (i, name, msg) for i, (key, name, msg) in enumerate(_VOLUME_PLUGINS)}
_SECCOMP_POD = "seccomp.security.alpha.kubernetes.io/pod"
_SECCOMP_CONTAINER = "container.seccomp.security.alpha.kubernetes.io/"
_APPARMOR_CONTAINER = "container.apparmor.security.beta.kubernetes.io/"
_SECCOMP_MSG = 'non-functional in v1.27+; use the "seccompProfile" field instead'
_NULL_SELECTOR = "a null labelSelector results in matching no pod"
_COMPLETIONS_SOFT_LIMIT = 100_000
_PARALLELISM_SOFT_LIMIT = 10_000
POD_NAME_MSG = ("metadata.name: this is used in Pod names and hostnames, which can result in surprising behavior; "
                "a DNS label is recommended: ")


def go_quote(s: Any) -> str:
    """Go's %q of a string."""
    return gofmt.quote(s if isinstance(s, str) else str(s))


def go_list(msgs: list[str]) -> str:
    """Go's %v of a []string."""
    return "[" + " ".join(msgs) + "]"


def name_warnings(name: Any, msg: str = POD_NAME_MSG) -> list[str]:
    """A name that is not a DNS label (pods' names and hostnames come from it). The callers' kinds
    validate their names as DNS subdomains: one without a dot, of 63 characters at most, is a label
    (IsDNS1123Label runs for the others only; a pod's new name each time would cost ~5 k instructions)."""
    if not isinstance(name, str) or ("." not in name and len(name) <= 63):
        return []
    msgs = dns1123_label(name)
    return [msg + go_list(msgs)] if msgs else []


@functools.lru_cache(maxsize=1024)
def _fractional(text: str) -> str | None:
    """The canonical form of a quantity that is not a whole number of bytes (MilliValue() % 1000)."""
    try:
        q = parse(text)
    except QuantityError:
        return None
    return str(q) if q.milli() % 1000 else None


def fractional_bytes(values: Any, keys: tuple[str, ...], path: str) -> list[str]:
    """'fractional byte value' warnings of `values`' `keys` (memory, ephemeral-storage, storage)."""
    out = []
    if isinstance(values, dict):
        for k in keys:
            v = values.get(k)
            if isinstance(v, (str, int, float)) and (canon := _fractional(str(v))):
                out.append(f"{path}[{k}]: fractional byte value {go_quote(canon)} is invalid, must be an integer")
    return out


def pvc_spec_warnings(path: str, spec: Any) -> list[str]:
    """GetWarningsForPersistentVolumeClaimSpec."""
    res = (spec or {}).get("resources") if isinstance(spec, dict) else None
    if not isinstance(res, dict):
        return []
    return (fractional_bytes(res.get("requests"), ("storage",), f"{path}.resources.requests")
            + fractional_bytes(res.get("limits"), ("storage",), f"{path}.resources.limits"))


def node_selector_term_warnings(term: Any, path: str, check_label_value: bool = False) -> list[str]:
    """GetWarningsForNodeSelectorTerm: deprecated node labels in matchExpressions' keys (and, for a
    PersistentVolume's, values that no node label can have)."""
    out = []
    for i, e in enumerate((term or {}).get("matchExpressions") or [] if isinstance(term, dict) else []):
        if not isinstance(e, dict):
            continue
        key = e.get("key")
        if (msg := DEPRECATED_NODE_LABELS.get(key)) is not None:
            out.append(f"{path}.matchExpressions[{i}].key: {key} is {msg}")
        if check_label_value:
            for j, v in enumerate(e.get("values") or []):
                for m in label_value(v) if isinstance(v, str) else []:
                    out.append(f"{path}.matchExpressions[{i}].values[{j}]: {v} is invalid, {m}")
    return out


def label_selector_warnings(selector: Any, path: str) -> list[str]:
    """GetWarningsForNodeSelector (a metav1.LabelSelector of node labels)."""
    if not isinstance(selector, dict):
        return []
    out = []
    for i, e in enumerate(selector.get("matchExpressions") or []):
        key = e.get("key") if isinstance(e, dict) else None
        if (msg := DEPRECATED_NODE_LABELS.get(key)) is not None:
            out.append(f"{path}.matchExpressions[{i}].key: {key} is {msg}")
    for label in selector.get("matchLabels") or {}:
        if (msg := DEPRECATED_NODE_LABELS.get(label)) is not None:
            out.append(f"{path}.matchLabels.{label}: {msg}")
    return out


def pod_warnings(pod: dict) -> list[str]:
    """A pod's create (GetWarningsForPod, after its name's); upstream gives none on update."""
    meta = pod.get("metadata") or _NONE
    out = name_warnings(meta.get("name"), "metadata.name: this is used in the Pod's hostname, which can result in "
                        "surprising behavior; a DNS label is recommended: ")
    return out + spec_warnings("", pod.get("spec") or _NONE, meta, False)


def template_warnings(template: Any, path: str) -> list[str]:
    """GetWarningsForPodTemplate at `path` (e.g. "spec.template")."""
    if not isinstance(template, dict):
        return []
    return spec_warnings(path + ".", template.get("spec") or {}, template.get("metadata") or {}, True)


def job_spec_warnings(spec: Any, path: str) -> list[str]:
    """WarningsForJobSpec: an Indexed Job too big to track its failed indexes, then its template's."""
    if not isinstance(spec, dict):
        return []
    out = []
    if spec.get("completionMode") == "Indexed" and (spec.get("completions") or 0) > _COMPLETIONS_SOFT_LIMIT \
            and (spec.get("parallelism") or 0) > _PARALLELISM_SOFT_LIMIT:
        out.append(f"{path}: In Indexed Jobs with a number of completions higher than 10^5 and a parallelism higher "
                   "than 10^4, Kubernetes might not be able to track completedIndexes when a big number of indexes fail")
    return out + template_warnings(spec.get("template"), path + ".template")


_KINDS = ("initContainers", "containers", "ephemeralContainers")
#: the kinds a pod without init or ephemeral containers has
_PLAIN_KINDS = ("containers",)
#: the annotations warned about, by prefix: the deprecated ones, seccomp's and (containers') AppArmor's
_NOTABLE = ("scheduler.alpha.kubernetes.io/critical-pod", "security.alpha.kubernetes.io/", _SECCOMP_POD, "container.")


def spec_warnings(prefix: str, spec: dict, meta: dict, template: bool) -> list[str]:
    """warningsForPodSpecAndMeta, in its order. What few pods have is looked at only when its field
    (or an annotation of the forms warned about) is there, each told by a key's presence: a plain
    pod's cost is its containers'. The spec passed validation (its containers, env entries and
    ports are objects)."""
    annotations = meta.get("annotations") or _NONE
    if not isinstance(spec, dict) or not isinstance(annotations, dict):
        return []
    for k in annotations:
        if k.startswith(_NOTABLE):
            return _spec_warnings(prefix, spec, annotations, template, True)
    return _plain_spec_warnings(spec, prefix)


@remembers_clean(limit=1024, tries=256, key=spec_key)
def _plain_spec_warnings(spec: dict, prefix: str) -> list[str]:
    """The warnings of a spec whose pod has no annotation of the forms warned about: a function of
    the spec alone, remembered clean by its JSON (`spec_key`: its token volume's name aside), as the
    pods of one template send one spec."""
    return _spec_warnings(prefix, spec, _NONE, False, False)


def _spec_warnings(prefix: str, spec: dict, annotations: dict, template: bool, notable: bool) -> list[str]:
    out: list[str] = []
    if selector := spec.get("nodeSelector"):
        for k in selector:
            if k in DEPRECATED_NODE_LABELS:
                out.append(f"{prefix}spec.nodeSelector[{k}]: {DEPRECATED_NODE_LABELS[k]}")
    # the fields warned about ahead of the containers, and pod affinity after them: most pods have none
    rare = ("affinity" in spec or "volumes" in spec or "topologySpreadConstraints" in spec or "hostAliases" in spec
            or "imagePullSecrets" in spec or "overhead" in spec)
    if notable or rare:
        out += _early_warnings(prefix, spec, annotations)
    if notable:
        pod_apparmor = (spec.get("securityContext") or _NONE).get("appArmorProfile") is not None
    ports = None
    for kind in _KINDS if "initContainers" in spec or "ephemeralContainers" in spec else _PLAIN_KINDS:
        if not (containers := spec.get(kind)):
            continue
        for i, c in enumerate(containers):
            if notable:
                out += _annotation_warnings(c, prefix, annotations, template, pod_apparmor)
            if res := c.get("resources"):
                limits, requests = res.get("limits") or _NONE, res.get("requests") or _NONE
                if texts := _resource_texts(limits.get("memory"), requests.get("memory"),
                                            limits.get("ephemeral-storage"), requests.get("ephemeral-storage")):
                    where = _where((prefix, kind, i))
                    out += [where + t for t in texts]
            if (env := c.get("env")) and len(env) > 1:
                names = set()
                for e in env:
                    names.add(e.get("name", ""))
                if len(names) < len(env):
                    out += _env_warnings(env, (prefix, kind, i))
            if c_ports := c.get("ports"):
                if ports is None:
                    ports = []
                ports.append(((prefix, kind, i), c_ports))
    if ports is not None:
        out += _port_warnings(ports)
    grace = spec.get("terminationGracePeriodSeconds")
    if isinstance(grace, int) and grace < 0:
        out.append(f"{prefix}spec.terminationGracePeriodSeconds: must be >= 0; negative values are invalid and "
                   "will be treated as 1")
    if rare and (affinity := spec.get("affinity")):
        out += _pod_affinity_warnings(prefix, affinity)
    return out


def _early_warnings(prefix: str, spec: dict, annotations: dict) -> list[str]:
    """Node affinity, topology spread, deprecated annotations, volumes, host aliases, image pull
    secrets, overhead and the pod's seccomp annotation."""
    out = []
    affinity = spec.get("affinity") or {}
    if node_affinity := affinity.get("nodeAffinity"):
        base = f"{prefix}spec.affinity.nodeAffinity."
        required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
        for i, term in enumerate((required or {}).get("nodeSelectorTerms") or ()):
            out += node_selector_term_warnings(
                term, f"{base}requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[{i}]")
        for i, pref in enumerate(node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or ()):
            out += node_selector_term_warnings(
                (pref or {}).get("preference"), f"{base}preferredDuringSchedulingIgnoredDuringExecution[{i}].preference")
    for i, t in enumerate(spec.get("topologySpreadConstraints") or ()):
        key = t.get("topologyKey")
        if (msg := DEPRECATED_NODE_LABELS.get(key)) is not None:
            out.append(f"{prefix}spec.topologySpreadConstraints[{i}].topologyKey: {key} is {msg}")
        if t.get("labelSelector") is None:
            out.append(f"{prefix}spec.topologySpreadConstraints[{i}].labelSelector: {_NULL_SELECTOR}")
    for key, msg in _DEPRECATED_ANNOTATIONS:
        if key in annotations:
            out.append(f"{prefix}metadata.annotations[{key}]: {msg}")
    volumes = spec.get("volumes") or ()
    for i, v in enumerate(volumes):
        plugins = [key for key in v if key in _PLUGIN_ORDER and v[key] is not None]
        if len(plugins) > 1:
            plugins.sort(key=_PLUGIN_ORDER.__getitem__)
        for key in plugins:
            name, msg = _PLUGIN_ORDER[key][1:]
            if name:
                out.append(f"{prefix}spec.volumes[{i}].{name}: {msg}")
            elif (claim := v[key].get("volumeClaimTemplate")) is not None:
                out += pvc_spec_warnings(f"{prefix}spec.volumes[{i}].ephemeral.volumeClaimTemplate.spec",
                                         claim.get("spec") or {})
    if volumes:
        out += _overlapping_paths(volumes)
    out += _duplicates(spec.get("hostAliases"), "ip", f"{prefix}spec.hostAliases", "duplicate ip")
    pull = spec.get("imagePullSecrets") or ()
    out += _duplicates(pull, "name", f"{prefix}spec.imagePullSecrets", "duplicate name")
    for i, s in enumerate(pull):
        if not (s or {}).get("name"):
            out.append(f'{prefix}spec.imagePullSecrets[{i}].name: invalid empty name ""')
    if overhead := spec.get("overhead"):
        out += fractional_bytes(overhead, ("memory", "ephemeral-storage"), f"{prefix}spec.overhead")
    if _SECCOMP_POD in annotations and (spec.get("securityContext") or {}).get("seccompProfile") is None:
        out.append(f"{prefix}metadata.annotations[{_SECCOMP_POD}]: {_SECCOMP_MSG}")
    return out


def _pod_affinity_warnings(prefix: str, affinity: dict) -> list[str]:
    out = []
    for kind in ("podAffinity", "podAntiAffinity"):
        if terms := affinity.get(kind):
            base = f"{prefix}spec.affinity.{kind}."
            for i, t in enumerate(terms.get("requiredDuringSchedulingIgnoredDuringExecution") or ()):
                if (t or {}).get("labelSelector") is None:
                    out.append(f"{base}requiredDuringSchedulingIgnoredDuringExecution[{i}].labelSelector: {_NULL_SELECTOR}")
            for i, t in enumerate(terms.get("preferredDuringSchedulingIgnoredDuringExecution") or ()):
                if ((t or {}).get("podAffinityTerm") or {}).get("labelSelector") is None:
                    out.append(f"{base}preferredDuringSchedulingIgnoredDuringExecution[{i}].podAffinityTerm."
                               f"labelSelector: {_NULL_SELECTOR}")
    return out


def _duplicates(items: Any, key: str, path: str, what: str) -> list[str]:
    out = []
    if items and len(items) > 1:
        seen = set()
        for i, item in enumerate(items):
            v = (item or {}).get(key, "")
            if v in seen:
                out.append(f"{path}[{i}].{key}: {what} {go_quote(v)}")
            else:
                seen.add(v)
    return out


def _where(at: tuple) -> str:
    prefix, kind, i = at
    return f"{prefix}spec.{kind}[{i}]"


def _annotation_warnings(c: dict, prefix: str, annotations: dict, template: bool, pod_apparmor: bool) -> list[str]:
    """A container's seccomp annotation without its field; a template container's AppArmor one."""
    out = []
    name = c.get("name", "")
    sc = c.get("securityContext") or {}
    key = _SECCOMP_CONTAINER + name
    if key in annotations and sc.get("seccompProfile") is None:
        out.append(f"{prefix}metadata.annotations[{key}]: {_SECCOMP_MSG}")
    key = _APPARMOR_CONTAINER + name
    if template and key in annotations and not pod_apparmor and sc.get("appArmorProfile") is None:
        out.append(f'{prefix}metadata.annotations[{key}]: deprecated since v1.30; use the "appArmorProfile" '
                   "field instead")
    return out


_NONE: dict = {}


@functools.lru_cache(maxsize=1024)
def _resource_texts(memory_limit: Any, memory_request: Any, storage_limit: Any, storage_request: Any) -> tuple[str, ...]:
    """A container's fractional memory and ephemeral-storage, limits before requests (after its path)."""
    out = []
    for v, which, key in ((memory_limit, "limits", "memory"), (memory_request, "requests", "memory"),
                          (storage_limit, "limits", "ephemeral-storage"),
                          (storage_request, "requests", "ephemeral-storage")):
        if v is not None and (canon := _fractional(v if isinstance(v, str) else str(v))):
            out.append(f".resources.{which}[{key}]: fractional byte value {go_quote(canon)} is invalid, must be an integer")
    return tuple(out)


def _env_warnings(env: list, at: tuple) -> list[str]:
    """A repeated name that hides the previous value (not one that refers to it, "X=$(X)-more")."""
    out = []
    seen = set()
    for i, e in enumerate(env):
        n = (e or {}).get("name", "")
        if n not in seen:
            seen.add(n)
            continue
        ref, value = f"$({n})", e.get("value", "")
        if e.get("valueFrom") is not None or value == ref or ref not in value:
            out.append(f"{_where(at)}.env[{i}]: hides previous definition of {go_quote(n)}, which may be "
                       "dropped when using apply")
    return out


#: the most distinct warnings a response carries (upstream's recorder: TOTAL_RUNES of text, then as many
#: cut ones, each at least a rune): a pod's ports, which warn once per pair that collides (thousands of
#: containers on one port: millions), stop there, as nothing after them would be written
_MOST_WARNINGS = 2 * 4096 + 1


def _port_warnings(ports: list[tuple[tuple, list]]) -> list[str]:
    """A hostIP without a hostPort; a containerPort/protocol another port (of any container) has too,
    with the same, an unset or an ambiguous host side. `ports`: each container's (at, ports). Only
    a hostIP or a containerPort seen twice can warn: most pods' ports are looked at once for those.
    At most _MOST_WARNINGS."""
    if not _may_warn(ports):
        return []
    out = []
    seen: dict[tuple, list] = {}
    for at, c_ports in ports:
        for i, port in enumerate(c_ports):
            host_ip = port.get("hostIP", "")
            if host_ip and not port.get("hostPort"):
                out.append(f"{_where(at)}.ports[{i}]: hostIP set without hostPort: {{Name:{port.get('name', '')} "
                           f"HostPort:{port.get('hostPort', 0)} ContainerPort:{port.get('containerPort', 0)} "
                           f"Protocol:{port.get('protocol', '')} HostIP:{host_ip}}}")
            k = (port.get("containerPort", 0), port.get("protocol", ""))
            others = seen.get(k)
            if others is None:
                seen[k] = [(at, i, port)]
                continue
            host_port = port.get("hostPort", 0)
            for o_at, o_i, other in others:
                o_ip, o_port = other.get("hostIP", ""), other.get("hostPort", 0)
                if host_ip == o_ip and host_port == o_port:
                    what = "duplicate"
                elif not host_port or not o_port:
                    what = "overlapping"
                elif host_port == o_port and (not host_ip) != (not o_ip):
                    what = "dangerously ambiguous"
                else:
                    continue
                out.append(f"{_where(at)}.ports[{i}]: {what} port definition with {_where(o_at)}.ports[{o_i}]")
                if len(out) >= _MOST_WARNINGS:
                    return out
            others.append((at, i, port))
    return out


def _may_warn(ports: list[tuple[tuple, list]]) -> bool:
    """Whether a port has a hostIP or shares its containerPort with another: only those can warn."""
    numbers = set()
    count = 0
    for _, c_ports in ports:
        for port in c_ports:
            if "hostIP" in port:
                return True
            numbers.add(port.get("containerPort", 0))
        count += len(c_ports)
    return len(numbers) < count


def _paths(items: Any) -> list[str]:
    return [(it or {}).get("path", "") for it in items]


def _overlapping_paths(volumes: Any) -> list[str]:
    """warningsForOverlappingVirtualPaths: a configMap, secret, downwardAPI or projected volume
    whose items' paths are the same or one inside another (the kubelet fails to mount it)."""
    out = []
    for v in volumes:
        name = v.get("name", "")
        if (cm := v.get("configMap")) is not None and cm.get("items") is not None:
            out += _check_overlap(_paths(cm["items"]), (name, "ConfigMap", cm.get("name", "")))
        if (sec := v.get("secret")) is not None and sec.get("items") is not None:
            out += _check_overlap(_paths(sec["items"]), (name, "Secret", sec.get("secretName", "")))
        if (dapi := v.get("downwardAPI")) is not None and dapi.get("items") is not None:
            out += _check_overlap(_paths(dapi["items"]), (name, "DownwardAPI", None))
        if (projected := v.get("projected")) is not None:
            out += _projected_overlaps(projected, name)
    return out


@remembers_clean
def _projected_overlaps(projected: dict, name: str) -> list[str]:
    """Remembered clean by JSON: the ServiceAccount token volume every pod carries, named its own way."""
    out: list[str] = []
    source_paths: list[str] = []  # kept from one source to the next, as upstream's are
    source: tuple = (name, "Projected", None)
    all_paths: set[str] = set()
    for s in projected.get("sources") or ():
        if not s:
            out.append(f"volume {go_quote(name)} (Projected) has no sources provided")
            continue
        if (cm := s.get("configMap")) is not None and cm.get("items") is not None:
            source_paths = _paths(cm["items"])
            source = (name, "Projected ConfigMap", cm.get("name", ""))
        elif (sec := s.get("secret")) is not None and sec.get("items") is not None:
            source_paths = _paths(sec["items"])
            source = (name, "Projected Secret", sec.get("name", ""))
        elif (dapi := s.get("downwardAPI")) is not None and dapi.get("items") is not None:
            source_paths = _paths(dapi["items"])
            source = (name, "Projected DownwardAPI", None)
        elif (token := s.get("serviceAccountToken")) is not None:
            source_paths = [token.get("path", "")]
            source = (name, "Projected ServiceAccountToken", None)
        elif (ctb := s.get("clusterTrustBundle")) is not None:
            source_paths = [ctb.get("path", "")]
            which = ctb["name"] if ctb.get("name") is not None else ctb.get("signerName", "")
            source = (name, "Projected ClusterTrustBundle", which)
        if not source_paths:
            continue
        out += _check_overlap(source_paths, source)
        unique = set(source_paths)
        out += _check_overlap(sorted(list(unique) + list(all_paths)), source)
        all_paths |= unique
    return out


def _check_overlap(paths: list[str], source: tuple) -> list[str]:
    """checkVolumeMappingForOverlap; where several earlier paths collide, upstream names whichever its
    map yields first, here the earliest. `source` (volume name, what, its object's name or None)
    words the warning, built only when there is one: every pod's token volume passes through here."""
    out = []
    unique: dict[str, None] = {}
    for path in paths:
        normalized = path.rstrip("/")
        if collision := _overlap(unique, normalized):
            volume, what, named = source
            what = what if named is None else f"{what} {go_quote(named)}"
            out.append(f"volume {go_quote(volume)} ({what}): overlapping paths: {go_quote(normalized)} with {go_quote(collision)}")
        unique[normalized] = None
    return out


def _overlap(paths: dict[str, None], path: str) -> str:
    for item in paths:
        if item == "" or path == "":
            return ""
        if item == path or (item + "/").startswith(path) or (path + "/").startswith(item):
            return item
    return ""


def _template(obj: dict) -> Any:
    return (obj.get("spec") or {}).get("template")


def _generation_changed(new: dict, old: dict) -> bool:
    return (new.get("metadata") or {}).get("generation") != (old.get("metadata") or {}).get("generation")


def workload_create(obj: dict) -> list[str]:
    """A Deployment's, ReplicaSet's, DaemonSet's or ReplicationController's create: its name, its template."""
    return name_warnings((obj.get("metadata") or {}).get("name")) + template_warnings(_template(obj), "spec.template")


def workload_update(new: dict, old: dict) -> list[str]:
    """Their updates: the template's, when the generation moved."""
    return template_warnings(_template(new), "spec.template") if _generation_changed(new, old) else []


def rc_update(new: dict, old: dict) -> list[str]:
    """A ReplicationController's update: upstream hands GetWarningsForPodTemplate the old template
    as the new one, so the old template's warnings are given."""
    return template_warnings(_template(old), "spec.template") if _generation_changed(new, old) else []


def pod_template_create(obj: dict) -> list[str]:
    return template_warnings(obj.get("template"), "template")


def pod_template_update(new: dict, old: dict) -> list[str]:
    return template_warnings(new.get("template"), "template") if _generation_changed(new, old) else []


def _statefulset_rest(obj: dict, claim_path: str) -> list[str]:
    """A StatefulSet's claim templates (at upstream's paths: "spec.volumeClaimTemplates[i]" on
    create, "...[i].Spec" on update) and a negative revisionHistoryLimit."""
    spec = obj.get("spec") or {}
    out = []
    for i, pvc in enumerate(spec.get("volumeClaimTemplates") or ()):
        out += pvc_spec_warnings(f"spec.volumeClaimTemplates[{i}]{claim_path}", (pvc or {}).get("spec") or {})
    limit = spec.get("revisionHistoryLimit")
    if isinstance(limit, int) and limit < 0:
        out.append("spec.revisionHistoryLimit: a negative value retains all historical revisions; a value >= 0 "
                   "is recommended")
    return out


def statefulset_create(obj: dict) -> list[str]:
    return template_warnings(_template(obj), "spec.template") + _statefulset_rest(obj, "")


def statefulset_update(new: dict, old: dict) -> list[str]:
    return workload_update(new, old) + _statefulset_rest(new, ".Spec")


def job_create(obj: dict) -> list[str]:
    return name_warnings((obj.get("metadata") or {}).get("name")) + job_spec_warnings(obj.get("spec"), "spec")


def job_update(new: dict, old: dict) -> list[str]:
    return job_spec_warnings(new.get("spec"), "spec") if _generation_changed(new, old) else []


def _job_template_spec(obj: dict) -> Any:
    return ((obj.get("spec") or {}).get("jobTemplate") or {}).get("spec")


def cronjob_create(obj: dict) -> list[str]:
    return (name_warnings((obj.get("metadata") or {}).get("name"))
            + job_spec_warnings(_job_template_spec(obj), "spec.jobTemplate.spec"))


def cronjob_update(new: dict, old: dict) -> list[str]:
    """Upstream names the schedule "spec.spec.schedule" here."""
    out = job_spec_warnings(_job_template_spec(new), "spec.jobTemplate.spec") if _generation_changed(new, old) else []
    if "TZ" in ((new.get("spec") or {}).get("schedule") or ""):
        out.append("cannot use TZ or CRON_TZ in spec.spec.schedule, use timeZone instead, see "
                   "https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ for more details")
    return out
