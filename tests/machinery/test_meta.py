import uuid

from nanokube.machinery.meta import new_uid


def test_new_uid_is_a_random_version_4_uuid_in_its_usual_text():
    uids = {new_uid() for _ in range(200)}
    assert len(uids) == 200
    for text in uids:
        u = uuid.UUID(text)
        assert str(u) == text and u.version == 4 and u.variant == uuid.RFC_4122


def test_new_uid_refills_its_pool_and_a_forked_child_does_not_repeat_its_parent():
    import os

    first = {new_uid() for _ in range(1000)}  # several 4 KiB refills
    assert len(first) == 1000
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.write(w, new_uid().encode())
        os._exit(0)
    os.close(w)
    child = os.read(r, 64).decode()
    os.waitpid(pid, 0)
    os.close(r)
    assert child != new_uid() and uuid.UUID(child).version == 4


def test_new_uid_leaves_only_the_version_and_variant_bits_fixed():
    """Every hex digit but the version's is random (each takes many values over a few refills), the
    variant digit all four of its values, and the dashes sit where UUID text has them."""
    uids = [new_uid() for _ in range(2048)]
    for at in range(36):
        seen = {u[at] for u in uids}
        if at in (8, 13, 18, 23):
            assert seen == {"-"}
        elif at == 14:
            assert seen == {"4"}
        elif at == 19:
            assert seen == set("89ab")
        else:
            assert len(seen) == 16, (at, seen)
