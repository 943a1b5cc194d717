import uuid

from nanokube.machinery.meta import new_uid


def test_new_uid_is_a_random_version_4_uuid_in_its_usual_text():
    uids = {new_uid() for _ in range(200)}
    assert len(uids) == 200
    for text in uids:
        u = uuid.UUID(text)
        assert str(u) == text and u.version == 4 and u.variant == uuid.RFC_4122
