"""PodSecurity admission in `nanokube up`, driven by kubectl: a namespace labelled for the Pod
Security Standards refuses a privileged pod with upstream's message, kubectl prints the warn
mode's warnings and those of a relabel over existing pods; --admission-control-config-file's
PodSecurityConfiguration exempts a namespace; privileged system pods run under the defaults."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from nanokube.cli import main
from tests.e2e.conftest import running_cluster
from tests.e2e.manifests import to_yaml

NS, EXEMPT = "psa-e2e", "psa-exempt"
CONFIG = """apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: PodSecurity
  path: pod-security.yaml
"""
POD_SECURITY = f"""apiVersion: pod-security.admission.config.k8s.io/v1
kind: PodSecurityConfiguration
defaults:
  enforce: privileged
exemptions:
  namespaces: [{EXEMPT}]
"""


def _pod(name: str, namespace: str, **security) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
            "spec": {"containers": [{"name": "app", "image": "busybox", **({"securityContext": security} if security else {})}]}}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    d = tmp_path_factory.mktemp("psa")
    (d / "admission.yaml").write_text(CONFIG)
    (d / "pod-security.yaml").write_text(POD_SECURITY)
    with running_cluster("psa", ("--admission-control-config-file", str(d / "admission.yaml"))) as c:
        yield c


def test_kubectl_shows_the_warning_and_the_refusal(cluster):
    labelled = {}
    for ns in (NS, EXEMPT):
        cluster.kubectl("create", "namespace", ns)
        labelled[ns] = cluster.kubectl("label", "namespace", ns, "pod-security.kubernetes.io/enforce=baseline",
                                       "pod-security.kubernetes.io/warn=restricted")
    made = cluster.kubectl("apply", "-f", "-", input=to_yaml([_pod("web", NS)]))
    refused = cluster.kubectl("apply", "-f", "-", input=to_yaml([_pod("priv", NS, privileged=True)]), check=False)
    exempt = cluster.kubectl("apply", "-f", "-", input=to_yaml([_pod("priv", EXEMPT, privileged=True)]))
    relabel = cluster.kubectl("label", "--overwrite", "namespace", NS, "pod-security.kubernetes.io/enforce=restricted")
    bad = cluster.kubectl("label", "namespace", NS, "pod-security.kubernetes.io/audit=strict", check=False)

    assert 'Warning: would violate PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container ' \
           '"app" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities' in made.stderr
    assert "pod/web created" in made.stdout
    assert refused.returncode == 1
    assert ('pods "priv" is forbidden: violates PodSecurity "baseline:latest": privileged (container "app" must not '
            'set securityContext.privileged=true)') in refused.stderr
    assert "pod/priv created" in exempt.stdout and "Warning" not in exempt.stderr
    assert "Warning" not in labelled[NS].stderr
    assert ('Warning: namespace "psa-exempt" is exempt from Pod Security, and the policy (enforce=baseline:latest, '
            'warn=restricted:latest) will be ignored') in labelled[EXEMPT].stderr
    assert ('Warning: existing pods in namespace "psa-e2e" violate the new PodSecurity enforce level '
            '"restricted:latest"') in relabel.stderr
    assert "Warning: web: allowPrivilegeEscalation != false, unrestricted capabilities, runAsNonRoot != true, " \
           "seccompProfile" in relabel.stderr
    assert bad.returncode == 1 and 'Invalid value: "strict": must be one of privileged, baseline, restricted' in bad.stderr
    metrics = cluster.kubectl("get", "--raw", "/metrics").stdout.splitlines()
    assert 'pod_security_evaluations_total{decision="deny",mode="enforce",policy_level="baseline",' \
           'policy_version="latest",request_operation="create",resource="pod",subresource=""} 1' in metrics
    assert 'pod_security_exemptions_total{request_operation="create",resource="pod",subresource=""} 1' in metrics


def test_privileged_system_workloads_run_under_the_defaults(cluster):
    """kube-system carries no PodSecurity label, as upstream's: the privileged defaults admit a
    DaemonSet of privileged host-network pods (a node agent's driver), whose controller's pods run."""
    ds = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "psa-driver", "namespace": "kube-system"},
          "spec": {"selector": {"matchLabels": {"app": "psa-driver"}}, "template": {
              "metadata": {"labels": {"app": "psa-driver"}},
              "spec": {"hostNetwork": True, "containers": [
                  {"name": "driver", "image": "busybox", "command": ["sleep", "infinity"],
                   "securityContext": {"privileged": True}}]}}}}
    made = cluster.kubectl("apply", "-f", "-", input=to_yaml([ds]))
    deadline = time.monotonic() + 60
    while not (ready := cluster.kubectl_json("get", "daemonset", "psa-driver", "-n", "kube-system")
               ["status"].get("numberReady")):
        assert time.monotonic() < deadline, "the DaemonSet's pods never ran"
        time.sleep(0.5)
    assert "Warning" not in made.stderr and ready >= 1


def test_a_bad_configuration_stops_up(tmp_path):
    (tmp_path / "admission.yaml").write_text(CONFIG)
    (tmp_path / "pod-security.yaml").write_text(POD_SECURITY.replace("enforce: privileged", "enforce: strict"))
    r = subprocess.run([sys.executable, "-m", "nanokube.cli", "up", "--port", "0", "--data-dir", str(tmp_path / "d"),
                        "--admission-control-config-file", str(tmp_path / "admission.yaml")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert '--admission-control-config-file: couldn\'t init admission plugin "PodSecurity": defaults[enforce]' in r.stderr, r.stderr


PS = 'couldn\'t init admission plugin "PodSecurity": '


@pytest.mark.parametrize("admission, pod_security, said", [
    (CONFIG.replace("- name: PodSecurity\n  path: pod-security.yaml", "  name: PodSecurity"), POD_SECURITY,
     "failed to read plugin config: json: cannot unmarshal object into Go struct field AdmissionConfiguration.plugins "
     "of type []v1.AdmissionPluginConfiguration"),
    (CONFIG.replace("path: pod-security.yaml", "path: 5"), POD_SECURITY,
     "failed to read plugin config: json: cannot unmarshal number into Go struct field "
     "AdmissionPluginConfiguration.plugins.path of type string"),
    # pod-security-admission's codec is strict: a key its file repeats is refused (before, the later one won)
    (CONFIG, POD_SECURITY + "defaults: {}\n",
     PS + "strict decoding error: error converting YAML to JSON: yaml: unmarshal errors:\n"
     '  line 7: key "defaults" already set in map'),
    (CONFIG, POD_SECURITY.replace(f"namespaces: [{EXEMPT}]", "usernames: admin"),
     PS + "json: cannot unmarshal string into Go struct field PodSecurityExemptions.exemptions.usernames of type "
     "[]string"),
    (CONFIG, POD_SECURITY.replace("  enforce: privileged", "- enforce"),
     PS + "json: cannot unmarshal array into Go struct field PodSecurityConfiguration.defaults "
     "of type v1.PodSecurityDefaults"),
    # and it refuses the fields it does not know, at the top level as under defaults, in one error with
    # the repeated keys (before, a misspelled top-level field was dropped), in a file of its own or embedded
    (CONFIG, POD_SECURITY.replace("exemptions:", "exemption:") + "defaults: {enforce: privileged, enforcee: x}\n",
     PS + "strict decoding error: error converting YAML to JSON: yaml: unmarshal errors:\n"
     '  line 7: key "defaults" already set in map, unknown field "defaults.enforcee", unknown field "exemption"'),
    (CONFIG.replace("  path: pod-security.yaml", "  configuration:\n    apiVersion: pod-security.admission.config.k8s"
                    ".io/v1\n    kind: PodSecurityConfiguration\n    default: {}"), POD_SECURITY,
     PS + 'strict decoding error: unknown field "default"'),
    # a file whose aliases expand a billionfold is refused as go-yaml refuses it, not walked
    (CONFIG + "".join(f"x{i}: &x{i} [{','.join([f'*x{i - 1}' if i else '0'] * 9)}]\n" for i in range(10)), POD_SECURITY,
     "failed to read plugin config: error converting YAML to JSON: yaml: document contains excessive aliasing"),
    # (fuzz62: an apiVersion that is a list was a TypeError, a traceback from `up`)
    (CONFIG, POD_SECURITY.replace("apiVersion: pod-security.admission.config.k8s.io/v1", "apiVersion: [x]"),
     PS + "couldn't get version/kind; json parse error: json: cannot unmarshal array into Go struct field .apiVersion "
     "of type string"),
    # a version neither scheme registers is the serializer's kind error, naming the scheme
    (CONFIG.replace("config.k8s.io/v1", "config.k8s.io/v2"), POD_SECURITY,
     'failed to read plugin config: no kind "AdmissionConfiguration" is registered for version '
     '"apiserver.config.k8s.io/v2" in scheme "pkg/runtime/scheme.go:100"'),
    (CONFIG, POD_SECURITY.replace("config.k8s.io/v1\n", "config.k8s.io/v1beta2\n"),
     PS + 'no kind "PodSecurityConfiguration" is registered for version "pod-security.admission.config.k8s.io/v1beta2" '
     'in scheme "k8s.io/pod-security-admission/admission/api/scheme/scheme.go:29"'),
    # v1alpha1 is still decoded in 1.37 (its own package named by the decoder)
    (CONFIG, POD_SECURITY.replace("config.k8s.io/v1\n", "config.k8s.io/v1alpha1\n").replace("  enforce: privileged", "- enforce"),
     PS + "json: cannot unmarshal array into Go struct field PodSecurityConfiguration.defaults "
     "of type v1alpha1.PodSecurityDefaults"),
])
def test_a_field_of_another_json_type_stops_up_in_the_decoders_words(tmp_path, capsys, admission, pod_security, said):
    """(`up` refuses the file before it starts anything: cli.main in this process, no `up` process each)"""
    (tmp_path / "admission.yaml").write_text(admission)
    (tmp_path / "pod-security.yaml").write_text(pod_security)
    assert main(["up", "--port", "0", "--data-dir", str(tmp_path / "d"),
                 "--admission-control-config-file", str(tmp_path / "admission.yaml")]) == 2
    err = capsys.readouterr().err
    assert said in err, err
