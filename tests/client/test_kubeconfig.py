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
    (tmp_path / "bad").write_text("- a list\n")
    with pytest.raises(kubeconfig.KubeconfigError, match="is not a kubeconfig"):
        kubeconfig.load(str(tmp_path / "bad"))


def test_relative_certificate_paths_resolve_against_their_file(tmp_path):
    d = tmp_path / "conf"
    d.mkdir()
    (d / "config").write_text(yaml.safe_dump({
        "current-context": "x", "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "clusters": [{"name": "c", "cluster": {"server": "https://h:1", "certificate-authority": "missing-ca.crt"}}],
        "users": [{"name": "u", "user": {}}]}))
    with pytest.raises(kubeconfig.KubeconfigError, match=f"{d / 'config'}: cannot read certificate-authority: .*{d / 'missing-ca.crt'}"):
        kubeconfig.load(str(d / "config"))
