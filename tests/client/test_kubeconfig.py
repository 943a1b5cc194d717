"""Finding and merging kubeconfig files as kubectl does."""

from __future__ import annotations

import os

import pytest
import yaml

from nanokube.client import kubeconfig


def _write(path, contexts, current="", clusters=None, users=None):
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": current,
        "clusters": [{"name": n, "cluster": {"server": s}} for n, s in (clusters or {}).items()],
        "users": [{"name": n, "user": {"token": t}} for n, t in (users or {}).items()],
        "contexts": [{"name": n, "context": c} for n, c in contexts.items()],
    }))
    return str(path)


def test_explicit_file_wins_over_the_environment(tmp_path):
    assert kubeconfig.paths("/x/config", {"KUBECONFIG": "/a:/b"}) == ["/x/config"]
    assert kubeconfig.paths(None, {"KUBECONFIG": f"/a{os.pathsep}{os.pathsep}/b"}) == ["/a", "/b"]


def test_without_flag_or_environment_the_up_default_then_home(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert kubeconfig.paths(None, {}) == [str(tmp_path / "home" / ".kube" / "config")]
    (tmp_path / ".nanokube").mkdir()
    (tmp_path / ".nanokube" / "kubeconfig").write_text("{}")
    assert kubeconfig.paths(None, {}) == [os.path.join(".nanokube", "kubeconfig")]


def test_merge_first_file_wins_and_context_picks(tmp_path):
    a = _write(tmp_path / "a", {"dev": {"cluster": "c1", "user": "u1", "namespace": "team"}}, current="dev",
               clusters={"c1": "http://one:1"}, users={"u1": "tok-a"})
    b = _write(tmp_path / "b", {"dev": {"cluster": "c2", "user": "u2"}, "prod": {"cluster": "c2", "user": "u2"}},
               current="prod", clusters={"c1": "http://shadowed:9", "c2": "http://two:2"}, users={"u2": "tok-b"})
    env = {"KUBECONFIG": f"{a}{os.pathsep}{b}"}
    creds = kubeconfig.load(env=env)
    assert (creds.server, creds.token, creds.namespace) == ("http://one:1", "tok-a", "team")
    creds = kubeconfig.load(context="prod", env=env)
    assert (creds.server, creds.token, creds.namespace) == ("http://two:2", "tok-b", "default")


def test_missing_files_in_a_list_are_skipped_but_not_an_explicit_one(tmp_path):
    a = _write(tmp_path / "a", {"dev": {"cluster": "c", "user": "u"}}, current="dev", clusters={"c": "http://h:1"})
    assert kubeconfig.load(env={"KUBECONFIG": f"{tmp_path / 'gone'}{os.pathsep}{a}"}).server == "http://h:1"
    with pytest.raises(kubeconfig.KubeconfigError, match=f"kubeconfig {tmp_path / 'gone'} does not exist"):
        kubeconfig.load(str(tmp_path / "gone"))


def test_errors_name_the_files_read(tmp_path):
    a = _write(tmp_path / "a", {"dev": {"cluster": "nowhere", "user": "u"}}, current="dev")
    with pytest.raises(kubeconfig.KubeconfigError, match=f'{a}: context "prod" not found'):
        kubeconfig.load(a, "prod")
    with pytest.raises(kubeconfig.KubeconfigError, match=f'{a}: cluster "nowhere" of context "dev" not found'):
        kubeconfig.load(a)



@pytest.mark.parametrize("text, said", [
    # (kubectl's words: clientcmd.Load's decoder, under `error loading config file "PATH": `)
    ("- a list\n", "couldn't get version/kind; json parse error: json: cannot unmarshal array into Go value of type "
                   "struct { APIVersion string"),
    ("clusters: 5\n", "json: cannot unmarshal number into Go struct field Config.clusters of type []v1.NamedCluster"),
    ("users:\n- name: u\n  user: {as-groups: admins}\n",
     "json: cannot unmarshal string into Go struct field AuthInfo.users.user.as-groups of type []string"),
    ("apiVersion: v1\nkind: KubeConfig\n",
     'no kind "KubeConfig" is registered for version "v1" in scheme "k8s.io/client-go/tools/clientcmd/api/latest/latest.go:50"'),
    ("clusters: [\n", "error converting YAML to JSON: yaml: line 1: did not find expected node content"),
])
def test_a_file_that_does_not_decode_is_refused_in_kubectls_words(tmp_path, text, said):
    (tmp_path / "bad").write_text(text)
    with pytest.raises(kubeconfig.KubeconfigError) as e:
        kubeconfig.load(str(tmp_path / "bad"))
    assert str(e.value).startswith(f'error loading config file "{tmp_path / "bad"}": {said}'), str(e.value)


def test_a_file_without_version_or_kind_or_with_unknown_fields_is_read_leniently(tmp_path):
    """clientcmd decodes a kubeconfig as v1 Config by default, and not strictly."""
    (tmp_path / "c").write_text("current-context: x\nclusters: [{name: c, cluster: {server: 'http://h:1', colour: red}}]\n"
                                "contexts: [{name: x, context: {cluster: c, user: u}}]\nusers: [{name: u}]\nfoo: 1\n")
    assert kubeconfig.load(str(tmp_path / "c")).server == "http://h:1"


def test_relative_certificate_paths_resolve_against_their_file(tmp_path):
    d = tmp_path / "conf"
    d.mkdir()
    (d / "config").write_text(yaml.safe_dump({
        "current-context": "x", "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "clusters": [{"name": "c", "cluster": {"server": "https://h:1", "certificate-authority": "missing-ca.crt"}}],
        "users": [{"name": "u", "user": {}}]}))
    with pytest.raises(kubeconfig.KubeconfigError, match=f"{d / 'config'}: cannot read certificate-authority: .*{d / 'missing-ca.crt'}"):
        kubeconfig.load(str(d / "config"))


async def test_tls_server_name_is_the_name_the_server_certificate_is_checked_against(tmp_path):
    """kubectl's tls-server-name: an API server dialled at an address its certificate does not name
    (here 127.0.0.2; `up` names 127.0.0.1, its advertised address and the kubernetes Service's)."""
    from nanokube.apiserver.app import APIServer
    from nanokube.client.http import HTTPClient
    from nanokube.pki.ca import ensure_pki
    from nanokube.pki.kubeconfig import write_kubeconfig
    from nanokube.store.memory import MemoryStore

    pki = ensure_pki(str(tmp_path))
    server = APIServer(MemoryStore(), pki, host="127.0.0.2", port=0)
    await server.start()
    try:
        path = tmp_path / "kubeconfig"
        write_kubeconfig(str(path), server.url, pki)
        cfg = yaml.safe_load(path.read_text())

        async def namespaces(server_name: str | None) -> str:
            if server_name is not None:
                cfg["clusters"][0]["cluster"]["tls-server-name"] = server_name
            path.write_text(yaml.safe_dump(cfg))
            c = HTTPClient.from_kubeconfig(str(path))
            try:
                await c.start()
                return (await c.resource("", "v1", "namespaces").get("default"))["metadata"]["name"]
            except Exception as e:  # the TLS handshake's refusal, however the client wraps it
                return "refused" if "certificate verify failed" in str(e) else repr(e)
            finally:
                await c.close()

        assert await namespaces(None) == "refused"
        assert await namespaces("kubernetes.default.svc") == "default"
        assert await namespaces("not-named.example") == "refused"
    finally:
        await server.stop()
