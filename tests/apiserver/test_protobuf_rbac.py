"""The protobuf table for rbac/v1, authorization/v1 and authentication/v1, and the script that
recovers the .proto files it is generated from out of a kubectl binary."""

import gzip
import importlib.util
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from nanokube.apiserver.protobuf import decode
from tests.apiserver.test_protobuf import body, lfield, meta, vfield

SCRIPTS = Path(__file__).parents[2] / "scripts"
TABLE = Path(__file__).parents[2] / "nanokube" / "apiserver" / "protobuf_fields.json"
G = "rbac.authorization.k8s.io"


def _script(name: str):
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _descriptor(name: str, package: str) -> bytes:
    """A FileDescriptorProto holding `message Thing` with a value string, a repeated message and a map."""
    nullable_false = lfield(8, vfield(65001, 0))
    string = lfield(1, "name") + vfield(3, 1) + vfield(4, 1) + vfield(5, 9) + nullable_false
    parts = lfield(1, "parts") + vfield(3, 2) + vfield(4, 3) + vfield(5, 11) + lfield(6, f".{package}.Part")
    labels = lfield(1, "labels") + vfield(3, 3) + vfield(4, 3) + vfield(5, 11) + lfield(6, f".{package}.Thing.LabelsEntry")
    entry = (lfield(1, "LabelsEntry") + lfield(2, lfield(1, "key") + vfield(3, 1) + vfield(5, 9))
             + lfield(2, lfield(1, "value") + vfield(3, 2) + vfield(5, 9)) + lfield(7, vfield(7, 1)))
    thing = lfield(1, "Thing") + lfield(2, string) + lfield(2, parts) + lfield(2, labels) + lfield(3, entry)
    return lfield(1, name) + lfield(2, package) + lfield(3, "k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto") + lfield(4, thing)


def test_extractor_finds_gzipped_k8s_descriptors_and_renders_parsable_proto():
    extract, gen = _script("extract_kubectl_protos"), _script("gen_protobuf_fields")
    mine = _descriptor("k8s.io/api/demo/v1/generated.proto", "k8s.io.api.demo.v1")
    other = _descriptor("google/demo.proto", "google.demo")
    binary = b"\x1f\x8b\x08\x00junk" + gzip.compress(mine) + b"\x00" * 7 + gzip.compress(other) + b"tail"
    found = extract.embedded_descriptors(binary)
    assert found == {"k8s.io/api/demo/v1/generated.proto": mine}
    package, messages = gen.parse_proto(extract.render_file(mine))
    assert package == "k8s.io.api.demo.v1"
    assert messages == {"Thing": [
        ("name", 1, "string", "optional", {"gogoproto.nullable": "false"}),
        ("parts", 2, "k8s.io.api.demo.v1.Part", "repeated", {}),
        ("labels", 3, "string", "map:string", {}),
    ]}


def test_extractor_rejects_nested_messages_it_cannot_render():
    extract = _script("extract_kubectl_protos")
    nested = lfield(4, lfield(1, "Outer") + lfield(3, lfield(1, "Inner")))
    with pytest.raises(extract.DescriptorError, match="Inner in Outer is not a map entry"):
        extract.render_file(lfield(1, "k8s.io/x.proto") + lfield(2, "k8s.io.x") + nested)


def _kubectl_v132() -> bool:
    if not shutil.which("kubectl"):
        return False
    out = subprocess.run(["kubectl", "version", "--client"], capture_output=True, text=True, check=False).stdout
    return "v1.32." in out


@pytest.mark.skipif(not _kubectl_v132(), reason="needs a kubectl v1.32 (the last with embedded descriptors)")
def test_kubectl_v132_descriptors_agree_with_the_committed_table(tmp_path):
    """The committed table comes from kubectl 1.37's Go type data (scripts/kubectl_go_types.py);
    1.32's embedded descriptors, read by the older route, give every message they share the same
    field numbers, JSON names and types (flags differ: 1.32's "o" was a guess from gogo options)."""
    extract, gen = _script("extract_kubectl_protos"), _script("gen_protobuf_fields")
    for name, raw in extract.embedded_descriptors(Path(shutil.which("kubectl")).read_bytes()).items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(extract.render_file(raw))
    old, new = gen.build_table(tmp_path), json.loads(TABLE.read_text())
    shared = old.keys() & new.keys()
    assert len(shared) > 400
    for message in shared:
        for number, (name, ftype, _flags) in old[message].items():
            if number in new[message]:
                assert new[message][number][:2] == [name, ftype], (message, number)


def test_rbac_objects_decode():
    rule = lfield(1, "get") + lfield(1, "list") + lfield(2, "") + lfield(3, "pods")
    role = decode(body(f"{G}/v1", "Role", meta("r", ns=lfield(3, "default")) + lfield(2, rule)))
    assert role["rules"] == [{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]}]
    assert role["metadata"] == {"name": "r", "namespace": "default"}
    subject = lfield(1, "ServiceAccount") + lfield(2, "") + lfield(3, "sa") + lfield(4, "default")
    ref = lfield(1, G) + lfield(2, "ClusterRole") + lfield(3, "view")
    crb = decode(body(f"{G}/v1", "ClusterRoleBinding", meta("b") + lfield(2, subject) + lfield(3, ref)))
    assert crb["subjects"] == [{"kind": "ServiceAccount", "name": "sa", "namespace": "default"}]
    assert crb["roleRef"] == {"apiGroup": G, "kind": "ClusterRole", "name": "view"}


def test_authentication_and_authorization_objects_decode():
    bound = lfield(1, "Pod") + lfield(2, "v1") + lfield(3, "p") + lfield(4, "1234")
    spec = lfield(1, "api") + vfield(4, 600) + lfield(3, bound)
    tr = decode(body("authentication.k8s.io/v1", "TokenRequest", meta("sa") + lfield(2, spec)))
    assert tr["spec"] == {"audiences": ["api"], "expirationSeconds": 600,
                          "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "p", "uid": "1234"}}
    attrs = lfield(2, "get") + lfield(5, "pods")
    extra = lfield(1, "scopes") + lfield(2, lfield(1, "a"))
    sar_spec = lfield(1, attrs) + lfield(3, "bob") + lfield(4, "devs") + lfield(5, extra)
    sar = decode(body("authorization.k8s.io/v1", "SubjectAccessReview", meta("") + lfield(2, sar_spec)))
    assert sar["spec"] == {"resourceAttributes": {"verb": "get", "resource": "pods"}, "user": "bob",
                           "groups": ["devs"], "extra": {"scopes": ["a"]}}
