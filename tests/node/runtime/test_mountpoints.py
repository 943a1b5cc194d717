"""Mount points the process runtime creates are removed once no pod uses
them, including a new parent that two mount paths share."""

from nanokube.node.runtime.process import ProcessRuntime


def test_shared_new_parent_is_removed_with_the_last_target(tmp_path):
    rt = ProcessRuntime(str(tmp_path / "state"), "mtest")
    base = tmp_path / "run" / "app"
    rt.claim_mountpoint(str(base / "identity"), False)
    rt.claim_mountpoint(str(base / "scripts"), False)
    rt.claim_mountpoint(str(base / "scripts"), False)
    assert (base / "identity").is_dir() and (base / "scripts").is_dir()

    rt.release_mountpoint(str(base / "identity"))
    assert not (base / "identity").exists() and base.is_dir()
    rt.release_mountpoint(str(base / "scripts"))
    assert (base / "scripts").is_dir(), "still used by a second pod"
    rt.release_mountpoint(str(base / "scripts"))
    assert not (tmp_path / "run").exists(), "every directory the runtime made is gone"
    assert tmp_path.exists()
