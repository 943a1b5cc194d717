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
