"""PodSecurity admission over HTTP: namespace labels pick the Pod Security Standards level each
mode (enforce, audit, warn) judges pods and pod templates by."""

from __future__ import annotations

import orjson

from tests.node import ManualClock
from tests.served import sent, served

NS = "/api/v1/namespaces"
PSA = "pod-security.kubernetes.io/"


def namespace(name: str, **labels: str) -> dict:
    return {"metadata": {"name": name, "labels": {PSA + k.replace("_", "-"): v for k, v in labels.items()}}}


def pod(name: str, **spec) -> dict:
    return {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "busybox"}], **spec}}


def restricted_pod(name: str) -> dict:
    return pod(name, securityContext={"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
               containers=[{"name": "c", "image": "busybox", "securityContext": {
                   "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}])


RESTRICTED_DETAIL = ('allowPrivilegeEscalation != false (container "c" must set securityContext.allowPrivilegeEscalation'
                     '=false), unrestricted capabilities (container "c" must set securityContext.capabilities.drop=["ALL"]),'
                     ' runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true), '
                     'seccompProfile (pod or container "c" must set securityContext.seccompProfile.type to '
                     '"RuntimeDefault" or "Localhost")')


async def test_enforce_refuses_a_pod_with_upstreams_message_and_admits_a_compliant_one(tmp_path):
    async with served(tmp_path) as (_, api):
        assert (await sent(api, "POST", NS, namespace("r", enforce="restricted")))[0] == 201
        code, body, warnings = await sent(api, "POST", f"{NS}/r/pods", pod("x"))
        ok = await sent(api, "POST", f"{NS}/r/pods", restricted_pod("y"))
        privileged = pod("p", hostNetwork=True, containers=[
            {"name": "c", "image": "busybox", "securityContext": {"privileged": True}}])
        baseline = await sent(api, "POST", NS, namespace("b", enforce="baseline", enforce_version="v1.30"))
        refused_baseline = await sent(api, "POST", f"{NS}/b/pods", privileged)
        open_ns = await sent(api, "POST", f"{NS}/default/pods", privileged)
    assert (code, body["reason"]) == (403, "Forbidden")
    assert body["message"] == f'pods "x" is forbidden: violates PodSecurity "restricted:latest": {RESTRICTED_DETAIL}'
    assert warnings == []  # a refused request gets no warning besides
    assert ok[:1] == (201,) and ok[2] == []
    assert baseline[0] == 201 and refused_baseline[0] == 403
    assert refused_baseline[1]["message"] == (
        'pods "p" is forbidden: violates PodSecurity "baseline:v1.30": host namespaces (hostNetwork=true), '
        'privileged (container "c" must not set securityContext.privileged=true)')
    assert open_ns[0] == 201 and open_ns[2] == []  # unlabelled: privileged, as upstream's default


async def test_warn_and_audit_judge_pods_and_workload_templates_without_refusing(tmp_path):
    log = tmp_path / "audit.log"
    async with served(tmp_path, audit_log_path=str(log)) as (_, api):
        await sent(api, "POST", NS, namespace("w", warn="restricted", audit="baseline", enforce="privileged"))
        made = await sent(api, "POST", f"{NS}/w/pods", pod("x", hostPID=True))
        deploy = {"metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {
            "metadata": {"labels": {"a": "b"}}, "spec": pod("t")["spec"]}}}
        made_deploy = await sent(api, "POST", "/apis/apps/v1/namespaces/w/deployments", deploy)
        cron = {"metadata": {"name": "cj"}, "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": {
            "spec": {**pod("t")["spec"], "restartPolicy": "Never", "hostIPC": True}}}}}}
        made_cron = await sent(api, "POST", "/apis/batch/v1/namespaces/w/cronjobs", cron)
        scaled = await sent(api, "PATCH", "/apis/apps/v1/namespaces/w/deployments/d", {"spec": {"replicas": 3}},
                            "application/merge-patch+json")
    assert made[0] == 201
    assert made[2] == ['299 - "would violate PodSecurity \\"restricted:latest\\": host namespaces (hostPID=true), '
                       + RESTRICTED_DETAIL.replace('"', '\\"') + '"']
    assert made_deploy[0] == 201 and len(made_deploy[2]) == 1
    assert 'would violate PodSecurity \\"restricted:latest\\": allowPrivilegeEscalation != false' in made_deploy[2][0]
    assert made_cron[0] == 201 and "host namespaces (hostIPC=true)" in made_cron[2][0]
    assert scaled[0] == 200 and len(scaled[2]) == 1  # upstream judges a workload's every update
    events = [orjson.loads(line) for line in log.read_bytes().splitlines()]
    (created,) = [e for e in events if e["verb"] == "create" and e["objectRef"].get("resource") == "pods"]
    assert created["annotations"][PSA + "audit-violations"] == (
        'would violate PodSecurity "baseline:latest": host namespaces (hostPID=true)')
    assert created["annotations"][PSA + "enforce-policy"] == "privileged:latest"


async def test_pod_updates_are_judged_only_when_they_change_images_or_add_ephemeral_containers(tmp_path):
    async with served(tmp_path) as (server, api):
        await sent(api, "POST", NS, namespace("u"))
        await sent(api, "POST", f"{NS}/u/pods", pod("x", hostNetwork=True))
        await sent(api, "PATCH", f"{NS}/u", {"metadata": {"labels": {PSA + "enforce": "baseline"}}},
                   "application/merge-patch+json")
        labelled = await sent(api, "PATCH", f"{NS}/u/pods/x", {"metadata": {"labels": {"k": "v"}}},
                              "application/merge-patch+json")
        image = await sent(api, "PATCH", f"{NS}/u/pods/x", {"spec": {"containers": [{"name": "c", "image": "nginx"}]}},
                           "application/strategic-merge-patch+json")
        status = await sent(api, "PATCH", f"{NS}/u/pods/x/status", {"status": {"phase": "Running"}},
                            "application/merge-patch+json")
        debug = await sent(api, "PATCH", f"{NS}/u/pods/x/ephemeralcontainers", {"spec": {"ephemeralContainers": [
            {"name": "dbg", "image": "busybox", "securityContext": {"privileged": True}}]}},
            "application/strategic-merge-patch+json")
        metrics = server.rest.admission.pod_security.metrics.evaluations.values
    assert labelled[0] == 200 and status[0] == 200
    assert image[0] == 403 and 'violates PodSecurity "baseline:latest": host namespaces (hostNetwork=true)' in image[1]["message"]
    assert debug[0] == 403 and 'privileged (container "dbg" must not set' in debug[1]["message"]
    assert metrics[("deny", "baseline", "latest", "enforce", "update", "pod", "ephemeralcontainers")] == 1


async def test_relabelling_a_namespace_warns_of_its_existing_pods(tmp_path):
    async with served(tmp_path) as (_, api):
        await sent(api, "POST", NS, namespace("n"))
        for name in ("b", "a", "c"):
            await sent(api, "POST", f"{NS}/n/pods", pod(name))
        await sent(api, "POST", f"{NS}/n/pods", pod("h", hostNetwork=True))
        await sent(api, "POST", f"{NS}/n/pods", restricted_pod("ok"))
        code, _, warnings = await sent(api, "PATCH", f"{NS}/n", {"metadata": {"labels": {PSA + "enforce": "restricted"}}},
                                       "application/merge-patch+json")
        again = await sent(api, "PATCH", f"{NS}/n", {"metadata": {"labels": {"other": "x"}}}, "application/merge-patch+json")
        relaxed = await sent(api, "PATCH", f"{NS}/n", {"metadata": {"labels": {PSA + "enforce": "baseline"}}},
                             "application/merge-patch+json")
    reasons = "allowPrivilegeEscalation != false, unrestricted capabilities, runAsNonRoot != true, seccompProfile"
    assert code == 200
    assert warnings == [
        '299 - "existing pods in namespace \\"n\\" violate the new PodSecurity enforce level \\"restricted:latest\\""',
        f'299 - "a (and 2 other pods): {reasons}"', f'299 - "h: host namespaces, {reasons}"']
    assert again[0] == 200 and again[2] == []  # the enforce level did not change
    assert relaxed[0] == 200 and relaxed[2] == []  # nor is a relaxed one judged


async def test_invalid_labels_are_refused_on_namespaces_and_enforce_the_strictest_policy(tmp_path):
    async with served(tmp_path) as (server, api):
        refused = await sent(api, "POST", NS, namespace("bad", enforce="strict"))
        await sent(api, "POST", NS, namespace("v", enforce="baseline"))
        bad_version = await sent(api, "PATCH", f"{NS}/v", {"metadata": {"labels": {PSA + "enforce-version": "1.30"}}},
                                 "application/merge-patch+json")
        # a namespace labelled before the plugin judged labels: its pods meet restricted:latest
        ns = server.rest.cache.get(server.index.get("", "v1", "namespaces").key(None, "v")).obj
        ns["metadata"]["labels"][PSA + "enforce"] = "nonsense"
        strictest = await sent(api, "POST", f"{NS}/v/pods", pod("x"))
        errors = server.rest.admission.pod_security.metrics.errors.values
    assert refused[0] == 422
    assert refused[1]["message"] == ('Namespace "bad" is invalid: metadata.labels[pod-security.kubernetes.io/enforce]: '
                                     'Invalid value: "strict": must be one of privileged, baseline, restricted')
    assert bad_version[0] == 422 and 'must be "latest" or "v1.x"' in bad_version[1]["message"]
    assert strictest[0] == 403 and 'violates PodSecurity "restricted:latest"' in strictest[1]["message"]
    assert errors[("false", "create", "pod", "")] == 1


async def test_a_version_minor_past_gos_int_is_refused_as_upstreams_atoi_refuses_it(tmp_path):
    async with served(tmp_path) as (_, api):
        widest = await sent(api, "POST", NS, namespace("w", enforce="baseline", enforce_version=f"v1.{2**63 - 1}"))
        past = await sent(api, "POST", NS, namespace("p", enforce="baseline", enforce_version=f"v1.{2**63}"))
    assert widest[0] == 201
    assert past[0] == 422 and past[1]["message"] == (
        'Namespace "p" is invalid: metadata.labels[pod-security.kubernetes.io/enforce-version]: '
        f'Invalid value: "v1.{2**63}": must be "latest" or "v1.x"')


async def test_restricted_names_a_host_path_once_its_restricted_volumes_check_replacing_baselines(tmp_path):
    host = pod("h", volumes=[{"name": "v", "hostPath": {"path": "/"}}])
    async with served(tmp_path) as (_, api):
        await sent(api, "POST", NS, namespace("r", enforce="restricted"))
        refused = await sent(api, "POST", f"{NS}/r/pods", host)
    assert refused[0] == 403 and refused[1]["message"].endswith(
        'restricted volume types (volume "v" uses restricted volume type "hostPath"), runAsNonRoot != true (pod or '
        'container "c" must set securityContext.runAsNonRoot=true), seccompProfile (pod or container "c" must set '
        'securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")')
    assert "hostPath volumes" not in refused[1]["message"]


async def test_versions_judge_by_the_checks_of_their_release(tmp_path):
    """runAsUser=0 is restricted from v1.23; hostProbesAndHostLifecycle is baseline from v1.34."""
    root = restricted_pod("root")
    root["spec"]["securityContext"]["runAsUser"] = 0
    probe = pod("probe", containers=[{"name": "c", "image": "busybox", "readinessProbe": {
        "httpGet": {"host": "10.0.0.1", "port": 80}}}])
    async with served(tmp_path) as (_, api):
        await sent(api, "POST", NS, namespace("old", enforce="restricted", enforce_version="v1.22"))
        await sent(api, "POST", NS, namespace("new", enforce="restricted", enforce_version="v1.23"))
        await sent(api, "POST", NS, namespace("b33", enforce="baseline", enforce_version="v1.33"))
        await sent(api, "POST", NS, namespace("b99", enforce="baseline", enforce_version="v1.99"))
        old = await sent(api, "POST", f"{NS}/old/pods", root)
        new = await sent(api, "POST", f"{NS}/new/pods", root)
        b33 = await sent(api, "POST", f"{NS}/b33/pods", probe)
        b99 = await sent(api, "POST", f"{NS}/b99/pods", probe)
    assert old[0] == 201
    assert new[0] == 403 and new[1]["message"].endswith(
        'violates PodSecurity "restricted:v1.23": runAsUser=0 (pod must not set runAsUser=0)')
    assert b33[0] == 201
    assert b99[0] == 403 and b99[1]["message"].endswith(
        'violates PodSecurity "baseline:v1.99": probe or lifecycle host (container "c" uses probe or lifecycle host '
        '"10.0.0.1")')


async def test_configured_defaults_and_exemptions(tmp_path):
    from nanokube.apiserver.admission.pod_security import Config

    async with served(tmp_path) as (server, api):
        server.rest.admission.pod_security.configure(Config.parse({
            "apiVersion": "pod-security.admission.config.k8s.io/v1", "kind": "PodSecurityConfiguration",
            "defaults": {"enforce": "baseline"},
            "exemptions": {"namespaces": ["kube-system"], "runtimeClasses": ["trusted"]}}))
        await sent(api, "POST", "/apis/node.k8s.io/v1/runtimeclasses", {"metadata": {"name": "trusted"}, "handler": "h"})
        defaulted = await sent(api, "POST", f"{NS}/default/pods", pod("x", hostPID=True))
        exempt_ns = await sent(api, "POST", f"{NS}/kube-system/pods", pod("x", hostPID=True))
        exempt_rc = await sent(api, "POST", f"{NS}/default/pods", pod("y", hostPID=True, runtimeClassName="trusted"))
        server.rest.admission.pod_security.configure(Config.parse({
            "apiVersion": "pod-security.admission.config.k8s.io/v1", "kind": "PodSecurityConfiguration",
            "defaults": {"enforce": "baseline"}, "exemptions": {"usernames": ["kubernetes-super-admin"]}}))
        exempt_user = await sent(api, "POST", f"{NS}/default/pods", pod("z", hostPID=True))  # the kubeconfig's user
        exemptions = server.rest.admission.pod_security.metrics.exemptions.values
    assert defaulted[0] == 403 and 'violates PodSecurity "baseline:latest"' in defaulted[1]["message"]
    assert exempt_ns[0] == 201 and exempt_rc[0] == 201 and exempt_user[0] == 201
    assert exemptions[("create", "pod", "")] == 3


async def test_disabled_plugin_judges_nothing(tmp_path):
    async with served(tmp_path, ("ServiceAccount", "PodSecurity")) as (_, api):
        await sent(api, "POST", NS, namespace("r", enforce="restricted"))
        made = await sent(api, "POST", f"{NS}/r/pods", pod("x", hostPID=True))
    assert made[0] == 201


async def test_baseline_checks_in_upstreams_order_and_windows_pods_spared_linux_only_checks(tmp_path):
    loose = pod("loose", volumes=[{"name": "h", "hostPath": {"path": "/etc"}}],
                securityContext={"seccompProfile": {"type": "Unconfined"}, "sysctls": [{"name": "kernel.msgmax", "value": "1"}]},
                containers=[{"name": "c", "image": "busybox", "ports": [{"containerPort": 80, "hostPort": 80}],
                             "securityContext": {"capabilities": {"add": ["NET_ADMIN", "CHOWN"]},
                                                 "seLinuxOptions": {"type": "spc_t"}}}])
    windows = pod("win", os={"name": "windows"})
    async with served(tmp_path) as (_, api):
        await sent(api, "POST", NS, namespace("b", enforce="baseline"))
        await sent(api, "POST", NS, namespace("r", enforce="restricted"))
        baseline = await sent(api, "POST", f"{NS}/b/pods", loose)
        spared = await sent(api, "POST", f"{NS}/r/pods", windows)
        older = await sent(api, "POST", NS, namespace("old", enforce="restricted", enforce_version="v1.24"))
        unspared = await sent(api, "POST", f"{NS}/old/pods", windows)
    assert older[0] == 201
    assert baseline[0] == 403 and baseline[1]["message"] == (
        'pods "loose" is forbidden: violates PodSecurity "baseline:latest": non-default capabilities (container "c" '
        'must not include "NET_ADMIN" in securityContext.capabilities.add), hostPath volumes (volume "h"), hostPort '
        '(container "c" uses hostPort 80), seLinuxOptions (container "c" set forbidden securityContext.seLinuxOptions: '
        'type "spc_t"), seccompProfile (pod must not set securityContext.seccompProfile.type to "Unconfined"), '
        'forbidden sysctls (kernel.msgmax)')
    assert spared[0] == 403 and spared[1]["message"].endswith(
        'violates PodSecurity "restricted:latest": runAsNonRoot != true (pod or container "c" must set '
        'securityContext.runAsNonRoot=true)')
    assert unspared[0] == 403 and "allowPrivilegeEscalation != false" in unspared[1]["message"]


class _SlowReads(ManualClock):
    """Virtual time that a reading of the monotonic clock moves on by `step` seconds (while set):
    as if each pod a relabel evaluates took that long."""

    step = 0.0

    def monotonic(self) -> float:
        self._set(self._mono + self.step)
        return self._mono


async def test_a_relabel_stops_evaluating_existing_pods_after_its_time_budget_and_says_so(tmp_path):
    """Upstream's EvaluatePodsInNamespace gives the existing pods one second: with each pod's
    evaluation taking 0.3 s, four of six are judged (the fourth ends past the budget)."""
    clock = _SlowReads()
    async with served(tmp_path, clock=clock) as (_, api):
        await sent(api, "POST", NS, namespace("n"))
        for i in range(6):
            await sent(api, "POST", f"{NS}/n/pods", pod(f"p{i}", hostNetwork=True))
        clock.step = 0.3
        code, _, warnings = await sent(api, "PATCH", f"{NS}/n", {"metadata": {"labels": {PSA + "enforce": "baseline"}}},
                                       "application/merge-patch+json")
    assert code == 200
    assert warnings == [
        '299 - "new PodSecurity enforce level only checked against the first 4 of 6 existing pods"',
        '299 - "existing pods in namespace \\"n\\" violate the new PodSecurity enforce level \\"baseline:latest\\""',
        '299 - "p0 (and 3 other pods): host namespaces"']


async def test_apparmor_proc_mount_user_namespaces_and_sysctls_as_upstreams_checks(tmp_path):
    """appArmorProfile judges the fields at every version, in one sentence with the annotations;
    from v1.35 a pod with hostUsers: false is spared baseline's procMount and restricted's
    runAsNonRoot and runAsUser (restricted keeps procMount by procMount_restricted); v1.37 allows
    two more sysctls."""
    apparmor = pod("aa", securityContext={"appArmorProfile": {"type": "Unconfined"}},
                   containers=[{"name": "c", "image": "busybox",
                                "securityContext": {"appArmorProfile": {"type": "Unconfined"}}}])
    apparmor["metadata"]["annotations"] = {"container.apparmor.security.beta.kubernetes.io/c": "unconfined"}
    userns = restricted_pod("userns")
    userns["spec"]["hostUsers"] = False
    del userns["spec"]["securityContext"]["runAsNonRoot"]
    userns["spec"]["containers"][0]["securityContext"]["runAsUser"] = 0
    unmasked = pod("unmasked", hostUsers=False, containers=[{"name": "c", "image": "busybox",
                                                              "securityContext": {"procMount": "Unmasked"}}])
    sysctl = pod("sysctl", securityContext={"sysctls": [{"name": "net.ipv4.tcp_notsent_lowat", "value": "16384"}]})
    async with served(tmp_path) as (_, api):
        for name, labels in (("b29", {"enforce": "baseline", "enforce_version": "v1.29"}), ("b", {"enforce": "baseline"}),
                             ("b34", {"enforce": "baseline", "enforce_version": "v1.34"}),
                             ("b36", {"enforce": "baseline", "enforce_version": "v1.36"}),
                             ("r", {"enforce": "restricted"}), ("r34", {"enforce": "restricted", "enforce_version": "v1.34"})):
            await sent(api, "POST", NS, namespace(name, **labels))
        refused = {ns: await sent(api, "POST", f"{NS}/{ns}/pods", p) for ns, p in (
            ("b29", apparmor), ("b34", unmasked), ("r", unmasked), ("r34", userns), ("b36", sysctl))}
        admitted = [await sent(api, "POST", f"{NS}/{ns}/pods", p) for ns, p in (("b", unmasked), ("r", userns), ("b", sysctl))]
    assert [code for code, _, _ in admitted] == [201, 201, 201]
    assert {ns: (code, body["message"].partition(": violates ")[2]) for ns, (code, body, _) in refused.items()} == {
        "b29": (403, 'PodSecurity "baseline:v1.29": forbidden AppArmor profiles (pod and container "c" and annotation '
                     'must not set AppArmor profile type to "Unconfined", '
                     '"container.apparmor.security.beta.kubernetes.io/c="unconfined"")'),
        "b34": (403, 'PodSecurity "baseline:v1.34": procMount (container "c" must not set securityContext.procMount to '
                     '"Unmasked")'),
        "r": (403, 'PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container "c" must set '
                   'securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container "c" must set '
                   'securityContext.capabilities.drop=["ALL"]), procMount (container "c" must not set '
                   'securityContext.procMount to "Unmasked"), seccompProfile (pod or container "c" must set '
                   'securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")'),
        "r34": (403, 'PodSecurity "restricted:v1.34": runAsNonRoot != true (pod or container "c" must set '
                     'securityContext.runAsNonRoot=true), runAsUser=0 (container "c" must not set runAsUser=0)'),
        "b36": (403, 'PodSecurity "baseline:v1.36": forbidden sysctls (net.ipv4.tcp_notsent_lowat)')}
