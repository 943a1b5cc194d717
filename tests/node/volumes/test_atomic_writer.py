import os

from nanokube.node.volumes.atomic_writer import DATA, write_atomic


def read(target, name):
    with open(os.path.join(target, name), "rb") as f:
        return f.read()


def test_files_are_symlinks_through_data_and_swap_together(tmp_path):
    t = str(tmp_path / "vol")
    assert write_atomic(t, {"tls.crt": b"c1", "tls.key": b"k1", "sub/x": b"x"}, 0o600)
    first = os.readlink(os.path.join(t, DATA))
    assert os.readlink(os.path.join(t, "tls.crt")) == os.path.join(DATA, "tls.crt")
    assert read(t, "tls.key") == b"k1" and read(t, "sub/x") == b"x"
    assert oct(os.stat(os.path.join(t, "tls.key")).st_mode & 0o777) == oct(0o600)

    assert not write_atomic(t, {"tls.crt": b"c1", "tls.key": b"k1", "sub/x": b"x"}, 0o600)
    assert os.readlink(os.path.join(t, DATA)) == first

    assert write_atomic(t, {"tls.crt": b"c2", "tls.key": b"k2"})
    assert os.readlink(os.path.join(t, DATA)) != first
    assert not os.path.exists(os.path.join(t, first)), "the old generation is removed"
    assert read(t, "tls.crt") == b"c2" and not os.path.lexists(os.path.join(t, "sub"))
