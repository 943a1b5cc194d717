"""mTLS between pods end to end, in process mode, with the demo manifests of
examples/mtls: each pod's key, leaf certificate and trust bundle come only
from its projected volume (the built-in signer and its ClusterTrustBundle).
A server pod requires and verifies client certificates, a client pod on
another node verifies the server in turn, and both name the peer's SPIFFE
ID; a third pod, with a self-signed certificate and then with none, is
refused and the server logs each refusal.

The manifests' host paths (/var/run/mtls-*: the process runtime mounts the
volumes there on the host) are moved under a directory of the module's own,
so two suites running it at once do not share them.

Skipped (loudly) only without root, `ip` or `nft`, as the process runtime
needs them; `nanokube up` removes every namespace and process on exit and
the fixture checks that nothing is left.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
import yaml

from nanokube.node.runtime.netns import PREFIX, cluster_tag, list_netns
from tests.e2e.conftest import start_cluster, wait_for
from tests.e2e.manifests import to_yaml

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "mtls"
CLUSTER_FILE = "examples/clusters/process-3cpu.yaml"
NS = "mtls-demo"
#: where the manifests mount the pods' identity and scripts, moved to the `mounts` fixture's directory
HOST_PATHS = "/var/run/mtls-"
SERVER_ID = f"spiffe://cluster.local/ns/{NS}/sa/mtls-server"
CLIENT_ID = f"spiffe://cluster.local/ns/{NS}/sa/mtls-client"

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("nft"),
                       reason="SKIPPED LOUDLY: the process runtime needs root, ip and nft (run scripts/nftables.sh)"),
    pytest.mark.timeout(240),
]


@pytest.fixture(scope="module")
def mounts():
    """This module's directory for the pods' host paths."""
    d = Path(tempfile.mkdtemp(prefix="nanokube-e2e-mtls-mounts-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def mtls_cluster(store_url, mounts):
    d = Path(tempfile.mkdtemp(prefix="nanokube-e2e-mtls-"))
    c = start_cluster(d, store_url, ("--cluster", CLUSTER_FILE, "--runtime", "process"))
    prefix = f"{PREFIX}{cluster_tag(str(d))}-"
    try:
        yield c
    finally:
        c.stop()
        leftovers = [n for n in list_netns() if n.startswith(prefix)]
        leftovers += [str(m) for m in mounts.iterdir()]
        shutil.rmtree(d, ignore_errors=True)
        assert leftovers == [], f"namespaces or mount points left after shutdown: {leftovers}"


def manifest(name: str, mounts: Path) -> str:
    """An example's text with its host paths under `mounts`."""
    return (EXAMPLES / name).read_text().replace(HOST_PATHS, f"{mounts}/mtls-")


def pod(c, name: str) -> dict:
    return c.kubectl_json("-n", NS, "get", "pod", name)


def logs(c, name: str) -> list[str]:
    return c.kubectl("-n", NS, "logs", name).stdout.splitlines()


def pod_when(c, name: str, ready) -> dict:
    """The pod once `ready(its status)` holds."""
    def check():
        p = pod(c, name)
        return p if ready(p["status"]) else None
    return wait_for(check, 120, f"{name} in the awaited state")


def finished(c, name: str) -> dict:
    p = pod_when(c, name, lambda st: st.get("phase") in ("Succeeded", "Failed"))
    assert p["status"]["phase"] == "Succeeded", (p["status"], logs(c, name))
    return p


@pytest.fixture(scope="module")
def demo(mtls_cluster, mounts):
    """The demo run once: server up, then the client and the intruder, each
    on a node of its own, pointed at the server pod's IP."""
    c = mtls_cluster
    c.kubectl("apply", "-f", "-", input=manifest("server.yaml", mounts))
    server = pod_when(c, "mtls-server", lambda st: st.get("phase") == "Running" and st.get("podIP"))
    wait_for(lambda: "serving on :8443" in logs(c, "mtls-server"), 30, "mtls-server listening")
    callers = list(yaml.safe_load_all(manifest("clients.yaml", mounts)))
    for p in callers:
        args = p["spec"]["containers"][0]["args"]
        args[args.index("SERVER_IP")] = server["status"]["podIP"]
    c.kubectl("apply", "-f", "-", input=to_yaml(callers))
    client, intruder = finished(c, "mtls-client"), finished(c, "mtls-intruder")
    return {"server": server, "client": client, "intruder": intruder,
            "requests": c.kubectl_json("-n", NS, "get", "podcertificaterequests")["items"],
            "logs": {name: logs(c, name) for name in ("mtls-server", "mtls-client", "mtls-intruder")}}


def test_identities_come_from_the_built_in_signer_and_the_intruder_has_none(demo):
    assert len({demo[p]["spec"]["nodeName"] for p in ("server", "client", "intruder")}) == 3
    issued = {(r["spec"]["podName"], r["spec"]["serviceAccountName"], r["spec"]["signerName"])
              for r in demo["requests"]
              if any(c["type"] == "Issued" and c["status"] == "True" for c in r["status"].get("conditions") or [])}
    assert issued == {("mtls-server", "mtls-server", "nanokube.io/pod-identity"),
                      ("mtls-client", "mtls-client", "nanokube.io/pod-identity")}


def test_client_verifies_the_server_and_is_seen_by_its_spiffe_id(demo):
    assert demo["logs"]["mtls-client"] == [f"SERVER {SERVER_ID}", f"ANSWER hello {CLIENT_ID}"]


def test_server_accepts_the_client_once_and_names_it(demo):
    accepted = [line.split() for line in demo["logs"]["mtls-server"] if line.startswith("ACCEPTED")]
    assert accepted == [["ACCEPTED", demo["client"]["status"]["podIP"], CLIENT_ID]]


def test_intruder_is_refused_with_a_self_signed_certificate_and_with_none(demo):
    out = demo["logs"]["mtls-intruder"]
    assert [line.split()[:2] for line in out] == [["REFUSED", "self-signed"], ["REFUSED", "no-certificate"]], out
    refused = [line for line in demo["logs"]["mtls-server"] if line.startswith("REFUSED")]
    ip = demo["intruder"]["status"]["podIP"]
    assert len(refused) == 2 and all(line.split()[1] == ip for line in refused), refused
    assert "CERTIFICATE_VERIFY_FAILED" in refused[0], refused
    assert "PEER_DID_NOT_RETURN_A_CERTIFICATE" in refused[1], refused
