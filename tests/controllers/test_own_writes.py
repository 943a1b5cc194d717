"""OwnWrites: what a controller wrote stays ahead of its informer only until the informer moves on."""

from nanokube.controllers.own_writes import OwnWrites


def _obj(rv: int, replicas: int) -> dict:
    return {"metadata": {"name": "web", "resourceVersion": str(rv)}, "status": {"replicas": replicas}}


def test_the_informer_catching_up_drops_the_writes_behind_it_and_keeps_those_ahead():
    own = OwnWrites()
    own.wrote("ns/web", _obj(1, 0), _obj(2, 1))
    own.wrote("ns/web", _obj(2, 1), _obj(3, 2))
    assert own.latest("ns/web", _obj(1, 0)) == _obj(3, 2)
    own.seen("ns/web", _obj(2, 1))
    assert own.latest("ns/web", _obj(2, 1)) == _obj(3, 2), "the second write is still ahead of the informer"
    own.seen("ns/web", _obj(3, 2))
    assert own._after == {}


def test_a_relist_that_skips_versions_leaves_nothing_behind():
    """The informer goes from rv 1 straight to 7 (a relist after a cut watch): the writes made
    from 1 and 2 are history, whoever wrote 7, and no entry may stay for ever."""
    own = OwnWrites()
    own.wrote("ns/web", _obj(1, 0), _obj(2, 1))
    own.wrote("ns/web", _obj(2, 1), _obj(3, 2))
    own.seen("ns/web", _obj(7, 5))
    assert own._after == {}
    assert own.latest("ns/web", _obj(7, 5)) == _obj(7, 5)
    assert own.latest("ns/web", _obj(1, 0)) == _obj(1, 0), "a stale copy is not patched from forgotten writes"


def test_a_write_that_changed_nothing_is_not_ahead_of_anything():
    """Two controller-managers (leader election off) write one ReplicaSet's status: the second
    write of the same status is a no-op that returns the resourceVersion it was sent with. That
    entry pointed at itself and `latest` looped for ever, the controller-manager's loop with it
    (its /metrics and /healthz unanswered, SIGTERM unheard)."""
    own = OwnWrites()
    own.wrote("ns/web", _obj(4, 2), _obj(4, 2))
    assert own.latest("ns/web", _obj(4, 2)) == _obj(4, 2)
    assert own._after == {}
