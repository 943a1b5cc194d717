"""ValidatePodSpec rules a pod's admission plugins usually refuse first, met by templates
(found by the fuzzer on CronJobs and StatefulSets)."""

import pytest

from nanokube.registry.core_pods import validate_pod_spec

DNS = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start "
       "and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
       "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")


@pytest.mark.parametrize("extra, errors", [
    ({"runtimeClassName": "gvisor", "preemptionPolicy": "Never", "os": {"name": "linux"}}, []),
    ({"runtimeClassName": "*"}, [f'template.spec.runtimeClassName: Invalid value: "*": {DNS}']),
    ({"runtimeClassName": ""}, [f'template.spec.runtimeClassName: Invalid value: "": {DNS}']),
    ({"preemptionPolicy": "bogus"},
     ['template.spec.preemptionPolicy: Unsupported value: "bogus": supported values: "PreemptLowerPriority", "Never"']),
    ({"preemptionPolicy": ""}, ["template.spec.preemptionPolicy: Required value"]),
    ({"os": {"name": "plan9"}}, ['template.spec.os: Unsupported value: "plan9": supported values: "linux", "windows"']),
    ({"os": {}}, ["template.spec.os.name: Required value: cannot be empty"]),
])
def test_runtime_class_preemption_policy_and_os_are_validated(extra, errors):
    spec = {"containers": [{"name": "c", "image": "i", "imagePullPolicy": "Always", "terminationMessagePolicy": "File"}],
            "restartPolicy": "Always", "dnsPolicy": "ClusterFirst", **extra}
    assert [str(e) for e in validate_pod_spec(spec, "template.spec")] == errors


def test_an_ephemeral_volume_claim_template_may_only_carry_labels_and_annotations():
    """ValidatePersistentVolumeClaimTemplate's ValidateTemplateObjectMeta."""
    template = {"metadata": {"name": "x", "annotations": {"a": "b"}},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}
    spec = {"containers": [{"name": "c", "image": "i", "imagePullPolicy": "Always", "terminationMessagePolicy": "File"}],
            "restartPolicy": "Always", "dnsPolicy": "ClusterFirst",
            "volumes": [{"name": "v", "ephemeral": {"volumeClaimTemplate": template}}]}
    assert [str(e) for e in validate_pod_spec(spec, "spec")] == [
        "spec.volumes[0].ephemeral.volumeClaimTemplate.metadata.name: Forbidden: cannot be set"]
