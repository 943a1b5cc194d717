"""PodSecurity admission (k8s.io/pod-security-admission): each namespace's labels
`pod-security.kubernetes.io/<mode>[-version]` pick a level of the Pod Security Standards (and the
version of it) per mode. `enforce` refuses a pod that violates it; `audit` records the violations in
the request's audit event; `warn` answers with Warning headers. Workload objects with a pod template
meet only audit and warn, so their pods' refusal is no surprise. Relabelling a namespace's enforce
level warns of its existing pods that would be refused.

Namespaces without labels take the configured defaults (privileged, as upstream's, unless
--admission-control-config-file says otherwise): the pod create of an unlabelled namespace costs a
cache lookup and a dict read. A label of a value it cannot parse enforces the strictest policy
(restricted:latest) and is refused on the namespace itself."""

from __future__ import annotations

import re
from dataclasses import dataclass

from prometheus_client import CollectorRegistry

from ...machinery import configfile, errors
from ...machinery.configfile import Kind, Struct
from ...machinery.validation import FieldError
from .lookup import list_objects, object_name
from .metrics import _PlainCounter
from .pod_security_policy import LATEST, LEVELS, PRIVILEGED, RESTRICTED, evaluate, forbidden_detail, pluralize

PREFIX = "pod-security.kubernetes.io/"
MODES = ("enforce", "audit", "warn")
_VERSION = re.compile(r"^v1\.(0|[1-9][0-9]*)$")
#: Go's int on 64-bit platforms: a minor over it fails ParseVersion's Atoi
_GO_MAX_INT = 2**63 - 1
#: upstream's cap on the pods a namespace relabel evaluates, and the seconds it may take (upstream's
#: defaultNamespacePodCheckTimeout; it is also held to half the request's remaining time, 30 s of the
#: default 60 s deadline, which only a `timeout` query of under 2 s would make the shorter)
MAX_PODS_TO_CHECK = 3000
POD_CHECK_TIMEOUT = 1.0
#: pod subresources that cannot change what the standards judge (any other is judged, to fail safe)
IGNORED_POD_SUBRESOURCES = frozenset({"exec", "attach", "binding", "eviction", "log", "portforward", "proxy", "status"})
#: workload resources: where their pod template is
TEMPLATES: dict[tuple[str, str], tuple[str, ...]] = {
    ("", "podtemplates"): ("template",), ("", "replicationcontrollers"): ("spec", "template"),
    **{("apps", p): ("spec", "template") for p in ("deployments", "replicasets", "statefulsets", "daemonsets")},
    ("batch", "jobs"): ("spec", "template"), ("batch", "cronjobs"): ("spec", "jobTemplate", "spec", "template")}


@dataclass(frozen=True)
class LevelVersion:
    level: str
    #: (1, minor); None: latest
    version: tuple[int, int] | None = None

    def __str__(self) -> str:
        return f"{self.level}:{'latest' if self.version is None else f'v{self.version[0]}.{self.version[1]}'}"

    @property
    def evaluated_at(self) -> tuple[int, int]:
        return LATEST if self.version is None or self.version > LATEST else self.version

    @property
    def metric_version(self) -> str:
        if self.version is None:
            return "latest"
        return "future" if self.version > LATEST else f"v1.{self.version[1]}"


@dataclass(frozen=True)
class Policy:
    enforce: LevelVersion
    audit: LevelVersion
    warn: LevelVersion

    @property
    def privileged(self) -> bool:
        return self.enforce.level == self.audit.level == self.warn.level == PRIVILEGED


def parse_level(value) -> tuple[str, str | None]:
    if value in LEVELS:
        return value, None
    return RESTRICTED, f"must be one of {', '.join(LEVELS)}"


def parse_version(value) -> tuple[tuple[int, int] | None, str | None]:
    if value == "latest":
        return None, None
    m = _VERSION.match(value) if isinstance(value, str) else None
    if m is None or int(m.group(1)) > _GO_MAX_INT:  # strconv.Atoi's range error is the same refusal
        return None, 'must be "latest" or "v1.x"'
    return (1, int(m.group(1))), None


def policy_for(labels: dict, defaults: Policy) -> tuple[Policy, list[FieldError]]:
    """PolicyToEvaluate: the labels over the defaults; an unparsable value is taken as the strictest
    (restricted, latest) and reported. Warn follows an enforce level set stricter than it."""
    errs: list[FieldError] = []
    chosen: dict[str, LevelVersion] = {}
    set_level: dict[str, bool] = {}
    for mode in MODES:
        default = getattr(defaults, mode)
        level, version = default.level, default.version
        if (value := labels.get(PREFIX + mode)) is not None:
            level, problem = parse_level(value)
            set_level[mode] = problem is None
            if problem:
                errs.append(FieldError("FieldValueInvalid", f"metadata.labels[{PREFIX}{mode}]", problem, value, True))
        if (value := labels.get(f"{PREFIX}{mode}-version")) is not None:
            version, problem = parse_version(value)
            if problem:
                errs.append(FieldError("FieldValueInvalid", f"metadata.labels[{PREFIX}{mode}-version]", problem, value,
                                       True))
        chosen[mode] = LevelVersion(level, version)
    if set_level.get("enforce") and not set_level.get("warn") \
            and LEVELS.index(chosen["enforce"].level) > LEVELS.index(chosen["warn"].level):
        version = chosen["warn"].version if f"{PREFIX}warn-version" in labels else chosen["enforce"].version
        chosen["warn"] = LevelVersion(chosen["enforce"].level, version)
    return Policy(**chosen), errs


def _aggregate(errs: list[FieldError]) -> str:
    texts = list(dict.fromkeys(str(e) for e in errs))
    return texts[0] if len(texts) == 1 else f"[{', '.join(texts)}]"


#: the PodSecurityConfiguration versions 1.37's scheme decodes (the same fields in each, in a Go
#: package of each version's name), as pod-security-admission's strict codec decodes them
CONFIG_VERSIONS = tuple(f"pod-security.admission.config.k8s.io/{v}" for v in ("v1", "v1beta1", "v1alpha1"))
CONFIG_FILE = Kind(CONFIG_VERSIONS, "PodSecurityConfiguration",
                   "k8s.io/pod-security-admission/admission/api/scheme/scheme.go:29", lambda v: Struct(
                       f"{v}.PodSecurityConfiguration", {
                           "apiVersion": str, "kind": str,
                           "defaults": Struct(f"{v}.PodSecurityDefaults", {m + s: str for m in MODES for s in ("", "-version")}),
                           "exemptions": Struct(f"{v}.PodSecurityExemptions", {
                               "usernames": [str], "runtimeClasses": [str], "namespaces": [str]})}))
#: how the API server words a plugin whose configuration it cannot build (its admission chain's)
PLUGIN_INIT = "couldn't init admission plugin \"{}\": "


class Config:
    """PodSecurityConfiguration (pod-security.admission.config.k8s.io/v1, v1beta1 or v1alpha1):
    defaults and exemptions."""

    def __init__(self, defaults: Policy | None = None, usernames=(), runtime_classes=(), namespaces=()) -> None:
        self.defaults = defaults or Policy(*(LevelVersion(PRIVILEGED),) * 3)
        self.usernames = frozenset(usernames)
        self.runtime_classes = frozenset(runtime_classes)
        self.namespaces = frozenset(namespaces)
        #: whether a request can be exempt by its namespace or user
        self.exempts = bool(self.namespaces or self.usernames)

    @classmethod
    def parse(cls, doc: dict, repeated: list[str] = (), text: str = "") -> Config:
        """A PodSecurityConfiguration document (`text`: what its file held), decoded strictly as
        pod-security-admission's codec does (configfile's checks, `repeated` the keys its file
        repeats) and validated; ValueError says what is wrong with it, as the API server does."""
        try:
            doc, _ = configfile.decode_object(doc, list(repeated), text, CONFIG_FILE)
        except configfile.DecodeError as e:
            raise ValueError(PLUGIN_INIT.format("PodSecurity") + str(e)) from None
        defaults, ex = doc.get("defaults") or {}, doc.get("exemptions") or {}
        exemptions = [ex.get(key) or () for key in ("usernames", "runtimeClasses", "namespaces")]
        labels = {PREFIX + k: v for k, v in defaults.items()}
        base = Policy(*(LevelVersion(PRIVILEGED),) * 3)
        policy, errs = policy_for(labels, base)
        if errs:
            raise ValueError(PLUGIN_INIT.format("PodSecurity") + "; ".join(
                str(e).replace(f"metadata.labels[{PREFIX}", "defaults[") for e in errs))
        return cls(policy, *exemptions)


class PodSecurityMetrics:
    """pod_security_evaluations_total, pod_security_exemptions_total, pod_security_errors_total:
    plain counters (a label lookup and an add on the pod-create path)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.evaluations = _PlainCounter(
            "pod_security_evaluations",
            "[ALPHA] Number of policy evaluations that occurred, not counting ignored or exempt requests.",
            ("decision", "policy_level", "policy_version", "mode", "request_operation", "resource", "subresource"), "_total")
        self.exemptions = _PlainCounter(
            "pod_security_exemptions", "[ALPHA] Number of exempt requests, not counting ignored or out of scope "
            "requests.", ("request_operation", "resource", "subresource"), "_total")
        self.errors = _PlainCounter(
            "pod_security_errors", "[ALPHA] Number of errors preventing normal evaluation. Non-fatal errors may "
            "result in the latest restricted profile being used for evaluation.",
            ("fatal", "request_operation", "resource", "subresource"), "_total")
        for counter in (self.evaluations, self.exemptions, self.errors):
            self.registry.register(counter)


def _resource_label(a) -> str:
    if a.res.group == "" and a.res.plural in ("pods", "namespaces"):
        return a.res.plural[:-1]
    return "controller"


def _significant_update(pod: dict, old: dict) -> bool:
    """isSignificantPodUpdate: a pod's spec is immutable but for images and ephemeral containers
    (and containers' seccomp annotations): only a change of them is judged again."""
    spec, was = pod.get("spec") or {}, old.get("spec") or {}
    ann, old_ann = (pod.get("metadata") or {}).get("annotations") or {}, (old.get("metadata") or {}).get("annotations") or {}

    def changed(c: dict, prev: dict) -> bool:
        key = "container.seccomp.security.alpha.kubernetes.io/" + (c.get("name") or "")
        return c.get("image") != prev.get("image") or ann.get(key) != old_ann.get(key)

    for key in ("containers", "initContainers"):
        now, before = spec.get(key) or (), was.get(key) or ()
        if len(now) != len(before) or any(changed(c, prev) for c, prev in zip(now, before)):
            return True
    before = {c.get("name"): c for c in was.get("ephemeralContainers") or ()}
    return any(c.get("name") not in before or changed(c, before[c.get("name")])
               for c in spec.get("ephemeralContainers") or ())


def _template(obj: dict, path: tuple[str, ...]) -> dict | None:
    for key in path:
        obj = obj.get(key) if isinstance(obj, dict) else None
    return obj if isinstance(obj, dict) else None


class PodSecurity:
    name = "PodSecurity"
    validates = frozenset({("", "pods"), ("", "namespaces"), *TEMPLATES})

    def __init__(self, rest, config: Config | None = None) -> None:
        self.rest = rest
        self.config = config or Config()
        self.metrics = PodSecurityMetrics()
        self._ns_prefix: str | None = None
        #: namespace -> (its policy, the labels' errors, the evaluation counter's labels of a pod write
        #: it admits as fully privileged by (operation, subresource), None where it is not), kept while
        #: the watch cache's change number of namespaces is `_mark`'s
        self._policies: dict[str, tuple[Policy, list[FieldError], dict | None]] = {}
        self._mark: tuple[object, int] | None = None

    def configure(self, config: Config) -> None:
        self.config = config
        self._policies.clear()

    def _labels(self, a) -> tuple[str, str, str]:
        return a.operation.lower(), _resource_label(a), a.subresource

    def _policy(self, namespace: str) -> tuple[Policy, list[FieldError], dict | None] | None:
        """The namespace's policy, parsed once until a namespace changes (a pod create of an
        unlabelled namespace reads one dict for it)."""
        cache = self.rest.cache
        if self._ns_prefix is None:
            self._ns_prefix = self.rest.index.get("", "v1", "namespaces").key_prefix()
        mark = cache.changes(self._ns_prefix)
        if self._mark is None or mark != self._mark[1] or cache is not self._mark[0]:
            self._policies.clear()
            self._mark = (cache, mark)
        found = self._policies.get(namespace)
        if found is not None:
            return found
        entry = cache.get(self._ns_prefix + namespace)
        if entry is None:
            return None
        labels = (entry.obj.get("metadata") or {}).get("labels") or {}
        policy, errs = policy_for(labels, self.config.defaults) if any(k.startswith(PREFIX) for k in labels) \
            else (self.config.defaults, [])
        found = self._policies[namespace] = (policy, errs, {} if not errs and policy.privileged else None)
        return found

    def _exempt(self, a, why: str) -> None:
        a.add_annotation(PREFIX + "exempt", why)
        self.metrics.exemptions.inc(*self._labels(a))

    def _exempt_request(self, a) -> bool:
        if a.namespace in self.config.namespaces:
            self._exempt(a, "namespace")
            return True
        if self.config.usernames and a.opts.user is not None and a.opts.user.name in self.config.usernames:
            self._exempt(a, "user")
            return True
        return False

    def validate(self, a) -> None:
        if a.res.plural == "pods" and not a.res.group:
            # a pod write's path, the hot one, in this one frame: its namespace's policy as kept
            # (the mark unchanged), and an unlabelled namespace's pod counted and let through
            if a.subresource in IGNORED_POD_SUBRESOURCES or (self.config.exempts and self._exempt_request(a)):
                return
            cache, mark = self.rest.cache, self._mark
            found = self._policies.get(a.namespace) if mark is not None and cache is mark[0] \
                and cache.changes(self._ns_prefix) == mark[1] else None
            if found is None and (found := self._policy_of(a)) is None:
                return
            if found[2] is None:
                self._validate_pod(a, found[0], found[1])
                return
            labels = found[2].get((a.operation, a.subresource))
            if labels is None:
                labels = found[2][(a.operation, a.subresource)] = (
                    "allow", PRIVILEGED, found[0].enforce.metric_version, "enforce", *self._labels(a))
            counts = self.metrics.evaluations.values
            counts[labels] = counts.get(labels, 0.0) + 1
        elif a.res.plural == "namespaces" and a.res.group == "":
            self._validate_namespace(a)
        else:
            self._validate_controller(a)

    def _policy_of(self, a) -> tuple[Policy, list[FieldError], dict | None] | None:
        found = self._policy(a.namespace)
        if found is None:  # no namespace to judge by (NamespaceLifecycle refuses the write before this)
            self.metrics.errors.inc("true", *self._labels(a))
        return found

    def _validate_pod(self, a, policy: Policy, errs: list[FieldError]) -> None:
        """A pod write in a namespace that is not fully privileged (or whose labels do not parse)."""
        if a.operation == "UPDATE" and a.old is not None and not _significant_update(a.obj, a.old):
            return
        spec = a.obj.get("spec") or {}
        if spec.get("runtimeClassName") in self.config.runtime_classes:
            self._exempt(a, "runtimeClass")
            return
        self._evaluate(a, policy, errs, a.obj.get("metadata") or {}, spec, enforce=True)

    def _validate_controller(self, a) -> None:
        if a.subresource or (self.config.exempts and self._exempt_request(a)):
            return
        found = self._policy_of(a)
        if found is None:
            return
        policy, errs, _ = found
        if not errs and policy.warn.level == policy.audit.level == PRIVILEGED:
            return
        path = TEMPLATES[(a.res.group, a.res.plural)]
        template = _template(a.obj, path)
        if template is None:
            return
        spec = template.get("spec") or {}
        if spec.get("runtimeClassName") in self.config.runtime_classes:
            self._exempt(a, "runtimeClass")
            return
        self._evaluate(a, policy, errs, template.get("metadata") or {}, spec, enforce=False)

    def _evaluate(self, a, policy: Policy, errs: list[FieldError], meta: dict, spec: dict, enforce: bool) -> None:
        """EvaluatePod: enforce (pods only), then audit, then warn, each evaluation reused by the
        modes that share its level and version."""
        labels = self._labels(a)
        results: dict[tuple[str, tuple[int, int]], str] = {}

        def judge(lv: LevelVersion) -> str:
            """The forbidden detail of the pod at `lv`, "" where it passes."""
            key = (lv.level, lv.evaluated_at)
            if key not in results:
                results[key] = forbidden_detail(evaluate(lv.level, lv.evaluated_at, meta, spec))
            return results[key]

        if errs:
            a.add_annotation(PREFIX + "error", f"Failed to parse policy: {_aggregate(errs)}")
            self.metrics.errors.inc("false", *labels)
        refusal = None
        if enforce:
            a.add_annotation(PREFIX + "enforce-policy", str(policy.enforce))
            detail = judge(policy.enforce)
            self.metrics.evaluations.inc("deny" if detail else "allow", policy.enforce.level,
                                         policy.enforce.metric_version, "enforce", *labels)
            if detail:
                refusal = errors.forbidden(a.res.group, a.res.plural, object_name(a),
                                           f'violates PodSecurity "{policy.enforce}": {detail}')
        if detail := judge(policy.audit):
            a.add_annotation(PREFIX + "audit-violations", f'would violate PodSecurity "{policy.audit}": {detail}')
            self.metrics.evaluations.inc("deny", policy.audit.level, policy.audit.metric_version, "audit", *labels)
        if refusal is not None:
            raise refusal  # no warnings on a request refused anyway
        if detail := judge(policy.warn):
            a.warnings.append(f'would violate PodSecurity "{policy.warn}": {detail}')
            self.metrics.evaluations.inc("deny", policy.warn.level, policy.warn.metric_version, "warn", *labels)

    def _validate_namespace(self, a) -> None:
        """Labels are checked on create and on an update that changes their errors; an update that
        tightens the enforce policy warns of the existing pods it would refuse."""
        if a.subresource:
            return
        labels = (a.obj.get("metadata") or {}).get("labels") or {}
        policy, errs = policy_for(labels, self.config.defaults)
        if a.operation == "CREATE" or a.old is None:
            if errs:
                raise errors.invalid("", "Namespace", a.name, errs)
            self._warn_exempt(a, policy, labels)
            return
        old_policy, old_errs = policy_for((a.old.get("metadata") or {}).get("labels") or {}, self.config.defaults)
        if errs and (not old_errs or [str(e) for e in errs] != [str(e) for e in old_errs]):
            raise errors.invalid("", "Namespace", a.name, errs)
        new, was = policy.enforce, old_policy.enforce
        if new == was or new.level == PRIVILEGED \
                or (new.version == was.version and LEVELS.index(new.level) <= LEVELS.index(was.level)):
            return
        if a.namespace in self.config.namespaces:
            self._warn_exempt(a, policy, labels)
            return
        a.warnings.extend(self._existing_pods(a.namespace, policy.enforce))

    def _warn_exempt(self, a, policy: Policy, labels: dict) -> None:
        """exemptNamespaceWarning: an exempt namespace labelled for a policy other than the defaults
        hears that its labels are ignored (the non-privileged modes it sets, listed)."""
        if a.namespace not in self.config.namespaces or policy.privileged or all(
                (mine.level == theirs.level == PRIVILEGED) or mine == theirs
                for mine, theirs in zip((policy.enforce, policy.audit, policy.warn), (
                    self.config.defaults.enforce, self.config.defaults.audit, self.config.defaults.warn))):
            return
        modes = [f"{mode}={getattr(policy, mode)}" for mode in MODES if getattr(policy, mode).level != PRIVILEGED
                 and (PREFIX + mode in labels or f"{PREFIX}{mode}-version" in labels)]
        a.warnings.append(f'namespace "{a.namespace}" is exempt from Pod Security, and the policy ({", ".join(modes)}) '
                          "will be ignored")

    def _prioritized(self, pods: list[dict]) -> list[dict]:
        """prioritizePods: pods of exempt runtime classes left out, the first pod of each controller
        before the other pods of a controller already taken."""
        first, rest, owners = [], [], set()
        for pod in pods:
            if (pod.get("spec") or {}).get("runtimeClassName") in self.config.runtime_classes:
                continue
            owner = next((r.get("uid") for r in (pod.get("metadata") or {}).get("ownerReferences") or ()
                          if r.get("controller")), None)
            if owner is not None and owner in owners:
                rest.append(pod)
            else:
                owners.add(owner)
                first.append(pod)
        return first + rest

    def _existing_pods(self, namespace: str, enforce: LevelVersion) -> list[str]:
        """EvaluatePodsInNamespace: the pods' violated checks (reasons only), grouped; at most
        MAX_PODS_TO_CHECK pods, and none more once POD_CHECK_TIMEOUT has passed on the server's clock
        (read after each pod, as upstream reads its context's deadline), saying how many were."""
        clock = self.rest.clock
        deadline = clock.monotonic() + POD_CHECK_TIMEOUT
        pods = self._prioritized(list_objects(self.rest, "", "pods", namespace))
        checked = 0
        found: dict[str, list] = {}  # reasons -> [the lexically first pod's name, count]
        for pod in pods[:MAX_PODS_TO_CHECK]:
            checked += 1
            violations = evaluate(enforce.level, enforce.evaluated_at, pod.get("metadata") or {}, pod.get("spec") or {})
            if violations:
                name = (pod.get("metadata") or {}).get("name", "")
                seen = found.setdefault(", ".join(reason for reason, _ in violations), [name, 0])
                seen[0], seen[1] = min(seen[0], name), seen[1] + 1
            if clock.monotonic() >= deadline:
                break
        out = []
        if checked < len(pods):
            out.append(f"new PodSecurity enforce level only checked against the first {checked} of {len(pods)} "
                       "existing pods")
        if found:
            out.append(f'existing pods in namespace "{namespace}" violate the new PodSecurity enforce level "{enforce}"')
        out += sorted(f"{first}: {text}" if count == 1 else
                      f"{first} (and {count - 1} other {pluralize('pod', 'pods', count - 1)}): {text}"
                      for text, (first, count) in found.items())
        return out
