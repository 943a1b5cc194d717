"""A container's environment as the kubelet and its runtime give it (makeEnvironmentVariables,
then containerd's defaults), shared by both runtimes: the process runtime execs with it, the
simulated one's shell (simulated_command) expands and prints it.

In order: the image's PATH, HOSTNAME and HOME (the process runtime's images are the node's own
root, so these are busybox's defaults; HOME is root's unless the runtime says whose home it is:
the simulated one passes runAsUser's from the image's /etc/passwd, as runc does), TERM for a tty, the env device plugins' Allocate
answers set (devicemanager), the kubelet's service link variables (service_env), then envFrom
and env, each `env` value's `$(VAR)` references expanded with what comes before it; valueFrom
reads fieldRef, resourceFieldRef, configMapKeyRef, secretKeyRef and fileKeyRef; last, the env
edits of the CDI devices external DRA drivers prepared for it
(dra/cdi.py). Whether a ConfigMap or Secret that is not optional is missing is envvars.py's check,
made before the container starts; here a missing one leaves its variables out."""

from __future__ import annotations

import asyncio
import base64
import os
import re

from . import dns, hosts_file, service_env
from .volumes.projected import _resource

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_VAR = re.compile(r"\$\(([-._a-zA-Z0-9]+)\)|\$\$")
_KEYED = re.compile(r"metadata\.(labels|annotations)\['(.+)'\]")


def expand(s: str, env: dict[str, str]) -> str:
    """Kubernetes' $(VAR) expansion: known variables expand, $$ escapes, the rest stays."""
    return _VAR.sub(lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)), s)


def command(spec: dict, env: dict[str, str]) -> list[str]:
    """The container's command then its args, their $(VAR) references expanded."""
    return [expand(a, env) for a in [*(spec.get("command") or ()), *(spec.get("args") or ())]]


def hostname(pod: dict, node: str) -> str:
    """The pod's hostname: its node's for a hostNetwork pod (which shares the node's UTS
    namespace), else spec.hostname or the pod's name."""
    spec = pod.get("spec") or {}
    if spec.get("hostNetwork"):
        return node
    return spec.get("hostname") or pod["metadata"]["name"]


def kernel_hostname(pod: dict, node: str) -> str:
    """The name the containers' UTS namespace and HOSTNAME carry (GetNodenameForKernel): with
    setHostnameAsFQDN the pod's FQDN (`hostname.subdomain.ns.svc.cluster.local`, where it has a
    subdomain), else `hostname`, which the hosts file keeps as the short name."""
    name, spec = hostname(pod, node), pod.get("spec") or {}
    if spec.get("setHostnameAsFQDN") and not spec.get("hostNetwork") and (domain := hosts_file.domain(pod, dns.ZONE)):
        return f"{name}.{domain}"
    return name


async def environment(worker, spec: dict, home: str = "/root") -> dict[str, str]:
    """Container `spec`'s environment in pod `worker` (a PodWorker: its agent, pod, uid and IP),
    `home` its user's home directory (HOME, unless its own env sets one)."""
    agent, pod = worker.agent, worker.pod
    env = {"PATH": DEFAULT_PATH, "HOSTNAME": kernel_hostname(pod, agent.name), "HOME": home}
    if spec.get("tty"):  # containerd's WithTTY, before the image's and the container's own env
        env["TERM"] = "xterm"
    # device plugins' Allocate envs come before the kubelet's (GenerateRunContainerOptions), so the
    # container's own env wins over them
    env |= agent.devices.environment(worker.uid, spec["name"])
    # the kubelet's service variables; what the container's own env and envFrom set wins
    env |= await service_env.variables(agent.client, worker.namespace,
                                       (pod.get("spec") or {}).get("enableServiceLinks", True))
    for src in spec.get("envFrom") or []:  # first, so that env overrides what they bring
        for kind, plural in (("configMapRef", "configmaps"), ("secretRef", "secrets")):
            if (src.get(kind) or {}).get("name"):
                obj = await agent.volumes.watched[plural].get(worker.namespace, src[kind]["name"]) or {}
                for k, v in (obj.get("data") or {}).items():
                    env[src.get("prefix", "") + k] = base64.b64decode(v).decode(errors="replace") \
                        if plural == "secrets" else v
    for e in spec.get("env") or []:
        if "value" in e or not e.get("valueFrom"):
            env[e["name"]] = expand(e.get("value", ""), env)
            continue
        v = await _value_from(worker, spec, e["valueFrom"])
        if v is not None:
            env[e["name"]] = v
    # the runtime applies the CDI devices' edits last (containerd: after the kubelet's config), so a
    # DRA driver's variable wins over the container's own
    env |= agent.claims.cdi_environment(pod, spec["name"])
    return env


async def _value_from(worker, spec: dict, ref: dict) -> str | None:
    """fieldRef, resourceFieldRef, configMapKeyRef, secretKeyRef and fileKeyRef values (missing
    optional keys are left unset)."""
    agent = worker.agent
    if "fileKeyRef" in ref:
        r = ref["fileKeyRef"]
        file = os.path.join(agent.volumes.volume_dir(worker.uid, r["volumeName"]), r["path"])
        return (await asyncio.to_thread(env_file, file)).get(r["key"])
    if "fieldRef" in ref:
        path = ref["fieldRef"]["fieldPath"]
        md, pod_spec = worker.pod["metadata"], worker.pod.get("spec") or {}
        simple = {"metadata.name": md["name"], "metadata.namespace": md["namespace"], "metadata.uid": worker.uid,
                  "spec.nodeName": pod_spec.get("nodeName", ""), "spec.serviceAccountName":
                  pod_spec.get("serviceAccountName", ""), "status.podIP": worker.ip, "status.podIPs": worker.ip,
                  "status.hostIP": agent.host_ip, "status.hostIPs": agent.host_ip}
        if path in simple:
            return simple[path]
        m = _KEYED.fullmatch(path)
        return (md.get(m.group(1)) or {}).get(m.group(2)) if m else None
    if "resourceFieldRef" in ref:  # the container's own when it names none
        r = ref["resourceFieldRef"]
        return await _resource(agent.volumes, worker.pod, {**r, "containerName": r.get("containerName") or spec["name"]})
    for kind, plural in (("configMapKeyRef", "configmaps"), ("secretKeyRef", "secrets")):
        if kind in ref:
            r = ref[kind]
            obj = await agent.volumes.watched[plural].get(worker.namespace, r["name"])  # the node's watch
            if obj is None:
                return None
            if kind == "secretKeyRef":
                raw = (obj.get("data") or {}).get(r["key"])
                return base64.b64decode(raw).decode(errors="replace") if raw is not None else None
            return (obj.get("data") or {}).get(r["key"])
    return None


def env_file(path: str) -> dict[str, str]:
    """An env file's variables (EnvFiles): KEY=VALUE lines, blank lines and '#' comments skipped,
    a value's matching surrounding quotes removed, the last of a repeated key winning; a file
    that cannot be read has none."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError):
        return {}
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        out[key.strip()] = value
    return out
