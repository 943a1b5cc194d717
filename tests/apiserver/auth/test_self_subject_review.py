"""authentication.k8s.io/v1 SelfSubjectReview (`kubectl auth whoami`): the
requester's own user info, stamped with the time of the request."""

import asyncio

from nanokube.apiserver.auth.reviews import Reviews
from nanokube.clock import Clock
from nanokube.machinery.user import User
from nanokube.registry.base import all_resources

RES = next(r for r in all_resources() if r.plural == "selfsubjectreviews")


class FixedClock(Clock):
    def now(self) -> float:
        return 1_800_000_000.0


def test_answers_with_the_requesters_user_info():
    reviews = Reviews(lambda *a: None, lambda *a: ([], []), None, clock=FixedClock())
    user = User("alice", ("devs", "system:authenticated"), "uid-a", {"scopes": ["x"]})
    got = asyncio.run(reviews(RES, {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}, user))
    assert got == {"kind": "SelfSubjectReview", "apiVersion": "authentication.k8s.io/v1",
                   "metadata": {"creationTimestamp": "2027-01-15T08:00:00Z"},
                   "status": {"userInfo": {"username": "alice", "uid": "uid-a",
                                           "groups": ["devs", "system:authenticated"], "extra": {"scopes": ["x"]}}}}
    admin = asyncio.run(reviews(RES, {}, User("kubernetes-admin", ("system:masters", "system:authenticated"))))
    assert admin["status"] == {"userInfo": {"username": "kubernetes-admin",
                                            "groups": ["system:masters", "system:authenticated"]}}
