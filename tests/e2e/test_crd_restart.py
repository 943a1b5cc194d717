"""CRDs and their objects survive a restart on a durable store: the custom resource is
served (with its schema's defaults) from the first request after `nanokube up` starts
again, without waiting for any controller."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest

from .conftest import STORE, start_cluster
from .test_crd_lifecycle import GROUP, crd, isvc

pytestmark = pytest.mark.store


@pytest.mark.skipif(STORE == "memory", reason="the memory store is not durable by design")
def test_custom_resources_are_served_right_after_restart(store_url):
    d = Path(tempfile.mkdtemp(prefix="nanokube-crd-restart-"))
    c = start_cluster(d, store_url)
    try:
        c.kubectl("apply", "--server-side", "-f", "-", input=json.dumps(crd()))
        c.kubectl("wait", "--for", "condition=Established", f"crd/inferenceservices.{GROUP}", "--timeout=50s")
        c.kubectl("apply", "-f", "-", input=json.dumps(isvc("kept")))
        rv = c.kubectl_json("get", "isvc", "kept")["metadata"]["resourceVersion"]
        c.stop()
        c = start_cluster(d, store_url)
        got = c.kubectl_json("get", "isvc", "kept")
        assert got["metadata"]["resourceVersion"] == rv and got["spec"]["model"] == "llama"
        assert "isvc" in c.kubectl("api-resources", "--api-group", GROUP).stdout
    finally:
        c.stop()
        shutil.rmtree(d, ignore_errors=True)
