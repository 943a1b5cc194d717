"""Mount points the process runtime creates are removed once no pod uses
them, including a new parent that two mount paths share."""

import shutil

from nanokube.node.runtime.process import ProcessRuntime


def test_shared_new_parent_is_removed_with_the_last_target(tmp_path):
    rt = ProcessRuntime(str(tmp_path / "state"), "mtest", mountpoints=str(tmp_path / "mountpoints.json"))
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


def test_a_target_another_runtime_still_uses_stays(tmp_path):
    """Two clusters on one host share its file system: the one whose last pod using
    /var/run/secrets/... goes must leave the target to the other's running pods (whose
    execs and restarts bind it again); the last user of all removes it."""
    record = str(tmp_path / "mountpoints.json")
    first = ProcessRuntime(str(tmp_path / "one"), "mone", mountpoints=record)
    second = ProcessRuntime(str(tmp_path / "two"), "mtwo", mountpoints=record)
    target = tmp_path / "run" / "secrets" / "serviceaccount"
    first.claim_mountpoint(str(target), False)
    second.claim_mountpoint(str(target), False)

    first.release_mountpoint(str(target))
    assert target.is_dir(), "the second runtime's pod still binds it"
    first.close()
    assert target.is_dir()
    second.release_mountpoint(str(target))
    assert not (tmp_path / "run").exists(), "what the first runtime made goes with the last user"


def test_targets_and_record_removed_under_running_pods_are_made_again(tmp_path):
    """Another process removed a target and the host-wide record while a pod uses it: made
    again before the pod's next command binds it, and removed with its last use all the same."""
    record = tmp_path / "mountpoints.json"
    rt = ProcessRuntime(str(tmp_path / "state"), "mtest", mountpoints=str(record))
    target, hosts = tmp_path / "run" / "secrets" / "serviceaccount", tmp_path / "etc" / "hosts"
    rt.claim_mountpoint(str(target), False)
    rt.claim_mountpoint(str(hosts), True)
    shutil.rmtree(tmp_path / "run")
    shutil.rmtree(tmp_path / "etc")
    record.unlink()

    rt.restore_mountpoints([(str(target), False), (str(hosts), True)])
    assert target.is_dir() and hosts.is_file()
    rt.release_mountpoint(str(target))
    rt.release_mountpoint(str(hosts))
    assert not (tmp_path / "run").exists() and not (tmp_path / "etc").exists()
