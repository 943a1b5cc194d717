"""The Pod Security Standards' checks (k8s.io/pod-security-admission's policy package): what
the baseline and restricted levels forbid in a pod's metadata and spec, at each version of the
standards. A check that changed keeps each of its versions, so a namespace pinned to `v1.24` is
judged as a 1.24 cluster judged it; a restricted check that tightens a baseline one replaces it.

Checks read the pod's JSON form (the storage form is v1's) and return None or a
(reason, detail) pair in upstream's words."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from ...machinery.gofmt import quote

PRIVILEGED, BASELINE, RESTRICTED = "privileged", "baseline", "restricted"
LEVELS = (PRIVILEGED, BASELINE, RESTRICTED)
#: the newest version of the standards: `latest`, and any later one, evaluate at it
LATEST = (1, 37)

Result = tuple[str, str] | None
CheckFn = Callable[[dict, dict], Result]


def pluralize(one: str, many: str, n: int) -> str:
    return one if n == 1 else many


def join_quote(items) -> str:
    return ", ".join(f'"{i}"' for i in items)


def containers(spec: dict) -> Iterator[dict]:
    """Every container of the pod: init, regular, then ephemeral (upstream's visitContainers)."""
    for key in ("initContainers", "containers", "ephemeralContainers"):
        yield from spec.get(key) or ()


def _sc(c: dict) -> dict:
    return c.get("securityContext") or {}


def _named(kind: str, names: list[str]) -> str:
    return f"{pluralize(kind, kind + 's', len(names))} {join_quote(names)}"


def _windows(spec: dict) -> bool:
    return ((spec.get("os") or {}).get("name") or "") == "windows"


# baseline


def host_namespaces(meta: dict, spec: dict) -> Result:
    bad = [f"{k}=true" for k in ("hostNetwork", "hostPID", "hostIPC") if spec.get(k)]
    return ("host namespaces", ", ".join(bad)) if bad else None


def privileged(meta: dict, spec: dict) -> Result:
    bad = [c.get("name", "") for c in containers(spec) if _sc(c).get("privileged")]
    return ("privileged", f"{_named('container', bad)} must not set securityContext.privileged=true") if bad else None


_BASELINE_CAPS = frozenset({"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                            "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"})


def capabilities_baseline(meta: dict, spec: dict) -> Result:
    bad, caps = [], set()
    for c in containers(spec):
        added = [x for x in (_sc(c).get("capabilities") or {}).get("add") or () if x not in _BASELINE_CAPS]
        if added:
            bad.append(c.get("name", ""))
            caps.update(added)
    if not bad:
        return None
    return ("non-default capabilities",
            f"{_named('container', bad)} must not include {join_quote(sorted(caps))} in securityContext.capabilities.add")


def host_path_volumes(meta: dict, spec: dict) -> Result:
    bad = [v.get("name", "") for v in spec.get("volumes") or () if v.get("hostPath") is not None]
    return ("hostPath volumes", _named("volume", bad)) if bad else None


def host_ports(meta: dict, spec: dict) -> Result:
    bad, ports = [], []
    for c in containers(spec):
        used = [str(p["hostPort"]) for p in c.get("ports") or () if p.get("hostPort")]
        if used:
            bad.append(c.get("name", ""))
            ports += [p for p in used if p not in ports]
    if not bad:
        return None
    return ("hostPort", f"{_named('container', bad)} {pluralize('uses', 'use', len(bad))} "
                        f"{pluralize('hostPort', 'hostPorts', len(ports))} {', '.join(ports)}")


_APPARMOR_PREFIX = "container.apparmor.security.beta.kubernetes.io/"


_APPARMOR_TYPES = ("RuntimeDefault", "Localhost")


def apparmor(meta: dict, spec: dict) -> Result:
    """One version (1.0) judging both the appArmorProfile fields (a type other than RuntimeDefault or
    Localhost) and the deprecated annotations (other than empty, runtime/default or localhost/*):
    upstream amended its 1.0 check in place when the fields came (1.30), so every pinned version
    judges them."""
    setters, types = [], set()
    profile = (spec.get("securityContext") or {}).get("appArmorProfile")
    if profile is not None and profile.get("type") not in _APPARMOR_TYPES:
        setters.append("pod")
        types.add(profile.get("type") or "")
    names = []
    for c in containers(spec):
        profile = _sc(c).get("appArmorProfile")
        if profile is not None and profile.get("type") not in _APPARMOR_TYPES:
            names.append(c.get("name", ""))
            types.add(profile.get("type") or "")
    if names:
        setters.append(_named("container", names))
    values = sorted(types)
    annotations = sorted(f"{k}={quote(v)}" for k, v in (meta.get("annotations") or {}).items()
                         if k.startswith(_APPARMOR_PREFIX) and v and v != "runtime/default"
                         and not v.startswith("localhost/"))
    if annotations:
        values += annotations
        setters.append(pluralize("annotation", "annotations", len(annotations)))
    if not setters:
        return None
    return (pluralize("forbidden AppArmor profile", "forbidden AppArmor profiles", len(values)),
            f"{' and '.join(setters)} must not set AppArmor profile type to {join_quote(values)}")


def _selinux(types: frozenset[str]) -> CheckFn:
    def check(meta: dict, spec: dict) -> Result:
        setters, bad_types, user, role = [], set(), False, False

        def bad(opts: dict | None) -> bool:
            nonlocal user, role
            if not opts:
                return False
            wrong = False
            if opts.get("type", "") not in types:
                bad_types.add(opts.get("type", ""))
                wrong = True
            if opts.get("user"):
                user = wrong = True
            if opts.get("role"):
                role = wrong = True
            return wrong

        if bad((spec.get("securityContext") or {}).get("seLinuxOptions")):
            setters.append("pod")
        names = [c.get("name", "") for c in containers(spec) if bad(_sc(c).get("seLinuxOptions"))]
        if names:
            setters.append(_named("container", names))
        if not setters:
            return None
        data = [f"{pluralize('type', 'types', len(bad_types))} {join_quote(sorted(bad_types))}"] if bad_types else []
        data += ["user may not be set"] * user + ["role may not be set"] * role
        return "seLinuxOptions", f"{' and '.join(setters)} set forbidden securityContext.seLinuxOptions: {'; '.join(data)}"
    return check


_SELINUX_1_0 = frozenset({"", "container_t", "container_init_t", "container_kvm_t"})


def proc_mount(meta: dict, spec: dict) -> Result:
    bad, kinds = [], set()
    for c in containers(spec):
        pm = _sc(c).get("procMount")
        if pm is not None and pm != "Default":
            bad.append(c.get("name", ""))
            kinds.add(pm)
    if not bad:
        return None
    return "procMount", f"{_named('container', bad)} must not set securityContext.procMount to {join_quote(sorted(kinds))}"


def _user_namespaced(spec: dict) -> bool:
    """relaxPolicyForUserNamespacePod: `hostUsers: false`."""
    return spec.get("hostUsers") is False


def _unless_user_namespaced(check: CheckFn) -> CheckFn:
    """From 1.35 (KEP-127) a pod in a user namespace is spared the check: baseline's procMount and
    restricted's runAsNonRoot and runAsUser. Before, the relaxation hung on the perma-alpha
    UserNamespacesPodSecurityStandards gate, dropped in 1.35 with it, so earlier versions judge all pods."""
    def relaxed(meta: dict, spec: dict) -> Result:
        return None if _user_namespaced(spec) else check(meta, spec)
    return relaxed


_SECCOMP_POD_ANNOTATION = "seccomp.security.alpha.kubernetes.io/pod"
_SECCOMP_CONTAINER_PREFIX = "container.seccomp.security.alpha.kubernetes.io/"


def seccomp_baseline_1_0(meta: dict, spec: dict) -> Result:
    """Before 1.19 seccomp was set by annotations: `unconfined` is forbidden."""
    bad = sorted(f'{k}="{v}"' for k, v in (meta.get("annotations") or {}).items()
                 if (k == _SECCOMP_POD_ANNOTATION or k.startswith(_SECCOMP_CONTAINER_PREFIX)) and v == "unconfined")
    return ("seccompProfile", ", ".join(bad)) if bad else None


def seccomp_baseline_1_19(meta: dict, spec: dict) -> Result:
    setters = []
    if ((spec.get("securityContext") or {}).get("seccompProfile") or {}).get("type") == "Unconfined":
        setters.append("pod")
    names = [c.get("name", "") for c in containers(spec) if (_sc(c).get("seccompProfile") or {}).get("type") == "Unconfined"]
    if names:
        setters.append(_named("container", names))
    if not setters:
        return None
    return "seccompProfile", f'{" and ".join(setters)} must not set securityContext.seccompProfile.type to "Unconfined"'


def _sysctls(allowed: frozenset[str]) -> CheckFn:
    def check(meta: dict, spec: dict) -> Result:
        bad = [s.get("name", "") for s in (spec.get("securityContext") or {}).get("sysctls") or ()
               if s.get("name") not in allowed]
        return ("forbidden sysctls", ", ".join(bad)) if bad else None
    return check


_SYSCTLS_1_0 = frozenset({"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.tcp_syncookies",
                          "net.ipv4.ping_group_range", "net.ipv4.ip_unprivileged_port_start"})
_SYSCTLS_1_27 = _SYSCTLS_1_0 | {"net.ipv4.ip_local_reserved_ports"}
_SYSCTLS_1_29 = _SYSCTLS_1_27 | {"net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout",
                                 "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes"}
_SYSCTLS_1_32 = _SYSCTLS_1_29 | {"net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"}
_SYSCTLS_1_37 = _SYSCTLS_1_32 | {"net.ipv4.tcp_slow_start_after_idle", "net.ipv4.tcp_notsent_lowat"}


def windows_host_process(meta: dict, spec: dict) -> Result:
    setters = []
    if ((spec.get("securityContext") or {}).get("windowsOptions") or {}).get("hostProcess"):
        setters.append("pod")
    names = [c.get("name", "") for c in containers(spec) if (_sc(c).get("windowsOptions") or {}).get("hostProcess")]
    if names:
        setters.append(_named("container", names))
    if not setters:
        return None
    return "hostProcess", f"{' and '.join(setters)} must not set securityContext.windowsOptions.hostProcess=true"


def _hosts(handlers: list) -> list[str]:
    """The hosts set in probes' or lifecycle handlers' httpGet and tcpSocket."""
    return [h for handler in handlers if handler
            for h in ((handler.get("httpGet") or {}).get("host"), (handler.get("tcpSocket") or {}).get("host")) if h]


def host_probes_and_lifecycle(meta: dict, spec: dict) -> Result:
    bad, hosts = [], set()
    for c in containers(spec):
        lifecycle = c.get("lifecycle") or {}
        found = _hosts([c.get("livenessProbe"), c.get("readinessProbe"), c.get("startupProbe"),
                        lifecycle.get("postStart"), lifecycle.get("preStop")])
        if found:
            bad.append(c.get("name", ""))
            hosts.update(found)
    if not bad:
        return None
    names = sorted(set(bad))
    return ("probe or lifecycle host",
            f"{_named('container', names)} {pluralize('uses', 'use', len(names))} "
            f"{pluralize('probe or lifecycle host', 'probe or lifecycle hosts', len(hosts))} {join_quote(sorted(hosts))}")


# restricted


def _unless_windows(check: CheckFn) -> CheckFn:
    """From 1.25 the Linux-only restricted checks pass a pod whose spec.os.name is windows."""
    def windows_aware(meta: dict, spec: dict) -> Result:
        return None if _windows(spec) else check(meta, spec)
    return windows_aware


def allow_privilege_escalation(meta: dict, spec: dict) -> Result:
    bad = [c.get("name", "") for c in containers(spec) if _sc(c).get("allowPrivilegeEscalation") is not False]
    if not bad:
        return None
    return "allowPrivilegeEscalation != false", f"{_named('container', bad)} must set securityContext.allowPrivilegeEscalation=false"


def capabilities_restricted(meta: dict, spec: dict) -> Result:
    no_drop, adding, caps = [], [], set()
    for c in containers(spec):
        cap = _sc(c).get("capabilities") or {}
        if "ALL" not in (cap.get("drop") or ()):
            no_drop.append(c.get("name", ""))
        added = [x for x in cap.get("add") or () if x != "NET_BIND_SERVICE"]
        if added:
            adding.append(c.get("name", ""))
            caps.update(added)
    details = []
    if no_drop:
        details.append(f'{_named("container", no_drop)} must set securityContext.capabilities.drop=["ALL"]')
    if adding:
        details.append(f"{_named('container', adding)} must not include {join_quote(sorted(caps))} "
                       "in securityContext.capabilities.add")
    return ("unrestricted capabilities", "; ".join(details)) if details else None


_RESTRICTED_VOLUME_TYPES = frozenset({"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
                                      "persistentVolumeClaim", "projected", "secret"})


def restricted_volumes(meta: dict, spec: dict) -> Result:
    bad, kinds = [], set()
    for v in spec.get("volumes") or ():
        source = [k for k in v if k != "name"]
        if not any(k in _RESTRICTED_VOLUME_TYPES for k in source):
            bad.append(v.get("name", ""))
            kinds.update(source or ("unknown",))
    if not bad:
        return None
    return ("restricted volume types",
            f"{_named('volume', bad)} {pluralize('uses', 'use', len(bad))} "
            f"{pluralize('restricted volume type', 'restricted volume types', len(kinds))} {join_quote(sorted(kinds))}")


def _pod_or_containers(field: str, good: Callable[[Any], bool], reason: str, must_not: Callable[[list], str],
                       must: str) -> CheckFn:
    """A field every container must have good, set on it or inherited from the pod's securityContext:
    the pod and containers that set it bad are named first (`must_not` of their values), else the
    containers that inherit no good value."""
    def check(meta: dict, spec: dict) -> Result:
        setters, values, pod_good = [], [], False
        pod = (spec.get("securityContext") or {}).get(field)
        if pod is not None:
            if good(pod):
                pod_good = True
            else:
                setters.append("pod")
                values.append(pod)
        explicit, implicit = [], []
        for c in containers(spec):
            own = _sc(c).get(field)
            if own is not None:
                if not good(own):
                    explicit.append(c.get("name", ""))
                    values.append(own)
            elif not pod_good:
                implicit.append(c.get("name", ""))
        if explicit:
            setters.append(_named("container", explicit))
        if setters:
            return reason, f"{' and '.join(setters)} {must_not(values)}"
        if implicit:
            return reason, f"pod or {_named('container', implicit)} {must}"
        return None
    return check


run_as_non_root = _pod_or_containers("runAsNonRoot", lambda v: v is True, "runAsNonRoot != true",
                                     lambda _: "must not set securityContext.runAsNonRoot=false",
                                     "must set securityContext.runAsNonRoot=true")


def run_as_user(meta: dict, spec: dict) -> Result:
    setters = ["pod"] if (spec.get("securityContext") or {}).get("runAsUser") == 0 else []
    names = [c.get("name", "") for c in containers(spec) if _sc(c).get("runAsUser") == 0]
    if names:
        setters.append(_named("container", names))
    return ("runAsUser=0", f"{' and '.join(setters)} must not set runAsUser=0") if setters else None


seccomp_restricted = _pod_or_containers(
    "seccompProfile", lambda p: p.get("type") in ("RuntimeDefault", "Localhost"), "seccompProfile",
    lambda profiles: "must not set securityContext.seccompProfile.type to "
                     + join_quote(sorted({p.get("type", "") for p in profiles})),
    'must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost"')


#: (id, level, [(minimum version, check)], ids of the baseline checks it replaces), sorted by id
#: within each level as upstream orders them
CHECKS: list[tuple[str, str, list[tuple[tuple[int, int], CheckFn]], tuple[str, ...]]] = [
    ("appArmorProfile", BASELINE, [((1, 0), apparmor)], ()),
    ("capabilities_baseline", BASELINE, [((1, 0), capabilities_baseline)], ()),
    ("hostNamespaces", BASELINE, [((1, 0), host_namespaces)], ()),
    ("hostPathVolumes", BASELINE, [((1, 0), host_path_volumes)], ()),
    ("hostPorts", BASELINE, [((1, 0), host_ports)], ()),
    ("hostProbesAndHostLifecycle", BASELINE, [((1, 34), host_probes_and_lifecycle)], ()),
    ("privileged", BASELINE, [((1, 0), privileged)], ()),
    ("procMount", BASELINE, [((1, 0), proc_mount), ((1, 35), _unless_user_namespaced(proc_mount))], ()),
    ("seLinuxOptions", BASELINE, [((1, 0), _selinux(_SELINUX_1_0)),
                                  ((1, 31), _selinux(_SELINUX_1_0 | {"container_engine_t"}))], ()),
    ("seccompProfile_baseline", BASELINE, [((1, 0), seccomp_baseline_1_0), ((1, 19), seccomp_baseline_1_19)], ()),
    ("sysctls", BASELINE, [((1, 0), _sysctls(_SYSCTLS_1_0)), ((1, 27), _sysctls(_SYSCTLS_1_27)),
                           ((1, 29), _sysctls(_SYSCTLS_1_29)), ((1, 32), _sysctls(_SYSCTLS_1_32)),
                           ((1, 37), _sysctls(_SYSCTLS_1_37))], ()),
    ("windowsHostProcess", BASELINE, [((1, 0), windows_host_process)], ()),
    ("allowPrivilegeEscalation", RESTRICTED, [((1, 8), allow_privilege_escalation),
                                              ((1, 25), _unless_windows(allow_privilege_escalation))], ()),
    ("capabilities_restricted", RESTRICTED, [((1, 22), capabilities_restricted),
                                             ((1, 25), _unless_windows(capabilities_restricted))],
     ("capabilities_baseline",)),
    ("procMount_restricted", RESTRICTED, [((1, 35), proc_mount)], ("procMount",)),
    ("restrictedVolumes", RESTRICTED, [((1, 0), restricted_volumes)], ("hostPathVolumes",)),
    ("runAsNonRoot", RESTRICTED, [((1, 0), run_as_non_root), ((1, 35), _unless_user_namespaced(run_as_non_root))], ()),
    ("runAsUser", RESTRICTED, [((1, 23), run_as_user), ((1, 35), _unless_user_namespaced(run_as_user))], ()),
    ("seccompProfile_restricted", RESTRICTED, [((1, 19), seccomp_restricted),
                                               ((1, 25), _unless_windows(seccomp_restricted))],
     ("seccompProfile_baseline",)),
]

_checks_at: dict[tuple[str, tuple[int, int]], list[CheckFn]] = {}


def checks_for(level: str, version: tuple[int, int]) -> list[CheckFn]:
    """The checks a pod meets at `level` and `version` (an overriding check replaces the baseline
    one only from its own first version on)."""
    key = (level, version)
    found = _checks_at.get(key)
    if found is None:
        levels = {BASELINE: (BASELINE,), RESTRICTED: (BASELINE, RESTRICTED)}.get(level, ())
        chosen: dict[str, CheckFn] = {}
        replaced: set[str] = set()
        for ident, lvl, versions, overrides in CHECKS:
            if lvl not in levels:
                continue
            fns = [fn for since, fn in versions if since <= version]
            if fns:
                chosen[ident] = fns[-1]
                replaced.update(overrides)
        found = _checks_at[key] = [fn for ident, fn in chosen.items() if ident not in replaced]
    return found


def evaluate(level: str, version: tuple[int, int], meta: dict, spec: dict) -> list[tuple[str, str]]:
    """The violations of a pod (or template) at a level and version: (reason, detail) pairs."""
    return [r for r in (fn(meta, spec) for fn in checks_for(level, version)) if r is not None]


def forbidden_detail(violations: list[tuple[str, str]]) -> str:
    """AggregateCheckResults' ForbiddenDetail: `reason (detail), reason (detail)`."""
    return ", ".join(f"{reason} ({detail})" if detail else reason for reason, detail in violations)
