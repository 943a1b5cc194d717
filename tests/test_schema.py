"""The release-1.37 definitions, read from kubernetes-validate's data without importing its package."""

import subprocess
import sys

from nanokube import schema


def test_the_builtin_definitions_hold_every_core_kind():
    defs = schema.builtin_definitions()
    assert defs["io.k8s.api.core.v1.Pod"]["x-kubernetes-group-version-kind"] == [
        {"group": "", "kind": "Pod", "version": "v1"}]
    assert schema.definition_name("resource.k8s.io", "v1", "ResourceClaim") == "io.k8s.api.resource.v1.ResourceClaim"


def test_reading_them_imports_neither_kubernetes_validate_nor_jsonschema():
    """The package's __init__ imports jsonschema (~60 ms), which a server start would pay for nothing."""
    code = ("import sys, nanokube.apiserver.app, nanokube.schema as s; s.builtin_definitions(); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('kubernetes_validate', 'jsonschema')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out == "[]\n"
