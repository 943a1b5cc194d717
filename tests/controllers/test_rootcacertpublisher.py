"""The root CA publisher: kube-root-ca.crt, holding the API server's CA and upstream's description,
in every namespace; made again when deleted, put back when edited; other ConfigMaps untouched."""

import pytest

from nanokube.controllers.manager import ControllerManager
from nanokube.controllers.rootcacertpublisher import DESCRIPTION, RootCACertPublisher
from nanokube.machinery.errors import APIError
from tests.controllers import eventually, make_stack

CA = b"-----BEGIN CERTIFICATE-----\nMIIBtest\n-----END CERTIFICATE-----\n"


@pytest.fixture
async def env():
    s = await make_stack()
    ctrl = RootCACertPublisher(s.client, root_ca=CA)
    await ctrl.start()
    yield s.client
    await ctrl.stop()
    await s.close()


def published(cms, ns, check=lambda cm: True):
    async def present():
        try:
            cm = await cms.get("kube-root-ca.crt", ns)
        except APIError:
            return None
        return cm if check(cm) else None
    return present


async def test_every_namespace_gets_the_ca_with_its_description(env):
    cms = env.resource("", "v1", "configmaps")
    await env.resource("", "v1", "namespaces").create({"metadata": {"name": "team"}})
    for ns in ("default", "team"):
        cm = await eventually(published(cms, ns))
        assert cm["data"] == {"ca.crt": CA.decode()}
        assert cm["metadata"]["annotations"] == {"kubernetes.io/description": DESCRIPTION}
        assert DESCRIPTION.startswith("Contains a CA bundle that can be used to verify the kube-apiserver")


async def test_deleted_is_made_again_and_edits_are_put_back(env):
    cms = env.resource("", "v1", "configmaps")
    first = await eventually(published(cms, "default"))
    await cms.delete("kube-root-ca.crt", "default")
    again = await eventually(published(cms, "default", lambda cm: cm["metadata"]["uid"] != first["metadata"]["uid"]))
    assert again["data"] == {"ca.crt": CA.decode()}

    edited = {**again, "data": {"ca.crt": "forged", "extra": "x"},
              "metadata": {**again["metadata"], "annotations": {"team": "a"}}}
    await cms.update(edited)
    fixed = await eventually(published(cms, "default", lambda cm: cm["data"] == {"ca.crt": CA.decode()}))
    assert fixed["metadata"]["annotations"] == {"team": "a", "kubernetes.io/description": DESCRIPTION}

    stripped = {**fixed, "metadata": {**fixed["metadata"], "annotations": {"team": "a"}}}
    await cms.update(stripped)
    described = await eventually(published(
        cms, "default", lambda cm: (cm["metadata"].get("annotations") or {}).get("kubernetes.io/description")))
    assert described["data"] == {"ca.crt": CA.decode()}


async def test_other_config_maps_are_left_alone(env):
    cms = env.resource("", "v1", "configmaps")
    await eventually(published(cms, "default"))
    await cms.create({"metadata": {"name": "settings", "namespace": "default"}, "data": {"ca.crt": "mine"}})
    await cms.delete("kube-root-ca.crt", "default")
    await eventually(published(cms, "default"))
    assert (await cms.get("settings", "default"))["data"] == {"ca.crt": "mine"}


async def test_in_process_manager_publishes_the_cluster_ca(tmp_path):
    """`nanokube up`'s manager publishes DIR/pki/ca.crt, the CA the API server's certificate is signed by."""
    from nanokube.pki.ca import ensure_pki
    pki = ensure_pki(str(tmp_path))
    s = await make_stack()
    manager = ControllerManager.in_process(lambda user, manager: s.client, data_dir=str(tmp_path),
                                           controllers="root-ca-cert-publisher")
    assert [c.name for c in manager.controllers] == ["root-ca-certificate-publisher-controller"]
    await manager.start()
    try:
        cm = await eventually(published(s.client.resource("", "v1", "configmaps"), "default"))
        with open(pki.ca_path, "rb") as f:
            assert cm["data"] == {"ca.crt": f.read().decode()}
    finally:
        await manager.stop()
        await s.close()
